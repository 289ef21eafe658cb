/* Tile code of the K-quant and Q5 matmul (matmul_kquant.c): integer dot
 * products of quantized activations against Q4_K, Q5_K, Q6_K (256-element
 * super-blocks) and Q5_0, Q5_1 (32-element blocks) weights, and the float
 * steps that combine the scales. Compiled four times, like
 * matmul_quant_body.h: by matmul_kquant.c (portable C), matmul_kquant_fma.c
 * (AVX2: vpmaddubsw + vpmaddwd), matmul_kquant_avxvnni.c (AVX-VNNI:
 * vpmaddubsw + vpdpwssd, vpdpbusd) and matmul_kquant_avx512vnni.c (the same
 * on 256-bit vectors with 32 registers, wider tiles). The sequence every
 * copy computes is the one in matmul_kquant.c's header comment; the copies
 * differ only in how they form the exact integer lane sums and in their
 * tile shapes, so they return the same bits. On x86, Q5_0 and batches of
 * K-quant rows go through column panels (q5p_*, kp_* below): the same
 * sequence with the vector lanes across 16 columns; the AVX-512 copy runs
 * whole 16-row batches through row-lane panels instead, the lanes across
 * 16 rows (kl_*, matmul_kquant_lanes_body.h).
 *
 * Not a normal header: included once per copy, defines PW_ISA(...)
 * functions and static helpers of its own. */
#include "ops/cpu/isa.h"
#include "ops/cpu/matmul_kquant_isa.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "ops/cpu/vec_math.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#if defined(PW_ISA_FMA_COPY) || defined(PW_ISA_AVXVNNI_COPY) || defined(PW_ISA_AVX512VNNI_COPY)
#define KQ_X86 1
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "the x86 copies of matmul_kquant_body.h need -mavx2 -mfma -mf16c"
#endif
#if defined(PW_ISA_AVXVNNI_COPY) && !defined(__AVXVNNI__)
#error "matmul_kquant_avxvnni.c must be built with -mavxvnni"
#endif
#if defined(PW_ISA_AVX512VNNI_COPY) &&                                                        \
    (!defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__))
#error "matmul_kquant_avx512vnni.c must be built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif
#include <immintrin.h>
#else
#define KQ_X86 0
#endif

#define KQ_INLINE static inline __attribute__((always_inline))

#define KQ_QK 32   /* elements per Q5_0 / Q5_1 block */
#define KQ_QKK 256 /* elements per K-quant super-block */
#define KQ_LANES 8

/* Weight block sizes in bytes (ggml layouts, src/model/dequant.c). */
#define KQ_Q5_0_BYTES 22  /* f16 d, u32 qh, 16 nibble bytes */
#define KQ_Q5_1_BYTES 24  /* f16 d, f16 m, u32 qh, 16 nibble bytes */
#define KQ_Q4_K_BYTES 144 /* f16 d, f16 dmin, scales[12], qs[128] */
#define KQ_Q5_K_BYTES 176 /* f16 d, f16 dmin, scales[12], qh[32], qs[128] */
#define KQ_Q6_K_BYTES 210 /* ql[128], qh[64], int8 scales[16], f16 d */

/* Register tiles, rows (tokens) x columns (outputs). Every output of a
 * K-quant tile holds 8 integer lanes for the current super-block (folded
 * into its is and mp at the super-block's end), so the AVX2 batch tile is
 * 4 x 1 (16 vector registers); AVX-512's 32 registers take 4 x 2. The 1-row tile
 * (decode, leftover rows) loads each activation chunk once for its columns. */
#if defined(PW_ISA_AVX512VNNI_COPY)
#define KQ_BATCH_ROWS 4
#define KQ_BATCH_COLS 2
#else
#define KQ_BATCH_ROWS 4
#define KQ_BATCH_COLS 1
#endif
#define KQ_ROW_COLS 4
#define KQ_ACCS 8
/* Columns processed together so their weight rows stay in L2 while every
 * row tile of the activations streams past them. */
#define KQ_COL_BLOCK_BYTES (128 * 1024)
/* Decode's weight prefetch goes to L2, not L1 (PW_K_DECODE_PREFETCH,
 * matmul_quant_isa.h). */
#define KQ_DECODE_PREFETCH PW_K_DECODE_PREFETCH

/* IEEE half at p (little-endian) to float, exact. */
KQ_INLINE float kq_half_portable(const uint8_t *p) {
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

#if KQ_X86
KQ_INLINE float kq_half(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}
#else
#define kq_half kq_half_portable
#endif

/* v in every lane. The x86 copies broadcast; pw_v8_splat adds +0, which
 * turns -0 into +0: the two differ only in the sign of a zero scale
 * product, which no result can show (the running sums start at +0, and
 * fma(+-0, p, acc) is acc for any nonzero acc and +0 for acc = +0). */
#if KQ_X86
#define KQ_SPLAT(v) ((pw_v8f)_mm256_set1_ps(v))
#else
#define KQ_SPLAT(v) pw_v8_splat(v)
#endif

KQ_INLINE uint32_t kq_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The fixed lane tree ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). */
KQ_INLINE float kq_hsum(pw_v8f a) {
    float t1 = a[0] + a[4], t2 = a[2] + a[6], t3 = a[1] + a[5], t4 = a[3] + a[7];
    float u1 = t1 + t2, u2 = t3 + t4;
    return u1 + u2;
}

/* Q4_K / Q5_K: the eight 6-bit scales (sc[0..7]) and mins (m[0..7]) of a
 * super-block from its 12 packed bytes, four at a time: bytes 0-3 hold
 * scales 0-3 in their low six bits, bytes 4-7 mins 0-3; scales and mins
 * 4-7 have their low four bits in the nibbles of bytes 8-11 and their top
 * two bits in the top bits of bytes 0-3 (scales) and 4-7 (mins). */
KQ_INLINE void kq_scales_mins_u64(const uint8_t *s, uint64_t *sc, uint64_t *m) {
    uint32_t w0 = kq_u32(s), w1 = kq_u32(s + 4), w2 = kq_u32(s + 8);
    uint32_t sc_lo = w0 & 0x3F3F3F3Fu, m_lo = w1 & 0x3F3F3F3Fu;
    uint32_t sc_hi = (w2 & 0x0F0F0F0Fu) | ((w0 >> 2) & 0x30303030u);
    uint32_t m_hi = ((w2 >> 4) & 0x0F0F0F0Fu) | ((w1 >> 2) & 0x30303030u);
    /* little-endian: byte j of the result is sc_j / m_j */
    *sc = (uint64_t)sc_lo | (uint64_t)sc_hi << 32;
    *m = (uint64_t)m_lo | (uint64_t)m_hi << 32;
}

/* The same as bytes: sc[j] = sc_j, m[j] = m_j (little-endian hosts, as
 * every copy here assumes). */
KQ_INLINE void kq_scales_mins(const uint8_t *s, uint8_t sc[8], uint8_t m[8]) {
    uint64_t s8, m8;
    kq_scales_mins_u64(s, &s8, &m8);
    memcpy(sc, &s8, 8);
    memcpy(m, &m8, 8);
}

/* ---- K-quant activation rows (PW_K_Q8K_ROW_BYTES): values, scales, sums -- */

KQ_INLINE const int8_t *kx_values(const uint8_t *row) { return (const int8_t *)row; }
KQ_INLINE const float *kx_scales(const uint8_t *row, int64_t nsb) {
    return (const float *)(row + nsb * KQ_QKK);
}
KQ_INLINE const int16_t *kx_sums(const uint8_t *row, int64_t nsb) {
    return (const int16_t *)(row + nsb * (KQ_QKK + 4));
}

/* ---- integer lanes of one (row, column, super-block) -------------------- */

#if KQ_X86
/* Lane l += sc * (u . a over bytes 4l..4l+3), sc the int16 words of `sc`
 * (equal in each lane's word pair). Exact: the vpmaddubsw pairs stay
 * within 2 * 63 * 127 and the products within 2^22. */
KQ_INLINE __m256i kq_dot_acc(__m256i isum, __m256i u, __m256i a, __m256i sc) {
    __m256i p = _mm256_maddubs_epi16(u, a);
#if defined(PW_ISA_AVX512VNNI_COPY)
    return _mm256_dpwssd_epi32(isum, p, sc);
#elif defined(PW_ISA_AVXVNNI_COPY)
    return _mm256_dpwssd_avx_epi32(isum, p, sc);
#else
    return _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
#endif
}

/* The exact sums of the 8 dword lanes of v0..v3, in dwords 0..3: a tile's
 * integer lanes folded into the super-block's is (or mp) of four outputs. */
KQ_INLINE __m128i kq_fold4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

/* One super-block's float steps for four outputs, lane e of each operand
 * (matmul_kquant.c): acc = fma(d * d_a, (float)is, acc), then for Q4_K and
 * Q5_K acc = fma(-(dmin * d_a), (float)mp, acc). dd and dm hold the
 * products d * d_a and dmin * d_a, each rounded once as in the C code. */
KQ_INLINE __m128 kq_step4(__m128 acc, __m128 dd, __m128 dm, __m128i is, __m128i mp,
                          pw_dtype type) {
    acc = _mm_fmadd_ps(dd, _mm_cvtepi32_ps(is), acc);
    if (type != PW_Q6_K) acc = _mm_fnmadd_ps(dm, _mm_cvtepi32_ps(mp), acc);
    return acc;
}

/* The first n (<= 8) outputs' super-block steps from their integer lanes
 * fis[e], fmp[e] and scale products dd[e], dm[e]: acc[e / 4] lane e % 4. */
KQ_INLINE void kq_steps(__m128 acc[2], const __m256i *fis, const __m256i *fmp, const float *dd,
                        const float *dm, int n, pw_dtype type) {
    const __m256i z = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int g = 0; g < n; g += 4) {
#define KQ_AT(v, i) ((i) < n ? (v)[i] : z)
        __m128i is = kq_fold4(fis[g], KQ_AT(fis, g + 1), KQ_AT(fis, g + 2), KQ_AT(fis, g + 3));
        __m128i mp = type == PW_Q6_K ? _mm_setzero_si128()
                                     : kq_fold4(fmp[g], KQ_AT(fmp, g + 1), KQ_AT(fmp, g + 2),
                                                KQ_AT(fmp, g + 3));
#undef KQ_AT
        acc[g / 4] = kq_step4(acc[g / 4], _mm_loadu_ps(dd + g), _mm_loadu_ps(dm + g), is, mp, type);
    }
}

/* A column's super-block, prepared once for every row of the tile: what
 * the chunk loop needs stays in registers; `side` is kept for after it. */
typedef struct kq_col {
    const uint8_t *blk;
    __m256i scw; /* Q4_K/Q5_K: the 8 scales as int16 words (both halves); Q6_K: raw bytes */
    __m256i qh;  /* Q5_K: the 32 high-bit bytes */
    float d, dmin;
} kq_col;

/* Q4_K/Q5_K: the mins, words 2l and 2l+1 = m_l; Q6_K: the 16 scales as
 * words. */
KQ_INLINE __m256i kq_col_side(const uint8_t *blk, pw_dtype type) {
    if (type == PW_Q6_K) return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
    uint8_t sc[8], m[8];
    kq_scales_mins(blk + 4, sc, m);
    uint64_t mb;
    memcpy(&mb, m, 8);
    __m256i m32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mb));
    return _mm256_or_si256(m32, _mm256_slli_epi32(m32, 16));
}

KQ_INLINE kq_col kq_col_make(const uint8_t *blk, pw_dtype type) {
    kq_col c;
    c.blk = blk;
    if (type == PW_Q6_K) {
        c.scw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + 192)));
        c.qh = _mm256_setzero_si256();
        c.d = kq_half(blk + 208);
        c.dmin = 0.0f;
    } else {
        uint8_t sc[8], m[8];
        kq_scales_mins(blk + 4, sc, m);
        uint64_t scb;
        memcpy(&scb, sc, 8);
        c.scw = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)scb)));
        c.qh = type == PW_Q5_K ? _mm256_loadu_si256((const __m256i *)(blk + 16))
                               : _mm256_setzero_si256();
        c.d = kq_half(blk);
        c.dmin = kq_half(blk + 2);
    }
    return c;
}

/* Q5_K: bit i of each qh byte moved to bit 4 (the other bits are junk). */
KQ_INLINE __m256i kq_qh_bit4(__m256i qh, int i) {
    return i < 4 ? _mm256_slli_epi16(qh, 4 - i) : i == 4 ? qh : _mm256_srli_epi16(qh, i - 4);
}

/* Chunk i (elements 32i..32i+31) of the column's weights as unsigned bytes
 * (Q4_K: 0..15, Q5_K: 0..31, Q6_K: q + 32 in 0..63). */
KQ_INLINE __m256i kq_chunk(const kq_col *c, pw_dtype type, int i) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    if (type == PW_Q6_K) {
        int h = i / 4, s = i % 4;
        __m256i ql = _mm256_loadu_si256((const __m256i *)(c->blk + 64 * h + 32 * (s & 1)));
        __m256i low = s < 2 ? _mm256_and_si256(ql, lo4)
                            : _mm256_and_si256(_mm256_srli_epi16(ql, 4), lo4);
        __m256i qh = _mm256_loadu_si256((const __m256i *)(c->blk + 128 + 32 * h));
        /* bits 2s, 2s+1 of each byte to bits 4, 5 */
        __m256i hi = s == 0   ? _mm256_slli_epi16(qh, 4)
                     : s == 1 ? _mm256_slli_epi16(qh, 2)
                     : s == 2 ? qh
                              : _mm256_srli_epi16(qh, 2);
        return _mm256_or_si256(low, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
    }
    const uint8_t *qs = c->blk + (type == PW_Q5_K ? 48 : 16);
    __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * (i / 2)));
    __m256i u = i % 2 ? _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4) : _mm256_and_si256(v, lo4);
    if (type == PW_Q5_K) {
        u = _mm256_or_si256(u, _mm256_and_si256(kq_qh_bit4(c->qh, i), _mm256_set1_epi8(0x10)));
    }
    return u;
}

/* The chunk's scale as int16 words: Q4_K/Q5_K sc_i in every word; Q6_K
 * sc_2i in words 0-7 (lanes 0-3) and sc_2i+1 in words 8-15 (lanes 4-7). */
KQ_INLINE __m256i kq_chunk_scale(const kq_col *c, pw_dtype type, int i) {
    if (type == PW_Q6_K) {
        /* the scale byte in each word's high byte, then an arithmetic shift */
        const char z = (char)0x80, lo = (char)(2 * i), hi = (char)(2 * i + 1);
        __m256i ctrl = _mm256_setr_epi8(z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z,
                                        hi, z, hi, z, hi, z, hi, z, hi, z, hi, z, hi, z, hi);
        return _mm256_srai_epi16(_mm256_shuffle_epi8(c->scw, ctrl), 8);
    }
    const char a = (char)(2 * i), b = (char)(2 * i + 1);
    __m256i ctrl = _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, a,
                                    b, a, b, a, b, a, b, a, b, a, b);
    return _mm256_shuffle_epi8(c->scw, ctrl);
}

#ifndef KQ_DECODE_PF_BYTES
#define KQ_DECODE_PF_BYTES 12288
#endif
/* How far ahead of a one-row tile its prefetch reads: whole tiles (the
 * same super-block of a later tile's columns), at least KQ_DECODE_PF_BYTES.
 * One tile, 4.6 KiB of Q4_K at K = 2048, is about 170 ns of the tile's
 * work from L2: shorter than a shared host's memory latency, so decode's
 * products at K = 2048 waited on memory; K = 8192's tiles are long enough
 * alone. Q6_K once kept one tile (two were 0.95-0.97x on its LM head);
 * since its tile folds four columns' lanes at the end of each super-block,
 * the longer distance is the faster (LM head 0.86x with one tile, 0.96-0.98x
 * with 12 KiB, against the per-lane tile). */
KQ_INLINE int64_t kq_pf_ahead(int64_t tile_bytes) {
    int64_t t = (KQ_DECODE_PF_BYTES + tile_bytes - 1) / tile_bytes;
    return (t < 1 ? 1 : t) * tile_bytes;
}

/* A rows x cols block of outputs over every super-block (rows * cols <=
 * KQ_ACCS); always inlined with constant shapes and type. */
KQ_INLINE void kq_tile(float *y, int64_t ldy, const uint8_t *xa, int64_t xrow, const uint8_t *w,
                       int64_t wrow, int64_t nsb, pw_dtype type, int64_t bb, int rows,
                       int cols) {
    const int64_t pf = kq_pf_ahead(cols * wrow);
    /* One running sum per output, lane e % 4 of acc[e / 4]. */
    __m128 acc[2] = {_mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t sb = 0; sb < nsb; sb++) {
        kq_col col[KQ_ACCS];
#pragma GCC unroll 8
        for (int c = 0; c < cols; c++) {
            const uint8_t *blk = w + c * wrow + sb * bb;
            /* Decode streams the weights from memory once per token: ask
             * for the same super-block of a later tile's column early. */
            if (rows == 1)
                for (int64_t o = 0; o < bb; o += 64)
                    _mm_prefetch((const char *)(blk + pf + o), KQ_DECODE_PREFETCH);
            col[c] = kq_col_make(blk, type);
        }
        const int8_t *av[KQ_BATCH_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) av[r] = kx_values(xa + r * xrow) + sb * KQ_QKK;
        __m256i isum[KQ_ACCS];
#pragma GCC unroll 8
        for (int e = 0; e < rows * cols; e++) isum[e] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int i = 0; i < KQ_QKK / 32; i++) {
#pragma GCC unroll 8
            for (int c = 0; c < cols; c++) {
                __m256i u = kq_chunk(&col[c], type, i), sc = kq_chunk_scale(&col[c], type, i);
#pragma GCC unroll 8
                for (int r = 0; r < rows; r++) {
                    __m256i a = _mm256_loadu_si256((const __m256i *)(av[r] + 32 * i));
                    isum[r * cols + c] = kq_dot_acc(isum[r * cols + c], u, a, sc);
                }
            }
        }
        __m256i fmp[KQ_ACCS];
        float dd[KQ_ACCS] = {0}, dm[KQ_ACCS] = {0};
#pragma GCC unroll 8
        for (int c = 0; c < cols; c++) {
            __m256i side_w = kq_col_side(col[c].blk, type);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                const uint8_t *row = xa + r * xrow;
                float da = kx_scales(row, nsb)[sb];
                __m256i bs = _mm256_loadu_si256((const __m256i *)(kx_sums(row, nsb) + 16 * sb));
                int e = r * cols + c;
                /* Q4_K/Q5_K: lane l of mp is m_l * (bs_2l + bs_2l+1); Q6_K:
                 * the offset sc_2l bs_2l + sc_2l+1 bs_2l+1, times 32. */
                __m256i side = _mm256_madd_epi16(bs, side_w);
                if (type == PW_Q6_K) isum[e] = _mm256_sub_epi32(isum[e], _mm256_slli_epi32(side, 5));
                fmp[e] = side;
                dd[e] = col[c].d * da;
                dm[e] = col[c].dmin * da;
            }
        }
        kq_steps(acc, isum, fmp, dd, dm, rows * cols, type);
    }
    float out[8];
    _mm_storeu_ps(out, acc[0]);
    _mm_storeu_ps(out + 4, acc[1]);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) y[r * ldy + c] = out[r * cols + c];
}

