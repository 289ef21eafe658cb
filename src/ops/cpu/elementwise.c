/* Row-local kernels: embedding, rms_norm, rope, silu_and_mul, add, argmax.
 *
 * Each output row is computed from its own input row by a loop whose order
 * does not depend on the row count, which is all batch invariance asks of
 * them. */
#include "ops/cpu/kernels.h"
#include "ops/cpu/vec_math.h"

#include <math.h>
#include <string.h>

/* ---- embedding ----------------------------------------------------------- */

void pw_k_embedding(float *out, const int32_t *ids, const float *table, int64_t n_tokens,
                    int64_t vocab, int64_t dim) {
    for (int64_t t = 0; t < n_tokens; t++) {
        float *row = out + t * dim;
        int32_t id = ids[t];
        if (id < 0 || id >= vocab) memset(row, 0, (size_t)dim * sizeof *row);
        else memcpy(row, table + (int64_t)id * dim, (size_t)dim * sizeof *row);
    }
}

static void embedding_launch(const void *args) {
    const pw_k_embedding_args *a = args;
    pw_k_embedding(a->out, a->ids, a->table, a->n_tokens, a->vocab, a->dim);
}
const pw_kernel pw_kernel_embedding = {"embedding", embedding_launch, NULL, PW_K_ARGS(EMBEDDING)};

/* ---- rms_norm --------------------------------------------------------------------- */

/* The sum of squares is accumulated in double (as ggml does), in eight
 * lanes: lane l sums x[8b+l]^2 over blocks b in order, the lanes are added
 * as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the tail elements in
 * order. Squares of floats are exact in double and there is no fused
 * multiply-add, so every build returns the same bits. */
typedef double pw_v4d __attribute__((vector_size(4 * sizeof(double))));

PW_AVX2_CLONES
static void rms_norm_row(float *y, const float *x, const float *w, int64_t dim, float eps) {
    int64_t nv = dim / PW_VEC_LANES * PW_VEC_LANES;
    pw_v4d lo = {0}, hi = {0};
    for (int64_t i = 0; i < nv; i += PW_VEC_LANES) {
        pw_v8f v = *(const pw_v8f_u *)(x + i);
        pw_v4d a = __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), pw_v4d);
        pw_v4d b = __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), pw_v4d);
        lo += a * a;
        hi += b * b;
    }
    pw_v4d pair = lo + hi; /* lane l: l + (l+4) */
    double sum = (pair[0] + pair[2]) + (pair[1] + pair[3]);
    for (int64_t i = nv; i < dim; i++) sum += (double)x[i] * (double)x[i];
    float scale = (float)(1.0 / sqrt(sum / (double)dim + (double)eps));
    for (int64_t i = 0; i < nv; i += PW_VEC_LANES) {
        pw_v8f r = *(const pw_v8f_u *)(x + i) * scale * *(const pw_v8f_u *)(w + i);
        memcpy(y + i, &r, sizeof r);
    }
    for (int64_t i = nv; i < dim; i++) y[i] = x[i] * scale * w[i];
}

void pw_k_rms_norm(float *y, const float *x, const float *w, int64_t n_tokens, int64_t dim,
                   float eps) {
    for (int64_t t = 0; t < n_tokens; t++) rms_norm_row(y + t * dim, x + t * dim, w, dim, eps);
}

void pw_k_add_rms_norm(float *y, float *residual, const float *x, const float *w,
                       int64_t n_tokens, int64_t dim, float eps) {
    for (int64_t t = 0; t < n_tokens; t++) {
        float *r = residual + t * dim;
        const float *xr = x + t * dim;
        for (int64_t i = 0; i < dim; i++) r[i] = r[i] + xr[i];
        rms_norm_row(y + t * dim, r, w, dim, eps);
    }
}

static void rms_norm_launch(const void *args) {
    const pw_k_rms_norm_args *a = args;
    pw_k_rms_norm(a->y, a->x, a->w, a->n_tokens, a->dim, a->eps);
}
static void add_rms_norm_launch(const void *args) {
    const pw_k_rms_norm_args *a = args;
    pw_k_add_rms_norm(a->y, a->residual, a->x, a->w, a->n_tokens, a->dim, a->eps);
}
const pw_kernel pw_kernel_rms_norm = {"rms_norm", rms_norm_launch, NULL, PW_K_ARGS(RMS_NORM)};
const pw_kernel pw_kernel_add_rms_norm = {"add_rms_norm", add_rms_norm_launch, NULL,
                                          PW_K_ARGS(ADD_RMS_NORM)};

