/* The matmul kernels with the weight's rows further apart than a row (a
 * block-aligned column range of a wider matrix, read in place: op
 * matmul_shards): every instruction-set copy, every weight type, 1-3
 * threads, decode and batches, gives bit for bit what it gives on the
 * same columns copied out into a dense matrix. Q4_0x16 (a column range of
 * an interleaved weight: each group's blocks [b0, b1)) gives the Q4_0
 * copy's bits. The K-shards of a whole weight run together
 * (pw_k_matmul_quant_shards) give each shard's own product's bits. */
#include "ops/cpu/kernels.h"
#include "ops/cpu/matmul_isa.h"
#include "ops/cpu/matmul_quant_isa.h"
#include "kernel_test_util.h"

#include <stdlib.h>
#include <string.h>

enum { N = 48, PARTS = 3 };

/* The f16 scale fields of each block of `type` (byte offsets; -1 ends). */
static const int *scale_fields(pw_dtype type) {
    static const int d[] = {0, -1}, dm[] = {0, 2, -1}, q6k[] = {208, -1};
    switch (type) {
    case PW_Q4_1:
    case PW_Q5_1:
    case PW_Q4_K:
    case PW_Q5_K: return dm;
    case PW_Q6_K: return q6k;
    default: return d;
    }
}

/* n elements of `type`: random quants, scales in [1/16, 1/8). */
static uint8_t *random_blocks(pw_dtype type, int64_t rows, int64_t k) {
    size_t bytes = (size_t)pw_dtype_row_bytes(type, k) * (size_t)rows;
    uint8_t *w = malloc(bytes);
    CHECK(w != NULL);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)kt_next();
    size_t bb = (size_t)pw_dtype_block_bytes(type);
    for (size_t b = 0; b < bytes / bb; b++)
        for (const int *f = scale_fields(type); *f >= 0; f++) {
            uint16_t h = (uint16_t)(0x2C00 | (kt_next() & 0x3FF));
            memcpy(w + b * bb + *f, &h, 2);
        }
    return w;
}

/* Part p (of PARTS) of each row of w [N][k], rows `row` bytes: [N][k/PARTS]. */
static uint8_t *copy_part(const uint8_t *w, size_t row, int p) {
    size_t part = row / PARTS;
    uint8_t *c = malloc(part * N);
    CHECK(c != NULL);
    for (int r = 0; r < N; r++) memcpy(c + r * part, w + r * row + p * part, part);
    return c;
}

static bool quant_case(pw_k_int8_isa level, pw_dtype type, int64_t t) {
    pw_dtype stored = type == PW_Q4_0X16 ? PW_Q4_0 : type;
    const int64_t ks = 4 * pw_dtype_block_elems(stored), k = PARTS * ks;
    const size_t row = (size_t)pw_dtype_row_bytes(stored, k);
    uint8_t *wq = random_blocks(stored, N, k), *w = wq;
    if (type == PW_Q4_0X16) {
        w = malloc(row * N);
        CHECK(w != NULL);
        pw_k_q4_0_interleave(w, wq, N, k);
    }
    const int64_t group = type == PW_Q4_0X16 ? PW_K_Q40X16_ROWS : 1;
    float *x = kt_random((size_t)(t * ks)), *y = kt_random((size_t)(t * N)),
          *want = kt_random((size_t)(t * N));
    bool same = true;
    for (int p = 0; p < PARTS; p++) {
        uint8_t *c = copy_part(wq, row, p);
        pw_k_matmul_quant_with(level, want, x, c, stored, t, N, ks);
        const uint8_t *at = w + (size_t)(group * pw_dtype_row_bytes(stored, p * ks));
        pw_k_matmul_quant_strided_with(level, y, x, at, (int64_t)row, type, t, N, ks);
        same &= kt_bitwise_equal(y, want, (size_t)(t * N) * sizeof *y);
        free(c);
    }
    if (w != wq) free(w);
    free(wq), free(x), free(y), free(want);
    return same;
}

