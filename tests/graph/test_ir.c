/* The IR builder and accessors, and the builder's error paths. */
#include "graph/graph_internal.h"
#include "test_util.h"

static void test_build_and_read(void) {
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_new("net", &g));
    if (!g) return;
    int x, w, y, pair, first, out;
    CHECK_OK(pw_ir_add_placeholder(g, "x", &x));
    pw_ir_type t = {.kind = PW_IR_TYPE_TENSOR, .dtype = PW_F16, .ndim = 2, .dims = {PW_IR_DIM_TOKENS, 8}};
    CHECK_OK(pw_ir_set_node_type(g, x, &t));
    CHECK_OK(pw_ir_add_placeholder(g, "w", &w));
    CHECK_OK(pw_ir_add_comment(g, " the matmul"));
    pw_ir_arg items[2] = {pw_ir_arg_int(1), pw_ir_arg_string("a")};
    pw_ir_arg args[3] = {pw_ir_arg_node(x), pw_ir_arg_node(w), pw_ir_arg_list(items, 2)};
    pw_ir_kwarg kw[2] = {{"alpha", pw_ir_arg_float(0.5)}, {"flag", pw_ir_arg_bool(true)}};
    CHECK_OK(pw_ir_add_call_function(g, "y", "ops.matmul", args, 3, kw, 2, &y));
    pw_ir_arg one[1] = {pw_ir_arg_node(y)};
    CHECK_OK(pw_ir_add_call_module(g, "pair", "piece", one, 1, NULL, 0, &pair));
    CHECK_OK(pw_ir_add_getitem(g, "first", pair, 0, &first));
    pw_ir_arg outs[3] = {pw_ir_arg_node(first), pw_ir_arg_node(x), pw_ir_arg_none()};
    CHECK_OK(pw_ir_set_output(g, pw_ir_arg_tuple(outs, 3), &out));

    CHECK_EQ_INT(pw_ir_num_nodes(g), 6);
    CHECK_EQ_INT(pw_ir_num_placeholders(g), 2);
    CHECK_EQ_INT(pw_ir_output_node(g), out);
    CHECK_STREQ(pw_ir_node_name(g, out), "output");
    CHECK_EQ_INT(pw_ir_node_kind_of(g, y), PW_IR_CALL_FUNCTION);
    CHECK_STREQ(pw_ir_node_kind_name(PW_IR_CALL_MODULE), "call_module");
    CHECK_STREQ(pw_ir_node_target(g, y), "ops.matmul");
    CHECK(pw_ir_node_target(g, x) == NULL);
    CHECK_EQ_INT(pw_ir_node_num_args(g, y), 3);
    CHECK_EQ_INT(pw_ir_node_arg(g, y, 2)->kind, PW_IR_ARG_LIST);
    CHECK_STREQ(pw_ir_node_arg(g, y, 2)->as.seq.items[1].as.s, "a");
    CHECK_EQ_INT(pw_ir_node_num_kwargs(g, y), 2);
    CHECK_STREQ(pw_ir_node_kwarg(g, y, 1)->name, "flag");
    CHECK(pw_ir_node_arg(g, y, 3) == NULL && pw_ir_node_kwarg(g, y, 2) == NULL);
    /* users: distinct, in graph order */
    CHECK_EQ_INT(pw_ir_node_num_users(g, x), 2);
    CHECK_EQ_INT(pw_ir_node_user(g, x, 0), y);
    CHECK_EQ_INT(pw_ir_node_user(g, x, 1), out);
    CHECK_EQ_INT(pw_ir_node_num_users(g, pair), 1);
    CHECK_EQ_INT(pw_ir_node_type(g, x)->dims[0], PW_IR_DIM_TOKENS);
    CHECK_EQ_INT(pw_ir_find_node(g, "first"), first);
    CHECK_EQ_INT(pw_ir_find_node(g, "nope"), -1);
    CHECK_EQ_INT(pw_ir_node_line(g, y), 0);
    CHECK_OK(pw_ir_validate(g));

    char *text = NULL;
    CHECK_OK(pw_ir_print(g, &text));
    CHECK_STREQ(text, "graph net:\n"
                      "    %x : f16[s0, 8] = placeholder\n"
                      "    %w = placeholder\n"
                      "    # the matmul\n"
                      "    %y = call_function ops.matmul(%x, %w, [1, \"a\"], alpha=0.5, flag=true)\n"
                      "    %pair = call_module piece(%y)\n"
                      "    %first = getitem(%pair, 0)\n"
                      "    return (%first, %x, none)\n");
    free(text);

    /* subgraphs */
    pw_ir *sub = NULL, *dup = NULL;
    CHECK_OK(pw_ir_new("piece", &sub));
    CHECK_OK(pw_ir_add_subgraph(g, sub));
    CHECK_OK(pw_ir_new("piece", &dup));
    CHECK_ERR(pw_ir_add_subgraph(g, dup), PW_ERR_INVALID_ARG, "duplicate subgraph name 'piece'");
    CHECK_EQ_INT(pw_ir_num_subgraphs(g), 1);
    CHECK(pw_ir_subgraph(g, 0) == sub && pw_ir_find_subgraph(g, "piece") == sub);
    CHECK(pw_ir_subgraph(g, 1) == NULL);
    CHECK(!pw_ir_is_splitting(sub));
    pw_ir_set_splitting(sub, true);
    CHECK(pw_ir_is_splitting(sub));
    /* the subgraph has no output yet, and call_module gives it one argument */
    CHECK_ERR(pw_ir_validate(g), PW_ERR_INVALID_ARG, "call_module piece with 1 arguments, but the subgraph has 0");
    pw_ir_free(g);
}

