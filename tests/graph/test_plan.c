/* The stitching plan: liveness (checked on the disassembly and on a real
 * pool), ownership of outputs and parameters, runs, and every error. */
#include "graph/graph_internal.h"
#include "test_util.h"
#include "toy.h"

static const pw_plan_options toy_opts = {.resolve_op = toy_resolve};

static pw_ir *parse(const char *text) {
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse(text, (size_t)-1, &g));
    return g;
}

/* The disassembly reduced to "OPCODE %node" per instruction. */
static void plan_outline(const pw_plan *p, char *buf, size_t cap) {
    char *text = NULL;
    CHECK_OK(pw_plan_print(p, &text));
    size_t len = 0;
    buf[0] = 0;
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        if (line[0] != ';') {
            char op[16] = "";
            sscanf(line, "%*d %15s", op);
            const char *name = strstr(line, "; %");
            int n = snprintf(buf + len, cap - len, "%s %s\n", op, name ? name + 2 : "?");
            if (n > 0 && (size_t)n < cap - len) len += (size_t)n;
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
}

static const char *liveness_graph =
    "graph live:\n"
    "    %p = placeholder\n"
    "    %a = call_function f(%p)\n"
    "    %b = call_function f(%a)\n"
    "    %c = call_function f(%a, %b)\n"
    "    %n = call_function live(%c)\n"
    "    %t = call_function pair(%c)\n"
    "    %t0 = getitem(%t, 0)\n"
    "    %d = call_function f(%t0)\n"
    "    %t1 = getitem(%t, 1)\n"
    "    %unused = call_function f(%p)\n"
    "    %m = call_function live(%d)\n"
    "    return (%d, %t1, %b, %p, %n, %m, 7)\n";

static void test_liveness_plan_text(void) {
    pw_ir *g = parse(liveness_graph);
    pw_plan *p = NULL;
    if (g) CHECK_OK(pw_plan_build(g, &toy_opts, &p));
    if (!p) {
        pw_ir_free(g);
        return;
    }
    char outline[4096];
    plan_outline(p, outline, sizeof outline);
    CHECK_STREQ(outline,
                "CALL %a\n"
                "CALL %b\n"
                "CALL %c\n"
                "FREE %a\n"       /* right after its last user %c */
                "CALL %n\n"
                "CALL %t\n"
                "FREE %c\n"
                "GETITEM %t0\n"
                "CALL %d\n"
                "FREE %t0\n"
                "GETITEM %t1\n"
                "FREE %t\n"       /* the tuple goes after its last getitem */
                "CALL %unused\n"
                "FREE %unused\n"  /* nobody uses it: released right after it is made */
                "CALL %m\n"
                "TUPLE %output\n" /* %d, %t1, %b are handed over, not freed */
                "RETURN %output\n");
    CHECK(strstr(outline, "FREE %p") == NULL); /* parameters are never freed */
    CHECK(strstr(outline, "FREE %b") == NULL && strstr(outline, "FREE %d") == NULL);
    /* the same graph gives the same plan, byte for byte */
    char *t1 = NULL, *t2 = NULL;
    pw_plan *again = NULL;
    CHECK_OK(pw_plan_build(g, &toy_opts, &again));
    CHECK_OK(pw_plan_print(p, &t1));
    if (again) CHECK_OK(pw_plan_print(again, &t2));
    CHECK_STREQ(t1, t2);
    CHECK(strstr(t1, "TUPLE    r") && strstr(t1, "(move r"));
    free(t1);
    free(t2);
    pw_plan_free(again);
    CHECK_EQ_INT(pw_plan_num_params(p), 1);
    CHECK_EQ_INT(pw_plan_num_nodes(p), 11); /* 8 calls, 2 getitems, 1 tuple */

    /* and it runs: the pool sees every free */
    toy_reset();
    pw_value x, out;
    CHECK_OK(toy_tensor(42, &x));
    CHECK_OK(pw_plan_run(p, NULL, 0, &x, 1, &out));
    CHECK_EQ_INT(out.kind, PW_VAL_TUPLE);
    if (out.kind == PW_VAL_TUPLE) {
        CHECK_EQ_INT(pw_tuple_size(out.as.tuple), 7);
        /* at %n: p, b, c alive (a already back in the pool) */
        CHECK_EQ_INT(pw_tuple_get(out.as.tuple, 4).as.i, 3);
        /* at %m: p, b, d, t1 alive (c, t0, t, unused released) */
        CHECK_EQ_INT(pw_tuple_get(out.as.tuple, 5).as.i, 4);
        CHECK_EQ_INT(pw_tuple_get(out.as.tuple, 6).as.i, 7);
        /* the parameter in the output is a new reference */
        CHECK_EQ_INT(pw_tensor_refcount(x.as.tensor), 2);
    }
    CHECK_EQ_INT(toy_live_blocks(), 4); /* p + d, t1, b held by the output */
    pw_value_release(out);
    CHECK_EQ_INT(pw_tensor_refcount(x.as.tensor), 1);
    CHECK_EQ_INT(toy_live_blocks(), 1);
    pw_value_release(x);
    CHECK_EQ_INT(toy_live_blocks(), 0);
    pw_plan_free(p);
    pw_ir_free(g);
}

static void test_vllm_plan(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/graphs/vllm_L2.txt", PW_TEST_DATA_DIR);
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse_file(path, &g));
    pw_plan *p = NULL;
    if (g) CHECK_OK(pw_plan_build(g, &toy_opts, &p));
    if (!p) {
        pw_ir_free(g);
        return;
    }
    CHECK_EQ_INT(pw_plan_num_submodules(p), 5);
    CHECK_STREQ(pw_plan_submodule_name(p, 3), "submod_3");
    CHECK(pw_plan_submodule_inlined(p, 1) && pw_plan_submodule_inlined(p, 3));
    CHECK(!pw_plan_submodule_inlined(p, 0) && !pw_plan_submodule_inlined(p, 4));
    char outline[8192];
    plan_outline(p, outline, sizeof outline);
    /* vLLM's code frees getitem_2..4 after the inlined attention, and submod_0
     * after its last getitem; attention's unused result goes at once */
    CHECK(strstr(outline, "GETITEM %getitem_4\nFREE %submod_0\nCALL %submod_1.attn_result\n"
                          "FREE %getitem_2\nFREE %getitem_3\nFREE %getitem_4\n"
                          "FREE %submod_1.attn_result\nCALLSUB %submod_2\nFREE %getitem\n"
                          "FREE %getitem_1\n") != NULL);
    CHECK(strstr(outline, "CALLSUB %submod_4\nFREE %getitem_5\nFREE %getitem_6\nTUPLE %output\n") != NULL);
    /* run it: pieces return 5 results, the last one 1 */
    toy_sub subs[5] = {{"submod_0", 5}, {"", 0}, {"submod_2", 5}, {"", 0}, {"submod_4", 1}};
    pw_callable table[5] = {{toy_sub_call, &subs[0], "submod_0"}, {0}, {toy_sub_call, &subs[2], "submod_2"},
                            {0}, {toy_sub_call, &subs[4], "submod_4"}};
    pw_value args[18];
    for (int i = 0; i < 18; i++) CHECK_OK(toy_tensor(i, &args[i]));
    toy_reset();
    pw_value out;
    CHECK_OK(pw_plan_run(p, table, 5, args, 18, &out));
    CHECK(strncmp(toy.trace, "submod_0(0,1,2,3,4,5,6) vllm.unified_attention_with_output(", 59) == 0);
    CHECK_EQ_INT(toy_live_blocks(), 18 + 1);
    pw_value_release(out);
    /* the C source has the same frees as statements */
    char *c = NULL;
    CHECK_OK(pw_plan_emit_c(p, &c));
    if (c) {
        CHECK(strstr(c, "    PW_RELEASE(v_getitem_2);\n    PW_RELEASE(v_getitem_3);\n    PW_RELEASE(v_getitem_4);\n"
                        "    PW_RELEASE(v_submod_1__attn_result);\n") != NULL);
        CHECK(strstr(c, "pw_status pw_stitch(const pw_stitch_rt *rt") != NULL);
        CHECK(strstr(c, "PW_RELEASE(P_") == NULL); /* parameters are never released */
        free(c);
    }
    for (int i = 0; i < 18; i++) pw_value_release(args[i]);
    CHECK_EQ_INT(toy_live_blocks(), 0);
    pw_plan_free(p);
    pw_ir_free(g);
}

