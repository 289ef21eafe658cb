/* y[T][N] = x[T][K] * W[N][K]^T, batch-invariant.
 *
 * Own kernel. Every output element is computed by the same sequence of
 * float operations, whichever tile, T or instruction set reaches it:
 *   lanes:  acc[l] = fma(x[8b+l], w[8b+l], acc[l]) over blocks b in order,
 *           from acc = +0, with K zero-padded to a multiple of 8 (the last
 *           partial block is loaded with +0.0 in its missing lanes, so
 *           those lanes do fma(0, 0, acc[l]))
 *   reduce: ((acc0+acc1) + (acc2+acc3)) + ((acc4+acc5) + (acc6+acc7))
 * fma is one rounding (pw_v8_madd: the FMA instruction in the AVX2+FMA
 * copy, fmaf in the baseline copy; isa.h), so both copies of the tile code
 * (matmul_body.h, compiled here and in matmul_fma.c) return the same bits.
 * The register tiles (3 rows x 4 columns for batches, 1 x 8 for leftover
 * rows and decode, narrower ones for leftover columns) only change how
 * many elements are in flight, never this sequence, so row t's result
 * cannot depend on T or on its neighbours.
 *
 * OpenBLAS path (builds with PW_HAVE_OPENBLAS, weights of at least
 * PW_K_MATMUL_BLAS_MIN_WEIGHT elements): sgemm is only ever called with
 * M = PW_K_MATMUL_BLAS_TILE rows. For a fixed (M, N, K) OpenBLAS takes one
 * code path and one thread split, and it never splits K across threads, so
 * each row's result is fixed by that row alone. The last partial tile is
 * zero-padded in caller-provided scratch. tests/kernels/test_matmul.c
 * checks the invariance directly. */
#include "ops/cpu/kernels.h"

#include "pw_config.h"

#include <assert.h>
#include <stdatomic.h>
#include <string.h>

#if PW_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* The baseline copy of the tile code; matmul_fma.c builds the other. */
#include "ops/cpu/matmul_body.h"

#define COL_GROUP PW_K_COL_GROUP

typedef void cols_fn(float *y, const float *x, const float *w, int64_t ldw, int64_t n_tokens,
                     int64_t n, int64_t k, int64_t j0, int64_t j1);

/* The copy pw_k_isa_fma() picks (PW_ISA_CALL's choice), looked up once:
 * with no call before it, the serial path below is a plain tail call. */
static cols_fn *cols_copy(void) {
    static cols_fn *_Atomic chosen;
    cols_fn *f = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (!f) {
#if PW_HAVE_FMA_KERNELS
        f = pw_k_isa_fma() ? pw_k_matmul_cols_fma : pw_k_matmul_cols_generic;
#else
        f = pw_k_matmul_cols_generic;
#endif
        atomic_store_explicit(&chosen, f, memory_order_relaxed);
    }
    return f;
}

typedef struct cols_job {
    float *y;
    const float *x, *w;
    int64_t ldw, n_tokens, n, k;
} cols_job;

static void cols_range(void *ctx, int64_t j0, int64_t j1) {
    const cols_job *j = ctx;
    cols_copy()(j->y, j->x, j->w, j->ldw, j->n_tokens, j->n, j->k, j0, j1);
}

/* With several threads, large products are split by output columns in
 * groups of 8: each element is still computed by the canonical sequence,
 * so the split changes no bit. Out of line, so that the serial path (all of
 * decode) saves no registers for it. */
static __attribute__((noinline)) bool matmul_split(float *y, const float *x, const float *w,
                                                   int64_t ldw, int64_t n_tokens, int64_t n,
                                                   int64_t k) {
    if (pw_k_parallel_threads() <= 1) return false;
    cols_job job = {y, x, w, ldw, n_tokens, n, k};
    pw_k_parallel_cols(n, COL_GROUP, cols_range, &job);
    return true;
}

