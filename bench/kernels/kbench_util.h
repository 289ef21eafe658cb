/* What the kernel microbenchmarks in bench/kernels/ share: a fixed-seed
 * generator, weight blocks of random bytes with sane scales (the bits of
 * the products do not matter here, only their time), activations, the
 * thread's CPU clock, a double comparison for qsort and the SmolLM2-135M
 * shapes. Header-only: kbench_ab.sh compiles kbench_ab.c by itself. */
#ifndef PW_BENCH_KBENCH_UTIL_H
#define PW_BENCH_KBENCH_UTIL_H

#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uint32_t kb_rng = 12345u;

static inline uint32_t kb_next(void) { /* xorshift32 */
    kb_rng ^= kb_rng << 13;
    kb_rng ^= kb_rng >> 17;
    kb_rng ^= kb_rng << 5;
    return kb_rng;
}

/* A normal half of magnitude about 2^-9 .. 2^-5, either sign, at p. */
static inline void kb_put_half(uint8_t *p) {
    uint32_t r = kb_next();
    uint16_t h = (uint16_t)(((r & 1) << 15) | ((6 + (r >> 1) % 5) << 10) | ((r >> 8) & 0x3FF));
    memcpy(p, &h, sizeof h);
}

/* Weight bytes as decode reads them from a model file mapped in 2 MiB
 * pages (docs/gguf.md): on a 2 MiB boundary with huge-page advice, unless
 * KB_PAGES=small asks for the 4 KiB pages malloc gives. Freed by free(). */
static inline uint8_t *kb_alloc_weights(size_t bytes) {
    const char *pages = getenv("KB_PAGES");
    bool small = pages && strcmp(pages, "small") == 0;
    void *w = NULL;
    if (small ? (w = malloc(bytes)) == NULL : posix_memalign(&w, (size_t)2 << 20, bytes) != 0)
        abort();
#ifdef MADV_HUGEPAGE
    if (!small) (void)madvise(w, bytes, MADV_HUGEPAGE);
#endif
    return w;
}

/* n x k weights of `type` (n * k / block elements blocks): random bytes,
 * then the block's f16 scales made normal (d at 0, and m or dmin at 2 for
 * Q4_1 and Q4_K/Q5_K; Q6_K's d sits at the end of its block). */
static inline uint8_t *kb_weights(pw_dtype type, int64_t n, int64_t k) {
    int64_t be = pw_dtype_block_elems(type), bb = pw_dtype_block_bytes(type);
    int64_t nb = n * (k / be);
    uint8_t *w = kb_alloc_weights((size_t)(nb * bb));
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = w + b * bb;
        for (int64_t i = 0; i < bb; i++) blk[i] = (uint8_t)kb_next();
        if (type == PW_Q6_K) {
            kb_put_half(blk + bb - 2);
        } else {
            kb_put_half(blk);
            if (type == PW_Q4_1 || type == PW_Q4_K || type == PW_Q5_K) kb_put_half(blk + 2);
        }
    }
    return w;
}

/* n activations in [-1, 1). */
static inline float *kb_activations(int64_t n) {
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) abort();
    for (int64_t i = 0; i < n; i++) x[i] = (float)((int32_t)(kb_next() % 20001) - 10000) * 1e-4f;
    return x;
}

static inline double kb_thread_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static inline int kb_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct kb_shape {
    const char *name;
    pw_dtype type;
    int64_t n, k, t;
} kb_shape;

/* SmolLM2-135M's products: projections at prefill (T = 128), batched
 * decode (16) and decode (1), the tied Q8_0 LM head, and a few other
 * batch sizes and types. */
static const kb_shape kb_smollm2_shapes[] = {
    {"q/o", PW_Q4_1, 576, 576, 128},      {"k/v", PW_Q4_1, 192, 576, 128},
    {"gate/up", PW_Q4_1, 1536, 576, 128}, {"down", PW_Q4_1, 576, 1536, 128},
    {"q/o", PW_Q4_1, 576, 576, 16},       {"k/v", PW_Q4_1, 192, 576, 16},
    {"gate/up", PW_Q4_1, 1536, 576, 16},  {"down", PW_Q4_1, 576, 1536, 16},
    {"lmhead", PW_Q8_0, 49152, 576, 16},  {"lmhead", PW_Q8_0, 49152, 576, 1},
    {"gate/up", PW_Q4_1, 1536, 576, 1},   {"down", PW_Q4_1, 576, 1536, 1},
    {"gate/up", PW_Q4_1, 1536, 576, 4},   {"gate/up", PW_Q4_1, 1536, 576, 7},
    {"gate/up", PW_Q4_0, 1536, 576, 16},  {"gate/up", PW_Q8_0, 1536, 576, 16},
    {"gate/up", PW_Q8_0, 1536, 576, 4},
    {"gate/up", PW_Q4_0, 1536, 576, 128}, {"gate/up", PW_Q4_0, 1536, 576, 1},
    {"down", PW_Q4_0, 576, 1536, 1},      {"down", PW_Q4_0, 576, 1536, 128},
};
#define KB_N_SMOLLM2_SHAPES (sizeof kb_smollm2_shapes / sizeof kb_smollm2_shapes[0])

