/* Benchmark suites behind `piecewise bench SUITE`. Each suite prints a
 * table (or one JSON object with --json) and returns an exit code. */
#ifndef PW_BENCH_H
#define PW_BENCH_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef int (*pw_bench_fn)(int argc, char **argv);

int pw_bench_launch(int argc, char **argv);
int pw_bench_stitch(int argc, char **argv);
int pw_bench_wrapper(int argc, char **argv);
int pw_bench_model(int argc, char **argv);
int pw_bench_peak(int argc, char **argv);

/* One core's measured f32 multiply-add peak in GFLOP/s (median of
 * `repeats` runs of about 0.05 s); *how names the instructions used. */
double pw_bench_peak_gflops(int repeats, const char **how);
/* One core's measured int8 dot-product peak in GOP/s (a multiply-add is 2),
 * with the instructions the quantized matmul's best copy uses. */
double pw_bench_peak_int8_gops(int repeats, const char **how);
/* The same chains on `threads` threads at once: their GOP/s together
 * (median of `repeats` turns), 0 when a thread cannot be started. Below
 * `threads` times one core's figure where threads share a core. */
double pw_bench_peak_int8_gops_threads(int threads, int repeats, const char **how);

/* The cores this process may run on (online CPUs). */
int pw_bench_cores(void);
/* Memory read bandwidth with `threads` threads reading their own slices
 * of one 512 MiB buffer at once (best of `repeats` passes; bench_stream.c),
 * over 4 KiB pages and over 2 MiB pages where the kernel grants them, and
 * over the latter again with software prefetch, as decode's tiles read. */
typedef struct pw_bench_stream {
    double small_gbs, huge_gbs; /* GB/s over each page size; 0: not measured */
    double prefetch_gbs;        /* GB/s, 2 MiB pages, lines prefetched ahead */
    double huge_share;          /* of the 2 MiB-page buffer, backed with them */
} pw_bench_stream;
/* The fastest of the three in GB/s, decode's ceiling (0 when none could
 * be measured); each, when pages is not NULL. */
double pw_bench_stream_gbs(int threads, int repeats, pw_bench_stream *pages);

/* Options of a suite that takes only --json and --help: sets *json and
 * returns -1 to go on, or the exit code (0 after --help, 2 on an unknown
 * option, with usage printed). */
int pw_bench_json_only_args(int argc, char **argv, const char *suite,
                            void (*usage)(FILE *f), int *json);

/* Monotonic nanoseconds. */
uint64_t pw_bench_now_ns(void);
/* Median of n doubles (sorts in place). */
double pw_bench_median(double *xs, size_t n);
/* Keeps the compiler from discarding a value (inline: costs no call). */
static inline void pw_bench_sink(const void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

#endif
