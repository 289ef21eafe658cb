/* The AVX2+FMA copy of the own matmul's tile code (built with -mavx2 -mfma,
 * chosen at run time; isa.h). */
#include "backend/cpu/kernels/matmul_body.h"