/* Q4_K/Q5_K: bytes 0-7 the scales sc_0..7, bytes 8-15 the mins m_0..7 of
 * the 12 packed bytes at s (kq_scales_mins, in one vector). */
KQ_INLINE __m128i kq_scales_mins_vec(const uint8_t *s) {
    __m128i x = _mm_loadu_si128((const __m128i *)s); /* w0 w1 w2 (w3: not scales) */
    __m128i a = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 1, 2, 0)); /* w0 w2 w1 w2 */
    a = _mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4));
    a = _mm_and_si128(a, _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
    __m128i b = _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 1, 0, 0)); /* w0 w0 w1 w1 */
    b = _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(a, b);
}

#if defined(PW_ISA_AVX512VNNI_COPY)
/* The batch tile with two columns per 512-bit vector: lanes 0-7 hold
 * column c's 8 integer lanes, lanes 8-15 column c + 1's, so every lane
 * runs exactly the integer operations of the 256-bit code (the byte
 * shuffles stay within 128-bit lanes), with about half the instructions
 * per chunk; the halves are folded as the 256-bit tile's lanes are. */
KQ_INLINE __m512i kq_pair(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
KQ_INLINE __m512i kq_load_pair(const uint8_t *p0, const uint8_t *p1) {
    return kq_pair(_mm256_loadu_si256((const __m256i *)p0), _mm256_loadu_si256((const __m256i *)p1));
}

KQ_INLINE __m512i kq_chunk_pair(const uint8_t *b0, const uint8_t *b1, __m512i qh, pw_dtype type,
                                int i) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    if (type == PW_Q6_K) {
        int h = i / 4, s = i % 4, o = 64 * h + 32 * (s & 1);
        __m512i ql = kq_load_pair(b0 + o, b1 + o);
        __m512i low = s < 2 ? _mm512_and_si512(ql, lo4)
                            : _mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4);
        __m512i hb = kq_load_pair(b0 + 128 + 32 * h, b1 + 128 + 32 * h);
        __m512i hi = s == 0   ? _mm512_slli_epi16(hb, 4)
                     : s == 1 ? _mm512_slli_epi16(hb, 2)
                     : s == 2 ? hb
                              : _mm512_srli_epi16(hb, 2);
        return _mm512_or_si512(low, _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
    }
    const int o = (type == PW_Q5_K ? 48 : 16) + 32 * (i / 2);
    __m512i v = kq_load_pair(b0 + o, b1 + o);
    __m512i u = i % 2 ? _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4) : _mm512_and_si512(v, lo4);
    if (type == PW_Q5_K) {
        __m512i hb = i < 4 ? _mm512_slli_epi16(qh, 4 - i)
                           : i == 4 ? qh : _mm512_srli_epi16(qh, i - 4);
        u = _mm512_or_si512(u, _mm512_and_si512(hb, _mm512_set1_epi8(0x10)));
    }
    return u;
}

KQ_INLINE __m512i kq_chunk_scale_pair(__m512i scw, pw_dtype type, int i) {
    if (type == PW_Q6_K) {
        const char z = (char)0x80, lo = (char)(2 * i), hi = (char)(2 * i + 1);
        __m256i ctrl = _mm256_setr_epi8(z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z,
                                        hi, z, hi, z, hi, z, hi, z, hi, z, hi, z, hi, z, hi);
        return _mm512_srai_epi16(_mm512_shuffle_epi8(scw, _mm512_broadcast_i64x4(ctrl)), 8);
    }
    const char a = (char)(2 * i), b = (char)(2 * i + 1);
    __m256i ctrl = _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, a,
                                    b, a, b, a, b, a, b, a, b, a, b);
    return _mm512_shuffle_epi8(scw, _mm512_broadcast_i64x4(ctrl));
}

KQ_INLINE void kq_tile_pairs(float *y, int64_t ldy, const uint8_t *xa, int64_t xrow,
                             const uint8_t *w, int64_t wrow, int64_t nsb, pw_dtype type,
                             int64_t bb, int rows, int cols) {
    const int pairs = cols / 2;
    /* one running sum per output o = r * cols + c, lane o % 4 of acc[o / 4] */
    __m128 acc[2] = {_mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *b0[KQ_ACCS / 2], *b1[KQ_ACCS / 2];
        __m512i scw[KQ_ACCS / 2], qh[KQ_ACCS / 2];
        float dcol[KQ_ACCS], dmcol[KQ_ACCS];
#pragma GCC unroll 8
        for (int pc = 0; pc < pairs; pc++) {
            b0[pc] = w + (2 * pc) * wrow + sb * bb;
            b1[pc] = b0[pc] + wrow;
            kq_col c0 = kq_col_make(b0[pc], type), c1 = kq_col_make(b1[pc], type);
            scw[pc] = kq_pair(c0.scw, c1.scw);
            qh[pc] = kq_pair(c0.qh, c1.qh);
            dcol[2 * pc] = c0.d, dcol[2 * pc + 1] = c1.d;
            dmcol[2 * pc] = c0.dmin, dmcol[2 * pc + 1] = c1.dmin;
        }
        const int8_t *av[KQ_BATCH_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) av[r] = kx_values(xa + r * xrow) + sb * KQ_QKK;
        __m512i isum[KQ_ACCS / 2];
#pragma GCC unroll 8
        for (int e = 0; e < rows * pairs; e++) isum[e] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int i = 0; i < KQ_QKK / 32; i++) {
#pragma GCC unroll 8
            for (int pc = 0; pc < pairs; pc++) {
                __m512i u = kq_chunk_pair(b0[pc], b1[pc], qh[pc], type, i);
                __m512i sc = kq_chunk_scale_pair(scw[pc], type, i);
#pragma GCC unroll 8
                for (int r = 0; r < rows; r++) {
                    __m512i a = _mm512_broadcast_i64x4(
                        _mm256_loadu_si256((const __m256i *)(av[r] + 32 * i)));
                    isum[r * pairs + pc] = _mm512_dpwssd_epi32(isum[r * pairs + pc],
                                                               _mm512_maddubs_epi16(u, a), sc);
                }
            }
        }
        __m256i fis[KQ_ACCS], fmp[KQ_ACCS];
        float dd[KQ_ACCS] = {0}, dm[KQ_ACCS] = {0};
#pragma GCC unroll 8
        for (int pc = 0; pc < pairs; pc++) {
            __m512i side_w = kq_pair(kq_col_side(b0[pc], type), kq_col_side(b1[pc], type));
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                const uint8_t *row = xa + r * xrow;
                const float da = kx_scales(row, nsb)[sb];
                __m512i bs = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256((const __m256i *)(kx_sums(row, nsb) + 16 * sb)));
                int e = r * pairs + pc;
                __m512i side = _mm512_madd_epi16(bs, side_w);
                __m512i is = isum[e];
                if (type == PW_Q6_K) is = _mm512_sub_epi32(is, _mm512_slli_epi32(side, 5));
                /* outputs 2e (columns 2pc) and 2e + 1 (2pc + 1) of row r */
                fis[2 * e] = _mm512_castsi512_si256(is);
                fis[2 * e + 1] = _mm512_extracti64x4_epi64(is, 1);
                fmp[2 * e] = _mm512_castsi512_si256(side);
                fmp[2 * e + 1] = _mm512_extracti64x4_epi64(side, 1);
                dd[2 * e] = dcol[2 * pc] * da;
                dd[2 * e + 1] = dcol[2 * pc + 1] * da;
                dm[2 * e] = dmcol[2 * pc] * da;
                dm[2 * e + 1] = dmcol[2 * pc + 1] * da;
            }
        }
        kq_steps(acc, fis, fmp, dd, dm, rows * cols, type);
    }
    float out[8];
    _mm_storeu_ps(out, acc[0]);
    _mm_storeu_ps(out + 4, acc[1]);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) y[r * ldy + c] = out[r * cols + c];
}
/* The decode tile (one activation row, 1-4 columns): each column's
 * integer lanes on 512-bit vectors holding two chunks, lanes 0-7 the first
 * and lanes 8-15 the second, all 16 folded into the column's is at the end
 * of the super-block, four columns at a time (kq_fold_quads). The integer
 * sums are exact, so the fold gives the super-block's is, and the float
 * steps are the sequence's. The activations' 256 bytes are loaded once per
 * super-block for every column; a column's scales are unpacked with a few
 * vector operations and widened by byte shuffles, and its 4-bit values come
 * from 32-byte broadcasts (one half shifted by 4), so that a super-block
 * costs 4 (Q4_K, Q5_K) or 2 x 2 (Q6_K) multiply pairs and little else. */

/* Byte shuffle control that widens byte b0 (words 0-15) and byte b1
 * (words 16-31) of each 128-bit lane into words: odd control bytes 0x80
 * give the zero high bytes. */
KQ_INLINE __m512i kq_ctrl2(int b0, int b1) {
    __m512i lo = _mm512_set1_epi16((short)(-0x8000 | b0));
    __m512i hi = _mm512_set1_epi16((short)(-0x8000 | b1));
    return _mm512_mask_blend_epi64(0xF0, lo, hi);
}

/* Folding the decode tiles' integer lanes, four columns at a time: a and
 * b hold columns 0, 1 and 2, 3, two 128-bit lanes each (a = [0 0 1 1], b
 * = [2 2 3 3]); the result's 128-bit lane c holds four exact partial sums
 * of column c. */
KQ_INLINE __m512i kq_fold_pairs(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x88), _mm512_shuffle_i64x2(a, b, 0xDD));
}

/* The same from four columns of 16 lanes each. */
KQ_INLINE __m512i kq_fold_quads(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
    __m512i a = _mm512_add_epi32(_mm512_shuffle_i64x2(z0, z1, 0x44), _mm512_shuffle_i64x2(z0, z1, 0xEE));
    __m512i b = _mm512_add_epi32(_mm512_shuffle_i64x2(z2, z3, 0x44), _mm512_shuffle_i64x2(z2, z3, 0xEE));
    return kq_fold_pairs(a, b);
}

/* From the partial sums of is (t) and mp (u), lane c of four columns:
 * dwords 0, 1 of 128-bit lane c = column c's is, dwords 2, 3 its mp
 * (Q6_K: is in all four; u unused). */
KQ_INLINE __m512i kq_fold_finish(__m512i t, __m512i u, pw_dtype type) {
    __m512i v = type == PW_Q6_K
                    ? _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC))
                    : _mm512_add_epi32(_mm512_unpacklo_epi64(t, u), _mm512_unpackhi_epi64(t, u));
    return _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
}

/* The super-block's float steps for four columns from kq_fold_finish's v:
 * acc's dword 0 of 128-bit lane c is column c's running sum; dd (dm) holds
 * d * d_a (dmin * d_a) of column c in lane 2c (2c + 1), the products of the
 * scalar code. */
KQ_INLINE __m512 kq_step_quads(__m512 acc, __m512i v, __m256 dv, pw_dtype type) {
    const __m512 f = _mm512_cvtepi32_ps(v);
    const __m512 d = _mm512_castps256_ps512(dv);
    acc = _mm512_fmadd_ps(
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6), d), f,
        acc);
    if (type != PW_Q6_K)
        acc = _mm512_fnmadd_ps(
            _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7), d),
            _mm512_permute_ps(f, 0x4E), acc);
    return acc;
}

/* Columns [0, cols) from the quads' accumulators: column 4q + c is dword
 * 4c of acc[q] (kq_step_quads). */
KQ_INLINE void kq_store_quads(float *y, const __m512 *acc, int cols) {
    float out[16];
    for (int q = 0; 4 * q < cols; q++) {
        _mm512_storeu_ps(out, acc[q]);
        for (int c = 0; c < 4 && 4 * q + c < cols; c++) y[4 * q + c] = out[4 * c];
    }
}

/* vgf2p8affineqb (GFNI) with immediate 0: byte i of x through the 8x8
 * bit matrix in the qword of m that holds it, output bit b the parity of x
 * and matrix byte 7 - b. Inline assembly, because the copy is built
 * without -mgfni (which would let the compiler place GFNI anywhere) and
 * takes this path only where pw_k_isa_gfni() says the CPU has it. */
KQ_INLINE __m512i kq_affine(__m512i x, __m512i m) {
    __m512i r;
    __asm__("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(m));
    return r;
}

/* One column's super-block against the activation chunks a[0..3] (64
 * bytes each, chunks 2m and 2m+1): 16 exact integer lanes whose sum is the
 * super-block's is into *is, and Q4_K/Q5_K: 8 lanes whose sum is the min
 * term mp into *mp. Q6_K: bs holds the negated group sums -bs_g, and the
 * lanes start from the offset term -32 sum_g sc_g bs_g (one vpmaddwd of
 * the scale words times 32, |32 sc| <= 4096, against them), so that is
 * comes out whole; *mp is unused. gf: the 6-bit codes' high bits placed by
 * GFNI's affine byte transform (a CPU that has it, pw_k_isa_gfni()), two
 * operations fewer per 64 codes than the shifts and masks. */
KQ_INLINE void kq_row_col(const uint8_t *blk, pw_dtype type, const __m512i a[4], __m256i bs,
                          bool gf, __m512i *is, __m256i *mp) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    __m512i acc = _mm512_setzero_si512();
    if (type == PW_Q6_K) {
        /* the 16 int8 scales as words (the permutes below read words 0-15) */
        __m128i sc8 = _mm_loadu_si128((const __m128i *)(blk + 192));
        __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m512i scw2 = _mm512_zextsi256_si512(sc16);
        acc = _mm512_zextsi256_si512(_mm256_madd_epi16(_mm256_slli_epi16(sc16, 5), bs));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512(blk + 64 * h);
            __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
            __m512i u01, u23;
            if (gf) {
                /* qh's 2-bit fields straight to bits 4-5, one affine byte
                 * transform per vector (kq_affine): chunk 4h bits 0-1,
                 * 4h+1 bits 2-3 (lanes 8-15), 4h+2 bits 4-5, 4h+3 bits 6-7 */
                const __m512i m01 = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi64(0x01020000),
                                                            _mm512_set1_epi64(0x04080000));
                const __m512i m23 = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi64(0x10200000),
                                                            _mm512_set1_epi64(0x40800000));
                u01 = _mm512_or_si512(_mm512_and_si512(ql, lo4), kq_affine(qh, m01));
                u23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4),
                                      kq_affine(qh, m23));
            } else {
                /* chunks 4h, 4h+1: low nibbles, qh bits 0-1 and 2-3 to bits 4-5 */
                __m512i h01 = _mm512_sllv_epi16(
                    qh, _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi16(4), _mm512_set1_epi16(2)));
                u01 = _mm512_or_si512(_mm512_and_si512(ql, lo4),
                                      _mm512_and_si512(h01, _mm512_set1_epi8(0x30)));
                /* chunks 4h+2, 4h+3: high nibbles, qh bits 4-5 and 6-7 */
                __m512i h23 = _mm512_srlv_epi16(
                    qh, _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi16(0), _mm512_set1_epi16(2)));
                u23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4),
                                      _mm512_and_si512(h23, _mm512_set1_epi8(0x30)));
            }
            /* chunk i: lanes 0-3 scale sc_2i, lanes 4-7 sc_2i+1 */
            const int g = 8 * h;
            __m512i s01 = _mm512_permutexvar_epi16(
                _mm512_setr_epi64(0x0001000100010001LL * g, 0x0001000100010001LL * g,
                                  0x0001000100010001LL * (g + 1), 0x0001000100010001LL * (g + 1),
                                  0x0001000100010001LL * (g + 2), 0x0001000100010001LL * (g + 2),
                                  0x0001000100010001LL * (g + 3), 0x0001000100010001LL * (g + 3)),
                scw2);
            __m512i s23 = _mm512_permutexvar_epi16(
                _mm512_setr_epi64(0x0001000100010001LL * (g + 4), 0x0001000100010001LL * (g + 4),
                                  0x0001000100010001LL * (g + 5), 0x0001000100010001LL * (g + 5),
                                  0x0001000100010001LL * (g + 6), 0x0001000100010001LL * (g + 6),
                                  0x0001000100010001LL * (g + 7), 0x0001000100010001LL * (g + 7)),
                scw2);
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u01, a[2 * h]), s01);
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u23, a[2 * h + 1]), s23);
        }
        *is = acc;
        *mp = _mm256_setzero_si256();
        return;
    }
    __m512i smb = _mm512_broadcast_i32x4(kq_scales_mins_vec(blk + 4));
    const uint8_t *qs = blk + (type == PW_Q5_K ? 48 : 16);
    __m512i qh = type == PW_Q5_K
                     ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)))
                     : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) {
        __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * m)));
        __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFFFF0000u, v, 4), lo4);
        if (type == PW_Q5_K) {
            /* bit 2m (lanes 0-7) or 2m+1 (lanes 8-15) of each qh byte adds 16 */
            __m512i sel = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi8((char)(1 << (2 * m))),
                                                  _mm512_set1_epi8((char)(1 << (2 * m + 1))));
            u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(qh, sel), u, _mm512_set1_epi8(0x10));
        }
        __m512i sc = _mm512_shuffle_epi8(smb, kq_ctrl2(2 * m, 2 * m + 1));
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, a[m]), sc);
    }
    /* mins: words 2l and 2l+1 = m_l (byte 8 + l, high byte zero) */
#define KQ_W(b) ((short)(-0x8000 | (b)))
    const __m256i mctrl =
        _mm256_setr_epi16(KQ_W(8), KQ_W(8), KQ_W(9), KQ_W(9), KQ_W(10), KQ_W(10), KQ_W(11),
                          KQ_W(11), KQ_W(12), KQ_W(12), KQ_W(13), KQ_W(13), KQ_W(14), KQ_W(14),
                          KQ_W(15), KQ_W(15));
#undef KQ_W
    __m256i side_w = _mm256_shuffle_epi8(_mm512_castsi512_si256(smb), mctrl);
    *mp = _mm256_madd_epi16(bs, side_w);
    *is = acc;
}

/* Up to KQ_ROW_COLS8 columns, in quads: Q6_K decode takes 8 at a time
 * (kq_row_block), as the Q4_K/Q5_K tile does, the activations' loads
 * shared by 8 columns; streamed from memory 1.03-1.04x (ffn_down) and
 * 1.09-1.19x (LM head) faster than 4 columns (kbench_kq_ab.sh, AMD EPYC),
 * 1.04-1.06x from L2. */
