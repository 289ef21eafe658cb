/* The K-quant (Q4_K, Q5_K, Q6_K) and Q5_0 / Q5_1 matmul and embedding:
 * against a scalar model of the operation sequence documented in
 * matmul_kquant.c (exact), against a double-precision product of the
 * dequantized weights and unquantized activations (within the activation
 * quantization's error bound), every instruction-set copy against the
 * portable one bit for bit, the activation quantizer against a scalar
 * model, bitwise batch and thread-count invariance, the out-of-memory
 * path, and the gguf-py reference blocks of tests/data/quant (the test's
 * own decoder, the embedding and the product all agree with them). */
#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/matmul_kquant_isa.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "kernel_test_util.h"

#include "internal.h" /* pw_host_fail_nth */

#include <math.h>
#include <pthread.h>
#include <stdio.h>

static const pw_dtype types[] = {PW_Q5_0, PW_Q5_1, PW_Q4_K, PW_Q5_K, PW_Q6_K};

static bool is_super(pw_dtype t) { return t == PW_Q4_K || t == PW_Q5_K || t == PW_Q6_K; }
static int64_t elems(pw_dtype t) { return pw_dtype_block_elems(t); }
static int64_t bytes_of(pw_dtype t) { return pw_dtype_block_bytes(t); }

/* IEEE half to float, written from the definition. */
static float half(const uint8_t *p) {
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    float v = exp == 0 ? ldexpf((float)mant, -24) : ldexpf((float)(mant | 0x400), exp - 25);
    return sign ? -v : v;
}

/* A random finite half: mostly normal magnitudes in [2^-9, 2^-1), some
 * subnormals and zeros, either sign (K-quant super-scales are positive in
 * real files, but the kernels must not care). */
static void put_random_half(uint8_t *p) {
    uint32_t r = kt_next();
    uint16_t sign = (uint16_t)((r & 1) << 15), mant = (uint16_t)((r >> 1) & 0x3FF);
    uint32_t kind = (r >> 11) % 16;
    uint16_t exp = kind == 0 ? 0 : (uint16_t)(6 + (r >> 15) % 8);
    uint16_t h = (uint16_t)(sign | exp << 10 | mant);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

static uint8_t *random_blocks(pw_dtype type, int64_t rows, int64_t k) {
    int64_t bb = bytes_of(type), nb = rows * (k / elems(type));
    uint8_t *w = malloc((size_t)(nb * bb));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = w + b * bb;
        for (int64_t i = 0; i < bb; i++) blk[i] = (uint8_t)kt_next();
        if (type == PW_Q6_K) {
            put_random_half(blk + 208);
        } else {
            put_random_half(blk);
            if (type != PW_Q5_0) put_random_half(blk + 2);
        }
    }
    return w;
}

/* ---- the weights, from ggml's layouts (docs/gguf.md) -------------------- */

/* Integer value of element e of a block: Q5_0 5-bit - 16, Q5_1 5-bit,
 * Q4_K / Q5_K the unsigned code, Q6_K the signed 6-bit value. */
