/* The Llama-shaped families (llama with rope_freqs or linear rope scaling,
 * qwen2, qwen3, phi3): small files of each load, build their graph and run
 * a step; every bad or unimplemented key and tensor fails to load with
 * PW_ERR_FORMAT (or NOT_FOUND for a missing tensor) and a message naming
 * it and the file, leaving nothing behind. The files are synthetic
 * (src/model/synth_family.h) over the tiny SentencePiece vocabulary of
 * gguf_writer.h, then rewritten with one key or tensor changed. Whether the
 * families compute the right numbers is model_float64_golden's question. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/synth_family.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char vocab_path[] = "/tmp/pw_test_families_vocab_XXXXXX";
static char base_path[] = "/tmp/pw_test_families_base_XXXXXX";
static char path[] = "/tmp/pw_test_families_XXXXXX";

/* One change to a base file. */
typedef struct edit {
    const char *drop_key;
    const char *set_key; /* replaced (or added) with one of: */
    char kind;           /* 'u' u32, 'f' f32, 's' string */
    uint32_t u;
    float f;
    const char *s;
    const char *drop_tensor;
    const char *add_tensor; /* an f32 vector of add_n elements, all add_value */
    int64_t add_n;
    float add_value;
} edit;

static void write_base(const char *family) {
    pw_synth_family_config c;
    CHECK_OK(pw_synth_family_preset(family, &c));
    c.dim = 64, c.n_layers = 2, c.ffn_dim = 96, c.context_length = 256;
    if (strcmp(family, "qwen3") == 0) c.head_dim = 32; /* 8 heads of 32: q is 256 wide */
    CHECK_OK(pw_synth_family_write(&c, vocab_path, base_path));
}

static void add_value(pw_gguf_writer *w, const edit *e) {
    if (e->kind == 'u') CHECK_OK(pw_gguf_writer_add_u32(w, e->set_key, e->u));
    else if (e->kind == 'f') CHECK_OK(pw_gguf_writer_add_f32(w, e->set_key, e->f));
    else CHECK_OK(pw_gguf_writer_add_string(w, e->set_key, e->s));
}

static void write_edit(edit e) {
    pw_gguf *g = NULL;
    CHECK_OK(pw_gguf_open(base_path, &g));
    pw_gguf_writer *w = NULL;
    CHECK_OK(pw_gguf_writer_new(&w));
    if (!g || !w) return;
    bool set_done = false;
    for (int64_t i = 0; i < pw_gguf_kv_count(g); i++) {
        const pw_gguf_kv *kv = pw_gguf_kv_at(g, i);
        const char *key = pw_gguf_kv_key(kv);
        if (e.drop_key && strcmp(key, e.drop_key) == 0) continue;
        if (e.set_key && strcmp(key, e.set_key) == 0) {
            add_value(w, &e);
            set_done = true;
            continue;
        }
        CHECK_OK(pw_synth_copy_kv(w, kv));
    }
    if (e.set_key && !set_done) add_value(w, &e);
    for (int64_t i = 0; i < pw_gguf_tensor_count(g); i++) {
        const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
        if (e.drop_tensor && strcmp(t->name, e.drop_tensor) == 0) continue;
        CHECK_OK(pw_gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->dims, t->data));
    }
    if (e.add_tensor) {
        float *v = malloc((size_t)e.add_n * sizeof *v);
        for (int64_t i = 0; i < e.add_n; i++) v[i] = e.add_value;
        CHECK_OK(pw_gguf_writer_add_tensor_f32(w, e.add_tensor, PW_F32, 1, &e.add_n, v));
        free(v);
    }
    CHECK_OK(pw_gguf_writer_to_file(w, path));
    pw_gguf_writer_free(w);
    pw_gguf_free(g);
}

static void expect(edit e, pw_status code, const char *needle) {
    write_edit(e);
    pw_model *m = (pw_model *)&m;
    pw_status s = pw_model_load(path, &m);
    CHECK_EQ_INT(s, code);
    if (code == PW_OK) { /* an accepted variant */
        if (s != PW_OK) fprintf(stderr, "refused: %s\n", pw_last_error());
        pw_model_free(s == PW_OK ? m : NULL);
        return;
    }
    CHECK(m == NULL);
    if (!strstr(pw_last_error(), needle) || !strstr(pw_last_error(), path))
        fprintf(stderr, "message '%s' lacks '%s' or the path\n", pw_last_error(), needle);
    CHECK(strstr(pw_last_error(), needle) != NULL);
    CHECK(strstr(pw_last_error(), path) != NULL);
}

