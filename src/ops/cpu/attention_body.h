/* Attention rows over the paged KV cache: the body compiled once per
 * instruction set (isa.h). attention.c includes it for the baseline ISA,
 * attention_fma.c for AVX2+FMA; every multiply-add goes through
 * pw_v8_madd / pw_madd and every other operation is a lane-wise IEEE op
 * or a shuffle, so both copies return the same bits.
 *
 * The float sequence of one (token, head), the same whatever the batch:
 *   qs = q * scale (args.scale, default 1/sqrt(head_dim); one rounding each)
 * (with a sliding window, chunks wholly before the window are skipped and
 * positions before it in the first chunk get score -inf, weight 0)
 * positions are taken in fixed chunks of PW_K_ATTN_SCORE_CHUNK from 0, and
 * within a chunk in groups of 8 (lane j = position 8m + j):
 *   score: per position, p[l] = qs[l]*k[l] for l < 8, then
 *          p[l] = madd(qs[8b+l], k[8b+l], p[l]) for blocks b = 1.., then
 *          ((p0+p1)+(p2+p3)) + ((p4+p5)+(p6+p7)); dims past the last
 *          whole block of 8 are madd'ed onto that in index order.
 *   the chunk max raises the running max m; then d (8 lanes) and the
 *   accumulator are multiplied by exp(m_old - m_new) (when m_old is finite);
 *   w = exp(s - m) per position (exp_softmax below); d[j] += w (lane j);
 *   acc = madd(w, v, acc) in position order; for head_dim 8 there are two
 *   accumulators, even and odd positions, summed at the end.
 *   out = acc * (1 / (((d0+d1)+(d2+d3)) + ((d4+d5)+(d6+d7)))).
 */
#include "ops/cpu/attention_isa.h"
#include "ops/cpu/vec_math.h"

#include <math.h>
#include <string.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

typedef pw_v8f v8f;
typedef pw_v8i v8i;
typedef unsigned v8u __attribute__((vector_size(8 * sizeof(unsigned))));
typedef pw_v8f_u v8f_u;

#define AI static inline __attribute__((always_inline))
#define CHUNK PW_K_ATTN_SCORE_CHUNK

#define HEAD_GROUP_MAX PW_K_ATTN_HEAD_GROUP_MAX

AI v8f load8(const float *p) { return *(const v8f_u *)p; }
AI void store8(float *p, v8f v) { *(v8f_u *)p = v; }

/* [a0+a1, a2+a3, b0+b1, b2+b3, a4+a5, a6+a7, b4+b5, b6+b7] */
AI v8f hadd2(v8f a, v8f b) {
#if defined(__AVX2__)
    return (v8f)_mm256_hadd_ps((__m256)a, (__m256)b);
#else
    v8f e = __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14);
    v8f o = __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
    return e + o;
#endif
}

/* Lane j: ((p[j]0+p[j]1)+(p[j]2+p[j]3)) + ((p[j]4+p[j]5)+(p[j]6+p[j]7)). */
AI v8f hsum8x8(const v8f *p) {
    v8f h01 = hadd2(p[0], p[1]), h23 = hadd2(p[2], p[3]);
    v8f h45 = hadd2(p[4], p[5]), h67 = hadd2(p[6], p[7]);
    v8f a = hadd2(h01, h23), b = hadd2(h45, h67);
    v8f lo = __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11);
    v8f hi = __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
    return lo + hi;
}

/* ((d0+d1)+(d2+d3)) + ((d4+d5)+(d6+d7)) */
AI float hsum8(v8f d) { return ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7])); }

AI v8f splat8(float v) { return (v8f){v, v, v, v, v, v, v, v}; }

/* *p in every lane, loaded as such (not shuffled out of a register). */
AI v8f bcast(const float *p) {
#if defined(__AVX2__)
    return (v8f)_mm256_broadcast_ss(p);
#else
    return splat8(*p);
#endif
}

/* a > b ? a : b lane-wise (the semantics of maxps, NaN included). */
AI v8f vmax(v8f a, v8f b) {
#if defined(__AVX2__)
    return (v8f)_mm256_max_ps((__m256)a, (__m256)b);
#else
    return pw_v8_select(a > b, a, b);
#endif
}

