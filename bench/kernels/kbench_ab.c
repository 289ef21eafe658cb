/* The driver of kbench_ab.sh: the base commit's quantizer + tile code
 * (kb_old_*) against the working tree's copy, per SmolLM2-135M and
 * Llama-3.2-1B shape, one thread, calls alternated; prints the medians of
 * thread CPU time per call (quantize + product) and new / old, and whether
 * the output bits agree. The weights of a shape are read again call after
 * call (from cache, where they fit), or with `stream` repeated over copies
 * of at least 256 MiB in all, so that every product streams them from
 * memory as decode does (the time is then per product, over the copies).
 *   kbench_ab ROUNDS [filter] [cache|stream] */
#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "kbench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* stream: each shape's weights repeated over at least this many bytes */
#define KB_STREAM_BYTES (256.0 * 1024 * 1024)
#define KB_MAX_COPIES 256

/* The base's quantizer: told the weight type since the folds differ by it
 * (KB_OLD_TYPED, set by the script), or not. */
#ifdef KB_OLD_TYPED
void kb_old_quant(uint8_t *xa, const float *x, int64_t n_rows, int64_t k, pw_dtype type);
#define OLD_QUANT(xa, x, n, k, type) kb_old_quant(xa, x, n, k, type)
#else
void kb_old_quant(uint8_t *xa, const float *x, int64_t n_rows, int64_t k);
#define OLD_QUANT(xa, x, n, k, type) kb_old_quant(xa, x, n, k)
#endif
void kb_old_qdot(float *y, const uint8_t *xa, const uint8_t *w, pw_dtype type, int64_t n_tokens,
                 int64_t n, int64_t k, int64_t j0, int64_t j1);

#if defined(KB_COPY_avxvnni)
#define NEW_QUANT pw_k_q8b_quantize_rows_avxvnni
#define NEW_QDOT pw_k_qdot_run_avxvnni
#elif defined(KB_COPY_avx512vnni)
#define NEW_QUANT pw_k_q8b_quantize_rows_avx512vnni
#define NEW_QDOT pw_k_qdot_run_avx512vnni
#else
#define NEW_QUANT pw_k_q8b_quantize_rows_fma
#define NEW_QDOT pw_k_qdot_run_fma
#endif

int main(int argc, char **argv) {
    long rounds = 15;
    if (argc > 1 && !kb_parse_int("kbench_ab", "rounds", argv[1], 1, 1000, &rounds)) return 2;
    const char *filter = argc > 2 ? argv[2] : NULL;
    const char *mode = argc > 3 && argv[3][0] ? argv[3] : "cache";
    const bool stream = strcmp(mode, "stream") == 0;
    if (!stream && strcmp(mode, "cache") != 0) {
        fprintf(stderr, "kbench_ab: mode '%s': expected cache or stream\n", mode);
        return 2;
    }
    printf("%-8s %-5s %11s %4s %11s %11s %7s %s\n", "shape", "type", "N x K", "T", "old us",
           "new us", "new/old", "bits");
    for (size_t s = 0; s < KB_N_SMOLLM2_SHAPES + KB_N_1B_SHAPES; s++) {
        const kb_shape *sh = s < KB_N_SMOLLM2_SHAPES ? &kb_smollm2_shapes[s]
                                                     : &kb_1b_shapes[s - KB_N_SMOLLM2_SHAPES];
        if (!kb_shape_selected(sh, filter)) continue;
        const char *tn = kb_type_name(sh->type);
        const double wbytes =
            (double)pw_dtype_row_bytes(sh->type == PW_Q4_0X16 ? PW_Q4_0 : sh->type, sh->k) *
            (double)sh->n;
        int copies = stream ? (int)(KB_STREAM_BYTES / wbytes) + 1 : 1;
        if (copies > KB_MAX_COPIES) copies = KB_MAX_COPIES;
        uint8_t *ws[KB_MAX_COPIES];
        for (int c = 0; c < copies; c++) {
            uint8_t *w = kb_weights(sh->type == PW_Q4_0X16 ? PW_Q4_0 : sh->type, sh->n, sh->k);
            if (sh->type == PW_Q4_0X16) { /* as the loader converts it */
                uint8_t *x16 = malloc((size_t)wbytes);
                if (!x16) abort();
                pw_k_q4_0_interleave(x16, w, sh->n, sh->k);
                free(w);
                w = x16;
            }
            ws[c] = w;
        }
        float *x = kb_activations(sh->t * sh->k);
        size_t xab = (size_t)(sh->t * (sh->k / 32) * 256); /* ample for either layout */
        uint8_t *xa_old = malloc(xab), *xa_new = malloc(xab);
        float *y_old = malloc((size_t)(sh->t * sh->n) * sizeof(float));
        float *y_new = malloc((size_t)(sh->t * sh->n) * sizeof(float));
        double macs = (double)sh->t * (double)sh->n * (double)sh->k;
        int calls = (int)(1.5e7 / macs); /* ~1 ms per timed batch of calls */
        if (calls < 1 || stream) calls = 1;
        double *to = malloc((size_t)rounds * sizeof *to);
        double *tn_ = malloc((size_t)rounds * sizeof *tn_);
        for (int r = -1; r < rounds; r++) { /* r = -1: warm-up */
            for (int side = 0; side < 2; side++) {
                int is_new = (side + (r & 1)) & 1; /* order flipped every round */
                double t0 = kb_thread_us();
                for (int c = 0; c < calls * copies; c++) {
                    const uint8_t *w = ws[c % copies];
                    if (is_new) {
                        NEW_QUANT(xa_new, x, sh->t, sh->k, sh->type);
                        NEW_QDOT(y_new, xa_new, w, sh->type, sh->t, sh->n, sh->k, 0, sh->n);
                    } else {
                        OLD_QUANT(xa_old, x, sh->t, sh->k, sh->type);
                        kb_old_qdot(y_old, xa_old, w, sh->type, sh->t, sh->n, sh->k, 0, sh->n);
                    }
                }
                double dt = (kb_thread_us() - t0) / (calls * copies);
                if (r >= 0) (is_new ? tn_ : to)[r] = dt;
            }
        }
        bool same = memcmp(y_old, y_new, (size_t)(sh->t * sh->n) * sizeof(float)) == 0;
        /* per-round ratios, then medians */
        double *ratio = malloc((size_t)rounds * sizeof *ratio);
        for (int r = 0; r < rounds; r++) ratio[r] = tn_[r] / to[r];
        qsort(to, (size_t)rounds, sizeof *to, kb_cmp_double);
        qsort(tn_, (size_t)rounds, sizeof *tn_, kb_cmp_double);
        qsort(ratio, (size_t)rounds, sizeof *ratio, kb_cmp_double);
        printf("%-8s %-5s %5lldx%-5lld %4lld %11.1f %11.1f %7.3f %s (pairs %.3f-%.3f)",
               sh->name, tn, (long long)sh->n, (long long)sh->k, (long long)sh->t,
               to[rounds / 2], tn_[rounds / 2], ratio[rounds / 2], same ? "same" : "DIFFER",
               ratio[rounds / 4], ratio[rounds - 1 - rounds / 4]);
        if (stream) /* weight bytes per second at the medians */
            printf(" %.1f -> %.1f GB/s", wbytes / to[rounds / 2] * 1e-3,
                   wbytes / tn_[rounds / 2] * 1e-3);
        printf("\n");
        fflush(stdout);
        free(ratio), free(to), free(tn_), free(x), free(xa_old), free(xa_new), free(y_old),
            free(y_new);
        for (int c = 0; c < copies; c++) free(ws[c]);
    }
    return 0;
}
