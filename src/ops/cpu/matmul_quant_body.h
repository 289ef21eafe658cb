/* Tile code of the quantized matmul (matmul_quant.c): activations quantized
 * to int8 blocks, integer dot products against the weight blocks, and the
 * float steps that combine the scales. Compiled four times (isa.h): by
 * matmul_quant.c (portable C), matmul_quant_fma.c (AVX2: vpmaddubsw +
 * vpmaddwd), matmul_quant_avxvnni.c (AVX-VNNI: vpdpbusd) and
 * matmul_quant_avx512vnni.c (AVX-512 VNNI, 16 columns per tile). The
 * sequence every copy computes is the one in matmul_quant.c's header
 * comment; the copies differ only in how they form the exact integer sums
 * and in their tile shapes, so they return the same bits.
 *
 * Not a normal header: included once per copy, defines PW_ISA(...)
 * functions and static helpers of its own. */
#include "ops/cpu/isa.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "ops/cpu/vec_math.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#if defined(PW_ISA_FMA_COPY) || defined(PW_ISA_AVXVNNI_COPY) || defined(PW_ISA_AVX512VNNI_COPY)
#define MQ_X86 1
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "the x86 copies of matmul_quant_body.h need -mavx2 -mfma -mf16c"
#endif
#if defined(PW_ISA_AVXVNNI_COPY) && !defined(__AVXVNNI__)
#error "matmul_quant_avxvnni.c must be built with -mavxvnni"
#endif
#if defined(PW_ISA_AVX512VNNI_COPY) &&                                                        \
    (!defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__))
#error "matmul_quant_avx512vnni.c must be built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif
#include <immintrin.h>
#else
#define MQ_X86 0
#endif

#define MQ_INLINE static inline __attribute__((always_inline))

#define QK 32
#define LANES PW_VEC_LANES

/* Weight block sizes in bytes (ggml layouts, see src/model/dequant.h). */
#define Q8_0_BYTES 34 /* f16 d, 32 x int8 */
#define Q4_0_BYTES 18 /* f16 d, 16 nibble bytes */
#define Q4_1_BYTES 20 /* f16 d, f16 m, 16 nibble bytes */

/* Columns processed together so their weight rows stay in L2 while every
 * row tile of the activations streams past them. */
#define COL_BLOCK_BYTES (128 * 1024)

/* IEEE half at p (little-endian) to float, exact. */
MQ_INLINE float mq_half_portable(const uint8_t *p) {
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

#if MQ_X86
MQ_INLINE float mq_half(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}
#else
#define mq_half mq_half_portable
#endif

/* ---- activation quantization ------------------------------------------- */

/* The maximum as vmaxps computes it: a > b ? a : b (b when unordered). */
MQ_INLINE float mq_max(float a, float b) { return a > b ? a : b; }

/* Buffer layout (matmul_quant_isa.h): the rows' values; after them the
 * scales, then the block sums, both block-major ([b][t]). */
MQ_INLINE int8_t *xq_values(uint8_t *row) { return (int8_t *)row; }
MQ_INLINE float *xq_scales(uint8_t *xa, int64_t n_rows, int64_t k) {
    return (float *)(xa + n_rows * PW_K_Q8B_ROW_BYTES(k));
}
MQ_INLINE float *xq_sums(uint8_t *xa, int64_t n_rows, int64_t k) {
    return xq_scales(xa, n_rows, k) + n_rows * (k / QK);
}
MQ_INLINE const int8_t *xq_cvalues(const uint8_t *row) { return (const int8_t *)row; }
MQ_INLINE const float *xq_cscales(const uint8_t *xa, int64_t n_rows, int64_t k) {
    return (const float *)(xa + n_rows * PW_K_Q8B_ROW_BYTES(k));
}
MQ_INLINE const float *xq_csums(const uint8_t *xa, int64_t n_rows, int64_t k) {
    return xq_cscales(xa, n_rows, k) + n_rows * (k / QK);
}
/* Block b of a row: its 32 values, then its fold (8 int32): MQ_MAGIC - 8
 * times the lane sums for Q4 weights, -128 times them for Q8_0
 * (matmul_quant_isa.h). */
#define XQ_BLOCK_BYTES (2 * QK)
/* Rows are stored in groups of XQ_GROUP (the last group: what is left),
 * block-major within a group: the group's rows' blocks b side by side, so
 * that a tile of a group's rows reaches row r's block from one pointer
 * and the constant displacement r * XQ_BLOCK_BYTES, the pointer advancing
 * by one stride per block (matmul_quant_isa.h, PW_K_Q8B_GROUP_*). */
#if defined(PW_ISA_FMA_COPY)
#define XQ_GROUP PW_K_Q8B_GROUP_FMA
#define XQ_MAGIC PW_K_Q8B_MAGIC_FMA
#elif defined(PW_ISA_AVXVNNI_COPY)
#define XQ_GROUP PW_K_Q8B_GROUP_AVXVNNI
#define XQ_MAGIC PW_K_Q8B_MAGIC_AVXVNNI
#elif defined(PW_ISA_AVX512VNNI_COPY)
#define XQ_GROUP PW_K_Q8B_GROUP_AVX512VNNI
#define XQ_MAGIC PW_K_Q8B_MAGIC_AVX512VNNI
#else
#define XQ_GROUP PW_K_Q8B_GROUP_GENERIC
#define XQ_MAGIC PW_K_Q8B_MAGIC_GENERIC
#endif
/* Row t's block 0 (of n_rows rows of k), and the stride from its block b
 * to block b + 1 (the rows of t's group times XQ_BLOCK_BYTES). */
MQ_INLINE int64_t xq_row_offset(int64_t k, int64_t t) {
    int64_t g0 = t / XQ_GROUP * XQ_GROUP;
    return g0 * PW_K_Q8B_ROW_BYTES(k) + (t - g0) * XQ_BLOCK_BYTES;
}
/* From a row's blocks to the next row's, within a tile (whose rows lie in
 * one group): a constant when rows are grouped. */
#define XQ_ROW_STEP(k) (XQ_GROUP > 1 ? (int64_t)XQ_BLOCK_BYTES : PW_K_Q8B_ROW_BYTES(k))
/* From a tile's block b to b + 1 (bs: the group's stride): a constant
 * when rows are not grouped. */
#define XQ_BLOCK_STEP(bs) (XQ_GROUP > 1 ? (bs) : (int64_t)XQ_BLOCK_BYTES)
MQ_INLINE int64_t xq_block_stride(int64_t n_rows, int64_t t) {
    int64_t g0 = t / XQ_GROUP * XQ_GROUP;
    return (n_rows - g0 < XQ_GROUP ? n_rows - g0 : XQ_GROUP) * XQ_BLOCK_BYTES;
}

/* The integer lane sums are formed on top of MQ_MAGIC, the bits of the
 * float 1.5 * 2^23 (= MQ_MAGIC_F), whose unit in the last place is 1: for
 * |p| < 2^22 the bits MQ_MAGIC + p are the float 1.5 * 2^23 + p exactly, so
 * (as float) (MQ_MAGIC + p) - MQ_MAGIC_F is (float)p, exactly, +0 for 0:
 * the same value vcvtdq2ps gives. The AVX2 copy converts Q4's lane sums
 * that way (XQ_MAGIC), a float subtraction where vcvtdq2ps would be: with a
 * float adder on a third port (Golden Cove and later: ports 1 and 5) it
 * leaves ports 0 and 1 to vpmaddubsw / vpmaddwd / vpdpbusd and the fma,
 * which bound the batch tiles; measured, AVX2's Q4_1 batch tiles took
 * 0.90-1.00x the time, median ~0.93. The offset costs nothing there, the Q4 folds carrying it
 * (Q8_0: MQ_FOLD_BASE). */
#define MQ_MAGIC 0x4B400000
#define MQ_MAGIC_F 12582912.0f
/* The fold's offset for weights of `type`, in this copy (XQ_MAGIC:
 * matmul_quant_isa.h, PW_K_Q8B_MAGIC_*); Q8_0's folds carry none. The
 * block-sum tiles take it out of the fold totals (q40_fold_total). */
#define MQ_FOLD_BASE(type) ((type) == PW_Q8_0 || !XQ_MAGIC ? 0 : MQ_MAGIC)

#if MQ_X86
/* One block: amax, d, values, and the lane sums (sa_l, when sl is not
 * NULL) or the block sum (*sb, when sb is not NULL) and the fold (when fl
 * is not NULL: fl[l] = base - 2^fs * the integer lane sum l), exactly as
 * the portable copy. */
MQ_INLINE void xq_block(const float *x, int8_t *q, float *d, float *sl, float *sb,
                        int32_t *fl, int fs, int32_t base) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 v[4];
    for (int g = 0; g < 4; g++) v[g] = _mm256_loadu_ps(x + g * LANES);
    __m256 m = _mm256_and_ps(v[0], abs_mask);
    for (int g = 1; g < 4; g++) m = _mm256_max_ps(m, _mm256_and_ps(v[g], abs_mask));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float amax = _mm_cvtss_f32(h);
    float dv = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    __m256i i[4];
    for (int g = 0; g < 4; g++) i[g] = _mm256_cvtps_epi32(_mm256_mul_ps(v[g], vid));
    /* Saturating packs interleave 128-bit halves; the permute restores
     * element order. */
    __m256i p01 = _mm256_packs_epi32(i[0], i[1]), p23 = _mm256_packs_epi32(i[2], i[3]);
    __m256i b = _mm256_packs_epi16(p01, p23);
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    b = _mm256_max_epi8(b, _mm256_set1_epi8(-127));
    _mm256_storeu_si256((__m256i *)q, b);
    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), b),
                                  _mm256_set1_epi16(1));
    if (sl) _mm256_storeu_ps(sl, _mm256_mul_ps(_mm256_set1_ps(dv), _mm256_cvtepi32_ps(s)));
    if (fl)
        _mm256_storeu_si256((__m256i *)fl,
                            _mm256_sub_epi32(_mm256_set1_epi32(base),
                                             _mm256_sll_epi32(s, _mm_cvtsi32_si128(fs))));
    if (sb) {
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        *sb = dv * (float)_mm_cvtsi128_si32(s4); /* the integer sum is exact */
    }
    *d = dv;
}
#else
MQ_INLINE void xq_block(const float *x, int8_t *q, float *d, float *sl, float *sb,
                        int32_t *fl, int fs, int32_t base) {
    float m[LANES], a[QK];
    for (int j = 0; j < QK; j++) {
        uint32_t bits;
        memcpy(&bits, &x[j], sizeof bits);
        bits &= 0x7FFFFFFFu;
        memcpy(&a[j], &bits, sizeof bits);
    }
    for (int l = 0; l < LANES; l++) {
        m[l] = a[l];
        for (int g = 1; g < 4; g++) m[l] = mq_max(m[l], a[g * LANES + l]);
    }
    float h[4];
    for (int l = 0; l < 4; l++) h[l] = mq_max(m[l], m[l + 4]);
    float h0 = mq_max(h[0], h[2]), h1 = mq_max(h[1], h[3]);
    float amax = mq_max(h0, h1);
    float dv = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < QK; j++) {
        float r = x[j] * id;
        /* vcvtps2dq: nearest-even, INT_MIN when out of range or NaN; the
         * packs saturate to int8, then values are clamped to -127. */
        int v = r >= -2147483648.0f && r < 2147483648.0f ? (int)__builtin_rintf(r) : -128;
        q[j] = (int8_t)(v < -127 ? -127 : v > 127 ? 127 : v);
    }
    if (sl)
        for (int l = 0; l < LANES; l++)
            sl[l] = dv * (float)(q[4 * l] + q[4 * l + 1] + q[4 * l + 2] + q[4 * l + 3]);
    if (fl)
        for (int l = 0; l < LANES; l++)
            fl[l] = base - (q[4 * l] + q[4 * l + 1] + q[4 * l + 2] + q[4 * l + 3]) * (1 << fs);
    if (sb) {
        int s = 0;
        for (int j = 0; j < QK; j++) s += q[j];
        *sb = dv * (float)s;
    }
    *d = dv;
}
#endif

