/* Hyperparameters of the Llama-shaped families (llama, qwen2, qwen3, phi3):
 * the keys under "<arch>.", each checked, and each bad one a PW_ERR_FORMAT
 * naming it. What llama.cpp reads and piecewise does not implement (rope
 * scaling other than linear, partial rotary embeddings, an attention factor)
 * is refused here rather than ignored. */
#include "model/llama.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define DEFAULT_ROPE_THETA 10000.0f
#define DEFAULT_RMS_EPS 1e-5f
/* The attention kernel's widest head (as for Gemma 3). */
#define MAX_HEAD_DIM 512

static const char *key_of(const char *arch, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", arch, suffix);
    return buf;
}

/* A positive u32 "<arch>.<suffix>": missing (when required), mistyped or 0
 * is a format error naming the key; absent and optional leaves *out. */
static pw_status hparam_u32(const pw_gguf *g, const char *arch, const char *suffix, bool required,
                            int64_t *out) {
    char key[96];
    key_of(arch, suffix, key, sizeof key);
    if (!pw_gguf_has(g, key)) {
        if (!required) return PW_OK;
        return pw_error(PW_ERR_FORMAT, "%s: missing hyperparameter %s", arch, key);
    }
    uint32_t u = 0;
    if (pw_gguf_get_u32(g, key, &u) != PW_OK)
        return pw_error(PW_ERR_FORMAT, "%s: hyperparameter %s: %s", arch, key, pw_last_error());
    if (u == 0) return pw_error(PW_ERR_FORMAT, "%s: hyperparameter %s is 0", arch, key);
    *out = u;
    return PW_OK;
}

/* A finite positive f32 "<arch>.<suffix>". */
static pw_status hparam_f32(const pw_gguf *g, const char *arch, const char *suffix, bool required,
                            float *out) {
    char key[96];
    key_of(arch, suffix, key, sizeof key);
    if (!pw_gguf_has(g, key)) {
        if (!required) return PW_OK;
        return pw_error(PW_ERR_FORMAT, "%s: missing hyperparameter %s", arch, key);
    }
    float f = 0;
    if (pw_gguf_get_f32(g, key, &f) != PW_OK)
        return pw_error(PW_ERR_FORMAT, "%s: hyperparameter %s: %s", arch, key, pw_last_error());
    if (!(f > 0.0f) || !isfinite(f))
        return pw_error(PW_ERR_FORMAT, "%s: hyperparameter %s = %g must be positive", arch, key,
                        (double)f);
    *out = f;
    return PW_OK;
}

/* Rope scaling: none, or linear with a factor (positions divided by it;
 * llama.cpp applies rope.scaling.factor or rope.scale_linear whatever the
 * type, and so does this).
 * YaRN, longrope and the others change the rotation in ways the rope table
 * does not express: refused. */
static pw_status read_rope_scaling(pw_model *m, const char *arch) {
    const pw_gguf *g = m->gguf;
    char key[96];
    m->rope_freq_scale = 1.0;
    const char *type = "none";
    key_of(arch, "rope.scaling.type", key, sizeof key);
    if (pw_gguf_has(g, key) && pw_gguf_get_string(g, key, &type) != PW_OK)
        return pw_error(PW_ERR_FORMAT, "%s: hyperparameter %s: %s", arch, key, pw_last_error());
    if (strcmp(type, "linear") != 0 && strcmp(type, "none") != 0)
        return pw_error(PW_ERR_FORMAT, "%s: metadata key '%s' = '%s' is not implemented "
                        "(piecewise implements rope scaling none and linear)", arch, key, type);
    /* as llama.cpp: the factor applies whatever the type says */
    float factor = 1.0f;
    PW_TRY(hparam_f32(g, arch, "rope.scale_linear", false, &factor));
    PW_TRY(hparam_f32(g, arch, "rope.scaling.factor", false, &factor));
    m->rope_freq_scale = 1.0 / (double)factor;
    float attn_factor = 1.0f;
    PW_TRY(hparam_f32(g, arch, "rope.scaling.attn_factor", false, &attn_factor));
    if (attn_factor != 1.0f)
        return pw_error(PW_ERR_FORMAT, "%s: %s.rope.scaling.attn_factor = %g is not implemented "
                        "(only 1)", arch, arch, (double)attn_factor);
    return PW_OK;
}

