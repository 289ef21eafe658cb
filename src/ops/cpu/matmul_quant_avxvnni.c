/* The AVX-VNNI copy of the quantized matmul's tile code: integer dot
 * products by vpdpbusd on 256 bits (built with -mavx2 -mfma -mf16c
 * -mavxvnni, chosen at run time; isa.h). */
#define PW_ISA_AVXVNNI_COPY
#include "ops/cpu/matmul_quant_body.h"
