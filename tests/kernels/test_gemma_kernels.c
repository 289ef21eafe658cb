/* Gemma 3's kernels against plain double-precision references: gelu_mul
 * (GeGLU with the tanh GELU), head_norm_rope (per-head RMS norm, then NeoX
 * rope), scale and softcap, and sliding-window attention: the window
 * matches a reference over the last `window` positions, a window covering
 * everything gives the bits of no window, and prefill in one go equals
 * token-by-token decode bit for bit. */
#include "ops/cpu/kernels.h"
#include "kernel_test_util.h"

static double gelu_tanh_ref(double v) {
    return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}

static void test_gelu_mul(void) {
    enum { N = 1003 };
    float *a = kt_random(N), *b = kt_random(N), *out = kt_zeros(N);
    for (int i = 0; i < N; i++) a[i] *= 12.0f; /* reach the saturated ends */
    a[0] = -30.0f, a[1] = 30.0f, a[2] = 0.0f;
    pw_k_gelu_mul(out, a, b, N);
    double *ref = malloc(N * sizeof *ref);
    for (int i = 0; i < N; i++) ref[i] = gelu_tanh_ref(a[i]) * b[i];
    CHECK(kt_max_rel_err(out, ref, N) < 1e-5);
    CHECK(out[2] == 0.0f);
    CHECK(fabsf(out[1] - 30.0f * b[1]) <= 1e-5f * 30.0f);
    /* an element's bits do not depend on where it falls (vector or tail) */
    float one;
    pw_k_gelu_mul(&one, a + N - 1, b + N - 1, 1);
    CHECK(one == out[N - 1]);
    pw_k_gelu_mul(out + 7, a + 7, b + 7, 9);
    CHECK(kt_max_rel_err(out, ref, N) < 1e-5);
    free(a), free(b), free(out), free(ref);
}

static void test_head_norm_rope(void) {
    enum { T = 5, H = 3, HD = 16, MAXP = 64 };
    const float eps = 1e-6f;
    float *x = kt_random(T * H * HD), *w = kt_random(HD), *orig = malloc(sizeof(float) * T * H * HD);
    memcpy(orig, x, sizeof(float) * T * H * HD);
    float *table = malloc(sizeof(float) * MAXP * HD);
    pw_k_rope_table(table, MAXP, HD, 10000.0);
    int32_t pos[T] = {0, 3, 17, 63, 64}; /* the last is out of range: normed, not rotated */
    pw_k_head_norm_rope_args a = {x, w, pos, table, T, H, HD, MAXP, eps};
    pw_k_head_norm_rope(&a);
    double ref[T * H * HD];
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const float *v = orig + (t * H + h) * HD;
            double ss = 0, n[HD];
            for (int i = 0; i < HD; i++) ss += (double)v[i] * v[i];
            double inv = 1.0 / sqrt(ss / HD + eps);
            for (int i = 0; i < HD; i++) n[i] = v[i] * inv * w[i];
            double *o = ref + (t * H + h) * HD;
            for (int i = 0; i < HD / 2; i++) {
                double ang = pos[t] < MAXP ? pos[t] * pow(10000.0, -2.0 * i / HD) : 0.0;
                o[i] = n[i] * cos(ang) - n[i + HD / 2] * sin(ang);
                o[i + HD / 2] = n[i] * sin(ang) + n[i + HD / 2] * cos(ang);
            }
        }
    CHECK(kt_max_rel_err(x, ref, T * H * HD) < 1e-5);
    /* batch invariance: token 2 alone gives the same bits */
    float solo[H * HD];
    memcpy(solo, orig + 2 * H * HD, sizeof solo);
    pw_k_head_norm_rope_args one = {solo, w, pos + 2, table, 1, H, HD, MAXP, eps};
    pw_k_head_norm_rope(&one);
    CHECK(kt_bitwise_equal(solo, x + 2 * H * HD, sizeof solo));
    free(x), free(w), free(orig), free(table);
}

static void test_scale_softcap(void) {
    enum { N = 37 };
    float *x = kt_random(N), *out = kt_zeros(N);
    for (int i = 0; i < N; i++) x[i] *= 100.0f;
    double ref[N];
    pw_k_scale(out, x, N, 25.3f);
    for (int i = 0; i < N; i++) ref[i] = (double)x[i] * 25.3f;
    CHECK(kt_max_rel_err(out, ref, N) < 1e-6);
    pw_k_softcap(out, x, N, 30.0f);
    for (int i = 0; i < N; i++) ref[i] = 30.0 * tanh(x[i] / 30.0);
    CHECK(kt_max_rel_err(out, ref, N) < 1e-5);
    for (int i = 0; i < N; i++) CHECK(fabsf(out[i]) <= 30.0f);
    free(x), free(out);
}

/* ---- sliding-window attention ----------------------------------------------------- */

enum { NH = 2, NKV = 1, AHD = 16, BS = 16, LEN = 600, WINDOW = 100 };
#define AQW (NH * AHD)
#define AKW (NKV * AHD)
#define NBLK ((LEN + BS - 1) / BS)