/* Products at Llama-3.2-1B's shapes (prefill T = 128, 16 sequences,
 * decode T = 1; q/o, gate/up, down and a slice of the LM head), N cut to a
 * slice so that a call takes milliseconds: Q4_0 as the loader keeps it
 * (Q4_0x16) and Q8_0; then decode's whole weights (1b-up, 1b-dn, 1b-qo,
 * 1b-kv: for kbench_ab's stream mode, which reads them from memory). */
static const kb_shape kb_1b_shapes[] = {
    {"1b-gate", PW_Q4_0X16, 1024, 2048, 128}, {"1b-down", PW_Q4_0X16, 256, 8192, 128},
    {"1b-gate", PW_Q4_0X16, 1024, 2048, 16},  {"1b-gate", PW_Q4_0X16, 1024, 2048, 1},
    {"1b-gate", PW_Q8_0, 1024, 2048, 128},    {"1b-down", PW_Q8_0, 256, 8192, 128},
    {"1b-gate", PW_Q8_0, 1024, 2048, 16},     {"1b-gate", PW_Q8_0, 1024, 2048, 1},
    {"1b-down", PW_Q8_0, 256, 8192, 16},      {"1b-down", PW_Q8_0, 256, 8192, 1},
    {"1b-qo", PW_Q8_0, 2048, 2048, 128},      {"1b-qo", PW_Q8_0, 2048, 2048, 16},
    {"1b-qo", PW_Q8_0, 2048, 2048, 1},        {"1b-head", PW_Q8_0, 4096, 2048, 128},
    {"1b-head", PW_Q8_0, 4096, 2048, 16},     {"1b-head", PW_Q8_0, 4096, 2048, 1},
    {"1b-up", PW_Q4_0X16, 8192, 2048, 1},     {"1b-dn", PW_Q4_0X16, 2048, 8192, 1},
    {"1b-qo", PW_Q4_0X16, 2048, 2048, 1},     {"1b-kv", PW_Q4_0X16, 512, 2048, 1},
    {"1b-up", PW_Q8_0, 8192, 2048, 1},        {"1b-dn", PW_Q8_0, 2048, 8192, 1},
    {"1b-up", PW_Q4_1, 8192, 2048, 1},        {"1b-dn", PW_Q4_1, 2048, 8192, 1},
};
#define KB_N_1B_SHAPES (sizeof kb_1b_shapes / sizeof kb_1b_shapes[0])

static inline const char *kb_type_name(pw_dtype type) {
    return type == PW_Q8_0     ? "q8_0"
           : type == PW_Q4_0   ? "q4_0"
           : type == PW_Q4_0X16 ? "q4_0x16"
                               : "q4_1";
}

/* The copy named by `name` (pw_k_isa_int8_name's names: generic, avx2,
 * avx-vnni, avx512-vnni) into *out; false, with a message on stderr, when
 * the name is unknown or this CPU cannot run that copy. */
static inline bool kb_parse_isa(const char *prog, const char *name, pw_k_int8_isa *out) {
    for (int l = PW_K_INT8_GENERIC; l <= PW_K_INT8_AVX512VNNI; l++) {
        if (strcmp(name, pw_k_isa_int8_name((pw_k_int8_isa)l)) != 0) continue;
        if (!pw_k_isa_int8_runs((pw_k_int8_isa)l)) {
            fprintf(stderr, "%s: this CPU does not run the %s copy\n", prog, name);
            return false;
        }
        *out = (pw_k_int8_isa)l;
        return true;
    }
    fprintf(stderr, "%s: unknown copy '%s' (generic, avx2, avx-vnni or avx512-vnni)\n", prog,
            name);
    return false;
}

/* A whole number from lo to hi in *out; false, with a message, otherwise. */
static inline bool kb_parse_int(const char *prog, const char *what, const char *s, long lo,
                                long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s '%s': expected a whole number from %ld to %ld\n", prog, what, s,
                lo, hi);
        return false;
    }
    *out = v;
    return true;
}

/* Where the weights come from: "stream" (from memory, the default when s
 * is NULL) or "l2" (*l2 true). False, with a message, for anything else. */
static inline bool kb_parse_mode(const char *prog, const char *s, bool *l2) {
    *l2 = s && strcmp(s, "l2") == 0;
    if (s && !*l2 && strcmp(s, "stream") != 0) {
        fprintf(stderr, "%s: mode '%s': expected stream or l2\n", prog, s);
        return false;
    }
    return true;
}

/* Whether shape `sh`, labelled name/type/T/, contains `filter` or one of
 * its comma-separated parts (NULL or empty: every shape; "q4_0x16/1/"
 * picks T = 1 only). */
static inline bool kb_shape_selected(const kb_shape *sh, const char *filter) {
    if (!filter || !filter[0]) return true;
    char label[64];
    snprintf(label, sizeof label, "%s/%s/%lld/", sh->name, kb_type_name(sh->type),
             (long long)sh->t);
    for (const char *p = filter;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        for (const char *l = label; len && *l; l++)
            if (strncmp(l, p, len) == 0) return true;
        if (!end) return false;
        p = end + 1;
    }
}

#endif