void PW_ISA(pw_k_q8b_quantize_rows)(uint8_t *xa, const float *x, int64_t n_rows, int64_t k,
                                    pw_dtype type) {
    const int64_t nb = k / QK;
    const int fs = type == PW_Q8_0 ? 7 : 3; /* fold: -128 or -8 times the lane sums */
    const int32_t base = MQ_FOLD_BASE(type);
    float *d = xq_scales(xa, n_rows, k), *sums = xq_sums(xa, n_rows, k);
    for (int64_t t = 0; t < n_rows; t++) {
        uint8_t *row = xa + xq_row_offset(k, t);
        const int64_t bs = xq_block_stride(n_rows, t);
        for (int64_t b = 0; b < nb; b++)
            xq_block(x + t * k + b * QK, xq_values(row + b * bs), d + b * n_rows + t, NULL,
                     sums + b * n_rows + t, (int32_t *)(row + b * bs + QK), fs, base);
    }
}

/* The per-row layout with lane sums (matmul_quant_isa.h), for
 * matmul_kquant.c's Q5_0 and Q5_1 tiles: the same values and scales. */
void PW_ISA(pw_k_q8_quantize_rows)(uint8_t *xa, const float *x, int64_t n_rows, int64_t k) {
    const int64_t nb = k / QK;
    for (int64_t t = 0; t < n_rows; t++) {
        uint8_t *row = xa + t * PW_K_Q8_ROW_BYTES(k);
        int8_t *q = (int8_t *)row;
        float *d = (float *)(row + nb * QK), *sl = (float *)(row + nb * (QK + 4));
        for (int64_t b = 0; b < nb; b++)
            xq_block(x + t * k + b * QK, q + b * QK, d + b, sl + b * LANES, NULL, NULL, 0, 0);
    }
}

/* ---- integer dot products ---------------------------------------------- */

#if MQ_X86
/* Lane l: start_l + the sum of u_j * s_j over j = 4l..4l+3, exact (no
 * saturation: u <= 255 and |s| <= 127 in the VNNI copies, whose products
 * are summed in 32 bits; in AVX2's vpmaddubsw pairs u <= 128, so a pair
 * stays within 32512). */
