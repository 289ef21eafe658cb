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

/* Columns processed together so their weight rows stay in L2 while every
 * row tile of x streams past them. */
#define COL_BLOCK_BYTES (128 * 1024)

/* Accumulators of one register tile: rows x cols = 8, one 8-lane vector
 * each, reduced together by reduce8 below. With one x vector and the
 * column vectors in flight this fills the 16 AVX registers. */
#define TILE_ACCS 8
/* Tile shapes: 2 rows x 4 columns for batches, 1 row x 8 columns for the
 * last odd row (decode, T = 1, is all that path). */
#define BATCH_TILE_ROWS 2
#define BATCH_TILE_COLS 4
#define ROW_TILE_COLS 8

/* Vectors travel through pointers and memcpy, never by value across a
 * function boundary, so the calling convention does not depend on -mavx. */
#define LOAD8(dst, p) memcpy(&(dst), (p), sizeof(v8f))

typedef int v8i __attribute__((vector_size(LANES * sizeof(int))));

/* The tree of eight lane sums, for eight accumulators at once: lane e of
 * the result is ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) of acc[e], the same
 * adds in the same order as the scalar tree, only with values moved
 * between lanes by shuffles (which round nothing). Pairing acc[e] with
 * acc[e+4] in the first step makes the result come out in order. */
