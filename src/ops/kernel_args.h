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
#include "ops/op_table.h"

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

/* ---- the argument structs and their address words, declared once ---------------------
 *
 * Each kernel's argument struct is a field table, PW_K_FIELDS_<KERNEL>(A, V, S):
 * A(S, type, name) declares an address word (a pointer the kernel reads or
 * writes through), V(S, type, name) a value (a count, a constant, a dtype).
 * PW_K_ARGS_STRUCT makes the struct from the table, and the kernel-set
 * registry (ops/kernel_sets.c) makes from the same table the argument
 * layout every pw_kernel carries (pw_kernel.args: which bytes are
 * addresses), which relocation (include/piecewise/relocate.h) and the graph
 * cache read. There is no second list to keep: a field is an address or a
 * value where it is declared, and kernel_sets.c refuses at compile time a
 * value field whose type is not a number (so a pointer cannot be declared
 * as a value) and an address field that is one. */
#define PW_K_FIELD_(S, type, name) type name;
#define PW_K_ARGS_STRUCT(tname, FIELDS)                                                        \
    typedef struct tname {                                                                     \
        FIELDS(PW_K_FIELD_, PW_K_FIELD_, tname)                                                \
    } tname;

#define PW_K_FIELDS_EMBEDDING(A, V, S)                                                         \
    A(S, float *, out)         /* [n_tokens][dim] */                                           \
    A(S, const int32_t *, ids) /* [n_tokens], persistent */                                    \
    A(S, const float *, table) /* [vocab][dim] */                                              \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, vocab)                                                                       \
    V(S, int64_t, dim)
PW_K_ARGS_STRUCT(pw_k_embedding_args, PW_K_FIELDS_EMBEDDING)

#define PW_K_FIELDS_EMBEDDING_QUANT(A, V, S)                                                   \
    A(S, float *, out)         /* [n_tokens][dim] */                                           \
    A(S, const int32_t *, ids) /* [n_tokens], persistent */                                    \
    A(S, const void *, table)  /* [vocab][dim / 32] blocks of type */                          \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, vocab)                                                                       \
    V(S, int64_t, dim)                                                                         \
    V(S, pw_dtype, type)                                                                       \
    V(S, int32_t, zero_pad)    /* always 0: no padding bytes (see the top) */
PW_K_ARGS_STRUCT(pw_k_embedding_quant_args, PW_K_FIELDS_EMBEDDING_QUANT)

#define PW_K_FIELDS_RMS_NORM(A, V, S)                                                          \
    A(S, float *, y)        /* [n_tokens][dim] */                                              \
    A(S, float *, residual) /* [n_tokens][dim]; only for the fused add variant */              \
    A(S, const float *, x)  /* [n_tokens][dim] */                                              \
    A(S, const float *, w)  /* [dim] */                                                        \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, dim)                                                                         \
    V(S, float, eps)                                                                           \
    V(S, int32_t, zero_pad) /* always 0: no padding bytes (see the top) */
PW_K_ARGS_STRUCT(pw_k_rms_norm_args, PW_K_FIELDS_RMS_NORM)

#define PW_K_FIELDS_MATMUL(A, V, S)                                                            \
    A(S, float *, y)        /* [n_tokens][n] */                                                \
    A(S, const float *, x)  /* [n_tokens][k] */                                                \
    A(S, const float *, w)  /* [n][k], rows ldw floats apart */                                \
    A(S, float *, scratch)  /* persistent, pw_k_matmul_scratch_floats() floats, or NULL */     \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, n)                                                                           \
    V(S, int64_t, k)                                                                           \
    V(S, int64_t, ldw)      /* from one row of w to the next, in floats; 0: k (dense) */
PW_K_ARGS_STRUCT(pw_k_matmul_args, PW_K_FIELDS_MATMUL)

