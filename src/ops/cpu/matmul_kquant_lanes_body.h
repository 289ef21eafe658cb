/* Row-lane panels of the K-quant matmul (AVX-512 VNNI copy only): batches
 * of 16 activation rows with the rows across the vector lanes. Part of
 * matmul_kquant_body.h, included by it once, after the column panels
 * (kp_*), whose scale packing and prefetch it shares.
 *
 * The column panels (kp_*) put 16 weight columns across the lanes and
 * broadcast the activations; their fill transposes every weight dword
 * (two 16 x 16 transposes a Q4_K super-block of 16 columns, about a
 * quarter of a 16-row product). Here the activations are transposed
 * instead, once per call: lane r of vector j holds dword j of row r, and
 * each weight dword is broadcast from a panel of codes unpacked in place,
 * with no transpose. A 16-row batch (16 sequences' decode) fills exactly
 * one vector; each column's codes are read once per 16 rows.
 *
 * The arithmetic is the sequence of matmul_kquant.c, per output element:
 * the same exact integer sums (formed in a different order, which exact
 * sums do not see) and the same float steps in the same order, so the
 * results are the bits of every other copy. */

/* Super-blocks per panel slice: one (a 6 KiB panel), so that the slice's
 * transposed rows (6 KiB per 16) fit L1 beside it. With 4 (23 KiB of
 * panel) Q4_K ran 0.86-0.92x of the column panels at 16 rows, with 2
 * 1.04-1.08x, with 1 1.05-1.08x (Q5_K 1.35x against 1.23x with 2).
 * -D overrides are for measuring. */
#ifndef KL_SB
#define KL_SB 1
#endif
/* Activation rows per lane vector. */
#define KL_ROWS 16
/* Q4_K and Q5_K batches from this many rows go to the column panels,
 * whose fill is shared by enough rows there and whose activations take
 * less of L1 (128 rows, Intel Xeon: Q4_K 0.92-1.06x, Q5_K 0.97-0.98x
 * here against them; 64 rows 1.00-1.07x; 16 rows 1.15-1.38x). Q6_K's
 * word-sized sums make these faster at every size (128 rows 1.34-1.50x). */
#ifndef KL_MAX_ROWS
#define KL_MAX_ROWS 96
#endif
/* Rows transposed per pass, bounding the per-thread buffer (6 KiB per
 * super-block and 16 rows); larger batches take several passes. */
#define KL_PASS_ROWS 128
#ifndef KL_CHAINS_Q5_K
#define KL_CHAINS_Q5_K 4
#endif
/* Sums per group and column: Q4_K two of 16 elements and Q5_K four of 8,
 * as kp_chains; Q6_K two of 8 elements (every other dword), each started
 * from its own offset -32 (a sum), so that each fits a signed word:
 * |sum (u - 32) a| <= 8 * 32 * 127. Each takes its scale in a vpdpwssd. */
KQ_INLINE int kl_chains(pw_dtype type) {
    return type == PW_Q4_K ? 2 : type == PW_Q5_K ? KL_CHAINS_Q5_K : 2;
}
KQ_INLINE bool kl_word_sums(pw_dtype type) {
    return type == PW_Q6_K ? kl_chains(type) == 2
                           : 8 / kl_chains(type) * 4 * (type == PW_Q4_K ? 15 : 31) * 128 < 32768;
}
/* Columns per register tile: 8 with two sums a group, 4 with Q5_K's four
 * (chains x columns + columns of the 32 registers, with room for the
 * activation vector and the broadcasts; 4 columns of Q4_K measured
 * 0.92-0.95x of 8). */
KQ_INLINE int kl_tile_cols(pw_dtype type) { return kl_chains(type) > 2 ? 4 : 8; }

/* One super-block of 16 activation rows, transposed: v[P][r] is dword P of
 * row r in the panel's position order (kl_group), x the rows' side terms
 * (Q4_K/Q5_K: x[j][r] the word pair (ps_2j, ps_2j+1), ps_l = bs_2l +
 * bs_2l+1, the mins' operand; Q6_K: x[2g + h][r] = -32 times the sum of
 * dwords h and h + 2 of group g, where that sum of group g starts), da[r]
 * the rows' scales. */
