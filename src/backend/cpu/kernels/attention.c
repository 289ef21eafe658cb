/* Causal attention over a paged KV cache: the splitting op.
 *
 * Formulated per token: a token writes its k/v into its slot, then attends
 * over positions 0..positions[t] of its own sequence, reading every key and
 * value (its own included) back from the cache. The computation for a
 * token is therefore a function of its query and of the cache contents
 * only, so prefill in one go, chunked prefill, decode and mixed batches all
 * give bit-identical rows, and padding cannot leak in.
 *
 * Softmax is computed in fixed chunks of PW_K_ATTN_SCORE_CHUNK positions
 * starting at position 0: scores of one chunk go to a stack buffer, the
 * running maximum, denominator and weighted sum are rescaled when a chunk
 * raises the maximum. For contexts up to one chunk this is the plain
 * two-pass softmax with max subtraction. */
#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/vec_math.h"

#include <math.h>
#include <string.h>

/* Largest head_dim the per-head accumulator on the stack holds. */
#define PW_K_ATTN_MAX_HEAD_DIM 512

static void write_kv(const pw_k_attention_args *a, int64_t capacity) {
    const pw_attn_meta *m = a->meta;
    int64_t row = a->n_kv_heads * a->head_dim;
    for (int64_t t = 0; t < a->n_tokens; t++) {
        int64_t slot = m->slot_mapping[t];
        if (slot < 0 || slot >= capacity) continue;
        memcpy(a->k_cache + slot * row, a->k + t * a->kv_stride, (size_t)row * sizeof(float));
        memcpy(a->v_cache + slot * row, a->v + t * a->kv_stride, (size_t)row * sizeof(float));
    }
}

/* Positions whose scores are computed together, one per vector lane. */
#define POS_LANES PW_VEC_LANES
typedef pw_v8f v8f;
typedef pw_v8i v8i;
typedef pw_v8f_u v8f_u;
#define select8 pw_v8_select
/* Softmax weights: exp of scores minus their running maximum (<= 0). */
#define exp_nonpositive pw_v8_exp

/* Slots of positions c0..c1 of a sequence, filled a block at a time. False
 * when the block table does not map one of them. */
static bool chunk_slots(const int32_t *table, int64_t c0, int64_t c1, int64_t block_size,
                        int64_t num_blocks, int64_t *slots) {
    int64_t p = c0;
    while (p <= c1) {
        int64_t bi = p / block_size, off = p % block_size;
        int64_t block = table[bi];
        if (block < 0 || block >= num_blocks) return false;
        int64_t count = block_size - off;
        if (count > c1 - p + 1) count = c1 - p + 1;
        int64_t base = block * block_size + off;
        int64_t *dst = slots + (p - c0);
        for (int64_t j = 0; j < count; j++) dst[j] = base + j;
        p += count;
    }
    return true;
}

/* Rows r[0..7] of 8 floats in, columns out: c[i][j] = r[j][i]. Shuffles
 * only move values. */
