/* The AVX2 copy of the quantized matmul's tile code: integer dot products
 * by vpmaddubsw + vpmaddwd (built with -mavx2 -mfma -mf16c, chosen at run
 * time; isa.h). */
#define PW_ISA_FMA_COPY
#include "ops/cpu/matmul_quant_body.h"
