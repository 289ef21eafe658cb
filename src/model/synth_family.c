/* Synthetic family GGUFs (synth_family.h).
 *
 * Weight scales keep every activation near unit size, as in a trained model:
 * a projection from k inputs draws uniformly from [-sqrt(3/k), sqrt(3/k)),
 * so its outputs have variance 1 when its inputs do; norms are 1 +/- 0.1;
 * embeddings are uniform in [-1, 1); the LM head is scaled so the logits
 * have a standard deviation of about 8, the range of a trained model's
 * (tied embeddings give about 9 at dim 256).
 * Values come from xorshift64* seeded by the
 * config, converted with integer and float arithmetic only, so a config
 * gives the same file on every machine. */
#include "model/synth_family.h"

#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/synth.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

pw_status pw_synth_family_preset(const char *family, pw_synth_family_config *out) {
    pw_synth_family_config c = {
        .arch = "llama", .dim = 256, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2,
        .head_dim = 0, .ffn_dim = 768, .context_length = 4096, .rope_theta = 10000.0f,
        .rms_eps = 1e-5f, .llama3_rope = false, .weight_dtype = PW_F16, .seed = 1,
    };
    if (!family) return pw_error(PW_ERR_INVALID_ARG, "synthetic model: no family named");
    if (strcmp(family, "llama3") == 0) {
        c.rope_theta = 500000.0f, c.llama3_rope = true, c.seed = 3;
    } else if (strcmp(family, "mistral") == 0) {
        c.rope_theta = 1000000.0f, c.seed = 7;
    } else if (strcmp(family, "qwen2") == 0) {
        c.arch = "qwen2", c.rope_theta = 1000000.0f, c.rms_eps = 1e-6f, c.seed = 2;
        c.tied_embeddings = true;
    } else if (strcmp(family, "qwen3") == 0) {
        /* Qwen 3's heads are wider than dim / n_heads: q is 512 wide here */
        c.arch = "qwen3", c.n_heads = 8, c.n_kv_heads = 4, c.head_dim = 64;
        c.rope_theta = 1000000.0f, c.rms_eps = 1e-6f, c.seed = 4, c.tied_embeddings = true;
    } else if (strcmp(family, "phi3") == 0) {
        c.arch = "phi3", c.n_kv_heads = 4, c.seed = 5;
    } else {
        return pw_error(PW_ERR_INVALID_ARG, "synthetic model: unknown family '%s' (llama3, "
                        "mistral, qwen2, qwen3, phi3)", family);
    }
    *out = c;
    return PW_OK;
}

void pw_synth_family_resize(pw_synth_family_config *c, const pw_synth_shape *shape, pw_dtype dtype) {
    c->weight_dtype = dtype;
    if (!shape) return;
    c->dim = shape->dim, c->n_layers = shape->n_layers, c->n_heads = shape->n_heads;
    c->n_kv_heads = shape->n_kv_heads, c->ffn_dim = shape->ffn_dim, c->head_dim = 0;
    if (strcmp(c->arch, "qwen3") == 0) c->head_dim = 2 * shape->dim / shape->n_heads;
    if (strcmp(c->arch, "phi3") == 0) c->n_kv_heads = shape->n_heads;
}

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}
static float rng_uniform(uint64_t *s) { /* in [-1, 1) */
    return (float)((double)(rng_next(s) >> 11) * 0x1p-52 - 1.0);
}

/* A tensor of d0 x d1 (d1 = 1: a vector) values center + scale * U[-1, 1). */
static pw_status add_random(pw_gguf_writer *w, const char *name, pw_dtype dtype, int64_t d0,
                            int64_t d1, float center, float scale, uint64_t *rng) {
    int64_t n = d0 * d1;
    float *values = pw_host_alloc((size_t)n * sizeof *values);
    if (!values) return pw_error(PW_ERR_OOM, "synthetic model: weights");
    for (int64_t i = 0; i < n; i++) values[i] = center + scale * rng_uniform(rng);
    int64_t dims[2] = {d0, d1};
    pw_status s = pw_gguf_writer_add_tensor_f32(w, name, d1 > 1 ? dtype : PW_F32, d1 > 1 ? 2 : 1,
                                                dims, values);
    pw_host_free(values);
    return s;
}

/* Integers become u32 (scalars) or i32 (arrays), floats f32: the types
 * llama.cpp's converter writes for every key copied here. */