#define KQ_ROW_COLS8 8
KQ_INLINE void kq_tile_row(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                           int64_t nsb, pw_dtype type, int64_t bb, int cols, bool gf) {
    const int64_t pf = kq_pf_ahead(cols * wrow);
    const int quads = (cols + 3) / 4;
    /* column 4q + c: dword 4c of acc[q] (kq_step_quads) */
    __m512 acc[KQ_ROW_COLS8 / 4] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t sb = 0; sb < nsb; sb++) {
        const int8_t *av = kx_values(xa) + sb * KQ_QKK;
        __m512i a[4];
        for (int m = 0; m < 4; m++) a[m] = _mm512_loadu_si512(av + 64 * m);
        const float da = kx_scales(xa, nsb)[sb];
        __m256i bs = _mm256_loadu_si256((const __m256i *)(kx_sums(xa, nsb) + 16 * sb));
        /* Q6_K: -bs_g for kq_row_col's offset term (|bs_g| <= 16 * 127) */
        if (type == PW_Q6_K) bs = _mm256_sub_epi16(_mm256_setzero_si256(), bs);
        __m512i z[KQ_ROW_COLS8];
        __m256i side[KQ_ROW_COLS8];
        /* the f16 d (and dmin) of each column in dword c: Q6_K's d in its
         * low word, Q4_K/Q5_K's d and dmin */
        uint32_t dh[KQ_ROW_COLS8] = {0};
#pragma GCC unroll 8
        for (int c = 0; c < 4 * quads; c++) {
            if (c >= cols) {
                z[c] = _mm512_setzero_si512();
                side[c] = _mm256_setzero_si256();
                continue;
            }
            const uint8_t *blk = w + c * wrow + sb * bb;
            /* Decode streams the weights from memory once per token: ask
             * for the same super-block of a later tile's column early,
             * into L2 (KQ_DECODE_PREFETCH, kq_pf_ahead). */
            for (int64_t o = 0; o < bb; o += 64)
                _mm_prefetch((const char *)(blk + pf + o), KQ_DECODE_PREFETCH);
            kq_row_col(blk, type, a, bs, gf, &z[c], &side[c]);
            if (type == PW_Q6_K) {
                uint16_t h;
                memcpy(&h, blk + 208, sizeof h);
                dh[c] = h;
            } else {
                dh[c] = kq_u32(blk);
            }
        }
#pragma GCC unroll 2
        for (int q = 0; q < quads; q++) {
            __m512i *zq = z + 4 * q;
            __m256i *sq = side + 4 * q;
            /* d * d_a (and dmin * d_a), the products of the scalar code */
            const __m256 dv = _mm256_mul_ps(
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dh + 4 * q))), _mm256_set1_ps(da));
            __m512i t = kq_fold_quads(zq[0], zq[1], zq[2], zq[3]), u = t;
            if (type != PW_Q6_K) {
                u = kq_fold_quads(_mm512_zextsi256_si512(sq[0]), _mm512_zextsi256_si512(sq[1]),
                                  _mm512_zextsi256_si512(sq[2]), _mm512_zextsi256_si512(sq[3]));
            }
            acc[q] = kq_step_quads(acc[q], kq_fold_finish(t, u, type), dv, type);
        }
    }
    kq_store_quads(y, acc, cols);
}

/* Dword m (0-3) of each 128-bit lane in all four of its dwords: the
 * shuffle's control is an immediate at every optimisation level. */
KQ_INLINE __m256i kq_dword_splat256(__m256i v, int m) {
    switch (m) {
    case 0: return _mm256_shuffle_epi32(v, 0x00);
    case 1: return _mm256_shuffle_epi32(v, 0x55);
    case 2: return _mm256_shuffle_epi32(v, 0xAA);
    default: return _mm256_shuffle_epi32(v, 0xFF);
    }
}
KQ_INLINE __m512i kq_dword_splat512(__m512i v, int m) {
    switch (m) {
    case 0: return _mm512_shuffle_epi32(v, _MM_PERM_AAAA);
    case 1: return _mm512_shuffle_epi32(v, _MM_PERM_BBBB);
    case 2: return _mm512_shuffle_epi32(v, _MM_PERM_CCCC);
    default: return _mm512_shuffle_epi32(v, _MM_PERM_DDDD);
    }
}

/* The Q4_K/Q5_K decode tile (one activation row, 1-4 columns), on 256-bit
 * vectors whose 8 dwords are the lanes l themselves (no fold). Chunk i of
 * a column gives its unscaled lane sums p_il = sum_t q_e a_e by one
 * vpdpbusd; |p_il| <= 4 * 31 * 127 < 2^15, so chunks 2m and 2m+1 share a
 * dword (p_2m,l in its low word, p_2m+1,l in its high word) and one
 * vpdpwssd against (sc_2m, sc_2m+1) adds sc_2m p_2m,l + sc_2m+1 p_2m+1,l
 * to lane l: 1.5 multiplies per chunk where vpmaddubsw + vpdpwssd take 2.
 * Q4_K's high nibbles are multiplied in place (16 q, |16 p| < 2^17 in the
 * dword) and shifted by 12 instead of 16, which saves their shift; their
 * dot product starts from 2, so the low word gets 2^13 + p_2m (|p_2m| <=
 * 4 * 15 * 127 < 2^13: no borrow, so no mask), and the bias, 2^13 sc_2m
 * in each of 8 lanes for m = 0..3, is taken off by starting the sum from
 * -2^16 (sc_0 + sc_2 + sc_4 + sc_6) (one vpmaddwd of the scale words
 * against -2^15). The
 * scales and mins are unpacked in general registers (kq_scales_mins_u64),
 * which are otherwise idle, and the mins multiply the pair sums of the
 * activations' group sums, formed once per super-block for every column.
 * On AMD Zen 4 the vector pipes, not the loads or the front end, bound
 * this tile, so every vector operation saved counts. The lanes fold into
 * is and mp of matmul_kquant.c, exact, and the float steps are the same,
 * so the bits are those of every other tile. */
KQ_INLINE void kq_tile_row_dp(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                              int64_t nsb, pw_dtype type, int64_t bb, int cols) {
    const int64_t pf = kq_pf_ahead(cols * wrow);
    const __m256i lo4 = _mm256_set1_epi8(0x0F), hi4 = _mm256_set1_epi8((char)0xF0);
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    __m128 acc[2] = {_mm_setzero_ps(), _mm_setzero_ps()}; /* lane c of acc[0]: column c */
    for (int64_t sb = 0; sb < nsb; sb++) {
        const int8_t *av = kx_values(xa) + sb * KQ_QKK;
        __m256i a[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) a[i] = _mm256_loadu_si256((const __m256i *)(av + 32 * i));
        const __m128 da = _mm_set1_ps(kx_scales(xa, nsb)[sb]);
        /* dword l: bs_2l + bs_2l+1 (|.| <= 32 * 127, a word) */
        const __m256i bsp = _mm256_madd_epi16(
            _mm256_loadu_si256((const __m256i *)(kx_sums(xa, nsb) + 16 * sb)), _mm256_set1_epi16(1));
        __m256i fis[KQ_ROW_COLS], fmp[KQ_ROW_COLS];
        float dd[KQ_ROW_COLS] = {0}, dm[KQ_ROW_COLS] = {0};
#pragma GCC unroll 4
        for (int c = 0; c < cols; c++) {
            const uint8_t *blk = w + c * wrow + sb * bb;
            /* the same super-block of a later tile's column, into L2 */
            for (int64_t o = 0; o < bb; o += 64)
                _mm_prefetch((const char *)(blk + pf + o), KQ_DECODE_PREFETCH);
            uint64_t sc8, m8;
            kq_scales_mins_u64(blk + 4, &sc8, &m8);
            /* dword m: (sc_2m, sc_2m+1) as words, in both 128-bit lanes */
            const __m256i scp = _mm256_cvtepu8_epi16(_mm_set1_epi64x((long long)sc8));
            /* dword l: m_l, zero-extended */
            const __m256i mins = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m8));
            const uint8_t *qs = blk + (type == PW_Q5_K ? 48 : 16);
            const __m256i qh = type == PW_Q5_K ? _mm256_loadu_si256((const __m256i *)(blk + 16))
                                               : _mm256_setzero_si256();
            /* Q4_K: from -2^16 (sc_0 + sc_2 + sc_4 + sc_6), the bias below */
            __m256i is0 = type == PW_Q4_K ? _mm256_madd_epi16(scp, _mm256_set1_epi32(0x8000))
                                        : _mm256_setzero_si256(),
                    is1 = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * m));
                __m256i u0 = _mm256_and_si256(v, lo4), hi;
                if (type == PW_Q5_K) {
                    /* bit i of each qh byte adds 16 to chunk i */
                    const __m256i s16 = _mm256_set1_epi8(0x10);
                    __m256i u1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
                    u0 = _mm256_mask_add_epi8(
                        u0, _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(1 << (2 * m)))), u0, s16);
                    u1 = _mm256_mask_add_epi8(
                        u1, _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(1 << (2 * m + 1)))), u1,
                        s16);
                    hi = _mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u1, a[2 * m + 1]), 16);
                } else {
                    /* 16 p_2m+1 from the high nibbles in place, to the high word */
                    hi = _mm256_slli_epi32(
                        _mm256_dpbusd_epi32(_mm256_set1_epi32(2), _mm256_and_si256(v, hi4), a[2 * m + 1]),
                        12);
                }
                /* hi + p_2m: Q5_K: the low word is p_2m's (mod 2^16), the
                 * high word hi's (a borrow from a negative p_2m is masked
                 * off); Q4_K: 2^13 + p_2m in 572..15812, no borrow */
                const __m256i sum = _mm256_dpbusd_epi32(hi, u0, a[2 * m]);
                const __m256i pp =
                    type == PW_Q4_K ? sum : _mm256_ternarylogic_epi32(lo16, sum, hi, 0xCA);
                const __m256i sc = kq_dword_splat256(scp, m);
                if (m % 2 == 0) is0 = _mm256_dpwssd_epi32(is0, pp, sc);
                else is1 = _mm256_dpwssd_epi32(is1, pp, sc);
            }
            fis[c] = _mm256_add_epi32(is0, is1);
            fmp[c] = _mm256_madd_epi16(mins, bsp);
            /* d * d_a and dmin * d_a, the products of the scalar code */
            const __m128 dv = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)kq_u32(blk))), da);
            dd[c] = _mm_cvtss_f32(dv);
            dm[c] = _mm_cvtss_f32(_mm_movehdup_ps(dv));
        }
        kq_steps(acc, fis, fmp, dd, dm, cols, type);
    }
    float out[4];
    _mm_storeu_ps(out, acc[0]);
    for (int c = 0; c < cols; c++) y[c] = out[c];
}

/* kq_tile_row_dp for two columns at once, c in the low and c + 1 in the
 * high half of 512-bit vectors, every lane running the 256-bit tile's
 * operations (the shuffles stay within 128-bit lanes): the same pipe
 * work in half the instructions, which keeps the tile fast when the
 * core's other hardware thread takes its share of the front end. */
KQ_INLINE __m512i kq_pair_u64(uint64_t lo, uint64_t hi, int words) {
    __m128i x = _mm_insert_epi64(_mm_cvtsi64_si128((long long)lo), (long long)hi, 1);
    /* words: the 8 bytes of each as words, in both 128-bit lanes of its half;
     * else as dwords, one per lane */
    return words ? _mm512_cvtepu8_epi16(_mm256_permute4x64_epi64(_mm256_castsi128_si256(x), 0x50))
                 : _mm512_cvtepu8_epi32(x);
}

/* Up to 8 columns (four pairs; two quads of outputs, each folded and
 * stepped as above): decode's Q4_K/Q5_K loop takes 8 columns at a time,
 * whose super-block sb is 8 rows' blocks read together, the activations'
 * loads and pair sums shared by 8 columns instead of 4. Streamed from
 * memory this read Q4_K 1.02-1.18x and Q5_K 1.1x faster than 4 columns
 * (kbench_kq_ab.sh, AMD EPYC); from L2 1.0-1.05x. */
#define KQ_DP_COLS 8
KQ_INLINE void kq_tile_row_dp2(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                               int64_t nsb, pw_dtype type, int64_t bb, int cols) {
    const int64_t pf = kq_pf_ahead(cols * wrow);
    const __m512i lo4 = _mm512_set1_epi8(0x0F), hi4 = _mm512_set1_epi8((char)0xF0);
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    const int pairs = cols / 2, quads = (cols + 3) / 4;
    /* column 4q + c: dword 4c of acc[q] (kq_step_quads) */
    __m512 acc[KQ_DP_COLS / 4] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t sb = 0; sb < nsb; sb++) {
        const int8_t *av = kx_values(xa) + sb * KQ_QKK;
        __m512i a[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            a[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(av + 32 * i)));
        const __m128 da = _mm_set1_ps(kx_scales(xa, nsb)[sb]);
        /* words 0-7 of every 128-bit lane: bs_2l + bs_2l+1 (|.| <= 32 * 127) */
        const __m512i bsp = _mm512_broadcast_i32x4(_mm256_cvtepi32_epi16(_mm256_madd_epi16(
            _mm256_loadu_si256((const __m256i *)(kx_sums(xa, nsb) + 16 * sb)), _mm256_set1_epi16(1))));
        __m512i fis[KQ_DP_COLS / 2];
        uint32_t dh[KQ_DP_COLS] = {0};
        uint64_t mq[KQ_DP_COLS] = {0};
#pragma GCC unroll 4
        for (int pc = 0; pc < pairs; pc++) {
            const uint8_t *b0 = w + (2 * pc) * wrow + sb * bb, *b1 = b0 + wrow;
            for (int64_t o = 0; o < bb; o += 64) {
                _mm_prefetch((const char *)(b0 + pf + o), KQ_DECODE_PREFETCH);
                _mm_prefetch((const char *)(b1 + pf + o), KQ_DECODE_PREFETCH);
            }
            uint64_t sc0, m0, sc1, m1;
            kq_scales_mins_u64(b0 + 4, &sc0, &m0);
            kq_scales_mins_u64(b1 + 4, &sc1, &m1);
            const __m512i scp = kq_pair_u64(sc0, sc1, 1);
            mq[2 * pc] = m0, mq[2 * pc + 1] = m1;
            const int qo = type == PW_Q5_K ? 48 : 16;
            const __m512i qh = type == PW_Q5_K ? kq_load_pair(b0 + 16, b1 + 16) : _mm512_setzero_si512();
            /* Q4_K: from -2^16 (sc_0 + sc_2 + sc_4 + sc_6), the bias below.
             * One chain of four vpdpwssd, not two of two: the four pairs
             * of the tile are independent chains already, and the add
             * that joined two cost more (from L2 Q4_K 1.02x, AMD EPYC). */
            __m512i is = type == PW_Q4_K ? _mm512_madd_epi16(scp, _mm512_set1_epi32(0x8000))
                                         : _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                const __m512i v = kq_load_pair(b0 + qo + 32 * m, b1 + qo + 32 * m);
                __m512i u0 = _mm512_and_si512(v, lo4), hi;
                if (type == PW_Q5_K) {
                    const __m512i s16 = _mm512_set1_epi8(0x10);
                    __m512i u1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
                    u0 = _mm512_mask_add_epi8(
                        u0, _mm512_test_epi8_mask(qh, _mm512_set1_epi8((char)(1 << (2 * m)))), u0, s16);
                    u1 = _mm512_mask_add_epi8(
                        u1, _mm512_test_epi8_mask(qh, _mm512_set1_epi8((char)(1 << (2 * m + 1)))), u1,
                        s16);
                    hi = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u1, a[2 * m + 1]), 16);
                } else {
                    hi = _mm512_slli_epi32(
                        _mm512_dpbusd_epi32(_mm512_set1_epi32(2), _mm512_and_si512(v, hi4), a[2 * m + 1]),
                        12);
                }
                const __m512i sum = _mm512_dpbusd_epi32(hi, u0, a[2 * m]);
                const __m512i pp =
                    type == PW_Q4_K ? sum : _mm512_ternarylogic_epi32(lo16, sum, hi, 0xCA);
                const __m512i sc = kq_dword_splat512(scp, m);
                is = _mm512_dpwssd_epi32(is, pp, sc);
            }
            fis[pc] = is;
            dh[2 * pc] = kq_u32(b0), dh[2 * pc + 1] = kq_u32(b1);
        }
        if (pairs % 2) fis[pairs] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int q = 0; q < quads; q++) {
            /* the mins of column c as words in 128-bit lane c: its four
             * partial sums of mp by one vpmaddwd */
            const __m512i mins = _mm512_cvtepu8_epi16(
                _mm256_setr_epi64x((long long)mq[4 * q], (long long)mq[4 * q + 1],
                                   (long long)mq[4 * q + 2], (long long)mq[4 * q + 3]));
            /* d, dmin of each column, times d_a as in the scalar code */
            const __m256 dv = _mm256_mul_ps(
                _mm256_cvtph_ps(_mm_setr_epi32((int)dh[4 * q], (int)dh[4 * q + 1],
                                               (int)dh[4 * q + 2], (int)dh[4 * q + 3])),
                _mm256_broadcastss_ps(da));
            const __m512i v = kq_fold_finish(kq_fold_pairs(fis[2 * q], fis[2 * q + 1]),
                                             _mm512_madd_epi16(mins, bsp), type);
            acc[q] = kq_step_quads(acc[q], v, dv, type);
        }
    }
    kq_store_quads(y, acc, cols);
}

#define KQ_KTILE(rows, cols)                                                                   \
    ((rows) == 1 && type != PW_Q6_K && (cols) % 2 == 0                                         \
         ? kq_tile_row_dp2(y + j, xa, w + j * wrow, wrow, nb, type, bb, cols)                   \
     : (rows) == 1 && type != PW_Q6_K                                                          \
         ? kq_tile_row_dp(y + j, xa, w + j * wrow, wrow, nb, type, bb, cols)                    \
     : (rows) == 1 ? kq_tile_row(y + j, xa, w + j * wrow, wrow, nb, type, bb, cols, false)    \
     : (cols) % 2 == 0                                                                         \
         ? kq_tile_pairs(y + j, n, xa, xrow, w + j * wrow, wrow, nb, type, bb, rows, cols)     \
         : kq_tile(y + j, n, xa, xrow, w + j * wrow, wrow, nb, type, bb, rows, cols))
#endif
#else
/* The portable tile: each output on its own, 8 integer lanes per
 * super-block (as the x86 tiles form them), folded into is and mp, then
 * the float steps. */
