/* Causal attention over a paged KV cache: the splitting op.
 *
 * Formulated per token: a token writes its k/v into its slot, then attends
 * over positions 0..positions[t] of its own sequence, reading every key and
 * value (its own included) back from the cache. The computation for a
 * token is therefore a function of its query and of the cache contents
 * only, and runs one fixed sequence of float operations (written out in
 * attention_body.h), so prefill in one go, chunked prefill, decode and
 * mixed batches all give bit-identical rows, and padding cannot leak in.
 *
 * Softmax is computed in fixed chunks of PW_K_ATTN_SCORE_CHUNK positions
 * starting at position 0: scores of one chunk go to a stack buffer, the
 * running maximum, denominator and weighted sum are rescaled when a chunk
 * raises the maximum. For contexts up to one chunk this is the plain
 * two-pass softmax with max subtraction.
 *
 * The inner loops live in attention_body.h, compiled here for the baseline
 * ISA and in attention_fma.c for AVX2+FMA (isa.h); both give the same bits. */
#include "ops/cpu/attention_isa.h"

#include "ops/cpu/attention_body.h"

static void write_kv(const pw_k_attention_args *a, int64_t capacity) {
    const pw_attn_meta *m = a->meta;
    int64_t row = a->n_kv_heads * a->head_dim;
    for (int64_t t = 0; t < a->n_tokens; t++) {
        int64_t slot = m->slot_mapping[t];
        if (slot < 0 || slot >= capacity) continue;
        memcpy(a->k_cache + slot * row, a->k + t * a->kv_stride, (size_t)row * sizeof(float));
        memcpy(a->v_cache + slot * row, a->v + t * a->kv_stride, (size_t)row * sizeof(float));
    }
}

/* Attention for items [begin, end) ((token, head group) pairs); the K/V
 * writes are already done. */
static void attend_items(void *ctx, int64_t begin, int64_t end) {
    PW_ISA_CALL(pw_k_attention_items, (const pw_k_attention_args *)ctx, begin, end);
}

/* Multiply-adds (scores and weighted values over every attended position)
 * of the step: splitting a short decode step costs more than it saves. */
static bool worth_splitting(const pw_k_attention_args *a) {
    if (a->n_tokens >= PW_K_PARALLEL_MIN_TOKENS) return true;
    int64_t positions = 0;
    for (int64_t t = 0; t < a->n_tokens; t++) positions += a->meta->positions[t] + 1;
    return 2 * positions * a->n_heads * a->head_dim >= PW_K_ATTN_PARALLEL_MIN_MACS;
}

/* Every token's K/V is written before any token attends (a token reads
 * its own and earlier positions back from the cache); then tokens, and the
 * head groups of a token, are independent and may be split across
 * threads: decode at batch 1 splits by head groups. */
void pw_k_attention(const pw_k_attention_args *a) {
    const bool shape_ok = pw_k_attention_shape_ok(a);
    if (shape_ok) write_kv(a, a->num_blocks * (int64_t)a->meta->block_size);
    const int64_t items = a->n_tokens * pw_k_attention_groups(a);
    if (items > 1 && pw_k_parallel_threads() > 1 && worth_splitting(a))
        pw_k_parallel_for(items, attend_items, (void *)a);
    else
        attend_items((void *)a, 0, items);
}

static void attention_launch(const void *args) { pw_k_attention(args); }
const pw_kernel pw_kernel_attention = {"attention", attention_launch, NULL, PW_K_ARGS(ATTENTION)};