pw_status pw_model_read_llama_like_hparams(pw_model *m) {
    const pw_gguf *g = m->gguf;
    pw_model_info *in = &m->info;
    const char *a = in->arch;
    bool qwen3 = m->arch == PW_ARCH_QWEN3;
    PW_TRY(hparam_u32(g, a, "block_count", true, &in->n_layers));
    PW_TRY(hparam_u32(g, a, "embedding_length", true, &in->dim));
    PW_TRY(hparam_u32(g, a, "feed_forward_length", true, &in->ffn_dim));
    PW_TRY(hparam_u32(g, a, "attention.head_count", true, &in->n_heads));
    PW_TRY(hparam_u32(g, a, "context_length", true, &in->context));
    in->n_kv_heads = in->n_heads;
    PW_TRY(hparam_u32(g, a, "attention.head_count_kv", false, &in->n_kv_heads));
    if (in->n_heads % in->n_kv_heads != 0)
        return pw_error(PW_ERR_FORMAT,
                        "%s: %s.attention.head_count_kv (%" PRId64
                        ") must divide attention.head_count (%" PRId64 ")",
                        a, a, in->n_kv_heads, in->n_heads);
    int64_t key_len = in->dim / in->n_heads, value_len;
    PW_TRY(hparam_u32(g, a, "attention.key_length", false, &key_len));
    value_len = key_len;
    PW_TRY(hparam_u32(g, a, "attention.value_length", false, &value_len));
    if (!qwen3 && key_len * in->n_heads != in->dim)
        return pw_error(PW_ERR_FORMAT, "%s: metadata key '%s.attention.key_length' = %" PRId64
                        " differs from the head size %" PRId64 " (embedding_length / head_count)",
                        a, a, key_len, in->dim / in->n_heads);
    if (key_len % 2 != 0 || key_len > MAX_HEAD_DIM)
        return pw_error(PW_ERR_FORMAT, "%s: the head size %" PRId64 " (embedding_length / "
                        "head_count or attention.key_length) must be even and at most %d", a,
                        key_len, MAX_HEAD_DIM);
    if (value_len != key_len)
        return pw_error(PW_ERR_FORMAT, "%s: metadata key '%s.attention.value_length' = %" PRId64
                        " differs from the head size %" PRId64 " (piecewise implements only equal "
                        "sizes)", a, a, value_len, key_len);
    in->head_dim = key_len;
    int64_t rot = key_len;
    PW_TRY(hparam_u32(g, a, "rope.dimension_count", false, &rot));
    if (rot != key_len)
        return pw_error(PW_ERR_FORMAT, "%s: metadata key '%s.rope.dimension_count' = %" PRId64
                        " differs from the head size %" PRId64 " (partial rotary embeddings are "
                        "not implemented)", a, a, rot, key_len);
    in->rms_eps = DEFAULT_RMS_EPS;
    /* llama.cpp requires the epsilon of every family but Llama */
    PW_TRY(hparam_f32(g, a, "attention.layer_norm_rms_epsilon", m->arch != PW_ARCH_LLAMA,
                      &in->rms_eps));
    in->rope_theta = DEFAULT_ROPE_THETA;
    PW_TRY(hparam_f32(g, a, "rope.freq_base", false, &in->rope_theta));
    PW_TRY(read_rope_scaling(m, a));
    if (in->n_layers > PW_LLAMA_MAX_LAYERS)
        return pw_error(PW_ERR_UNSUPPORTED, "%" PRId64 " layers (at most %d)", in->n_layers,
                        PW_LLAMA_MAX_LAYERS);
    return PW_OK;
}

/* rope_freqs.weight (Llama 3.x's `llama3` rope scaling, as llama.cpp's
 * converter writes it): [head_dim / 2] positive divisors of the rope
 * frequencies. */
pw_status pw_model_load_rope_freqs(pw_model *m) {
    const pw_gguf_tensor *t;
    if (pw_gguf_find_tensor(m->gguf, "rope_freqs.weight", &t) != PW_OK) {
        pw_clear_error();
        return PW_OK;
    }
    int64_t half = m->info.head_dim / 2;
    PW_TRY(pw_model_load_weight(m, "rope_freqs.weight", half, 0, false, &m->rope_freqs));
    const float *f = pw_tensor_data(m->rope_freqs);
    m->rope_freq_factors = f;
    for (int64_t i = 0; i < half; i++)
        if (!(f[i] > 0.0f) || !isfinite(f[i]))
            return pw_error(PW_ERR_FORMAT, "rope_freqs.weight[%" PRId64 "] = %g must be positive",
                            i, (double)f[i]);
    return PW_OK;
}
