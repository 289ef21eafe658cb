/* The three forms agree: on many random stitching graphs the reference
 * evaluator, the plan and the native function give the same results, the
 * same sequence of calls, the same errors, and leak nothing. Also the
 * native fallback when no compiler works. */
#include "graph/graph_internal.h"
#include "pw_config.h"
#include "split_ops.h"
#include "test_util.h"
#include "toy.h"

#include <unistd.h>

#define RANDOM_GRAPHS 300
#define NATIVE_EVERY 25 /* compiling is slow: natively check every n-th graph */
#define MAX_NODES 64

static uint64_t rng_state;
static int rnd(int n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int)(rng_state % (uint64_t)n);
}

typedef struct gen {
    pw_ir *g;
    int tuple_size[MAX_NODES]; /* >= 2: a tuple of that many; 0: not a tuple */
    int nvals;
    int vals[MAX_NODES];
    pw_status s;
    int counter;
} gen;

static const char *fresh(gen *G, const char *base, char *buf) {
    snprintf(buf, PW_IR_MAX_NAME, "%s%d", base, G->counter++);
    return buf;
}

static pw_ir_arg random_arg(gen *G, pw_ir_arg *scratch) {
    switch (rnd(8)) {
    case 0: return pw_ir_arg_int(rnd(100) - 50);
    case 1: return pw_ir_arg_string(rnd(2) ? "layer.0" : "x");
    case 2: return pw_ir_arg_float(0.25 * rnd(9));
    case 3:
        scratch[0] = G->nvals ? pw_ir_arg_node(G->vals[rnd(G->nvals)]) : pw_ir_arg_int(1);
        scratch[1] = pw_ir_arg_int(rnd(5));
        return rnd(2) ? pw_ir_arg_list(scratch, 2) : pw_ir_arg_tuple(scratch, 2);
    default: return G->nvals ? pw_ir_arg_node(G->vals[rnd(G->nvals)]) : pw_ir_arg_bool(rnd(2));
    }
}

static void add_value(gen *G, int node, int tuple_size) {
    if (node < 0 || node >= MAX_NODES) return;
    G->tuple_size[node] = tuple_size;
    G->vals[G->nvals++] = node;
}

/* A splitting subgraph "inl<i>" with nph placeholders; *shape gets its
 * result's tuple size (0 if not a tuple). */
static pw_ir *random_subgraph(int i, int nph, int *shape) {
    char name[32];
    snprintf(name, sizeof name, "inl%d", i);
    gen G = {0};
    if (pw_ir_new(name, &G.g) != PW_OK) return NULL;
    G.g->splitting = true;
    char buf[PW_IR_MAX_NAME];
    for (int k = 0; k < nph; k++) {
        int id = -1;
        G.s = pw_ir_add_placeholder(G.g, fresh(&G, "a", buf), &id);
        add_value(&G, id, 0);
    }
    int nops = 1 + rnd(3);
    for (int k = 0; k < nops && G.s == PW_OK; k++) {
        pw_ir_arg args[3], scratch[3][2];
        int n = 1 + rnd(3);
        for (int j = 0; j < n; j++) args[j] = random_arg(&G, scratch[j]);
        int id = -1;
        const char *target = rnd(3) == 0 ? "attention" : "f";
        G.s = pw_ir_add_call_function(G.g, fresh(&G, "op", buf), target, args, n, NULL, 0, &id);
        add_value(&G, id, 0);
    }
    pw_ir_arg out;
    pw_ir_arg items[3];
    *shape = 0;
    switch (rnd(4)) {
    case 0: out = pw_ir_arg_node(G.vals[G.nvals - 1]); break;
    case 1: out = pw_ir_arg_tuple(NULL, 0); break;
    case 2: out = pw_ir_arg_int(5); break;
    default: {
        int n = 2 + rnd(2);
        for (int j = 0; j < n; j++) items[j] = pw_ir_arg_node(G.vals[rnd(G.nvals)]);
        out = pw_ir_arg_tuple(items, n);
        *shape = n;
    }
    }
    if (G.s == PW_OK) G.s = pw_ir_set_output(G.g, out, NULL);
    if (G.s != PW_OK) {
        pw_ir_free(G.g);
        return NULL;
    }
    return G.g;
}