typedef struct kl_act {
    int32_t v[64][KL_ROWS];
    int32_t x[32][KL_ROWS];
    float da[KL_ROWS];
} kl_act;

/* The codes of 16 columns, as bytes 0..63, 4 a dword in position order:
 * Q4_K/Q5_K store each 64 bytes of qs as its low nibbles then its high
 * ones, so position group G (8 dwords) holds element chunk kl_group(G);
 * Q6_K's positions are its elements. The scales as in kp_panel. */
typedef struct kl_panel {
    uint32_t u[KL_SB][KP_COLS][64];
    uint32_t sc[KL_SB][16][KP_COLS];
    uint32_t side[KL_SB][8][KP_COLS];
    float d[KL_SB][KP_COLS], dmin[KL_SB][KP_COLS];
} kl_panel;

/* The element chunk (32 elements) at position group G of a Q4_K/Q5_K
 * panel: qs bytes 0..63 hold chunks 0 and 2 in their low nibbles and 1
 * and 3 in their high ones, so positions run chunks 0, 2, 1, 3, 4, 6, 5,
 * 7 (its own inverse). */
KQ_INLINE int kl_group(int G) { return (G & 4) | (G & 1) << 1 | (G & 2) >> 1; }

/* Rows t0..t0+15 of xa, super-blocks 0..nsb-1, into a[0..nsb-1]. */
KQ_INLINE void kl_act_fill(kl_act *a, const uint8_t *xa, int64_t xrow, int64_t nsb, pw_dtype type) {
    for (int64_t s = 0; s < nsb; s++) {
        kl_act *o = a + s;
        for (int q = 0; q < 4; q++) {
            /* element dwords 16q..16q+15, chunks 2q and 2q+1 */
            __m512i r[KL_ROWS];
            for (int i = 0; i < KL_ROWS; i++)
                r[i] = _mm512_loadu_si512(kx_values(xa + i * xrow) + s * KQ_QKK + 64 * q);
            kq_transpose16x16(r);
            for (int t = 0; t < 16; t++) {
                const int e = 16 * q + t;
                const int p = type == PW_Q6_K ? e : 8 * kl_group(e / 8) + e % 8;
                _mm512_store_si512(o->v[p], r[t]);
            }
        }
        if (type == PW_Q6_K) {
            /* vpdpbusd against bytes of 32: 32 times each lane's four
             * values, exactly */
            const __m512i b32 = _mm512_set1_epi8(32), z = _mm512_setzero_si512();
            for (int g = 0; g < 16; g++)
                for (int h = 0; h < 2; h++) {
                    __m512i t = _mm512_dpbusd_epi32(z, b32, _mm512_load_si512(o->v[4 * g + h]));
                    t = _mm512_dpbusd_epi32(t, b32, _mm512_load_si512(o->v[4 * g + h + 2]));
                    _mm512_store_si512(o->x[2 * g + h], _mm512_sub_epi32(z, t));
                }
        }
        for (int i = 0; i < KL_ROWS; i++) {
            const uint8_t *row = xa + i * xrow;
            const int16_t *bs = kx_sums(row, nsb) + 16 * s;
            o->da[i] = kx_scales(row, nsb)[s];
            if (type != PW_Q6_K) {
                for (int j = 0; j < 4; j++) {
                    const int p0 = bs[4 * j] + bs[4 * j + 1], p1 = bs[4 * j + 2] + bs[4 * j + 3];
                    o->x[j][i] = (int32_t)((uint32_t)(uint16_t)p0 | (uint32_t)(uint16_t)p1 << 16);
                }
            }
        }
    }
}

