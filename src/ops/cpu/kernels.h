/* CPU kernels for the Llama workload (f32 activations).
 *
 * Conventions
 *   - Activations are row-major [T][width]; T is the (padded) token count.
 *   - A weight W of shape [N][K] is stored row-major as in GGUF/ggml
 *     (ne0 = K), so a matmul computes y[t][n] = sum_k x[t][k] * W[n][k].
 *   - Every kernel is batch-invariant: row t of an output depends only on
 *     row t of the inputs (and on the weights / KV cache), bit for bit,
 *     whatever T is and whatever the other rows hold. docs/kernels.md gives
 *     the argument for each kernel.
 *
 * Each kernel exists twice: as a plain C function (pw_k_*) and as a
 * pw_kernel (pw_kernel_*) taking a pointer to a documented args struct so
 * it can be launched with pw_launch and recorded into a device graph.
 * Argument blocks are copied at capture and replayed verbatim, so they
 * hold only shape constants and pointers. Anything that changes from step
 * to step (positions, slot mapping, block tables, token ids) is read
 * through a pointer to a persistent buffer. */
#ifndef PW_KERNELS_H
#define PW_KERNELS_H

#include "piecewise.h"
#include "ops/kernel_args.h"

#include <stdint.h>

/* ---- threads ------------------------------------------------------------- */

