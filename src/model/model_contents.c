/* The allow-list of tensors and metadata keys per architecture
 * (model_contents.h). Rows say what the loader does with an entry; the
 * loaders (llama.c, gemma3.c) still check that the required ones are
 * present and well formed. */
#include "model/model_contents.h"

#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* What a key under the architecture's prefix may hold. */
typedef enum key_rule {
    KEY_READ,     /* the loader reads and honours it */
    KEY_INERT,    /* informational: no effect on the computation */
    KEY_HEAD_DIM, /* restates the head size: must equal it (no partial rotary, ...) */
    KEY_UNIT,     /* a factor the engine does not apply: absent, 0 or 1 only */
    KEY_TRUE,     /* a switch the engine assumes on (causal attention) */
    KEY_ONE_OF,   /* a string from `accepted` ("a|b|c") */
} key_rule;

typedef struct key_row {
    const char *suffix; /* after "<arch>." */
    key_rule rule;
    const char *accepted; /* KEY_ONE_OF only */
} key_row;

typedef struct arch_row {
    const char *arch;
    const char *const *tensors;       /* whole names, NULL-terminated */
    const char *const *layer_tensors; /* names after "blk.N.", NULL-terminated */
    const key_row *keys;              /* terminated by a NULL suffix */
} arch_row;

/* Rope scaling: llama.cpp's default type is linear, which with factor 1
 * (checked by its own row) changes nothing. Gemma 3's loader applies no
 * factor; the Llama-shaped families' (family_hparams.c) apply a linear one. */
#define ROPE_SCALING_ROWS(factor_rule)                                                       \
    {"rope.scaling.type", KEY_ONE_OF, "none|linear"}, {"rope.scaling.factor", factor_rule, NULL}, \
    {"rope.scale_linear", factor_rule, NULL}, {"rope.scaling.attn_factor", KEY_UNIT, NULL},   \
    {"rope.scaling.original_context_length", KEY_INERT, NULL},                              \
    {"rope.scaling.finetuned", KEY_INERT, NULL}

/* Keys every architecture here shares. */
#define COMMON_KEY_ROWS_(factor_rule)                                                       \
    {"context_length", KEY_READ, NULL}, {"embedding_length", KEY_READ, NULL},                  \
    {"block_count", KEY_READ, NULL}, {"feed_forward_length", KEY_READ, NULL},                  \
    {"attention.head_count", KEY_READ, NULL}, {"attention.head_count_kv", KEY_READ, NULL},     \
    {"attention.layer_norm_rms_epsilon", KEY_READ, NULL}, {"rope.freq_base", KEY_READ, NULL},  \
    {"vocab_size", KEY_INERT, NULL}, {"rope.dimension_count", KEY_HEAD_DIM, NULL},             \
    {"attention.causal", KEY_TRUE, NULL}, ROPE_SCALING_ROWS(factor_rule)
#define COMMON_KEY_ROWS COMMON_KEY_ROWS_(KEY_UNIT)
#define LLAMA_LIKE_KEY_ROWS COMMON_KEY_ROWS_(KEY_READ)

static const char *const global_tensors[] = {"token_embd.weight", "output_norm.weight",
                                             "output.weight", NULL};
/* Llama 3.x's `llama3` rope scaling: frequency divisors (family_hparams.c) */
static const char *const llama_global_tensors[] = {"token_embd.weight", "output_norm.weight",
                                                   "output.weight", "rope_freqs.weight", NULL};

static const char *const llama_layer_tensors[] = {
    "attn_norm.weight", "attn_q.weight",   "attn_k.weight", "attn_v.weight",
    "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
    "ffn_down.weight",  NULL};

static const key_row llama_keys[] = {
    LLAMA_LIKE_KEY_ROWS,
    {"attention.key_length", KEY_HEAD_DIM, NULL},
    {"attention.value_length", KEY_HEAD_DIM, NULL},
    {"tensor_data_layout", KEY_INERT, NULL}, /* how old converters permuted q/k; already undone */
    {NULL, KEY_INERT, NULL},
};

