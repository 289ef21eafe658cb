/* Lazy capture (docs/runtime.md, "Lazy capture"):
 *  - a lazy engine captures nothing at start-up;
 *  - a step whose descriptor has no graph is served by a larger captured
 *    size if one exists, else eagerly, and the descriptor is captured
 *    after it, so the next step of that size replays;
 *  - a graph budget frees the least recently used descriptors;
 *  - every fallback is counted, and tokens equal eager capture's in every
 *    mode (random tiny model; stories260K and SmolLM2 when present). */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"

#include <stdio.h>
#include <unistd.h>

#define N_REQ 4
#define MAX_NEW 12

typedef struct outcome {
    int32_t tokens[N_REQ][MAX_NEW];
    pw_engine_stats st;
} outcome;

static void config(pw_engine_config *cfg, pw_graph_mode mode, pw_capture_policy policy) {
    pw_engine_config_init(cfg);
    cfg->mode = mode;
    cfg->max_num_seqs = 8;
    cfg->max_num_batched_tokens = 32;
    cfg->max_model_len = 128;
    cfg->progress = PW_PROGRESS_OFF;
    cfg->print_capture_totals = false;
    cfg->capture_policy = policy;
}

/* Requests of different lengths joining at different steps: prefill
 * chunks, mixed batches and decode batches of several sizes. */
static pw_status run(pw_model *m, const pw_engine_config *cfg, outcome *out) {
    memset(out, 0, sizeof *out);
    pw_engine *e;
    PW_TRY(pw_engine_new(m, cfg, &e));
    int64_t vocab = pw_model_get_info(m)->vocab;
    int32_t prompts[N_REQ][40];
    static const int64_t lens[N_REQ] = {5, 37, 1, 12};
    static const int join[N_REQ] = {0, 0, 3, 6};
    for (int r = 0; r < N_REQ; r++)
        for (int t = 0; t < 40; t++) prompts[r][t] = (int32_t)((r * 131 + t * 17 + 1) % vocab);
    int64_t ids[N_REQ];
    pw_status s = PW_OK;
    int added = 0;
    for (int step = 0; s == PW_OK && (added < N_REQ || pw_engine_has_work(e)); step++) {
        for (int r = 0; r < N_REQ && s == PW_OK; r++)
            if (join[r] == step) {
                s = pw_engine_add_request(e, prompts[r], lens[r], MAX_NEW, NULL, &ids[r]);
                added++;
            }
        const pw_step_token *t;
        int64_t n;
        if (s == PW_OK) s = pw_engine_step(e, &t, &n);
        if (step > 1000) s = pw_error(PW_ERR_INTERNAL, "test: the engine does not finish");
    }
    for (int r = 0; r < N_REQ && s == PW_OK; r++) {
        const int32_t *toks;
        int64_t n;
        s = pw_engine_request_output(e, ids[r], &toks, &n);
        if (s == PW_OK) memcpy(out->tokens[r], toks, (size_t)(n < MAX_NEW ? n : MAX_NEW) * 4);
    }
    pw_engine_get_stats(e, &out->st);
    pw_engine_free(e);
    return s;
}

/* every_mode: the four graph modes; otherwise FULL_AND_PIECEWISE only (the
 * largest model, to keep a sanitizer run of the test short). */
static void check_model(pw_model *m, const char *label, bool every_mode) {
    pw_engine_config cfg;
    config(&cfg, PW_GRAPH_NONE, PW_CAPTURE_EAGER);
    outcome ref;
    CHECK_OK(run(m, &cfg, &ref));
    static const pw_graph_mode modes[] = {PW_GRAPH_PIECEWISE, PW_GRAPH_FULL,
                                          PW_GRAPH_FULL_AND_PIECEWISE, PW_GRAPH_FULL_DECODE_ONLY};
    for (size_t i = every_mode ? 0 : 2; i < (every_mode ? PW_ARRAY_LEN(modes) : 3); i++) {
        outcome eager, lazy, tight;
        config(&cfg, modes[i], PW_CAPTURE_EAGER);
        CHECK_OK(run(m, &cfg, &eager));
        config(&cfg, modes[i], PW_CAPTURE_LAZY);
        CHECK_OK(run(m, &cfg, &lazy));
        cfg.graph_budget = 1; /* keeps only the newest descriptor */
        CHECK_OK(run(m, &cfg, &tight));
        bool same = memcmp(ref.tokens, eager.tokens, sizeof ref.tokens) == 0 &&
                    memcmp(ref.tokens, lazy.tokens, sizeof ref.tokens) == 0 &&
                    memcmp(ref.tokens, tight.tokens, sizeof ref.tokens) == 0;
        if (!same) fprintf(stderr, "%s %s: tokens differ\n", label, pw_graph_mode_name(modes[i]));
        CHECK(same);
        /* eager never falls back */
        CHECK_EQ_INT(eager.st.lazy_eager + eager.st.lazy_padded + eager.st.lazy_captured, 0);
        /* lazy: the first step of each descriptor falls back, then it is captured */
        CHECK(lazy.st.lazy_eager >= 1);
        CHECK(lazy.st.lazy_captured >= 1);
        CHECK(lazy.st.lazy_captured <= lazy.st.lazy_eager + lazy.st.lazy_padded);
        CHECK_EQ_INT(lazy.st.graphs_evicted, 0);
        CHECK(lazy.st.graphs_captured < eager.st.graphs_captured); /* only what was used */
        CHECK(lazy.st.graph_bytes > 0);
        int64_t graph_steps = lazy.st.steps_by_mode[PW_MODE_PIECEWISE] +
                              lazy.st.steps_by_mode[PW_MODE_FULL];
        CHECK(graph_steps > lazy.st.lazy_padded); /* later steps of a size replay */
        /* a budget of one byte keeps only the descriptor captured last */
        CHECK(tight.st.graphs_evicted == tight.st.lazy_captured - 1);
        CHECK(tight.st.lazy_captured >= lazy.st.lazy_captured);
    }
}

