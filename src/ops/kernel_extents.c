/* What each kernel touches through each address word (pw_kernel_args.extent),
 * derived from the values of its argument struct, as the kernels of
 * ops/cpu/kernels.h read and write: the graph cache checks a restored
 * launch's every address against it, so that a forged file cannot make a
 * kernel write past the buffer an address was relocated into.
 *
 * Sizes are computed in 64 bits with every product checked: a negative or
 * overflowing size is UINT64_MAX, which no buffer holds. One word's extent
 * is not derivable from the arguments, and says 0 (unknown; the cache
 * then checks only that its address lies inside its buffer): attention's
 * K and V caches, whose block size the kernel reads from the per-step
 * metadata at run time (the block ids it indexes them with come from the
 * engine's block tables, never from a stored graph). */
#include "ops/comm.h"
#include "ops/kernel_args.h"
#include "ops/kernel_set.h"
#include "ops/ops.h"

#include <stddef.h>

#define TOO_BIG UINT64_MAX

/* a * b, or TOO_BIG when either is negative or the product overflows */
static uint64_t mul(uint64_t a, int64_t b) {
    if (a == TOO_BIG || b < 0) return TOO_BIG;
    if (b != 0 && a > TOO_BIG / (uint64_t)b) return TOO_BIG;
    return a * (uint64_t)b;
}

static uint64_t floats(int64_t a, int64_t b) { return mul(mul(sizeof(float), a), b); }
static uint64_t int32s(int64_t n) { return mul(sizeof(int32_t), n); }

/* rows of n elements of a block type */
static uint64_t rows_of(pw_dtype t, int64_t rows, int64_t n) {
    int64_t be = pw_dtype_block_elems(t);
    if ((unsigned)t >= PW_DTYPE_COUNT_ || be <= 0 || n < 0 || n % be != 0) return TOO_BIG;
    return mul(mul((uint64_t)pw_dtype_block_bytes(t), n / be), rows);
}

/* n rows of `row` bytes, `stride` bytes apart (0: packed): the last row
 * ends (n - 1) * stride + row bytes in. A stride below a row is refused
 * (rows would overlap: no kernel reads that). */
static uint64_t strided(uint64_t row, uint64_t stride, int64_t n) {
    if (stride == 0 || row == TOO_BIG) return mul(row, n);
    if (stride < row || stride == TOO_BIG || n < 0) return TOO_BIG;
    if (n == 0) return 0;
    uint64_t before = mul(stride, n - 1);
    return before == TOO_BIG || before > TOO_BIG - row ? TOO_BIG : before + row;
}

static uint64_t rope_table(int64_t max_pos, int64_t head_dim) {
    if (max_pos < 0 || head_dim < 0) return TOO_BIG;
    return floats(max_pos, head_dim);
}

/* A dimension no model has: the kernel sets size their scratch in plain
 * int64 arithmetic (products of two or three dimensions), which a forged
 * size could overflow, so sizes past it are refused before they are asked. */
#define MAX_DIM ((int64_t)1 << 24)

static bool dims_ok(int n, const int64_t *dims) {
    for (int i = 0; i < n; i++)
        if (dims[i] < 0 || dims[i] > MAX_DIM) return false;
    return true;
}

/* The scratch a launch needs, as the kernel's set sizes it, for the
 * dimensions its sizing function reads. */
