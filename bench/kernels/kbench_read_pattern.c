/* The decode tiles' memory access without their arithmetic: how fast one
 * core reads 512 MiB of weights in 2 MiB pages when it walks them as a
 * batch-1 tile does, against a plain sequential read.
 *
 * A K-quant decode tile (matmul_kquant_body.h) reads super-block s of R
 * weight rows, then super-block s + 1 of the same rows, and asks for the
 * same super-block of a tile about 12 KiB ahead with a software prefetch
 * into L2. Here each block's 64-byte lines are loaded and added (nothing
 * else), so the figure is the pattern's ceiling, which no arithmetic can
 * raise: where the tile's figure is close to it, the order of the reads,
 * not the tile's instructions, is what is left. Each row of the table
 * alternates the patterns five times; the medians are printed.
 *   build/pw_kbench_read_pattern [BLOCK_BYTES] [BLOCKS_PER_ROW]
 * Defaults: 144 and 16 (Q4_K at K = 4096, Llama-3.1-8B's rows); 210 and 8
 * are Q6_K at K = 2048. One thread. */
#include "piecewise/extend.h" /* pw_pages_alloc */

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)512 << 20)
#define TURNS 5

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static volatile int64_t sink;

/* The reads are 64-byte vector loads: built for AVX-512 here, called only
 * where the CPU has it (the project builds without -march). */
#define AVX512 __attribute__((target("avx512f")))

AVX512 static int64_t sum_lines(const char *p, int64_t bytes, __m512i *acc) {
    for (int64_t o = 0; o + 64 <= bytes; o += 64)
        *acc = _mm512_add_epi64(*acc, _mm512_loadu_si512(p + o));
    return bytes;
}

/* GB/s of a plain front-to-back read. */
AVX512 static double sequential(const char *p) {
    __m512i acc = _mm512_setzero_si512();
    double t0 = seconds();
    sum_lines(p, (int64_t)BYTES, &acc);
    double t = seconds() - t0;
    sink = _mm512_reduce_add_epi64(acc);
    return (double)BYTES / t / 1e9;
}

/* GB/s of tiles of `rows` rows of nsb blocks of bb bytes, block-major, with
 * a prefetch `ahead` bytes past each block into L2 (0: none). */
AVX512 static double tiled(const char *p, int64_t bb, int64_t nsb, int rows, int64_t ahead) {
    const int64_t wrow = bb * nsb, tile = wrow * rows, tiles = (int64_t)BYTES / tile;
    __m512i acc = _mm512_setzero_si512();
    double t0 = seconds();
    int64_t read = 0;
    for (int64_t ti = 0; ti < tiles; ti++) {
        const char *w = p + ti * tile;
        for (int64_t s = 0; s < nsb; s++)
            for (int c = 0; c < rows; c++) {
                const char *blk = w + c * wrow + s * bb;
                if (ahead && blk + ahead + bb <= p + BYTES)
                    for (int64_t o = 0; o < bb; o += 64) _mm_prefetch(blk + ahead + o, _MM_HINT_T1);
                read += sum_lines(blk, bb, &acc);
            }
    }
    double t = seconds() - t0;
    sink = _mm512_reduce_add_epi64(acc);
    return (double)read / t / 1e9;
}

static double median5(double *v) {
    for (int i = 1; i < TURNS; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return v[TURNS / 2];
}

int main(int argc, char **argv) {
    const int64_t bb = argc > 1 ? atoll(argv[1]) : 144, nsb = argc > 2 ? atoll(argv[2]) : 16;
    if (bb < 64 || bb > 4096 || nsb < 1 || nsb > 1024) {
        fprintf(stderr, "usage: pw_kbench_read_pattern [BLOCK_BYTES 64-4096] [BLOCKS_PER_ROW 1-1024]\n");
        return 2;
    }
    if (!__builtin_cpu_supports("avx512f")) {
        printf("SKIP: this CPU has no AVX-512 (the pattern reads 64-byte vectors)\n");
        return 0;
    }
    char *p = pw_pages_alloc(BYTES, true);
    if (!p) {
        fprintf(stderr, "pw_kbench_read_pattern: cannot map %zu bytes\n", BYTES);
        return 1;
    }
    memset(p, 1, BYTES);
    const int64_t wrow = bb * nsb;
    printf("blocks of %lld bytes, %lld per row (%lld-byte rows), 512 MiB in 2 MiB pages; "
           "GB/s, median of %d alternations\n",
           (long long)bb, (long long)nsb, (long long)wrow, TURNS);
    printf("%-6s %10s %12s %14s\n", "rows", "sequential", "tile", "tile+prefetch");
    for (int rows = 1; rows <= 8; rows *= 2) {
        /* the tile's distance: whole tiles, at least 12 KiB (kq_pf_ahead) */
        int64_t tile = wrow * rows, ahead = (12288 + tile - 1) / tile * tile;
        double s[TURNS], t[TURNS], f[TURNS];
        for (int k = 0; k < TURNS; k++) {
            s[k] = sequential(p);
            t[k] = tiled(p, bb, nsb, rows, 0);
            f[k] = tiled(p, bb, nsb, rows, ahead);
        }
        printf("%-6d %10.1f %12.1f %14.1f\n", rows, median5(s), median5(t), median5(f));
    }
    pw_pages_free(p, BYTES);
    return 0;
}