static int qval(pw_dtype type, const uint8_t *blk, int e) {
    switch (type) {
    case PW_Q5_0:
    case PW_Q5_1: {
        const uint8_t *qh = blk + (type == PW_Q5_1 ? 4 : 2), *qs = qh + 4;
        int nib = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
        int bit = (qh[e / 8] >> (e % 8)) & 1;
        return (nib | bit << 4) - (type == PW_Q5_0 ? 16 : 0);
    }
    case PW_Q4_K:
    case PW_Q5_K: {
        int j = e / 32, l = e % 32;
        const uint8_t *qs = blk + (type == PW_Q5_K ? 48 : 16);
        int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
        if (type == PW_Q5_K) q |= ((blk[16 + l] >> j) & 1) << 4;
        return q;
    }
    default: {
        int h = e / 128, r = e % 128;
        int lo = (blk[64 * h + r % 64] >> (4 * (r / 64))) & 15;
        int hi = (blk[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
        return (lo | hi << 4) - 32;
    }
    }
}

/* Scale and min of group j (of 32) of a Q4_K / Q5_K super-block, byte by
 * byte from the packing rule. */
static void scale_min(const uint8_t *blk, int j, int *sc, int *m) {
    const uint8_t *s = blk + 4;
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* pw_dequantize's arithmetic, one block. */
static void dequant_block(pw_dtype type, const uint8_t *blk, float *o) {
    if (type == PW_Q5_0 || type == PW_Q5_1) {
        float d = half(blk), m = type == PW_Q5_1 ? half(blk + 2) : 0.0f;
        for (int e = 0; e < 32; e++)
            o[e] = type == PW_Q5_1 ? (float)qval(type, blk, e) * d + m
                                   : (float)qval(type, blk, e) * d;
    } else if (type == PW_Q6_K) {
        float d = half(blk + 208);
        for (int e = 0; e < 256; e++) {
            float dd = d * (float)(int8_t)blk[192 + e / 16];
            o[e] = dd * (float)qval(type, blk, e);
        }
    } else {
        float d = half(blk), dmin = half(blk + 2);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            scale_min(blk, j, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            for (int l = 0; l < 32; l++) o[32 * j + l] = d1 * (float)qval(type, blk, 32 * j + l) - m1;
        }
    }
}

static void dequant(pw_dtype type, const uint8_t *w, float *out, int64_t n) {
    for (int64_t b = 0; b < n / elems(type); b++)
        dequant_block(type, w + b * bytes_of(type), out + b * elems(type));
}

/* ---- the documented sequence, scalar ----------------------------------- */

/* Activations of one block of 32 (as matmul_quant.c) or 256 (as
 * matmul_kquant.c): amax, d = amax / 127, a = rint(x * (127 / amax))
 * clamped to [-127, 127]; lane sums sa (32) or 16-sums bs (256). */
typedef struct qact {
    int8_t a[256];
    float d, sa[8];
    int32_t bs[16];
} qact;

static void quantize(const float *x, int n, qact *q) {
    float amax = 0;
    for (int j = 0; j < n; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    q->d = amax / 127.0f;
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < n; j++) {
        long v = lrintf(x[j] * id);
        q->a[j] = (int8_t)(v < -127 ? -127 : v > 127 ? 127 : v);
    }
    for (int l = 0; l < 8 && n == 32; l++)
        q->sa[l] = q->d * (float)(q->a[4 * l] + q->a[4 * l + 1] + q->a[4 * l + 2] + q->a[4 * l + 3]);
    for (int g = 0; g < 16 && n == 256; g++) {
        q->bs[g] = 0;
        for (int j = 16 * g; j < 16 * g + 16; j++) q->bs[g] += q->a[j];
    }
}

static float lane_tree(const float *acc) {
    float t1 = acc[0] + acc[4], t2 = acc[2] + acc[6], t3 = acc[1] + acc[5], t4 = acc[3] + acc[7];
    float u1 = t1 + t2, u2 = t3 + t4;
    return u1 + u2;
}

static float canonical_dot(pw_dtype type, const float *x, const uint8_t *wrow, int64_t k) {
    const int64_t be = elems(type), bb = bytes_of(type);
    float acc[8] = {0}, sacc = 0.0f;
    for (int64_t b = 0; b < k / be; b++) {
        const uint8_t *blk = wrow + b * bb;
        qact q;
        quantize(x + b * be, (int)be, &q);
        if (!is_super(type)) {
            float d = half(blk), m = type == PW_Q5_1 ? half(blk + 2) : 0.0f;
            for (int l = 0; l < 8; l++) {
                int32_t p = 0;
                for (int e = 4 * l; e < 4 * l + 4; e++) p += qval(type, blk, e) * q.a[e];
                float a = fmaf(d * q.d, (float)p, acc[l]);
                if (type == PW_Q5_1) a = fmaf(m, q.sa[l], a);
                acc[l] = a;
            }
            continue;
        }
        /* one integer sum per super-block (every term exact), then one
         * conversion and fma, and one more for the mins */
        int32_t is = 0, mp = 0;
        if (type == PW_Q6_K) {
            for (int g = 0; g < 16; g++) {
                int32_t p = 0;
                for (int e = 16 * g; e < 16 * g + 16; e++) p += qval(type, blk, e) * q.a[e];
                is += (int8_t)blk[192 + g] * p;
            }
            sacc = fmaf(half(blk + 208) * q.d, (float)is, sacc);
            continue;
        }
        for (int i = 0; i < 8; i++) {
            int32_t p = 0;
            for (int e = 32 * i; e < 32 * i + 32; e++) p += qval(type, blk, e) * q.a[e];
            int sc, m;
            scale_min(blk, i, &sc, &m);
            is += sc * p;
            mp += m * (q.bs[2 * i] + q.bs[2 * i + 1]);
        }
        sacc = fmaf(half(blk) * q.d, (float)is, sacc);
        sacc = fmaf(-(half(blk + 2) * q.d), (float)mp, sacc);
    }
    if (is_super(type)) return sacc;
    return lane_tree(acc);
}

/* Error bound of the activation quantization against the exact product:
 * each a_j * d_a is within d_a / 2 (plus the rounding of d_a and of x *
 * (127 / amax)) of x_j, so a block's error is at most sum |w_j| * amax /
 * 127 * 0.51. On top, the float steps: each rounds once, relative 2^-24,
 * of terms no larger than `mag`, the sum of |x_j| times the magnitudes the
 * integers stand for (|d sc q| + |dmin m|; Q6_K's offset form |d sc| (|q|
 * + 64); the weights' own roundings in the dequantized reference are of
 * the same terms). 1e-5 * mag leaves a wide margin over the ~20 roundings
 * per lane. */
static void bounds(pw_dtype type, const float *x, const uint8_t *wrow, const float *wf,
                   int64_t k, double *quant_err, double *mag) {
    const int64_t be = elems(type), bb = bytes_of(type);
    *quant_err = 0, *mag = 0;
    for (int64_t b = 0; b < k / be; b++) {
        const uint8_t *blk = wrow + b * bb;
        double amax = 0, sw = 0;
        for (int64_t j = 0; j < be; j++) {
            double xv = fabs((double)x[b * be + j]);
            amax = fmax(amax, xv);
            sw += fabs((double)wf[b * be + j]);
            int e = (int)j;
            double t;
            if (type == PW_Q6_K) {
                t = fabs((double)half(blk + 208) * (int8_t)blk[192 + e / 16]) *
                    (abs(qval(type, blk, e)) + 64);
            } else if (is_super(type)) {
                int sc, m;
                scale_min(blk, e / 32, &sc, &m);
                t = fabs((double)half(blk) * sc * qval(type, blk, e)) +
                    fabs((double)half(blk + 2) * m);
            } else {
                t = fabs((double)half(blk) * qval(type, blk, e)) +
                    (type == PW_Q5_1 ? fabs((double)half(blk + 2)) : 0.0);
            }
            *mag += t * xv;
        }
        *quant_err += sw * amax / 127.0 * 0.51;
    }
}

static float *run_with(int level, pw_dtype type, const float *x, const uint8_t *w, int64_t t,
                       int64_t n, int64_t k) {
    float *y = kt_random((size_t)(t * n)); /* stale output must not matter */
    if (level < 0)
        pw_k_matmul_quant(y, x, w, type, t, n, k);
    else
        pw_k_matmul_quant_with((pw_k_int8_isa)level, y, x, w, type, t, n, k);
    return y;
}

static float *run(pw_dtype type, const float *x, const uint8_t *w, int64_t t, int64_t n,
                  int64_t k) {
    return run_with(-1, type, x, w, t, n, k);
}

/* The product of x[t][k] and w[n] against the scalar model (bitwise), the
 * reference (bound), and every copy this CPU runs (bitwise). */
static void check_product(pw_dtype type, const float *x, const uint8_t *w, int64_t t, int64_t n,
                          int64_t k, const char *what) {
    float *wf = malloc((size_t)(n * k) * sizeof *wf);
    dequant(type, w, wf, n * k);
    float *y = run_with(PW_K_INT8_GENERIC, type, x, w, t, n, k);
    bool ref_ok = true, canonical_ok = true, isas_ok = true;
    int64_t row_bytes = k / elems(type) * bytes_of(type);
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, qe, mag;
            for (int64_t q = 0; q < k; q++) s += (double)x[i * k + q] * wf[j * k + q];
            bounds(type, x + i * k, w + j * row_bytes, wf + j * k, k, &qe, &mag);
            double bound = qe + 1e-5 * mag + 1e-30;
            if (!(fabs(y[i * n + j] - s) <= bound)) {
                if (ref_ok)
                    fprintf(stderr, "%s %s %lldx%lldx%lld [%lld][%lld]: %g vs %g (bound %g)\n",
                            what, pw_dtype_name(type), (long long)t, (long long)n, (long long)k,
                            (long long)i, (long long)j, y[i * n + j], s, bound);
                ref_ok = false;
            }
            float c = canonical_dot(type, x + i * k, w + j * row_bytes, k);
            if (memcmp(&c, &y[i * n + j], sizeof c) != 0) {
                if (canonical_ok)
                    fprintf(stderr, "%s %s %lldx%lldx%lld [%lld][%lld]: %.9g, model %.9g\n", what,
                            pw_dtype_name(type), (long long)t, (long long)n, (long long)k,
                            (long long)i, (long long)j, y[i * n + j], c);
                canonical_ok = false;
            }
        }
    CHECK(ref_ok);
    CHECK(canonical_ok);
    for (int l = PW_K_INT8_AVX2; l <= PW_K_INT8_AVX512VNNI; l++) {
        if (!pw_k_isa_int8_runs((pw_k_int8_isa)l)) {
            static bool noted[4];
            if (!noted[l]) printf("copy %s not run on this CPU\n", pw_k_isa_int8_name(l));
            noted[l] = true;
            continue;
        }
        float *yi = run_with(l, type, x, w, t, n, k);
        bool same = kt_bitwise_equal(yi, y, (size_t)(t * n) * sizeof *y);
        if (!same)
            fprintf(stderr, "%s %s %lldx%lldx%lld: copy %s differs from the portable one\n", what,
                    pw_dtype_name(type), (long long)t, (long long)n, (long long)k,
                    pw_k_isa_int8_name(l));
        isas_ok &= same;
        free(yi);
    }
    CHECK(isas_ok);
    /* the default entry point is one of the copies */
    float *yd = run(type, x, w, t, n, k);
    CHECK(kt_bitwise_equal(yd, y, (size_t)(t * n) * sizeof *y));
    free(yd), free(wf), free(y);
}

static void check_random(pw_dtype type, int64_t t, int64_t n, int64_t k) {
    float *x = kt_random((size_t)(t * k));
    /* a zero block and a block of one large value among the activations */
    if (t > 1) memset(x + k, 0, 32 * sizeof *x);
    if (t > 2) x[2 * k + 7] = 300.0f;
    uint8_t *w = random_blocks(type, n, k);
    check_product(type, x, w, t, n, k, "random");
    free(x), free(w);
}

/* The integer lane sums at their largest: every weight code, scale and
 * min at its maximum (all bits set) or every weight zero, against
 * activations all at +127, all at -127, or alternating, so that the
 * decode tiles' packed forms (two chunks' sums in one dword's words, the
 * high nibbles' sums times 16, the column panels' group sums taking their
 * scale as words) meet their bounds. One row, then two (the batch tiles),
 * 1 to 9 columns (every decode tile and tail), then 8 rows (the column
 * panels of every copy) and 16 (the AVX-512 copy's row-lane panels) over 9
 * and 17 columns (a part panel, a full one and a tail); 2 super-blocks per
 * row. */
static void check_extremes(pw_dtype type) {
    const int64_t k = 2 * 256, n = 17;
    const int64_t bb = bytes_of(type), nb = n * (k / 256);
    uint8_t *w = malloc((size_t)(nb * bb));
    float *x = malloc((size_t)(16 * k) * sizeof *x);
    for (int wk = 0; wk < 2; wk++) {
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = w + b * bb;
            memset(blk, wk == 0 ? 0xFF : 0x00, (size_t)bb);
            /* f16 scales 0.5 (and dmin 0.25): finite, every code at its extreme */
            if (type == PW_Q6_K) {
                blk[208] = 0x00, blk[209] = 0x38;
                if (wk == 1) memset(blk + 192, 0x7F, 16); /* zero codes, top scales */
            } else {
                blk[0] = 0x00, blk[1] = 0x38, blk[2] = 0x00, blk[3] = 0x34;
                if (wk == 1) memset(blk + 4, 0xFF, 12);
            }
        }
        for (int xk = 0; xk < 3; xk++) {
            for (int64_t j = 0; j < 16 * k; j++)
                x[j] = xk == 0 ? 1.0f : xk == 1 ? -1.0f : (j % 2 ? -2.0f : 2.0f);
            for (int64_t cols = 1; cols <= 9; cols += 2) {
                check_product(type, x, w, 1, cols, k, "extreme");
                check_product(type, x, w, 2, cols + 1, k, "extreme");
            }
            check_product(type, x, w, 8, 9, k, "extreme");
            check_product(type, x, w, 8, n, k, "extreme");
            check_product(type, x, w, 16, 9, k, "extreme");
            check_product(type, x, w, 16, n, k, "extreme");
        }
    }
    free(w), free(x);
}

/* The K-quant activation quantizer against the scalar model, byte for
 * byte: zero, tie, tiny and huge super-blocks. */
static void check_quantizer(void) {
    const int64_t k = 6 * 256, rows = 3;
    float *x = kt_random((size_t)(rows * k));
    for (int j = 0; j < 256; j++) x[j] = 0.0f;                          /* all zero */
    for (int j = 0; j < 256; j++) x[256 + j] = (float)(j % 255 - 127) * 0.5f; /* ties */
    for (int j = 0; j < 256; j++) x[512 + j] = 1e-30f * (float)j;       /* tiny */
    for (int j = 0; j < 256; j++) x[768 + j] = 3e38f * (j % 2 ? -1.0f : 1.0f);
    x[1024 + 5] = -0.0f;
    const size_t bytes = (size_t)(rows * PW_K_Q8K_ROW_BYTES(k));
    uint8_t *got = malloc(bytes);
    memset(got, 0xA5, bytes);
    pw_k_q8k_quantize_rows(got, x, rows, k);
    bool ok = true;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < k / 256; b++) {
            qact q;
            quantize(x + r * k + b * 256, 256, &q);
            const uint8_t *row = got + r * PW_K_Q8K_ROW_BYTES(k);
            float d;
            int16_t bs[16];
            memcpy(&d, row + k + b * 4, sizeof d);
            memcpy(bs, row + k + (k / 256) * 4 + b * 32, sizeof bs);
            ok &= memcmp(row + b * 256, q.a, 256) == 0 && memcmp(&d, &q.d, 4) == 0;
            for (int g = 0; g < 16; g++) ok &= bs[g] == q.bs[g];
        }
    CHECK(ok);
#if PW_HAVE_FMA_KERNELS
    /* the x86 copies, byte for byte, NaN and infinities included */
    x[1024 + 9] = NAN, x[1024 + 10] = INFINITY, x[1280 + 3] = -INFINITY;
    pw_k_q8k_quantize_rows(got, x, rows, k);
    static void (*const copies[])(uint8_t *, const float *, int64_t, int64_t) = {
        pw_k_q8k_quantize_rows_fma, pw_k_q8k_quantize_rows_avxvnni,
        pw_k_q8k_quantize_rows_avx512vnni};
    uint8_t *mine = malloc(bytes);
    for (int l = PW_K_INT8_AVX2; l <= PW_K_INT8_AVX512VNNI; l++) {
        if (!pw_k_isa_int8_runs((pw_k_int8_isa)l)) continue;
        memset(mine, 0x5A, bytes);
        copies[l - PW_K_INT8_AVX2](mine, x, rows, k);
        if (memcmp(mine, got, bytes) != 0)
            fprintf(stderr, "K-quant quantizer: copy %s differs\n", pw_k_isa_int8_name(l));
        CHECK(memcmp(mine, got, bytes) == 0);
    }
    free(mine);
#endif
    free(x), free(got);
}

