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

/* Attention for tokens [begin, end); the K/V writes are already done. */
static void attend_tokens(void *ctx, int64_t begin, int64_t end) {
    PW_ISA_CALL(pw_k_attention_rows, (const pw_k_attention_args *)ctx, begin, end);
}

/* Every token's K/V is written before any token attends (a token reads
 * its own and earlier positions back from the cache); then tokens are
 * independent and may be split across threads. */
void pw_k_attention(const pw_k_attention_args *a) {
    const pw_attn_meta *m = a->meta;
    const int64_t group = a->n_kv_heads > 0 ? a->n_heads / a->n_kv_heads : 1;
    const bool shape_ok = a->head_dim > 0 && a->head_dim <= PW_K_ATTN_MAX_HEAD_DIM &&
                          a->n_kv_heads > 0 && group > 0 && a->n_heads % a->n_kv_heads == 0 &&
                          m->block_size > 0;
    if (shape_ok) write_kv(a, a->num_blocks * (int64_t)m->block_size);
    if (a->n_tokens >= PW_K_PARALLEL_MIN_TOKENS && pw_k_parallel_threads() > 1)
        pw_k_parallel_for(a->n_tokens, attend_tokens, (void *)a);
    else
        attend_tokens((void *)a, 0, a->n_tokens);
}

static void attention_launch(const void *args) { pw_k_attention(args); }
const pw_kernel pw_kernel_attention = {"attention", attention_launch, NULL};
