/* The graph wrapper: pass-through rules, capture, replay, nesting, the
 * address check, weak outputs, failed captures, clearing and counters. */
#include "toy.h"

static pw_graph_wrapper *make_wrapper(toy_env *env, toy_piece *p, const char *name,
                                      pw_runtime_mode mode, const pw_wrapper_options *opts) {
    pw_graph_wrapper *w = NULL;
    CHECK_OK(pw_graph_wrapper_new(toy_piece_callable(p, name), mode, env->stream, env->graph_pool,
                                  opts, &w));
    return w;
}

static pw_status call1(pw_graph_wrapper *w, pw_tensor *x, pw_value *out) {
    pw_value arg = pw_value_tensor(x);
    return pw_graph_wrapper_call(w, &arg, 1, out);
}

static void test_new_errors(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 1);
    pw_graph_wrapper *w = (pw_graph_wrapper *)1;
    CHECK_ERR(pw_graph_wrapper_new(toy_piece_callable(&p, "piece"), PW_MODE_NONE, env.stream,
                                   env.graph_pool, NULL, &w),
              PW_ERR_INVALID_ARG, "runtime mode must be PIECEWISE or FULL, got NONE");
    CHECK(w == NULL);
    pw_callable none = {NULL, NULL, "empty"};
    CHECK_ERR(pw_graph_wrapper_new(none, PW_MODE_FULL, env.stream, env.graph_pool, NULL, &w),
              PW_ERR_INVALID_ARG, "'empty': the runnable has no function");
    CHECK_ERR(pw_graph_wrapper_new(toy_piece_callable(&p, "piece"), PW_MODE_FULL, NULL,
                                   env.graph_pool, NULL, &w),
              PW_ERR_INVALID_ARG, "stream and graph pool are required");
    pw_wrapper_options o;
    pw_wrapper_options_init(&o);
    o.debug_check_addresses = (pw_address_check)9;
    CHECK_ERR(pw_graph_wrapper_new(toy_piece_callable(&p, "piece"), PW_MODE_FULL, env.stream,
                                   env.graph_pool, &o, &w),
              PW_ERR_INVALID_ARG, "invalid debug_check_addresses 9");
    CHECK_EQ_INT(pw_graph_wrappers_count(), 0);
    toy_env_free(&env);
}

static void test_pass_through_and_accessors(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 1);
    pw_graph_wrapper *w = make_wrapper(&env, &p, "piece", PW_MODE_PIECEWISE, NULL);
    CHECK_EQ_INT(pw_graph_wrappers_count(), 1);
    CHECK_STREQ(pw_graph_wrapper_name(w), "piece");
    CHECK_EQ_INT(pw_graph_wrapper_mode(w), PW_MODE_PIECEWISE);
    pw_callable inner = pw_graph_wrapper_runnable(w);
    CHECK(inner.fn == toy_piece_fn && inner.user == &p);
    pw_tensor *x = toy_input(&env, 8, 0);
    pw_value out;

    CHECK_ERR(call1(w, x, &out), PW_ERR_STATE, "graph wrapper 'piece': no forward context");
    CHECK_EQ_INT(p.calls, 0);

    /* NONE and a different mode both pass through, even inside the capture phase. */
    pw_capture_phase_begin();
    pw_runtime_mode modes[2] = {PW_MODE_NONE, PW_MODE_FULL};
    for (int i = 0; i < 2; i++) {
        toy_push(modes[i], 8);
        CHECK_OK(call1(w, x, &out));
        CHECK(out.kind == PW_VAL_TENSOR && pw_tensor_owns_storage(out.as.tensor));
        CHECK(toy_check(&env, out.as.tensor, x, 8, 2, 1));
        pw_value_release(out);
        toy_pop();
    }
    CHECK_OK(pw_capture_phase_end());
    CHECK_EQ_INT(p.calls, 2);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), 0);
    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(w, &c);
    CHECK_EQ_INT(c.pass_throughs, 2);
    CHECK_EQ_INT(c.captures_attempted, 0);
    CHECK_EQ_INT(c.replays, 0);

    /* The wrapper as a callable behaves as the wrapper. */
    pw_callable as = pw_graph_wrapper_as_callable(w);
    CHECK_STREQ(as.name, "piece");
    toy_push(PW_MODE_NONE, 8);
    pw_value arg = pw_value_tensor(x);
    CHECK_OK(as.fn(as.user, &arg, 1, &out));
    pw_value_release(out);
    toy_pop();
    pw_graph_wrapper_get_counters(w, &c);
    CHECK_EQ_INT(c.pass_throughs, 3);

    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    CHECK_EQ_INT(pw_graph_wrappers_count(), 0);
    toy_env_free(&env);
}