KQ_INLINE void kq_lanes(const uint8_t *blk, pw_dtype type, const int8_t *a, const int16_t *bs,
                        int32_t is[KQ_LANES], int32_t side[KQ_LANES], float *d, float *dmin) {
    int u[KQ_QKK], sc16[16];
    if (type == PW_Q6_K) {
        const uint8_t *ql = blk, *qh = blk + 128;
        for (int e = 0; e < KQ_QKK; e++) {
            int h = e / 128, r = e % 128;
            int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
            int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            u[e] = lo | hi << 4;
        }
        for (int g = 0; g < 16; g++) sc16[g] = (int8_t)blk[192 + g];
        *d = kq_half(blk + 208);
        *dmin = 0.0f;
    } else {
        uint8_t sc[8], m[8];
        kq_scales_mins(blk + 4, sc, m);
        const uint8_t *qh = blk + 16, *qs = blk + (type == PW_Q5_K ? 48 : 16);
        for (int e = 0; e < KQ_QKK; e++) {
            int j = e / 32, l = e % 32;
            u[e] = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
            if (type == PW_Q5_K) u[e] |= ((qh[l] >> j) & 1) << 4;
        }
        for (int g = 0; g < 16; g++) sc16[g] = g < 8 ? sc[g] : m[g - 8];
        *d = kq_half(blk);
        *dmin = kq_half(blk + 2);
    }
    for (int l = 0; l < KQ_LANES; l++) {
        int32_t s = 0;
        for (int i = 0; i < KQ_QKK / 32; i++) {
            int scale = type == PW_Q6_K ? sc16[2 * i + l / 4] : sc16[i];
            int32_t p = 0;
            for (int e = 32 * i + 4 * l; e < 32 * i + 4 * l + 4; e++) p += u[e] * a[e];
            s += scale * p;
        }
        if (type == PW_Q6_K) {
            side[l] = sc16[2 * l] * bs[2 * l] + sc16[2 * l + 1] * bs[2 * l + 1];
            s -= 32 * side[l];
        } else {
            side[l] = sc16[8 + l] * (bs[2 * l] + bs[2 * l + 1]);
        }
        is[l] = s;
    }
}

KQ_INLINE void kq_tile(float *y, int64_t ldy, const uint8_t *xa, int64_t xrow, const uint8_t *w,
                       int64_t wrow, int64_t nsb, pw_dtype type, int64_t bb, int rows,
                       int cols) {
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = xa + r * xrow;
        for (int c = 0; c < cols; c++) {
            float acc = 0.0f;
            for (int64_t sb = 0; sb < nsb; sb++) {
                int32_t isl[KQ_LANES], side[KQ_LANES];
                float d, dmin;
                kq_lanes(w + c * wrow + sb * bb, type, kx_values(row) + sb * KQ_QKK,
                         kx_sums(row, nsb) + 16 * sb, isl, side, &d, &dmin);
                /* the lanes folded: the super-block's exact is and mp */
                int32_t is = 0, mp = 0;
                for (int l = 0; l < KQ_LANES; l++) is += isl[l], mp += side[l];
                float da = kx_scales(row, nsb)[sb];
                acc = fmaf(d * da, (float)is, acc);
                if (type != PW_Q6_K) acc = fmaf(-(dmin * da), (float)mp, acc);
            }
            y[r * ldy + c] = acc;
        }
    }
}
#endif

/* ---- Q5_0 / Q5_1 against the 32-element activation rows ---------------- */

/* Q8 activation rows (PW_K_Q8_ROW_BYTES): values, scales, lane sums. */
KQ_INLINE const int8_t *qx_values(const uint8_t *row) { return (const int8_t *)row; }
KQ_INLINE const float *qx_scales(const uint8_t *row, int64_t nb) {
    return (const float *)(row + nb * KQ_QK);
}
KQ_INLINE const float *qx_sums(const uint8_t *row, int64_t nb) {
    return (const float *)(row + nb * (KQ_QK + 4));
}

#if KQ_X86
/* The block's 32 values, w: Q5_0 (nibble | bit << 4) - 16 (signed), Q5_1
 * the 5-bit value. Bit j of qh is bit 4 of element j: each byte j is given
 * byte j / 8 of qh and tested against 1 << (j % 8). Q5_0's value is the
 * nibble with 0xF0 or'ed in where the bit is clear (nibble - 16 as int8).
 * Signed Q5_0 against signed activations: AVX2 multiplies |w| by a with
 * w's sign (vpsignb; a != -128); the VNNI copies take the offset form
 * (a + 128) . w - 128 sum(w), vpdpbusd starting from `corr` = -128 * (the
 * lane sums of w), once per column for every row, the rows' activations
 * loaded with 128 added (a ^ 0x80). Either way the lane sums are exact. */
#if defined(PW_ISA_AVX512VNNI_COPY)
#define KQ_DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#elif defined(PW_ISA_AVXVNNI_COPY)
#define KQ_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#endif
#if defined(KQ_DPBUSD)
#define KQ_Q5_OFFSET 1
#else
#define KQ_Q5_OFFSET 0
#endif

typedef struct q5_prep {
    __m256i w, aux; /* aux: -128 sum(w) (VNNI) or |w| (AVX2) for Q5_0 */
} q5_prep;

KQ_INLINE q5_prep q5_prep_make(const uint8_t *blk, pw_dtype type) {
    const uint8_t *qhp = blk + (type == PW_Q5_1 ? 4 : 2), *qs = qhp + 4;
    __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    both = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    __m256i nib = _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
    __m256i qh = _mm256_set1_epi32((int)kq_u32(qhp));
    qh = _mm256_shuffle_epi8(qh, _mm256_setr_epi64x(0, 0x0101010101010101LL,
                                                    0x0202020202020202LL,
                                                    0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
    q5_prep p;
    if (type == PW_Q5_0) {
        p.w = _mm256_or_si256(nib, _mm256_andnot_si256(set, _mm256_set1_epi8((char)0xF0)));
#if KQ_Q5_OFFSET
        p.aux = _mm256_sub_epi32(_mm256_setzero_si256(),
                                 KQ_DPBUSD(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80),
                                           p.w));
#else
        p.aux = _mm256_abs_epi8(p.w);
#endif
    } else {
        p.w = _mm256_or_si256(nib, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
        p.aux = p.w;
    }
    return p;
}

/* Lane l: sum of w_j a_j over j = 4l..4l+3, exact, as floats; `a` as
 * q5_act_load gives it. */
KQ_INLINE pw_v8f q5_dotf(const q5_prep *p, __m256i a, pw_dtype type) {
    __m256i d;
#if KQ_Q5_OFFSET
    d = type == PW_Q5_1 ? KQ_DPBUSD(_mm256_setzero_si256(), p->w, a) : KQ_DPBUSD(p->aux, a, p->w);
#else
    __m256i s = type == PW_Q5_1 ? a : _mm256_sign_epi8(a, p->w);
    d = _mm256_madd_epi16(_mm256_maddubs_epi16(p->aux, s), _mm256_set1_epi16(1));
#endif
    return (pw_v8f)_mm256_cvtepi32_ps(d);
}

KQ_INLINE __m256i q5_act_load(const int8_t *q, pw_dtype type) {
    __m256i a = _mm256_loadu_si256((const __m256i *)q);
    return KQ_Q5_OFFSET && type == PW_Q5_0 ? _mm256_xor_si256(a, _mm256_set1_epi8((char)0x80)) : a;
}
#else
typedef struct q5_prep {
    int8_t w[KQ_QK];
} q5_prep;

KQ_INLINE q5_prep q5_prep_make(const uint8_t *blk, pw_dtype type) {
    const uint8_t *qhp = blk + (type == PW_Q5_1 ? 4 : 2), *qs = qhp + 4;
    uint32_t qh = kq_u32(qhp);
    q5_prep p;
    for (int j = 0; j < KQ_QK; j++) {
        int q = (j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4) | (int)(((qh >> j) & 1) << 4);
        p.w[j] = (int8_t)(type == PW_Q5_0 ? q - 16 : q);
    }
    return p;
}

typedef struct q5_act {
    int8_t q[KQ_QK];
} q5_act;

KQ_INLINE q5_act q5_act_load(const int8_t *q, pw_dtype type) {
    (void)type;
    q5_act a;
    memcpy(a.q, q, KQ_QK);
    return a;
}

KQ_INLINE pw_v8f q5_dotf(const q5_prep *p, q5_act a, pw_dtype type) {
    (void)type;
    pw_v8f r;
    for (int l = 0; l < KQ_LANES; l++) {
        int s = 0;
        for (int j = 4 * l; j < 4 * l + 4; j++) s += p->w[j] * a.q[j];
        r[l] = (float)s;
    }
    return r;
}
#endif

/* Per block b, row r, column c: acc = fma(d_w * d_a, p, acc); Q5_1 then
 * acc = fma(m_w, sa, acc) (matmul_kquant.c). */
KQ_INLINE void q5_tile(float *y, int64_t ldy, const uint8_t *xa, int64_t xrow, const uint8_t *w,
                       int64_t wrow, int64_t nb, pw_dtype type, int64_t bb, int rows, int cols) {
    pw_v8f acc[KQ_ACCS];
    memset(acc, 0, sizeof acc);
    for (int64_t b = 0; b < nb; b++) {
#if KQ_X86
        __m256i a[KQ_BATCH_ROWS];
#else
        q5_act a[KQ_BATCH_ROWS];
#endif
        pw_v8f da[KQ_BATCH_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const uint8_t *row = xa + r * xrow;
            a[r] = q5_act_load(qx_values(row) + b * KQ_QK, type);
            da[r] = KQ_SPLAT(qx_scales(row, nb)[b]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < cols; c++) {
            const uint8_t *blk = w + c * wrow + b * bb;
#if KQ_X86
            if (rows == 1) _mm_prefetch((const char *)(blk + cols * wrow), KQ_DECODE_PREFETCH);
#endif
            q5_prep p = q5_prep_make(blk, type);
            pw_v8f dw = KQ_SPLAT(kq_half(blk));
            float mw = type == PW_Q5_1 ? kq_half(blk + 2) : 0.0f;
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                pw_v8f pf = q5_dotf(&p, a[r], type);
                /* lane-wise d_w * d_a: the scalar product in every lane */
                pw_v8f s = pw_v8_madd(dw * da[r], pf, acc[r * cols + c]);
                if (type == PW_Q5_1) {
                    pw_v8f sa;
                    memcpy(&sa, qx_sums(xa + r * xrow, nb) + b * KQ_LANES, sizeof sa);
                    s = pw_v8_madd(KQ_SPLAT(mw), sa, s);
                }
                acc[r * cols + c] = s;
            }
        }
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) y[r * ldy + c] = kq_hsum(acc[r * cols + c]);
}

#if defined(PW_ISA_AVX512VNNI_COPY)
/* Q5_0 / Q5_1 with two columns per 512-bit vector (lanes 0-7 column c's 8
 * lanes, 8-15 column c + 1's), lane-wise the 256-bit operations above. */
KQ_INLINE __m512i q5_w_pair(const uint8_t *b0, const uint8_t *b1, pw_dtype type) {
    const int off = type == PW_Q5_1 ? 4 : 2;
    __m512i q = _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + off + 4)))),
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + off + 4))), 1);
    q = _mm512_srlv_epi64(q, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
    __m512i nib = _mm512_and_si512(q, _mm512_set1_epi8(0x0F));
    /* bit j of qh is byte j's mask bit as it is: column c's bytes are 0-31 */
    __mmask64 set = _cvtu64_mask64((uint64_t)kq_u32(b0 + off) | (uint64_t)kq_u32(b1 + off) << 32);
    return type == PW_Q5_0
               ? _mm512_mask_blend_epi8(set, _mm512_or_si512(nib, _mm512_set1_epi8((char)0xF0)), nib)
               : _mm512_mask_blend_epi8(set, nib, _mm512_or_si512(nib, _mm512_set1_epi8(0x10)));
}

KQ_INLINE void q5_tile_pairs(float *y, int64_t ldy, const uint8_t *xa, int64_t xrow,
                             const uint8_t *w, int64_t wrow, int64_t nb, pw_dtype type,
                             int64_t bb, int rows, int cols) {
    const int pairs = cols / 2;
    __m512 acc[KQ_ACCS / 2];
    for (int e = 0; e < KQ_ACCS / 2; e++) acc[e] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i a[KQ_BATCH_ROWS];
        __m512 da[KQ_BATCH_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const uint8_t *row = xa + r * xrow;
            a[r] = _mm512_broadcast_i64x4(
                _mm256_loadu_si256((const __m256i *)(qx_values(row) + b * KQ_QK)));
            if (type == PW_Q5_0) a[r] = _mm512_xor_si512(a[r], _mm512_set1_epi8((char)0x80));
            da[r] = _mm512_set1_ps(qx_scales(row, nb)[b]);
        }
#pragma GCC unroll 8
        for (int pc = 0; pc < pairs; pc++) {
            const uint8_t *b0 = w + (2 * pc) * wrow + b * bb, *b1 = b0 + wrow;
            if (rows == 1) {
                _mm_prefetch((const char *)(b0 + cols * wrow), KQ_DECODE_PREFETCH);
                _mm_prefetch((const char *)(b1 + cols * wrow), KQ_DECODE_PREFETCH);
            }
            __m512i wv = q5_w_pair(b0, b1, type);
            __m512i corr = _mm512_setzero_si512();
            if (type == PW_Q5_0)
                corr = _mm512_sub_epi32(corr, _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                                  _mm512_set1_epi8((char)0x80), wv));
            __m512 dw = _mm512_insertf32x8(_mm512_set1_ps(kq_half(b0)), _mm256_set1_ps(kq_half(b1)), 1);
            __m512 mw = _mm512_setzero_ps();
            if (type == PW_Q5_1)
                mw = _mm512_insertf32x8(_mm512_set1_ps(kq_half(b0 + 2)),
                                        _mm256_set1_ps(kq_half(b1 + 2)), 1);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                __m512i dot = type == PW_Q5_1 ? _mm512_dpbusd_epi32(corr, wv, a[r])
                                              : _mm512_dpbusd_epi32(corr, a[r], wv);
                __m512 v = _mm512_fmadd_ps(_mm512_mul_ps(dw, da[r]), _mm512_cvtepi32_ps(dot),
                                           acc[r * pairs + pc]);
                if (type == PW_Q5_1) {
                    __m512 sa = _mm512_broadcast_f32x8(
                        _mm256_loadu_ps(qx_sums(xa + r * xrow, nb) + b * KQ_LANES));
                    v = _mm512_fmadd_ps(mw, sa, v);
                }
                acc[r * pairs + pc] = v;
            }
        }
    }
    for (int r = 0; r < rows; r++)
        for (int pc = 0; pc < pairs; pc++) {
            __m512 v = acc[r * pairs + pc];
            y[r * ldy + 2 * pc] = kq_hsum((pw_v8f)_mm512_castps512_ps256(v));
            y[r * ldy + 2 * pc + 1] = kq_hsum((pw_v8f)_mm512_extractf32x8_ps(v, 1));
        }
}
#define KQ_Q5TILE(rows, cols)                                                                  \
    ((cols) % 2 == 0                                                                           \
         ? q5_tile_pairs(y + j, n, xa, xrow, w + j * wrow, wrow, nb, type, bb, rows, cols)     \
         : q5_tile(y + j, n, xa, xrow, w + j * wrow, wrow, nb, type, bb, rows, cols))
#endif

/* ---- Q5_0: one column per vector lane --------------------------------- */

/* Q5_0 for batches, the sequence above (8 lanes per output, lane l the
 * elements 4l..4l+3 of a block) with the vectors' lanes across 16
 * (AVX-512) or 8 columns instead of across one output's lanes: each of an
 * output's lanes is its own vector, so one vpdpbusd forms lane l of 16
 * columns, one conversion and one fma accumulate it, and the final lane
 * tree is 7 lane-wise vector adds. This needs no shuffles per block and
 * row, and one scale product per block and row for all 16 columns.
 *
 * The weights of 16 columns are unpacked once per call into a panel,
 * dword l of column c (the unsigned 5-bit values q of elements 4l..4l+3)
 * at w[b][l][c], so that a vector of 16 columns' dwords is one load; every
 * row of the batch then runs over the panel. The unsigned q (0..31) is the
 * operand of vpdpbusd / vpmaddubsw that must be unsigned; the -16 offset
 * is folded in through the activations' lane sums: p_l = q . a - 16 S_l,
 * S_l = a_4l + ... + a_4l+3, which matmul_kquant.c stores as
 * Q5P_MAGIC - 16 S_l (int32, see below) in the lane-sum slots of
 * the Q5_0 activation rows (the Q5_0 product reads no float lane sums). Rows of more than Q5P_MAX_BLOCKS
 * blocks go through q5_tile (the same integers and float steps). */
#define Q5P_COLS 16       /* columns per panel */
#define Q5P_MAX_BLOCKS 64 /* blocks per panel: 36 KiB on the stack, K <= 2048 */

typedef struct q5p_panel {
    uint32_t w[Q5P_MAX_BLOCKS][8][Q5P_COLS];
    float d[Q5P_MAX_BLOCKS][Q5P_COLS];
} q5p_panel;

/* Integer to float without vcvtdq2ps, which shares its port with the dot
 * products: the lane sums are within 4 * 16 * 127 < 2^22, so the int32
 * bits of Q5P_MAGIC + p are the float 1.5 * 2^23 + p, and subtracting
 * 1.5 * 2^23 gives (float)p exactly. The magic is added to the offsets
 * below, so the dot products start from it. */
#define Q5P_MAGIC 0x4B400000
#define Q5P_MAGIC_F 12582912.0f

/* Q5P_MAGIC - 16 S_l of block b of a Q5_0 activation row (see above). */
KQ_INLINE int32_t q5p_offset(const uint8_t *row, int64_t nb, int64_t b, int l) {
    int32_t v;
    memcpy(&v, qx_sums(row, nb) + b * KQ_LANES + l, sizeof v);
    return v;
}

#if KQ_X86
/* The 32 unsigned 5-bit values of a Q5_0 block in element order. */
KQ_INLINE __m256i q5p_unpack(const uint8_t *blk) {
    __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + 6)));
    both = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    __m256i nib = _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
#if defined(PW_ISA_AVX512VNNI_COPY)
    /* bit j of qh is byte j's mask bit */
    return _mm256_mask_add_epi8(nib, (__mmask32)kq_u32(blk + 2), nib, _mm256_set1_epi8(0x10));