typedef struct attn_fix {
    float *q, *k, *v, *kc, *vc;
    int32_t table[NBLK];
} attn_fix;

static void attn_fix_init(attn_fix *f) {
    f->q = kt_random((size_t)LEN * AQW);
    f->k = kt_random((size_t)LEN * AKW);
    f->v = kt_random((size_t)LEN * AKW);
    for (int i = 0; i < LEN * AQW; i++) f->q[i] *= 4.0f;
    f->kc = kt_zeros((size_t)NBLK * BS * AKW);
    f->vc = kt_zeros((size_t)NBLK * BS * AKW);
    for (int b = 0; b < NBLK; b++) f->table[b] = NBLK - 1 - b;
}

/* Positions [p0, p0 + n) of the one sequence in one step; out [n][AQW]. */
static void attn_step(attn_fix *f, int p0, int n, int64_t window, float scale, float *out) {
    int32_t *pos = malloc(n * sizeof *pos), *slot = malloc(n * sizeof *slot),
            *seq = calloc(n, sizeof *seq);
    for (int t = 0; t < n; t++) {
        pos[t] = p0 + t;
        slot[t] = f->table[(p0 + t) / BS] * BS + (p0 + t) % BS;
    }
    pw_attn_meta meta = {pos, slot, seq, f->table, NBLK, BS};
    pw_k_attention_args a = {out, f->q + (size_t)p0 * AQW, f->k + (size_t)p0 * AKW,
                             f->v + (size_t)p0 * AKW, f->kc, f->vc, &meta, n, NH, NKV, AHD,
                             AQW, AKW, NBLK, 1, window, scale};
    pw_k_attention(&a);
    free(pos), free(slot), free(seq);
}

static void attn_ref(const attn_fix *f, int p, int window, double scale, double *out) {
    int lo = window > 0 && p >= window ? p - window + 1 : 0;
    for (int h = 0; h < NH; h++) {
        const float *q = f->q + (size_t)p * AQW + h * AHD;
        double mx = -INFINITY, den = 0, sc[LEN];
        for (int j = lo; j <= p; j++) {
            double d = 0;
            for (int i = 0; i < AHD; i++) d += (double)q[i] * f->k[(size_t)j * AKW + i];
            sc[j] = d * scale;
            if (sc[j] > mx) mx = sc[j];
        }
        for (int i = 0; i < AHD; i++) out[h * AHD + i] = 0;
        for (int j = lo; j <= p; j++) {
            double w = exp(sc[j] - mx);
            den += w;
            for (int i = 0; i < AHD; i++) out[h * AHD + i] += w * f->v[(size_t)j * AKW + i];
        }
        for (int i = 0; i < AHD; i++) out[h * AHD + i] /= den;
    }
}

static void test_window_attention(void) {
    attn_fix f;
    attn_fix_init(&f);
    float *prefill = kt_zeros((size_t)LEN * AQW), *full = kt_zeros((size_t)LEN * AQW);
    float *step = kt_zeros(AQW);
    attn_step(&f, 0, LEN, WINDOW, 0.0f, prefill);
    /* against the reference, positions inside, at and past the window, and
     * where the window starts inside a score chunk or on its boundary */
    const int probes[] = {0, 50, 99, 100, 101, 255, 256, 300, 355, 356, 511, 520, 599};
    for (size_t i = 0; i < KT_LEN(probes); i++) {
        double ref[AQW];
        attn_ref(&f, probes[i], WINDOW, 1.0 / sqrt((double)AHD), ref);
        double err = kt_max_rel_err(prefill + (size_t)probes[i] * AQW, ref, AQW);
        if (!(err < 1e-5)) printf("window attention at %d: error %g\n", probes[i], err);
        CHECK(err < 1e-5);
    }
    /* token-by-token decode gives the prefill's bits */
    bool same = true;
    for (int p = 0; p < LEN; p++) {
        attn_step(&f, p, 1, WINDOW, 0.0f, step);
        same = same && kt_bitwise_equal(step, prefill + (size_t)p * AQW, sizeof(float) * AQW);
    }
    CHECK(same);
    /* a window past every position is no window at all */
    attn_step(&f, 0, LEN, 0, 0.0f, full);
    attn_step(&f, 0, LEN, LEN, 0.0f, prefill);
    CHECK(kt_bitwise_equal(full, prefill, sizeof(float) * LEN * AQW));
    /* an explicit scale */
    attn_step(&f, 0, LEN, WINDOW, 0.0625f, prefill);
    double ref[AQW];
    attn_ref(&f, 420, WINDOW, 0.0625, ref);
    CHECK(kt_max_rel_err(prefill + 420 * AQW, ref, AQW) < 1e-5);
    free(prefill), free(full), free(step);
    free(f.q), free(f.k), free(f.v), free(f.kc), free(f.vc);
}

int main(void) {
    test_gelu_mul();
    test_head_norm_rope();
    test_scale_softcap();
    test_window_attention();
    return pw_test_finish("kernels_gemma");
}
