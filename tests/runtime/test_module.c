/* Piecewise modules (include/piecewise/module.h): a graph split at a
 * splitting op, stitched, captured PIECEWISE and FULL at every capture size,
 * and replayed with outputs equal to the eager run's, bit for bit; the
 * pieces and graphs counted exactly; native stitching; the interposer; the
 * memory plan over a module (include/piecewise/memory_plan.h); and every
 * error a caller can make. */
#include "internal.h"
#include "test_device.h"
#include "test_util.h"

#include <stddef.h>

#define WIDTH 4
#define MAX_TOKENS 16

/* y = 2x; gate (splitting) writes relu(y) into a buffer; then + x; gate
 * again; then half of it. Three pieces around two splitting ops. */
static const char *const NET =
    "graph net:\n"
    "    %x : f32[s0, 4] = placeholder\n"
    "    %h = call_function scale(%x, 2.0)\n"
    "    %buf = call_function empty_like(%h)\n"
    "    %g = call_function gate(%h, %buf)\n"
    "    %y = call_function add(%buf, %x)\n"
    "    %buf2 = call_function empty_like(%y)\n"
    "    %g2 = call_function gate(%y, %buf2)\n"
    "    %z = call_function scale(%buf2, 0.5)\n"
    "    return %z\n";

typedef struct net_env {
    pw_stream *stream;
    pw_pool *eager_pool, *graph_pool, *input_pool;
    pw_tensor *x;        /* persistent input, MAX_TOKENS rows */
    float x_host[MAX_TOKENS * WIDTH]; /* what fill_x wrote into x */
    pw_tensor *x_rows;   /* the rows of the current step */
    pw_value arg;
    int gate_calls;
} net_env;

typedef struct elem_args {
    const float *a, *b;
    float *y;
    int64_t n;
    float k;
} elem_args;

static void scale_kernel(const void *p) {
    const elem_args *e = p;
    for (int64_t i = 0; i < e->n; i++) e->y[i] = e->k * e->a[i];
}
static void add_kernel(const void *p) {
    const elem_args *e = p;
    for (int64_t i = 0; i < e->n; i++) e->y[i] = e->a[i] + e->b[i];
}
static void gate_kernel(const void *p) {
    const elem_args *e = p;
    for (int64_t i = 0; i < e->n; i++) e->y[i] = e->a[i] > 0 ? e->a[i] : 0;
}
static const pw_kernel_args elem_layout = {
    sizeof(elem_args), 3, {offsetof(elem_args, a), offsetof(elem_args, b), offsetof(elem_args, y)},
    NULL};
static const pw_kernel k_scale = {"scale", scale_kernel, NULL, &elem_layout};
static const pw_kernel k_add = {"add", add_kernel, NULL, &elem_layout};
static const pw_kernel k_gate = {"gate", gate_kernel, NULL, &elem_layout};

static float expected(float x) {
    float h = 2 * x, g = h > 0 ? h : 0, y = g + x, g2 = y > 0 ? y : 0;
    return 0.5f * g2;
}

static pw_pool *out_pool(net_env *env) {
    return pw_stream_is_capturing(env->stream) ? pw_capture_pool() : env->eager_pool;
}

static pw_status new_like(net_env *env, const pw_tensor *t, pw_tensor **out) {
    int64_t shape[2] = {pw_tensor_dim(t, 0), pw_tensor_dim(t, 1)};
    return pw_tensor_new(out_pool(env), PW_F32, 2, shape, out);
}

/* One callable for every op; user is the kernel (NULL: empty_like). */
typedef struct op_binding {
    net_env *env;
    const pw_kernel *kernel;
} op_binding;

static pw_status run_op(void *user, const pw_value *args, int nargs, pw_value *out) {
    op_binding *b = user;
    if (nargs < 1 || args[0].kind != PW_VAL_TENSOR)
        return pw_error(PW_ERR_INVALID_ARG, "op: a tensor first");
    pw_tensor *a = args[0].as.tensor, *y = NULL;
    elem_args e = {pw_tensor_data(a), NULL, NULL, pw_tensor_numel(a), 0};
    if (b->kernel == &k_gate) { /* writes into its second argument, returns nothing */
        b->env->gate_calls++;
        e.y = pw_tensor_data(args[1].as.tensor);
        *out = pw_value_none();
        return pw_launch(b->env->stream, &k_gate, &e, sizeof e);
    }
    PW_TRY(new_like(b->env, a, &y));
    e.y = pw_tensor_data(y);
    if (b->kernel == &k_scale) e.k = (float)args[1].as.f;
    if (b->kernel == &k_add) e.b = pw_tensor_data(args[1].as.tensor);
    pw_status s = b->kernel ? pw_launch(b->env->stream, b->kernel, &e, sizeof e) : PW_OK;
    if (s != PW_OK) {
        pw_tensor_release(y);
        return s;
    }
    *out = pw_value_tensor(y);
    return PW_OK;
}

