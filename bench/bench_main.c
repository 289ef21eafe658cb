#include "bench.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct pw_bench_suite {
    const char *name;
    pw_bench_fn fn;
    const char *summary;
} pw_bench_suite;

static const pw_bench_suite suites[] = {
    {"launch", pw_bench_launch, "cost per launch: eager, replay, hand-written loop"},
    {"stitch", pw_bench_stitch, "cost per forward of stitching a split graph: plan, native, hand"},
    {"wrapper", pw_bench_wrapper, "graph wrapper replay overhead and dispatch cost"},
    {"model", pw_bench_model, "Llama GGUF model: decode per mode and batch, prefill, capture"},
    {"peak", pw_bench_peak, "one core's f32 multiply-add peak (the ceiling for the kernels)"},
};

uint64_t pw_bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double pw_bench_median(double *xs, size_t n) {
    if (n == 0) return 0;
    qsort(xs, n, sizeof *xs, cmp_double);
    return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}


static void usage(FILE *f) {
    fprintf(f, "usage: piecewise bench SUITE [options]\n\nsuites:\n");
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        fprintf(f, "  %-10s %s\n", suites[i].name, suites[i].summary);
    fprintf(f, "\nEvery suite takes --json and --help.\n");
}

int pw_cmd_bench(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (strcmp(argv[1], suites[i].name) == 0) return suites[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "piecewise bench: unknown suite '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

int pw_bench_json_only_args(int argc, char **argv, const char *suite,
                            void (*usage)(FILE *f), int *json) {
    *json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            *json = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "piecewise bench %s: unknown option '%s'\n", suite, argv[i]);
            usage(stderr);
            return 2;
        }
    }
    return -1;
}