MQ_INLINE __m256i mq_dot_us(__m256i start, __m256i u, __m256i s) {
#if defined(PW_ISA_AVX512VNNI_COPY)
    return _mm256_dpbusd_epi32(start, u, s);
#elif defined(PW_ISA_AVXVNNI_COPY)
    return _mm256_dpbusd_avx_epi32(start, u, s);
#else
    return _mm256_add_epi32(start,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
#endif

/* ---- Q8_0, Q4_0 and Q4_1: one integer sum per block ----------------------- */

/* Their sequence (matmul_quant.c): per output, for blocks b in order from
 * acc = +0 and mn = +0, p = sum_{j<32} w_j a_j (exact int32; Q4: w_j =
 * n_j - 8), acc = fma(d_w * d_a, (float)p, acc), and for Q4_1
 * mn = fma(fma(8, d_w, m_w), s_a, mn); y = acc (Q4_1: acc + mn). One float
 * step per block, not one per 4 values: the x86 copies lay 8 or 16 columns
 * side by side in a vector (one lane per column, each column's block
 * transposed into vectors of 4-byte groups), so each broadcast of 4
 * activations feeds every column of the tile, and the float steps are
 * shared by them all. (The names say q40: the tiles were Q4_0's first.)
 *
 * F: the start of a row's integer sum for a block, -8 (Q8_0: -128) times
 * the sum of its 32 activations, from the quantizer's fold lanes
 * (MQ_FOLD_BASE - 8 S_l or -128 S_l; the sum taken modulo 2^32, exact
 * since |F| < 2^19). */
/* Q8_0 in the AVX2 copy: |w| against a with w's sign (vpsignb), its
 * integer sums starting from 0, since vpmaddubsw would saturate on
 * (w + 128) a; the VNNI copies take w + 128 (w xor 0x80) from the fold. */
#if defined(PW_ISA_FMA_COPY)
#define Q8_SIGNED 1
#else
#define Q8_SIGNED 0
#endif

/* Bytes of a weight block of `type` (Q8_0, Q4_0 or Q4_1). */
MQ_INLINE int64_t q40_block_bytes(pw_dtype type) {
    return type == PW_Q8_0 ? Q8_0_BYTES : type == PW_Q4_1 ? Q4_1_BYTES : Q4_0_BYTES;
}

#if MQ_X86
MQ_INLINE int32_t q40_fold_total(const uint8_t *blk_values, pw_dtype type) {
    int32_t fl[LANES];
    memcpy(fl, blk_values + QK, sizeof fl);
    uint32_t s = 0;
    for (int l = 0; l < LANES; l++) s += (uint32_t)fl[l];
    return (int32_t)(s - (uint32_t)LANES * (uint32_t)MQ_FOLD_BASE(type));
}

/* Fold totals of rows [0, n_tokens), block-major ([b][t]), into f. */
static void q40_fold_totals(int32_t *f, const uint8_t *xa, int64_t n_tokens, int64_t k,
                            pw_dtype type) {
    const int64_t nb = k / QK;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *row = xa + xq_row_offset(k, t);
        const int64_t bs = xq_block_stride(n_tokens, t);
        for (int64_t b = 0; b < nb; b++) f[b * n_tokens + t] = q40_fold_total(row + b * bs, type);
    }
}

#if defined(PW_ISA_AVX512VNNI_COPY)
#define Q40_COLS 16
#define Q40_ROWS 8
typedef __m512i q40_vi;
typedef __m512 q40_vf;
#else
#define Q40_COLS 8
#define Q40_ROWS 4
typedef __m256i q40_vi;
typedef __m256 q40_vf;
#endif
/* Lane p of the tile's vectors holds column q40_col(p): the transpose works
 * within 128-bit lanes, so lane 4L + g is column (Q40_COLS / 4) g + L. */
#define Q40_COL(p) ((Q40_COLS / 4) * ((p) % 4) + (p) / 4)

/* Q40_COLS columns' 16 bytes each (c[i]: the tile's lane order, column
 * Q40_COL-permuted by the transpose) to four vectors: vector q, lane of
 * column c, holds the column's bytes 4q..4q+3. */
MQ_INLINE void q40_transpose(const __m128i *c, q40_vi *q) {
#if Q40_COLS == 16
    q40_vi z[4];
    for (int g = 0; g < 4; g++) {
        __m512i v = _mm512_castsi128_si512(c[4 * g]);
        v = _mm512_inserti32x4(v, c[4 * g + 1], 1);
        v = _mm512_inserti32x4(v, c[4 * g + 2], 2);
        z[g] = _mm512_inserti32x4(v, c[4 * g + 3], 3);
    }
    /* 128-bit lane L of z[g] is column 4g + L; after the 4 x 4 transpose of
     * 4-byte groups in each 128-bit lane, lane 4L + g of q[i] holds group i
     * of column 4g + L. */
    q40_vi t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    q40_vi t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    q[0] = _mm512_unpacklo_epi64(t0, t2), q[1] = _mm512_unpackhi_epi64(t0, t2);
    q[2] = _mm512_unpacklo_epi64(t1, t3), q[3] = _mm512_unpackhi_epi64(t1, t3);
#else
    q40_vi z[4];
    for (int g = 0; g < 4; g++) z[g] = _mm256_set_m128i(c[2 * g + 1], c[2 * g]);
    q40_vi t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
    q40_vi t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
    q[0] = _mm256_unpacklo_epi64(t0, t2), q[1] = _mm256_unpackhi_epi64(t0, t2);
    q[2] = _mm256_unpacklo_epi64(t1, t3), q[3] = _mm256_unpackhi_epi64(t1, t3);
#endif
}

/* The 16 bytes at offset `at` of each of the tile's blocks (cols columns,
 * wrow bytes apart; the rest zero), in the tile's lane order, transposed
 * (q40_transpose); with `pf`, asking for the same column's block of the
 * next tile (decode streams each column from memory once per token). */
MQ_INLINE void q40_load_t(const uint8_t *blk, int64_t wrow, int cols, int at, bool pf,
                          q40_vi *q) {
    __m128i c[Q40_COLS];
#pragma GCC unroll 16
    for (int i = 0; i < Q40_COLS; i++) {
        if (i < cols) {
            c[i] = _mm_loadu_si128((const __m128i *)(blk + i * wrow + at));
            if (pf)
                _mm_prefetch((const char *)(blk + (i + Q40_COLS) * wrow), PW_K_DECODE_PREFETCH);
        } else {
            c[i] = _mm_setzero_si128();
        }
    }
    q40_transpose(c, q);
}

/* The blocks' first dword (Q4_1: d and m; Q8_0: d and two value bytes) of
 * the tile's columns in lane order, one gather (the rest zero); assembled
 * through 16 two-byte stores read back as one vector, they would stall on
 * store forwarding. */
MQ_INLINE q40_vi q40_gather_words(const uint8_t *blk, int64_t wrow, int cols) {
#if Q40_COLS == 16
    const __m512i at = _mm512_mullo_epi32(
        _mm512_setr_epi32(Q40_COL(0), Q40_COL(1), Q40_COL(2), Q40_COL(3), Q40_COL(4),
                          Q40_COL(5), Q40_COL(6), Q40_COL(7), Q40_COL(8), Q40_COL(9),
                          Q40_COL(10), Q40_COL(11), Q40_COL(12), Q40_COL(13), Q40_COL(14),
                          Q40_COL(15)),
        _mm512_set1_epi32((int)wrow));
    __mmask16 live = 0;
    for (int p = 0; p < Q40_COLS; p++)
        if (Q40_COL(p) < cols) live |= (__mmask16)(1u << p);
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, at, blk, 1);
#else
    const __m256i at = _mm256_mullo_epi32(
        _mm256_setr_epi32(Q40_COL(0), Q40_COL(1), Q40_COL(2), Q40_COL(3), Q40_COL(4),
                          Q40_COL(5), Q40_COL(6), Q40_COL(7)),
        _mm256_set1_epi32((int)wrow));
    const __m256i live = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(cols), _mm256_setr_epi32(Q40_COL(0), Q40_COL(1), Q40_COL(2),
                                                   Q40_COL(3), Q40_COL(4), Q40_COL(5),
                                                   Q40_COL(6), Q40_COL(7)));
    return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)blk, at, live, 1);
#endif
}

/* The low (hi16 false) or high halves of the gathered words as floats. */
MQ_INLINE q40_vf q40_words_half(q40_vi dm, bool hi16) {
#if Q40_COLS == 16
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hi16 ? _mm512_srli_epi32(dm, 16) : dm));
#else
    /* each word's half, packed to 8 halves */
    const __m256i pick = hi16 ? _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1,
                                                 -1, -1, -1, 2, 3, 6, 7, 10, 11, 14, 15, -1, -1,
                                                 -1, -1, -1, -1, -1, -1)
                              : _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1,
                                                 -1, -1, -1, 0, 1, 4, 5, 8, 9, 12, 13, -1, -1,
                                                 -1, -1, -1, -1, -1, -1);
    __m256i h = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(dm, pick), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(h));
#endif
}

/* The tile's weights of one block (cols columns, the rest zero) as eight
 * operand vectors, lane of column c: Q4_0 and Q4_1, lo[q] the low nibbles
 * of bytes 4q..4q+3 (elements 4q..4q+3), hi[q] their high nibbles
 * (elements 16+4q..19+4q); Q8_0, lo[q] elements 4q..4q+3 and hi[q]
 * 16+4q..19+4q (plus 128, xor 0x80, in the VNNI copies; as they are in
 * AVX2: Q8_SIGNED). With the scales d (and Q4_1's m). */
#if Q40_COLS == 16
/* Q8_0's 16 columns of one block, all 32 value bytes per column at once:
 * z[k] holds two columns' values (256 bits each: column 4k and 4k + 1 for
 * k < 4, 4(k - 4) + 2 and + 3 above), the in-lane 4 x 4 transposes of
 * z[0..3] and z[4..7] put group i (bytes 4i..4i+3) and 4 + i of 4 columns
 * in each 128-bit lane, and one exchange of 128-bit lanes per output
 * gathers the 16 columns in q40_weights' lane order (lane 4m + j: column
 * 4j + m = Q40_COL). Half the loads and inserts of two q40_load_t. */
MQ_INLINE void q8_weights16(const uint8_t *blk, int64_t wrow, int cols, q40_vi *lo, q40_vi *hi) {
    q40_vi z[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const int c0 = 4 * (k % 4) + 2 * (k / 4), c1 = c0 + 1;
        __m256i l = c0 < cols ? _mm256_loadu_si256((const __m256i *)(blk + c0 * wrow + 2))
                              : _mm256_setzero_si256();
        __m256i h = c1 < cols ? _mm256_loadu_si256((const __m256i *)(blk + c1 * wrow + 2))
                              : _mm256_setzero_si256();
        if (c0 < cols)
            _mm_prefetch((const char *)(blk + (c0 + Q40_COLS) * wrow), PW_K_DECODE_PREFETCH);
        if (c1 < cols)
            _mm_prefetch((const char *)(blk + (c1 + Q40_COLS) * wrow), PW_K_DECODE_PREFETCH);
        z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1);
    }
    q40_vi q[2][4];
    for (int h = 0; h < 2; h++) {
        const q40_vi *zz = z + 4 * h;
        q40_vi t0 = _mm512_unpacklo_epi32(zz[0], zz[1]), t1 = _mm512_unpackhi_epi32(zz[0], zz[1]);
        q40_vi t2 = _mm512_unpacklo_epi32(zz[2], zz[3]), t3 = _mm512_unpackhi_epi32(zz[2], zz[3]);
        q[h][0] = _mm512_unpacklo_epi64(t0, t2), q[h][1] = _mm512_unpackhi_epi64(t0, t2);
        q[h][2] = _mm512_unpacklo_epi64(t1, t3), q[h][3] = _mm512_unpackhi_epi64(t1, t3);
    }
    /* 128-bit lanes of q[h][i]: 0 group i of the low columns, 1 group
     * 4 + i of them, 2 and 3 the same of the high columns */
    for (int i = 0; i < 4; i++) {
        lo[i] = _mm512_shuffle_i32x4(q[0][i], q[1][i], 0x88);
        hi[i] = _mm512_shuffle_i32x4(q[0][i], q[1][i], 0xDD);
    }
}
#endif

