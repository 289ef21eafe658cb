/* y[T][N] = x[T][K] * W[N][K]^T with W in ggml blocks (Q8_0, Q4_0, Q4_1),
 * batch-invariant; and the row lookup of a quantized embedding table.
 *
 * Every output element is computed by one sequence of float operations,
 * whichever tile, T or instruction set reaches it. With x_b the 32
 * activations of block b split in four 8-lane groups g0..g3 (elements 0-7,
 * 8-15, 16-23, 24-31), q the block's integer values converted to float
 * (exact; Q4_0: nibble - 8, Q4_1: the nibble) and fma(a, b, c) = a*b + c
 * rounded once, lane-wise:
 *   s   = fma(g3, q3, fma(g2, q2, fma(g1, q1, g0*q0)))
 *   acc = fma(d, s, acc)                        Q8_0, Q4_0
 *   acc = fma(m, xs, fma(d, s, acc))            Q4_1, xs = (g0 + g1) + (g2 + g3)
 * over blocks b in order from acc = +0, then the 8 lanes are reduced by
 * the fixed tree ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). K is a multiple of
 * 32, so there is no tail. The Q4_1 form is d*sum(x q) + m*sum(x) per
 * block, kept in lanes so no per-block horizontal sum is needed.
 *
 * The register tiles (rows x columns of accumulators) and the column
 * blocking only change how many elements are in flight, never that
 * sequence, so row t's result depends on row t alone.
 *
 * The tile code (matmul_quant_body.h) is compiled twice: here for the
 * baseline ISA and by matmul_quant_fma.c with AVX2+FMA+F16C, picked at run
 * time by pw_k_isa_fma() (isa.h). Multiply-adds go through pw_v8_madd (the
 * FMA instruction in one copy, fmaf in the other: one rounding, the same
 * bits); only the unpacking differs (AVX2 widening and F16C conversion vs
 * portable code), and both give the same exact floats. The test runs both
 * copies and compares them with each other and with a scalar model of the
 * sequence. */
#include "ops/cpu/kernels.h"

#include <assert.h>
#include <string.h>

/* The baseline copy of the tile code; matmul_quant_fma.c builds the other. */
#include "ops/cpu/matmul_quant_body.h"

bool pw_k_quant_supported(pw_dtype type) {
    return type == PW_Q8_0 || type == PW_Q4_0 || type == PW_Q4_1;
}

/* Columns go to threads in groups of this many (the 1 x 8 tile's width). */
#define COL_GROUP 8

typedef struct quant_cols_job {
    float *y;
    const float *x;
    const uint8_t *w;
    pw_dtype type;
    int64_t n_tokens, n, k;
} quant_cols_job;

static void quant_cols_range(void *ctx, int64_t j0, int64_t j1) {
    const quant_cols_job *j = ctx;
    PW_ISA_CALL(pw_k_matmul_quant_run, j->y, j->x, j->w, j->type, j->n_tokens, j->n, j->k, j0, j1);
}

/* With several threads, large products are split by output columns in
 * groups of 8, as the f32 kernel does: every element still follows the
 * documented sequence, so the split changes no bit. */
void pw_k_matmul_quant(float *y, const float *x, const void *w, pw_dtype type,
                       int64_t n_tokens, int64_t n, int64_t k) {
    assert(pw_k_quant_supported(type) && k % QK == 0);
    if (n > COL_GROUP && n_tokens * n * k >= PW_K_PARALLEL_MIN_MACS && pw_k_parallel_threads() > 1) {
        quant_cols_job job = {y, x, w, type, n_tokens, n, k};
        pw_k_parallel_cols(n, COL_GROUP, quant_cols_range, &job);
        return;
    }
    PW_ISA_CALL(pw_k_matmul_quant_run, y, x, w, type, n_tokens, n, k, 0, n);
}

static void matmul_quant_launch(const void *args) {
    const pw_k_matmul_quant_args *a = args;
    pw_k_matmul_quant(a->y, a->x, a->w, a->type, a->n_tokens, a->n, a->k);
}
const pw_kernel pw_kernel_matmul_quant = {"matmul_quant", matmul_quant_launch, NULL};

/* ---- embedding ----------------------------------------------------------- */

/* The same float operations as pw_dequantize (src/model/dequant.c), so a
 * quantized table gives the rows the dequantized one would hold. */
static void dequant_row(float *out, const uint8_t *row, pw_dtype type, int64_t dim) {
    for (int64_t b = 0; b < dim / QK; b++) {
        float *o = out + b * QK;
        if (type == PW_Q8_0) {
            const uint8_t *blk = row + b * Q8_0_BYTES;
            float d = mq_half(blk);
            for (int j = 0; j < QK; j++) o[j] = (float)(int8_t)blk[2 + j] * d;
        } else if (type == PW_Q4_0) {
            const uint8_t *blk = row + b * Q4_0_BYTES;
            float d = mq_half(blk);
            for (int j = 0; j < QK / 2; j++) {
                o[j] = (float)((blk[2 + j] & 0x0F) - 8) * d;
                o[j + QK / 2] = (float)((blk[2 + j] >> 4) - 8) * d;
            }
        } else {
            const uint8_t *blk = row + b * Q4_1_BYTES;
            float d = mq_half(blk), m = mq_half(blk + 2);
            for (int j = 0; j < QK / 2; j++) {
                o[j] = (float)(blk[4 + j] & 0x0F) * d + m;
                o[j + QK / 2] = (float)(blk[4 + j] >> 4) * d + m;
            }
        }
    }
}

void pw_k_embedding_quant(float *out, const int32_t *ids, const void *table, pw_dtype type,
                          int64_t n_tokens, int64_t vocab, int64_t dim) {
    assert(pw_k_quant_supported(type) && dim % QK == 0);
    int64_t row_bytes = dim / QK * pw_dtype_block_bytes(type);
    for (int64_t t = 0; t < n_tokens; t++) {
        float *o = out + t * dim;
        int32_t id = ids[t];
        if (id < 0 || id >= vocab)
            memset(o, 0, (size_t)dim * sizeof *o);
        else
            dequant_row(o, (const uint8_t *)table + id * row_bytes, type, dim);
    }
}

static void embedding_quant_launch(const void *args) {
    const pw_k_embedding_quant_args *a = args;
    pw_k_embedding_quant(a->out, a->ids, a->table, a->type, a->n_tokens, a->vocab, a->dim);
}
const pw_kernel pw_kernel_embedding_quant = {"embedding_quant", embedding_quant_launch, NULL};
