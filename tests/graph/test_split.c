/* The splitter's rules (pw_split, include/piecewise/graph.h). */
#include "graph/graph_internal.h"
#include "split_ops.h"
#include "test_util.h"

static pw_ir *split_text(const char *text, const char *const *ops, int nops) {
    pw_ir *g = NULL, *s = NULL;
    CHECK_OK(pw_ir_parse(text, (size_t)-1, &g));
    if (g) CHECK_OK(pw_split(g, ops, nops, &s));
    pw_ir_free(g);
    return s;
}

static char *print_ir(const pw_ir *g) {
    char *t = NULL;
    CHECK_OK(pw_ir_print(g, &t));
    return t;
}

static void test_consecutive_and_getitem(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/graphs/consecutive_attention.txt", PW_TEST_DATA_DIR);
    pw_ir *g = NULL, *s = NULL;
    CHECK_OK(pw_ir_parse_file(path, &g));
    if (g) CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &s));
    if (!s) {
        pw_ir_free(g);
        return;
    }
    char *text = print_ir(s);
    CHECK_STREQ(text,
                "# Two splitting ops in a row share one subgraph; a getitem follows its producer.\n"
                "graph consecutive:\n"
                "    %x = placeholder\n"
                "    %submod_0 = call_module submod_0(%x)\n"
                "    %submod_1 = call_module submod_1(%submod_0)\n"
                "    %getitem = getitem(%submod_1, 0)\n"
                "    %getitem_1 = getitem(%submod_1, 1)\n"
                "    %submod_2 = call_module submod_2(%getitem_1, %getitem)\n"
                "    %submod_3 = call_module submod_3(%submod_2)\n"
                "    return %submod_3\n"
                "\n"
                "graph submod_0:\n"
                "    %x = placeholder\n"
                "    %a = call_function prep(%x)\n"
                "    return %a\n"
                "\n"
                "graph submod_1 [splitting]:\n"
                "    %a = placeholder\n"
                "    %r1 = call_function unified_attention(%a, 0)\n"
                "    %r2 = call_function vllm.unified_attention_with_output(%a, %r1)\n"
                "    %first = getitem(%r2, 0)\n"
                "    return (%r1, %first)\n"
                "\n"
                "graph submod_2:\n"
                "    %first = placeholder\n"
                "    %r1 = placeholder\n"
                "    %b = call_function post(%first, %r1)\n"
                "    return %b\n"
                "\n"
                "graph submod_3 [splitting]:\n"
                "    %b = placeholder\n"
                "    %r3 = call_function attention(%b)\n"
                "    return %r3\n");
    free(text);
    CHECK_OK(pw_ir_validate(s));
    pw_ir_free(s);
    pw_ir_free(g);
}

static void test_custom_ops_and_edges(void) {
    static const char *text = "graph g:\n"
                              "    %x = placeholder\n"
                              "    %y = placeholder\n"
                              "    %a = call_function my_split(%x)\n"
                              "    %b = call_function f(%a, %y)\n"
                              "    %unused = call_function g(%y)\n"
                              "    %c = call_function my_split(%b, 2)\n"
                              "    return (%c, %a, 3)\n";
    const char *const ops[] = {"my_split"};
    pw_ir *s = split_text(text, ops, 1);
    if (!s) return;
    CHECK_EQ_INT(pw_ir_num_subgraphs(s), 3);
    CHECK(pw_ir_is_splitting(pw_ir_subgraph(s, 0)));
    CHECK(!pw_ir_is_splitting(pw_ir_subgraph(s, 1)));
    CHECK(pw_ir_is_splitting(pw_ir_subgraph(s, 2)));
    /* an unused value stays inside its subgraph; a subgraph with no value
     * needed later returns () */
    const pw_ir *mid = pw_ir_subgraph(s, 1);
    CHECK(pw_ir_find_node(mid, "unused") >= 0);
    char *t = print_ir(s);
    CHECK(strstr(t, "    %submod_0 = call_module submod_0(%x)\n    %submod_1 = call_module submod_1(%submod_0, %y)\n"
                    "    %submod_2 = call_module submod_2(%submod_1)\n    return (%submod_2, %submod_0, 3)\n") != NULL);
    free(t);
    /* the attention ops do not split this graph: one plain subgraph */
    pw_ir *whole = split_text(text, TEST_SPLIT_OPS);
    if (whole) {
        CHECK_EQ_INT(pw_ir_num_subgraphs(whole), 1);
        CHECK(!pw_ir_is_splitting(pw_ir_subgraph(whole, 0)));
    }
    pw_ir_free(whole);
    pw_ir_free(s);
}

