/* Memory read bandwidth, the ceiling of decode: each token reads every
 * weight once, so bytes per token times tokens per second can reach at
 * most what the cores can stream from DRAM.
 *
 * Each of `threads` threads reads its own contiguous slice of one buffer
 * of STREAM_BYTES (far larger than any cache), summing 64-bit words in
 * four independent chains so the adds never limit the loads. The buffer
 * is written once before timing, so no page fault is timed. The figure is
 * the best of `repeats` passes of the whole buffer: a ceiling, which a
 * loaded machine can only lower.
 *
 * The page size moves the figure on some hosts (AMD EPYC, one thread:
 * 24.5-27.8 GB/s over 4 KiB pages against 28.0-29.0 over 2 MiB ones in
 * three runs): a read that crosses a page every 4 KiB waits on the TLB,
 * more or less as the host's other tenants fill it. The weights are
 * mapped with huge pages where the kernel grants them (gguf.c), so the
 * buffer is read both ways and the ceiling is the faster.
 *
 * So does software prefetch on some CPUs: on an Intel Xeon (model 207)
 * one core reads 11.2-12.3 GB/s with the hardware's prefetchers alone
 * (11.6 over 2 MiB pages with 4 words a step, 12.2-12.3 with a line a
 * step, as now), while decode, whose tiles ask for their weights
 * STREAM_PREFETCH_BYTES ahead into L2, read 14.6 GB/s: one core's misses
 * in flight, not DRAM, bound the plain read there. The 2 MiB-page buffer is therefore read a third
 * time with the tiles' prefetch, and the ceiling is the fastest of the
 * three. */
#include "bench.h"

#include "piecewise/extend.h" /* pw_pages_huge_bytes */

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STREAM_BYTES ((size_t)512 << 20)
#define STREAM_MAX_THREADS 256

typedef struct stream_slice {
    const uint64_t *p;
    size_t words;
    uint64_t sum;
    atomic_int *go;
    bool prefetch;
} stream_slice;

/* How far ahead the prefetched read asks for lines into L2: the decode
 * tiles' distance (KQ_DECODE_PF_BYTES, docs/kernels.md). On the Xeon
 * above, 4, 12, 24 and 48 KiB all read 15.0-15.5 GB/s on one core
 * (30 GB/s on two) against 11.2-11.5 without prefetch. -D overrides are
 * for measuring. */
#ifndef STREAM_PREFETCH_BYTES
#define STREAM_PREFETCH_BYTES 12288
#endif

/* Sums the n words at p, a 64-byte line per step in four independent
 * chains so the adds never limit the loads; with `prefetch`, each line is
 * first asked for STREAM_PREFETCH_BYTES ahead (a prefetch past the
 * buffer's end is dropped, never a fault). The flag is constant over the
 * loop, which the compiler unswitches. */
__attribute__((noinline)) static uint64_t read_words(const uint64_t *p, size_t n, bool prefetch) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        if (prefetch) __builtin_prefetch((const char *)(p + i) + STREAM_PREFETCH_BYTES, 0, 2);
        s0 += p[i] + p[i + 4];
        s1 += p[i + 1] + p[i + 5];
        s2 += p[i + 2] + p[i + 6];
        s3 += p[i + 3] + p[i + 7];
    }
    for (; i < n; i++) s0 += p[i];
    return s0 + s1 + s2 + s3;
}

static void *slice_main(void *arg) {
    stream_slice *s = arg;
    while (!atomic_load(s->go)) sched_yield();
    s->sum = read_words(s->p, s->words, s->prefetch);
    return NULL;
}

int pw_bench_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > STREAM_MAX_THREADS ? STREAM_MAX_THREADS : (int)n;
}

/* One timed pass with `threads` threads (the caller's thread among them),
 * in GB/s; 0 when a thread cannot be started. */
static double one_pass(const uint64_t *buf, size_t words, int threads, bool prefetch) {
    stream_slice slices[STREAM_MAX_THREADS];
    pthread_t tids[STREAM_MAX_THREADS];
    atomic_int go = 0;
    size_t per = words / (size_t)threads;
    for (int t = 0; t < threads; t++)
        slices[t] = (stream_slice){buf + (size_t)t * per,
                                   t == threads - 1 ? words - (size_t)t * per : per, 0, &go,
                                   prefetch};
    int started = 1;
    while (started < threads && pthread_create(&tids[started], NULL, slice_main, &slices[started]) == 0)
        started++;
    uint64_t t0 = pw_bench_now_ns();
    atomic_store(&go, 1);
    if (started == threads) slices[0].sum = read_words(slices[0].p, slices[0].words, prefetch);
    for (int t = 1; t < started; t++) pthread_join(tids[t], NULL);
    uint64_t t1 = pw_bench_now_ns();
    if (started < threads) return 0; /* a thread could not start: nothing measured */
    uint64_t sum = 0;
    for (int t = 0; t < threads; t++) sum += slices[t].sum;
    pw_bench_sink(&sum);
    return (double)(words * sizeof(uint64_t)) / (double)(t1 - t0 ? t1 - t0 : 1);
}

/* One page size: GB/s, and the share of the buffer the kernel backed
 * with 2 MiB pages (huge) into *huge_share; where prefetch_gbs is not
 * NULL, the same buffer read with software prefetch into it. */
static double stream_pages(int threads, int repeats, bool huge, double *huge_share,
                           double *prefetch_gbs) {
    *huge_share = 0;
    size_t words = STREAM_BYTES / sizeof(uint64_t);
    uint64_t *buf = pw_pages_alloc(STREAM_BYTES, huge);
    if (!buf) return 0;
    for (size_t i = 0; i < words; i++) buf[i] = i; /* every page backed before timing */
    if (huge) *huge_share = (double)pw_pages_huge_bytes(buf, NULL) / (double)STREAM_BYTES;
    double best = 0, best_pf = 0;
    for (int r = 0; r < repeats; r++) {
        double g = one_pass(buf, words, threads, false);
        if (g > best) best = g;
        if (prefetch_gbs) {
            g = one_pass(buf, words, threads, true);
            if (g > best_pf) best_pf = g;
        }
    }
    if (prefetch_gbs) *prefetch_gbs = best_pf;
    pw_pages_free(buf, STREAM_BYTES);
    return best;
}

double pw_bench_stream_gbs(int threads, int repeats, pw_bench_stream *pages) {
    if (threads < 1) threads = 1;
    if (threads > STREAM_MAX_THREADS) threads = STREAM_MAX_THREADS;
    if (repeats < 1) repeats = 1;
    pw_bench_stream p;
    p.small_gbs = stream_pages(threads, repeats, false, &p.huge_share, NULL);
    p.huge_gbs = stream_pages(threads, repeats, true, &p.huge_share, &p.prefetch_gbs);
    if (pages) *pages = p;
    double best = p.huge_gbs > p.small_gbs ? p.huge_gbs : p.small_gbs;
    return p.prefetch_gbs > best ? p.prefetch_gbs : best;
}
