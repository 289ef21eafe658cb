/* The KV block allocator: a stack of free block ids, and per request a row
 * of the block tables holding the blocks it owns, in position order. A
 * request reserves blocks for its whole budget when first scheduled, so a
 * running request never waits for memory. */
#include "model/engine_internal.h"

#include <inttypes.h>

void pw_kv_blocks_init(pw_engine *e) {
    /* lowest ids on top of the stack, so a fresh engine hands out 0, 1, ... */
    for (int64_t b = 0; b < e->num_blocks; b++) e->free_blocks[b] = (int32_t)(e->num_blocks - 1 - b);
    e->n_free_blocks = e->num_blocks;
}

int64_t pw_kv_blocks_for(const pw_engine *e, int64_t positions) {
    return (positions + e->cfg.block_size - 1) / e->cfg.block_size;
}

bool pw_kv_blocks_fit(const pw_engine *e, const pw_request *r, int64_t positions) {
    int64_t need = pw_kv_blocks_for(e, positions);
    return need <= e->blocks_per_seq && need - r->n_blocks <= e->n_free_blocks;
}

pw_status pw_kv_blocks_reserve(pw_engine *e, pw_request *r, int64_t positions) {
    int64_t need = pw_kv_blocks_for(e, positions);
    if (need > e->blocks_per_seq)
        return pw_error(PW_ERR_INVALID_ARG,
                        "request needs %" PRId64 " positions, max_model_len is %" PRId64, positions,
                        e->max_model_len);
    if (need - r->n_blocks > e->n_free_blocks)
        return pw_error(PW_ERR_OOM, "KV cache full: %" PRId64 " blocks needed, %" PRId64 " free",
                        need - r->n_blocks, e->n_free_blocks);
    int32_t *table = &e->block_tables[r->slot * e->blocks_per_seq];
    if (r->n_blocks < need) e->block_tables_dirty = true;
    while (r->n_blocks < need) table[r->n_blocks++] = e->free_blocks[--e->n_free_blocks];
    return PW_OK;
}

void pw_kv_blocks_release(pw_engine *e, pw_request *r) {
    int32_t *table = &e->block_tables[r->slot * e->blocks_per_seq];
    while (r->n_blocks > 0) e->free_blocks[e->n_free_blocks++] = table[--r->n_blocks];
}