static const char *const gemma3_layer_tensors[] = {
    "attn_norm.weight", "attn_q.weight",     "attn_k.weight",
    "attn_v.weight",    "attn_q_norm.weight", "attn_k_norm.weight",
    "attn_output.weight", "post_attention_norm.weight", "ffn_norm.weight",
    "ffn_gate.weight",  "ffn_up.weight",     "ffn_down.weight",
    "post_ffw_norm.weight", NULL};

static const key_row gemma3_keys[] = {
    COMMON_KEY_ROWS,
    {"attention.key_length", KEY_READ, NULL},
    {"attention.value_length", KEY_READ, NULL},
    {"attention.sliding_window", KEY_READ, NULL},
    {"attention.sliding_window_pattern", KEY_READ, NULL},
    {"rope.freq_base_swa", KEY_READ, NULL},
    {"rope.local.freq_base", KEY_READ, NULL},
    {"final_logit_softcapping", KEY_READ, NULL},
    {NULL, KEY_INERT, NULL},
};

/* Qwen 2: biases on q, k and v (qwen.c) */
static const char *const qwen2_layer_tensors[] = {
    "attn_norm.weight", "attn_q.weight",   "attn_k.weight", "attn_v.weight",
    "attn_q.bias",      "attn_k.bias",     "attn_v.bias",   "attn_output.weight",
    "ffn_norm.weight",  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", NULL};

static const key_row qwen2_keys[] = {
    LLAMA_LIKE_KEY_ROWS,
    {"attention.key_length", KEY_HEAD_DIM, NULL},
    {"attention.value_length", KEY_HEAD_DIM, NULL},
    {NULL, KEY_INERT, NULL},
};

/* Qwen 3: per-head q/k norms, heads of attention.key_length (qwen.c) */
static const char *const qwen3_layer_tensors[] = {
    "attn_norm.weight",   "attn_q.weight",      "attn_k.weight",   "attn_v.weight",
    "attn_q_norm.weight", "attn_k_norm.weight", "attn_output.weight", "ffn_norm.weight",
    "ffn_gate.weight",    "ffn_up.weight",      "ffn_down.weight", NULL};

static const key_row qwen3_keys[] = {
    LLAMA_LIKE_KEY_ROWS,
    {"attention.key_length", KEY_READ, NULL},
    {"attention.value_length", KEY_READ, NULL},
    {NULL, KEY_INERT, NULL},
};

/* Phi-3: fused attn_qkv (or separate q/k/v, as llama.cpp accepts) and
 * ffn_up holding gate and up (phi3.c). Longrope's rope_factors_long/short
 * are not here: refused. */
static const char *const phi3_layer_tensors[] = {
    "attn_norm.weight", "attn_qkv.weight",  "attn_q.weight", "attn_k.weight",
    "attn_v.weight",    "attn_output.weight", "ffn_norm.weight", "ffn_up.weight",
    "ffn_down.weight",  NULL};

static const key_row phi3_keys[] = {
    LLAMA_LIKE_KEY_ROWS,
    {"attention.key_length", KEY_HEAD_DIM, NULL},
    {"attention.value_length", KEY_HEAD_DIM, NULL},
    /* llama.cpp disables Phi-3's window: both engines attend to every position */
    {"attention.sliding_window", KEY_INERT, NULL},
    {NULL, KEY_INERT, NULL},
};

static const arch_row arch_rows[] = {
    {"llama", llama_global_tensors, llama_layer_tensors, llama_keys},
    {"gemma3", global_tensors, gemma3_layer_tensors, gemma3_keys},
    {"qwen2", global_tensors, qwen2_layer_tensors, qwen2_keys},
    {"qwen3", global_tensors, qwen3_layer_tensors, qwen3_keys},
    {"phi3", global_tensors, phi3_layer_tensors, phi3_keys},
};

static bool in_list(const char *const *list, const char *name) {
    for (; *list; list++)
        if (strcmp(*list, name) == 0) return true;
    return false;
}

/* "blk.N.rest" with N a layer index below n_layers: rest, else NULL. */
static const char *layer_suffix(const char *name, int64_t n_layers) {
    if (strncmp(name, "blk.", 4) != 0) return NULL;
    const char *p = name + 4;
    int64_t layer = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++) layer = layer * 10 + (*p - '0');
    if (digits == 0 || *p != '.' || (digits > 1 && name[4] == '0') || layer >= n_layers) return NULL;
    return p + 1;
}

