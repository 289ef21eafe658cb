/* Gemma 3 (general.architecture = gemma3): hyperparameters, weights and
 * the forward pass as IR, following llama.cpp's gemma3 loader and graph.
 *
 * Per layer, h the residual stream:
 *   x = rms_norm(h, attn_norm)
 *   q, k, v = x Wq^T, x Wk^T, x Wv^T; q and k RMS-normed per head
 *             (attn_q_norm, attn_k_norm) and rotated NeoX style with the
 *             layer kind's rope base (qkv_norm_rope)
 *   a = attention(q, k, v): local layers see the last sliding_window
 *       positions, global layers all of them; scale 1/sqrt(key_length)
 *   h = h + rms_norm(a Wo^T, post_attention_norm)
 *   f = gelu_tanh(x2 Wg^T) * (x2 Wu^T) with x2 = rms_norm(h, ffn_norm)
 *   h = h + rms_norm(f Wd^T, post_ffw_norm)
 * The embeddings are scaled by sqrt(dim) first; the LM head is token_embd
 * unless the file has output.weight; logits are soft-capped when the file
 * sets gemma3.final_logit_softcapping. The norm weights are used as they
 * are: llama.cpp's converter has already added Gemma's +1.
 *
 * Layer kinds: llama.cpp makes every sixth layer global (il % 6 == 5) and
 * gives local layers rope base 10000; a file may override the period with
 * gemma3.attention.sliding_window_pattern and the local base with
 * gemma3.rope.local.freq_base or gemma3.rope.freq_base_swa. */
#include "model/llama.h"

#include "model/model_ir.h"
#include "ops/ops.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define GEMMA3_DEFAULT_ROPE_THETA 10000.0f /* llama.cpp's default without the key */
#define GEMMA3_LOCAL_ROPE_THETA 10000.0f
#define GEMMA3_SWA_PERIOD 6
/* Gemma 3 27B: llama.cpp (after gemma_pytorch) scales by 1/sqrt(dim/heads). */
#define GEMMA3_27B_LAYERS 62

/* A required positive u32 hyperparameter: missing, mistyped or 0 is a
 * format error naming the key. */
static pw_status require_u32(const pw_gguf *g, const char *key, int64_t *out) {
    uint32_t u = 0;
    if (!pw_gguf_has(g, key))
        return pw_error(PW_ERR_FORMAT, "gemma3: missing hyperparameter %s", key);
    pw_status s = pw_gguf_get_u32(g, key, &u);
    if (s != PW_OK) return pw_error(PW_ERR_FORMAT, "gemma3: hyperparameter %s: %s", key,
                                    pw_last_error());
    if (u == 0) return pw_error(PW_ERR_FORMAT, "gemma3: hyperparameter %s is 0", key);
    *out = u;
    return PW_OK;
}

/* An optional u32 (out unchanged when absent); present but 0 or mistyped is an error. */
static pw_status optional_u32(const pw_gguf *g, const char *key, int64_t *out) {
    if (!pw_gguf_has(g, key)) return PW_OK;
    return require_u32(g, key, out);
}

/* An optional f32 that must be finite and positive when present. */
static pw_status optional_f32(const pw_gguf *g, const char *key, float *out) {
    if (!pw_gguf_has(g, key)) return PW_OK;
    float f = 0;
    pw_status s = pw_gguf_get_f32(g, key, &f);
    if (s != PW_OK) return pw_error(PW_ERR_FORMAT, "gemma3: hyperparameter %s: %s", key,
                                    pw_last_error());
    if (!(f > 0.0f) || !isfinite(f))
        return pw_error(PW_ERR_FORMAT, "gemma3: hyperparameter %s = %g must be positive", key,
                        (double)f);
    *out = f;
    return PW_OK;
}