/* The family's base file loads, builds its graph and generates. */
static void check_runs(const char *family) {
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(base_path, &m));
    if (!m) return;
    CHECK_STREQ(pw_model_get_info(m)->arch, strcmp(family, "llama3") == 0 ? "llama" : family);
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.max_num_seqs = 1;
    cfg.max_model_len = 32;
    cfg.kv_cache_positions = 32;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e = NULL;
    pw_status s = pw_engine_new(m, &cfg, &e);
    if (!pw_test_device_refused(s, family)) CHECK_OK(s);
    if (e) {
        int32_t prompt[4] = {300, 301, 302, 303};
        int64_t id;
        CHECK_OK(pw_engine_add_request(e, prompt, 4, 4, NULL, &id));
        while (pw_engine_has_work(e)) {
            const pw_step_token *t;
            int64_t n;
            if (pw_engine_step(e, &t, &n) != PW_OK) {
                CHECK_OK(PW_ERR_INTERNAL);
                break;
            }
        }
        const int32_t *toks;
        int64_t n = 0;
        CHECK_OK(pw_engine_request_output(e, id, &toks, &n));
        CHECK_EQ_INT(n, 4);
        pw_engine_free(e);
    }
    pw_model_free(m);
}

/* Keys every Llama-shaped family checks the same way. */
static void check_common_keys(const char *arch, bool eps_required) {
    char key[96], needle[160];
    const char *required[] = {"block_count", "embedding_length", "feed_forward_length",
                              "attention.head_count", "context_length",
                              "attention.layer_norm_rms_epsilon"};
    for (size_t i = 0; i < PW_ARRAY_LEN(required); i++) {
        if (i == 5 && !eps_required) continue;
        snprintf(key, sizeof key, "%s.%s", arch, required[i]);
        snprintf(needle, sizeof needle, "%s: missing hyperparameter %s", arch, key);
        expect((edit){.drop_key = key}, PW_ERR_FORMAT, needle);
        if (i == 5) continue;
        snprintf(needle, sizeof needle, "%s: hyperparameter %s is 0", arch, key);
        expect((edit){.set_key = key, .kind = 'u', .u = 0}, PW_ERR_FORMAT, needle);
    }
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    expect((edit){.set_key = key, .kind = 'u', .u = 3}, PW_ERR_FORMAT,
           "attention.head_count_kv (3) must divide attention.head_count");
    snprintf(key, sizeof key, "%s.block_count", arch);
    expect((edit){.set_key = key, .kind = 's', .s = "two"}, PW_ERR_FORMAT, key);
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    snprintf(needle, sizeof needle, "%s = -1 must be positive", key);
    expect((edit){.set_key = key, .kind = 'f', .f = -1.0f}, PW_ERR_FORMAT, needle);
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    snprintf(needle, sizeof needle, "%s = 0 must be positive", key);
    expect((edit){.set_key = key, .kind = 'f', .f = 0.0f}, PW_ERR_FORMAT, needle);
    snprintf(key, sizeof key, "%s.rope.dimension_count", arch);
    expect((edit){.set_key = key, .kind = 'u', .u = 8}, PW_ERR_FORMAT,
           "partial rotary embeddings are not implemented");
    snprintf(key, sizeof key, "%s.attention.value_length", arch);
    snprintf(needle, sizeof needle, "metadata key '%s' = 8 differs from the head size", key);
    expect((edit){.set_key = key, .kind = 'u', .u = 8}, PW_ERR_FORMAT, needle);
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    snprintf(needle, sizeof needle, "metadata key '%s' = 'yarn' is not implemented", key);
    expect((edit){.set_key = key, .kind = 's', .s = "yarn"}, PW_ERR_FORMAT, needle);
    snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
    snprintf(needle, sizeof needle, "%s = -2 must be positive", key);
    expect((edit){.set_key = key, .kind = 'f', .f = -2.0f}, PW_ERR_FORMAT, needle);
    snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", arch);
    expect((edit){.set_key = key, .kind = 'f', .f = 2.0f}, PW_ERR_FORMAT,
           "rope.scaling.attn_factor = 2 is not implemented");
    expect((edit){.drop_tensor = "blk.1.ffn_down.weight"}, PW_ERR_NOT_FOUND,
           "missing tensor 'blk.1.ffn_down.weight'");
}

