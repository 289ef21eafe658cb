/* The driver of kbench_kq_ab.sh: the base commit's K-quant tile code
 * (kb_old_kqdot) against the working tree's copy, on batch-1 (decode)
 * products at Llama-3.2-1B's shapes, one thread, the two called in
 * alternation (old, new, new, old, ...) so that the host's drift falls on
 * both alike. Both read the same activation rows (the K-quant activation
 * layout is the portable quantizer's, shared by every copy). Weights are
 * streamed from memory (each shape repeated over at least 256 MiB) or read
 * again from L2 (at most 384 KiB of rows). Prints per shape the median and
 * the fast end (10th percentile) of each side's CPU time per product, the
 * median of the per-round speed ratios old/new, and whether the outputs
 * are the same bits. ROWS > 1 measures batched products (prefill, several
 * sequences' decode) of that many activation rows instead; the weights
 * then stream from memory once per product for all the rows.
 *   kbench_kq_ab ROUNDS [name filter] [stream|l2] [ROWS] */
#include "ops/cpu/isa.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "kbench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kb_old_kqdot(float *y, const uint8_t *xa, const uint8_t *w, pw_dtype type, int64_t n_tokens,
                  int64_t n, int64_t k, int64_t j0, int64_t j1);

#if defined(KB_COPY_avxvnni)
#define NEW_KQDOT pw_k_kqdot_run_avxvnni
#elif defined(KB_COPY_avx512vnni)
#define NEW_KQDOT pw_k_kqdot_run_avx512vnni
#else
#define NEW_KQDOT pw_k_kqdot_run_fma
#endif

#define MIN_BYTES (256.0 * 1024 * 1024)
#define MAX_COPIES 64
#define L2_BYTES (384 * 1024)

int main(int argc, char **argv) {
    static const char prog[] = "kbench_kq_ab";
    long rounds = 15;
    if (argc > 1 && !kb_parse_int(prog, "rounds", argv[1], 1, 100000, &rounds)) return 2;
    const char *only = argc > 2 && argv[2][0] ? argv[2] : NULL;
    bool l2;
    if (!kb_parse_mode(prog, argc > 3 ? argv[3] : NULL, &l2)) return 2;
    long rows = 1;
    if (argc > 4 && !kb_parse_int(prog, "rows", argv[4], 1, 4096, &rows)) return 2;
    const int64_t t = rows;
    static const struct {
        const char *name;
        pw_dtype type;
        int64_t n, k;
    } shapes[] = {
        {"q4_k gate/up", PW_Q4_K, 8192, 2048}, {"q4_k down", PW_Q4_K, 2048, 8192},
        {"q4_k q/o", PW_Q4_K, 2048, 2048},     {"q4_k lmhead", PW_Q4_K, 128256, 2048},
        {"q5_k gate/up", PW_Q5_K, 8192, 2048}, {"q6_k down", PW_Q6_K, 2048, 8192},
        {"q6_k lmhead", PW_Q6_K, 49152, 2048},
        /* Gemma 3 270M's o and down, as the K-shards its loader makes */
        {"gemma q4_k o/4", PW_Q4_K, 640, 256}, {"gemma q6_k down/4", PW_Q6_K, 640, 512},
    };
    printf("%-13s %15s %9s %9s %9s %9s %8s %s\n", "shape", "N x K", "old us", "new us",
           "old p10", "new p10", "old/new", "bits");
    double *to = malloc((size_t)rounds * sizeof *to), *tn = malloc((size_t)rounds * sizeof *tn);
    double *ratio = malloc((size_t)rounds * sizeof *ratio);
    if (!to || !tn || !ratio) abort();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (only && !strstr(shapes[s].name, only)) continue;
        pw_dtype type = shapes[s].type;
        int64_t n = shapes[s].n, k = shapes[s].k;
        const int64_t row_bytes = k / pw_dtype_block_elems(type) * pw_dtype_block_bytes(type);
        if (l2 && n * row_bytes > L2_BYTES) n = L2_BYTES / row_bytes / 16 * 16;
        const double bytes = (double)(n * row_bytes);
        int copies = l2 ? 1 : (int)(MIN_BYTES / (double)t / bytes) + 1;
        if (copies > MAX_COPIES) copies = MAX_COPIES;
        uint8_t *w[MAX_COPIES];
        for (int c = 0; c < copies; c++) w[c] = kb_weights(type, n, k);
        float *x = kb_activations(t * k);
        uint8_t *xa = malloc((size_t)(t * PW_K_Q8K_ROW_BYTES(k)));
        float *y_old = malloc((size_t)(t * n) * sizeof(float));
        float *y_new = malloc((size_t)(t * n) * sizeof(float));
        if (!xa || !y_old || !y_new) abort();
        pw_k_q8k_quantize_rows(xa, x, t, k);
        for (long r = -1; r < rounds; r++) { /* r = -1: warm-up */
            for (int side = 0; side < 2; side++) {
                int is_new = (side + (int)(r & 1)) & 1; /* order flipped every round */
                double t0 = kb_thread_us();
                for (int c = 0; c < copies; c++) {
                    if (is_new) NEW_KQDOT(y_new, xa, w[c], type, t, n, k, 0, n);
                    else kb_old_kqdot(y_old, xa, w[c], type, t, n, k, 0, n);
                }
                double dt = (kb_thread_us() - t0) / copies;
                if (r >= 0) (is_new ? tn : to)[r] = dt;
            }
            if (r >= 0) ratio[r] = to[r] / tn[r];
        }
        bool same = memcmp(y_old, y_new, (size_t)(t * n) * sizeof(float)) == 0;
        qsort(to, (size_t)rounds, sizeof *to, kb_cmp_double);
        qsort(tn, (size_t)rounds, sizeof *tn, kb_cmp_double);
        qsort(ratio, (size_t)rounds, sizeof *ratio, kb_cmp_double);
        printf("%-13s %6lld x %6lld %9.1f %9.1f %9.1f %9.1f %7.3fx %s\n", shapes[s].name,
               (long long)n, (long long)k, to[rounds / 2], tn[rounds / 2], to[rounds / 10],
               tn[rounds / 10], ratio[rounds / 2], same ? "same" : "DIFFER");
        for (int c = 0; c < copies; c++) free(w[c]);
        free(x);
        free(xa);
        free(y_old);
        free(y_new);
    }
    free(to);
    free(tn);
    free(ratio);
    return 0;
}
