/* The quantized matmul's instruction-set copies (private to this folder and
 * the tests, which compare them bit for bit): matmul_quant_body.h is
 * compiled by matmul_quant.c (portable), matmul_quant_fma.c (AVX2),
 * matmul_quant_avxvnni.c (AVX-VNNI) and matmul_quant_avx512vnni.c
 * (AVX-512 VNNI); every copy returns the same bits (isa.h). */
#ifndef PW_KERNELS_MATMUL_QUANT_ISA_H
#define PW_KERNELS_MATMUL_QUANT_ISA_H

#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Activations quantized per token in blocks of 32 (docs/kernels.md,
 * "Integer dot products"), the same int8 values and scales in two layouts.
 *
 * Block-major (Q8B, the Q8_0/Q4_0/Q4_1 product here): for n_rows rows of k
 * activations (nb = k/32 blocks each) the buffer holds the rows,
 * PW_K_Q8B_ROW_BYTES(k) apart, each block's 32 int8 values followed by its
 * fold (8 int32; with S_l the sum of values 4l..4l+3, -8 S_l for Q4_0 and
 * Q4_1 weights, plus 0x4B400000 in the copies with PW_K_Q8B_MAGIC_* set,
 * -128 S_l for Q8_0: the quantizer is told the weight type). The integer
 * lane sums start from it, so that sum (n - 8) a is formed from the
 * unsigned nibbles n (on top of 0x4B400000, the bits of 1.5 * 2^23, where
 * one float subtraction then converts them: matmul_quant_body.h,
 * MQ_MAGIC), and sum w a from the unsigned w + 128 (the VNNI copies). Side
 * by side with the values so that a
 * tile addresses both from one register per row (one 64-byte line per
 * block); then the scales d [nb][n_rows] (f32); then the block
 * sums s [nb][n_rows] (f32, s[b][t] = d[b][t] * the sum of row t's 32
 * values of block b). Scales and sums are block-major so that a tile of
 * consecutive rows finds its rows' values for one block side by side.
 *
 * Per row (Q8, read by matmul_kquant.c's Q5_0/Q5_1 tiles): a row of k
 * activations is all its int8 values [nb][32], then its scales d [nb]
 * (f32), then its lane sums sa [nb][8] (f32, sa[l] = d * sum of values
 * 4l..4l+3), rows PW_K_Q8_ROW_BYTES(k) apart. */
#define PW_K_Q8B_ROW_BYTES(k) ((k) / 32 * (32 + 32))

/* The locality hint of the x86 copies' decode (one activation row)
 * weight prefetch, which asks for the next tile's columns while this
 * tile's are multiplied. Into L2 (prefetcht1), not L1 (prefetcht0): on
 * AMD EPYC (Zen 4) the weights streamed from memory 1.4-2x faster that
 * way (pw_kbench_decode: Q8_0 LM head 11-12 against 17-24 GB/s, Q6_K
 * 8-9 against 15-18, Q4_K 8-10 against 10-13), while L1 keeps the
 * activations; the data are used a tile later, where an L2 hit costs
 * little. A hint only: no bits depend on it. */
#define PW_K_DECODE_PREFETCH _MM_HINT_T1
/* The block-major rows are stored in groups of G rows (the last group:
 * the rows left), G fixed per copy; within a group block-major, row r's
 * block b (values, then fold) at the group's start + (b * the group's rows
 * + r) * 64 bytes, group g starting at g * G * PW_K_Q8B_ROW_BYTES(k); G = 1
 * is plain rows. The AVX2 copy takes 8, chosen for a former 8 x 1 tile
 * of the lane sequence, which reached its 8 rows from one pointer plus
 * constant displacements; the block-sum tiles address each row through its
 * own pointer and work with any grouping. The VNNI copies keep plain rows. */
#define PW_K_Q8B_GROUP_GENERIC 1
#define PW_K_Q8B_GROUP_FMA 8
#define PW_K_Q8B_GROUP_AVXVNNI 1
#define PW_K_Q8B_GROUP_AVX512VNNI 1
/* Whether a copy's Q4 folds carry 0x4B400000 (for the lane sequence's
 * conversion by a float subtraction, which the former AVX2 lane tiles
 * used): the AVX2 copy. The block-sum tiles take it out of their fold
 * totals (matmul_quant_body.h, q40_fold_total). */
#define PW_K_Q8B_MAGIC_GENERIC 0
#define PW_K_Q8B_MAGIC_FMA 1
#define PW_K_Q8B_MAGIC_AVXVNNI 0
#define PW_K_Q8B_MAGIC_AVX512VNNI 0
#define PW_K_Q8B_BYTES(n_rows, k) ((n_rows) * ((k) / 32 * (32 + 4 + 4 + 32)))
#define PW_K_Q8_ROW_BYTES(k) ((k) / 32 * (32 + 4 + 32))

/* Quantizes rows [0, n_rows) of x[n_rows][k] (k % 32 == 0) into xa, in one
 * of the layouts above (pw_k_q8b_*: PW_K_Q8B_BYTES(n_rows, k) bytes, folds
 * for weights of `type`; pw_k_q8_*: n_rows * PW_K_Q8_ROW_BYTES(k)). */
#define PW_K_Q8_QUANTIZE_PARAMS (uint8_t * xa, const float *x, int64_t n_rows, int64_t k)
#define PW_K_Q8B_QUANTIZE_PARAMS \
    (uint8_t * xa, const float *x, int64_t n_rows, int64_t k, pw_dtype type)
/* Columns [j0, j1) of y[T][N] = xa[T] . W[N]^T, W in blocks of `type` (one of
 * Q8_0, Q4_0, Q4_1), xa from the quantizer above with n_rows = n_tokens;
 * y's row stride is n. */
#define PW_K_QDOT_PARAMS                                                                       \
    (float *y, const uint8_t *xa, const uint8_t *w, pw_dtype type, int64_t n_tokens, int64_t n, \
     int64_t k, int64_t j0, int64_t j1)
/* The same with W's rows wrow bytes apart (at least a row's own bytes): a
 * block-aligned column range of a wider matrix read in place (op
 * matmul_shards). Q4_0x16: a group of 16 rows is 16 * wrow bytes, its
 * blocks contiguous as ever; rows past the last group at w + j * wrow. The
 * products, their order and so their bits are those of the dense W. */
#define PW_K_QDOT_STRIDED_PARAMS                                                               \
    (float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow, pw_dtype type,               \
     int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1)

/* Columns [j0, j1) of every K-shard of one activation row, in one pass
 * along W's rows (op matmul_shards in place, n_tokens 1): shard s is
 * xa + s * xa_bytes (one row of its own k, from the type's quantizer)
 * against the block-aligned column range w + s * shard_bytes of rows wrow
 * bytes apart, into y + s * n. Each output is the call
 * PW_K_QDOT_STRIDED_PARAMS would make for its shard (the same blocks,
 * products and float order, so the same bits); only the order in which
 * the tiles visit the shards changes: a tile's rows are read across every
 * shard, whole and in address order, before the next rows. */
#define PW_K_QDOT_SHARDS_PARAMS                                                                \
    (float *y, const uint8_t *xa, size_t xa_bytes, const uint8_t *w, int64_t wrow,            \
     size_t shard_bytes, int64_t shards, pw_dtype type, int64_t n, int64_t k, int64_t j0,      \
     int64_t j1)

/* Columns [j0, j1) of every K-shard, each shard's own strided run over
 * `rows` output columns at a time, shard after shard (x of n_tokens rows:
 * shard s's activations at xa + s * xa_bytes, its output at
 * y + s * n_tokens * n): the order where no one-pass tile applies. */
void pw_k_shards_by_runs(void (*run) PW_K_QDOT_STRIDED_PARAMS, int64_t rows, float *y,
                         const uint8_t *xa, size_t xa_bytes, const uint8_t *w, int64_t wrow,
                         size_t shard_bytes, int64_t shards, pw_dtype type, int64_t n_tokens,
                         int64_t n, int64_t k, int64_t j0, int64_t j1);

void pw_k_q8_quantize_rows_generic PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_q8b_quantize_rows_generic PW_K_Q8B_QUANTIZE_PARAMS;
void pw_k_qdot_run_generic PW_K_QDOT_PARAMS;
void pw_k_qdot_run_strided_generic PW_K_QDOT_STRIDED_PARAMS;
void pw_k_qdot_run_shards_generic PW_K_QDOT_SHARDS_PARAMS;
#if PW_HAVE_FMA_KERNELS
void pw_k_q8_quantize_rows_fma PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_q8b_quantize_rows_fma PW_K_Q8B_QUANTIZE_PARAMS;
void pw_k_qdot_run_fma PW_K_QDOT_PARAMS;
void pw_k_qdot_run_strided_fma PW_K_QDOT_STRIDED_PARAMS;
void pw_k_qdot_run_shards_fma PW_K_QDOT_SHARDS_PARAMS;
void pw_k_q8_quantize_rows_avxvnni PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_q8b_quantize_rows_avxvnni PW_K_Q8B_QUANTIZE_PARAMS;
void pw_k_qdot_run_avxvnni PW_K_QDOT_PARAMS;
void pw_k_qdot_run_strided_avxvnni PW_K_QDOT_STRIDED_PARAMS;
void pw_k_qdot_run_shards_avxvnni PW_K_QDOT_SHARDS_PARAMS;
void pw_k_q8_quantize_rows_avx512vnni PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_q8b_quantize_rows_avx512vnni PW_K_Q8B_QUANTIZE_PARAMS;
void pw_k_qdot_run_avx512vnni PW_K_QDOT_PARAMS;
void pw_k_qdot_run_strided_avx512vnni PW_K_QDOT_STRIDED_PARAMS;
void pw_k_qdot_run_shards_avx512vnni PW_K_QDOT_SHARDS_PARAMS;
#endif

/* ---- Q4_K, Q5_K, Q6_K, Q5_0 and Q5_1 (matmul_kquant.c) -------------------- */

/* Activations for the K-quants, quantized per token in super-blocks of 256
 * (docs/kernels.md, "K-quants"): a row of k activations is k/256
 * super-blocks laid out as all int8 values [k/256][256], then the scales
 * d [k/256] (f32), then the sums of each 16 values [k/256][16] (int16). */
#define PW_K_Q8K_ROW_BYTES(k) ((k) / 256 * (256 + 4 + 32))

/* True for the types matmul_kquant.c multiplies (Q5_0, Q5_1, Q4_K, Q5_K,
 * Q6_K); pw_k_quant_supported includes them. */
bool pw_k_kquant_supported(pw_dtype type);

/* Quantizes rows [0, n_rows) of x[n_rows][k] (k % 256 == 0) into xa, rows
 * PW_K_Q8K_ROW_BYTES(k) apart; the x86 copies (matmul_kquant_isa.h) give
 * the same bytes. */
void pw_k_q8k_quantize_rows(uint8_t *xa, const float *x, int64_t n_rows, int64_t k);

/* Columns [j0, j1) of y[T][N] = xa[T] . W[N]^T for W in blocks of a
 * pw_k_kquant_supported type: xa from pw_k_q8k_quantize_rows for the
 * K-quants, from the Q8 quantizer above for Q5_0 / Q5_1. */
void pw_k_kqdot_run_generic PW_K_QDOT_PARAMS;
void pw_k_kqdot_run_strided_generic PW_K_QDOT_STRIDED_PARAMS;
void pw_k_kqdot_run_shards_generic PW_K_QDOT_SHARDS_PARAMS;
#if PW_HAVE_FMA_KERNELS
void pw_k_kqdot_run_fma PW_K_QDOT_PARAMS;
void pw_k_kqdot_run_avxvnni PW_K_QDOT_PARAMS;
void pw_k_kqdot_run_avx512vnni PW_K_QDOT_PARAMS;
void pw_k_kqdot_run_strided_fma PW_K_QDOT_STRIDED_PARAMS;
void pw_k_kqdot_run_strided_avxvnni PW_K_QDOT_STRIDED_PARAMS;
void pw_k_kqdot_run_strided_avx512vnni PW_K_QDOT_STRIDED_PARAMS;
void pw_k_kqdot_run_shards_fma PW_K_QDOT_SHARDS_PARAMS;
void pw_k_kqdot_run_shards_avxvnni PW_K_QDOT_SHARDS_PARAMS;
void pw_k_kqdot_run_shards_avx512vnni PW_K_QDOT_SHARDS_PARAMS;
#endif

/* A product in two steps, for a driver that quantizes activation rows
 * once and runs column ranges of them at will (pw_k_matmul_quant_shards):
 * the copy's run, its run of K-shards and the bytes of one quantized row
 * of k. */
typedef struct pw_k_qdot_steps {
    void (*run) PW_K_QDOT_STRIDED_PARAMS;
    void (*shards) PW_K_QDOT_SHARDS_PARAMS; /* the copy's one-pass run of K-shards */
    size_t row_bytes;
} pw_k_qdot_steps;
/* For a pw_k_kquant_supported type: its steps, and its quantizer (rows of
 * x [n_rows][k] into xa, n_rows * row_bytes bytes). */
pw_k_qdot_steps pw_k_kquant_steps(pw_k_int8_isa level, pw_dtype type, int64_t k);
void pw_k_kquant_quantize(pw_k_int8_isa level, uint8_t *xa, const float *x, int64_t n_rows,
                          int64_t k, pw_dtype type);

/* pw_k_matmul_quant_with for a pw_k_kquant_supported type; _strided with
 * W's rows wrow bytes apart (PW_K_QDOT_STRIDED_PARAMS). */
void pw_k_matmul_kquant_with(pw_k_int8_isa level, float *y, const float *x, const void *w,
                             pw_dtype type, int64_t n_tokens, int64_t n, int64_t k);
void pw_k_matmul_kquant_strided_with(pw_k_int8_isa level, float *y, const float *x,
                                     const void *w, int64_t wrow, pw_dtype type,
                                     int64_t n_tokens, int64_t n, int64_t k);
/* pw_k_embedding_quant for a pw_k_kquant_supported type. */
void pw_k_embedding_kquant(float *out, const int32_t *ids, const void *table, pw_dtype type,
                           int64_t n_tokens, int64_t vocab, int64_t dim);

/* This thread's buffer for quantized activation rows (matmul_quant.c): at
 * least `bytes`, grown as needed and freed at thread exit; NULL when memory
 * is short. Launch arguments are replayed verbatim and hold no scratch. */
uint8_t *pw_k_act_scratch(size_t bytes);
/* A second such buffer, for what one thread's share of a product derives
 * from the activation rows (the Q4_0 tiles' fold totals); NULL when memory
 * is short, and the tiles then derive it where they use it. */
int32_t *pw_k_fold_scratch(size_t bytes);
/* A third, for one thread's unpacked weight columns (the Q4_0 panels of
 * matmul_quant_body.h); NULL when memory is short, and the tiles then
 * unpack the weights where they use them (the same bits). */
uint8_t *pw_k_panel_scratch(size_t bytes);

/* pw_k_matmul_quant with the copy fixed (level must run here:
 * pw_k_isa_int8_runs), threads as pw_k_matmul_quant splits them. */
void pw_k_matmul_quant_with(pw_k_int8_isa level, float *y, const float *x, const void *w,
                            pw_dtype type, int64_t n_tokens, int64_t n, int64_t k);
/* The same with W's rows wrow bytes apart (PW_K_QDOT_STRIDED_PARAMS). */
void pw_k_matmul_quant_strided_with(pw_k_int8_isa level, float *y, const float *x,
                                    const void *w, int64_t wrow, pw_dtype type,
                                    int64_t n_tokens, int64_t n, int64_t k);

/* pw_k_matmul_quant_shards with the copy fixed (as above). */
void pw_k_matmul_quant_shards_with(pw_k_int8_isa level, float *y, const float *x, const void *w,
                                   int64_t wrow, size_t shard_bytes, pw_dtype type,
                                   int64_t n_tokens, int64_t n, int64_t k, int64_t shards);

#endif
