/* Tile code of the quantized matmul (matmul_quant.c), compiled twice: by
 * matmul_quant.c for the baseline ISA and by matmul_quant_fma.c with
 * AVX2+FMA+F16C (isa.h). The canonical per-element sequence is documented
 * in matmul_quant.c; every multiply-add goes through pw_v8_madd (one
 * rounding in both copies) and the unpacked weights are exact integers in
 * both, so both copies return the same bits. Only the unpacking differs:
 * AVX2 widening and F16C scale conversion in the FMA copy, portable code
 * in the baseline copy.
 *
 * Not a normal header: included once per copy, defines PW_ISA(...)
 * functions and static helpers of its own. */
#include "ops/cpu/isa.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "ops/cpu/vec_math.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#if defined(PW_ISA_FMA_COPY)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "matmul_quant_fma.c must be built with -mavx2 -mfma -mf16c"
#endif
#include <immintrin.h>
#endif

#define MQ_INLINE static inline __attribute__((always_inline))

#define QK 32
#define LANES PW_VEC_LANES

/* Block sizes in bytes (ggml layouts, see src/model/dequant.h). */
#define Q8_0_BYTES 34 /* f16 d, 32 x int8 */
#define Q4_0_BYTES 18 /* f16 d, 16 nibble bytes */
#define Q4_1_BYTES 20 /* f16 d, f16 m, 16 nibble bytes */

/* Accumulators of one register tile, reduced together by mq_reduce8. */
#define TILE_ACCS 8
/* Batches: 4 rows x 2 columns, so one unpacked weight block serves four
 * tokens. The leftover rows (and decode, T = 1) use 1 row x 8 columns. */
#define BATCH_TILE_ROWS 4
#define BATCH_TILE_COLS 2
#define ROW_TILE_COLS 8
/* Columns processed together so their weight rows stay in L2 while every
 * row tile of x streams past them. */
#define COL_BLOCK_BYTES (128 * 1024)

