/* Tile code of the own f32 matmul (matmul.c), compiled twice: by matmul.c
 * for the baseline ISA and by matmul_fma.c with AVX2+FMA (isa.h). The
 * canonical per-element sequence is documented in matmul.c; every
 * multiply-add goes through pw_v8_madd (one rounding in both copies), so
 * both copies return the same bits.
 *
 * Not a normal header: included once per copy, defines PW_ISA(...)
 * functions and static helpers of its own. */
#include "ops/cpu/isa.h"
#include "ops/cpu/matmul_isa.h"
#include "ops/cpu/vec_math.h"

#include <stdint.h>
#include <string.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define MM_INLINE static inline __attribute__((always_inline))

typedef float mm_v4f __attribute__((vector_size(4 * sizeof(float))));

/* Vectors travel through pointers and memcpy (unaligned loads), never by
 * value across a function boundary, so the calling convention does not
 * depend on -mavx. */
MM_INLINE pw_v8f mm_load(const float *p) {
    pw_v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The first K % 8 floats at p, the other lanes +0.0 (the zero padding of the
 * canonical sequence); reads nothing past p[rem-1]. */
MM_INLINE pw_v8f mm_load_tail(const float *p, int64_t rem, pw_v8i mask) {
#if defined(__AVX2__)
    (void)rem;
    return (pw_v8f)_mm256_maskload_ps(p, (__m256i)mask);
#else
    (void)mask;
    pw_v8f v = {0};
    for (int64_t l = 0; l < rem; l++) v[l] = p[l];
    return v;
#endif
}

/* Pairwise sums of neighbouring lanes, two vectors at once:
 * [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]. One vhaddps
 * in the AVX copy; the same adds in the baseline copy. */
MM_INLINE pw_v8f mm_hadd(pw_v8f a, pw_v8f b) {
#if defined(__AVX__)
    return (pw_v8f)_mm256_hadd_ps((__m256)a, (__m256)b);
#else
    return __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14) +
           __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
#endif
}

/* The tree of eight lane sums, for eight accumulators at once: lane e of
 * the result is ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)) of acc[e], the same
 * adds in the same order as the scalar tree, only with values moved
 * between lanes by shuffles (which round nothing). */
MM_INLINE pw_v8f mm_reduce8(const pw_v8f *acc) {
    /* h[e] = [acc[2e]: a0+a1, a2+a3, acc[2e+1]: same | the same of a4..a7] */
    pw_v8f h01 = mm_hadd(acc[0], acc[1]), h23 = mm_hadd(acc[2], acc[3]);
    pw_v8f h45 = mm_hadd(acc[4], acc[5]), h67 = mm_hadd(acc[6], acc[7]);
    /* g0 = [acc0..3: (a0+a1)+(a2+a3) | acc0..3: (a4+a5)+(a6+a7)], g1 for acc4..7 */
    pw_v8f g0 = mm_hadd(h01, h23), g1 = mm_hadd(h45, h67);
    return __builtin_shufflevector(g0, g1, 0, 1, 2, 3, 8, 9, 10, 11) +
           __builtin_shufflevector(g0, g1, 4, 5, 6, 7, 12, 13, 14, 15);
}

/* The same tree for four accumulators: lane e is the tree of acc[e]. */
MM_INLINE mm_v4f mm_reduce4(const pw_v8f *acc) {
    pw_v8f g = mm_hadd(mm_hadd(acc[0], acc[1]), mm_hadd(acc[2], acc[3]));
    return __builtin_shufflevector(g, g, 0, 1, 2, 3) + __builtin_shufflevector(g, g, 4, 5, 6, 7);
}

/* Most accumulators of one tile: 3 x 4 (batch) or 1 x 8 (single rows). */
#define MM_MAX_ACCS 12

/* What every tile of one call shares: K = kv + rem (rem = K % 8), the lanes
 * of the zero-padded last block (mask), y's row stride and w's (ldw >= K:
 * a column range of a wider matrix, read in place). */
typedef struct mm_shape {
    pw_v8i mask;
    int64_t k, kv, rem, ldy, ldw;
} mm_shape;

/* One block of 8 lanes for every accumulator of a tile, at offset i from the
 * row and column pointers. */
