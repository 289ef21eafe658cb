#ifndef PW_MODEL_SAMPLER_H
#define PW_MODEL_SAMPLER_H

#include "internal.h"
#include "piecewise_llm.h"

typedef struct prob_index_scratch prob_index_scratch; /* pw_sampler_scratch_bytes(vocab) */

/* Highest logit; ties go to the lowest id; NaNs are never chosen. */
int32_t pw_sample_greedy(const float *logits, int64_t vocab);
/* temperature <= 0 is greedy; otherwise softmax(logits / T), then top-k,
 * then the smallest top-p nucleus, then one draw from *rng. */
int32_t pw_sample(const float *logits, int64_t vocab, const pw_sampling_params *sp,
                  uint64_t *rng, prob_index_scratch *scratch);
/* Independent stream per request from one user seed. */
uint64_t pw_sampler_seed(uint64_t seed, int64_t request);
size_t pw_sampler_scratch_bytes(int64_t vocab);

#endif