static inline __attribute__((always_inline)) void reduce8(const v8f *acc, v8f *out) {
    v8f p[4]; /* p[e] = [acc[e]: a0+a4, a1+a5, a2+a6, a3+a7 | acc[e+4]: same] */
    for (int e = 0; e < 4; e++)
        p[e] = __builtin_shufflevector(acc[e], acc[e + 4], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(acc[e], acc[e + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    /* q = [(p0+p2), (p1+p3) of the first element, the same of the second |
     *      the same for the two upper halves] */
    v8f q01 = __builtin_shufflevector(p[0], p[1], 0, 1, 8, 9, 4, 5, 12, 13) + __builtin_shufflevector(p[0], p[1], 2, 3, 10, 11, 6, 7, 14, 15);
    v8f q23 = __builtin_shufflevector(p[2], p[3], 0, 1, 8, 9, 4, 5, 12, 13) + __builtin_shufflevector(p[2], p[3], 2, 3, 10, 11, 6, 7, 14, 15);
    *out = __builtin_shufflevector(q01, q23, 0, 2, 8, 10, 4, 6, 12, 14) + __builtin_shufflevector(q01, q23, 1, 3, 9, 11, 5, 7, 13, 15);
}

/* A rows x cols block of outputs (rows <= 2, rows * cols <= TILE_ACCS). Always
 * inlined with constant shapes so each call site becomes a fully unrolled
 * register tile; unused accumulators stay zero and are never stored. */
static inline __attribute__((always_inline)) void tile(float *y, const float *x, const float *w,
                                                      int64_t ldy, int64_t k, int rows,
                                                      int cols) {
    int64_t kv = k / LANES * LANES;
    v8f acc[TILE_ACCS];
    memset(acc, 0, sizeof acc);
    /* Pointers to the ends of the rows and an index counting up to zero:
     * no loop bound to keep, so the column pointers stay in registers. */
    const float *xe = x + kv, *we[TILE_ACCS];
    for (int c = 0; c < cols; c++) we[c] = w + c * k + kv;
    for (int64_t i = -kv; i < 0; i += LANES) {
        v8f x0, x1 = {0};
        LOAD8(x0, xe + i);
        if (rows > 1) LOAD8(x1, xe + k + i);
        for (int c = 0; c < cols; c++) {
            v8f wv;
            LOAD8(wv, we[c] + i);
            acc[c] += x0 * wv;
            if (rows > 1) acc[cols + c] += x1 * wv;
        }
    }
    v8f sums;
    reduce8(acc, &sums);
    if (rows * cols == TILE_ACCS) {
        /* A full tile: lane e is output (e / cols, e % cols). The tail's
         * multiply-adds run lane-wise, v = v + x[i] * w[i] per lane in
         * index order as in the scalar loop below (same bits), and the
         * results leave in one store per row instead of a lane extraction
         * and a scalar store per output. */
        for (int64_t i = kv; i < k; i++) {
            v8f xt, wt;
            for (int e = 0; e < TILE_ACCS; e++) {
                xt[e] = x[(e / cols) * k + i];
                wt[e] = w[(e % cols) * k + i];
            }
            sums += xt * wt;
        }
        for (int r = 0; r < rows; r++)
            memcpy(y + r * ldy, (const float *)&sums + r * cols, (size_t)cols * sizeof(float));
        return;
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float v = sums[r * cols + c];
            const float *xr = x + r * k, *wc = w + c * k;
            for (int64_t i = kv; i < k; i++) v += xr[i] * wc[i];
            y[r * ldy + c] = v;
        }
}

/* Columns [j0, j1) of two rows: 2 x 4 tiles, then one narrower tile. The
 * row functions are built for the baseline ISA and for AVX2 and kept out
 * of line, so that each gets the whole register file for its tile's
 * column pointers. */
#if defined(__clang__)
/* clang never inlines a multiversioned function and refuses noinline on one */
#define ROW_FN_ATTRS __attribute__((target_clones("avx2", "default")))
#else
#define ROW_FN_ATTRS __attribute__((noinline, target_clones("avx2", "default")))
#endif

ROW_FN_ATTRS
static void tile_row_pair(float *y, const float *x,
                                                               const float *w, int64_t n,
                                                               int64_t k, int64_t j0,
                                                               int64_t j1) {
    int64_t j = j0;
    for (; j + BATCH_TILE_COLS <= j1; j += BATCH_TILE_COLS)
        tile(y + j, x, w + j * k, n, k, BATCH_TILE_ROWS, BATCH_TILE_COLS);
    switch (j1 - j) {
    case 0: break;
    case 1: tile(y + j, x, w + j * k, n, k, BATCH_TILE_ROWS, 1); break;
    case 2: tile(y + j, x, w + j * k, n, k, BATCH_TILE_ROWS, 2); break;
    default: tile(y + j, x, w + j * k, n, k, BATCH_TILE_ROWS, 3); break;
    }
}

/* Columns [j0, j1) of one row: 1 x 8 tiles, then one narrower tile. */
ROW_FN_ATTRS
static void tile_row_single(float *y, const float *x,
                                                                 const float *w, int64_t n,
                                                                 int64_t k, int64_t j0,
                                                                 int64_t j1) {
    int64_t j = j0;
    for (; j + ROW_TILE_COLS <= j1; j += ROW_TILE_COLS)
        tile(y + j, x, w + j * k, n, k, 1, ROW_TILE_COLS);
    switch (j1 - j) {
    case 0: break;
    case 1: tile(y + j, x, w + j * k, n, k, 1, 1); break;
    case 2: tile(y + j, x, w + j * k, n, k, 1, 2); break;
    case 3: tile(y + j, x, w + j * k, n, k, 1, 3); break;
    case 4: tile(y + j, x, w + j * k, n, k, 1, 4); break;
    case 5: tile(y + j, x, w + j * k, n, k, 1, 5); break;
    case 6: tile(y + j, x, w + j * k, n, k, 1, 6); break;
    default: tile(y + j, x, w + j * k, n, k, 1, 7); break;
    }
}

/* Rows [0, n_tokens), columns [j0, j1): the unit of work of one thread. */
static void matmul_own_cols(float *y, const float *x, const float *w, int64_t n_tokens,
                            int64_t n, int64_t k, int64_t j0, int64_t j1) {
    int64_t col_block = COL_BLOCK_BYTES / ((k > 0 ? k : 1) * (int64_t)sizeof(float));
    col_block = col_block < ROW_TILE_COLS ? ROW_TILE_COLS : col_block / ROW_TILE_COLS * ROW_TILE_COLS;
    int64_t t_full = n_tokens / BATCH_TILE_ROWS * BATCH_TILE_ROWS;
    for (int64_t n0 = j0; n0 < j1; n0 += col_block) {
        int64_t n1 = n0 + col_block < j1 ? n0 + col_block : j1;
        for (int64_t t = 0; t < t_full; t += BATCH_TILE_ROWS)
            tile_row_pair(y + t * n, x + t * k, w, n, k, n0, n1);
        if (t_full < n_tokens) tile_row_single(y + t_full * n, x + t_full * k, w, n, k, n0, n1);
    }
}

/* Built for the baseline ISA and for AVX2, chosen once at load time. The
 * AVX2 clone runs the same lane-wise multiplies and adds (no FMA: the
 * target adds no fused instructions and ISO C forbids contraction), so
 * both clones return the same bits. */
typedef struct cols_job {
    float *y;
    const float *x, *w;
    int64_t n_tokens, n, k;
} cols_job;

/* Items are groups of ROW_TILE_COLS columns. */
static void cols_range(void *ctx, int64_t begin, int64_t end) {
    const cols_job *j = ctx;
    int64_t j1 = end * ROW_TILE_COLS < j->n ? end * ROW_TILE_COLS : j->n;
    matmul_own_cols(j->y, j->x, j->w, j->n_tokens, j->n, j->k, begin * ROW_TILE_COLS, j1);
}

/* With several threads, large products are split by output columns in
 * groups of 8: each element is still computed by the canonical sequence,
 * so the split changes no bit. */
void pw_k_matmul_own(float *y, const float *x, const float *w, int64_t n_tokens, int64_t n,
                     int64_t k) {
    int64_t groups = (n + ROW_TILE_COLS - 1) / ROW_TILE_COLS;
    if (groups > 1 && n_tokens * n * k >= PW_K_PARALLEL_MIN_MACS && pw_k_parallel_threads() > 1) {
        cols_job job = {y, x, w, n_tokens, n, k};
        pw_k_parallel_for(groups, cols_range, &job);
        return;
    }
    matmul_own_cols(y, x, w, n_tokens, n, k, 0, n);
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
