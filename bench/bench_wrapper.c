/* bench wrapper: what the graph wrapper and the dispatcher add per step.
 *
 *   direct    pw_graph_replay of a one-launch graph (empty kernel)
 *   wrapper   pw_graph_wrapper_call replaying that same graph: context read,
 *             descriptor lookup among 51 entries, replay, output reference
 *             (and its release by the caller)
 *   checked   the same with the debug address check on
 *   dispatch  one pw_dispatch call over a mix of batch sizes
 *
 * wrapper_overhead_ns = wrapper - direct. Every figure is the median of
 * repeated runs. */
#include "bench.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALLS 200000
#define REPEATS 15
#define DISPATCH_MIX 4096
#define TARGET_WRAPPER_NS 50.0
#define TARGET_DISPATCH_NS 20.0

typedef struct empty_args {
    const void *in;
    void *out;
} empty_args;

static void empty_kernel(const void *a) { pw_bench_sink(a); }
static const pw_kernel k_empty = {"empty", empty_kernel, NULL};

typedef struct bench_piece {
    pw_stream *stream;
    pw_pool *pool;
} bench_piece;

/* One launch, one output tensor: the smallest realistic piece. */
static pw_status bench_piece_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    bench_piece *p = user;
    int64_t shape[1] = {16};
    pw_tensor *y = NULL;
    pw_status s = pw_tensor_new(p->pool, PW_F32, 1, shape, &y);
    if (s != PW_OK) return s;
    empty_args a = {nargs ? pw_tensor_data(args[0].as.tensor) : NULL, pw_tensor_data(y)};
    s = pw_launch(p->stream, &k_empty, &a, sizeof a);
    if (s != PW_OK) {
        pw_tensor_release(y);
        return s;
    }
    *out = pw_value_tensor(y);
    return PW_OK;
}

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise bench wrapper [--json]\n\n"
               "Measures the graph wrapper's replay overhead over calling the recorded graph\n"
               "directly, and the cost of one dispatch call (median of %d runs of %d calls).\n"
               "Targets: wrapper overhead <= %.0f ns, dispatch <= %.0f ns.\n",
               REPEATS, CALLS, TARGET_WRAPPER_NS, TARGET_DISPATCH_NS);
}

static double time_wrapper(pw_graph_wrapper *w, const pw_value *arg) {
    uint64_t t0 = pw_bench_now_ns();
    for (int i = 0; i < CALLS; i++) {
        pw_value out;
        pw_graph_wrapper_call(w, arg, 1, &out);
        pw_value_release(out);
    }
    return (double)(pw_bench_now_ns() - t0) / CALLS;
}

