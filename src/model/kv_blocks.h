/* The KV block allocator: which blocks of the paged KV cache each request
 * slot holds. A slot's row of the block tables lists its blocks in
 * position order; the attention kernels read the rows (through the device
 * copy the engine stages when tables_dirty is set). */
#ifndef PW_MODEL_KV_BLOCKS_H
#define PW_MODEL_KV_BLOCKS_H

#include "internal.h"

typedef struct pw_kv_blocks {
    int64_t block_size;     /* positions per block */
    int64_t max_model_len;  /* positions one slot may hold */
    int64_t blocks_per_seq; /* a row of the block tables: blocks for max_model_len */
    int64_t max_seqs;       /* slots, rows of the block tables */
    int64_t num_blocks;     /* blocks in the cache; 0 until pw_kv_blocks_reset */
    int32_t *free;          /* stack of free block ids */
    int64_t n_free;
    int64_t *held;          /* [max_seqs] blocks each slot holds */
    int32_t *tables;        /* [max_seqs][blocks_per_seq] */
    bool tables_dirty;      /* changed since the device copy was staged */
} pw_kv_blocks;

/* Slots without blocks and a cache of none (pw_kv_blocks_reset sizes it). */
pw_status pw_kv_blocks_init(pw_kv_blocks *kv, int64_t max_seqs, int64_t block_size,
                            int64_t max_model_len);
void pw_kv_blocks_free(pw_kv_blocks *kv);
/* The cache has num_blocks blocks, every one free. Only before any slot
 * holds a block. */
pw_status pw_kv_blocks_reset(pw_kv_blocks *kv, int64_t num_blocks);
/* Blocks that hold `positions` positions. */
int64_t pw_kv_blocks_for(const pw_kv_blocks *kv, int64_t positions);
/* True when reserving `positions` for `slot` would succeed (no error is set). */
bool pw_kv_blocks_fit(const pw_kv_blocks *kv, int64_t slot, int64_t positions);
/* Grows the slot's blocks to cover `positions`: PW_ERR_INVALID_ARG past
 * max_model_len, PW_ERR_OOM when too few blocks are free. */
pw_status pw_kv_blocks_reserve(pw_kv_blocks *kv, int64_t slot, int64_t positions);
/* Returns every block of the slot. */
void pw_kv_blocks_release(pw_kv_blocks *kv, int64_t slot);
/* The slot's row of the block tables. */
static inline const int32_t *pw_kv_blocks_row(const pw_kv_blocks *kv, int64_t slot) {
    return kv->tables + slot * kv->blocks_per_seq;
}

#endif
