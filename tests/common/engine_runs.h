/* Engine test helper: requests that join one by one (request i is added at
 * step 2i), so steps mix prefill chunks and decode tokens; the model tests
 * compare the tokens such a run gives under different engine settings. */
#ifndef PW_TEST_ENGINE_RUNS_H
#define PW_TEST_ENGINE_RUNS_H

#include "piecewise_llm.h"

#include <stdlib.h>
#include <string.h>

/* The configuration of a teacher-forced check: one engine (NONE, no
 * progress output) in which every prefix prompt + tokens[0..s), s < n_steps,
 * is a request of its own, side by side. */
static inline void teacher_forced_config(pw_engine_config *cfg, int64_t n_prompt,
                                         int64_t n_steps) {
    pw_engine_config_init(cfg);
    cfg->mode = PW_GRAPH_NONE;
    cfg->max_num_seqs = n_steps;
    cfg->max_model_len = (n_prompt + n_steps + 16) / 16 * 16;
    cfg->kv_cache_positions = cfg->max_model_len * n_steps;
    cfg->progress = PW_PROGRESS_OFF;
    cfg->print_capture_totals = false;
}

/* Runs prompts[0..n) to completion (at most max_steps steps) and writes
 * each request's first max_out tokens (zero-filled) to out[i * max_out]. */
static inline pw_status run_staggered(pw_engine *e, pw_model *m, const char *const *prompts, int n,
                                      int64_t max_out, int max_steps, int32_t *out) {
    int64_t rid[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    if (n > 8) return PW_ERR_INVALID_ARG;
    pw_status s = PW_OK;
    for (int step = 0; s == PW_OK && step < max_steps && (step < n || pw_engine_has_work(e));
         step++) {
        for (int i = 0; i < n && s == PW_OK; i++) {
            if (step != i * 2) continue;
            int32_t *ids = NULL;
            int64_t len = 0;
            s = pw_model_tokenize(m, prompts[i], true, &ids, &len);
            if (s == PW_OK) s = pw_engine_add_request(e, ids, len, max_out, NULL, &rid[i]);
            free(ids);
        }
        const pw_step_token *toks;
        int64_t nt;
        if (s == PW_OK) s = pw_engine_step(e, &toks, &nt);
    }
    for (int i = 0; i < n && s == PW_OK; i++) {
        const int32_t *o;
        int64_t no;
        s = pw_engine_request_output(e, rid[i], &o, &no);
        memset(out + i * max_out, 0, sizeof(int32_t) * (size_t)max_out);
        if (s == PW_OK)
            memcpy(out + i * max_out, o, sizeof(int32_t) * (size_t)(no < max_out ? no : max_out));
        if (s == PW_OK) s = pw_engine_release_request(e, rid[i]);
    }
    return s;
}

#endif
