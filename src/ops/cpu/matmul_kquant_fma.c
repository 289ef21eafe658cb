/* The AVX2 copy of the K-quant and Q5 matmul's tile code: integer dot
 * products by vpmaddubsw + vpmaddwd (built with -mavx2 -mfma -mf16c,
 * chosen at run time; isa.h). */
#define PW_ISA_FMA_COPY
#include "ops/cpu/matmul_kquant_body.h"