static void test_synthetic_shape(void) {
    for (int layers = 1; layers <= 8; layers *= 2) {
        pw_ir *g = NULL, *s = NULL;
        CHECK_OK(pw_ir_synthetic_llama(layers, &g));
        if (g) CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &s));
        if (!s) {
            pw_ir_free(g);
            continue;
        }
        CHECK_EQ_INT(pw_ir_num_subgraphs(s), 2 * layers + 1);
        for (int i = 0; i < pw_ir_num_subgraphs(s); i++) {
            const pw_ir *sub = pw_ir_subgraph(s, i);
            char name[32];
            snprintf(name, sizeof name, "submod_%d", i);
            CHECK_STREQ(pw_ir_name(sub), name);
            CHECK_EQ_INT(pw_ir_is_splitting(sub), i % 2 == 1);
        }
        /* as in vLLM's split: each piece but the last hands five values on */
        int getitems = 0;
        for (int i = 0; i < pw_ir_num_nodes(s); i++) getitems += pw_ir_node_kind_of(s, i) == PW_IR_GETITEM;
        CHECK_EQ_INT(getitems, 5 * layers);
        CHECK_EQ_INT(pw_ir_num_placeholders(s), pw_ir_num_placeholders(g));
        pw_ir_free(s);
        pw_ir_free(g);
    }
}

static void test_split_errors(void) {
    pw_ir *g = NULL, *s = NULL;
    CHECK_OK(pw_ir_parse("graph g:\n    %x = placeholder\n    %y = call_module m(%x)\n    return %y\n",
                         (size_t)-1, &g));
    if (g) CHECK_ERR(pw_split(g, TEST_SPLIT_OPS, &s), PW_ERR_INVALID_ARG,
                     "graph g: node 'y' (line 3): cannot split a graph that already has call_module nodes");
    pw_ir_free(g);
    CHECK_OK(pw_ir_parse("graph g:\n    %x = placeholder\n", (size_t)-1, &g));
    if (g) CHECK_ERR(pw_split(g, TEST_SPLIT_OPS, &s), PW_ERR_INVALID_ARG, "missing output");
    CHECK(s == NULL);
    pw_ir_free(g);
    /* the caller names the splitting ops: the graph layer knows none */
    CHECK_OK(pw_ir_parse("graph g:\n    %x = placeholder\n    %y = call_function attention(%x)\n"
                         "    return %y\n",
                         (size_t)-1, &g));
    if (g) {
        CHECK_ERR(pw_split(g, NULL, 0, &s), PW_ERR_INVALID_ARG, "pw_split: no splitting ops given");
        CHECK_ERR(pw_split(g, test_split_ops, 0, &s), PW_ERR_INVALID_ARG,
                  "pw_split: no splitting ops given");
        CHECK_ERR(pw_split(g, NULL, 2, &s), PW_ERR_INVALID_ARG, "split_ops NULL");
        const char *const holes[] = {"attention", NULL};
        CHECK_ERR(pw_split(g, holes, 2, &s), PW_ERR_INVALID_ARG, "pw_split: splitting op 1 is NULL");
        const char *const empty[] = {""};
        CHECK_ERR(pw_split(g, empty, 1, &s), PW_ERR_INVALID_ARG, "pw_split: splitting op 0 is empty");
        CHECK(s == NULL);
        /* only what the caller names splits */
        const char *const other[] = {"matmul"};
        CHECK_OK(pw_split(g, other, 1, &s));
        if (s) {
            CHECK_EQ_INT(pw_ir_num_subgraphs(s), 1);
            CHECK(!pw_ir_is_splitting(pw_ir_subgraph(s, 0)));
        }
        pw_ir_free(s);
    }
    pw_ir_free(g);
}

/* Found by fuzzing: a graph named like a generated submodule. The split
 * document must still parse back, so the stitching graph gets a suffix. */
static void test_name_collision(void) {
    static const char *text =
        "graph submod_0:\n"
        "    %a = placeholder\n"
        "    %b = call_function mm(%a, %a)\n"
        "    %c = call_function attention(%b, %b, %b)\n"
        "    return %c\n";
    pw_ir *g = NULL, *split = NULL, *back = NULL;
    char *printed = NULL;
    CHECK_OK(pw_ir_parse(text, (size_t)-1, &g));
    if (!g) return;
    CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &split));
    if (split) {
        CHECK_STREQ(pw_ir_name(split), "submod_0_split");
        CHECK_OK(pw_ir_print(split, &printed));
        if (printed) CHECK_OK(pw_ir_parse(printed, (size_t)-1, &back));
    }
    free(printed);
    pw_ir_free(back);
    pw_ir_free(split);
    pw_ir_free(g);
}

int main(void) {
    test_name_collision();
    test_consecutive_and_getitem();
    test_custom_ops_and_edges();
    test_synthetic_shape();
    test_split_errors();
    return pw_test_finish("graph_split");
}