/* Lanes of a where mask (all ones or zero per lane) is set, of b elsewhere. */
AI v8f vsel(v8i mask, v8f a, v8f b) {
#if defined(__AVX2__)
    return (v8f)_mm256_blendv_ps((__m256)b, (__m256)a, (__m256)mask);
#else
    return pw_v8_select(mask, a, b);
#endif
}

AI float hmax8(v8f m) {
    m = vmax(m, __builtin_shufflevector(m, m, 4, 5, 6, 7, 0, 1, 2, 3));
    m = vmax(m, __builtin_shufflevector(m, m, 2, 3, 0, 1, 6, 7, 4, 5));
    m = vmax(m, __builtin_shufflevector(m, m, 1, 0, 3, 2, 5, 4, 7, 6));
    return m[0];
}

/* exp(x) for the softmax, x <= 0 or -inf: Cephes' expf as in pw_v8_exp
 * (vec_math.h), written with multiply-adds. Below -87.3 the result is 0. */
AI v8f exp_softmax(v8f x) {
    const float lo = -87.3f;
    v8i under = x < lo;
    x = vmax(splat8(lo), x);
    /* t = M + n with n = x*log2(e) rounded to nearest (t in [2^23, 2^24),
     * where floats are the integers), M = 1.5*2^23 + 127: the low mantissa
     * bits of t are then n + 127 (+ 2^22), which shifted into the exponent
     * field give 2^n. */
    const float magic = 12582912.0f + 127.0f;
    v8f t = pw_v8_madd(x, splat8(1.44269504088896341f), splat8(magic));
    v8f nf = t - magic;
    x = pw_v8_madd(nf, splat8(-0.693359375f), x);
    x = pw_v8_madd(nf, splat8(2.12194440e-4f), x);
    v8f z = x * x;
    v8f y = pw_v8_madd(splat8(1.9875691500e-4f), x, splat8(1.3981999507e-3f));
    y = pw_v8_madd(y, x, splat8(8.3334519073e-3f));
    y = pw_v8_madd(y, x, splat8(4.1665795894e-2f));
    y = pw_v8_madd(y, x, splat8(1.6666665459e-1f));
    y = pw_v8_madd(y, x, splat8(5.0000001201e-1f));
    y = pw_v8_madd(y, z, x) + 1.0f;
    v8u bits;
    memcpy(&bits, &t, sizeof bits);
    bits = bits << 23;
    v8f scale;
    memcpy(&scale, &bits, sizeof scale);
    return vsel(under, (v8f){0}, y * scale);
}

/* Per query head of a group. */
typedef struct head_state {
    float qs[PW_K_ATTN_MAX_HEAD_DIM];  /* q times the scale */
    float acc[PW_K_ATTN_MAX_HEAD_DIM]; /* weighted sum of values (head_dim != 8) */
    float w[CHUNK];                    /* the chunk's scores, then its weights */
    v8f d;                             /* softmax denominator, lane j: positions 8m+j */
    float m;                           /* running max */
} head_state;

/* Row j (0..7) of a group: rows at base + j*row when the group's 8
 * positions are consecutive slots, else at base + offs[j]. */
AI const float *lane_row(const float *base, int j, int64_t row, const int64_t *offs, bool contig) {
    if (!contig) return base + offs[j];
    /* Rows 0..7 as base + {0,1,2,4}*row and (base + 3*row) + {0,1,2,3,4}*row,
     * so that x86 addressing reaches all eight from two bases. */
    const float *b3 = base + 3 * row;
    switch (j) {
    case 0: return base;
    case 1: return base + row;
    case 2: return base + 2 * row;
    case 3: return b3;
    case 4: return base + 4 * row;
    case 5: return b3 + 2 * row;
    case 6: return b3 + 3 * row;
    default: return b3 + 4 * row;
    }
}