static void test_capture_outside_phase(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 1);
    pw_graph_wrapper *w = make_wrapper(&env, &p, "piece", PW_MODE_PIECEWISE, NULL);
    pw_tensor *x = toy_input(&env, 8, 0);
    pw_value out;
    toy_push(PW_MODE_PIECEWISE, 8);
    CHECK_ERR(call1(w, x, &out), PW_ERR_CAPTURE, "requested outside the capture phase");
    CHECK(strstr(pw_last_error(), "(num_tokens=8, num_reqs=unset") != NULL);
    CHECK(out.kind == PW_VAL_NONE);
    CHECK_EQ_INT(p.calls, 0);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), 0);
    /* The same descriptor captures fine once the phase is open. */
    pw_capture_phase_begin();
    CHECK_OK(call1(w, x, &out));
    CHECK_OK(pw_capture_phase_end());
    pw_value_release(out);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), 1);
    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(w, &c);
    CHECK_EQ_INT(c.captures_attempted, 2);
    CHECK_EQ_INT(c.graphs_captured, 1);
    toy_pop();
    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    toy_env_free(&env);
}

static void test_capture_then_replay(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 3, -1);
    pw_graph_wrapper *w = make_wrapper(&env, &p, "piece", PW_MODE_PIECEWISE, NULL);
    pw_tensor *x = toy_input(&env, 16, 0);
    pw_value captured, r1, r2;

    toy_push(PW_MODE_PIECEWISE, 8);
    pw_capture_phase_begin();
    CHECK_OK(call1(w, x, &captured));
    CHECK_OK(pw_capture_phase_end());
    CHECK_EQ_INT(p.calls, 1);
    /* Capture records, it does not run: the real output exists but is unwritten. */
    CHECK(captured.kind == PW_VAL_TENSOR && pw_tensor_owns_storage(captured.as.tensor));
    CHECK_EQ_INT(pw_tensor_dim(captured.as.tensor, 0), 8);
    void *y_addr = pw_tensor_data(captured.as.tensor);
    pw_value_release(captured); /* the caller's free reaches the pool */
    CHECK_EQ_INT(pw_pool_graph_refs(env.graph_pool), 1);

    toy_fill(&env, x, 100);
    CHECK_OK(call1(w, x, &r1));
    CHECK_EQ_INT(p.calls, 1); /* replay does not call the runnable */
    CHECK(r1.kind == PW_VAL_TENSOR && !pw_tensor_owns_storage(r1.as.tensor));
    CHECK(pw_tensor_data(r1.as.tensor) == y_addr);
    CHECK(toy_check(&env, r1.as.tensor, x, 8, 3, -1));
    toy_fill(&env, x, -50);
    CHECK_OK(call1(w, x, &r2));
    CHECK(r2.as.tensor == r1.as.tensor); /* the same output tensor every replay */
    CHECK(toy_check(&env, r2.as.tensor, x, 8, 3, -1));
    pw_value_release(r1);
    pw_value_release(r2);
    toy_pop();

    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(w, &c);
    CHECK_EQ_INT(c.graphs_captured, 1);
    CHECK_EQ_INT(c.replays, 2);
    CHECK_EQ_INT(c.pass_throughs, 0);
    pw_graph *g = NULL;
    pw_batch_desc key = pw_batch_desc_make(8, PW_NUM_REQS_UNSET, false, false);
    CHECK_OK(pw_graph_wrapper_graph(w, &key, &g));
    CHECK_EQ_INT(pw_graph_num_launches(g), 1);
    key.num_tokens = 4;
    CHECK_ERR(pw_graph_wrapper_graph(w, &key, &g), PW_ERR_NOT_FOUND, "no graph for descriptor (num_tokens=4");

    /* A second descriptor gets its own graph. */
    toy_push(PW_MODE_PIECEWISE, 4);
    pw_capture_phase_begin();
    CHECK_OK(call1(w, x, &captured));
    CHECK_OK(pw_capture_phase_end());
    pw_value_release(captured);
    CHECK_OK(call1(w, x, &r1));
    CHECK_EQ_INT(pw_tensor_dim(r1.as.tensor, 0), 4);
    CHECK(toy_check(&env, r1.as.tensor, x, 4, 3, -1));
    pw_value_release(r1);
    toy_pop();
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), 2);

    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    CHECK_EQ_INT(pw_pool_graph_refs(env.graph_pool), 0);
    toy_env_free(&env);
}

/* A FULL wrapper around a runnable that calls two PIECEWISE wrappers with
 * an eager step in between: each wrapper acts only in its own mode. The
 * eager step writes into the buffer piece1 produced (the "attention with
 * output" pattern), so piece2 always reads from its captured address. */
