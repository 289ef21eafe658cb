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

/* Physical slot of position p of the sequence whose block table is
 * `table`, or -1 when the table does not map it. */
static inline int64_t slot_of(const int32_t *table, int64_t p, int64_t block_size,
                              int64_t num_blocks) {
    int64_t block = table[p / block_size];
    if (block < 0 || block >= num_blocks) return -1;
    return block * block_size + p % block_size;
}

static inline float dot(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Returns false (and leaves `out` to be zeroed) when a key position is not
 * mapped by the block table. */
static bool attend_head(const pw_k_attention_args *a, const int32_t *table, int64_t pos,
                        int64_t kv_head, const float *q, float *out) {
    const pw_attn_meta *m = a->meta;
    const int64_t hd = a->head_dim, row = a->n_kv_heads * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float scores[PW_K_ATTN_SCORE_CHUNK];
    float acc[PW_K_ATTN_MAX_HEAD_DIM];
    float running_max = -INFINITY, denom = 0.0f;
    memset(acc, 0, (size_t)hd * sizeof *acc);
    for (int64_t c0 = 0; c0 <= pos; c0 += PW_K_ATTN_SCORE_CHUNK) {
        int64_t c1 = c0 + PW_K_ATTN_SCORE_CHUNK - 1 < pos ? c0 + PW_K_ATTN_SCORE_CHUNK - 1 : pos;
        float chunk_max = -INFINITY;
        for (int64_t p = c0; p <= c1; p++) {
            int64_t slot = slot_of(table, p, m->block_size, a->num_blocks);
            if (slot < 0) return false;
            float s = dot(q, a->k_cache + slot * row + kv_head * hd, hd) * scale;
            scores[p - c0] = s;
            if (s > chunk_max) chunk_max = s;
        }
        if (chunk_max > running_max) {
            if (running_max != -INFINITY) {
                float r = expf(running_max - chunk_max);
                denom *= r;
                for (int64_t i = 0; i < hd; i++) acc[i] *= r;
            }
            running_max = chunk_max;
        }
        for (int64_t p = c0; p <= c1; p++) {
            float wgt = expf(scores[p - c0] - running_max);
            denom += wgt;
            const float *v = a->v_cache + slot_of(table, p, m->block_size, a->num_blocks) * row +
                             kv_head * hd;
            for (int64_t i = 0; i < hd; i++) acc[i] += wgt * v[i];
        }
    }
    float inv = 1.0f / denom;
    for (int64_t i = 0; i < hd; i++) out[i] = acc[i] * inv;
    return true;
}

void pw_k_attention(const pw_k_attention_args *a) {
    const pw_attn_meta *m = a->meta;
    const int64_t out_row = a->n_heads * a->head_dim;
    const int64_t capacity = a->num_blocks * (int64_t)m->block_size;
    const int64_t max_pos = (int64_t)m->max_blocks_per_seq * m->block_size;
    const int64_t group = a->n_kv_heads > 0 ? a->n_heads / a->n_kv_heads : 1;
    const bool shape_ok = a->head_dim > 0 && a->head_dim <= PW_K_ATTN_MAX_HEAD_DIM &&
                          a->n_kv_heads > 0 && group > 0 && a->n_heads % a->n_kv_heads == 0 &&
                          m->block_size > 0;
    if (shape_ok) write_kv(a, capacity);
    for (int64_t t = 0; t < a->n_tokens; t++) {
        float *out = a->out + t * out_row;
        int64_t slot = m->slot_mapping[t], pos = m->positions[t], seq = m->token_seq[t];
        bool ok = shape_ok && slot >= 0 && slot < capacity && pos >= 0 && pos < max_pos &&
                  seq >= 0 && seq < a->max_seqs;
        if (ok) {
            const int32_t *table = m->block_tables + seq * m->max_blocks_per_seq;
            const float *q = a->q + t * a->q_stride;
            for (int64_t h = 0; h < a->n_heads && ok; h++)
                ok = attend_head(a, table, pos, h / group, q + h * a->head_dim,
                                 out + h * a->head_dim);
        }
        if (!ok) memset(out, 0, (size_t)out_row * sizeof *out);
    }
}

static void attention_launch(const void *args) { pw_k_attention(args); }
const pw_kernel pw_kernel_attention = {"attention", attention_launch, NULL};