#else
    __m256i qh = _mm256_set1_epi32((int)kq_u32(blk + 2));
    qh = _mm256_shuffle_epi8(qh, _mm256_setr_epi64x(0, 0x0101010101010101LL,
                                                    0x0202020202020202LL,
                                                    0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
    return _mm256_or_si256(nib, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
#endif
}

/* 8 vectors of 8 dwords (rows: columns) to 8 of 8 (rows: dword index),
 * each stored `stride` dwords apart from dst. */
KQ_INLINE void kq_transpose8_store(const __m256i r[8], uint32_t *dst, int stride) {
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    /* u0: dword 0 of columns 0-3 | dword 4 of columns 0-3, u1: 1 | 5, ... */
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i v0 = _mm256_unpacklo_epi64(t4, t6), v1 = _mm256_unpackhi_epi64(t4, t6);
    __m256i v2 = _mm256_unpacklo_epi64(t5, t7), v3 = _mm256_unpackhi_epi64(t5, t7);
    _mm256_store_si256((__m256i *)(dst + 0 * stride), _mm256_permute2x128_si256(u0, v0, 0x20));
    _mm256_store_si256((__m256i *)(dst + 1 * stride), _mm256_permute2x128_si256(u1, v1, 0x20));
    _mm256_store_si256((__m256i *)(dst + 2 * stride), _mm256_permute2x128_si256(u2, v2, 0x20));
    _mm256_store_si256((__m256i *)(dst + 3 * stride), _mm256_permute2x128_si256(u3, v3, 0x20));
    _mm256_store_si256((__m256i *)(dst + 4 * stride), _mm256_permute2x128_si256(u0, v0, 0x31));
    _mm256_store_si256((__m256i *)(dst + 5 * stride), _mm256_permute2x128_si256(u1, v1, 0x31));
    _mm256_store_si256((__m256i *)(dst + 6 * stride), _mm256_permute2x128_si256(u2, v2, 0x31));
    _mm256_store_si256((__m256i *)(dst + 7 * stride), _mm256_permute2x128_si256(u3, v3, 0x31));
}

/* A zero block, read in place of the columns past a partial panel's end
 * (their outputs are not stored); as long as the longest block. */
static const uint8_t kq_zero_block[KQ_Q6_K_BYTES] __attribute__((aligned(16), unused));

#if defined(PW_ISA_AVX512VNNI_COPY)
/* kq_transpose8_store's transpose on both 256-bit halves at once: r[c]
 * holds column c's 8 dwords in its low half and column c + 8's in its high
 * half; out[l] gets dword l of columns 0..15. */
KQ_INLINE void kq_transpose16x8(const __m512i r[8], __m512i out[8]) {
    __m512i t0 = _mm512_unpacklo_epi32(r[0], r[1]), t1 = _mm512_unpackhi_epi32(r[0], r[1]);
    __m512i t2 = _mm512_unpacklo_epi32(r[2], r[3]), t3 = _mm512_unpackhi_epi32(r[2], r[3]);
    __m512i t4 = _mm512_unpacklo_epi32(r[4], r[5]), t5 = _mm512_unpackhi_epi32(r[4], r[5]);
    __m512i t6 = _mm512_unpacklo_epi32(r[6], r[7]), t7 = _mm512_unpackhi_epi32(r[6], r[7]);
    __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    __m512i v0 = _mm512_unpacklo_epi64(t4, t6), v1 = _mm512_unpackhi_epi64(t4, t6);
    __m512i v2 = _mm512_unpacklo_epi64(t5, t7), v3 = _mm512_unpackhi_epi64(t5, t7);
    /* per 256-bit half, the low (lo) or high (hi) 128 bits of u and v */
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    out[0] = _mm512_permutex2var_epi64(u0, lo, v0);
    out[1] = _mm512_permutex2var_epi64(u1, lo, v1);
    out[2] = _mm512_permutex2var_epi64(u2, lo, v2);
    out[3] = _mm512_permutex2var_epi64(u3, lo, v3);
    out[4] = _mm512_permutex2var_epi64(u0, hi, v0);
    out[5] = _mm512_permutex2var_epi64(u1, hi, v1);
    out[6] = _mm512_permutex2var_epi64(u2, hi, v2);
    out[7] = _mm512_permutex2var_epi64(u3, hi, v3);
}

/* The same, row l stored `stride` dwords apart from dst. */
KQ_INLINE void kq_transpose16_store(const __m512i r[8], uint32_t *dst, int stride) {
    __m512i out[8];
    kq_transpose16x8(r, out);
    for (int l = 0; l < 8; l++) _mm512_store_si512(dst + l * stride, out[l]);
}

/* The weights of all 16 columns (cols real) of every block into the
 * panel: columns c and c + 8 unpacked together in one vector (q5p_unpack
 * on each half), then one 16-column transpose. */
KQ_INLINE void q5p_pack(q5p_panel *p, const uint8_t *w, int64_t wrow, int64_t nb, int cols) {
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const __m512i lo4 = _mm512_set1_epi8(0x0F), hb = _mm512_set1_epi8(0x10);
    const uint8_t *col[Q5P_COLS];
    for (int c = 0; c < Q5P_COLS; c++) col[c] = c < cols ? w + c * wrow : kq_zero_block;
    const int64_t step[2] = {0, KQ_Q5_0_BYTES};
    const __mmask16 real = (__mmask16)((1u << cols) - 1);
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)wrow));
    for (int64_t b = 0; b < nb; b++) {
        __m512i r[8];
        for (int c = 0; c < 8; c++) {
            const uint8_t *b0 = col[c] + step[c < cols] * b;
            const uint8_t *b1 = col[c + 8] + step[c + 8 < cols] * b;
            __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 6)));
            __m256i q1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + 6)));
            __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
            q = _mm512_and_si512(_mm512_srlv_epi64(q, shifts), lo4);
            /* bit j of each column's qh is its byte j's mask bit */
            __mmask64 set = _cvtu64_mask64((uint64_t)kq_u32(b0 + 2) | (uint64_t)kq_u32(b1 + 2) << 32);
            r[c] = _mm512_mask_add_epi8(q, set, q, hb);
        }
        kq_transpose16_store(r, &p->w[b][0][0], Q5P_COLS);
        /* the 16 scales: one gather of the blocks' first dwords, whose low
         * halves they are (a column at a time costs more than a decode's
         * single row of products) */
        __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), real, idx,
                                                w + b * KQ_Q5_0_BYTES, 1);
        _mm512_store_ps(p->d[b], _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
    }
}
#else
/* Columns c0..c0+7 (cols of them real, the rest zero) of every block into
 * the panel: each column's 8 dwords, then an 8 x 8 dword transpose. */
KQ_INLINE void q5p_pack8(q5p_panel *p, const uint8_t *w, int64_t wrow, int64_t nb, int c0,
                         int cols) {
    for (int64_t b = 0; b < nb; b++) {
        __m256i r[8];
        for (int c = 0; c < 8; c++) {
            if (c < cols) {
                const uint8_t *blk = w + (c0 + c) * wrow + b * KQ_Q5_0_BYTES;
                r[c] = q5p_unpack(blk);
                p->d[b][c0 + c] = kq_half(blk);
            } else {
                r[c] = _mm256_setzero_si256();
                p->d[b][c0 + c] = 0.0f;
            }
        }
        kq_transpose8_store(r, &p->w[b][0][c0], Q5P_COLS);
    }
}

KQ_INLINE void q5p_pack(q5p_panel *p, const uint8_t *w, int64_t wrow, int64_t nb, int cols) {
    q5p_pack8(p, w, wrow, nb, 0, cols < 8 ? cols : 8);
    q5p_pack8(p, w, wrow, nb, 8, cols > 8 ? cols - 8 : 0);
}
#endif

/* Four bytes of a quantized activation row as one int32 lane value (the
 * panels broadcast it to every column); unaligned-safe. */
KQ_INLINE int32_t kq_dword(const void *q) {
    int32_t v;
    memcpy(&v, q, sizeof v);
    return v;
}

#if defined(PW_ISA_AVX512VNNI_COPY)
#define Q5P_VLANES 16
/* Rows per register tile: two rows' 16 sums and temporaries fit the 32
 * registers and share each panel load (three measured the same). The
 * 16-register copies keep one. -D overrides are for measuring. */
#ifndef Q5P_TILE_ROWS
#define Q5P_TILE_ROWS 2
#endif
typedef __m512i q5p_vi;
typedef __m512 q5p_vf;
#define Q5P_DOT4(s, w, a) _mm512_dpbusd_epi32(s, w, a)
#define Q5P_LOADI(p) _mm512_load_si512(p)
#define Q5P_SET1(v) _mm512_set1_epi32(v)
#define Q5P_LOADF(p) _mm512_load_ps(p)
#define Q5P_SET1F(v) _mm512_set1_ps(v)
#define Q5P_ZEROF() _mm512_setzero_ps()
#define Q5P_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define Q5P_MULF(a, b) _mm512_mul_ps(a, b)
#define Q5P_ADDF(a, b) _mm512_add_ps(a, b)
/* the float of p from the bits of magic + p (see q5p_rows) */
#define Q5P_CVT(a) _mm512_sub_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(Q5P_MAGIC_F))
#else
#define Q5P_VLANES 8
#define Q5P_TILE_ROWS 1
typedef __m256i q5p_vi;
typedef __m256 q5p_vf;
#if defined(KQ_DPBUSD)
#define Q5P_DOT4(s, w, a) KQ_DPBUSD(s, w, a)
#else
/* q (0..31) times a: the pair sums stay within 2 * 31 * 127 */
#define Q5P_DOT4(s, w, a)                                                                      \
    _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)))
#endif
#define Q5P_LOADI(p) _mm256_load_si256((const __m256i *)(p))
#define Q5P_SET1(v) _mm256_set1_epi32(v)
#define Q5P_LOADF(p) _mm256_load_ps(p)
#define Q5P_SET1F(v) _mm256_set1_ps(v)
#define Q5P_ZEROF() _mm256_setzero_ps()
#define Q5P_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define Q5P_MULF(a, b) _mm256_mul_ps(a, b)
#define Q5P_ADDF(a, b) _mm256_add_ps(a, b)
#define Q5P_CVT(a) _mm256_sub_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(Q5P_MAGIC_F))
#endif

/* The first hc of a vector's columns to y: one store, masked when the
 * panel is not full (a copy through memory costs as much as a block). */
#if defined(PW_ISA_AVX512VNNI_COPY)
KQ_INLINE void kq_store_cols(float *y, __m512 v, int hc) {
    if (hc == 16) _mm512_storeu_ps(y, v);
    else _mm512_mask_storeu_ps(y, (__mmask16)((1u << hc) - 1), v);
}
#else
KQ_INLINE void kq_store_cols(float *y, __m256 v, int hc) {
    if (hc == 8) {
        _mm256_storeu_ps(y, v);
    } else {
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(hc), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y, m, v);
    }
}
#endif

/* rows x Q5P_VLANES outputs (panel columns c0.., hc of them real). Each
 * panel vector is loaded once for the tile's rows. */
KQ_INLINE void q5p_rows(float *y, int64_t ldy, const uint8_t *xa, int64_t xrow, int64_t nb,
                        const q5p_panel *p, int rows, int c0, int hc) {
    q5p_vf acc[Q5P_TILE_ROWS][KQ_LANES];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 8
        for (int l = 0; l < KQ_LANES; l++) acc[r][l] = Q5P_ZEROF();
    for (int64_t b = 0; b < nb; b++) {
        q5p_vf dw = Q5P_LOADF(&p->d[b][c0]);
        q5p_vf dd[Q5P_TILE_ROWS];
        const int8_t *a[Q5P_TILE_ROWS];
        const uint8_t *row[Q5P_TILE_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            row[r] = xa + r * xrow;
            a[r] = qx_values(row[r]) + b * KQ_QK;
            /* lane-wise d_w * d_a: the scalar product in every lane */
            dd[r] = Q5P_MULF(dw, Q5P_SET1F(qx_scales(row[r], nb)[b]));
        }
#pragma GCC unroll 8
        for (int l = 0; l < KQ_LANES; l++) {
            q5p_vi wv = Q5P_LOADI(&p->w[b][l][c0]);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                q5p_vi s = Q5P_DOT4(Q5P_SET1(q5p_offset(row[r], nb, b, l)), wv,
                                    Q5P_SET1(kq_dword(a[r] + 4 * l)));
                acc[r][l] = Q5P_FMA(dd[r], Q5P_CVT(s), acc[r][l]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) {
        /* the fixed lane tree, lane-wise over the columns */
        q5p_vf t = Q5P_ADDF(Q5P_ADDF(Q5P_ADDF(acc[r][0], acc[r][4]), Q5P_ADDF(acc[r][2], acc[r][6])),
                            Q5P_ADDF(Q5P_ADDF(acc[r][1], acc[r][5]), Q5P_ADDF(acc[r][3], acc[r][7])));
        kq_store_cols(y + r * ldy, t, hc);
    }
}

/* The next panel's weight bytes, asked for into L2 a few lines per row
 * tile while this panel's rows run, so that its pack does not wait on
 * memory (a prefill streams each weight matrix from memory once per
 * call). */
typedef struct kq_prefetch {
    const char *p, *end;
    int64_t per_tile;
} kq_prefetch;

KQ_INLINE kq_prefetch kq_prefetch_make(const uint8_t *from, const uint8_t *to, int64_t tiles) {
    kq_prefetch f = {(const char *)from, (const char *)to, 0};
    if (to > from) f.per_tile = ((to - from + 63) / 64 + tiles - 1) / (tiles > 0 ? tiles : 1);
    return f;
}

KQ_INLINE void kq_prefetch_step(kq_prefetch *f) {
    for (int64_t i = 0; i < f->per_tile && f->p < f->end; i++, f->p += 64)
        _mm_prefetch(f->p, _MM_HINT_T1);
}

#if defined(PW_ISA_AVX512VNNI_COPY)
/* Decode (one activation row): no panel. A panel's pack (its transpose,
 * stores and reloads) is shared by a batch's rows, but at T = 1 it was most
 * of the product's time (Q5_0 ran at a third of Q4_K's rate). Here each
 * output keeps its 8 lanes in one half of a 512-bit vector (columns 2p and
 * 2p + 1 of 16 per vector p), so a block's unpacked values (q5p_pack's
 * unsigned q, nibble | bit << 4) are the vpdpbusd operand as they are,
 * against the row's 32 activations in both halves, starting from the
 * row's Q5P_MAGIC - 16 S_l: lane l of column c is Q5P_MAGIC + p_l, the
 * same exact p_l as the panel's. The 16 scales come from one gather, their
 * products with d_a from one multiply, and each pair's from one permute;
 * the float steps (Q5P_CVT, one fma per lane and block, the lane tree of
 * q5p_rows) are the panel's, so the bits are. The next 16 columns' rows
 * are asked for into L2 while these run (decode streams every weight from
 * memory once per token). */
KQ_INLINE void q5d_tile(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow, int64_t nb,
                        int cols, kq_prefetch *pf) {
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const __m512i lo4 = _mm512_set1_epi8(0x0F), hb = _mm512_set1_epi8(0x10);
    const __m512 magic = _mm512_set1_ps(Q5P_MAGIC_F);
    const uint8_t *col[Q5P_COLS];
    int64_t step[Q5P_COLS];
    for (int c = 0; c < Q5P_COLS; c++) {
        col[c] = c < cols ? w + c * wrow : kq_zero_block;
        step[c] = c < cols ? KQ_Q5_0_BYTES : 0;
    }
    const __mmask16 real = (__mmask16)((1u << cols) - 1);
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)wrow));
    const int8_t *av = qx_values(xa);
    const float *ad = qx_scales(xa, nb);
    const float *ao = qx_sums(xa, nb); /* Q5P_MAGIC - 16 S_l, as int32 */
    __m512 acc[Q5P_COLS / 2];
#pragma GCC unroll 8
    for (int p = 0; p < Q5P_COLS / 2; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        kq_prefetch_step(pf);
        const __m512i a = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(av + b * KQ_QK)));
        const __m512i off =
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(ao + b * KQ_LANES)));
        __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), real, idx,
                                                w + b * KQ_Q5_0_BYTES, 1);
        const __m512 dd = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)),
                                        _mm512_set1_ps(ad[b]));
#pragma GCC unroll 8
        for (int p = 0; p < Q5P_COLS / 2; p++) {
            const uint8_t *b0 = col[2 * p] + step[2 * p] * b;
            const uint8_t *b1 = col[2 * p + 1] + step[2 * p + 1] * b;
            __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 6)));
            __m256i q1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + 6)));
            __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
            q = _mm512_and_si512(_mm512_srlv_epi64(q, shifts), lo4);
            /* bit j of each column's qh is its byte j's mask bit */
            __mmask64 set = _cvtu64_mask64((uint64_t)kq_u32(b0 + 2) | (uint64_t)kq_u32(b1 + 2) << 32);
            q = _mm512_mask_add_epi8(q, set, q, hb);
            __m512 pl = _mm512_sub_ps(_mm512_castsi512_ps(_mm512_dpbusd_epi32(off, q, a)), magic);
            const __m512 s = _mm512_permutexvar_ps(
                _mm512_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p,
                                  2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                                  2 * p + 1, 2 * p + 1, 2 * p + 1),
                dd);
            acc[p] = _mm512_fmadd_ps(s, pl, acc[p]);
        }
    }
    for (int p = 0; p < Q5P_COLS / 2; p++) {
        if (2 * p < cols) y[2 * p] = kq_hsum((pw_v8f)_mm512_castps512_ps256(acc[p]));
        if (2 * p + 1 < cols) y[2 * p + 1] = kq_hsum((pw_v8f)_mm512_extractf32x8_ps(acc[p], 1));
    }
}

/* Columns [j0, j1) of one row, 16 at a time (q5d_tile). */
KQ_INLINE void q5d_run(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow, int64_t k,
                       int64_t j0, int64_t j1) {
    const int64_t nb = k / KQ_QK;
    for (int64_t c0 = j0; c0 < j1; c0 += Q5P_COLS) {
        const int cols = j1 - c0 < Q5P_COLS ? (int)(j1 - c0) : Q5P_COLS;
        const int64_t c2 = c0 + 2 * Q5P_COLS < j1 ? c0 + 2 * Q5P_COLS : j1;
        kq_prefetch pf = kq_prefetch_make(w + (c0 + cols) * wrow, w + c2 * wrow, nb);
        q5d_tile(y + c0, xa, w + c0 * wrow, wrow, nb, cols, &pf);
    }
}
#endif

/* Columns [j0, j1) of every row: a panel of 16 columns, filled once and
 * run over by every row. A function of its own, never inlined: inside the
 * one function that also inlines every K-quant tile, the compiler spilled
 * the Q5_0 decode tile's pointers and counters to the stack, which cost
 * Gemma 3's decode (its q, gate and up are Q5_0) about a tenth. */
static __attribute__((noinline)) void q5p_run(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                       int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
#if defined(PW_ISA_AVX512VNNI_COPY)
    if (n_tokens == 1) {
        q5d_run(y, xa, w, wrow, k, j0, j1);
        return;
    }
#endif
    const int64_t nb = k / KQ_QK, xrow = PW_K_Q8_ROW_BYTES(k);
    _Alignas(64) q5p_panel panel;
    const int64_t t_full = n_tokens / Q5P_TILE_ROWS * Q5P_TILE_ROWS;
    for (int64_t c0 = j0; c0 < j1; c0 += Q5P_COLS) {
        const int cols = j1 - c0 < Q5P_COLS ? (int)(j1 - c0) : Q5P_COLS;
        q5p_pack(&panel, w + c0 * wrow, wrow, nb, cols);
        const int64_t c2 = c0 + 2 * Q5P_COLS < j1 ? c0 + 2 * Q5P_COLS : j1;
        kq_prefetch pf = kq_prefetch_make(w + (c0 + cols) * wrow, w + c2 * wrow,
                                          t_full / Q5P_TILE_ROWS * (Q5P_COLS / Q5P_VLANES));
        for (int h = 0; h < Q5P_COLS / Q5P_VLANES; h++) {
            const int hc0 = h * Q5P_VLANES;
            if (hc0 >= cols) break;
            const int hc = cols - hc0 < Q5P_VLANES ? cols - hc0 : Q5P_VLANES;
            for (int64_t t = 0; t < t_full; t += Q5P_TILE_ROWS) {
                kq_prefetch_step(&pf);
                q5p_rows(y + t * n + c0 + hc0, n, xa + t * xrow, xrow, nb, &panel, Q5P_TILE_ROWS,
                         hc0, hc);
            }
            for (int64_t t = t_full; t < n_tokens; t++)
                q5p_rows(y + t * n + c0 + hc0, n, xa + t * xrow, xrow, nb, &panel, 1, hc0, hc);
        }
    }
}
#endif

