/* A Llama-shaped model from a GGUF file (llama, and qwen2, qwen3, phi3,
 * whose differences are in qwen.c and phi3.c): hyperparameters
 * (family_hparams.c), weights and the forward pass as an IR graph; also the
 * loading shared with the other architectures (general.architecture picks
 * one: gemma3 is gemma3.c).
 *
 * Weights stay in the mapping when they are f32, and so do 2-D weights in
 * the blocks the integer kernels read (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
 * Q5_K, Q6_K: pw_k_quant_supported; the matmul and embedding ops take them
 * as they are), except the Llama and Gemma 3 o and down, copied once into
 * their K-shards (model_tp.c). Norms and every other stored type (F16, BF16, Q2_K, Q3_K) are dequantized
 * to f32 once at load (docs/gguf.md lists the types). PW_DEQUANTIZE=1 in
 * the environment dequantizes everything, the old behaviour, for
 * measurement (docs/kernels.md, "Quantized weights"). */
#include "model/llama.h"

#include "model/dequant.h"
#include "model/model_contents.h"
#include "model/model_ir.h"
#include "ops/comm.h"
#include "ops/ops.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Environment variable that turns off keeping quantized weights. */
#define PW_ENV_DEQUANTIZE "PW_DEQUANTIZE"
#define PW_ENV_INTERLEAVE "PW_INTERLEAVE"


/* general.architecture: which loader and graph builder run. */
static const struct {
    const char *name;
    pw_model_arch arch;
} arch_names[] = {
    {"llama", PW_ARCH_LLAMA}, {"gemma3", PW_ARCH_GEMMA3}, {"qwen2", PW_ARCH_QWEN2},
    {"qwen3", PW_ARCH_QWEN3}, {"phi3", PW_ARCH_PHI3},
};

static pw_status read_hparams(pw_model *m) {
    const pw_gguf *g = m->gguf;
    pw_model_info *info = &m->info;
    const char *arch = NULL;
    if (pw_gguf_get_string(g, "general.architecture", &arch) != PW_OK)
        return pw_error(PW_ERR_FORMAT, "missing general.architecture");
    size_t a = 0;
    while (a < PW_ARRAY_LEN(arch_names) && strcmp(arch, arch_names[a].name) != 0) a++;
    if (a == PW_ARRAY_LEN(arch_names))
        return pw_error(PW_ERR_UNSUPPORTED,
                        "model architecture '%s' is not supported (supported: llama, gemma3, "
                        "qwen2, qwen3, phi3)",
                        arch);
    snprintf(info->arch, sizeof info->arch, "%s", arch);
    const char *name = NULL;
    if (pw_gguf_get_string(g, "general.name", &name) == PW_OK)
        snprintf(info->name, sizeof info->name, "%s", name);
    pw_clear_error();
    m->arch = arch_names[a].arch;
    if (m->arch == PW_ARCH_GEMMA3) return pw_gemma3_read_hparams(m);
    return pw_model_read_llama_like_hparams(m);
}

/* True unless PW_DEQUANTIZE=1 (0, unset or empty keep the weights quantized). */
bool pw_model_keep_quantized_weights(void) {
    static const char *const values[] = {"0", "1", NULL};
    return pw_env_choice(PW_ENV_DEQUANTIZE, values, 0) == 0;
}

/* Finds a tensor, checks its shape (ggml order: dims[0] innermost) and
 * returns a tensor over rows [row0, row0 + rows) of its data: the mapped
 * blocks of a 2-D weight in a type the integer kernels read when
 * keep_quantized, otherwise f32 (mapped or dequantized). */
