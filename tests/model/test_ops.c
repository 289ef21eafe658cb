/* The op registry: ops called through pw_op_resolve compute what the
 * kernels compute, a small two-layer forward captured once replays bit for
 * bit like eager runs while the persistent metadata changes, and bad
 * arguments give clear errors. */
#include "ops/cpu/kernels.h"
#include "ops/ops.h"
#include "pw_testing.h"
#include "test_util.h"

#include <math.h>

enum {
    T = 6, VOCAB = 40, DIM = 32, N_HEADS = 4, N_KV = 2, HD = 8, FF = 24, N_LAYERS = 2,
    BLOCK = 4, MAX_BLOCKS = 4, MAX_SEQS = 2, NUM_BLOCKS = 10, MAX_POS = 16,
    BIG = 1024 /* a BIG x BIG weight takes the BLAS path when built */
};
#define KW (N_KV * HD)
#define CACHE_FLOATS (NUM_BLOCKS * BLOCK * KW)

static uint64_t rng = 0x1234567;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}
static float *random_floats(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = uniform();
    return p;
}
static pw_tensor *wrap2(float *data, int64_t rows, int64_t cols) {
    pw_tensor *t = NULL;
    int64_t shape[2] = {rows, cols};
    CHECK_OK(pw_tensor_wrap(data, PW_DEVICE_CPU, PW_F32, 2, shape, &t));
    return t;
}
static pw_tensor *wrap1(void *data, pw_dtype dt, int64_t n) {
    pw_tensor *t = NULL;
    CHECK_OK(pw_tensor_wrap(data, PW_DEVICE_CPU, dt, 1, &n, &t));
    return t;
}

typedef struct world {
    pw_op_env env;
    pw_attn_meta meta;
    int32_t ids[T], positions[T], slots[T], seqs[T], tables[MAX_SEQS * MAX_BLOCKS];
    float *kc[N_LAYERS], *vc[N_LAYERS];
    float *rope_table;
    pw_tensor *t_ids, *embed, *norm_w, *wq, *wk, *wv, *wo, *wgu, *wdown, *big_w, *big_x;
    float *big_x_data;
    float *weights[9];
} world;

static void world_init(world *w, pw_stream *stream, pw_pool *pool) {
    memset(w, 0, sizeof *w);
    for (int l = 0; l < N_LAYERS; l++) {
        w->kc[l] = calloc(CACHE_FLOATS, sizeof(float));
        w->vc[l] = calloc(CACHE_FLOATS, sizeof(float));
    }
    for (int i = 0; i < MAX_SEQS * MAX_BLOCKS; i++) w->tables[i] = NUM_BLOCKS - 2 - i;
    w->meta = (pw_attn_meta){w->positions, w->slots, w->seqs, w->tables, MAX_BLOCKS, BLOCK};
    w->rope_table = malloc(MAX_POS * HD * sizeof(float));
    pw_k_rope_table(w->rope_table, MAX_POS, HD, 10000.0);
    w->env = (pw_op_env){.stream = stream, .pool = pool, .attn_meta = &w->meta,
                         .k_cache = w->kc, .v_cache = w->vc, .n_layers = N_LAYERS,
                         .n_heads = N_HEADS, .n_kv_heads = N_KV, .head_dim = HD,
                         .num_blocks = NUM_BLOCKS, .max_seqs = MAX_SEQS, .max_tokens = T,
                         .rope_table = w->rope_table, .rope_max_pos = MAX_POS,
                         .rms_eps = 1e-5f, .positions = w->positions};
    int64_t sizes[9][2] = {{VOCAB, DIM}, {1, DIM}, {DIM, DIM}, {KW, DIM}, {KW, DIM},
                           {DIM, DIM}, {2 * FF, DIM}, {DIM, FF}, {BIG, BIG}};
    pw_tensor **slots[9] = {&w->embed, &w->norm_w, &w->wq, &w->wk, &w->wv, &w->wo, &w->wgu,
                            &w->wdown, &w->big_w};
    for (int i = 0; i < 9; i++) {
        w->weights[i] = random_floats((size_t)(sizes[i][0] * sizes[i][1]));
        *slots[i] = i == 1 ? wrap1(w->weights[i], PW_F32, DIM)
                           : wrap2(w->weights[i], sizes[i][0], sizes[i][1]);
    }
    w->big_x_data = random_floats((size_t)T * BIG);
    w->big_x = wrap2(w->big_x_data, T, BIG);
    w->t_ids = wrap1(w->ids, PW_I32, T);
}

