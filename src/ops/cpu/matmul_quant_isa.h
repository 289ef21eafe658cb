/* The quantized matmul's instruction-set copies (private to this folder and
 * the tests, which compare them bit for bit): matmul_quant_body.h is
 * compiled by matmul_quant.c (baseline) and by matmul_quant_fma.c
 * (AVX2+FMA+F16C); both copies return the same bits (isa.h). */
#ifndef PW_KERNELS_MATMUL_QUANT_ISA_H
#define PW_KERNELS_MATMUL_QUANT_ISA_H

#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"

#include <stdint.h>

/* Columns [j0, j1) of pw_k_matmul_quant with the copy fixed (type one of
 * Q8_0, Q4_0, Q4_1, k a multiple of 32; y's row stride is n): the unit of
 * work of one thread. */
PW_ISA_DECLARE(void, pw_k_matmul_quant_run,
               (float *y, const float *x, const uint8_t *w, pw_dtype type, int64_t n_tokens,
                int64_t n, int64_t k, int64_t j0, int64_t j1));

#endif
