/* Graph text parser: any byte string either fails with an error or parses
 * to a graph whose canonical print parses back to the same print
 * (print(parse(print(g))) == print(g)); DOT output must not fail on it. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_TEXT) return 0;
    pw_log_set_level(PW_LOG_ERROR);
    pw_ir *g = NULL;
    if (pw_ir_parse((const char *)data, size, &g) != PW_OK) return 0;

    char *first = NULL;
    FUZZ_CHECK(pw_ir_print(g, &first) == PW_OK, "print failed: %s", pw_last_error());
    pw_ir *again = NULL;
    FUZZ_CHECK(pw_ir_parse(first, (size_t)-1, &again) == PW_OK,
               "printed graph does not parse: %s\n--- printed:\n%s", pw_last_error(), first);
    char *second = NULL;
    FUZZ_CHECK(pw_ir_print(again, &second) == PW_OK, "reprint failed: %s", pw_last_error());
    FUZZ_CHECK(strcmp(first, second) == 0, "round trip differs\n--- first:\n%s\n--- second:\n%s",
               first, second);
    FUZZ_CHECK(pw_ir_num_nodes(g) == pw_ir_num_nodes(again), "node count differs");

    pw_ir *copy = NULL;
    FUZZ_CHECK(pw_ir_clone(g, &copy) == PW_OK, "clone failed: %s", pw_last_error());
    char *third = NULL;
    FUZZ_CHECK(pw_ir_print(copy, &third) == PW_OK, "print of clone failed");
    FUZZ_CHECK(strcmp(first, third) == 0, "clone prints differently");

    char *dot = NULL;
    FUZZ_CHECK(pw_ir_to_dot(g, &dot) == PW_OK, "dot failed: %s", pw_last_error());

    free(dot);
    free(third);
    free(second);
    free(first);
    pw_ir_free(copy);
    pw_ir_free(again);
    pw_ir_free(g);
    return 0;
}