static void world_free(world *w) {
    pw_tensor *ts[] = {w->t_ids, w->embed, w->norm_w, w->wq, w->wk, w->wv, w->wo, w->wgu,
                       w->wdown, w->big_w, w->big_x};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pw_tensor_release(ts[i]);
    for (int i = 0; i < 9; i++) free(w->weights[i]);
    for (int l = 0; l < N_LAYERS; l++) free(w->kc[l]), free(w->vc[l]);
    free(w->rope_table), free(w->big_x_data);
}

/* Calls op `name`; returns the output (NONE on failure, which is counted). */
static pw_value op(world *w, const char *name, pw_value *args, int nargs) {
    pw_callable c;
    pw_value out = pw_value_none();
    CHECK_OK(pw_op_resolve(&w->env, name, &c));
    if (!c.fn) return out;
    CHECK_OK(c.fn(c.user, args, nargs, &out));
    return out;
}
#define T_(v) pw_value_tensor(v)
#define OP(name, ...) op(w, name, (pw_value[]){__VA_ARGS__}, (int)(sizeof((pw_value[]){__VA_ARGS__}) / sizeof(pw_value)))

/* Outputs of one forward, as tensors that stay alive. */
typedef struct outputs { pw_value logits, tokens, big; } outputs;

static outputs forward(world *w) {
    pw_value h = OP("embedding", T_(w->t_ids), T_(w->embed));
    for (int l = 0; l < N_LAYERS; l++) {
        pw_value xn = OP("rms_norm", h, T_(w->norm_w));
        pw_value q0 = OP("matmul", xn, T_(w->wq));
        pw_value k0 = OP("matmul", xn, T_(w->wk));
        pw_value v = OP("matmul", xn, T_(w->wv));
        pw_value q = OP("rope", q0, pw_value_int(N_HEADS));
        pw_value k = OP("rope", k0, pw_value_int(N_KV));
        pw_value o = OP("empty_like", q);
        pw_value none = OP("attention", q, k, v, o, pw_value_int(l));
        CHECK(none.kind == PW_VAL_NONE);
        pw_value a = OP("matmul", o, T_(w->wo));
        pw_value h2 = OP("add", h, a);
        pw_value xn2 = OP("rms_norm", h2, T_(w->norm_w));
        pw_value gu = OP("matmul", xn2, T_(w->wgu));
        pw_value act = OP("silu_and_mul", gu);
        pw_value act2 = OP("silu_mul", act, act);
        pw_value down = OP("matmul", act2, T_(w->wdown));
        pw_value h3 = OP("add", h2, down);
        pw_value dead[] = {h, xn, q0, k0, v, q, k, o, a, h2, xn2, gu, act, act2, down};
        for (size_t i = 0; i < sizeof dead / sizeof *dead; i++) pw_value_release(dead[i]);
        h = h3;
    }
    outputs r;
    pw_value xn = OP("rms_norm", h, T_(w->norm_w));
    r.logits = OP("matmul", xn, T_(w->embed)); /* tied LM head */
    r.tokens = OP("argmax", r.logits);
    r.big = OP("matmul", T_(w->big_x), T_(w->big_w));
    pw_value_release(xn);
    pw_value_release(h);
    return r;
}

static void outputs_release(outputs *o) {
    pw_value_release(o->logits), pw_value_release(o->tokens), pw_value_release(o->big);
}

static void set_step(world *w, const int (*tokens)[2]) {
    for (int t = 0; t < T; t++) {
        int seq = tokens[t][0], pos = tokens[t][1];
        w->ids[t] = (int32_t)((rng = rng * 6364136223846793005ULL + 1) >> 33) % VOCAB;
        w->seqs[t] = seq < 0 ? 0 : seq;
        w->positions[t] = seq < 0 ? 0 : pos;
        w->slots[t] = seq < 0 ? -1 : w->tables[seq * MAX_BLOCKS + pos / BLOCK] * BLOCK + pos % BLOCK;
    }
}

