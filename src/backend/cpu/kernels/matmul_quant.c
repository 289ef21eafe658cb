/* y[T][N] = x[T][K] * W[N][K]^T with W in ggml blocks (Q8_0, Q4_0, Q4_1),
 * batch-invariant; and the row lookup of a quantized embedding table.
 *
 * Every output element is computed by one sequence of float operations,
 * whichever tile reaches it. With x_b the 32 activations of block b split
 * in four 8-lane groups g0..g3 (elements 0-7, 8-15, 16-23, 24-31) and q the
 * block's integer values converted to float (exact):
 *   s    = (g0*q0 + g1*q1) + (g2*q2 + g3*q3)              lane-wise
 *   Q8_0, Q4_0 (q = nibble - 8):  acc = acc + d*s
 *   Q4_1:  xs = (g0 + g1) + (g2 + g3);  acc = (acc + d*s) + m*xs
 * over blocks b in order, then the 8 lanes are reduced by the fixed tree
 * ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). K is a multiple of 32, so there
 * is no tail. The Q4_1 form is d*sum(x q) + m*sum(x) per block, kept in
 * lanes so no per-block horizontal sum is needed.
 *
 * The register tiles (rows x columns of accumulators) and the column
 * blocking only change how many elements are in flight, never that
 * sequence, so row t's result depends on row t alone.
 *
 * The kernel body is compiled twice, for the baseline ISA and for AVX2,
 * and picked once per call by __builtin_cpu_supports. Both run the same
 * lane-wise IEEE multiplies and adds: the build is ISO C11 (GCC's
 * -ffp-contract=off there) and the avx2 target adds no FMA, so the clones
 * return the same bits; the test runs both and compares them with a
 * scalar model of the sequence. */
#include "backend/cpu/kernels/kernels.h"

#include <assert.h>
#include <immintrin.h>
#include <string.h>

#define QK 32
#define LANES 8
typedef float v8f __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t v8i __attribute__((vector_size(LANES * sizeof(int32_t))));
typedef uint8_t v8u8 __attribute__((vector_size(LANES)));
typedef int8_t v8s8 __attribute__((vector_size(LANES)));

/* Block sizes in bytes (ggml layouts, see src/model/dequant.h). */
#define Q8_0_BYTES 34 /* f16 d, 32 x int8 */
#define Q4_0_BYTES 18 /* f16 d, 16 nibble bytes */
#define Q4_1_BYTES 20 /* f16 d, f16 m, 16 nibble bytes */

/* Accumulators of one register tile, reduced together by reduce8. */
#define TILE_ACCS 8
/* Batches: 4 rows x 2 columns, so one unpacked weight block serves four
 * tokens. The leftover rows (and decode, T = 1) use 1 row x 8 columns. */
#define BATCH_TILE_ROWS 4
#define BATCH_TILE_COLS 2
#define ROW_TILE_COLS 8
/* Columns processed together so their weight rows stay in L2 while every
 * row tile of x streams past them. */
#define COL_BLOCK_BYTES (128 * 1024)

/* Unaligned, aliasing-safe loads of 8 floats. (A memcpy per vector in a
 * loop gets merged by GCC into one block copy through the stack.) */
typedef float v8f_unaligned __attribute__((vector_size(LANES * sizeof(float)), aligned(4),
                                           may_alias));
#define LOAD8(dst, p) ((dst) = *(const v8f_unaligned *)(p))

