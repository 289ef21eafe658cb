/* Generation on several threads at once (run under ThreadSanitizer by
 * scripts/tsan-check.sh, and in every ordinary build):
 *  (a) each thread loads its own model and builds its own engine: the
 *      forward context and capture stream are thread-local, so both get
 *      the same tokens as a run on one thread;
 *  (b) threads share one read-only pw_model, each with its own engine:
 *      after loading, the model (weights, tokenizer, hyperparameters) is
 *      only read, and every mutable thing (KV cache, pools, wrappers,
 *      captured graphs, sampler state) belongs to the engine, so this is
 *      supported. Tokenizing and pw_model_token_text (a thread-local
 *      buffer) run concurrently too.
 * With stories260K the tokens must also be its golden continuation; without
 * it a tiny random model from the GGUF writer is used. */
#include "piecewise_llm.h"
#include "robust_util.h"

#include <pthread.h>

#define N_THREADS 2
#define N_NEW 24
#define PROMPT "Once upon a time"

static const char *const golden_prefix = "Once upon a time, there was a little girl named Lily.";

typedef struct worker {
    const char *path;   /* (a): load this */
    pw_model *shared;   /* (b): use this */
    pw_graph_mode mode;
    int32_t tokens[ROBUST_MAX_TOKENS];
    int64_t n;
    pw_status status;
    char error[512];
    char text[1024];
} worker;

static void *run_worker(void *arg) {
    worker *w = arg;
    pw_model *m = w->shared;
    w->status = PW_OK;
    if (!m) w->status = pw_model_load(w->path, &m);
    if (w->status == PW_OK) w->status = robust_generate(m, w->mode, PROMPT, N_NEW, w->tokens, &w->n);
    if (w->status == PW_OK) {
        /* detokenize on this thread: the text buffer is per thread */
        size_t len = strlen(PROMPT);
        memcpy(w->text, PROMPT, len);
        int32_t prev = -1;
        for (int64_t i = 0; i < w->n; i++) {
            const char *piece = pw_model_token_text(m, prev, w->tokens[i]);
            size_t pl = strlen(piece);
            if (len + pl < sizeof w->text) {
                memcpy(w->text + len, piece, pl);
                len += pl;
            }
            prev = w->tokens[i];
        }
        w->text[len] = 0;
    }
    if (w->status != PW_OK) snprintf(w->error, sizeof w->error, "%s", pw_last_error());
    if (!w->shared) pw_model_free(m);
    return NULL;
}

static void run_threads(worker *ws) {
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) CHECK(pthread_create(&th[i], NULL, run_worker, &ws[i]) == 0);
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
}

static void check_workers(const worker *ws, const int32_t *ref, int64_t n_ref, bool is_stories,
                          const char *what) {
    for (int i = 0; i < N_THREADS; i++) {
        if (ws[i].status != PW_OK) printf("%s: thread %d failed: %s\n", what, i, ws[i].error);
        CHECK_OK(ws[i].status);
        CHECK_EQ_INT(ws[i].n, n_ref);
        CHECK(memcmp(ws[i].tokens, ref, (size_t)n_ref * sizeof *ref) == 0);
        if (is_stories) {
            if (strncmp(ws[i].text, golden_prefix, strlen(golden_prefix)) != 0)
                printf("%s: thread %d wrote \"%s\"\n", what, i, ws[i].text);
            CHECK(strncmp(ws[i].text, golden_prefix, strlen(golden_prefix)) == 0);
        }
    }
}

int main(void) {
    pw_log_set_level(PW_LOG_WARN);
    char path[1024];
    bool is_stories;
    if (!robust_model_path(path, sizeof path, &is_stories)) {
        printf("cannot write a tiny model: %s\n", pw_last_error());
        return 1;
    }
    printf("model: %s\n", is_stories ? path : "tiny random model");
    if (!is_stories)
        pw_test_skip_part("stories260K.gguf not found: its golden continuation (the threads are "
                          "checked on a tiny random model)");

    /* the single-thread reference */
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return pw_test_finish("robust_concurrency");
    int32_t ref[ROBUST_MAX_TOKENS];
    int64_t n_ref = 0;
    CHECK_OK(robust_generate(m, PW_GRAPH_NONE, PROMPT, N_NEW, ref, &n_ref));
    CHECK(n_ref > 0);

    /* (a) own model and engine per thread, different graph modes */
    worker own[N_THREADS] = {{.path = path, .mode = PW_GRAPH_PIECEWISE},
                             {.path = path, .mode = PW_GRAPH_FULL_AND_PIECEWISE}};
    run_threads(own);
    check_workers(own, ref, n_ref, is_stories, "own model");

    /* (b) one shared model, an engine per thread */
    worker shared[N_THREADS] = {{.shared = m, .mode = PW_GRAPH_FULL_AND_PIECEWISE},
                                {.shared = m, .mode = PW_GRAPH_PIECEWISE}};
    run_threads(shared);
    check_workers(shared, ref, n_ref, is_stories, "shared model");

    pw_model_free(m);
    if (!is_stories) unlink(path);
    return pw_test_finish("robust_concurrency");
}