static op_binding bindings[4];

static pw_status resolve(void *user, const char *target, pw_callable *out) {
    net_env *env = user;
    static const char *const names[] = {"scale", "add", "gate", "empty_like"};
    static const pw_kernel *const kernels[] = {&k_scale, &k_add, &k_gate, NULL};
    for (int i = 0; i < 4; i++)
        if (strcmp(target, names[i]) == 0) {
            bindings[i] = (op_binding){env, kernels[i]};
            *out = (pw_callable){run_op, &bindings[i], names[i]};
            return PW_OK;
        }
    return pw_error(PW_ERR_NOT_FOUND, "no kernel for op '%s'", target);
}

/* The inputs of a step of n tokens: the first n rows of the persistent x. */
static pw_status set_rows(net_env *env, int64_t n) {
    pw_tensor_release(env->x_rows);
    env->x_rows = NULL;
    PW_TRY(pw_tensor_slice0(env->x, 0, n, &env->x_rows));
    env->arg = pw_value_tensor(env->x_rows);
    return PW_OK;
}

static pw_status inputs(void *user, pw_runtime_mode mode, const pw_batch_desc *desc,
                        const pw_value **args, int *nargs) {
    (void)mode;
    net_env *env = user;
    PW_TRY(set_rows(env, desc->num_tokens));
    *args = &env->arg;
    *nargs = 1;
    return PW_OK;
}

static void env_init(net_env *env) {
    memset(env, 0, sizeof *env);
    CHECK_OK(pw_stream_new(pw_test_device(), &env->stream));
    CHECK_OK(pw_pool_new(pw_test_device(), "eager", &env->eager_pool));
    CHECK_OK(pw_pool_new(pw_test_device(), "graphs", &env->graph_pool));
    CHECK_OK(pw_pool_new(pw_test_device(), "inputs", &env->input_pool));
    int64_t shape[2] = {MAX_TOKENS, WIDTH};
    CHECK_OK(pw_tensor_new(env->input_pool, PW_F32, 2, shape, &env->x));
}

/* True when the first n rows of out are expected(x) for the x of the step. */
static bool out_matches(net_env *env, const pw_tensor *out, int64_t n) {
    float *y = pw_test_read_tensor(env->stream, out);
    bool ok = y != NULL;
    for (int64_t i = 0; ok && i < n * WIDTH; i++) ok = y[i] == expected(env->x_host[i]);
    free(y);
    return ok;
}

static void env_free(net_env *env) {
    CHECK_OK(pw_stream_synchronize(env->stream)); /* nothing queued may use what is freed */
    pw_tensor_release(env->x_rows);
    pw_tensor_release(env->x);
    pw_pool_free(env->input_pool);
    pw_pool_free(env->graph_pool);
    pw_pool_free(env->eager_pool);
    pw_stream_free(env->stream);
}

static void fill_x(net_env *env, int step) {
    for (int i = 0; i < MAX_TOKENS * WIDTH; i++)
        env->x_host[i] = (float)((i * 7 + step * 3) % 11) - 5.0f;
    CHECK_OK(pw_test_write(env->stream, pw_tensor_data(env->x), env->x_host, sizeof env->x_host));
}

static pw_module *make_module(net_env *env, pw_graph_mode mode, pw_stitch_kind stitch) {
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse(NET, (size_t)-1, &g));
    static const int64_t sizes[] = {2, 4, 8};
    pw_dispatcher_config dc;
    pw_dispatcher_config_init(&dc);
    dc.mode = mode;
    dc.max_num_seqs = 4;
    dc.max_num_batched_tokens = MAX_TOKENS;
    dc.capture_sizes = sizes;
    dc.n_capture_sizes = 3;
    pw_module_options mo;
    pw_module_options_init(&mo);
    mo.dispatcher = &dc;
    mo.stitch = stitch;
    pw_module *m = NULL;
    const char *split[] = {"gate"};
    CHECK_OK(pw_module_new(g, split, 1, (pw_op_resolver){resolve, env}, env->stream,
                           env->graph_pool, &mo, &m));
    pw_ir_free(g);
    return m;
}

