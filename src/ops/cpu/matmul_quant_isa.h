/* The quantized matmul's instruction-set copies (private to this folder and
 * the tests, which compare them bit for bit): matmul_quant_body.h is
 * compiled by matmul_quant.c (portable), matmul_quant_fma.c (AVX2),
 * matmul_quant_avxvnni.c (AVX-VNNI) and matmul_quant_avx512vnni.c
 * (AVX-512 VNNI); every copy returns the same bits (isa.h). */
#ifndef PW_KERNELS_MATMUL_QUANT_ISA_H
#define PW_KERNELS_MATMUL_QUANT_ISA_H

#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"

#include <stdint.h>

/* Activations quantized per token in blocks of 32 (docs/kernels.md,
 * "Integer dot products"): a row of k activations is k/32 blocks laid out
 * as all int8 values [k/32][32], then the scales d [k/32] (f32), then the
 * lane sums sa [k/32][8] (f32, sa[l] = d * sum of values 4l..4l+3). */
#define PW_K_Q8_ROW_BYTES(k) ((k) / 32 * (32 + 4 + 32))

/* Quantizes rows [0, n_rows) of x[n_rows][k] (k % 32 == 0) into xa, rows
 * PW_K_Q8_ROW_BYTES(k) apart. */
#define PW_K_Q8_QUANTIZE_PARAMS (uint8_t * xa, const float *x, int64_t n_rows, int64_t k)
/* Columns [j0, j1) of y[T][N] = xa[T] . W[N]^T, W in blocks of `type` (one of
 * Q8_0, Q4_0, Q4_1), xa from the quantizer above; y's row stride is n. */
#define PW_K_QDOT_PARAMS                                                                       \
    (float *y, const uint8_t *xa, const uint8_t *w, pw_dtype type, int64_t n_tokens, int64_t n, \
     int64_t k, int64_t j0, int64_t j1)

void pw_k_q8_quantize_rows_generic PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_qdot_run_generic PW_K_QDOT_PARAMS;
#if PW_HAVE_FMA_KERNELS
void pw_k_q8_quantize_rows_fma PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_qdot_run_fma PW_K_QDOT_PARAMS;
void pw_k_q8_quantize_rows_avxvnni PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_qdot_run_avxvnni PW_K_QDOT_PARAMS;
void pw_k_q8_quantize_rows_avx512vnni PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_qdot_run_avx512vnni PW_K_QDOT_PARAMS;
#endif

/* pw_k_matmul_quant with the copy fixed (level must run here:
 * pw_k_isa_int8_runs), threads as pw_k_matmul_quant splits them. */
void pw_k_matmul_quant_with(pw_k_int8_isa level, float *y, const float *x, const void *w,
                            pw_dtype type, int64_t n_tokens, int64_t n, int64_t k);

#endif