/* Work on items [begin, end) of a split job. */
typedef void (*pw_k_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Threads the kernels split work across: pw_get_num_threads(), at least 1.
 * The worker pool grows to the largest count a job has asked for. */
int pw_k_parallel_threads(void);
/* Runs fn over [0, n) split into contiguous ranges (four per thread,
 * the first ones largest, or one per item when n is smaller: parallel.c)
 * that the calling thread and the
 * workers claim as they become free, so a preempted thread holds up only
 * the range it took; returns when all are done. Runs fn(ctx, 0, n) on the
 * calling thread when one thread is set or another job is in flight.
 * Kernels split only work whose elements are computed by the same code
 * whatever the split, so the thread count never changes a bit. */
void pw_k_parallel_for(int64_t n, pw_k_range_fn fn, void *ctx);
/* pw_k_parallel_for over columns [0, n) cut only at multiples of `group`:
 * fn gets column ranges [j0, j1) (the matmuls' split by groups of 8). */
void pw_k_parallel_cols(int64_t n, int64_t group, pw_k_range_fn fn, void *ctx);
/* Multiply-adds from which a matmul is split across threads, and tokens
 * from which attention is: below these, waking workers costs more than it
 * saves. */
#define PW_K_PARALLEL_MIN_MACS (128 * 1024)
#define PW_K_PARALLEL_MIN_TOKENS 2
/* The matmuls hand columns to threads in groups of this many (the 1 x 8
 * tile's width). */
#define PW_K_COL_GROUP 8
/* True when an n_tokens x n x k product is split across threads by column
 * groups (the quantized matmuls' rule; pw_k_matmul_own checks the thread
 * count inside its split). */
static inline bool pw_k_split_cols(int64_t n_tokens, int64_t n, int64_t k) {
    return n > PW_K_COL_GROUP && n_tokens * n * k >= PW_K_PARALLEL_MIN_MACS &&
           pw_k_parallel_threads() > 1;
}
/* Decode attention (one token) splits its head groups across threads from
 * this many multiply-adds: lower than the matmuls' bound because the
 * workers are awake (spinning) between a layer's products, so the hand-off
 * costs about a microsecond; SmolLM2 splits from position 14, where its
 * attention had run on the calling thread alone up to position 112. */
#define PW_K_ATTN_PARALLEL_MIN_MACS (16 * 1024)

/* ---- embedding ----------------------------------------------------------- */

/* out[t] = table[ids[t]]; an id outside [0, vocab) yields a zero row. */
void pw_k_embedding(float *out, const int32_t *ids, const float *table, int64_t n_tokens,
                    int64_t vocab, int64_t dim);

extern const pw_kernel pw_kernel_embedding;

/* ---- rms_norm ----------------------------------------------------------------- */

/* y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w. y may alias x. */
void pw_k_rms_norm(float *y, const float *x, const float *w, int64_t n_tokens, int64_t dim,
                   float eps);
/* residual[t] += x[t]; y[t] = rms_norm(residual[t]) * w. y may alias x. */
void pw_k_add_rms_norm(float *y, float *residual, const float *x, const float *w,
                       int64_t n_tokens, int64_t dim, float eps);

extern const pw_kernel pw_kernel_rms_norm;
extern const pw_kernel pw_kernel_add_rms_norm;

/* ---- matmul ----------------------------------------------------------------------- */

/* Row tile of the OpenBLAS path: sgemm is only ever called with M equal to
 * this, so the library always runs the same code path for a given (N, K). */
#define PW_K_MATMUL_BLAS_TILE 16
/* Weights with at least this many elements (N*K) use OpenBLAS when the build
 * has it. The choice depends on the weight only, never on T, because the two
 * paths round differently. */
#define PW_K_MATMUL_BLAS_MIN_WEIGHT (1024 * 1024)

/* True when pw_k_matmul takes the OpenBLAS path for an [N][K] weight. */
bool pw_k_matmul_uses_blas(int64_t n, int64_t k);
/* Floats of scratch pw_k_matmul needs for this shape (0 when none): room to
 * zero-pad a partial last row tile for sgemm. */
size_t pw_k_matmul_scratch_floats(int64_t n_tokens, int64_t n, int64_t k);
/* y[T][N] = x[T][K] * W[N][K]^T. scratch: pw_k_matmul_scratch_floats()
 * floats, NULL when that is 0. y must not alias x. */
void pw_k_matmul(float *y, const float *x, const float *w, int64_t n_tokens, int64_t n,
                 int64_t k, float *scratch);
/* The same with W's rows ldw >= k floats apart: a column range of a wider
 * matrix, read in place (op matmul_shards). Same products, same bits, the
 * same scratch. */
void pw_k_matmul_strided(float *y, const float *x, const float *w, int64_t ldw, int64_t n_tokens,
                         int64_t n, int64_t k, float *scratch);
/* The portable register-blocked kernel alone (no BLAS whatever the shape). */
void pw_k_matmul_own(float *y, const float *x, const float *w, int64_t n_tokens, int64_t n,
                     int64_t k);

extern const pw_kernel pw_kernel_matmul;

/* ---- rope ---------------------------------------------------------------------------- */

/* Fills table [max_pos][head_dim/2][2] with (cos, sin) of
 * pos * theta^(-2i/head_dim), computed in double. head_dim must be even. */
void pw_k_rope_table(float *table, int64_t max_pos, int64_t head_dim, double theta);
/* out = x [n_tokens][n_heads*head_dim] with each adjacent pair
 * (x[2i], x[2i+1]) of every head rotated by the angle of positions[t] (ggml
 * "normal" mode, the GGUF llama layout). A position outside [0, max_pos)
 * copies its row unchanged. out may alias x (in place). */
void pw_k_rope(float *out, const float *x, const int32_t *positions, const float *table,
               int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t max_pos);

extern const pw_kernel pw_kernel_rope;

/* ---- silu_and_mul ----------------------------------------------------------------------- */

/* out[t][f] = silu(gate_up[t][f]) * gate_up[t][F + f]; gate_up is [T][2F]. */
void pw_k_silu_and_mul(float *out, const float *gate_up, int64_t n_tokens, int64_t f);
/* out[i] = silu(a[i]) * b[i] for i < n. out may alias a or b. */
void pw_k_silu_mul(float *out, const float *a, const float *b, int64_t n);

extern const pw_kernel pw_kernel_silu_and_mul;
extern const pw_kernel pw_kernel_silu_mul;

/* ---- add ------------------------------------------------------------------------------------ */

/* out[i] = a[i] + b[i]; out may alias a or b. */
void pw_k_add(float *out, const float *a, const float *b, int64_t n);

extern const pw_kernel pw_kernel_add;

/* ---- argmax --------------------------------------------------------------------------------- */

/* out[t] = index of the largest logits[t][v]; ties go to the lowest index,
 * NaNs are never chosen (a row of NaNs gives 0). */
void pw_k_argmax(int32_t *out, const float *logits, int64_t n_tokens, int64_t vocab);
/* The first index of the largest value of row[0..n) (NaN never wins; all
 * NaN gives 0; all -inf gives the first that is not NaN). */
int32_t pw_k_argmax_row(const float *row, int64_t n);

extern const pw_kernel pw_kernel_argmax;

/* ---- attention over a paged KV cache ------------------------------------------------------ */

/* (1) writes k[t], v[t] into slot_mapping[t] for every non-padding token;
 * (2) for every non-padding token t and head h, attends causally over
 * positions 0..positions[t] of its sequence (kv head h / (n_heads /
 * n_kv_heads)), scale 1/sqrt(head_dim), into out[t]. Padding rows, and rows
 * whose metadata is out of range (slot, position, sequence or block id),
 * are zero. */
void pw_k_attention(const pw_k_attention_args *a);
extern const pw_kernel pw_kernel_attention;

/* ---- quantized weights (matmul_quant.c) ------------------------------------------------- */

/* Weights and tables kept in ggml blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1) or super-blocks of 256 (Q4_K, Q5_K, Q6_K: matmul_kquant.c); layouts
 * in src/model/dequant.h; K (or dim) is a multiple of the block. Activations
 * stay f32. docs/kernels.md ("Quantized weights", "K-quants") gives the
 * operation sequences that make the matmul batch-invariant. */

/* True for the block types these kernels take. */
bool pw_k_quant_supported(pw_dtype type);

/* Q4_0x16 (PW_Q4_0X16): a Q4_0 weight [N][K] with its rows interleaved in
 * groups of 16, so that the tiles load 16 rows' nibbles and scales with a
 * few vector loads instead of transposing them. Group g (rows 16g..16g+15)
 * holds the same bytes as those 16 rows did, in place: per block b (288
 * bytes), the 16 rows' f16 scales, then 4 x 64 bytes, where 64-byte part i
 * holds bytes 4i..4i+3 of each row's 16 nibble bytes, row by row. Rows
 * past the last whole group (N % 16) stay Q4_0 rows. The products give
 * exactly the Q4_0 bits. */
#define PW_K_Q40X16_ROWS 16
#define PW_K_Q40X16_BLOCK_BYTES (16 * 18)
/* Writes src (n rows of k, Q4_0) into dst as Q4_0x16, and back; dst and
 * src do not overlap. */
void pw_k_q4_0_interleave(void *dst, const void *src, int64_t n, int64_t k);
void pw_k_q4_0_deinterleave(void *dst, const void *src, int64_t n, int64_t k);

/* y[T][N] = x[T][K] * W[N][K]^T, W a row-major [N][K] array of blocks of
 * `type`. No scratch; y must not alias x. */
void pw_k_matmul_quant(float *y, const float *x, const void *w, pw_dtype type,
                       int64_t n_tokens, int64_t n, int64_t k);
/* The same with W's rows wrow bytes apart (wrow >= a row's own bytes): a
 * block-aligned column range of a wider matrix, read in place. Q4_0x16: a
 * group of 16 rows is 16 * wrow bytes (so a column range of whole groups
 * only: n % 16 == 0 unless wrow is dense). Same products, same bits. */
void pw_k_matmul_quant_strided(float *y, const float *x, const void *w, int64_t wrow,
                               pw_dtype type, int64_t n_tokens, int64_t n, int64_t k);
/* The K-shards of one product (op matmul_shards): y[s][T][N] = x_s W_s^T
 * for s < shards, x_s columns [s k, (s + 1) k) of x [T][shards * k], W_s
 * at w + s * shard_bytes with rows wrow bytes apart (as
 * pw_k_matmul_quant_strided). Each shard's activations are quantized once
 * and the shards run over the same output columns in turn (one row: each
 * tile's few rows across every shard; a batch: runs of 1024 rows), so each
 * weight row is read whole, once; every output is the strided product's. */
void pw_k_matmul_quant_shards(float *y, const float *x, const void *w, int64_t wrow,
                              size_t shard_bytes, pw_dtype type, int64_t n_tokens, int64_t n,
                              int64_t k, int64_t shards);

extern const pw_kernel pw_kernel_matmul_quant;

/* Several products of one x: the activation rows are quantized once and
 * one split over threads covers all their columns (one hand-off instead of
 * one per product). Every output element is the one pw_k_matmul_quant
 * gives, bit for bit: the rows are the same (the quantizer depends on the
 * weight type only through the fold that Q4_0 and Q4_1 share), and each
 * column follows the documented sequence whatever range computes it. */
#define PW_K_QUANT_MAX_PARTS 4
/* True when the n types (n <= PW_K_QUANT_MAX_PARTS) take the same
 * activation rows: all Q8_0, or all Q4_0 / Q4_1. */
bool pw_k_quant_share_activations(const pw_dtype *types, int n);
/* One product of such a group: y[T][n] = x W^T. */
typedef struct pw_k_quant_part {
    float *y;
    const void *w;
    pw_dtype type;
    int64_t n;
} pw_k_quant_part;
/* parts[i].y = x W_i^T for every part (parts whose types do not share
 * activations, or more than PW_K_QUANT_MAX_PARTS, are multiplied one by
 * one with pw_k_matmul_quant: the same bits, without the saving). */
void pw_k_matmul_quant_parts(const pw_k_quant_part *parts, int n_parts, const float *x,
                             int64_t n_tokens, int64_t k);
/* out = silu(x Wg^T) * (x Wu^T), up = x Wu^T (scratch, [T][f]): the
 * result of pw_k_matmul_quant twice and pw_k_silu_mul, each thread taking
 * the silu of the columns it computed (types that do not share activations
 * run those three kernels). out must not alias up or x. */
void pw_k_matmul_quant_silu(float *out, float *up, const float *x, const void *w_gate,
                            pw_dtype t_gate, const void *w_up, pw_dtype t_up, int64_t n_tokens,
                            int64_t f, int64_t k);

/* out[t] = table[ids[t]] dequantized with pw_dequantize's arithmetic (the
 * same bits); an id outside [0, vocab) yields a zero row. */
void pw_k_embedding_quant(float *out, const int32_t *ids, const void *table, pw_dtype type,
                          int64_t n_tokens, int64_t vocab, int64_t dim);

extern const pw_kernel pw_kernel_embedding_quant;

/* ---- fused launches (fused.c) ------------------------------------------------------------- */

/* Each runs, in one launch, exactly the kernels it replaces in the same
 * order on the same values, so its outputs are bit for bit those of the
 * separate launches (and batch-invariant because they are). Weights may be
 * f32 or a block type pw_k_quant_supported() takes, each independently. */

/* sum = a + b; y = rms_norm(sum) * w (pw_k_add then pw_k_rms_norm). sum may
 * alias a or b; y must not alias sum. */
void pw_k_sum_rms_norm(float *y, float *sum, const float *a, const float *b, const float *w,
                       int64_t n_tokens, int64_t dim, float eps);

extern const pw_kernel pw_kernel_sum_rms_norm;

/* y = x W^T for W f32 (pw_k_matmul, scratch as it needs) or quantized
 * (pw_k_matmul_quant). */
void pw_k_matmul_any(float *y, const float *x, const void *w, pw_dtype type, int64_t n_tokens,
                     int64_t n, int64_t k, float *scratch);
/* Scratch floats pw_k_matmul_any needs. */
size_t pw_k_matmul_any_scratch_floats(pw_dtype type, int64_t n_tokens, int64_t n, int64_t k);

/* q = rope(x Wq^T), k = rope(x Wk^T), v = x Wv^T: the attention inputs of
 * one layer (three matmuls and two ropes). */
void pw_k_qkv_rope(const pw_k_qkv_rope_args *a);
extern const pw_kernel pw_kernel_qkv_rope;

/* out = silu(x Wg^T) * (x Wu^T): the feed-forward input side (two matmuls
 * and silu_mul). */
void pw_k_gate_up_silu(const pw_k_gate_up_silu_args *a);
extern const pw_kernel pw_kernel_gate_up_silu;

/* The LM head on the sampled rows (pw_k_lm_head_args): the rows listed in
 * meta gathered (not copied when they are 0..n-1 already), pw_k_matmul_any
 * on those n rows only, then pw_k_softcap on them when softcap > 0. Every
 * row's bits are the plain matmul's (and softcap's) for that row. */
void pw_k_lm_head(const pw_k_lm_head_args *a);
/* Scratch floats pw_k_lm_head needs: the gathered rows, then the matmul's
 * for any number of sampled rows from 1 to n_tokens. */
size_t pw_k_lm_head_scratch_floats(pw_dtype type, int64_t n_tokens, int64_t n, int64_t k);
/* The number of sampled rows meta lists for a batch of n_tokens rows
 * (n_tokens without a list), clamped to [0, n_tokens]. */
int64_t pw_k_sampled_rows(const pw_attn_meta *meta, int64_t n_tokens);
/* pw_k_select_rows_args: the sampled rows first, zero rows after them. */
void pw_k_select_rows(const pw_k_select_rows_args *a);

extern const pw_kernel pw_kernel_lm_head;
extern const pw_kernel pw_kernel_select_rows;

/* ---- Gemma's elementwise kernels (elementwise.c) ------------------------------------------ */

/* out[i] = gelu_tanh(a[i]) * b[i] for i < n, with
 * gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), computed
 * as v / (1 + exp(-2u)) (the same function). out may alias a or b. */
void pw_k_gelu_mul(float *out, const float *a, const float *b, int64_t n);
/* In place: every head row of x RMS-normed with w (rms_norm's arithmetic),
 * then NeoX rope: (x[i], x[i + hd/2]) -> (x0 c - x1 s, x0 s + x1 c). A
 * position outside [0, max_pos) is normed but not rotated. */
void pw_k_head_norm_rope(const pw_k_head_norm_rope_args *a);
/* out[i] = x[i] * s. */
void pw_k_scale(float *out, const float *x, int64_t n, float s);
/* out[i] = cap * tanh(x[i] / cap) (logit soft-capping). */
void pw_k_softcap(float *out, const float *x, int64_t n, float cap);

extern const pw_kernel pw_kernel_gelu_mul;
extern const pw_kernel pw_kernel_head_norm_rope;
extern const pw_kernel pw_kernel_scale;
extern const pw_kernel pw_kernel_softcap;

/* ---- the other model families: NeoX rope alone, bias add, scaled rope tables (rope_family.c) */

/* out = x [n_tokens][n_heads*head_dim] with every head rotated NeoX style
 * (pair i is (x[i], x[i + head_dim/2])) by the angle of positions[t]; the
 * same arithmetic as pw_k_head_norm_rope's rotation. A position outside
 * [0, max_pos) copies its row. out may alias x. Qwen 2, Qwen 3 and Phi-3
 * rotate this way. */
void pw_k_rope_neox(float *out, const float *x, const int32_t *positions, const float *table,
                    int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t max_pos);
/* out[t][i] = x[t][i] + bias[i]; out may alias x. */
void pw_k_bias_add(float *out, const float *x, const float *bias, int64_t n_tokens, int64_t n);
/* pw_k_rope_table with the angle of pair i at position p
 * freq_scale * p * theta^(-2i/head_dim) / freq_factors[i] (ggml_rope_ext
 * with frequency factors, no YaRN): freq_factors [head_dim/2] or NULL for
 * none. With NULL and freq_scale 1 the table is pw_k_rope_table's, bit for
 * bit. */
void pw_k_rope_table_scaled(float *table, int64_t max_pos, int64_t head_dim, double theta,
                            const float *freq_factors, double freq_scale);

extern const pw_kernel pw_kernel_rope_neox;
extern const pw_kernel pw_kernel_bias_add;

/* Tensor parallelism (all_reduce.c): one K-shard of a row-parallel
 * product's input (pw_k_slice_cols_args), and the shard-ordered
 * all-reduce of the partial products (pw_k_all_reduce_shards_args). */
void pw_k_slice_cols(float *out, const float *x, int64_t n_tokens, int64_t x_cols, int64_t col0,
                     int64_t width);
/* out = ((p[0] + p[1]) + p[2]) + ... over n_shards blocks of n floats each */
void pw_k_sum_shards(float *restrict out, const float *restrict p, int64_t n_shards, int64_t n);

extern const pw_kernel pw_kernel_slice_cols;
extern const pw_kernel pw_kernel_all_reduce_shards;
/* The vocabulary split of the embedding and the LM head (all_reduce.c):
 * pw_k_embedding_vocab_args, pw_k_gather_vocab_args. */
extern const pw_kernel pw_kernel_embedding_vocab;
extern const pw_kernel pw_kernel_gather_vocab;

#endif
