/* The kernels' launch ABI: the argument struct of every kernel in the op
 * table (ops/op_table.h), shared by every kernel set (src/ops/cpu,
 * src/ops/cuda) and by the ops layer that packs them. A pw_launch copies
 * the struct at launch or at capture and replays it verbatim, so it holds
 * only shape constants and pointers (device pointers on a device stream);
 * anything that changes per step is read through a pointer to a persistent
 * buffer. ops/cpu/kernels.h documents what each kernel computes.
 *
 * No struct has padding: where alignment would leave a hole, an explicit
 * zero_pad field fills it, which initializers set to 0. Recorded argument
 * bytes are then fully defined, so distinct-piece capture can compare a
 * patched recording with a real one byte for byte and the graph cache
 * writes the same file twice (padding bytes of an automatic struct are
 * unspecified: under -O0 they held stack garbage and a patched attention
 * launch differed from a real one). -Wpadded as an error below keeps it so. */
#ifndef PW_OPS_KERNEL_ARGS_H
#define PW_OPS_KERNEL_ARGS_H

#include "piecewise.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A padded struct is a compile error here (see the top); nvcc's front end
 * is left out, the host compilers check the same definitions. */
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"
#endif

typedef struct pw_k_embedding_args {
    float *out;           /* [n_tokens][dim] */
    const int32_t *ids;   /* [n_tokens], persistent */
    const float *table;   /* [vocab][dim] */
    int64_t n_tokens, vocab, dim;
} pw_k_embedding_args;

typedef struct pw_k_embedding_quant_args {
    float *out;            /* [n_tokens][dim] */
    const int32_t *ids;    /* [n_tokens], persistent */
    const void *table;     /* [vocab][dim / 32] blocks of type */
    int64_t n_tokens, vocab, dim;
    pw_dtype type;
    int32_t zero_pad;     /* always 0: no padding bytes (see the top) */
} pw_k_embedding_quant_args;

typedef struct pw_k_rms_norm_args {
    float *y;           /* [n_tokens][dim] */
    float *residual;    /* [n_tokens][dim]; only for the fused add variant */
    const float *x;     /* [n_tokens][dim] */
    const float *w;     /* [dim] */
    int64_t n_tokens, dim;
    float eps;
    int32_t zero_pad;     /* always 0: no padding bytes (see the top) */
} pw_k_rms_norm_args;

typedef struct pw_k_matmul_args {
    float *y;          /* [n_tokens][n] */
    const float *x;    /* [n_tokens][k] */
    const float *w;    /* [n][k] */
    float *scratch;    /* persistent, pw_k_matmul_scratch_floats() floats, or NULL */
    int64_t n_tokens, n, k;
} pw_k_matmul_args;

typedef struct pw_k_matmul_quant_args {
    float *y;          /* [n_tokens][n] */
    const float *x;    /* [n_tokens][k] */
    const void *w;     /* [n][k / block] blocks of type */
    int64_t n_tokens, n, k;
    pw_dtype type;     /* a type pw_k_quant_supported takes */
    int32_t zero_pad;     /* always 0: no padding bytes (see the top) */
} pw_k_matmul_quant_args;

typedef struct pw_k_rope_args {
    float *out;                 /* [n_tokens][n_heads*head_dim]; may equal x */
    const float *x;             /* [n_tokens][n_heads*head_dim] */
    const int32_t *positions;   /* [n_tokens], persistent */
    const float *table;         /* pw_k_rope_table layout */
    int64_t n_tokens, n_heads, head_dim, max_pos;
} pw_k_rope_args;

typedef struct pw_k_silu_args {
    float *out;          /* [n_tokens][f] (silu_mul: n elements) */
    const float *a;      /* silu_and_mul: gate_up [n_tokens][2f]; silu_mul: a [n] */
    const float *b;      /* silu_mul only: [n] */
    int64_t n_tokens, f; /* silu_mul: n = n_tokens * f */
} pw_k_silu_args;

typedef struct pw_k_add_args {
    float *out;
    const float *a, *b;
    int64_t n;
} pw_k_add_args;

typedef struct pw_k_argmax_args {
    int32_t *out;          /* [n_tokens] */
    const float *logits;   /* [n_tokens][vocab] */
    int64_t n_tokens, vocab;
} pw_k_argmax_args;

/* Per-step metadata. The engine rewrites the buffers these pointers name
 * before every step; the struct itself lives in persistent memory and the
 * attention args hold a pointer to it, so a replayed graph sees each step's
 * values. */