typedef struct nested_model {
    toy_env *env;
    pw_graph_wrapper *piece1, *piece2;
    int eager_calls;
    int calls;
} nested_model;

typedef struct negate_args {
    float *y;
    int64_t n;
} negate_args;

static void negate_kernel(const void *p) {
    const negate_args *a = p;
    for (int64_t i = 0; i < a->n; i++) a->y[i] = -a->y[i];
}

static const pw_kernel_args negate_layout = {sizeof(negate_args), 1, {offsetof(negate_args, y)},
                                             NULL};
static const pw_kernel k_negate = {"negate", negate_kernel, NULL, &negate_layout};

static pw_status nested_forward(void *user, const pw_value *args, int nargs, pw_value *out) {
    nested_model *m = user;
    m->calls++;
    pw_value h1;
    PW_TRY(pw_graph_wrapper_call(m->piece1, args, nargs, &h1));
    m->eager_calls++;
    negate_args na = {pw_tensor_data(h1.as.tensor), pw_tensor_numel(h1.as.tensor)};
    pw_status s = pw_launch(m->env->stream, &k_negate, &na, sizeof na);
    if (s == PW_OK) s = pw_graph_wrapper_call(m->piece2, &h1, 1, out);
    pw_value_release(h1); /* last use: freed right away, as the stitching code does */
    return s;
}

static void test_nested_full_around_piecewise(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p1, p2;
    toy_piece_init(&p1, &env, 2, 0);
    toy_piece_init(&p2, &env, 1, 5);
    nested_model m = {&env, NULL, NULL, 0, 0};
    m.piece1 = make_wrapper(&env, &p1, "piece1", PW_MODE_PIECEWISE, NULL);
    pw_wrapper_options last;
    pw_wrapper_options_init(&last);
    last.weak_ref_output = true;
    last.debug_check_addresses = PW_ADDRESS_CHECK_ON;
    m.piece2 = make_wrapper(&env, &p2, "piece2", PW_MODE_PIECEWISE, &last);
    pw_callable fwd = {nested_forward, &m, "model"};
    pw_graph_wrapper *full = NULL;
    CHECK_OK(pw_graph_wrapper_new(fwd, PW_MODE_FULL, env.stream, env.graph_pool, NULL, &full));
    pw_tensor *x = toy_input(&env, 8, 1);
    pw_value out;
    /* expected: ((2x) * -1) + 5 */
    pw_capture_phase_begin();
    toy_push(PW_MODE_PIECEWISE, 8);
    CHECK_OK(call1(full, x, &out));
    pw_value_release(out);
    toy_pop();
    toy_push(PW_MODE_FULL, 8);
    CHECK_OK(call1(full, x, &out));
    pw_value_release(out);
    toy_pop();
    CHECK_OK(pw_capture_phase_end());
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(full), 1);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(m.piece1), 1);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(m.piece2), 1);
    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(full, &c);
    CHECK_EQ_INT(c.pass_throughs, 1);
    CHECK_EQ_INT(c.graphs_captured, 1);
    pw_graph_wrapper_get_counters(m.piece1, &c);
    CHECK_EQ_INT(c.graphs_captured, 1);
    CHECK_EQ_INT(c.pass_throughs, 1); /* inside the FULL capture */

    /* PIECEWISE replay: the outer wrapper passes through, pieces replay,
     * the eager step in between really runs. */
    int eager_before = m.eager_calls, p1_before = p1.calls;
    toy_fill(&env, x, 7);
    toy_push(PW_MODE_PIECEWISE, 8);
    CHECK_OK(call1(full, x, &out));
    toy_pop();
    CHECK_EQ_INT(m.eager_calls, eager_before + 1);
    CHECK_EQ_INT(p1.calls, p1_before);
    CHECK(toy_check(&env, out.as.tensor, x, 8, -2, 5)); /* -(2x) + 5, exactly */
    pw_value_release(out);

    /* FULL replay: nothing inside runs, not even the eager step. */
    toy_fill(&env, x, -3);
    int model_calls = m.calls;
    toy_push(PW_MODE_FULL, 8);
    CHECK_OK(call1(full, x, &out));
    toy_pop();
    CHECK_EQ_INT(m.calls, model_calls);
    CHECK_EQ_INT(m.eager_calls, eager_before + 1);
    CHECK(toy_check(&env, out.as.tensor, x, 8, -2, 5));
    pw_value_release(out);
    pw_graph_wrapper_get_counters(full, &c);
    CHECK_EQ_INT(c.replays, 1);
    pw_graph_wrapper_get_counters(m.piece2, &c);
    CHECK_EQ_INT(c.replays, 1);

    pw_tensor_release(x);
    pw_graph_wrapper_free(full);
    pw_graph_wrapper_free(m.piece1);
    pw_graph_wrapper_free(m.piece2);
    toy_env_free(&env);
}