MM_INLINE void mm_block(pw_v8f *acc, const float *const *xe, const float *const *we, int64_t i,
                        int rows, int cols) {
    pw_v8f xv[3];
    for (int r = 0; r < rows; r++) xv[r] = mm_load(xe[r] + i);
    for (int c = 0; c < cols; c++) {
        pw_v8f wv = mm_load(we[c] + i);
        for (int r = 0; r < rows; r++) acc[r * cols + c] = pw_v8_madd(xv[r], wv, acc[r * cols + c]);
    }
}

/* A rows x cols block of outputs. Always inlined with constant shapes so
 * each call site becomes a fully unrolled register tile. Output (r, c) uses
 * accumulator r * cols + c. */
MM_INLINE void mm_tile(float *y, const float *x, const float *w, int64_t k, int64_t ldw,
                       int64_t kv, int64_t rem, pw_v8i mask, int64_t ldy, int rows, int cols,
                       int fixed_blocks) {
    pw_v8f acc[MM_MAX_ACCS];
    for (int a = 0; a < rows * cols; a++) acc[a] = (pw_v8f){0};
    /* One pointer per row end and column end and an index counting up to
     * zero: the loop keeps no bound. Every accumulator takes its blocks in
     * order, the zero-padded last block included. */
    const float *xe[3], *we[8];
    for (int r = 0; r < rows; r++) xe[r] = x + r * k + kv;
    for (int c = 0; c < cols; c++) we[c] = w + c * ldw + kv;
    if (fixed_blocks) {
        /* kv = fixed_blocks * 8 known at compile time: fully unrolled, each
         * load at a constant offset from its row or column pointer. */
        for (int64_t i = -(int64_t)fixed_blocks * PW_VEC_LANES; i < 0; i += PW_VEC_LANES)
            mm_block(acc, xe, we, i, rows, cols);
    } else {
        for (int64_t i = -kv; i < 0; i += PW_VEC_LANES) mm_block(acc, xe, we, i, rows, cols);
    }
    if (rem) {
        pw_v8f xv[3];
        for (int r = 0; r < rows; r++) xv[r] = mm_load_tail(xe[r], rem, mask);
        for (int c = 0; c < cols; c++) {
            pw_v8f wv = mm_load_tail(we[c], rem, mask);
            for (int r = 0; r < rows; r++)
                acc[r * cols + c] = pw_v8_madd(xv[r], wv, acc[r * cols + c]);
        }
    }
    if (rows == 1 && cols == 8) {
        pw_v8f s = mm_reduce8(acc);
        memcpy(y, &s, sizeof s);
        return;
    }
    if (rows == 3 && cols == 4) {
        pw_v8f s01 = mm_reduce8(acc);
        mm_v4f s2 = mm_reduce4(acc + 8);
        memcpy(y, &s01, 4 * sizeof(float));
        memcpy(y + ldy, (const float *)&s01 + 4, 4 * sizeof(float));
        memcpy(y + 2 * ldy, &s2, sizeof s2);
        return;
    }
    /* Narrow tiles (leftover columns): reduce in groups of 8, padded with
     * zero accumulators whose sums are never stored. */
    int n_acc = rows * cols;
    for (int g = 0; g < n_acc; g += 8) {
        pw_v8f grp[8];
        for (int e = 0; e < 8; e++) grp[e] = g + e < n_acc ? acc[g + e] : (pw_v8f){0};
        pw_v8f s = mm_reduce8(grp);
        for (int e = 0; e < 8 && g + e < n_acc; e++)
            y[(g + e) / cols * ldy + (g + e) % cols] = s[e];
    }
}

/* The full tiles have a fully unrolled copy for 8 full blocks (K = 64..71):
 * such a tile is only 8 blocks, so its loop's index updates and the
 * per-tile pointer setup weigh; unrolled, the stories260K decode step runs
 * 9% fewer matmul instructions. (GCC makes worse code for runs of 8 blocks
 * with a remainder loop, and for a loop unrolled by two, so K >= 72 keeps
 * the plain loop.) */
#define MM_FIXED_BLOCKS 8
/* K = 64 exactly (stories260K's dim) gets a copy of its own with K a
 * constant: every weight row of a tile is then a constant displacement
 * from one pointer, so a tile advances one pointer instead of eight and
 * skips the remainder test (106 -> 86 instructions per 1 x 8 tile; a
 * stories260K decode step runs 394 of them). The same multiply-adds in the
 * same order as the other copies, so the same bits. */
