/* Synthetic models; see synth.h. */
#include "model/synth.h"

#include "internal.h"
#include "model/dequant.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Llama 3's published shapes, with a small one for the tests. Context is
 * kept at 4096 rather than the models' 128k: engines size their KV cache
 * from it, and benchmarks need far less. */
static const pw_synth_shape shapes[] = {
    {"tiny", "a small Llama for tests", "llama", 256, 2, 4, 2, 512, 4096, 500000.0f, 1e-5f, true},
    {"1b", "Llama-3.2-1B", "llama", 2048, 16, 32, 8, 8192, 4096, 500000.0f, 1e-5f, true},
    {"3b", "Llama-3.2-3B", "llama", 3072, 28, 24, 8, 8192, 4096, 500000.0f, 1e-5f, true},
    {"8b", "Llama-3.1-8B", "llama", 4096, 32, 32, 8, 14336, 4096, 500000.0f, 1e-5f, false},
};

/* file_type: llama.cpp's LLAMA_FTYPE_MOSTLY_* (a single-type K file is
 * named after its _S variant, as llama-quantize --pure would). */
static const pw_synth_type types[] = {
    {"q4_0", PW_Q4_0, false, 2},  {"q4_1", PW_Q4_1, false, 3}, {"q8_0", PW_Q8_0, false, 7},
    {"q5_0", PW_Q5_0, false, 8},  {"q5_1", PW_Q5_1, false, 9}, {"q4_k", PW_Q4_K, false, 14},
    {"q5_k", PW_Q5_K, false, 16}, {"q6_k", PW_Q6_K, false, 18},
    {"q4_k_m", PW_Q4_K, true, 15},
};

int pw_synth_shape_count(void) { return (int)PW_ARRAY_LEN(shapes); }
const pw_synth_shape *pw_synth_shape_at(int i) {
    return i >= 0 && i < pw_synth_shape_count() ? &shapes[i] : NULL;
}
const pw_synth_shape *pw_synth_shape_find(const char *name) {
    for (size_t i = 0; name && i < PW_ARRAY_LEN(shapes); i++)
        if (strcasecmp(shapes[i].name, name) == 0) return &shapes[i];
    return NULL;
}

int pw_synth_type_count(void) { return (int)PW_ARRAY_LEN(types); }
const pw_synth_type *pw_synth_type_at(int i) {
    return i >= 0 && i < pw_synth_type_count() ? &types[i] : NULL;
}
const pw_synth_type *pw_synth_type_find(const char *name) {
    for (size_t i = 0; name && i < PW_ARRAY_LEN(types); i++)
        if (strcasecmp(types[i].name, name) == 0) return &types[i];
    return NULL;
}

/* ---- random blocks ---------------------------------------------------------- */

/* xorshift64*, as the tiny-model writer uses. */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}
static float rng_uniform(uint64_t *s) { /* in [-1, 1) */
    return (float)((double)(rng_next(s) >> 11) * 0x1p-52 - 1.0);
}

#define POOL_BITS 12
#define POOL_BLOCKS (1 << POOL_BITS)
#define MAX_POOLS 8

typedef struct block_pool {
    pw_dtype dtype;
    float scale;
    uint8_t *blocks; /* POOL_BLOCKS encoded blocks */
} block_pool;

typedef struct synth_state {
    const pw_synth_config *cfg;
    block_pool pools[MAX_POOLS];
    int n_pools;
    uint64_t done, total;
} synth_state;

/* What each filled tensor needs: its scale (values are uniform in
 * [-scale, scale), or 1 +- scale for a norm) and its own random stream. */
typedef struct tensor_plan {
    synth_state *st;
    float scale;
    bool norm;
    uint64_t seed;
} tensor_plan;

