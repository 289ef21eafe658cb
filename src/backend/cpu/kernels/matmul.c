/* y[T][N] = x[T][K] * W[N][K]^T, batch-invariant.
 *
 * Own kernel. Every output element is computed by the same sequence of
 * float operations, whichever tile or tail path reaches it:
 *   lanes:  acc[l] = sum over blocks b, in order, of x[8b+l] * w[8b+l]
 *           (a multiply then an add: no fused multiply-add, the build is
 *           ISO C so the compiler does not contract)
 *   reduce: ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7))
 *   tail:   r += x[k] * w[k] for k from 8*floor(K/8) to K-1, in order
 * The register-blocked tiles only change how many elements are in flight,
 * never this sequence, so row t's result cannot depend on T or on its
 * neighbours.
 *
 * OpenBLAS path (builds with PW_HAVE_OPENBLAS, weights of at least
 * PW_K_MATMUL_BLAS_MIN_WEIGHT elements): sgemm is only ever called with
 * M = PW_K_MATMUL_BLAS_TILE rows. For a fixed (M, N, K) OpenBLAS takes one
 * code path and one thread split, and it never splits K across threads, so
 * each row's result is fixed by that row alone. The last partial tile is
 * zero-padded in caller-provided scratch. tests/kernels/test_matmul.c
 * checks the invariance directly. */
#include "backend/cpu/kernels/kernels.h"

#include "pw_config.h"

#include <assert.h>
#include <string.h>

#if PW_HAVE_OPENBLAS
#include <cblas.h>
#endif

#define LANES 8
typedef float v8f __attribute__((vector_size(LANES * sizeof(float))));

/* Register tile: rows x columns of accumulators. Sized so that the
 * accumulators plus one vector per row and column fit the register file
 * (16 registers; each 8-float vector takes one AVX or two SSE registers). */
#define TILE_ROWS 2
#define TILE_COLS 2

/* Columns processed together so their weight rows stay in L2 while every
 * row tile of x streams past them. */
#define COL_BLOCK_BYTES (128 * 1024)

/* Vectors travel through pointers and memcpy, never by value across a
 * function boundary, so the calling convention does not depend on -mavx. */
#define LOAD8(dst, p) memcpy(&(dst), (p), sizeof(v8f))

static inline float finish(const v8f *acc, const float *x, const float *w, int64_t k0,
                           int64_t k) {
    const v8f a = *acc;
    float r = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    for (int64_t i = k0; i < k; i++) r += x[i] * w[i];
    return r;
}

/* One output element by the canonical sequence. */
static float dot_one(const float *x, const float *w, int64_t k) {
    int64_t kv = k / LANES * LANES;
    v8f acc = {0};
    for (int64_t i = 0; i < kv; i += LANES) {
        v8f xv, wv;
        LOAD8(xv, x + i);
        LOAD8(wv, w + i);
        acc += xv * wv;
    }
    return finish(&acc, x, w, kv, k);
}

/* A rows x cols block of outputs. Always inlined with constant rows/cols so
 * each call site becomes a fully unrolled register tile. */
