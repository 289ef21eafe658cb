/* Quantized matmul and embedding: against a dequantize-then-double
 * reference (within the activation quantization's error bound), against a
 * scalar model of the documented operation sequence (exact), every
 * instruction-set copy against the others bit for bit (products and
 * quantized activations), bitwise batch and thread-count invariance, and
 * capture/replay through pw_launch equal to eager launches. */
#include "ops/cpu/kernels.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "kernel_test_util.h"

#include "internal.h" /* pw_host_fail_nth */

#include <math.h>

#define QK 32

static const pw_dtype types[] = {PW_Q8_0, PW_Q4_0, PW_Q4_1};

/* IEEE half to float, written from the definition. */
static float half(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    float v = exp == 0 ? ldexpf((float)mant, -24) : ldexpf((float)(mant | 0x400), exp - 25);
    return sign ? -v : v;
}

/* A random finite half: mostly normal magnitudes in [2^-9, 2^-1), some
 * subnormals and zeros, either sign. */
static uint16_t random_half(void) {
    uint32_t r = kt_next();
    uint16_t sign = (uint16_t)((r & 1) << 15), mant = (uint16_t)((r >> 1) & 0x3FF);
    uint32_t kind = (r >> 11) % 16;
    uint16_t exp = kind == 0 ? 0 : (uint16_t)(6 + (r >> 15) % 8);
    return (uint16_t)(sign | exp << 10 | mant);
}

static void put_half(uint8_t *p, uint16_t h) {
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

static uint8_t *random_blocks(pw_dtype type, int64_t rows, int64_t k) {
    if (type == PW_Q4_0X16) { /* Q4_0 rows, interleaved */
        uint8_t *w = random_blocks(PW_Q4_0, rows, k), *x = malloc((size_t)(rows * (k / QK) * 18));
        pw_k_q4_0_interleave(x, w, rows, k);
        free(w);
        return x;
    }
    int64_t bb = pw_dtype_block_bytes(type), nb = rows * (k / QK);
    uint8_t *w = malloc((size_t)(nb * bb));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = w + b * bb;
        for (int64_t i = 0; i < bb; i++) blk[i] = (uint8_t)kt_next();
        put_half(blk, random_half());
        if (type == PW_Q4_1) put_half(blk + 2, random_half());
    }
    return w;
}

/* pw_dequantize's arithmetic: q*d, (nibble-8)*d, nibble*d + m. */
static void dequant(pw_dtype type, const uint8_t *w, float *out, int64_t n) {
    int64_t bb = pw_dtype_block_bytes(type);
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *blk = w + b * bb;
        float d = half((uint16_t)(blk[0] | blk[1] << 8)), *o = out + b * QK;
        if (type == PW_Q8_0) {
            for (int j = 0; j < QK; j++) o[j] = (float)(int8_t)blk[2 + j] * d;
        } else if (type == PW_Q4_0) {
            for (int j = 0; j < QK / 2; j++) {
                o[j] = (float)((blk[2 + j] & 15) - 8) * d;
                o[j + 16] = (float)((blk[2 + j] >> 4) - 8) * d;
            }
        } else {
            float m = half((uint16_t)(blk[2] | blk[3] << 8));
            for (int j = 0; j < QK / 2; j++) {
                o[j] = (float)(blk[4 + j] & 15) * d + m;
                o[j + 16] = (float)(blk[4 + j] >> 4) * d + m;
            }
        }
    }
}

/* Integer value of element j of a block in the sequence: Q8_0 the int8,
 * Q4_0 and Q4_1 nibble - 8 (Q4_1 centred; its minimum becomes m + 8 d). */
static int qval(pw_dtype type, const uint8_t *blk, int j) {
    if (type == PW_Q8_0) return (int8_t)blk[2 + j];
    const uint8_t *qs = blk + (type == PW_Q4_1 ? 4 : 2);
    int nib = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    return nib - 8;
}

/* Activation quantization as documented (matmul_quant.c), scalar: per
 * block amax, d = amax / 127, a_j = rint(x_j * (127 / amax)) clamped to
 * [-127, 127], s = d * (a_0 + ... + a_31). */
typedef struct qblock {
    int8_t a[QK];
    float d, s, sl[8]; /* sl: the lane sums of the per-row layout, d * (a_4l + ... + a_4l+3) */
} qblock;

static void quantize_block(const float *x, qblock *q) {
    float amax = 0;
    for (int j = 0; j < QK; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    q->d = amax / 127.0f;
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < QK; j++) {
        long v = lrintf(x[j] * id);
        q->a[j] = (int8_t)(v < -127 ? -127 : v > 127 ? 127 : v);
    }
    int sum = 0;
    for (int j = 0; j < QK; j++) sum += q->a[j];
    q->s = q->d * (float)sum;
    for (int l = 0; l < 8; l++)
        q->sl[l] = q->d * (float)(q->a[4 * l] + q->a[4 * l + 1] + q->a[4 * l + 2] + q->a[4 * l + 3]);
}

