/* lm_head on the sampled rows: its scratch, sized by
 * pw_k_lm_head_scratch_floats for the batch, must hold the matmul's scratch
 * for however many rows are sampled when the kernel runs. A batch that is a
 * whole number of BLAS tiles (16, 32, 48 tokens) sampling one row takes the
 * partial-tile path, which needs scratch the batch size alone does not. The
 * buffers are followed by guard words that must come back untouched, so the
 * check holds in any build, not only under a sanitizer; each sampled row
 * must also equal the plain matmul of that row bit for bit. */
#include "ops/cpu/kernels.h"
#include "kernel_test_util.h"

#define GUARD 0x7fc0dead /* a NaN no float operation produces */

static float *guarded(size_t n, size_t guard) {
    float *p = malloc((n + guard) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = kt_uniform(); /* garbage must not matter */
    uint32_t g = GUARD;
    for (size_t i = 0; i < guard; i++) memcpy(&p[n + i], &g, sizeof g);
    return p;
}

static bool guard_intact(const float *p, size_t n, size_t guard) {
    uint32_t g = GUARD;
    for (size_t i = 0; i < guard; i++)
        if (memcmp(&p[n + i], &g, sizeof g) != 0) return false;
    return true;
}

/* One launch: n_tokens rows, the first `sampled` of `rows` sampled. */
static void check(int64_t n_tokens, int64_t sampled, const int32_t *rows, int64_t n, int64_t k) {
    float *x = kt_random((size_t)(n_tokens * k)), *w = kt_random((size_t)(n * k));
    size_t guard = (size_t)PW_K_MATMUL_BLAS_TILE * (size_t)(n + k);
    size_t sf = pw_k_lm_head_scratch_floats(PW_F32, n_tokens, n, k);
    float *scratch = guarded(sf, guard), *y = guarded((size_t)(n_tokens * n), guard);
    int32_t count = (int32_t)sampled;
    pw_attn_meta meta = {0};
    meta.sample_rows = rows;
    meta.n_sample_rows = &count;
    pw_k_lm_head_args a = {y, x, w, scratch, &meta, n_tokens, n, k, PW_F32, 0.0f};
    pw_k_lm_head(&a);
    bool ok = guard_intact(scratch, sf, guard) && guard_intact(y, (size_t)(n_tokens * n), guard);
    if (!ok)
        fprintf(stderr, "lm_head wrote past its buffers: %lld tokens, %lld sampled, [%lld][%lld]\n",
                (long long)n_tokens, (long long)sampled, (long long)n, (long long)k);
    CHECK(ok);
    /* each sampled row is the one-row matmul's */
    float *one = kt_zeros((size_t)n);
    size_t osf = pw_k_matmul_scratch_floats(1, n, k);
    float *os = osf ? kt_zeros(osf) : NULL;
    int bad = 0;
    for (int64_t i = 0; i < sampled; i++) {
        pw_k_matmul(one, x + rows[i] * k, w, 1, n, k, os);
        bad += !kt_bitwise_equal(one, y + i * n, (size_t)n * sizeof *one);
    }
    CHECK_EQ_INT(bad, 0);
    free(os), free(one), free(x), free(w), free(scratch), free(y);
}

int main(void) {
    /* a weight on the BLAS path when the build has OpenBLAS, and one below it */
    const int64_t shapes[][2] = {{PW_K_MATMUL_BLAS_MIN_WEIGHT / 256, 256}, {96, 64}};
    int32_t rows[64];
    for (size_t s = 0; s < KT_LEN(shapes); s++) {
        int64_t n = shapes[s][0], k = shapes[s][1];
        const int64_t batches[] = {1, 15, 16, 17, 32, 48};
        for (size_t b = 0; b < KT_LEN(batches); b++) {
            int64_t t = batches[b];
            /* a prefill's last row, every other row, every row in order */
            rows[0] = (int32_t)(t - 1);
            check(t, 1, rows, n, k);
            int64_t m = 0;
            for (int64_t r = 1; r < t; r += 2) rows[m++] = (int32_t)r;
            if (m) check(t, m, rows, n, k);
            for (int64_t r = 0; r < t; r++) rows[r] = (int32_t)r;
            check(t, t, rows, n, k);
        }
    }
    printf("lm_head buffers: %s\n", pw_k_matmul_uses_blas(shapes[0][0], shapes[0][1])
                                        ? "BLAS path and own kernel checked"
                                        : "own kernel checked (no OpenBLAS in this build)");
    return pw_test_finish("kernels_lm_head");
}