static bool same_data(pw_value a, pw_value b) {
    if (a.kind != PW_VAL_TENSOR || b.kind != PW_VAL_TENSOR) return false;
    size_t n = pw_tensor_nbytes(a.as.tensor);
    return n == pw_tensor_nbytes(b.as.tensor) &&
           memcmp(pw_tensor_data(a.as.tensor), pw_tensor_data(b.as.tensor), n) == 0;
}

static void test_eager_matches_kernels(world *w) {
    static const int step[T][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {-1, 0}};
    set_step(w, step);
    pw_value x = OP("embedding", T_(w->t_ids), T_(w->embed));
    pw_value y = OP("matmul", x, T_(w->wq));
    CHECK(pw_tensor_dim(y.as.tensor, 0) == T && pw_tensor_dim(y.as.tensor, 1) == DIM);
    float *want = malloc(T * DIM * sizeof(float));
    pw_k_matmul(want, pw_tensor_data(x.as.tensor), w->weights[2], T, DIM, DIM, NULL);
    CHECK(memcmp(want, pw_tensor_data(y.as.tensor), T * DIM * sizeof(float)) == 0);
    pw_value r = OP("rope", y, pw_value_int(N_HEADS));
    pw_k_rope(want, want, w->positions, w->rope_table, T, N_HEADS, HD, MAX_POS);
    CHECK(memcmp(want, pw_tensor_data(r.as.tensor), T * DIM * sizeof(float)) == 0);
    /* rope returns a new tensor and leaves its input alone */
    CHECK(pw_tensor_data(r.as.tensor) != pw_tensor_data(y.as.tensor));
    pw_value am = OP("argmax", y);
    CHECK(pw_tensor_dtype(am.as.tensor) == PW_I32 && pw_tensor_ndim(am.as.tensor) == 1);
    pw_value e = OP("empty_like", am);
    CHECK(pw_tensor_dtype(e.as.tensor) == PW_I32 && pw_tensor_dim(e.as.tensor, 0) == T);
    pw_value_release(x), pw_value_release(y), pw_value_release(r), pw_value_release(am),
        pw_value_release(e);
    free(want);
}

typedef struct snapshot { float k[N_LAYERS][CACHE_FLOATS], v[N_LAYERS][CACHE_FLOATS]; } snapshot;
static void save(snapshot *s, const world *w) {
    for (int l = 0; l < N_LAYERS; l++) {
        memcpy(s->k[l], w->kc[l], sizeof s->k[l]);
        memcpy(s->v[l], w->vc[l], sizeof s->v[l]);
    }
}
static void load(const snapshot *s, world *w) {
    for (int l = 0; l < N_LAYERS; l++) {
        memcpy(w->kc[l], s->k[l], sizeof s->k[l]);
        memcpy(w->vc[l], s->v[l], sizeof s->v[l]);
    }
}

static void test_capture_replay(world *w, pw_stream *stream) {
    for (int l = 0; l < N_LAYERS; l++) {
        memset(w->kc[l], 0, CACHE_FLOATS * sizeof(float));
        memset(w->vc[l], 0, CACHE_FLOATS * sizeof(float));
    }
    static const int steps[3][T][2] = {
        {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {-1, 0}, {-1, 0}},
        {{1, 1}, {0, 3}, {1, 2}, {1, 3}, {1, 4}, {-1, 0}},
        {{0, 4}, {1, 5}, {0, 5}, {0, 6}, {1, 6}, {1, 7}},
    };
    pw_pool *graph_pool = NULL;
    pw_graph *g = NULL;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "ops-graph", &graph_pool));
    set_step(w, steps[0]);
    CHECK_OK(pw_stream_begin_capture(stream, graph_pool));
    outputs captured = forward(w);
    CHECK_OK(pw_stream_end_capture(stream, &g));
    if (!g) {
        outputs_release(&captured);
        pw_pool_free(graph_pool);
        return;
    }
    CHECK(captured.logits.kind == PW_VAL_TENSOR &&
          pw_tensor_pool(captured.logits.as.tensor) == graph_pool);
    static snapshot before;
    int equal = 0;
    for (int st = 0; st < 3; st++) {
        set_step(w, steps[st]);
        save(&before, w);
        outputs eager = forward(w);
        CHECK(pw_tensor_pool(eager.logits.as.tensor) == w->env.pool);
        load(&before, w);
        CHECK_OK(pw_graph_replay(g, stream));
        equal += same_data(eager.logits, captured.logits) && same_data(eager.tokens, captured.tokens) &&
                 same_data(eager.big, captured.big);
        outputs_release(&eager);
    }
    CHECK_EQ_INT(equal, 3);
    outputs_release(&captured);
    pw_graph_free(g);
    pw_pool_free(graph_pool);
}

