/* Where the f32 decode matmul's time goes as its weights outgrow L1 and
 * L2: the stories260K question (BENCHMARKS.md, "f32 decode matmul
 * (stories260K)"). Built as build/pw_kbench_f32_decode:
 *
 *   build/pw_kbench_f32_decode [reps]
 *
 * For K = 64 and K = 172 (stories260K's dim and hidden size) and weights of
 * 32 KiB to 8 MiB, it times the own f32 matmul at T = 1 (pw_k_matmul_own,
 * one thread, the copy PW_KERNEL_ISA picks) over the same weights again
 * and again, so they sit in whatever level of the cache holds them, and
 * prints the best and median microseconds per call over `reps` runs (5)
 * and the weight bytes streamed per second at the median. A stories260K
 * decode token multiplies about 1.0 MiB of f32 weights (5 layers of
 * 4 x 64 x 64 ... , the 512 x 64 LM head), which is the row to read.
 *
 * Placement matters as much as the kernel: the weights sit 32 bytes past
 * a 64-byte boundary, where the engine finds them (GGUF aligns tensor
 * data to 32 bytes; every stories260K weight the matmul reads is at 32 mod
 * 64), so no 32-byte load crosses a cache line. The "16 mod 64" column
 * shows what malloc's 16-byte alignment costs (every other load split
 * over two lines), which the engine never sees.
 *
 * Two references beside it: "stream", one pass of 256-bit fmas over the
 * same bytes in address order with eight accumulators (no columns, no
 * sums: the ceiling for reading these weights once with 256-bit loads),
 * and, with AVX-512, a packed layout the library does not have: two
 * columns interleaved by blocks of 8 floats, so that one 512-bit load and
 * fma serve two columns (its lanes run the library's sequence and its sums
 * the same tree, so it returns the library's bits; checked before timing),
 * placed on a 64-byte boundary so that its loads do not split. */
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
        /* Column 2c + h's lanes are acc[c]'s half h: each column's tree
         * ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)), as the library sums. */
        for (int c = 0; c < 8; c++)
            for (int h = 0; h < 2; h++) {
                __m256 v = h ? _mm512_extractf32x8_ps(acc[c], 1) : _mm512_castps512_ps256(acc[c]);
                float l[8];
                _mm256_storeu_ps(l, v);
                y[j + 2 * c + h] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
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

/* 256-bit fmas over w's n * k floats in address order, eight accumulators:
 * the rate at which these bytes can be read at all (y[0] keeps the sum live). */
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void stream(float *y, const float *x, const float *w,
                                                       int64_t n, int64_t k) {
    const int64_t len = n * k / 64 * 64;
    __m256 xv = _mm256_loadu_ps(x), a[8];
    for (int c = 0; c < 8; c++) a[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < len; i += 64)
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) a[c] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w + i + 8 * c), a[c]);
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])),
                             _mm256_add_ps(_mm256_add_ps(a[4], a[5]), _mm256_add_ps(a[6], a[7])));
    _mm256_storeu_ps(y, s);
}
#endif

/* A copy of the n floats at src placed `offset` bytes past a 64-byte
 * boundary (free with the returned base). */
static float *placed_copy(const float *src, int64_t n, size_t offset, void **base) {
    size_t bytes = (size_t)n * sizeof(float);
    *base = aligned_alloc(64, (bytes + offset + 63) / 64 * 64);
    if (!*base) abort();
    float *p = (float *)((char *)*base + offset);
    memcpy(p, src, bytes);
    return p;
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
    bool x86_avx2 = false;
#if defined(__x86_64__)
    x86_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    printf("f32 matmul at T = 1, one thread, weights streamed again and again: best and median "
           "us per call, GB/s of weights at the median\n");
    printf("weights at 32 mod 64 bytes (where the engine finds them); 16 mod 64: malloc's "
           "placement; stream: the bytes read once in order\n");
    printf("%4s %8s %18s %8s %14s", "K", "weights", "own best/median", "GB/s", "16 mod 64 med");
    if (x86_avx2) printf(" %11s %6s", "stream med", "GB/s");
    if (avx512) printf(" %11s %6s %6s", "packed2 med", "GB/s", "speed");
    printf("\n");
    static const int64_t ks[] = {64, 172};
    static const int64_t sizes[] = {32 << 10, 128 << 10, 512 << 10, 1 << 20, 1536 << 10,
                                    3 << 20, 8 << 20};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki];
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si] / (k * (int64_t)sizeof(float)) / 16 * 16;
            size_t bytes = (size_t)(n * k) * sizeof(float);
            float *src = kb_activations(n * k), *x = kb_activations(k);
            float *y = malloc((size_t)n * sizeof *y), *y2 = malloc((size_t)n * sizeof *y2);
            if (!y || !y2) abort();
            void *base32, *base16;
            const float *w32 = placed_copy(src, n * k, 32, &base32);
            const float *w16 = placed_copy(src, n * k, 16, &base16);
            double best, med, best16, med16;
            time_fn(own, y, x, w32, n, k, reps, &best, &med);
            time_fn(own, y, x, w16, n, k, reps, &best16, &med16);
            printf("%4lld %7.0fK %8.2f / %7.2f %8.1f %14.2f", (long long)k, (double)bytes / 1024,
                   best, med, (double)bytes / med * 1e-3, med16);
#if defined(__x86_64__)
            if (x86_avx2) {
                double sbest, smed;
                time_fn(stream, y2, x, w32, n, k, reps, &sbest, &smed);
                printf(" %11.2f %6.1f", smed, (double)bytes / smed * 1e-3);
            }
            if (avx512 && k % 8 == 0) {
                void *basep;
                float *wp = placed_copy(src, n * k, 0, &basep);
                pack_pairs(wp, src, n, k);
                own(y, x, w32, n, k);
                packed_pairs(y2, x, wp, n, k);
                if (memcmp(y, y2, (size_t)n * sizeof *y) != 0) {
                    fprintf(stderr, "%s: the packed prototype's bits differ from the library's\n",
                            prog);
                    return 1;
                }
                double pbest, pmed;
                time_fn(packed_pairs, y, x, wp, n, k, reps, &pbest, &pmed);
                printf(" %11.2f %6.1f %5.2fx", pmed, (double)bytes / pmed * 1e-3, med / pmed);
                free(basep);
            }
#endif
            printf("\n");
            free(base32);
            free(base16);
            free(src);
            free(x);
            free(y);
            free(y2);
        }
    }
    return 0;
}
