/* The instruction-set copies of the K-quant activation quantizer
 * (matmul_kquant_body.h; private to this folder and the tests, which
 * compare them byte for byte with pw_k_q8k_quantize_rows, the portable
 * one, whose header comment in matmul_kquant.c defines the bytes). */
#ifndef PW_KERNELS_MATMUL_KQUANT_ISA_H
#define PW_KERNELS_MATMUL_KQUANT_ISA_H

#include "ops/cpu/matmul_quant_isa.h"

#if PW_HAVE_FMA_KERNELS
void pw_k_q8k_quantize_rows_fma PW_K_Q8_QUANTIZE_PARAMS;
/* What matmul_kquant.c's q5_0_offsets writes, vectorised (the bytes are
 * the same). */
void pw_k_q5_0_offsets_fma(uint8_t *xa, int64_t n_rows, int64_t k);
void pw_k_q5_0_offsets_avxvnni(uint8_t *xa, int64_t n_rows, int64_t k);
void pw_k_q5_0_offsets_avx512vnni(uint8_t *xa, int64_t n_rows, int64_t k);
void pw_k_q8k_quantize_rows_avxvnni PW_K_Q8_QUANTIZE_PARAMS;
void pw_k_q8k_quantize_rows_avx512vnni PW_K_Q8_QUANTIZE_PARAMS;
#endif

#endif
