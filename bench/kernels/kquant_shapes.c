/* A microbenchmark of the K-quant / Q5_0 matmul (matmul_kquant.c) at the
 * weight shapes and types of Gemma 3 270M Q4_K_M, one thread, T tokens
 * (default 128, a prefill chunk): per shape the median and the fastest CPU
 * time of one product (quantizing the activations included), GMAC/s, and
 * from the layer counts each shape's share of the model's matmul time.
 * Built as build/pw_kquant_shapes (the files directly in bench/ are the
 * CLI's):
 *   build/pw_kquant_shapes [T] [repeats] [copy: generic, avx2, avx-vnni,
 *                          avx512-vnni; default the best this CPU runs] [name filter]
 * The weights are random blocks with sane scales: the bits do not matter
 * here, only the time. The machine is shared and noisy: compare builds by
 * running them alternately, and read the fastest times beside the medians. */
#include "ops/cpu/kernels.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "kbench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REPS 256 /* timings kept per shape */

typedef struct shape {
    const char *name;
    pw_dtype type;
    int64_t n, k;
    int layers;
} shape;

int main(int argc, char **argv) {
    static const char prog[] = "pw_kquant_shapes";
    long T = 128, reps = 15;
    pw_k_int8_isa isa = pw_k_isa_int8();
    if (argc > 1 && !kb_parse_int(prog, "T", argv[1], 1, 4096, &T)) return 2;
    if (argc > 2 && !kb_parse_int(prog, "repeats", argv[2], 1, MAX_REPS, &reps)) return 2;
    if (argc > 3 && !kb_parse_isa(prog, argv[3], &isa)) return 2;
    const char *only = argc > 4 ? argv[4] : NULL;
    pw_set_num_threads(1); /* the thread's CPU time is the product's */
    const shape shapes[] = {
        {"attn_q Q5_0", PW_Q5_0, 1024, 640, 18},   {"attn_k Q5_0", PW_Q5_0, 256, 640, 18},
        {"attn_v Q5_0", PW_Q5_0, 256, 640, 9},     {"ffn_gate Q5_0", PW_Q5_0, 2048, 640, 18},
        {"ffn_up Q5_0", PW_Q5_0, 2048, 640, 18},   {"attn_out Q4_K", PW_Q4_K, 640, 1024, 18},
        {"ffn_down Q4_K", PW_Q4_K, 640, 2048, 9},  {"ffn_down Q6_K", PW_Q6_K, 640, 2048, 9},
    };
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    double med[16], mins[16], total = 0;
    for (int s = 0; s < ns; s++) {
        const shape *sh = &shapes[s];
        med[s] = 0;
        if (only && !strstr(sh->name, only)) continue;
        uint8_t *w = kb_weights(sh->type, sh->n, sh->k);
        float *x = kb_activations(T * sh->k), *y = malloc((size_t)(T * sh->n) * sizeof *y);
        double t[MAX_REPS];
        pw_k_matmul_kquant_with(isa, y, x, w, sh->type, T, sh->n, sh->k);
        for (int r = 0; r < reps; r++) {
            double t0 = kb_thread_us() * 1e-6;
            pw_k_matmul_kquant_with(isa, y, x, w, sh->type, T, sh->n, sh->k);
            t[r] = kb_thread_us() * 1e-6 - t0;
        }
        qsort(t, (size_t)reps, sizeof t[0], kb_cmp_double);
        med[s] = t[reps / 2];
        mins[s] = t[0];
        total += med[s] * sh->layers;
        free(w);
        free(x);
        free(y);
    }
    printf("T=%ld copy=%s repeats=%ld\n", T, pw_k_isa_int8_name(isa), reps);
    for (int s = 0; s < ns; s++) {
        const shape *sh = &shapes[s];
        if (med[s] == 0) continue;
        double macs = (double)T * (double)sh->n * (double)sh->k;
        printf("%-15s N=%5lld K=%5lld  median %8.1f us %6.1f GMAC/s  min %8.1f us %6.1f GMAC/s"
               "  x%2d layers: %5.1f%%\n",
               sh->name, (long long)sh->n, (long long)sh->k, med[s] * 1e6, macs / med[s] * 1e-9,
               mins[s] * 1e6, macs / mins[s] * 1e-9, sh->layers, 100.0 * med[s] * sh->layers / total);
    }
    printf("all layers: %.2f ms per %lld tokens\n", total * 1e3, (long long)T);
    return 0;
}