pw_status pw_synth_copy_kv(pw_gguf_writer *w, const pw_gguf_kv *kv) {
    const char *key = pw_gguf_kv_key(kv);
    pw_gguf_type t = pw_gguf_kv_type(kv);
    if (t == PW_GGUF_STRING) {
        const char *v;
        PW_TRY(pw_gguf_kv_string(kv, &v, NULL));
        return pw_gguf_writer_add_string(w, key, v);
    }
    if (t == PW_GGUF_BOOL) {
        bool v;
        PW_TRY(pw_gguf_kv_bool(kv, &v));
        return pw_gguf_writer_add_bool(w, key, v);
    }
    if (t == PW_GGUF_FLOAT32 || t == PW_GGUF_FLOAT64) {
        double v;
        PW_TRY(pw_gguf_kv_float(kv, &v));
        return pw_gguf_writer_add_f32(w, key, (float)v);
    }
    if (t != PW_GGUF_ARRAY) {
        int64_t v;
        PW_TRY(pw_gguf_kv_int(kv, &v));
        if (v < 0 || v > UINT32_MAX)
            return pw_error(PW_ERR_FORMAT, "synthetic model: vocabulary key %s = %" PRId64
                            " is out of range", key, v);
        return pw_gguf_writer_add_u32(w, key, (uint32_t)v);
    }
    pw_gguf_type et = pw_gguf_kv_array_type(kv);
    uint64_t n = pw_gguf_kv_array_len(kv);
    pw_status s = PW_OK;
    if (et == PW_GGUF_STRING) {
        char **strs = pw_host_calloc(n ? n : 1, sizeof *strs);
        if (!strs) return pw_error(PW_ERR_OOM, "synthetic model: vocabulary");
        for (uint64_t i = 0; i < n && s == PW_OK; i++) {
            const char *p;
            size_t len;
            s = pw_gguf_kv_array_string(kv, i, &p, &len);
            if (s == PW_OK && memchr(p, '\0', len))
                s = pw_error(PW_ERR_UNSUPPORTED, "synthetic model: %s[%" PRIu64 "] holds a NUL",
                             key, i);
            if (s == PW_OK && !(strs[i] = pw_host_alloc(len + 1)))
                s = pw_error(PW_ERR_OOM, "synthetic model: vocabulary");
            if (s == PW_OK) memcpy(strs[i], p, len), strs[i][len] = '\0';
        }
        if (s == PW_OK) s = pw_gguf_writer_add_string_array(w, key, (const char *const *)strs, n);
        for (uint64_t i = 0; i < n; i++) pw_host_free(strs[i]);
        pw_host_free(strs);
        return s;
    }
    bool is_float = et == PW_GGUF_FLOAT32 || et == PW_GGUF_FLOAT64;
    /* numbers: f32 stay f32, every integer type becomes i32 (token types) */
    void *buf = pw_host_alloc((size_t)(n ? n : 1) * 4);
    if (!buf) return pw_error(PW_ERR_OOM, "synthetic model: vocabulary");
    for (uint64_t i = 0; i < n && s == PW_OK; i++) {
        if (is_float) {
            double v;
            s = pw_gguf_kv_array_float(kv, i, &v);
            ((float *)buf)[i] = (float)v;
        } else {
            int64_t v;
            s = pw_gguf_kv_array_int(kv, i, &v);
            if (s == PW_OK && (v < INT32_MIN || v > INT32_MAX))
                s = pw_error(PW_ERR_FORMAT, "synthetic model: %s[%" PRIu64 "] is out of range",
                             key, i);
            ((int32_t *)buf)[i] = (int32_t)v;
        }
    }
    if (s == PW_OK)
        s = pw_gguf_writer_add_array(w, key, is_float ? PW_GGUF_FLOAT32 : PW_GGUF_INT32, buf, n);
    pw_host_free(buf);
    return s;
}

static pw_status copy_vocab(pw_gguf_writer *w, const pw_gguf *v, int64_t *vocab) {
    const pw_gguf_kv *tokens;
    uint64_t n = 0;
    PW_TRY(pw_gguf_get_array(v, "tokenizer.ggml.tokens", PW_GGUF_STRING, &tokens, &n));
    if (n == 0 || n > INT32_MAX)
        return pw_error(PW_ERR_FORMAT, "synthetic model: the vocabulary has %" PRIu64 " tokens", n);
    *vocab = (int64_t)n;
    for (int64_t i = 0; i < pw_gguf_kv_count(v); i++) {
        const pw_gguf_kv *kv = pw_gguf_kv_at(v, i);
        if (strncmp(pw_gguf_kv_key(kv), "tokenizer.", 10) == 0) PW_TRY(pw_synth_copy_kv(w, kv));
    }
    return PW_OK;
}

