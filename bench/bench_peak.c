/* `piecewise bench peak`: what one core can do at most, measured.
 *
 * Twelve independent 8-lane multiply-add chains (enough to cover the FMA
 * latency on current x86 cores) run from registers, with no loads. The
 * result is the ceiling any f32 kernel on this core works under; bench
 * model sets its throughput against it. Built with AVX2+FMA where the
 * compiler targets x86-64 and the CPU has them, else with plain vector
 * multiplies and adds (the ceiling of the baseline kernel copies).
 *
 * The integer peak is the same idea for the quantized matmul's int8 dot
 * products: twelve independent chains of the instruction its best copy
 * uses (vpdpbusd on 512 bits where the CPU has AVX-512 VNNI, on 256 bits
 * with AVX-VNNI, else vpmaddubsw + vpmaddwd + vpaddd), from registers; one
 * int8 multiply-add counts 2 operations.
 *
 * The int8 chains also run on one thread per core at once: where two of
 * the cores the system shows are one physical core's hardware threads (a
 * VM's vCPUs may be), the sum stays near one core's figure, and that, not
 * twice one core, is the arithmetic ceiling of a product on every thread.
 *
 * Then the memory read bandwidth (bench_stream.c) with one thread and with
 * one thread per core reading at once: the ceilings of decode, which reads
 * every weight once per token. */
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
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

#if PEAK_X86
/* The chains are written in assembly, one instruction per chain and turn:
 * compilers fold dot products of constants, or copy the chained registers
 * around, and either hides the peak. */
#define CHAIN_DECL(T, init)                                                                    \
    T c0 = init, c1 = init, c2 = init, c3 = init, c4 = init, c5 = init, c6 = init, c7 = init,   \
      c8 = init, c9 = init, c10 = init, c11 = init
#define CHAIN_ALL(S) S(c0) S(c1) S(c2) S(c3) S(c4) S(c5) S(c6) S(c7) S(c8) S(c9) S(c10) S(c11)

/* vpdpbusd on 512 bits: 64 int8 multiply-adds per chain and turn (the
 * AVX-512 kernel copy's width). */
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) static int
int8_chains_avx512vnni(long iters) {
    __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
    CHAIN_DECL(__m512i, a);
#define S512(x) __asm__ volatile("vpdpbusd %1, %2, %0" : "+v"(x) : "v"(a), "v"(b));
    for (long i = 0; i < iters; i++) { CHAIN_ALL(S512) }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
    /* lane 0 only: the sum is a sink that keeps the chains live, and a
     * whole-vector reduction in int would overflow (wraps are fine here,
     * signed overflow is not) */
    return _mm512_cvtsi512_si32(s);
}

/* VEX vpdpbusd on 256 bits: 32 per chain and turn. */
__attribute__((target("avx2,avxvnni"), noinline)) static int int8_chains_avxvnni(long iters) {
    __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(2);
    CHAIN_DECL(__m256i, a);
#define SVNNI(x) __asm__ volatile("%{vex%} vpdpbusd %1, %2, %0" : "+x"(x) : "x"(a), "x"(b));
    for (long i = 0; i < iters; i++) { CHAIN_ALL(SVNNI) }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(c8, c9), _mm256_add_epi32(c10, c11)));
    return _mm256_extract_epi32(s, 0);
}

/* vpmaddubsw + vpmaddwd + vpaddd: 32 per chain and turn, three
 * instructions (a temporary per chain). */
__attribute__((target("avx2"), noinline)) static int int8_chains_avx2(long iters) {
    __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(2), ones = _mm256_set1_epi16(1);
    CHAIN_DECL(__m256i, a);
#define SAVX2(x)                                                                               \
    {                                                                                          \
        __m256i t;                                                                             \
        __asm__ volatile("vpmaddubsw %2, %3, %1\n\tvpmaddwd %4, %1, %1\n\tvpaddd %1, %0, %0"   \
                         : "+x"(x), "=&x"(t)                                                   \
                         : "x"(a), "x"(b), "x"(ones));                                         \
    }
    for (long i = 0; i < iters; i++) { CHAIN_ALL(SAVX2) }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(c8, c9), _mm256_add_epi32(c10, c11)));
    return _mm256_extract_epi32(s, 0);
}

