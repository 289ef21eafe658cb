/* Every failure of pw_split reports its own message, whatever the thread's
 * message held before: the message is unspecified after a success, so the
 * splitter may not read it (it used to test it for emptiness to decide
 * whether to add "out of memory splitting"). */
#include "graph/graph_internal.h"
#include "split_ops.h"
#include "test_util.h"

static const char graph_text[] = "graph g:\n"
                                 "    %x = placeholder\n"
                                 "    %a = call_function relu(%x)\n"
                                 "    %b = call_function attention(%a)\n"
                                 "    %c = call_function relu(%b)\n"
                                 "    return %c\n";

static void test_oom_reports_its_own_message(void) {
    pw_ir *g = NULL;
    CHECK_OK(pw_ir_parse(graph_text, (size_t)-1, &g));
    if (!g) return;
    int failures = 0;
    /* every allocation of the split in turn, until one run succeeds */
    for (int64_t nth = 1; nth < 10000; nth++) {
        pw_error(PW_ERR_PARSE, "a stale message from an earlier failure");
        pw_ir *s = NULL;
        pw_host_fail_nth(nth);
        pw_status st = pw_split(g, TEST_SPLIT_OPS, &s);
        pw_host_fail_nth(0);
        if (st == PW_OK) {
            pw_ir_free(s);
            break;
        }
        failures++;
        CHECK_EQ_INT(st, PW_ERR_OOM);
        CHECK(s == NULL);
        /* "out of host memory ..." or the context of the IR call that ran out */
        CHECK(strstr(pw_last_error(), "out of ") != NULL && strstr(pw_last_error(), "memory") != NULL);
        CHECK(strstr(pw_last_error(), "stale") == NULL);
    }
    CHECK(failures > 5); /* the loop really went through the allocations */
    pw_ir_free(g);
}

int main(void) {
    test_oom_reports_its_own_message();
    return pw_test_finish("graph_split_errors");
}