/* The documented sequence, scalar: per block b, p = the sum of all 32
 * w_j a_j (exact), acc = fma(d_w d_a, p, acc), and for Q4_1
 * mn = fma(m_w + 8 d_w, s, mn), y = acc + mn. */
static float canonical_dot(pw_dtype type, const float *x, const uint8_t *wrow, int64_t k) {
    int64_t bb = pw_dtype_block_bytes(type);
    float acc = 0.0f, mn = 0.0f;
    for (int64_t b = 0; b < k / QK; b++) {
        const uint8_t *blk = wrow + b * bb;
        qblock q;
        quantize_block(x + b * QK, &q);
        int32_t p = 0;
        for (int j = 0; j < QK; j++) p += qval(type, blk, j) * q.a[j];
        float d = half((uint16_t)(blk[0] | blk[1] << 8));
        acc = fmaf(d * q.d, (float)p, acc);
        if (type == PW_Q4_1)
            mn = fmaf(fmaf(8.0f, d, half((uint16_t)(blk[2] | blk[3] << 8))), q.s, mn);
    }
    return type == PW_Q4_1 ? acc + mn : acc;
}

/* Error bound of the activation quantization against the exact product:
 * each a_j * d_a is within d_a / 2 (plus rounding of d_a) of x_j, so the
 * block's error is at most sum |w_j| * d_a * 0.51. */
static double quant_bound(pw_dtype type, const float *x, const float *wf, int64_t k) {
    (void)type;
    double e = 0;
    for (int64_t b = 0; b < k / QK; b++) {
        double amax = 0, sw = 0;
        for (int j = 0; j < QK; j++) {
            amax = fmax(amax, fabs((double)x[b * QK + j]));
            sw += fabs((double)wf[b * QK + j]);
        }
        e += sw * amax / 127.0 * 0.51;
    }
    return e;
}

static float *run(pw_dtype type, const float *x, const uint8_t *w, int64_t t, int64_t n,
                  int64_t k) {
    float *y = kt_random((size_t)(t * n)); /* stale output must not matter */
    pw_k_matmul_quant(y, x, w, type, t, n, k);
    return y;
}

/* The product of x[t][k] and w (n rows of blocks of `type`) against the
 * double reference, the scalar model and every copy. */
static void check_product(pw_dtype type, int64_t t, int64_t n, int64_t k, const float *x,
                          const uint8_t *w) {
    float *wf = malloc((size_t)(n * k) * sizeof *wf);
    dequant(type, w, wf, n * k);
    float *y = run(type, x, w, t, n, k);
    bool ref_ok = true, canonical_ok = true, isas_ok = true;
    int64_t row_bytes = k / QK * pw_dtype_block_bytes(type);
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int64_t q = 0; q < k; q++) {
                s += (double)x[i * k + q] * wf[j * k + q];
                mag += fabs((double)x[i * k + q] * wf[j * k + q]);
            }
            double bound = quant_bound(type, x + i * k, wf + j * k, k) + 1e-5 * mag + 1e-30;
            if (!(fabs(y[i * n + j] - s) <= bound)) {
                fprintf(stderr, "%s %lldx%lldx%lld [%lld][%lld]: %g vs %g (bound %g)\n",
                        pw_dtype_name(type), (long long)t, (long long)n, (long long)k,
                        (long long)i, (long long)j, y[i * n + j], s, bound);
                ref_ok = false;
            }
            float c = canonical_dot(type, x + i * k, w + j * row_bytes, k);
            if (memcmp(&c, &y[i * n + j], sizeof c) != 0) {
                if (canonical_ok)
                    fprintf(stderr, "%s %lldx%lldx%lld [%lld][%lld]: %.9g, model %.9g\n",
                            pw_dtype_name(type), (long long)t, (long long)n, (long long)k,
                            (long long)i, (long long)j, y[i * n + j], c);
                canonical_ok = false;
            }
        }
    CHECK(ref_ok);
    CHECK(canonical_ok);
    /* Every instruction-set copy this CPU runs, called directly: the same
     * bits (the quantized activations too). */
    for (int l = PW_K_INT8_GENERIC; l <= PW_K_INT8_AVX512VNNI; l++) {
        if (!pw_k_isa_int8_runs((pw_k_int8_isa)l)) {
            static bool noted[4];
            if (!noted[l]) printf("copy %s not run on this CPU\n", pw_k_isa_int8_name(l));
            noted[l] = true;
            continue;
        }
        float *yi = kt_random((size_t)(t * n));
        pw_k_matmul_quant_with((pw_k_int8_isa)l, yi, x, w, type, t, n, k);
        bool same = kt_bitwise_equal(yi, y, (size_t)(t * n) * sizeof *y);
        if (!same) fprintf(stderr, "copy %s differs\n", pw_k_isa_int8_name(l));
        isas_ok &= same;
        free(yi);
    }
    CHECK(isas_ok);
    free(wf), free(y);
}

/* Odd shapes reach every tile and tail path: T mod 4, N mod 8, several
 * blocks. */