#define PW_K_FIELDS_MATMUL_QUANT(A, V, S)                                                      \
    A(S, float *, y)        /* [n_tokens][n] */                                                \
    A(S, const float *, x)  /* [n_tokens][k] */                                                \
    A(S, const void *, w)   /* [n][k / block] blocks of type, rows w_row_bytes apart */        \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, n)                                                                           \
    V(S, int64_t, k)                                                                           \
    V(S, pw_dtype, type)    /* a type pw_k_quant_supported takes */                            \
    V(S, int32_t, zero_pad) /* always 0: no padding bytes (see the top) */                     \
    V(S, int64_t, w_row_bytes) /* from one row of w to the next; 0: dense rows */              \
    V(S, int64_t, n_shards) /* 0 or 1: one product; S > 1: K-shards, below */                  \
    V(S, int64_t, shard_bytes) /* from shard s's weights to shard s + 1's */
/* With n_shards = S > 1 (op matmul_shards): y [S][n_tokens][n], x
 * [n_tokens][S * k], shard s's weights at w + s * shard_bytes, and y[s] =
 * x's columns [s k, (s + 1) k) times them (pw_k_matmul_quant_shards). */
PW_K_ARGS_STRUCT(pw_k_matmul_quant_args, PW_K_FIELDS_MATMUL_QUANT)

#define PW_K_FIELDS_ROPE(A, V, S)                                                              \
    A(S, float *, out)               /* [n_tokens][n_heads*head_dim]; may equal x */           \
    A(S, const float *, x)           /* [n_tokens][n_heads*head_dim] */                        \
    A(S, const int32_t *, positions) /* [n_tokens], persistent */                              \
    A(S, const float *, table)       /* pw_k_rope_table layout */                              \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, n_heads)                                                                     \
    V(S, int64_t, head_dim)                                                                    \
    V(S, int64_t, max_pos)
PW_K_ARGS_STRUCT(pw_k_rope_args, PW_K_FIELDS_ROPE)

#define PW_K_FIELDS_SILU(A, V, S)                                                              \
    A(S, float *, out)      /* [n_tokens][f] (silu_mul: n elements) */                         \
    A(S, const float *, a)  /* silu_and_mul: gate_up [n_tokens][2f]; silu_mul: a [n] */        \
    A(S, const float *, b)  /* silu_mul only: [n] */                                           \
    V(S, int64_t, n_tokens) /* silu_mul: n = n_tokens * f */                                   \
    V(S, int64_t, f)
PW_K_ARGS_STRUCT(pw_k_silu_args, PW_K_FIELDS_SILU)

#define PW_K_FIELDS_ADD(A, V, S)                                                               \
    A(S, float *, out)                                                                         \
    A(S, const float *, a)                                                                     \
    A(S, const float *, b)                                                                     \
    V(S, int64_t, n)
PW_K_ARGS_STRUCT(pw_k_add_args, PW_K_FIELDS_ADD)

#define PW_K_FIELDS_ARGMAX(A, V, S)                                                            \
    A(S, int32_t *, out)        /* [n_tokens] */                                               \
    A(S, const float *, logits) /* [n_tokens][vocab] */                                        \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, vocab)
PW_K_ARGS_STRUCT(pw_k_argmax_args, PW_K_FIELDS_ARGMAX)

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

#define PW_K_FIELDS_ATTENTION(A, V, S)                                                                 \
    A(S, float *, out)               /* [n_tokens][n_heads*head_dim], written (padding rows zeroed) */ \
    A(S, const float *, q)           /* [n_tokens][q_stride], heads at q + h*head_dim */               \
    A(S, const float *, k)           /* [n_tokens][kv_stride] */                                       \
    A(S, const float *, v)                                                                             \
    A(S, float *, k_cache)           /* [num_blocks][block_size][n_kv_heads][head_dim] */              \
    A(S, float *, v_cache)                                                                             \
    A(S, const pw_attn_meta *, meta) /* persistent */                                                  \
    V(S, int64_t, n_tokens)                                                                            \
    V(S, int64_t, n_heads)                                                                             \
    V(S, int64_t, n_kv_heads)                                                                          \
    V(S, int64_t, head_dim)                                                                            \
    V(S, int64_t, q_stride)          /* row strides in elements */                                     \
    V(S, int64_t, kv_stride)                                                                           \
    V(S, int64_t, num_blocks)                                                                          \
    V(S, int64_t, max_seqs)                                                                            \
    /* Sliding window: a token at position p attends to positions                                      \
     * (p - window, p] only; 0 attends to all of 0..p. A launch constant:                               \
     * what varies per step (p) is read from meta->positions. */                                        \
    V(S, int64_t, window)                                                                              \
    V(S, float, scale)               /* score scale; 0: 1/sqrt(head_dim) */                            \
    V(S, int32_t, zero_pad)          /* always 0: no padding bytes (see the top) */
