/* `piecewise bench peak`: what one core can do at most, measured.
 *
 * Twelve independent 8-lane multiply-add chains (enough to cover the FMA
 * latency on current x86 cores) run from registers, with no loads. The
 * result is the ceiling any f32 kernel on this core works under; bench
 * model sets its throughput against it. Built with AVX2+FMA where the
 * compiler targets x86-64 and the CPU has them, else with plain vector
 * multiplies and adds (the ceiling of the baseline kernel copies). */
#include "bench.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PEAK_X86 1
#else
#define PEAK_X86 0
#endif

#define CHAINS 12
#define ITERS 2000000

typedef float v8f __attribute__((vector_size(32)));

#if PEAK_X86
__attribute__((target("avx2,fma"), noinline)) static void chains_fma(float *out, long iters) {
    __m256 acc[CHAINS], a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    __m256 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm256_add_ps(s, acc[c]);
    _mm256_storeu_ps(out, s);
}
#endif

/* Multiply and add as two operations (two flops, two instructions). */
__attribute__((noinline)) static void chains_plain(float *out, long iters) {
    v8f acc[CHAINS], a = (v8f){0} + 0.999999f, b = (v8f){0} + 1e-7f;
    for (int c = 0; c < CHAINS; c++) acc[c] = (v8f){0} + (float)c;
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * a + b;
    v8f s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = s + acc[c];
    memcpy(out, &s, sizeof s);
}

static bool have_fma(void) {
#if PEAK_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

double pw_bench_peak_gflops(int repeats, const char **how) {
    bool fma = have_fma();
    *how = fma ? "AVX2 FMA, 12 chains x 8 lanes" : "vector multiply + add, 12 chains x 8 lanes";
    double g[64];
    if (repeats > 64) repeats = 64;
    if (repeats < 1) repeats = 1;
    float out[8];
    for (int r = 0; r < repeats; r++) {
        uint64_t t0 = pw_bench_now_ns();
#if PEAK_X86
        if (fma) chains_fma(out, ITERS);
        else
#endif
            chains_plain(out, ITERS);
        uint64_t t1 = pw_bench_now_ns();
        pw_bench_sink(out);
        g[r] = 2.0 * 8.0 * CHAINS * (double)ITERS / (double)(t1 - t0);
    }
    return pw_bench_median(g, (size_t)repeats);
}

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise bench peak [--json]\n\n"
               "One core's f32 multiply-add peak, measured from registers (median of 9):\n"
               "the ceiling for every kernel, and for bench model's GFLOP/s column.\n");
}

int pw_bench_peak(int argc, char **argv) {
    int json;
    int rc = pw_bench_json_only_args(argc, argv, "peak", usage, &json);
    if (rc >= 0) return rc;
    const char *how;
    double g = pw_bench_peak_gflops(9, &how);
    if (json) printf("{\"peak_gflop_s\":%.2f,\"method\":\"%s\"}\n", g, how);
    else printf("f32 peak, 1 thread: %.1f GFLOP/s (%s)\n", g, how);
    return 0;
}