/* Scores (times the scale, through qs) of the 8 rows of a group. */
AI v8f score_group(const float *qs, const float *kb, int64_t row, const int64_t *offs,
                   bool contig, int64_t hd) {
    const int64_t nb = hd / 8;
    v8f s = {0};
    if (nb > 0) {
        v8f p[8];
        v8f q0 = load8(qs);
        for (int j = 0; j < 8; j++) p[j] = q0 * load8(lane_row(kb, j, row, offs, contig));
        for (int64_t b = 1; b < nb; b++) {
            v8f qb = load8(qs + 8 * b);
            for (int j = 0; j < 8; j++)
                p[j] = pw_v8_madd(qb, load8(lane_row(kb, j, row, offs, contig) + 8 * b), p[j]);
        }
        s = hsum8x8(p);
    }
    for (int64_t i = nb * 8; i < hd; i++) {
        v8f kv;
        for (int j = 0; j < 8; j++) kv[j] = lane_row(kb, j, row, offs, contig)[i];
        s = pw_v8_madd(splat8(qs[i]), kv, s);
    }
    return s;
}

/* acc += w[j] * v_j for the group's first `lanes` rows (head_dim 8; even
 * and odd positions in acc[0] and acc[1]). */
AI void pv_small(const float *w, const float *vb, int64_t row, const int64_t *offs, bool contig,
                 int lanes, v8f *acc) {
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
        if (j < lanes)
            acc[j & 1] = pw_v8_madd(bcast(w + j), load8(lane_row(vb, j, row, offs, contig)),
                                    acc[j & 1]);
}

/* acc += w[j] * v_j for the group's first `lanes` rows, any head_dim: up
 * to 8 blocks of 8 dims at a time sit in registers while the rows go by,
 * so one broadcast of w[j] serves them all. */
AI void pv_any(const float *w, const float *vb, int64_t row, const int64_t *offs, bool contig,
               int lanes, int64_t hd, float *acc) {
    const int64_t nb = hd / 8;
    int64_t b0 = 0;
    /* Whole groups of 8 blocks with a constant count, so that the 8 sums
     * stay in registers (a variable count left them in memory, each
     * multiply-add waiting on the store of the one before: 4x slower at
     * head_dim 256). The same multiply-adds in the same order. */
    for (; b0 + 8 <= nb; b0 += 8) {
        v8f av[8];
        _Pragma("GCC unroll 8") for (int b = 0; b < 8; b++) av[b] = load8(acc + 8 * (b0 + b));
        for (int j = 0; j < lanes; j++) {
            const v8f wj = bcast(w + j);
            const float *r = lane_row(vb, j, row, offs, contig) + 8 * b0;
            _Pragma("GCC unroll 8") for (int b = 0; b < 8; b++)
                av[b] = pw_v8_madd(wj, load8(r + 8 * b), av[b]);
        }
        _Pragma("GCC unroll 8") for (int b = 0; b < 8; b++) store8(acc + 8 * (b0 + b), av[b]);
    }
    for (; b0 < nb; b0 += 8) {
        const int64_t nbb = nb - b0 < 8 ? nb - b0 : 8;
        v8f av[8];
        for (int64_t b = 0; b < nbb; b++) av[b] = load8(acc + 8 * (b0 + b));
        for (int j = 0; j < lanes; j++) {
            const v8f wj = bcast(w + j);
            const float *r = lane_row(vb, j, row, offs, contig) + 8 * b0;
            for (int64_t b = 0; b < nbb; b++) av[b] = pw_v8_madd(wj, load8(r + 8 * b), av[b]);
        }
        for (int64_t b = 0; b < nbb; b++) store8(acc + 8 * (b0 + b), av[b]);
    }
    for (int64_t i = nb * 8; i < hd; i++)
        for (int j = 0; j < lanes; j++)
            acc[i] = pw_madd(w[j], lane_row(vb, j, row, offs, contig)[i], acc[i]);
}

/* Scores of the group of 8 positions at j0 of the chunk (the first
 * `lanes` live, the others -inf) for the g heads, into their w buffers;
 * lane_max[h] takes the lane-wise max. */
AI void score_step(head_state *st, int64_t g, v8f *lane_max, const float *k_base,
                   const int64_t *offs, int64_t j0, int lanes, int64_t row, bool contig,
                   int64_t hd) {
    int64_t go[8] = {0};
    const float *kb = k_base;
    if (contig)
        kb = k_base + offs[j0 / 8];
    else
        for (int j = 0; j < 8; j++) go[j] = offs[j0 + (j < lanes ? j : 0)];
    const v8i iota = {0, 1, 2, 3, 4, 5, 6, 7};
    _Pragma("GCC unroll 4") for (int64_t h = 0; h < g; h++) {
        v8f s = score_group(st[h].qs, kb, row, go, contig, hd);
        if (lanes < 8) s = vsel(iota < lanes, s, splat8(-INFINITY));
        store8(st[h].w + j0, s);
        lane_max[h] = vmax(s, lane_max[h]);
    }
}