pw_status pw_model_load_weight_rows(pw_model *m, const char *name, int64_t d0, int64_t d1,
                                    int64_t row0, int64_t rows, bool keep_quantized,
                                    pw_tensor **out) {
    const pw_gguf_tensor *t;
    pw_status s = pw_gguf_find_tensor(m->gguf, name, &t);
    if (s != PW_OK) return pw_error(PW_ERR_NOT_FOUND, "missing tensor '%s'", name);
    int64_t want_elems = d0 * (d1 ? d1 : 1);
    if (t->dims[0] != d0 || (d1 && t->dims[1] != d1) || t->n_elements != want_elems)
        return pw_error(PW_ERR_FORMAT,
                        "tensor '%s' has shape [%" PRId64 ", %" PRId64 "], expected [%" PRId64
                        ", %" PRId64 "]",
                        name, t->dims[0], t->n_dims > 1 ? t->dims[1] : 1, d0, d1 ? d1 : 1);
    if (row0 < 0 || rows <= 0 || row0 + rows > (d1 ? d1 : 1))
        return pw_error(PW_ERR_INVALID_ARG, "tensor '%s': rows %" PRId64 "..%" PRId64
                        " out of range", name, row0, row0 + rows);
    m->dtype_counts[t->dtype]++;
    int64_t elems = d0 * rows;
    /* rows of a 2-D tensor start at whole rows of its type (blocks never
     * straddle rows: dims[0] is a multiple of the block size) */
    const uint8_t *base = (const uint8_t *)t->data + (size_t)pw_dtype_row_bytes(t->dtype, d0) *
                                                         (size_t)row0;
    int64_t shape[2] = {d1 ? rows : d0, d0};
    if (d1 && keep_quantized && pw_op_quantized_weight_supported(t->dtype)) {
        s = pw_tensor_wrap((void *)base, PW_DEVICE_CPU, t->dtype, 2, shape, out);
        if (s == PW_OK) m->info.weight_bytes += (size_t)pw_dtype_row_bytes(t->dtype, elems);
        return s;
    }
    const float *data;
    if (t->dtype == PW_F32) {
        data = (const float *)base;
    } else {
        float *buf = pw_host_alloc((size_t)elems * sizeof(float));
        if (!buf) return PW_ERR_OOM;
        s = pw_dequantize(t->dtype, base, buf, elems);
        if (s != PW_OK) {
            pw_host_free(buf);
            return pw_error_context(s, "tensor '%s'", name);
        }
        m->owned[m->n_owned++] = buf;
        data = buf;
    }
    s = pw_tensor_wrap((void *)data, PW_DEVICE_CPU, PW_F32, d1 ? 2 : 1, d1 ? shape : &shape[1],
                       out);
    if (s == PW_OK) m->info.weight_bytes += (size_t)elems * sizeof(float);
    return s;
}

/* Rows converted between releases of the file's pages (pw_model_prefer_layout). */
#define LAYOUT_CHUNK_BYTES (4u << 20)

/* A whole 2-D weight in the layout the CPU kernels prefer for its type
 * (pw_op_preferred_weight_dtype: Q4_0 rows interleaved in groups of 16),
 * written into memory of the model's own, chunk by chunk (on the host's
 * threads: pw_host_threads), while the file's pages the chunks came from
 * are released (pw_gguf_release_pages), so the process holds about one
 * copy: the weight's, not also the page cache's. PW_INTERLEAVE=0 keeps
 * the file's layout (for measurement), as does no memory for the copy.
 * Every product gives the same bits either way. */
pw_dtype pw_model_preferred_dtype(pw_dtype from, int64_t rows, int64_t cols) {
    static const char *const values[] = {"1", "0", NULL};
    if (pw_env_choice(PW_ENV_INTERLEAVE, values, 0) != 0) return from;
    return pw_op_preferred_weight_dtype(from, rows, cols);
}

/* One weight's conversion (pw_model_prefer_layout), cut over threads by
 * chunks of whole groups of 16 rows (the last: the rest), so each chunk's
 * groups are the weight's; each part releases the file's pages of its own
 * chunks as it goes. */
typedef struct {
    const pw_gguf *gguf;
    const uint8_t *src;
    uint8_t *dst;
    size_t row;
    int64_t rows, cols, chunk;
    pw_dtype from, to;
} layout_job;