/* AVX-VNNI: CPUID leaf 7 subleaf 1, EAX bit 4. */
static bool have_avxvnni(void) {
    unsigned eax, ebx, ecx, edx;
    if (__get_cpuid_max(0, NULL) < 7) return false;
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    return (eax & (1u << 4)) != 0;
}
#endif

/* Plain C: 8 lanes, one 32-bit multiply-add each per chain and turn (the
 * portable kernel copy's integer arithmetic). */
__attribute__((noinline)) static int int8_chains_plain(long iters) {
    typedef int v8i __attribute__((vector_size(32)));
    v8i acc[CHAINS], a = (v8i){0} + 3, b = (v8i){0} - 5;
    for (int c = 0; c < CHAINS; c++) acc[c] = (v8i){0} + c;
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * a + b;
    v8i s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = s + acc[c];
    return s[0];
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

/* The int8 chain routine of the quantized matmul's best copy on this CPU,
 * its multiply-adds per chain and turn, and its name. */
typedef int (*int8_chain_fn)(long iters);

static int8_chain_fn int8_chain_pick(double *macs_per_turn, const char **how) {
    int8_chain_fn fn = int8_chains_plain;
    *macs_per_turn = 8.0; /* per chain */
    *how = "C 32-bit vector multiplies and adds, 12 chains x 8 lanes";
#if PEAK_X86
    __builtin_cpu_init();
    if (have_fma()) {
        *macs_per_turn = 32.0;
        if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512bw")) {
            fn = int8_chains_avx512vnni;
            *macs_per_turn = 64.0;
            *how = "AVX-512 VNNI vpdpbusd on 512 bits, 12 chains";
        } else if (have_avxvnni()) {
            fn = int8_chains_avxvnni;
            *how = "AVX-VNNI vpdpbusd, 12 chains";
        } else {
            fn = int8_chains_avx2;
            *how = "AVX2 vpmaddubsw + vpmaddwd + vpaddd, 12 chains";
        }
    }
#endif
    return fn;
}

double pw_bench_peak_int8_gops(int repeats, const char **how) {
    double macs_per_turn;
    int8_chain_fn fn = int8_chain_pick(&macs_per_turn, how);
    double g[64];
    if (repeats > 64) repeats = 64;
    if (repeats < 1) repeats = 1;
    for (int r = 0; r < repeats; r++) {
        uint64_t t0 = pw_bench_now_ns();
        volatile int sink = fn(ITERS);
        uint64_t t1 = pw_bench_now_ns();
        (void)sink;
        g[r] = 2.0 * macs_per_turn * CHAINS * (double)ITERS / (double)(t1 - t0);
    }
    return pw_bench_median(g, (size_t)repeats);
}

/* ---- the int8 peak of several cores at once ----------------------------- */

#define PEAK_MAX_THREADS 256

typedef struct chain_thread {
    int8_chain_fn fn;
    atomic_int *go;
    int sink;
} chain_thread;

static void *chain_thread_main(void *arg) {
    chain_thread *c = arg;
    while (!atomic_load(c->go)) sched_yield();
    c->sink = c->fn(ITERS);
    return NULL;
}

/* One timed turn of `threads` threads (the caller's among them) each
 * running the chains; GOP/s of all of them together over the wall time,
 * 0 when a thread cannot be started. */
static double int8_threads_once(int8_chain_fn fn, double macs_per_turn, int threads) {
    chain_thread ct[PEAK_MAX_THREADS];
    pthread_t tids[PEAK_MAX_THREADS];
    atomic_int go = 0;
    for (int t = 0; t < threads; t++) ct[t] = (chain_thread){fn, &go, 0};
    int started = 1;
    while (started < threads &&
           pthread_create(&tids[started], NULL, chain_thread_main, &ct[started]) == 0)
        started++;
    uint64_t t0 = pw_bench_now_ns();
    atomic_store(&go, 1);
    if (started == threads) ct[0].sink = fn(ITERS);
    for (int t = 1; t < started; t++) pthread_join(tids[t], NULL);
    uint64_t t1 = pw_bench_now_ns();
    if (started < threads) return 0;
    int sum = 0;
    for (int t = 0; t < threads; t++) sum ^= ct[t].sink;
    pw_bench_sink(&sum);
    return 2.0 * macs_per_turn * CHAINS * (double)ITERS * threads / (double)(t1 - t0 ? t1 - t0 : 1);
}