/* ---- rope -------------------------------------------------------------------------------- */

void pw_k_rope_table(float *table, int64_t max_pos, int64_t head_dim, double theta) {
    int64_t half = head_dim / 2;
    for (int64_t p = 0; p < max_pos; p++) {
        for (int64_t i = 0; i < half; i++) {
            double inv_freq = pow(theta, -2.0 * (double)i / (double)head_dim);
            double angle = (double)p * inv_freq;
            table[(p * half + i) * 2 + 0] = (float)cos(angle);
            table[(p * half + i) * 2 + 1] = (float)sin(angle);
        }
    }
}

/* Pairs (x0, x1) rotate to (x0*c - x1*s, x0*s + x1*c). Eight lanes hold
 * four pairs: out = x*[c,c] + swap(x)*[s,s]*[-1,+1], the same products and
 * the same sum per element as the scalar formula (negation and the
 * commuted add are exact), so the vector and scalar paths agree bit for
 * bit. */
PW_VEC_INLINE pw_v8f rope8(pw_v8f x, pw_v8f cs) {
    pw_v8f c = __builtin_shufflevector(cs, cs, 0, 0, 2, 2, 4, 4, 6, 6);
    pw_v8f s = __builtin_shufflevector(cs, cs, 1, 1, 3, 3, 5, 5, 7, 7);
    pw_v8f swapped = __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6);
    const pw_v8f sign = {-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f};
    pw_v8f a = x * c, b = swapped * s * sign;
    PW_NO_FUSE(a);
    PW_NO_FUSE(b);
    return a + b;
}

PW_AVX2_CLONES
void pw_k_rope(float *out, const float *x, const int32_t *positions, const float *table,
               int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t max_pos) {
    const int64_t half = head_dim / 2, width = n_heads * head_dim;
    const int64_t vec_dims = head_dim / PW_VEC_LANES * PW_VEC_LANES;
    for (int64_t t = 0; t < n_tokens; t++) {
        int32_t pos = positions[t];
        const float *src = x + t * width;
        float *dst = out + t * width;
        if (pos < 0 || pos >= max_pos) {
            if (dst != src) memcpy(dst, src, (size_t)width * sizeof *dst);
            continue;
        }
        const float *cs = table + (int64_t)pos * half * 2;
        for (int64_t h = 0; h < n_heads; h++) {
            const float *v = src + h * head_dim;
            float *o = dst + h * head_dim;
            for (int64_t d = 0; d < vec_dims; d += PW_VEC_LANES) {
                pw_v8f r = rope8(*(const pw_v8f_u *)(v + d), *(const pw_v8f_u *)(cs + d));
                memcpy(o + d, &r, sizeof r);
            }
            if (vec_dims < head_dim) {
                /* The last pairs through the same code, padded (lanes are
                 * independent, so padding cannot change them). */
                size_t bytes = (size_t)(head_dim - vec_dims) * sizeof(float);
                pw_v8f xv = {0}, cv = {0};
                memcpy(&xv, v + vec_dims, bytes);
                memcpy(&cv, cs + vec_dims, bytes);
                pw_v8f r = rope8(xv, cv);
                memcpy(o + vec_dims, &r, bytes);
            }
        }
    }
}

static void rope_launch(const void *args) {
    const pw_k_rope_args *a = args;
    pw_k_rope(a->out, a->x, a->positions, a->table, a->n_tokens, a->n_heads, a->head_dim, a->max_pos);
}
const pw_kernel pw_kernel_rope = {"rope", rope_launch, NULL, PW_K_ARGS(ROPE)};

/* ---- silu_and_mul ------------------------------------------------------------------------- */

/* silu(v) * u = v / (1 + exp(-v)) * u, eight lanes at a time through
 * pw_v8_exp. A partial last vector goes through the same code (padded), so
 * an element's bits never depend on where it falls in the array. */
PW_VEC_INLINE pw_v8f silu_mul8(pw_v8f v, pw_v8f u) {
    return v / (1.0f + pw_v8_exp(-v)) * u;
}