/* Runs n tokens the way a serving loop does: dispatch, then run. */
static bool run_and_check(net_env *env, pw_module *m, int64_t n, int step,
                          pw_runtime_mode *mode_out) {
    fill_x(env, step);
    pw_runtime_mode mode;
    pw_batch_desc desc;
    CHECK_OK(pw_dispatch(pw_module_dispatcher(m), n, n <= 4, false, &mode, &desc));
    CHECK_OK(set_rows(env, desc.num_tokens));
    pw_value out = pw_value_none();
    CHECK_OK(pw_module_run(m, mode, &desc, NULL, &env->arg, 1, &out));
    bool ok = out.kind == PW_VAL_TENSOR && pw_tensor_dim(out.as.tensor, 0) == desc.num_tokens &&
              out_matches(env, out.as.tensor, n);
    pw_value_release(out);
    *mode_out = mode;
    return ok;
}

static void test_structure(void) {
    net_env env;
    env_init(&env);
    pw_module *m = make_module(&env, PW_GRAPH_FULL_AND_PIECEWISE, PW_STITCH_PLAN);
    if (!m) return env_free(&env);
    CHECK_EQ_INT(pw_module_num_submodules(m), 5);
    CHECK_EQ_INT(pw_module_num_pieces(m), 3);
    for (int i = 0; i < 5; i++) {
        bool piece = i % 2 == 0;
        CHECK((pw_module_piece_wrapper(m, i) != NULL) == piece);
        CHECK((pw_module_piece_plan(m, i) != NULL) == piece);
    }
    CHECK(pw_module_piece_wrapper(m, 5) == NULL && pw_module_piece_wrapper(m, -1) == NULL);
    CHECK_STREQ(pw_graph_wrapper_name(pw_module_full_wrapper(m)), "forward");
    CHECK_EQ_INT(pw_graph_wrapper_mode(pw_module_full_wrapper(m)), PW_MODE_FULL);
    CHECK(pw_ir_num_subgraphs(pw_module_split_graph(m)) == 5);
    CHECK(pw_plan_num_submodules(pw_module_stitch_plan(m)) == 5);
    CHECK(!pw_module_stitch_is_native(m));
    pw_module_free(m);
    env_free(&env);
}

/* Every capture size in PIECEWISE and FULL: exact graph counts, and every
 * step's output equal to the eager formula, before and after capture. */
static void test_capture_and_replay(pw_stitch_kind stitch) {
    net_env env;
    env_init(&env);
    pw_module *m = make_module(&env, PW_GRAPH_FULL_AND_PIECEWISE, stitch);
    if (!m) return env_free(&env);
    /* before capture a step runs eagerly (NONE): every wrapper passes through */
    pw_batch_desc d3 = pw_batch_desc_make(3, PW_NUM_REQS_UNSET, false, false);
    fill_x(&env, 0);
    CHECK_OK(set_rows(&env, 3));
    pw_value eager;
    CHECK_OK(pw_module_run(m, PW_MODE_NONE, &d3, NULL, &env.arg, 1, &eager));
    CHECK(eager.kind == PW_VAL_TENSOR && out_matches(&env, eager.as.tensor, 3));
    pw_value_release(eager);
    pw_counters_reset();
    if (stitch == PW_STITCH_NATIVE && !pw_module_stitch_is_native(m))
        fprintf(stderr, "note: no working C compiler: native stitching ran the plan\n");
    pw_capture_options co;
    pw_capture_options_init(&co);
    co.progress = PW_PROGRESS_OFF;
    co.print_totals = false;
    pw_capture_report rep;
    CHECK_OK(pw_module_capture(m, inputs, &env, &co, &rep));
    /* 3 PIECEWISE sizes x 3 pieces, and FULL uniform decode at 2 and 4 */
    CHECK_EQ_INT(rep.descriptors, 5);
    CHECK_EQ_INT(rep.graphs_captured, 3 * 3 + 2);
    for (int i = 0; i < 5; i += 2)
        CHECK_EQ_INT(pw_graph_wrapper_num_graphs(pw_module_piece_wrapper(m, i)), 3);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(pw_module_full_wrapper(m)), 2);
    pw_capture_item full4 = {PW_MODE_FULL, pw_batch_desc_make(4, 4, true, false)};
    pw_capture_item pw8 = {PW_MODE_PIECEWISE, pw_batch_desc_make(8, PW_NUM_REQS_UNSET, false, false)};
    pw_capture_item pw16 = {PW_MODE_PIECEWISE, pw_batch_desc_make(16, PW_NUM_REQS_UNSET, false, false)};
    CHECK(pw_module_has_graphs(m, &full4) && pw_module_has_graphs(m, &pw8));
    CHECK(!pw_module_has_graphs(m, &pw16));
    CHECK(pw_module_graph_bytes(m, &pw8) > pw_module_graph_bytes(m, &full4) / 2);

    pw_counters_reset();
    int gates_before = env.gate_calls;
    static const int64_t steps[] = {1, 3, 4, 5, 8, 2, 7, 12};
    pw_runtime_mode modes[8];
    for (int i = 0; i < 8; i++) CHECK(run_and_check(&env, m, steps[i], i + 1, &modes[i]));
    CHECK_EQ_INT(modes[0], PW_MODE_FULL);      /* 1 token: uniform decode, FULL at 2 */
    CHECK_EQ_INT(modes[3], PW_MODE_PIECEWISE); /* 5 tokens: mixed, PIECEWISE at 8 */
    CHECK_EQ_INT(modes[7], PW_MODE_NONE);      /* 12: above the largest size, eager */
    pw_wrapper_counters c;
    pw_counters_get(&c);
    CHECK_EQ_INT(c.graphs_captured, 0);
    /* FULL steps: 1, 3, 4, 2 (one replay each); PIECEWISE: 5, 8, 7 (3 each) */
    CHECK_EQ_INT(c.replays, 4 + 3 * 3);
    /* the gate runs eagerly only in PIECEWISE (2 per step) and NONE steps */
    CHECK_EQ_INT(env.gate_calls - gates_before, 3 * 2 + 2);
    pw_module_free(m);
    CHECK_EQ_INT(pw_pool_graph_refs(env.graph_pool), 0);
    env_free(&env);
}

