/* AVX2+FMA copy of the attention body (isa.h, attention_body.h). */
#include "backend/cpu/kernels/attention_body.h"
