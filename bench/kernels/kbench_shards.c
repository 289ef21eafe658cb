/* A/B microbenchmark of the row-parallel products (o and down) as op
 * matmul_shards runs them: the 4 K-shards of each product read in place
 * from the whole [N][K] weight (pw_k_matmul_quant_shards, the kernels' row
 * stride: what the loader now keeps) against the same shards copied out into dense [N][K/4]
 * matrices (what it kept before). The two are called alternately in one
 * process over enough copies of the weights (at least 256 MiB) that every
 * product streams them from memory, so the host's drift falls on both
 * alike; per shape the fastest repeat's thread CPU time per product and
 * the weight bytes read per second. The outputs are compared bit for bit.
 *   build/pw_kbench_shards [T] [repeats] [name filter]
 * One thread (the model's decode at --threads 1). */
#include "ops/cpu/kernels.h"
#include "kbench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SHARDS 4
#define MIN_BYTES (256.0 * 1024 * 1024)
#define MAX_COPIES 64

typedef struct weights {
    uint8_t *whole;         /* [N][K], in place */
    uint8_t *part[SHARDS];  /* [N][K / SHARDS] each, copied */
} weights;

/* The 4 partial products of one weight, x [t][k]: in place (the op's
 * kernel), or each shard's copy with x's columns packed per shard (xs). */
static void shards(float *y, const float *x, const float *const *xs, const weights *w,
                   pw_dtype type, long t, int64_t n, int64_t k, bool in_place) {
    const int64_t ks = k / SHARDS, group = type == PW_Q4_0X16 ? PW_K_Q40X16_ROWS : 1;
    if (in_place) {
        pw_k_matmul_quant_shards(y, x, w->whole, pw_dtype_row_bytes(type, k),
                                 (size_t)(group * pw_dtype_row_bytes(type, ks)), type, t, n, ks,
                                 SHARDS);
        return;
    }
    for (int s = 0; s < SHARDS; s++)
        pw_k_matmul_quant(y + s * t * n, xs[s], w->part[s], type, t, n, ks);
}

/* A copy of `bytes` at p in memory of its own, on 2 MiB pages when
 * KB_HUGE=1 asks (madvise): the file mapping the loader reads may be on
 * either, and strided rows touch 4x the pages per pass. */
static uint8_t *own(uint8_t *p, size_t bytes) {
    const char *huge = getenv("KB_HUGE");
    if (!huge || strcmp(huge, "1") != 0) return p;
    size_t align = 2u << 20, cap = (bytes + align - 1) / align * align;
    uint8_t *q = aligned_alloc(align, cap);
    if (!q) abort();
    (void)madvise(q, cap, MADV_HUGEPAGE);
    memcpy(q, p, bytes);
    free(p);
    return q;
}

static void make(weights *w, pw_dtype type, int64_t n, int64_t k) {
    pw_dtype stored = type == PW_Q4_0X16 ? PW_Q4_0 : type;
    uint8_t *q = kb_weights(stored, n, k);
    const size_t row = (size_t)pw_dtype_row_bytes(stored, k), part = row / SHARDS;
    for (int s = 0; s < SHARDS; s++) {
        uint8_t *c = malloc(part * (size_t)n);
        if (!c) abort();
        for (int64_t r = 0; r < n; r++) memcpy(c + r * part, q + r * row + s * part, part);
        w->part[s] = c;
        if (type == PW_Q4_0X16) { /* each shard interleaved, as the loader did */
            uint8_t *x = malloc(part * (size_t)n);
            if (!x) abort();
            pw_k_q4_0_interleave(x, c, n, k / SHARDS);
            free(c);
            w->part[s] = x;
        }
    }
    w->whole = q;
    if (type == PW_Q4_0X16) { /* the whole weight interleaved, as the loader does */
        w->whole = malloc(row * (size_t)n);
        if (!w->whole) abort();
        pw_k_q4_0_interleave(w->whole, q, n, k);
        free(q);
    }
    w->whole = own(w->whole, row * (size_t)n);
    for (int s = 0; s < SHARDS; s++) w->part[s] = own(w->part[s], part * (size_t)n);
}

