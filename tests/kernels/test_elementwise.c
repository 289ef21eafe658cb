/* Row-local kernels against naive references, plus batch invariance:
 * every row computed alone and inside a bigger batch gives the same bits. */
#include "ops/cpu/kernels.h"
#include "kernel_test_util.h"

enum { T = 11, DIM = 24, VOCAB = 40, HEADS = 3, HEAD_DIM = 8, MAX_POS = 64, FF = 20 };

static void test_embedding(void) {
    float *table = kt_random(VOCAB * DIM);
    int32_t ids[T] = {0, 5, 39, -1, 40, 7, 7, 1000, 3, 12, 38};
    float *out = kt_random(T * DIM);
    pw_k_embedding(out, ids, table, T, VOCAB, DIM);
    bool ok = true;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < DIM; i++) {
            float want = ids[t] >= 0 && ids[t] < VOCAB ? table[ids[t] * DIM + i] : 0.0f;
            if (out[t * DIM + i] != want) ok = false;
        }
    CHECK(ok);
    float alone[DIM];
    pw_k_embedding(alone, &ids[6], table, 1, VOCAB, DIM);
    CHECK(kt_bitwise_equal(alone, out + 6 * DIM, sizeof alone));
    free(table), free(out);
}

static void ref_rms(double *y, const float *x, const float *w, int dim, float eps) {
    double ss = 0;
    for (int i = 0; i < dim; i++) ss += (double)x[i] * x[i];
    double sc = 1.0 / sqrt(ss / dim + eps);
    for (int i = 0; i < dim; i++) y[i] = x[i] * sc * w[i];
}

static void test_rms_norm(void) {
    const float eps = 1e-5f;
    float *x = kt_random(T * DIM), *w = kt_random(DIM), *y = kt_zeros(T * DIM);
    double ref[T * DIM];
    pw_k_rms_norm(y, x, w, T, DIM, eps);
    for (int t = 0; t < T; t++) ref_rms(ref + t * DIM, x + t * DIM, w, DIM, eps);
    CHECK(kt_max_rel_err(y, ref, T * DIM) < 1e-6);
    float alone[DIM];
    pw_k_rms_norm(alone, x + 4 * DIM, w, 1, DIM, eps);
    CHECK(kt_bitwise_equal(alone, y + 4 * DIM, sizeof alone));
    /* A zero row stays finite (eps keeps the divisor positive). */
    float zero[DIM] = {0}, zy[DIM];
    pw_k_rms_norm(zy, zero, w, 1, DIM, eps);
    CHECK(zy[0] == 0.0f && zy[DIM - 1] == 0.0f);

    /* Fused: residual += x, then norm; y aliasing x is allowed. */
    float *res = kt_random(T * DIM), *res0 = malloc(T * DIM * sizeof(float));
    memcpy(res0, res, T * DIM * sizeof(float));
    float *xa = malloc(T * DIM * sizeof(float));
    memcpy(xa, x, T * DIM * sizeof(float));
    pw_k_add_rms_norm(xa, res, xa, w, T, DIM, eps);
    bool sum_ok = true;
    for (int i = 0; i < T * DIM; i++)
        if (res[i] != res0[i] + x[i]) sum_ok = false;
    CHECK(sum_ok);
    float *y2 = kt_zeros(T * DIM);
    pw_k_rms_norm(y2, res, w, T, DIM, eps);
    CHECK(kt_bitwise_equal(xa, y2, T * DIM * sizeof(float)));
    free(x), free(w), free(y), free(res), free(res0), free(xa), free(y2);
}

