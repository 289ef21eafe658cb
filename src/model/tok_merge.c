/* The merge machinery both tokenizers share (tokenizer_internal.h): the
 * symbols of one word in a doubly linked list, candidate pairs in a binary
 * heap, stale pairs discarded when popped, as llama.cpp and SentencePiece
 * do: the order of merges (best score / lowest rank first, then leftmost)
 * decides the result, so it must match theirs exactly. */
#include "model/tokenizer_internal.h"

#include <inttypes.h>
#include <string.h>

/* ---- growable id list ------------------------------------------------------------ */

pw_status pw_tok_push_id(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = (size_t)l->cap;
        int32_t *ids = pw_host_grow(l->ids, sizeof *ids, &cap, (size_t)l->n + 1, INT64_MAX);
        if (!ids) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for %" PRId64 " ids", l->n + 1);
        l->ids = ids;
        l->cap = (int64_t)cap;
    }
    l->ids[l->n++] = id;
    return PW_OK;
}

/* ---- merge machinery shared by both algorithms ----------------------------------- */

void pw_tok_merge_state_free(merge_state *m) {
    pw_host_free(m->syms);
    pw_host_free(m->heap);
}

static bool bigram_before(const bigram *a, const bigram *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

pw_status pw_tok_heap_push(merge_state *m, bigram b) {
    if (m->n_heap == m->cap_heap) {
        size_t cap = (size_t)m->cap_heap;
        bigram *h = pw_host_grow(m->heap, sizeof *h, &cap, (size_t)m->n_heap + 1, INT64_MAX);
        if (!h) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for merge candidates");
        m->heap = h;
        m->cap_heap = (int64_t)cap;
    }
    int64_t i = m->n_heap++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &m->heap[parent])) break;
        m->heap[i] = m->heap[parent];
        i = parent;
    }
    m->heap[i] = b;
    return PW_OK;
}

static bigram heap_pop(merge_state *m) {
    bigram top = m->heap[0];
    bigram last = m->heap[--m->n_heap];
    int64_t i = 0;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= m->n_heap) break;
        if (child + 1 < m->n_heap && bigram_before(&m->heap[child + 1], &m->heap[child])) child++;
        if (!bigram_before(&m->heap[child], &last)) break;
        m->heap[i] = m->heap[child];
        i = child;
    }
    if (m->n_heap > 0) m->heap[i] = last;
    return top;
}

/* Splits buf[0, n) into one symbol per UTF-8 character. */
pw_status pw_tok_init_symbols(merge_state *m, const pw_tokenizer *t, const char *buf, size_t n,
                              bool with_ids) {
    m->n_syms = 0;
    m->n_heap = 0;
    if (n > (size_t)INT32_MAX) return pw_error(PW_ERR_INVALID_ARG, "tokenizer: text too long");
    if ((int64_t)n > m->cap_syms) {
        size_t cap = (size_t)m->cap_syms;
        symbol *s = pw_host_grow(m->syms, sizeof *s, &cap, n, INT32_MAX);
        if (!s) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for %zu symbols", n);
        m->syms = s;
        m->cap_syms = (int32_t)cap;
    }
    for (size_t pos = 0; pos < n;) {
        size_t len = pw_tok_utf8_len((const uint8_t *)buf + pos, n - pos);
        symbol *s = &m->syms[m->n_syms];
        s->prev = m->n_syms - 1;
        s->next = m->n_syms + 1;
        s->start = (uint32_t)pos;
        s->len = (uint32_t)len;
        s->id = with_ids ? vocab_lookup(t, buf + pos, len) : -1;
        m->n_syms++;
        pos += len;
    }
    if (m->n_syms > 0) m->syms[m->n_syms - 1].next = -1;
    return PW_OK;
}

/* Runs the merges queued in m until none applies. */
pw_status pw_tok_run_merges(merge_state *m, const pw_tokenizer *t, const char *buf, bool spm) {
    while (m->n_heap > 0) {
        bigram b = heap_pop(m);
        symbol *l = &m->syms[b.left], *r = &m->syms[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.size) continue; /* stale */
        l->len += r->len;
        l->id = b.result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) m->syms[r->next].prev = b.left;
        if (spm) {
            PW_TRY(pw_tok_spm_try_bigram(m, t, buf, l->prev, b.left));
            PW_TRY(pw_tok_spm_try_bigram(m, t, buf, b.left, l->next));
        } else {
            PW_TRY(pw_tok_bpe_try_bigram(m, t, l->prev, b.left));
            PW_TRY(pw_tok_bpe_try_bigram(m, t, b.left, l->next));
        }
    }
    return PW_OK;
}

pw_status pw_tok_push_unknown(const pw_tokenizer *t, id_list *out, const char *what, uint32_t v) {
    if (t->unk < 0)
        return pw_error(PW_ERR_NOT_FOUND, "tokenizer: no token for %s%02" PRIX32
                        " and the vocabulary has no unknown token", what, v);
    return pw_tok_push_id(out, t->unk);
}