/* Vectors travel through pointers and memcpy (unaligned loads). */
MQ_INLINE pw_v8f mq_load(const float *p) {
    pw_v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* IEEE half at p (little-endian) to float, exact. */
MQ_INLINE float mq_half(const uint8_t *p) {
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    uint32_t bits;
    float f;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else {
        f = (float)mant * 0x1p-24f; /* subnormal or zero, exact */
        return sign ? -f : f;
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Lane e of out is ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) of acc[e], values
 * moved between lanes only by shuffles. */
MQ_INLINE void mq_reduce8(const pw_v8f *acc, pw_v8f *out) {
    pw_v8f p[4];
    for (int e = 0; e < 4; e++)
        p[e] = __builtin_shufflevector(acc[e], acc[e + 4], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(acc[e], acc[e + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    pw_v8f q01 = __builtin_shufflevector(p[0], p[1], 0, 1, 8, 9, 4, 5, 12, 13) +
                 __builtin_shufflevector(p[0], p[1], 2, 3, 10, 11, 6, 7, 14, 15);
    pw_v8f q23 = __builtin_shufflevector(p[2], p[3], 0, 1, 8, 9, 4, 5, 12, 13) +
                 __builtin_shufflevector(p[2], p[3], 2, 3, 10, 11, 6, 7, 14, 15);
    *out = __builtin_shufflevector(q01, q23, 0, 2, 8, 10, 4, 6, 12, 14) +
           __builtin_shufflevector(q01, q23, 1, 3, 9, 11, 5, 7, 13, 15);
}

/* The four 8-lane groups of a block's integer values as floats (exact), and
 * its scales d and m (Q4_1) in every lane. */
typedef struct mq_unpacked {
    pw_v8f q[4];
    pw_v8f d, m;
} mq_unpacked;

#if defined(PW_ISA_FMA_COPY)
/* The half at p in all 8 lanes: a 16-bit broadcast and one vcvtph2ps. */
MQ_INLINE pw_v8f mq_half_splat(const uint8_t *p) {
    int16_t h;
    memcpy(&h, p, sizeof h);
    return (pw_v8f)_mm256_cvtph_ps(_mm_set1_epi16(h));
}

MQ_INLINE pw_v8f mq_cvt(__m256i v) { return (pw_v8f)_mm256_cvtepi32_ps(v); }

MQ_INLINE void mq_unpack(const uint8_t *blk, pw_dtype type, mq_unpacked *u) {
    u->d = mq_half_splat(blk);
    if (type == PW_Q4_1) u->m = mq_half_splat(blk + 2);
    if (type == PW_Q8_0) {
        for (int g = 0; g < 4; g++)
            u->q[g] = mq_cvt(
                _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + g * LANES))));
        return;
    }
    /* Bytes 0-7 and 8-15 widened to 32 bits: their low nibbles are
     * elements 0-7 and 8-15, their high nibbles (a 32-bit shift, as the
     * widened byte has nothing above) elements 16-23 and 24-31. */
    const uint8_t *qs = blk + (type == PW_Q4_1 ? 4 : 2);
    __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs));
    __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8)));
    __m256i low = _mm256_set1_epi32(0x0F);
    __m256i n[4] = {_mm256_and_si256(b0, low), _mm256_and_si256(b1, low),
                    _mm256_srli_epi32(b0, 4), _mm256_srli_epi32(b1, 4)};
    for (int g = 0; g < 4; g++) {
        if (type == PW_Q4_0) n[g] = _mm256_sub_epi32(n[g], _mm256_set1_epi32(8));
        u->q[g] = mq_cvt(n[g]);
    }
}
#else
/* Portable unpacking: integer values to float (exact). */
MQ_INLINE void mq_unpack(const uint8_t *blk, pw_dtype type, mq_unpacked *u) {
    u->d = pw_v8_splat(mq_half(blk));
    u->m = pw_v8_splat(type == PW_Q4_1 ? mq_half(blk + 2) : 0.0f);
    float q[QK];
    if (type == PW_Q8_0) {
        for (int j = 0; j < QK; j++) q[j] = (float)(int8_t)blk[2 + j];
    } else {
        const uint8_t *qs = blk + (type == PW_Q4_1 ? 4 : 2);
        int off = type == PW_Q4_0 ? 8 : 0;
        for (int j = 0; j < QK / 2; j++) {
            q[j] = (float)((qs[j] & 0x0F) - off);
            q[j + QK / 2] = (float)((qs[j] >> 4) - off);
        }
    }
    memcpy(u->q, q, sizeof q);
}
#endif

/* Block b of a rows x cols register tile: acc[r * cols + c] takes block b
 * of row r against column c. */
MQ_INLINE void mq_block(pw_v8f *acc, const float *x, const uint8_t *w, int64_t row_bytes,
                        int64_t k, pw_dtype type, int rows, int cols) {
    pw_v8f xg[BATCH_TILE_ROWS][4], xs[BATCH_TILE_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < 4; i++) xg[r][i] = mq_load(x + r * k + i * LANES);
        if (type == PW_Q4_1) xs[r] = (xg[r][0] + xg[r][1]) + (xg[r][2] + xg[r][3]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < cols; c++) {
        mq_unpacked u;
        mq_unpack(w + c * row_bytes, type, &u);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const pw_v8f *g = xg[r];
            pw_v8f s = g[0] * u.q[0];
            s = pw_v8_madd(g[1], u.q[1], s);
            s = pw_v8_madd(g[2], u.q[2], s);
            s = pw_v8_madd(g[3], u.q[3], s);
            pw_v8f a = pw_v8_madd(u.d, s, acc[r * cols + c]);
            if (type == PW_Q4_1) a = pw_v8_madd(u.m, xs[r], a);
            acc[r * cols + c] = a;
        }
    }
}

/* A rows x cols block of outputs (rows * cols <= TILE_ACCS). Always inlined
 * with constant shapes and type, so each call site is a fully unrolled
 * register tile; unused accumulators stay zero and are never stored. Blocks
 * go in order, two per loop turn (one pointer update for both). */
