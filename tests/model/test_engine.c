/* The whole pipeline: GGUF -> graph -> split -> plan -> pieces wrapped in
 * PIECEWISE wrappers and the forward in a FULL wrapper -> engine.
 *  - stories260K reproduces its golden greedy continuation in every mode;
 *  - NONE, PIECEWISE and FULL give identical tokens at batch sizes 1, 3 and 8
 *    with different prompts, including prompts of different lengths that
 *    prefill (in chunks) while others decode;
 *  - skipping the warm-ups a CPU does not need leaves every token as it
 *    was with them forced;
 *  - a random-weight model written by the tests' own GGUF writer runs the
 *    same checks without ../shared. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"

#include <stdio.h>
#include <unistd.h>

#define MAX_REQS 8
#define MAX_OUT 48

static const char *const golden =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big, red ball.";

typedef struct run_result {
    int32_t tokens[MAX_REQS][MAX_OUT];
    int64_t n[MAX_REQS];
    int64_t steps_by_mode[3];
    float first_logit[MAX_REQS];
} run_result;

/* Set by check_warmups_change_nothing: run_batch's engines force them. */
static bool force_warmups;

/* Runs prompts through an engine in `mode`; request i joins at step
 * join_step[i], so prefills overlap with other requests' decodes. */
static pw_status run_batch(pw_model *m, pw_graph_mode mode, int64_t batched_tokens,
                           int32_t *const *prompts, const int64_t *lens, const int *join_step,
                           int n_req, int64_t new_tokens, run_result *res) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = 8;
    cfg.max_num_batched_tokens = batched_tokens;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    cfg.force_warmups = force_warmups;
    pw_engine *e;
    pw_status s = pw_engine_new(m, &cfg, &e);
    if (s != PW_OK) return s;
    memset(res, 0, sizeof *res);
    int64_t ids[MAX_REQS];
    int added = 0, step = 0;
    while (s == PW_OK && (added < n_req || pw_engine_has_work(e))) {
        for (int i = 0; i < n_req && s == PW_OK; i++)
            if (join_step[i] == step) {
                s = pw_engine_add_request(e, prompts[i], lens[i], new_tokens, NULL, &ids[i]);
                added++;
            }
        const pw_step_token *toks;
        int64_t n;
        if (s == PW_OK) s = pw_engine_step(e, &toks, &n);
        if (++step > 10000) s = pw_error(PW_ERR_INTERNAL, "test: engine does not finish");
    }
    for (int i = 0; i < n_req && s == PW_OK; i++) {
        const int32_t *out;
        s = pw_engine_request_output(e, ids[i], &out, &res->n[i]);
        if (s == PW_OK && res->n[i] <= MAX_OUT)
            memcpy(res->tokens[i], out, (size_t)res->n[i] * sizeof(int32_t));
    }
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    memcpy(res->steps_by_mode, st.steps_by_mode, sizeof res->steps_by_mode);
    pw_engine_free(e);
    return s;
}

static const char *const prompts_text[MAX_REQS] = {
    "Once upon a time",
    "The cat sat",
    "Lily and Ben went to the park to play with a big red ball and",
    "One day",
    "Tom had a dog. The dog",
    "She",
    "The sun was shining and the birds were singing in the tall green trees",
    "Mom said",
};

static void check_modes_agree(pw_model *m, const char *label) {
    int32_t *prompts[MAX_REQS];
    int64_t lens[MAX_REQS];
    for (int i = 0; i < MAX_REQS; i++) CHECK_OK(pw_model_tokenize(m, prompts_text[i], true, &prompts[i], &lens[i]));
    static const int batch_sizes[] = {1, 3, 8};
    for (size_t b = 0; b < PW_ARRAY_LEN(batch_sizes); b++) {
        int n = batch_sizes[b];
        /* batch 8 staggers arrivals: later prompts prefill (in chunks of at
         * most 16 tokens) while earlier ones decode */
        int join[MAX_REQS];
        for (int i = 0; i < n; i++) join[i] = n == 8 ? (i % 4) * 3 : 0;
        static run_result res[3];
        static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
        for (int k = 0; k < 3; k++)
            CHECK_OK(run_batch(m, modes[k], 16, prompts, lens, join, n, 12, &res[k]));
        for (int k = 1; k < 3; k++) {
            for (int i = 0; i < n; i++) {
                bool same = res[k].n[i] == res[0].n[i] &&
                            memcmp(res[k].tokens[i], res[0].tokens[i],
                                   (size_t)res[0].n[i] * sizeof(int32_t)) == 0;
                if (!same)
                    fprintf(stderr, "%s: batch %d request %d differs between NONE and %s\n",
                            label, n, i, pw_graph_mode_name(modes[k]));
                CHECK(same);
            }
        }
        /* each mode really ran as asked */
        CHECK(res[0].steps_by_mode[PW_MODE_NONE] > 0);
        CHECK_EQ_INT(res[0].steps_by_mode[PW_MODE_PIECEWISE] + res[0].steps_by_mode[PW_MODE_FULL], 0);
        CHECK(res[1].steps_by_mode[PW_MODE_PIECEWISE] > 0);
        CHECK_EQ_INT(res[1].steps_by_mode[PW_MODE_FULL], 0);
        CHECK(res[2].steps_by_mode[PW_MODE_FULL] > 0);
        CHECK_EQ_INT(res[2].steps_by_mode[PW_MODE_PIECEWISE], 0);
    }
    for (int i = 0; i < MAX_REQS; i++) free(prompts[i]);
}

