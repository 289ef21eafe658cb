/* Graph-memory planning at the runtime level (docs/runtime.md, "Memory
 * planning"):
 *  - a shadow pool makes the same decisions as a real one over a long mixed
 *    sequence of allocations and releases (reservation, segments, offsets);
 *  - its addresses are address space only: touching one faults;
 *  - shadow mode is refused on a pool that holds memory;
 *  - pw_capture_plan predicts what pw_capture_all then reserves, to the
 *    byte, for a two-piece model with an eager op between the pieces and a
 *    FULL wrapper around it, and computes nothing while doing so;
 *  - its errors leave the pool empty and real again. */
#include "toy.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- shadow pools ---------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_shadow_matches_real(void) {
    pw_pool *real = NULL, *shadow = NULL;
    CHECK_OK(pw_pool_new(pw_test_device(), "real", &real));
    CHECK_OK(pw_pool_new(pw_test_device(), "shadow", &shadow));
    CHECK_OK(pw_pool_set_shadow(shadow, true));
    CHECK(pw_pool_is_shadow(shadow) && !pw_pool_is_shadow(real));
    enum { LIVE = 64, OPS = 4000 };
    void *rp[LIVE] = {0}, *sp[LIVE] = {0};
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    bool same = true;
    for (int op = 0; op < OPS && same; op++) {
        int slot = (int)(rng_next(&seed) % LIVE);
        if (rp[slot]) {
            CHECK_OK(pw_pool_release(real, rp[slot]));
            CHECK_OK(pw_pool_release(shadow, sp[slot]));
            rp[slot] = sp[slot] = NULL;
        } else {
            /* mostly small, sometimes larger than a segment */
            uint64_t r = rng_next(&seed);
            size_t bytes = (r % 16 == 0) ? (size_t)(r % (5u << 20)) : (size_t)(r % 200000);
            CHECK_OK(pw_pool_alloc(real, bytes, &rp[slot]));
            CHECK_OK(pw_pool_alloc(shadow, bytes, &sp[slot]));
        }
        pw_pool_stats a, b;
        pw_pool_get_stats(real, &a);
        pw_pool_get_stats(shadow, &b);
        same = a.reserved == b.reserved && a.n_segments == b.n_segments &&
               a.allocated == b.allocated && a.n_live_blocks == b.n_live_blocks;
    }
    CHECK(same);
    for (int i = 0; i < LIVE; i++) {
        CHECK_OK(pw_pool_release(real, rp[i]));
        CHECK_OK(pw_pool_release(shadow, sp[i]));
    }
    size_t released = 0;
    CHECK_OK(pw_pool_trim(shadow, false, &released));
    pw_pool_stats st;
    pw_pool_get_stats(shadow, &st);
    CHECK_EQ_INT(st.reserved, 0);
    CHECK_OK(pw_pool_set_shadow(shadow, false)); /* empty again: may switch back */
    pw_pool_free(real);
    pw_pool_free(shadow);
}

static void test_shadow_faults(void) {
    pw_pool *p = NULL;
    CHECK_OK(pw_pool_new(pw_test_device(), "shadow", &p));
    CHECK_OK(pw_pool_set_shadow(p, true));
    void *ptr = NULL;
    CHECK_OK(pw_pool_alloc(p, 4096, &ptr));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        *(volatile char *)ptr = 1; /* must fault */
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    /* killed by the fault (or, under a sanitizer, reported and exited non-zero) */
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK_OK(pw_pool_release(p, ptr));
    pw_pool_free(p);
}

static void test_shadow_refused(void) {
    pw_pool *p = NULL;
    CHECK_OK(pw_pool_new(pw_test_device(), "busy", &p));
    void *ptr = NULL;
    CHECK_OK(pw_pool_alloc(p, 100, &ptr));
    CHECK_ERR(pw_pool_set_shadow(p, true), PW_ERR_STATE,
              "pool 'busy': shadow mode can only be switched on an empty pool (it holds 2097152 "
              "bytes in 1 segment(s)");
    CHECK(!pw_pool_is_shadow(p));
    CHECK_ERR(pw_pool_set_shadow(NULL, true), PW_ERR_INVALID_ARG, "pool is NULL");
    CHECK_OK(pw_pool_release(p, ptr));
    pw_pool_free(p);
}

/* ---- the dry run ----------------------------------------------------------------- */

/* Two pieces with an eager op between them, under a FULL wrapper. Each
 * piece allocates a scratch buffer proportional to the token count (freed
 * inside the piece) and its output from the capture pool. */
typedef struct toy_model {
    toy_env env;
    pw_pool *act_pool;          /* the eager op's outputs */
    pw_graph_wrapper *piece[2], *full;
    pw_tensor *input;           /* persistent, max rows */
    int64_t eager_launches_run; /* bumped by the eager kernel itself */
    pw_status fail_with;        /* the forward fails when set */
} toy_model;

static toy_model *g_model;

static void count_kernel(const void *p) {
    (void)p;
    g_model->eager_launches_run++;
}
static const pw_kernel k_count = {"count", count_kernel, NULL, NULL};

