/* The text format: exact round trips on the corpus and on generated split
 * graphs, and every parse and validation error with its line and column. */
#include "graph/graph_internal.h"
#include "split_ops.h"
#include "test_util.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const corpus[] = {"vllm_L2.txt", "features.txt", "llama_tiny.txt",
                                     "consecutive_attention.txt"};

static char *print_ir(const pw_ir *g) {
    char *t = NULL;
    CHECK_OK(pw_ir_print(g, &t));
    return t;
}

static void test_corpus_round_trip(void) {
    for (size_t i = 0; i < PW_ARRAY_LEN(corpus); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/graphs/%s", PW_TEST_DATA_DIR, corpus[i]);
        size_t len;
        char *text = pw_test_read_file(path, &len);
        CHECK(text != NULL);
        if (!text) continue;
        pw_ir *g = NULL;
        CHECK_OK(pw_ir_parse(text, len, &g));
        if (!g) {
            free(text);
            continue;
        }
        CHECK_OK(pw_ir_validate(g));
        char *printed = print_ir(g);
        CHECK_STREQ(printed, text); /* byte for byte, comments and blank lines included */
        pw_ir *copy = NULL;
        CHECK_OK(pw_ir_clone(g, &copy));
        char *printed_copy = print_ir(copy);
        CHECK_STREQ(printed_copy, text);
        free(printed_copy);
        pw_ir_free(copy);
        free(printed);
        pw_ir_free(g);
        free(text);
    }
}

static void test_vllm_structure(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/graphs/vllm_L2.txt", PW_TEST_DATA_DIR);
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse_file(path, &g));
    if (!g) return;
    CHECK_STREQ(pw_ir_name(g), "split_gm");
    CHECK_EQ_INT(pw_ir_num_placeholders(g), 18);
    CHECK_EQ_INT(pw_ir_num_subgraphs(g), 2);
    const pw_ir *sub1 = pw_ir_find_subgraph(g, "submod_1");
    CHECK(sub1 && pw_ir_is_splitting(sub1));
    /* the subgraph's placeholder "output" pushes the output node's name to output_1 */
    CHECK_STREQ(pw_ir_node_name(sub1, pw_ir_output_node(sub1)), "output_1");
    int gi = pw_ir_find_node(g, "getitem_2");
    CHECK_EQ_INT(pw_ir_node_kind_of(g, gi), PW_IR_GETITEM);
    CHECK_EQ_INT(pw_ir_node_line(g, gi), 26);
    int sm0 = pw_ir_find_node(g, "submod_0");
    CHECK_EQ_INT(pw_ir_node_num_users(g, sm0), 5);
    CHECK_STREQ(pw_ir_node_target(g, sm0), "submod_0");
    pw_ir_free(g);
}

static void test_generated_round_trip(void) {
    static const int layers[] = {1, 2, 8, 32};
    for (size_t i = 0; i < PW_ARRAY_LEN(layers); i++) {
        pw_ir *g = NULL, *split = NULL, *back = NULL;
        CHECK_OK(pw_ir_synthetic_llama(layers[i], &g));
        CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &split));
        if (!split) {
            pw_ir_free(g);
            continue;
        }
        char *unsplit = print_ir(g), *text = print_ir(split);
        CHECK_OK(pw_ir_parse(text, (size_t)-1, &back));
        if (back) {
            char *again = print_ir(back);
            CHECK_STREQ(again, text);
            CHECK_EQ_INT(pw_ir_num_subgraphs(back), 2 * layers[i] + 1);
            CHECK_OK(pw_ir_validate(back));
            free(again);
        }
        pw_ir *g2 = NULL;
        CHECK_OK(pw_ir_parse(unsplit, (size_t)-1, &g2));
        if (g2) {
            char *again = print_ir(g2);
            CHECK_STREQ(again, unsplit);
            free(again);
        }
        pw_ir_free(g2);
        free(unsplit);
        free(text);
        pw_ir_free(back);
        pw_ir_free(split);
        pw_ir_free(g);
    }
}

static void test_floats(void) {
    static const double values[] = {0.0, 1.0, -2.5, 1e-5, 0.1, 1.0 / 3.0, 6.02214076e23, 1e300, -0.0};
    static const char *const texts[] = {"0.0", "1.0", "-2.5", "1e-05", "0.1", "0.3333333333333333",
                                        "6.02214076e+23", "1e+300", "-0.0"};
    for (size_t i = 0; i < PW_ARRAY_LEN(values); i++) {
        char buf[64];
        pw_ir_format_float(values[i], buf, sizeof buf);
        CHECK_STREQ(buf, texts[i]);
    }
}

