/* y[T][N] = x[T][K] * W[N][K]^T with W in ggml's K-quant super-blocks
 * (Q4_K, Q5_K, Q6_K) or Q5_0 / Q5_1 blocks, by integer dot products,
 * batch-invariant; and the row lookup of such an embedding table.
 *
 * Q5_0 and Q5_1 use the activation rows of Q8_0/Q4_0/Q4_1 (matmul_quant.c:
 * blocks of 32, d_a = amax / 127, lane sums sa_l) and the same sequence as
 * Q4_0 and Q4_1, with w_j = (nibble | bit << 4) - 16 (Q5_0) or the 5-bit
 * value (Q5_1): per block, from acc = +0 (8 lanes),
 *   p_l   = sum_{j=4l}^{4l+3} w_j a_j           exact int32
 *   acc_l = fma(d_w * d_a, (float)p_l, acc_l)
 *   acc_l = fma(m_w, sa_l, acc_l)                 Q5_1 only.
 *
 * The K-quants' activations are quantized per token in super-blocks of 256
 * matching the weights' (as llama.cpp's Q8_K): amax = max |x_j| over the
 * super-block, d_a = amax / 127, a_j = rint(x_j * (127 / amax)) (nearest
 * even; 0 when amax is 0; NaN or out of range gives -127) clamped to [-127,
 * 127], and the sums bs_g = a_16g + ... + a_16g+15, g = 0..15 (exact
 * int16). Per super-block of a weight row, the products are summed in
 * integers over the whole super-block, and one conversion and one fma (two
 * with the mins) per super-block and output take them to float:
 *   Q4_K, Q5_K: q_e in 0..15 / 0..31, sc_i and m_i the 6-bit scale and min
 *     of chunk i (elements 32i..32i+31, i = 0..7), d and dmin the f16
 *     super-scales (value = d sc q - dmin m):
 *       is = sum_i sc_i * sum_{e in chunk i} q_e a_e                  exact int32
 *       mp = sum_i m_i * (bs_2i + bs_2i+1)                             exact int32
 *       acc = fma(d * d_a, (float)is, acc)
 *       acc = fma(-(dmin * d_a), (float)mp, acc)
 *   Q6_K: q_e in -32..31, sc_g the int8 scale of group g (elements
 *     16g..16g+15, g = 0..15), d the f16 super-scale:
 *       is = sum_g sc_g * sum_{e in group g} q_e a_e                   exact int32
 *       acc = fma(d * d_a, (float)is, acc)
 * (int32 to float rounds to nearest even, like vcvtdq2ps; the products of
 * two scales are rounded once), super-blocks in order from acc = +0, and
 * y = acc. The integers cannot overflow: |is| <= 256 * 63 * 31 * 127 <
 * 2^26 (Q4_K, Q5_K) and 256 * 128 * 32 * 127 < 2^28 (Q6_K), |mp| <= 8 * 63
 * * 32 * 127 < 2^21. The sums are exact, so any order and any grouping
 * forms the same integers: the tiles may keep 8 lanes per output (lane l =
 * elements 4l..4l+3 of each chunk) and fold them at the end of the
 * super-block, the panels one output per vector lane, and Q6_K's copies
 * the offset form sum_g sc_g (u . a)_g - 32 sum_g sc_g bs_g with u = q + 32
 * in 0..63, the operand the unsigned-times-signed instructions want.
 *
 * The integer sums are exact whatever forms them (vpmaddubsw + vpmaddwd,
 * vpmaddubsw + vpdpwssd, vpdpbusd + vpmulld, or C loops), and the float
 * steps are the same IEEE operations in every copy (fma: the instruction,
 * or C's fmaf; the products of two scales are rounded once), so the
 * portable, AVX2, AVX-VNNI and AVX-512 VNNI copies (matmul_kquant_body.h)
 * return the same bits; the tests compare them with each other and with a
 * scalar model of the sequence. The K-quant activation quantizer is
 * defined by the C one here; the x86 copies have their own, which give the
 * same bytes (matmul_kquant_body.h). The register tiles, the column
 * blocking, the panels' slices of K (whose running sums wait in y, or in
 * the row-lane panels' buffer), the lanes (columns or rows) and the split
 * over threads only change how many outputs are in flight. */
#include "ops/cpu/kernels.h"
#include "ops/cpu/matmul_kquant_isa.h"
#include "ops/cpu/matmul_quant_isa.h"

