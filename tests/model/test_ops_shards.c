/* The matmul_shards op reads each K-shard of a whole [N][K] weight in
 * place, rows a whole row apart: for every weight type the kernels take,
 * each shard's partial product is bit for bit the ordinary matmul of that
 * shard copied out into a dense matrix (and of x's columns packed), and
 * the op on the shards stacked ([S*N][K/S], the loader's copy) gives the
 * same bits, at 1 to 3 threads, for decode and batches (the tiles, panels
 * and column splits they take). Q4_0x16 is checked against the Q4_0 copy
 * (its products give Q4_0's bits). Shapes the op cannot read give clear
 * errors. */
#include "model/dequant.h"
#include "ops/ops.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

enum { SHARDS = 3, N = 64 };

static uint64_t rng = 0x9e3779b97f4a7c15u;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static pw_tensor *wrap(void *data, pw_dtype dt, int64_t rows, int64_t cols) {
    pw_tensor *t = NULL;
    CHECK_OK(pw_tensor_wrap(data, PW_DEVICE_CPU, dt, 2, (int64_t[]){rows, cols}, &t));
    return t;
}

static pw_status call(pw_op_env *env, const char *name, pw_value *args, int n, pw_value *out) {
    pw_callable c;
    pw_status s = pw_op_resolve(env, name, &c);
    if (s != PW_OK) return s;
    return c.fn(c.user, args, n, out);
}

/* The weight [N][k] of `type`, its bytes in *bytes (Q4_0x16: Q4_0's,
 * interleaved). */
static uint8_t *make_weight(pw_dtype type, int64_t k, size_t *bytes) {
    pw_dtype stored = type == PW_Q4_0X16 ? PW_Q4_0 : type;
    float *f = malloc((size_t)(N * k) * sizeof *f);
    *bytes = (size_t)pw_dtype_row_bytes(stored, k) * N;
    uint8_t *q = malloc(*bytes), *w = malloc(*bytes);
    CHECK(f && q && w);
    for (int64_t i = 0; i < N * k; i++) f[i] = uniform();
    if (stored == PW_F32) memcpy(q, f, *bytes);
    else CHECK_OK(pw_quantize(stored, f, q, N * k));
    if (!pw_op_convert_weight(w, q, stored, type, N, k)) CHECK(!"no conversion");
    free(f);
    free(q);
    return w;
}

/* Shard s of w [N][k] (file layout `stored`) copied out: [N][k / SHARDS]. */
static uint8_t *copy_shard(const uint8_t *w, pw_dtype stored, int64_t k, int s) {
    size_t row = (size_t)pw_dtype_row_bytes(stored, k), part = row / SHARDS;
    uint8_t *c = malloc(part * N);
    CHECK(c != NULL);
    for (int r = 0; r < N; r++) memcpy(c + r * part, w + r * row + s * part, part);
    return c;
}

/* Every shard of the op's output against the copied shard's matmul. */
static bool shards_match(pw_op_env *env, pw_dtype type, int64_t k, int64_t t) {
    pw_dtype stored = type == PW_Q4_0X16 ? PW_Q4_0 : type;
    size_t bytes;
    uint8_t *w = make_weight(type, k, &bytes);
    /* the same values in the file's layout, for the copies */
    uint8_t *wq = type == PW_Q4_0X16 ? malloc(bytes) : w;
    CHECK(wq != NULL);
    if (wq != w) CHECK(pw_op_convert_weight(wq, w, type, stored, N, k));
    float *x = malloc((size_t)(t * k) * sizeof *x);
    CHECK(x != NULL);
    for (int64_t i = 0; i < t * k; i++) x[i] = uniform();
    pw_tensor *tx = wrap(x, PW_F32, t, k), *tw = wrap(w, type, N, k);
    pw_value y = pw_value_none();
    CHECK_OK(call(env, "matmul_shards",
                  (pw_value[]){pw_value_tensor(tx), pw_value_tensor(tw), pw_value_int(SHARDS)}, 3,
                  &y));
    bool same = y.kind == PW_VAL_TENSOR && pw_tensor_dim(y.as.tensor, 0) == SHARDS * t &&
                pw_tensor_dim(y.as.tensor, 1) == N;
    int64_t ks = k / SHARDS;
    float *xs = malloc((size_t)(t * ks) * sizeof *xs);
    CHECK(xs != NULL);
    for (int s = 0; same && s < SHARDS; s++) {
        for (int64_t r = 0; r < t; r++) memcpy(xs + r * ks, x + r * k + s * ks, ks * sizeof *xs);
        uint8_t *c = copy_shard(wq, stored, k, s);
        pw_tensor *txs = wrap(xs, PW_F32, t, ks), *tc = wrap(c, stored, N, ks);
        pw_value want = pw_value_none();
        CHECK_OK(call(env, "matmul", (pw_value[]){pw_value_tensor(txs), pw_value_tensor(tc)}, 2,
                      &want));
        same = want.kind == PW_VAL_TENSOR &&
               memcmp((const float *)pw_tensor_data(y.as.tensor) + s * t * N,
                      pw_tensor_data(want.as.tensor), (size_t)(t * N) * sizeof(float)) == 0;
        pw_value_release(want);
        pw_tensor_release(txs);
        pw_tensor_release(tc);
        free(c);
    }
    /* the same shards stacked, as the loader copies them out */
    size_t part = bytes / SHARDS;
    uint8_t *stacked = malloc(bytes);
    CHECK(stacked != NULL);
    for (int s = 0; s < SHARDS; s++) {
        uint8_t *c = copy_shard(wq, stored, k, s);
        CHECK(pw_op_convert_weight(stacked + s * part, c, stored, type, N, ks));
        free(c);
    }
    pw_tensor *tst = wrap(stacked, type, SHARDS * N, ks);
    pw_value ys = pw_value_none();
    CHECK_OK(call(env, "matmul_shards",
                  (pw_value[]){pw_value_tensor(tx), pw_value_tensor(tst), pw_value_int(SHARDS)},
                  3, &ys));
    same = same && ys.kind == PW_VAL_TENSOR &&
           memcmp(pw_tensor_data(ys.as.tensor), pw_tensor_data(y.as.tensor),
                  (size_t)(SHARDS * t * N) * sizeof(float)) == 0;
    pw_value_release(ys);
    pw_tensor_release(tst);
    free(stacked);
    pw_value_release(y);
    pw_tensor_release(tx);
    pw_tensor_release(tw);
    free(xs);
    free(x);
    if (wq != w) free(wq);
    free(w);
    return same;
}

