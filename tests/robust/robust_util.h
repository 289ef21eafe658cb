/* Shared by the robustness tests: a model file (stories260K when present,
 * else a tiny random model written by the GGUF writer) and greedy
 * generation through an engine. */
#ifndef PW_ROBUST_UTIL_H
#define PW_ROBUST_UTIL_H

#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"

#include <stdio.h>
#include <unistd.h>

#define ROBUST_MAX_TOKENS 64
#define ROBUST_MAX_STEPS 10000

/* Fills path with a model to load; *is_stories says which. */
static inline bool robust_model_path(char *path, size_t cap, bool *is_stories) {
    if (pw_test_shared_path("models/stories260K.gguf", path, cap)) {
        *is_stories = true;
        return true;
    }
    *is_stories = false;
    snprintf(path, cap, "/tmp/pw_robust_tiny_%d.gguf", (int)getpid());
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    return pw_tiny_llama_write_file(&cfg, path) == PW_OK;
}

/* A small engine: few capture sizes keep start-up quick under sanitizers. */
static inline void robust_engine_config(pw_engine_config *cfg, pw_graph_mode mode) {
    static const int64_t capture_sizes[] = {1, 2, 4};
    pw_engine_config_init(cfg);
    cfg->mode = mode;
    cfg->max_num_seqs = 4;
    cfg->max_num_batched_tokens = 16;
    cfg->max_model_len = 128;
    cfg->kv_cache_positions = 512;
    cfg->capture_sizes = capture_sizes;
    cfg->n_capture_sizes = (int)PW_ARRAY_LEN(capture_sizes);
    cfg->progress = PW_PROGRESS_OFF;
    cfg->print_capture_totals = false;
}

/* Greedy generation of n_new tokens after prompt on a new engine. */
static inline pw_status robust_generate(pw_model *m, pw_graph_mode mode, const char *prompt,
                                        int64_t n_new, int32_t *out, int64_t *n_out) {
    *n_out = 0;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    PW_TRY(pw_model_tokenize(m, prompt, true, &ids, &n_ids));
    pw_engine_config cfg;
    robust_engine_config(&cfg, mode);
    pw_engine *e = NULL;
    pw_status s = pw_engine_new(m, &cfg, &e);
    int64_t id = 0;
    if (s == PW_OK) s = pw_engine_add_request(e, ids, n_ids, n_new, NULL, &id);
    int steps = 0;
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *toks;
        int64_t n;
        s = pw_engine_step(e, &toks, &n);
        if (++steps > ROBUST_MAX_STEPS) s = pw_error(PW_ERR_INTERNAL, "test: the engine does not finish");
    }
    if (s == PW_OK) {
        const int32_t *gen;
        s = pw_engine_request_output(e, id, &gen, n_out);
        if (s == PW_OK && *n_out > ROBUST_MAX_TOKENS) s = pw_error(PW_ERR_INTERNAL, "test: too many tokens");
        if (s == PW_OK) memcpy(out, gen, (size_t)*n_out * sizeof *out);
    }
    pw_engine_free(e);
    free(ids);
    return s;
}

#endif