static pw_status get_pool(synth_state *st, pw_dtype dtype, float scale, const block_pool **out) {
    for (int i = 0; i < st->n_pools; i++)
        if (st->pools[i].dtype == dtype && st->pools[i].scale == scale) {
            *out = &st->pools[i];
            return PW_OK;
        }
    if (st->n_pools == MAX_POOLS) return pw_error(PW_ERR_INTERNAL, "synth: too many block pools or tensors");
    int64_t elems = pw_dtype_block_elems(dtype) * POOL_BLOCKS;
    float *values = pw_host_alloc((size_t)elems * sizeof *values);
    uint8_t *blocks = pw_host_alloc((size_t)pw_dtype_row_bytes(dtype, elems));
    pw_status s = values && blocks ? PW_OK : pw_error(PW_ERR_OOM, "synth: out of memory");
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(dtype + 1) ^ (uint64_t)(scale * 1e6f) ^
                   st->cfg->seed;
    if (rng == 0) rng = 1;
    for (int64_t i = 0; s == PW_OK && i < elems; i++) values[i] = scale * rng_uniform(&rng);
    if (s == PW_OK) s = pw_quantize(dtype, values, blocks, elems);
    pw_host_free(values);
    if (s != PW_OK) {
        pw_host_free(blocks);
        return s;
    }
    block_pool *p = &st->pools[st->n_pools++];
    p->dtype = dtype;
    p->scale = scale;
    p->blocks = blocks;
    *out = p;
    return PW_OK;
}

static pw_status fill_tensor(void *user, const char *name, pw_dtype dtype, int64_t n, void *dst,
                             uint64_t nbytes) {
    const tensor_plan *tp = user;
    synth_state *st = tp->st;
    uint64_t rng = tp->seed;
    if (dtype == PW_F32) {
        float *v = dst;
        for (int64_t i = 0; i < n; i++) v[i] = (tp->norm ? 1.0f : 0.0f) + tp->scale * rng_uniform(&rng);
    } else {
        const block_pool *pool = NULL;
        PW_TRY(get_pool(st, dtype, tp->scale, &pool));
        size_t bb = pw_dtype_block_bytes(dtype);
        int64_t n_blocks = n / pw_dtype_block_elems(dtype);
        uint8_t *d = dst;
        uint64_t r = 0;
        int left = 0;
        for (int64_t b = 0; b < n_blocks; b++) {
            if (left == 0) {
                r = rng_next(&rng);
                left = 64 / POOL_BITS;
            }
            memcpy(d + (size_t)b * bb, pool->blocks + (size_t)(r & (POOL_BLOCKS - 1)) * bb, bb);
            r >>= POOL_BITS;
            left--;
        }
    }
    st->done += nbytes;
    if (st->cfg->progress) st->cfg->progress(st->cfg->progress_user, name, st->done, st->total);
    return PW_OK;
}

/* ---- the model ---------------------------------------------------------------- */

/* llama.cpp's use_more_bits: the first and last eighth of the layers and
 * every third one between get the bigger type in a Q4_K_M file. */
