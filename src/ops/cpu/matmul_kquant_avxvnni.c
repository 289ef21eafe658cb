/* The AVX-VNNI copy of the K-quant and Q5 matmul's tile code: vpmaddubsw +
 * vpdpwssd for the scaled K-quant chunks, vpdpbusd for Q5 (built with
 * -mavx2 -mfma -mf16c -mavxvnni, chosen at run time; isa.h). */
#define PW_ISA_AVXVNNI_COPY
#include "ops/cpu/matmul_kquant_body.h"