static pw_ir *random_graph(void) {
    gen G = {0};
    if (pw_ir_new("rand", &G.g) != PW_OK) return NULL;
    char buf[PW_IR_MAX_NAME];
    int nparams = 1 + rnd(3);
    for (int k = 0; k < nparams; k++) {
        int id = -1;
        G.s = pw_ir_add_placeholder(G.g, fresh(&G, "p", buf), &id);
        add_value(&G, id, 0);
    }
    int ninl = rnd(3), inl_ph[3], inl_shape[3];
    for (int i = 0; i < ninl && G.s == PW_OK; i++) {
        inl_ph[i] = 1 + rnd(3);
        pw_ir *sub = random_subgraph(i, inl_ph[i], &inl_shape[i]);
        G.s = sub ? pw_ir_add_subgraph(G.g, sub) : PW_ERR_OOM;
    }
    int nnodes = 3 + rnd(14);
    for (int k = 0; k < nnodes && G.s == PW_OK && G.nvals < MAX_NODES - 4; k++) {
        pw_ir_arg args[4], scratch[4][2];
        int id = -1, r = rnd(10);
        int tuples[MAX_NODES], ntuples = 0;
        for (int j = 0; j < G.nvals; j++)
            if (G.tuple_size[G.vals[j]] >= 2) tuples[ntuples++] = G.vals[j];
        if (r == 9 && ntuples) {
            int src = tuples[rnd(ntuples)];
            int size = G.tuple_size[src];
            int index = rnd(size);
            if (rnd(4) == 0) index -= size;
            G.s = pw_ir_add_getitem(G.g, fresh(&G, "getitem", buf), src, index, &id);
            add_value(&G, id, 0);
        } else if (r == 8 && ninl) {
            int i = rnd(ninl);
            for (int j = 0; j < inl_ph[i]; j++) args[j] = random_arg(&G, scratch[j]);
            char target[16];
            snprintf(target, sizeof target, "inl%d", i);
            /* the last argument by name, sometimes */
            const pw_ir *sub = pw_ir_find_subgraph(G.g, target);
            pw_ir_kwarg kw = {pw_ir_node_name(sub, inl_ph[i] - 1), args[inl_ph[i] - 1]};
            bool use_kw = rnd(2);
            G.s = pw_ir_add_call_module(G.g, fresh(&G, "submod", buf), target, args, inl_ph[i] - use_kw, &kw,
                                        use_kw, &id);
            add_value(&G, id, inl_shape[i]);
        } else if (r >= 6) {
            int nout = 1 + rnd(3);
            int n = 1 + rnd(4);
            for (int j = 0; j < n; j++) args[j] = random_arg(&G, scratch[j]);
            char target[16];
            snprintf(target, sizeof target, "ext%d", nout);
            G.s = pw_ir_add_call_module(G.g, fresh(&G, "submod", buf), target, args, n, NULL, 0, &id);
            add_value(&G, id, nout >= 2 ? nout : 0);
        } else {
            int n = 1 + rnd(3);
            for (int j = 0; j < n; j++) args[j] = random_arg(&G, scratch[j]);
            const char *target = r == 4 ? "pair" : r == 5 ? "attention" : "f";
            pw_ir_kwarg kw = {"scale", random_arg(&G, scratch[3])};
            G.s = pw_ir_add_call_function(G.g, fresh(&G, "v", buf), target, args, n, &kw, rnd(3) == 0, &id);
            add_value(&G, id, r == 4 ? 2 : 0);
        }
    }
    pw_ir_arg items[5], inner[2], scratch[5][2];
    int n = 1 + rnd(4);
    for (int j = 0; j < n; j++) items[j] = random_arg(&G, scratch[j]);
    if (rnd(3) == 0) {
        inner[0] = pw_ir_arg_node(G.vals[G.nvals - 1]);
        inner[1] = pw_ir_arg_node(G.vals[G.nvals - 1]);
        items[n++] = pw_ir_arg_tuple(inner, 2);
    }
    pw_ir_arg out = rnd(5) == 0 ? pw_ir_arg_node(G.vals[G.nvals - 1]) : pw_ir_arg_tuple(items, n);
    if (G.s == PW_OK) G.s = pw_ir_set_output(G.g, out, NULL);
    if (G.s != PW_OK) {
        fprintf(stderr, "random graph: %s\n", pw_last_error());
        pw_ir_free(G.g);
        return NULL;
    }
    return G.g;
}

static toy_sub ext_subs[4] = {{"ext0", 0}, {"ext1", 1}, {"ext2", 2}, {"ext3", 3}};

/* The submodule table in the plan's order. */
static int make_table(const pw_plan *p, pw_callable *table) {
    int n = pw_plan_num_submodules(p);
    for (int i = 0; i < n; i++) {
        const char *name = pw_plan_submodule_name(p, i);
        table[i] = (pw_callable){0};
        if (strncmp(name, "ext", 3) == 0) table[i] = (pw_callable){toy_sub_call, &ext_subs[name[3] - '0'], name};
    }
    return n;
}

typedef struct outcome {
    pw_status status;
    char result[2048];
    char trace[8192];
    char error[512];
} outcome;

typedef enum form { FORM_REFERENCE, FORM_PLAN, FORM_NATIVE } form;

