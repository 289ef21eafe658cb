/* Graph-memory planning (docs/runtime.md, "Memory planning"):
 *  - the dry run of the capture list against a shadow graph pool predicts
 *    the real capture's reservation to the byte, for several capture lists,
 *    graph modes and models (random tiny, stories260K, SmolLM2 when present),
 *    with verify_capture too;
 *  - a memory budget sizes the KV cache from what weights, buffers and the
 *    predicted graphs leave, and a budget too small for one block is refused
 *    with the figures;
 *  - tokens do not change when the KV cache was sized from a budget. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"

#include <stdio.h>
#include <unistd.h>


static void base_config(pw_engine_config *cfg, pw_graph_mode mode) {
    pw_engine_config_init(cfg);
    cfg->mode = mode;
    cfg->max_num_seqs = 8;
    cfg->max_num_batched_tokens = 64;
    cfg->progress = PW_PROGRESS_OFF;
    cfg->print_capture_totals = false;
    cfg->predict_graph_memory = true;
}

static void check_prediction(pw_model *m, const char *label, pw_graph_mode mode,
                             const int64_t *sizes, int n_sizes, bool verify) {
    pw_engine_config cfg;
    base_config(&cfg, mode);
    cfg.capture_sizes = sizes;
    cfg.n_capture_sizes = n_sizes;
    cfg.verify_capture = verify;
    pw_engine *e = NULL;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (!e) return;
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    CHECK(st.graph_pool_predicted > 0);
    if (st.graph_pool_predicted != st.graph_pool_reserved)
        fprintf(stderr, "%s %s (%d sizes%s): predicted %zu, reserved %zu\n", label,
                pw_graph_mode_name(mode), n_sizes, verify ? ", verify" : "",
                st.graph_pool_predicted, st.graph_pool_reserved);
    CHECK_EQ_INT(st.graph_pool_predicted, st.graph_pool_reserved);
    CHECK(st.graphs_captured > 0);
    pw_engine_free(e);
}

static void check_predictions(pw_model *m, const char *label) {
    static const int64_t small[] = {1, 2, 4, 8};
    static const int64_t odd[] = {17, 3, 5, 64, 33};
    static const pw_graph_mode modes[] = {PW_GRAPH_PIECEWISE, PW_GRAPH_FULL,
                                          PW_GRAPH_FULL_AND_PIECEWISE, PW_GRAPH_FULL_DECODE_ONLY};
    for (size_t i = 0; i < PW_ARRAY_LEN(modes); i++) {
        check_prediction(m, label, modes[i], NULL, 0, false);
        check_prediction(m, label, modes[i], small, (int)PW_ARRAY_LEN(small), false);
        check_prediction(m, label, modes[i], odd, (int)PW_ARRAY_LEN(odd), false);
    }
    check_prediction(m, label, PW_GRAPH_FULL_AND_PIECEWISE, small, (int)PW_ARRAY_LEN(small), true);
}

/* Greedy tokens of two requests. */
static pw_status generate(pw_model *m, const pw_engine_config *cfg, int32_t out[2][16]) {
    pw_engine *e;
    PW_TRY(pw_engine_new(m, cfg, &e));
    static const int32_t p0[] = {1, 5, 9, 13}, p1[] = {1, 7};
    int64_t id[2];
    pw_status s = pw_engine_add_request(e, p0, 4, 16, NULL, &id[0]);
    if (s == PW_OK) s = pw_engine_add_request(e, p1, 2, 16, NULL, &id[1]);
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t n;
        s = pw_engine_step(e, &t, &n);
    }
    for (int i = 0; i < 2 && s == PW_OK; i++) {
        const int32_t *toks;
        int64_t n;
        s = pw_engine_request_output(e, id[i], &toks, &n);
        if (s == PW_OK) memcpy(out[i], toks, (size_t)(n < 16 ? n : 16) * sizeof(int32_t));
    }
    pw_engine_free(e);
    return s;
}

/* The weights are read in place on the CPU: the engine counts the bytes the
 * model loaded, a tied LM head once (another device copies them instead). */
static void check_weight_bytes(pw_model *m) {
    if (pw_device_from_env() != PW_DEVICE_CPU) return;
    pw_engine_config cfg;
    base_config(&cfg, PW_GRAPH_NONE);
    cfg.max_model_len = 128;
    pw_engine *e = NULL;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (!e) return;
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    CHECK_EQ_INT((int64_t)st.weight_bytes, (int64_t)pw_model_get_info(m)->weight_bytes);
    pw_engine_free(e);
}