static void test_shared_outputs(void) {
    /* one value in several output places, a nested tuple, a tuple result
     * returned whole and through a getitem */
    pw_ir *g = parse("graph shared:\n"
                     "    %p = placeholder\n"
                     "    %x = call_function f(%p)\n"
                     "    %t = call_function pair(%x)\n"
                     "    %t0 = getitem(%t, 0)\n"
                     "    return (%x, %x, (%x, %t0), %t, [%p, \"s\"])\n");
    pw_plan *p = NULL;
    if (g) CHECK_OK(pw_plan_build(g, &toy_opts, &p));
    if (p) {
        pw_value x, out;
        CHECK_OK(toy_tensor(1, &x));
        CHECK_OK(pw_plan_run(p, NULL, 0, &x, 1, &out));
        pw_tensor *xt = pw_tuple_get(out.as.tuple, 0).as.tensor;
        CHECK(pw_tuple_get(out.as.tuple, 1).as.tensor == xt);
        CHECK_EQ_INT(pw_tensor_refcount(xt), 3); /* three places, one reference each */
        CHECK_EQ_INT(toy_live_blocks(), 4);      /* p, x, pair's two */
        pw_value_release(out);
        CHECK_EQ_INT(toy_live_blocks(), 1);
        pw_value_release(x);
        char *text;
        CHECK_OK(pw_plan_print(p, &text));
        CHECK(strstr(text, "FREE") == NULL); /* everything is handed over */
        free(text);
        pw_plan_free(p);
    }
    pw_ir_free(g);
}