static void test_every_type(pw_op_env *env) {
    static const pw_dtype types[] = {PW_F32,  PW_Q8_0, PW_Q4_0, PW_Q4_0X16, PW_Q4_1,
                                     PW_Q5_0, PW_Q5_1, PW_Q4_K, PW_Q5_K,    PW_Q6_K};
    /* decode, a few rows, a batch past the panels' thresholds */
    static const int64_t tokens[] = {1, 4, 16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        /* shards of 4 blocks (above the split threshold at 16 tokens) */
        int64_t k = SHARDS * 4 * pw_dtype_block_elems(types[i] == PW_F32 ? PW_Q8_0 : types[i]);
        for (int th = 1; th <= 3; th++) {
            pw_set_num_threads(th);
            for (size_t j = 0; j < sizeof tokens / sizeof tokens[0]; j++) {
                bool ok = shards_match(env, types[i], k, tokens[j]);
                if (!ok)
                    fprintf(stderr, "  %s, %d thread(s), %lld token(s): shards differ\n",
                            pw_dtype_name(types[i]), th, (long long)tokens[j]);
                CHECK(ok);
            }
        }
    }
    pw_set_num_threads(1);
}

/* An f32 weight big enough for the BLAS path (where the build has it):
 * sgemm reads the shard with the row stride as its leading dimension. */
static void test_f32_large(pw_op_env *env) {
    const int64_t k = SHARDS * 1024;
    CHECK(pw_op_preferred_weight_dtype(PW_F32, N, k) == PW_F32);
    for (int64_t t = 1; t <= 17; t += 16) CHECK(shards_match(env, PW_F32, k, t));
}

static void test_errors(pw_op_env *env) {
    float x[2 * 96] = {0};
    static uint8_t w[64 * 96 * 2];
    pw_tensor *tx = wrap(x, PW_F32, 2, 96);
    const struct {
        pw_dtype type;
        int64_t rows, cols, shards;
        const char *what;
    } bad[] = {
        {PW_Q8_0, 8, 96, 2, "whole blocks"},  /* 48 columns: not whole blocks of 32 */
        {PW_F32, 8, 64, 2, "x's K = 96"},     /* neither K nor K / 2 columns */
        {PW_F32, 9, 48, 2, "2 shards"},       /* stacked: rows not 2 shards' */
        {PW_Q8_0, 8, 96, 5, "5 shards"},      /* K not a multiple of the count */
        {PW_Q4_0X16, 8, 96, 3, "row groups"}, /* rows not whole groups of 16 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pw_tensor *tw = wrap(w, bad[i].type, bad[i].rows, bad[i].cols);
        pw_value y = pw_value_none();
        pw_status s = call(env, "matmul_shards",
                           (pw_value[]){pw_value_tensor(tx), pw_value_tensor(tw),
                                        pw_value_int(bad[i].shards)},
                           3, &y);
        CHECK_EQ_INT(s, PW_ERR_INVALID_ARG);
        CHECK(strstr(pw_last_error(), "matmul_shards") != NULL);
        CHECK(strstr(pw_last_error(), bad[i].what) != NULL);
        CHECK(y.kind == PW_VAL_NONE);
        pw_clear_error();
        pw_tensor_release(tw);
    }
    pw_tensor_release(tx);
}

int main(void) {
    pw_pool *pool = NULL;
    pw_stream *stream = NULL;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "ops-shards", &pool));
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &stream));
    pw_op_env env = {.stream = stream, .pool = pool, .max_tokens = 32, .rms_eps = 1e-5f};
    test_every_type(&env);
    test_f32_large(&env);
    test_errors(&env);
    pw_stream_free(stream);
    pw_pool_free(pool);
    return pw_test_finish("model_ops_shards");
}
