/* matmul: against a double reference, against a scalar model of the
 * documented per-element operation sequence (exact), and batch invariance
 * on both the own kernel and (when built) the OpenBLAS path. */
#include "ops/cpu/kernels.h"
#include "ops/cpu/matmul_isa.h"
#include "kernel_test_util.h"

#include <math.h>

/* The documented sequence, written out scalar: 8 lane sums of fused
 * multiply-adds in block order over K zero-padded to a multiple of 8, then
 * a fixed tree. */
static float canonical_dot(const float *x, const float *w, int64_t k) {
    float lane[8] = {0};
    for (int64_t i = 0; i < k; i += 8)
        for (int l = 0; l < 8; l++) {
            float xv = i + l < k ? x[i + l] : 0.0f, wv = i + l < k ? w[i + l] : 0.0f;
            lane[l] = fmaf(xv, wv, lane[l]);
        }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

#if PW_HAVE_FMA_KERNELS
/* The baseline and AVX2+FMA copies of the tile code, called directly on
 * random shapes (every tile and tail path, column sub-ranges as threads
 * get them), must agree bit for bit. */
static void check_copies(void) {
    if (!pw_k_isa_fma()) {
        printf("CPU without AVX2+FMA (or PW_KERNEL_ISA=generic): copies not compared\n");
        return;
    }
    int bad = 0;
    for (int it = 0; it < 60; it++) {
        int64_t t = 1 + kt_next() % 13, n = 1 + kt_next() % 40, k = 1 + kt_next() % 90;
        if (it == 0) t = 1, n = 64, k = 172;
        if (it == 1) t = 7, n = 21, k = 64;
        if (it == 2) t = 4, n = 19, k = 69;
        int64_t j0 = kt_next() % 2 ? (int64_t)(kt_next() % (uint32_t)n) / 8 * 8 : 0;
        float *x = kt_random((size_t)(t * k)), *w = kt_random((size_t)(n * k));
        float *a = kt_random((size_t)(t * n)), *b = kt_zeros((size_t)(t * n));
        memcpy(b, a, (size_t)(t * n) * sizeof *b); /* columns outside [j0, n) untouched */
        pw_k_matmul_cols_generic(a, x, w, k, t, n, k, j0, n);
        pw_k_matmul_cols_fma(b, x, w, k, t, n, k, j0, n);
        if (!kt_bitwise_equal(a, b, (size_t)(t * n) * sizeof *a)) {
            fprintf(stderr, "matmul copies differ: T=%lld N=%lld K=%lld j0=%lld\n", (long long)t,
                    (long long)n, (long long)k, (long long)j0);
            bad++;
        }
        free(x), free(w), free(a), free(b);
    }
    CHECK_EQ_INT(bad, 0);
}
#endif

static float *run_matmul(const float *x, const float *w, int64_t t, int64_t n, int64_t k) {
    float *y = kt_zeros((size_t)(t * n));
    size_t sf = pw_k_matmul_scratch_floats(t, n, k);
    float *scratch = sf ? kt_random(sf) : NULL; /* garbage in scratch must not matter */
    pw_k_matmul(y, x, w, t, n, k, scratch);
    free(scratch);
    return y;
}

static void check_reference(int64_t t, int64_t n, int64_t k) {
    float *x = kt_random((size_t)(t * k)), *w = kt_random((size_t)(n * k));
    float *y = run_matmul(x, w, t, n, k);
    float *own = kt_zeros((size_t)(t * n));
    pw_k_matmul_own(own, x, w, t, n, k);
    double *ref = malloc((size_t)(t * n) * sizeof *ref);
    bool canonical_ok = true;
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t q = 0; q < k; q++) s += (double)x[i * k + q] * w[j * k + q];
            ref[i * n + j] = s;
            float c = canonical_dot(x + i * k, w + j * k, k);
            if (memcmp(&c, &own[i * n + j], sizeof c) != 0) canonical_ok = false;
        }
    double tol = 1e-5 * (double)k;
    double err = kt_max_rel_err(y, ref, (size_t)(t * n));
    if (!(err < tol)) fprintf(stderr, "matmul %lldx%lldx%lld: err %g\n", (long long)t,
                              (long long)n, (long long)k, err);
    CHECK(err < tol);
    CHECK(kt_max_rel_err(own, ref, (size_t)(t * n)) < tol);
    CHECK(canonical_ok);
    free(x), free(w), free(y), free(own), free(ref);
}

