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
    uint64_t rng = pw_sampler_seed(42);
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
    uint64_t r1 = pw_sampler_seed(7), r2 = pw_sampler_seed(7), r3 = pw_sampler_seed(8);
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        a[i] = pw_sample(logits, V, &sp, &r1, scratch);
        b[i] = pw_sample(logits, V, &sp, &r2, scratch);
        c[i] = pw_sample(logits, V, &sp, &r3, scratch);
        differ += a[i] != c[i];
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(differ > 0);
    /* neighbouring seeds (seed + choice index) start far apart */
    CHECK(pw_sampler_seed(7) != pw_sampler_seed(8));
    CHECK(pw_sampler_seed(0) != 0);
    /* top-p applies to the top-k distribution, renormalised: with
     * probabilities .2 .2 .1 .1 .1 .1 .1 .1, top-k 4 leaves 1/3 1/3 1/6 1/6,
     * and a 0.6 nucleus of that is the first two tokens only */
    {
        float l8[8];
        for (int i = 0; i < 8; i++) l8[i] = i < 2 ? logf(2.0f) : 0.0f;
        prob_index_scratch *s8 = malloc(pw_sampler_scratch_bytes(8));
        pw_sampling_params kp = {1.0f, 4, 0.6f, 0};
        uint64_t r = pw_sampler_seed(3);
        int outside = 0;
        for (int i = 0; i < 4000; i++) outside += pw_sample(l8, 8, &kp, &r, s8) > 1;
        CHECK_EQ_INT(outside, 0);
        free(s8);
    }
    free(scratch);

    /* logit bias and the penalties, greedy: logits {1, 3, 2.5, 3, -1, 0.5} */
    prob_index_scratch *zs = calloc(1, pw_sampler_scratch_bytes(V));
    pw_sampling_params g = {0};
    uint64_t gr = pw_sampler_seed(1);
    pw_logit_bias ban1[2] = {{1, -100.0f}, {3, -100.0f}};
    CHECK_EQ_INT(pw_sample_token(logits, V, &g, ban1, 2, NULL, 0, &gr, zs), 2);
    pw_logit_bias force4 = {4, 100.0f};
    CHECK_EQ_INT(pw_sample_token(logits, V, &g, &force4, 1, NULL, 0, &gr, zs), 4);
    pw_logit_bias twice[2] = {{5, 1.5f}, {5, 1.5f}}; /* biases of one token add up */
    CHECK_EQ_INT(pw_sample_token(logits, V, &g, twice, 2, NULL, 0, &gr, zs), 5);
    CHECK(logits[1] == 3.0f && logits[4] == -1.0f); /* the row itself is unchanged */
    /* presence: token 1 was generated once, loses 0.6 -> 2.4 < 2.5 (but 3
     * stays 3 > 2.5) ... token 3 is next: it ties 1 originally, beats it now */
    int32_t hist1[1] = {1};
    g.presence_penalty = 0.6f;
    CHECK_EQ_INT(pw_sample_token(logits, V, &g, NULL, 0, hist1, 1, &gr, zs), 3);
    /* frequency: tokens 1 and 3 seen twice each, 0.3 per time -> 2.4 < 2.5 */
    int32_t hist2[4] = {1, 3, 3, 1};
    g.presence_penalty = 0.0f;
    g.frequency_penalty = 0.3f;
    CHECK_EQ_INT(pw_sample_token(logits, V, &g, NULL, 0, hist2, 4, &gr, zs), 2);
    g.frequency_penalty = 0.2f; /* 2.6 > 2.5: token 1 again (lowest id of the tie) */
    CHECK_EQ_INT(pw_sample_token(logits, V, &g, NULL, 0, hist2, 4, &gr, zs), 1);
    /* negative penalties favour repeats: presence -2 lifts token 4 (-1 -> 1)... over 0.5 */
    int32_t hist4[2] = {4, 4};
    g.frequency_penalty = -2.0f; /* -1 + 4 = 3, ties 1 and 3: lowest id wins */
    CHECK_EQ_INT(pw_sample_token(logits, V, &g, NULL, 0, hist4, 2, &gr, zs), 1);
    g.presence_penalty = -0.5f; /* 3.5: token 4 */
    CHECK_EQ_INT(pw_sample_token(logits, V, &g, NULL, 0, hist4, 2, &gr, zs), 4);
    /* the marks are cleared after each call: presence counts once per call */
    g.frequency_penalty = 0.0f;
    g.presence_penalty = 1.0f;
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(pw_sample_token(logits, V, &g, NULL, 0, hist2, 4, &gr, zs), 2);
    free(zs);

    /* logprobs: the log-softmax of the raw row, top list ties by lowest id */
    {
        float lp;
        pw_token_logprob top[4];
        pw_logprobs(logits, V, 2, 4, &lp, top);
        double sum = 0;
        for (int i = 0; i < V; i++) sum += exp((double)logits[i]);
        CHECK(fabs(lp - (2.5 - log(sum))) < 1e-6);
        CHECK_EQ_INT(top[0].token, 1);
        CHECK_EQ_INT(top[1].token, 3);
        CHECK_EQ_INT(top[2].token, 2);
        CHECK_EQ_INT(top[3].token, 0);
        CHECK(top[0].logprob == top[1].logprob && top[2].logprob == lp);
        CHECK(top[0].logprob > top[2].logprob && top[2].logprob > top[3].logprob);
        double total = 0;
        for (int i = 0; i < V; i++) {
            float li;
            pw_logprobs(logits, V, i, 0, &li, NULL);
            total += exp((double)li);
        }
        CHECK(fabs(total - 1.0) < 1e-6);
        /* large logits do not overflow (the maximum is subtracted) */
        float big[3] = {1000.0f, 999.0f, NAN};
        pw_logprobs(big, 3, 0, 3, &lp, top);
        CHECK(fabs(lp - (-log(1.0 + exp(-1.0)))) < 1e-6);
        CHECK_EQ_INT(top[0].token, 0);
        CHECK_EQ_INT(top[1].token, 1);
        CHECK_EQ_INT(top[2].token, 2); /* NaN as -inf: last */
        CHECK(isinf(top[2].logprob) && top[2].logprob < 0);
        /* the same row gives the same bits */
        float lp2;
        pw_logprobs(logits, V, 5, 0, &lp, NULL);
        pw_logprobs(logits, V, 5, 0, &lp2, NULL);
        CHECK(memcmp(&lp, &lp2, sizeof lp) == 0);
    }
    return pw_test_finish("model_sampler");
}
