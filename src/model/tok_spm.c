/* SentencePiece BPE ("llama" vocabularies, tokenizer.h): spaces escaped as
 * U+2581, adjacent pieces merged by highest vocabulary score, <0xNN> byte
 * tokens for characters with no piece. */
#include "model/tokenizer_internal.h"

#include <string.h>

pw_status pw_tok_spm_try_bigram(merge_state *m, const pw_tokenizer *t, const char *buf,
                                int32_t left, int32_t right) {
    if (left < 0 || right < 0) return PW_OK;
    const symbol *l = &m->syms[left], *r = &m->syms[right];
    uint32_t size = l->len + r->len;
    int32_t id = vocab_lookup(t, buf + l->start, size);
    if (id < 0) return PW_OK;
    bigram b = {left, right, t->scores[id], size, id};
    return pw_tok_heap_push(m, b);
}

/* Tokenizes one run of plain text: optional "▁" prefix, spaces escaped. */
pw_status pw_tok_spm_encode_text(const pw_tokenizer *t, merge_state *m, const char *text,
                                 size_t len, bool prefix_space, id_list *out) {
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t cap = len + (spaces + 1) * (SPM_SPACE_LEN - 1) + SPM_SPACE_LEN + 1;
    char *buf = pw_host_alloc(cap);
    if (!buf) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for %zu bytes of text", len);
    size_t n = 0;
    if (prefix_space) {
        memcpy(buf, SPM_SPACE, SPM_SPACE_LEN);
        n = SPM_SPACE_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, SPM_SPACE, SPM_SPACE_LEN);
            n += SPM_SPACE_LEN;
        } else {
            buf[n++] = text[i];
        }
    }
    pw_status s = pw_tok_init_symbols(m, t, buf, n, false);
    for (int32_t i = 1; s == PW_OK && i < m->n_syms; i++) s = pw_tok_spm_try_bigram(m, t, buf, i - 1, i);
    if (s == PW_OK) s = pw_tok_run_merges(m, t, buf, true);
    for (int32_t i = m->n_syms > 0 ? 0 : -1; s == PW_OK && i >= 0; i = m->syms[i].next) {
        const symbol *sym = &m->syms[i];
        int32_t id = vocab_lookup(t, buf + sym->start, sym->len);
        if (id >= 0) {
            s = pw_tok_push_id(out, id);
            continue;
        }
        for (uint32_t k = 0; s == PW_OK && k < sym->len; k++) {
            uint8_t byte = (uint8_t)buf[sym->start + k];
            s = t->byte_token[byte] >= 0 ? pw_tok_push_id(out, t->byte_token[byte])
                                         : pw_tok_push_unknown(t, out, "byte 0x", byte);
        }
    }
    pw_host_free(buf);
    return s;
}
