/* A microbenchmark of the quantized matmul's copies on SmolLM2-135M's
 * shapes, for A/B comparisons of kernel changes (BENCHMARKS.md, "Kernel
 * microbenchmarks"). Built as build/pw_kbench_matmul_quant:
 *
 *   build/pw_kbench_matmul_quant [avx2|avx-vnni|avx512-vnni|generic] [reps] [filter]
 *
 * (bench/kernels/kbench_ab.sh is the A/B harness; this one times one
 * library.) For each (type, N x K, T) it runs pw_k_matmul_quant_with on one thread
 * `reps` times (each run a fixed number of calls), and prints the best
 * and median thread CPU time per call in microseconds, plus a hash of the
 * output bits so that two binaries can be checked to agree. Weights and
 * activations are pseudo-random (fixed seed), scales normal halves. */
#ifndef _GNU_SOURCE /* the CMake build defines it; a hand build may not */
#define _GNU_SOURCE      /* clock_gettime, CLOCK_THREAD_CPUTIME_ID under -std=c11 */
#endif
#include "ops/cpu/kernels.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "kbench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    static const char prog[] = "pw_kbench_matmul_quant";
    pw_k_int8_isa level = PW_K_INT8_AVX2;
    long reps = 5;
    if (argc > 1 && !kb_parse_isa(prog, argv[1], &level)) return 2;
    if (argc > 2 && !kb_parse_int(prog, "reps", argv[2], 1, 1000, &reps)) return 2;
    const char *filter = argc > 3 ? argv[3] : NULL;
    pw_set_num_threads(1);
    printf("%-8s %-5s %11s %4s %10s %10s %18s\n", "shape", "type", "N x K", "T", "best us",
           "median us", "hash");
    for (size_t s = 0; s < KB_N_SMOLLM2_SHAPES; s++) {
        const kb_shape *sh = &kb_smollm2_shapes[s];
        if (!kb_shape_selected(sh, filter)) continue;
        const char *tn = kb_type_name(sh->type);
        uint8_t *w = kb_weights(sh->type, sh->n, sh->k);
        float *x = kb_activations(sh->t * sh->k);
        float *y = malloc((size_t)(sh->t * sh->n) * sizeof *y);
        double macs = (double)sh->t * (double)sh->n * (double)sh->k;
        int calls = (int)(2e8 / macs);
        if (calls < 2) calls = 2;
        if (calls > 2000) calls = 2000;
        pw_k_matmul_quant_with(level, y, x, w, sh->type, sh->t, sh->n, sh->k); /* warm */
        double *per = malloc((size_t)reps * sizeof *per);
        for (int r = 0; r < reps; r++) {
            double t0 = kb_thread_us();
            for (int c = 0; c < calls; c++)
                pw_k_matmul_quant_with(level, y, x, w, sh->type, sh->t, sh->n, sh->k);
            per[r] = (kb_thread_us() - t0) / calls;
        }
        double best = per[0];
        for (int r = 1; r < reps; r++) best = per[r] < best ? per[r] : best;
        qsort(per, (size_t)reps, sizeof *per, kb_cmp_double);
        uint64_t hash = 1469598103934665603ull;
        const uint8_t *yb = (const uint8_t *)y;
        for (size_t i = 0; i < (size_t)(sh->t * sh->n) * sizeof *y; i++)
            hash = (hash ^ yb[i]) * 1099511628211ull;
        printf("%-8s %-5s %5lldx%-5lld %4lld %10.1f %10.1f %018llx\n", sh->name, tn,
               (long long)sh->n, (long long)sh->k, (long long)sh->t, best, per[reps / 2],
               (unsigned long long)hash);
        fflush(stdout);
        free(per), free(w), free(x), free(y);
    }
    return 0;
}
