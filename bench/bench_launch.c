/* bench launch: what one kernel launch costs when the kernel does nothing.
 *
 *   eager   pw_launch on a non-capturing stream (argument copy + call)
 *   replay  pw_graph_replay of the same launches, recorded once
 *   hand    a hand-written C loop over the same function pointers
 *
 * Two kernel mixes: every launch calls the same empty kernel (the headline,
 * as in the issue), and launches cycle through four different empty
 * kernels, which shows the CPU's indirect-branch predictor cost; replay and
 * the hand loop pay it alike. Figures are medians of repeated runs.
 *
 * With --device cuda: the cost of replaying a CUDA graph of N small
 * kernels (the CUDA kernel set's elementwise add on 64 floats, x += 1, the
 * kernel `torch.cuda.CUDAGraph` is timed with in scripts/gpu-check.sh),
 * and of launching the same kernels eagerly. */
#include "bench.h"
#include "cli.h"
#include "internal.h"
#include "ops/kernel_args.h"
#include "ops/kernel_set.h"

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

#define CUDA_KERNELS_DEFAULT 68
#define CUDA_REPLAYS 200
#define CUDA_REPEATS 7
#define CUDA_FLOATS 64

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise bench launch [--device cpu|cuda] [--kernels N] [--json]\n\n"
               "Measures the cost per launch of empty kernels: eager, graph replay and a\n"
               "hand-written loop over the same function pointers (median of %d runs of\n"
               "%d x %d launches), with one kernel and with four alternating kernels.\n\n"
               "  --device cuda   instead: one CUDA graph of N elementwise adds on %d floats\n"
               "                  (x += 1) replayed %d times, and the same adds launched\n"
               "                  eagerly; microseconds per replay and per launch, medians\n"
               "                  of %d runs (needs a GPU)\n"
               "  --kernels N     kernels in the CUDA graph (default %d, about one\n"
               "                  stories260K decode step)\n",
            REPEATS, ROUNDS, LAUNCHES, CUDA_FLOATS, CUDA_REPLAYS, CUDA_REPEATS,
            CUDA_KERNELS_DEFAULT);
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

typedef struct cuda_launch_result {
    double replay_us, eager_us_per_launch;
} cuda_launch_result;

/* N adds captured into one graph on `stream`; replayed and launched
 * eagerly. The stream's first launch runs eagerly before the capture
 * (a device that needs a warm-up does its one-time setup there). */
static pw_status measure_cuda(pw_stream *stream, pw_pool *pool, int n, cuda_launch_result *res) {
    const pw_kernel_set *set = pw_kernel_set_for(PW_DEVICE_CUDA);
    const pw_kernel *add = set ? set->entries[PW_KERNEL_ADD].kernel : NULL;
    if (!add) return pw_error(PW_ERR_UNSUPPORTED, "this build has no CUDA kernel set");
    float *x = NULL, *ones = NULL, host[CUDA_FLOATS];
    PW_TRY(pw_pool_alloc(pool, CUDA_FLOATS * sizeof(float), (void **)&x));
    pw_status s = pw_pool_alloc(pool, CUDA_FLOATS * sizeof(float), (void **)&ones);
    for (int i = 0; i < CUDA_FLOATS; i++) host[i] = 1.0f;
    if (s == PW_OK) s = pw_stream_copy_h2d(stream, ones, host, sizeof host);
    if (s == PW_OK) s = pw_stream_memset(stream, x, 0, sizeof host);
    pw_k_add_args args = {x, x, ones, CUDA_FLOATS};
    if (s == PW_OK) s = pw_launch(stream, add, &args, sizeof args); /* warm-up */
    if (s == PW_OK) s = pw_stream_synchronize(stream);
    uint64_t launches = 1;
    pw_graph *graph = NULL;
    if (s == PW_OK) s = pw_stream_begin_capture(stream, pool);
    if (s == PW_OK) {
        for (int i = 0; i < n && s == PW_OK; i++) s = pw_launch(stream, add, &args, sizeof args);
        if (s != PW_OK) pw_stream_abort_capture(stream);
        else s = pw_stream_end_capture(stream, &graph);
    }
    double replay[CUDA_REPEATS], eager[CUDA_REPEATS];
    for (int r = 0; r < CUDA_REPEATS && s == PW_OK; r++) {
        /* a few replays first: the first ones after an eager phase pay for
         * the switch */
        for (int k = 0; k < 5 && s == PW_OK; k++) s = pw_graph_replay(graph, stream);
        if (s == PW_OK) s = pw_stream_synchronize(stream);
        uint64_t t0 = pw_bench_now_ns();
        for (int k = 0; k < CUDA_REPLAYS && s == PW_OK; k++) s = pw_graph_replay(graph, stream);
        if (s == PW_OK) s = pw_stream_synchronize(stream);
        uint64_t t1 = pw_bench_now_ns();
        for (int k = 0; k < CUDA_REPLAYS / 10 && s == PW_OK; k++)
            for (int i = 0; i < n && s == PW_OK; i++) s = pw_launch(stream, add, &args, sizeof args);
        if (s == PW_OK) s = pw_stream_synchronize(stream);
        uint64_t t2 = pw_bench_now_ns();
        launches += (uint64_t)(CUDA_REPLAYS + 5) * (uint64_t)n + (uint64_t)(CUDA_REPLAYS / 10) * n;
        replay[r] = (double)(t1 - t0) / 1e3 / CUDA_REPLAYS;
        eager[r] = (double)(t2 - t1) / 1e3 / ((double)(CUDA_REPLAYS / 10) * n);
    }
    if (s == PW_OK) s = pw_stream_copy_d2h(stream, host, x, sizeof host);
    if (s == PW_OK) s = pw_stream_synchronize(stream);
    if (s == PW_OK) {
        res->replay_us = pw_bench_median(replay, CUDA_REPEATS);
        res->eager_us_per_launch = pw_bench_median(eager, CUDA_REPEATS);
        /* every add ran once: x counts the launches (exact below 2^24) */
        if (launches < (1u << 24) && host[0] != (float)launches)
            s = pw_error(PW_ERR_INTERNAL, "bench launch: x is %g after %llu adds", host[0],
                         (unsigned long long)launches);
    }
    pw_graph_free(graph);
    if (ones) pw_pool_release(pool, ones);
    if (x) pw_pool_release(pool, x);
    return s;
}