/* 1, 2 and 3 threads give the same bits on a product above the split
 * threshold with a partial column group, t rows. */
static void check_threads(pw_dtype type, int64_t t) {
    const int64_t n = 203, k = 512;
    float *x = kt_random((size_t)(t * k));
    uint8_t *w = random_blocks(type, n, k);
    pw_set_num_threads(1);
    float *y1 = run(type, x, w, t, n, k);
    for (int th = 2; th <= 3; th++) {
        pw_set_num_threads(th);
        float *y = run(type, x, w, t, n, k);
        CHECK(kt_bitwise_equal(y, y1, (size_t)(t * n) * sizeof *y));
        free(y);
    }
    pw_set_num_threads(1);
    free(x), free(w), free(y1);
}

/* Row r alone, and at a random place in batches of 1..40 filled with
 * random rows or zero padding, gives the same bits. */
static void check_invariance(pw_dtype type, int64_t n, int64_t k) {
    const int64_t T = 23;
    float *x = kt_random((size_t)(T * k));
    uint8_t *w = random_blocks(type, n, k);
    float *y = run(type, x, w, T, n, k);
    int bad = 0;
    for (int64_t r = 0; r < T; r += 4) {
        float *alone = run(type, x + r * k, w, 1, n, k);
        if (!kt_bitwise_equal(alone, y + r * n, (size_t)n * sizeof(float))) bad++;
        free(alone);
        for (int64_t s = 1 + r % 5; s <= 40; s += 9) {
            int64_t at = (int64_t)(kt_next() % (uint32_t)s);
            bool pad = (s + r) % 2 == 1;
            float *bx = pad ? kt_zeros((size_t)(s * k)) : kt_random((size_t)(s * k));
            memcpy(bx + at * k, x + r * k, (size_t)k * sizeof(float));
            float *by = run(type, bx, w, s, n, k);
            if (!kt_bitwise_equal(by + at * n, y + r * n, (size_t)n * sizeof(float))) bad++;
            free(bx), free(by);
        }
    }
    if (bad) fprintf(stderr, "%s invariance %lldx%lld: %d mismatches\n", pw_dtype_name(type),
                     (long long)n, (long long)k, bad);
    CHECK_EQ_INT(bad, 0);
    free(x), free(w), free(y);
}