static inline __attribute__((always_inline)) float f16_to_f32(const uint8_t *p) {
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    uint32_t bits;
    float f;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else {
        f = (float)mant * 0x1p-24f; /* subnormal or zero, exact */
        return sign ? -f : f;
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Same tree as the f32 kernel: lane e of out is the documented reduction
 * of acc[e], with values moved between lanes only by shuffles. */
static inline __attribute__((always_inline)) void reduce8(const v8f *acc, v8f *out) {
    v8f p[4];
    for (int e = 0; e < 4; e++)
        p[e] = __builtin_shufflevector(acc[e], acc[e + 4], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(acc[e], acc[e + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    v8f q01 = __builtin_shufflevector(p[0], p[1], 0, 1, 8, 9, 4, 5, 12, 13) + __builtin_shufflevector(p[0], p[1], 2, 3, 10, 11, 6, 7, 14, 15);
    v8f q23 = __builtin_shufflevector(p[2], p[3], 0, 1, 8, 9, 4, 5, 12, 13) + __builtin_shufflevector(p[2], p[3], 2, 3, 10, 11, 6, 7, 14, 15);
    *out = __builtin_shufflevector(q01, q23, 0, 2, 8, 10, 4, 6, 12, 14) + __builtin_shufflevector(q01, q23, 1, 3, 9, 11, 5, 7, 13, 15);
}

/* The four groups of a block's values as floats, and its scales. */
typedef struct unpacked {
    v8f q[4];
    float d, m;
} unpacked;

enum { ISA_BASELINE, ISA_AVX2 };

/* Portable unpacking: integer values to float (exact). */
static inline __attribute__((always_inline)) void unpack_baseline(const uint8_t *blk,
                                                                  pw_dtype type, unpacked *u) {
    u->d = f16_to_f32(blk);
    u->m = type == PW_Q4_1 ? f16_to_f32(blk + 2) : 0.0f;
    float q[QK];
    if (type == PW_Q8_0) {
        for (int j = 0; j < QK; j++) q[j] = (float)(int8_t)blk[2 + j];
    } else {
        const uint8_t *qs = blk + (type == PW_Q4_1 ? 4 : 2);
        int off = type == PW_Q4_0 ? 8 : 0;
        for (int j = 0; j < QK / 2; j++) {
            q[j] = (float)((qs[j] & 0x0F) - off);
            q[j + QK / 2] = (float)((qs[j] >> 4) - off);
        }
    }
    memcpy(u->q, q, sizeof q);
}

/* The same values with AVX2 widening and F16C scale conversion (both
 * exact, so the floats equal the portable ones). Not always_inline: the
 * shared tile code is compiled for both builds, and only the AVX2 build,
 * flattened, inlines this. */
__attribute__((target("avx2,f16c"))) static inline void unpack_avx2(const uint8_t *blk,
                                                                    pw_dtype type,
                                                                    unpacked *u) {
    uint16_t h[2];
    memcpy(h, blk, sizeof h);
    u->d = _cvtsh_ss(h[0]);
    u->m = type == PW_Q4_1 ? _cvtsh_ss(h[1]) : 0.0f;
    __m256i n[4];
    if (type == PW_Q8_0) {
        for (int g = 0; g < 4; g++)
            n[g] = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + g * LANES)));
    } else {
        const uint8_t *qs = blk + (type == PW_Q4_1 ? 4 : 2);
        __m128i bytes = _mm_loadu_si128((const __m128i *)qs);
        __m128i lo = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
        __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F));
        n[0] = _mm256_cvtepu8_epi32(lo);
        n[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8));
        n[2] = _mm256_cvtepu8_epi32(hi);
        n[3] = _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8));
        if (type == PW_Q4_0)
            for (int g = 0; g < 4; g++) n[g] = _mm256_sub_epi32(n[g], _mm256_set1_epi32(8));
    }
    for (int g = 0; g < 4; g++) _mm256_storeu_ps((float *)&u->q[g], _mm256_cvtepi32_ps(n[g]));
}

static inline __attribute__((always_inline)) void unpack(const uint8_t *blk, pw_dtype type,
                                                         int isa, unpacked *u) {
    if (isa == ISA_AVX2)
        unpack_avx2(blk, type, u);
    else
        unpack_baseline(blk, type, u);
}

/* A rows x cols block of outputs (rows * cols <= TILE_ACCS). Always inlined
 * with constant shapes and type, so each call site is a fully unrolled
 * register tile; unused accumulators stay zero and are never stored. */
static inline __attribute__((always_inline)) void tile(float *y, int64_t ldy, const float *x,
                                                      const uint8_t *w, int64_t row_bytes,
                                                      int64_t k, pw_dtype type, int64_t bbytes,
                                                      int isa, int rows, int cols) {
    v8f acc[TILE_ACCS];
    memset(acc, 0, sizeof acc);
    const int64_t nb = k / QK;
    for (int64_t b = 0; b < nb; b++) {
        v8f xg[BATCH_TILE_ROWS][4], xs[BATCH_TILE_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < 4; i++) LOAD8(xg[r][i], x + r * k + b * QK + i * LANES);
            if (type == PW_Q4_1) xs[r] = (xg[r][0] + xg[r][1]) + (xg[r][2] + xg[r][3]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < cols; c++) {
            unpacked u;
            unpack(w + c * row_bytes + b * bbytes, type, isa, &u);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                const v8f *g = xg[r];
                v8f s = (g[0] * u.q[0] + g[1] * u.q[1]) + (g[2] * u.q[2] + g[3] * u.q[3]);
                v8f a = acc[r * cols + c] + u.d * s;
                if (type == PW_Q4_1) a = a + u.m * xs[r];
                acc[r * cols + c] = a;
            }
        }
    }
    v8f sums;
    reduce8(acc, &sums);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) y[r * ldy + c] = sums[r * cols + c];
}

#define TILE(rows, cols) tile(y + j, n, x, w + j * rb, rb, k, type, bb, isa, rows, cols)

static inline __attribute__((always_inline)) void row_block(float *y, const float *x,
                                                           const uint8_t *w, int64_t n,
                                                           int64_t k, pw_dtype type,
                                                           int64_t bb, int isa, int64_t j0,
                                                           int64_t j1, int rows) {
    const int64_t rb = k / QK * bb;
    int64_t j = j0;
    if (rows == BATCH_TILE_ROWS) {
        for (; j + BATCH_TILE_COLS <= j1; j += BATCH_TILE_COLS) TILE(BATCH_TILE_ROWS, BATCH_TILE_COLS);
        if (j < j1) TILE(BATCH_TILE_ROWS, 1);
        return;
    }
    for (; j + ROW_TILE_COLS <= j1; j += ROW_TILE_COLS) TILE(1, ROW_TILE_COLS);
    if (j + 4 <= j1) {
        TILE(1, 4);
        j += 4;
    }
    switch (j1 - j) {
    case 0: break;
    case 1: TILE(1, 1); break;
    case 2: TILE(1, 2); break;
    default: TILE(1, 3); break;
    }
}

