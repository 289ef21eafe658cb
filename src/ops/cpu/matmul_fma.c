/* The AVX2+FMA copy of the own matmul's tile code (built with -mavx2 -mfma,
 * chosen at run time; isa.h). */
#define PW_ISA_FMA_COPY
#include "ops/cpu/matmul_body.h"