static pw_status call_raw(world *w, const char *name, pw_value *args, int nargs) {
    pw_callable c;
    pw_status s = pw_op_resolve(&w->env, name, &c);
    if (s != PW_OK) return s;
    pw_value out;
    s = c.fn(c.user, args, nargs, &out);
    pw_value_release(out);
    return s;
}
#define RAW(name, ...) call_raw(w, name, (pw_value[]){__VA_ARGS__}, (int)(sizeof((pw_value[]){__VA_ARGS__}) / sizeof(pw_value)))

static void test_errors(world *w) {
    pw_callable c;
    CHECK_ERR(pw_op_resolve(&w->env, "nope", &c), PW_ERR_NOT_FOUND, "unknown op 'nope'");
    CHECK_ERR(pw_op_resolve(NULL, "add", &c), PW_ERR_INVALID_ARG, "env is NULL");
    pw_value x = OP("embedding", T_(w->t_ids), T_(w->embed)); /* f32[T][DIM] */
    pw_value gu = OP("matmul", x, T_(w->wgu));                /* f32[T][2FF] */
    CHECK_ERR(RAW("matmul", x), PW_ERR_INVALID_ARG, "op 'matmul': expects 2 arguments, got 1");
    CHECK_ERR(RAW("matmul", x, T_(w->wdown)), PW_ERR_INVALID_ARG, "x has K=32 columns");
    CHECK_ERR(RAW("matmul", pw_value_int(3), T_(w->wq)), PW_ERR_INVALID_ARG,
              "argument 1 'x' must be a tensor, got int");
    CHECK_ERR(RAW("embedding", x, T_(w->embed)), PW_ERR_INVALID_ARG,
              "argument 1 'ids' must be a i32 tensor with 1 dims, got f32[6, 32]");
    CHECK_ERR(RAW("rms_norm", x, T_(w->wq)), PW_ERR_INVALID_ARG, "argument 2 'w'");
    CHECK_ERR(RAW("rope", x, pw_value_int(3)), PW_ERR_INVALID_ARG,
              "expected n_heads * head_dim");
    CHECK_ERR(RAW("rope", x, pw_value_float(4.0)), PW_ERR_INVALID_ARG,
              "argument 2 'n_heads' must be an int, got float");
    CHECK_ERR(RAW("add", x, gu), PW_ERR_INVALID_ARG, "op 'add': shapes differ: f32[6, 32] vs f32[6, 48]");
    CHECK_ERR(RAW("silu_mul", x, gu), PW_ERR_INVALID_ARG, "op 'silu_mul': shapes differ");
    CHECK_ERR(RAW("argmax", T_(w->t_ids)), PW_ERR_INVALID_ARG, "argument 1 'logits'");
    pw_value odd = OP("matmul", x, T_(w->wv)); /* f32[T][16]: the k/v width */
    pw_value odd_cols = OP("embedding", T_(w->t_ids), T_(w->wdown)); /* f32[T][FF] */
    pw_tensor *three = NULL;
    float three_data[T * 3];
    three = wrap2(three_data, T, 3);
    CHECK_ERR(RAW("silu_and_mul", T_(three)), PW_ERR_INVALID_ARG, "gate_up has 3 columns");
    pw_value q = OP("matmul", x, T_(w->wq));
    pw_value o = OP("empty_like", q);
    CHECK_ERR(RAW("attention", q, odd, odd, o, pw_value_int(5)), PW_ERR_INVALID_ARG,
              "argument 5 'layer' = 5 is out of range [0, 1]");
    CHECK_ERR(RAW("attention", q, odd, q, o, pw_value_int(0)), PW_ERR_INVALID_ARG,
              "op 'attention': v is f32[6, 32], expected f32[6, 16]");
    CHECK_ERR(RAW("attention", q, odd, odd, odd_cols, pw_value_int(0)), PW_ERR_INVALID_ARG,
              "out is f32[6, 24]");
    /* More tokens than the persistent buffers hold. */
    pw_tensor *tall = wrap2(w->big_x_data, T + 2, DIM);
    CHECK_ERR(RAW("rope", T_(tall), pw_value_int(N_HEADS)), PW_ERR_INVALID_ARG,
              "8 tokens exceed the 6");
    pw_tensor_release(tall);
    /* An environment without the pieces an op needs. */
    pw_op_env bare = w->env;
    bare.rope_table = NULL;
    bare.k_cache = NULL;
    bare.rms_eps = 0;
    pw_op_resolve(&bare, "rope", &c);
    pw_value out;
    CHECK_ERR(c.fn(c.user, (pw_value[]){q, pw_value_int(N_HEADS)}, 2, &out), PW_ERR_INVALID_ARG,
              "env has no rope table");
    pw_op_resolve(&bare, "attention", &c);
    CHECK_ERR(c.fn(c.user, (pw_value[]){q, odd, odd, o, pw_value_int(0)}, 5, &out),
              PW_ERR_INVALID_ARG, "env has no KV cache");
    pw_op_resolve(&bare, "rms_norm", &c);
    CHECK_ERR(c.fn(c.user, (pw_value[]){x, T_(w->norm_w)}, 2, &out), PW_ERR_INVALID_ARG,
              "env.rms_eps must be positive");
    bare = w->env;
    bare.stream = NULL;
    pw_op_resolve(&bare, "add", &c);
    CHECK_ERR(c.fn(c.user, (pw_value[]){x, x}, 2, &out), PW_ERR_INVALID_ARG, "no execution environment");

    /* Shape inference without running. */
    pw_dtype dt;
    int nd;
    int64_t shape[PW_MAX_DIMS];
    bool none;
    CHECK_OK(pw_op_infer(&w->env, "matmul", (pw_value[]){x, T_(w->wgu)}, 2, &dt, &nd, shape, &none));
    CHECK(dt == PW_F32 && nd == 2 && shape[0] == T && shape[1] == 2 * FF && !none);
    CHECK_OK(pw_op_infer(&w->env, "silu_and_mul", &gu, 1, &dt, &nd, shape, &none));
    CHECK(shape[1] == FF);
    CHECK_OK(pw_op_infer(&w->env, "attention", (pw_value[]){q, odd, odd, o, pw_value_int(1)}, 5,
                         &dt, &nd, shape, &none));
    CHECK(none && nd == 0);
    CHECK_ERR(pw_op_infer(&w->env, "bogus", NULL, 0, &dt, &nd, shape, &none), PW_ERR_NOT_FOUND,
              "unknown op 'bogus'");

    CHECK(pw_op_is_splitting("attention"));
    CHECK(!pw_op_is_splitting("matmul"));
    CHECK(!pw_op_is_splitting("nope"));
    /* 13, the four Gemma 3 ops, lm_head, the two NeoX qkv ops (Qwen 2, Phi-3),
     * the four of tensor parallelism (matmul_shards, all_reduce,
     * embedding_vocab, lm_head_vocab) */
    bool all_resolve = pw_op_count() == 24;
    for (int i = 0; i < pw_op_count(); i++)
        all_resolve &= pw_op_resolve(&w->env, pw_op_name(i), &c) == PW_OK;
    CHECK(all_resolve);
    CHECK(pw_op_name(pw_op_count()) == NULL);
    /* The plan builder's hook is the same resolver. */
    CHECK_OK(pw_op_resolve_hook(&w->env, "add", &c));
    CHECK_STREQ(c.name, "add");

    pw_tensor_release(three);
    pw_value vals[] = {x, gu, odd, odd_cols, q, o};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) pw_value_release(vals[i]);
}