/* The dry run predicts what the capture reserves, byte for byte. */
static void test_plan_capture(void) {
    net_env env;
    env_init(&env);
    pw_module *m = make_module(&env, PW_GRAPH_FULL_AND_PIECEWISE, PW_STITCH_PLAN);
    if (!m) return env_free(&env);
    pw_capture_options co;
    pw_capture_options_init(&co);
    co.progress = PW_PROGRESS_OFF;
    co.print_totals = false;
    pw_capture_plan_report plan;
    CHECK_OK(pw_module_plan_capture(m, inputs, &env, &co, &plan));
    CHECK_OK(pw_module_capture(m, inputs, &env, &co, NULL));
    pw_pool_stats st;
    pw_pool_get_stats(env.graph_pool, &st);
    CHECK(plan.graph_pool_bytes > 0);
    CHECK_EQ_INT(plan.graph_pool_bytes, st.reserved);
    pw_module_free(m);
    env_free(&env);
}

/* The memory plan: the graphs it predicts are what the capture reserves,
 * the stand-ins come from a shadow pool and are forgotten after, and the
 * units that fit are the most whose reservation fits what the budget
 * leaves. */
typedef struct standins_seen {
    int calls, with_shadow;
    void *block;
} standins_seen;

static pw_status standins(void *user, pw_pool *shadow) {
    standins_seen *s = user;
    s->calls++;
    if (!shadow) {
        s->block = NULL;
        return PW_OK;
    }
    s->with_shadow += pw_pool_is_shadow(shadow);
    return pw_pool_alloc(shadow, 1 << 20, &s->block);
}

static size_t unit_bytes(void *user, int64_t n) {
    (void)user;
    return (size_t)n * 1000;
}