static void test_inlining(void) {
    /* an inlined subgraph returning a tuple: getitems become aliases; one
     * returning a constant; kwargs mapped to placeholders by name */
    pw_ir *g = parse("graph top:\n"
                     "    %p = placeholder\n"
                     "    %q = placeholder\n"
                     "    %s = call_module sub(%p, b=%q)\n"
                     "    %s0 = getitem(%s, 0)\n"
                     "    %s1 = getitem(%s, -1)\n"
                     "    %c = call_module konst(%p)\n"
                     "    %e = call_module ext(%s0, %c)\n"
                     "    return (%e, %s1, %s)\n"
                     "graph sub [splitting]:\n"
                     "    %a = placeholder\n"
                     "    %b = placeholder\n"
                     "    %r = call_function attention(%a, %b)\n"
                     "    %y = call_function f(%a)\n"
                     "    return (%y, %b)\n"
                     "graph konst [splitting]:\n"
                     "    %z = placeholder\n"
                     "    return 5\n");
    pw_plan *p = NULL;
    if (g) CHECK_OK(pw_plan_build(g, &toy_opts, &p));
    if (p) {
        char outline[2048];
        plan_outline(p, outline, sizeof outline);
        CHECK_STREQ(outline, "CALL %s.r\nFREE %s.r\nCALL %s.y\nCALLSUB %e\nTUPLE %output\n"
                             "TUPLE %output\nRETURN %output\n");
        CHECK_EQ_INT(pw_plan_num_submodules(p), 3);
        toy_sub ext = {"ext", 1};
        pw_callable table[3] = {{0}, {0}, {toy_sub_call, &ext, "ext"}};
        pw_value args[2], out, ref;
        CHECK_OK(toy_tensor(10, &args[0]));
        CHECK_OK(toy_tensor(20, &args[1]));
        toy_reset();
        CHECK_OK(pw_plan_run(p, table, 3, args, 2, &out));
        char got[512] = "", want[512] = "";
        size_t gl = 0, wl = 0;
        toy_describe(out, got, sizeof got, &gl);
        char trace[1024];
        snprintf(trace, sizeof trace, "%s", toy.trace);
        toy_reset();
        CHECK_OK(pw_ir_run(g, &toy_opts, table, 3, args, 2, &ref));
        toy_describe(ref, want, sizeof want, &wl);
        CHECK_STREQ(got, want);
        CHECK_STREQ(trace, toy.trace);
        CHECK(strstr(trace, "ext(") && strstr(trace, ",5)")); /* the inlined constant reached ext */
        pw_value_release(out);
        pw_value_release(ref);
        pw_value_release(args[0]);
        pw_value_release(args[1]);
        CHECK_EQ_INT(toy_live_blocks(), 0);
        pw_plan_free(p);
    }
    pw_ir_free(g);
}

