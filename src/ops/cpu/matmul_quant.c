/* y[T][N] = x[T][K] * W[N][K]^T with W in ggml blocks (Q8_0, Q4_0, Q4_1),
 * by integer dot products, batch-invariant; and the row lookup of a
 * quantized embedding table.
 *
 * Activations are quantized per token, in blocks of 32 matching the weight
 * blocks (as llama.cpp's Q8_0/Q8_1 activations): amax = max |x_j| over the
 * block, d_a = amax / 127, a_j = x_j * (127 / amax) rounded to nearest even
 * (0 when amax is 0), clamped to [-127, 127]; with it the block sum
 * s_a = d_a * (float)(a_0 + ... + a_31) (the integer sum is exact).
 *
 * Every output element is then computed by one sequence, whichever tile,
 * T, thread count or instruction set reaches it. With w_j the weight
 * block's integers (Q8_0: int8; Q4_0 and Q4_1: nibble n_j - 8), d_w (and
 * m_w for Q4_1) the block's scales, fma(a, b, c) = a*b + c rounded once,
 * and Q4_1 centred (its minimum m'_w = fma(8, d_w, m_w), 8 d_w being
 * exact), for blocks b in order from acc = +0 and mn = +0:
 *   p   = sum_{j<32} w_j a_j                      exact int32 (|p| < 2^19)
 *   acc = fma(d_w * d_a, (float)p, acc)
 *   mn  = fma(m'_w, s_a, mn)                      Q4_1 only
 * and y = acc (Q4_1: y = acc + mn). One float step per block, so the x86
 * tiles hold 8 or 16 columns side by side in a vector (one lane per
 * column: each column's block transposed on the fly into 4-byte groups),
 * one broadcast of 4 activations feeds every column, and the scale
 * product, the conversion and the fma serve them all (matmul_quant_body.h,
 * "Q4_0"). No repacked copy of the weights is kept (Q4_0x16 is a layout
 * the loader converts to in place of the file's); the transpose is a few
 * shuffles per block and tile, shared by the tile's rows or, for batches,
 * done once per call into a panel.
 * The Q4_1 form is d_w d_a sum((n - 8) a) + (m_w + 8 d_w) d_a sum(a),
 * centred so that the two terms, summed apart, do not largely cancel (m_w
 * is about -7.5 d_w; uncentred, the llama.cpp reference test saw a margin
 * move by 0.79 logits).
 *
 * The integer sums are exact whatever forms them (vpmaddubsw +
 * vpmaddwd, vpdpbusd, or C loops; for Q4_0 and Q4_1 from the unsigned
 * nibbles n, starting from the quantizer's fold -8 * (a's lane sum), so
 * sum n a - 8 sum a = sum (n - 8) a; for Q8_0 in the VNNI copies from the
 * unsigned w + 128, starting from the Q8_0 fold, -128 * a's lane sum; in
 * the AVX2 copy from |w| against a with w's sign), their conversion to
 * float is exact (vcvtdq2ps), and the float steps
 * are the same IEEE operations in every copy (fma: the instruction, or C's
 * fmaf), so the
 * portable, AVX2, AVX-VNNI and AVX-512 VNNI copies (matmul_quant_body.h)
 * return the same bits; the tests compare them with each other and with a
 * scalar model of the sequence. The register tiles, the column blocking and
 * the split over threads only change how many outputs are in flight. */
#include "ops/cpu/kernels.h"

#include "internal.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The portable copy of the tile code; the other copies are built from the
 * same body by matmul_quant_{fma,avxvnni,avx512vnni}.c. */
#include "ops/cpu/matmul_quant_body.h"

bool pw_k_quant_supported(pw_dtype type) {
    return type == PW_Q8_0 || type == PW_Q4_0 || type == PW_Q4_0X16 || type == PW_Q4_1 ||
           pw_k_kquant_supported(type);
}

/* ---- Q4_0x16 ---------------------------------------------------------------- */

/* Byte j (0..15) of row r's nibbles of block b within a group, and r's
 * scale, in the interleaved layout (kernels.h). */
static size_t x16_nibble_at(int64_t b, int r, int j) {
    return (size_t)(b * PW_K_Q40X16_BLOCK_BYTES + 32 + (j / 4) * 64 + r * 4 + j % 4);
}
static size_t x16_scale_at(int64_t b, int r) {
    return (size_t)(b * PW_K_Q40X16_BLOCK_BYTES + 2 * r);
}