/* One column's codes of one super-block (blk) into u (64 dwords). */
KQ_INLINE void kl_unpack(uint32_t *u, const uint8_t *blk, pw_dtype type) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    if (type == PW_Q4_K) {
        for (int h = 0; h < 2; h++) {
            const __m512i v = _mm512_loadu_si512(blk + 16 + 64 * h);
            _mm512_store_si512(u + 32 * h, _mm512_and_si512(v, lo4));
            _mm512_store_si512(u + 32 * h + 16, _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4));
        }
    } else if (type == PW_Q5_K) {
        /* the fifth bit of chunk i's element l is bit i of qh[l]: the qh
         * bytes twice over, shifted as words (a count per 256-bit half:
         * left 4 - i for chunks 0-3, right i - 4 for 4-7, so that no bit
         * crosses into the other byte's bit 4), land it on bit 4 */
        const __m512i qhv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)));
        const __m512i m10 = _mm512_set1_epi8(0x10);
        for (int h = 0; h < 2; h++) {
            const __m512i v = _mm512_loadu_si512(blk + 48 + 64 * h);
            for (int hi = 0; hi < 2; hi++) {
                const int i0 = 4 * h + hi; /* the chunk of the first 32 bytes; +2 the second's */
                const int c0 = h ? i0 - 4 : 4 - i0, c1 = h ? i0 - 2 : 2 - i0;
                const __m512i cnt = _mm512_inserti64x4(_mm512_set1_epi16((short)c0),
                                                       _mm256_set1_epi16((short)c1), 1);
                const __m512i bits = h ? _mm512_srlv_epi16(qhv, cnt) : _mm512_sllv_epi16(qhv, cnt);
                const __m512i nib = hi ? _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4)
                                       : _mm512_and_si512(v, lo4);
                /* nib | (bits & 0x10) */
                _mm512_store_si512(u + 32 * h + 16 * hi, _mm512_ternarylogic_epi32(nib, bits, m10, 0xF8));
            }
        }
    } else {
        /* Q6_K: element 128h + 64k + b (b < 64) is nibble k of ql[64h + b]
         * with bits 2(2k + b / 32) of qh[32h + b % 32] above it */
        const __m512i m30 = _mm512_set1_epi8(0x30);
        for (int h = 0; h < 2; h++) {
            const __m512i v = _mm512_loadu_si512(blk + 64 * h);
            const __m512i qhv =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
            for (int k = 0; k < 2; k++) {
                /* bits 2(2k + half) to bits 4-5: left 4, 2 (k = 0), right
                 * 0, 2 (k = 1), as words, so no bit crosses bytes */
                const __m512i cnt = _mm512_inserti64x4(_mm512_set1_epi16((short)(k ? 0 : 4)),
                                                       _mm256_set1_epi16((short)2), 1);
                const __m512i bits = k ? _mm512_srlv_epi16(qhv, cnt) : _mm512_sllv_epi16(qhv, cnt);
                const __m512i nib = k ? _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4)
                                      : _mm512_and_si512(v, lo4);
                _mm512_store_si512(u + 32 * h + 16 * k, _mm512_ternarylogic_epi32(nib, bits, m30, 0xF8));
            }
        }
    }
}

/* 16 columns (cols real, the others zero blocks) of ns super-blocks. */
KQ_INLINE void kl_pack(kl_panel *p, const uint8_t *w, int64_t wrow, int64_t ns, pw_dtype type,
                       int64_t bb, int cols) {
    for (int64_t s = 0; s < ns; s++) {
        const uint8_t *blk[KP_COLS];
        kp_blocks(blk, w, wrow, bb, s, cols);
        if (type == PW_Q6_K) {
            kp_pack_scales_q6(blk, p->sc[s], p->d[s], p->dmin[s]);
            /* vpdpwssd's (sc_g, 0): the sign-extended scale's high word cleared */
            if (kl_word_sums(type))
                for (int g = 0; g < 16; g++)
                    _mm512_store_si512(p->sc[s][g], _mm512_and_si512(_mm512_load_si512(p->sc[s][g]),
                                                                     _mm512_set1_epi32(0xFFFF)));
        } else {
            kp_pack_scales(blk, p->sc[s], p->side[s], p->d[s], p->dmin[s]);
        }
        for (int c = 0; c < KP_COLS; c++) kl_unpack(p->u[s][c], blk[c], type);
    }
}