static void check_budget(pw_model *m) {
    pw_engine_config cfg;
    base_config(&cfg, PW_GRAPH_FULL_AND_PIECEWISE);
    cfg.max_model_len = 128;
    pw_engine *e = NULL;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (!e) return;
    pw_engine_stats ref;
    pw_engine_get_stats(e, &ref);
    pw_engine_free(e);
    size_t fixed = ref.weight_bytes + ref.buffer_bytes + ref.graph_pool_predicted;

    /* exactly the default's cache on top of the rest: at least its blocks fit */
    cfg.memory_budget = fixed + ref.kv_cache_bytes;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (e) {
        pw_engine_stats st;
        pw_engine_get_stats(e, &st);
        CHECK(st.kv_cache_blocks >= ref.kv_cache_blocks);
        CHECK(st.weight_bytes + st.buffer_bytes + st.graph_pool_reserved + st.kv_cache_bytes <=
              cfg.memory_budget);
        CHECK_EQ_INT(st.graph_pool_predicted, st.graph_pool_reserved);
        pw_engine_free(e);
    }
    /* half of it: fewer blocks, and still within the budget */
    cfg.memory_budget = fixed + ref.kv_cache_bytes / 2;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (e) {
        pw_engine_stats st;
        pw_engine_get_stats(e, &st);
        CHECK(st.kv_cache_blocks >= 1);
        CHECK(st.kv_cache_blocks < ref.kv_cache_blocks);
        CHECK(st.weight_bytes + st.buffer_bytes + st.graph_pool_reserved + st.kv_cache_bytes <=
              cfg.memory_budget);
        pw_engine_free(e);
    }

    /* tokens do not depend on how the cache was sized */
    cfg.memory_budget = fixed + ref.kv_cache_bytes / 2;
    int32_t a[2][16] = {{0}}, b[2][16] = {{0}};
    pw_engine_config plain;
    base_config(&plain, PW_GRAPH_FULL_AND_PIECEWISE);
    plain.max_model_len = 128;
    CHECK_OK(generate(m, &plain, a));
    CHECK_OK(generate(m, &cfg, b));
    CHECK(memcmp(a, b, sizeof a) == 0);

    /* too small: refused, naming every part */
    cfg.memory_budget = fixed;
    e = NULL;
    CHECK_ERR(pw_engine_new(m, &cfg, &e), PW_ERR_INVALID_ARG, "is too small: weights");
    CHECK(e == NULL);
    CHECK(strstr(pw_last_error(), "one KV cache block") != NULL);
    cfg.memory_budget = 1;
    CHECK_ERR(pw_engine_new(m, &cfg, &e), PW_ERR_INVALID_ARG, "memory budget of 1 bytes");
    /* graphs off: nothing to plan, the budget still sizes the cache */
    base_config(&cfg, PW_GRAPH_NONE);
    cfg.max_model_len = 128;
    cfg.memory_budget = ref.weight_bytes + ref.buffer_bytes + ref.kv_cache_bytes;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (e) {
        pw_engine_stats st;
        pw_engine_get_stats(e, &st);
        CHECK_EQ_INT(st.graph_pool_predicted, 0);
        CHECK(st.kv_cache_blocks >= ref.kv_cache_blocks);
        pw_engine_free(e);
    }
}

static void test_tiny(void) {
    char path[] = "/tmp/pw_test_plan_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    pw_tiny_llama_config tc = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&tc, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (m) {
        check_predictions(m, "tiny");
        check_weight_bytes(m);
        check_budget(m);
        pw_model_free(m);
    }
    unlink(path);
}

static void test_file(const char *path, const char *label) {
    if (!path || access(path, R_OK) != 0) {
        char what[256];
        snprintf(what, sizeof what, "%s not found: its prediction checks", label);
        pw_test_skip_part(what);
        return;
    }
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return;
    check_predictions(m, label);
    check_weight_bytes(m);
    pw_model_free(m);
}

int main(void) {
    test_tiny();
    char path[1024];
    test_file(pw_test_shared_path("models/stories260K.gguf", path, sizeof path), "stories260K");
    char smol[4096];
    test_file(pw_test_model_path("PW_SMOLLM2_GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smol,
                                 sizeof smol),
              "SmolLM2");
    return pw_test_finish("model_engine_plan");
}