static void test_quant(void) {
    static const pw_dtype types[] = {PW_Q8_0, PW_Q4_0, PW_Q4_0X16, PW_Q4_1, PW_Q5_0,
                                     PW_Q5_1, PW_Q4_K, PW_Q5_K,    PW_Q6_K};
    static const int64_t tokens[] = {1, 3, 16};
    for (int l = PW_K_INT8_GENERIC; l <= PW_K_INT8_AVX512VNNI; l++) {
        if (!pw_k_isa_int8_runs((pw_k_int8_isa)l)) continue;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            for (int th = 1; th <= 3; th++) {
                pw_set_num_threads(th);
                for (size_t j = 0; j < sizeof tokens / sizeof tokens[0]; j++) {
                    bool ok = quant_case((pw_k_int8_isa)l, types[i], tokens[j]);
                    if (!ok)
                        fprintf(stderr, "copy %s, %s, %d thread(s), T = %lld: differs\n",
                                pw_k_isa_int8_name(l), pw_dtype_name(types[i]), th,
                                (long long)tokens[j]);
                    CHECK(ok);
                }
            }
    }
    pw_set_num_threads(1);
}

/* pw_k_matmul_quant_shards_with over a whole [n][shards * ks] weight in
 * place (one row: the copy's one-pass tiles across the shards; a batch:
 * runs of rows) against each shard copied out and multiplied alone, at the
 * shard counts the models use and row counts that leave partial tiles
 * (Q4_0x16: whole groups, the row stride's condition). */
static bool shards_case(pw_k_int8_isa level, pw_dtype type, int64_t t, int64_t n,
                        int64_t shards, int64_t blocks) {
    pw_dtype stored = type == PW_Q4_0X16 ? PW_Q4_0 : type;
    const int64_t ks = blocks * pw_dtype_block_elems(stored), k = shards * ks;
    const size_t row = (size_t)pw_dtype_row_bytes(stored, k), part = row / (size_t)shards;
    uint8_t *wq = random_blocks(stored, n, k), *w = wq;
    if (type == PW_Q4_0X16) {
        w = malloc(row * (size_t)n);
        CHECK(w != NULL);
        pw_k_q4_0_interleave(w, wq, n, k);
    }
    const int64_t group = type == PW_Q4_0X16 ? PW_K_Q40X16_ROWS : 1;
    float *x = kt_random((size_t)(t * k)), *xs = kt_random((size_t)(t * ks));
    float *y = kt_random((size_t)(shards * t * n)), *want = kt_random((size_t)(t * n));
    uint8_t *c = malloc(part * (size_t)n);
    CHECK(c != NULL);
    pw_k_matmul_quant_shards_with(level, y, x, w, (int64_t)row, (size_t)group * part, type, t, n,
                                  ks, shards);
    bool same = true;
    for (int64_t s = 0; s < shards; s++) {
        for (int64_t r = 0; r < n; r++) memcpy(c + r * part, wq + r * row + s * part, part);
        for (int64_t r = 0; r < t; r++)
            memcpy(xs + r * ks, x + r * k + s * ks, (size_t)ks * sizeof *xs);
        pw_k_matmul_quant_with(level, want, xs, c, stored, t, n, ks);
        same &= kt_bitwise_equal(y + s * t * n, want, (size_t)(t * n) * sizeof *y);
    }
    if (w != wq) free(w);
    free(wq), free(c), free(x), free(xs), free(y), free(want);
    return same;
}

