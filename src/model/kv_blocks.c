/* The KV block allocator: reference-counted blocks, a list of the blocks
 * nobody holds (uncached at its head, cached ones behind them in the order
 * they were last released), and per slot a row of the block tables. A
 * request reserves blocks for its whole budget when admitted, so a running
 * request never waits for memory; with the prefix cache, its prompt's
 * leading blocks may be ones the cache already holds. */
#include "model/kv_blocks.h"

#include "piecewise/extend.h" /* PW_FNV1A_BASIS */

#include <inttypes.h>
#include <string.h>

pw_status pw_kv_blocks_init(pw_kv_blocks *kv, int64_t max_seqs, int64_t block_size,
                            int64_t max_model_len) {
    memset(kv, 0, sizeof *kv);
    kv->block_size = block_size;
    kv->max_model_len = max_model_len;
    kv->blocks_per_seq = (max_model_len + block_size - 1) / block_size;
    kv->max_seqs = max_seqs;
    kv->head = kv->tail = -1;
    size_t S = (size_t)max_seqs;
    kv->held = pw_host_calloc(S, sizeof *kv->held);
    kv->tables = pw_host_calloc(S * (size_t)kv->blocks_per_seq, sizeof *kv->tables);
    kv->chained = pw_host_calloc(S, sizeof *kv->chained);
    kv->computed = pw_host_calloc(S, sizeof *kv->computed);
    kv->chain_key = pw_host_calloc(S, sizeof *kv->chain_key);
    kv->copies = pw_host_calloc(S, sizeof *kv->copies);
    if (!kv->held || !kv->tables || !kv->chained || !kv->computed || !kv->chain_key ||
        !kv->copies)
        return PW_ERR_OOM;
    kv->tables_dirty = true;
    return PW_OK;
}

static void free_blocks(pw_kv_blocks *kv) {
    pw_host_free(kv->ref);
    pw_host_free(kv->prev);
    pw_host_free(kv->next);
    kv->ref = kv->prev = kv->next = NULL;
    pw_prefix_cache_free(&kv->pc);
}

void pw_kv_blocks_free(pw_kv_blocks *kv) {
    free_blocks(kv);
    pw_host_free(kv->held);
    pw_host_free(kv->tables);
    pw_host_free(kv->chained);
    pw_host_free(kv->computed);
    pw_host_free(kv->chain_key);
    pw_host_free(kv->copies);
    memset(kv, 0, sizeof *kv);
}

/* ---- the list of blocks nobody holds ---------------------------------------------------- */

static void list_unlink(pw_kv_blocks *kv, int32_t b) {
    if (kv->prev[b] >= 0) kv->next[kv->prev[b]] = kv->next[b];
    else kv->head = kv->next[b];
    if (kv->next[b] >= 0) kv->prev[kv->next[b]] = kv->prev[b];
    else kv->tail = kv->prev[b];
    kv->prev[b] = kv->next[b] = -1;
    kv->n_free--;
}

static void list_push_head(pw_kv_blocks *kv, int32_t b) {
    kv->prev[b] = -1;
    kv->next[b] = kv->head;
    if (kv->head >= 0) kv->prev[kv->head] = b;
    else kv->tail = b;
    kv->head = b;
    kv->n_free++;
}

static void list_push_tail(pw_kv_blocks *kv, int32_t b) {
    kv->next[b] = -1;
    kv->prev[b] = kv->tail;
    if (kv->tail >= 0) kv->next[kv->tail] = b;
    else kv->head = b;
    kv->tail = b;
    kv->n_free++;
}

pw_status pw_kv_blocks_reset(pw_kv_blocks *kv, int64_t num_blocks) {
    free_blocks(kv);
    kv->num_blocks = kv->n_free = 0;
    kv->head = kv->tail = -1;
    size_t n = (size_t)(num_blocks > 0 ? num_blocks : 1);
    kv->ref = pw_host_calloc(n, sizeof *kv->ref);
    kv->prev = pw_host_calloc(n, sizeof *kv->prev);
    kv->next = pw_host_calloc(n, sizeof *kv->next);
    if (!kv->ref || !kv->prev || !kv->next) return PW_ERR_OOM;
    if (kv->caching) PW_TRY(pw_prefix_cache_init(&kv->pc, kv->block_size, num_blocks));
    /* a fresh cache hands out 0, 1, ... */
    for (int64_t b = 0; b < num_blocks; b++) list_push_tail(kv, (int32_t)b);
    kv->num_blocks = num_blocks;
    return PW_OK;
}