/* Rows [0, n) of src into dst (not overlapping), whole groups of 16 to
 * the interleaved layout (to_x16) or back, 4 nibble bytes at a time; the
 * rows past them as they are. */
static void x16_convert(uint8_t *dst, const uint8_t *src, int64_t n, int64_t k, bool to_x16) {
    const int64_t nb = k / QK, wrow = nb * Q4_0_BYTES, whole = n / 16 * 16;
    for (int64_t g = 0; g < whole; g += PW_K_Q40X16_ROWS) {
        const uint8_t *gs = src + g * wrow;
        uint8_t *gd = dst + g * wrow;
        for (int64_t b = 0; b < nb; b++) {
            if (to_x16) { /* 4 rows at a time: a 4 x 4 transpose of 4-byte groups */
                typedef uint32_t v4u __attribute__((vector_size(16)));
                for (int q = 0; q < PW_K_Q40X16_ROWS / 4; q++) {
                    v4u r[4];
                    for (int i = 0; i < 4; i++)
                        memcpy(&r[i], gs + (4 * q + i) * wrow + b * Q4_0_BYTES + 2, 16);
                    v4u t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5),
                        t1 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7),
                        t2 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5),
                        t3 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
                    v4u o[4] = {__builtin_shufflevector(t0, t2, 0, 1, 4, 5),
                                __builtin_shufflevector(t0, t2, 2, 3, 6, 7),
                                __builtin_shufflevector(t1, t3, 0, 1, 4, 5),
                                __builtin_shufflevector(t1, t3, 2, 3, 6, 7)};
                    for (int i = 0; i < 4; i++)
                        memcpy(gd + x16_nibble_at(b, 4 * q, 4 * i), &o[i], 16);
                }
                for (int r = 0; r < PW_K_Q40X16_ROWS; r++)
                    memcpy(gd + x16_scale_at(b, r), gs + r * wrow + b * Q4_0_BYTES, 2);
                continue;
            }
            for (int r = 0; r < PW_K_Q40X16_ROWS; r++) {
                const int64_t row_at = r * wrow + b * Q4_0_BYTES;
                for (int j = 0; j < QK / 2; j += 4) {
                    size_t x = x16_nibble_at(b, r, j);
                    if (to_x16) memcpy(gd + x, gs + row_at + 2 + j, 4);
                    else memcpy(gd + row_at + 2 + j, gs + x, 4);
                }
                size_t sc = x16_scale_at(b, r);
                if (to_x16) memcpy(gd + sc, gs + row_at, 2);
                else memcpy(gd + row_at, gs + sc, 2);
            }
        }
    }
    memcpy(dst + whole * wrow, src + whole * wrow, (size_t)((n - whole) * wrow));
}

void pw_k_q4_0_interleave(void *dst, const void *src, int64_t n, int64_t k) {
    x16_convert(dst, src, n, k, true);
}
void pw_k_q4_0_deinterleave(void *dst, const void *src, int64_t n, int64_t k) {
    x16_convert(dst, src, n, k, false);
}

typedef void (*quantize_fn) PW_K_Q8B_QUANTIZE_PARAMS;
typedef void (*qdot_fn) PW_K_QDOT_STRIDED_PARAMS;

typedef struct int8_copy {
    quantize_fn quantize;
    qdot_fn run;
    void (*shards) PW_K_QDOT_SHARDS_PARAMS;
} int8_copy;

static int8_copy copy_for(pw_k_int8_isa level) {
    switch (level) {
#if PW_HAVE_FMA_KERNELS
    case PW_K_INT8_AVX2:
        return (int8_copy){pw_k_q8b_quantize_rows_fma, pw_k_qdot_run_strided_fma,
                            pw_k_qdot_run_shards_fma};
    case PW_K_INT8_AVXVNNI:
        return (int8_copy){pw_k_q8b_quantize_rows_avxvnni, pw_k_qdot_run_strided_avxvnni,
                            pw_k_qdot_run_shards_avxvnni};
    case PW_K_INT8_AVX512VNNI:
        return (int8_copy){pw_k_q8b_quantize_rows_avx512vnni, pw_k_qdot_run_strided_avx512vnni,
                            pw_k_qdot_run_shards_avx512vnni};
#endif
    default: return (int8_copy){pw_k_q8b_quantize_rows_generic, pw_k_qdot_run_strided_generic,
                            pw_k_qdot_run_shards_generic};
    }
}