static void drop(weights *w) {
    free(w->whole);
    for (int s = 0; s < SHARDS; s++) free(w->part[s]);
}

int main(int argc, char **argv) {
    static const char prog[] = "pw_kbench_shards";
    long T = 1, reps = 7;
    if (argc > 1 && !kb_parse_int(prog, "T", argv[1], 1, 256, &T)) return 2;
    if (argc > 2 && !kb_parse_int(prog, "repeats", argv[2], 1, 10000, &reps)) return 2;
    const char *only = argc > 3 && argv[3][0] ? argv[3] : NULL;
    pw_set_num_threads(1);
    /* o and down (T: the command line's) */
    static const kb_shape shapes[] = {
        {"1b q4_k down", PW_Q4_K, 2048, 8192, 0},
        {"1b q4_k o", PW_Q4_K, 2048, 2048, 0},
        {"1b q6_k down", PW_Q6_K, 2048, 8192, 0},
        {"1b q8_0 down", PW_Q8_0, 2048, 8192, 0},
        {"1b q4_0x16 down", PW_Q4_0X16, 2048, 8192, 0},
        {"1b q4_0x16 o", PW_Q4_0X16, 2048, 2048, 0},
        {"1b q5_0 down", PW_Q5_0, 2048, 8192, 0},
        {"8b q4_k down", PW_Q4_K, 4096, 14336, 0},
        {"8b q4_k o", PW_Q4_K, 4096, 4096, 0},
    };
    printf("T=%ld repeats=%ld copy=%s, %d shards, in place (row stride) vs copied shards\n", T,
           reps, pw_k_isa_int8_name(pw_k_isa_int8()), SHARDS);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (only && !strstr(shapes[i].name, only)) continue;
        pw_dtype type = shapes[i].type;
        int64_t n = shapes[i].n, k = shapes[i].k;
        double bytes = (double)n * (double)pw_dtype_row_bytes(type, k);
        int copies = (int)(MIN_BYTES / bytes) + 1;
        if (copies > MAX_COPIES) copies = MAX_COPIES;
        weights w[MAX_COPIES];
        for (int c = 0; c < copies; c++) make(&w[c], type, n, k);
        float *x = kb_activations(T * k), *xs[SHARDS];
        for (int s = 0; s < SHARDS; s++) {
            xs[s] = malloc((size_t)(T * (k / SHARDS)) * sizeof *xs[s]);
            if (!xs[s]) abort();
            for (long t = 0; t < T; t++)
                memcpy(xs[s] + t * (k / SHARDS), x + t * k + s * (k / SHARDS),
                       (size_t)(k / SHARDS) * sizeof *x);
        }
        float *ya = malloc((size_t)(SHARDS * T * n) * sizeof *ya);
        float *yb = malloc((size_t)(SHARDS * T * n) * sizeof *yb);
        if (!ya || !yb) abort();
        shards(ya, x, (const float *const *)xs, &w[0], type, T, n, k, true);
        shards(yb, x, (const float *const *)xs, &w[0], type, T, n, k, false);
        bool same = memcmp(ya, yb, (size_t)(SHARDS * T * n) * sizeof *ya) == 0;
        double best[2] = {1e30, 1e30};
        for (long r = 0; r < reps; r++)
            for (int v = 0; v < 2; v++) {
                double t0 = kb_thread_us();
                for (int c = 0; c < copies; c++)
                    shards(ya, x, (const float *const *)xs, &w[c], type, T, n, k, v == 0);
                double t = (kb_thread_us() - t0) / copies;
                if (t < best[v]) best[v] = t;
            }
        printf("%-16s N=%5lld K=%5lld in place %8.1f us %6.2f GB/s | copied %8.1f us %6.2f "
               "GB/s | %.3fx the time%s\n",
               shapes[i].name, (long long)n, (long long)k, best[0], bytes / best[0] * 1e-3,
               best[1], bytes / best[1] * 1e-3, best[0] / best[1], same ? "" : " BITS DIFFER");
        for (int c = 0; c < copies; c++) drop(&w[c]);
        for (int s = 0; s < SHARDS; s++) free(xs[s]);
        free(x), free(ya), free(yb);
    }
    return 0;
}
