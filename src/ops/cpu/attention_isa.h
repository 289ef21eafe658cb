/* The attention kernel's instruction-set copies (private to this folder):
 * attention_body.h is compiled by attention.c (baseline) and by
 * attention_fma.c (AVX2+FMA); both copies return the same bits (isa.h). */
#ifndef PW_KERNELS_ATTENTION_ISA_H
#define PW_KERNELS_ATTENTION_ISA_H

#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"

/* Largest head_dim the per-head state on the stack holds. */
#define PW_K_ATTN_MAX_HEAD_DIM 512

/* Query heads attended together: the heads that share one kv head, in
 * groups of at most this many (they share the block table walk and the
 * key/value rows; each runs exactly the sequence of a lone head). */
#define PW_K_ATTN_HEAD_GROUP_MAX 8

/* Whether a's shape is one the kernel computes (else its rows are zeroed). */
static inline bool pw_k_attention_shape_ok(const pw_k_attention_args *a) {
    const int64_t group = a->n_kv_heads > 0 ? a->n_heads / a->n_kv_heads : 1;
    return a->head_dim > 0 && a->head_dim <= PW_K_ATTN_MAX_HEAD_DIM && a->n_kv_heads > 0 &&
           group > 0 && a->n_heads % a->n_kv_heads == 0 && a->meta->block_size > 0;
}

/* Head groups per token: the work items of the attention step are (token,
 * head group), item i = token * groups + group, so that decode (one token)
 * still splits across threads. 1 when the shape is bad (the whole row). */
static inline int64_t pw_k_attention_groups(const pw_k_attention_args *a) {
    if (!pw_k_attention_shape_ok(a)) return 1;
    const int64_t group = a->n_heads / a->n_kv_heads;
    return a->n_kv_heads * ((group + PW_K_ATTN_HEAD_GROUP_MAX - 1) / PW_K_ATTN_HEAD_GROUP_MAX);
}

/* Attention items [begin, end) of a (step 2 of pw_k_attention: the K/V
 * writes are already done). Items with bad metadata or shape are zeroed.
 * An item's heads get the same bits whichever items run together. */
PW_ISA_DECLARE(void, pw_k_attention_items,
               (const pw_k_attention_args *a, int64_t begin, int64_t end));

#endif
