/* Compiles and runs examples/wrap_function.c, and checks that the code in
 * docs/example-wrap-your-function.md is exactly that file, so neither rots. */
#include "test_util.h"

#include <unistd.h>

#define main wrap_function_example_main
#include "../../examples/wrap_function.c"
#undef main

static void test_example_runs(void) {
    pw_counters_reset();
    int rc = -1;
    char *printed = pw_test_run_printing(wrap_function_example_main, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(printed != NULL);
    if (printed) CHECK_STREQ(printed, "PIECEWISE graph for 8 tokens: y = 1 3 5 7 9\n");
    free(printed);
    pw_wrapper_counters c;
    pw_counters_get(&c);
    CHECK_EQ_INT(c.graphs_captured, 11); /* 1, 2, 4, 8, 16, ..., 64 */
    CHECK_EQ_INT(c.replays, 1);
    CHECK_EQ_INT(c.pass_throughs, 11); /* the warm-up runs */
}

static void test_doc_matches_example(void) {
    char root[1024], path[1200];
    pw_test_source_root(root, sizeof root);
    snprintf(path, sizeof path, "%s/examples/wrap_function.c", root);
    size_t n_src = 0, n_doc = 0;
    char *src = pw_test_read_file(path, &n_src);
    snprintf(path, sizeof path, "%s/docs/example-wrap-your-function.md", root);
    char *doc = pw_test_read_file(path, &n_doc);
    CHECK(src != NULL);
    CHECK(doc != NULL);
    if (src && doc) {
        const char *fence = "```c\n";
        char *start = strstr(doc, fence);
        CHECK(start != NULL);
        if (start) {
            start += strlen(fence);
            char *end = strstr(start, "\n```");
            CHECK(end != NULL);
            if (end) {
                end[1] = '\0'; /* keep the final newline */
                if (strcmp(start, src) != 0)
                    fprintf(stderr, "docs/example-wrap-your-function.md's code block differs from "
                                    "examples/wrap_function.c; copy the file into the doc\n");
                CHECK(strcmp(start, src) == 0);
            }
        }
    }
    free(src);
    free(doc);
}

int main(void) {
    test_example_runs();
    test_doc_matches_example();
    return pw_test_finish("runtime_example");
}