static void check_reference(pw_dtype type, int64_t t, int64_t n, int64_t k) {
    float *x = kt_random((size_t)(t * k));
    uint8_t *w = random_blocks(type, n, k);
    check_product(type, t, n, k, x, w);
    free(x), free(w);
}

/* The integer sums at their extremes: weight bytes all 0x80 (Q8_0: -128,
 * whose w + 128 is 0 and |w| 128; Q4: nibbles 0 and 8) or all 0xFF (Q8_0:
 * -1; Q4: nibble 15), against activations at +-127 in every lane, so
 * the folds and the unsigned operands reach their largest magnitudes. */
static void check_extremes(pw_dtype type) {
    const int64_t t = 6, n = 10, k = 96, bb = pw_dtype_block_bytes(type);
    float *x = malloc((size_t)(t * k) * sizeof *x);
    for (int64_t i = 0; i < t * k; i++) {
        int64_t row = i / k;
        x[i] = row % 3 == 0 ? 1.0f : row % 3 == 1 ? -1.0f : (i % 2 ? 2.0f : -2.0f);
    }
    uint8_t *w = malloc((size_t)(n * (k / QK) * bb));
    for (int64_t b = 0; b < n * (k / QK); b++) {
        uint8_t *blk = w + b * bb;
        memset(blk, (b / (k / QK)) % 2 ? 0xFF : 0x80, (size_t)bb);
        put_half(blk, 0x3C00);                         /* d = 1 */
        if (type == PW_Q4_1) put_half(blk + 2, 0xC000); /* m = -2 */
    }
    check_product(type, t, n, k, x, w);
    free(x), free(w);
}

/* Whether buf (rows x k, block-major, groups of `group` rows) holds the
 * scalar model's values, scales, block sums and folds: every byte of it. */
static bool q8b_matches_model(const uint8_t *buf, const float *x, int64_t rows, int64_t k,
                              pw_dtype type, int64_t group, bool magic) {
    const int64_t nb = k / QK;
    bool ok = true;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            qblock q;
            quantize_block(x + r * k + b * QK, &q);
            /* rows in groups, block-major within a group: row r's block b
             * at its group's start + (b * the group's rows + r - g0) * 64 */
            const int64_t g0 = r / group * group;
            const int64_t g_rows = rows - g0 < group ? rows - g0 : group;
            const uint8_t *blk = buf + g0 * PW_K_Q8B_ROW_BYTES(k) + (b * g_rows + r - g0) * 2 * QK;
            float d, sum;
            int32_t fold[8], want_fold[8];
            /* each block's values then fold (for Q4 where magic, offset by the bits of
             * 1.5 * 2^23); scales, then block sums (block-major) after the
             * rows */
            const uint8_t *scales = buf + rows * PW_K_Q8B_ROW_BYTES(k);
            memcpy(&d, scales + (b * rows + r) * 4, sizeof d);
            memcpy(&sum, scales + (nb * rows + b * rows + r) * 4, sizeof sum);
            memcpy(fold, blk + QK, sizeof fold);
            for (int l = 0; l < 8; l++)
                want_fold[l] = (type == PW_Q8_0 || !magic ? 0 : 0x4B400000) -
                               (type == PW_Q8_0 ? 128 : 8) *
                                   (q.a[4 * l] + q.a[4 * l + 1] + q.a[4 * l + 2] + q.a[4 * l + 3]);
            ok &= memcmp(blk, q.a, QK) == 0 && memcmp(&d, &q.d, 4) == 0 &&
                  memcmp(&sum, &q.s, 4) == 0 && memcmp(fold, want_fold, sizeof fold) == 0;
        }
    return ok;
}

/* The quantizer copies give the model's bytes (the same bytes where their
 * row groups are the same size), including zero, tiny and huge blocks and
 * values that round to ties, in both layouts (matmul_quant_isa.h):
 * block-major with block sums and folds (this product; the folds differ
 * for Q8_0 and Q4 weights, the row groups by copy), per row with lane sums
 * (matmul_kquant.c's Q5_0 / Q5_1). */
static void check_quantizer(pw_dtype type) {
    const int64_t k = 8 * QK, rows = 11, nb = k / QK; /* groups of 8: 8 rows and 3 */
    float *x = kt_random((size_t)(rows * k));
    for (int j = 0; j < QK; j++) x[j] = 0.0f;                        /* all zero */
    for (int j = 0; j < QK; j++) x[QK + j] = (float)(j - 16) * 0.5f;  /* ties */
    for (int j = 0; j < QK; j++) x[2 * QK + j] = 1e-30f * (float)j;   /* tiny */
    for (int j = 0; j < QK; j++) x[3 * QK + j] = 3e38f * (j % 2 ? -1.0f : 1.0f);
    x[4 * QK + 5] = -0.0f;
    const size_t bytes = (size_t)PW_K_Q8B_BYTES(rows, k);
    const size_t row_bytes = (size_t)(rows * PW_K_Q8_ROW_BYTES(k));
    uint8_t *ref = malloc(bytes), *got = malloc(bytes);
    uint8_t *rref = malloc(row_bytes), *rgot = malloc(row_bytes);
    pw_k_q8b_quantize_rows_generic(ref, x, rows, k, type);
    pw_k_q8_quantize_rows_generic(rref, x, rows, k);
    /* the portable copy against the scalar model */
    CHECK(q8b_matches_model(ref, x, rows, k, type, PW_K_Q8B_GROUP_GENERIC,
                            PW_K_Q8B_MAGIC_GENERIC));
    bool rows_ok = true;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            qblock q;
            quantize_block(x + r * k + b * QK, &q);
            const uint8_t *rrow = rref + r * PW_K_Q8_ROW_BYTES(k);
            float rd, sl[8];
            memcpy(&rd, rrow + k + b * 4, sizeof rd);
            memcpy(sl, rrow + k + nb * 4 + b * 32, sizeof sl);
            rows_ok &= memcmp(rrow + b * QK, q.a, QK) == 0 && memcmp(&rd, &q.d, 4) == 0 &&
                       memcmp(sl, q.sl, sizeof sl) == 0;
        }
    CHECK(rows_ok);
