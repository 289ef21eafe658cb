/* AVX2+FMA copy of the attention body (isa.h, attention_body.h). */
#define PW_ISA_FMA_COPY
#include "backend/cpu/kernels/attention_isa.h"
#include "backend/cpu/kernels/attention_body.h"