MQ_INLINE void q40_weights(const uint8_t *blk, int64_t wrow, int cols, pw_dtype type, q40_vi *lo,
                           q40_vi *hi, q40_vf *dw, q40_vf *mw) {
    if (type == PW_Q8_0) {
#if Q40_COLS == 16
        q8_weights16(blk, wrow, cols, lo, hi);
#else
        q40_load_t(blk, wrow, cols, 2, true, lo);
        q40_load_t(blk, wrow, cols, 2 + 16, false, hi);
#endif
        if (!Q8_SIGNED) {
#if Q40_COLS == 16
            const q40_vi flip = _mm512_set1_epi8((char)0x80);
            for (int i = 0; i < 4; i++)
                lo[i] = _mm512_xor_si512(lo[i], flip), hi[i] = _mm512_xor_si512(hi[i], flip);
#else
            const q40_vi flip = _mm256_set1_epi8((char)0x80);
            for (int i = 0; i < 4; i++)
                lo[i] = _mm256_xor_si256(lo[i], flip), hi[i] = _mm256_xor_si256(hi[i], flip);
#endif
        }
        *dw = q40_words_half(q40_gather_words(blk, wrow, cols), false);
        return;
    }
    const int qo = type == PW_Q4_1 ? 4 : 2; /* the nibbles follow d (and Q4_1's m) */
    q40_vi q[4];
    q40_load_t(blk, wrow, cols, qo, true, q);
#if Q40_COLS == 16
    const q40_vi m = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < 4; i++) {
        lo[i] = _mm512_and_si512(q[i], m);
        hi[i] = _mm512_and_si512(_mm512_srli_epi16(q[i], 4), m);
    }
#else
    const q40_vi m = _mm256_set1_epi8(0x0F);
    for (int i = 0; i < 4; i++) {
        lo[i] = _mm256_and_si256(q[i], m);
        hi[i] = _mm256_and_si256(_mm256_srli_epi16(q[i], 4), m);
    }
#endif
    if (type == PW_Q4_1) { /* d and m: one gather, split in registers */
        q40_vi dm = q40_gather_words(blk, wrow, cols);
        *dw = q40_words_half(dm, false);
        *mw = q40_words_half(dm, true);
        return;
    }
    _Alignas(64) uint16_t h[Q40_COLS];
#pragma GCC unroll 16
    for (int i = 0; i < Q40_COLS; i++) {
        int col = Q40_COL(i);
        if (col < cols) memcpy(&h[i], blk + col * wrow, 2);
        else h[i] = 0;
    }
#if Q40_COLS == 16
    *dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)h));
#else
    *dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)h));
#endif
}

/* An int32 read at any address, of any bytes (q40_dot's asm operand). */
typedef int32_t __attribute__((may_alias, aligned(1))) mq_i32u;

/* start + the lane-wise sums of u (unsigned) times the 4 activations at a,
 * broadcast: exact (VNNI: u <= 15 times |a| <= 127, four per lane; AVX2:
 * vpmaddubsw pairs stay within 2 * 15 * 127). */
MQ_INLINE q40_vi q40_dot(q40_vi start, q40_vi u, const int8_t *a) {
#if Q40_COLS == 16
    /* the 4 activations as the instruction's broadcast memory operand
     * ({1to16}): GCC emits a separate vpbroadcastd for the intrinsic, one
     * more instruction per vpdpbusd, which the batch tiles' issue pays */
    __asm__("vpdpbusd %2%{1to16%}, %1, %0"
            : "+v"(start)
            : "v"(u), "m"(*(const mq_i32u *)a));
    return start;
#else
    int32_t a4;
    memcpy(&a4, a, 4);
    return mq_dot_us(start, u, _mm256_set1_epi32(a4));
#endif
}

/* The dot product of one operand vector (q40_weights) with a row's 4
 * activations at a: q40_dot, or for Q8_0 in the AVX2 copy (Q8_SIGNED) |w|
 * against the activations with w's sign (exact: |w| <= 128 times |a| <=
 * 127, two per vpmaddubsw pair, a never -128). */
MQ_INLINE q40_vi q40_dot_w(q40_vi start, q40_vi u, const int8_t *a, pw_dtype type) {
#if Q8_SIGNED
    if (type == PW_Q8_0) {
        int32_t a4;
        memcpy(&a4, a, 4);
        const __m256i s = _mm256_sign_epi8(_mm256_set1_epi32(a4), u);
        return _mm256_add_epi32(start, _mm256_madd_epi16(_mm256_maddubs_epi16(
                                                             _mm256_abs_epi8(u), s),
                                                         _mm256_set1_epi16(1)));
    }
#else
    (void)type;
#endif
    return q40_dot(start, u, a);
}

/* Where a tile's weights come from (a constant at each call site). */
enum { Q40_SRC_BLOCKS, Q40_SRC_PANEL, Q40_SRC_X16 };

/* The blocks a Q4_0x16 tile asks for ahead of those it reads, in the order
 * the groups are read (gstride bytes apart, 16 row strides: contiguous
 * when the rows are dense), up to end (the call's last group's end). Both
 * decode (q40x_row) and the first row tile of a batch over each group take
 * the group from memory; without it a batch of 16 rows waited on memory
 * for most of its first tile. */
#ifndef Q40_X16_PF_BLOCKS
#define Q40_X16_PF_BLOCKS 86 /* 24.2 KiB */
#endif
typedef struct {
    int64_t gstride;
    const uint8_t *end;
} q40_x16_prefetch;

MQ_INLINE void q40_x16_prefetch_start(const q40_x16_prefetch *pf, const uint8_t *g, int64_t nb,
                                      const uint8_t **pfg, int64_t *pfb) {
    *pfg = g + Q40_X16_PF_BLOCKS / nb * pf->gstride;
    *pfb = Q40_X16_PF_BLOCKS % nb;
}

MQ_INLINE void q40_x16_prefetch_next(const q40_x16_prefetch *pf, int64_t nb, const uint8_t **pfg,
                                     int64_t *pfb) {
    if (*pfg < pf->end) {
        const uint8_t *p = *pfg + *pfb * PW_K_Q40X16_BLOCK_BYTES;
        for (int l = 0; l < PW_K_Q40X16_BLOCK_BYTES; l += 64)
            _mm_prefetch((const char *)(p + l), PW_K_DECODE_PREFETCH);
    }
    if (++*pfb == nb) *pfb = 0, *pfg += pf->gstride;
}

/* Block b of a Q4_0x16 group (g: the group's block 0; half: which 8
 * columns in the 256-bit copies): the nibbles as q40_weights gives them and
 * the scales, lane c being column c (plus 8 * half). */
MQ_INLINE void q40_x16_weights(const uint8_t *g, int64_t b, int half, q40_vi *lo, q40_vi *hi,
                               q40_vf *dw) {
    const uint8_t *gb = g + b * PW_K_Q40X16_BLOCK_BYTES;
#if Q40_COLS == 16
    const q40_vi m = _mm512_set1_epi8(0x0F);
    (void)half;
    *dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
    for (int i = 0; i < 4; i++) {
        q40_vi q = _mm512_loadu_si512((const void *)(gb + 32 + 64 * i));
        lo[i] = _mm512_and_si512(q, m);
        hi[i] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m);
    }
#else
    const q40_vi m = _mm256_set1_epi8(0x0F);
    *dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + 16 * half)));
    for (int i = 0; i < 4; i++) {
        q40_vi q = _mm256_loadu_si256((const __m256i *)(gb + 32 + 64 * i + 32 * half));
        lo[i] = _mm256_and_si256(q, m);
        hi[i] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m);
    }
#endif
}

/* Panels (batches): a tile's Q40_COLS columns unpacked once per call,
 * block by block, into what q40_weights gives (the 8 nibble vectors lo[0..3],
 * hi[0..3], then the scales d and, for Q4_1, m + 8 d as floats), so that
 * every row tile of the batch loads them instead of transposing the
 * blocks again and gathering the columns' scales. The operands, and so
 * the bits, are the tile's. */
#define Q40_VEC_BYTES ((int64_t)sizeof(q40_vi))
#define Q40_PANEL_BLOCK_BYTES (10 * Q40_VEC_BYTES)
/* A panel of nb blocks in a per-thread buffer, at a 64-byte boundary. */
#define Q40_PANEL_BYTES(nb) ((size_t)((nb) * Q40_PANEL_BLOCK_BYTES + 64))
/* Batches from this many rows take panels: the unpacking is then shared
 * by at least two row tiles (below, one tile does it where it uses it).
 * AVX-512's Q8_0 from three: its transpose (q8_weights16) costs two row
 * tiles less than the panel's stores and reloads (T = 16: SmolLM2's shapes
 * 0.85-0.88x the time, Llama-3.2-1B's 0.96-1.02x). */
#if Q40_COLS == 16
#define Q40_PANEL_MIN_ROWS(type) ((type) == PW_Q8_0 ? 2 * Q40_ROWS + 1 : Q40_ROWS + 1)
#else
#define Q40_PANEL_MIN_ROWS(type) (Q40_ROWS + 1)
#endif

MQ_INLINE q40_vi q40_vload(const uint8_t *p) {
#if Q40_COLS == 16
    return _mm512_load_si512((const void *)p);
#else
    return _mm256_load_si256((const __m256i *)p);
#endif
}
MQ_INLINE void q40_vstore(uint8_t *p, q40_vi v) {
#if Q40_COLS == 16
    _mm512_store_si512((void *)p, v);
#else
    _mm256_store_si256((__m256i *)p, v);
#endif
}

/* m' = m + 8 d (Q4_1's centred minimum): 8 d is exact, one rounding. */
MQ_INLINE q40_vf q40_min_scale(q40_vf dw, q40_vf mw) {
#if Q40_COLS == 16
    return _mm512_fmadd_ps(_mm512_set1_ps(8.0f), dw, mw);
#else
    return _mm256_fmadd_ps(_mm256_set1_ps(8.0f), dw, mw);
#endif
}