PW_K_ARGS_STRUCT(pw_k_attention_args, PW_K_FIELDS_ATTENTION)

#define PW_K_FIELDS_SUM_RMS_NORM(A, V, S)                                                      \
    A(S, float *, y)        /* [n_tokens][dim] */                                              \
    A(S, float *, sum)                                                                         \
    A(S, const float *, a)  /* [n_tokens][dim] */                                              \
    A(S, const float *, b)                                                                     \
    A(S, const float *, w)  /* [dim] */                                                        \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, dim)                                                                         \
    V(S, float, eps)                                                                           \
    V(S, int32_t, zero_pad) /* always 0: no padding bytes (see the top) */
PW_K_ARGS_STRUCT(pw_k_sum_rms_norm_args, PW_K_FIELDS_SUM_RMS_NORM)

#define PW_K_FIELDS_QKV_ROPE(A, V, S)                                                                       \
    A(S, float *, q)                 /* [n_tokens][n_heads*head_dim], [n_tokens][n_kv_heads*head_dim] x2 */ \
    A(S, float *, k)                                                                                        \
    A(S, float *, v)                                                                                        \
    A(S, const float *, x)           /* [n_tokens][dim] */                                                  \
    A(S, const void *, wq)           /* [rows][dim] of their types */                                       \
    A(S, const void *, wk)                                                                                  \
    A(S, const void *, wv)                                                                                  \
    V(S, pw_dtype, tq)                                                                                      \
    V(S, pw_dtype, tk)                                                                                      \
    V(S, pw_dtype, tv)                                                                                      \
    V(S, int32_t, zero_pad)          /* always 0: no padding bytes (see the top) */                         \
    A(S, float *, scratch)           /* persistent, the largest pw_k_matmul_any_scratch_floats, or NULL */  \
    A(S, const int32_t *, positions) /* [n_tokens], persistent */                                           \
    A(S, const float *, rope_table)  /* pw_k_rope_table layout */                                           \
    V(S, int64_t, n_tokens)                                                                                 \
    V(S, int64_t, dim)                                                                                      \
    V(S, int64_t, n_heads)                                                                                  \
    V(S, int64_t, n_kv_heads)                                                                               \
    V(S, int64_t, head_dim)                                                                                 \
    V(S, int64_t, max_pos)
PW_K_ARGS_STRUCT(pw_k_qkv_rope_args, PW_K_FIELDS_QKV_ROPE)

#define PW_K_FIELDS_GATE_UP_SILU(A, V, S)                                                           \
    A(S, float *, out)         /* [n_tokens][f] */                                                  \
    A(S, const float *, x)     /* [n_tokens][dim] */                                                \
    A(S, const void *, w_gate) /* [f][dim] of their types */                                        \
    A(S, const void *, w_up)                                                                        \
    V(S, pw_dtype, t_gate)                                                                          \
    V(S, pw_dtype, t_up)                                                                            \
    A(S, float *, up)          /* persistent scratch, [n_tokens][f] */                              \
    A(S, float *, scratch)     /* persistent, the larger pw_k_matmul_any_scratch_floats, or NULL */ \
    V(S, int64_t, n_tokens)                                                                         \
    V(S, int64_t, dim)                                                                              \
    V(S, int64_t, f)
PW_K_ARGS_STRUCT(pw_k_gate_up_silu_args, PW_K_FIELDS_GATE_UP_SILU)

/* out = gelu_tanh(a) * b over n elements (GeGLU); out may alias a or b. */
#define PW_K_FIELDS_GELU_MUL(A, V, S)                                                          \
    A(S, float *, out)                                                                         \
    A(S, const float *, a)                                                                     \
    A(S, const float *, b)                                                                     \
    V(S, int64_t, n)
PW_K_ARGS_STRUCT(pw_k_gelu_mul_args, PW_K_FIELDS_GELU_MUL)

