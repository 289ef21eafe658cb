/* The prefix cache's table: chained-hash keys, buckets of blocks, and the
 * exact comparison that makes a hit safe whatever the hash does. */
#include "model/prefix_cache.h"

#include "piecewise/extend.h" /* pw_fnv1a */

#include <string.h>

pw_status pw_prefix_cache_init(pw_prefix_cache *pc, int64_t block_size, int64_t num_blocks) {
    memset(pc, 0, sizeof *pc);
    pc->block_size = block_size;
    pc->num_blocks = num_blocks;
    pc->hash_mask = UINT64_MAX;
    pc->n_buckets = 1;
    while (pc->n_buckets < num_blocks) pc->n_buckets *= 2;
    size_t nb = (size_t)(num_blocks > 0 ? num_blocks : 1);
    pc->hash = pw_host_calloc(nb, sizeof *pc->hash);
    pc->state = pw_host_calloc(nb, sizeof *pc->state);
    pc->parent = pw_host_calloc(nb, sizeof *pc->parent);
    pc->parent_gen = pw_host_calloc(nb, sizeof *pc->parent_gen);
    pc->gen = pw_host_calloc(nb, sizeof *pc->gen);
    pc->tokens = pw_host_calloc(nb * (size_t)block_size, sizeof *pc->tokens);
    pc->bucket = pw_host_calloc((size_t)pc->n_buckets, sizeof *pc->bucket);
    pc->next = pw_host_calloc(nb, sizeof *pc->next);
    if (!pc->hash || !pc->state || !pc->parent || !pc->parent_gen || !pc->gen || !pc->tokens ||
        !pc->bucket || !pc->next) {
        pw_prefix_cache_free(pc);
        return PW_ERR_OOM;
    }
    for (int64_t b = 0; b < pc->n_buckets; b++) pc->bucket[b] = -1;
    for (int64_t b = 0; b < num_blocks; b++) pc->next[b] = -1;
    return PW_OK;
}

void pw_prefix_cache_free(pw_prefix_cache *pc) {
    pw_host_free(pc->hash);
    pw_host_free(pc->state);
    pw_host_free(pc->parent);
    pw_host_free(pc->parent_gen);
    pw_host_free(pc->gen);
    pw_host_free(pc->tokens);
    pw_host_free(pc->bucket);
    pw_host_free(pc->next);
    memset(pc, 0, sizeof *pc);
}

uint64_t pw_prefix_cache_key(const pw_prefix_cache *pc, uint64_t prev, const int32_t *tokens) {
    return pw_fnv1a(prev, tokens, (size_t)pc->block_size * sizeof *tokens) & pc->hash_mask;
}

static int64_t bucket_of(const pw_prefix_cache *pc, uint64_t key) {
    /* FNV's low bits are its weakest: fold the high half in */
    return (int64_t)((key ^ (key >> 32)) & (uint64_t)(pc->n_buckets - 1));
}

int32_t pw_prefix_cache_find(const pw_prefix_cache *pc, uint64_t key, int32_t parent,
                             uint64_t parent_gen, const int32_t *tokens, bool *pending) {
    *pending = false;
    size_t bytes = (size_t)pc->block_size * sizeof *tokens;
    for (int32_t b = pc->bucket[bucket_of(pc, key)]; b >= 0; b = pc->next[b]) {
        if (pc->hash[b] != key || pc->parent[b] != parent ||
            (parent >= 0 && pc->parent_gen[b] != parent_gen) ||
            memcmp(pc->tokens + (size_t)b * (size_t)pc->block_size, tokens, bytes) != 0)
            continue;
        if (pc->state[b] == PW_BLOCK_VALID) return b;
        *pending = true;
    }
    return -1;
}

int32_t pw_prefix_cache_longest_child(const pw_prefix_cache *pc, int32_t parent,
                                      uint64_t parent_gen, const int32_t *tokens, int64_t max_len,
                                      int64_t *len) {
    int32_t best = -1;
    int64_t best_len = 0;
    for (int64_t b = 0; b < pc->num_blocks && best_len < max_len; b++) {
        if (pc->state[b] != PW_BLOCK_VALID || pc->parent[b] != parent ||
            (parent >= 0 && pc->parent_gen[b] != parent_gen))
            continue;
        const int32_t *bt = pc->tokens + b * pc->block_size;
        int64_t n = 0;
        while (n < max_len && bt[n] == tokens[n]) n++;
        if (n > best_len) {
            best = (int32_t)b;
            best_len = n;
        }
    }
    *len = best_len;
    return best;
}

void pw_prefix_cache_add(pw_prefix_cache *pc, int32_t block, uint64_t key, int32_t parent,
                         const int32_t *tokens, pw_block_state st) {
    pc->hash[block] = key;
    pc->state[block] = (uint8_t)st;
    pc->parent[block] = parent;
    pc->parent_gen[block] = parent >= 0 ? pc->gen[parent] : 0;
    pc->gen[block]++; /* a child added under the block's previous contents no longer matches */
    memcpy(pc->tokens + (size_t)block * (size_t)pc->block_size, tokens,
           (size_t)pc->block_size * sizeof *tokens);
    int64_t bk = bucket_of(pc, key);
    pc->next[block] = pc->bucket[bk];
    pc->bucket[bk] = block;
}

void pw_prefix_cache_forget(pw_prefix_cache *pc, int32_t block) {
    if (pc->state[block] == PW_BLOCK_UNCACHED) return;
    for (int32_t *p = &pc->bucket[bucket_of(pc, pc->hash[block])]; *p >= 0; p = &pc->next[*p])
        if (*p == block) {
            *p = pc->next[block];
            break;
        }
    pc->next[block] = -1;
    pc->state[block] = PW_BLOCK_UNCACHED;
}