static pw_status fail_resolve(void *user, const char *target, pw_callable *out) {
    return toy_resolve(user, strcmp(target, "f") == 0 ? "missing" : target, out);
}

static bool inline_everything(void *user, const pw_ir *g, const char *target) { return true; }

static void build_fails(const char *text, const pw_plan_options *opts, pw_status code, const char *msg) {
    pw_ir *g = parse(text);
    pw_plan *p = (pw_plan *)1;
    if (g) CHECK_ERR(pw_plan_build(g, opts, &p), code, msg);
    CHECK(p == NULL || g == NULL);
    pw_ir_free(g);
}

static void test_build_errors(void) {
    build_fails("graph g:\n    %x = placeholder\n    %y = call_module s(%x)\n    return %y\n"
                "graph s [splitting]:\n    %a = placeholder\n    %b = call_module t(%a)\n    return %b\n",
                &toy_opts, PW_ERR_INVALID_ARG, "graph s: node 'b' (line 7): call_module inside a graph being inlined");
    build_fails("graph g:\n    %x = placeholder\n    %y = getitem(%x, \"k\")\n    return %y\n", &toy_opts,
                PW_ERR_INVALID_ARG, "graph g: node 'y' (line 3): getitem with a non-integer index");
    build_fails("graph g:\n    %y = getitem([1], 0)\n    return %y\n", &toy_opts, PW_ERR_INVALID_ARG,
                "node 'y' (line 2): getitem on a non-tuple (a constant)");
    build_fails("graph g:\n    %x = placeholder\n", &toy_opts, PW_ERR_INVALID_ARG, "graph g: missing output");
    build_fails("graph g:\n    %x = placeholder\n    %y = call_function f(%x)\n    return %y\n",
                &(pw_plan_options){.resolve_op = fail_resolve}, PW_ERR_NOT_FOUND,
                "node 'y' (line 3): resolving op 'f': no op named missing");
    build_fails("graph g:\n    %x = placeholder\n    %y = call_module ext(%x)\n    return %y\n",
                &(pw_plan_options){.resolve_op = toy_resolve, .should_inline = inline_everything},
                PW_ERR_NOT_FOUND, "cannot inline 'ext': there is no subgraph of that name");
    build_fails("graph g:\n    %x = placeholder\n    %y = call_module s(%x, %x)\n    return %y\n"
                "graph s [splitting]:\n    %a = placeholder\n    return %a\n",
                &toy_opts, PW_ERR_INVALID_ARG, "call_module s with 2 arguments, but the subgraph has 1");
    build_fails("graph g:\n    %x = placeholder\n    %y = call_module s(%x, c=%x)\n    return %y\n"
                "graph s [splitting]:\n    %a = placeholder\n    %b = placeholder\n    return %a\n",
                &toy_opts, PW_ERR_INVALID_ARG, "keyword 'c' names no placeholder of the subgraph");
    build_fails("graph g:\n    return 1\n", &(pw_plan_options){.function_name = "not valid"},
                PW_ERR_INVALID_ARG, "function name 'not valid' is not an identifier");
    /* a node kind the code generator does not know (only reachable by
     * corrupting a graph: the IR cannot express one) */
    pw_ir *g = parse("graph g:\n    %x = placeholder\n    %y = call_function f(%x)\n    return %y\n");
    if (g) {
        g->nodes[1].kind = (pw_ir_node_kind)77;
        pw_plan *p = NULL;
        CHECK_ERR(pw_plan_build(g, &toy_opts, &p), PW_ERR_UNSUPPORTED,
                  "graph g: node 'y' (line 3): unsupported node kind 77");
        CHECK_ERR(pw_ir_validate(g), PW_ERR_UNSUPPORTED, "unsupported node kind 77");
        g->nodes[1].kind = PW_IR_CALL_FUNCTION;
        pw_ir_free(g);
    }
}

