/* Token sampling: greedy, temperature, top-k and top-p, with a per-request
 * seeded generator so that a run is reproducible. */
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

uint64_t pw_sampler_seed(uint64_t seed, int64_t request) {
    uint64_t s = seed ^ (0xD1B54A32D192ED03ULL * (uint64_t)(request + 1));
    next_u64(&s);
    return s;
}

size_t pw_sampler_scratch_bytes(int64_t vocab) { return (size_t)vocab * sizeof(prob_index); }