static void test_memory_plan(void) {
    net_env env;
    env_init(&env);
    pw_module *m = make_module(&env, PW_GRAPH_FULL_AND_PIECEWISE, PW_STITCH_PLAN);
    if (!m) return env_free(&env);
    pw_capture_options co;
    pw_capture_options_init(&co);
    co.progress = PW_PROGRESS_OFF;
    co.print_totals = false;
    pw_memory_plan *plan = NULL;
    CHECK_OK(pw_memory_plan_new(pw_test_device(), 0, &plan));
    CHECK_OK(pw_memory_plan_add(plan, "weights", 4096));
    standins_seen seen = {0};
    size_t graphs = 0;
    CHECK_OK(pw_memory_plan_graphs(plan, m, inputs, &env, &co, standins, &seen, &graphs));
    CHECK_EQ_INT(seen.calls, 2);
    CHECK_EQ_INT(seen.with_shadow, 1);
    CHECK(seen.block == NULL);
    CHECK(graphs > 0);
    CHECK_EQ_INT(pw_memory_plan_resident(plan), 4096 + graphs);
    /* no budget: as many units as allowed */
    int64_t units = 0;
    CHECK_OK(pw_memory_plan_fit(plan, "block", unit_bytes, NULL, 77, &units));
    CHECK_EQ_INT(units, 77);
    char line[256];
    pw_memory_plan_describe(plan, line, sizeof line);
    CHECK(strstr(line, "graphs (predicted)") != NULL);
    CHECK(strstr(line, "77 blocks") != NULL);
    /* the prediction is the capture's reservation, to the byte */
    CHECK_OK(pw_module_capture(m, inputs, &env, &co, NULL));
    pw_pool_stats st;
    pw_pool_get_stats(env.graph_pool, &st);
    CHECK_EQ_INT(graphs, st.reserved);
    pw_memory_plan_free(plan);

    /* a budget: the most units whose one allocation's reservation fits */
    size_t resident = 4096 + graphs, one = 0;
    CHECK_OK(pw_memory_reservation(pw_test_device(), unit_bytes(NULL, 1), &one));
    CHECK(one >= 1000);
    size_t budget = resident + 3 * one + 123;
    CHECK_OK(pw_memory_plan_new(pw_test_device(), budget, &plan));
    CHECK_OK(pw_memory_plan_add(plan, "weights", 4096));
    CHECK_OK(pw_memory_plan_add(plan, "graphs", graphs));
    CHECK_OK(pw_memory_plan_fit(plan, "block", unit_bytes, NULL, (int64_t)1 << 40, &units));
    size_t r_n = 0, r_next = 0;
    CHECK_OK(pw_memory_reservation(pw_test_device(), unit_bytes(NULL, units), &r_n));
    CHECK_OK(pw_memory_reservation(pw_test_device(), unit_bytes(NULL, units + 1), &r_next));
    CHECK(units >= 1);
    CHECK(r_n <= budget - resident);
    CHECK(r_next > budget - resident);
    pw_memory_plan_describe(plan, line, sizeof line);
    CHECK(strstr(line, "unused") != NULL);
    /* capped by max_units */
    CHECK_OK(pw_memory_plan_fit(plan, "block", unit_bytes, NULL, 1, &units));
    CHECK_EQ_INT(units, 1);
    pw_memory_plan_free(plan);

    /* too small for one unit: refused, naming every part */
    CHECK_OK(pw_memory_plan_new(pw_test_device(), resident, &plan));
    CHECK_OK(pw_memory_plan_add(plan, "weights", 4096));
    CHECK_OK(pw_memory_plan_add(plan, "graphs", graphs));
    CHECK_ERR(pw_memory_plan_fit(plan, "block", unit_bytes, NULL, 10, &units), PW_ERR_INVALID_ARG,
              "is too small: weights 4096 + graphs");
    CHECK_EQ_INT(units, 0);
    /* misuse */
    for (int i = 2; i < PW_MEMORY_PLAN_MAX_PARTS; i++)
        CHECK_OK(pw_memory_plan_add(plan, "more", 1));
    CHECK_ERR(pw_memory_plan_add(plan, "one too many", 1), PW_ERR_INVALID_ARG, "more than");
    CHECK_ERR(pw_memory_plan_fit(plan, "block", unit_bytes, NULL, 0, &units), PW_ERR_INVALID_ARG,
              "at least one unit");
    CHECK_ERR(pw_memory_plan_graphs(plan, NULL, inputs, &env, &co, NULL, NULL, NULL),
              PW_ERR_INVALID_ARG, "needs a plan, a module");
    CHECK_ERR(pw_memory_plan_new(pw_test_device(), 0, NULL), PW_ERR_INVALID_ARG, "out is NULL");
    pw_memory_plan_free(plan);
    pw_memory_plan_free(NULL);
    pw_module_free(m);
    env_free(&env);
}

/* One item at a time, and graphs freed by item. */
static void test_capture_one_and_remove(void) {
    net_env env;
    env_init(&env);
    pw_module *m = make_module(&env, PW_GRAPH_PIECEWISE, PW_STITCH_PLAN);
    if (!m) return env_free(&env);
    pw_capture_item it = {PW_MODE_PIECEWISE, pw_batch_desc_make(4, PW_NUM_REQS_UNSET, false, false)};
    CHECK_OK(pw_module_capture_one(m, &it, inputs, &env, NULL));
    CHECK(pw_module_has_graphs(m, &it));
    CHECK(pw_module_graph_bytes(m, &it) > 0);
    CHECK_OK(pw_module_remove_graphs(m, &it));
    CHECK(!pw_module_has_graphs(m, &it));
    CHECK_EQ_INT(pw_module_graph_bytes(m, &it), 0);
    CHECK_OK(pw_module_remove_graphs(m, &it)); /* nothing left: still fine */
    pw_module_free(m);
    env_free(&env);
}

/* The interposer sees every piece run and the forward, and may run them plainly. */
typedef struct seen {
    int pieces, forwards;
} seen;

static pw_status interpose(void *user, int piece, pw_callable plain, const pw_value *args,
                           int nargs, pw_value *out) {
    seen *s = user;
    if (piece == PW_MODULE_FORWARD) s->forwards++;
    else s->pieces++;
    return plain.fn(plain.user, args, nargs, out);
}