static void test_run_errors(void) {
    pw_ir *g = parse("graph g:\n"
                     "    %x = placeholder\n"
                     "    %a = call_function f(%x)\n"
                     "    %s = call_module ext(%a)\n"
                     "    %i = getitem(%s, 3)\n"
                     "    %b = call_function f(%i, %a)\n"
                     "    return %b\n");
    pw_plan *p = NULL, *unbound = NULL;
    if (g) {
        CHECK_OK(pw_plan_build(g, &toy_opts, &p));
        CHECK_OK(pw_plan_build(g, NULL, &unbound));
    }
    if (!p || !unbound) {
        pw_plan_free(p);
        pw_ir_free(g);
        return;
    }
    pw_value x, out;
    CHECK_OK(toy_tensor(3, &x));
    toy_sub four = {"ext", 4}, one = {"ext", 1}, two = {"ext", 2};
    pw_callable table[1] = {{toy_sub_call, &four, "ext"}};
    CHECK_ERR(pw_plan_run(p, table, 1, &x, 0, &out), PW_ERR_INVALID_ARG, "0 arguments given, the graph takes 1");
    CHECK_ERR(pw_plan_run(p, table, 0, &x, 1, &out), PW_ERR_INVALID_ARG, "0 submodules given, the plan needs 1");
    pw_callable empty[1] = {{0}};
    CHECK_ERR(pw_plan_run(p, empty, 1, &x, 1, &out), PW_ERR_INVALID_ARG,
              "stitching g: node %s: submodule 0 (ext) has no callable");
    CHECK_EQ_INT(toy_live_blocks(), 1); /* %a was released on the way out */
    table[0].user = &one;
    CHECK_ERR(pw_plan_run(p, table, 1, &x, 1, &out), PW_ERR_INVALID_ARG,
              "node %i: getitem on a non-tuple value (tensor)");
    CHECK_EQ_INT(out.kind, PW_VAL_NONE);
    table[0].user = &two;
    CHECK_ERR(pw_plan_run(p, table, 1, &x, 1, &out), PW_ERR_INVALID_ARG, "node %i: index 3 out of range for a tuple of 2");
    CHECK_EQ_INT(toy_live_blocks(), 1);
    table[0].user = &four;
    toy_reset();
    toy.fail_at = 3; /* the second f */
    CHECK_ERR(pw_plan_run(p, table, 1, &x, 1, &out), PW_ERR_INVALID_ARG,
              "stitching g: node %b: toy op f failed on purpose");
    CHECK_EQ_INT(toy_live_blocks(), 1);
    toy_reset();
    CHECK_OK(pw_plan_run(p, table, 1, &x, 1, &out));
    pw_value_release(out);
    CHECK_ERR(pw_plan_run(unbound, table, 1, &x, 1, &out), PW_ERR_STATE,
              "node %a: op 'f' has no implementation bound");
    CHECK_EQ_INT(toy_live_blocks(), 1);
    pw_value_release(x);
    pw_plan_free(p);
    pw_plan_free(unbound);
    pw_ir_free(g);
}

int main(void) {
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "toy", &toy.pool));
    test_liveness_plan_text();
    test_vllm_plan();
    test_shared_outputs();
    test_inlining();
    test_build_errors();
    test_run_errors();
    CHECK_EQ_INT(toy_live_blocks(), 0);
    pw_pool_free(toy.pool);
    return pw_test_finish("graph_plan");
}
