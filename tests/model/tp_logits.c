/* pw_tp_logits MODEL TP MODE: prints one hash of every logit bit a
 * tensor-parallel run computes, for tests/cli/test_tp.sh to compare across
 * degrees (run under `mpirun -np TP`, or alone for TP 1). Three greedy
 * requests join one by one, so steps mix prefill chunks with decode; after
 * every step each live request's last logits (the vocabulary's floats, bit
 * for bit) go into an FNV-1a hash. Rank 0 prints "logits HASH over N rows";
 * the exit status is 0 only when the run completed on this rank. */
#include "piecewise_llm.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static int fail(const char *what, pw_status s) {
    fprintf(stderr, "pw_tp_logits: %s: %s (%s)\n", what, pw_last_error(), pw_status_name(s));
    return 1;
}

static int run(const char *path, int tp, const char *mode) {
    pw_status s = pw_tp_init(tp);
    if (s != PW_OK) return fail("--tp", s);
    pw_model *m = NULL;
    if ((s = pw_model_load_tp(path, &m)) != PW_OK) return fail("loading", s);
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 16; /* prompts prefill in chunks beside decodes */
    if (pw_graph_mode_parse(mode, &cfg.mode) != PW_OK) {
        pw_model_free(m);
        return fail("mode", PW_ERR_INVALID_ARG);
    }
    pw_engine *e = NULL;
    if ((s = pw_engine_new(m, &cfg, &e)) != PW_OK) {
        pw_model_free(m);
        return fail("engine", s);
    }
    static const char *const prompts[] = {
        "Once upon a time", "The little dog ran to the park and saw a big red ball", "Tom"};
    int64_t ids[3] = {-1, -1, -1};
    int64_t vocab = pw_model_get_info(m)->vocab, rows = 0;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int step = 0; s == PW_OK && step < 64 && (step < 6 || pw_engine_has_work(e)); step++) {
        if (step % 2 == 0 && step / 2 < 3) {
            int32_t *tok = NULL;
            int64_t n = 0;
            s = pw_model_tokenize(m, prompts[step / 2], true, &tok, &n);
            if (s == PW_OK) s = pw_engine_add_request(e, tok, n, 24, NULL, &ids[step / 2]);
            free(tok);
        }
        const pw_step_token *toks;
        int64_t n_new = 0;
        if (s == PW_OK) s = pw_engine_step(e, &toks, &n_new);
        for (int64_t k = 0; s == PW_OK && k < n_new; k++) {
            const float *logits;
            s = pw_engine_last_logits(e, toks[k].request, &logits);
            if (s == PW_OK) h = fnv(h, logits, (size_t)vocab * sizeof *logits), rows++;
        }
    }
    if (s != PW_OK) fail("step", s);
    else if (pw_tp_rank() == 0) printf("logits %016" PRIx64 " over %" PRId64 " rows\n", h, rows);
    pw_engine_free(e);
    pw_model_free(m);
    return s == PW_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: pw_tp_logits MODEL TP none|piecewise|full\n");
        return 2;
    }
    int rc = run(argv[1], atoi(argv[2]), argv[3]);
    pw_tp_finish(rc);
    return rc;
}