static inline __attribute__((always_inline)) void matmul_typed(float *y, const float *x,
                                                              const uint8_t *w,
                                                              int64_t n_tokens, int64_t n,
                                                              int64_t k, pw_dtype type,
                                                              int64_t bb, int isa) {
    int64_t col_block = COL_BLOCK_BYTES / (k / QK * bb);
    col_block = col_block < ROW_TILE_COLS ? ROW_TILE_COLS : col_block / ROW_TILE_COLS * ROW_TILE_COLS;
    int64_t t_full = n_tokens / BATCH_TILE_ROWS * BATCH_TILE_ROWS;
    for (int64_t n0 = 0; n0 < n; n0 += col_block) {
        int64_t n1 = n0 + col_block < n ? n0 + col_block : n;
        for (int64_t t = 0; t < t_full; t += BATCH_TILE_ROWS)
            row_block(y + t * n, x + t * k, w, n, k, type, bb, isa, n0, n1, BATCH_TILE_ROWS);
        for (int64_t t = t_full; t < n_tokens; t++)
            row_block(y + t * n, x + t * k, w, n, k, type, bb, isa, n0, n1, 1);
    }
}

/* One body per ISA; the type switch is outside the loops so each type's
 * tiles are specialised. */
#define MATMUL_BODY                                                                           \
    switch (type) {                                                                           \
    case PW_Q8_0: matmul_typed(y, x, w, n_tokens, n, k, PW_Q8_0, Q8_0_BYTES, ISA); break;          \
    case PW_Q4_0: matmul_typed(y, x, w, n_tokens, n, k, PW_Q4_0, Q4_0_BYTES, ISA); break;          \
    case PW_Q4_1: matmul_typed(y, x, w, n_tokens, n, k, PW_Q4_1, Q4_1_BYTES, ISA); break;          \
    default: assert(!"pw_k_matmul_quant: unsupported weight type"); break;                   \
    }

static void matmul_quant_baseline(float *y, const float *x, const uint8_t *w, int64_t n_tokens,
                                  int64_t n, int64_t k, pw_dtype type) {
#define ISA ISA_BASELINE
    MATMUL_BODY
#undef ISA
}

__attribute__((target("avx2,f16c"), flatten)) static void matmul_quant_avx2(float *y, const float *x,
                                                               const uint8_t *w,
                                                               int64_t n_tokens, int64_t n,
                                                               int64_t k, pw_dtype type) {
#define ISA ISA_AVX2
    MATMUL_BODY
#undef ISA
}

/* Every x86 CPU with AVX2 also has F16C (Haswell, Excavator and later),
 * and clang's __builtin_cpu_supports does not know "f16c". */
static bool cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

bool pw_k_quant_supported(pw_dtype type) {
    return type == PW_Q8_0 || type == PW_Q4_0 || type == PW_Q4_1;
}

bool pw_k_matmul_quant_isa(pw_k_isa isa, float *y, const float *x, const void *w, pw_dtype type,
                           int64_t n_tokens, int64_t n, int64_t k) {
    assert(pw_k_quant_supported(type) && k % QK == 0);
    if (isa == PW_K_ISA_AUTO) isa = cpu_has_avx2() ? PW_K_ISA_AVX2 : PW_K_ISA_BASELINE;
    if (isa == PW_K_ISA_AVX2) {
        if (!cpu_has_avx2()) return false;
        matmul_quant_avx2(y, x, w, n_tokens, n, k, type);
    } else {
        matmul_quant_baseline(y, x, w, n_tokens, n, k, type);
    }
    return true;
}

void pw_k_matmul_quant(float *y, const float *x, const void *w, pw_dtype type,
                       int64_t n_tokens, int64_t n, int64_t k) {
    pw_k_matmul_quant_isa(PW_K_ISA_AUTO, y, x, w, type, n_tokens, n, k);
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
            float d = f16_to_f32(blk);
            for (int j = 0; j < QK; j++) o[j] = (float)(int8_t)blk[2 + j] * d;
        } else if (type == PW_Q4_0) {
            const uint8_t *blk = row + b * Q4_0_BYTES;
            float d = f16_to_f32(blk);
            for (int j = 0; j < QK / 2; j++) {
                o[j] = (float)((blk[2 + j] & 0x0F) - 8) * d;
                o[j + QK / 2] = (float)((blk[2 + j] >> 4) - 8) * d;
            }
        } else {
            const uint8_t *blk = row + b * Q4_1_BYTES;
            float d = f16_to_f32(blk), m = f16_to_f32(blk + 2);
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