typedef struct pw_attn_meta {
    const int32_t *positions;    /* [T] position of token t in its sequence */
    const int32_t *slot_mapping; /* [T] cache slot to write token t into; -1 = padding */
    const int32_t *token_seq;    /* [T] row of block_tables for token t */
    const int32_t *block_tables; /* [max_seqs][max_blocks_per_seq] physical block ids */
    int32_t max_blocks_per_seq;
    int32_t block_size;
    /* The rows whose logits the step samples from (each request's last
     * scheduled token), ascending, and how many: the LM head computes only
     * those (lm_head, select_rows). NULL: every row. */
    const int32_t *sample_rows;  /* [max_tokens] */
    const int32_t *n_sample_rows; /* [1] */
} pw_attn_meta;

/* Positions per block of scores computed before one softmax rescale; the
 * boundaries are fixed (multiples of this from position 0), so the result
 * for a token never depends on its batch. */
#define PW_K_ATTN_SCORE_CHUNK 256

typedef struct pw_k_attention_args {
    float *out;                /* [n_tokens][n_heads*head_dim], written (padding rows zeroed) */
    const float *q;            /* [n_tokens][q_stride], heads at q + h*head_dim */
    const float *k, *v;        /* [n_tokens][kv_stride] */
    float *k_cache, *v_cache;  /* [num_blocks][block_size][n_kv_heads][head_dim] */
    const pw_attn_meta *meta;  /* persistent */
    int64_t n_tokens, n_heads, n_kv_heads, head_dim;
    int64_t q_stride, kv_stride; /* row strides in elements */
    int64_t num_blocks, max_seqs;
    /* Sliding window: a token at position p attends to positions
     * (p - window, p] only; 0 attends to all of 0..p. A launch constant:
     * what varies per step (p) is read from meta->positions. */
    int64_t window;
    float scale;               /* score scale; 0: 1/sqrt(head_dim) */
    int32_t zero_pad;     /* always 0: no padding bytes (see the top) */
} pw_k_attention_args;

typedef struct pw_k_sum_rms_norm_args {
    float *y, *sum;       /* [n_tokens][dim] */
    const float *a, *b;   /* [n_tokens][dim] */
    const float *w;       /* [dim] */
    int64_t n_tokens, dim;
    float eps;
    int32_t zero_pad;     /* always 0: no padding bytes (see the top) */
} pw_k_sum_rms_norm_args;

typedef struct pw_k_qkv_rope_args {
    float *q, *k, *v;           /* [n_tokens][n_heads*head_dim], [n_tokens][n_kv_heads*head_dim] x2 */
    const float *x;             /* [n_tokens][dim] */
    const void *wq, *wk, *wv;   /* [rows][dim] of their types */
    pw_dtype tq, tk, tv;
    int32_t zero_pad;     /* always 0: no padding bytes (see the top) */
    float *scratch;             /* persistent, the largest pw_k_matmul_any_scratch_floats, or NULL */
    const int32_t *positions;   /* [n_tokens], persistent */
    const float *rope_table;    /* pw_k_rope_table layout */
    int64_t n_tokens, dim, n_heads, n_kv_heads, head_dim, max_pos;
} pw_k_qkv_rope_args;

typedef struct pw_k_gate_up_silu_args {
    float *out;                 /* [n_tokens][f] */
    const float *x;             /* [n_tokens][dim] */
    const void *w_gate, *w_up;  /* [f][dim] of their types */
    pw_dtype t_gate, t_up;
    float *up;                  /* persistent scratch, [n_tokens][f] */
    float *scratch;             /* persistent, the larger pw_k_matmul_any_scratch_floats, or NULL */
    int64_t n_tokens, dim, f;
} pw_k_gate_up_silu_args;

/* out = gelu_tanh(a) * b over n elements (GeGLU); out may alias a or b. */
typedef struct pw_k_gelu_mul_args {
    float *out;
    const float *a, *b;
    int64_t n;
} pw_k_gelu_mul_args;

/* In place on x [n_tokens][n_heads*head_dim]: each head's row RMS-normed
 * with w [head_dim], then rotated NeoX style (pair i is (i, i + head_dim/2))
 * by the rope table (pw_k_rope_table layout) at positions[t]. */
typedef struct pw_k_head_norm_rope_args {
    float *x;
    const float *w;             /* [head_dim] */
    const int32_t *positions;   /* [n_tokens], persistent */
    const float *table;         /* pw_k_rope_table layout */
    int64_t n_tokens, n_heads, head_dim, max_pos;
    float eps;
    int32_t zero_pad;     /* always 0: no padding bytes (see the top) */
} pw_k_head_norm_rope_args;