/* The second step of a size replays, and a smaller size is served by a
 * larger captured one. */
static void check_replay_and_padding(pw_model *m) {
    pw_engine_config cfg;
    config(&cfg, PW_GRAPH_PIECEWISE, PW_CAPTURE_LAZY);
    pw_engine *e = NULL;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (!e) return;
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.graphs_captured, 0); /* nothing at start-up */
    int32_t prompt[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t id;
    const pw_step_token *t;
    int64_t n;
    /* step 1: 8 tokens, nothing captured: eager, then size 8 is captured */
    CHECK_OK(pw_engine_add_request(e, prompt, 8, 3, NULL, &id));
    CHECK_OK(pw_engine_step(e, &t, &n));
    pw_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.lazy_eager, 1);
    CHECK_EQ_INT(st.lazy_captured, 1);
    CHECK_EQ_INT(st.steps_by_mode[PW_MODE_NONE], 1);
    /* step 2: one decode token: size 1 has no graph, size 8 does: padded */
    CHECK_OK(pw_engine_step(e, &t, &n));
    pw_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.lazy_padded, 1);
    CHECK_EQ_INT(st.lazy_captured, 2);
    CHECK_EQ_INT(st.steps_by_mode[PW_MODE_PIECEWISE], 1);
    /* step 3: size 1 again: replays its own graph, no fallback */
    CHECK_OK(pw_engine_step(e, &t, &n));
    pw_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.lazy_padded + st.lazy_eager, 2);
    CHECK_EQ_INT(st.lazy_captured, 2);
    CHECK_EQ_INT(st.steps_by_mode[PW_MODE_PIECEWISE], 2);
    pw_engine_free(e);

    config(&cfg, PW_GRAPH_PIECEWISE, PW_CAPTURE_EAGER);
    cfg.graph_budget = 1024;
    e = NULL;
    CHECK_ERR(pw_engine_new(m, &cfg, &e), PW_ERR_INVALID_ARG, "a graph budget needs lazy capture");
    CHECK(e == NULL);
    config(&cfg, PW_GRAPH_PIECEWISE, (pw_capture_policy)7);
    CHECK_ERR(pw_engine_new(m, &cfg, &e), PW_ERR_INVALID_ARG, "unknown capture policy 7");
    pw_capture_policy p;
    CHECK_OK(pw_capture_policy_parse("LAZY", &p));
    CHECK_EQ_INT(p, PW_CAPTURE_LAZY);
    CHECK_ERR(pw_capture_policy_parse("sometimes", &p), PW_ERR_PARSE,
              "unknown capture policy 'sometimes' (expected eager or lazy)");
    CHECK_STREQ(pw_capture_policy_name(PW_CAPTURE_EAGER), "eager");
}

static void test_file(const char *path, const char *label, bool every_mode) {
    if (!path || access(path, R_OK) != 0) {
        char what[256];
        snprintf(what, sizeof what, "%s not found", label);
        pw_test_skip_part(what);
        return;
    }
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return;
    check_model(m, label, every_mode);
    pw_model_free(m);
}

int main(void) {
    char path[] = "/tmp/pw_test_lazy_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    pw_tiny_llama_config tc = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&tc, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (m) {
        check_model(m, "tiny", true);
        check_replay_and_padding(m);
        pw_model_free(m);
    }
    unlink(path);
    char shared[1024];
    test_file(pw_test_shared_path("models/stories260K.gguf", shared, sizeof shared), "stories260K",
              true);
    char smol[4096];
    test_file(pw_test_model_path("PW_SMOLLM2_GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smol,
                                 sizeof smol),
              "SmolLM2", false);
    return pw_test_finish("model_engine_lazy");
}