/* Columns c0..c0+C-1 of the panel (C = kl_tile_cols) over its ns
 * super-blocks for one lane vector of rows: acc[c][r] the running sums
 * of column c0 + c (+0 before the first slice, first). */
KQ_INLINE void kl_cols(float (*acc)[KL_ROWS], const kl_act *act, const kl_panel *p, int64_t ns,
                       pw_dtype type, int c0, bool first, kp_prefetch *pf) {
    enum { C_MAX = 8 };
    const int C = kl_tile_cols(type);
    const int gd = type == PW_Q6_K ? 4 : 8; /* dwords per scale group */
    const int groups = 64 / gd, nch = kl_chains(type);
    for (int64_t s = 0; s < ns; s++) {
        kp_prefetch_step(pf);
        const kl_act *a = act + s;
        __m512i is[C_MAX];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) is[c] = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int G = 0; G < groups; G++) {
            const int g = type == PW_Q6_K ? G : kl_group(G);
            __m512i pg[KP_MAX_CHAINS][C_MAX];
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
#pragma GCC unroll 4
                for (int h = 0; h < nch; h++)
                    pg[h][c] = type == PW_Q6_K ? _mm512_load_si512(a->x[2 * G + h])
                                               : _mm512_setzero_si512();
            }
#pragma GCC unroll 8
            for (int t = 0; t < gd; t++) {
                const int j = gd * G + t, h = t % nch;
                const __m512i av = _mm512_load_si512(a->v[j]);
#pragma GCC unroll 8
                for (int c = 0; c < C; c++)
                    pg[h][c] = _mm512_dpbusd_epi32(pg[h][c], _mm512_set1_epi32((int)p->u[s][c0 + c][j]), av);
            }
            if (kl_word_sums(type)) {
#pragma GCC unroll 8
                for (int c = 0; c < C; c++) {
                    const __m512i scv = _mm512_set1_epi32((int)p->sc[s][g][c0 + c]);
#pragma GCC unroll 4
                    for (int h = 0; h < nch; h++) is[c] = _mm512_dpwssd_epi32(is[c], pg[h][c], scv);
                }
            } else {
#pragma GCC unroll 8
                for (int c = 0; c < C; c++) {
                    __m512i t = pg[0][c];
#pragma GCC unroll 4
                    for (int h = 1; h < nch; h++) t = _mm512_add_epi32(t, pg[h][c]);
                    is[c] = _mm512_add_epi32(
                        is[c], _mm512_mullo_epi32(t, _mm512_set1_epi32((int)p->sc[s][g][c0 + c])));
                }
            }
            /* keeps the groups in order (see kp_rows) */
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) __asm__("" : "+v"(is[c]));
        }
        const __m512 da = _mm512_load_ps(a->da);
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const __m512 prev = first && s == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc[c]);
            /* d * d_a and dmin * d_a, lane by lane, as kp_rows */
            const __m512 t = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(p->d[s][c0 + c]), da),
                                             _mm512_cvtepi32_ps(is[c]), prev);
            if (type == PW_Q6_K) {
                _mm512_store_ps(acc[c], t);
            } else {
                __m512i side = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++)
                    side = _mm512_dpwssd_epi32(side, _mm512_load_si512(a->x[j]),
                                               _mm512_set1_epi32((int)p->side[s][j][c0 + c]));
                _mm512_store_ps(acc[c],
                                _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_set1_ps(p->dmin[s][c0 + c]), da),
                                                 _mm512_cvtepi32_ps(side), t));
            }
        }
    }
}

/* The bytes kl_run wants of its buffer for n_tokens rows of K = k. */
KQ_INLINE size_t kl_scratch_bytes(int64_t n_tokens, int64_t k) {
    const int64_t rows = n_tokens < KL_PASS_ROWS ? n_tokens : KL_PASS_ROWS;
    const int64_t blocks = rows / KL_ROWS;
    return (size_t)blocks * (size_t)(k / KQ_QKK) * sizeof(kl_act) +
           (size_t)blocks * KP_COLS * KL_ROWS * sizeof(float);
}

