/* The matmul and embedding ops with quantized weights: they dispatch on the
 * weight dtype to the quantized kernels (same bits as direct kernel calls),
 * and weights of other dtypes give clear errors. */
#include "model/dequant.h"
#include "ops/cpu/kernels.h"
#include "ops/ops.h"
#include "test_util.h"

enum { T = 3, K = 64, N = 8, VOCAB = 5 };

static uint64_t rng = 0x2545f491;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static pw_tensor *wrap(void *data, pw_dtype dt, int64_t rows, int64_t cols) {
    pw_tensor *t = NULL;
    int64_t shape[2] = {rows, cols};
    CHECK_OK(pw_tensor_wrap(data, PW_DEVICE_CPU, dt, rows ? 2 : 1, rows ? shape : &shape[1], &t));
    return t;
}

static pw_status call(pw_op_env *env, const char *name, pw_value a, pw_value b, pw_value *out) {
    pw_callable c;
    pw_status s = pw_op_resolve(env, name, &c);
    if (s != PW_OK) return s;
    pw_value args[2] = {a, b};
    return c.fn(c.user, args, 2, out);
}

int main(void) {
    pw_pool *pool = NULL;
    pw_stream *stream = NULL;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "ops-quant", &pool));
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &stream));
    pw_op_env env = {.stream = stream, .pool = pool, .max_tokens = 16, .rms_eps = 1e-5f};

    float x[T * K], wf[N * K], table_f[VOCAB * K];
    for (int i = 0; i < T * K; i++) x[i] = uniform();
    for (int i = 0; i < N * K; i++) wf[i] = uniform();
    for (int i = 0; i < VOCAB * K; i++) table_f[i] = uniform();
    int32_t ids[T] = {4, 0, 2};
    pw_tensor *tx = wrap(x, PW_F32, T, K), *tids = wrap(ids, PW_I32, 0, T);

    static const pw_dtype types[] = {PW_Q8_0, PW_Q4_0, PW_Q4_1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        pw_dtype dt = types[i];
        uint8_t wq[N * K * 2], tq[VOCAB * K * 2]; /* >= the block bytes of every type */
        CHECK_OK(pw_quantize(dt, wf, wq, N * K));
        CHECK_OK(pw_quantize(dt, table_f, tq, VOCAB * K));
        pw_tensor *tw = wrap(wq, dt, N, K), *tt = wrap(tq, dt, VOCAB, K);

        pw_value y = pw_value_none();
        CHECK_OK(call(&env, "matmul", pw_value_tensor(tx), pw_value_tensor(tw), &y));
        float direct[T * N];
        pw_k_matmul_quant(direct, x, wq, dt, T, N, K);
        CHECK(y.kind == PW_VAL_TENSOR && pw_tensor_dtype(y.as.tensor) == PW_F32 &&
              pw_tensor_dim(y.as.tensor, 0) == T && pw_tensor_dim(y.as.tensor, 1) == N);
        if (y.kind == PW_VAL_TENSOR)
            CHECK(memcmp(pw_tensor_data(y.as.tensor), direct, sizeof direct) == 0);
        pw_value_release(y);

        /* The embedding op gives the rows the dequantized table holds. */
        pw_value e = pw_value_none();
        CHECK_OK(call(&env, "embedding", pw_value_tensor(tids), pw_value_tensor(tt), &e));
        float full[VOCAB * K];
        CHECK_OK(pw_dequantize(dt, tq, full, VOCAB * K));
        bool rows_ok = e.kind == PW_VAL_TENSOR;
        for (int t = 0; rows_ok && t < T; t++)
            rows_ok = memcmp((float *)pw_tensor_data(e.as.tensor) + t * K, full + ids[t] * K,
                             K * sizeof(float)) == 0;
        CHECK(rows_ok);
        pw_value_release(e);

        /* The fused gate_up_silu with a quantized gate and an f32 up gives
         * the bits of the two matmuls and silu_mul. */
        pw_callable c;
        pw_value g = pw_value_none();
        pw_tensor *twf = wrap(wf, PW_F32, N, K);
        CHECK_OK(pw_op_resolve(&env, "gate_up_silu", &c));
        CHECK_OK(c.fn(c.user, (pw_value[]){pw_value_tensor(tx), pw_value_tensor(tw),
                                           pw_value_tensor(twf)},
                      3, &g));
        pw_tensor_release(twf);
        float up[T * N];
        pw_k_matmul(up, x, wf, T, N, K, NULL);
        pw_k_silu_mul(direct, direct, up, T * N);
        CHECK(g.kind == PW_VAL_TENSOR &&
              memcmp(pw_tensor_data(g.as.tensor), direct, sizeof direct) == 0);
        pw_value_release(g);
        pw_tensor_release(tw);
        pw_tensor_release(tt);
    }

    /* f16 weights (and tables) are not taken as they are. */
    uint16_t wh[N * K];
    for (int i = 0; i < N * K; i++) wh[i] = pw_f32_to_f16(wf[i]);
    pw_tensor *th = wrap(wh, PW_F16, N, K);
    pw_value out = pw_value_none();
    CHECK_ERR(call(&env, "matmul", pw_value_tensor(tx), pw_value_tensor(th), &out),
              PW_ERR_UNSUPPORTED,
              "dtype f16; weights must be f32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K or q6_K");
    CHECK_ERR(call(&env, "embedding", pw_value_tensor(tids), pw_value_tensor(th), &out),
              PW_ERR_UNSUPPORTED, "argument 2 'table' has dtype f16");
    /* A quantized x is still refused: activations are f32. */
    uint8_t xq[T * K * 2];
    CHECK_OK(pw_quantize(PW_Q8_0, x, xq, T * K));
    pw_tensor *txq = wrap(xq, PW_Q8_0, T, K);
    CHECK_ERR(call(&env, "matmul", pw_value_tensor(txq), pw_value_tensor(tx), &out),
              PW_ERR_INVALID_ARG, "argument 1 'x' must be a f32 tensor");
    /* Shapes are still checked against the quantized weight. */
    uint8_t wq[N * 2 * K * 2];
    CHECK_OK(pw_quantize(PW_Q4_1, wf, wq, N * K));
    pw_tensor *wide = wrap(wq, PW_Q4_1, N / 2, 2 * K);
    CHECK_ERR(call(&env, "matmul", pw_value_tensor(tx), pw_value_tensor(wide), &out),
              PW_ERR_INVALID_ARG, "has K=128");
    pw_tensor_release(wide);
    pw_tensor_release(txq);
    pw_tensor_release(th);
    pw_tensor_release(tx);
    pw_tensor_release(tids);
    pw_stream_free(stream);
    pw_pool_free(pool);
    return pw_test_finish("model_ops_quant");
}
