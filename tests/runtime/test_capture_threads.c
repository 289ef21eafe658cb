/* Two modules captured on two threads at once (run under ThreadSanitizer by
 * scripts/tsan-check.sh, and in every ordinary build). Each module is what
 * an engine holds: its own stream, graph pool, three PIECEWISE wrappers and
 * dispatcher, with a capture list of a different length. The capture
 * driver's report counts exactly the module's own captures, the dry run's
 * too, and each wrapper's counters are exact, however the two threads
 * interleave. */
#include "toy.h"

#include <pthread.h>

#define N_ROUNDS 32
#define N_PIECES 3
#define MAX_TOKENS 64

typedef struct module {
    toy_env env;
    toy_piece pieces[N_PIECES];
    pw_graph_wrapper *w[N_PIECES];
    pw_tensor *input;
    pw_dispatcher *d;
    int n_sizes;
    /* what the thread saw, checked on the main thread (the CHECK macros
     * are not for threads) */
    pw_status status;
    char error[512];
    uint64_t captured[N_ROUNDS];
    uint64_t planned[N_ROUNDS];
    size_t graphs_after[N_ROUNDS];
} module;

static pw_status module_forward(void *user, pw_runtime_mode mode, const pw_batch_desc *desc) {
    (void)mode;
    module *m = user;
    pw_tensor *x = NULL;
    PW_TRY(pw_tensor_slice0(m->input, 0, desc->num_tokens, &x));
    pw_value v = pw_value_tensor(x), next;
    pw_status s = PW_OK;
    for (int i = 0; i < N_PIECES && s == PW_OK; i++) {
        s = pw_graph_wrapper_call(m->w[i], &v, 1, &next);
        pw_value_release(v);
        v = s == PW_OK ? next : pw_value_none();
    }
    pw_value_release(v);
    return s;
}

static void module_init(module *m, int n_sizes) {
    memset(m, 0, sizeof *m);
    toy_env_init(&m->env);
    m->n_sizes = n_sizes;
    m->input = toy_input(&m->env, MAX_TOKENS, 1.0f);
    for (int i = 0; i < N_PIECES; i++) {
        toy_piece_init(&m->pieces[i], &m->env, 2, 1);
        pw_wrapper_options o;
        pw_wrapper_options_init(&o);
        o.weak_ref_output = i == N_PIECES - 1;
        CHECK_OK(pw_graph_wrapper_new(toy_piece_callable(&m->pieces[i], "piece"), PW_MODE_PIECEWISE,
                                      m->env.stream, m->env.graph_pool, &o, &m->w[i]));
    }
    int64_t sizes[MAX_TOKENS];
    for (int i = 0; i < n_sizes; i++) sizes[i] = i + 1;
    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.mode = PW_GRAPH_PIECEWISE;
    cfg.capture_sizes = sizes;
    cfg.n_capture_sizes = n_sizes;
    CHECK_OK(pw_dispatcher_new(&cfg, &m->d));
}

static void module_free(module *m) {
    pw_dispatcher_free(m->d);
    for (int i = 0; i < N_PIECES; i++) pw_graph_wrapper_free(m->w[i]);
    pw_tensor_release(m->input);
    toy_env_free(&m->env);
}

/* Each round: the dry run (on an empty pool), the real capture, then every
 * graph freed so the next round starts empty again. */
static void *module_thread(void *arg) {
    module *m = arg;
    pw_capture_options o;
    pw_capture_options_init(&o);
    o.print_totals = false;
    o.progress = PW_PROGRESS_OFF;
    o.graph_pool = m->env.graph_pool;
    pw_status s = PW_OK;
    for (int r = 0; r < N_ROUNDS && s == PW_OK; r++) {
        pw_capture_plan_report plan;
        s = pw_capture_plan(m->d, module_forward, m, &o, &plan);
        if (s != PW_OK) break;
        m->planned[r] = plan.graphs;
        pw_capture_report rep;
        s = pw_capture_all(m->d, module_forward, m, &o, &rep);
        if (s != PW_OK) break;
        m->captured[r] = rep.graphs_captured;
        m->graphs_after[r] = pw_graph_wrapper_num_graphs(m->w[0]);
        for (int i = 0; i < N_PIECES && s == PW_OK; i++) s = pw_graph_wrapper_clear(m->w[i]);
        /* the warm-ups (on a device that needs them) may still be queued */
        if (s == PW_OK) s = pw_stream_synchronize(m->env.stream);
        if (s == PW_OK) s = pw_pool_trim(m->env.graph_pool, false, NULL);
    }
    m->status = s;
    if (s != PW_OK) snprintf(m->error, sizeof m->error, "%s", pw_last_error());
    return NULL;
}

int main(void) {
    module mods[2];
    module_init(&mods[0], 4);
    module_init(&mods[1], 24);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, module_thread, &mods[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);

    for (int i = 0; i < 2; i++) {
        module *m = &mods[i];
        CHECK_EQ_INT(m->status, PW_OK);
        if (m->status != PW_OK) fprintf(stderr, "module %d: %s\n", i, m->error);
        uint64_t per_round = (uint64_t)N_PIECES * (uint64_t)m->n_sizes;
        for (int r = 0; r < N_ROUNDS; r++) {
            CHECK_EQ_INT(m->planned[r], per_round);
            CHECK_EQ_INT(m->captured[r], per_round);
            CHECK_EQ_INT(m->graphs_after[r], m->n_sizes);
        }
        /* Each wrapper of the module: one dry-run and one real capture per
         * size and round, every one kept, nothing replayed. */
        for (int p = 0; p < N_PIECES; p++) {
            pw_wrapper_counters c;
            pw_graph_wrapper_get_counters(m->w[p], &c);
            CHECK_EQ_INT(c.graphs_captured, 2 * N_ROUNDS * m->n_sizes);
            CHECK_EQ_INT(c.captures_attempted, 2 * N_ROUNDS * m->n_sizes);
            CHECK_EQ_INT(c.replays, 0);
        }
    }

    /* The process-wide totals are the sum of both modules. */
    pw_wrapper_counters total;
    pw_counters_get(&total);
    CHECK_EQ_INT(total.graphs_captured, 2 * N_ROUNDS * N_PIECES * (4 + 24));

    for (int i = 0; i < 2; i++) module_free(&mods[i]);
    return pw_test_finish("runtime_capture_threads");
}
