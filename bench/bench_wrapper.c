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

/* Everything the benchmark holds; piece is the wrappers' callable state, so
 * it lives as long as they do. */
typedef struct wrapper_bench {
    pw_stream *stream;
    pw_pool *pool, *inputs;
    pw_dispatcher *disp;
    bench_piece piece;
    pw_graph_wrapper *plain, *checked;
    pw_tensor *x;
} wrapper_bench;

/* A CPU stream and pools, the input tensor, a PIECEWISE dispatcher and two
 * wrappers of the one-launch piece: address check off and on. */
static pw_status wrapper_bench_setup(wrapper_bench *b) {
    pw_status s = pw_stream_new(PW_DEVICE_CPU, &b->stream);
    if (s == PW_OK) s = pw_pool_new(PW_DEVICE_CPU, "bench graphs", &b->pool);
    if (s == PW_OK) s = pw_pool_new(PW_DEVICE_CPU, "bench inputs", &b->inputs);
    int64_t shape[1] = {512};
    if (s == PW_OK) s = pw_tensor_new(b->inputs, PW_F32, 1, shape, &b->x);
    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.mode = PW_GRAPH_PIECEWISE;
    if (s == PW_OK) s = pw_dispatcher_new(&cfg, &b->disp);
    b->piece = (bench_piece){b->stream, b->pool};
    pw_callable c = {bench_piece_fn, &b->piece, "bench_piece"};
    pw_wrapper_options o;
    pw_wrapper_options_init(&o);
    o.debug_check_addresses = PW_ADDRESS_CHECK_OFF;
    if (s == PW_OK) s = pw_graph_wrapper_new(c, PW_MODE_PIECEWISE, b->stream, b->pool, &o, &b->plain);
    o.debug_check_addresses = PW_ADDRESS_CHECK_ON;
    if (s == PW_OK) s = pw_graph_wrapper_new(c, PW_MODE_PIECEWISE, b->stream, b->pool, &o, &b->checked);
    return s;
}

static void wrapper_bench_free(wrapper_bench *b) {
    pw_graph_wrapper_free(b->plain);
    pw_graph_wrapper_free(b->checked);
    pw_tensor_release(b->x);
    pw_dispatcher_free(b->disp);
    pw_pool_free(b->inputs);
    pw_pool_free(b->pool);
    pw_stream_free(b->stream);
}

/* Captures every default size in both wrappers, so the lookup runs in a
 * realistically full table. */
static pw_status capture_every_size(wrapper_bench *b, const pw_value *arg) {
    size_t n_items = 0;
    const pw_capture_item *items = pw_dispatcher_capture_list(b->disp, &n_items);
    pw_status s = PW_OK;
    pw_capture_phase_begin();
    for (size_t i = 0; i < n_items && s == PW_OK; i++) {
        pw_forward_context ctx = {items[i].mode, items[i].desc, NULL};
        s = pw_forward_context_push(&ctx);
        pw_graph_wrapper *both[2] = {b->plain, b->checked};
        for (int k = 0; k < 2 && s == PW_OK; k++) {
            pw_value out;
            s = pw_graph_wrapper_call(both[k], arg, 1, &out);
            if (s == PW_OK) pw_value_release(out);
        }
        pw_forward_context_pop();
    }
    pw_capture_phase_end();
    return s;
}

/* A fixed pseudo-random mix of batch sizes, so dispatch is not timed on
 * one perfectly predicted value. */
static void fill_dispatch_mix(int64_t *mix) {
    uint32_t lcg = 12345;
    for (int i = 0; i < DISPATCH_MIX; i++) {
        lcg = lcg * 1664525u + 1013904223u;
        mix[i] = 1 + (int64_t)((lcg >> 8) % 600); /* some above the maximum (512) */
    }
}

static double time_direct(pw_graph *graph, pw_stream *stream) {
    uint64_t t0 = pw_bench_now_ns();
    for (int i = 0; i < CALLS; i++) {
        pw_graph_replay(graph, stream);
        pw_bench_sink(graph);
    }
    return (double)(pw_bench_now_ns() - t0) / CALLS;
}