/* ---- K-quants: one column per vector lane ------------------------------ */

/* Q4_K, Q5_K and Q6_K for batches: the sequence of matmul_kquant.c with
 * the vectors' lanes across 16 (AVX-512) or 8 columns, one output per
 * lane, so that a super-block's one conversion and one or two fmas serve
 * 16 outputs. The integer sum of a scale group (Q4_K/Q5_K: a chunk of 32
 * elements, Q6_K: a group of 16) is formed unscaled, P = sum u a over its
 * elements, then is += sc * P, one multiply per group:
 *   - the VNNI copies: one vpdpbusd per 4 elements of 16 (8) columns,
 *     against the row's 4 activation bytes in every lane, then vpmulld;
 *   - AVX2 (no vpdpbusd): vpmaddubsw's word pairs summed by vpaddw over as
 *     many dwords as int16 holds (Q4_K 8, Q5_K 4, Q6_K 2: the sums stay
 *     within 8 * 2 * 15 * 127, 4 * 2 * 31 * 127 and 2 * 2 * 63 * 127 <
 *     2^15), then vpmaddwd against the scale as a word pair.
 * Q6_K's u is q + 32 (the unsigned operand): with vpdpbusd each group's
 * sum starts from -32 bs_g, which makes it sum q a; AVX2 adds the offset
 * -32 (sc_2l bs_2l + sc_2l+1 bs_2l+1) over l, one vpmaddwd per l of the
 * panel's word pairs against the row's (bs_2l, bs_2l+1). Q4_K/Q5_K's mp =
 * sum_j m_j (bs_2j + bs_2j+1) is 4 vpmaddwd of the pairs (m_2j, m_2j+1)
 * against the row's pair sums. Every integer is exact in any order, so the
 * bits are those of the scalar sequence.
 *
 * The weights of 16 columns are unpacked into a panel per slice of up to
 * KP_SB super-blocks, and every row of the batch runs over it: dword j of
 * a super-block (elements 4j..4j+3 as unsigned bytes: Q4_K/Q5_K q, Q6_K q
 * + 32) at w[s][j][c]; the group scales (dwords, or word pairs for AVX2);
 * the side words; d and dmin. A longer row runs over the slices in order,
 * its running sums kept in y between them (a float stored and loaded is
 * the same float), so K has no limit. */
#define KP_COLS 16
/* Super-blocks per panel slice: 4 make about 23 KiB, which L1 holds
 * (32 KiB on Zen 4, 48 KiB on Sapphire Rapids) while the pack writes it and
 * every row tile reads it. 8 (45 KiB) spilled to L2: the Q4_K pack took
 * 116 ns a 16-column super-block against 72 ns, and the product at 16 rows
 * streamed from memory measured 1.12x faster with 4 (Intel Xeon). -D
 * overrides are for measuring. */
#ifndef KP_SB
#define KP_SB 4
#endif
/* Fewer rows go through kq_tile, where the panel fill is not shared
 * enough. AVX-512 from 4 rows: its 4 x 2 batch tile is slower there than
 * the panel (Q4_K 8192 x 2048, 4 rows: 3.4 ms against 1.5 ms; 3 rows, as
 * 1-row tiles, 1.5 ms against 1.7 ms); AVX2's 4 x 1 tile is faster than
 * its panel below 8 rows (4 rows: 1.6 ms against 2.5 ms). */
#ifndef KP_MIN_ROWS
#if defined(PW_ISA_AVX512VNNI_COPY)
#define KP_MIN_ROWS 4
#else
#define KP_MIN_ROWS 8
#endif
#endif

typedef struct kp_panel {
    uint32_t w[KP_SB][64][KP_COLS];
    uint32_t sc[KP_SB][16][KP_COLS]; /* Q4_K/Q5_K: groups 0-7; Q6_K: 0-15 */
    uint32_t side[KP_SB][8][KP_COLS];
    float d[KP_SB][KP_COLS], dmin[KP_SB][KP_COLS];
} kp_panel;

#if KQ_X86
#if defined(PW_ISA_AVX512VNNI_COPY) || defined(PW_ISA_AVXVNNI_COPY)
#define KP_DPBUSD 1
#else
#define KP_DPBUSD 0
#endif

/* A column's super-block's panel words: the group scales (sa: groups 0-7,
 * sb: Q6_K's 8-15), as dwords for vpmulld or as word pairs (sc, sc) for
 * AVX2's vpmaddwd, and the side words (sd): Q4_K/Q5_K the mins m_0..m_7
 * (dwords 0-3), Q6_K words 2l, 2l+1 = (-32 sc_2l, -32 sc_2l+1) (|32 sc| <=
 * 4096 fits). */
KQ_INLINE void kp_col_scales(const uint8_t *blk, pw_dtype type, __m256i *sa, __m256i *sb,
                             __m256i *sd) {
    __m256i lo, hi;
    if (type == PW_Q6_K) {
        __m128i b = _mm_loadu_si128((const __m128i *)(blk + 192));
        lo = _mm256_cvtepi8_epi32(b);
        hi = _mm256_cvtepi8_epi32(_mm_srli_si128(b, 8));
        *sd = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 5));
    } else {
        uint64_t sc8, m8;
        kq_scales_mins_u64(blk + 4, &sc8, &m8);
        lo = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc8));
        hi = _mm256_setzero_si256();
        /* words 0-7: m_0..m_7, so dword j pairs m_2j, m_2j+1 */
        *sd = _mm256_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m8));
    }
#if !KP_DPBUSD
    const __m256i w16 = _mm256_set1_epi32(0xFFFF);
    lo = _mm256_or_si256(_mm256_and_si256(lo, w16), _mm256_slli_epi32(lo, 16));
    hi = _mm256_or_si256(_mm256_and_si256(hi, w16), _mm256_slli_epi32(hi, 16));
#endif
    *sa = lo;
    *sb = hi;
}

#if defined(PW_ISA_AVX512VNNI_COPY)
/* A 16 x 16 dword transpose in place: r[c] holds column c's dwords 0..15
 * on entry, r[q] dword q of columns 0..15 on return: two unpack stages
 * within 128-bit lanes, then two that move 128-bit lanes (64 shuffles for
 * 16 vectors). */
KQ_INLINE void kq_transpose16x16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i + m], 128-bit lane l: dword 4l + m of columns 4i..4i+3 */
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int m = 0; m < 4; m++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88);
        const __m512i v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xDD);
        const __m512i w0 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88);
        const __m512i w1 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xDD);
        r[m] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        r[4 + m] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        r[8 + m] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
        r[12 + m] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
    }
}

/* Dwords off/4 .. off/4 + 15 of 16 blocks (a 64-byte load each), as
 * r[q] = dword off/4 + q of blocks 0..15. */
KQ_INLINE void kq_load_transpose16(const uint8_t *const blk[16], int off, __m512i r[16]) {
    for (int c = 0; c < 16; c++) r[c] = _mm512_loadu_si512(blk[c] + off);
    kq_transpose16x16(r);
}

/* Dwords off/4 .. off/4 + 7 of 16 blocks (two 32-byte loads a vector),
 * as q[l] = dword off/4 + l of blocks 0..15. */
KQ_INLINE void kq_load_transpose8(const uint8_t *const blk[16], int off, __m512i q[8]) {
    __m512i r[8];
    for (int c = 0; c < 8; c++) r[c] = kq_load_pair(blk[c] + off, blk[c + 8] + off);
    kq_transpose16x8(r, q);
}

/* Dwords off/4 .. off/4 + 3 of 16 blocks: h[q] = dword off/4 + q of blocks
 * 0..15 (128-bit lane l of z[k] holds block 4l + k; two unpack stages). */
KQ_INLINE void kq_load_transpose4(const uint8_t *const blk[16], int off, __m512i h[4]) {
    __m512i z[4];
    for (int k = 0; k < 4; k++) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk[k] + off)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk[k + 4] + off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk[k + 8] + off)), 2);
        z[k] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk[k + 12] + off)), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    h[0] = _mm512_unpacklo_epi64(t0, t2);
    h[1] = _mm512_unpackhi_epi64(t0, t2);
    h[2] = _mm512_unpacklo_epi64(t1, t3);
    h[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* Super-block s of the panel's 16 columns: cols real ones, then the
 * zero block for the absent (zero scales, so zero sums). */
KQ_INLINE void kp_blocks(const uint8_t **blk, const uint8_t *w, int64_t wrow, int64_t bb,
                         int64_t s, int cols) {
    for (int c = 0; c < KP_COLS; c++) blk[c] = c < cols ? w + c * wrow + s * bb : kq_zero_block;
}

/* Q6_K's 16 columns of nsb super-blocks into the panel: columns c and
 * c + 8 unpacked together in one vector (kq_chunk_pair), then one
 * 16-column transpose per panel row group. Its 6-bit codes take as many
 * steps to form from ql and qh transposed first (three 16 x 16 transposes
 * and four operations a vector) as this, measured no faster. */
/* The scale words of 16 Q6_K blocks: sc[g][c] = sc_g of column c (a
 * dword), d[c], and dmin[c] = 0. */
KQ_INLINE void kp_pack_scales_q6(const uint8_t *const blk[KP_COLS], uint32_t (*sc)[KP_COLS],
                                 float *d, float *dmin) {
    for (int c = 0; c < KP_COLS; c++) {
        d[c] = kq_half(blk[c] + 208);
        dmin[c] = 0.0f;
    }
    __m512i sa[8], sb[8];
    for (int c = 0; c < 8; c++) {
        __m256i a0, b0, d0, a1, b1, d1; /* d0, d1 unused: vpdpbusd needs no offset */
        kp_col_scales(blk[c], PW_Q6_K, &a0, &b0, &d0);
        kp_col_scales(blk[c + 8], PW_Q6_K, &a1, &b1, &d1);
        sa[c] = kq_pair(a0, a1);
        sb[c] = kq_pair(b0, b1);
    }
    kq_transpose16_store(sa, &sc[0][0], KP_COLS);
    kq_transpose16_store(sb, &sc[8][0], KP_COLS);
}

KQ_INLINE void kp_pack_q6(kp_panel *p, const uint8_t *w, int64_t wrow, int64_t nsb, int64_t bb,
                          int cols) {
    const pw_dtype type = PW_Q6_K;
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk[KP_COLS];
        kp_blocks(blk, w, wrow, bb, s, cols);
        kp_pack_scales_q6(blk, p->sc[s], p->d[s], p->dmin[s]);
        for (int i = 0; i < 8; i++) {
            __m512i r[8];
            for (int c = 0; c < 8; c++)
                r[c] = kq_chunk_pair(blk[c], blk[c + 8], _mm512_setzero_si512(), type, i);
            kq_transpose16_store(r, &p->w[s][8 * i][0], KP_COLS);
        }
    }
}

/* The scale words of 16 Q4_K or Q5_K blocks (their first 16 bytes
 * transposed, then each 6-bit value picked out across the 16 lanes):
 * sc[i][c] = sc_i of column c (a dword: the word pair (sc_i, 0)), side[j][c]
 * = the word pair (m_2j, m_2j+1), d[c] and dmin[c]. */
KQ_INLINE void kp_pack_scales(const uint8_t *const blk[KP_COLS], uint32_t (*sc)[KP_COLS],
                              uint32_t (*side)[KP_COLS], float *d, float *dmin) {
    __m512i h[4];
    /* h[0]: d | dmin << 16; h[1..3]: the 12 scale bytes */
    kq_load_transpose4(blk, 0, h);
    _mm512_store_ps(d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0])));
    _mm512_store_ps(dmin, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16))));
    const __m512i m3f = _mm512_set1_epi32(0x3F), m0f = _mm512_set1_epi32(0x0F),
                  m30 = _mm512_set1_epi32(0x30);
    __m512i mins[8];
    for (int j = 0; j < 4; j++) {
        /* as kq_scales_mins_u64, byte j of each word */
        _mm512_store_si512(sc[j], _mm512_and_si512(_mm512_srli_epi32(h[1], 8 * j), m3f));
        mins[j] = _mm512_and_si512(_mm512_srli_epi32(h[2], 8 * j), m3f);
        _mm512_store_si512(sc[4 + j],
                           _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 8 * j), m0f),
                                           _mm512_and_si512(_mm512_srli_epi32(h[1], 8 * j + 2), m30)));
        mins[4 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 8 * j + 4), m0f),
                                      _mm512_and_si512(_mm512_srli_epi32(h[2], 8 * j + 2), m30));
    }
    /* side dword j: the word pair (m_2j, m_2j+1) */
    for (int j = 0; j < 4; j++)
        _mm512_store_si512(side[j], _mm512_or_si512(mins[2 * j], _mm512_slli_epi32(mins[2 * j + 1], 16)));
}

/* All 16 columns (cols real; the others read a zero block) of nsb
 * super-blocks into the panel. Q4_K/Q5_K: the packed bytes are transposed
 * as they are, 16 columns' dwords at a time, and unpacked after the
 * transpose, two panel rows from each: a dword of qs holds 4 elements of
 * two chunks (low nibbles: chunk 2m, high: 2m + 1), and one of Q5_K's qh
 * the fifth bits of 4 elements of all eight chunks, so the transposes move
 * the block's bytes once, not the unpacked panel's twice (two 16 x 16
 * transposes a super-block where unpacking first took eight 16 x 8; the
 * panel fill from 28 to 21 us for 336 columns x 2048, weights in L2). The
 * scales and mins go the same way: the 12 packed bytes of 16 columns
 * transposed, then each 6-bit value picked out across the 16 lanes. */
KQ_INLINE void kp_pack(kp_panel *p, const uint8_t *w, int64_t wrow, int64_t nsb, pw_dtype type,
                       int64_t bb, int cols) {
    if (type == PW_Q6_K) {
        kp_pack_q6(p, w, wrow, nsb, bb, cols);
        return;
    }
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk[KP_COLS];
        kp_blocks(blk, w, wrow, bb, s, cols);
        kp_pack_scales(blk, p->sc[s], p->side[s], p->d[s], p->dmin[s]);
        /* q[i]: qs dword i of the 16 columns; Q5_K's qh dwords 0-7 first */
        __m512i q[40];
        if (type == PW_Q4_K) {
            kq_load_transpose16(blk, 16, q + 8);
            kq_load_transpose16(blk, 80, q + 24);
        } else {
            kq_load_transpose8(blk, 16, q);       /* qh */
            kq_load_transpose16(blk, 48, q + 8);  /* qs 0-15 */
            kq_load_transpose16(blk, 112, q + 24); /* qs 16-31 */
        }
        const __m512i m10 = _mm512_set1_epi8(0x10);
        for (int m = 0; m < 4; m++)
            for (int hi = 0; hi < 2; hi++)
                for (int j = 0; j < 8; j++) {
                    const int i = 2 * m + hi; /* the chunk */
                    const __m512i v = q[8 + 8 * m + j];
                    __m512i u = hi ? _mm512_and_si512(_mm512_srli_epi32(v, 4), lo4) : _mm512_and_si512(v, lo4);
                    if (type == PW_Q5_K) {
                        const __m512i qb = q[j];
                        const __m512i hb = i < 4 ? _mm512_slli_epi32(qb, 4 - i)
                                           : i == 4 ? qb : _mm512_srli_epi32(qb, i - 4);
                        u = _mm512_or_si512(u, _mm512_and_si512(hb, m10));
                    }
                    _mm512_store_si512(p->w[s][8 * i + j], u);
                }
    }
}
#else
/* Columns c0..c0+7 (cols of them real, the rest zero) of nsb super-blocks
 * into the panel. */
KQ_INLINE void kp_pack8(kp_panel *p, const uint8_t *w, int64_t wrow, int64_t nsb, pw_dtype type,
                        int64_t bb, int c0, int cols) {
    for (int64_t s = 0; s < nsb; s++) {
        kq_col col[8];
        __m256i sa[8], sb[8], sd[8];
        for (int c = 0; c < 8; c++) {
            /* an absent column reads a zero block: zero scales */
            const uint8_t *blk = c < cols ? w + (c0 + c) * wrow + s * bb : kq_zero_block;
            col[c] = kq_col_make(blk, type);
            p->d[s][c0 + c] = col[c].d;
            p->dmin[s][c0 + c] = col[c].dmin;
            kp_col_scales(blk, type, &sa[c], &sb[c], &sd[c]);
        }
        kq_transpose8_store(sa, &p->sc[s][0][c0], KP_COLS);
        if (type == PW_Q6_K) kq_transpose8_store(sb, &p->sc[s][8][c0], KP_COLS);
        if (type != PW_Q6_K || !KP_DPBUSD) /* VNNI: Q6_K's offset starts its sums */
            kq_transpose8_store(sd, &p->side[s][0][c0], KP_COLS);
        for (int i = 0; i < 8; i++) {
            __m256i r[8];
            for (int c = 0; c < 8; c++) r[c] = kq_chunk(&col[c], type, i);
            kq_transpose8_store(r, &p->w[s][8 * i][c0], KP_COLS);
        }
    }
}

KQ_INLINE void kp_pack(kp_panel *p, const uint8_t *w, int64_t wrow, int64_t nsb, pw_dtype type,
                       int64_t bb, int cols) {
    kp_pack8(p, w, wrow, nsb, type, bb, 0, cols < 8 ? cols : 8);
    kp_pack8(p, w, wrow, nsb, type, bb, 8, cols > 8 ? cols - 8 : 0);
}
#endif

#if defined(PW_ISA_AVX512VNNI_COPY)
#define KP_VLANES 16
/* Rows per register tile: four rows' integer sums share each panel load
 * (the activations are embedded broadcasts). -D overrides are for
 * measuring. */