static pw_status check_tensor(const arch_row *a, const char *name, int64_t n_layers) {
    if (in_list(a->tensors, name)) return PW_OK;
    const char *rest = layer_suffix(name, n_layers);
    if (rest && in_list(a->layer_tensors, rest)) return PW_OK;
    return pw_error(PW_ERR_FORMAT, "tensor '%s' is not part of the %s architecture as piecewise "
                    "implements it; running the model without it would give wrong results",
                    name, a->arch);
}

/* Whether a string is one of the '|'-separated entries of accepted. */
static bool one_of(const char *accepted, const char *s) {
    size_t n = strlen(s);
    for (const char *p = accepted; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, s, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static pw_status check_key(const arch_row *a, const pw_gguf_kv *kv, const char *suffix,
                           int64_t head_dim) {
    const char *key = pw_gguf_kv_key(kv);
    const key_row *row = NULL;
    for (const key_row *r = a->keys; r->suffix; r++)
        if (strcmp(r->suffix, suffix) == 0) row = r;
    if (!row)
        return pw_error(PW_ERR_FORMAT, "metadata key '%s' is not part of the %s architecture as "
                        "piecewise implements it; running the model without it could give "
                        "wrong results", key, a->arch);
    switch (row->rule) {
    case KEY_READ:
    case KEY_INERT:
        return PW_OK;
    case KEY_HEAD_DIM: {
        int64_t v;
        pw_status s = pw_gguf_kv_int(kv, &v);
        if (s != PW_OK) return s;
        if (v != head_dim)
            return pw_error(PW_ERR_FORMAT, "metadata key '%s' = %" PRId64 " differs from the head "
                            "size %" PRId64 " (piecewise implements only equal sizes)", key, v,
                            head_dim);
        return PW_OK;
    }
    case KEY_UNIT: {
        double v;
        pw_status s = pw_gguf_kv_float(kv, &v);
        if (s != PW_OK) return s;
        if (v != 0.0 && v != 1.0)
            return pw_error(PW_ERR_FORMAT, "metadata key '%s' = %g is not implemented "
                            "(piecewise implements only 1)", key, v);
        return PW_OK;
    }
    case KEY_TRUE: {
        bool v;
        pw_status s = pw_gguf_kv_bool(kv, &v);
        if (s != PW_OK) return s;
        if (!v)
            return pw_error(PW_ERR_FORMAT, "metadata key '%s' = false is not implemented "
                            "(piecewise implements only causal attention)", key);
        return PW_OK;
    }
    case KEY_ONE_OF: {
        const char *v;
        pw_status s = pw_gguf_kv_string(kv, &v, NULL);
        if (s != PW_OK) return s;
        if (!one_of(row->accepted, v))
            return pw_error(PW_ERR_FORMAT, "metadata key '%s' = '%s' is not implemented "
                            "(piecewise implements: %s)", key, v, row->accepted);
        return PW_OK;
    }
    }
    return PW_OK;
}

pw_status pw_model_check_contents(const pw_gguf *g, const char *arch, int64_t n_layers,
                                  int64_t head_dim) {
    const arch_row *a = NULL;
    for (size_t i = 0; i < PW_ARRAY_LEN(arch_rows); i++)
        if (strcmp(arch_rows[i].arch, arch) == 0) a = &arch_rows[i];
    if (!a) return pw_error(PW_ERR_UNSUPPORTED, "model architecture '%s' has no contents table", arch);
    for (int64_t i = 0; i < pw_gguf_tensor_count(g); i++)
        PW_TRY(check_tensor(a, pw_gguf_tensor_at(g, i)->name, n_layers));
    size_t prefix = strlen(arch);
    for (int64_t i = 0; i < pw_gguf_kv_count(g); i++) {
        const pw_gguf_kv *kv = pw_gguf_kv_at(g, i);
        const char *key = pw_gguf_kv_key(kv);
        if (strncmp(key, arch, prefix) == 0 && key[prefix] == '.')
            PW_TRY(check_key(a, kv, key + prefix + 1, head_dim));
    }
    return PW_OK;
}
