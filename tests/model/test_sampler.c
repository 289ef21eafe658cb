/* Sampling: greedy ties, temperature, top-k, top-p, seeded determinism. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/sampler.h"

#include <math.h>

#define V 6

int main(void) {
    float logits[V] = {1.0f, 3.0f, 2.5f, 3.0f, -1.0f, 0.5f};
    CHECK_EQ_INT(pw_sample_greedy(logits, V), 1); /* tie: lowest id */
    float nans[4] = {NAN, 2.0f, NAN, 5.0f}, all_nan[2] = {NAN, NAN}, neg[3] = {-3, -1, -1};
    CHECK_EQ_INT(pw_sample_greedy(nans, 4), 3);    /* NaN is never chosen */
    CHECK_EQ_INT(pw_sample_greedy(nans, 2), 1);
    CHECK_EQ_INT(pw_sample_greedy(all_nan, 2), 0);
    CHECK_EQ_INT(pw_sample_greedy(neg, 3), 1);
    /* Long rows (eight lanes plus a tail): first index of the maximum. */
    float row[77];
    for (int i = 0; i < 77; i++) row[i] = (float)((i * 37) % 23);
    CHECK_EQ_INT(pw_sample_greedy(row, 77), 18); /* 22 = 18*37 mod 23, its first place */
    float ninf[19];
    for (int i = 0; i < 19; i++) ninf[i] = -INFINITY;
    ninf[0] = NAN;
    CHECK_EQ_INT(pw_sample_greedy(ninf, 19), 1); /* all -inf after a NaN: the first of them */
    ninf[17] = -1e30f;
    CHECK_EQ_INT(pw_sample_greedy(ninf, 19), 17); /* the tail */
    row[70] = 1e9f, row[12] = 1e9f;
    CHECK_EQ_INT(pw_sample_greedy(row, 77), 12); /* tie across lanes: lowest id */
    prob_index_scratch *scratch = malloc(pw_sampler_scratch_bytes(V));
    pw_sampling_params sp = {0};
    uint64_t rng = pw_sampler_seed(42, 0);
    CHECK_EQ_INT(pw_sample(logits, V, &sp, &rng, scratch), 1); /* temperature 0 is greedy */

    sp.temperature = 1.0f;
    sp.top_k = 1;
    for (int i = 0; i < 50; i++) CHECK_EQ_INT(pw_sample(logits, V, &sp, &rng, scratch), 1);
    sp.top_k = 0;
    sp.top_p = 0.01f; /* the nucleus is the single most likely token */
    for (int i = 0; i < 50; i++) CHECK_EQ_INT(pw_sample(logits, V, &sp, &rng, scratch), 1);

    /* top-k 3 only ever picks among ids {1, 3, 2}; all three appear */
    sp.top_p = 0;
    sp.top_k = 3;
    int seen[V] = {0};
    for (int i = 0; i < 2000; i++) seen[pw_sample(logits, V, &sp, &rng, scratch)]++;
    CHECK(seen[0] == 0 && seen[4] == 0 && seen[5] == 0);
    CHECK(seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
    /* ids 1 and 3 have equal logits: roughly equal counts */
    CHECK(seen[1] > 500 && seen[3] > 500);

    /* a seed gives the same sequence; another seed a different one */
    sp.top_k = 0;
    int32_t a[64], b[64], c[64];
    uint64_t r1 = pw_sampler_seed(7, 3), r2 = pw_sampler_seed(7, 3), r3 = pw_sampler_seed(8, 3);
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        a[i] = pw_sample(logits, V, &sp, &r1, scratch);
        b[i] = pw_sample(logits, V, &sp, &r2, scratch);
        c[i] = pw_sample(logits, V, &sp, &r3, scratch);
        differ += a[i] != c[i];
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(differ > 0);
    /* requests get independent streams from one seed */
    CHECK(pw_sampler_seed(7, 0) != pw_sampler_seed(7, 1));
    /* top-p applies to the top-k distribution, renormalised: with
     * probabilities .2 .2 .1 .1 .1 .1 .1 .1, top-k 4 leaves 1/3 1/3 1/6 1/6,
     * and a 0.6 nucleus of that is the first two tokens only */
    {
        float l8[8];
        for (int i = 0; i < 8; i++) l8[i] = i < 2 ? logf(2.0f) : 0.0f;
        prob_index_scratch *s8 = malloc(pw_sampler_scratch_bytes(8));
        pw_sampling_params kp = {1.0f, 4, 0.6f, 0};
        uint64_t r = pw_sampler_seed(3, 0);
        int outside = 0;
        for (int i = 0; i < 4000; i++) outside += pw_sample(l8, 8, &kp, &r, s8) > 1;
        CHECK_EQ_INT(outside, 0);
        free(s8);
    }
    free(scratch);
    return pw_test_finish("model_sampler");
}