#if PW_HAVE_FMA_KERNELS
    void (*copies[])(uint8_t *, const float *, int64_t, int64_t, pw_dtype) = {
        pw_k_q8b_quantize_rows_fma, pw_k_q8b_quantize_rows_avxvnni,
        pw_k_q8b_quantize_rows_avx512vnni};
    void (*row_copies[])(uint8_t *, const float *, int64_t, int64_t) = {
        pw_k_q8_quantize_rows_fma, pw_k_q8_quantize_rows_avxvnni,
        pw_k_q8_quantize_rows_avx512vnni};
    const int64_t groups[] = {PW_K_Q8B_GROUP_FMA, PW_K_Q8B_GROUP_AVXVNNI,
                              PW_K_Q8B_GROUP_AVX512VNNI};
    const bool magic[] = {PW_K_Q8B_MAGIC_FMA, PW_K_Q8B_MAGIC_AVXVNNI, PW_K_Q8B_MAGIC_AVX512VNNI};
    for (int c = 0; c < 3; c++) {
        if (!pw_k_isa_int8_runs((pw_k_int8_isa)(PW_K_INT8_AVX2 + c))) continue;
        memset(got, 0xA5, bytes);
        copies[c](got, x, rows, k, type);
        CHECK(q8b_matches_model(got, x, rows, k, type, groups[c], magic[c]));
        if (groups[c] == PW_K_Q8B_GROUP_GENERIC && magic[c] == PW_K_Q8B_MAGIC_GENERIC)
            CHECK(memcmp(got, ref, bytes) == 0);
        memset(rgot, 0xA5, row_bytes);
        row_copies[c](rgot, x, rows, k);
        CHECK(memcmp(rgot, rref, row_bytes) == 0);
    }
#endif
    free(x), free(ref), free(got), free(rref), free(rgot);
}

/* When the activations' buffer cannot grow, rows go a few at a time
 * through the stack and give the same bits; a row too long for the stack
 * gives zeros (and a warning) rather than a crash. */
static void check_out_of_memory(void) {
    const int64_t t = 64, n = 24, k = 2048;
    float *x = kt_random((size_t)(t * k));
    uint8_t *w = random_blocks(PW_Q4_1, n, k);
    pw_host_fail_nth(1); /* larger than any earlier call: the buffer must grow */
    float *chunked = run(PW_Q4_1, x, w, t, n, k);
    pw_host_fail_nth(0);
    float *whole = run(PW_Q4_1, x, w, t, n, k);
    CHECK(kt_bitwise_equal(chunked, whole, (size_t)(t * n) * sizeof *whole));
    free(x), free(w), free(chunked), free(whole);

    /* Q4_0: when the fold totals' buffer cannot grow, the tiles derive
     * them where they use them; the same bits. The activations' buffer
     * already holds these rows (above), and the totals' buffer must grow
     * past any earlier Q4_0 call's, so the failing allocation is theirs. */
    x = kt_random((size_t)(t * k));
    w = random_blocks(PW_Q4_0, n, k);
    pw_host_fail_nth(1);
    float *inline_totals = run(PW_Q4_0, x, w, t, n, k);
    pw_host_fail_nth(0);
    whole = run(PW_Q4_0, x, w, t, n, k);
    CHECK(kt_bitwise_equal(inline_totals, whole, (size_t)(t * n) * sizeof *whole));
    free(x), free(w), free(inline_totals), free(whole);

    /* Q4_0 batches of 9 rows or more unpack the weights into a panel;
     * when its buffer cannot grow, the tiles unpack them where they use
     * them: the same bits. 128 blocks a row: a larger panel than any
     * earlier call's, while the activations and fold totals of 9 rows fit
     * the buffers already grown above, so the failing allocation is the
     * panel's. */
    const int64_t panel_k = 4096, panel_t = 9;
    x = kt_random((size_t)(panel_t * panel_k));
    w = random_blocks(PW_Q4_0, n, panel_k);
    pw_host_fail_nth(1);
    float *unpanelled = run(PW_Q4_0, x, w, panel_t, n, panel_k);
    pw_host_fail_nth(0);
    whole = run(PW_Q4_0, x, w, panel_t, n, panel_k);
    CHECK(kt_bitwise_equal(unpanelled, whole, (size_t)(panel_t * n) * sizeof *whole));
    free(x), free(w), free(unpanelled), free(whole);

    /* 1024 blocks: 73,728 bytes a row, past the stack buffer; 12 rows are
     * more than the buffer grew to above. */
    const int64_t big_k = 32768, big_t = 12;
    x = kt_random((size_t)(big_t * big_k));
    w = random_blocks(PW_Q8_0, 3, big_k);
    pw_host_fail_nth(1);
    float *y = run(PW_Q8_0, x, w, big_t, 3, big_k);
    pw_host_fail_nth(0);
    float *zero = kt_zeros((size_t)(big_t * 3));
    CHECK(kt_bitwise_equal(y, zero, (size_t)(big_t * 3) * sizeof *y));
    free(y);
    y = run(PW_Q8_0, x, w, big_t, 3, big_k);
    CHECK(!kt_bitwise_equal(y, zero, (size_t)(big_t * 3) * sizeof *y));
    free(x), free(w), free(y), free(zero);
}