/* Columns [0, cols) of w (rows wrow bytes apart, blocks of `type`), blocks
 * [0, nb), into panel. */
MQ_INLINE void q40_panel_fill(uint8_t *panel, const uint8_t *w, int64_t wrow, int64_t nb,
                              pw_dtype type, int cols) {
    const int64_t bb = q40_block_bytes(type);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *pb = panel + b * Q40_PANEL_BLOCK_BYTES;
        q40_vi lo[4], hi[4];
        q40_vf dw, mw;
        q40_weights(w + b * bb, wrow, cols, type, lo, hi, &dw, &mw);
        for (int i = 0; i < 4; i++) {
            q40_vstore(pb + i * Q40_VEC_BYTES, lo[i]);
            q40_vstore(pb + (4 + i) * Q40_VEC_BYTES, hi[i]);
        }
        q40_vstore(pb + 8 * Q40_VEC_BYTES, (q40_vi)dw);
        if (type == PW_Q4_1) q40_vstore(pb + 9 * Q40_VEC_BYTES, (q40_vi)q40_min_scale(dw, mw));
    }
}

/* rows x cols outputs (rows <= Q40_ROWS, cols <= Q40_COLS): rows' values
 * at xr[r] (block b at + b * xb[r]), scales xd, block sums xs and fold
 * totals ft block-major with n_tokens per block (NULL ft: derived here
 * from the fold lanes), already at the tile's first row. The weights:
 * src BLOCKS, w the first column's blocks of `type`, rows wrow bytes
 * apart, lane p column Q40_COL(p); PANEL, w a panel of the same lanes;
 * X16 (Q4_0), w a Q4_0x16 group's block 0, wrow the half (256-bit
 * copies), lane p column p, and the tile stores lanes [c0, c0 + cols). */
MQ_INLINE void q40_tile(float *y, int64_t ldy, const uint8_t *const *xr, const int64_t *xb,
                        const float *xd, const float *xs, const int32_t *ft, int64_t n_tokens,
                        const uint8_t *w, int64_t wrow, int src, int64_t nb, pw_dtype type,
                        int rows, int c0, int cols, const q40_x16_prefetch *pf) {
    const int64_t bb = q40_block_bytes(type);
    q40_vf acc[Q40_ROWS], mn[Q40_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) acc[r] = mn[r] = (q40_vf){0};
    const uint8_t *pfg = NULL;
    int64_t pfb = 0;
    if (pf) q40_x16_prefetch_start(pf, w, nb, &pfg, &pfb);
    for (int64_t b = 0; b < nb; b++) {
        q40_vi lo[4], hi[4];
        q40_vf dw, mw, mc;
        if (src == Q40_SRC_X16) {
            if (pf) q40_x16_prefetch_next(pf, nb, &pfg, &pfb);
            q40_x16_weights(w, b, (int)wrow, lo, hi, &dw);
        } else if (src == Q40_SRC_PANEL) {
            const uint8_t *pb = w + b * Q40_PANEL_BLOCK_BYTES;
            for (int i = 0; i < 4; i++) {
                lo[i] = q40_vload(pb + i * Q40_VEC_BYTES);
                hi[i] = q40_vload(pb + (4 + i) * Q40_VEC_BYTES);
            }
            dw = (q40_vf)q40_vload(pb + 8 * Q40_VEC_BYTES);
            if (type == PW_Q4_1) mc = (q40_vf)q40_vload(pb + 9 * Q40_VEC_BYTES);
        } else {
            q40_weights(w + b * bb, wrow, cols, type, lo, hi, &dw, &mw);
            if (type == PW_Q4_1) mc = q40_min_scale(dw, mw);
        }
        /* Row by row within each step, so that the rows' dependent
         * chains of dot products interleave. */
        q40_vi sum[Q40_ROWS];
        const int8_t *a[Q40_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const uint8_t *xv = xr[r] + b * xb[r];
            a[r] = (const int8_t *)xv;
            /* (the panel path always has the fold totals) */
            int32_t f0 = Q8_SIGNED && type == PW_Q8_0       ? 0
                         : src == Q40_SRC_PANEL || ft ? ft[b * n_tokens + r]
                                                      : q40_fold_total(xv, type);
#if Q40_COLS == 16
            sum[r] = _mm512_set1_epi32(f0);
#else
            sum[r] = _mm256_set1_epi32(f0);
#endif
        }
        /* Fewer than 4 rows: the high nibbles' products in a second
         * chain, added at the end (exact), so that a row's 8 dependent
         * vpdpbusd are two chains of 4 (decode waits on their latency). */
        const bool split = rows < 4;
        q40_vi sum_hi[Q40_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) sum_hi[r] = (q40_vi){0};
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) sum[r] = q40_dot_w(sum[r], lo[i], a[r] + 4 * i, type);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                if (split) sum_hi[r] = q40_dot_w(sum_hi[r], hi[i], a[r] + 16 + 4 * i, type);
                else sum[r] = q40_dot_w(sum[r], hi[i], a[r] + 16 + 4 * i, type);
            }
        }
        if (split)
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
#if Q40_COLS == 16
                sum[r] = _mm512_add_epi32(sum[r], sum_hi[r]);
#else
                sum[r] = _mm256_add_epi32(sum[r], sum_hi[r]);
#endif
            }
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
#if Q40_COLS == 16
            q40_vf ds = _mm512_mul_ps(dw, _mm512_set1_ps(xd[b * n_tokens + r]));
            acc[r] = _mm512_fmadd_ps(ds, _mm512_cvtepi32_ps(sum[r]), acc[r]);
            if (type == PW_Q4_1)
                mn[r] = _mm512_fmadd_ps(mc, _mm512_set1_ps(xs[b * n_tokens + r]), mn[r]);
#else
            q40_vf ds = _mm256_mul_ps(dw, _mm256_set1_ps(xd[b * n_tokens + r]));
            acc[r] = _mm256_fmadd_ps(ds, _mm256_cvtepi32_ps(sum[r]), acc[r]);
            if (type == PW_Q4_1)
                mn[r] = _mm256_fmadd_ps(mc, _mm256_set1_ps(xs[b * n_tokens + r]), mn[r]);
#endif
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) {
        _Alignas(64) float v[Q40_COLS];
#if Q40_COLS == 16
        const q40_vf out = type == PW_Q4_1 ? _mm512_add_ps(acc[r], mn[r]) : acc[r];
        if (src == Q40_SRC_X16 && c0 == 0 && cols == Q40_COLS) {
            _mm512_storeu_ps(y + r * ldy, out);
            continue;
        }
        _mm512_store_ps(v, out);
#else
        const q40_vf out = type == PW_Q4_1 ? _mm256_add_ps(acc[r], mn[r]) : acc[r];
        if (src == Q40_SRC_X16 && c0 == 0 && cols == Q40_COLS) {
            _mm256_storeu_ps(y + r * ldy, out);
            continue;
        }
        _mm256_store_ps(v, out);
#endif
        if (src == Q40_SRC_X16)
            for (int p = 0; p < cols; p++) y[r * ldy + p] = v[c0 + p];
        else
            for (int p = 0; p < Q40_COLS; p++)
                if (Q40_COL(p) < cols) y[r * ldy + Q40_COL(p)] = v[p];
    }
}

#if Q40_COLS == 16
/* Decode's Q8_0 tile (one activation row, 16 whole columns, AVX-512). At
 * one row the transpose of q40_weights is not shared, and costs more than
 * the dot products; this tile instead takes two columns' 32 values per
 * 512-bit vector as they lie (lanes 0-7 column 2p, 8-15 column 2p + 1,
 * each lane 4 values), one vpdpbusd per pair from the fold, and sums each
 * column's 8 lanes by in-lane unpacks and adds and one exchange of 128-bit
 * lanes (8 vectors to 4, 2, then 1 with a lane per column). The integers are exact whatever
 * adds them, so p, and the float steps after it (one d_w * d_a, the
 * conversion, one fma per block, the 16 columns' scales fetched by one
 * gather), are the other tiles': the same bits. */
#define Q8_ROW_COLS 16
MQ_INLINE void q8_row(float *y, const uint8_t *xv0, int64_t xb, const float *xd,
                        int64_t n_tokens, const uint8_t *w, int64_t wrow, int64_t nb) {
    __m512 acc = _mm512_setzero_ps();
    /* Lane p of the tree's result holds column Q8_ROW_LANE(p) (below); the
     * scales are gathered in that order, and acc put back in column order
     * once, at the end. */
#define Q8_ROW_LANE(p) ((p) / 8 * 8 + (p) % 4 * 2 + (p) / 4 % 2)
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(Q8_ROW_LANE(0), Q8_ROW_LANE(1), Q8_ROW_LANE(2), Q8_ROW_LANE(3),
                          Q8_ROW_LANE(4), Q8_ROW_LANE(5), Q8_ROW_LANE(6), Q8_ROW_LANE(7),
                          Q8_ROW_LANE(8), Q8_ROW_LANE(9), Q8_ROW_LANE(10), Q8_ROW_LANE(11),
                          Q8_ROW_LANE(12), Q8_ROW_LANE(13), Q8_ROW_LANE(14), Q8_ROW_LANE(15)),
        _mm512_set1_epi32((int)wrow));
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xv = xv0 + b * xb;
        const __m512i a = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xv));
        const __m512i fold =
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xv + QK)));
        const uint8_t *wb = w + b * Q8_0_BYTES;
        const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(idx, wb, 1)));
        __m512i v[Q8_ROW_COLS / 2];
