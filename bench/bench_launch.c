/* bench launch: what one kernel launch costs when the kernel does nothing.
 *
 *   eager   pw_launch on a non-capturing stream (argument copy + call)
 *   replay  pw_graph_replay of the same launches, recorded once
 *   hand    a hand-written C loop over the same function pointers
 *
 * Two kernel mixes: every launch calls the same empty kernel (the headline,
 * as in the issue), and launches cycle through four different empty
 * kernels, which shows the CPU's indirect-branch predictor cost; replay and
 * the hand loop pay it alike. Figures are medians of repeated runs. */
#include "bench.h"
#include "cli.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAUNCHES 1024
#define ROUNDS 2000
#define REPEATS 15

typedef struct empty_args {
    const float *in;
    float *out;
    int64_t n;
} empty_args;

#define EMPTY_KERNEL(i) \
    static void empty_kernel_##i(const void *a) { pw_bench_sink(a); }
EMPTY_KERNEL(0) EMPTY_KERNEL(1) EMPTY_KERNEL(2) EMPTY_KERNEL(3)

static const pw_kernel kernels[4] = {
    {"empty0", empty_kernel_0, NULL}, {"empty1", empty_kernel_1, NULL},
    {"empty2", empty_kernel_2, NULL}, {"empty3", empty_kernel_3, NULL},
};

typedef struct hand_call {
    pw_cpu_kernel_fn fn;
    const void *args;
} hand_call;

typedef struct launch_result {
    double eager, replay, hand;
} launch_result;

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise bench launch [--json]\n\n"
               "Measures the cost per launch of empty kernels: eager, graph replay and a\n"
               "hand-written loop over the same function pointers (median of %d runs of\n"
               "%d x %d launches), with one kernel and with four alternating kernels.\n",
            REPEATS, ROUNDS, LAUNCHES);
}

static pw_status measure(pw_stream *stream, pw_pool *pool, int n_kernels, launch_result *res) {
    static empty_args args[LAUNCHES];
    static hand_call hand[LAUNCHES];
    pw_graph *graph = NULL;
    for (int i = 0; i < LAUNCHES; i++) args[i].n = i;
    PW_TRY(pw_stream_begin_capture(stream, pool));
    pw_status s = PW_OK;
    for (int i = 0; i < LAUNCHES && s == PW_OK; i++)
        s = pw_launch(stream, &kernels[i % n_kernels], &args[i], sizeof args[i]);
    if (s != PW_OK) {
        pw_stream_abort_capture(stream);
        return s;
    }
    PW_TRY(pw_stream_end_capture(stream, &graph));
    for (int i = 0; i < LAUNCHES; i++) {
        const pw_kernel *k;
        size_t nb;
        pw_graph_launch_at(graph, (size_t)i, &k, &hand[i].args, &nb);
        hand[i].fn = k->cpu;
    }
    double eager[REPEATS], replay[REPEATS], loop[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        uint64_t t0 = pw_bench_now_ns();
        for (int k = 0; k < ROUNDS / 10; k++)
            for (int i = 0; i < LAUNCHES; i++)
                pw_launch(stream, &kernels[i % n_kernels], &args[i], sizeof args[i]);
        uint64_t t1 = pw_bench_now_ns();
        for (int k = 0; k < ROUNDS; k++) pw_graph_replay(graph, stream);
        uint64_t t2 = pw_bench_now_ns();
        for (int k = 0; k < ROUNDS; k++) {
            const hand_call *h = hand;
            for (int i = 0; i < LAUNCHES; i++) h[i].fn(h[i].args);
            pw_bench_sink(h);
        }
        uint64_t t3 = pw_bench_now_ns();
        eager[r] = (double)(t1 - t0) / ((double)ROUNDS / 10 * LAUNCHES);
        replay[r] = (double)(t2 - t1) / ((double)ROUNDS * LAUNCHES);
        loop[r] = (double)(t3 - t2) / ((double)ROUNDS * LAUNCHES);
    }
    res->eager = pw_bench_median(eager, REPEATS);
    res->replay = pw_bench_median(replay, REPEATS);
    res->hand = pw_bench_median(loop, REPEATS);
    pw_graph_free(graph);
    return PW_OK;
}

static void print_rows(const char *mix, const launch_result *r) {
    printf("  %-12s %-8s %10.2f %13.2fx\n", mix, "eager", r->eager, r->eager / r->hand);
    printf("  %-12s %-8s %10.2f %13.2fx\n", "", "replay", r->replay, r->replay / r->hand);
    printf("  %-12s %-8s %10.2f %13.2fx\n", "", "hand", r->hand, 1.0);
}

int pw_bench_launch(int argc, char **argv) {
    int json;
    int rc = pw_bench_json_only_args(argc, argv, "launch", usage, &json);
    if (rc >= 0) return rc;
    pw_stream *stream = NULL;
    pw_pool *pool = NULL;
    pw_status s = pw_stream_new(PW_DEVICE_CPU, &stream);
    if (s == PW_OK) s = pw_pool_new(PW_DEVICE_CPU, "bench", &pool);
    launch_result one, four;
    if (s == PW_OK) s = measure(stream, pool, 1, &one);
    if (s == PW_OK) s = measure(stream, pool, 4, &four);
    pw_pool_free(pool);
    pw_stream_free(stream);
    if (s != PW_OK) return pw_cli_fail("bench launch", s);
    if (json) {
        printf("{\"eager_ns_per_launch\":%.3f,\"replay_ns_per_launch\":%.3f,"
               "\"hand_loop_ns_per_launch\":%.3f,\"mixed4\":{\"eager_ns_per_launch\":%.3f,"
               "\"replay_ns_per_launch\":%.3f,\"hand_loop_ns_per_launch\":%.3f}}\n",
               one.eager, one.replay, one.hand, four.eager, four.replay, four.hand);
        return 0;
    }
    printf("launch cost of an empty CPU kernel, ns per launch (median of %d runs)\n", REPEATS);
    printf("  %-12s %-8s %10s %14s\n", "kernels", "way", "ns/launch", "vs hand loop");
    print_rows("1 kernel", &one);
    print_rows("4 alternating", &four);
    printf("replay is %.1fx faster than eager (1 kernel), %.1fx (4 kernels)\n",
           one.eager / one.replay, four.eager / four.replay);
    return 0;
}
