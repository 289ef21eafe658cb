/* The AVX-512 VNNI copy of the quantized matmul's tile code: vpdpbusd on
 * 256-bit vectors (AVX512VL), with 32 vector registers for wider batch
 * tiles (built with -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl
 * -mavx512vnni, chosen at run time; isa.h). */
#define PW_ISA_AVX512VNNI_COPY
#include "ops/cpu/matmul_quant_body.h"