static void test_interpose(void) {
    net_env env;
    env_init(&env);
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse(NET, (size_t)-1, &g));
    seen s = {0, 0};
    pw_module_options mo;
    pw_module_options_init(&mo);
    mo.interpose = interpose;
    mo.interpose_user = &s;
    mo.name = "net";
    pw_module *m = NULL;
    const char *split[] = {"gate"};
    CHECK_OK(pw_module_new(g, split, 1, (pw_op_resolver){resolve, &env}, env.stream,
                           env.graph_pool, &mo, &m));
    pw_ir_free(g);
    if (!m) return env_free(&env);
    CHECK_STREQ(pw_graph_wrapper_name(pw_module_full_wrapper(m)), "net");
    pw_batch_desc d = pw_batch_desc_make(4, PW_NUM_REQS_UNSET, false, false);
    CHECK_OK(set_rows(&env, 4));
    pw_value out;
    CHECK_OK(pw_module_run(m, PW_MODE_NONE, &d, NULL, &env.arg, 1, &out));
    pw_value_release(out);
    CHECK_EQ_INT(s.forwards, 1);
    CHECK_EQ_INT(s.pieces, 3);
    pw_module_free(m);
    env_free(&env);
}

static void test_errors(void) {
    net_env env;
    env_init(&env);
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse(NET, (size_t)-1, &g));
    pw_op_resolver r = {resolve, &env};
    const char *split[] = {"gate"};
    pw_module *m = (pw_module *)&env; /* must be cleared on failure */
    CHECK_ERR(pw_module_new(NULL, split, 1, r, env.stream, env.graph_pool, NULL, &m),
              PW_ERR_INVALID_ARG, "graph is NULL");
    CHECK(m == NULL);
    CHECK_ERR(pw_module_new(g, split, 1, (pw_op_resolver){NULL, NULL}, env.stream,
                            env.graph_pool, NULL, &m),
              PW_ERR_INVALID_ARG, "no op resolver");
    CHECK_ERR(pw_module_new(g, split, 1, r, NULL, env.graph_pool, NULL, &m), PW_ERR_INVALID_ARG,
              "stream and graph pool");
    CHECK_ERR(pw_module_new(g, NULL, 0, r, env.stream, env.graph_pool, NULL, &m),
              PW_ERR_INVALID_ARG, "module 'net': splitting");
    pw_module_options mo;
    pw_module_options_init(&mo);
    mo.stitch = (pw_stitch_kind)9;
    CHECK_ERR(pw_module_new(g, split, 1, r, env.stream, env.graph_pool, &mo, &m),
              PW_ERR_INVALID_ARG, "unknown stitch kind 9");
    pw_dispatcher_config dc;
    pw_dispatcher_config_init(&dc);
    dc.max_num_seqs = 0;
    pw_module_options_init(&mo);
    mo.dispatcher = &dc;
    CHECK_ERR(pw_module_new(g, split, 1, r, env.stream, env.graph_pool, &mo, &m),
              PW_ERR_INVALID_ARG, "max_num_seqs");
    /* an op without a kernel: the resolver's error, from the plan build */
    const char *split_add[] = {"scale"};
    pw_ir *g2 = NULL;
    CHECK_OK(pw_ir_parse("graph n:\n    %x = placeholder\n    %y = call_function nope(%x)\n"
                         "    return %y\n",
                         (size_t)-1, &g2));
    CHECK_ERR(pw_module_new(g2, split_add, 1, r, env.stream, env.graph_pool, NULL, &m),
              PW_ERR_NOT_FOUND, "no kernel for op 'nope'");
    pw_ir_free(g2);
    /* a splitting op whose own output is read later cannot replay piecewise */
    const char *split_scale[] = {"scale"};
    CHECK_ERR(pw_module_new(g, split_scale, 1, r, env.stream, env.graph_pool, NULL, &m),
              PW_ERR_UNSUPPORTED, "submod");
    CHECK(m == NULL);

    CHECK_OK(pw_module_new(g, split, 1, r, env.stream, env.graph_pool, NULL, &m));
    pw_value out;
    CHECK_ERR(pw_module_run(m, PW_MODE_FULL, NULL, NULL, &env.arg, 1, &out), PW_ERR_INVALID_ARG,
              "without a descriptor");
    pw_batch_desc d = pw_batch_desc_make(4, PW_NUM_REQS_UNSET, false, false);
    CHECK_ERR(pw_module_run(m, (pw_runtime_mode)5, &d, NULL, &env.arg, 1, &out),
              PW_ERR_INVALID_ARG, "invalid runtime mode 5");
    CHECK(out.kind == PW_VAL_NONE);
    CHECK_EQ_INT(pw_forward_context_depth(), 0);
    /* capture of a PIECEWISE descriptor outside a capture phase is refused */
    CHECK_OK(set_rows(&env, 4));
    CHECK_ERR(pw_module_run(m, PW_MODE_PIECEWISE, &d, NULL, &env.arg, 1, &out), PW_ERR_CAPTURE,
              "outside the capture phase");
    CHECK_EQ_INT(pw_forward_context_depth(), 0);
    CHECK_ERR(pw_module_capture(m, NULL, NULL, NULL, NULL), PW_ERR_INVALID_ARG,
              "inputs callback");
    pw_module_free(m);
    pw_module_free(NULL);
    pw_ir_free(g);
    env_free(&env);
}