#pragma GCC unroll 8
        for (int p = 0; p < Q8_ROW_COLS / 2; p++) {
            const uint8_t *b0 = wb + 2 * p * wrow, *b1 = b0 + wrow;
            _mm_prefetch((const char *)(b0 + Q8_ROW_COLS * wrow), PW_K_DECODE_PREFETCH);
            _mm_prefetch((const char *)(b1 + Q8_ROW_COLS * wrow), PW_K_DECODE_PREFETCH);
            __m512i wv = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b0 + 2))),
                _mm256_loadu_si256((const __m256i *)(b1 + 2)), 1);
            v[p] = _mm512_dpbusd_epi32(fold, _mm512_xor_si512(wv, flip), a);
        }
        /* Within each 128-bit lane (4 int32 of one column): two vectors'
         * lanes interleaved and added, twice, so that r[h]'s 128-bit lane
         * L holds the sums of lane L of v[4h..4h+3]; then lanes 0 + 1
         * (column 2p's) and 2 + 3 (column 2p + 1's) added across. */
        __m512i t[4], r[2];
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++)
            t[q] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * q], v[2 * q + 1]),
                                    _mm512_unpackhi_epi32(v[2 * q], v[2 * q + 1]));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
            r[h] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * h], t[2 * h + 1]),
                                    _mm512_unpackhi_epi64(t[2 * h], t[2 * h + 1]));
        const __m512i p16 = _mm512_add_epi32(_mm512_shuffle_i32x4(r[0], r[1], 0x88),
                                             _mm512_shuffle_i32x4(r[0], r[1], 0xDD));
        const __m512 ds = _mm512_mul_ps(dw, _mm512_set1_ps(xd[b * n_tokens]));
        acc = _mm512_fmadd_ps(ds, _mm512_cvtepi32_ps(p16), acc);
    }
    /* column c is lane p with Q8_ROW_LANE(p) == c */
    acc = _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15), acc);
#undef Q8_ROW_LANE
    _mm512_storeu_ps(y, acc);
}
#else
/* The 256-bit copies' decode tile for Q8_0: 8 whole columns, one vector
 * each (8 lanes of 4 values: vpdpbusd from the fold in AVX-VNNI, |w|
 * against a with w's sign in AVX2), the lane sums added by vphaddd and one
 * exchange of 128-bit halves (lane c: column c), then the float steps for
 * the 8 columns (as q8_row above: the same bits). */
#define Q8_ROW_COLS 8
MQ_INLINE void q8_row(float *y, const uint8_t *xv0, int64_t xb, const float *xd,
                      int64_t n_tokens, const uint8_t *w, int64_t wrow, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i idx =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)wrow));
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xv = xv0 + b * xb;
        const __m256i a = _mm256_loadu_si256((const __m256i *)xv);
#if !Q8_SIGNED
        const __m256i fold = _mm256_loadu_si256((const __m256i *)(xv + QK));
        const __m256i flip = _mm256_set1_epi8((char)0x80);
#endif
        const uint8_t *wb = w + b * Q8_0_BYTES;
        const __m256 dw = q40_words_half(_mm256_i32gather_epi32((const int *)wb, idx, 1), false);
        __m256i v[Q8_ROW_COLS];
#pragma GCC unroll 8
        for (int c = 0; c < Q8_ROW_COLS; c++) {
            const uint8_t *bc = wb + c * wrow;
            _mm_prefetch((const char *)(bc + Q8_ROW_COLS * wrow), PW_K_DECODE_PREFETCH);
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(bc + 2));
#if Q8_SIGNED
            v[c] = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(a, wv)),
                _mm256_set1_epi16(1));
#else
            v[c] = mq_dot_us(fold, _mm256_xor_si256(wv, flip), a);
#endif
        }
        const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]),
                                             _mm256_hadd_epi32(v[2], v[3])),
                      h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]),
                                             _mm256_hadd_epi32(v[6], v[7]));
        const __m256i p8 = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20),
                                            _mm256_permute2x128_si256(h0, h1, 0x31));
        const __m256 ds = _mm256_mul_ps(dw, _mm256_set1_ps(xd[b * n_tokens]));
        acc = _mm256_fmadd_ps(ds, _mm256_cvtepi32_ps(p8), acc);
    }
    _mm256_storeu_ps(y, acc);
}
#endif

/* Decode's Q4_0x16 tile: one activation row against a whole group (16
 * columns), storing columns [c0, c1). The batch tiles' X16 source takes
 * the group in halves in the 256-bit copies, so through them one row read
 * each group twice (the second time from L2) and ran one chain of float
 * steps at a time; here each block's 288 bytes are read once, the 256-bit
 * copies holding the two halves side by side (two accumulators, lane c of
 * half h column 8h + c), the AVX-512 copy all 16 in one vector. The
 * integer sums: vpdpbusd, the low and high nibbles in two chains of 4
 * (decode waits on their latency), from the fold; in the AVX2 copy the 8
 * vpmaddubsw of a half-block are added in 16 bits (each is at most
 * 2 * 15 * 127 = 3810 in magnitude, the 8 at most 30480: exact, no
 * saturation), then one vpmaddwd to 32 bits and the fold. The same exact
 * p and the same float steps per block as the other tiles: the same bits.
 *
 * The weights stream from memory once per token, so the tile asks for the
 * blocks Q40_X16_PF_BLOCKS ahead in the order it reads them (pf,
 * q40_x16_prefetch: through the following groups, up to the end of the
 * call's last group). The distance is
 * Q4_K's or more (KQ_DECODE_PF_BYTES): at 8 blocks (2.3 KiB), less than a
 * shared host's memory latency of this tile's work, Q4_0x16 decode read
 * 11.8 GB/s where Q4_K's one-row tile read 17.5 (pw_kbench_decode, AMD
 * EPYC, AVX-512 VNNI). */
MQ_INLINE void q40x_row(float *y, const uint8_t *xv0, int64_t xb, const float *xd,
                        const int32_t *ft, const uint8_t *g, int64_t nb, int c0, int c1,
                        const q40_x16_prefetch *pf) {
    const uint8_t *pfg;
    int64_t pfb;
    q40_x16_prefetch_start(pf, g, nb, &pfg, &pfb);
#if Q40_COLS == 16
    const __m512i m = _mm512_set1_epi8(0x0F);
    __m512 acc[1] = {_mm512_setzero_ps()};
#else
    const __m256i m = _mm256_set1_epi8(0x0F);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
#endif
    for (int64_t b = 0; b < nb; b++) {
        q40_x16_prefetch_next(pf, nb, &pfg, &pfb);
        const uint8_t *gb = g + b * PW_K_Q40X16_BLOCK_BYTES;
        const int8_t *a = (const int8_t *)(xv0 + b * xb);
        const int32_t f0 = ft ? ft[b] : q40_fold_total(xv0 + b * xb, PW_Q4_0);
#if Q40_COLS == 16
        __m512i s0 = _mm512_set1_epi32(f0), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const __m512i q = _mm512_loadu_si512((const void *)(gb + 32 + 64 * i));
            s0 = q40_dot(s0, _mm512_and_si512(q, m), a + 4 * i);
            s1 = q40_dot(s1, _mm512_and_si512(_mm512_srli_epi16(q, 4), m), a + 16 + 4 * i);
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
        const __m512 ds = _mm512_mul_ps(dw, _mm512_set1_ps(xd[b]));
        acc[0] = _mm512_fmadd_ps(ds, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[0]);
#else
#if defined(PW_ISA_FMA_COPY)
        __m256i s16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#else
        __m256i s0[2] = {_mm256_set1_epi32(f0), _mm256_set1_epi32(f0)};
        __m256i s1[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#endif
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            int32_t l4, h4;
            memcpy(&l4, a + 4 * i, 4);
            memcpy(&h4, a + 16 + 4 * i, 4);
            const __m256i al = _mm256_set1_epi32(l4), ah = _mm256_set1_epi32(h4);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(gb + 32 + 64 * i + 32 * h));
                const __m256i lo = _mm256_and_si256(q, m),
                              hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m);
#if defined(PW_ISA_FMA_COPY)
                s16[h] = _mm256_add_epi16(s16[h], _mm256_add_epi16(_mm256_maddubs_epi16(lo, al),
                                                                   _mm256_maddubs_epi16(hi, ah)));
#else
                s0[h] = mq_dot_us(s0[h], lo, al);
                s1[h] = mq_dot_us(s1[h], hi, ah);
#endif
            }
        }
        const __m256 da = _mm256_set1_ps(xd[b]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
#if defined(PW_ISA_FMA_COPY)
            const __m256i p = _mm256_add_epi32(_mm256_set1_epi32(f0),
                                               _mm256_madd_epi16(s16[h], _mm256_set1_epi16(1)));
#else
            const __m256i p = _mm256_add_epi32(s0[h], s1[h]);
#endif
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + 16 * h)));
            acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(p), acc[h]);
        }