/* 1, 2 and 3 threads give the same bits on a product above the split
 * threshold with a partial column group. */
static void check_threads(pw_dtype type, int64_t t) {
    const int64_t n = 203, k = 256;
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

/* Row r alone, and at a random place in batches of 1..48 filled with
 * random rows or zero padding, gives the same bits. */
static void check_invariance(pw_dtype type, int64_t n, int64_t k, uint64_t seed) {
    kt_seed(seed);
    const int64_t T = 37;
    float *x = kt_random((size_t)(T * k));
    uint8_t *w = random_blocks(type, n, k);
    float *y = run(type, x, w, T, n, k);
    int bad = 0;
    for (int64_t r = 0; r < T; r += 4) {
        float *alone = run(type, x + r * k, w, 1, n, k);
        if (!kt_bitwise_equal(alone, y + r * n, (size_t)n * sizeof(float))) bad++;
        free(alone);
        for (int64_t s = 1 + r % 5; s <= 48; s += 7) {
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

/* Products of one x sharing its quantized rows (pw_k_matmul_quant_parts,
 * the qkv side of a layer, and pw_k_matmul_quant_silu, the gate/up side)
 * give the bits of the separate products (and of silu_mul), at 1, 2 and 3
 * threads, above and below the split threshold, with partial column groups,
 * for types that share rows and (the fallback) types that do not, and when
 * the rows' buffer cannot be had. */
static void check_shared_rows(void) {
    static const struct {
        pw_dtype t[3];
        int64_t n[3];
        int parts;
        bool share;
    } cases[] = {
        {{PW_Q4_1, PW_Q4_1, PW_Q4_1}, {576, 192, 192}, 3, true},
        {{PW_Q4_0, PW_Q4_1, PW_Q4_0}, {40, 13, 27}, 3, true},
        {{PW_Q4_0X16, PW_Q4_0, PW_Q4_0X16}, {48, 17, 33}, 3, true},
        {{PW_Q8_0, PW_Q8_0, PW_Q8_0}, {203, 8, 1}, 3, true},
        {{PW_Q4_1, PW_Q8_0, PW_Q4_1}, {64, 32, 32}, 3, false},
        {{PW_Q4_1, PW_Q4_1, PW_Q4_1}, {100, 0, 0}, 1, true},
    };
    static const int64_t tokens[] = {1, 3, 16};
    const int64_t k = 192;
    for (size_t c = 0; c < KT_LEN(cases); c++) {
        CHECK(pw_k_quant_share_activations(cases[c].t, cases[c].parts) == cases[c].share);
        for (size_t ti = 0; ti < KT_LEN(tokens); ti++) {
            const int64_t t = tokens[ti];
            float *x = kt_random((size_t)(t * k));
            uint8_t *w[3];
            float *want[3];
            for (int i = 0; i < cases[c].parts; i++) {
                w[i] = random_blocks(cases[c].t[i], cases[c].n[i], k);
                pw_set_num_threads(1);
                want[i] = run(cases[c].t[i], x, w[i], t, cases[c].n[i], k);
            }
            for (int th = 1; th <= 3; th++) {
                pw_set_num_threads(th);
                pw_k_quant_part parts[3];
                for (int i = 0; i < cases[c].parts; i++)
                    parts[i] = (pw_k_quant_part){kt_zeros((size_t)(t * cases[c].n[i])), w[i],
                                                 cases[c].t[i], cases[c].n[i]};
                pw_k_matmul_quant_parts(parts, cases[c].parts, x, t, k);
                for (int i = 0; i < cases[c].parts; i++) {
                    CHECK(kt_bitwise_equal(parts[i].y, want[i],
                                           (size_t)(t * cases[c].n[i]) * sizeof(float)));
                    free(parts[i].y);
                }
            }
            if (cases[c].parts >= 2) {
                /* gate: part 0's weights; up: f rows of part 1's type */
                const int64_t f = cases[c].n[0];
                uint8_t *wu = random_blocks(cases[c].t[1], f, k);
                pw_set_num_threads(1);
                float *want_up = run(cases[c].t[1], x, wu, t, f, k);
                float *silu = kt_zeros((size_t)(t * f));
                pw_k_silu_mul(silu, want[0], want_up, t * f);
                for (int th = 1; th <= 3; th++) {
                    pw_set_num_threads(th);
                    float *out = kt_random((size_t)(t * f)), *up = kt_random((size_t)(t * f));
                    pw_k_matmul_quant_silu(out, up, x, w[0], cases[c].t[0], wu, cases[c].t[1], t,
                                           f, k);
                    CHECK(kt_bitwise_equal(out, silu, (size_t)(t * f) * sizeof(float)));
                    CHECK(kt_bitwise_equal(up, want_up, (size_t)(t * f) * sizeof(float)));
                    free(out), free(up);
                }
                free(wu), free(want_up), free(silu);
            }
            pw_set_num_threads(1);
            for (int i = 0; i < cases[c].parts; i++) free(w[i]), free(want[i]);
            free(x);
        }
    }
    /* No memory for the shared rows (each call's rows larger than any
     * before, so the thread's buffer must grow, and cannot): the products,
     * and the gate/up pair, take the one-by-one path (whose own buffer
     * then grows), with the same bits. The expected values are computed
     * after, so that they do not grow the buffer first. */
    {
        const int64_t t = 16, t2 = 24, big_k = 65536, n0 = 3, n1 = 5;
        float *x = kt_random((size_t)(t2 * big_k));
        uint8_t *w0 = random_blocks(PW_Q4_1, n0, big_k), *w1 = random_blocks(PW_Q4_0, n1, big_k);
        uint8_t *wg = random_blocks(PW_Q4_1, n0, big_k);
        pw_k_quant_part parts[2] = {{kt_zeros((size_t)(t * n0)), w0, PW_Q4_1, n0},
                                    {kt_zeros((size_t)(t * n1)), w1, PW_Q4_0, n1}};
        pw_clear_error();
        pw_host_fail_nth(1);
        pw_k_matmul_quant_parts(parts, 2, x, t, big_k);
        pw_host_fail_nth(0);
        CHECK(strstr(pw_last_error(), "out of host memory") != NULL); /* the path was taken */
        float *out = kt_zeros((size_t)(t2 * n0)), *up = kt_zeros((size_t)(t2 * n0));
        pw_clear_error();
        pw_host_fail_nth(1);
        pw_k_matmul_quant_silu(out, up, x, wg, PW_Q4_1, w0, PW_Q4_1, t2, n0, big_k);
        pw_host_fail_nth(0);
        CHECK(strstr(pw_last_error(), "out of host memory") != NULL);
        float *want0 = run(PW_Q4_1, x, w0, t2, n0, big_k), *want1 = run(PW_Q4_0, x, w1, t, n1, big_k);
        float *g = run(PW_Q4_1, x, wg, t2, n0, big_k), *silu = kt_zeros((size_t)(t2 * n0));
        pw_k_silu_mul(silu, g, want0, t2 * n0);
        CHECK(kt_bitwise_equal(parts[0].y, want0, (size_t)(t * n0) * sizeof(float)));
        CHECK(kt_bitwise_equal(parts[1].y, want1, (size_t)(t * n1) * sizeof(float)));
        CHECK(kt_bitwise_equal(out, silu, (size_t)(t2 * n0) * sizeof(float)));
        CHECK(kt_bitwise_equal(up, want0, (size_t)(t2 * n0) * sizeof(float)));
        free(x), free(w0), free(w1), free(wg), free(want0), free(want1), free(g), free(silu);
        free(out), free(up), free(parts[0].y), free(parts[1].y);
    }
    /* More parts than a group holds: multiplied one by one. */
    pw_dtype many[PW_K_QUANT_MAX_PARTS + 1];
    for (int i = 0; i <= PW_K_QUANT_MAX_PARTS; i++) many[i] = PW_Q4_1;
    CHECK(pw_k_quant_share_activations(many, PW_K_QUANT_MAX_PARTS));
    CHECK(!pw_k_quant_share_activations(many, PW_K_QUANT_MAX_PARTS + 1));
    CHECK(!pw_k_quant_share_activations(many, 0));
    const pw_dtype kq[2] = {PW_Q4_K, PW_Q4_K};
    CHECK(!pw_k_quant_share_activations(kq, 2));
}

static void check_embedding(pw_dtype type) {
    const int64_t vocab = 11, dim = 96, t = 6;
    uint8_t *table = random_blocks(type, vocab, dim);
    float *full = malloc((size_t)(vocab * dim) * sizeof *full);
    dequant(type, table, full, vocab * dim);
    int32_t ids[6] = {3, 0, 10, -1, 11, 3};
    float *out = kt_random((size_t)(t * dim));
    pw_k_embedding_quant(out, ids, table, type, t, vocab, dim);
    for (int64_t i = 0; i < t; i++) {
        if (ids[i] >= 0 && ids[i] < vocab) {
            CHECK(kt_bitwise_equal(out + i * dim, full + ids[i] * dim, (size_t)dim * sizeof *out));
        } else {
            float *zero = kt_zeros((size_t)dim);
            CHECK(kt_bitwise_equal(out + i * dim, zero, (size_t)dim * sizeof *out));
            free(zero);
        }
    }
    free(table), free(full), free(out);
}

/* Q4_0x16: every copy this CPU runs gives, from the interleaved weights,
 * the bits of the Q4_0 product of the same rows (whole groups of 16, rows
 * past them, fewer than 16 rows; decode, one row tile, panels and row
 * tails; thread splits that cut a group); converting back gives the
 * same bytes, and embedding rows are the Q4_0 table's. */
static void check_q4_0x16(void) {
    static const int64_t shapes[][3] = {{1, 16, 32},  {1, 45, 96},  {2, 33, 64},  {8, 32, 256},
                                        {9, 17, 64},  {13, 48, 32}, {33, 31, 96}, {3, 5, 64},
                                        {1, 203, 256}, {21, 203, 256}, {4, 33, 64},
                                        {12, 48, 64},  {7, 16, 32},   {11, 32, 96}};
    /* (row tails of 1-7 rows: below 4 the tiles split each row's chain) */
    for (size_t s = 0; s < KT_LEN(shapes); s++) {
        const int64_t t = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *x = kt_random((size_t)(t * k));
        uint8_t *w = random_blocks(PW_Q4_0, n, k);
        size_t bytes = (size_t)(n * (k / QK) * pw_dtype_block_bytes(PW_Q4_0));
        uint8_t *wx = malloc(bytes), *back = malloc(bytes);
        pw_k_q4_0_interleave(wx, w, n, k);
        CHECK((n < 16) == (memcmp(wx, w, bytes) == 0));
        float *want = run(PW_Q4_0, x, w, t, n, k);
        bool same = true;
        for (int th = 1; th <= 3; th++) {
            pw_set_num_threads(th);
            for (int l = PW_K_INT8_GENERIC; l <= PW_K_INT8_AVX512VNNI; l++) {
                if (!pw_k_isa_int8_runs((pw_k_int8_isa)l)) continue;
                float *y = kt_random((size_t)(t * n));
                pw_k_matmul_quant_with((pw_k_int8_isa)l, y, x, wx, PW_Q4_0X16, t, n, k);
                if (!kt_bitwise_equal(y, want, (size_t)(t * n) * sizeof *y)) {
                    fprintf(stderr, "q4_0x16 %lldx%lldx%lld, copy %s, %d threads differs\n",
                            (long long)t, (long long)n, (long long)k, pw_k_isa_int8_name(l), th);
                    same = false;
                }
                free(y);
            }
        }
        pw_set_num_threads(1);
        CHECK(same);
        /* embedding rows: ids in whole groups, past them, and out of range */
        int32_t ids[5] = {0, (int32_t)(n - 1), (int32_t)(n / 2), -1, (int32_t)n};
        float *e0 = kt_random((size_t)(5 * k)), *e1 = kt_random((size_t)(5 * k));
        pw_k_embedding_quant(e0, ids, w, PW_Q4_0, 5, n, k);
        pw_k_embedding_quant(e1, ids, wx, PW_Q4_0X16, 5, n, k);
        CHECK(kt_bitwise_equal(e0, e1, (size_t)(5 * k) * sizeof *e0));
        pw_k_q4_0_deinterleave(back, wx, n, k);
        CHECK(memcmp(back, w, bytes) == 0);
        free(x), free(w), free(wx), free(back), free(want), free(e0), free(e1);
    }
    /* Decode's tile at the integer sums' extremes (the AVX2 copy adds a
     * half-block's 8 vpmaddubsw in 16 bits): groups whose rows alternate
     * nibbles all 15 and nibbles 0 and 8, against activations of +127,
     * -127 and alternating +-127 in every lane, give the Q4_0 bits. */
    const int64_t n = 48, k = 96, nb = k / QK;
    uint8_t *w = malloc((size_t)(n * nb * 18)), *wx = malloc((size_t)(n * nb * 18));
    for (int64_t b = 0; b < n * nb; b++) {
        uint8_t *blk = w + b * 18; /* Q4_0: f16 d, 16 nibble bytes */
        memset(blk, (b / nb) % 2 ? 0xFF : 0x80, 18);
        put_half(blk, 0x3C00); /* d = 1 */
    }
    pw_k_q4_0_interleave(wx, w, n, k);
    float *x = malloc((size_t)k * sizeof *x);
    for (int pattern = 0; pattern < 3; pattern++) {
        for (int64_t i = 0; i < k; i++)
            x[i] = pattern == 0 ? 1.0f : pattern == 1 ? -1.0f : (i % 2 ? 2.0f : -2.0f);
        float *want = run(PW_Q4_0, x, w, 1, n, k);
        for (int l = PW_K_INT8_GENERIC; l <= PW_K_INT8_AVX512VNNI; l++) {
            if (!pw_k_isa_int8_runs((pw_k_int8_isa)l)) continue;
            float *y = kt_random((size_t)n);
            pw_k_matmul_quant_with((pw_k_int8_isa)l, y, x, wx, PW_Q4_0X16, 1, n, k);
            if (!kt_bitwise_equal(y, want, (size_t)n * sizeof *y)) {
                fprintf(stderr, "q4_0x16 extremes %d, copy %s differs\n", pattern,
                        pw_k_isa_int8_name(l));
                CHECK(false);
            }
            free(y);
        }
        free(want);
    }
    free(x), free(w), free(wx);
}

/* A table lookup feeding two quantized products, captured once and
 * replayed with new ids: replay == eager bitwise. */
static void check_capture(void) {
    enum { T = 5, V = 9, D = 64, N = 96 };
    uint8_t *table = random_blocks(PW_Q8_0, V, D), *w1 = random_blocks(PW_Q4_1, N, D);
    uint8_t *w2 = random_blocks(PW_Q4_0, D, N);
    static int32_t ids[T];
    static float h[T * D], y1[T * N], y2[T * D], eager1[T * N], eager2[T * D];
    pw_k_embedding_quant_args emb = {h, ids, table, T, V, D, PW_Q8_0};
    pw_k_matmul_quant_args m1 = {y1, h, w1, T, N, D, PW_Q4_1};
    pw_k_matmul_quant_args m2 = {y2, y1, w2, T, D, N, PW_Q4_0};
    pw_pool *pool = NULL;
    pw_stream *stream = NULL;
    pw_graph *graph = NULL;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "quant-test", &pool));
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &stream));
    CHECK_OK(pw_stream_begin_capture(stream, pool));
    CHECK_OK(pw_launch(stream, &pw_kernel_embedding_quant, &emb, sizeof emb));
    CHECK_OK(pw_launch(stream, &pw_kernel_matmul_quant, &m1, sizeof m1));
    CHECK_OK(pw_launch(stream, &pw_kernel_matmul_quant, &m2, sizeof m2));
    CHECK_OK(pw_stream_end_capture(stream, &graph));
    CHECK(graph != NULL);
    int equal = 0;
    for (int step = 0; step < 3 && graph; step++) {
        for (int i = 0; i < T; i++) ids[i] = (int32_t)(kt_next() % V);
        CHECK_OK(pw_launch(stream, &pw_kernel_embedding_quant, &emb, sizeof emb));
        CHECK_OK(pw_launch(stream, &pw_kernel_matmul_quant, &m1, sizeof m1));
        CHECK_OK(pw_launch(stream, &pw_kernel_matmul_quant, &m2, sizeof m2));
        memcpy(eager1, y1, sizeof y1), memcpy(eager2, y2, sizeof y2);
        memset(y1, 0, sizeof y1), memset(y2, 0, sizeof y2);
        CHECK_OK(pw_graph_replay(graph, stream));
        equal += kt_bitwise_equal(eager1, y1, sizeof y1) && kt_bitwise_equal(eager2, y2, sizeof y2);
    }
    CHECK_EQ_INT(equal, 3);
    pw_graph_free(graph);
    pw_stream_free(stream);
    pw_pool_free(pool);
    free(table), free(w1), free(w2);
}