/* ---- per-thread buffers ------------------------------------------------- */

/* The quantized activations live for one call. Kernel arguments hold no
 * scratch for them (they are replayed verbatim), so each calling thread
 * keeps a buffer that grows to the largest call it has made and is freed
 * when the thread exits. A second buffer holds what a thread's share of
 * the product derives from them (Q4_0's per-block fold totals), since the
 * calling thread runs a share too while its first buffer holds the rows;
 * a third holds a thread's unpacked weight panel (Q4_0's batches), a
 * fourth a K-shard's activation columns packed for the quantizer
 * (pw_k_matmul_quant_shards). */
typedef struct act_buffer {
    uint8_t *p;
    size_t cap;
} act_buffer;

static pthread_key_t act_keys[4];
static bool act_keys_ok;
static pthread_once_t act_once = PTHREAD_ONCE_INIT;

static void act_buffer_free(void *v) {
    act_buffer *b = v;
    pw_host_free(b->p);
    pw_host_free(b);
}

static void act_key_init(void) {
    act_keys_ok = pthread_key_create(&act_keys[0], act_buffer_free) == 0 &&
                  pthread_key_create(&act_keys[1], act_buffer_free) == 0 &&
                  pthread_key_create(&act_keys[2], act_buffer_free) == 0 &&
                  pthread_key_create(&act_keys[3], act_buffer_free) == 0;
}

static uint8_t *thread_buffer(int which, size_t bytes) {
    pthread_once(&act_once, act_key_init);
    if (!act_keys_ok) return NULL;
    act_buffer *b = pthread_getspecific(act_keys[which]);
    if (!b) {
        b = pw_host_calloc(1, sizeof *b);
        if (!b) return NULL;
        if (pthread_setspecific(act_keys[which], b) != 0) {
            pw_host_free(b);
            return NULL;
        }
    }
    if (b->cap < bytes) {
        uint8_t *p = pw_host_alloc(bytes);
        if (!p) return NULL;
        pw_host_free(b->p);
        b->p = p;
        b->cap = bytes;
    }
    return b->p;
}

/* At least `bytes` of this thread's buffer, or NULL when memory is short
 * (pw_host_alloc: tests inject that failure with pw_host_fail_nth). Shared
 * with matmul_kquant.c: one product runs at a time on a thread, so both
 * kinds of activation rows can live in the one buffer. */
uint8_t *pw_k_act_scratch(size_t bytes) { return thread_buffer(0, bytes); }

int32_t *pw_k_fold_scratch(size_t bytes) { return (int32_t *)(void *)thread_buffer(1, bytes); }

uint8_t *pw_k_panel_scratch(size_t bytes) { return thread_buffer(2, bytes); }

/* ---- the product ---------------------------------------------------------- */

#define COL_GROUP PW_K_COL_GROUP
/* Rows of one pass when no buffer for all of them can be had: the stack. */
#define STACK_ACT_BYTES (32 * 1024)

typedef struct quant_cols_job {
    qdot_fn run;
    float *y;
    const uint8_t *xa, *w;
    int64_t wrow;
    pw_dtype type;
    int64_t n_tokens, n, k;
} quant_cols_job;

static void quant_cols_range(void *ctx, int64_t j0, int64_t j1) {
    const quant_cols_job *j = ctx;
    j->run(j->y, j->xa, j->w, j->wrow, j->type, j->n_tokens, j->n, j->k, j0, j1);
}

/* Rows already quantized into xa: with several threads, large products are
 * split by output columns in groups of 8; every element still follows the
 * documented sequence, so the split changes no bit. */
static void qdot(int8_copy c, float *y, const uint8_t *xa, const uint8_t *w, int64_t wrow,
                 pw_dtype type, int64_t n_tokens, int64_t n, int64_t k) {
    if (pw_k_split_cols(n_tokens, n, k)) {
        quant_cols_job job = {c.run, y, xa, w, wrow, type, n_tokens, n, k};
        pw_k_parallel_cols(n, COL_GROUP, quant_cols_range, &job);
        return;
    }
    c.run(y, xa, w, wrow, type, n_tokens, n, k, 0, n);
}

