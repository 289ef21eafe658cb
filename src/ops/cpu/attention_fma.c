/* AVX2+FMA copy of the attention body (isa.h, attention_body.h). */
#define PW_ISA_FMA_COPY
#include "ops/cpu/attention_isa.h"
#include "ops/cpu/attention_body.h"