/* A product on a thread of its own, with the fail-th host allocation
 * failing (0: none). A new thread has no per-thread buffers yet, so its
 * allocations come in a fixed order: the activations' buffer record, then
 * its bytes; then (the AVX-512 copy's row-lane panels, 16 rows and more)
 * the panels' buffer record, then its bytes. */
typedef struct fresh_run {
    pw_dtype type;
    const float *x;
    const uint8_t *w;
    int64_t t, n, k;
    int fail;
    float *y;
    bool failed; /* the injected failure happened (its message was set) */
} fresh_run;

static void *fresh_run_main(void *arg) {
    fresh_run *r = arg;
    pw_clear_error();
    pw_host_fail_nth(r->fail);
    r->y = run(r->type, r->x, r->w, r->t, r->n, r->k);
    pw_host_fail_nth(0);
    r->failed = strstr(pw_last_error(), "out of host memory") != NULL;
    return NULL;
}

static float *run_on_fresh_thread(int fail, pw_dtype type, const float *x, const uint8_t *w,
                                  int64_t t, int64_t n, int64_t k) {
    fresh_run r = {type, x, w, t, n, k, fail, NULL, false};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, fresh_run_main, &r) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(r.failed == (fail > 0)); /* the allocation meant was made, and failed */
    return r.y;
}