/* Row r of a T-row batch, alone and at random places inside batches of
 * other sizes filled with random rows or zero padding, must give the same
 * bits. */
static void check_invariance(int64_t n, int64_t k, uint64_t seed) {
    kt_seed(seed);
    const int64_t T = 37;
    float *x = kt_random((size_t)(T * k)), *w = kt_random((size_t)(n * k));
    float *y = run_matmul(x, w, T, n, k);
    static const int64_t sizes[] = {1, 2, 3, 5, 8, 15, 16, 17, 31, 33, 48};
    int bad = 0;
    for (int64_t r = 0; r < T; r += 3) {
        float *alone = run_matmul(x + r * k, w, 1, n, k);
        if (!kt_bitwise_equal(alone, y + r * n, (size_t)n * sizeof(float))) bad++;
        free(alone);
        for (size_t si = 0; si < KT_LEN(sizes); si++) {
            int64_t s = sizes[si];
            int64_t at = (int64_t)(kt_next() % (uint32_t)s);
            bool pad = si % 2 == 1;
            float *bx = pad ? kt_zeros((size_t)(s * k)) : kt_random((size_t)(s * k));
            memcpy(bx + at * k, x + r * k, (size_t)k * sizeof(float));
            float *by = run_matmul(bx, w, s, n, k);
            if (!kt_bitwise_equal(by + at * n, y + r * n, (size_t)n * sizeof(float))) bad++;
            free(bx), free(by);
        }
    }
    if (bad) fprintf(stderr, "matmul N=%lld K=%lld: %d non-invariant rows\n", (long long)n,
                     (long long)k, bad);
    CHECK_EQ_INT(bad, 0);
    free(x), free(w), free(y);
}

int main(void) {
    kt_seed(1);
    /* Odd shapes reach every tile and tail path. */
    check_reference(1, 1, 1);
    check_reference(3, 5, 7);
    check_reference(9, 13, 64);
    check_reference(17, 33, 100);
    check_reference(5, 64, 172);
    check_invariance(64, 64, 2);
    check_invariance(13, 77, 3);
    check_invariance(172, 64, 4);
    check_invariance(64, 172, 7);
    check_reference(64, 172, 64);
    check_reference(7, 9, 23);
    check_reference(4, 17, 67); /* the unrolled 8-block tiles, with a tail */
    check_reference(7, 24, 64);
    check_reference(1, 516, 64); /* decode at K = 64: the constant-K tiles, then a tail */
    check_reference(6, 20, 64);  /* batch tiles at K = 64, two 3-row groups */
#if PW_HAVE_FMA_KERNELS
    check_copies();
#endif

    /* The BLAS decision depends on the weight only; the canonical check above
     * ran against whichever copy (AVX2+FMA or baseline) this CPU runs. */
    CHECK(!pw_k_matmul_uses_blas(64, 64));
    CHECK(!pw_k_matmul_uses_blas(512, 512));
    if (pw_k_matmul_uses_blas(1024, 1024)) {
        CHECK_EQ_INT(pw_k_matmul_scratch_floats(32, 1024, 1024), 0);
        CHECK_EQ_INT(pw_k_matmul_scratch_floats(5, 1024, 1024),
                     PW_K_MATMUL_BLAS_TILE * (1024 + 1024));
        check_reference(21, 1024, 1024);
        check_invariance(1024, 1024, 5);
        check_invariance(1040, 1030, 6);
    } else {
        printf("OpenBLAS not in this build: BLAS path not tested\n");
        CHECK_EQ_INT(pw_k_matmul_scratch_floats(5, 4096, 4096), 0);
    }
    return pw_test_finish("kernels_matmul");
}