static double time_dispatch(const pw_dispatcher *disp, const int64_t *mix) {
    uint64_t t0 = pw_bench_now_ns();
    for (int i = 0; i < CALLS; i++) {
        pw_runtime_mode m;
        pw_batch_desc k;
        pw_dispatch(disp, mix[i & (DISPATCH_MIX - 1)], i & 1, false, &m, &k);
        pw_bench_sink(&k);
    }
    return (double)(pw_bench_now_ns() - t0) / CALLS;
}

/* Medians in ns: direct replay, wrapper call, wrapper call with the address
 * check, dispatch. */
typedef struct wrapper_timings {
    double direct, wrapped, checked, dispatch;
} wrapper_timings;

static void print_timings(bool json, const wrapper_timings *t, size_t entries) {
    double overhead = t->wrapped - t->direct, checked_overhead = t->checked - t->direct;
    if (json) {
        printf("{\"wrapper_overhead_ns\":%.2f,\"dispatch_ns\":%.2f,\"direct_replay_ns\":%.2f,"
               "\"wrapper_call_ns\":%.2f,\"wrapper_checked_overhead_ns\":%.2f,"
               "\"wrapper_entries\":%zu}\n",
               overhead, t->dispatch, t->direct, t->wrapped, checked_overhead, entries);
    } else {
        printf("graph wrapper and dispatcher cost (median of %d runs of %d calls, %zu entries)\n",
               REPEATS, CALLS, entries);
        printf("  %-34s %10.2f ns\n", "pw_graph_replay, one launch", t->direct);
        printf("  %-34s %10.2f ns\n", "wrapper call (replay)", t->wrapped);
        printf("  %-34s %10.2f ns  (target <= %.0f)\n", "wrapper overhead", overhead,
               TARGET_WRAPPER_NS);
        printf("  %-34s %10.2f ns\n", "wrapper overhead, address check on", checked_overhead);
        printf("  %-34s %10.2f ns  (target <= %.0f)\n", "dispatch", t->dispatch, TARGET_DISPATCH_NS);
    }
}

/* REPEATS rounds of the four timings, interleaved so drift hits them alike;
 * the medians go to *t. Runs with the descriptor's forward context pushed. */
static void time_all(wrapper_bench *b, pw_graph *graph, const pw_value *arg, wrapper_timings *t) {
    static int64_t mix[DISPATCH_MIX];
    fill_dispatch_mix(mix);
    double direct[REPEATS], wrapped[REPEATS], checked_t[REPEATS], dispatch[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        direct[r] = time_direct(graph, b->stream);
        wrapped[r] = time_wrapper(b->plain, arg);
        checked_t[r] = time_wrapper(b->checked, arg);
        dispatch[r] = time_dispatch(b->disp, mix);
    }
    t->direct = pw_bench_median(direct, REPEATS);
    t->wrapped = pw_bench_median(wrapped, REPEATS);
    t->checked = pw_bench_median(checked_t, REPEATS);
    t->dispatch = pw_bench_median(dispatch, REPEATS);
}

int pw_bench_wrapper(int argc, char **argv) {
    int json;
    int arg_rc = pw_bench_json_only_args(argc, argv, "wrapper", usage, &json);
    if (arg_rc >= 0) return arg_rc;
    wrapper_bench b = {0};
    int rc = 0;
    pw_status s = wrapper_bench_setup(&b);
    if (s != PW_OK) {
        rc = pw_cli_fail("bench wrapper: setup", s);
        goto done;
    }
    pw_value arg = pw_value_tensor(b.x);
    if ((s = capture_every_size(&b, &arg)) != PW_OK) {
        rc = pw_cli_fail("bench wrapper: capture", s);
        goto done;
    }

    pw_runtime_mode mode;
    pw_batch_desc key;
    pw_dispatch(b.disp, 200, false, false, &mode, &key);
    pw_graph *graph = NULL;
    if ((s = pw_graph_wrapper_graph(b.plain, &key, &graph)) != PW_OK) {
        rc = pw_cli_fail("bench wrapper: lookup", s);
        goto done;
    }
    pw_forward_context ctx = {mode, key, NULL};
    pw_forward_context_push(&ctx);
    wrapper_timings t;
    time_all(&b, graph, &arg, &t);
    pw_forward_context_pop();
    print_timings(json, &t, pw_graph_wrapper_num_graphs(b.plain));
done:
    wrapper_bench_free(&b);
    return rc;
}
