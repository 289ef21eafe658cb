/* Splitting and stitching-plan building on whatever parses: split with the
 * default splitting ops (or, chosen by the input's first byte, a custom
 * list), build the plan with a toy op resolver, disassemble and emit C, and
 * run the plan against the reference evaluator pw_ir_run. Both run the same
 * toy ops, so when both succeed their results must agree. */
#include "fuzz_common.h"
#include "core/internal.h"
#include "pw_testing.h"

#include <math.h>

/* Every op and submodule returns (hash of its arguments, argument count),
 * so getitem 0/1/-1/-2 works on any call result. */
static int64_t value_hash(pw_value v) {
    switch (v.kind) {
    case PW_VAL_INT: return v.as.i;
    case PW_VAL_BOOL: return v.as.b ? 3 : 5;
    case PW_VAL_FLOAT: return isfinite(v.as.f) ? (int64_t)fmod(v.as.f * 7.0, 1000003.0) : 11;
    case PW_VAL_STRING: {
        int64_t h = 13;
        for (const char *c = v.as.s; *c; c++) h = (h * 31 + (unsigned char)*c) % 1000003;
        return h;
    }
    case PW_VAL_TUPLE: {
        int64_t h = 17;
        for (int i = 0; i < pw_tuple_size(v.as.tuple); i++)
            h = (h * 37 + value_hash(pw_tuple_get(v.as.tuple, i))) % 1000003;
        return h;
    }
    default: return 19;
    }
}

static pw_status toy_call(void *user, const pw_value *args, int nargs, pw_value *out) {
    int64_t h = (int64_t)(uintptr_t)user % 101;
    for (int i = 0; i < nargs; i++) h = (h * 41 + value_hash(args[i])) % 1000003;
    pw_tuple *t;
    PW_TRY(pw_tuple_new(2, &t));
    pw_tuple_set(t, 0, pw_value_int(h));
    pw_tuple_set(t, 1, pw_value_int(nargs));
    *out = pw_value_tuple(t);
    return PW_OK;
}

static pw_status toy_resolve(void *user, const char *target, pw_callable *out) {
    size_t h = 0;
    for (const char *c = target; *c; c++) h = h * 31 + (unsigned char)*c;
    *out = (pw_callable){toy_call, (void *)(uintptr_t)(h % 97 + 1), "fuzz_op"};
    return PW_OK;
}

static bool inline_even(void *user, const pw_ir *stitch, const char *target) {
    return pw_ir_find_subgraph(stitch, target) && strlen(target) % 2 == 0;
}

#define MAX_PARAMS 64
#define MAX_SUBMODS 256

static void build_and_run(const pw_ir *stitch, bool custom_inline) {
    pw_plan_options opts = {0};
    opts.resolve_op = toy_resolve;
    if (custom_inline) opts.should_inline = inline_even;
    pw_plan *plan = NULL;
    if (pw_plan_build(stitch, &opts, &plan) != PW_OK) return;

    char *text = NULL, *csrc = NULL;
    FUZZ_CHECK(pw_plan_print(plan, &text) == PW_OK, "plan print failed: %s", pw_last_error());
    FUZZ_CHECK(pw_plan_emit_c(plan, &csrc) == PW_OK, "emit C failed: %s", pw_last_error());
    free(text);
    free(csrc);

    int nparams = pw_plan_num_params(plan);
    int nsub = pw_plan_num_submodules(plan);
    if (nparams <= MAX_PARAMS && nsub <= MAX_SUBMODS) {
        pw_value args[MAX_PARAMS];
        for (int i = 0; i < nparams; i++) args[i] = pw_value_int(i + 1);
        pw_callable subs[MAX_SUBMODS];
        for (int i = 0; i < nsub; i++) subs[i] = (pw_callable){toy_call, (void *)(uintptr_t)(i + 200), "fuzz_sub"};
        pw_value got = pw_value_none(), want = pw_value_none();
        pw_status sp = pw_plan_run(plan, subs, nsub, args, nparams, &got);
        pw_status sr = pw_ir_run(stitch, &opts, subs, nsub, args, nparams, &want);
        if (sp == PW_OK && sr == PW_OK)
            FUZZ_CHECK(value_hash(got) == value_hash(want) && got.kind == want.kind,
                       "plan and reference evaluator disagree");
        pw_value_release(got);
        pw_value_release(want);
    }
    pw_plan_free(plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > FUZZ_MAX_TEXT) return 0;
    pw_log_set_level(PW_LOG_ERROR);
    uint8_t mode = data[0];
    pw_ir *g = NULL;
    if (pw_ir_parse((const char *)data + 1, size - 1, &g) != PW_OK) return 0;

    /* The graph as written may already be a stitching graph. */
    build_and_run(g, mode & 1);

    static const char *const custom_ops[] = {"attn", "relu", "add", "mm"};
    /* the model's attention and vLLM's, as vLLM's graphs name them */
    static const char *const attention_ops[] = {"attention", "unified_attention",
                                                "unified_attention_with_output"};
    pw_ir *split = NULL;
    pw_status s = (mode & 2) ? pw_split(g, custom_ops, (int)(mode >> 2) % 5, &split)
                             : pw_split(g, attention_ops, 3, &split);
    if (s == PW_OK) {
        char *printed = NULL;
        FUZZ_CHECK(pw_ir_print(split, &printed) == PW_OK, "print split failed: %s", pw_last_error());
        pw_ir *reparsed = NULL;
        FUZZ_CHECK(pw_ir_parse(printed, (size_t)-1, &reparsed) == PW_OK,
                   "split graph does not parse back: %s\n%s", pw_last_error(), printed);
        pw_ir_free(reparsed);
        free(printed);
        build_and_run(split, mode & 1);
        pw_ir_free(split);
    }
    pw_ir_free(g);
    return 0;
}