pw_status pw_gemma3_read_hparams(pw_model *m) {
    const pw_gguf *g = m->gguf;
    pw_model_info *in = &m->info;
    PW_TRY(require_u32(g, "gemma3.block_count", &in->n_layers));
    PW_TRY(require_u32(g, "gemma3.embedding_length", &in->dim));
    PW_TRY(require_u32(g, "gemma3.feed_forward_length", &in->ffn_dim));
    PW_TRY(require_u32(g, "gemma3.attention.head_count", &in->n_heads));
    PW_TRY(require_u32(g, "gemma3.context_length", &in->context));
    in->n_kv_heads = in->n_heads;
    PW_TRY(optional_u32(g, "gemma3.attention.head_count_kv", &in->n_kv_heads));
    if (in->n_heads % in->n_kv_heads != 0)
        return pw_error(PW_ERR_FORMAT,
                        "gemma3: attention.head_count_kv (%" PRId64
                        ") must divide attention.head_count (%" PRId64 ")",
                        in->n_kv_heads, in->n_heads);
    int64_t key_len = in->dim / in->n_heads, value_len = 0;
    PW_TRY(optional_u32(g, "gemma3.attention.key_length", &key_len));
    value_len = key_len;
    PW_TRY(optional_u32(g, "gemma3.attention.value_length", &value_len));
    if (key_len % 2 != 0 || key_len > 512)
        return pw_error(PW_ERR_FORMAT, "gemma3: attention.key_length %" PRId64
                        " must be even and at most 512", key_len);
    if (value_len != key_len)
        return pw_error(PW_ERR_UNSUPPORTED,
                        "gemma3: attention.value_length %" PRId64 " differs from key_length %" PRId64
                        " (piecewise needs them equal)",
                        value_len, key_len);
    in->head_dim = key_len;
    if (!pw_gguf_has(g, "gemma3.attention.layer_norm_rms_epsilon"))
        return pw_error(PW_ERR_FORMAT,
                        "gemma3: missing hyperparameter gemma3.attention.layer_norm_rms_epsilon");
    PW_TRY(optional_f32(g, "gemma3.attention.layer_norm_rms_epsilon", &in->rms_eps));
    in->rope_theta = GEMMA3_DEFAULT_ROPE_THETA;
    PW_TRY(optional_f32(g, "gemma3.rope.freq_base", &in->rope_theta));
    m->rope_theta_local = GEMMA3_LOCAL_ROPE_THETA;
    PW_TRY(optional_f32(g, "gemma3.rope.freq_base_swa", &m->rope_theta_local));
    PW_TRY(optional_f32(g, "gemma3.rope.local.freq_base", &m->rope_theta_local));
    int64_t window = 0, period = GEMMA3_SWA_PERIOD;
    PW_TRY(require_u32(g, "gemma3.attention.sliding_window", &window));
    if (window > INT32_MAX)
        return pw_error(PW_ERR_FORMAT, "gemma3: attention.sliding_window %" PRId64 " is too large",
                        window);
    PW_TRY(optional_u32(g, "gemma3.attention.sliding_window_pattern", &period));
    m->logit_softcap = 0.0f;
    PW_TRY(optional_f32(g, "gemma3.final_logit_softcapping", &m->logit_softcap));
    if (in->n_layers > PW_LLAMA_MAX_LAYERS)
        return pw_error(PW_ERR_UNSUPPORTED, "%" PRId64 " layers (at most %d)", in->n_layers,
                        PW_LLAMA_MAX_LAYERS);
    m->layer_window = pw_host_calloc((size_t)in->n_layers, sizeof *m->layer_window);
    if (!m->layer_window) return PW_ERR_OOM;
    for (int64_t l = 0; l < in->n_layers; l++)
        m->layer_window[l] = l % period < period - 1 ? (int32_t)window : 0;
    m->attn_scale = in->n_layers == GEMMA3_27B_LAYERS
                        ? 1.0f / sqrtf((float)(in->dim / in->n_heads))
                        : 1.0f / sqrtf((float)in->head_dim);
    m->embd_scale = sqrtf((float)in->dim);
    return PW_OK;
}

/* The thirteen weights of a layer in parameter (and placeholder) order. */
enum {
    W_ATTN_NORM, W_Q, W_K, W_V, W_Q_NORM, W_K_NORM, W_O, W_POST_ATTN_NORM, W_FFN_NORM, W_GATE,
    W_UP, W_DOWN, W_POST_FFN_NORM, W_COUNT
};
_Static_assert(W_COUNT == PW_GEMMA3_WEIGHTS_PER_LAYER, "gemma3 weights per layer");

void pw_gemma3_layer_weights(const pw_llama_layer *L, pw_tensor **out) {
    pw_tensor *ts[W_COUNT] = {L->attn_norm, L->wq,       L->wk,     L->wv,
                              L->q_norm,    L->k_norm,   L->wo,     L->post_attn_norm,
                              L->ffn_norm,  L->w_gate,   L->w_up,   L->w_down,
                              L->post_ffn_norm};
    memcpy(out, ts, sizeof ts);
}

static void layer_placeholders(ir_builder *b, int64_t l, int *w) {
    static const char *const names[W_COUNT] = {
        "l%" PRId64 "_attn_norm", "l%" PRId64 "_wq",       "l%" PRId64 "_wk",
        "l%" PRId64 "_wv",        "l%" PRId64 "_q_norm",   "l%" PRId64 "_k_norm",
        "l%" PRId64 "_wo",        "l%" PRId64 "_post_attn_norm", "l%" PRId64 "_ffn_norm",
        "l%" PRId64 "_w_gate",    "l%" PRId64 "_w_up",     "l%" PRId64 "_w_down",
        "l%" PRId64 "_post_ffn_norm"};
    for (int i = 0; i < W_COUNT; i++) w[i] = ir_placeholder(b, names[i], l);
}

#define N(x) pw_ir_arg_node(x)

typedef struct layer_io {
    int h, x; /* the residual stream and the attention norm's output */
} layer_io;

/* Layer l: qkv_norm_rope, attention, o_proj, rms_norm (post-attention),
 * add_rms_norm (residual and ffn norm), gate_up_gelu, down, rms_norm
 * (post-ffw), add_rms_norm (residual and the next attention norm, or the
 * final norm). */
