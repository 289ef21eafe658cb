/* A microbenchmark of batch-1 (decode) quantized products at Llama-3.2-1B's
 * shapes, as a model runs them: each shape is repeated over enough copies of
 * its weights (at least 256 MiB) that every product streams them from
 * memory, not from cache; or, with `l2`, over at most 384 KiB of its rows
 * (N cut to fit), read again and again from the core's L2: the kernel's
 * own cost without the memory's. One thread; per shape the fastest of the
 * repeats' CPU time per product, the weight bytes read per second and
 * GMAC/s. Built as build/pw_kbench_decode:
 *   build/pw_kbench_decode [T] [repeats] [name filter] [stream|l2]
 * The machine is shared and noisy: read the fastest times, and compare
 * builds by running them alternately. */
#include "ops/cpu/kernels.h"
#include "kbench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BYTES (256.0 * 1024 * 1024)
#define MAX_COPIES 64
#define L2_BYTES (384 * 1024)

int main(int argc, char **argv) {
    static const char prog[] = "pw_kbench_decode";
    long T = 1, reps = 5;
    if (argc > 1 && !kb_parse_int(prog, "T", argv[1], 1, 64, &T)) return 2;
    if (argc > 2 && !kb_parse_int(prog, "repeats", argv[2], 1, 10000, &reps)) return 2;
    const char *only = argc > 3 && argv[3][0] ? argv[3] : NULL;
    bool l2;
    if (!kb_parse_mode(prog, argc > 4 ? argv[4] : NULL, &l2)) return 2;
    pw_set_num_threads(1);
    static const struct {
        const char *name;
        pw_dtype type;
        int64_t n, k;
    } shapes[] = {
        {"q4_k gate/up", PW_Q4_K, 8192, 2048}, {"q4_k down", PW_Q4_K, 2048, 8192},
        {"q4_k q/o", PW_Q4_K, 2048, 2048},     {"q5_k gate/up", PW_Q5_K, 8192, 2048},
        {"q6_k down", PW_Q6_K, 2048, 8192},    {"q6_k lmhead", PW_Q6_K, 49152, 2048},
        {"q8_0 gate/up", PW_Q8_0, 8192, 2048}, {"q8_0 lmhead", PW_Q8_0, 49152, 2048},
        {"q4_0 gate/up", PW_Q4_0, 8192, 2048}, {"q4_0 down", PW_Q4_0, 2048, 8192},
        {"q4_0x16 gate/up", PW_Q4_0X16, 8192, 2048}, {"q4_0x16 down", PW_Q4_0X16, 2048, 8192},
        {"q4_1 gate/up", PW_Q4_1, 8192, 2048},
    };
    printf("T=%ld repeats=%ld copy=%s weights %s\n", T, reps, pw_k_isa_int8_name(pw_k_isa_int8()),
           l2 ? "from L2 (at most 384 KiB)" : "streamed from memory (at least 256 MiB)");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (only && !strstr(shapes[s].name, only)) continue;
        pw_dtype type = shapes[s].type;
        int64_t n = shapes[s].n, k = shapes[s].k;
        const int64_t row_bytes = k / pw_dtype_block_elems(type) * pw_dtype_block_bytes(type);
        if (l2 && n * row_bytes > L2_BYTES) n = L2_BYTES / row_bytes / 16 * 16;
        double bytes = (double)(n * row_bytes);
        int copies = l2 ? 1 : (int)(MIN_BYTES / bytes) + 1;
        if (copies > MAX_COPIES) copies = MAX_COPIES;
        uint8_t *w[MAX_COPIES];
        for (int c = 0; c < copies; c++) {
            /* Q4_0x16: Q4_0 weights interleaved, as the model loader does */
            w[c] = kb_weights(type == PW_Q4_0X16 ? PW_Q4_0 : type, n, k);
            if (type == PW_Q4_0X16) {
                uint8_t *x = kb_weights(PW_Q4_0, n, k);
                pw_k_q4_0_interleave(x, w[c], n, k);
                free(w[c]);
                w[c] = x;
            }
        }
        float *x = kb_activations(T * k), *y = malloc((size_t)(T * n) * sizeof *y);
        if (!y) abort();
        double best = 1e30;
        pw_k_matmul_quant(y, x, w[0], type, T, n, k);
        for (long r = 0; r < reps; r++) {
            double t0 = kb_thread_us();
            for (int c = 0; c < copies; c++) pw_k_matmul_quant(y, x, w[c], type, T, n, k);
            double t = (kb_thread_us() - t0) / copies;
            if (t < best) best = t;
        }
        printf("%-15s N=%5lld K=%5lld %8.1f us %6.2f GB/s %6.1f GMAC/s\n", shapes[s].name,
               (long long)n, (long long)k, best, bytes / best * 1e-3,
               (double)T * (double)n * (double)k / best * 1e-3);
        for (int c = 0; c < copies; c++) free(w[c]);
        free(x);
        free(y);
    }
    return 0;
}