/* In place on x [n_tokens][n_heads*head_dim]: each head's row RMS-normed
 * with w [head_dim], then rotated NeoX style (pair i is (i, i + head_dim/2))
 * by the rope table (pw_k_rope_table layout) at positions[t]. */
#define PW_K_FIELDS_HEAD_NORM_ROPE(A, V, S)                                                    \
    A(S, float *, x)                                                                           \
    A(S, const float *, w)           /* [head_dim] */                                          \
    A(S, const int32_t *, positions) /* [n_tokens], persistent */                              \
    A(S, const float *, table)       /* pw_k_rope_table layout */                              \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, n_heads)                                                                     \
    V(S, int64_t, head_dim)                                                                    \
    V(S, int64_t, max_pos)                                                                     \
    V(S, float, eps)                                                                           \
    V(S, int32_t, zero_pad)          /* always 0: no padding bytes (see the top) */
PW_K_ARGS_STRUCT(pw_k_head_norm_rope_args, PW_K_FIELDS_HEAD_NORM_ROPE)

/* scale: out = x * s; softcap: out = s * tanh(x / s). out may alias x. */
#define PW_K_FIELDS_SCALE(A, V, S)                                                             \
    A(S, float *, out)                                                                         \
    A(S, const float *, x)                                                                     \
    V(S, int64_t, n)                                                                           \
    V(S, float, s)                                                                             \
    V(S, int32_t, zero_pad) /* always 0: no padding bytes (see the top) */
PW_K_ARGS_STRUCT(pw_k_scale_args, PW_K_FIELDS_SCALE)

/* The LM head on the sampled rows: y[i] = x[rows[i]] w^T for the first
 * n = *meta->n_sample_rows entries of meta->sample_rows (every row when
 * meta or its list is NULL), then softcap(., softcap) when softcap > 0.
 * Rows of y past n are not written. The count is read at run time, so one
 * recorded launch serves every step of its padded size. scratch holds the
 * gathered rows, [n_tokens][k], then the matmul's own scratch. */
#define PW_K_FIELDS_LM_HEAD(A, V, S)                                                           \
    A(S, float *, y)                 /* [n_tokens][n], first n_sample rows written */          \
    A(S, const float *, x)           /* [n_tokens][k] */                                       \
    A(S, const void *, w)            /* [n][k] of type */                                      \
    A(S, float *, scratch)           /* pw_k_lm_head_scratch_floats() floats */                \
    A(S, const pw_attn_meta *, meta) /* persistent; NULL: every row */                         \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, n)                                                                           \
    V(S, int64_t, k)                                                                           \
    V(S, pw_dtype, type)                                                                       \
    V(S, float, softcap)             /* 0: none */
PW_K_ARGS_STRUCT(pw_k_lm_head_args, PW_K_FIELDS_LM_HEAD)

/* out[i] = x[rows[i]] for the sampled rows (as lm_head), zeros for the
 * rest of the n_tokens rows: the unfused LM head's gather. */
#define PW_K_FIELDS_SELECT_ROWS(A, V, S)                                                       \
    A(S, float *, out)               /* [n_tokens][width] */                                   \
    A(S, const float *, x)           /* [n_tokens][width] */                                   \
    A(S, const pw_attn_meta *, meta) /* persistent; NULL: every row */                         \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, width)
PW_K_ARGS_STRUCT(pw_k_select_rows_args, PW_K_FIELDS_SELECT_ROWS)

/* bias_add: out[t][i] = x[t][i] + bias[i] for i < n (out may alias x). */
#define PW_K_FIELDS_BIAS_ADD(A, V, S)                                                          \
    A(S, float *, out)       /* [n_tokens][n] */                                               \
    A(S, const float *, x)   /* [n_tokens][n] */                                               \
    A(S, const float *, bias) /* [n] */                                                        \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, n)
PW_K_ARGS_STRUCT(pw_k_bias_add_args, PW_K_FIELDS_BIAS_ADD)

/* slice_cols: out[t][j] = x[t][col0 + j] for j < width: one K-shard of a
 * row-parallel product's input, contiguous for its matmul. */