static void check_golden(pw_model *m, pw_graph_mode mode) {
    int32_t *ids;
    int64_t n;
    CHECK_OK(pw_model_tokenize(m, "Once upon a time", true, &ids, &n));
    run_result res;
    int join = 0;
    CHECK_OK(run_batch(m, mode, 64, &ids, &n, &join, 1, 40, &res));
    char text[1024];
    size_t len = (size_t)snprintf(text, sizeof text, "Once upon a time");
    int32_t prev = ids[n - 1];
    for (int64_t i = 0; i < res.n[0] && len < sizeof text - 64; i++) {
        len += (size_t)snprintf(text + len, sizeof text - len, "%s",
                                pw_model_token_text(m, prev, res.tokens[0][i]));
        prev = res.tokens[0][i];
    }
    bool ok = strncmp(text, golden, strlen(golden)) == 0;
    if (!ok) fprintf(stderr, "mode %s generated: %s\n", pw_graph_mode_name(mode), text);
    CHECK(ok);
    free(ids);
}

/* The CPU reports !needs_warmup, so the engine captures without the eager
 * warm-up runs; forcing them back must change no token in any mode, and
 * the skip must be real (a warm-up passes through every wrapper). */
/* The device the engines of this test run on (PW_DEVICE, default cpu). */
static pw_device test_device(void) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    return cfg.device;
}

static void check_warmups_change_nothing(pw_model *m) {
    int32_t *prompts[MAX_REQS];
    int64_t lens[MAX_REQS];
    for (int i = 0; i < 3; i++) CHECK_OK(pw_model_tokenize(m, prompts_text[i], true, &prompts[i], &lens[i]));
    int join[3] = {0, 0, 2};
    static const pw_graph_mode modes[] = {PW_GRAPH_PIECEWISE, PW_GRAPH_FULL,
                                          PW_GRAPH_FULL_AND_PIECEWISE};
    for (size_t k = 0; k < PW_ARRAY_LEN(modes); k++) {
        static run_result skipped, forced;
        pw_wrapper_counters c0, c1, c2;
        pw_counters_get(&c0);
        force_warmups = false;
        CHECK_OK(run_batch(m, modes[k], 16, prompts, lens, join, 3, 10, &skipped));
        pw_counters_get(&c1);
        force_warmups = true;
        CHECK_OK(run_batch(m, modes[k], 16, prompts, lens, join, 3, 10, &forced));
        pw_counters_get(&c2);
        force_warmups = false;
        /* a device that needs warm-ups runs them unforced too */
        pw_device_caps caps;
        CHECK_OK(pw_device_get_caps(test_device(), &caps));
        if (caps.needs_warmup)
            CHECK_EQ_INT(c2.pass_throughs - c1.pass_throughs, c1.pass_throughs - c0.pass_throughs);
        else
            CHECK(c2.pass_throughs - c1.pass_throughs > c1.pass_throughs - c0.pass_throughs);
        CHECK_EQ_INT(c2.graphs_captured - c1.graphs_captured, c1.graphs_captured - c0.graphs_captured);
        for (int i = 0; i < 3; i++) {
            bool same = skipped.n[i] == forced.n[i] &&
                        memcmp(skipped.tokens[i], forced.tokens[i],
                               (size_t)forced.n[i] * sizeof(int32_t)) == 0;
            if (!same)
                fprintf(stderr, "%s: request %d differs with the warm-ups forced\n",
                        pw_graph_mode_name(modes[k]), i);
            CHECK(same);
        }
    }
    for (int i = 0; i < 3; i++) free(prompts[i]);
}

static void test_stories260k(void) {
    char path[1024];
    if (!pw_test_shared_path("models/stories260K.gguf", path, sizeof path)) {
        pw_test_skip_part("stories260K.gguf not found under ../shared/models: the golden and "
                          "real-model mode tests");
        return;
    }
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return;
    const pw_model_info *in = pw_model_get_info(m);
    CHECK_EQ_INT(in->n_layers, 5);
    CHECK_EQ_INT(in->dim, 64);
    CHECK_EQ_INT(in->n_kv_heads, 4);
    static const pw_graph_mode modes[] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL,
                                          PW_GRAPH_FULL_AND_PIECEWISE, PW_GRAPH_FULL_DECODE_ONLY};
    for (size_t i = 0; i < PW_ARRAY_LEN(modes); i++) check_golden(m, modes[i]);
    check_modes_agree(m, "stories260K");
    check_warmups_change_nothing(m);
    pw_model_free(m);
}

/* Continuing a finished request reuses its KV cache; the tokens must equal
 * a fresh request whose prompt is the whole conversation so far. */