static void convert_chunks(void *arg, int part, int64_t c0, int64_t c1) {
    (void)part;
    const layout_job *j = arg;
    for (int64_t c = c0; c < c1; c++) {
        int64_t r0 = c * j->chunk, rows = j->rows - r0 < j->chunk ? j->rows - r0 : j->chunk;
        (void)pw_op_convert_weight(j->dst + (size_t)r0 * j->row, j->src + (size_t)r0 * j->row,
                                   j->from, j->to, rows, j->cols);
        pw_gguf_release_pages(j->gguf, j->src + (size_t)r0 * j->row, (size_t)rows * j->row);
    }
}

pw_status pw_model_prefer_layout(pw_model *m, pw_tensor **t) {
    pw_tensor *w = *t;
    if (pw_tensor_ndim(w) != 2) return PW_OK;
    pw_dtype from = pw_tensor_dtype(w);
    int64_t shape[2] = {pw_tensor_dim(w, 0), pw_tensor_dim(w, 1)};
    pw_dtype to = pw_model_preferred_dtype(from, shape[0], shape[1]);
    if (to == from) return PW_OK;
    const uint8_t *src = pw_tensor_data(w);
    size_t row = (size_t)pw_dtype_row_bytes(from, shape[1]), bytes = pw_tensor_nbytes(w);
    uint8_t *dst = pw_host_alloc(bytes);
    pw_tensor *x = NULL;
    if (!dst || pw_tensor_wrap(dst, PW_DEVICE_CPU, to, 2, shape, &x) != PW_OK) {
        pw_host_free(dst);
        pw_clear_error(); /* no memory: the file's layout */
        return PW_OK;
    }
    int64_t chunk = (int64_t)(LAYOUT_CHUNK_BYTES / row) / 16 * 16;
    if (chunk < 16) chunk = 16;
    layout_job j = {m->gguf, src, dst, row, shape[0], shape[1], chunk, from, to};
    pw_run_split((shape[0] + chunk - 1) / chunk, pw_host_threads(), convert_chunks, &j);
    /* the pages a chunk boundary split (a part releases whole pages only) */
    pw_gguf_release_pages(m->gguf, src, bytes);
    m->owned[m->n_owned++] = (float *)(void *)dst;
    pw_tensor_release(w);
    *t = x;
    return PW_OK;
}

pw_status pw_model_load_weight(pw_model *m, const char *name, int64_t d0, int64_t d1,
                               bool keep_quantized, pw_tensor **out) {
    return pw_model_load_weight_rows(m, name, d0, d1, 0, d1 ? d1 : 1, keep_quantized, out);
}

pw_status pw_model_load_layer_weights(pw_model *m, int64_t l, const pw_layer_weight *want,
                                      size_t n, bool keep_quantized) {
    char name[96];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", l, want[i].suffix);
        PW_TRY(pw_model_load_weight(m, name, want[i].d0, want[i].d1, keep_quantized,
                                    want[i].dst));
        PW_TRY(pw_model_prefer_layout(m, want[i].dst));
    }
    return PW_OK;
}

pw_status pw_model_load_embeddings(pw_model *m, bool keep) {
    const pw_gguf_tensor *embd;
    PW_TRY(pw_gguf_find_tensor(m->gguf, "token_embd.weight", &embd));
    m->info.vocab = embd->dims[1];
    /* one owned buffer per weight at most */
    m->owned = pw_host_calloc((size_t)(m->info.n_layers * PW_GEMMA3_WEIGHTS_PER_LAYER + 4),
                              sizeof(float *));
    if (!m->owned) return PW_ERR_OOM;
    /* above one rank, this rank's vocabulary rows (model_tp.c) */
    m->tp_v0 = 0, m->tp_v1 = m->info.vocab;
    if (m->tp_size > 1)
        pw_tp_shard_range(m->info.vocab, 1, m->tp_size, m->tp_rank, &m->tp_v0, &m->tp_v1);
    PW_TRY(pw_model_load_weight_rows(m, "token_embd.weight", m->info.dim, m->info.vocab,
                                     m->tp_v0, m->tp_v1 - m->tp_v0, keep, &m->tok_embd));
    /* a rank's vocabulary slice keeps the file's layout (the split ops read it) */
    return m->tp_size > 1 ? PW_OK : pw_model_prefer_layout(m, &m->tok_embd);
}