static void test_debug_address_check(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 0);
    pw_wrapper_options on, off;
    pw_wrapper_options_init(&on);
    pw_wrapper_options_init(&off);
    on.debug_check_addresses = PW_ADDRESS_CHECK_ON;
    off.debug_check_addresses = PW_ADDRESS_CHECK_OFF;
    pw_graph_wrapper *checked = make_wrapper(&env, &p, "checked", PW_MODE_PIECEWISE, &on);
    pw_graph_wrapper *unchecked = make_wrapper(&env, &p, "unchecked", PW_MODE_PIECEWISE, &off);
    pw_log_level saved = pw_log_get_level();
    pw_log_set_level(PW_LOG_DEBUG);
    pw_graph_wrapper *autow = make_wrapper(&env, &p, "auto", PW_MODE_PIECEWISE, NULL);
    pw_log_set_level(saved);
    pw_tensor *x = toy_input(&env, 8, 0), *moved = toy_input(&env, 8, 0);
    pw_value out;
    pw_graph_wrapper *all[3] = {checked, unchecked, autow};

    toy_push(PW_MODE_PIECEWISE, 8);
    pw_capture_phase_begin();
    for (int i = 0; i < 3; i++) {
        CHECK_OK(call1(all[i], x, &out));
        pw_value_release(out);
    }
    CHECK_OK(pw_capture_phase_end());
    /* No false alarm: same buffers, new contents, many replays. */
    for (int step = 0; step < 5; step++) {
        toy_fill(&env, x, (float)step);
        for (int i = 0; i < 3; i++) {
            CHECK_OK(call1(all[i], x, &out));
            pw_value_release(out);
        }
    }
    char expected[64], got[64];
    snprintf(expected, sizeof expected, "expected [%p]", pw_tensor_data(x));
    snprintf(got, sizeof got, "got [%p]", pw_tensor_data(moved));
    for (int i = 0; i < 3; i += 2) {
        CHECK_ERR(call1(all[i], moved, &out), PW_ERR_ADDRESS_MISMATCH, "input addresses differ");
        CHECK(strstr(pw_last_error(), "(num_tokens=8, num_reqs=unset, uniform=false, has_lora=false)"));
        CHECK(strstr(pw_last_error(), expected));
        CHECK(strstr(pw_last_error(), got));
        CHECK(out.kind == PW_VAL_NONE);
    }
    /* A different number of tensor inputs is a mismatch too. */
    pw_value two[2] = {pw_value_tensor(x), pw_value_tensor(x)};
    CHECK_ERR(pw_graph_wrapper_call(checked, two, 2, &out), PW_ERR_ADDRESS_MISMATCH, "got [");
    /* Non-tensor arguments are not addresses. */
    pw_value mixed[2] = {pw_value_tensor(x), pw_value_int(3)};
    CHECK_OK(pw_graph_wrapper_call(checked, mixed, 2, &out));
    pw_value_release(out);
    /* With the check off, a moved input replays silently (vLLM's
     * non-debug behaviour). */
    CHECK_OK(call1(unchecked, moved, &out));
    pw_value_release(out);
    toy_pop();
    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(checked, &c);
    CHECK_EQ_INT(c.replays, 6);

    pw_tensor_release(x);
    pw_tensor_release(moved);
    for (int i = 0; i < 3; i++) pw_graph_wrapper_free(all[i]);
    toy_env_free(&env);
}

static void test_weak_ref_output_memory_reused(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 0);
    pw_wrapper_options weak;
    pw_wrapper_options_init(&weak);
    weak.weak_ref_output = true;
    pw_graph_wrapper *w = make_wrapper(&env, &p, "last", PW_MODE_PIECEWISE, &weak);
    pw_graph_wrapper *other = make_wrapper(&env, &p, "next", PW_MODE_PIECEWISE, NULL);
    pw_tensor *x = toy_input(&env, 8, 0);
    pw_value out, out2;
    pw_pool_stats before, after;
    pw_pool_get_stats(env.graph_pool, &before);

    toy_push(PW_MODE_PIECEWISE, 8);
    pw_capture_phase_begin();
    CHECK_OK(call1(w, x, &out));
    /* The caller holds only an alias; the block is already back in the pool. */
    CHECK(out.kind == PW_VAL_TENSOR && !pw_tensor_owns_storage(out.as.tensor));
    pw_pool_get_stats(env.graph_pool, &after);
    CHECK_EQ_INT(after.allocated, before.allocated);
    CHECK_EQ_INT(after.n_live_blocks, before.n_live_blocks);
    void *addr = pw_tensor_data(out.as.tensor);
    /* The next capture reuses that memory. */
    CHECK_OK(call1(other, x, &out2));
    CHECK(pw_tensor_owns_storage(out2.as.tensor));
    CHECK(pw_tensor_data(out2.as.tensor) == addr);
    CHECK_OK(pw_capture_phase_end());
    pw_value_release(out2);
    pw_value_release(out);

    /* Replays still return the alias at the same address. */
    CHECK_OK(call1(w, x, &out));
    CHECK(pw_tensor_data(out.as.tensor) == addr);
    CHECK(toy_check(&env, out.as.tensor, x, 8, 2, 0));
    pw_value_release(out);
    toy_pop();

    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    pw_graph_wrapper_free(other);
    toy_env_free(&env);
}