void pw_k_matmul_quant_with(pw_k_int8_isa level, float *y, const float *x, const void *w,
                            pw_dtype type, int64_t n_tokens, int64_t n, int64_t k) {
    pw_k_matmul_quant_strided_with(level, y, x, w, pw_dtype_row_bytes(type, k), type, n_tokens,
                                   n, k);
}

void pw_k_matmul_quant_strided_with(pw_k_int8_isa level, float *y, const float *x,
                                    const void *w, int64_t wrow, pw_dtype type,
                                    int64_t n_tokens, int64_t n, int64_t k) {
    if (pw_k_kquant_supported(type)) { /* Q5_0, Q5_1, the K-quants: matmul_kquant.c */
        pw_k_matmul_kquant_strided_with(level, y, x, w, wrow, type, n_tokens, n, k);
        return;
    }
    assert(pw_k_quant_supported(type) && k % QK == 0);
    assert(wrow >= pw_dtype_row_bytes(type, k));
    int8_copy c = copy_for(level);
    const size_t row = (size_t)PW_K_Q8B_BYTES(1, k); /* a row's share: scales, sums, folds */
    uint8_t *xa = pw_k_act_scratch(row * (size_t)n_tokens);
    if (xa) {
        c.quantize(xa, x, n_tokens, k, type);
        qdot(c, y, xa, w, wrow, type, n_tokens, n, k);
        return;
    }
    /* No memory for the whole batch: a few rows at a time from the stack
     * (each row's result is the same either way). */
    /* floats, so that the scales stored in it are accessed as what the
     * buffer is (the int8 values go through a character type) */
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
        c.quantize(stack, x + t * k, rows, k, type);
        qdot(c, y + t * n, stack, w, wrow, type, rows, n, k);
    }
}

void pw_k_matmul_quant(float *y, const float *x, const void *w, pw_dtype type,
                       int64_t n_tokens, int64_t n, int64_t k) {
    pw_k_matmul_quant_with(pw_k_isa_int8(), y, x, w, type, n_tokens, n, k);
}

void pw_k_matmul_quant_strided(float *y, const float *x, const void *w, int64_t wrow,
                               pw_dtype type, int64_t n_tokens, int64_t n, int64_t k) {
    pw_k_matmul_quant_strided_with(pw_k_isa_int8(), y, x, w, wrow, type, n_tokens, n, k);
}

/* ---- the K-shards of one product (op matmul_shards) ---------------------- */

/* Shards read in place. One activation row (decode): the copy's one-pass
 * run (pw_k_qdot_steps.shards), whose tiles take a few rows across every
 * shard in turn, so each row is read whole, in address order, once (a
 * shard's product over runs of 64 rows read a quarter of each row per
 * pass, 1.1-2.1x the time of a dense copy: kbench_shards). A batch, which
 * reads each weight byte for many rows: output columns of every shard in
 * runs of SHARD_RUN, shard after shard over each run (runs of 64 took
 * 1.1-1.6x the dense time at 16 rows, Q4_0x16 the most, each run's first
 * tiles waiting on memory; of 1024, 1.0-1.1x). A multiple of 16
 * (Q4_0x16's group). */
#define SHARD_RUN 1024

void pw_k_shards_by_runs(void (*run) PW_K_QDOT_STRIDED_PARAMS, int64_t rows, float *y,
                         const uint8_t *xa, size_t xa_bytes, const uint8_t *w, int64_t wrow,
                         size_t shard_bytes, int64_t shards, pw_dtype type, int64_t n_tokens,
                         int64_t n, int64_t k, int64_t j0, int64_t j1) {
    for (int64_t a = j0; a < j1; a += rows) {
        const int64_t b = a + rows < j1 ? a + rows : j1;
        for (int64_t s = 0; s < shards; s++)
            run(y + s * n_tokens * n, xa + (size_t)s * xa_bytes, w + (size_t)s * shard_bytes, wrow,
                type, n_tokens, n, k, a, b);
    }
}

typedef struct shards_job {
    pw_k_qdot_steps steps;
    float *y;
    const uint8_t *xa, *w;
    size_t xa_bytes, shard_bytes;
    int64_t wrow;
    pw_dtype type;
    int64_t n_tokens, n, k, shards, run;
    bool one_pass;
} shards_job;