/* One head, the group at j0: scores become weights exp(s - m), summed
 * into d lane-wise, and the weighted values are added to the accumulator
 * (acc[0..1] for head_dim 8, else hs->acc). */
AI void weight_step(head_state *hs, v8f m, v8f *d, v8f *acc, const float *v_base,
                    const int64_t *offs, int64_t j0, int lanes, int64_t row, bool contig,
                    int64_t hd) {
    int64_t go[8] = {0};
    const float *vb = v_base;
    if (contig)
        vb = v_base + offs[j0 / 8];
    else
        for (int j = 0; j < 8; j++) go[j] = offs[j0 + (j < lanes ? j : 0)];
    v8f wv = exp_softmax(load8(hs->w + j0) - m);
    *d = *d + wv;
    store8(hs->w + j0, wv);
    if (hd == 8)
        pv_small(hs->w + j0, vb, row, go, contig, lanes, acc);
    else
        pv_any(hs->w + j0, vb, row, go, contig, lanes, hd, hs->acc);
}

/* Attends g (<= HEAD_GROUP_MAX) query heads that share kv head kv_head.
 * `contig` (block_size a multiple of 8) lets a group of 8 positions, which
 * then lies inside one block, address its rows from one slot. Returns
 * false when a key position is not mapped by the block table. Inlined with
 * constant g and hd for the common shapes; the float sequence is the same
 * whichever instance runs. */