static void test_shards(void) {
    static const pw_dtype types[] = {PW_Q8_0, PW_Q4_0, PW_Q4_0X16, PW_Q4_1, PW_Q5_0,
                                     PW_Q5_1, PW_Q4_K, PW_Q5_K,    PW_Q6_K};
    static const int64_t tokens[] = {1, 2, 5}, counts[] = {2, 3, 4}, rows[] = {48, 29, 8};
    for (int l = PW_K_INT8_GENERIC; l <= PW_K_INT8_AVX512VNNI; l++) {
        if (!pw_k_isa_int8_runs((pw_k_int8_isa)l)) continue;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            for (int th = 1; th <= 2; th++) {
                pw_set_num_threads(th);
                for (size_t j = 0; j < sizeof tokens / sizeof tokens[0]; j++)
                    for (size_t a = 0; a < sizeof counts / sizeof counts[0]; a++)
                        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                            int64_t n = rows[r];
                            if (types[i] == PW_Q4_0X16) n = n / 16 * 16 + 16;
                            /* Q5_0: also shards past its decode panels' 64 blocks */
                            int64_t blocks = types[i] == PW_Q5_0 && r == 2 ? 65 : 3;
                            bool ok = shards_case((pw_k_int8_isa)l, types[i], tokens[j], n,
                                                  counts[a], blocks);
                            if (!ok)
                                fprintf(stderr,
                                        "copy %s, %s, %d thread(s), T = %lld, %lld shards, "
                                        "N = %lld: differs\n",
                                        pw_k_isa_int8_name(l), pw_dtype_name(types[i]), th,
                                        (long long)tokens[j], (long long)counts[a],
                                        (long long)n);
                            CHECK(ok);
                        }
            }
    }
    pw_set_num_threads(1);
}

/* The f32 tiles of both copies (ldw), and pw_k_matmul_strided (the BLAS
 * path where the build has it, at a weight big enough for it). */
static void f32_case(int64_t ks, int64_t t) {
    const int64_t k = PARTS * ks;
    float *w = kt_random((size_t)(N * k)), *x = kt_random((size_t)(t * ks));
    float *y = kt_random((size_t)(t * N)), *want = kt_random((size_t)(t * N));
    size_t scratch_floats = pw_k_matmul_scratch_floats(t, N, ks);
    float *scratch = scratch_floats ? malloc(scratch_floats * sizeof *scratch) : NULL;
    for (int p = 0; p < PARTS; p++) {
        float *c = (float *)(void *)copy_part((const uint8_t *)w, (size_t)k * sizeof *w, p);
        pw_k_matmul(want, x, c, t, N, ks, scratch);
        pw_k_matmul_strided(y, x, w + p * ks, k, t, N, ks, scratch);
        CHECK(kt_bitwise_equal(y, want, (size_t)(t * N) * sizeof *y));
        pw_k_matmul_cols_generic(want, x, c, ks, t, N, ks, 0, N);
        pw_k_matmul_cols_generic(y, x, w + p * ks, k, t, N, ks, 0, N);
        CHECK(kt_bitwise_equal(y, want, (size_t)(t * N) * sizeof *y));
#if PW_HAVE_FMA_KERNELS
        if (pw_k_isa_fma()) {
            pw_k_matmul_cols_fma(want, x, c, ks, t, N, ks, 0, N);
            pw_k_matmul_cols_fma(y, x, w + p * ks, k, t, N, ks, 0, N);
            CHECK(kt_bitwise_equal(y, want, (size_t)(t * N) * sizeof *y));
        }
#endif
        free(c);
    }
    free(scratch), free(w), free(x), free(y), free(want);
}

static void test_f32(void) {
    /* K % 8 != 0 (the zero-padded tail block), the fixed-K tiles, BLAS */
    static const int64_t widths[] = {36, 64, 24 * 1024};
    static const int64_t tokens[] = {1, 4, 17};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (int th = 1; th <= 3; th++) {
            pw_set_num_threads(th);
            for (size_t j = 0; j < sizeof tokens / sizeof tokens[0]; j++)
                f32_case(widths[i], tokens[j]);
        }
    pw_set_num_threads(1);
}

int main(void) {
    test_quant();
    test_shards();
    test_f32();
    return pw_test_finish("kernels_matmul_strided");
}
