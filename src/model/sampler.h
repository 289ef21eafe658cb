#ifndef PW_MODEL_SAMPLER_H
#define PW_MODEL_SAMPLER_H

#include "internal.h"
#include "model/scheduler.h"
#include "piecewise_llm.h"

typedef struct prob_index_scratch prob_index_scratch; /* pw_sampler_scratch_bytes(vocab) */

/* Highest logit; ties go to the lowest id; NaNs are never chosen. */
int32_t pw_sample_greedy(const float *logits, int64_t vocab);
/* temperature <= 0 is greedy; otherwise softmax(logits / T), then top-k,
 * then the smallest top-p nucleus, then one draw from *rng. Only
 * temperature, top_k and top_p of sp are read. */
int32_t pw_sample(const float *logits, int64_t vocab, const pw_sampling_params *sp,
                  uint64_t *rng, prob_index_scratch *scratch);
/* A request's next token: logit_bias (bias[0..n_bias)), then the
 * presence and frequency penalties over history (the tokens it generated
 * so far), then pw_sample. The logits are not changed (a copy in scratch
 * is). */
int32_t pw_sample_token(const float *logits, int64_t vocab, const pw_sampling_params *sp,
                        const pw_logit_bias *bias, int32_t n_bias, const int32_t *history,
                        int64_t n_history, uint64_t *rng, prob_index_scratch *scratch);
/* log_softmax(logits)[token] in *logprob, and the k most likely tokens
 * (most likely first, ties to the lowest id) in top[0..k). The sum is in
 * double, in index order, after subtracting the maximum: the same logits
 * give the same bits. NaN logits count as -inf. */
void pw_logprobs(const float *logits, int64_t vocab, int32_t token, int32_t k, float *logprob,
                 pw_token_logprob *top);
/* Request r's next token from its logits row: pw_sample_token over its
 * bias and generated tokens with its generator, and, when it asked, the
 * token's logprobs (pw_logprobs of the raw row into r->top). .finished is
 * left false. */
pw_step_token pw_request_sample(pw_request *r, const float *logits, int64_t vocab,
                                prob_index_scratch *scratch);
/* A request's generator from its seed alone (splitmix64 of it): nothing
 * else the engine does (request ids, batch mates) changes the draws. */
uint64_t pw_sampler_seed(uint64_t seed);
size_t pw_sampler_scratch_bytes(int64_t vocab);

#endif