static void run_form(form f, const pw_ir *g, const pw_plan *p, const pw_native *nat, const pw_callable *table,
                     int nsub, const pw_value *args, int nargs, int fail_at, outcome *o) {
    toy_reset();
    toy.fail_at = fail_at;
    pw_value out = pw_value_none();
    pw_clear_error();
    static const pw_plan_options opts = {.resolve_op = toy_resolve};
    if (f == FORM_REFERENCE) o->status = pw_ir_run(g, &opts, table, nsub, args, nargs, &out);
    else if (f == FORM_PLAN) o->status = pw_plan_run(p, table, nsub, args, nargs, &out);
    else o->status = pw_native_run(nat, table, nsub, args, nargs, &out);
    size_t len = 0;
    o->result[0] = 0;
    toy_describe(out, o->result, sizeof o->result, &len);
    snprintf(o->trace, sizeof o->trace, "%s", toy.trace);
    snprintf(o->error, sizeof o->error, "%s", o->status ? pw_last_error() : "");
    pw_value_release(out);
}

static void test_random_graphs(bool have_compiler) {
    static const pw_plan_options opts = {.resolve_op = toy_resolve};
    int native_checked = 0, failures_checked = 0;
    for (int iter = 0; iter < RANDOM_GRAPHS; iter++) {
        rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)(iter + 1) * 0x2545F4914F6CDD1Dull;
        pw_ir *g = random_graph();
        CHECK(g != NULL);
        if (!g) continue;
        CHECK_OK(pw_ir_validate(g));
        /* it survives a trip through the text format */
        char *text = NULL;
        pw_ir *back = NULL;
        CHECK_OK(pw_ir_print(g, &text));
        CHECK_OK(pw_ir_parse(text, (size_t)-1, &back));
        char *text2 = NULL;
        if (back) CHECK_OK(pw_ir_print(back, &text2));
        CHECK_STREQ(text, text2);
        free(text2);
        pw_ir_free(back);

        pw_plan *p = NULL;
        CHECK_OK(pw_plan_build(g, &opts, &p));
        if (!p) {
            fprintf(stderr, "graph:\n%s\n", text);
            free(text);
            pw_ir_free(g);
            continue;
        }
        pw_native *nat = NULL;
        bool native = iter % NATIVE_EVERY == 0;
        if (native) {
            CHECK_OK(pw_native_compile(p, &nat));
            if (have_compiler) CHECK(pw_native_is_compiled(nat));
            native_checked += pw_native_is_compiled(nat);
        }
        pw_callable table[MAX_NODES];
        int nsub = make_table(p, table);
        int nargs = pw_plan_num_params(p);
        pw_value args[4];
        for (int i = 0; i < nargs; i++) CHECK_OK(toy_tensor(100 + i, &args[i]));
        size_t base = toy_live_blocks();

        outcome ref, plan, nout;
        run_form(FORM_REFERENCE, g, p, nat, table, nsub, args, nargs, 0, &ref);
        run_form(FORM_PLAN, g, p, nat, table, nsub, args, nargs, 0, &plan);
        CHECK_OK(ref.status);
        CHECK_OK(plan.status);
        CHECK_STREQ(plan.result, ref.result);
        CHECK_STREQ(plan.trace, ref.trace);
        CHECK_EQ_INT(toy_live_blocks(), base);
        if (nat) {
            run_form(FORM_NATIVE, g, p, nat, table, nsub, args, nargs, 0, &nout);
            CHECK_OK(nout.status);
            CHECK_STREQ(nout.result, ref.result);
            CHECK_STREQ(nout.trace, ref.trace);
            CHECK_EQ_INT(toy_live_blocks(), base);
        }
        /* a failing call midway: same status, nothing leaked */
        int ncalls = 0;
        for (const char *c = ref.trace; *c; c++) ncalls += *c == ')';
        if (ncalls > 0) {
            int fail_at = 1 + rnd(ncalls);
            run_form(FORM_REFERENCE, g, p, nat, table, nsub, args, nargs, fail_at, &ref);
            run_form(FORM_PLAN, g, p, nat, table, nsub, args, nargs, fail_at, &plan);
            CHECK_EQ_INT(plan.status, PW_ERR_INVALID_ARG);
            CHECK_EQ_INT(ref.status, plan.status);
            CHECK_STREQ(plan.trace, ref.trace);
            CHECK(strstr(plan.error, "failed on purpose") != NULL);
            CHECK_EQ_INT(toy_live_blocks(), base);
            if (nat) {
                run_form(FORM_NATIVE, g, p, nat, table, nsub, args, nargs, fail_at, &nout);
                CHECK_EQ_INT(nout.status, plan.status);
                CHECK_STREQ(nout.error, plan.error);
                CHECK_EQ_INT(toy_live_blocks(), base);
            }
            failures_checked++;
        }
        if (pw_test_failures) fprintf(stderr, "graph %d:\n%s\n", iter, text);
        for (int i = 0; i < nargs; i++) pw_value_release(args[i]);
        CHECK_EQ_INT(toy_live_blocks(), 0);
        free(text);
        pw_native_free(nat);
        pw_plan_free(p);
        pw_ir_free(g);
        if (pw_test_failures) break;
    }
    if (have_compiler) CHECK(native_checked >= RANDOM_GRAPHS / NATIVE_EVERY);
    CHECK(failures_checked > RANDOM_GRAPHS / 2);
}

