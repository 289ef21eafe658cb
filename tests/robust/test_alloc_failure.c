/* Injected allocation failures: for N = 1, 2, ... the N-th host allocation
 * (pw_host_fail_nth), and separately the N-th device allocation of the
 * memory pools (pw_pool_fail_nth_device_alloc), fails while a tiny model is
 * loaded, an engine is built (graphs captured), a request is added and one
 * step runs. Every N must end in an error with a message (never a crash),
 * until N is past the last allocation and the run succeeds. Leaks on these
 * paths are caught by LeakSanitizer in the sanitized builds. Afterwards a
 * normal run still works and gives the same tokens as before. */
#include "piecewise_llm.h"
#include "robust_util.h"

/* Far above the allocations one run makes; reaching it means the hook is
 * not counting. */
#define MAX_INJECTIONS 100000

typedef enum { HOST, DEVICE } alloc_kind;

static void arm(alloc_kind kind, int64_t n) {
    if (kind == HOST) pw_host_fail_nth(n);
    else pw_pool_fail_nth_device_alloc(n);
}

/* Load + engine + add + one step; everything freed whatever happens. */
static pw_status one_run(const char *path, int32_t *first_token) {
    pw_model *m = NULL;
    pw_engine *e = NULL;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    pw_status s = pw_model_load(path, &m);
    if (s == PW_OK) s = pw_model_tokenize(m, "Once upon a time", true, &ids, &n_ids);
    pw_engine_config cfg;
    robust_engine_config(&cfg, PW_GRAPH_FULL_AND_PIECEWISE);
    if (s == PW_OK) s = pw_engine_new(m, &cfg, &e);
    if (s == PW_OK) s = pw_engine_add_request(e, ids, n_ids, 4, NULL, NULL);
    const pw_step_token *toks = NULL;
    int64_t n = 0;
    if (s == PW_OK) s = pw_engine_step(e, &toks, &n);
    if (s == PW_OK && first_token) *first_token = n > 0 ? toks[0].token : -1;
    pw_engine_free(e);
    free(ids);
    pw_model_free(m);
    return s;
}

static void sweep(const char *path, alloc_kind kind, int32_t expect_token) {
    const char *name = kind == HOST ? "host" : "device";
    int64_t n = 1;
    int failures = 0, bad = 0;
    for (; n < MAX_INJECTIONS; n++) {
        pw_clear_error();
        arm(kind, n);
        int32_t tok = -1;
        pw_status s = one_run(path, &tok);
        arm(kind, 0);
        if (s == PW_OK) {
            CHECK_EQ_INT(tok, expect_token);
            break;
        }
        failures++;
        /* an error with a message, and the failure is the injected one or
         * one it caused (not, say, a parse error from corrupted state) */
        if (pw_last_error()[0] == '\0' || s == PW_ERR_PARSE || s == PW_ERR_FORMAT) {
            if (bad++ < 5) printf("%s allocation %lld: %s with message \"%s\"\n", name, (long long)n,
                                  pw_status_name(s), pw_last_error());
        }
    }
    printf("%s: allocations 1..%lld failed in turn: %d errors, %d without a proper message\n", name,
           (long long)n - 1, failures, bad);
    CHECK(n < MAX_INJECTIONS);
    CHECK(failures > 0);
    CHECK_EQ_INT(bad, 0);
}

int main(void) {
    pw_log_set_level(PW_LOG_ERROR);
    /* Always the tiny writer model: small, so the sweep (one full run per
     * allocation) stays quick. */
    char path[256];
    snprintf(path, sizeof path, "/tmp/pw_alloc_failure_%d.gguf", (int)getpid());
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.dim = 32;
    cfg.n_layers = 1;
    cfg.n_heads = 2;
    cfg.n_kv_heads = 1;
    cfg.ffn_dim = 32;
    cfg.vocab_size = PW_TINY_LLAMA_MIN_VOCAB;
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));

    int32_t expect = -1;
    CHECK_OK(one_run(path, &expect));
    CHECK(expect >= 0);
    sweep(path, HOST, expect);
    sweep(path, DEVICE, expect);
    /* still usable afterwards */
    int32_t again = -1;
    CHECK_OK(one_run(path, &again));
    CHECK_EQ_INT(again, expect);
    unlink(path);
    return pw_test_finish("robust_alloc_failure");
}