MQ_INLINE void mq_tile(float *y, int64_t ldy, const float *x, const uint8_t *w,
                       int64_t row_bytes, int64_t k, pw_dtype type, int64_t bbytes, int rows,
                       int cols) {
    pw_v8f acc[TILE_ACCS];
    memset(acc, 0, sizeof acc);
    const int64_t nb = k / QK;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        mq_block(acc, x + b * QK, w + b * bbytes, row_bytes, k, type, rows, cols);
        mq_block(acc, x + (b + 1) * QK, w + (b + 1) * bbytes, row_bytes, k, type, rows, cols);
    }
    if (b < nb) mq_block(acc, x + b * QK, w + b * bbytes, row_bytes, k, type, rows, cols);
    pw_v8f sums;
    mq_reduce8(acc, &sums);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) y[r * ldy + c] = sums[r * cols + c];
}

#define MQ_TILE(rows, cols) mq_tile(y + j, n, x, w + j * rb, rb, k, type, bb, rows, cols)

MQ_INLINE void mq_row_block(float *y, const float *x, const uint8_t *w, int64_t n, int64_t k,
                            pw_dtype type, int64_t bb, int64_t j0, int64_t j1, int rows) {
    const int64_t rb = k / QK * bb;
    int64_t j = j0;
    if (rows == BATCH_TILE_ROWS) {
        for (; j + BATCH_TILE_COLS <= j1; j += BATCH_TILE_COLS)
            MQ_TILE(BATCH_TILE_ROWS, BATCH_TILE_COLS);
        if (j < j1) MQ_TILE(BATCH_TILE_ROWS, 1);
        return;
    }
    for (; j + ROW_TILE_COLS <= j1; j += ROW_TILE_COLS) MQ_TILE(1, ROW_TILE_COLS);
    if (j + 4 <= j1) {
        MQ_TILE(1, 4);
        j += 4;
    }
    switch (j1 - j) {
    case 0: break;
    case 1: MQ_TILE(1, 1); break;
    case 2: MQ_TILE(1, 2); break;
    default: MQ_TILE(1, 3); break;
    }
}

MQ_INLINE void mq_typed(float *y, const float *x, const uint8_t *w, int64_t n_tokens, int64_t n,
                        int64_t k, pw_dtype type, int64_t bb, int64_t j0, int64_t j1) {
    int64_t col_block = COL_BLOCK_BYTES / (k / QK * bb);
    col_block = col_block < ROW_TILE_COLS ? ROW_TILE_COLS
                                          : col_block / ROW_TILE_COLS * ROW_TILE_COLS;
    int64_t t_full = n_tokens / BATCH_TILE_ROWS * BATCH_TILE_ROWS;
    for (int64_t n0 = j0; n0 < j1; n0 += col_block) {
        int64_t n1 = n0 + col_block < j1 ? n0 + col_block : j1;
        for (int64_t t = 0; t < t_full; t += BATCH_TILE_ROWS)
            mq_row_block(y + t * n, x + t * k, w, n, k, type, bb, n0, n1, BATCH_TILE_ROWS);
        for (int64_t t = t_full; t < n_tokens; t++)
            mq_row_block(y + t * n, x + t * k, w, n, k, type, bb, n0, n1, 1);
    }
}

/* The type switch is outside the loops so each type's tiles are
 * specialised. */
void PW_ISA(pw_k_matmul_quant_run)(float *y, const float *x, const uint8_t *w, pw_dtype type,
                                   int64_t n_tokens, int64_t n, int64_t k, int64_t j0,
                                   int64_t j1) {
    switch (type) {
    case PW_Q8_0: mq_typed(y, x, w, n_tokens, n, k, PW_Q8_0, Q8_0_BYTES, j0, j1); break;
    case PW_Q4_0: mq_typed(y, x, w, n_tokens, n, k, PW_Q4_0, Q4_0_BYTES, j0, j1); break;
    case PW_Q4_1: mq_typed(y, x, w, n_tokens, n, k, PW_Q4_1, Q4_1_BYTES, j0, j1); break;
    default: assert(!"pw_k_matmul_quant: unsupported weight type"); break;
    }
}
