/* AVX2+FMA copy of the attention body (isa.h, attention_body.h). */
#include "backend/cpu/kernels/attention_isa.h"

#undef PW_ISA
#define PW_ISA(fn) fn##_fma /* fixed by the file, not by the flags (see attention.c) */
#include "backend/cpu/kernels/attention_body.h"