static void matmul_own(float *y, const float *x, const float *w, int64_t ldw, int64_t n_tokens,
                       int64_t n, int64_t k) {
    if (n > COL_GROUP && n_tokens * n * k >= PW_K_PARALLEL_MIN_MACS &&
        matmul_split(y, x, w, ldw, n_tokens, n, k))
        return;
    cols_copy()(y, x, w, ldw, n_tokens, n, k, 0, n);
}

void pw_k_matmul_own(float *y, const float *x, const float *w, int64_t n_tokens, int64_t n,
                     int64_t k) {
    matmul_own(y, x, w, k, n_tokens, n, k);
}

static inline bool uses_blas(int64_t n, int64_t k) {
#if PW_HAVE_OPENBLAS
    return n * k >= PW_K_MATMUL_BLAS_MIN_WEIGHT;
#else
    (void)n;
    (void)k;
    return false;
#endif
}

bool pw_k_matmul_uses_blas(int64_t n, int64_t k) { return uses_blas(n, k); }

size_t pw_k_matmul_scratch_floats(int64_t n_tokens, int64_t n, int64_t k) {
    if (!pw_k_matmul_uses_blas(n, k) || n_tokens % PW_K_MATMUL_BLAS_TILE == 0) return 0;
    return (size_t)PW_K_MATMUL_BLAS_TILE * (size_t)(n + k);
}

#if PW_HAVE_OPENBLAS
static void sgemm_tile(float *y, const float *x, const float *w, int64_t ldw, int64_t n,
                       int64_t k) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, PW_K_MATMUL_BLAS_TILE, (int)n, (int)k,
                1.0f, x, (int)k, w, (int)ldw, 0.0f, y, (int)n);
}

static void matmul_blas(float *y, const float *x, const float *w, int64_t ldw, int64_t n_tokens,
                        int64_t n, int64_t k, float *scratch) {
    const int64_t tile = PW_K_MATMUL_BLAS_TILE;
    int64_t t_full = n_tokens / tile * tile;
    for (int64_t t = 0; t < t_full; t += tile) sgemm_tile(y + t * n, x + t * k, w, ldw, n, k);
    int64_t rest = n_tokens - t_full;
    if (rest == 0) return;
    assert(scratch && "pw_k_matmul: partial BLAS tile needs scratch");
    float *xs = scratch, *ys = scratch + tile * k;
    memcpy(xs, x + t_full * k, (size_t)(rest * k) * sizeof *xs);
    memset(xs + rest * k, 0, (size_t)((tile - rest) * k) * sizeof *xs);
    sgemm_tile(ys, xs, w, ldw, n, k);
    memcpy(y + t_full * n, ys, (size_t)(rest * n) * sizeof *ys);
}
#endif

void pw_k_matmul_strided(float *y, const float *x, const float *w, int64_t ldw, int64_t n_tokens,
                         int64_t n, int64_t k, float *scratch) {
    assert(ldw >= k);
#if PW_HAVE_OPENBLAS
    if (uses_blas(n, k)) {
        matmul_blas(y, x, w, ldw, n_tokens, n, k, scratch);
        return;
    }
#endif
    (void)scratch;
    matmul_own(y, x, w, ldw, n_tokens, n, k);
}

void pw_k_matmul(float *y, const float *x, const float *w, int64_t n_tokens, int64_t n,
                 int64_t k, float *scratch) {
    pw_k_matmul_strided(y, x, w, k, n_tokens, n, k, scratch);
}

static void matmul_launch(const void *args) {
    const pw_k_matmul_args *a = args;
    pw_k_matmul_strided(a->y, a->x, a->w, a->ldw ? a->ldw : a->k, a->n_tokens, a->n, a->k,
                        a->scratch);
}
const pw_kernel pw_kernel_matmul = {"matmul", matmul_launch, NULL, PW_K_ARGS(MATMUL)};
