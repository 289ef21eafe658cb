/* Gemma 3's ops through the registry: scale, softcap, gate_up_gelu and
 * qkv_norm_rope compute what their kernels compute (bit for bit), the
 * per-layer rope table and attention window of the env are honoured, and
 * bad arguments give clear errors. */
#include "ops/cpu/kernels.h"
#include "ops/ops.h"
#include "test_util.h"

#include <math.h>

enum { T = 5, DIM = 24, NH = 2, NKV = 1, HD = 8, FF = 20, LAYERS = 2, MAXP = 32,
       BLOCK = 4, MAX_BLOCKS = 8, NUM_BLOCKS = 8 };
#define QW (NH * HD)
#define KW (NKV * HD)

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static float *random_floats(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        p[i] = (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
    }
    return p;
}
static pw_tensor *wrap(float *data, int ndim, int64_t d0, int64_t d1) {
    pw_tensor *t = NULL;
    int64_t shape[2] = {d0, d1};
    CHECK_OK(pw_tensor_wrap(data, PW_DEVICE_CPU, PW_F32, ndim, shape, &t));
    return t;
}
static float *fdata(pw_value v) { return (float *)pw_tensor_data(v.as.tensor); }
static float *item(pw_value tuple, int i) { return fdata(pw_tuple_get(tuple.as.tuple, i)); }

#define T_(x) pw_value_tensor(x)
#define ARGS(...) (pw_value[]){__VA_ARGS__}, (int)(sizeof((pw_value[]){__VA_ARGS__}) / sizeof(pw_value))

static pw_value call(const pw_op_env *env, const char *name, const pw_value *args, int n) {
    pw_callable c;
    pw_value out = pw_value_none();
    CHECK_OK(pw_op_resolve(env, name, &c));
    if (c.fn) CHECK_OK(c.fn(c.user, args, n, &out));
    return out;
}

static pw_status call_status(const pw_op_env *env, const char *name, const pw_value *args, int n) {
    pw_callable c;
    pw_value out = pw_value_none();
    CHECK_OK(pw_op_resolve(env, name, &c));
    pw_status s = c.fn(c.user, args, n, &out);
    pw_value_release(out);
    return s;
}

