/* Kernels the model families beyond Llama and Gemma 3 add: NeoX rope on
 * its own (Qwen 2, Qwen 3's norm is head_norm_rope's, Phi-3), the bias
 * add of Qwen 2's q, k and v, and rope tables with frequency factors (Llama
 * 3.x's rope_freqs) or a linear position scale.
 *
 * Both kernels are row-local and scalar: row t of the output is computed
 * from row t of the input by the same statements whatever the batch, and
 * each element is one product pair and one add or subtract (no fused
 * multiply-add: ISO C forbids contraction and the build turns it off), so
 * there is one copy, identical on every ISA, and batch invariance holds by
 * construction. */
#include "ops/cpu/kernels.h"

#include <math.h>
#include <string.h>

void pw_k_rope_table_scaled(float *table, int64_t max_pos, int64_t head_dim, double theta,
                            const float *freq_factors, double freq_scale) {
    if (!freq_factors && freq_scale == 1.0) {
        pw_k_rope_table(table, max_pos, head_dim, theta);
        return;
    }
    int64_t half = head_dim / 2;
    for (int64_t p = 0; p < max_pos; p++) {
        for (int64_t i = 0; i < half; i++) {
            double inv_freq = pow(theta, -2.0 * (double)i / (double)head_dim);
            double angle = (double)p * inv_freq;
            if (freq_factors) angle /= (double)freq_factors[i];
            angle *= freq_scale;
            table[(p * half + i) * 2 + 0] = (float)cos(angle);
            table[(p * half + i) * 2 + 1] = (float)sin(angle);
        }
    }
}

void pw_k_rope_neox(float *out, const float *x, const int32_t *positions, const float *table,
                    int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t max_pos) {
    const int64_t half = head_dim / 2, width = n_heads * head_dim;
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *src = x + t * width;
        float *dst = out + t * width;
        int32_t pos = positions[t];
        if (pos < 0 || pos >= max_pos) {
            if (dst != src) memmove(dst, src, (size_t)width * sizeof *dst);
            continue;
        }
        const float *cs = table + (int64_t)pos * half * 2;
        for (int64_t h = 0; h < n_heads; h++) {
            const float *v = src + h * head_dim;
            float *o = dst + h * head_dim;
            for (int64_t i = 0; i < half; i++) {
                float c = cs[2 * i], s = cs[2 * i + 1];
                float x0 = v[i], x1 = v[i + half];
                o[i] = x0 * c - x1 * s;
                o[i + half] = x0 * s + x1 * c;
            }
        }
    }
}

void pw_k_bias_add(float *out, const float *x, const float *bias, int64_t n_tokens, int64_t n) {
    for (int64_t t = 0; t < n_tokens; t++)
        for (int64_t i = 0; i < n; i++) out[t * n + i] = x[t * n + i] + bias[i];
}

static void rope_neox_launch(const void *args) {
    const pw_k_rope_args *a = args;
    pw_k_rope_neox(a->out, a->x, a->positions, a->table, a->n_tokens, a->n_heads, a->head_dim,
                   a->max_pos);
}
const pw_kernel pw_kernel_rope_neox = {"rope_neox", rope_neox_launch, NULL, PW_K_ARGS(ROPE_NEOX)};

static void bias_add_launch(const void *args) {
    const pw_k_bias_add_args *a = args;
    pw_k_bias_add(a->out, a->x, a->bias, a->n_tokens, a->n);
}
const pw_kernel pw_kernel_bias_add = {"bias_add", bias_add_launch, NULL, PW_K_ARGS(BIAS_ADD)};