#include "internal.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The portable copy of the tile code; the other copies are built from the
 * same body by matmul_kquant_{fma,avxvnni,avx512vnni}.c. */
#include "ops/cpu/matmul_kquant_body.h"

bool pw_k_kquant_supported(pw_dtype type) {
    return type == PW_Q5_0 || type == PW_Q5_1 || type == PW_Q4_K || type == PW_Q5_K ||
           type == PW_Q6_K;
}

static bool is_super(pw_dtype type) {
    return type == PW_Q4_K || type == PW_Q5_K || type == PW_Q6_K;
}

/* ---- the K-quant activation quantizer ----------------------------------- */

static float abs_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b &= 0x7FFFFFFFu;
    memcpy(&x, &b, sizeof b);
    return x;
}

static void q8k_block(const float *x, int8_t *q, float *d, int16_t *bs) {
    float amax = 0.0f;
    /* a > b ? a : b, in element order (a NaN is passed over) */
    for (int j = 0; j < KQ_QKK; j++) {
        float a = abs_bits(x[j]);
        amax = a > amax ? a : amax;
    }
    float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < KQ_QKK; j++) {
        float r = x[j] * id;
        int v = r >= -2147483648.0f && r < 2147483648.0f ? (int)rintf(r) : -127;
        q[j] = (int8_t)(v < -127 ? -127 : v > 127 ? 127 : v);
    }
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int j = 16 * g; j < 16 * g + 16; j++) s += q[j];
        bs[g] = (int16_t)s;
    }
    *d = amax / 127.0f;
}

void pw_k_q8k_quantize_rows(uint8_t *xa, const float *x, int64_t n_rows, int64_t k) {
    const int64_t nsb = k / KQ_QKK;
    for (int64_t t = 0; t < n_rows; t++) {
        uint8_t *row = xa + t * PW_K_Q8K_ROW_BYTES(k);
        int8_t *q = (int8_t *)row;
        float *d = (float *)(row + nsb * KQ_QKK);
        int16_t *bs = (int16_t *)(row + nsb * (KQ_QKK + 4));
        for (int64_t b = 0; b < nsb; b++)
            q8k_block(x + t * k + b * KQ_QKK, q + b * KQ_QKK, d + b, bs + 16 * b);
    }
}

/* Q5_0's activation rows: the Q8 rows with Q5P_MAGIC - 16 * (a_4l + ... +
 * a_4l+3), int32, in lane-sum slot l of each block, where the Q5_0 panels
 * fold in the weights' offset of 16 and their int-to-float magic
 * (matmul_kquant_body.h). The x86 copies have vectorised twins
 * (pw_k_q5_0_offsets_*): the panels read what they write, so the tests
 * comparing the copies' products compare them too. */
static void q5_0_offsets(uint8_t *xa, int64_t n_rows, int64_t k) {
    const int64_t nb = k / KQ_QK;
    for (int64_t t = 0; t < n_rows; t++) {
        uint8_t *row = xa + t * PW_K_Q8_ROW_BYTES(k);
        const int8_t *q = (const int8_t *)row;
        uint8_t *sums = row + nb * (KQ_QK + 4);
        for (int64_t b = 0; b < nb; b++)
            for (int l = 0; l < KQ_LANES; l++) {
                const int8_t *v = q + b * KQ_QK + 4 * l;
                int32_t s = Q5P_MAGIC - 16 * (v[0] + v[1] + v[2] + v[3]);
                memcpy(sums + (b * KQ_LANES + l) * sizeof(float), &s, sizeof s);
            }
    }
}

/* ---- the copies ------------------------------------------------------------ */

typedef void (*quantize_fn)(uint8_t *xa, const float *x, int64_t n_rows, int64_t k);
typedef void (*qdot_fn) PW_K_QDOT_STRIDED_PARAMS;

typedef void (*offsets_fn)(uint8_t *xa, int64_t n_rows, int64_t k);

typedef struct kq_copy {
    quantize_fn quantize;
    qdot_fn run;
    void (*shards) PW_K_QDOT_SHARDS_PARAMS;
    offsets_fn offsets; /* Q5_0 only */
    int64_t row_bytes;
} kq_copy;