static layer_io build_layer(ir_builder *b, const pw_model *m, int64_t l, const int *lw,
                            layer_io io, int next_norm, bool last) {
    pw_model_local local = pw_model_local_shape(m); /* a tensor-parallel rank's heads */
    const pw_model_local *in = &local;
    pw_ir_arg a[9];
    a[0] = N(io.x), a[1] = N(lw[W_Q]), a[2] = N(lw[W_K]), a[3] = N(lw[W_V]);
    a[4] = N(lw[W_Q_NORM]), a[5] = N(lw[W_K_NORM]);
    a[6] = pw_ir_arg_int(in->n_heads), a[7] = pw_ir_arg_int(in->n_kv_heads), a[8] = pw_ir_arg_int(l);
    int qkv = ir_call(b, "qkv", l, PW_OP_QKV_NORM_ROPE, a, 9);
    int q = ir_getitem(b, "q", l, qkv, 0);
    int k = ir_getitem(b, "k", l, qkv, 1);
    int v = ir_getitem(b, "v", l, qkv, 2);
    a[0] = N(q);
    int o = ir_call(b, "attn_out", l, PW_OP_EMPTY_LIKE, a, 1);
    a[0] = N(q), a[1] = N(k), a[2] = N(v), a[3] = N(o), a[4] = pw_ir_arg_int(l);
    ir_call(b, "attn", l, PW_OP_ATTENTION, a, 5);
    int proj = pw_model_row_parallel(b, m, "o_proj", l, o, lw[W_O], false);
    a[0] = N(proj), a[1] = N(lw[W_POST_ATTN_NORM]);
    int attn_normed = ir_call(b, "attn_post_norm", l, PW_OP_RMS_NORM, a, 2);
    a[0] = N(io.h), a[1] = N(attn_normed), a[2] = N(lw[W_FFN_NORM]);
    int res1 = ir_call(b, "h_attn_ffn_in", l, PW_OP_ADD_RMS_NORM, a, 3);
    int h1 = ir_getitem(b, "h_attn", l, res1, 0);
    int x2 = ir_getitem(b, "ffn_in", l, res1, 1);
    a[0] = N(x2), a[1] = N(lw[W_GATE]), a[2] = N(lw[W_UP]);
    int act = ir_call(b, "act", l, PW_OP_GATE_UP_GELU, a, 3);
    int down = pw_model_row_parallel(b, m, "down", l, act, lw[W_DOWN], true);
    a[0] = N(down), a[1] = N(lw[W_POST_FFN_NORM]);
    int ffn_normed = ir_call(b, "ffn_post_norm", l, PW_OP_RMS_NORM, a, 2);
    a[0] = N(h1), a[1] = N(ffn_normed), a[2] = N(next_norm);
    int res2 = ir_call(b, "h_next_in", l, PW_OP_ADD_RMS_NORM, a, 3);
    layer_io next;
    next.h = ir_getitem(b, "h", l, res2, 0);
    next.x = ir_getitem(b, last ? "final_norm" : "attn_in", last ? -1 : l + 1, res2, 1);
    return next;
}

pw_status pw_gemma3_build_ir(const pw_model *m, pw_ir **out) {
    *out = NULL;
    const pw_model_info *in = &m->info;
    if (in->n_layers <= 0) return pw_error(PW_ERR_FORMAT, "gemma3: the model has no layers");
    ir_builder b = {0};
    PW_TRY(pw_ir_new("gemma3_forward", &b.g));
    int ids = ir_placeholder(&b, "input_ids", 0);
    int tok_embd = ir_placeholder(&b, "tok_embd", 0);
    int *w = pw_host_calloc((size_t)in->n_layers * W_COUNT, sizeof(int));
    if (!w) {
        pw_ir_free(b.g);
        return PW_ERR_OOM;
    }
    for (int64_t l = 0; l < in->n_layers; l++) layer_placeholders(&b, l, &w[l * W_COUNT]);
    int out_norm = ir_placeholder(&b, "output_norm", 0);
    int lm_head = ir_placeholder(&b, "lm_head", 0);

    pw_ir_arg a[3];
    int embed = pw_model_embed(&b, m, ids, tok_embd);
    a[0] = N(embed), a[1] = pw_ir_arg_float(m->embd_scale);
    layer_io io;
    io.h = ir_call(&b, "embed_scaled", -1, PW_OP_SCALE, a, 2);
    a[0] = N(io.h), a[1] = N(w[W_ATTN_NORM]);
    io.x = ir_call(&b, "attn_in", 0, PW_OP_RMS_NORM, a, 2);
    for (int64_t l = 0; l < in->n_layers; l++) {
        bool last = l + 1 == in->n_layers;
        int next_norm = last ? out_norm : w[(l + 1) * W_COUNT + W_ATTN_NORM];
        io = build_layer(&b, m, l, &w[l * W_COUNT], io, next_norm, last);
    }
    /* the sampled rows only, soft-capped when the file says so (op lm_head) */
    int logits = pw_model_logits(&b, m, io.x, lm_head, m->logit_softcap);
    ir_finish_graph(&b, in->vocab, ids, logits);
    pw_host_free(w);
    if (b.status != PW_OK) {
        pw_ir_free(b.g);
        return pw_error_context(b.status, "building the gemma3 graph");
    }
    *out = b.g;
    return PW_OK;
}
#undef N
