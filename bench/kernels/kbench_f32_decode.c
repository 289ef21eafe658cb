/* Where the f32 decode matmul's time goes as its weights outgrow L1 and
 * L2: the stories260K question (BENCHMARKS.md, "Session 7: stories260K and
 * the L2"). Built as build/pw_kbench_f32_decode:
 *
 *   build/pw_kbench_f32_decode [reps]
 *
 * For K = 64 and K = 172 (stories260K's dim and hidden size) and weights of
 * 32 KiB to 8 MiB, it times the own f32 matmul at T = 1 (pw_k_matmul_own,
 * one thread, the copy PW_KERNEL_ISA picks) over the same weights again
 * and again, so they sit in whatever level of the cache holds them, and
 * prints the best and median microseconds per call over `reps` runs (5)
 * and the weight bytes streamed per second at the best. A stories260K
 * decode token multiplies about 1.0 MiB of f32 weights (5 layers of
 * 4 x 64 x 64 ... , the 512 x 64 LM head), which is the row to read.
 *
 * With AVX-512 it also times a packed layout the library does not have:
 * two columns interleaved by blocks of 8 floats, so that one 512-bit load
 * and fma serve two columns (timing only: its final adds are not the
 * canonical tree, so it is not bit-exact with the library). It shows what
 * halving the load and fma instructions buys when the weights stream from
 * L2 rather than L1. */
#ifndef _GNU_SOURCE /* the CMake build defines it; a hand build may not */
#define _GNU_SOURCE
#endif
#include "kbench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

typedef void mm_fn(float *y, const float *x, const float *w, int64_t n, int64_t k);

static void own(float *y, const float *x, const float *w, int64_t n, int64_t k) {
    pw_k_matmul_own(y, x, w, 1, n, k);
}

#if defined(__x86_64__)
/* w packed as [n/2 pairs][k/8 blocks][2 columns][8]; k % 8 == 0, n % 16 == 0. */
__attribute__((target("avx512f,avx512dq,fma"))) static void packed_pairs(float *y, const float *x,
                                                                          const float *w, int64_t n,
                                                                          int64_t k) {
    const int64_t nb = k / 8;
    for (int64_t j = 0; j < n; j += 16) {
        const float *wp = w + j * k;
        __m512 acc[8];
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) acc[c] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + 8 * b));
            /* unrolled so that the 8 accumulators live in registers */
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++)
                acc[c] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(wp + c * nb * 16 + b * 16), acc[c]);
        }
        for (int c = 0; c < 8; c++) {
            __m256 lo = _mm512_castps512_ps256(acc[c]), hi = _mm512_extractf32x8_ps(acc[c], 1);
            __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(lo, hi), _mm256_setzero_ps());
            y[j + 2 * c] = s[0] + s[4];
            y[j + 2 * c + 1] = s[1] + s[5];
        }
    }
}

static void pack_pairs(float *dst, const float *w, int64_t n, int64_t k) {
    const int64_t nb = k / 8;
    for (int64_t p = 0; p < n / 2; p++)
        for (int64_t b = 0; b < nb; b++)
            for (int c = 0; c < 2; c++)
                memcpy(dst + (p * nb + b) * 16 + c * 8, w + (2 * p + c) * k + 8 * b,
                       8 * sizeof(float));
}
#endif

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Best and median us per call of fn over reps runs of enough calls to
 * stream about 64 MiB each. */
static void time_fn(mm_fn *fn, float *y, const float *x, const float *w, int64_t n, int64_t k,
                    long reps, double *best, double *median) {
    int64_t calls = (64LL << 20) / (n * k * (int64_t)sizeof(float)) + 1;
    double t[1000];
    fn(y, x, w, n, k); /* warm the caches */
    for (long r = 0; r < reps; r++) {
        double t0 = wall_us();
        for (int64_t i = 0; i < calls; i++) fn(y, x, w, n, k);
        t[r] = (wall_us() - t0) / (double)calls;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    *best = t[0];
    *median = t[reps / 2];
}

int main(int argc, char **argv) {
    static const char prog[] = "pw_kbench_f32_decode";
    long reps = 5;
    if (argc > 1 && !kb_parse_int(prog, "reps", argv[1], 1, 1000, &reps)) return 2;
    if (argc > 2) {
        fprintf(stderr, "usage: %s [reps]\n", prog);
        return 2;
    }
    pw_set_num_threads(1);
    bool avx512 = false;
#if defined(__x86_64__)
    avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#endif
    printf("f32 matmul at T = 1, one thread, weights streamed again and again (us per call; "
           "GB/s of weights at the best)\n");
    printf("%4s %10s %10s %10s %8s", "K", "weights", "best us", "median us", "GB/s");
    if (avx512) printf(" %12s %8s %8s", "packed2 us", "GB/s", "speedup");
    printf("\n");
    static const int64_t ks[] = {64, 172};
    static const int64_t sizes[] = {32 << 10, 128 << 10, 512 << 10, 1 << 20, 1536 << 10,
                                    3 << 20, 8 << 20};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki];
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si] / (k * (int64_t)sizeof(float)) / 16 * 16;
            size_t bytes = (size_t)(n * k) * sizeof(float);
            float *w = kb_activations(n * k), *x = kb_activations(k);
            float *y = malloc((size_t)n * sizeof *y);
            if (!y) abort();
            double best, med;
            time_fn(own, y, x, w, n, k, reps, &best, &med);
            printf("%4lld %9.0fK %10.2f %10.2f %8.1f", (long long)k, (double)bytes / 1024, best, med,
                   (double)bytes / best * 1e-3);
#if defined(__x86_64__)
            if (avx512 && k % 8 == 0) {
                float *wp = malloc(bytes);
                if (!wp) abort();
                pack_pairs(wp, w, n, k);
                double pbest, pmed;
                time_fn(packed_pairs, y, x, wp, n, k, reps, &pbest, &pmed);
                printf(" %12.2f %8.1f %7.2fx", pbest, (double)bytes / pbest * 1e-3, best / pbest);
                free(wp);
            }
#endif
            printf("\n");
            free(w);
            free(x);
            free(y);
        }
    }
    return 0;
}
