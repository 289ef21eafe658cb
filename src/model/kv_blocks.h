/* The KV block allocator: which blocks of the paged KV cache each request
 * slot holds. A slot's row of the block tables lists its blocks in
 * position order; the attention kernels read the rows (through the device
 * copy the engine stages when tables_dirty is set).
 *
 * Blocks are reference-counted: with the prefix cache on, a full block may
 * be in several rows at once (requests whose prompts share a prefix), and a
 * block nobody holds keeps its contents, cached, until it is needed for
 * something else. Blocks with no holder wait in one list, taken from its
 * head: uncached ones first, then cached ones least recently used first.
 * Only such blocks are ever taken, so a running request never loses one. */
#ifndef PW_MODEL_KV_BLOCKS_H
#define PW_MODEL_KV_BLOCKS_H

#include "model/prefix_cache.h"

/* Rows [0, rows) of cached block `from` that a newly admitted request
 * takes as the first rows of its own block `to`: the K/V of a prompt that
 * matches part of a cached block. The engine copies them before the step's
 * forward (rows 0: nothing to copy). */
typedef struct pw_kv_copy {
    int32_t from, to;
    int64_t rows;
} pw_kv_copy;

typedef struct pw_kv_blocks {
    int64_t block_size;     /* positions per block */
    int64_t max_model_len;  /* positions one slot may hold */
    int64_t blocks_per_seq; /* a row of the block tables: blocks for max_model_len */
    int64_t max_seqs;       /* slots, rows of the block tables */
    int64_t num_blocks;     /* blocks in the cache; 0 until pw_kv_blocks_reset */
    int32_t *ref;           /* [num_blocks] rows holding the block */
    /* The blocks nobody holds, a doubly linked list (-1 ends it). */
    int32_t *prev, *next;
    int32_t head, tail;
    int64_t n_free;         /* blocks in that list */
    int64_t *held;          /* [max_seqs] blocks each slot holds */
    int32_t *tables;        /* [max_seqs][blocks_per_seq] */
    bool tables_dirty;      /* changed since the device copy was staged */
    /* The prefix cache: on when set before pw_kv_blocks_reset. */
    bool caching;
    pw_prefix_cache pc;
    int64_t *chained;       /* [max_seqs] leading blocks of the slot that are in the table */
    int64_t *computed;      /* [max_seqs] leading blocks of the slot known complete */
    uint64_t *chain_key;    /* [max_seqs] the key of the slot's last chained block */
    pw_kv_copy *copies;     /* [max_seqs] rows to copy before the slot's first step; the
                               source block is held until pw_kv_blocks_copied */
    /* Prompt tokens looked up and found at admission, since last taken
     * (pw_kv_blocks_take_counts). */
    int64_t queried_tokens, hit_tokens;
} pw_kv_blocks;

/* Slots without blocks and a cache of none (pw_kv_blocks_reset sizes it). */
pw_status pw_kv_blocks_init(pw_kv_blocks *kv, int64_t max_seqs, int64_t block_size,
                            int64_t max_model_len);
void pw_kv_blocks_free(pw_kv_blocks *kv);
/* The cache has num_blocks blocks, every one free and uncached. Only
 * before any slot holds a block. */
pw_status pw_kv_blocks_reset(pw_kv_blocks *kv, int64_t num_blocks);
/* Blocks that hold `positions` positions. */
int64_t pw_kv_blocks_for(const pw_kv_blocks *kv, int64_t positions);
/* True when reserving `positions` for `slot` would succeed (no error is set). */
bool pw_kv_blocks_fit(const pw_kv_blocks *kv, int64_t slot, int64_t positions);
/* Grows the slot's blocks to cover `positions`: PW_ERR_INVALID_ARG past
 * max_model_len, PW_ERR_OOM when too few blocks are free. */
pw_status pw_kv_blocks_reserve(pw_kv_blocks *kv, int64_t slot, int64_t positions);
/* Admits a request to a slot holding no blocks: its prompt is
 * tokens[0, n_prompt), and it may grow to `positions`. With the prefix
 * cache, the prompt's leading full blocks found in the cache are shared
 * (never the block of the prompt's last token, whose logits must be
 * computed), and the prompt's other full blocks enter the table as
 * pending. After the shared blocks, a cached block whose first tokens match
 * the prompt's next ones (short of its last token) lends those rows: they
 * are copied into the slot's own block (kv->copies[slot]), so a prompt seen
 * before, or a conversation's next turn, computes only what is new, as
 * llama-server's slot cache does. *cached is the positions shared and
 * lent. *admitted is false, with nothing
 * taken, when the blocks do not fit yet, or when a block of the prompt is
 * being computed by another request (a later step shares it instead of
 * computing it twice). PW_ERR_INVALID_ARG past max_model_len. */
pw_status pw_kv_blocks_admit(pw_kv_blocks *kv, int64_t slot, const int32_t *tokens,
                             int64_t n_prompt, int64_t positions, bool *admitted, int64_t *cached);
/* The slot's first n_computed positions hold their K/V (tokens: the
 * request's tokens): its full blocks among them become shareable. */
void pw_kv_blocks_computed(pw_kv_blocks *kv, int64_t slot, const int32_t *tokens,
                           int64_t n_computed);
/* The slot's pending copy (kv->copies[slot]) is done: the source block's
 * hold is dropped. No-op when none is pending. */
void pw_kv_blocks_copied(pw_kv_blocks *kv, int64_t slot);
/* Drops the slot's hold on its blocks (and on a pending copy's source): the complete cached ones stay in
 * the cache until evicted. */
void pw_kv_blocks_release(pw_kv_blocks *kv, int64_t slot);
/* The prompt tokens looked up in and found in the prefix cache since the
 * last call. */
void pw_kv_blocks_take_counts(pw_kv_blocks *kv, int64_t *queried, int64_t *hits);
/* The slot's row of the block tables. */
static inline const int32_t *pw_kv_blocks_row(const pw_kv_blocks *kv, int64_t slot) {
    return kv->tables + slot * kv->blocks_per_seq;
}

#endif