AI bool attend_group_n(const pw_k_attention_args *a, const int32_t *table, int64_t pos,
                       int64_t kv_head, const int64_t g, const int64_t hd, const bool contig,
                       const float *q, float *out) {
    const pw_attn_meta *meta = a->meta;
    const int64_t row = a->n_kv_heads * hd, bs = meta->block_size, nblk = a->num_blocks;
    const bool small = hd == 8;
    const float scale = a->scale > 0.0f ? a->scale : 1.0f / sqrtf((float)hd);
    /* Sliding window: the first visible position. Chunks keep their fixed
     * boundaries from 0; the chunk holding lo scores all its positions and
     * masks those before lo (weight exactly 0), so a token's float
     * sequence depends only on its position, never on its batch. */
    const int64_t lo = a->window > 0 && pos >= a->window ? pos - a->window + 1 : 0;
    const float *k_base = a->k_cache + kv_head * hd, *v_base = a->v_cache + kv_head * hd;
    head_state st[HEAD_GROUP_MAX];
    v8f acc8[HEAD_GROUP_MAX][2];
    /* contig: offset (slot * row) of each group's first position, by group;
     * else of each position. */
    int64_t offs[CHUNK];
    _Pragma("GCC unroll 4") for (int64_t h = 0; h < g; h++) {
        head_state *hs = &st[h];
        hs->m = -INFINITY;
        hs->d = (v8f){0};
        for (int64_t i = 0; i < hd; i++) hs->qs[i] = q[h * hd + i] * scale;
        if (small)
            acc8[h][0] = acc8[h][1] = (v8f){0};
        else
            memset(hs->acc, 0, (size_t)hd * sizeof(float));
    }
    for (int64_t c0 = lo / CHUNK * CHUNK; c0 <= pos; c0 += CHUNK) {
        const int64_t n = pos - c0 + 1 < CHUNK ? pos - c0 + 1 : CHUNK;
        /* Slots, a block at a time. */
        if (contig) {
            /* c0 is 0 for every context within one chunk: no division */
            int64_t bi = c0 ? c0 / bs : 0, off = c0 ? c0 % bs : 0, base = 0;
            for (int64_t j0 = 0; j0 < n; j0 += 8) {
                if (j0 == 0 || off == 0) {
                    int64_t block = table[bi];
                    if (block < 0 || block >= nblk) return false;
                    base = block * bs;
                }
                offs[j0 / 8] = (base + off) * row;
                off += 8;
                if (off == bs) bi++, off = 0;
            }
        } else {
            for (int64_t p = c0; p < c0 + n;) {
                int64_t bi = p / bs, off = p % bs, block = table[bi];
                if (block < 0 || block >= nblk) return false;
                int64_t count = bs - off < c0 + n - p ? bs - off : c0 + n - p;
                for (int64_t j = 0; j < count; j++) offs[p - c0 + j] = (block * bs + off + j) * row;
                p += count;
            }
        }
        /* Scores, and each head's max over the chunk. */
        v8f lane_max[HEAD_GROUP_MAX];
        for (int64_t h = 0; h < g; h++) lane_max[h] = splat8(-INFINITY);
        int64_t j0 = 0;
        for (; j0 + 8 <= n; j0 += 8)
            score_step(st, g, lane_max, k_base, offs, j0, 8, row, contig, hd);
        if (j0 < n) score_step(st, g, lane_max, k_base, offs, j0, (int)(n - j0), row, contig, hd);
        _Pragma("GCC unroll 4") for (int64_t h = 0; h < g; h++) {
            head_state *hs = &st[h];
            float chunk_max = hmax8(lane_max[h]);
            if (c0 < lo) { /* the window starts inside this chunk */
                chunk_max = -INFINITY;
                for (int64_t j = 0; j < n; j++) {
                    if (j < lo - c0) hs->w[j] = -INFINITY;
                    else if (hs->w[j] > chunk_max) chunk_max = hs->w[j];
                }
            }
            if (chunk_max > hs->m) {
                if (hs->m != -INFINITY) {
                    v8f r = exp_softmax(splat8(hs->m - chunk_max));
                    hs->d = hs->d * r;
                    if (small) {
                        acc8[h][0] = acc8[h][0] * r;
                        acc8[h][1] = acc8[h][1] * r;
                    } else {
                        for (int64_t i = 0; i < hd; i++) hs->acc[i] *= r[0];
                    }
                }
                hs->m = chunk_max;
            }
        }
        /* Weights, denominators and weighted sums of values, a head at a
         * time (its accumulators stay in registers). */
        for (int64_t h = 0; h < g; h++) {
            head_state *hs = &st[h];
            v8f acc[2] = {acc8[h][0], acc8[h][1]}, d = hs->d;
            const v8f m = splat8(hs->m);
            for (j0 = 0; j0 + 8 <= n; j0 += 8)
                weight_step(hs, m, &d, acc, v_base, offs, j0, 8, row, contig, hd);
            if (j0 < n) weight_step(hs, m, &d, acc, v_base, offs, j0, (int)(n - j0), row, contig, hd);
            hs->d = d;
            acc8[h][0] = acc[0], acc8[h][1] = acc[1];
        }
    }
    _Pragma("GCC unroll 4") for (int64_t h = 0; h < g; h++) {
        float inv = 1.0f / hsum8(st[h].d);
        if (small)
            store8(out + h * hd, (acc8[h][0] + acc8[h][1]) * inv);
        else
            for (int64_t i = 0; i < hd; i++) out[h * hd + i] = st[h].acc[i] * inv;
    }
    return true;
}

/* The common decode case at head_dim 8 (stories260K): a context within the
 * first chunk (pos < CHUNK), no sliding window, consecutive slots. It runs
 * attend_group_n's float sequence for that case, operation for operation:
 * qs = q * scale, one chunk from position 0, scores in groups of 8 (the
 * last group's missing lanes -inf), each head's max over its lane maxima
 * (hmax8), weights exp_softmax(s - m) summed lane-wise into d, and the
 * weighted values in position order into the even and odd accumulators.
 * Only the bookkeeping the general case needs goes (the chunk loop, window
 * masking, rescaling when a later chunk raises the max, per-head state on
 * the stack): at stories260K's decode step that was over a third of the
 * attention's instructions. */
