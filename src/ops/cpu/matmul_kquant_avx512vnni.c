/* The AVX-512 VNNI copy of the K-quant and Q5 matmul's tile code: the
 * AVX-VNNI instructions on 256-bit vectors (AVX512VL) with 32 vector
 * registers for a wider batch tile (built with -mavx2 -mfma -mf16c
 * -mavx512f -mavx512bw -mavx512vl -mavx512vnni, chosen at run time; isa.h). */
#define PW_ISA_AVX512VNNI_COPY
#include "ops/cpu/matmul_kquant_body.h"