/* Every allocation of the build failing in turn: a clean error, nothing leaked. */
static void test_out_of_memory(void) {
    net_env env;
    env_init(&env);
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse(NET, (size_t)-1, &g));
    const char *split[] = {"gate"};
    bool built = false;
    int failures = 0;
    for (int n = 1; n < 500 && !built; n++) {
        pw_module *m = NULL;
        pw_host_fail_nth(n);
        pw_status s = pw_module_new(g, split, 1, (pw_op_resolver){resolve, &env}, env.stream,
                                    env.graph_pool, NULL, &m);
        pw_host_fail_nth(0);
        if (s == PW_OK) {
            built = true;
        } else {
            failures++;
            CHECK_EQ_INT(s, PW_ERR_OOM);
            CHECK(m == NULL);
        }
        pw_module_free(m);
    }
    CHECK(built);
    CHECK(failures > 10);
    CHECK_EQ_INT(pw_graph_wrappers_count(), 0);
    pw_ir_free(g);
    env_free(&env);
}

/* Lazy capture: the dispatcher routes around missing graphs (a larger
 * captured size, else eager), names what to capture, and a one-byte budget
 * keeps only the newest item. Outputs equal the eager formula throughout. */
static bool lazy_step(net_env *env, pw_module *m, int64_t n, int step, pw_route *route) {
    fill_x(env, step);
    CHECK_OK(pw_dispatcher_route(pw_module_dispatcher(m), n, false, false, route));
    CHECK_OK(set_rows(env, route->desc.num_tokens));
    pw_value out = pw_value_none();
    CHECK_OK(pw_module_run(m, route->mode, &route->desc, NULL, &env->arg, 1, &out));
    bool ok = out.kind == PW_VAL_TENSOR && out_matches(env, out.as.tensor, n);
    pw_value_release(out);
    if (route->capture.mode != PW_MODE_NONE)
        CHECK_OK(pw_module_capture_one(m, &route->capture, inputs, env, NULL));
    return ok;
}