/* scale: out = x * s; softcap: out = s * tanh(x / s). out may alias x. */
typedef struct pw_k_scale_args {
    float *out;
    const float *x;
    int64_t n;
    float s;
    int32_t zero_pad;     /* always 0: no padding bytes (see the top) */
} pw_k_scale_args;

/* The LM head on the sampled rows: y[i] = x[rows[i]] w^T for the first
 * n = *meta->n_sample_rows entries of meta->sample_rows (every row when
 * meta or its list is NULL), then softcap(., softcap) when softcap > 0.
 * Rows of y past n are not written. The count is read at run time, so one
 * recorded launch serves every step of its padded size. scratch holds the
 * gathered rows, [n_tokens][k], then the matmul's own scratch. */
typedef struct pw_k_lm_head_args {
    float *y;                  /* [n_tokens][n], first n_sample rows written */
    const float *x;            /* [n_tokens][k] */
    const void *w;             /* [n][k] of type */
    float *scratch;            /* pw_k_lm_head_scratch_floats() floats */
    const pw_attn_meta *meta;  /* persistent; NULL: every row */
    int64_t n_tokens, n, k;
    pw_dtype type;
    float softcap;             /* 0: none */
} pw_k_lm_head_args;

/* out[i] = x[rows[i]] for the sampled rows (as lm_head), zeros for the
 * rest of the n_tokens rows: the unfused LM head's gather. */
typedef struct pw_k_select_rows_args {
    float *out;                /* [n_tokens][width] */
    const float *x;            /* [n_tokens][width] */
    const pw_attn_meta *meta;  /* persistent; NULL: every row */
    int64_t n_tokens, width;
} pw_k_select_rows_args;

/* ---- pointer fields: which argument words are addresses --------------------------------
 *
 * Distinct-piece capture (src/model/engine_distinct.c) patches the addresses
 * of one layer's recorded launches into another layer's, and a graph stored
 * on disk keeps them as (region, offset): both need to know exactly which
 * bytes of a launch's arguments are pointers. PW_K_POINTERS_<KERNEL>(F)
 * calls F(args struct, field) for every pointer field of that kernel's
 * struct; PW_KERNEL_ARG_LAYOUTS(X) calls X(KERNEL, args struct) for every
 * kernel of the op table. A field added to a struct above that holds an
 * address must be listed here; a patched graph that missed one differs from
 * a real capture, which verify_capture reports. */
#define PW_K_POINTERS_EMBEDDING(F)                                                             \
    F(pw_k_embedding_args, out) F(pw_k_embedding_args, ids) F(pw_k_embedding_args, table)
#define PW_K_POINTERS_EMBEDDING_QUANT(F)                                                       \
    F(pw_k_embedding_quant_args, out) F(pw_k_embedding_quant_args, ids)                        \
    F(pw_k_embedding_quant_args, table)
#define PW_K_POINTERS_RMS_NORM(F)                                                              \
    F(pw_k_rms_norm_args, y) F(pw_k_rms_norm_args, residual) F(pw_k_rms_norm_args, x)          \
    F(pw_k_rms_norm_args, w)
#define PW_K_POINTERS_ADD_RMS_NORM(F) PW_K_POINTERS_RMS_NORM(F)
#define PW_K_POINTERS_MATMUL(F)                                                                \
    F(pw_k_matmul_args, y) F(pw_k_matmul_args, x) F(pw_k_matmul_args, w)                       \
    F(pw_k_matmul_args, scratch)
#define PW_K_POINTERS_MATMUL_QUANT(F)                                                          \
    F(pw_k_matmul_quant_args, y) F(pw_k_matmul_quant_args, x) F(pw_k_matmul_quant_args, w)
#define PW_K_POINTERS_ROPE(F)                                                                  \
    F(pw_k_rope_args, out) F(pw_k_rope_args, x) F(pw_k_rope_args, positions)                  \
    F(pw_k_rope_args, table)
#define PW_K_POINTERS_SILU_AND_MUL(F)                                                          \
    F(pw_k_silu_args, out) F(pw_k_silu_args, a) F(pw_k_silu_args, b)
#define PW_K_POINTERS_SILU_MUL(F) PW_K_POINTERS_SILU_AND_MUL(F)
#define PW_K_POINTERS_ADD(F) F(pw_k_add_args, out) F(pw_k_add_args, a) F(pw_k_add_args, b)
#define PW_K_POINTERS_ARGMAX(F) F(pw_k_argmax_args, out) F(pw_k_argmax_args, logits)
#define PW_K_POINTERS_ATTENTION(F)                                                             \
    F(pw_k_attention_args, out) F(pw_k_attention_args, q) F(pw_k_attention_args, k)            \
    F(pw_k_attention_args, v) F(pw_k_attention_args, k_cache)                                 \
    F(pw_k_attention_args, v_cache) F(pw_k_attention_args, meta)