int main(void) {
    kt_seed(5);
    for (size_t i = 0; i < KT_LEN(types); i++) {
        CHECK(pw_k_quant_supported(types[i]));
        static const int64_t shapes[][3] = {{1, 1, 32}, {1, 7, 64}, {3, 5, 96}, {4, 9, 32},
                                            {6, 13, 160}, {9, 4, 256}, {13, 17, 64},
                                            {2, 14, 64}, {5, 31, 32}, {8, 19, 576},
                                            {17, 6, 128},
                                            /* Q4_0's panels (9 rows and more): whole
                                             * and partial 16-column panels, row
                                             * tails of every size to 7 */
                                            {9, 16, 32}, {16, 33, 96}, {23, 47, 64},
                                            {31, 8, 64}, {40, 1, 32},
                                            /* decode's 16-column Q8_0 tile: whole,
                                             * with every tail, and a Gemma 3 row */
                                            {1, 16, 32}, {1, 47, 96}, {1, 35, 640}};
        for (size_t s = 0; s < KT_LEN(shapes); s++)
            check_reference(types[i], shapes[s][0], shapes[s][1], shapes[s][2]);
        check_extremes(types[i]);
        check_invariance(types[i], 23, 128, 100 + i);
        check_threads(types[i], 1); /* decode's column split */
        check_threads(types[i], 5);
        check_threads(types[i], 21);
        check_embedding(types[i]);
    }
    CHECK(!pw_k_quant_supported(PW_F32));
    CHECK(!pw_k_quant_supported(PW_F16));
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_quantizer(types[i]);
    check_out_of_memory();
    check_shared_rows();
    check_q4_0x16();
    check_capture();
    return pw_test_finish("kernels_matmul_quant");
}
