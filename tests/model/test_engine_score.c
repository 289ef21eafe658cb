/* pw_engine_add_scoring_request: the logits it writes for each prompt
 * position are bit for bit the logits an ordinary request ending at that
 * position samples from (the prefix's last logits), whether the prompt
 * runs in one step or in prefill chunks over several, alone or beside
 * another request, and when the prefix cache holds the prompt already (a
 * scored position is always computed); bad arguments are refused. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"

#include <unistd.h>

#define N_PROMPT 40
#define SCORE_FROM 10

static char path[] = "/tmp/pw_test_engine_score_XXXXXX";

static pw_engine *engine(pw_model *m, int64_t batched, int64_t seqs) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = PW_GRAPH_NONE;
    cfg.max_num_seqs = seqs;
    cfg.max_num_batched_tokens = batched;
    cfg.max_model_len = 64;
    cfg.kv_cache_positions = 64 * seqs;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e = NULL;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    return e;
}

static void drain(pw_engine *e) {
    while (pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t n;
        pw_status s = pw_engine_step(e, &t, &n);
        CHECK_OK(s);
        if (s != PW_OK) return;
    }
}

int main(void) {
    int fd = mkstemp(path);
    if (fd < 0) pw_test_skip("cannot create a temporary file");
    close(fd);
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    unlink(path);
    if (!m) return pw_test_finish("model_engine_score");
    const int64_t vocab = pw_model_get_info(m)->vocab;
    int32_t prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = 3 + (i * 37) % 300;

    /* the reference: one ordinary request per prefix, its last logits */
    const size_t rows = N_PROMPT - SCORE_FROM;
    float *want = calloc(rows * (size_t)vocab, sizeof *want);
    pw_engine *e = engine(m, 64, 1);
    for (int64_t p = SCORE_FROM; e && p < N_PROMPT; p++) {
        int64_t id;
        CHECK_OK(pw_engine_add_request(e, prompt, p + 1, 1, NULL, &id));
        drain(e);
        const float *l = NULL;
        CHECK_OK(pw_engine_last_logits(e, id, &l));
        if (l) memcpy(want + (size_t)(p - SCORE_FROM) * (size_t)vocab, l, (size_t)vocab * sizeof *l);
        CHECK_OK(pw_engine_release_request(e, id));
    }
    pw_engine_free(e);

    /* one step, chunks of 8 and 7 tokens, and beside another request */
    const int64_t batched[] = {64, 8, 7};
    for (size_t k = 0; k < PW_ARRAY_LEN(batched); k++) {
        for (int other = 0; other < 2; other++) {
            e = engine(m, batched[k], 2);
            if (!e) continue;
            float *got = calloc(rows * (size_t)vocab, sizeof *got);
            int64_t id, id2 = -1;
            if (other) CHECK_OK(pw_engine_add_request(e, prompt + 5, 12, 6, NULL, &id2));
            CHECK_OK(pw_engine_add_scoring_request(e, prompt, N_PROMPT, SCORE_FROM, got, &id));
            drain(e);
            CHECK(memcmp(got, want, rows * (size_t)vocab * sizeof *got) == 0);
            const int32_t *out;
            int64_t n_out;
            CHECK_OK(pw_engine_request_output(e, id, &out, &n_out));
            CHECK_EQ_INT(n_out, 1); /* it generated its one token and finished */
            /* the same prompt again: the prefix cache holds its blocks, but
             * a scored position is computed, never taken from the cache */
            CHECK_OK(pw_engine_release_request(e, id));
            memset(got, 0, rows * (size_t)vocab * sizeof *got);
            CHECK_OK(pw_engine_add_scoring_request(e, prompt, N_PROMPT, SCORE_FROM, got, &id));
            drain(e);
            CHECK(memcmp(got, want, rows * (size_t)vocab * sizeof *got) == 0);
            free(got);
            pw_engine_free(e);
        }
    }

    e = engine(m, 64, 1);
    if (e) {
        float buf[1];
        int64_t id;
        CHECK_ERR(pw_engine_add_scoring_request(e, prompt, N_PROMPT, N_PROMPT, buf, &id),
                  PW_ERR_INVALID_ARG, "score_from (40) < the prompt's 40 tokens");
        CHECK_ERR(pw_engine_add_scoring_request(e, prompt, N_PROMPT, -1, buf, &id),
                  PW_ERR_INVALID_ARG, "0 <= score_from");
        CHECK_ERR(pw_engine_add_scoring_request(e, prompt, N_PROMPT, 0, NULL, &id),
                  PW_ERR_INVALID_ARG, "logits buffer");
        CHECK_ERR(pw_engine_add_scoring_request(e, prompt, 0, 0, buf, &id), PW_ERR_INVALID_ARG,
                  "score_from");
        pw_engine_free(e);
    }
    free(want);
    pw_model_free(m);
    return pw_test_finish("model_engine_score");
}