PW_AVX2_CLONES
void pw_k_silu_mul(float *out, const float *a, const float *b, int64_t n) {
    int64_t nv = n / PW_VEC_LANES * PW_VEC_LANES;
    for (int64_t i = 0; i < nv; i += PW_VEC_LANES) {
        pw_v8f r = silu_mul8(*(const pw_v8f_u *)(a + i), *(const pw_v8f_u *)(b + i));
        memcpy(out + i, &r, sizeof r);
    }
    if (nv < n) {
        pw_v8f va = {0}, vb = {0};
        memcpy(&va, a + nv, (size_t)(n - nv) * sizeof(float));
        memcpy(&vb, b + nv, (size_t)(n - nv) * sizeof(float));
        pw_v8f r = silu_mul8(va, vb);
        memcpy(out + nv, &r, (size_t)(n - nv) * sizeof(float));
    }
}

void pw_k_silu_and_mul(float *out, const float *gate_up, int64_t n_tokens, int64_t f) {
    for (int64_t t = 0; t < n_tokens; t++)
        pw_k_silu_mul(out + t * f, gate_up + t * 2 * f, gate_up + t * 2 * f + f, f);
}

static void silu_and_mul_launch(const void *args) {
    const pw_k_silu_args *a = args;
    pw_k_silu_and_mul(a->out, a->a, a->n_tokens, a->f);
}
static void silu_mul_launch(const void *args) {
    const pw_k_silu_args *a = args;
    pw_k_silu_mul(a->out, a->a, a->b, a->n_tokens * a->f);
}
const pw_kernel pw_kernel_silu_and_mul = {"silu_and_mul", silu_and_mul_launch, NULL,
                                          PW_K_ARGS(SILU_AND_MUL)};
const pw_kernel pw_kernel_silu_mul = {"silu_mul", silu_mul_launch, NULL, PW_K_ARGS(SILU_MUL)};

/* ---- add --------------------------------------------------------------------------------- */

/* Lane-wise IEEE adds: the AVX2 clone (8 lanes, where the baseline build
 * has SSE2's 4) returns the same bits. The residual adds of a decode step
 * are 64-float rows, where the width halves the loop. */