pw_status pw_model_load_head(pw_model *m, bool keep) {
    const pw_model_info *in = &m->info;
    PW_TRY(pw_model_load_weight(m, "output_norm.weight", in->dim, 0, keep, &m->output_norm));
    const pw_gguf_tensor *head;
    if (pw_gguf_find_tensor(m->gguf, "output.weight", &head) == PW_OK) {
        PW_TRY(pw_model_load_weight_rows(m, "output.weight", in->dim, in->vocab, m->tp_v0,
                                         m->tp_v1 - m->tp_v0, keep, &m->output));
        if (m->tp_size <= 1) PW_TRY(pw_model_prefer_layout(m, &m->output));
    } else {
        pw_clear_error();
        m->info.tied_embeddings = true;
        m->output = pw_tensor_retain(m->tok_embd);
    }
    int best = PW_F32;
    for (int t = 0; t < PW_DTYPE_COUNT_; t++)
        if (m->dtype_counts[t] > m->dtype_counts[best]) best = t;
    m->info.file_dtype = (pw_dtype)best;
    return PW_OK;
}

static pw_status load_weights(pw_model *m) {
    bool keep = pw_model_keep_quantized_weights();
    PW_TRY(pw_model_load_embeddings(m, keep));
    if (m->arch == PW_ARCH_LLAMA) PW_TRY(pw_model_load_rope_freqs(m));
    switch (m->arch) {
    case PW_ARCH_QWEN2:
    case PW_ARCH_QWEN3: PW_TRY(pw_qwen_load_layers(m, keep)); break;
    case PW_ARCH_PHI3: PW_TRY(pw_phi3_load_layers(m, keep)); break;
    default: PW_TRY(pw_model_tp_load_layers(m, keep)); break;
    }
    return pw_model_load_head(m, keep);
}

/* The whole model (tp false), or this tensor-parallel rank's slice. The
 * architectures with tensor parallelism run in its fixed summation order
 * either way (model_tp.c): one process is rank 0 of 1. */
static pw_status load_model(const char *path, bool tp, pw_model **out) {
    *out = NULL;
    if (!path) return pw_error(PW_ERR_INVALID_ARG, "pw_model_load: path is NULL");
    pw_model *m = pw_host_calloc(1, sizeof *m);
    if (!m) return PW_ERR_OOM;
    m->rope_freq_scale = 1.0;
    pw_status s = pw_gguf_open(path, &m->gguf);
    if (s == PW_OK) s = read_hparams(m);
    if (s == PW_OK)
        s = pw_model_check_contents(m->gguf, m->info.arch, m->info.n_layers, m->info.head_dim);
    if (s == PW_OK && (tp || pw_model_tp_supported(m->arch)))
        s = tp ? pw_model_tp_plan(m, pw_comm_size(), pw_comm_rank()) : pw_model_tp_plan(m, 1, 0);
    if (s == PW_OK) {
        m->layers = pw_host_calloc((size_t)m->info.n_layers, sizeof *m->layers);
        if (!m->layers) s = PW_ERR_OOM;
    }
    if (s == PW_OK) s = load_weights(m);
    if (s == PW_OK) s = pw_tokenizer_new(m->gguf, &m->tokenizer);
    if (s != PW_OK) {
        pw_model_free(m);
        return pw_error_context(s, "loading '%s'", path);
    }
    if (!m->info.name[0]) {
        const char *base = strrchr(path, '/');
        snprintf(m->info.name, sizeof m->info.name, "%s", base ? base + 1 : path);
    }
    *out = m;
    return PW_OK;
}

pw_status pw_model_load(const char *path, pw_model **out) { return load_model(path, false, out); }

pw_status pw_model_load_tp(const char *path, pw_model **out) { return load_model(path, true, out); }