#define PW_K_FIELDS_SLICE_COLS(A, V, S)                                                        \
    A(S, float *, out)       /* [n_tokens][width] */                                           \
    A(S, const float *, x)   /* [n_tokens][x_cols] */                                          \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, x_cols)                                                                      \
    V(S, int64_t, col0)                                                                        \
    V(S, int64_t, width)
PW_K_ARGS_STRUCT(pw_k_slice_cols_args, PW_K_FIELDS_SLICE_COLS)

/* all_reduce_shards: the tensor-parallel all-reduce of a row-parallel
 * product. Each rank holds the partial products of its shards
 * (ops/comm.h: pw_tp_shard_range of n_shards in units of shard_unit),
 * [its shards][n_tokens][n];
 * the kernel gathers every rank's into `gather` [n_shards][n_tokens][n]
 * and sums them in shard order, out = ((p0 + p1) + p2) + ..., so the
 * result does not depend on how many ranks there are. One rank: no
 * gather (it may be NULL); the sum reads partials. */
#define PW_K_FIELDS_ALL_REDUCE_SHARDS(A, V, S)                                                 \
    A(S, float *, out)            /* [n_tokens][n] */                                          \
    A(S, const float *, partials) /* [this rank's shards][n_tokens][n] */                      \
    A(S, float *, gather)         /* [n_shards][n_tokens][n], or NULL with one rank */          \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, n)                                                                           \
    V(S, int64_t, n_shards)                                                                    \
    V(S, int64_t, shard_unit)     /* shards a rank keeps together (ops/comm.h) */              \
    V(S, int64_t, local_shards)   /* this rank's, checked against the communicator */
PW_K_ARGS_STRUCT(pw_k_all_reduce_shards_args, PW_K_FIELDS_ALL_REDUCE_SHARDS)

/* embedding_vocab: the lookup of a table split by vocabulary rows across
 * the tensor-parallel ranks (rank r holds rows pw_tp_shard_range(vocab, 1)
 * of r). Each rank writes into `local` the rows of the ids it holds (zeros
 * for the others), every rank's `local` is gathered into `gather`
 * [ranks][n_tokens][dim], and each token takes its owner's row: a copy,
 * never a sum, so the bits are the unsplit lookup's. */
#define PW_K_FIELDS_EMBEDDING_VOCAB(A, V, S)                                                   \
    A(S, float *, out)         /* [n_tokens][dim] */                                           \
    A(S, const int32_t *, ids) /* [n_tokens], persistent */                                    \
    A(S, const void *, table)  /* [rows][dim] of type: this rank's vocabulary rows */          \
    A(S, float *, local)       /* [n_tokens][dim] */                                           \
    A(S, float *, gather)      /* [ranks][n_tokens][dim] */                                    \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, vocab)                                                                       \
    V(S, int64_t, rows)                                                                        \
    V(S, int64_t, dim)                                                                         \
    V(S, int64_t, ranks)                                                                       \
    V(S, pw_dtype, type)                                                                       \
    V(S, int32_t, zero_pad)    /* always 0: no padding bytes (see the top) */
PW_K_ARGS_STRUCT(pw_k_embedding_vocab_args, PW_K_FIELDS_EMBEDDING_VOCAB)

/* gather_vocab: the LM head split by vocabulary rows: every rank's logits
 * of its rows, local [n][local_cols] for the n sampled rows (lm_head's
 * count, read at run time), gathered and laid side by side into
 * out [n][vocab] in vocabulary order. */
#define PW_K_FIELDS_GATHER_VOCAB(A, V, S)                                                      \
    A(S, float *, out)               /* [n_tokens][vocab], first n rows written */             \
    A(S, const float *, local)       /* [n_tokens][local_cols] */                              \
    A(S, float *, gather)            /* [n_tokens * vocab] */                                  \
    A(S, const pw_attn_meta *, meta) /* persistent; NULL: every row */                         \
    V(S, int64_t, n_tokens)                                                                    \
    V(S, int64_t, vocab)                                                                       \
    V(S, int64_t, local_cols)
PW_K_ARGS_STRUCT(pw_k_gather_vocab_args, PW_K_FIELDS_GATHER_VOCAB)

/* Every kernel of the op table (ops/op_table.h) with its argument struct
 * and field table: X(KERNEL, args struct, field table). Kernels that share
 * a struct share its table. */
