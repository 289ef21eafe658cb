/* Fused launches: several kernels run back to back inside one launch.
 *
 * They exist to cut launches and per-op dispatch (eagerly, every op costs
 * argument checks, an output allocation and a launch; in a replayed graph
 * every launch still costs a call through its recorded args). The
 * arithmetic is the constituent kernels' own, called in the same order on
 * the same values, so the bits are theirs and so is the batch-invariance
 * argument (docs/kernels.md). */
#include "ops/cpu/kernels.h"

#include <string.h>


void pw_k_sum_rms_norm(float *y, float *sum, const float *a, const float *b, const float *w,
                       int64_t n_tokens, int64_t dim, float eps) {
    /* Row by row, so the sum is still in cache when the norm reads it. */
    for (int64_t t = 0; t < n_tokens; t++) {
        pw_k_add(sum + t * dim, a + t * dim, b + t * dim, dim);
        pw_k_rms_norm(y + t * dim, sum + t * dim, w, 1, dim, eps);
    }
}

static void sum_rms_norm_launch(const void *args) {
    const pw_k_sum_rms_norm_args *a = args;
    pw_k_sum_rms_norm(a->y, a->sum, a->a, a->b, a->w, a->n_tokens, a->dim, a->eps);
}
const pw_kernel pw_kernel_sum_rms_norm = {"sum_rms_norm", sum_rms_norm_launch, NULL,
                                          PW_K_ARGS(SUM_RMS_NORM)};

void pw_k_matmul_any(float *y, const float *x, const void *w, pw_dtype type, int64_t n_tokens,
                     int64_t n, int64_t k, float *scratch) {
    if (type == PW_F32) pw_k_matmul(y, x, w, n_tokens, n, k, scratch);
    else pw_k_matmul_quant(y, x, w, type, n_tokens, n, k);
}

size_t pw_k_matmul_any_scratch_floats(pw_dtype type, int64_t n_tokens, int64_t n, int64_t k) {
    return type == PW_F32 ? pw_k_matmul_scratch_floats(n_tokens, n, k) : 0;
}

void pw_k_qkv_rope(const pw_k_qkv_rope_args *a) {
    const int64_t t = a->n_tokens, qw = a->n_heads * a->head_dim,
                  kw = a->n_kv_heads * a->head_dim;
    if (pw_k_quant_share_activations((const pw_dtype[]){a->tq, a->tk, a->tv}, 3)) {
        /* x quantized once, one split over q, k and v's columns */
        const pw_k_quant_part parts[3] = {
            {a->q, a->wq, a->tq, qw}, {a->k, a->wk, a->tk, kw}, {a->v, a->wv, a->tv, kw}};
        pw_k_matmul_quant_parts(parts, 3, a->x, t, a->dim);
    } else {
        pw_k_matmul_any(a->q, a->x, a->wq, a->tq, t, qw, a->dim, a->scratch);
        pw_k_matmul_any(a->k, a->x, a->wk, a->tk, t, kw, a->dim, a->scratch);
        pw_k_matmul_any(a->v, a->x, a->wv, a->tv, t, kw, a->dim, a->scratch);
    }
    pw_k_rope(a->q, a->q, a->positions, a->rope_table, t, a->n_heads, a->head_dim, a->max_pos);
    pw_k_rope(a->k, a->k, a->positions, a->rope_table, t, a->n_kv_heads, a->head_dim,
              a->max_pos);
}

static void qkv_rope_launch(const void *args) { pw_k_qkv_rope(args); }
const pw_kernel pw_kernel_qkv_rope = {"qkv_rope", qkv_rope_launch, NULL, PW_K_ARGS(QKV_ROPE)};

void pw_k_gate_up_silu(const pw_k_gate_up_silu_args *a) {
    if (pw_k_quant_share_activations((const pw_dtype[]){a->t_gate, a->t_up}, 2)) {
        /* x quantized once; each thread multiplies a range of gate and up
         * columns and takes their silu_mul */
        pw_k_matmul_quant_silu(a->out, a->up, a->x, a->w_gate, a->t_gate, a->w_up, a->t_up,
                               a->n_tokens, a->f, a->dim);
        return;
    }
    pw_k_matmul_any(a->out, a->x, a->w_gate, a->t_gate, a->n_tokens, a->f, a->dim, a->scratch);
    pw_k_matmul_any(a->up, a->x, a->w_up, a->t_up, a->n_tokens, a->f, a->dim, a->scratch);
    pw_k_silu_mul(a->out, a->out, a->up, a->n_tokens * a->f);
}