PW_AVX2_CLONES
void pw_k_add(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void add_launch(const void *args) {
    const pw_k_add_args *a = args;
    pw_k_add(a->out, a->a, a->b, a->n);
}
const pw_kernel pw_kernel_add = {"add", add_launch, NULL, PW_K_ARGS(ADD)};

/* ---- argmax ------------------------------------------------------------------------------ */

/* One pass in eight lanes: lane j keeps the largest value among elements
 * j, j+8, j+16, ... and the first index holding it (a strict `>` keeps the
 * earlier index on ties, and NaN never wins it). The answer is the largest
 * lane value with the smallest index among the lanes holding it: the first
 * index of the maximum. Greedy sampling runs this every step on the host. */
PW_AVX2_CLONES
int32_t pw_k_argmax_row(const float *row, int64_t n) {
    pw_v8f best = pw_v8_splat(-INFINITY);
    pw_v8i best_i = (pw_v8i){0} - 1, idx = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t i = 0;
    for (; i + PW_VEC_LANES <= n && i + PW_VEC_LANES <= INT32_MAX; i += PW_VEC_LANES) {
        pw_v8f v = *(const pw_v8f_u *)(row + i);
        pw_v8i gt = v > best;
        best = pw_v8_select(gt, v, best);
        best_i = (idx & gt) | (best_i & ~gt);
        idx += PW_VEC_LANES;
    }
    float top = -INFINITY;
    int64_t top_i = -1;
    for (int j = 0; j < PW_VEC_LANES; j++)
        if (best_i[j] >= 0 && (best[j] > top || (best[j] == top && best_i[j] < top_i))) {
            top = best[j];
            top_i = best_i[j];
        }
    for (; i < n; i++)
        if (row[i] > top) {
            top = row[i];
            top_i = i;
        }
    if (top_i >= 0) return (int32_t)top_i;
    /* Nothing above -inf: the first element that is not NaN, or 0. */
    for (i = 0; i < n; i++)
        if (!isnan(row[i])) return (int32_t)i;
    return 0;
}

void pw_k_argmax(int32_t *out, const float *logits, int64_t n_tokens, int64_t vocab) {
    for (int64_t t = 0; t < n_tokens; t++) out[t] = pw_k_argmax_row(logits + t * vocab, vocab);
}

static void argmax_launch(const void *args) {
    const pw_k_argmax_args *a = args;
    pw_k_argmax(a->out, a->logits, a->n_tokens, a->vocab);
}
const pw_kernel pw_kernel_argmax = {"argmax", argmax_launch, NULL, PW_K_ARGS(ARGMAX)};

/* ---- Gemma: gelu_mul, head_norm_rope, scale, softcap ----------------------------------- */

/* gelu_tanh(v) * u. 0.5 v (1 + tanh(y)) = v / (1 + exp(-2y)): one exp,
 * no cancellation near tanh = -1 and the right limits (v for large v, -0
 * for very negative v, where exp(-2y) is +inf). Lane-wise IEEE ops and
 * pw_v8_exp only, so a partial last vector gives the same bits. */
PW_VEC_INLINE pw_v8f gelu_mul8(pw_v8f v, pw_v8f u) {
    const float sqrt_2_over_pi = 0.7978845608028654f;
    pw_v8f inner = v * (1.0f + 0.044715f * (v * v));
    pw_v8f y = inner * sqrt_2_over_pi;
    return v / (1.0f + pw_v8_exp(-2.0f * y)) * u;
}

PW_AVX2_CLONES
void pw_k_gelu_mul(float *out, const float *a, const float *b, int64_t n) {
    int64_t nv = n / PW_VEC_LANES * PW_VEC_LANES;
    for (int64_t i = 0; i < nv; i += PW_VEC_LANES) {
        pw_v8f r = gelu_mul8(*(const pw_v8f_u *)(a + i), *(const pw_v8f_u *)(b + i));
        memcpy(out + i, &r, sizeof r);
    }
    if (nv < n) {
        pw_v8f va = {0}, vb = {0};
        memcpy(&va, a + nv, (size_t)(n - nv) * sizeof(float));
        memcpy(&vb, b + nv, (size_t)(n - nv) * sizeof(float));
        pw_v8f r = gelu_mul8(va, vb);
        memcpy(out + nv, &r, (size_t)(n - nv) * sizeof(float));
    }
}

static void gelu_mul_launch(const void *args) {
    const pw_k_gelu_mul_args *a = args;
    pw_k_gelu_mul(a->out, a->a, a->b, a->n);
}
const pw_kernel pw_kernel_gelu_mul = {"gelu_mul", gelu_mul_launch, NULL, PW_K_ARGS(GELU_MUL)};

/* NeoX rotation of one head row in place: pair i is (x[i], x[i + half]),
 * each output one product pair and one add or subtract (no fused
 * multiply-add: ISO C forbids contraction), so every build agrees. */
static void rope_neox_row(float *x, const float *cs, int64_t half) {
    for (int64_t i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        float x0 = x[i], x1 = x[i + half];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x0 * s + x1 * c;
    }
}

void pw_k_head_norm_rope(const pw_k_head_norm_rope_args *a) {
    const int64_t hd = a->head_dim, half = hd / 2;
    for (int64_t t = 0; t < a->n_tokens; t++) {
        float *row = a->x + t * a->n_heads * hd;
        int32_t pos = a->positions[t];
        bool rotate = pos >= 0 && pos < a->max_pos;
        const float *cs = a->table + (int64_t)(rotate ? pos : 0) * half * 2;
        for (int64_t h = 0; h < a->n_heads; h++) {
            rms_norm_row(row + h * hd, row + h * hd, a->w, hd, a->eps);
            if (rotate) rope_neox_row(row + h * hd, cs, half);
        }
    }
}

static void head_norm_rope_launch(const void *args) { pw_k_head_norm_rope(args); }
const pw_kernel pw_kernel_head_norm_rope = {"head_norm_rope", head_norm_rope_launch, NULL,
                                            PW_K_ARGS(HEAD_NORM_ROPE)};

void pw_k_scale(float *out, const float *x, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * s;
}

void pw_k_softcap(float *out, const float *x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) out[i] = cap * tanhf(x[i] / cap);
}

static void scale_launch(const void *args) {
    const pw_k_scale_args *a = args;
    pw_k_scale(a->out, a->x, a->n, a->s);
}
static void softcap_launch(const void *args) {
    const pw_k_scale_args *a = args;
    pw_k_softcap(a->out, a->x, a->n, a->s);
}
const pw_kernel pw_kernel_scale = {"scale", scale_launch, NULL, PW_K_ARGS(SCALE)};
const pw_kernel pw_kernel_softcap = {"softcap", softcap_launch, NULL, PW_K_ARGS(SOFTCAP)};