/* Tuple outputs keep their structure and alias every tensor. */
static pw_status tuple_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    toy_piece *p = user;
    pw_value a, b;
    PW_TRY(toy_piece_fn(p, args, nargs, &a));
    pw_status s = toy_piece_fn(p, args, nargs, &b);
    if (s != PW_OK) {
        pw_value_release(a);
        return s;
    }
    pw_tuple *t;
    s = pw_tuple_new(3, &t);
    if (s != PW_OK) {
        pw_value_release(a);
        pw_value_release(b);
        return s;
    }
    pw_tuple_set(t, 0, a);
    pw_tuple_set(t, 1, b);
    pw_tuple_set(t, 2, pw_value_int(42));
    *out = pw_value_tuple(t);
    return PW_OK;
}

static void test_tuple_output(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 0);
    pw_callable c = {tuple_fn, &p, "pair"};
    pw_graph_wrapper *w = NULL;
    CHECK_OK(pw_graph_wrapper_new(c, PW_MODE_FULL, env.stream, env.graph_pool, NULL, &w));
    pw_tensor *x = toy_input(&env, 4, 0);
    pw_value out, r1, r2;
    toy_push(PW_MODE_FULL, 4);
    pw_capture_phase_begin();
    CHECK_OK(call1(w, x, &out));
    CHECK_OK(pw_capture_phase_end());
    void *a0 = pw_tensor_data(pw_tuple_get(out.as.tuple, 0).as.tensor);
    void *a1 = pw_tensor_data(pw_tuple_get(out.as.tuple, 1).as.tensor);
    pw_value_release(out);
    CHECK_OK(call1(w, x, &r1));
    CHECK_OK(call1(w, x, &r2));
    CHECK(r1.kind == PW_VAL_TUPLE && r1.as.tuple == r2.as.tuple);
    CHECK_EQ_INT(pw_tuple_size(r1.as.tuple), 3);
    CHECK(pw_tensor_data(pw_tuple_get(r1.as.tuple, 0).as.tensor) == a0);
    CHECK(pw_tensor_data(pw_tuple_get(r1.as.tuple, 1).as.tensor) == a1);
    CHECK(!pw_tensor_owns_storage(pw_tuple_get(r1.as.tuple, 1).as.tensor));
    CHECK_EQ_INT(pw_tuple_get(r1.as.tuple, 2).as.i, 42);
    CHECK(toy_check(&env, pw_tuple_get(r1.as.tuple, 1).as.tensor, x, 4, 2, 0));
    pw_value_release(r1);
    pw_value_release(r2);
    toy_pop();
    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    toy_env_free(&env);
}

static void check_clean_failure(toy_env *env, pw_graph_wrapper *w, const pw_pool_stats *before) {
    pw_pool_stats now;
    pw_pool_get_stats(env->graph_pool, &now);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), 0);
    CHECK(!pw_stream_is_capturing(env->stream));
    CHECK(pw_capturing_stream() == NULL);
    CHECK_EQ_INT(pw_pool_graph_refs(env->graph_pool), 0);
    CHECK_EQ_INT(now.allocated, before->allocated);
    CHECK_EQ_INT(now.n_live_blocks, before->n_live_blocks);
}

