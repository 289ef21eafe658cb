/* Regressions for what the fuzzers (fuzz/) found, each reduced to the
 * call that failed, plus a replay of every committed seed and reproducer
 * (fuzz/corpus/<target>, fuzz/regressions/<target>) through the parsers, so
 * ordinary and sanitized builds re-check them without libFuzzer. */
#include "piecewise_llm.h"
#include "split_ops.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf.h"
#include "model/graph_cache.h"
#include "model/tokenizer.h"

#include <dirent.h>

#define FUZZ_DIR PW_TEST_DATA_DIR "/../../fuzz"

/* graph_text: a NUL byte inside a comment was kept, cutting the comment
 * short when printed, so print(parse(print(g))) != print(g). Now an error. */
static void test_nul_in_comment(void) {
    static const char full_line[] = "# a\0b\ngraph g:\n    %x = placeholder\n    return %x\n";
    static const char trailing[] = "graph g:  # a\0b\n    %x = placeholder\n    return %x\n";
    pw_ir *g = NULL;
    CHECK_ERR(pw_ir_parse(full_line, sizeof full_line - 1, &g), PW_ERR_PARSE, "line 1:6: NUL byte in a comment");
    CHECK(g == NULL);
    CHECK_ERR(pw_ir_parse(trailing, sizeof trailing - 1, &g), PW_ERR_PARSE, "NUL byte in a comment");
    CHECK(g == NULL);
}

static pw_status toy_op(void *user, const pw_value *args, int nargs, pw_value *out) {
    *out = pw_value_int(nargs);
    return PW_OK;
}

static pw_status toy_resolve(void *user, const char *target, pw_callable *out) {
    *out = (pw_callable){toy_op, NULL, "toy"};
    return PW_OK;
}

/* split_plan: a call with no operands made the plan builder memcpy from a
 * NULL operand array (undefined behaviour caught by UBSan). */
static void test_plan_call_without_operands(void) {
    static const char text[] = "graph g:\n    %x = placeholder\n    %y = call_function relu(%x)\n"
                               "    %z = call_function make()\n    return (%y, %z)\n";
    pw_ir *g = NULL, *split = NULL;
    CHECK_OK(pw_ir_parse(text, (size_t)-1, &g));
    CHECK_OK(pw_split(g, TEST_SPLIT_OPS, &split));
    pw_plan_options opts = {.resolve_op = toy_resolve};
    pw_plan *plan = NULL;
    CHECK_OK(pw_plan_build(split, &opts, &plan));
    pw_plan_free(plan);
    plan = NULL;
    CHECK_OK(pw_plan_build(g, &opts, &plan)); /* unsplit: the calls are top level */
    pw_value out = pw_value_none();
    pw_value arg = pw_value_int(1);
    if (plan) CHECK_OK(pw_plan_run(plan, NULL, 0, &arg, 1, &out));
    pw_value_release(out);
    pw_plan_free(plan);
    pw_ir_free(split);
    pw_ir_free(g);
}

/* Replays: the parsers must return (an error or a result) on every file. */
static int replay_dir(const char *target, const char *kind, pw_status (*one)(const char *, size_t)) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s/%s", FUZZ_DIR, kind, target);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *data = pw_test_read_file(path, &len);
        if (!data) continue;
        one(data, len);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

static pw_status replay_graph(const char *data, size_t len) {
    pw_ir *g = NULL;
    pw_status s = pw_ir_parse(data, len, &g);
    if (s != PW_OK) return s;
    char *a = NULL, *b = NULL;
    pw_ir *again = NULL;
    CHECK_OK(pw_ir_print(g, &a));
    if (a) CHECK_OK(pw_ir_parse(a, (size_t)-1, &again));
    if (again) CHECK_OK(pw_ir_print(again, &b));
    if (a && b) CHECK_STREQ(a, b);
    free(a);
    free(b);
    pw_ir_free(again);
    pw_ir *split = NULL;
    if (pw_split(g, TEST_SPLIT_OPS, &split) == PW_OK) {
        pw_plan_options opts = {.resolve_op = toy_resolve};
        pw_plan *plan = NULL;
        if (pw_plan_build(split, &opts, &plan) == PW_OK) pw_plan_free(plan);
        pw_ir_free(split);
    }
    pw_ir_free(g);
    return PW_OK;
}

/* split_plan inputs start with a mode byte */
static pw_status replay_split(const char *data, size_t len) {
    return len ? replay_graph(data + 1, len - 1) : PW_OK;
}

static pw_status replay_gguf(const char *data, size_t len) {
    pw_gguf *g = NULL;
    pw_status s = pw_gguf_open_memory(data, len, &g);
    if (s != PW_OK) return s;
    pw_tokenizer *t = NULL;
    if (pw_tokenizer_new(g, &t) == PW_OK) {
        int32_t *ids = NULL;
        int64_t n = 0;
        if (pw_tokenizer_encode(t, "Once upon a time", 16, 0, &ids, &n) == PW_OK) pw_host_free(ids);
        pw_tokenizer_free(t);
    }
    pw_gguf_free(g);
    return PW_OK;
}

static pw_status replay_graph_cache(const char *data, size_t len) {
    const pw_kernel *table[PW_KERNEL_COUNT_];
    pw_graph_cache_kernels(PW_DEVICE_CPU, table);
    pw_graph_cache_spec spec = {0, NULL, table, PW_KERNEL_COUNT_,
                                PW_GRAPH_CACHE_ANY_FINGERPRINT | PW_GRAPH_CACHE_ANY_REGIONS |
                                    PW_GRAPH_CACHE_ANY_CHECKSUM};
    pw_graph_cache_entry *entries = NULL;
    size_t n = 0, dropped = 0;
    char why[320];
    pw_status s = pw_graph_cache_parse(data, len, &spec, &entries, &n, &dropped, why, sizeof why);
    pw_graph_cache_entries_free(entries, n);
    return s;
}

static void test_replay(void) {
    static const char *const kinds[] = {"corpus", "regressions"};
    int files = 0;
    for (int k = 0; k < 2; k++) {
        files += replay_dir("graph_text", kinds[k], replay_graph);
        files += replay_dir("split_plan", kinds[k], replay_split);
        files += replay_dir("gguf", kinds[k], replay_gguf);
        files += replay_dir("capture_cache", kinds[k], replay_graph_cache);
    }
    printf("replayed %d fuzz inputs\n", files);
    CHECK(files > 10);
}

int main(void) {
    pw_log_set_level(PW_LOG_ERROR);
    test_nul_in_comment();
    test_plan_call_without_operands();
    test_replay();
    return pw_test_finish("robust_fuzz_regressions");
}