AI bool attend_hd8_first_chunk(const pw_k_attention_args *a, const int32_t *table, int64_t pos,
                               int64_t kv_head, const int64_t g, const int64_t kv_heads,
                               const float *q, float *out) {
    const pw_attn_meta *meta = a->meta;
    /* kv_heads > 0: the cache row (n_kv_heads * 8 floats) is a constant,
     * so a group's 8 key and value rows are constant displacements from one
     * pointer (a runtime row left GCC spilling the row addresses) */
    const int64_t row = (kv_heads > 0 ? kv_heads : a->n_kv_heads) * 8;
    const int64_t bs = meta->block_size, nblk = a->num_blocks;
    const float scale = a->scale > 0.0f ? a->scale : 1.0f / sqrtf(8.0f);
    const float *k_base = a->k_cache + kv_head * 8, *v_base = a->v_cache + kv_head * 8;
    const int64_t n = pos + 1, groups = (n + 7) / 8;
    /* offset (slot * row) of each group's first position; a group of 8
     * lies inside one block (block_size is a multiple of 8) */
    int64_t offs[CHUNK / 8];
    int64_t bi = 0, off = 0, base = 0;
    for (int64_t gi = 0; gi < groups; gi++) {
        if (off == 0) {
            int64_t block = table[bi];
            if (block < 0 || block >= nblk) return false;
            base = block * bs;
        }
        offs[gi] = (base + off) * row;
        off += 8;
        if (off == bs) bi++, off = 0;
    }
    float qs[HEAD_GROUP_MAX][8];
    float w[HEAD_GROUP_MAX][CHUNK]; /* scores, then weights */
    v8f lane_max[HEAD_GROUP_MAX];
    _Pragma("GCC unroll 4") for (int64_t h = 0; h < g; h++) {
        store8(qs[h], load8(q + h * 8) * splat8(scale));
        lane_max[h] = splat8(-INFINITY);
    }
    /* whole groups of 8, then the last one's `rest` live lanes (if any):
     * separate loops, so that the whole groups' lane count is a constant */
    const int64_t whole = n / 8;
    const int rest = (int)(n - 8 * whole);
    const v8i iota = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int64_t gi = 0; gi < whole; gi++) {
        const float *kb = k_base + offs[gi];
        _Pragma("GCC unroll 4") for (int64_t h = 0; h < g; h++) {
            v8f s = score_group(qs[h], kb, row, NULL, true, 8);
            store8(w[h] + 8 * gi, s);
            lane_max[h] = vmax(s, lane_max[h]);
        }
    }
    if (rest) {
        const float *kb = k_base + offs[whole];
        _Pragma("GCC unroll 4") for (int64_t h = 0; h < g; h++) {
            v8f s = score_group(qs[h], kb, row, NULL, true, 8);
            s = vsel(iota < rest, s, splat8(-INFINITY));
            store8(w[h] + 8 * whole, s);
            lane_max[h] = vmax(s, lane_max[h]);
        }
    }
    for (int64_t h = 0; h < g; h++) {
        /* the general case's m: -inf, raised to the chunk max when larger */
        const float chunk_max = hmax8(lane_max[h]);
        const v8f m = splat8(chunk_max > -INFINITY ? chunk_max : -INFINITY);
        v8f d = {0}, acc[2] = {{0}, {0}};
        for (int64_t gi = 0; gi < whole; gi++) {
            v8f wv = exp_softmax(load8(w[h] + 8 * gi) - m);
            d = d + wv;
            store8(w[h] + 8 * gi, wv);
            pv_small(w[h] + 8 * gi, v_base + offs[gi], row, NULL, true, 8, acc);
        }
        if (rest) {
            v8f wv = exp_softmax(load8(w[h] + 8 * whole) - m);
            d = d + wv;
            store8(w[h] + 8 * whole, wv);
            pv_small(w[h] + 8 * whole, v_base + offs[whole], row, NULL, true, rest, acc);
        }
        float inv = 1.0f / hsum8(d);
        store8(out + h * 8, (acc[0] + acc[1]) * inv);
    }
    return true;
}

#define PW_ATTN_G_CASES(HD)                                                                    \
    switch (g) {                                                                               \
    case 1: return attend_group_n(a, table, pos, kv_head, 1, HD, true, q, out);                \
    case 2: return attend_group_n(a, table, pos, kv_head, 2, HD, true, q, out);                \
    case 3: return attend_group_n(a, table, pos, kv_head, 3, HD, true, q, out);                \
    case 4: return attend_group_n(a, table, pos, kv_head, 4, HD, true, q, out);                \
    default: break;                                                                            \
    }