typedef struct bad_text {
    const char *text;
    const char *message;
} bad_text;

static void test_parse_errors(void) {
    static const bad_text cases[] = {
        {"graph g:\n    %x = placeholder\n    %y = call_function f(%z)\n    return %y\n",
         "line 3:26: undefined reference '%z'"},
        {"graph g:\n    %y = call_function f(%z)\n    %z = placeholder\n    return %y\n",
         "line 2:26: use of '%z' before its definition (line 3)"},
        {"graph g:\n    %x = placeholder\n    %x = placeholder\n    return %x\n",
         "line 3:5: duplicate node name '%x' (first defined on line 2)"},
        {"graph g:\n    %x = get_attr w\n", "line 2:10: unsupported node kind 'get_attr'"},
        {"graph g:\n    %x = call_function f(\"abc)\n", "line 2:26: unterminated string"},
        {"graph g:\n    %x = call_function f(\"\\q\")\n", "line 2:27: unknown escape '\\q'"},
        {"graph g:\n    %x placeholder\n", "line 2:8: expected '=' after the node name"},
        {"    %x = placeholder\n", "line 1:5: node outside a graph"},
        {"graph g:\n    return 1\n    %x = placeholder\n", "line 3:5: node after 'return'"},
        {"graph g:\n    return (1)\n", "line 2:15: a one-element tuple needs a trailing comma"},
        {"graph g:\n    %x = call_function f(a=1, 2)\n", "line 2:31: positional argument after keyword"},
        {"graph g:\n    %x = call_function f(a=1, a=2)\n", "line 2:31: keyword 'a' given twice"},
        {"graph g:\n    %x : f99[2] = placeholder\n", "line 2:10: unknown type 'f99'"},
        {"graph g:\n    %x : f32[1, 2, 3, 4, 5] = placeholder\n", "line 2:26: more than 4 dimensions"},
        {"graph g:\n    %x : f32[s1] = placeholder\n", "line 2:14: a dimension is an integer or s0"},
        {"graph g:\n    return 1.2.3\n", "line 2:15: bad number"},
        {"graph g:\n    return 99999999999999999999\n", "line 2:12: integer 99999999999999999999 out of range"},
        {"graph g:\n    return 1\ngraph g:\n    return 2\n", "line 3:7: duplicate graph name 'g'"},
        {"# nothing\n", "no graph in the text"},
        {"graph g:\n    return foo\n", "line 2:12: unexpected 'foo'"},
        {"graph g:\n    return 1 2\n", "line 2:14: unexpected text at the end of the line"},
        {"graph g:\n    %x = call_function f(1,,)\n", "line 2:28: expected a value"},
        {"graph g:\n    %x = call_function (1)\n", "line 2:24: expected a target name"},
        {"graph g [weird]:\n", "line 1:10: expected 'splitting'"},
        {"graph g\n", "line 1:8: expected ':' after the graph name"},
        {"hello\n", "line 1:1: expected '%name = ...', 'return' or 'graph NAME:'"},
        {"graph g:\n    return \"\\x4\"\n", "line 2:15: \\x needs two hex digits"},
        {"graph g:\n    return 1e\n", "line 2:14: bad exponent"},
    };
    for (size_t i = 0; i < PW_ARRAY_LEN(cases); i++) {
        pw_ir *g = (pw_ir *)1;
        CHECK_ERR(pw_ir_parse(cases[i].text, (size_t)-1, &g), PW_ERR_PARSE, cases[i].message);
        CHECK(g == NULL);
    }
    /* nesting has a limit, and reaching it is an error, not a crash */
    char deep[200];
    strcpy(deep, "graph g:\n    return ");
    size_t n = strlen(deep);
    for (int i = 0; i < 40; i++) deep[n++] = '[';
    deep[n] = 0;
    pw_ir *g = NULL;
    CHECK_ERR(pw_ir_parse(deep, (size_t)-1, &g), PW_ERR_PARSE, "nested deeper than 32");
    CHECK_ERR(pw_ir_parse_file("/nonexistent/graph.txt", &g), PW_ERR_IO,
              "graph file: cannot open '/nonexistent/graph.txt'");
}

/* Only a regular file is read, and only up to the limit: a FIFO with no
 * writer neither blocks the open nor the read, a device is never read
 * (/dev/zero would never end), a file past 64 MiB is refused unread. */
