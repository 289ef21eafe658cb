/* The CPU kernel set: every kernel of the op table, fused ones included,
 * with the scratch the matmuls' BLAS path needs. */
#include "ops/cpu/kernels.h"
#include "ops/kernel_set.h"

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static size_t matmul_scratch(const void *args) {
    const pw_k_matmul_args *a = args;
    return pw_k_matmul_scratch_floats(a->n_tokens, a->n, a->k) * sizeof(float);
}

static size_t qkv_rope_scratch(const void *args) {
    const pw_k_qkv_rope_args *a = args;
    int64_t q_rows = a->n_heads * a->head_dim, kv_rows = a->n_kv_heads * a->head_dim;
    size_t floats = pw_k_matmul_any_scratch_floats(a->tq, a->n_tokens, q_rows, a->dim);
    floats = max_size(floats, pw_k_matmul_any_scratch_floats(a->tk, a->n_tokens, kv_rows, a->dim));
    floats = max_size(floats, pw_k_matmul_any_scratch_floats(a->tv, a->n_tokens, kv_rows, a->dim));
    return floats * sizeof(float);
}

/* The matmuls' scratch only: `up` is the op's own intermediate. */
static size_t gate_up_silu_scratch(const void *args) {
    const pw_k_gate_up_silu_args *a = args;
    return max_size(pw_k_matmul_any_scratch_floats(a->t_gate, a->n_tokens, a->f, a->dim),
                    pw_k_matmul_any_scratch_floats(a->t_up, a->n_tokens, a->f, a->dim)) *
           sizeof(float);
}

static size_t lm_head_scratch(const void *args) {
    const pw_k_lm_head_args *a = args;
    return pw_k_lm_head_scratch_floats(a->type, a->n_tokens, a->n, a->k) * sizeof(float);
}

const pw_kernel_set pw_kernel_set_cpu = {
    .name = "cpu",
    .entries = {
        [PW_KERNEL_EMBEDDING] = {&pw_kernel_embedding, NULL},
        [PW_KERNEL_EMBEDDING_QUANT] = {&pw_kernel_embedding_quant, NULL},
        [PW_KERNEL_RMS_NORM] = {&pw_kernel_rms_norm, NULL},
        [PW_KERNEL_ADD_RMS_NORM] = {&pw_kernel_add_rms_norm, NULL},
        [PW_KERNEL_MATMUL] = {&pw_kernel_matmul, matmul_scratch},
        [PW_KERNEL_MATMUL_QUANT] = {&pw_kernel_matmul_quant, NULL},
        [PW_KERNEL_ROPE] = {&pw_kernel_rope, NULL},
        [PW_KERNEL_SILU_AND_MUL] = {&pw_kernel_silu_and_mul, NULL},
        [PW_KERNEL_SILU_MUL] = {&pw_kernel_silu_mul, NULL},
        [PW_KERNEL_ADD] = {&pw_kernel_add, NULL},
        [PW_KERNEL_ARGMAX] = {&pw_kernel_argmax, NULL},
        [PW_KERNEL_ATTENTION] = {&pw_kernel_attention, NULL},
        [PW_KERNEL_SUM_RMS_NORM] = {&pw_kernel_sum_rms_norm, NULL},
        [PW_KERNEL_QKV_ROPE] = {&pw_kernel_qkv_rope, qkv_rope_scratch},
        [PW_KERNEL_GATE_UP_SILU] = {&pw_kernel_gate_up_silu, gate_up_silu_scratch},
        [PW_KERNEL_GELU_MUL] = {&pw_kernel_gelu_mul, NULL},
        [PW_KERNEL_HEAD_NORM_ROPE] = {&pw_kernel_head_norm_rope, NULL},
        [PW_KERNEL_SCALE] = {&pw_kernel_scale, NULL},
        [PW_KERNEL_SOFTCAP] = {&pw_kernel_softcap, NULL},
        [PW_KERNEL_LM_HEAD] = {&pw_kernel_lm_head, lm_head_scratch},
        [PW_KERNEL_SELECT_ROWS] = {&pw_kernel_select_rows, NULL},
        [PW_KERNEL_ROPE_NEOX] = {&pw_kernel_rope_neox, NULL},
        [PW_KERNEL_BIAS_ADD] = {&pw_kernel_bias_add, NULL},
        [PW_KERNEL_SLICE_COLS] = {&pw_kernel_slice_cols, NULL},
        [PW_KERNEL_ALL_REDUCE_SHARDS] = {&pw_kernel_all_reduce_shards, NULL},
        [PW_KERNEL_EMBEDDING_VOCAB] = {&pw_kernel_embedding_vocab, NULL},
        [PW_KERNEL_GATHER_VOCAB] = {&pw_kernel_gather_vocab, NULL},
    },
};