static void shards_range(void *ctx, int64_t j0, int64_t j1) {
    const shards_job *j = ctx;
    if (j->one_pass) {
        j->steps.shards(j->y, j->xa, j->xa_bytes, j->w, j->wrow, j->shard_bytes, j->shards,
                        j->type, j->n, j->k, j0, j1);
        return;
    }
    pw_k_shards_by_runs(j->steps.run, j->run > 0 ? j->run : j1 - j0, j->y, j->xa, j->xa_bytes,
                        j->w, j->wrow, j->shard_bytes, j->shards, j->type, j->n_tokens, j->n, j->k,
                        j0, j1);
}

void pw_k_matmul_quant_shards(float *y, const float *x, const void *w, int64_t wrow,
                              size_t shard_bytes, pw_dtype type, int64_t n_tokens, int64_t n,
                              int64_t k, int64_t shards) {
    pw_k_matmul_quant_shards_with(pw_k_isa_int8(), y, x, w, wrow, shard_bytes, type, n_tokens,
                                  n, k, shards);
}

void pw_k_matmul_quant_shards_with(pw_k_int8_isa level, float *y, const float *x, const void *w,
                                   int64_t wrow, size_t shard_bytes, pw_dtype type,
                                   int64_t n_tokens, int64_t n, int64_t k, int64_t shards) {
    bool kq = pw_k_kquant_supported(type);
    pw_k_qdot_steps steps;
    if (kq) {
        steps = pw_k_kquant_steps(level, type, k);
    } else {
        int8_copy c = copy_for(level);
        steps = (pw_k_qdot_steps){c.run, c.shards, (size_t)PW_K_Q8B_BYTES(1, k)};
    }
    const size_t xa_bytes = steps.row_bytes * (size_t)n_tokens;
    uint8_t *xa = pw_k_act_scratch(xa_bytes * (size_t)shards);
    float *cols = n_tokens > 1 ? (float *)(void *)thread_buffer(
                                     3, (size_t)(n_tokens * k) * sizeof(float))
                               : NULL;
    if (!xa || (n_tokens > 1 && !cols)) { /* no memory for them: a shard at a time */
        if (n_tokens > 1) {
            pw_log_warn("quantized matmul: no memory for the shards' activations of K=%lld; "
                        "output zeroed",
                        (long long)k);
            memset(y, 0, (size_t)(shards * n_tokens * n) * sizeof *y);
            return;
        }
        for (int64_t s = 0; s < shards; s++) /* one row: its shard is contiguous */
            pw_k_matmul_quant_strided_with(level, y + s * n, x + s * k,
                                           (const uint8_t *)w + (size_t)s * shard_bytes, wrow,
                                           type, 1, n, k);
        return;
    }
    for (int64_t s = 0; s < shards; s++) {
        const float *xs = x + s * k;
        if (cols) {
            for (int64_t t = 0; t < n_tokens; t++)
                memcpy(cols + t * k, x + t * shards * k + s * k, (size_t)k * sizeof *cols);
            xs = cols;
        }
        uint8_t *xas = xa + (size_t)s * xa_bytes;
        if (kq) pw_k_kquant_quantize(level, xas, xs, n_tokens, k, type);
        else copy_for(level).quantize(xas, xs, n_tokens, k, type);
    }
    /* dense shards (copied out): each over the whole range in turn */
    const bool strided = wrow > pw_dtype_row_bytes(type, k);
    shards_job job = {.steps = steps,
                      .y = y,
                      .xa = xa,
                      .w = w,
                      .xa_bytes = xa_bytes,
                      .shard_bytes = shard_bytes,
                      .wrow = wrow,
                      .type = type,
                      .n_tokens = n_tokens,
                      .n = n,
                      .k = k,
                      .shards = shards,
                      .run = strided ? SHARD_RUN : 0,
                      .one_pass = strided && n_tokens == 1};
    if (pw_k_split_cols(n_tokens, n * shards, k))
        pw_k_parallel_cols(n, COL_GROUP, shards_range, &job);
    else
        shards_range(&job, 0, n);
}

/* ---- several products of one x ------------------------------------------ */

/* Which activation rows a block type's products take (pw_k_q8b_quantize_rows
 * depends on the type only through its fold): Q4_0 and Q4_1 share theirs,
 * Q8_0 has its own, the other types are quantized elsewhere (-1). */