#ifndef KP_TILE_ROWS
#define KP_TILE_ROWS 4
#endif
typedef __m512i kp_vi;
typedef __m512 kp_vf;
#define KP_LOADI(p) _mm512_load_si512(p)
#define KP_SET1(v) _mm512_set1_epi32(v)
#define KP_ZERO() _mm512_setzero_si512()
#define KP_DOT4(s, u, a) _mm512_dpbusd_epi32(s, u, a)
#define KP_MULLO(a, b) _mm512_mullo_epi32(a, b)
#define KP_ADDI(a, b) _mm512_add_epi32(a, b)
#define KP_DOTW(s, p, w) _mm512_dpwssd_epi32(s, p, w)
#define KP_LOADF(p) _mm512_load_ps(p)
#define KP_SET1F(v) _mm512_set1_ps(v)
#define KP_ZEROF() _mm512_setzero_ps()
#define KP_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KP_FNMA(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define KP_MULF(a, b) _mm512_mul_ps(a, b)
#define KP_CVT(a) _mm512_cvtepi32_ps(a)
KQ_INLINE __m512 kp_load_cols(const float *y, int hc) {
    return hc == 16 ? _mm512_loadu_ps(y) : _mm512_maskz_loadu_ps((__mmask16)((1u << hc) - 1), y);
}
#else
#define KP_VLANES 8
#ifndef KP_TILE_ROWS
#define KP_TILE_ROWS 2
#endif
typedef __m256i kp_vi;
typedef __m256 kp_vf;
#define KP_LOADI(p) _mm256_load_si256((const __m256i *)(p))
#define KP_SET1(v) _mm256_set1_epi32(v)
#define KP_ZERO() _mm256_setzero_si256()
#define KP_MULLO(a, b) _mm256_mullo_epi32(a, b)
#define KP_ADDI(a, b) _mm256_add_epi32(a, b)
#if defined(PW_ISA_AVXVNNI_COPY)
#define KP_DOT4(s, u, a) _mm256_dpbusd_avx_epi32(s, u, a)
#define KP_DOTW(s, p, w) _mm256_dpwssd_avx_epi32(s, p, w)
#else
#define KP_DOTW(s, p, w) _mm256_add_epi32(s, _mm256_madd_epi16(p, w))
#endif
#define KP_LOADF(p) _mm256_load_ps(p)
#define KP_SET1F(v) _mm256_set1_ps(v)
#define KP_ZEROF() _mm256_setzero_ps()
#define KP_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KP_FNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define KP_MULF(a, b) _mm256_mul_ps(a, b)
#define KP_CVT(a) _mm256_cvtepi32_ps(a)
KQ_INLINE __m256 kp_load_cols(const float *y, int hc) {
    if (hc == 8) return _mm256_loadu_ps(y);
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(hc), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(y, m);
}
#endif

/* The vpdpbusd chains of a row's group sum (kp_rows): Q4_K's two sums of
 * 16 elements and Q5_K's four of 8 each fit a signed word, so each takes
 * its scale in one vpdpwssd; Q6_K's one sum of 16 takes vpmulld (two
 * chains measured 0.96-0.98x from L2). -D overrides are for measuring. */
#ifndef KP_CHAINS_Q4_K
#define KP_CHAINS_Q4_K 2
#endif
#ifndef KP_CHAINS_Q5_K
#if defined(PW_ISA_AVX512VNNI_COPY)
#define KP_CHAINS_Q5_K 4
#else
/* the 256-bit copies' 16 registers: four chains of two rows spilled
 * (0.93x at 128 rows, AVX-VNNI) */
#define KP_CHAINS_Q5_K 1
#endif
#endif
#ifndef KP_CHAINS_Q6_K
#define KP_CHAINS_Q6_K 1
#endif
#define KP_MAX_CHAINS 4 /* sums a row that kp_rows holds */
_Static_assert(KP_CHAINS_Q4_K <= KP_MAX_CHAINS && KP_CHAINS_Q5_K <= KP_MAX_CHAINS &&
                   KP_CHAINS_Q6_K <= KP_MAX_CHAINS,
               "kp_rows holds at most KP_MAX_CHAINS sums a row");
KQ_INLINE int kp_chains(pw_dtype type) {
    return type == PW_Q4_K ? KP_CHAINS_Q4_K : type == PW_Q5_K ? KP_CHAINS_Q5_K : KP_CHAINS_Q6_K;
}
/* Whether each chain's sum fits a signed word (so that vpdpwssd against
 * the scale dword (sc, 0) adds sum * sc exactly): the elements of a chain
 * times the largest |u a|, u up to 15 (Q4_K) or 31 (Q5_K), below 2^15.
 * Q6_K's sums start from the offset -32 bs_g and never take this path. */
KQ_INLINE bool kp_word_sums(pw_dtype type) {
    return type != PW_Q6_K &&
           8 / kp_chains(type) * 4 * (type == PW_Q4_K ? 15 : 31) * 128 < 32768;
}

/* rows x KP_VLANES outputs (panel columns c0.., hc of them real) over the
 * panel's ns super-blocks, which are the row's s0..s0+ns-1; the running
 * sums start from +0 (s0 = 0) or from y. Each panel vector is loaded once
 * for the tile's rows. */
KQ_INLINE void kp_rows(float *y, int64_t ldy, const uint8_t *xa, int64_t xrow, int64_t nsb,
                       int64_t s0, int64_t ns, const kp_panel *p, pw_dtype type, int c0, int hc,
                       int rows) {
    const int gd = type == PW_Q6_K ? 4 : 8; /* dwords per scale group */
    kp_vf acc[KP_TILE_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) acc[r] = s0 == 0 ? KP_ZEROF() : kp_load_cols(y + r * ldy, hc);
    for (int64_t s = 0; s < ns; s++) {
        const int64_t sb = s0 + s;
        const int8_t *a[KP_TILE_ROWS];
        const int16_t *bs[KP_TILE_ROWS];
        kp_vi is[KP_TILE_ROWS];
        /* per row: Q4_K/Q5_K the pair sums bs_2l + bs_2l+1 as words (|.| <=
         * 32 * 127), the mins' operand; Q6_K (VNNI) -32 bs_g as dwords,
         * where each group's dot product starts, which makes it the sum of
         * q a (q = u - 32): no offset term */
        _Alignas(64) int32_t aside[KP_TILE_ROWS][16];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            a[r] = kx_values(xa + r * xrow) + sb * KQ_QKK;
            bs[r] = kx_sums(xa + r * xrow, nsb) + 16 * sb;
            is[r] = KP_ZERO();
            const __m256i b16 = _mm256_loadu_si256((const __m256i *)bs[r]);
            if (type != PW_Q6_K) {
                const __m256i pr = _mm256_madd_epi16(b16, _mm256_set1_epi16(1));
                _mm_store_si128((__m128i *)aside[r], _mm_packs_epi32(_mm256_castsi256_si128(pr),
                                                                     _mm256_extracti128_si256(pr, 1)));
            } else if (KP_DPBUSD) {
                const __m256i z = _mm256_setzero_si256();
                const __m256i lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(b16));
                const __m256i hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(b16, 1));
                _mm256_store_si256((__m256i *)aside[r], _mm256_sub_epi32(z, _mm256_slli_epi32(lo, 5)));
                _mm256_store_si256((__m256i *)(aside[r] + 8), _mm256_sub_epi32(z, _mm256_slli_epi32(hi, 5)));
            }
        }
        const int groups = 64 / gd;
#pragma GCC unroll 16
        for (int g = 0; g < groups; g++) {
            const kp_vi scv = KP_LOADI(&p->sc[s][g][c0]);
#if KP_DPBUSD
            /* nch sums per row (kp_chains), dword j into sum j % nch: the
             * integer sums are exact in any order */
            const int nch = kp_chains(type);
            kp_vi pg[KP_MAX_CHAINS][KP_TILE_ROWS];
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                pg[0][r] = type == PW_Q6_K ? KP_SET1(aside[r][g]) : KP_ZERO();
#pragma GCC unroll 4
                for (int h = 1; h < nch; h++) pg[h][r] = KP_ZERO();
            }
#pragma GCC unroll 8
            for (int j = gd * g; j < gd * g + gd; j++) {
                const kp_vi wv = KP_LOADI(&p->w[s][j][c0]);
                const int h = (j - gd * g) % nch;
#pragma GCC unroll 8
                for (int r = 0; r < rows; r++)
                    pg[h][r] = KP_DOT4(pg[h][r], wv, KP_SET1(kq_dword(a[r] + 4 * j)));
            }
            if (kp_word_sums(type)) {
                /* a word-sized sum's high word is its sign: one vpdpwssd
                 * for vpmulld's two operations and the add */
#pragma GCC unroll 8
                for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
                    for (int h = 0; h < nch; h++) is[r] = KP_DOTW(is[r], pg[h][r], scv);
            } else {
#pragma GCC unroll 8
                for (int r = 0; r < rows; r++) {
                    kp_vi t = pg[0][r];
#pragma GCC unroll 4
                    for (int h = 1; h < nch; h++) t = KP_ADDI(t, pg[h][r]);
                    is[r] = KP_ADDI(is[r], KP_MULLO(t, scv));
                }
            }
#if defined(PW_ISA_AVX512VNNI_COPY)
            /* An empty asm that takes each row's sum, so the compiler keeps
             * the groups in order: without it GCC hoisted every group's
             * zeroed dot-product registers (8 groups x 4 rows) to the top
             * of the super-block and spilled sums to the stack. (The
             * 256-bit copies' 2-row tiles measured no faster with it.) */
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) __asm__("" : "+v"(is[r]));
#endif
#else
            /* dwords per word sum (see above) */
            const int ws = type == PW_Q4_K ? 8 : type == PW_Q5_K ? 4 : 2;
#pragma GCC unroll 4
            for (int j0 = gd * g; j0 < gd * g + gd; j0 += ws) {
                kp_vi pw[KP_TILE_ROWS];
#pragma GCC unroll 8
                for (int j = j0; j < j0 + ws; j++) {
                    const kp_vi wv = KP_LOADI(&p->w[s][j][c0]);
#pragma GCC unroll 8
                    for (int r = 0; r < rows; r++) {
                        kp_vi t = _mm256_maddubs_epi16(wv, KP_SET1(kq_dword(a[r] + 4 * j)));
                        pw[r] = j == j0 ? t : _mm256_add_epi16(pw[r], t);
                    }
                }
#pragma GCC unroll 8
                for (int r = 0; r < rows; r++) is[r] = KP_DOTW(is[r], pw[r], scv);
            }
#endif
        }
        const kp_vf dwv = KP_LOADF(&p->d[s][c0]), dmv = KP_LOADF(&p->dmin[s][c0]);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            /* Q4_K/Q5_K: mp, (m_2j, m_2j+1) against the pair sums; Q6_K
             * without vpdpbusd: the offset, added to is */
            kp_vi side = KP_ZERO();
            if (type != PW_Q6_K) {
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++)
                    side = KP_DOTW(side, KP_LOADI(&p->side[s][j][c0]), KP_SET1(aside[r][j]));
            } else if (!KP_DPBUSD) {
#pragma GCC unroll 8
                for (int l = 0; l < KQ_LANES; l++)
                    side = KP_DOTW(side, KP_LOADI(&p->side[s][l][c0]), KP_SET1(kq_dword(bs[r] + 2 * l)));
            }
            /* d * d_a, dmin * d_a: the scalar products, lane by lane */
            const float da = kx_scales(xa + r * xrow, nsb)[sb];
            if (type == PW_Q6_K) {
                acc[r] = KP_FMA(KP_MULF(dwv, KP_SET1F(da)), KP_CVT(KP_ADDI(is[r], side)), acc[r]);
            } else {
                kp_vf t = KP_FMA(KP_MULF(dwv, KP_SET1F(da)), KP_CVT(is[r]), acc[r]);
                acc[r] = KP_FNMA(KP_MULF(dmv, KP_SET1F(da)), KP_CVT(side), t);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) kq_store_cols(y + r * ldy, acc[r], hc);
}

/* The next slice's weight bytes (rows of a column range, a byte range of
 * each), asked for into L2 a few lines per row tile while this slice's
 * rows run, so that its pack does not wait on memory. */
typedef struct kp_prefetch {
    const char *p;
    int64_t stride, lines;
    int rows, per_tile, r;
    bool l1; /* into L1 (kl_run's small slices) rather than L2 */
} kp_prefetch;

KQ_INLINE kp_prefetch kp_prefetch_make(const uint8_t *p, int64_t stride, int64_t bytes, int rows,
                                       int64_t tiles, bool l1) {
    if (tiles < 1) tiles = 1;
    /* whole rows per tile: a row's lines are one short loop, where a
     * line at a time cost a few instructions of bookkeeping each (about
     * a sixth of a 4-row product's time, weights in L2) */
    kp_prefetch f = {(const char *)p, stride, (bytes + 63) / 64 + 1, rows,
                     (int)((rows + tiles - 1) / tiles), 0, l1};
    return f;
}

KQ_INLINE void kp_prefetch_step(kp_prefetch *f) {
    for (int i = 0; i < f->per_tile && f->r < f->rows; i++, f->r++) {
        const char *row = f->p + f->r * f->stride;
        if (f->l1)
            for (int64_t l = 0; l < f->lines; l++) _mm_prefetch(row + l * 64, _MM_HINT_T0);
        else
            for (int64_t l = 0; l < f->lines; l++) _mm_prefetch(row + l * 64, _MM_HINT_T1);
    }
}

/* The prefetch of what follows the slice of columns c0..c0+cols-1 that
 * starts at super-block s0 (slices of `slice` super-blocks): these
 * columns' next slice, or the next 16 columns' first. */
KQ_INLINE kp_prefetch kp_prefetch_next(const uint8_t *w, int64_t wrow, int64_t bb, int64_t nsb,
                                       int64_t slice, int64_t s0, int64_t c0, int cols,
                                       int64_t j1, int64_t tiles, bool l1) {
    if (s0 + slice < nsb) {
        const int64_t nn = nsb - s0 - slice < slice ? nsb - s0 - slice : slice;
        return kp_prefetch_make(w + c0 * wrow + (s0 + slice) * bb, wrow, nn * bb, cols, tiles, l1);
    }
    const int64_t c1 = c0 + cols, cn = j1 - c1 < KP_COLS ? j1 - c1 : KP_COLS;
    const int64_t nn = nsb < slice ? nsb : slice;
    return kp_prefetch_make(w + c1 * wrow, wrow, nn * bb, (int)cn, tiles, l1);
}

/* Columns [j0, j1) of every row: a panel of 16 columns and up to KP_SB
 * super-blocks, filled once and run over by every row; then the next
 * slice of the same columns, then the next 16 columns. */
KQ_INLINE void kp_run(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow, pw_dtype type,
                      int64_t bb, int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    const int64_t nsb = k / KQ_QKK, xrow = PW_K_Q8K_ROW_BYTES(k);
    const int64_t tiles = (n_tokens / KP_TILE_ROWS + n_tokens % KP_TILE_ROWS) * (KP_COLS / KP_VLANES);
    _Alignas(64) kp_panel panel;
    for (int64_t c0 = j0; c0 < j1; c0 += KP_COLS) {
        const int cols = j1 - c0 < KP_COLS ? (int)(j1 - c0) : KP_COLS;
        for (int64_t s0 = 0; s0 < nsb; s0 += KP_SB) {
            const int64_t ns = nsb - s0 < KP_SB ? nsb - s0 : KP_SB;
            kp_pack(&panel, w + c0 * wrow + s0 * bb, wrow, ns, type, bb, cols);
            kp_prefetch pf = kp_prefetch_next(w, wrow, bb, nsb, KP_SB, s0, c0, cols, j1, tiles, false);
            for (int h = 0; h < KP_COLS / KP_VLANES; h++) {
                const int hc0 = h * KP_VLANES;
                if (hc0 >= cols) break;
                const int hc = cols - hc0 < KP_VLANES ? cols - hc0 : KP_VLANES;
                int64_t t = 0;
                for (; t + KP_TILE_ROWS <= n_tokens; t += KP_TILE_ROWS) {
                    kp_prefetch_step(&pf);
                    kp_rows(y + t * n + c0 + hc0, n, xa + t * xrow, xrow, nsb, s0, ns, &panel, type,
                            hc0, hc, KP_TILE_ROWS);
                }
                for (; t < n_tokens; t++) {
                    kp_prefetch_step(&pf);
                    kp_rows(y + t * n + c0 + hc0, n, xa + t * xrow, xrow, nsb, s0, ns, &panel, type,
                            hc0, hc, 1);
                }
            }
        }
    }
}

/* One function of its own per type, never inlined (as q5p_run): inlined
 * beside the K-quant tiles, the panel code's stack panel and its
 * registers changed how the compiler allocated the decode tiles' pointers
 * and counters (Gemma 3's o shard at T = 1: 4.7 -> 7.6 us). */
#define KP_RUN_TYPED(T, BYTES)                                                                 \
    static __attribute__((noinline)) void kp_run_##T(float *y, const uint8_t *xa,              \
                                                    const uint8_t *w, int64_t wrow,            \
                                                    int64_t n_tokens, int64_t n, int64_t k,    \
                                                    int64_t j0, int64_t j1) {                  \
        kp_run(y, xa, w, wrow, T, BYTES, n_tokens, n, k, j0, j1);                              \
    }
KP_RUN_TYPED(PW_Q4_K, KQ_Q4_K_BYTES)
KP_RUN_TYPED(PW_Q5_K, KQ_Q5_K_BYTES)
KP_RUN_TYPED(PW_Q6_K, KQ_Q6_K_BYTES)
#undef KP_RUN_TYPED

#if defined(PW_ISA_AVX512VNNI_COPY)
#include "ops/cpu/matmul_kquant_lanes_body.h"
#endif
#endif

/* ---- Q5_0's activation offsets ------------------------------------------- */

#if KQ_X86
/* Q5P_MAGIC - 16 S_l into lane-sum slot l of every block of n_rows Q8
 * activation rows (the panels' form, see q5p_rows; matmul_kquant.c).
 * S_l, the sum of four int8 values, is exact either way it is formed. */
void PW_ISA(pw_k_q5_0_offsets)(uint8_t *xa, int64_t n_rows, int64_t k) {
    const int64_t nb = k / KQ_QK;
    const __m256i ones8 = _mm256_set1_epi8(1), magic = _mm256_set1_epi32(Q5P_MAGIC);
    for (int64_t t = 0; t < n_rows; t++) {
        uint8_t *row = xa + t * PW_K_Q8_ROW_BYTES(k);
        const int8_t *q = qx_values(row);
        uint8_t *sums = row + nb * (KQ_QK + 4);
        for (int64_t b = 0; b < nb; b++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(q + b * KQ_QK));
#if defined(KQ_DPBUSD)
            __m256i sl = KQ_DPBUSD(_mm256_setzero_si256(), ones8, a);
#else
            __m256i sl = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), _mm256_set1_epi16(1));
#endif
            _mm256_storeu_si256((__m256i *)(sums + b * KQ_LANES * sizeof(float)),
                                _mm256_sub_epi32(magic, _mm256_slli_epi32(sl, 4)));
        }
    }
}
#endif

/* ---- the K-quant activation quantizer, vectorised ---------------------- */

#if KQ_X86
/* pw_k_q8k_quantize_rows (matmul_kquant.c) 8 values at a time, the same
 * bytes: the max of |x| is order-free (vmaxps(a, m) is a > m ? a : m, so a
 * NaN is passed over as in the C loop); x * (127 / amax) is the same
 * product; vcvtps2dq rounds to nearest even like rintf, and gives INT_MIN
 * for NaN and out-of-range values, which the clamp turns into -127, as the
 * C code does; the sums are exact. */