static void test_failed_captures(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 0);
    pw_wrapper_options o;
    pw_wrapper_options_init(&o);
    o.gc_disable = true;
    pw_graph_wrapper *w = make_wrapper(&env, &p, "flaky", PW_MODE_PIECEWISE, &o);
    pw_tensor *x = toy_input(&env, 8, 0);
    pw_value out;
    pw_pool_stats before;
    pw_pool_get_stats(env.graph_pool, &before);
    toy_push(PW_MODE_PIECEWISE, 8);
    pw_capture_phase_begin();

    p.fail_with = PW_ERR_INVALID_ARG;
    CHECK_ERR(call1(w, x, &out), PW_ERR_INVALID_ARG, "planted failure");
    CHECK(strstr(pw_last_error(), "graph wrapper 'flaky' (PIECEWISE), capturing descriptor (num_tokens=8"));
    CHECK(out.kind == PW_VAL_NONE);
    check_clean_failure(&env, w, &before);

    p.fail_with = PW_OK;
    p.sync_during_call = true;
    CHECK_ERR(call1(w, x, &out), PW_ERR_CAPTURE, "pw_stream_synchronize called during a capture");
    check_clean_failure(&env, w, &before);

    p.sync_during_call = false;
    p.alloc_from = env.input_pool;
    CHECK_ERR(call1(w, x, &out), PW_ERR_CAPTURE, "allocation from pool 'inputs'");
    check_clean_failure(&env, w, &before);

    /* A nested capture (a capturing wrapper inside a capturing wrapper) fails cleanly. */
    p.alloc_from = NULL;
    toy_piece q;
    toy_piece_init(&q, &env, 1, 0);
    pw_graph_wrapper *inner = make_wrapper(&env, &q, "inner", PW_MODE_PIECEWISE, NULL);
    pw_callable outer_c = pw_graph_wrapper_as_callable(inner);
    pw_graph_wrapper *outer = NULL;
    CHECK_OK(pw_graph_wrapper_new(outer_c, PW_MODE_PIECEWISE, env.stream, env.graph_pool, NULL, &outer));
    CHECK_ERR(call1(outer, x, &out), PW_ERR_CAPTURE, "nested captures are not allowed");
    check_clean_failure(&env, outer, &before);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(inner), 0);
    pw_graph_wrapper_free(outer);
    pw_graph_wrapper_free(inner);

    /* After all that, the descriptor captures and replays normally. */
    CHECK_OK(call1(w, x, &out));
    pw_value_release(out);
    CHECK_OK(pw_capture_phase_end());
    CHECK_OK(call1(w, x, &out));
    CHECK(toy_check(&env, out.as.tensor, x, 8, 2, 0));
    pw_value_release(out);
    toy_pop();
    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(w, &c);
    CHECK_EQ_INT(c.captures_attempted, 4);
    CHECK_EQ_INT(c.graphs_captured, 1);

    /* gc_disable held trims only during the capture: with the graph gone,
     * a trim releases the pool's segments again. */
    CHECK_OK(pw_graph_wrapper_clear(w));
    size_t released = 0;
    CHECK_OK(pw_pool_trim(env.graph_pool, false, &released));
    CHECK(released > 0);

    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    toy_env_free(&env);
}

/* A runnable that tries to clear graphs in the middle of its own capture. */
typedef struct clearing_piece {
    toy_piece piece;
    pw_graph_wrapper *self;
    pw_status clear_one, clear_all;
    char clear_one_msg[512];
} clearing_piece;

static pw_status clearing_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    clearing_piece *c = user;
    c->clear_one = pw_graph_wrapper_clear(c->self);
    snprintf(c->clear_one_msg, sizeof c->clear_one_msg, "%s", pw_last_error());
    c->clear_all = pw_graph_wrappers_clear_all();
    return toy_piece_fn(&c->piece, args, nargs, out);
}

static void test_clear(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 0);
    pw_graph_wrapper *a = make_wrapper(&env, &p, "a", PW_MODE_PIECEWISE, NULL);
    pw_graph_wrapper *b = make_wrapper(&env, &p, "b", PW_MODE_PIECEWISE, NULL);
    pw_tensor *x = toy_input(&env, 8, 0);
    pw_value out;
    toy_push(PW_MODE_PIECEWISE, 8);
    pw_capture_phase_begin();
    CHECK_OK(call1(a, x, &out));
    pw_value_release(out);
    CHECK_OK(call1(b, x, &out));
    pw_value_release(out);
    CHECK_EQ_INT(pw_pool_graph_refs(env.graph_pool), 2);
    CHECK_OK(pw_graph_wrapper_clear(a));
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(a), 0);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(b), 1);
    CHECK_OK(pw_graph_wrappers_clear_all());
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(b), 0);
    CHECK_EQ_INT(pw_pool_graph_refs(env.graph_pool), 0);
    /* Cleared descriptors capture again. */
    int calls = p.calls;
    CHECK_OK(call1(a, x, &out));
    pw_value_release(out);
    CHECK_EQ_INT(p.calls, calls + 1);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(a), 1);

    clearing_piece cp;
    toy_piece_init(&cp.piece, &env, 1, 1);
    pw_callable cc = {clearing_fn, &cp, "clearing"};
    CHECK_OK(pw_graph_wrapper_new(cc, PW_MODE_PIECEWISE, env.stream, env.graph_pool, NULL, &cp.self));
    CHECK_OK(call1(cp.self, x, &out));
    pw_value_release(out);
    CHECK_EQ_INT(cp.clear_one, PW_ERR_STATE);
    CHECK(strstr(cp.clear_one_msg, "cannot clear graphs during its own capture") != NULL);
    CHECK_EQ_INT(cp.clear_all, PW_ERR_STATE);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(cp.self), 1);
    /* clear_all still cleared the others */
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(a), 0);
    CHECK_OK(pw_graph_wrappers_clear_all()); /* nothing is capturing now */
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(cp.self), 0);
    CHECK_OK(pw_capture_phase_end());
    toy_pop();

    pw_tensor_release(x);
    pw_graph_wrapper_free(cp.self);
    pw_graph_wrapper_free(a);
    pw_graph_wrapper_free(b);
    toy_env_free(&env);
}