static void gate_up_silu_launch(const void *args) { pw_k_gate_up_silu(args); }
const pw_kernel pw_kernel_gate_up_silu = {"gate_up_silu", gate_up_silu_launch, NULL,
                                          PW_K_ARGS(GATE_UP_SILU)};

/* ---- the LM head on the sampled rows ----------------------------------------------------- */

int64_t pw_k_sampled_rows(const pw_attn_meta *meta, int64_t n_tokens) {
    if (!meta || !meta->sample_rows || !meta->n_sample_rows) return n_tokens;
    int64_t n = *meta->n_sample_rows;
    return n < 0 ? 0 : n > n_tokens ? n_tokens : n;
}

/* Row i of the gathered rows: the i-th listed row, or i without a list. A
 * listed row outside the batch (the engine never writes one) reads row 0
 * rather than out of bounds. */
static int64_t sampled_row(const pw_attn_meta *meta, int64_t i, int64_t n_tokens) {
    if (!meta || !meta->sample_rows || !meta->n_sample_rows) return i;
    int64_t r = meta->sample_rows[i];
    return r >= 0 && r < n_tokens ? r : 0;
}

void pw_k_select_rows(const pw_k_select_rows_args *a) {
    int64_t n = pw_k_sampled_rows(a->meta, a->n_tokens), w = a->width;
    for (int64_t i = 0; i < n; i++)
        memcpy(a->out + i * w, a->x + sampled_row(a->meta, i, a->n_tokens) * w,
               (size_t)w * sizeof(float));
    if (a->n_tokens > n) memset(a->out + n * w, 0, (size_t)((a->n_tokens - n) * w) * sizeof(float));
}

static void select_rows_launch(const void *args) { pw_k_select_rows(args); }
const pw_kernel pw_kernel_select_rows = {"select_rows", select_rows_launch, NULL,
                                         PW_K_ARGS(SELECT_ROWS)};

size_t pw_k_lm_head_scratch_floats(pw_dtype type, int64_t n_tokens, int64_t n, int64_t k) {
    /* The matmul runs on the sampled rows, a count read only when the
     * kernel runs (1 at the end of a 16-token prefill), so its scratch is
     * sized for the worst count up to n_tokens, not for n_tokens itself:
     * one row is never a whole BLAS tile. */
    size_t mm = n_tokens > 0 ? pw_k_matmul_any_scratch_floats(type, 1, n, k) : 0;
    return (size_t)(n_tokens * k) + mm;
}

void pw_k_lm_head(const pw_k_lm_head_args *a) {
    int64_t n = pw_k_sampled_rows(a->meta, a->n_tokens), k = a->k;
    if (n == 0) return;
    /* Decode batches sample every row, in order: multiply x where it is. */
    bool in_place = true;
    for (int64_t i = 0; i < n && in_place; i++) in_place = sampled_row(a->meta, i, a->n_tokens) == i;
    const float *x = a->x;
    float *mm_scratch = a->scratch ? a->scratch + a->n_tokens * k : NULL;
    if (!in_place) {
        for (int64_t i = 0; i < n; i++)
            memcpy(a->scratch + i * k, a->x + sampled_row(a->meta, i, a->n_tokens) * k,
                   (size_t)k * sizeof(float));
        x = a->scratch;
    }
    pw_k_matmul_any(a->y, x, a->w, a->type, n, a->n, k, mm_scratch);
    if (a->softcap > 0) pw_k_softcap(a->y, a->y, n * a->n, a->softcap);
}

static void lm_head_launch(const void *args) { pw_k_lm_head(args); }
const pw_kernel pw_kernel_lm_head = {"lm_head", lm_head_launch, NULL, PW_K_ARGS(LM_HEAD)};
