/* The online bitwise canary (engine_verify.c): with verify_every = 1 every
 * step that replays captured graphs is re-run eagerly and compared bit for
 * bit. A healthy engine never differs (and its tokens are unchanged); a
 * fault planted in a replayed graph's output is found, counted and
 * described (mode, descriptor, row). Runs on a tiny random model. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"

#include <stdio.h>
#include <unistd.h>

static pw_status make_engine(pw_model *m, pw_graph_mode mode, pw_engine **e) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = 4;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    return pw_engine_new(m, &cfg, e);
}

/* Runs two prompts (one joining later, so steps mix prefill and decode)
 * to the end; out[i] gets request i's first 8 tokens. */
static pw_status run(pw_engine *e, pw_model *m, int32_t out[2][8], bool plant_at_step_3) {
    int32_t *ids[2] = {NULL, NULL};
    int64_t n[2], rid[2];
    PW_TRY(pw_model_tokenize(m, "hello world", true, &ids[0], &n[0]));
    pw_status s = pw_model_tokenize(m, "a b c d e f", true, &ids[1], &n[1]);
    if (s == PW_OK) s = pw_engine_add_request(e, ids[0], n[0], 8, NULL, &rid[0]);
    for (int step = 0; s == PW_OK && step < 200 && (step < 2 || pw_engine_has_work(e)); step++) {
        if (step == 2) s = pw_engine_add_request(e, ids[1], n[1], 8, NULL, &rid[1]);
        if (step == 3 && plant_at_step_3) pw_engine_verify_plant_fault(e);
        const pw_step_token *toks;
        int64_t nt;
        if (s == PW_OK) s = pw_engine_step(e, &toks, &nt);
    }
    for (int i = 0; i < 2 && s == PW_OK; i++) {
        const int32_t *o;
        int64_t no;
        s = pw_engine_request_output(e, rid[i], &o, &no);
        if (s == PW_OK) memcpy(out[i], o, sizeof(int32_t) * (size_t)(no < 8 ? no : 8));
        if (s == PW_OK) s = pw_engine_release_request(e, rid[i]);
    }
    free(ids[0]);
    free(ids[1]);
    return s;
}

int main(void) {
    char path[] = "/tmp/pw_test_verify_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) pw_test_skip("no temporary file");
    close(fd);
    pw_tiny_llama_config tc = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&tc, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    unlink(path);
    if (!m) return pw_test_finish("model_engine_verify");

    int32_t eager[2][8] = {{0}}, checked[2][8] = {{0}}, faulty[2][8] = {{0}};
    pw_engine *e = NULL;
    pw_engine_verify_stats vs;

    /* reference tokens from an eager engine: nothing to check there */
    CHECK_OK(make_engine(m, PW_GRAPH_NONE, &e));
    CHECK_OK(pw_engine_set_verify_every(e, 1));
    CHECK_OK(run(e, m, eager, false));
    pw_engine_get_verify_stats(e, &vs);
    CHECK_EQ_INT(vs.checks, 0);
    pw_engine_free(e);

    /* a healthy captured engine: every graph step checked, no difference,
     * the same tokens */
    CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, &e));
    CHECK_ERR(pw_engine_set_verify_every(e, -1), PW_ERR_INVALID_ARG, "verify_every");
    CHECK_OK(pw_engine_set_verify_every(e, 1));
    CHECK_OK(run(e, m, checked, false));
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    pw_engine_get_verify_stats(e, &vs);
    CHECK(vs.checks > 0);
    CHECK_EQ_INT(vs.checks, st.steps_by_mode[PW_MODE_PIECEWISE] + st.steps_by_mode[PW_MODE_FULL]);
    CHECK_EQ_INT(vs.mismatches, 0);
    CHECK(memcmp(eager, checked, sizeof eager) == 0);

    /* one step in 3 */
    CHECK_OK(pw_engine_set_verify_every(e, 3));
    pw_engine_verify_stats before = vs;
    pw_engine_reset_stats(e);
    CHECK_OK(run(e, m, checked, false));
    pw_engine_get_stats(e, &st);
    pw_engine_get_verify_stats(e, &vs);
    CHECK_EQ_INT(vs.checks - before.checks,
                 (st.steps_by_mode[PW_MODE_PIECEWISE] + st.steps_by_mode[PW_MODE_FULL]) / 3);

    /* a fault planted in a replayed output is found and described */
    CHECK_OK(pw_engine_set_verify_every(e, 1));
    before = vs;
    CHECK_OK(run(e, m, faulty, true));
    pw_engine_get_verify_stats(e, &vs);
    CHECK_EQ_INT(vs.mismatches - before.mismatches, 1);
    CHECK(strstr(vs.last, "replay of") != NULL);
    CHECK(strstr(vs.last, "differs from eager at row") != NULL);
    CHECK(strstr(vs.last, "PIECEWISE replay") != NULL || strstr(vs.last, "FULL replay") != NULL);
    printf("planted fault reported as: %s\n", vs.last);
    pw_engine_free(e);
    pw_model_free(m);
    return pw_test_finish("model_engine_verify");
}