/* Rows 0..n_tokens-1 (a multiple of 16), columns [j0, j1), with buf of
 * kl_scratch_bytes: per pass of up to KL_PASS_ROWS rows, the rows
 * transposed once; then per 16 columns and slice of KP_SB super-blocks, a
 * panel filled once and run over by every lane vector of rows, whose
 * running sums wait in buf until the columns' last slice, then go to y
 * through one 16 x 16 transpose per 16 rows. */
KQ_INLINE void kl_run(float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow, pw_dtype type,
                      int64_t bb, int64_t n_tokens, int64_t n, int64_t k, int64_t j0, int64_t j1,
                      uint8_t *buf) {
    const int64_t nsb = k / KQ_QKK, xrow = PW_K_Q8K_ROW_BYTES(k);
    const int C = kl_tile_cols(type);
    _Alignas(64) kl_panel panel;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += KL_PASS_ROWS) {
        const int64_t rows = n_tokens - t0 < KL_PASS_ROWS ? n_tokens - t0 : KL_PASS_ROWS;
        const int64_t blocks = rows / KL_ROWS;
        kl_act *act = (kl_act *)(void *)buf;
        float(*acc)[KP_COLS][KL_ROWS] = (float(*)[KP_COLS][KL_ROWS])(void *)(act + blocks * nsb);
        for (int64_t b = 0; b < blocks; b++)
            kl_act_fill(act + b * nsb, xa + (t0 + b * KL_ROWS) * xrow, xrow, nsb, type);
        const int64_t tiles = blocks * (KP_COLS / C);
        for (int64_t c0 = j0; c0 < j1; c0 += KP_COLS) {
            const int cols = j1 - c0 < KP_COLS ? (int)(j1 - c0) : KP_COLS;
            for (int64_t s0 = 0; s0 < nsb; s0 += KL_SB) {
                const int64_t ns = nsb - s0 < KL_SB ? nsb - s0 : KL_SB;
                kl_pack(&panel, w + c0 * wrow + s0 * bb, wrow, ns, type, bb, cols);
                /* into L1, where a slice of one super-block (2.3-3.4 KiB)
                 * fits beside the panel and the rows (1.02-1.03x over L2 at
                 * 16 rows); a share at each super-block of each tile */
                kp_prefetch pf =
                    kp_prefetch_next(w, wrow, bb, nsb, KL_SB, s0, c0, cols, j1, tiles * ns, true);
                for (int64_t b = 0; b < blocks; b++)
                    for (int ct = 0; ct < cols; ct += C)
                        kl_cols(acc[b] + ct, act + b * nsb + s0, &panel, ns, type, ct, s0 == 0, &pf);
            }
            /* acc[b][c][r] to y[t0 + 16b + r][c0 + c] */
            for (int64_t b = 0; b < blocks; b++) {
                __m512i r[KP_COLS];
                for (int c = 0; c < KP_COLS; c++) r[c] = _mm512_load_si512(acc[b][c]);
                kq_transpose16x16(r);
                for (int i = 0; i < KL_ROWS; i++)
                    kq_store_cols(y + (t0 + b * KL_ROWS + i) * n + c0, _mm512_castsi512_ps(r[i]), cols);
            }
        }
    }
}

#define KL_RUN_TYPED(T, BYTES)                                                                 \
    static __attribute__((noinline)) void kl_run_##T(float *y, const uint8_t *xa,              \
                                                    const uint8_t *w, int64_t wrow,            \
                                                    int64_t n_tokens, int64_t n, int64_t k,    \
                                                    int64_t j0, int64_t j1, uint8_t *buf) {    \
        kl_run(y, xa, w, wrow, T, BYTES, n_tokens, n, k, j0, j1, buf);                         \
    }
KL_RUN_TYPED(PW_Q4_K, KQ_Q4_K_BYTES)
KL_RUN_TYPED(PW_Q5_K, KQ_Q5_K_BYTES)
KL_RUN_TYPED(PW_Q6_K, KQ_Q6_K_BYTES)
#undef KL_RUN_TYPED