static pw_status check_config(const pw_synth_family_config *c) {
    if (!c->arch || (strcmp(c->arch, "llama") != 0 && strcmp(c->arch, "qwen2") != 0 &&
                     strcmp(c->arch, "qwen3") != 0 && strcmp(c->arch, "phi3") != 0))
        return pw_error(PW_ERR_INVALID_ARG, "synthetic model: architecture '%s' (llama, qwen2, "
                        "qwen3, phi3)", c->arch ? c->arch : "(null)");
    if (c->dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->ffn_dim <= 0 || c->context_length <= 0 || c->head_dim < 0)
        return pw_error(PW_ERR_INVALID_ARG, "synthetic model: every size must be positive");
    int hd = c->head_dim ? c->head_dim : c->dim / c->n_heads;
    if (hd % 2 != 0 || c->n_heads % c->n_kv_heads != 0 ||
        (!c->head_dim && c->dim % c->n_heads != 0))
        return pw_error(PW_ERR_INVALID_ARG, "synthetic model: %d heads of %d (%d KV heads) do not "
                        "fit dim %d", c->n_heads, hd, c->n_kv_heads, c->dim);
    if (c->head_dim && strcmp(c->arch, "qwen3") != 0 && c->head_dim * c->n_heads != c->dim)
        return pw_error(PW_ERR_INVALID_ARG, "synthetic model: only qwen3 has a head size other "
                        "than dim / n_heads");
    if (c->llama3_rope && strcmp(c->arch, "llama") != 0)
        return pw_error(PW_ERR_INVALID_ARG, "synthetic model: llama3 rope is a llama feature");
    int64_t be = pw_dtype_block_elems(c->weight_dtype);
    if (be == 0 || c->dim % be != 0 || c->ffn_dim % be != 0 || (hd * c->n_heads) % be != 0)
        return pw_error(PW_ERR_INVALID_ARG, "synthetic model: sizes must be multiples of the %s "
                        "block", pw_dtype_name(c->weight_dtype));
    return PW_OK;
}

/* rope_freqs.weight: divisors of the rope frequencies, as Llama 3.x files
 * carry them. Llama 3.1's own (factor 8 on wavelengths above its original
 * 8192 positions, 1 below 2048) change nothing a test of a few dozen
 * positions can see, so these rise linearly from 1 on the first (fastest)
 * pair to 8 on the last: ignoring them, or applying them to the wrong
 * pairs, changes the tokens within a few steps (docs/models.md). */
static void llama3_factors(float *out, int head_dim) {
    int half = head_dim / 2;
    for (int i = 0; i < half; i++)
        out[i] = half > 1 ? 1.0f + 7.0f * (float)i / (float)(half - 1) : 1.0f;
}

static pw_status add_metadata(pw_gguf_writer *w, const pw_synth_family_config *c, int hd) {
    char key[96];
    const char *a = c->arch;
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    PW_TRY(pw_gguf_writer_add_string(w, "general.architecture", a));
    PW_TRY(pw_gguf_writer_add_string(w, "general.name", "piecewise synthetic"));
    PW_TRY(pw_gguf_writer_add_u32(w, KEY("block_count"), (uint32_t)c->n_layers));
    PW_TRY(pw_gguf_writer_add_u32(w, KEY("context_length"), (uint32_t)c->context_length));
    PW_TRY(pw_gguf_writer_add_u32(w, KEY("embedding_length"), (uint32_t)c->dim));
    PW_TRY(pw_gguf_writer_add_u32(w, KEY("feed_forward_length"), (uint32_t)c->ffn_dim));
    PW_TRY(pw_gguf_writer_add_u32(w, KEY("attention.head_count"), (uint32_t)c->n_heads));
    PW_TRY(pw_gguf_writer_add_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads));
    PW_TRY(pw_gguf_writer_add_f32(w, KEY("rope.freq_base"), c->rope_theta));
    PW_TRY(pw_gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->rms_eps));
    PW_TRY(pw_gguf_writer_add_u32(w, KEY("rope.dimension_count"), (uint32_t)hd));
    if (c->head_dim) {
        PW_TRY(pw_gguf_writer_add_u32(w, KEY("attention.key_length"), (uint32_t)hd));
        PW_TRY(pw_gguf_writer_add_u32(w, KEY("attention.value_length"), (uint32_t)hd));
    }
#undef KEY
    return PW_OK;
}