void pw_model_free(pw_model *m) {
    if (!m) return;
    pw_tensor_release(m->tok_embd);
    pw_tensor_release(m->output_norm);
    pw_tensor_release(m->output);
    pw_tensor_release(m->rope_freqs);
    if (m->layers) {
        for (int64_t l = 0; l < m->info.n_layers; l++) {
            pw_llama_layer *L = &m->layers[l];
            pw_tensor *ts[] = {L->attn_norm, L->wq,     L->wk,     L->wv,
                               L->wo,        L->ffn_norm, L->w_gate, L->w_up,
                               L->w_down,    L->q_norm, L->k_norm, L->post_attn_norm,
                               L->post_ffn_norm, L->bq, L->bk, L->bv};
            for (size_t i = 0; i < PW_ARRAY_LEN(ts); i++) pw_tensor_release(ts[i]);
        }
    }
    for (int i = 0; i < m->n_owned; i++) pw_host_free(m->owned[i]);
    pw_host_free(m->owned);
    pw_host_free(m->layers);
    pw_host_free(m->layer_window);
    pw_tokenizer_free(m->tokenizer);
    pw_gguf_free(m->gguf);
    pw_host_free(m);
}

const pw_model_info *pw_model_get_info(const pw_model *m) { return &m->info; }

/* ---- the weights of a Llama-shaped layer ------------------------------------------------
 * Every slot a llama, qwen2, qwen3 or phi3 layer may have, in parameter
 * (and placeholder) order; an architecture uses the slots slot_used says. */
enum {
    W_ATTN_NORM, W_Q, W_K, W_V, W_BQ, W_BK, W_BV, W_Q_NORM, W_K_NORM, W_O, W_FFN_NORM, W_GATE,
    W_UP, W_DOWN, W_SLOTS
};

static bool slot_used(pw_model_arch arch, int slot) {
    if (slot >= W_BQ && slot <= W_BV) return arch == PW_ARCH_QWEN2;
    if (slot == W_Q_NORM || slot == W_K_NORM) return arch == PW_ARCH_QWEN3;
    return true;
}

static pw_tensor *slot_tensor(const pw_llama_layer *L, int slot) {
    pw_tensor *ts[W_SLOTS] = {L->attn_norm, L->wq, L->wk,     L->wv,       L->bq,
                              L->bk,        L->bv, L->q_norm, L->k_norm,   L->wo,
                              L->ffn_norm,  L->w_gate, L->w_up, L->w_down};
    return ts[slot];
}

static int weights_per_layer(const pw_model *m) {
    if (m->arch == PW_ARCH_GEMMA3) return PW_GEMMA3_WEIGHTS_PER_LAYER;
    int n = 0;
    for (int i = 0; i < W_SLOTS; i++) n += slot_used(m->arch, i);
    return n;
}

int pw_model_num_params(const pw_model *m) {
    return 1 + 3 + (int)m->info.n_layers * weights_per_layer(m);
}

/* Parameter order: input_ids, tok_embd, then per layer its weights (the
 * used slots above, in order: the nine of Llama and Phi-3, twelve of Qwen 2,
 * eleven of Qwen 3; Gemma 3's thirteen, pw_gemma3_layer_weights), then
 * output_norm and the LM head. The graph's placeholders are in this order. */
int pw_model_params(const pw_model *m, pw_value *params, pw_tensor *input_ids) {
    int n = 0;
    params[n++] = pw_value_tensor(input_ids);
    params[n++] = pw_value_tensor(m->tok_embd);
    for (int64_t l = 0; l < m->info.n_layers; l++) {
        const pw_llama_layer *L = &m->layers[l];
        if (m->arch == PW_ARCH_GEMMA3) {
            pw_tensor *ts[PW_GEMMA3_WEIGHTS_PER_LAYER];
            pw_gemma3_layer_weights(L, ts);
            for (int i = 0; i < PW_GEMMA3_WEIGHTS_PER_LAYER; i++) params[n++] = pw_value_tensor(ts[i]);
            continue;
        }
        for (int i = 0; i < W_SLOTS; i++)
            if (slot_used(m->arch, i)) params[n++] = pw_value_tensor(slot_tensor(L, i));
    }
    params[n++] = pw_value_tensor(m->output_norm);
    params[n++] = pw_value_tensor(m->output);
    return n;
}