static void test_builder_errors(void) {
    pw_ir *g = NULL;
    CHECK_ERR(pw_ir_new("1bad", &g), PW_ERR_INVALID_ARG, "graph name '1bad' is not an identifier");
    CHECK_ERR(pw_ir_new(NULL, &g), PW_ERR_INVALID_ARG, "graph name '(null)'");
    CHECK_OK(pw_ir_new("g", &g));
    if (!g) return;
    int x;
    CHECK_OK(pw_ir_add_placeholder(g, "x", &x));
    CHECK_ERR(pw_ir_add_placeholder(g, "x", NULL), PW_ERR_INVALID_ARG, "graph g: duplicate node name 'x'");
    CHECK_ERR(pw_ir_add_placeholder(g, "a-b", NULL), PW_ERR_INVALID_ARG, "node name 'a-b' is not an identifier");
    pw_ir_arg bad[1] = {pw_ir_arg_node(5)};
    CHECK_ERR(pw_ir_add_call_function(g, "y", "f", bad, 1, NULL, 0, NULL), PW_ERR_INVALID_ARG,
              "node 'y': undefined reference to node 5");
    pw_ir_arg ok[1] = {pw_ir_arg_node(x)};
    CHECK_ERR(pw_ir_add_call_function(g, "y", "f..g", ok, 1, NULL, 0, NULL), PW_ERR_INVALID_ARG,
              "target 'f..g' is not a dotted name");
    pw_ir_kwarg kws[2] = {{"k", pw_ir_arg_int(1)}, {"k", pw_ir_arg_int(2)}};
    CHECK_ERR(pw_ir_add_call_function(g, "y", "f", ok, 1, kws, 2, NULL), PW_ERR_INVALID_ARG, "keyword 'k' given twice");
    pw_ir_kwarg badkw[1] = {{"1k", pw_ir_arg_int(1)}};
    CHECK_ERR(pw_ir_add_call_function(g, "y", "f", ok, 1, badkw, 1, NULL), PW_ERR_INVALID_ARG,
              "keyword '1k' is not an identifier");
    pw_ir_arg nullstr[1] = {pw_ir_arg_string(NULL)};
    CHECK_ERR(pw_ir_add_call_function(g, "y", "f", nullstr, 1, NULL, 0, NULL), PW_ERR_INVALID_ARG,
              "string argument is NULL");
    CHECK_ERR(pw_ir_add_call_function(g, "y", "f", NULL, 2, NULL, 0, NULL), PW_ERR_INVALID_ARG, "bad argument arrays");
    pw_ir_type t = {.kind = PW_IR_TYPE_TENSOR, .dtype = PW_F32, .ndim = 5};
    CHECK_ERR(pw_ir_set_node_type(g, x, &t), PW_ERR_INVALID_ARG, "bad tensor type (ndim 5)");
    t.ndim = 1;
    t.dims[0] = -7;
    CHECK_ERR(pw_ir_set_node_type(g, x, &t), PW_ERR_INVALID_ARG, "bad dimension -7");
    CHECK_ERR(pw_ir_set_node_type(g, 9, &t), PW_ERR_INVALID_ARG, "no node 9");
    CHECK_ERR(pw_ir_add_comment(g, "two\nlines"), PW_ERR_INVALID_ARG, "a comment is one line");
    CHECK_ERR(pw_ir_validate(g), PW_ERR_INVALID_ARG, "graph g: missing output");
    CHECK_OK(pw_ir_set_output(g, pw_ir_arg_node(x), NULL));
    CHECK_ERR(pw_ir_set_output(g, pw_ir_arg_node(x), NULL), PW_ERR_INVALID_ARG, "graph g already has an output");
    CHECK_ERR(pw_ir_add_placeholder(g, "late", NULL), PW_ERR_INVALID_ARG, "node 'late' added after the output");
    CHECK_ERR(pw_ir_add_subgraph(g, NULL), PW_ERR_INVALID_ARG, "NULL subgraph");
    CHECK_OK(pw_ir_validate(g));
    /* a failed builder call left the graph unchanged */
    CHECK_EQ_INT(pw_ir_num_nodes(g), 2);
    pw_ir_free(g);
}

static void test_out_of_memory(void) {
    /* every allocation in parse + plan can fail; each failure is an error */
    const char *text = "graph g:\n    %x = placeholder\n    %y = call_function f(%x, [1, \"s\"], k=2.5)\n"
                       "    %z = getitem(%y, 0)\n    return (%z, %y)\n";
    int failures = 0;
    for (int n = 1; n < 400; n++) {
        pw_host_fail_nth(n);
        pw_ir *g = NULL;
        pw_status s = pw_ir_parse(text, (size_t)-1, &g);
        pw_plan *p = NULL;
        char *printed = NULL;
        if (s == PW_OK) s = pw_plan_build(g, NULL, &p);
        if (s == PW_OK) s = pw_plan_print(p, &printed);
        pw_host_fail_nth(0);
        if (s != PW_OK) {
            failures++;
            CHECK(s == PW_ERR_OOM);
        }
        free(printed);
        pw_plan_free(p);
        pw_ir_free(g);
        if (s == PW_OK) break;
    }
    CHECK(failures > 20);
}

int main(void) {
    test_build_and_read();
    test_builder_errors();
    test_out_of_memory();
    return pw_test_finish("graph_ir");
}
