/* Token sampling: logit bias, presence and frequency penalties, greedy,
 * temperature, top-k and top-p, with a generator seeded from the request's
 * seed alone so that a sampled answer is reproducible; and the
 * log-probabilities a request may ask for. */
#include "model/sampler.h"

#include "ops/ops.h"

#include <math.h>
#include <string.h>

/* splitmix64: small, fast, and good enough to seed and draw uniforms. */
static uint64_t next_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *state) { return (double)(next_u64(state) >> 11) * 0x1.0p-53; }

/* The kernels' argmax (one vectorized pass, first index of the maximum, NaN
 * never chosen): greedy sampling runs every step on the host, so it should
 * cost little next to a replayed forward. */
int32_t pw_sample_greedy(const float *logits, int64_t vocab) {
    return pw_op_argmax_row(logits, vocab);
}

typedef struct prob_index {
    float p;
    int32_t i;
} prob_index;

static int by_prob_desc(const void *a, const void *b) {
    const prob_index *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i);
}

int32_t pw_sample(const float *logits, int64_t vocab, const pw_sampling_params *sp,
                  uint64_t *rng, prob_index_scratch *scratch) {
    if (sp->temperature <= 0.0f) return pw_sample_greedy(logits, vocab);
    prob_index *pi = (prob_index *)scratch;
    float maxl = logits[pw_sample_greedy(logits, vocab)];
    for (int64_t i = 0; i < vocab; i++) {
        float p = expf((logits[i] - maxl) / sp->temperature);
        pi[i].p = p;
        pi[i].i = (int32_t)i;
    }
    qsort(pi, (size_t)vocab, sizeof *pi, by_prob_desc);
    int64_t keep = vocab;
    if (sp->top_k > 0 && sp->top_k < keep) keep = sp->top_k;
    if (sp->top_p > 0.0f && sp->top_p < 1.0f) {
        /* the nucleus is taken from the top-k distribution, renormalised */
        double sum_k = 0, cum = 0;
        for (int64_t i = 0; i < keep; i++) sum_k += pi[i].p;
        for (int64_t i = 0; i < keep; i++) {
            cum += pi[i].p / sum_k;
            if (cum >= sp->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double kept = 0;
    for (int64_t i = 0; i < keep; i++) kept += pi[i].p;
    double r = uniform01(rng) * kept, acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += pi[i].p;
        if (r < acc) return pi[i].i;
    }
    return pi[keep - 1].i;
}

/* The scratch: the sort array, a copy of the logits to transform, and a
 * byte per token that marks the tokens already penalised (all zero between
 * calls). */
static float *scratch_logits(prob_index_scratch *s, int64_t vocab) {
    return (float *)((char *)s + (size_t)vocab * sizeof(prob_index));
}
static unsigned char *scratch_seen(prob_index_scratch *s, int64_t vocab) {
    return (unsigned char *)(scratch_logits(s, vocab) + vocab);
}

int32_t pw_sample_token(const float *logits, int64_t vocab, const pw_sampling_params *sp,
                        const pw_logit_bias *bias, int32_t n_bias, const int32_t *history,
                        int64_t n_history, uint64_t *rng, prob_index_scratch *scratch) {
    bool penalise = (sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f) &&
                    n_history > 0;
    if (n_bias <= 0 && !penalise) return pw_sample(logits, vocab, sp, rng, scratch);
    float *l = scratch_logits(scratch, vocab);
    memcpy(l, logits, (size_t)vocab * sizeof *l);
    for (int32_t i = 0; i < n_bias; i++)
        if (bias[i].token >= 0 && bias[i].token < vocab) l[bias[i].token] += bias[i].bias;
    if (penalise) {
        /* c occurrences cost c * frequency + presence: one pass in history
         * order (a fixed order, so the same bits every time) */
        unsigned char *seen = scratch_seen(scratch, vocab);
        for (int64_t i = 0; i < n_history; i++) {
            int32_t t = history[i];
            if (t < 0 || t >= vocab) continue;
            l[t] -= sp->frequency_penalty;
            if (!seen[t]) {
                seen[t] = 1;
                l[t] -= sp->presence_penalty;
            }
        }
        for (int64_t i = 0; i < n_history; i++)
            if (history[i] >= 0 && history[i] < vocab) seen[history[i]] = 0;
    }
    return pw_sample(l, vocab, sp, rng, scratch);
}

/* a before b in the top list: more likely, or as likely with a lower id */
static bool ranks_before(float la, int32_t a, float lb, int32_t b) {
    return la > lb || (la == lb && a < b);
}

void pw_logprobs(const float *logits, int64_t vocab, int32_t token, int32_t k, float *logprob,
                 pw_token_logprob *top) {
    double maxl = -INFINITY;
    for (int64_t i = 0; i < vocab; i++)
        if (logits[i] > maxl) maxl = logits[i]; /* NaN compares false */
    double sum = 0;
    for (int64_t i = 0; i < vocab; i++)
        if (logits[i] == logits[i]) sum += exp((double)logits[i] - maxl);
    /* every logit -inf (or NaN): nothing is likely */
    double lse = maxl > -INFINITY ? maxl + log(sum) : INFINITY;
    double lt = token >= 0 && token < vocab && logits[token] == logits[token] ? logits[token]
                                                                             : -INFINITY;
    *logprob = (float)(lt - lse);
    if (k <= 0) return;
    if (k > vocab) k = (int32_t)vocab;
    /* the k best by insertion into a sorted list: rows are long, k small */
    int32_t have = 0;
    for (int64_t i = 0; i < vocab; i++) {
        float li = logits[i] == logits[i] ? logits[i] : -INFINITY;
        if (have == k && !ranks_before(li, (int32_t)i, top[k - 1].logprob, top[k - 1].token))
            continue;
        int32_t at = have < k ? have++ : k - 1;
        while (at > 0 && ranks_before(li, (int32_t)i, top[at - 1].logprob, top[at - 1].token)) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = (pw_token_logprob){(int32_t)i, li};
    }
    for (int32_t j = 0; j < have; j++) top[j].logprob = (float)((double)top[j].logprob - lse);
}

pw_step_token pw_request_sample(pw_request *r, const float *logits, int64_t vocab,
                                prob_index_scratch *scratch) {
    const int32_t *generated = r->tokens + r->n_prompt;
    int32_t tok = pw_sample_token(logits, vocab, &r->sp, r->bias, r->n_bias, generated,
                                  r->n_tokens - r->n_prompt, &r->rng, scratch);
    pw_step_token st = {.request = r->id, .token = tok};
    if (r->sp.logprobs) {
        pw_logprobs(logits, vocab, tok, r->sp.top_logprobs, &st.logprob, r->top);
        st.n_top = r->sp.top_logprobs < vocab ? r->sp.top_logprobs : (int32_t)vocab;
        st.top = r->top;
    }
    return st;
}

uint64_t pw_sampler_seed(uint64_t seed) {
    uint64_t s = seed;
    return next_u64(&s);
}

size_t pw_sampler_scratch_bytes(int64_t vocab) {
    return (size_t)vocab * (sizeof(prob_index) + sizeof(float) + 1);
}