static void test_many_descriptors(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 1, 0.5f);
    pw_graph_wrapper *w = make_wrapper(&env, &p, "wide", PW_MODE_PIECEWISE, NULL);
    enum { N = 300 };
    pw_tensor *x = toy_input(&env, N, 0);
    pw_value out;
    pw_capture_phase_begin();
    for (int t = N; t >= 1; t--) {
        toy_push(PW_MODE_PIECEWISE, t);
        CHECK_OK(call1(w, x, &out));
        pw_value_release(out);
        toy_pop();
    }
    CHECK_OK(pw_capture_phase_end());
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), N);
    int calls = p.calls;
    bool ok = true;
    for (int t = 1; t <= N; t++) {
        toy_push(PW_MODE_PIECEWISE, t);
        pw_status s = call1(w, x, &out);
        ok &= s == PW_OK && pw_tensor_dim(out.as.tensor, 0) == t && toy_check(&env, out.as.tensor, x, t, 1, 0.5f);
        pw_value_release(out);
        toy_pop();
    }
    CHECK(ok);
    CHECK_EQ_INT(p.calls, calls);
    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(w, &c);
    CHECK_EQ_INT(c.replays, N);
    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    toy_env_free(&env);
}

static void test_global_counters(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 1, 0);
    pw_counters_reset();
    pw_wrapper_counters g;
    pw_counters_get(&g);
    CHECK_EQ_INT(g.graphs_captured + g.replays + g.pass_throughs + g.captures_attempted, 0);
    pw_graph_wrapper *a = make_wrapper(&env, &p, "a", PW_MODE_PIECEWISE, NULL);
    pw_graph_wrapper *b = make_wrapper(&env, &p, "b", PW_MODE_FULL, NULL);
    pw_tensor *x = toy_input(&env, 4, 0);
    pw_value out;
    toy_push(PW_MODE_PIECEWISE, 4);
    pw_capture_phase_begin();
    CHECK_OK(call1(a, x, &out)); /* capture */
    pw_value_release(out);
    CHECK_OK(pw_capture_phase_end());
    CHECK_OK(call1(a, x, &out)); /* replay */
    pw_value_release(out);
    CHECK_OK(call1(b, x, &out)); /* pass through */
    pw_value_release(out);
    toy_pop();
    pw_graph_wrapper_free(a); /* freed wrappers still count */
    pw_counters_get(&g);
    CHECK_EQ_INT(g.graphs_captured, 1);
    CHECK_EQ_INT(g.captures_attempted, 1);
    CHECK_EQ_INT(g.replays, 1);
    CHECK_EQ_INT(g.pass_throughs, 1);
    pw_counters_reset();
    pw_counters_get(&g);
    CHECK_EQ_INT(g.replays, 0);
    pw_tensor_release(x);
    pw_graph_wrapper_free(b);
    toy_env_free(&env);
}

/* Every host allocation on the capture path (entry table, addresses,
 * weak aliases, verification snapshots, the recording) can fail; each
 * failure leaves no graph, no open capture, no live block and no leak. */