static kq_copy copy_for(pw_k_int8_isa level, pw_dtype type, int64_t k) {
    kq_copy c = {pw_k_q8_quantize_rows_generic, pw_k_kqdot_run_strided_generic,
                 pw_k_kqdot_run_shards_generic, q5_0_offsets, 0};
    switch (level) {
#if PW_HAVE_FMA_KERNELS
    case PW_K_INT8_AVX2:
        c = (kq_copy){pw_k_q8_quantize_rows_fma, pw_k_kqdot_run_strided_fma,
                      pw_k_kqdot_run_shards_fma, pw_k_q5_0_offsets_fma, 0};
        break;
    case PW_K_INT8_AVXVNNI:
        c = (kq_copy){pw_k_q8_quantize_rows_avxvnni, pw_k_kqdot_run_strided_avxvnni,
                      pw_k_kqdot_run_shards_avxvnni, pw_k_q5_0_offsets_avxvnni, 0};
        break;
    case PW_K_INT8_AVX512VNNI:
        c = (kq_copy){pw_k_q8_quantize_rows_avx512vnni, pw_k_kqdot_run_strided_avx512vnni,
                      pw_k_kqdot_run_shards_avx512vnni, pw_k_q5_0_offsets_avx512vnni, 0};
        break;
#endif
    default: break;
    }
    c.row_bytes = PW_K_Q8_ROW_BYTES(k);
    if (is_super(type)) {
        c.quantize = pw_k_q8k_quantize_rows;
#if PW_HAVE_FMA_KERNELS
        if (level == PW_K_INT8_AVX2) c.quantize = pw_k_q8k_quantize_rows_fma;
        if (level == PW_K_INT8_AVXVNNI) c.quantize = pw_k_q8k_quantize_rows_avxvnni;
        if (level == PW_K_INT8_AVX512VNNI) c.quantize = pw_k_q8k_quantize_rows_avx512vnni;
#endif
        c.row_bytes = PW_K_Q8K_ROW_BYTES(k);
    }
    return c;
}

/* ---- per-thread buffer for the quantized activations ------------------- */

/* ---- the product ---------------------------------------------------------- */

#define COL_GROUP PW_K_COL_GROUP
#define STACK_ACT_BYTES (32 * 1024)

typedef struct kq_cols_job {
    qdot_fn run;
    float *y;
    const uint8_t *xa, *w;
    int64_t wrow;
    pw_dtype type;
    int64_t n_tokens, n, k;
} kq_cols_job;

static void kq_cols_range(void *ctx, int64_t j0, int64_t j1) {
    const kq_cols_job *j = ctx;
    j->run(j->y, j->xa, j->w, j->wrow, j->type, j->n_tokens, j->n, j->k, j0, j1);
}

/* With several threads, large products are split by output columns in
 * groups of 8 (pw_k_parallel_cols); every element still follows the
 * documented sequence, so the split changes no bit. */
static void kqdot(kq_copy c, float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                  pw_dtype type, int64_t n_tokens, int64_t n, int64_t k) {
    if (pw_k_split_cols(n_tokens, n, k)) {
        kq_cols_job job = {c.run, y, xa, w, wrow, type, n_tokens, n, k};
        pw_k_parallel_cols(n, COL_GROUP, kq_cols_range, &job);
        return;
    }
    c.run(y, xa, w, wrow, type, n_tokens, n, k, 0, n);
}

pw_k_qdot_steps pw_k_kquant_steps(pw_k_int8_isa level, pw_dtype type, int64_t k) {
    kq_copy c = copy_for(level, type, k);
    return (pw_k_qdot_steps){c.run, c.shards, (size_t)c.row_bytes};
}

void pw_k_kquant_quantize(pw_k_int8_isa level, uint8_t *xa, const float *x, int64_t n_rows,
                          int64_t k, pw_dtype type) {
    kq_copy c = copy_for(level, type, k);
    c.quantize(xa, x, n_rows, k);
    if (type == PW_Q5_0) c.offsets(xa, n_rows, k);
}

void pw_k_matmul_kquant_with(pw_k_int8_isa level, float *y, const float *x, const void *w,
                             pw_dtype type, int64_t n_tokens, int64_t n, int64_t k) {
    pw_k_matmul_kquant_strided_with(level, y, x, w, pw_dtype_row_bytes(type, k), type, n_tokens,
                                    n, k);
}