static void test_rope(void) {
    const double theta = 10000.0;
    float *table = kt_zeros(MAX_POS * HEAD_DIM);
    pw_k_rope_table(table, MAX_POS, HEAD_DIM, theta);
    CHECK(table[0] == 1.0f && table[1] == 0.0f); /* position 0: identity */
    const int W = HEADS * HEAD_DIM;
    float *x = kt_random(T * W), *orig = malloc(T * W * sizeof(float));
    memcpy(orig, x, T * W * sizeof(float));
    int32_t pos[T] = {0, 1, 2, 63, 64, -1, 17, 5, 5, 30, 9};
    float *copy = kt_zeros(T * W);
    pw_k_rope(copy, x, pos, table, T, HEADS, HEAD_DIM, MAX_POS); /* out of place */
    pw_k_rope(x, x, pos, table, T, HEADS, HEAD_DIM, MAX_POS);    /* in place */
    CHECK(kt_bitwise_equal(copy, x, T * W * sizeof(float)));
    free(copy);
    bool ok = true, unchanged_ok = true;
    for (int t = 0; t < T; t++) {
        bool in_table = pos[t] >= 0 && pos[t] < MAX_POS;
        for (int h = 0; h < HEADS; h++)
            for (int i = 0; i < HEAD_DIM / 2; i++) {
                int o = t * W + h * HEAD_DIM + 2 * i;
                if (!in_table) {
                    if (x[o] != orig[o] || x[o + 1] != orig[o + 1]) unchanged_ok = false;
                    continue;
                }
                double ang = pos[t] * pow(theta, -2.0 * i / HEAD_DIM);
                double r0 = orig[o] * cos(ang) - orig[o + 1] * sin(ang);
                double r1 = orig[o] * sin(ang) + orig[o + 1] * cos(ang);
                if (fabs(x[o] - r0) > 1e-5 || fabs(x[o + 1] - r1) > 1e-5) ok = false;
            }
    }
    CHECK(ok);
    CHECK(unchanged_ok);
    /* Same position in a different batch: same bits. */
    float alone[HEADS * HEAD_DIM];
    memcpy(alone, orig + 9 * W, sizeof alone);
    pw_k_rope(alone, alone, &pos[9], table, 1, HEADS, HEAD_DIM, MAX_POS);
    CHECK(kt_bitwise_equal(alone, x + 9 * W, sizeof alone));
    free(table), free(x), free(orig);
}

/* The vector path (8 dims at a time) and the scalar tail compute the
 * textbook float formula bit for bit; head_dim 12 takes both. */
static void test_rope_matches_scalar_formula(void) {
    enum { HD = 12, NH = 3, MP = 40 };
    float *table = kt_zeros(MP * HD);
    pw_k_rope_table(table, MP, HD, 10000.0);
    float *x = kt_random(NH * HD), out[NH * HD];
    int32_t pos = 37;
    pw_k_rope(out, x, &pos, table, 1, NH, HD, MP);
    bool ok = true;
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < HD / 2; i++) {
            float c = table[(pos * HD / 2 + i) * 2], sn = table[(pos * HD / 2 + i) * 2 + 1];
            float x0 = x[h * HD + 2 * i], x1 = x[h * HD + 2 * i + 1];
            float r0 = x0 * c - x1 * sn, r1 = x0 * sn + x1 * c;
            if (memcmp(&r0, &out[h * HD + 2 * i], 4) || memcmp(&r1, &out[h * HD + 2 * i + 1], 4))
                ok = false;
        }
    CHECK(ok);
    free(table), free(x);
}

/* A width that is not a multiple of the vector length: lanes plus a tail. */
static void test_rms_norm_odd_width(void) {
    enum { D = 29 };
    float *x = kt_random(2 * D), *w = kt_random(D), y[2 * D];
    double ref[2 * D];
    pw_k_rms_norm(y, x, w, 2, D, 1e-5f);
    for (int t = 0; t < 2; t++) ref_rms(ref + t * D, x + t * D, w, D, 1e-5f);
    CHECK(kt_max_rel_err(y, ref, 2 * D) < 1e-6);
    float alone[D];
    pw_k_rms_norm(alone, x + D, w, 1, D, 1e-5f);
    CHECK(kt_bitwise_equal(alone, y + D, sizeof alone));
    free(x), free(w);
}