static void test_files_that_are_not_graphs(void) {
    pw_ir *g = NULL;
    char dir[] = "/tmp/pw_test_text_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char fifo[64], big[64];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(big, sizeof big, "%s/big.txt", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_ERR(pw_ir_parse_file(fifo, &g), PW_ERR_IO, "is not a regular file (it is a FIFO)");
    CHECK_ERR(pw_ir_parse_file("/dev/zero", &g), PW_ERR_IO,
              "is not a regular file (it is a character device)");
    CHECK_ERR(pw_ir_parse_file(dir, &g), PW_ERR_IO, "is not a regular file (it is a directory)");
    FILE *f = fopen(big, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fseeko(f, ((off_t)64 << 20) + 1, SEEK_SET) == 0); /* sparse: no disk used */
        CHECK(fputc('\n', f) != EOF);
        CHECK(fclose(f) == 0);
    }
    CHECK_ERR(pw_ir_parse_file(big, &g), PW_ERR_IO, "larger than the 67108864-byte limit");
    CHECK(g == NULL);
    unlink(fifo);
    unlink(big);
    rmdir(dir);
}

static void test_validation_errors(void) {
    static const bad_text cases[] = {
        {"graph g:\n    %t : f32[s0] = placeholder\n    %a = getitem(%t, 0)\n    return %a\n",
         "graph g: node 'a' (line 3): getitem on a non-tuple ('t' is a tensor)"},
        {"graph g:\n    %a = getitem(3, 0)\n    return %a\n",
         "graph g: node 'a' (line 2): getitem on a non-tuple (a constant)"},
        {"graph g:\n    %t = placeholder\n    %a = getitem(%t, \"x\")\n    return %a\n",
         "graph g: node 'a' (line 3): getitem with a non-integer index"},
        {"graph g:\n    %t = placeholder\n    %a = getitem(%t, 1.0)\n    return %a\n",
         "getitem with a non-integer index"},
        {"graph g:\n    %t = placeholder\n", "graph g: missing output"},
        {"graph g:\n    %t = placeholder\n    %c = call_module s(%t)\n    return %c\n"
         "graph s:\n    %a = placeholder\n    %b = placeholder\n    return %a\n",
         "node 'c' (line 3): call_module s with 1 arguments, but the subgraph has 2 placeholders"},
        {"graph g:\n    %t = placeholder\n    return %t\ngraph s:\n    %a = placeholder\n",
         "graph s: missing output"},
    };
    for (size_t i = 0; i < PW_ARRAY_LEN(cases); i++) {
        pw_ir *g = NULL;
        CHECK_OK(pw_ir_parse(cases[i].text, (size_t)-1, &g));
        if (!g) continue;
        CHECK_ERR(pw_ir_validate(g), PW_ERR_INVALID_ARG, cases[i].message);
        pw_ir_free(g);
    }
}

static void test_dot(void) {
    pw_ir *g = NULL, *split = NULL;
    CHECK_OK(pw_ir_synthetic_llama(2, &g));
    CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &split));
    char *dot = NULL;
    if (split) CHECK_OK(pw_ir_to_dot(split, &dot));
    if (dot) {
        CHECK(strncmp(dot, "digraph \"llama\" {", 17) == 0);
        CHECK(strstr(dot, "subgraph \"cluster_submod_1\"") != NULL);
        CHECK(strstr(dot, "label=\"submod_1 (splitting)\"") != NULL);
        CHECK(strstr(dot, "\"llama.submod_0\" -> \"submod_0.input_ids\" [style=dashed") != NULL);
        CHECK(strstr(dot, "\"submod_1.l0_attn\" [label=\"%l0_attn\\ncall_function attention\", style=filled") != NULL);
        CHECK(strstr(dot, "\"llama.getitem\" -> \"llama.submod_2\"") != NULL ||
              strstr(dot, "\"llama.getitem\" -> \"llama.submod_1\"") != NULL);
        size_t open = 0, close = 0;
        for (const char *c = dot; *c; c++) open += *c == '{', close += *c == '}';
        CHECK_EQ_INT(open, close);
        free(dot);
    }
    pw_ir_free(split);
    pw_ir_free(g);
}

int main(void) {
    test_corpus_round_trip();
    test_vllm_structure();
    test_generated_round_trip();
    test_floats();
    test_parse_errors();
    test_files_that_are_not_graphs();
    test_validation_errors();
    test_dot();
    return pw_test_finish("graph_text");
}
