/* Token sampling: greedy, temperature, top-k and top-p, with a per-request
 * seeded generator so that a run is reproducible. */
#include "model/sampler.h"

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

/* One pass in eight lanes (two 4-lane halves, which the baseline x86-64
 * ISA holds in one register each): lane j keeps the largest value among
 * elements j, j+8, j+16, ... and the first index holding it (a strict `>`
 * keeps the earlier index on ties, and NaN never wins it). The answer is
 * the largest lane value with the smallest index among the lanes that
 * hold it: the first index of the maximum. Greedy sampling runs every step
 * on the host, so it should cost little next to a replayed forward. It is
 * built for the baseline ISA only: a target_clones resolver here would run
 * before ThreadSanitizer initialises in TSan builds. */
typedef float greedy_v4f __attribute__((vector_size(16)));
typedef int32_t greedy_v4i __attribute__((vector_size(16)));

static inline greedy_v4i keep_greater(greedy_v4f v, greedy_v4f *best, greedy_v4i idx,
                                      greedy_v4i best_i) {
    greedy_v4i gt = v > *best;
    *best = (greedy_v4f)(((greedy_v4i)v & gt) | ((greedy_v4i)*best & ~gt));
    return (idx & gt) | (best_i & ~gt);
}

int32_t pw_sample_greedy(const float *logits, int64_t vocab) {
    greedy_v4f best[2] = {(greedy_v4f){0} - INFINITY, (greedy_v4f){0} - INFINITY};
    greedy_v4i best_i[2] = {(greedy_v4i){0} - 1, (greedy_v4i){0} - 1};
    greedy_v4i idx = {0, 1, 2, 3};
    int64_t i = 0;
    for (; i + 8 <= vocab && i + 8 <= INT32_MAX; i += 8) {
        greedy_v4f lo, hi;
        memcpy(&lo, logits + i, sizeof lo);
        memcpy(&hi, logits + i + 4, sizeof hi);
        best_i[0] = keep_greater(lo, &best[0], idx, best_i[0]);
        best_i[1] = keep_greater(hi, &best[1], idx + 4, best_i[1]);
        idx += 8;
    }
    float top = -INFINITY;
    int64_t top_i = -1;
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            if (best_i[h][j] >= 0 &&
                (best[h][j] > top || (best[h][j] == top && best_i[h][j] < top_i))) {
                top = best[h][j];
                top_i = best_i[h][j];
            }
    for (; i < vocab; i++)
        if (logits[i] > top) {
            top = logits[i];
            top_i = i;
        }
    if (top_i >= 0) return (int32_t)top_i;
    /* Nothing above -inf: the first element that is not NaN (all -inf), or 0. */
    for (i = 0; i < vocab; i++)
        if (logits[i] == logits[i]) return (int32_t)i;
    return 0;
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