/* When the activations' buffer cannot be had, rows go a few at a time
 * through the stack; when the row-lane panels' buffer cannot, their rows
 * go through the column panels. Both give the same bits. */
static void check_out_of_memory(pw_dtype type) {
    const int64_t t = 40, n = 12, k = 4096;
    float *x = kt_random((size_t)(t * k));
    uint8_t *w = random_blocks(type, n, k);
    float *whole = run_on_fresh_thread(0, type, x, w, t, n, k);
    /* the row-lane buffer is the AVX-512 copy's only */
    const bool lanes = is_super(type) && pw_k_isa_int8() == PW_K_INT8_AVX512VNNI;
    if (is_super(type) && !lanes) printf("no AVX-512 VNNI copy: the row-lane fallback not run\n");
    for (int fail = 2; fail <= (lanes ? 4 : 2); fail += 2) {
        float *y = run_on_fresh_thread(fail, type, x, w, t, n, k);
        CHECK(kt_bitwise_equal(y, whole, (size_t)(t * n) * sizeof *whole));
        free(y);
    }
    free(x), free(w), free(whole);
}

static void check_embedding(pw_dtype type) {
    const int64_t vocab = 7, dim = 512, t = 6;
    uint8_t *table = random_blocks(type, vocab, dim);
    float *full = malloc((size_t)(vocab * dim) * sizeof *full);
    dequant(type, table, full, vocab * dim);
    int32_t ids[6] = {3, 0, 6, -1, 7, 3};
    float *out = kt_random((size_t)(t * dim));
    pw_k_embedding_quant(out, ids, table, type, t, vocab, dim);
    float *zero = kt_zeros((size_t)dim);
    for (int64_t i = 0; i < t; i++) {
        const float *want = ids[i] >= 0 && ids[i] < vocab ? full + ids[i] * dim : zero;
        CHECK(kt_bitwise_equal(out + i * dim, want, (size_t)dim * sizeof *out));
    }
    free(zero), free(table), free(full), free(out);
}