#define SCRATCH(...)                                                                        \
    scratch(k, p, (const int64_t[]){__VA_ARGS__},                                            \
            (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
static uint64_t scratch(const pw_kernel *k, const void *args, const int64_t *dims, int n_dims) {
    if (!dims_ok(n_dims, dims)) return TOO_BIG;
    static const pw_device devices[] = {PW_DEVICE_CPU, PW_DEVICE_CUDA};
    for (size_t d = 0; d < sizeof devices / sizeof devices[0]; d++) {
        const pw_kernel_set *set = pw_kernel_set_for(devices[d]);
        int id = pw_kernel_set_find(set, k);
        if (id < 0) continue;
        size_t (*bytes)(const void *) = set->entries[id].scratch_bytes;
        return bytes ? bytes(args) : 0;
    }
    return 0;
}

#define IS(S, field) (off == offsetof(S, field))

/* Every kernel id has its case: a kernel added to the op table without
 * one is a compile error (-Wswitch), as a field left out of a layout is in
 * kernel_sets.c. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
#endif
static uint64_t extent(const pw_kernel *k, pw_kernel_id id, const void *p, uint16_t off,
                       bool *nullable) {
    switch (id) {
    case PW_KERNEL_EMBEDDING: {
        const pw_k_embedding_args *a = p;
        if (IS(pw_k_embedding_args, ids)) return int32s(a->n_tokens);
        if (IS(pw_k_embedding_args, table)) return floats(a->vocab, a->dim);
        return floats(a->n_tokens, a->dim);
    }
    case PW_KERNEL_EMBEDDING_QUANT: {
        const pw_k_embedding_quant_args *a = p;
        if (IS(pw_k_embedding_quant_args, ids)) return int32s(a->n_tokens);
        if (IS(pw_k_embedding_quant_args, table)) return rows_of(a->type, a->vocab, a->dim);
        return floats(a->n_tokens, a->dim);
    }
    case PW_KERNEL_RMS_NORM:
    case PW_KERNEL_ADD_RMS_NORM: {
        const pw_k_rms_norm_args *a = p;
        if (IS(pw_k_rms_norm_args, w)) return floats(1, a->dim);
        /* only the fused add variant uses residual */
        *nullable = IS(pw_k_rms_norm_args, residual) && id == PW_KERNEL_RMS_NORM;
        return floats(a->n_tokens, a->dim);
    }
    case PW_KERNEL_MATMUL: {
        const pw_k_matmul_args *a = p;
        if (IS(pw_k_matmul_args, y)) return floats(a->n_tokens, a->n);
        if (IS(pw_k_matmul_args, x)) return floats(a->n_tokens, a->k);
        if (IS(pw_k_matmul_args, w)) return strided(floats(1, a->k), floats(1, a->ldw), a->n);
        *nullable = true;
        return SCRATCH(a->n_tokens, a->n, a->k);
    }
    case PW_KERNEL_MATMUL_QUANT: {
        const pw_k_matmul_quant_args *a = p;
        /* K-shards: S outputs of x's S column ranges, the weights' S
         * ranges shard_bytes apart */
        int64_t shards = a->n_shards > 1 ? a->n_shards : 1;
        if (a->n_shards < 0 || a->shard_bytes < 0) return TOO_BIG;
        if (IS(pw_k_matmul_quant_args, y)) return mul(floats(a->n_tokens, a->n), shards);
        if (IS(pw_k_matmul_quant_args, x)) return mul(floats(a->n_tokens, a->k), shards);
        uint64_t one = strided(rows_of(a->type, 1, a->k), (uint64_t)a->w_row_bytes, a->n);
        uint64_t before = mul((uint64_t)a->shard_bytes, shards - 1);
        return one == TOO_BIG || before == TOO_BIG || before > TOO_BIG - one ? TOO_BIG
                                                                             : before + one;
    }
    case PW_KERNEL_ROPE:
    case PW_KERNEL_ROPE_NEOX: {
        const pw_k_rope_args *a = p;
        if (IS(pw_k_rope_args, positions)) return int32s(a->n_tokens);
        if (IS(pw_k_rope_args, table)) return rope_table(a->max_pos, a->head_dim);
        if (a->n_heads < 0 || a->head_dim < 0 || a->n_heads > INT32_MAX || a->head_dim > INT32_MAX)
            return TOO_BIG;
        return floats(a->n_tokens, a->n_heads * a->head_dim);
    }
    case PW_KERNEL_SILU_AND_MUL: {
        const pw_k_silu_args *a = p;
        if (IS(pw_k_silu_args, out)) return floats(a->n_tokens, a->f);
        if (IS(pw_k_silu_args, a)) return mul(floats(a->n_tokens, a->f), 2);
        *nullable = true; /* b: unused */
        return 0;
    }
    case PW_KERNEL_SILU_MUL: {
        const pw_k_silu_args *a = p; /* n = n_tokens * f elements each */
        return floats(a->n_tokens, a->f);
    }
    case PW_KERNEL_ADD: return floats(1, ((const pw_k_add_args *)p)->n);
    case PW_KERNEL_ARGMAX: {
        const pw_k_argmax_args *a = p;
        if (IS(pw_k_argmax_args, out)) return int32s(a->n_tokens);
        return floats(a->n_tokens, a->vocab);
    }
    case PW_KERNEL_ATTENTION: {
        const pw_k_attention_args *a = p;
        if (IS(pw_k_attention_args, meta)) return sizeof(pw_attn_meta);
        if (IS(pw_k_attention_args, q)) return floats(a->n_tokens, a->q_stride);
        if (IS(pw_k_attention_args, k) || IS(pw_k_attention_args, v))
            return floats(a->n_tokens, a->kv_stride);
        if (IS(pw_k_attention_args, out)) {
            if (a->n_heads < 0 || a->head_dim < 0 || a->n_heads > INT32_MAX ||
                a->head_dim > INT32_MAX)
                return TOO_BIG;
            return floats(a->n_tokens, a->n_heads * a->head_dim);
        }
        return 0; /* the K and V caches: the block size is the metadata's */
    }
    case PW_KERNEL_SUM_RMS_NORM: {
        const pw_k_sum_rms_norm_args *a = p;
        if (IS(pw_k_sum_rms_norm_args, w)) return floats(1, a->dim);
        return floats(a->n_tokens, a->dim);
    }
    case PW_KERNEL_QKV_ROPE: {
        const pw_k_qkv_rope_args *a = p;
        if (a->n_heads < 0 || a->n_kv_heads < 0 || a->head_dim < 0 || a->n_heads > INT32_MAX ||
            a->n_kv_heads > INT32_MAX || a->head_dim > INT32_MAX)
            return TOO_BIG;
        int64_t qw = a->n_heads * a->head_dim, kw = a->n_kv_heads * a->head_dim;
        if (IS(pw_k_qkv_rope_args, q)) return floats(a->n_tokens, qw);
        if (IS(pw_k_qkv_rope_args, k) || IS(pw_k_qkv_rope_args, v)) return floats(a->n_tokens, kw);
        if (IS(pw_k_qkv_rope_args, x)) return floats(a->n_tokens, a->dim);
        if (IS(pw_k_qkv_rope_args, wq)) return rows_of(a->tq, qw, a->dim);
        if (IS(pw_k_qkv_rope_args, wk)) return rows_of(a->tk, kw, a->dim);
        if (IS(pw_k_qkv_rope_args, wv)) return rows_of(a->tv, kw, a->dim);
        if (IS(pw_k_qkv_rope_args, positions)) return int32s(a->n_tokens);
        if (IS(pw_k_qkv_rope_args, rope_table)) return rope_table(a->max_pos, a->head_dim);
        *nullable = true;
        return SCRATCH(a->n_tokens, qw, kw, a->dim);
    }
    case PW_KERNEL_GATE_UP_SILU: {
        const pw_k_gate_up_silu_args *a = p;
        if (IS(pw_k_gate_up_silu_args, x)) return floats(a->n_tokens, a->dim);
        if (IS(pw_k_gate_up_silu_args, w_gate)) return rows_of(a->t_gate, a->f, a->dim);
        if (IS(pw_k_gate_up_silu_args, w_up)) return rows_of(a->t_up, a->f, a->dim);
        if (IS(pw_k_gate_up_silu_args, scratch)) {
            *nullable = true;
            return SCRATCH(a->n_tokens, a->f, a->dim);
        }
        return floats(a->n_tokens, a->f); /* out, up */
    }
    case PW_KERNEL_GELU_MUL: return floats(1, ((const pw_k_gelu_mul_args *)p)->n);
    case PW_KERNEL_HEAD_NORM_ROPE: {
        const pw_k_head_norm_rope_args *a = p;
        if (IS(pw_k_head_norm_rope_args, w)) return floats(1, a->head_dim);
        if (IS(pw_k_head_norm_rope_args, positions)) return int32s(a->n_tokens);
        if (IS(pw_k_head_norm_rope_args, table)) return rope_table(a->max_pos, a->head_dim);
        if (a->n_heads < 0 || a->head_dim < 0 || a->n_heads > INT32_MAX || a->head_dim > INT32_MAX)
            return TOO_BIG;
        return floats(a->n_tokens, a->n_heads * a->head_dim);
    }
    case PW_KERNEL_SCALE:
    case PW_KERNEL_SOFTCAP: return floats(1, ((const pw_k_scale_args *)p)->n);
    case PW_KERNEL_LM_HEAD: {
        const pw_k_lm_head_args *a = p;
        if (IS(pw_k_lm_head_args, y)) return floats(a->n_tokens, a->n);
        if (IS(pw_k_lm_head_args, x)) return floats(a->n_tokens, a->k);
        if (IS(pw_k_lm_head_args, w)) return rows_of(a->type, a->n, a->k);
        *nullable = true; /* meta: every row; scratch: a set that needs none */
        if (IS(pw_k_lm_head_args, meta)) return sizeof(pw_attn_meta);
        return SCRATCH(a->n_tokens, a->n, a->k);
    }
    case PW_KERNEL_SELECT_ROWS: {
        const pw_k_select_rows_args *a = p;
        if (IS(pw_k_select_rows_args, meta)) {
            *nullable = true;
            return sizeof(pw_attn_meta);
        }
        return floats(a->n_tokens, a->width);
    }
    case PW_KERNEL_BIAS_ADD: {
        const pw_k_bias_add_args *a = p;
        if (IS(pw_k_bias_add_args, bias)) return floats(1, a->n);
        return floats(a->n_tokens, a->n);
    }
    case PW_KERNEL_SLICE_COLS: {
        const pw_k_slice_cols_args *a = p;
        if (IS(pw_k_slice_cols_args, x)) return floats(a->n_tokens, a->x_cols);
        return floats(a->n_tokens, a->width);
    }
    case PW_KERNEL_ALL_REDUCE_SHARDS: {
        const pw_k_all_reduce_shards_args *a = p;
        if (IS(pw_k_all_reduce_shards_args, out)) return floats(a->n_tokens, a->n);
        if (IS(pw_k_all_reduce_shards_args, partials))
            return mul(floats(a->n_tokens, a->n), a->local_shards);
        *nullable = true; /* gather: one rank */
        return mul(floats(a->n_tokens, a->n), pw_tp_gather_shards(a->n_shards, a->shard_unit));
    }
    case PW_KERNEL_EMBEDDING_VOCAB: {
        const pw_k_embedding_vocab_args *a = p;
        if (IS(pw_k_embedding_vocab_args, ids)) return int32s(a->n_tokens);
        if (IS(pw_k_embedding_vocab_args, table)) return rows_of(a->type, a->rows, a->dim);
        if (IS(pw_k_embedding_vocab_args, gather))
            return mul(floats(a->n_tokens, a->dim), a->ranks);
        return floats(a->n_tokens, a->dim);
    }
    case PW_KERNEL_GATHER_VOCAB: {
        const pw_k_gather_vocab_args *a = p;
        if (IS(pw_k_gather_vocab_args, local)) return floats(a->n_tokens, a->local_cols);
        if (IS(pw_k_gather_vocab_args, meta)) {
            *nullable = true; /* every row */
            return sizeof(pw_attn_meta);
        }
        return floats(a->n_tokens, a->vocab);
    }
    case PW_KERNEL_COUNT_: break;
    }
    return 0;
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

uint64_t pw_kernel_word_extent(const pw_kernel *k, const void *args, int word, bool *nullable) {
    *nullable = false;
    if (!k || !k->args || word < 0 || word >= k->args->n_addresses) return 0;
    for (int id = 0; id < PW_KERNEL_COUNT_; id++)
        if (k->args == &pw_kernel_arg_tables[id])
            return extent(k, (pw_kernel_id)id, args, k->args->addresses[word], nullable);
    return 0;
}