static bool more_bits(int layer, int n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

static pw_dtype weight_type(const pw_synth_type *t, const char *role, int layer, int n_layers,
                            bool lm_head) {
    if (!t->q4_k_m) return t->dtype;
    if (lm_head) return PW_Q6_K;
    if ((strcmp(role, "attn_v") == 0 || strcmp(role, "ffn_down") == 0) &&
        more_bits(layer, n_layers))
        return PW_Q6_K;
    return PW_Q4_K;
}

typedef struct synth_model {
    pw_gguf_writer *w;
    tensor_plan *plans;
    int n_plans, cap_plans;
    synth_state *st;
} synth_model;

static pw_status add_weight(synth_model *m, const char *name, pw_dtype dtype, int64_t d0,
                            int64_t d1, float scale, bool norm) {
    if (m->n_plans == m->cap_plans) return pw_error(PW_ERR_INTERNAL, "synth: too many block pools or tensors");
    tensor_plan *tp = &m->plans[m->n_plans];
    tp->st = m->st;
    tp->scale = scale;
    tp->norm = norm;
    tp->seed = (m->st->cfg->seed + 1) * 0x9E3779B97F4A7C15ULL + (uint64_t)m->n_plans * 0xD1B54A32D192ED03ULL;
    if (tp->seed == 0) tp->seed = 1;
    int64_t dims[2] = {d0, d1};
    PW_TRY(pw_gguf_writer_add_tensor_filled(m->w, name, dtype, d1 > 1 ? 2 : 1, dims, fill_tensor,
                                            tp));
    m->n_plans++;
    m->st->total += (uint64_t)pw_dtype_row_bytes(dtype, d0 * d1);
    return PW_OK;
}

static pw_status copy_tokenizer(pw_gguf_writer *w, const char *vocab_path, int64_t *n_vocab) {
    pw_gguf *g = NULL;
    PW_TRY(pw_gguf_open(vocab_path, &g));
    pw_status s = PW_OK;
    const pw_gguf_kv *tokens = pw_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (!tokens || pw_gguf_kv_array_type(tokens) != PW_GGUF_STRING ||
        pw_gguf_kv_array_len(tokens) == 0 || pw_gguf_kv_array_len(tokens) > INT32_MAX)
        s = pw_error(PW_ERR_FORMAT, "synth: '%s' has no tokenizer (tokenizer.ggml.tokens) to "
                     "copy", vocab_path);
    for (int64_t i = 0; s == PW_OK && i < pw_gguf_kv_count(g); i++) {
        const pw_gguf_kv *kv = pw_gguf_kv_at(g, i);
        if (strncmp(pw_gguf_kv_key(kv), "tokenizer.", 10) == 0) s = pw_gguf_writer_add_kv_copy(w, kv);
    }
    if (s == PW_OK) *n_vocab = (int64_t)pw_gguf_kv_array_len(tokens);
    pw_gguf_free(g);
    return s;
}

static pw_status llama_metadata(pw_gguf_writer *w, const pw_synth_config *c) {
    const pw_synth_shape *sh = c->shape;
    char name[128];
    snprintf(name, sizeof name, "synthetic %s %s", sh->model, c->type->name);
    PW_TRY(pw_gguf_writer_add_string(w, "general.architecture", sh->arch));
    PW_TRY(pw_gguf_writer_add_string(w, "general.name", name));
    PW_TRY(pw_gguf_writer_add_u32(w, "general.alignment", PW_GGUF_DEFAULT_ALIGNMENT));
    PW_TRY(pw_gguf_writer_add_u32(w, "general.file_type", c->type->file_type));
    PW_TRY(pw_gguf_writer_add_u32(w, "general.quantization_version", 2));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.context_length", (uint32_t)sh->context_length));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.embedding_length", (uint32_t)sh->dim));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.block_count", (uint32_t)sh->n_layers));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.feed_forward_length", (uint32_t)sh->ffn_dim));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.attention.head_count", (uint32_t)sh->n_heads));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.attention.head_count_kv", (uint32_t)sh->n_kv_heads));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.rope.dimension_count",
                                  (uint32_t)(sh->dim / sh->n_heads)));
    PW_TRY(pw_gguf_writer_add_f32(w, "llama.rope.freq_base", sh->rope_theta));
    return pw_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", sh->rms_eps);
}

static pw_status llama_tensors(synth_model *m, const pw_synth_config *c, int64_t n_vocab) {
    const pw_synth_shape *sh = c->shape;
    const pw_synth_type *t = c->type;
    const int64_t dim = sh->dim, ffn = sh->ffn_dim;
    const int64_t kv_dim = dim / sh->n_heads * sh->n_kv_heads;
    const float in_scale = 1.0f / sqrtf((float)dim), ffn_scale = 1.0f / sqrtf((float)ffn);
    PW_TRY(add_weight(m, "token_embd.weight", weight_type(t, "token_embd", 0, 1, sh->tied_embeddings),
                      dim, n_vocab, 1.0f, false));
    PW_TRY(add_weight(m, "output_norm.weight", PW_F32, dim, 1, 0.1f, true));
    if (!sh->tied_embeddings)
        PW_TRY(add_weight(m, "output.weight", weight_type(t, "output", 0, 1, true), dim, n_vocab,
                          in_scale, false));
    char name[64];
    for (int l = 0; l < sh->n_layers; l++) {
#define SYNTH_TENSOR(role, is_norm, d0, d1, scale)                                             \
    do {                                                                                       \
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, role);                              \
        PW_TRY(add_weight(m, name, is_norm ? PW_F32 : weight_type(t, role, l, sh->n_layers, false), \
                          d0, d1, scale, is_norm));                                            \
    } while (0)
        SYNTH_TENSOR("attn_norm", true, dim, 1, 0.1f);
        SYNTH_TENSOR("attn_q", false, dim, dim, in_scale);
        SYNTH_TENSOR("attn_k", false, dim, kv_dim, in_scale);
        SYNTH_TENSOR("attn_v", false, dim, kv_dim, in_scale);
        SYNTH_TENSOR("attn_output", false, dim, dim, in_scale);
        SYNTH_TENSOR("ffn_norm", true, dim, 1, 0.1f);
        SYNTH_TENSOR("ffn_gate", false, dim, ffn, in_scale);
        SYNTH_TENSOR("ffn_up", false, dim, ffn, in_scale);
        SYNTH_TENSOR("ffn_down", false, ffn, dim, ffn_scale);
#undef SYNTH_TENSOR
    }
    return PW_OK;
}