/* clang-format off */
#define PW_KERNEL_ARG_TABLES(X)                                                                \
    X(EMBEDDING, pw_k_embedding_args, PW_K_FIELDS_EMBEDDING)                                   \
    X(EMBEDDING_QUANT, pw_k_embedding_quant_args, PW_K_FIELDS_EMBEDDING_QUANT)                 \
    X(RMS_NORM, pw_k_rms_norm_args, PW_K_FIELDS_RMS_NORM)                                      \
    X(ADD_RMS_NORM, pw_k_rms_norm_args, PW_K_FIELDS_RMS_NORM)                                  \
    X(MATMUL, pw_k_matmul_args, PW_K_FIELDS_MATMUL)                                            \
    X(MATMUL_QUANT, pw_k_matmul_quant_args, PW_K_FIELDS_MATMUL_QUANT)                          \
    X(ROPE, pw_k_rope_args, PW_K_FIELDS_ROPE)                                                  \
    X(SILU_AND_MUL, pw_k_silu_args, PW_K_FIELDS_SILU)                                          \
    X(SILU_MUL, pw_k_silu_args, PW_K_FIELDS_SILU)                                              \
    X(ADD, pw_k_add_args, PW_K_FIELDS_ADD)                                                     \
    X(ARGMAX, pw_k_argmax_args, PW_K_FIELDS_ARGMAX)                                            \
    X(ATTENTION, pw_k_attention_args, PW_K_FIELDS_ATTENTION)                                   \
    X(SUM_RMS_NORM, pw_k_sum_rms_norm_args, PW_K_FIELDS_SUM_RMS_NORM)                          \
    X(QKV_ROPE, pw_k_qkv_rope_args, PW_K_FIELDS_QKV_ROPE)                                      \
    X(GATE_UP_SILU, pw_k_gate_up_silu_args, PW_K_FIELDS_GATE_UP_SILU)                          \
    X(GELU_MUL, pw_k_gelu_mul_args, PW_K_FIELDS_GELU_MUL)                                      \
    X(HEAD_NORM_ROPE, pw_k_head_norm_rope_args, PW_K_FIELDS_HEAD_NORM_ROPE)                    \
    X(SCALE, pw_k_scale_args, PW_K_FIELDS_SCALE)                                               \
    X(SOFTCAP, pw_k_scale_args, PW_K_FIELDS_SCALE)                                             \
    X(LM_HEAD, pw_k_lm_head_args, PW_K_FIELDS_LM_HEAD)                                         \
    X(SELECT_ROWS, pw_k_select_rows_args, PW_K_FIELDS_SELECT_ROWS)                             \
    X(ROPE_NEOX, pw_k_rope_args, PW_K_FIELDS_ROPE)                                             \
    X(BIAS_ADD, pw_k_bias_add_args, PW_K_FIELDS_BIAS_ADD)                                      \
    X(SLICE_COLS, pw_k_slice_cols_args, PW_K_FIELDS_SLICE_COLS)                                \
    X(ALL_REDUCE_SHARDS, pw_k_all_reduce_shards_args, PW_K_FIELDS_ALL_REDUCE_SHARDS)          \
    X(EMBEDDING_VOCAB, pw_k_embedding_vocab_args, PW_K_FIELDS_EMBEDDING_VOCAB)                 \
    X(GATHER_VOCAB, pw_k_gather_vocab_args, PW_K_FIELDS_GATHER_VOCAB)
/* clang-format on */

#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC diagnostic pop
#endif

/* The argument layout of every kernel id (ops/kernel_sets.c), generated from
 * the field tables; PW_K_ARGS(KERNEL) is the one a kernel of that id
 * carries in its pw_kernel.args. */
extern const pw_kernel_args pw_kernel_arg_tables[PW_KERNEL_COUNT_];
#define PW_K_ARGS(id) (&pw_kernel_arg_tables[PW_KERNEL_##id])

/* What a launch touches through each address word (ops/kernel_extents.c):
 * every layout's pw_kernel_args.extent. */
uint64_t pw_kernel_word_extent(const pw_kernel *k, const void *args, int word, bool *nullable);

#ifdef __cplusplus
}
#endif

#endif