#define MM_FIXED_K (MM_FIXED_BLOCKS * PW_VEC_LANES)

/* Columns [j0, j1) of three rows: 3 x 4 tiles, then one narrower tile. Kept
 * out of line so that the tile gets the whole register file. */
static __attribute__((noinline)) void mm_rows3(float *y, const float *x, const float *w,
                                               const mm_shape *sh, int64_t j0, int64_t j1) {
    const int64_t k = sh->k, kv = sh->kv, rem = sh->rem, ldy = sh->ldy, ldw = sh->ldw;
    const pw_v8i m = sh->mask;
    int64_t j = j0;
    if (k == MM_FIXED_K)
        for (; j + 4 <= j1; j += 4)
            mm_tile(y + j, x, w + j * ldw, MM_FIXED_K, ldw, MM_FIXED_K, 0, m, ldy, 3, 4,
                    MM_FIXED_BLOCKS);
    if (kv == MM_FIXED_BLOCKS * PW_VEC_LANES)
        for (; j + 4 <= j1; j += 4)
            mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 3, 4, MM_FIXED_BLOCKS);
    for (; j + 4 <= j1; j += 4) mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 3, 4, 0);
    switch (j1 - j) {
    case 0: break;
    case 1: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 3, 1, 0); break;
    case 2: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 3, 2, 0); break;
    default: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 3, 3, 0); break;
    }
}

/* Columns [j0, j1) of one row: 1 x 8 tiles, then one narrower tile. */
static __attribute__((noinline)) void mm_row1(float *y, const float *x, const float *w,
                                              const mm_shape *sh, int64_t j0, int64_t j1) {
    const int64_t k = sh->k, kv = sh->kv, rem = sh->rem, ldy = sh->ldy, ldw = sh->ldw;
    const pw_v8i m = sh->mask;
    int64_t j = j0;
    if (k == MM_FIXED_K)
        for (; j + 8 <= j1; j += 8)
            mm_tile(y + j, x, w + j * ldw, MM_FIXED_K, ldw, MM_FIXED_K, 0, m, ldy, 1, 8,
                    MM_FIXED_BLOCKS);
    if (kv == MM_FIXED_BLOCKS * PW_VEC_LANES)
        for (; j + 8 <= j1; j += 8)
            mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 8, MM_FIXED_BLOCKS);
    for (; j + 8 <= j1; j += 8) mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 8, 0);
    switch (j1 - j) {
    case 0: break;
    case 1: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 1, 0); break;
    case 2: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 2, 0); break;
    case 3: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 3, 0); break;
    case 4: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 4, 0); break;
    case 5: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 5, 0); break;
    case 6: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 6, 0); break;
    default: mm_tile(y + j, x, w + j * ldw, k, ldw, kv, rem, m, ldy, 1, 7, 0); break;
    }
}

void PW_ISA(pw_k_matmul_cols)(float *y, const float *x, const float *w, int64_t ldw,
                              int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    mm_shape sh;
    sh.k = k;
    sh.ldw = ldw;
    sh.kv = k / PW_VEC_LANES * PW_VEC_LANES;
    sh.rem = k - sh.kv;
    sh.ldy = n;
    sh.mask = (pw_v8i){0, 1, 2, 3, 4, 5, 6, 7} < (int)sh.rem;
    if (n_tokens == 1) {
        /* One pass over the weights whatever the blocking: skip it. */
        mm_row1(y, x, w, &sh, j0, j1);
        return;
    }
    int64_t col_block = MM_COL_BLOCK_BYTES / ((k > 0 ? k : 1) * (int64_t)sizeof(float));
    col_block = col_block < 8 ? 8 : col_block / 8 * 8;
    int64_t t3 = n_tokens / 3 * 3;
    for (int64_t n0 = j0; n0 < j1; n0 += col_block) {
        int64_t n1 = n0 + col_block < j1 ? n0 + col_block : j1;
        for (int64_t t = 0; t < t3; t += 3) mm_rows3(y + t * n, x + t * k, w, &sh, n0, n1);
        for (int64_t t = t3; t < n_tokens; t++) mm_row1(y + t * n, x + t * k, w, &sh, n0, n1);
    }
}