static bool same_floats(pw_value v, const float *want, size_t n) {
    return v.kind == PW_VAL_TENSOR && pw_tensor_nbytes(v.as.tensor) == n * sizeof(float) &&
           memcmp(pw_tensor_data(v.as.tensor), want, n * sizeof(float)) == 0;
}

/* The fused ops return exactly what the chains they replace return. */
static void test_fused_ops(world *w) {
    static const int step[T][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {-1, 0}};
    set_step(w, step);
    pw_value x = OP("embedding", T_(w->t_ids), T_(w->embed));
    pw_value qkv = OP("qkv_rope", x, T_(w->wq), T_(w->wk), T_(w->wv), pw_value_int(N_HEADS),
                      pw_value_int(N_KV));
    CHECK(qkv.kind == PW_VAL_TUPLE && pw_tuple_size(qkv.as.tuple) == 3);
    if (qkv.kind == PW_VAL_TUPLE) {
        pw_value q0 = OP("matmul", x, T_(w->wq)), k0 = OP("matmul", x, T_(w->wk));
        pw_value v = OP("matmul", x, T_(w->wv));
        pw_value q = OP("rope", q0, pw_value_int(N_HEADS)), k = OP("rope", k0, pw_value_int(N_KV));
        CHECK(same_data(pw_tuple_get(qkv.as.tuple, 0), q));
        CHECK(same_data(pw_tuple_get(qkv.as.tuple, 1), k));
        CHECK(same_data(pw_tuple_get(qkv.as.tuple, 2), v));
        /* add_rms_norm(x, q, w) = (x + q, rms_norm(x + q, w)) */
        pw_value sum = OP("add", x, q);
        pw_value normed = OP("rms_norm", sum, T_(w->norm_w));
        pw_value an = OP("add_rms_norm", x, q, T_(w->norm_w));
        CHECK(an.kind == PW_VAL_TUPLE && pw_tuple_size(an.as.tuple) == 2);
        if (an.kind == PW_VAL_TUPLE) {
            CHECK(same_data(pw_tuple_get(an.as.tuple, 0), sum));
            CHECK(same_data(pw_tuple_get(an.as.tuple, 1), normed));
        }
        pw_value vals[] = {q0, k0, v, q, k, sum, normed, an};
        for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) pw_value_release(vals[i]);
    }
    /* gate_up_silu(x, wg, wu) = silu(x wg^T) * (x wu^T); wgu is [2FF][DIM] */
    pw_value gate = OP("matmul", x, T_(w->wgu));
    pw_value g = OP("gate_up_silu", x, T_(w->wgu), T_(w->wgu));
    float *want = malloc((size_t)T * 2 * FF * sizeof(float));
    pw_k_silu_mul(want, pw_tensor_data(gate.as.tensor), pw_tensor_data(gate.as.tensor),
                  T * 2 * FF);
    CHECK(same_floats(g, want, (size_t)T * 2 * FF));
    free(want);

    /* Errors: the messages of the ops they fuse. */
    CHECK_ERR(RAW("qkv_rope", x, T_(w->wq), T_(w->wq), T_(w->wv), pw_value_int(N_HEADS),
                  pw_value_int(N_KV)),
              PW_ERR_INVALID_ARG, "op 'qkv_rope': wk is f32[32, 32], expected f32[16, 32]");
    CHECK_ERR(RAW("qkv_rope", gate, T_(w->wq), T_(w->wk), T_(w->wv), pw_value_int(N_HEADS),
                  pw_value_int(N_KV)),
              PW_ERR_INVALID_ARG, "op 'qkv_rope': x has K=48 columns but w [N][K] has K=32");
    CHECK_ERR(RAW("qkv_rope", x, T_(w->wq), T_(w->wk), T_(w->wv), pw_value_int(N_HEADS)),
              PW_ERR_INVALID_ARG, "op 'qkv_rope': expects 6 arguments, got 5");
    CHECK_ERR(RAW("gate_up_silu", x, T_(w->wgu), T_(w->wq)), PW_ERR_INVALID_ARG,
              "op 'gate_up_silu': w_up is f32[32, 32], expected f32[48, 32]");
    CHECK_ERR(RAW("add_rms_norm", x, gate, T_(w->norm_w)), PW_ERR_INVALID_ARG,
              "op 'add_rms_norm': shapes differ");
    CHECK_ERR(RAW("add_rms_norm", x, x, T_(w->wq)), PW_ERR_INVALID_ARG, "argument 3 'w'");
    pw_op_env bare = w->env;
    bare.rope_table = NULL;
    bare.rms_eps = 0;
    pw_callable c;
    pw_value out;
    pw_op_resolve(&bare, "qkv_rope", &c);
    CHECK_ERR(c.fn(c.user, (pw_value[]){x, T_(w->wq), T_(w->wk), T_(w->wv),
                                        pw_value_int(N_HEADS), pw_value_int(N_KV)},
                   6, &out),
              PW_ERR_INVALID_ARG, "env has no rope table");
    pw_op_resolve(&bare, "add_rms_norm", &c);
    CHECK_ERR(c.fn(c.user, (pw_value[]){x, x, T_(w->norm_w)}, 3, &out), PW_ERR_INVALID_ARG,
              "env.rms_eps must be positive");
    pw_value_release(x), pw_value_release(qkv), pw_value_release(gate), pw_value_release(g);
}