/* The block at the list's head, now held once; its cached contents, if
 * any, are evicted. */
static int32_t take_free(pw_kv_blocks *kv) {
    int32_t b = kv->head;
    list_unlink(kv, b);
    if (kv->caching) pw_prefix_cache_forget(&kv->pc, b);
    kv->ref[b] = 1;
    return b;
}

/* One more hold on a cached block. */
static void take_shared(pw_kv_blocks *kv, int32_t b) {
    if (kv->ref[b]++ == 0) list_unlink(kv, b);
}

/* One hold less on block b: a block nobody holds goes back to the list,
 * cached (behind the others, the most recently used) when complete. */
static void drop_hold(pw_kv_blocks *kv, int32_t b) {
    if (--kv->ref[b] > 0) return;
    if (kv->caching && kv->pc.state[b] == PW_BLOCK_VALID) {
        list_push_tail(kv, b);
    } else {
        /* never completed (a cancelled prefill): its K/V are not whole */
        if (kv->caching) pw_prefix_cache_forget(&kv->pc, b);
        list_push_head(kv, b);
    }
}

int64_t pw_kv_blocks_for(const pw_kv_blocks *kv, int64_t positions) {
    return (positions + kv->block_size - 1) / kv->block_size;
}

bool pw_kv_blocks_fit(const pw_kv_blocks *kv, int64_t slot, int64_t positions) {
    int64_t need = pw_kv_blocks_for(kv, positions);
    return need <= kv->blocks_per_seq && need - kv->held[slot] <= kv->n_free;
}

static pw_status too_long(const pw_kv_blocks *kv, int64_t positions) {
    return pw_error(PW_ERR_INVALID_ARG,
                    "request needs %" PRId64 " positions, max_model_len is %" PRId64, positions,
                    kv->max_model_len);
}

pw_status pw_kv_blocks_reserve(pw_kv_blocks *kv, int64_t slot, int64_t positions) {
    int64_t need = pw_kv_blocks_for(kv, positions);
    if (need > kv->blocks_per_seq) return too_long(kv, positions);
    int64_t *held = &kv->held[slot];
    if (need - *held > kv->n_free)
        return pw_error(PW_ERR_OOM, "KV cache full: %" PRId64 " blocks needed, %" PRId64 " free",
                        need - *held, kv->n_free);
    int32_t *row = kv->tables + slot * kv->blocks_per_seq;
    if (*held < need) kv->tables_dirty = true;
    while (*held < need) row[(*held)++] = take_free(kv);
    return PW_OK;
}

/* ---- the prefix cache ---------------------------------------------------------------------- */

/* Adds the slot's next block (index kv->chained[slot], full of tokens) to
 * the table, chained after the slot's previous one. */
static void chain_block(pw_kv_blocks *kv, int64_t slot, const int32_t *tokens,
                        pw_block_state st) {
    const int32_t *row = pw_kv_blocks_row(kv, slot);
    int64_t b = kv->chained[slot];
    const int32_t *bt = tokens + b * kv->block_size;
    uint64_t key = pw_prefix_cache_key(&kv->pc, b ? kv->chain_key[slot] : PW_FNV1A_BASIS, bt);
    if (kv->pc.state[row[b]] == PW_BLOCK_UNCACHED)
        pw_prefix_cache_add(&kv->pc, row[b], key, b ? row[b - 1] : -1, bt, st);
    kv->chain_key[slot] = key;
    kv->chained[slot] = b + 1;
}