#define PW_K_POINTERS_SUM_RMS_NORM(F)                                                          \
    F(pw_k_sum_rms_norm_args, y) F(pw_k_sum_rms_norm_args, sum) F(pw_k_sum_rms_norm_args, a)   \
    F(pw_k_sum_rms_norm_args, b) F(pw_k_sum_rms_norm_args, w)
#define PW_K_POINTERS_QKV_ROPE(F)                                                              \
    F(pw_k_qkv_rope_args, q) F(pw_k_qkv_rope_args, k) F(pw_k_qkv_rope_args, v)                 \
    F(pw_k_qkv_rope_args, x) F(pw_k_qkv_rope_args, wq) F(pw_k_qkv_rope_args, wk)               \
    F(pw_k_qkv_rope_args, wv) F(pw_k_qkv_rope_args, scratch)                                  \
    F(pw_k_qkv_rope_args, positions) F(pw_k_qkv_rope_args, rope_table)
#define PW_K_POINTERS_GELU_MUL(F)                                                              \
    F(pw_k_gelu_mul_args, out) F(pw_k_gelu_mul_args, a) F(pw_k_gelu_mul_args, b)
#define PW_K_POINTERS_HEAD_NORM_ROPE(F)                                                        \
    F(pw_k_head_norm_rope_args, x) F(pw_k_head_norm_rope_args, w)                             \
    F(pw_k_head_norm_rope_args, positions) F(pw_k_head_norm_rope_args, table)
#define PW_K_POINTERS_LM_HEAD(F)                                                               \
    F(pw_k_lm_head_args, y) F(pw_k_lm_head_args, x) F(pw_k_lm_head_args, w)                    \
    F(pw_k_lm_head_args, scratch) F(pw_k_lm_head_args, meta)
#define PW_K_POINTERS_SELECT_ROWS(F)                                                           \
    F(pw_k_select_rows_args, out) F(pw_k_select_rows_args, x) F(pw_k_select_rows_args, meta)
#define PW_K_POINTERS_SCALE(F) F(pw_k_scale_args, out) F(pw_k_scale_args, x)
#define PW_K_POINTERS_SOFTCAP(F) PW_K_POINTERS_SCALE(F)
#define PW_K_POINTERS_GATE_UP_SILU(F)                                                          \
    F(pw_k_gate_up_silu_args, out) F(pw_k_gate_up_silu_args, x)                               \
    F(pw_k_gate_up_silu_args, w_gate) F(pw_k_gate_up_silu_args, w_up)                         \
    F(pw_k_gate_up_silu_args, up) F(pw_k_gate_up_silu_args, scratch)

/* clang-format off */
#define PW_KERNEL_ARG_LAYOUTS(X)                                                               \
    X(EMBEDDING,       pw_k_embedding_args)                                                    \
    X(EMBEDDING_QUANT, pw_k_embedding_quant_args)                                              \
    X(RMS_NORM,        pw_k_rms_norm_args)                                                     \
    X(ADD_RMS_NORM,    pw_k_rms_norm_args)                                                     \
    X(MATMUL,          pw_k_matmul_args)                                                       \
    X(MATMUL_QUANT,    pw_k_matmul_quant_args)                                                 \
    X(ROPE,            pw_k_rope_args)                                                         \
    X(SILU_AND_MUL,    pw_k_silu_args)                                                         \
    X(SILU_MUL,        pw_k_silu_args)                                                         \
    X(ADD,             pw_k_add_args)                                                          \
    X(ARGMAX,          pw_k_argmax_args)                                                       \
    X(ATTENTION,       pw_k_attention_args)                                                    \
    X(SUM_RMS_NORM,    pw_k_sum_rms_norm_args)                                                 \
    X(QKV_ROPE,        pw_k_qkv_rope_args)                                                     \
    X(GATE_UP_SILU,    pw_k_gate_up_silu_args)                                                 \
    X(GELU_MUL,        pw_k_gelu_mul_args)                                                     \
    X(HEAD_NORM_ROPE,  pw_k_head_norm_rope_args)                                               \
    X(SCALE,           pw_k_scale_args)                                                        \
    X(SOFTCAP,         pw_k_scale_args)                                                        \
    X(LM_HEAD,         pw_k_lm_head_args)                                                      \
    X(SELECT_ROWS,     pw_k_select_rows_args)
/* clang-format on */

#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
}
#endif

#endif
