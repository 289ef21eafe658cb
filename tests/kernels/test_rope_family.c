/* The other families' kernels against double-precision references and
 * against the kernels they share arithmetic with: rope_neox (Qwen 2/3,
 * Phi-3) rotates as head_norm_rope does after its norm, bit for bit, and
 * within 1e-5 of a double rotation; bias_add is exact; a scaled rope table
 * (Llama 3's rope_freqs, linear scaling) is the double formula rounded once,
 * and with no factors and scale 1 it is pw_k_rope_table's bit for bit. Both
 * kernels are row-local: a token alone gives the bits it gets in a batch,
 * in place and out of place alike. They have one (scalar) copy, so there is
 * no ISA copy to compare. */
#include "ops/cpu/kernels.h"
#include "kernel_test_util.h"

enum { T = 5, H = 3, HD = 16, MAXP = 64 };

static void test_rope_neox(void) {
    float *x = kt_random(T * H * HD), *out = kt_zeros(T * H * HD);
    float *table = malloc(sizeof(float) * MAXP * HD);
    pw_k_rope_table(table, MAXP, HD, 1000000.0);
    int32_t pos[T] = {0, 3, 17, 63, 64}; /* the last is out of range: copied */
    pw_k_rope_neox(out, x, pos, table, T, H, HD, MAXP);
    double ref[T * H * HD];
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const float *v = x + (t * H + h) * HD;
            double *o = ref + (t * H + h) * HD;
            for (int i = 0; i < HD / 2; i++) {
                double ang = pos[t] < MAXP ? pos[t] * pow(1000000.0, -2.0 * i / HD) : 0.0;
                o[i] = v[i] * cos(ang) - v[i + HD / 2] * sin(ang);
                o[i + HD / 2] = v[i] * sin(ang) + v[i + HD / 2] * cos(ang);
            }
        }
    CHECK(kt_max_rel_err(out, ref, T * H * HD) < 1e-5);
    CHECK(kt_bitwise_equal(out + 4 * H * HD, x + 4 * H * HD, sizeof(float) * H * HD));
    /* in place gives the same bits */
    float *inplace = malloc(sizeof(float) * T * H * HD);
    memcpy(inplace, x, sizeof(float) * T * H * HD);
    pw_k_rope_neox(inplace, inplace, pos, table, T, H, HD, MAXP);
    CHECK(kt_bitwise_equal(inplace, out, sizeof(float) * T * H * HD));
    /* token 2 alone: the same bits (batch invariance) */
    float solo[H * HD];
    pw_k_rope_neox(solo, x + 2 * H * HD, pos + 2, table, 1, H, HD, MAXP);
    CHECK(kt_bitwise_equal(solo, out + 2 * H * HD, sizeof solo));
    /* head_norm_rope's rotation is this one: its norm alone (positions out
     * of range), then rope_neox, gives its bits */
    float *normed = malloc(sizeof(float) * T * H * HD), *w = malloc(sizeof(float) * HD);
    for (int i = 0; i < HD; i++) w[i] = 1.0f + 0.01f * (float)i;
    memcpy(normed, x, sizeof(float) * T * H * HD);
    int32_t far[T] = {MAXP, MAXP, MAXP, MAXP, MAXP}; /* norm only */
    pw_k_head_norm_rope_args only_norm = {normed, w, far, table, T, H, HD, MAXP, 1e-6f, 0};
    pw_k_head_norm_rope(&only_norm);
    float *both = malloc(sizeof(float) * T * H * HD);
    memcpy(both, x, sizeof(float) * T * H * HD);
    pw_k_head_norm_rope_args fused = {both, w, pos, table, T, H, HD, MAXP, 1e-6f, 0};
    pw_k_head_norm_rope(&fused);
    pw_k_rope_neox(normed, normed, pos, table, T, H, HD, MAXP);
    CHECK(kt_bitwise_equal(normed, both, sizeof(float) * T * H * HD));
    free(x), free(out), free(table), free(inplace), free(normed), free(w), free(both);
}

static void test_bias_add(void) {
    enum { N = 37 };
    float *x = kt_random(T * N), *b = kt_random(N), *out = kt_zeros(T * N);
    pw_k_bias_add(out, x, b, T, N);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) CHECK(out[t * N + i] == x[t * N + i] + b[i]);
    float solo[N];
    pw_k_bias_add(solo, x + 3 * N, b, 1, N);
    CHECK(kt_bitwise_equal(solo, out + 3 * N, sizeof solo));
    pw_k_bias_add(x, x, b, T, N); /* in place */
    CHECK(kt_bitwise_equal(x, out, sizeof(float) * T * N));
    free(x), free(b), free(out);
}

static void test_scaled_table(void) {
    float *plain = malloc(sizeof(float) * MAXP * HD), *same = malloc(sizeof(float) * MAXP * HD);
    pw_k_rope_table(plain, MAXP, HD, 500000.0);
    pw_k_rope_table_scaled(same, MAXP, HD, 500000.0, NULL, 1.0);
    CHECK(kt_bitwise_equal(plain, same, sizeof(float) * MAXP * HD));
    float factors[HD / 2];
    for (int i = 0; i < HD / 2; i++) factors[i] = i < 3 ? 1.0f : 1.0f + (float)i;
    pw_k_rope_table_scaled(same, MAXP, HD, 500000.0, factors, 0.25);
    for (int p = 0; p < MAXP; p++)
        for (int i = 0; i < HD / 2; i++) {
            double ang = 0.25 * p * pow(500000.0, -2.0 * i / HD) / factors[i];
            CHECK(same[(p * HD / 2 + i) * 2] == (float)cos(ang));
            CHECK(same[(p * HD / 2 + i) * 2 + 1] == (float)sin(ang));
        }
    free(plain), free(same);
}

int main(void) {
    kt_seed(31);
    test_rope_neox();
    test_bias_add();
    test_scaled_table();
    return pw_test_finish("kernels_rope_family");
}