static int bench_launch_cuda(int n, int json) {
    pw_stream *stream = NULL;
    pw_pool *pool = NULL;
    cuda_launch_result r = {0};
    pw_device_caps caps; /* refuses an unavailable device, saying why */
    pw_status s = pw_device_get_caps(PW_DEVICE_CUDA, &caps);
    if (s == PW_OK) s = pw_stream_new(PW_DEVICE_CUDA, &stream);
    if (s == PW_OK) s = pw_pool_new(PW_DEVICE_CUDA, "bench", &pool);
    if (s == PW_OK) s = measure_cuda(stream, pool, n, &r);
    pw_pool_free(pool);
    pw_stream_free(stream);
    if (s != PW_OK) return pw_cli_fail("bench launch", s);
    if (json) {
        printf("{\"device\":\"cuda\",\"kernels\":%d,\"replay_us\":%.3f,"
               "\"replay_us_per_kernel\":%.4f,\"eager_us_per_launch\":%.4f}\n",
               n, r.replay_us, r.replay_us / n, r.eager_us_per_launch);
        return 0;
    }
    printf("CUDA graph of %d elementwise adds on %d floats (median of %d runs)\n", n,
           CUDA_FLOATS, CUDA_REPEATS);
    printf("  replay   %10.2f us per graph (%d replays back to back), %.3f us per kernel\n",
           r.replay_us, CUDA_REPLAYS, r.replay_us / n);
    printf("  eager    %10.3f us per launch\n", r.eager_us_per_launch);
    printf("replay is %.1fx faster than eager launches of the same kernels\n",
           r.eager_us_per_launch * n / r.replay_us);
    return 0;
}

int pw_bench_launch(int argc, char **argv) {
    int json = 0, cuda_kernels = CUDA_KERNELS_DEFAULT;
    pw_device device = PW_DEVICE_CPU;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            if (pw_device_parse(argv[++i], &device) != PW_OK) {
                fprintf(stderr, "piecewise bench launch: --device: %s\n", pw_last_error());
                return 2;
            }
        } else if (strcmp(argv[i], "--kernels") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 100000) {
                fprintf(stderr, "piecewise bench launch: --kernels: '%s' is not a count from 1 "
                                "to 100000\n", argv[i]);
                return 2;
            }
            cuda_kernels = (int)v;
        } else {
            fprintf(stderr, "piecewise bench launch: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (device == PW_DEVICE_CUDA) return bench_launch_cuda(cuda_kernels, json);
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