/* ---- the forward pass as IR ----------------------------------------------------- */

#define N(x) pw_ir_arg_node(x)

/* The placeholders of the used slots of layer l into w[slot] (-1 for the others). */
static void layer_placeholders(ir_builder *b, pw_model_arch arch, int64_t l, int *w) {
    static const char *const names[W_SLOTS] = {
        "l%" PRId64 "_attn_norm", "l%" PRId64 "_wq",     "l%" PRId64 "_wk",
        "l%" PRId64 "_wv",        "l%" PRId64 "_bq",     "l%" PRId64 "_bk",
        "l%" PRId64 "_bv",        "l%" PRId64 "_q_norm", "l%" PRId64 "_k_norm",
        "l%" PRId64 "_wo",        "l%" PRId64 "_ffn_norm", "l%" PRId64 "_w_gate",
        "l%" PRId64 "_w_up",      "l%" PRId64 "_w_down"};
    for (int i = 0; i < W_SLOTS; i++) w[i] = slot_used(arch, i) ? ir_placeholder(b, names[i], l) : -1;
}

/* The residual stream between layers: h, and x = the next norm's output. */
typedef struct layer_io {
    int h, x;
} layer_io;

/* Layer l: qkv_rope (qkv_bias_rope_neox for Qwen 2, qkv_norm_rope for
 * Qwen 3, qkv_rope_neox for Phi-3), attention, o_proj, add_rms_norm (residual and ffn
 * norm), gate_up_silu, down, add_rms_norm (residual and the next layer's
 * attention norm, `next_norm`, or the final norm when `last`). The fused
 * ops give the same bits as the unfused chain with 7 launches instead of
 * 15. */
static layer_io build_layer(ir_builder *b, const pw_model *m, int64_t l, const int *lw,
                            layer_io io, int next_norm, bool last) {
    pw_model_arch arch = m->arch;
    pw_model_local local = pw_model_local_shape(m);
    const pw_model_local *in = &local;
    pw_ir_arg a[9];
    a[0] = N(io.x), a[1] = N(lw[W_Q]), a[2] = N(lw[W_K]), a[3] = N(lw[W_V]);
    int qkv;
    switch (arch) {
    case PW_ARCH_QWEN2: /* biases, NeoX rope */
        a[4] = N(lw[W_BQ]), a[5] = N(lw[W_BK]), a[6] = N(lw[W_BV]);
        a[7] = pw_ir_arg_int(in->n_heads), a[8] = pw_ir_arg_int(in->n_kv_heads);
        qkv = ir_call(b, "qkv", l, PW_OP_QKV_BIAS_ROPE_NEOX, a, 9);
        break;
    case PW_ARCH_QWEN3: /* per-head norm, NeoX rope */
        a[4] = N(lw[W_Q_NORM]), a[5] = N(lw[W_K_NORM]);
        a[6] = pw_ir_arg_int(in->n_heads), a[7] = pw_ir_arg_int(in->n_kv_heads);
        a[8] = pw_ir_arg_int(l);
        qkv = ir_call(b, "qkv", l, PW_OP_QKV_NORM_ROPE, a, 9);
        break;
    case PW_ARCH_PHI3: /* NeoX rope */
        a[4] = pw_ir_arg_int(in->n_heads), a[5] = pw_ir_arg_int(in->n_kv_heads);
        qkv = ir_call(b, "qkv", l, PW_OP_QKV_ROPE_NEOX, a, 6);
        break;
    default: /* Llama: the normal rope of ggml (adjacent pairs) */
        a[4] = pw_ir_arg_int(in->n_heads), a[5] = pw_ir_arg_int(in->n_kv_heads);
        qkv = ir_call(b, "qkv", l, PW_OP_QKV_ROPE, a, 6);
        break;
    }
    int q = ir_getitem(b, "q", l, qkv, 0);
    int k = ir_getitem(b, "k", l, qkv, 1);
    int v = ir_getitem(b, "v", l, qkv, 2);
    a[0] = N(q);
    int o = ir_call(b, "attn_out", l, PW_OP_EMPTY_LIKE, a, 1);
    a[0] = N(q), a[1] = N(k), a[2] = N(v), a[3] = N(o), a[4] = pw_ir_arg_int(l);
    ir_call(b, "attn", l, PW_OP_ATTENTION, a, 5);
    int proj = pw_model_row_parallel(b, m, "o_proj", l, o, lw[W_O], false);
    a[0] = N(io.h), a[1] = N(proj), a[2] = N(lw[W_FFN_NORM]);
    int res1 = ir_call(b, "h_attn_ffn_in", l, PW_OP_ADD_RMS_NORM, a, 3);
    int h1 = ir_getitem(b, "h_attn", l, res1, 0);
    int x2 = ir_getitem(b, "ffn_in", l, res1, 1);
    a[0] = N(x2), a[1] = N(lw[W_GATE]), a[2] = N(lw[W_UP]);
    int act = ir_call(b, "act", l, PW_OP_GATE_UP_SILU, a, 3);
    int down = pw_model_row_parallel(b, m, "down", l, act, lw[W_DOWN], true);
    a[0] = N(h1), a[1] = N(down), a[2] = N(next_norm);
    int res2 = ir_call(b, "h_next_in", l, PW_OP_ADD_RMS_NORM, a, 3);
    layer_io next;
    next.h = ir_getitem(b, "h", l, res2, 0);
    next.x = ir_getitem(b, last ? "final_norm" : "attn_in", last ? -1 : l + 1, res2, 1);
    return next;
}