/* Row r of a [rows][cols] tensor value equals want[cols]. */
static bool row_equals(pw_value v, int64_t r, const float *want, int64_t cols) {
    return v.kind == PW_VAL_TENSOR &&
           memcmp((const float *)pw_tensor_data(v.as.tensor) + r * cols, want,
                  (size_t)cols * sizeof(float)) == 0;
}

static void set_sample_rows(world *w, const int32_t *rows, int32_t n) {
    static int32_t list[T], count;
    memcpy(list, rows, sizeof list);
    count = n;
    w->meta.sample_rows = list;
    w->meta.n_sample_rows = &count;
}

/* lm_head computes the listed rows' logits, in list order, with the plain
 * matmul's bits (and softcap's), fused or not; without a list, every row. */
static void test_lm_head(world *w) {
    static const int step[T][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {-1, 0}};
    set_step(w, step);
    pw_value x = OP("embedding", T_(w->t_ids), T_(w->embed));
    pw_value full = OP("matmul", x, T_(w->embed)); /* tied LM head: [T][VOCAB] */
    const float *ref = pw_tensor_data(full.as.tensor);
    float capped[T * VOCAB];
    pw_k_softcap(capped, ref, T * VOCAB, 2.5f);

    /* no list: every row, the matmul itself */
    pw_value all = OP("lm_head", x, T_(w->embed), pw_value_float(0.0));
    CHECK(same_data(all, full));
    pw_value_release(all);

    static const int32_t rows[T] = {4, 1, 5, 9, 0, 0}; /* 9: outside the batch, reads row 0 */
    for (int unfused = 0; unfused < 2; unfused++) {
        pw_ops_prefer_unfused(unfused);
        set_sample_rows(w, rows, 4);
        pw_value y = OP("lm_head", x, T_(w->embed), pw_value_float(0.0));
        pw_value c = OP("lm_head", x, T_(w->embed), pw_value_float(2.5));
        for (int i = 0; i < 4; i++) {
            int64_t r = rows[i] < T ? rows[i] : 0;
            CHECK(row_equals(y, i, ref + r * VOCAB, VOCAB));
            CHECK(row_equals(c, i, capped + r * VOCAB, VOCAB));
        }
        if (unfused) { /* the unfused path multiplies zero rows past the list */
            float zeros[VOCAB] = {0};
            CHECK(row_equals(y, 4, zeros, VOCAB) && row_equals(c, 5, zeros, VOCAB));
        }
        pw_value_release(y), pw_value_release(c);
        /* a count past the batch is the whole batch; a negative one, nothing */
        static const int32_t in_order[T] = {0, 1, 2, 3, 4, 5};
        set_sample_rows(w, in_order, 100);
        y = OP("lm_head", x, T_(w->embed), pw_value_float(0.0));
        CHECK(same_data(y, full));
        pw_value_release(y);
        set_sample_rows(w, in_order, -3);
        y = OP("lm_head", x, T_(w->embed), pw_value_float(0.0));
        CHECK(y.kind == PW_VAL_TENSOR);
        pw_value_release(y);
    }

    /* every fused op's fallback gives the fused kernel's bits */
    pw_value fused[3], plain[3];
    for (int unfused = 0; unfused < 2; unfused++) {
        pw_ops_prefer_unfused(unfused);
        pw_value *o = unfused ? plain : fused;
        o[0] = OP("qkv_rope", x, T_(w->wq), T_(w->wk), T_(w->wv), pw_value_int(N_HEADS),
                  pw_value_int(N_KV));
        o[1] = OP("gate_up_silu", x, T_(w->wgu), T_(w->wgu));
        o[2] = OP("add_rms_norm", x, x, T_(w->norm_w));
    }
    pw_ops_prefer_unfused(false);
    for (int i = 0; i < 3; i += 2)
        for (int j = 0; j < (i == 0 ? 3 : 2); j++)
            CHECK(fused[i].kind == PW_VAL_TUPLE && plain[i].kind == PW_VAL_TUPLE &&
                  same_data(pw_tuple_get(fused[i].as.tuple, j), pw_tuple_get(plain[i].as.tuple, j)));
    CHECK(same_data(fused[1], plain[1]));
    for (int i = 0; i < 3; i++) pw_value_release(fused[i]), pw_value_release(plain[i]);

    /* the vocabulary split on one rank (it holds every row): the plain
     * lookup's and head's bits, the head on the sampled rows only */
    pw_value e = OP("embedding", T_(w->t_ids), T_(w->embed));
    pw_value ev = OP("embedding_vocab", T_(w->t_ids), T_(w->embed), pw_value_int(VOCAB));
    CHECK(same_data(e, ev));
    pw_value_release(e), pw_value_release(ev);
    set_sample_rows(w, rows, 4);
    pw_value h = OP("lm_head", x, T_(w->embed), pw_value_float(2.5));
    pw_value hv = OP("lm_head_vocab", x, T_(w->embed), pw_value_float(2.5), pw_value_int(VOCAB));
    for (int i = 0; i < 4; i++) CHECK(row_equals(hv, i, (const float *)pw_tensor_data(h.as.tensor) + i * VOCAB, VOCAB));
    pw_value_release(h), pw_value_release(hv);
    CHECK_ERR(RAW("embedding_vocab", T_(w->t_ids), T_(w->embed), pw_value_int(VOCAB + 1)),
              PW_ERR_INVALID_ARG,
              "op 'embedding_vocab': 40 weight rows, but rank 0 of 1 holds 41 of the "
              "vocabulary's 41");

    /* errors */
    CHECK_ERR(RAW("lm_head", x, T_(w->embed), pw_value_float(-1.0)), PW_ERR_INVALID_ARG,
              "op 'lm_head': softcap must be 0 (none) or positive, got -1");
    CHECK_ERR(RAW("lm_head", x, T_(w->wdown), pw_value_float(0.0)), PW_ERR_INVALID_ARG,
              "op 'lm_head': x has K=32 columns but w [N][K] has K=24");
    CHECK_ERR(RAW("lm_head", x, T_(w->embed)), PW_ERR_INVALID_ARG,
              "op 'lm_head': expects 3 arguments, got 2");
    CHECK_ERR(RAW("lm_head", x, T_(w->embed), pw_value_float(0.0), x), PW_ERR_INVALID_ARG,
              "expects 3 arguments, got 4");
    w->meta.sample_rows = NULL;
    w->meta.n_sample_rows = NULL;
    pw_value_release(x), pw_value_release(full);
}

int main(void) {
    pw_stream *stream = NULL;
    pw_pool *pool = NULL;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &stream));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "ops-eager", &pool));
    static world w;
    world_init(&w, stream, pool);
    test_eager_matches_kernels(&w);
    test_capture_replay(&w, stream);
    test_errors(&w);
    test_fused_ops(&w);
    test_lm_head(&w);
    world_free(&w);
    pw_pool_free(pool);
    pw_stream_free(stream);
    return pw_test_finish("model_ops");
}