static void check_continue_matches_fresh(pw_model *m) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.max_num_seqs = 2;
    cfg.max_num_batched_tokens = 8;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (!e) return;
    int32_t prompt[5] = {1, 50, 60, 70, 80}, more[4] = {90, 91, 92, 93};
    int64_t id, n;
    const int32_t *out;
    const pw_step_token *t;
    int64_t k;
    CHECK_OK(pw_engine_add_request(e, prompt, 5, 6, NULL, &id));
    while (pw_engine_has_work(e)) CHECK_OK(pw_engine_step(e, &t, &k));
    CHECK_ERR(pw_engine_continue_request(e, id, more, 4, INT64_MAX), PW_ERR_INVALID_ARG,
              "exceed the context");
    CHECK_ERR(pw_engine_continue_request(e, 42, more, 4, 3), PW_ERR_NOT_FOUND, "no request 42");
    CHECK_OK(pw_engine_continue_request(e, id, more, 4, 5));
    while (pw_engine_has_work(e)) CHECK_OK(pw_engine_step(e, &t, &k));
    CHECK_OK(pw_engine_request_output(e, id, &out, &n));
    /* generated 6, appended 4, generated 5 (unless an EOS came first) */
    int32_t whole[32];
    int64_t nwhole = 0;
    for (int i = 0; i < 5; i++) whole[nwhole++] = prompt[i];
    int64_t first_part = n >= 15 ? 6 : -1;
    if (first_part > 0) {
        for (int64_t i = 0; i < 6; i++) whole[nwhole++] = out[i];
        for (int i = 0; i < 4; i++) whole[nwhole++] = more[i];
        int32_t cont[5];
        for (int i = 0; i < 5; i++) cont[i] = out[10 + i];
        int64_t id2;
        CHECK_OK(pw_engine_add_request(e, whole, nwhole, 5, NULL, &id2));
        while (pw_engine_has_work(e)) CHECK_OK(pw_engine_step(e, &t, &k));
        const int32_t *fresh;
        int64_t nf;
        CHECK_OK(pw_engine_request_output(e, id2, &fresh, &nf));
        CHECK(nf == 5 && memcmp(fresh, cont, sizeof cont) == 0);
    }
    CHECK_OK(pw_engine_cancel_request(e, id));
    CHECK_ERR(pw_engine_request_output(e, id, &out, &n), PW_ERR_NOT_FOUND, "no request");
    pw_engine_free(e);
}

/* A request that waits for KV blocks is scheduling, not an error: the
 * step succeeds and leaves the thread's last error message as it was. The
 * waiting request runs once the first one is released. */
static void check_kv_wait_keeps_message(pw_model *m) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.max_num_seqs = 2;
    cfg.max_num_batched_tokens = 8;
    cfg.block_size = 4;
    cfg.max_model_len = 16;
    cfg.kv_cache_positions = 16; /* room for one request of 16 positions */
    cfg.mode = PW_GRAPH_NONE;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (!e) return;
    int32_t prompt[4] = {1, 2, 3, 4};
    int64_t a, b, k;
    const pw_step_token *t;
    CHECK_OK(pw_engine_add_request(e, prompt, 4, 12, NULL, &a));
    CHECK_OK(pw_engine_add_request(e, prompt, 4, 12, NULL, &b));
    pw_error(PW_ERR_IO, "the caller's own message");
    CHECK_OK(pw_engine_step(e, &t, &k));
    CHECK_EQ_INT(k, 1); /* only the first request was admitted */
    CHECK(t[0].request == a);
    CHECK(strstr(pw_last_error(), "the caller's own message") != NULL);
    while (pw_engine_has_work(e)) {
        pw_status s = pw_engine_step(e, &t, &k);
        if (s != PW_OK) { /* b waits behind a's finished blocks */
            CHECK(s == PW_ERR_STATE && strstr(pw_last_error(), "release them first"));
            CHECK_OK(pw_engine_release_request(e, a));
        }
    }
    const int32_t *out;
    int64_t n;
    CHECK_OK(pw_engine_request_output(e, b, &out, &n));
    CHECK(n >= 1);
    pw_engine_free(e);

    cfg.device = (pw_device)9;
    e = NULL;
    CHECK_ERR(pw_engine_new(m, &cfg, &e), PW_ERR_INVALID_ARG, "unknown device");
    CHECK(e == NULL);
}

static void test_tiny_random_model(void) {
    char path[] = "/tmp/pw_test_tiny_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (m) {
        CHECK_EQ_INT(pw_model_get_info(m)->n_layers, cfg.n_layers);
        check_modes_agree(m, "tiny");
        check_warmups_change_nothing(m);
        check_continue_matches_fresh(m);
        check_kv_wait_keeps_message(m);
        pw_model_free(m);
    }
    /* quantized weights (dequantized at load) run the same pipeline */
    cfg.weight_dtype = PW_Q8_0;
    cfg.tied_embeddings = true;
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));
    CHECK_OK(pw_model_load(path, &m));
    if (m) {
        CHECK(pw_model_get_info(m)->tied_embeddings);
        pw_model_free(m);
    }
    unlink(path);
}

int main(void) {
    test_tiny_random_model();
    test_stories260k();
    return pw_test_finish("model_engine");
}