static pw_status check_config(const pw_synth_config *c, const char *path) {
    if (!c || !c->shape || !c->type || !c->vocab_path || !path)
        return pw_error(PW_ERR_INVALID_ARG, "synth: shape, type, vocabulary file and output path "
                        "are all required");
    if (strcmp(c->shape->arch, "llama") != 0)
        return pw_error(PW_ERR_UNSUPPORTED, "synth: architecture '%s' has no generator",
                        c->shape->arch);
    int64_t be = pw_dtype_block_elems(c->type->q4_k_m ? PW_Q4_K : c->type->dtype);
    if (c->type->q4_k_m && be < 256) be = 256;
    if (c->shape->dim % be != 0 || c->shape->ffn_dim % be != 0)
        return pw_error(PW_ERR_INVALID_ARG, "synth: shape '%s' (dim %d, ffn %d) does not split "
                        "into %s blocks", c->shape->name, c->shape->dim, c->shape->ffn_dim,
                        c->type->name);
    return PW_OK;
}

pw_status pw_synth_write(const pw_synth_config *c, const char *path) {
    PW_TRY(check_config(c, path));
    struct stat sb;
    if (lstat(path, &sb) == 0)
        return pw_error(PW_ERR_IO, "synth: something is already at '%s'; not touched", path);
    synth_state st = {.cfg = c};
    synth_model m = {.st = &st};
    m.cap_plans = 3 + 9 * c->shape->n_layers;
    m.plans = pw_host_calloc((size_t)m.cap_plans, sizeof *m.plans);
    if (!m.plans) return pw_error(PW_ERR_OOM, "synth: out of memory");
    pw_status s = pw_gguf_writer_new(&m.w);
    int64_t n_vocab = 0;
    if (s == PW_OK) s = llama_metadata(m.w, c);
    if (s == PW_OK) s = copy_tokenizer(m.w, c->vocab_path, &n_vocab);
    if (s == PW_OK) s = pw_gguf_writer_add_u32(m.w, "llama.vocab_size", (uint32_t)n_vocab);
    if (s == PW_OK) s = llama_tensors(&m, c, n_vocab);

    char tmp[4096];
    int fd = -1;
    if (s == PW_OK && (size_t)snprintf(tmp, sizeof tmp, "%s.partial-%ld", path, (long)getpid()) >= sizeof tmp)
        s = pw_error(PW_ERR_INVALID_ARG, "synth: output path too long");
    if (s == PW_OK) s = pw_file_create_new(tmp, "synth", &fd);
    if (s == PW_OK) {
        s = pw_gguf_writer_to_fd(m.w, fd, tmp);
        if (close(fd) != 0 && s == PW_OK)
            s = pw_error(PW_ERR_IO, "synth: cannot move '%s' to '%s': %s", tmp, path, strerror(errno));
        /* link, not rename: it refuses to replace whatever appeared at path
         * meanwhile. */
        if (s == PW_OK && link(tmp, path) != 0)
            s = pw_error(PW_ERR_IO, "synth: cannot move '%s' to '%s': %s", tmp, path,
                         strerror(errno));
        unlink(tmp);
    }
    for (int i = 0; i < st.n_pools; i++) pw_host_free(st.pools[i].blocks);
    pw_gguf_writer_free(m.w);
    pw_host_free(m.plans);
    return s;
}