pw_status pw_model_build_ir(const pw_model *m, pw_ir **out) {
    *out = NULL;
    if (m->arch == PW_ARCH_GEMMA3) return pw_gemma3_build_ir(m, out);
    const pw_model_info *in = &m->info;
    ir_builder b = {0};
    PW_TRY(pw_ir_new("llama_forward", &b.g));
    int ids = ir_placeholder(&b, "input_ids", 0);
    int tok_embd = ir_placeholder(&b, "tok_embd", 0);
    int *w = pw_host_calloc((size_t)in->n_layers * W_SLOTS, sizeof(int));
    if (!w) {
        pw_ir_free(b.g);
        return PW_ERR_OOM;
    }
    for (int64_t l = 0; l < in->n_layers; l++) layer_placeholders(&b, m->arch, l, &w[l * W_SLOTS]);
    int out_norm = ir_placeholder(&b, "output_norm", 0);
    int lm_head = ir_placeholder(&b, "lm_head", 0);

    pw_ir_arg a[3];
    layer_io io;
    io.h = pw_model_embed(&b, m, ids, tok_embd);
    a[0] = N(io.h), a[1] = N(in->n_layers > 0 ? w[W_ATTN_NORM] : out_norm);
    io.x = in->n_layers > 0 ? ir_call(&b, "attn_in", 0, PW_OP_RMS_NORM, a, 2)
                            : ir_call(&b, "final_norm", -1, PW_OP_RMS_NORM, a, 2);
    for (int64_t l = 0; l < in->n_layers; l++) {
        bool last = l + 1 == in->n_layers;
        int next_norm = last ? out_norm : w[(l + 1) * W_SLOTS + W_ATTN_NORM];
        io = build_layer(&b, m, l, &w[l * W_SLOTS], io, next_norm, last);
    }
    /* the rows the step samples from only (op lm_head) */
    int logits = pw_model_logits(&b, m, io.x, lm_head, 0.0f);
    ir_finish_graph(&b, in->vocab, ids, logits);
    pw_host_free(w);
    if (b.status != PW_OK) {
        pw_ir_free(b.g);
        return pw_error_context(b.status, "building the model graph");
    }
    *out = b.g;
    return PW_OK;
}
#undef N