/* The native form of the generated Llama-like graph, and the fallback. */
static void test_native_llama(bool have_compiler) {
    pw_ir *g = NULL, *split = NULL;
    CHECK_OK(pw_ir_synthetic_llama(4, &g));
    CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &split));
    static const pw_plan_options opts = {.resolve_op = toy_resolve, .function_name = "llama_stitch"};
    pw_plan *p = NULL;
    if (split) CHECK_OK(pw_plan_build(split, &opts, &p));
    if (!p) {
        pw_ir_free(split);
        pw_ir_free(g);
        return;
    }
    toy_sub pieces[3] = {{"piece5", 5}, {"piece1", 1}, {"none", 0}};
    pw_callable table[16];
    int nsub = pw_plan_num_submodules(p);
    CHECK_EQ_INT(nsub, 9);
    for (int i = 0; i < nsub; i++) {
        toy_sub *s = i == nsub - 1 ? &pieces[1] : &pieces[0];
        table[i] = pw_plan_submodule_inlined(p, i) ? (pw_callable){0} : (pw_callable){toy_sub_call, s, s->name};
    }
    int nargs = pw_plan_num_params(p);
    pw_value args[64];
    for (int i = 0; i < nargs; i++) CHECK_OK(toy_tensor(i, &args[i]));
    outcome plan, nout, fallback;
    run_form(FORM_PLAN, split, p, NULL, table, nsub, args, nargs, 0, &plan);
    CHECK_OK(plan.status);

    pw_native *nat = NULL;
    CHECK_OK(pw_native_compile(p, &nat));
    if (have_compiler) CHECK(pw_native_is_compiled(nat));
    run_form(FORM_NATIVE, split, p, nat, table, nsub, args, nargs, 0, &nout);
    CHECK_OK(nout.status);
    CHECK_STREQ(nout.result, plan.result);
    CHECK_STREQ(nout.trace, plan.trace);
    pw_callable missing[16];
    memcpy(missing, table, sizeof missing);
    missing[2] = (pw_callable){0};
    pw_value out;
    CHECK_ERR(pw_native_run(nat, missing, nsub, args, nargs, &out), PW_ERR_INVALID_ARG,
              "stitching llama: node %submod_2: submodule 2 has no callable");
    CHECK_ERR(pw_native_run(nat, table, nsub, args, 1, &out), PW_ERR_INVALID_ARG, "1 arguments given");
    pw_native_free(nat);

    /* no compiler: one notice, then the plan runs */
    const char *old = getenv("PW_CC");
    char *saved = old ? strdup(old) : NULL;
    setenv("PW_CC", "/nonexistent/cc", 1);
    nat = NULL;
    CHECK_OK(pw_native_compile(p, &nat));
    CHECK(nat && !pw_native_is_compiled(nat));
    run_form(FORM_NATIVE, split, p, nat, table, nsub, args, nargs, 0, &fallback);
    CHECK_OK(fallback.status);
    CHECK_STREQ(fallback.result, plan.result);
    CHECK_STREQ(fallback.trace, plan.trace);
    pw_native_free(nat);
    /* a compiler that rejects the source also falls back */
    setenv("PW_CC", "false", 1);
    nat = NULL;
    CHECK_OK(pw_native_compile(p, &nat));
    CHECK(nat && !pw_native_is_compiled(nat));
    pw_native_free(nat);
    if (saved) setenv("PW_CC", saved, 1);
    else unsetenv("PW_CC");
    free(saved);

    for (int i = 0; i < nargs; i++) pw_value_release(args[i]);
    CHECK_EQ_INT(toy_live_blocks(), 0);
    pw_plan_free(p);
    pw_ir_free(split);
    pw_ir_free(g);
}

int main(void) {
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "toy", &toy.pool));
    const char *cc = getenv("PW_CC");
    bool have_compiler = !cc && access(PW_C_COMPILER, X_OK) == 0;
    if (!have_compiler)
        pw_test_skip_part("no C compiler (or PW_CC is set): the native stitching results");
    test_native_llama(have_compiler);
    test_random_graphs(have_compiler);
    pw_pool_free(toy.pool);
    return pw_test_finish("graph_agree");
}