int main(void) {
    pw_stream *stream = NULL;
    pw_pool *pool = NULL;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &stream));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "ops-gemma", &pool));
    int32_t positions[T] = {0, 1, 2, 3, 4}, slots[T], seqs[T] = {0}, tables[MAX_BLOCKS];
    for (int b = 0; b < MAX_BLOCKS; b++) tables[b] = NUM_BLOCKS - 1 - b;
    for (int t = 0; t < T; t++) slots[t] = tables[t / BLOCK] * BLOCK + t % BLOCK;
    pw_attn_meta meta = {positions, slots, seqs, tables, MAX_BLOCKS, BLOCK};
    float *kc[LAYERS], *vc[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        kc[l] = calloc(NUM_BLOCKS * BLOCK * KW, sizeof(float));
        vc[l] = calloc(NUM_BLOCKS * BLOCK * KW, sizeof(float));
    }
    float *global = malloc(MAXP * HD * sizeof(float)), *local = malloc(MAXP * HD * sizeof(float));
    pw_k_rope_table(global, MAXP, HD, 1e6);
    pw_k_rope_table(local, MAXP, HD, 1e4);
    const float *layer_rope[LAYERS] = {local, global};
    int32_t window[LAYERS] = {2, 0};
    pw_op_env env = {.stream = stream, .pool = pool, .attn_meta = &meta, .k_cache = kc,
                     .v_cache = vc, .n_layers = LAYERS, .n_heads = NH, .n_kv_heads = NKV,
                     .head_dim = HD, .num_blocks = NUM_BLOCKS, .max_seqs = 1, .max_tokens = T,
                     .rope_table = global, .rope_max_pos = MAXP, .rms_eps = 1e-6f,
                     .positions = positions, .layer_rope_table = layer_rope,
                     .layer_window = window, .attn_scale = 0.0f};

    float *xd = random_floats(T * DIM), *wqd = random_floats(QW * DIM), *wkd = random_floats(KW * DIM),
          *wvd = random_floats(KW * DIM), *qn = random_floats(HD), *kn = random_floats(HD),
          *wgd = random_floats(FF * DIM), *wud = random_floats(FF * DIM);
    pw_tensor *x = wrap(xd, 2, T, DIM), *wq = wrap(wqd, 2, QW, DIM), *wk = wrap(wkd, 2, KW, DIM),
              *wv = wrap(wvd, 2, KW, DIM), *tqn = wrap(qn, 1, HD, 0), *tkn = wrap(kn, 1, HD, 0),
              *wg = wrap(wgd, 2, FF, DIM), *wu = wrap(wud, 2, FF, DIM), *short_norm = wrap(qn, 1, HD - 1, 0);

    /* scale and softcap */
    pw_value sc = call(&env, "scale", ARGS(T_(x), pw_value_float(2.5)));
    pw_value cap = call(&env, "softcap", ARGS(T_(x), pw_value_float(0.5)));
    bool ok = true;
    for (int i = 0; i < T * DIM; i++) {
        ok &= fdata(sc)[i] == xd[i] * 2.5f;
        ok &= fdata(cap)[i] == 0.5f * tanhf(xd[i] / 0.5f);
    }
    CHECK(ok);
    pw_value_release(sc), pw_value_release(cap);
    CHECK_ERR(call_status(&env, "softcap", ARGS(T_(x), pw_value_float(0.0))), PW_ERR_INVALID_ARG,
              "cap must be positive");
    CHECK_ERR(call_status(&env, "scale", ARGS(T_(x), pw_value_none())), PW_ERR_INVALID_ARG,
              "argument 2 's' must be a float, got none");
    CHECK_ERR(call_status(&env, "scale", ARGS(T_(x), pw_value_float(NAN))), PW_ERR_INVALID_ARG,
              "must be finite");

    /* gate_up_gelu = gelu_mul(x wg^T, x wu^T) */
    pw_value act = call(&env, "gate_up_gelu", ARGS(T_(x), T_(wg), T_(wu)));
    pw_value g = call(&env, "matmul", ARGS(T_(x), T_(wg)));
    pw_value u = call(&env, "matmul", ARGS(T_(x), T_(wu)));
    float ref[T * FF];
    pw_k_gelu_mul(ref, fdata(g), fdata(u), T * FF);
    CHECK(memcmp(ref, fdata(act), sizeof ref) == 0);
    pw_value_release(act), pw_value_release(g), pw_value_release(u);

    /* qkv_norm_rope: the matmuls, then head_norm_rope with the layer's table */
    float q_ref[LAYERS][T * QW];
    for (int l = 0; l < LAYERS; l++) {
        pw_value qkv = call(&env, "qkv_norm_rope",
                            ARGS(T_(x), T_(wq), T_(wk), T_(wv), T_(tqn), T_(tkn),
                                 pw_value_int(NH), pw_value_int(NKV), pw_value_int(l)));
        pw_value q = call(&env, "matmul", ARGS(T_(x), T_(wq)));
        pw_value k = call(&env, "matmul", ARGS(T_(x), T_(wk)));
        pw_value v = call(&env, "matmul", ARGS(T_(x), T_(wv)));
        pw_k_head_norm_rope_args qa = {fdata(q), qn, positions, layer_rope[l], T, NH, HD, MAXP, 1e-6f};
        pw_k_head_norm_rope_args ka = {fdata(k), kn, positions, layer_rope[l], T, NKV, HD, MAXP, 1e-6f};
        pw_k_head_norm_rope(&qa);
        pw_k_head_norm_rope(&ka);
        if (qkv.kind == PW_VAL_TUPLE) {
            CHECK(memcmp(item(qkv, 0), fdata(q), sizeof(float) * T * QW) == 0);
            CHECK(memcmp(item(qkv, 1), fdata(k), sizeof(float) * T * KW) == 0);
            CHECK(memcmp(item(qkv, 2), fdata(v), sizeof(float) * T * KW) == 0);
            memcpy(q_ref[l], item(qkv, 0), sizeof q_ref[l]);
        }
        /* attention honours the layer's window */
        pw_value out = call(&env, "empty_like", ARGS(pw_tuple_get(qkv.as.tuple, 0)));
        call(&env, "attention", ARGS(pw_tuple_get(qkv.as.tuple, 0), pw_tuple_get(qkv.as.tuple, 1),
                                      pw_tuple_get(qkv.as.tuple, 2), out, pw_value_int(l)));
        float want[T * QW];
        for (int l2 = 0; l2 < LAYERS; l2++) memset(kc[l2], 0, NUM_BLOCKS * BLOCK * KW * sizeof(float));
        pw_k_attention_args aa = {want, item(qkv, 0), item(qkv, 1), item(qkv, 2), kc[l], vc[l],
                                  &meta, T, NH, NKV, HD, QW, KW, NUM_BLOCKS, 1, window[l], 0.0f};
        pw_k_attention(&aa);
        CHECK(memcmp(want, fdata(out), sizeof want) == 0);
        pw_value_release(out), pw_value_release(qkv);
        pw_value_release(q), pw_value_release(k), pw_value_release(v);
    }
    /* the two layers' rope bases differ, and so do their queries */
    CHECK(memcmp(q_ref[0], q_ref[1], sizeof q_ref[0]) != 0);
    CHECK_ERR(call_status(&env, "qkv_norm_rope",
                          ARGS(T_(x), T_(wq), T_(wk), T_(wv), T_(short_norm), T_(tkn),
                               pw_value_int(NH), pw_value_int(NKV), pw_value_int(0))),
              PW_ERR_INVALID_ARG, "q_norm has 7 elements, expected head_dim 8");
    CHECK_ERR(call_status(&env, "qkv_norm_rope",
                          ARGS(T_(x), T_(wq), T_(wk), T_(wv), T_(tqn), T_(tkn),
                               pw_value_int(NH), pw_value_int(NKV), pw_value_int(LAYERS))),
              PW_ERR_INVALID_ARG, "argument 9 'layer' = 2 is out of range [0, 1]");
    CHECK_ERR(call_status(&env, "qkv_norm_rope",
                          ARGS(T_(x), T_(wq), T_(wk), T_(wv), T_(tqn), T_(tkn),
                               pw_value_int(NH + 1), pw_value_int(NKV), pw_value_int(0))),
              PW_ERR_INVALID_ARG, "wq is f32[16, 24], expected f32[24, 24]");

    pw_tensor *ts[] = {x, wq, wk, wv, tqn, tkn, wg, wu, short_norm};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pw_tensor_release(ts[i]);
    free(xd), free(wqd), free(wkd), free(wvd), free(qn), free(kn), free(wgd), free(wud);
    for (int l = 0; l < LAYERS; l++) free(kc[l]), free(vc[l]);
    free(global), free(local);
    pw_pool_free(pool);
    pw_stream_free(stream);
    return pw_test_finish("model_ops_gemma");
}