/* tests/data/quant/<type>.bin (scripts/gen-quant-fixtures.py): blocks and
 * what gguf-py's numpy code decodes them to. This test's decoder, the
 * embedding kernel and the product (as a matrix of one block per row)
 * agree with them. */
static void check_fixture(const char *name, pw_dtype type) {
    char path[512];
    snprintf(path, sizeof path, "%s/quant/%s.bin", PW_TEST_DATA_DIR, name);
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    if (!fp) return;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *file = malloc((size_t)len);
    CHECK(fread(file, 1, (size_t)len, fp) == (size_t)len);
    fclose(fp);
    uint32_t hdr[5];
    memcpy(hdr, file + 4, sizeof hdr);
    const int64_t nb = hdr[1], be = hdr[2], bb = hdr[3];
    CHECK(memcmp(file, "PWQF", 4) == 0 && be == elems(type) && bb == bytes_of(type));
    const size_t n = (size_t)(nb * be);
    const uint8_t *p = file + 24 + (hdr[4] ? n * 4 : 0);
    CHECK((size_t)len == 24 + (hdr[4] ? n * 4 : 0) + (size_t)(nb * bb) + n * 4);
    uint8_t *blocks = malloc((size_t)(nb * bb));
    memcpy(blocks, p, (size_t)(nb * bb));
    float *values = malloc(n * sizeof *values), *mine = malloc(n * sizeof *mine);
    memcpy(values, p + nb * bb, n * sizeof *values);
    dequant(type, blocks, mine, (int64_t)n);
    CHECK(kt_bitwise_equal(mine, values, n * sizeof *mine));
    int32_t ids[64];
    for (int64_t i = 0; i < nb; i++) ids[i] = (int32_t)(nb - 1 - i);
    float *rows = malloc(n * sizeof *rows);
    pw_k_embedding_quant(rows, ids, blocks, type, nb, nb, be);
    bool emb_ok = true;
    for (int64_t i = 0; i < nb; i++)
        emb_ok &= kt_bitwise_equal(rows + i * be, values + ids[i] * be, (size_t)be * sizeof *rows);
    CHECK(emb_ok);
    const int64_t t = 3;
    float *x = kt_random((size_t)(t * be));
    check_product(type, x, blocks, t, nb, be, name);
    free(x), free(rows), free(values), free(mine), free(blocks), free(file);
}