int pw_bench_wrapper(int argc, char **argv) {
    int json;
    int arg_rc = pw_bench_json_only_args(argc, argv, "wrapper", usage, &json);
    if (arg_rc >= 0) return arg_rc;
    pw_stream *stream = NULL;
    pw_pool *pool = NULL, *inputs = NULL;
    pw_dispatcher *disp = NULL;
    pw_graph_wrapper *plain = NULL, *checked = NULL;
    pw_tensor *x = NULL;
    int rc = 0;
    pw_status s = pw_stream_new(PW_DEVICE_CPU, &stream);
    if (s == PW_OK) s = pw_pool_new(PW_DEVICE_CPU, "bench graphs", &pool);
    if (s == PW_OK) s = pw_pool_new(PW_DEVICE_CPU, "bench inputs", &inputs);
    int64_t shape[1] = {512};
    if (s == PW_OK) s = pw_tensor_new(inputs, PW_F32, 1, shape, &x);
    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.mode = PW_GRAPH_PIECEWISE;
    if (s == PW_OK) s = pw_dispatcher_new(&cfg, &disp);
    bench_piece piece = {stream, pool};
    pw_callable c = {bench_piece_fn, &piece, "bench_piece"};
    pw_wrapper_options o;
    pw_wrapper_options_init(&o);
    o.debug_check_addresses = PW_ADDRESS_CHECK_OFF;
    if (s == PW_OK) s = pw_graph_wrapper_new(c, PW_MODE_PIECEWISE, stream, pool, &o, &plain);
    o.debug_check_addresses = PW_ADDRESS_CHECK_ON;
    if (s == PW_OK) s = pw_graph_wrapper_new(c, PW_MODE_PIECEWISE, stream, pool, &o, &checked);
    if (s != PW_OK) {
        rc = pw_cli_fail("bench wrapper: setup", s);
        goto done;
    }

    /* Capture every default size so the lookup runs in a realistically full table. */
    size_t n_items = 0;
    const pw_capture_item *items = pw_dispatcher_capture_list(disp, &n_items);
    pw_value arg = pw_value_tensor(x);
    pw_capture_phase_begin();
    for (size_t i = 0; i < n_items && s == PW_OK; i++) {
        pw_forward_context ctx = {items[i].mode, items[i].desc, NULL};
        s = pw_forward_context_push(&ctx);
        pw_graph_wrapper *both[2] = {plain, checked};
        for (int k = 0; k < 2 && s == PW_OK; k++) {
            pw_value out;
            s = pw_graph_wrapper_call(both[k], &arg, 1, &out);
            if (s == PW_OK) pw_value_release(out);
        }
        pw_forward_context_pop();
    }
    pw_capture_phase_end();
    if (s != PW_OK) {
        rc = pw_cli_fail("bench wrapper: capture", s);
        goto done;
    }

    pw_runtime_mode mode;
    pw_batch_desc key;
    pw_dispatch(disp, 200, false, false, &mode, &key);
    pw_graph *graph = NULL;
    if ((s = pw_graph_wrapper_graph(plain, &key, &graph)) != PW_OK) {
        rc = pw_cli_fail("bench wrapper: lookup", s);
        goto done;
    }
    pw_forward_context ctx = {mode, key, NULL};
    pw_forward_context_push(&ctx);

    /* A fixed pseudo-random mix of batch sizes, so dispatch is not timed on
     * one perfectly predicted value. */
    static int64_t mix[DISPATCH_MIX];
    uint32_t lcg = 12345;
    for (int i = 0; i < DISPATCH_MIX; i++) {
        lcg = lcg * 1664525u + 1013904223u;
        mix[i] = 1 + (int64_t)((lcg >> 8) % 600); /* some above the maximum (512) */
    }

    double direct[REPEATS], wrapped[REPEATS], checked_t[REPEATS], dispatch[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        uint64_t t0 = pw_bench_now_ns();
        for (int i = 0; i < CALLS; i++) {
            pw_graph_replay(graph, stream);
            pw_bench_sink(graph);
        }
        uint64_t t1 = pw_bench_now_ns();
        direct[r] = (double)(t1 - t0) / CALLS;
        wrapped[r] = time_wrapper(plain, &arg);
        checked_t[r] = time_wrapper(checked, &arg);
        uint64_t t2 = pw_bench_now_ns();
        for (int i = 0; i < CALLS; i++) {
            pw_runtime_mode m;
            pw_batch_desc k;
            pw_dispatch(disp, mix[i & (DISPATCH_MIX - 1)], i & 1, false, &m, &k);
            pw_bench_sink(&k);
        }
        dispatch[r] = (double)(pw_bench_now_ns() - t2) / CALLS;
    }
    pw_forward_context_pop();
    double d = pw_bench_median(direct, REPEATS), w = pw_bench_median(wrapped, REPEATS),
           ck = pw_bench_median(checked_t, REPEATS), dp = pw_bench_median(dispatch, REPEATS);
    double overhead = w - d, checked_overhead = ck - d;
    if (json) {
        printf("{\"wrapper_overhead_ns\":%.2f,\"dispatch_ns\":%.2f,\"direct_replay_ns\":%.2f,"
               "\"wrapper_call_ns\":%.2f,\"wrapper_checked_overhead_ns\":%.2f,"
               "\"wrapper_entries\":%zu}\n",
               overhead, dp, d, w, checked_overhead, pw_graph_wrapper_num_graphs(plain));
    } else {
        printf("graph wrapper and dispatcher cost (median of %d runs of %d calls, %zu entries)\n",
               REPEATS, CALLS, pw_graph_wrapper_num_graphs(plain));
        printf("  %-34s %10.2f ns\n", "pw_graph_replay, one launch", d);
        printf("  %-34s %10.2f ns\n", "wrapper call (replay)", w);
        printf("  %-34s %10.2f ns  (target <= %.0f)\n", "wrapper overhead", overhead,
               TARGET_WRAPPER_NS);
        printf("  %-34s %10.2f ns\n", "wrapper overhead, address check on", checked_overhead);
        printf("  %-34s %10.2f ns  (target <= %.0f)\n", "dispatch", dp, TARGET_DISPATCH_NS);
    }
done:
    pw_graph_wrapper_free(plain);
    pw_graph_wrapper_free(checked);
    pw_tensor_release(x);
    pw_dispatcher_free(disp);
    pw_pool_free(inputs);
    pw_pool_free(pool);
    pw_stream_free(stream);
    return rc;
}