static pw_status piece_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    toy_model *m = g_model;
    (void)nargs;
    intptr_t which = (intptr_t)user;
    pw_tensor *x = args[0].as.tensor;
    int64_t rows = toy_rows(x);
    pw_pool *pool = pw_capture_pool() ? pw_capture_pool() : m->env.graph_pool;
    void *scratch = NULL;
    PW_TRY(pw_pool_alloc(pool, (size_t)rows * (which ? 300000 : 170000), &scratch));
    int64_t shape[2] = {rows, TOY_WIDTH};
    pw_tensor *y = NULL;
    pw_status s = pw_tensor_new(pool, PW_F32, 2, shape, &y);
    if (s == PW_OK) {
        axpb_args a = {pw_tensor_data(x), pw_tensor_data(y), rows * TOY_WIDTH, 2.0f, 1.0f};
        s = pw_launch(m->env.stream, &k_axpb, &a, sizeof a);
    }
    pw_pool_release(pool, scratch);
    if (s != PW_OK) {
        pw_tensor_release(y);
        return s;
    }
    *out = pw_value_tensor(y);
    return PW_OK;
}

/* piece 0, then an eager op (reads piece 0's output: in a dry run that is a
 * shadow address, so it must not run), then piece 1. */
static pw_status model_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    toy_model *m = user;
    pw_value a;
    PW_TRY(pw_graph_wrapper_call(m->piece[0], args, nargs, &a));
    pw_tensor *x = a.as.tensor;
    int64_t shape[2] = {pw_tensor_dim(x, 0), TOY_WIDTH};
    pw_tensor *mid = NULL;
    pw_pool *pool = pw_capture_pool() ? pw_capture_pool() : m->act_pool;
    pw_status s = pw_tensor_new(pool, PW_F32, 2, shape, &mid);
    if (s == PW_OK) {
        axpb_args aa = {pw_tensor_data(x), pw_tensor_data(mid), shape[0] * TOY_WIDTH, 1.0f, 0.5f};
        s = pw_launch(m->env.stream, &k_axpb, &aa, sizeof aa);
    }
    if (s == PW_OK && !pw_capture_pool()) s = pw_launch(m->env.stream, &k_count, NULL, 0);
    pw_value_release(a);
    if (s != PW_OK) {
        pw_tensor_release(mid);
        return s;
    }
    pw_value arg = pw_value_tensor(mid);
    s = pw_graph_wrapper_call(m->piece[1], &arg, 1, out);
    pw_tensor_release(mid);
    return s;
}

static pw_status toy_forward(void *user, pw_runtime_mode mode, const pw_batch_desc *desc) {
    toy_model *m = user;
    (void)mode;
    if (m->fail_with != PW_OK) return pw_error(m->fail_with, "toy forward: planted failure");
    pw_tensor *x = NULL;
    PW_TRY(pw_tensor_slice0(m->input, 0, desc->num_tokens, &x));
    pw_value arg = pw_value_tensor(x), out;
    pw_status s = pw_graph_wrapper_call(m->full, &arg, 1, &out);
    if (s == PW_OK) pw_value_release(out);
    pw_tensor_release(x);
    return s;
}

static void model_init(toy_model *m) {
    memset(m, 0, sizeof *m);
    g_model = m;
    toy_env_init(&m->env);
    CHECK_OK(pw_pool_new(pw_test_device(), "acts", &m->act_pool));
    for (intptr_t i = 0; i < 2; i++) {
        pw_callable c = {piece_fn, (void *)i, i ? "piece1" : "piece0"};
        pw_wrapper_options o;
        pw_wrapper_options_init(&o);
        o.gc_disable = true;
        o.weak_ref_output = i == 1;
        CHECK_OK(pw_graph_wrapper_new(c, PW_MODE_PIECEWISE, m->env.stream, m->env.graph_pool, &o,
                                      &m->piece[i]));
    }
    pw_callable f = {model_fn, m, "model"};
    CHECK_OK(pw_graph_wrapper_new(f, PW_MODE_FULL, m->env.stream, m->env.graph_pool, NULL, &m->full));
    m->input = toy_input(&m->env, 64, 1.0f);
}

static void model_free(toy_model *m) {
    CHECK_OK(pw_stream_synchronize(m->env.stream)); /* nothing queued may use what is freed */
    pw_graph_wrapper_free(m->full);
    pw_graph_wrapper_free(m->piece[0]);
    pw_graph_wrapper_free(m->piece[1]);
    pw_tensor_release(m->input);
    pw_pool_free(m->act_pool);
    toy_env_free(&m->env);
}