static void check_type(pw_dtype type) {
    CHECK(pw_k_quant_supported(type));
    int64_t be = elems(type);
    /* T mod 4 and N mod 4 / 8 reach every tile and tail; several
     * blocks per row */
    static const int64_t shapes[][3] = {{1, 1, 1}, {1, 7, 2},  {3, 5, 3},  {4, 9, 1},
                                        {6, 13, 5}, {9, 4, 2}, {13, 17, 1}, {2, 14, 2},
                                        {5, 31, 1}, {8, 19, 3}, {17, 6, 4},
                                        /* batches of rows longer than a panel
                                         * holds (Q5_0: 64 blocks, K-quants: 8) */
                                        {9, 18, 9},
                                        /* and over several panel slices of
                                         * K, the last partial */
                                        {10, 20, 22},
                                        /* odd batches over three panels, the
                                         * last partial: the two-row tiles,
                                         * their leftover row and the next
                                         * panel's prefetch */
                                        {37, 45, 2},
                                        /* the AVX-512 copy's row-lane panels:
                                         * one and two whole 16-row vectors,
                                         * a part and a whole column panel;
                                         * and (Q6_K) two passes of 128 rows
                                         * and the leftover rows' path */
                                        {16, 9, 2}, {32, 33, 3}, {150, 20, 3},
                                        /* decode (one row): Q5_0's 16-column
                                         * tiles, whole and with tails */
                                        {1, 16, 1}, {1, 45, 3}, {1, 33, 2}};
    for (size_t s = 0; s < KT_LEN(shapes); s++)
        check_random(type, shapes[s][0], shapes[s][1], shapes[s][2] * (be == 32 ? 8 : 1) * be);
    check_invariance(type, 21, 2 * 256);
    check_threads(type, 1); /* decode's column split */
    check_threads(type, 5);
    check_threads(type, 9);  /* the K-quant panels */
    check_threads(type, 21); /* and the row-lane ones (AVX-512), split at any 8 columns */
    check_embedding(type);
    check_out_of_memory(type);
    if (is_super(type)) check_extremes(type);
}

int main(void) {
    kt_seed(17);
    for (size_t i = 0; i < KT_LEN(types); i++) check_type(types[i]);
    /* the AVX-512 copy's Q6_K decode tile without GFNI too, where the CPU
     * has it (a CPU without runs only that path above) */
    if (pw_k_isa_gfni()) {
        pw_k_isa_gfni_set(false);
        CHECK(!pw_k_isa_gfni());
        check_type(PW_Q6_K);
        pw_k_isa_gfni_set(true);
        CHECK(pw_k_isa_gfni());
    } else {
        printf("CPU without GFNI: the Q6_K decode tile's GFNI path not run\n");
    }
    check_quantizer();
    check_fixture("q5_0", PW_Q5_0);
    check_fixture("q5_1", PW_Q5_1);
    check_fixture("q4_K", PW_Q4_K);
    check_fixture("q5_K", PW_Q5_K);
    check_fixture("q6_K", PW_Q6_K);
    CHECK(!pw_k_quant_supported(PW_Q2_K));
    CHECK(!pw_k_quant_supported(PW_Q3_K));
    return pw_test_finish("kernels_matmul_kquant");
}