static int act_rows_kind(pw_dtype type) {
    return type == PW_Q8_0                                              ? 0
           : type == PW_Q4_0 || type == PW_Q4_0X16 || type == PW_Q4_1 ? 1
                                                                        : -1;
}

bool pw_k_quant_share_activations(const pw_dtype *types, int n) {
    if (n < 1 || n > PW_K_QUANT_MAX_PARTS || act_rows_kind(types[0]) < 0) return false;
    for (int i = 1; i < n; i++)
        if (act_rows_kind(types[i]) != act_rows_kind(types[0])) return false;
    return true;
}

/* The products' columns in groups of COL_GROUP, end to end: part i's groups
 * are [ends[i - 1], ends[i]). */
typedef struct parts_job {
    qdot_fn run;
    const uint8_t *xa;
    const pw_k_quant_part *parts;
    int n_parts;
    int64_t ends[PW_K_QUANT_MAX_PARTS];
    int64_t n_tokens, k;
} parts_job;

static void parts_range(void *ctx, int64_t g0, int64_t g1) {
    const parts_job *j = ctx;
    int64_t start = 0;
    for (int i = 0; i < j->n_parts; start = j->ends[i++]) {
        int64_t a = g0 > start ? g0 : start, b = g1 < j->ends[i] ? g1 : j->ends[i];
        if (a >= b) continue;
        const pw_k_quant_part *p = &j->parts[i];
        int64_t c1 = (b - start) * COL_GROUP;
        j->run(p->y, j->xa, p->w, pw_dtype_row_bytes(p->type, j->k), p->type, j->n_tokens, p->n,
               j->k, (a - start) * COL_GROUP, c1 < p->n ? c1 : p->n);
    }
}

void pw_k_matmul_quant_parts(const pw_k_quant_part *parts, int n_parts, const float *x,
                             int64_t n_tokens, int64_t k) {
    bool share = n_parts >= 1 && n_parts <= PW_K_QUANT_MAX_PARTS;
    pw_dtype types[PW_K_QUANT_MAX_PARTS];
    for (int i = 0; share && i < n_parts; i++) types[i] = parts[i].type;
    share = share && pw_k_quant_share_activations(types, n_parts);
    uint8_t *xa =
        share ? pw_k_act_scratch((size_t)PW_K_Q8B_BYTES(1, k) * (size_t)n_tokens) : NULL;
    if (!xa) { /* rows not shared, or no memory for them: each product its own way */
        for (int i = 0; i < n_parts; i++)
            pw_k_matmul_quant(parts[i].y, x, parts[i].w, parts[i].type, n_tokens, parts[i].n, k);
        return;
    }
    assert(k % QK == 0);
    int8_copy c = copy_for(pw_k_isa_int8());
    c.quantize(xa, x, n_tokens, k, parts[0].type);
    parts_job job = {c.run, xa, parts, n_parts, {0}, n_tokens, k};
    int64_t groups = 0, n_total = 0;
    for (int i = 0; i < n_parts; i++) {
        groups += (parts[i].n + COL_GROUP - 1) / COL_GROUP;
        job.ends[i] = groups;
        n_total += parts[i].n;
    }
    if (pw_k_split_cols(n_tokens, n_total, k))
        pw_k_parallel_for(groups, parts_range, &job);
    else
        parts_range(&job, 0, groups);
}

/* Gate and up columns [j0, j1) of every token, then their silu_mul. */
typedef struct silu_job {
    qdot_fn run;
    const uint8_t *xa;
    float *out, *up;
    const void *w_gate, *w_up;
    pw_dtype t_gate, t_up;
    int64_t n_tokens, f, k;
} silu_job;

static void silu_range(void *ctx, int64_t j0, int64_t j1) {
    const silu_job *j = ctx;
    j->run(j->out, j->xa, j->w_gate, pw_dtype_row_bytes(j->t_gate, j->k), j->t_gate, j->n_tokens,
           j->f, j->k, j0, j1);
    j->run(j->up, j->xa, j->w_up, pw_dtype_row_bytes(j->t_up, j->k), j->t_up, j->n_tokens, j->f,
           j->k, j0, j1);
    for (int64_t t = 0; t < j->n_tokens; t++) {
        float *o = j->out + t * j->f + j0;
        pw_k_silu_mul(o, o, j->up + t * j->f + j0, j1 - j0);
    }
}