static void test_lazy(size_t budget) {
    net_env env;
    env_init(&env);
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse(NET, (size_t)-1, &g));
    static const int64_t sizes[] = {2, 4, 8};
    pw_dispatcher_config dc;
    pw_dispatcher_config_init(&dc);
    dc.mode = PW_GRAPH_PIECEWISE;
    dc.max_num_batched_tokens = MAX_TOKENS;
    dc.capture_sizes = sizes;
    dc.n_capture_sizes = 3;
    pw_module_options mo;
    pw_module_options_init(&mo);
    mo.dispatcher = &dc;
    mo.lazy = true;
    mo.graph_budget = budget;
    pw_module *m = NULL;
    const char *split[] = {"gate"};
    CHECK_OK(pw_module_new(g, split, 1, (pw_op_resolver){resolve, &env}, env.stream,
                           env.graph_pool, &mo, &m));
    pw_ir_free(g);
    if (!m) return env_free(&env);
    pw_capture_report rep;
    CHECK_OK(pw_module_capture(m, inputs, &env, NULL, &rep));
    CHECK_EQ_INT(rep.graphs_captured, 0); /* nothing up front */
    pw_route r;
    CHECK(lazy_step(&env, m, 3, 1, &r)); /* nothing captured: eager, then 4 captured */
    CHECK_EQ_INT(r.kind, PW_ROUTE_EAGER);
    CHECK_EQ_INT(r.mode, PW_MODE_NONE);
    CHECK_EQ_INT(r.desc.num_tokens, 3);
    CHECK_EQ_INT(r.capture.mode, PW_MODE_PIECEWISE);
    CHECK_EQ_INT(r.capture.desc.num_tokens, 4);
    CHECK(lazy_step(&env, m, 1, 2, &r)); /* 2 has no graph, 4 has: padded to it */
    CHECK_EQ_INT(r.kind, PW_ROUTE_PADDED);
    CHECK_EQ_INT(r.mode, PW_MODE_PIECEWISE);
    CHECK_EQ_INT(r.desc.num_tokens, 4);
    CHECK_EQ_INT(r.capture.desc.num_tokens, 2);
    CHECK(lazy_step(&env, m, 2, 3, &r)); /* its own graph now, if the budget kept it */
    CHECK_EQ_INT(r.kind, PW_ROUTE_DISPATCHED);
    CHECK_EQ_INT(r.desc.num_tokens, 2);
    CHECK_EQ_INT(r.capture.mode, PW_MODE_NONE);
    CHECK(lazy_step(&env, m, 4, 4, &r));
    pw_lazy_capture_stats st;
    pw_lazy_capture_get_stats(pw_module_lazy_capture(m), &st);
    CHECK_EQ_INT(st.padded, 1);
    pw_capture_item i2 = {PW_MODE_PIECEWISE, pw_batch_desc_make(2, PW_NUM_REQS_UNSET, false, false)};
    pw_capture_item i4 = {PW_MODE_PIECEWISE, pw_batch_desc_make(4, PW_NUM_REQS_UNSET, false, false)};
    if (budget == 0) {
        /* both kept; the step of 4 replayed */
        CHECK_EQ_INT(r.kind, PW_ROUTE_DISPATCHED);
        CHECK_EQ_INT(st.captured, 2);
        CHECK_EQ_INT(st.evicted, 0);
        CHECK_EQ_INT(st.eager, 1);
        CHECK(pw_module_has_graphs(m, &i2) && pw_module_has_graphs(m, &i4));
        CHECK_EQ_INT(st.bytes, pw_module_graph_bytes(m, &i2) + pw_module_graph_bytes(m, &i4));
    } else {
        /* one byte: capturing 2 evicted 4, so the step of 4 found no graph
         * of 4 or more and ran eagerly, then captured 4 again, evicting 2 */
        CHECK_EQ_INT(r.kind, PW_ROUTE_EAGER);
        CHECK_EQ_INT(st.captured, 3);
        CHECK_EQ_INT(st.evicted, 2);
        CHECK_EQ_INT(st.eager, 2);
        CHECK(!pw_module_has_graphs(m, &i2) && pw_module_has_graphs(m, &i4));
        CHECK_EQ_INT(pw_graph_wrapper_num_graphs(pw_module_piece_wrapper(m, 0)), 1);
        CHECK_EQ_INT(st.bytes, pw_module_graph_bytes(m, &i4));
    }
    pw_module_free(m);
    env_free(&env);
}

static pw_status failing_evict(void *user, const pw_capture_item *item) {
    (void)user;
    (void)item;
    return pw_error(PW_ERR_STATE, "test: cannot evict");
}

static void test_lazy_policy_errors(void) {
    pw_lazy_capture *lz = NULL;
    CHECK_ERR(pw_lazy_capture_new(10, NULL, NULL, &lz), PW_ERR_INVALID_ARG,
              "needs an evict callback");
    CHECK(lz == NULL);
    CHECK_OK(pw_lazy_capture_new(10, failing_evict, NULL, &lz));
    pw_capture_item a = {PW_MODE_FULL, pw_batch_desc_make(4, 4, true, false)};
    pw_capture_item b = {PW_MODE_FULL, pw_batch_desc_make(8, 8, true, false)};
    CHECK_OK(pw_lazy_capture_add(lz, &a, 6));
    CHECK(pw_lazy_capture_has(lz, &a) && !pw_lazy_capture_has(lz, &b));
    CHECK_ERR(pw_lazy_capture_add(lz, &a, 6), PW_ERR_STATE, "already recorded");
    CHECK_ERR(pw_lazy_capture_add(lz, &b, 6), PW_ERR_STATE, "test: cannot evict");
    pw_lazy_capture_free(lz);
    pw_lazy_capture_free(NULL);
    /* a budget without lazy capture */
    net_env env;
    env_init(&env);
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse(NET, (size_t)-1, &g));
    pw_module_options mo;
    pw_module_options_init(&mo);
    mo.graph_budget = 100;
    pw_module *m = NULL;
    const char *split[] = {"gate"};
    CHECK_ERR(pw_module_new(g, split, 1, (pw_op_resolver){resolve, &env}, env.stream,
                            env.graph_pool, &mo, &m),
              PW_ERR_INVALID_ARG, "a graph budget needs lazy capture");
    pw_ir_free(g);
    env_free(&env);
}

int main(void) {
    test_structure();
    test_capture_and_replay(PW_STITCH_PLAN);
    test_capture_and_replay(PW_STITCH_NATIVE);
    test_plan_capture();
    test_memory_plan();
    test_capture_one_and_remove();
    test_interpose();
    test_lazy(0);
    test_lazy(1);
    test_lazy_policy_errors();
    test_errors();
    test_out_of_memory();
    return pw_test_finish("runtime_module");
}
