/* Leading and following (pw_engine_tp_lead / pw_engine_tp_follow) and the
 * watchdog's limit, on one process (no MPI needed; tests/serve/test_tp.py
 * runs the two roles under mpirun):
 *   - in a job of one process, leading is a no-op: the engine answers as
 *     it would without it, scoring included;
 *   - following needs a rank 0 to follow: refused with the reason;
 *   - the watchdog's limit takes 1 to PW_TP_MAX_TIMEOUT_S seconds, and
 *     refuses anything else (0, negative, NaN, too large) unchanged. */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/gguf_writer.h"
#include "test_util.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static char path[] = "/tmp/pw_test_tp_lead_XXXXXX";

/* Greedy tokens of one prompt; lead: call pw_engine_tp_lead first. Also
 * scores the prompt (a scoring request) when `scores` is given. */
static pw_status greedy(pw_model *m, bool lead, int32_t *out, int64_t n, float *scores) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.max_num_seqs = 2;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e = NULL;
    PW_TRY(pw_engine_new(m, &cfg, &e));
    static const int32_t prompt[] = {1, 40, 41, 42, 43};
    int64_t id, sid;
    pw_status s = lead ? pw_engine_tp_lead(e) : PW_OK;
    if (s == PW_OK) s = pw_engine_add_request(e, prompt, 5, n, NULL, &id);
    if (s == PW_OK && scores) s = pw_engine_add_scoring_request(e, prompt, 5, 0, scores, &sid);
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t nt;
        s = pw_engine_step(e, &t, &nt);
    }
    const int32_t *toks;
    int64_t nt = 0;
    if (s == PW_OK) s = pw_engine_request_output(e, id, &toks, &nt);
    if (s == PW_OK) memcpy(out, toks, (size_t)(n < nt ? n : nt) * sizeof *out);
    if (s == PW_OK) s = pw_engine_release_request(e, id);
    pw_engine_free(e);
    return s;
}

static void test_one_process(void) {
    pw_tiny_llama_config c = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load_tp(path, &m));
    if (!m) return;
    CHECK(pw_tp_size() == 1 && pw_tp_rank() == 0);
    int32_t plain[10] = {0}, led[10] = {0};
    int64_t vocab = pw_model_get_info(m)->vocab;
    float *scores = calloc((size_t)(5 * vocab), sizeof *scores);
    CHECK(scores != NULL);
    CHECK_OK(greedy(m, false, plain, 10, NULL));
    CHECK_OK(greedy(m, true, led, 10, scores));
    CHECK(memcmp(plain, led, sizeof plain) == 0);
    free(scores);

    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.max_num_seqs = 1;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e = NULL;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (e) CHECK_ERR(pw_engine_tp_follow(e), PW_ERR_STATE, "only ranks other than 0 follow");
    pw_engine_free(e);
    pw_model_free(m);
}

static void test_timeout(void) {
    CHECK(pw_tp_timeout() == PW_TP_DEFAULT_TIMEOUT_S);
    CHECK_ERR(pw_tp_set_timeout(0), PW_ERR_INVALID_ARG,
              "the tensor-parallel timeout must be 1 to 86400 seconds (got 0)");
    CHECK_ERR(pw_tp_set_timeout(-5), PW_ERR_INVALID_ARG, "(got -5)");
    CHECK_ERR(pw_tp_set_timeout(NAN), PW_ERR_INVALID_ARG, "must be 1 to 86400 seconds");
    CHECK_ERR(pw_tp_set_timeout(PW_TP_MAX_TIMEOUT_S + 1), PW_ERR_INVALID_ARG, "(got 86401)");
    CHECK(pw_tp_timeout() == PW_TP_DEFAULT_TIMEOUT_S);
    CHECK_OK(pw_tp_set_timeout(5));
    CHECK(pw_tp_timeout() == 5);
    CHECK_OK(pw_tp_set_timeout(PW_TP_DEFAULT_TIMEOUT_S));
}

int main(void) {
    int fd = mkstemp(path);
    if (fd < 0) pw_test_skip("cannot create a temporary file");
    close(fd);
    test_timeout();
    test_one_process();
    unlink(path);
    return pw_test_finish("model_tp_lead");
}