pw_status pw_kv_blocks_admit(pw_kv_blocks *kv, int64_t slot, const int32_t *tokens,
                             int64_t n_prompt, int64_t positions, bool *admitted, int64_t *cached) {
    *admitted = false;
    *cached = 0;
    int64_t need = pw_kv_blocks_for(kv, positions);
    if (need > kv->blocks_per_seq) return too_long(kv, positions);
    int32_t *row = kv->tables + slot * kv->blocks_per_seq;
    const int64_t bs = kv->block_size;
    /* the cached blocks, written into the row (held stays 0 until they are
     * taken, so nothing changes when the request has to wait) */
    int64_t hits = 0, unheld_hits = 0, lent = 0;
    int32_t lender = -1;
    uint64_t key = PW_FNV1A_BASIS;
    if (kv->caching) {
        /* the last prompt token is always computed: its logits are sampled */
        int64_t max_hits = (n_prompt - 1) / bs;
        int32_t parent = -1;
        for (int64_t b = 0; b < max_hits; b++) {
            uint64_t k = pw_prefix_cache_key(&kv->pc, key, tokens + b * bs);
            bool pending;
            int32_t blk = pw_prefix_cache_find(&kv->pc, k, parent,
                                               parent >= 0 ? kv->pc.gen[parent] : 0,
                                               tokens + b * bs, &pending);
            if (blk < 0) {
                if (pending) return PW_OK; /* another request is computing it: wait */
                break;
            }
            row[hits++] = blk;
            unheld_hits += kv->ref[blk] == 0;
            parent = blk;
            key = k;
        }
        /* the next block in part: a full match would have been a hit */
        int64_t room = n_prompt - 1 - hits * bs;
        if (room > bs - 1) room = bs - 1;
        if (room > 0)
            lender = pw_prefix_cache_longest_child(&kv->pc, parent,
                                                   parent >= 0 ? kv->pc.gen[parent] : 0,
                                                   tokens + hits * bs, room, &lent);
        /* a lender nobody holds is one of the free blocks: when the
         * request needs every one of them, it computes those rows instead */
        bool unheld = lender >= 0 && kv->ref[lender] == 0;
        if (unheld && need - hits > kv->n_free - unheld_hits - 1) {
            lender = -1;
            lent = 0;
        }
        unheld_hits += lender >= 0 && unheld;
    }
    if (need - hits > kv->n_free - unheld_hits) return PW_OK;
    for (int64_t b = 0; b < hits; b++) take_shared(kv, row[b]);
    /* held until its rows are copied: the blocks reserved below are not it */
    if (lender >= 0) take_shared(kv, lender);
    kv->held[slot] = hits;
    kv->chained[slot] = kv->computed[slot] = hits;
    kv->chain_key[slot] = key;
    pw_status s = pw_kv_blocks_reserve(kv, slot, positions);
    if (s != PW_OK) {
        if (lender >= 0) drop_hold(kv, lender);
        return s;
    }
    if (lender >= 0) kv->copies[slot] = (pw_kv_copy){lender, row[hits], lent};
    kv->tables_dirty = true;
    if (kv->caching) {
        /* the prompt's other full blocks: a request with the same prefix
         * arriving while this one computes them waits for them */
        while ((kv->chained[slot] + 1) * bs <= n_prompt)
            chain_block(kv, slot, tokens, PW_BLOCK_PENDING);
        kv->queried_tokens += n_prompt;
        kv->hit_tokens += hits * bs + lent;
    }
    *admitted = true;
    *cached = hits * bs + lent;
    return PW_OK;
}

void pw_kv_blocks_computed(pw_kv_blocks *kv, int64_t slot, const int32_t *tokens,
                           int64_t n_computed) {
    if (!kv->caching) return;
    const int32_t *row = pw_kv_blocks_row(kv, slot);
    int64_t full = n_computed / kv->block_size;
    for (int64_t b = kv->computed[slot]; b < full && b < kv->held[slot]; b++) {
        if (b < kv->chained[slot]) {
            if (kv->pc.state[row[b]] == PW_BLOCK_PENDING) kv->pc.state[row[b]] = PW_BLOCK_VALID;
        } else {
            chain_block(kv, slot, tokens, PW_BLOCK_VALID);
        }
        kv->computed[slot] = b + 1;
    }
}

void pw_kv_blocks_copied(pw_kv_blocks *kv, int64_t slot) {
    pw_kv_copy *c = &kv->copies[slot];
    if (c->rows == 0) return;
    drop_hold(kv, c->from);
    c->rows = 0;
}

void pw_kv_blocks_release(pw_kv_blocks *kv, int64_t slot) {
    pw_kv_blocks_copied(kv, slot);
    const int32_t *row = pw_kv_blocks_row(kv, slot);
    int64_t *held = &kv->held[slot];
    /* last block first: of one request's cached blocks, the later ones are
     * evicted before the earlier ones, which more prompts share */
    while (*held > 0) drop_hold(kv, row[--(*held)]);
    kv->chained[slot] = kv->computed[slot] = 0;
}

void pw_kv_blocks_take_counts(pw_kv_blocks *kv, int64_t *queried, int64_t *hits) {
    *queried = kv->queried_tokens;
    *hits = kv->hit_tokens;
    kv->queried_tokens = kv->hit_tokens = 0;
}