/* The common shapes (consecutive slots in groups of 8, head_dim 8, 64, 128
 * or 256, up to 4 heads per kv head) get their own instances; anything
 * else runs the general one. */
static bool attend_group(const pw_k_attention_args *a, const int32_t *table, int64_t pos,
                         int64_t kv_head, int64_t g, const float *q, float *out) {
    const bool contig = a->meta->block_size % 8 == 0;
    if (contig && a->head_dim == 8 && pos < CHUNK && (a->window <= 0 || pos < a->window)) {
        /* stories260K: 8 heads on 4 kv heads */
        if (a->n_kv_heads == 4 && g == 2)
            return attend_hd8_first_chunk(a, table, pos, kv_head, 2, 4, q, out);
        switch (g) {
        case 1: return attend_hd8_first_chunk(a, table, pos, kv_head, 1, 0, q, out);
        case 2: return attend_hd8_first_chunk(a, table, pos, kv_head, 2, 0, q, out);
        case 3: return attend_hd8_first_chunk(a, table, pos, kv_head, 3, 0, q, out);
        case 4: return attend_hd8_first_chunk(a, table, pos, kv_head, 4, 0, q, out);
        default: break;
        }
    }
    if (contig) {
        if (a->head_dim == 8) PW_ATTN_G_CASES(8)
        if (a->head_dim == 64) PW_ATTN_G_CASES(64)
        if (a->head_dim == 128) PW_ATTN_G_CASES(128)
        if (a->head_dim == 256) PW_ATTN_G_CASES(256) /* Gemma 3 */
    }
    return attend_group_n(a, table, pos, kv_head, g, a->head_dim, contig, q, out);
}

void PW_ISA(pw_k_attention_items)(const pw_k_attention_args *a, int64_t begin, int64_t end) {
    const pw_attn_meta *m = a->meta;
    const int64_t out_row = a->n_heads * a->head_dim;
    const bool shape_ok = pw_k_attention_shape_ok(a);
    const int64_t groups = pw_k_attention_groups(a);
    /* item (t, j): kv head j / per_kv, heads h0 .. h0+g-1 of it */
    const int64_t group = shape_ok ? a->n_heads / a->n_kv_heads : 1;
    const int64_t per_kv = shape_ok ? groups / a->n_kv_heads : 1;
    const int64_t capacity = a->num_blocks * (int64_t)m->block_size;
    const int64_t max_pos = (int64_t)m->max_blocks_per_seq * m->block_size;
    /* (t, j) of item i, advanced with i: one division per call, not three
     * per item (a decode step runs n_layers * n_kv_heads items, and each
     * 64-bit division costs more than the rest of the item's bookkeeping). */
    int64_t t = begin / groups, j = begin - t * groups;
    for (int64_t i = begin; i < end; i++) {
        int64_t h0 = 0, g = a->n_heads, kv_head = 0;
        if (shape_ok) {
            /* per_kv == 1 (at most HEAD_GROUP_MAX heads per kv head) is the
             * common case: item j is kv head j, from its first head */
            int64_t sub = per_kv == 1 ? 0 : (j % per_kv) * HEAD_GROUP_MAX;
            kv_head = per_kv == 1 ? j : j / per_kv;
            h0 = kv_head * group + sub;
            g = group - sub < HEAD_GROUP_MAX ? group - sub : HEAD_GROUP_MAX;
        }
        float *out = a->out + t * out_row + h0 * a->head_dim;
        int64_t slot = m->slot_mapping[t], pos = m->positions[t], seq = m->token_seq[t];
        bool ok = shape_ok && slot >= 0 && slot < capacity && pos >= 0 && pos < max_pos &&
                  seq >= 0 && seq < a->max_seqs;
        /* A bad block table entry fails every group of the token alike (the
         * positions walked do not depend on the head), so the whole row is
         * zeroed, an item at a time. */
        if (ok)
            ok = attend_group(a, m->block_tables + seq * m->max_blocks_per_seq, pos, kv_head, g,
                              a->q + t * a->q_stride + h0 * a->head_dim, out);
        if (!ok) memset(out, 0, (size_t)(g * a->head_dim) * sizeof *out);
        if (++j == groups) j = 0, t++;
    }
}
