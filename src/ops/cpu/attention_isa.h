/* The attention kernel's instruction-set copies (private to this folder):
 * attention_body.h is compiled by attention.c (baseline) and by
 * attention_fma.c (AVX2+FMA); both copies return the same bits (isa.h). */
#ifndef PW_KERNELS_ATTENTION_ISA_H
#define PW_KERNELS_ATTENTION_ISA_H

#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"

/* Largest head_dim the per-head state on the stack holds. */
#define PW_K_ATTN_MAX_HEAD_DIM 512

/* Attention rows [begin, end) of a (step 2 of pw_k_attention: the K/V
 * writes are already done). Rows with bad metadata or shape are zeroed. */
PW_ISA_DECLARE(void, pw_k_attention_rows,
               (const pw_k_attention_args *a, int64_t begin, int64_t end));

#endif
