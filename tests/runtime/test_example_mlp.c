/* Compiles and runs examples/mlp.c (the capture chain on a non-LLM graph
 * with its own kernels): its output names every route, the exact capture
 * counts, the graph pool's bytes as the memory plan predicted them (equal
 * to what the capture reserved), the relocated graphs and a warm start from the graph cache that
 * runs no op of a piece, and it fails unless every served batch equals its eager run bit
 * for bit. Also checks that each code block of docs/example-mlp.md is
 * verbatim in the file, so neither rots. */
#include "test_util.h"

#include <unistd.h>

#define main mlp_example_main
#include "../../examples/mlp.c"
#undef main

static const char *const EXPECTED =
    "mlp: 4 pieces around the masked_normalize ops, 7 submodules\n"
    "graph pool: 2097152 bytes predicted by the dry run, 2097152 reserved by the capture\n"
    "captured 19 graphs for 7 descriptors: PIECEWISE 4 per piece, FULL 3\n"
    "layer 2: 7 graphs relocated from layer 1's instead of captured by running it\n"
    " 1 rows decode  -> FULL      at  1 rows: equal to eager\n"
    " 3 rows decode  -> FULL      at  4 rows: equal to eager\n"
    " 3 rows mixed   -> PIECEWISE at  4 rows: equal to eager\n"
    " 5 rows mixed   -> PIECEWISE at  8 rows: equal to eager\n"
    " 8 rows mixed   -> PIECEWISE at  8 rows: equal to eager\n"
    "12 rows mixed   -> NONE      at 12 rows: equal to eager\n"
    "warm start: 12 programs read; 19 graphs captured from 28 program runs, 0 ops run\n"
    " 3 rows decode  -> FULL      at  4 rows: equal to eager\n"
    " 3 rows mixed   -> PIECEWISE at  4 rows: equal to eager\n"
    " 5 rows mixed   -> PIECEWISE at  8 rows: equal to eager\n"
    "lazy capture, a budget of two sizes' graphs:\n"
    " 3 rows mixed   -> NONE      at  3 rows, no graph yet: equal to eager\n"
    " 3 rows mixed   -> PIECEWISE at  4 rows: equal to eager\n"
    " 1 rows mixed   -> PIECEWISE at  4 rows, padded to a captured size: equal to eager\n"
    " 6 rows mixed   -> NONE      at  6 rows, no graph yet: equal to eager\n"
    " 1 rows mixed   -> PIECEWISE at  1 rows: equal to eager\n"
    " 3 rows mixed   -> PIECEWISE at  8 rows, padded to a captured size: equal to eager\n"
    "lazy: 4 sizes captured, 2 evicted, 2 steps padded, 2 eager\n";

static void test_example_runs(void) {
    pw_counters_reset();
    int rc = -1;
    char *printed = pw_test_run_printing(mlp_example_main, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(printed != NULL);
    if (printed) CHECK_STREQ(printed, EXPECTED);
    free(printed);
    /* 19 in the memory plan's dry run, 19 up front, 19 at the warm start,
     * and 4 sizes lazily (a PIECEWISE size is 4 graphs) */
    pw_wrapper_counters c;
    pw_counters_get(&c);
    CHECK_EQ_INT(c.graphs_captured, 19 + 19 + 19 + 4 * 4);
    CHECK_EQ_INT(pw_graph_wrappers_count(), 0); /* the modules freed every wrapper */
}

static void test_doc_blocks_are_in_the_example(void) {
    char root[1024], path[1200];
    pw_test_source_root(root, sizeof root);
    snprintf(path, sizeof path, "%s/examples/mlp.c", root);
    size_t n_src = 0, n_doc = 0;
    char *src = pw_test_read_file(path, &n_src);
    snprintf(path, sizeof path, "%s/docs/example-mlp.md", root);
    char *doc = pw_test_read_file(path, &n_doc);
    CHECK(src != NULL);
    CHECK(doc != NULL);
    int blocks = 0;
    for (char *at = doc; src && doc && (at = strstr(at, "```c\n")) != NULL;) {
        char *start = at + 5, *end = strstr(start, "\n```");
        CHECK(end != NULL);
        if (!end) break;
        end[1] = '\0'; /* keep the block's last newline */
        if (!strstr(src, start))
            fprintf(stderr, "docs/example-mlp.md: this block is not in examples/mlp.c:\n%s", start);
        CHECK(strstr(src, start) != NULL);
        blocks++;
        at = end + 2;
    }
    CHECK(blocks >= 5);
    free(src);
    free(doc);
}

int main(void) {
    test_example_runs();
    test_doc_blocks_are_in_the_example();
    return pw_test_finish("runtime_example_mlp");
}