int main(void) {
    char *paths[] = {vocab_path, base_path, path};
    for (int i = 0; i < 3; i++) {
        int fd = mkstemp(paths[i]);
        CHECK(fd >= 0);
        if (fd < 0) return pw_test_finish("model_families");
        close(fd);
    }
    pw_tiny_llama_config tiny = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&tiny, vocab_path));

    /* llama with Llama 3's rope_freqs: runs; bad factors and shapes refused */
    write_base("llama3");
    check_runs("llama3");
    check_common_keys("llama", false);
    expect((edit){.drop_key = "llama.attention.layer_norm_rms_epsilon"}, PW_OK, ""); /* optional */
    expect((edit){.drop_tensor = "rope_freqs.weight", .add_tensor = "rope_freqs.weight",
                  .add_n = 8, .add_value = -1.0f},
           PW_ERR_FORMAT, "rope_freqs.weight[0] = -1 must be positive");
    expect((edit){.drop_tensor = "rope_freqs.weight", .add_tensor = "rope_freqs.weight",
                  .add_n = 5, .add_value = 1.0f},
           PW_ERR_FORMAT, "tensor 'rope_freqs.weight' has shape [5, 1], expected [8, 1]");
    /* linear rope scaling is implemented */
    expect((edit){.set_key = "llama.rope.scaling.type", .kind = 's', .s = "linear"}, PW_OK, "");
    expect((edit){.set_key = "llama.rope.scaling.factor", .kind = 'f', .f = 4.0f}, PW_OK, "");
    /* the allow-list still refuses what no family here has */
    expect((edit){.set_key = "llama.expert_count", .kind = 'u', .u = 8}, PW_ERR_FORMAT,
           "metadata key 'llama.expert_count' is not part of the llama architecture");

    write_base("qwen2");
    check_runs("qwen2");
    check_common_keys("qwen2", true);
    expect((edit){.set_key = "qwen2.attention.key_length", .kind = 'u', .u = 8}, PW_ERR_FORMAT,
           "metadata key 'qwen2.attention.key_length' = 8 differs from the head size 16");
    expect((edit){.drop_tensor = "blk.0.attn_k.bias"}, PW_ERR_NOT_FOUND,
           "missing tensor 'blk.0.attn_k.bias'");
    expect((edit){.add_tensor = "rope_freqs.weight", .add_n = 8, .add_value = 1.0f},
           PW_ERR_FORMAT, "tensor 'rope_freqs.weight' is not part of the qwen2 architecture");
    expect((edit){.drop_tensor = "blk.0.attn_v.bias", .add_tensor = "blk.0.attn_v.bias",
                  .add_n = 7, .add_value = 0.0f},
           PW_ERR_FORMAT, "tensor 'blk.0.attn_v.bias' has shape [7, 1], expected [32, 1]");

    write_base("qwen3");
    check_runs("qwen3");
    check_common_keys("qwen3", true);
    expect((edit){.set_key = "qwen3.attention.key_length", .kind = 'u', .u = 7}, PW_ERR_FORMAT,
           "the head size 7");
    expect((edit){.drop_tensor = "blk.1.attn_q_norm.weight"}, PW_ERR_NOT_FOUND,
           "missing tensor 'blk.1.attn_q_norm.weight'");
    expect((edit){.add_tensor = "blk.0.attn_q.bias", .add_n = 256, .add_value = 0.0f},
           PW_ERR_FORMAT, "tensor 'blk.0.attn_q.bias' is not part of the qwen3 architecture");

    write_base("phi3");
    check_runs("phi3");
    check_common_keys("phi3", true);
    /* longrope: not in phi3's table (and refused by its loader too) */
    expect((edit){.add_tensor = "rope_factors_long.weight", .add_n = 8, .add_value = 1.0f},
           PW_ERR_FORMAT, "tensor 'rope_factors_long.weight' is not part of the phi3 architecture");
    expect((edit){.add_tensor = "blk.0.rope_factors_short.weight", .add_n = 8, .add_value = 1.0f},
           PW_ERR_FORMAT, "tensor 'blk.0.rope_factors_short.weight' is not part of the phi3");
    /* a tensor of another family */
    expect((edit){.add_tensor = "blk.0.attn_q.bias", .add_n = 64, .add_value = 0.0f},
           PW_ERR_FORMAT, "tensor 'blk.0.attn_q.bias' is not part of the phi3 architecture");
    expect((edit){.set_key = "phi3.attention.sliding_window", .kind = 'u', .u = 2047}, PW_OK, "");
    expect((edit){.drop_tensor = "blk.0.attn_qkv.weight"}, PW_ERR_NOT_FOUND,
           "missing tensor 'blk.0.attn_q.weight'");

    for (int i = 0; i < 3; i++) unlink(paths[i]);
    return pw_test_finish("model_families");
}