static inline __attribute__((always_inline)) void transpose8(const float *const *rows, v8f *c) {
    v8f t[8], u[8];
    for (int j = 0; j < 8; j += 2) {
        v8f r0 = *(const v8f_u *)rows[j], r1 = *(const v8f_u *)rows[j + 1];
        t[j] = __builtin_shufflevector(r0, r1, 0, 8, 1, 9, 4, 12, 5, 13);
        t[j + 1] = __builtin_shufflevector(r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int j = 0; j < 8; j += 4) {
        u[j] = __builtin_shufflevector(t[j], t[j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[j + 1] = __builtin_shufflevector(t[j], t[j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[j + 2] = __builtin_shufflevector(t[j + 1], t[j + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[j + 3] = __builtin_shufflevector(t[j + 1], t[j + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int i = 0; i < 4; i++) {
        c[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        c[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* Query heads attended together: the heads that share one kv head, in
 * groups of at most this many. They share the slots, the transposed keys
 * and the value loads, and their accumulation chains interleave. */
#define HEAD_GROUP_MAX 8

typedef struct head_state {
    float running_max, denom;
    float acc[PW_K_ATTN_MAX_HEAD_DIM];
    float scores[PW_K_ATTN_SCORE_CHUNK + POS_LANES]; /* whole vectors are stored */
} head_state;

/* Scores of up to POS_LANES positions for g query heads: lane j of s[h] is
 * q_h[0]*k_j[0] + q_h[1]*k_j[1] + ... in index order (a multiply then an
 * add each), times scale; missing lanes are -inf. Keys are read 8
 * dimensions at a time and transposed so that lanes are positions. */
static inline __attribute__((always_inline)) void score_lanes(const float *q, int64_t g,
                                                             const float *k_cache,
                                                             const int64_t *slots, int lanes,
                                                             int64_t row, int64_t hd,
                                                             float scale, v8f *s) {
    const float *krow[POS_LANES];
    for (int j = 0; j < POS_LANES; j++) krow[j] = k_cache + slots[j < lanes ? j : 0] * row;
    for (int64_t h = 0; h < g; h++) s[h] = (v8f){0};
    int64_t hv = hd / 8 * 8, i = 0;
    for (; i < hv; i += 8) {
        const float *rows[POS_LANES];
        for (int j = 0; j < POS_LANES; j++) rows[j] = krow[j] + i;
        v8f c[8];
        transpose8(rows, c);
        for (int64_t h = 0; h < g; h++) {
            const float *qh = q + h * hd + i;
            v8f acc = s[h];
            for (int d = 0; d < 8; d++) acc = acc + qh[d] * c[d];
            s[h] = acc;
        }
    }
    for (; i < hd; i++) {
        v8f kv;
        for (int j = 0; j < POS_LANES; j++) kv[j] = krow[j][i];
        for (int64_t h = 0; h < g; h++) s[h] = s[h] + q[h * hd + i] * kv;
    }
    for (int64_t h = 0; h < g; h++) {
        s[h] = s[h] * scale;
        for (int j = lanes; j < POS_LANES; j++) s[h][j] = -INFINITY;
    }
}

/* Attends g (<= HEAD_GROUP_MAX) query heads that share kv head kv_head.
 * Each head runs exactly the sequence of a lone head; grouping only
 * interleaves them. Returns false (and leaves `out` to be zeroed) when a
 * key position is not mapped by the block table. attend_group builds it
 * for the baseline ISA and for AVX2: both run the same lane-wise IEEE
 * operations, so they return the same bits. */
static inline __attribute__((always_inline)) bool attend_group_n(
    const pw_k_attention_args *a, const int32_t *table, int64_t pos, int64_t kv_head,
    const int64_t g, const float *q, float *out) {
    const pw_attn_meta *m = a->meta;
    const int64_t hd = a->head_dim, row = a->n_kv_heads * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    const float *k_base = a->k_cache + kv_head * hd, *v_base = a->v_cache + kv_head * hd;
    int64_t slots[PW_K_ATTN_SCORE_CHUNK];
    head_state st[HEAD_GROUP_MAX];
    for (int64_t h = 0; h < g; h++) {
        st[h].running_max = -INFINITY;
        st[h].denom = 0.0f;
        memset(st[h].acc, 0, (size_t)hd * sizeof(float));
    }
    for (int64_t c0 = 0; c0 <= pos; c0 += PW_K_ATTN_SCORE_CHUNK) {
        int64_t c1 = c0 + PW_K_ATTN_SCORE_CHUNK - 1 < pos ? c0 + PW_K_ATTN_SCORE_CHUNK - 1 : pos;
        int64_t n = c1 - c0 + 1;
        if (!chunk_slots(table, c0, c1, m->block_size, a->num_blocks, slots)) return false;
        v8f lane_max[HEAD_GROUP_MAX];
        for (int64_t h = 0; h < g; h++) lane_max[h] = (v8f){0} - INFINITY;
        for (int64_t j = 0; j < n; j += POS_LANES) {
            int lanes = n - j < POS_LANES ? (int)(n - j) : POS_LANES;
            v8f s[HEAD_GROUP_MAX];
            score_lanes(q, g, k_base, slots + j, lanes, row, hd, scale, s);
            for (int64_t h = 0; h < g; h++) {
                memcpy(st[h].scores + j, &s[h], sizeof s[h]);
                lane_max[h] = select8(s[h] > lane_max[h], s[h], lane_max[h]);
            }
        }
        for (int64_t h = 0; h < g; h++) {
            head_state *hs = &st[h];
            float chunk_max = -INFINITY;
            for (int l = 0; l < POS_LANES; l++)
                if (lane_max[h][l] > chunk_max) chunk_max = lane_max[h][l];
            if (chunk_max > hs->running_max) {
                if (hs->running_max != -INFINITY) {
                    v8f r = exp_nonpositive((v8f){0} + (hs->running_max - chunk_max));
                    hs->denom *= r[0];
                    for (int64_t i = 0; i < hd; i++) hs->acc[i] *= r[0];
                }
                hs->running_max = chunk_max;
            }
            /* Scores become weights in place. */
            for (int64_t j = 0; j < n; j += POS_LANES) {
                v8f sv;
                memcpy(&sv, hs->scores + j, sizeof sv);
                v8f wgt = exp_nonpositive(sv - hs->running_max);
                memcpy(hs->scores + j, &wgt, sizeof wgt);
            }
            for (int64_t j = 0; j < n; j++) hs->denom += hs->scores[j];
        }
        /* Weighted sum of values: every acc element adds its terms in
         * position order; walking 8 dimensions at a time over all positions
         * keeps that slice of each head's acc in a register. */
        int64_t hv = hd / 8 * 8;
        for (int64_t i = 0; i < hv; i += 8) {
            v8f av[HEAD_GROUP_MAX];
            for (int64_t h = 0; h < g; h++) memcpy(&av[h], st[h].acc + i, sizeof av[h]);
            for (int64_t j = 0; j < n; j++) {
                v8f vv = *(const v8f_u *)(v_base + slots[j] * row + i);
                for (int64_t h = 0; h < g; h++) av[h] = av[h] + st[h].scores[j] * vv;
            }
            for (int64_t h = 0; h < g; h++) memcpy(st[h].acc + i, &av[h], sizeof av[h]);
        }
        for (int64_t h = 0; h < g; h++)
            for (int64_t i = hv; i < hd; i++)
                for (int64_t j = 0; j < n; j++)
                    st[h].acc[i] += st[h].scores[j] * v_base[slots[j] * row + i];
    }
    for (int64_t h = 0; h < g; h++) {
        float inv = 1.0f / st[h].denom;
        for (int64_t i = 0; i < hd; i++) out[h * hd + i] = st[h].acc[i] * inv;
    }
    return true;
}

/* attend_group_n with the group size a constant, so the per-head loops
 * unroll and each head's accumulator slice stays in a register. */
__attribute__((target_clones("avx2", "default")))
static bool attend_group(const pw_k_attention_args *a, const int32_t *table, int64_t pos,
                         int64_t kv_head, int64_t g, const float *q, float *out) {
    switch (g) {
    case 1: return attend_group_n(a, table, pos, kv_head, 1, q, out);
    case 2: return attend_group_n(a, table, pos, kv_head, 2, q, out);
    case 3: return attend_group_n(a, table, pos, kv_head, 3, q, out);
    case 4: return attend_group_n(a, table, pos, kv_head, 4, q, out);
    case 5: return attend_group_n(a, table, pos, kv_head, 5, q, out);
    case 6: return attend_group_n(a, table, pos, kv_head, 6, q, out);
    case 7: return attend_group_n(a, table, pos, kv_head, 7, q, out);
    default: return attend_group_n(a, table, pos, kv_head, HEAD_GROUP_MAX, q, out);
    }
}

typedef struct attn_job {
    const pw_k_attention_args *a;
    bool shape_ok;
} attn_job;

/* Attention for tokens [begin, end); the K/V writes are already done. */
static void attend_tokens(void *ctx, int64_t begin, int64_t end) {
    const attn_job *job = ctx;
    const pw_k_attention_args *a = job->a;
    const pw_attn_meta *m = a->meta;
    const int64_t out_row = a->n_heads * a->head_dim;
    const int64_t capacity = a->num_blocks * (int64_t)m->block_size;
    const int64_t max_pos = (int64_t)m->max_blocks_per_seq * m->block_size;
    const int64_t group = a->n_kv_heads > 0 ? a->n_heads / a->n_kv_heads : 1;
    for (int64_t t = begin; t < end; t++) {
        float *out = a->out + t * out_row;
        int64_t slot = m->slot_mapping[t], pos = m->positions[t], seq = m->token_seq[t];
        bool ok = job->shape_ok && slot >= 0 && slot < capacity && pos >= 0 && pos < max_pos &&
                  seq >= 0 && seq < a->max_seqs;
        if (ok) {
            const int32_t *table = m->block_tables + seq * m->max_blocks_per_seq;
            const float *q = a->q + t * a->q_stride;
            int64_t g = 0;
            /* Heads h0 .. h0+g-1 share kv head h0 / group. */
            for (int64_t h0 = 0; h0 < a->n_heads && ok; h0 += g) {
                g = group - h0 % group;
                if (g > HEAD_GROUP_MAX) g = HEAD_GROUP_MAX;
                ok = attend_group(a, table, pos, h0 / group, g, q + h0 * a->head_dim,
                                  out + h0 * a->head_dim);
            }
        }
        if (!ok) memset(out, 0, (size_t)out_row * sizeof *out);
    }
}

/* Every token's K/V is written before any token attends (a token reads
 * its own and earlier positions back from the cache); then tokens are
 * independent and may be split across threads. */
void pw_k_attention(const pw_k_attention_args *a) {
    const pw_attn_meta *m = a->meta;
    const int64_t group = a->n_kv_heads > 0 ? a->n_heads / a->n_kv_heads : 1;
    const bool shape_ok = a->head_dim > 0 && a->head_dim <= PW_K_ATTN_MAX_HEAD_DIM &&
                          a->n_kv_heads > 0 && group > 0 && a->n_heads % a->n_kv_heads == 0 &&
                          m->block_size > 0;
    if (shape_ok) write_kv(a, a->num_blocks * (int64_t)m->block_size);
    attn_job job = {a, shape_ok};
    if (a->n_tokens >= PW_K_PARALLEL_MIN_TOKENS && pw_k_parallel_threads() > 1)
        pw_k_parallel_for(a->n_tokens, attend_tokens, &job);
    else
        attend_tokens(&job, 0, a->n_tokens);
}

static void attention_launch(const void *args) { pw_k_attention(args); }
const pw_kernel pw_kernel_attention = {"attention", attention_launch, NULL};