#endif
    }
    _Alignas(64) float v[16];
#if Q40_COLS == 16
    if (c0 == 0 && c1 == 16) {
        _mm512_storeu_ps(y, acc[0]);
        return;
    }
    _mm512_store_ps(v, acc[0]);
#else
    if (c0 == 0 && c1 == 16) {
        _mm256_storeu_ps(y, acc[0]);
        _mm256_storeu_ps(y + 8, acc[1]);
        return;
    }
    _mm256_store_ps(v, acc[0]);
    _mm256_store_ps(v + 8, acc[1]);
#endif
    for (int c = c0; c < c1; c++) y[c] = v[c];
}

/* Rows [t, t + rows) over columns [j0, j1) of w (q40_tile's src):
 * BLOCKS, full tiles then the rest; PANEL, the panel's columns (j1 - j0 <=
 * Q40_COLS); X16, lanes [j0, j1) of a group's half (y at the half's lane
 * 0). */
MQ_INLINE void q40_rows(float *y, int64_t n, const uint8_t *xa, const float *xd,
                        const float *xs, const int32_t *ft, int64_t n_tokens, int64_t k,
                        const uint8_t *w, int64_t wrow, int src, int64_t half, pw_dtype type,
                        int64_t j0, int64_t j1, int64_t t, int rows,
                        const q40_x16_prefetch *pf) {
    const int64_t nb = k / QK;
    const uint8_t *xr[Q40_ROWS];
    int64_t xb[Q40_ROWS];
    for (int r = 0; r < rows; r++) {
        xr[r] = xa + xq_row_offset(k, t + r);
        xb[r] = xq_block_stride(n_tokens, t + r);
    }
    const int32_t *ftt = ft ? ft + t : NULL;
    y += t * n;
    xd += t;
    xs += t;
    if (src == Q40_SRC_X16) {
        if (j0 == 0 && j1 == Q40_COLS)
            q40_tile(y, n, xr, xb, xd, xs, ftt, n_tokens, w, half, Q40_SRC_X16, nb, type, rows,
                     0, Q40_COLS, pf);
        else
            q40_tile(y + j0, n, xr, xb, xd, xs, ftt, n_tokens, w, half, Q40_SRC_X16, nb, type,
                     rows, (int)j0, (int)(j1 - j0), pf);
        return;
    }
    if (src == Q40_SRC_PANEL) {
        if (j1 - j0 == Q40_COLS)
            q40_tile(y + j0, n, xr, xb, xd, xs, ftt, n_tokens, w, wrow, Q40_SRC_PANEL, nb, type,
                     rows, 0, Q40_COLS, NULL);
        else
            q40_tile(y + j0, n, xr, xb, xd, xs, ftt, n_tokens, w, wrow, Q40_SRC_PANEL, nb, type,
                     rows, 0, (int)(j1 - j0), NULL);
        return;
    }
    int64_t j = j0;
    if (type == PW_Q8_0 && rows == 1)
        for (; j + Q8_ROW_COLS <= j1; j += Q8_ROW_COLS)
            q8_row(y + j, xr[0], xb[0], xd, n_tokens, w + j * wrow, wrow, nb);
    for (; j + Q40_COLS <= j1; j += Q40_COLS)
        q40_tile(y + j, n, xr, xb, xd, xs, ftt, n_tokens, w + j * wrow, wrow, Q40_SRC_BLOCKS, nb,
                 type, rows, 0, Q40_COLS, NULL);
    if (j < j1)
        q40_tile(y + j, n, xr, xb, xd, xs, ftt, n_tokens, w + j * wrow, wrow, Q40_SRC_BLOCKS, nb,
                 type, rows, 0, (int)(j1 - j), NULL);
}

/* Every row over columns [n0, n1) (q40_rows): tiles of Q40_ROWS rows, then
 * one tile of the rows left (a constant row count at each call: unrolled
 * tiles). A Q4_0x16 group's first tile asks for the blocks ahead (pf, or
 * NULL); the others find the group in cache. */
MQ_INLINE void q40_all_rows(float *y, int64_t n, const uint8_t *xa, const float *xd,
                            const float *xs, const int32_t *ft, int64_t n_tokens, int64_t k,
                            const uint8_t *w, int64_t wrow, int src, int64_t half, pw_dtype type,
                            int64_t n0, int64_t n1, const q40_x16_prefetch *pf) {
    int64_t t = 0;
#define Q40_ROWS_AT(rows)                                                                      \
    q40_rows(y, n, xa, xd, xs, ft, n_tokens, k, w, wrow, src, half, type, n0, n1, t, rows,       \
             t == 0 ? pf : NULL)
    for (; t + Q40_ROWS <= n_tokens; t += Q40_ROWS) Q40_ROWS_AT(Q40_ROWS);
    switch (n_tokens - t) {
    case 0: break;
    case 1: Q40_ROWS_AT(1); break;
    case 2: Q40_ROWS_AT(2); break;
    case 3: Q40_ROWS_AT(3); break;
#if Q40_ROWS > 4
    case 4: Q40_ROWS_AT(4); break;
    case 5: Q40_ROWS_AT(5); break;
    case 6: Q40_ROWS_AT(6); break;
    default: Q40_ROWS_AT(7); break;
#endif
    }
#undef Q40_ROWS_AT
}

MQ_INLINE void q40_run(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow, pw_dtype type,
                       int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    const int64_t nb = k / QK, bb = q40_block_bytes(type);
    const float *xd = xq_cscales(xa, n_tokens, k), *xs = xq_csums(xa, n_tokens, k);
    int32_t *ft = pw_k_fold_scratch((size_t)(n_tokens * nb) * sizeof(int32_t));
    if (ft) q40_fold_totals(ft, xa, n_tokens, k, type);
    uint8_t *panel = ft && n_tokens >= Q40_PANEL_MIN_ROWS(type)
                         ? pw_k_panel_scratch(Q40_PANEL_BYTES(nb))
                         : NULL;
    if (panel) {
        panel += (64 - (uintptr_t)panel % 64) % 64;
        for (int64_t j = j0; j < j1; j += Q40_COLS) {
            int64_t j2 = j + Q40_COLS < j1 ? j + Q40_COLS : j1;
            q40_panel_fill(panel, w + j * wrow, wrow, nb, type, (int)(j2 - j));
            q40_all_rows(y, n, xa, xd, xs, ft, n_tokens, k, panel, wrow, Q40_SRC_PANEL, 0, type,
                         j, j2, NULL);
        }
        return;
    }
    /* Columns in blocks whose weights stay in L2 while every row tile
     * passes over them. */
    int64_t col_block = COL_BLOCK_BYTES / (nb * bb);
    col_block = col_block < Q40_COLS ? Q40_COLS : col_block / Q40_COLS * Q40_COLS;
    for (int64_t n0 = j0; n0 < j1; n0 += col_block) {
        int64_t n1 = n0 + col_block < j1 ? n0 + col_block : j1;
        q40_all_rows(y, n, xa, xd, xs, ft, n_tokens, k, w, wrow, Q40_SRC_BLOCKS, 0, type, n0,
                     n1, NULL);
    }
}

/* Columns [j0, j1) of a Q4_0x16 weight (PW_K_Q40X16_*): the whole groups
 * through their interleaved blocks (one row: q40x_row, a group at a time;
 * more: the row tiles), the rows past them (n % 16, kept as Q4_0 rows) as
 * q40_run. */