#if defined(PW_ISA_AVX512VNNI_COPY)
/* 16 values at a time, the same steps (vmaxps, the product, vcvtps2dq, the
 * clamp from below; the packs saturate from above at 127 as the clamp
 * does). The group sums come from the packed bytes: vpsadbw of a ^ 0x80
 * against zero sums eight a + 128 exactly, two of them a group of 16 plus
 * 2048. */
void PW_ISA(pw_k_q8k_quantize_rows)(uint8_t *xa, const float *x, int64_t n_rows, int64_t k) {
    const int64_t nsb = k / KQ_QKK;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    const __m512i lo = _mm512_set1_epi32(-127);
    /* the packs leave lane j's four bytes of vector u at dword 4j + u */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int64_t t = 0; t < n_rows; t++) {
        uint8_t *row = xa + t * PW_K_Q8K_ROW_BYTES(k);
        float *dv = (float *)(row + nsb * KQ_QKK);
        int16_t *bsv = (int16_t *)(row + nsb * (KQ_QKK + 4));
        for (int64_t b = 0; b < nsb; b++) {
            const float *xb = x + t * k + b * KQ_QKK;
            /* four chains (vmaxps has latency 4); the max is order-free */
            __m512 m[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                           _mm512_setzero_ps()};
            for (int j = 0; j < KQ_QKK; j += 64)
                for (int u = 0; u < 4; u++)
                    m[u] = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(xb + j + 16 * u), absmask),
                                         m[u]);
            const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]),
                                                                  _mm512_max_ps(m[2], m[3])));
            const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
            int8_t *q = (int8_t *)row + b * KQ_QKK;
            __m512i pair[2];
            for (int j = 0; j < KQ_QKK; j += 64) {
                __m512i v[4];
                for (int u = 0; u < 4; u++) {
                    __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + j + 16 * u), id));
                    v[u] = _mm512_max_epi32(r, lo);
                }
                __m512i p = _mm512_packs_epi16(_mm512_packs_epi32(v[0], v[1]),
                                               _mm512_packs_epi32(v[2], v[3]));
                p = _mm512_permutexvar_epi32(order, p);
                _mm512_storeu_si512(q + j, p);
                /* qword 2g' + h: bytes 8h.. of group g' of these 64, + 1024 */
                __m512i sad = _mm512_sad_epu8(_mm512_xor_si512(p, bias), _mm512_setzero_si512());
                sad = _mm512_add_epi64(sad, _mm512_shuffle_epi32(sad, _MM_PERM_BADC));
                if (j % 128 == 0) pair[0] = sad;
                else pair[1] = sad;
                if (j % 128 == 64) {
                    /* groups j/16 - 7 .. j/16 in the even qwords */
                    __m512i g8 = _mm512_permutex2var_epi64(pair[0], even, pair[1]);
                    __m128i w8 = _mm_sub_epi16(_mm512_cvtepi64_epi16(g8), _mm_set1_epi16(2048));
                    _mm_storeu_si128((__m128i *)(bsv + 16 * b + (j - 64) / 16), w8);
                }
            }
            memcpy(dv + b, &(float){amax / 127.0f}, sizeof(float));
        }
    }
}
#else
void PW_ISA(pw_k_q8k_quantize_rows)(uint8_t *xa, const float *x, int64_t n_rows, int64_t k) {
    const int64_t nsb = k / KQ_QKK;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t t = 0; t < n_rows; t++) {
        uint8_t *row = xa + t * PW_K_Q8K_ROW_BYTES(k);
        float *dv = (float *)(row + nsb * KQ_QKK);
        int16_t *bsv = (int16_t *)(row + nsb * (KQ_QKK + 4));
        for (int64_t b = 0; b < nsb; b++) {
            const float *xb = x + t * k + b * KQ_QKK;
            /* four chains (vmaxps has latency 4); the max is order-free */
            __m256 m4[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                            _mm256_setzero_ps()};
            for (int j = 0; j < KQ_QKK; j += 32)
                for (int u = 0; u < 4; u++)
                    m4[u] = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + j + 8 * u), absmask),
                                          m4[u]);
            __m256 m = _mm256_max_ps(_mm256_max_ps(m4[0], m4[1]), _mm256_max_ps(m4[2], m4[3]));
            m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
            m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0x4E));
            m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0xB1));
            const float amax = _mm256_cvtss_f32(m);
            const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
            int8_t *q = (int8_t *)row + b * KQ_QKK;
            for (int j = 0; j < KQ_QKK; j += 32) {
                __m256i v[4];
                for (int u = 0; u < 4; u++) {
                    __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j + 8 * u), id));
                    v[u] = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
                }
                /* two groups of 16: the exact sums */
                for (int g = 0; g < 2; g++) {
                    __m256i s = _mm256_add_epi32(v[2 * g], v[2 * g + 1]);
                    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
                    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
                    bsv[16 * b + j / 16 + g] = (int16_t)_mm_cvtsi128_si32(h);
                }
                __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]),
                                               _mm256_packs_epi32(v[2], v[3]));
                _mm256_storeu_si256((__m256i *)(q + j), _mm256_permutevar8x32_epi32(p, order));
            }
            memcpy(dv + b, &(float){amax / 127.0f}, sizeof(float));
        }
    }
}
#endif
#endif

/* ---- loops over tiles ---------------------------------------------------- */

#ifndef KQ_KTILE
#define KQ_KTILE(rows, cols)                                                                   \
    kq_tile(y + j, n, xa, xrow, w + j * wrow, wrow, nb, type, bb, rows, cols)
#endif
#ifndef KQ_Q5TILE
#define KQ_Q5TILE(rows, cols)                                                                  \
    q5_tile(y + j, n, xa, xrow, w + j * wrow, wrow, nb, type, bb, rows, cols)
#endif
#define KQ_TILE(rows, cols) (super ? KQ_KTILE(rows, cols) : KQ_Q5TILE(rows, cols))

KQ_INLINE void kq_row_block(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow, int64_t n,
                            int64_t k, pw_dtype type, int64_t bb, bool super, int64_t j0,
                            int64_t j1, int rows) {
    const int64_t nb = k / (super ? KQ_QKK : KQ_QK);
    const int64_t xrow = super ? PW_K_Q8K_ROW_BYTES(k) : PW_K_Q8_ROW_BYTES(k);
    int64_t j = j0;
    if (rows == KQ_BATCH_ROWS) {
        for (; j + KQ_BATCH_COLS <= j1; j += KQ_BATCH_COLS) KQ_TILE(KQ_BATCH_ROWS, KQ_BATCH_COLS);
#if KQ_BATCH_COLS > 1
        for (; j < j1; j++) KQ_TILE(KQ_BATCH_ROWS, 1);
#endif
        return;
    }
#if defined(PW_ISA_AVX512VNNI_COPY)
    /* Q4_K/Q5_K decode: 8 columns a tile (kq_tile_row_dp2), then 4 */
    if (super && type != PW_Q6_K)
        for (; j + KQ_DP_COLS <= j1; j += KQ_DP_COLS)
            kq_tile_row_dp2(y + j, xa, w + j * wrow, wrow, nb, type, bb, KQ_DP_COLS);
    /* Q6_K decode: 8 columns a tile, with GFNI where the CPU has it (the
     * leftover columns' tiles without: the same bits) */
    if (type == PW_Q6_K && pw_k_isa_gfni())
        for (; j + KQ_ROW_COLS8 <= j1; j += KQ_ROW_COLS8)
            kq_tile_row(y + j, xa, w + j * wrow, wrow, nb, type, bb, KQ_ROW_COLS8, true);
    if (type == PW_Q6_K)
        for (; j + KQ_ROW_COLS8 <= j1; j += KQ_ROW_COLS8)
            kq_tile_row(y + j, xa, w + j * wrow, wrow, nb, type, bb, KQ_ROW_COLS8, false);
#endif
    for (; j + KQ_ROW_COLS <= j1; j += KQ_ROW_COLS) KQ_TILE(1, KQ_ROW_COLS);
    switch (j1 - j) {
    case 0: break;
    case 1: KQ_TILE(1, 1); break;
    case 2: KQ_TILE(1, 2); break;
    default: KQ_TILE(1, 3); break;
    }
}

KQ_INLINE void kq_typed(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                        int64_t n_tokens, int64_t n, int64_t k, pw_dtype type, int64_t bb,
                        bool super, int64_t j0, int64_t j1) {
    int64_t col_block = KQ_COL_BLOCK_BYTES / (k / (super ? KQ_QKK : KQ_QK) * bb);
    col_block = col_block < 8 ? 8 : col_block / 8 * 8;
    const int64_t xrow = super ? PW_K_Q8K_ROW_BYTES(k) : PW_K_Q8_ROW_BYTES(k);
    int64_t t_full = n_tokens / KQ_BATCH_ROWS * KQ_BATCH_ROWS;
    for (int64_t n0 = j0; n0 < j1; n0 += col_block) {
        int64_t n1 = n0 + col_block < j1 ? n0 + col_block : j1;
        for (int64_t t = 0; t < t_full; t += KQ_BATCH_ROWS)
            kq_row_block(y + t * n, xa + t * xrow, w, wrow, n, k, type, bb, super, n0, n1,
                         KQ_BATCH_ROWS);
        for (int64_t t = t_full; t < n_tokens; t++)
            kq_row_block(y + t * n, xa + t * xrow, w, wrow, n, k, type, bb, super, n0, n1, 1);
    }
}

#if defined(PW_ISA_AVX512VNNI_COPY)
/* Batches of 16 rows and more: the whole 16-row blocks through the
 * row-lane panels (kl_run) where the per-thread buffer can be had; the
 * rows left over go on to the column panels or the tiles. Whether it took
 * every row. */
#define KL_TAKE(T)                                                                             \
    (n_tokens >= KL_ROWS && (T == PW_Q6_K || n_tokens < KL_MAX_ROWS) &&                        \
     kl_take(kl_run_##T, &y, &xa, w, wrow, &n_tokens, n, k, j0, j1))
typedef void (*kl_run_fn)(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                          int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1,
                          uint8_t *buf);
KQ_INLINE bool kl_take(kl_run_fn run, float **y, const uint8_t **xa, const uint8_t *w, int64_t wrow,
                       int64_t *n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    const int64_t full = *n_tokens / KL_ROWS * KL_ROWS;
    uint8_t *buf = pw_k_panel_scratch(kl_scratch_bytes(full, k) + 63);
    if (!buf) return false;
    buf += (64 - (uintptr_t)buf % 64) % 64;
    run(*y, *xa, w, wrow, full, n, k, j0, j1, buf);
    *y += full * n;
    *xa += full * PW_K_Q8K_ROW_BYTES(k);
    *n_tokens -= full;
    return *n_tokens == 0;
}
#else
#define KL_TAKE(T) false
#endif

/* The type switch is outside the loops so each type's tiles are
 * specialised. */
void PW_ISA(pw_k_kqdot_run_strided)(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                                    pw_dtype type, int64_t n_tokens, int64_t n, int64_t k,
                                    int64_t j0, int64_t j1) {
    switch (type) {
#if KQ_X86
    case PW_Q5_0:
        if (k / KQ_QK <= Q5P_MAX_BLOCKS) q5p_run(y, xa, w, wrow, n_tokens, n, k, j0, j1);
        else kq_typed(y, xa, w, wrow, n_tokens, n, k, PW_Q5_0, KQ_Q5_0_BYTES, false, j0, j1);
        break;
#else
    case PW_Q5_0:
        kq_typed(y, xa, w, wrow, n_tokens, n, k, PW_Q5_0, KQ_Q5_0_BYTES, false, j0, j1);
        break;
#endif
    case PW_Q5_1:
        kq_typed(y, xa, w, wrow, n_tokens, n, k, PW_Q5_1, KQ_Q5_1_BYTES, false, j0, j1);
        break;
#if KQ_X86
/* Batches of rows through the panels; a few rows, whose panel fill would
 * not be shared, and long rows through the tiles. */
#define KP_CASE(T, BYTES)                                                                      \
    case T:                                                                                    \
        if (KL_TAKE(T)) break;                                                                 \
        if (n_tokens >= KP_MIN_ROWS)                                                           \
            kp_run_##T(y, xa, w, wrow, n_tokens, n, k, j0, j1);                                \
        else                                                                                   \
            kq_typed(y, xa, w, wrow, n_tokens, n, k, T, BYTES, true, j0, j1);                  \
        break;
        KP_CASE(PW_Q4_K, KQ_Q4_K_BYTES)
        KP_CASE(PW_Q5_K, KQ_Q5_K_BYTES)
        KP_CASE(PW_Q6_K, KQ_Q6_K_BYTES)
#undef KP_CASE
#else
    case PW_Q4_K:
        kq_typed(y, xa, w, wrow, n_tokens, n, k, PW_Q4_K, KQ_Q4_K_BYTES, true, j0, j1);
        break;
    case PW_Q5_K:
        kq_typed(y, xa, w, wrow, n_tokens, n, k, PW_Q5_K, KQ_Q5_K_BYTES, true, j0, j1);
        break;
    case PW_Q6_K:
        kq_typed(y, xa, w, wrow, n_tokens, n, k, PW_Q6_K, KQ_Q6_K_BYTES, true, j0, j1);
        break;
#endif
    default: assert(!"pw_k_matmul_quant: not a K-quant or Q5 weight type"); break;
    }
}

void PW_ISA(pw_k_kqdot_run)(float *y, const uint8_t *xa, const uint8_t *w, pw_dtype type,
                            int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1) {
    PW_ISA(pw_k_kqdot_run_strided)(y, xa, w, pw_dtype_row_bytes(type, k), type, n_tokens, n, k,
                                   j0, j1);
}

/* ---- K-shards in one pass (PW_K_QDOT_SHARDS_PARAMS) ---------------------- */

/* Output columns of one step across the shards: a decode tile's width
 * (KQ_DP_COLS, KQ_ROW_COLS8; two of the 256-bit copies' tiles). Each
 * shard's tile over these rows is the call its own product makes
 * (kq_row_block, one row), so every output keeps its bits; the shards'
 * tiles follow each other, so the rows are read whole, in address order,
 * and each tile's prefetch of later rows (kq_pf_ahead: its own shard's
 * bytes of them) asks, over the shards, for the whole of those rows. A
 * shard's product over runs of rows instead read a quarter of each row per
 * pass, 1.1-2.1x the time of a dense copy at decode. */
#define KQ_SHARD_COLS 8
/* Rows per shard and step where the one-pass tiles do not apply (the
 * portable copy, Q5_0's panels in the 256-bit copies). */
#define KQ_SHARD_RUN 64

#if KQ_X86
KQ_INLINE void kq_shards_typed(float *y, const uint8_t *xa, size_t xa_bytes, const uint8_t *w,
                               int64_t wrow, size_t shard_bytes, int64_t shards, int64_t n,
                               int64_t k, pw_dtype type, int64_t bb, bool super, int64_t j0,
                               int64_t j1) {
    for (int64_t j = j0; j < j1; j += KQ_SHARD_COLS) {
        const int64_t e = j + KQ_SHARD_COLS < j1 ? j + KQ_SHARD_COLS : j1;
        for (int64_t s = 0; s < shards; s++)
            kq_row_block(y + s * n, xa + s * xa_bytes, w + s * shard_bytes, wrow, n, k, type, bb,
                         super, j, e, 1);
    }
}

#if defined(PW_ISA_AVX512VNNI_COPY)
/* Q5_0's decode tile (q5d_run) the same way, 16 columns a step; the next
 * step's rows, whole, are asked for in one share per shard's tile. */
static __attribute__((noinline)) void q5d_shards(float *y, const uint8_t *xa, size_t xa_bytes,
                                                 const uint8_t *w, int64_t wrow,
                                                 size_t shard_bytes, int64_t shards, int64_t n,
                                                 int64_t k, int64_t j0, int64_t j1) {
    const int64_t nb = k / KQ_QK;
    for (int64_t c0 = j0; c0 < j1; c0 += Q5P_COLS) {
        const int cols = j1 - c0 < Q5P_COLS ? (int)(j1 - c0) : Q5P_COLS;
        const int64_t c2 = c0 + 2 * Q5P_COLS < j1 ? c0 + 2 * Q5P_COLS : j1;
        const uint8_t *from = w + (c0 + cols) * wrow, *to = w + c2 * wrow;
        const int64_t share = to > from ? ((to - from) / shards + 63) / 64 * 64 : 0;
        for (int64_t s = 0; s < shards; s++) {
            const uint8_t *p0 = from + s * share < to ? from + s * share : to;
            const uint8_t *p1 = p0 + share < to ? p0 + share : to;
            kq_prefetch pf = kq_prefetch_make(p0, p1, nb);
            q5d_tile(y + s * n + c0, xa + s * xa_bytes, w + s * shard_bytes + c0 * wrow, wrow,
                     nb, cols, &pf);
        }
    }
}
#endif
#endif

void PW_ISA(pw_k_kqdot_run_shards)(float *y, const uint8_t *xa, size_t xa_bytes,
                                   const uint8_t *w, int64_t wrow, size_t shard_bytes,
                                   int64_t shards, pw_dtype type, int64_t n, int64_t k,
                                   int64_t j0, int64_t j1) {
#if KQ_X86
#define KQ_SHARDS(T, BYTES, SUPER)                                                             \
    kq_shards_typed(y, xa, xa_bytes, w, wrow, shard_bytes, shards, n, k, T, BYTES, SUPER, j0, j1)
    switch (type) {
    case PW_Q4_K: KQ_SHARDS(PW_Q4_K, KQ_Q4_K_BYTES, true); return;
    case PW_Q5_K: KQ_SHARDS(PW_Q5_K, KQ_Q5_K_BYTES, true); return;
    case PW_Q6_K: KQ_SHARDS(PW_Q6_K, KQ_Q6_K_BYTES, true); return;
    case PW_Q5_1: KQ_SHARDS(PW_Q5_1, KQ_Q5_1_BYTES, false); return;
    case PW_Q5_0:
#if defined(PW_ISA_AVX512VNNI_COPY)
        if (k / KQ_QK <= Q5P_MAX_BLOCKS) {
            q5d_shards(y, xa, xa_bytes, w, wrow, shard_bytes, shards, n, k, j0, j1);
            return;
        }
#endif
        if (k / KQ_QK > Q5P_MAX_BLOCKS) {
            KQ_SHARDS(PW_Q5_0, KQ_Q5_0_BYTES, false);
            return;
        }
        break;
    default: break;
    }
#undef KQ_SHARDS
#endif
    pw_k_shards_by_runs(PW_ISA(pw_k_kqdot_run_strided), KQ_SHARD_RUN, y, xa, xa_bytes, w, wrow,
                        shard_bytes, shards, type, 1, n, k, j0, j1);
}