static inline __attribute__((always_inline)) void tile(float *y, const float *x, const float *w,
                                                      int64_t ldy, int64_t k, int rows,
                                                      int cols) {
    int64_t kv = k / LANES * LANES;
    v8f acc[TILE_ROWS][TILE_COLS];
    memset(acc, 0, sizeof acc);
    for (int64_t i = 0; i < kv; i += LANES) {
        v8f wv[TILE_COLS];
        for (int c = 0; c < cols; c++) LOAD8(wv[c], w + c * k + i);
        for (int r = 0; r < rows; r++) {
            v8f xv;
            LOAD8(xv, x + r * k + i);
            for (int c = 0; c < cols; c++) acc[r][c] += xv * wv[c];
        }
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            y[r * ldy + c] = finish(&acc[r][c], x + r * k, w + c * k, kv, k);
}

/* Built for the baseline ISA and for AVX2, chosen once at load time. The
 * AVX2 clone runs the same lane-wise multiplies and adds (no FMA: the
 * target adds no fused instructions and ISO C forbids contraction), so
 * both clones return the same bits. */
__attribute__((target_clones("avx2", "default")))
void pw_k_matmul_own(float *y, const float *x, const float *w, int64_t n_tokens, int64_t n,
                     int64_t k) {
    int64_t col_block = COL_BLOCK_BYTES / ((k > 0 ? k : 1) * (int64_t)sizeof(float));
    col_block = col_block < TILE_COLS ? TILE_COLS
                                           : col_block / TILE_COLS * TILE_COLS;
    int64_t t_full = n_tokens / TILE_ROWS * TILE_ROWS;
    for (int64_t n0 = 0; n0 < n; n0 += col_block) {
        int64_t n1 = n0 + col_block < n ? n0 + col_block : n;
        int64_t n_tiled = n0 + (n1 - n0) / TILE_COLS * TILE_COLS;
        for (int64_t t = 0; t < t_full; t += TILE_ROWS) {
            for (int64_t j = n0; j < n_tiled; j += TILE_COLS)
                tile(y + t * n + j, x + t * k, w + j * k, n, k, TILE_ROWS, TILE_COLS);
            for (int64_t j = n_tiled; j < n1; j++)
                for (int r = 0; r < TILE_ROWS; r++)
                    y[(t + r) * n + j] = dot_one(x + (t + r) * k, w + j * k, k);
        }
        /* Leftover rows: one element at a time. A 1 x TILE_COLS tile measured
         * slower than this (decode, T = 1, is this path). */
        for (int64_t t = t_full; t < n_tokens; t++) {
            for (int64_t j = n0; j < n1; j++) y[t * n + j] = dot_one(x + t * k, w + j * k, k);
        }
    }
}

bool pw_k_matmul_uses_blas(int64_t n, int64_t k) {
#if PW_HAVE_OPENBLAS
    return n * k >= PW_K_MATMUL_BLAS_MIN_WEIGHT;
#else
    (void)n;
    (void)k;
    return false;
#endif
}

size_t pw_k_matmul_scratch_floats(int64_t n_tokens, int64_t n, int64_t k) {
    if (!pw_k_matmul_uses_blas(n, k) || n_tokens % PW_K_MATMUL_BLAS_TILE == 0) return 0;
    return (size_t)PW_K_MATMUL_BLAS_TILE * (size_t)(n + k);
}

#if PW_HAVE_OPENBLAS
static void sgemm_tile(float *y, const float *x, const float *w, int64_t n, int64_t k) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, PW_K_MATMUL_BLAS_TILE, (int)n, (int)k,
                1.0f, x, (int)k, w, (int)k, 0.0f, y, (int)n);
}

static void matmul_blas(float *y, const float *x, const float *w, int64_t n_tokens, int64_t n,
                        int64_t k, float *scratch) {
    const int64_t tile = PW_K_MATMUL_BLAS_TILE;
    int64_t t_full = n_tokens / tile * tile;
    for (int64_t t = 0; t < t_full; t += tile) sgemm_tile(y + t * n, x + t * k, w, n, k);
    int64_t rest = n_tokens - t_full;
    if (rest == 0) return;
    assert(scratch && "pw_k_matmul: partial BLAS tile needs scratch");
    float *xs = scratch, *ys = scratch + tile * k;
    memcpy(xs, x + t_full * k, (size_t)(rest * k) * sizeof *xs);
    memset(xs + rest * k, 0, (size_t)((tile - rest) * k) * sizeof *xs);
    sgemm_tile(ys, xs, w, n, k);
    memcpy(y + t_full * n, ys, (size_t)(rest * n) * sizeof *ys);
}
#endif

void pw_k_matmul(float *y, const float *x, const float *w, int64_t n_tokens, int64_t n,
                 int64_t k, float *scratch) {
#if PW_HAVE_OPENBLAS
    if (pw_k_matmul_uses_blas(n, k)) {
        matmul_blas(y, x, w, n_tokens, n, k, scratch);
        return;
    }
#endif
    (void)scratch;
    pw_k_matmul_own(y, x, w, n_tokens, n, k);
}

static void matmul_launch(const void *args) {
    const pw_k_matmul_args *a = args;
    pw_k_matmul(a->y, a->x, a->w, a->n_tokens, a->n, a->k, a->scratch);
}
const pw_kernel pw_kernel_matmul = {"matmul", matmul_launch, NULL};