static void q40x_run(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                     int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    const int64_t nb = k / QK, whole = n / 16 * 16;
    const float *xd = xq_cscales(xa, n_tokens, k), *xs = xq_csums(xa, n_tokens, k);
    int32_t *ft = pw_k_fold_scratch((size_t)(n_tokens * nb) * sizeof(int32_t));
    if (ft) q40_fold_totals(ft, xa, n_tokens, k, PW_Q4_0);
    const int64_t jb = j1 < whole ? j1 : whole;
    /* the prefetch stops at the end of the range's last group */
    const q40_x16_prefetch pf = {PW_K_Q40X16_ROWS * wrow, w + (jb + 15) / 16 * 16 * wrow};
    for (int64_t g0 = j0 / 16 * 16; g0 < jb; g0 += 16) {
        const int64_t c0 = (j0 > g0 ? j0 : g0) - g0, c1 = (jb < g0 + 16 ? jb : g0 + 16) - g0;
        if (n_tokens == 1) { /* decode: the whole group in one pass */
            q40x_row(y + g0, xa, xq_block_stride(1, 0), xd, ft, w + g0 * wrow, nb, (int)c0,
                     (int)c1, &pf);
            continue;
        }
        for (int64_t h = 0; h < 16 / Q40_COLS; h++) { /* the 256-bit copies: two halves */
            const int64_t l0 = h * Q40_COLS, a = c0 > l0 ? c0 - l0 : 0,
                          e = c1 < l0 + Q40_COLS ? c1 - l0 : Q40_COLS;
            if (a < e)
                q40_all_rows(y + g0 + l0, n, xa, xd, xs, ft, n_tokens, k, w + g0 * wrow, 0,
                             Q40_SRC_X16, h, PW_Q4_0, a, e, h == 0 ? &pf : NULL);
        }
    }
    if (j1 > whole)
        q40_run(y, xa, w, wrow, PW_Q4_0, n_tokens, n, k, j0 > whole ? j0 : whole, j1);
}
#else
/* The portable copy: the sequence as written, one output at a time. */
static void q40_run(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow, pw_dtype type,
                    int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    const int64_t nb = k / QK, bb = q40_block_bytes(type);
    const int qo = type == PW_Q4_1 ? 4 : 2;
    const float *xd = xq_cscales(xa, n_tokens, k), *xs = xq_csums(xa, n_tokens, k);
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *row = xa + xq_row_offset(k, t);
        const int64_t bs = xq_block_stride(n_tokens, t);
        for (int64_t j = j0; j < j1; j++) {
            float acc = 0.0f, mn = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = w + j * wrow + b * bb;
                const int8_t *a = xq_cvalues(row + b * bs);
                int32_t p = 0;
                if (type == PW_Q8_0)
                    for (int i = 0; i < QK; i++) p += (int8_t)blk[2 + i] * a[i];
                else
                    for (int i = 0; i < QK / 2; i++)
                        p += ((blk[qo + i] & 0x0F) - 8) * a[i] +
                             ((blk[qo + i] >> 4) - 8) * a[i + QK / 2];
                acc = pw_madd(mq_half(blk) * xd[b * n_tokens + t], (float)p, acc);
                if (type == PW_Q4_1)
                    mn = pw_madd(pw_madd(8.0f, mq_half(blk), mq_half(blk + 2)),
                                 xs[b * n_tokens + t], mn);
            }
            y[t * n + j] = type == PW_Q4_1 ? acc + mn : acc;
        }
    }
}

/* The portable copy of Q4_0x16: the same sequence, the nibbles and scales
 * read where the interleaved layout keeps them. */
static void q40x_run(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                     int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    const int64_t nb = k / QK, whole = n / 16 * 16;
    const float *xd = xq_cscales(xa, n_tokens, k);
    const int64_t jb = j1 < whole ? j1 : whole;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *row = xa + xq_row_offset(k, t);
        const int64_t bs = xq_block_stride(n_tokens, t);
        for (int64_t j = j0; j < jb; j++) {
            const uint8_t *g = w + j / 16 * 16 * wrow;
            const int c = (int)(j % 16);
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *gb = g + b * PW_K_Q40X16_BLOCK_BYTES;
                const int8_t *a = xq_cvalues(row + b * bs);
                int32_t p = 0;
                for (int i = 0; i < QK / 2; i++) {
                    uint8_t q = gb[32 + (i / 4) * 64 + c * 4 + i % 4];
                    p += ((q & 0x0F) - 8) * a[i] + ((q >> 4) - 8) * a[i + QK / 2];
                }
                acc = pw_madd(mq_half(gb + 2 * c) * xd[b * n_tokens + t], (float)p, acc);
            }
            y[t * n + j] = acc;
        }
    }
    if (j1 > whole)
        q40_run(y, xa, w, wrow, PW_Q4_0, n_tokens, n, k, j0 > whole ? j0 : whole, j1);
}
#endif

/* The type switch is outside the loops so each type's tiles are
 * specialised. */
void PW_ISA(pw_k_qdot_run_strided)(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                                   pw_dtype type, int64_t n_tokens, int64_t n, int64_t k,
                                   int64_t j0, int64_t j1) {
    switch (type) {
    case PW_Q8_0: q40_run(y, xa, w, wrow, PW_Q8_0, n_tokens, n, k, j0, j1); break;
    case PW_Q4_0: q40_run(y, xa, w, wrow, PW_Q4_0, n_tokens, n, k, j0, j1); break;
    case PW_Q4_0X16: q40x_run(y, xa, w, wrow, n_tokens, n, k, j0, j1); break;
    case PW_Q4_1: q40_run(y, xa, w, wrow, PW_Q4_1, n_tokens, n, k, j0, j1); break;
    default: assert(!"pw_k_matmul_quant: unsupported weight type"); break;
    }
}

void PW_ISA(pw_k_qdot_run)(float *y, const uint8_t *xa, const uint8_t *w, pw_dtype type,
                           int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    PW_ISA(pw_k_qdot_run_strided)(y, xa, w, pw_dtype_row_bytes(type, k), type, n_tokens, n, k,
                                  j0, j1);
}

/* ---- K-shards in one pass (PW_K_QDOT_SHARDS_PARAMS) ---------------------- */

/* Output columns of one step across the shards: the decode tiles' width
 * (Q8_ROW_COLS, Q40_COLS; a Q4_0x16 group). Each shard's tile over these
 * rows is the call its own product makes (q40_rows or q40x_row, one row),
 * so every output keeps its bits; the shards' tiles follow each other, so
 * the rows (a Q4_0x16 group's blocks) are read whole and in address order,
 * and each tile's prefetch of later rows asks, over the shards, for the
 * whole of them. */
#define MQ_SHARD_COLS 16
/* Rows per shard and step in the portable copy. */
#define MQ_SHARD_RUN 64

#if MQ_X86
MQ_INLINE void q40_shards(float *y, const uint8_t *xa, size_t xa_bytes, const uint8_t *w,
                          int64_t wrow, size_t shard_bytes, int64_t shards, pw_dtype type,
                          int64_t n, int64_t k, int64_t j0, int64_t j1) {
    const int64_t nb = k / QK;
    const pw_dtype fold = type == PW_Q4_0X16 ? PW_Q4_0 : type;
    int32_t *ft = pw_k_fold_scratch((size_t)(shards * nb) * sizeof(int32_t));
    if (ft)
        for (int64_t s = 0; s < shards; s++)
            q40_fold_totals(ft + s * nb, xa + s * xa_bytes, 1, k, fold);
    if (type == PW_Q4_0X16) {
        const int64_t whole = n / 16 * 16, jb = j1 < whole ? j1 : whole;
        for (int64_t g0 = j0 / 16 * 16; g0 < jb; g0 += 16) {
            const int64_t c0 = (j0 > g0 ? j0 : g0) - g0, c1 = (jb < g0 + 16 ? jb : g0 + 16) - g0;
            for (int64_t s = 0; s < shards; s++) {
                const uint8_t *xs = xa + s * xa_bytes, *ws = w + s * shard_bytes;
                /* as q40x_run's: up to the end of the range's last group */
                const q40_x16_prefetch pf = {PW_K_Q40X16_ROWS * wrow,
                                             ws + (jb + 15) / 16 * 16 * wrow};
                q40x_row(y + s * n + g0, xs, xq_block_stride(1, 0), xq_cscales(xs, 1, k),
                         ft ? ft + s * nb : NULL, ws + g0 * wrow, nb, (int)c0, (int)c1, &pf);
            }
        }
        if (j1 <= whole) return;
        j0 = j0 > whole ? j0 : whole; /* the rows past the groups, kept as Q4_0 rows */
    }
    for (int64_t j = j0; j < j1; j += MQ_SHARD_COLS) {
        const int64_t e = j + MQ_SHARD_COLS < j1 ? j + MQ_SHARD_COLS : j1;
        for (int64_t s = 0; s < shards; s++) {
            const uint8_t *xs = xa + s * xa_bytes;
            q40_rows(y + s * n, n, xs, xq_cscales(xs, 1, k), xq_csums(xs, 1, k),
                     ft ? ft + s * nb : NULL, 1, k, w + s * shard_bytes, wrow, Q40_SRC_BLOCKS, 0,
                     fold, j, e, 0, 1, NULL);
        }
    }
}
#endif

void PW_ISA(pw_k_qdot_run_shards)(float *y, const uint8_t *xa, size_t xa_bytes,
                                  const uint8_t *w, int64_t wrow, size_t shard_bytes,
                                  int64_t shards, pw_dtype type, int64_t n, int64_t k,
                                  int64_t j0, int64_t j1) {
#if MQ_X86
#define MQ_SHARDS(T) q40_shards(y, xa, xa_bytes, w, wrow, shard_bytes, shards, T, n, k, j0, j1)
    switch (type) {
    case PW_Q8_0: MQ_SHARDS(PW_Q8_0); return;
    case PW_Q4_0: MQ_SHARDS(PW_Q4_0); return;
    case PW_Q4_0X16: MQ_SHARDS(PW_Q4_0X16); return;
    case PW_Q4_1: MQ_SHARDS(PW_Q4_1); return;
    default: assert(!"pw_k_matmul_quant: unsupported weight type"); return;
    }
#undef MQ_SHARDS
#else
    pw_k_shards_by_runs(PW_ISA(pw_k_qdot_run_strided), MQ_SHARD_RUN, y, xa, xa_bytes, w, wrow,
                        shard_bytes, shards, type, 1, n, k, j0, j1);
#endif
}
