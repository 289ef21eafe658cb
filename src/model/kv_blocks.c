/* The KV block allocator: a stack of free block ids, and per slot a row of
 * the block tables holding the blocks it owns, in position order. A
 * request reserves blocks for its whole budget when first scheduled, so a
 * running request never waits for memory. */
#include "model/kv_blocks.h"

#include <inttypes.h>
#include <string.h>

pw_status pw_kv_blocks_init(pw_kv_blocks *kv, int64_t max_seqs, int64_t block_size,
                            int64_t max_model_len) {
    memset(kv, 0, sizeof *kv);
    kv->block_size = block_size;
    kv->max_model_len = max_model_len;
    kv->blocks_per_seq = (max_model_len + block_size - 1) / block_size;
    kv->max_seqs = max_seqs;
    kv->held = pw_host_calloc((size_t)max_seqs, sizeof *kv->held);
    kv->tables = pw_host_calloc((size_t)(max_seqs * kv->blocks_per_seq), sizeof *kv->tables);
    if (!kv->held || !kv->tables) return PW_ERR_OOM;
    kv->tables_dirty = true;
    return PW_OK;
}

void pw_kv_blocks_free(pw_kv_blocks *kv) {
    pw_host_free(kv->free);
    pw_host_free(kv->held);
    pw_host_free(kv->tables);
    memset(kv, 0, sizeof *kv);
}

pw_status pw_kv_blocks_reset(pw_kv_blocks *kv, int64_t num_blocks) {
    pw_host_free(kv->free);
    kv->num_blocks = kv->n_free = 0;
    kv->free = pw_host_calloc((size_t)num_blocks, sizeof *kv->free);
    if (!kv->free) return PW_ERR_OOM;
    /* lowest ids on top of the stack, so a fresh cache hands out 0, 1, ... */
    for (int64_t b = 0; b < num_blocks; b++) kv->free[b] = (int32_t)(num_blocks - 1 - b);
    kv->num_blocks = kv->n_free = num_blocks;
    return PW_OK;
}

int64_t pw_kv_blocks_for(const pw_kv_blocks *kv, int64_t positions) {
    return (positions + kv->block_size - 1) / kv->block_size;
}

bool pw_kv_blocks_fit(const pw_kv_blocks *kv, int64_t slot, int64_t positions) {
    int64_t need = pw_kv_blocks_for(kv, positions);
    return need <= kv->blocks_per_seq && need - kv->held[slot] <= kv->n_free;
}

pw_status pw_kv_blocks_reserve(pw_kv_blocks *kv, int64_t slot, int64_t positions) {
    int64_t need = pw_kv_blocks_for(kv, positions);
    if (need > kv->blocks_per_seq)
        return pw_error(PW_ERR_INVALID_ARG,
                        "request needs %" PRId64 " positions, max_model_len is %" PRId64, positions,
                        kv->max_model_len);
    int64_t *held = &kv->held[slot];
    if (need - *held > kv->n_free)
        return pw_error(PW_ERR_OOM, "KV cache full: %" PRId64 " blocks needed, %" PRId64 " free",
                        need - *held, kv->n_free);
    int32_t *row = kv->tables + slot * kv->blocks_per_seq;
    if (*held < need) kv->tables_dirty = true;
    while (*held < need) row[(*held)++] = kv->free[--kv->n_free];
    return PW_OK;
}

void pw_kv_blocks_release(pw_kv_blocks *kv, int64_t slot) {
    const int32_t *row = pw_kv_blocks_row(kv, slot);
    int64_t *held = &kv->held[slot];
    while (*held > 0) kv->free[kv->n_free++] = row[--(*held)];
}