static pw_status add_weights(pw_gguf_writer *w, const pw_synth_family_config *c, int hd,
                             int64_t vocab) {
    uint64_t rng = c->seed * 0x9E3779B97F4A7C15ULL + 1;
    const char *a = c->arch;
    bool qwen2 = strcmp(a, "qwen2") == 0, qwen3 = strcmp(a, "qwen3") == 0;
    bool phi3 = strcmp(a, "phi3") == 0;
    int64_t dim = c->dim, q_dim = (int64_t)c->n_heads * hd, kv_dim = (int64_t)c->n_kv_heads * hd;
    int64_t ffn = c->ffn_dim;
    pw_dtype wt = c->weight_dtype;
    float s_dim = sqrtf(3.0f / (float)dim), s_q = sqrtf(3.0f / (float)q_dim);
    float s_ffn = sqrtf(3.0f / (float)ffn);
    PW_TRY(add_random(w, "token_embd.weight", wt, dim, vocab, 0.0f, 1.0f, &rng));
    if (c->llama3_rope) {
        float f[256];
        if (hd / 2 > (int)PW_ARRAY_LEN(f))
            return pw_error(PW_ERR_INVALID_ARG, "synthetic model: head size %d is too large", hd);
        llama3_factors(f, hd);
        int64_t dims[1] = {hd / 2};
        PW_TRY(pw_gguf_writer_add_tensor_f32(w, "rope_freqs.weight", PW_F32, 1, dims, f));
    }
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", l, suffix), name)
    for (int l = 0; l < c->n_layers; l++) {
        PW_TRY(add_random(w, NAME("attn_norm.weight"), PW_F32, dim, 1, 1.0f, 0.1f, &rng));
        if (phi3) {
            PW_TRY(add_random(w, NAME("attn_qkv.weight"), wt, dim, q_dim + 2 * kv_dim, 0.0f,
                              s_dim, &rng));
        } else {
            PW_TRY(add_random(w, NAME("attn_q.weight"), wt, dim, q_dim, 0.0f, s_dim, &rng));
            PW_TRY(add_random(w, NAME("attn_k.weight"), wt, dim, kv_dim, 0.0f, s_dim, &rng));
            PW_TRY(add_random(w, NAME("attn_v.weight"), wt, dim, kv_dim, 0.0f, s_dim, &rng));
        }
        if (qwen2) {
            PW_TRY(add_random(w, NAME("attn_q.bias"), PW_F32, q_dim, 1, 0.0f, 0.5f, &rng));
            PW_TRY(add_random(w, NAME("attn_k.bias"), PW_F32, kv_dim, 1, 0.0f, 0.5f, &rng));
            PW_TRY(add_random(w, NAME("attn_v.bias"), PW_F32, kv_dim, 1, 0.0f, 0.5f, &rng));
        }
        if (qwen3) {
            PW_TRY(add_random(w, NAME("attn_q_norm.weight"), PW_F32, hd, 1, 1.0f, 0.1f, &rng));
            PW_TRY(add_random(w, NAME("attn_k_norm.weight"), PW_F32, hd, 1, 1.0f, 0.1f, &rng));
        }
        PW_TRY(add_random(w, NAME("attn_output.weight"), wt, q_dim, dim, 0.0f, s_q, &rng));
        PW_TRY(add_random(w, NAME("ffn_norm.weight"), PW_F32, dim, 1, 1.0f, 0.1f, &rng));
        if (phi3) {
            PW_TRY(add_random(w, NAME("ffn_up.weight"), wt, dim, 2 * ffn, 0.0f, s_dim, &rng));
        } else {
            PW_TRY(add_random(w, NAME("ffn_gate.weight"), wt, dim, ffn, 0.0f, s_dim, &rng));
            PW_TRY(add_random(w, NAME("ffn_up.weight"), wt, dim, ffn, 0.0f, s_dim, &rng));
        }
        PW_TRY(add_random(w, NAME("ffn_down.weight"), wt, ffn, dim, 0.0f, s_ffn, &rng));
    }
#undef NAME
    PW_TRY(add_random(w, "output_norm.weight", PW_F32, dim, 1, 1.0f, 0.1f, &rng));
    if (c->tied_embeddings) return PW_OK; /* logits' deviation sqrt(dim / 3): 9 at dim 256 */
    /* logits of standard deviation ~8: uniform scale 8 sqrt(3 / dim) */
    return add_random(w, "output.weight", wt, dim, vocab, 0.0f, 8.0f * s_dim, &rng);
}

pw_status pw_synth_family_write(const pw_synth_family_config *c, const char *vocab_path,
                                const char *out_path) {
    if (!c || !vocab_path || !out_path)
        return pw_error(PW_ERR_INVALID_ARG, "synthetic model: NULL argument");
    PW_TRY(check_config(c));
    int hd = c->head_dim ? c->head_dim : c->dim / c->n_heads;
    pw_gguf *v = NULL;
    PW_TRY(pw_gguf_open(vocab_path, &v));
    pw_gguf_writer *w = NULL;
    pw_status s = pw_gguf_writer_new(&w);
    int64_t vocab = 0;
    if (s == PW_OK) s = add_metadata(w, c, hd);
    if (s == PW_OK) s = copy_vocab(w, v, &vocab);
    if (s == PW_OK) s = add_weights(w, c, hd, vocab);
    if (s == PW_OK) s = pw_gguf_writer_to_file(w, out_path);
    pw_gguf_writer_free(w);
    pw_gguf_free(v);
    if (s != PW_OK) return pw_error_context(s, "synthetic %s model from '%s'", c->arch, vocab_path);
    return PW_OK;
}