void pw_k_matmul_quant_silu(float *out, float *up, const float *x, const void *w_gate,
                            pw_dtype t_gate, const void *w_up, pw_dtype t_up, int64_t n_tokens,
                            int64_t f, int64_t k) {
    uint8_t *xa = pw_k_quant_share_activations((const pw_dtype[]){t_gate, t_up}, 2)
                      ? pw_k_act_scratch((size_t)PW_K_Q8B_BYTES(1, k) * (size_t)n_tokens)
                      : NULL;
    if (!xa) { /* rows not shared, or no memory for them: the three kernels */
        pw_k_matmul_quant(out, x, w_gate, t_gate, n_tokens, f, k);
        pw_k_matmul_quant(up, x, w_up, t_up, n_tokens, f, k);
        pw_k_silu_mul(out, out, up, n_tokens * f);
        return;
    }
    assert(k % QK == 0);
    int8_copy c = copy_for(pw_k_isa_int8());
    c.quantize(xa, x, n_tokens, k, t_gate);
    silu_job job = {c.run, xa, out, up, w_gate, w_up, t_gate, t_up, n_tokens, f, k};
    if (pw_k_split_cols(n_tokens, 2 * f, k))
        pw_k_parallel_cols(f, COL_GROUP, silu_range, &job);
    else
        silu_range(&job, 0, f);
}

static void matmul_quant_launch(const void *args) {
    const pw_k_matmul_quant_args *a = args;
    int64_t wrow = a->w_row_bytes ? a->w_row_bytes : pw_dtype_row_bytes(a->type, a->k);
    if (a->n_shards > 1)
        pw_k_matmul_quant_shards(a->y, a->x, a->w, wrow, (size_t)a->shard_bytes, a->type,
                                 a->n_tokens, a->n, a->k, a->n_shards);
    else
        pw_k_matmul_quant_strided(a->y, a->x, a->w, wrow, a->type, a->n_tokens, a->n, a->k);
}
const pw_kernel pw_kernel_matmul_quant = {"matmul_quant", matmul_quant_launch, NULL,
                                          PW_K_ARGS(MATMUL_QUANT)};

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

/* Row r of a Q4_0x16 group g, as dequant_row gives the Q4_0 row. */
static void x16_dequant_row(float *out, const uint8_t *g, int r, int64_t dim) {
    for (int64_t b = 0; b < dim / QK; b++) {
        float *o = out + b * QK;
        float d = mq_half(g + x16_scale_at(b, r));
        for (int j = 0; j < QK / 2; j++) {
            uint8_t q = g[x16_nibble_at(b, r, j)];
            o[j] = (float)((q & 0x0F) - 8) * d;
            o[j + QK / 2] = (float)((q >> 4) - 8) * d;
        }
    }
}

void pw_k_embedding_quant(float *out, const int32_t *ids, const void *table, pw_dtype type,
                          int64_t n_tokens, int64_t vocab, int64_t dim) {
    if (pw_k_kquant_supported(type)) {
        pw_k_embedding_kquant(out, ids, table, type, n_tokens, vocab, dim);
        return;
    }
    assert(pw_k_quant_supported(type) && dim % QK == 0);
    int64_t row_bytes = dim / QK * pw_dtype_block_bytes(type);
    for (int64_t t = 0; t < n_tokens; t++) {
        float *o = out + t * dim;
        int32_t id = ids[t];
        if (id < 0 || id >= vocab)
            memset(o, 0, (size_t)dim * sizeof *o);
        else if (type == PW_Q4_0X16 && id < vocab / PW_K_Q40X16_ROWS * PW_K_Q40X16_ROWS)
            x16_dequant_row(o, (const uint8_t *)table + id / 16 * 16 * row_bytes, id % 16, dim);
        else
            dequant_row(o, (const uint8_t *)table + id * row_bytes,
                        type == PW_Q4_0X16 ? PW_Q4_0 : type, dim);
    }
}

static void embedding_quant_launch(const void *args) {
    const pw_k_embedding_quant_args *a = args;
    pw_k_embedding_quant(a->out, a->ids, a->table, a->type, a->n_tokens, a->vocab, a->dim);
}
const pw_kernel pw_kernel_embedding_quant = {"embedding_quant", embedding_quant_launch, NULL,
                                             PW_K_ARGS(EMBEDDING_QUANT)};