double pw_bench_peak_int8_gops_threads(int threads, int repeats, const char **how) {
    double macs_per_turn;
    int8_chain_fn fn = int8_chain_pick(&macs_per_turn, how);
    if (threads < 1) threads = 1;
    if (threads > PEAK_MAX_THREADS) threads = PEAK_MAX_THREADS;
    if (threads == 1) return pw_bench_peak_int8_gops(repeats, how);
    double g[64];
    if (repeats > 64) repeats = 64;
    if (repeats < 1) repeats = 1;
    for (int r = 0; r < repeats; r++) {
        g[r] = int8_threads_once(fn, macs_per_turn, threads);
        if (g[r] <= 0) return 0;
    }
    return pw_bench_median(g, (size_t)repeats);
}

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise bench peak [--json]\n\n"
               "One core's f32 multiply-add peak and int8 dot-product peak, measured from\n"
               "registers (median of 9): the ceilings for the f32 kernels and for the\n"
               "quantized matmul's integer dot products (bench model sets its figures\n"
               "against both); the int8 peak again with one thread per core, all at\n"
               "once (hardware threads of one core share its units, so the sum shows\n"
               "what the cores add). Then the memory read bandwidth (best of 5 passes over\n"
               "512 MiB) with one thread and with one thread per core, all reading at\n"
               "once, over 4 KiB pages and over 2 MiB pages: the faster is the ceiling\n"
               "of decode, which reads every weight once per token.\n");
}

int pw_bench_peak(int argc, char **argv) {
    int json;
    int rc = pw_bench_json_only_args(argc, argv, "peak", usage, &json);
    if (rc >= 0) return rc;
    const char *how;
    double g = pw_bench_peak_gflops(9, &how);
    const char *how_int8;
    double gi = pw_bench_peak_int8_gops(9, &how_int8);
    int cores = pw_bench_cores();
    double gin = cores > 1 ? pw_bench_peak_int8_gops_threads(cores, 9, &how_int8) : gi;
    pw_bench_stream s1, sn;
    double bw1 = pw_bench_stream_gbs(1, 5, &s1), bwn = pw_bench_stream_gbs(cores, 5, &sn);
    if (json)
        printf("{\"peak_gflop_s\":%.2f,\"method\":\"%s\",\"peak_int8_gop_s\":%.2f,"
               "\"int8_method\":\"%s\",\"peak_int8_gop_s_all\":%.2f,\"stream_gb_s_1\":%.2f,"
               "\"cores\":%d,\"stream_gb_s_all\":%.2f,\"stream_gb_s_1_small_pages\":%.2f,"
               "\"stream_gb_s_1_huge_pages\":%.2f,\"stream_gb_s_all_small_pages\":%.2f,"
               "\"stream_gb_s_all_huge_pages\":%.2f,\"stream_gb_s_1_prefetch\":%.2f,"
               "\"stream_gb_s_all_prefetch\":%.2f,\"huge_page_share\":%.3f}\n",
               g, how, gi, how_int8, gin, bw1, cores, bwn, s1.small_gbs, s1.huge_gbs, sn.small_gbs,
               sn.huge_gbs, s1.prefetch_gbs, sn.prefetch_gbs, s1.huge_share);
    else
        printf("f32 peak, 1 thread: %.1f GFLOP/s (%s)\n"
               "int8 dot-product peak, 1 thread: %.1f GOP/s (%s; a multiply-add is 2)\n"
               "int8 dot-product peak, %d thread%s (one per core, together): %.1f GOP/s "
               "(%.2fx one thread)\n"
               "memory read bandwidth, 1 thread: %.1f GB/s (4 KiB pages %.1f, 2 MiB pages %.1f, "
               "2 MiB pages with software prefetch %.1f)\n"
               "memory read bandwidth, %d thread%s (one per core, together): %.1f GB/s "
               "(4 KiB pages %.1f, 2 MiB pages %.1f, with software prefetch %.1f)\n"
               "(2 MiB pages: the kernel backed %.0f%% of the buffer with them)\n",
               g, how, gi, how_int8, cores, cores == 1 ? "" : "s", gin, gi > 0 ? gin / gi : 0.0,
               bw1, s1.small_gbs, s1.huge_gbs, s1.prefetch_gbs, cores, cores == 1 ? "" : "s", bwn,
               sn.small_gbs, sn.huge_gbs, sn.prefetch_gbs, 100.0 * s1.huge_share);
    return 0;
}
