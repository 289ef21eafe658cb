/* The prefix cache: full KV blocks keyed by the token prefix they
 * complete. A block's key is a hash chained from the previous block's (the
 * hash of every token from position 0 to the block's end), as in vLLM's
 * automatic prefix caching. A hash is only a hint: a lookup also compares
 * the block's own tokens and the identity of the block before it in the
 * chain, so by induction a hit holds the K/V of exactly the prompt's
 * prefix, whatever hash collisions there are.
 *
 * The table knows nothing of who holds a block: the block allocator
 * (kv_blocks.c) counts references, evicts, and tells the table when a
 * block's contents go (pw_prefix_cache_forget). */
#ifndef PW_MODEL_PREFIX_CACHE_H
#define PW_MODEL_PREFIX_CACHE_H

#include "internal.h"

typedef enum pw_block_state {
    PW_BLOCK_UNCACHED = 0, /* not in the table */
    PW_BLOCK_PENDING,      /* in the table, its K/V still being computed by its owner */
    PW_BLOCK_VALID,        /* in the table, K/V complete: may be shared */
} pw_block_state;

typedef struct pw_prefix_cache {
    int64_t block_size, num_blocks;
    /* Applied to every hash; all ones normally. Tests narrow it to make
     * hashes collide and check that the comparison keeps answers right. */
    uint64_t hash_mask;
    uint64_t *hash;       /* [num_blocks] */
    uint8_t *state;       /* [num_blocks] pw_block_state */
    int32_t *parent;      /* [num_blocks] block before it in its chain; -1: the first */
    uint64_t *parent_gen; /* [num_blocks] the parent's gen when this block was added */
    uint64_t *gen;        /* [num_blocks] bumped each time the block is added (never wraps) */
    int32_t *tokens;      /* [num_blocks][block_size] */
    int32_t *bucket;      /* [n_buckets] first block of each hash bucket; -1: none */
    int32_t *next;        /* [num_blocks] next block in the same bucket */
    int64_t n_buckets;    /* a power of two */
} pw_prefix_cache;

pw_status pw_prefix_cache_init(pw_prefix_cache *pc, int64_t block_size, int64_t num_blocks);
void pw_prefix_cache_free(pw_prefix_cache *pc);
/* The key of a block holding `tokens` (block_size of them) after the
 * prefix whose key is prev (PW_FNV1A_BASIS for the first block). */
uint64_t pw_prefix_cache_key(const pw_prefix_cache *pc, uint64_t prev, const int32_t *tokens);
/* The block keyed `key` whose tokens are `tokens` and whose chain parent is
 * (parent, parent_gen): a VALID one if there is one, else -1 with *pending
 * set when a PENDING one matches (its owner is computing it). */
int32_t pw_prefix_cache_find(const pw_prefix_cache *pc, uint64_t key, int32_t parent,
                             uint64_t parent_gen, const int32_t *tokens, bool *pending);
/* The VALID block chained after (parent, parent_gen) whose first tokens
 * match most of tokens[0, max_len): it and, in *len, how many match (at
 * least 1); -1 and 0 when none does. A scan of every block: admission
 * calls it once per request, where a hit spares a forward the tokens. */
int32_t pw_prefix_cache_longest_child(const pw_prefix_cache *pc, int32_t parent,
                                      uint64_t parent_gen, const int32_t *tokens, int64_t max_len,
                                      int64_t *len);
/* Adds an uncached block under `key` in state st (PENDING or VALID). */
void pw_prefix_cache_add(pw_prefix_cache *pc, int32_t block, uint64_t key, int32_t parent,
                         const int32_t *tokens, pw_block_state st);
/* Takes a block out of the table (its contents are about to change, or were
 * never completed). No-op for an uncached block. */
void pw_prefix_cache_forget(pw_prefix_cache *pc, int32_t block);

#endif