static void test_out_of_memory_paths(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 0);
    pw_tensor *x = toy_input(&env, 8, 0);
    void *warm;
    CHECK_OK(pw_pool_alloc(env.graph_pool, 64, &warm)); /* pre-size the pool */
    CHECK_OK(pw_pool_release(env.graph_pool, warm));
    pw_wrapper_options o;
    pw_wrapper_options_init(&o);
    o.verify_capture = true;
    int failures = 0;
    bool succeeded = false;
    for (int n = 1; n < 200 && !succeeded; n++) {
        pw_graph_wrapper *w = NULL;
        CHECK_OK(pw_graph_wrapper_new(toy_piece_callable(&p, "oom"), PW_MODE_FULL, env.stream,
                                      env.graph_pool, &o, &w));
        pw_value out = pw_value_none();
        toy_push(PW_MODE_FULL, 8);
        pw_capture_phase_begin();
        pw_host_fail_nth(n);
        pw_status s = call1(w, x, &out);
        pw_host_fail_nth(0);
        CHECK_OK(pw_capture_phase_end());
        toy_pop();
        if (s == PW_OK) {
            succeeded = true;
            pw_value_release(out);
        } else {
            failures++;
            CHECK_EQ_INT(s, PW_ERR_OOM);
            pw_pool_stats before = {0};
            check_clean_failure(&env, w, &before);
        }
        pw_graph_wrapper_free(w);
    }
    CHECK(succeeded);
    CHECK(failures >= 5);

    /* Creating wrappers and dispatchers under OOM fails cleanly too. */
    for (int n = 1; n < 20; n++) {
        pw_graph_wrapper *w = NULL;
        pw_dispatcher *d = NULL;
        pw_dispatcher_config cfg;
        pw_dispatcher_config_init(&cfg);
        pw_host_fail_nth(n);
        pw_status s1 = pw_graph_wrapper_new(toy_piece_callable(&p, "oom"), PW_MODE_FULL, env.stream,
                                            env.graph_pool, NULL, &w);
        pw_host_fail_nth(n);
        pw_status s2 = pw_dispatcher_new(&cfg, &d);
        pw_host_fail_nth(0);
        CHECK(s1 == PW_OK || (s1 == PW_ERR_OOM && w == NULL));
        CHECK(s2 == PW_OK || (s2 == PW_ERR_OOM && d == NULL));
        pw_graph_wrapper_free(w);
        pw_dispatcher_free(d);
    }
    CHECK_EQ_INT(pw_graph_wrappers_count(), 0);
    pw_tensor_release(x);
    toy_env_free(&env);
}

/* The explicit call: mode and descriptor as arguments, no forward context
 * needed, and a pushed context is ignored (the arguments decide). */
static void test_call_as(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 1);
    pw_graph_wrapper *w = make_wrapper(&env, &p, "piece", PW_MODE_PIECEWISE, NULL);
    pw_tensor *x = toy_input(&env, 16, 0);
    pw_value in = pw_value_tensor(x), out;
    pw_batch_desc d16 = pw_batch_desc_make(16, PW_NUM_REQS_UNSET, false, false);
    CHECK(!pw_forward_context_is_set());

    /* another mode passes through, without a context */
    CHECK_OK(pw_graph_wrapper_call_as(w, PW_MODE_NONE, &d16, &in, 1, &out));
    CHECK_EQ_INT(p.calls, 1);
    CHECK(toy_check(&env, out.as.tensor, x, 16, 2, 1));
    pw_value_release(out);
    /* its own mode captures (inside the capture phase), then replays */
    pw_capture_phase_begin();
    CHECK_OK(pw_graph_wrapper_call_as(w, PW_MODE_PIECEWISE, &d16, &in, 1, &out));
    CHECK_OK(pw_capture_phase_end());
    pw_value_release(out);
    CHECK(pw_graph_wrapper_has_graph(w, &d16));
    toy_fill(&env, x, 7);
    /* a context saying NONE does not override the arguments */
    toy_push(PW_MODE_NONE, 16);
    CHECK_OK(pw_graph_wrapper_call_as(w, PW_MODE_PIECEWISE, &d16, &in, 1, &out));
    toy_pop();
    CHECK_EQ_INT(p.calls, 2); /* replayed: the runnable did not run */
    CHECK(toy_check(&env, out.as.tensor, x, 16, 2, 1));
    pw_value_release(out);
    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(w, &c);
    CHECK_EQ_INT(c.graphs_captured, 1);
    CHECK_EQ_INT(c.replays, 1);
    CHECK_EQ_INT(c.pass_throughs, 1);
    /* bad arguments are errors, not crashes */
    CHECK_ERR(pw_graph_wrapper_call_as(w, (pw_runtime_mode)7, &d16, &in, 1, &out),
              PW_ERR_INVALID_ARG, "valid runtime mode");
    CHECK(out.kind == PW_VAL_NONE);
    CHECK_ERR(pw_graph_wrapper_call_as(w, PW_MODE_PIECEWISE, NULL, &in, 1, &out),
              PW_ERR_INVALID_ARG, "descriptor");
    /* the context call still names both ways when no context is set */
    CHECK_ERR(pw_graph_wrapper_call(w, &in, 1, &out), PW_ERR_STATE, "pw_graph_wrapper_call_as");

    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    toy_env_free(&env);
}

int main(void) {
    test_new_errors();
    test_pass_through_and_accessors();
    test_capture_outside_phase();
    test_capture_then_replay();
    test_call_as();
    test_nested_full_around_piecewise();
    test_debug_address_check();
    test_weak_ref_output_memory_reused();
    test_tuple_output();
    test_failed_captures();
    test_clear();
    test_many_descriptors();
    test_global_counters();
    test_out_of_memory_paths();
    return pw_test_finish("runtime_wrapper");
}