static void test_silu(void) {
    float *gu = kt_random(T * 2 * FF), *out = kt_zeros(T * FF);
    pw_k_silu_and_mul(out, gu, T, FF);
    double ref[T * FF];
    for (int t = 0; t < T; t++)
        for (int i = 0; i < FF; i++) {
            double g = gu[t * 2 * FF + i], u = gu[t * 2 * FF + FF + i];
            ref[t * FF + i] = g / (1.0 + exp(-g)) * u;
        }
    CHECK(kt_max_rel_err(out, ref, T * FF) < 1e-6);
    float alone[FF];
    pw_k_silu_and_mul(alone, gu + 3 * 2 * FF, 1, FF);
    CHECK(kt_bitwise_equal(alone, out + 3 * FF, sizeof alone));

    /* Two-input variant on the two halves gives the same bits. */
    float two[FF];
    pw_k_silu_mul(two, gu + 3 * 2 * FF, gu + 3 * 2 * FF + FF, FF);
    CHECK(kt_bitwise_equal(two, alone, sizeof two));
    free(gu), free(out);
}

static void test_add(void) {
    float *a = kt_random(T * DIM), *b = kt_random(T * DIM), *out = kt_zeros(T * DIM);
    pw_k_add(out, a, b, T * DIM);
    bool ok = true;
    for (int i = 0; i < T * DIM; i++)
        if (out[i] != a[i] + b[i]) ok = false;
    CHECK(ok);
    pw_k_add(a, a, b, T * DIM); /* in place */
    CHECK(kt_bitwise_equal(a, out, T * DIM * sizeof(float)));
    free(a), free(b), free(out);
}

static void test_argmax(void) {
    float logits[4][6] = {
        {0.1f, 0.5f, 0.2f, 0.5f, -1.0f, 0.0f},        /* tie -> lowest index (1) */
        {-3.0f, -2.0f, -1.0f, -4.0f, -5.0f, -1.0f},  /* all negative, tie -> 2 */
        {NAN, 1.0f, NAN, 2.0f, 0.0f, 2.0f},            /* NaN skipped -> 3 */
        {NAN, NAN, NAN, NAN, NAN, NAN},                /* all NaN -> 0 */
    };
    int32_t out[4] = {-7, -7, -7, -7};
    pw_k_argmax(out, &logits[0][0], 4, 6);
    CHECK_EQ_INT(out[0], 1);
    CHECK_EQ_INT(out[1], 2);
    CHECK_EQ_INT(out[2], 3);
    CHECK_EQ_INT(out[3], 0);
    int32_t one = -1;
    pw_k_argmax(&one, &logits[2][0], 1, 6);
    CHECK_EQ_INT(one, 3);
    float inf_row[3] = {INFINITY, 1.0f, INFINITY};
    pw_k_argmax(&one, inf_row, 1, 3);
    CHECK_EQ_INT(one, 0);
    /* Rows of every length up to 70 (lanes and tails), few distinct values
     * (ties across lanes), some NaN: the scalar first-index-of-max. */
    bool ok = true;
    for (int n = 1; n <= 70; n++)
        for (int rep = 0; rep < 20; rep++) {
            float r[70];
            for (int i = 0; i < n; i++) r[i] = kt_uniform() < -0.8f ? NAN : (float)(int)((kt_uniform() + 1) * 2.5f);
            int want = -1;
            for (int i = 0; i < n; i++)
                if (!isnan(r[i]) && (want < 0 || r[i] > r[want])) want = i;
            if (pw_k_argmax_row(r, n) != (want < 0 ? 0 : want)) ok = false;
        }
    CHECK(ok);
}

int main(void) {
    kt_seed(11);
    test_embedding();
    test_rms_norm();
    test_rope();
    test_rope_matches_scalar_formula();
    test_rms_norm_odd_width();
    test_silu();
    test_add();
    test_argmax();
    return pw_test_finish("kernels_elementwise");
}