void pw_k_matmul_kquant_strided_with(pw_k_int8_isa level, float *y, const float *x,
                                     const void *w, int64_t wrow, pw_dtype type,
                                     int64_t n_tokens, int64_t n, int64_t k) {
    assert(pw_k_kquant_supported(type) && k % pw_dtype_block_elems(type) == 0);
    assert(wrow >= pw_dtype_row_bytes(type, k));
    kq_copy c = copy_for(level, type, k);
    const size_t row = (size_t)c.row_bytes;
    uint8_t *xa = pw_k_act_scratch(row * (size_t)n_tokens);
    if (xa) {
        c.quantize(xa, x, n_tokens, k);
        if (type == PW_Q5_0) c.offsets(xa, n_tokens, k);
        kqdot(c, y, xa, w, wrow, type, n_tokens, n, k);
        return;
    }
    /* No memory for the whole batch: a few rows at a time from the stack
     * (each row's result is the same either way). floats, so that the
     * scales stored in it are accessed as what the buffer is. */
    _Alignas(64) float stack_floats[STACK_ACT_BYTES / sizeof(float)];
    uint8_t *stack = (uint8_t *)stack_floats;
    int64_t step = (int64_t)(STACK_ACT_BYTES / row);
    if (step < 1) {
        pw_log_warn("quantized matmul: no memory for the activations of K=%lld; output zeroed",
                    (long long)k);
        memset(y, 0, (size_t)(n_tokens * n) * sizeof *y);
        return;
    }
    for (int64_t t = 0; t < n_tokens; t += step) {
        int64_t rows = n_tokens - t < step ? n_tokens - t : step;
        c.quantize(stack, x + t * k, rows, k);
        if (type == PW_Q5_0) c.offsets(stack, rows, k);
        kqdot(c, y + t * n, stack, w, wrow, type, rows, n, k);
    }
}

/* ---- embedding ----------------------------------------------------------- */

/* pw_dequantize's arithmetic (src/model/dequant.c), product by product, so
 * a quantized table gives the rows the dequantized one would hold. This
 * file is built without FMA, so no product is fused with its sum. */
static void dequant_block(float *o, const uint8_t *b, pw_dtype type) {
    switch (type) {
    case PW_Q5_0:
    case PW_Q5_1: {
        bool with_min = type == PW_Q5_1;
        float d = kq_half_portable(b), m = with_min ? kq_half_portable(b + 2) : 0.0f;
        const uint8_t *qhp = b + (with_min ? 4 : 2), *qs = qhp + 4;
        uint32_t qh = kq_u32(qhp);
        for (int j = 0; j < KQ_QK; j++) {
            int q = (j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4) | (int)(((qh >> j) & 1) << 4);
            o[j] = with_min ? (float)q * d + m : (float)(q - 16) * d;
        }
        break;
    }
    case PW_Q4_K:
    case PW_Q5_K: {
        bool five = type == PW_Q5_K;
        float d = kq_half_portable(b), dmin = kq_half_portable(b + 2);
        uint8_t sc[8], m[8];
        kq_scales_mins(b + 4, sc, m);
        const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
        for (int j = 0; j < 8; j++) {
            float d1 = d * (float)sc[j], m1 = dmin * (float)m[j];
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
                if (five) q |= ((qh[l] >> j) & 1) << 4;
                o[32 * j + l] = d1 * (float)q - m1;
            }
        }
        break;
    }
    default: { /* PW_Q6_K */
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *scales = (const int8_t *)(b + 192);
        float d = kq_half_portable(b + 208);
        for (int e = 0; e < KQ_QKK; e++) {
            int h = e / 128, r = e % 128;
            int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
            int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            float dd = d * (float)scales[e / 16];
            o[e] = dd * (float)((lo | (hi << 4)) - 32);
        }
        break;
    }
    }
}

void pw_k_embedding_kquant(float *out, const int32_t *ids, const void *table, pw_dtype type,
                           int64_t n_tokens, int64_t vocab, int64_t dim) {
    const int64_t be = pw_dtype_block_elems(type), bb = pw_dtype_block_bytes(type);
    assert(pw_k_kquant_supported(type) && dim % be == 0);
    const int64_t row_bytes = dim / be * bb;
    for (int64_t t = 0; t < n_tokens; t++) {
        float *o = out + t * dim;
        int32_t id = ids[t];
        if (id < 0 || id >= vocab) {
            memset(o, 0, (size_t)dim * sizeof *o);
            continue;
        }
        const uint8_t *row = (const uint8_t *)table + id * row_bytes;
        for (int64_t b = 0; b < dim / be; b++) dequant_block(o + b * be, row + b * bb, type);
    }
}