static void check_plan(pw_graph_mode mode, const int64_t *sizes, int n) {
    toy_model m;
    model_init(&m);
    pw_dispatcher_config dc;
    pw_dispatcher_config_init(&dc);
    dc.mode = mode;
    dc.max_num_seqs = 64;
    dc.capture_sizes = sizes;
    dc.n_capture_sizes = n;
    pw_dispatcher *d = NULL;
    CHECK_OK(pw_dispatcher_new(&dc, &d));
    pw_capture_options o;
    pw_capture_options_init(&o);
    o.graph_pool = m.env.graph_pool;
    o.print_totals = false;
    o.progress = PW_PROGRESS_OFF;
    pw_capture_plan_report plan;
    CHECK_OK(pw_capture_plan(d, toy_forward, &m, &o, &plan));
    CHECK_EQ_INT(m.eager_launches_run, 0); /* nothing ran */
    CHECK(plan.graph_pool_bytes > 0);
    CHECK(plan.graphs > 0);
    CHECK(!pw_pool_is_shadow(m.env.graph_pool));
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(m.piece[0]) + pw_graph_wrapper_num_graphs(m.full), 0);
    pw_pool_stats st;
    pw_pool_get_stats(m.env.graph_pool, &st);
    CHECK_EQ_INT(st.reserved, 0);

    pw_capture_report rep;
    CHECK_OK(pw_capture_all(d, toy_forward, &m, &o, &rep));
    CHECK_EQ_INT(plan.graph_pool_bytes, rep.pool_reserved);
    CHECK_EQ_INT(plan.graphs, rep.graphs_captured);
    pw_pool_get_stats(m.env.graph_pool, &st);
    CHECK_EQ_INT(plan.graph_pool_segments, st.n_segments);
    /* the real capture's PIECEWISE runs do run the op between the pieces
     * (once the stream's queued work has run) */
    CHECK_OK(pw_stream_synchronize(m.env.stream));
    if (pw_graph_mode_uses(mode, PW_MODE_PIECEWISE)) CHECK(m.eager_launches_run > 0);

    /* the pool now holds graphs: planning again is refused, with the reason */
    CHECK_ERR(pw_capture_plan(d, toy_forward, &m, &o, NULL), PW_ERR_STATE,
              "the graph pool must be empty before the real capture");
    pw_dispatcher_free(d);
    model_free(&m);
}

static void test_plan_predicts_capture(void) {
    static const int64_t one[] = {8};
    static const int64_t several[] = {1, 2, 4, 8, 16, 24, 32, 48, 64};
    static const int64_t odd[] = {3, 61, 17, 40};
    static const pw_graph_mode modes[] = {PW_GRAPH_PIECEWISE, PW_GRAPH_FULL,
                                          PW_GRAPH_FULL_AND_PIECEWISE};
    for (size_t i = 0; i < PW_ARRAY_LEN(modes); i++) {
        check_plan(modes[i], one, 1);
        check_plan(modes[i], several, (int)PW_ARRAY_LEN(several));
        check_plan(modes[i], odd, (int)PW_ARRAY_LEN(odd));
    }
}

static void test_plan_errors(void) {
    toy_model m;
    model_init(&m);
    pw_dispatcher_config dc;
    pw_dispatcher_config_init(&dc);
    static const int64_t sizes[] = {4, 8};
    dc.capture_sizes = sizes;
    dc.n_capture_sizes = 2;
    pw_dispatcher *d = NULL;
    CHECK_OK(pw_dispatcher_new(&dc, &d));
    CHECK_ERR(pw_capture_plan(d, toy_forward, &m, NULL, NULL), PW_ERR_INVALID_ARG,
              "options with the graph pool to plan are required");
    pw_capture_options o;
    pw_capture_options_init(&o);
    o.progress = PW_PROGRESS_OFF;
    CHECK_ERR(pw_capture_plan(d, toy_forward, &m, &o, NULL), PW_ERR_INVALID_ARG,
              "options with the graph pool");
    o.graph_pool = m.env.graph_pool;
    CHECK_ERR(pw_capture_plan(NULL, toy_forward, &m, &o, NULL), PW_ERR_INVALID_ARG,
              "dispatcher and forward callback are required");
    /* a failing forward: its message, and the pool empty and real again */
    m.fail_with = PW_ERR_IO;
    CHECK_ERR(pw_capture_plan(d, toy_forward, &m, &o, NULL), PW_ERR_IO,
              "capture_plan (dry run): capture_all: capturing PIECEWISE");
    CHECK(strstr(pw_last_error(), "planted failure") != NULL);
    CHECK(!pw_pool_is_shadow(m.env.graph_pool));
    m.fail_with = PW_OK;
    pw_capture_plan_report plan;
    CHECK_OK(pw_capture_plan(d, toy_forward, &m, &o, &plan)); /* usable afterwards */
    pw_capture_phase_begin();
    CHECK_ERR(pw_capture_plan(d, toy_forward, &m, &o, NULL), PW_ERR_STATE,
              "a capture phase is already open");
    CHECK_OK(pw_capture_phase_end());
    pw_dispatcher_free(d);
    model_free(&m);
}

int main(void) {
    test_shadow_matches_real();
    test_shadow_faults();
    test_shadow_refused();
    test_plan_predicts_capture();
    test_plan_errors();
    return pw_test_finish("runtime_capture_plan");
}
