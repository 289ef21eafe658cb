/* Splitting ops must write into buffers the previous piece allocated. */
#include "split_ops.h"
#include "test_util.h"

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/graphs/llama_tiny.txt", PW_TEST_DATA_DIR);
    pw_ir *g, *split;
    CHECK_OK(pw_ir_parse_file(path, &g));
    if (!g) return pw_test_finish("graph_split_check");
    /* attention here returns its result, which o = linear(attn) reads */
    CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &split));
    CHECK_ERR(pw_check_split_for_replay(split), PW_ERR_UNSUPPORTED,
              "returns a value that '");
    CHECK(strstr(pw_last_error(), "op 'attention'") != NULL);
    pw_ir_free(split);
    pw_ir_free(g);

    /* the "attention with output" form passes */
    static const char *ok_text =
        "graph f:\n"
        "    %x = placeholder\n"
        "    %w = placeholder\n"
        "    %q = call_function matmul(%x, %w)\n"
        "    %out = call_function empty_like(%q)\n"
        "    %a = call_function attention(%q, %q, %q, %out, 0)\n"
        "    %y = call_function matmul(%out, %w)\n"
        "    return %y\n";
    CHECK_OK(pw_ir_parse(ok_text, (size_t)-1, &g));
    if (g) {
        CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &split));
        CHECK_OK(pw_check_split_for_replay(split));
        pw_ir_free(split);
        pw_ir_free(g);
    }
    CHECK_ERR(pw_check_split_for_replay(NULL), PW_ERR_INVALID_ARG, "NULL");
    return pw_test_finish("graph_split_check");
}
