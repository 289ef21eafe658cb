/* Every kernel launched through pw_launch: a small layer is captured once,
 * then for several steps the persistent metadata (token ids, positions,
 * slot mapping, sequences, block tables) is rewritten and the replay must
 * match an eager run of the same launches bit for bit. */
#include "ops/cpu/kernels.h"
#include "kernel_test_util.h"

enum {
    T = 8, VOCAB = 50, DIM = 32, N_HEADS = 4, N_KV = 2, HD = 8, FF = 24,
    BLOCK = 4, MAX_BLOCKS = 4, MAX_SEQS = 3, NUM_BLOCKS = 12, MAX_POS = 16,
    BIG_N = 1024, BIG_K = 1024 /* reaches the BLAS path when built */
};
#define KW (N_KV * HD)
#define CACHE_FLOATS (NUM_BLOCKS * BLOCK * KW)

typedef struct layer {
    /* weights */
    float *table, *norm_w, *wq, *wk, *wv, *wgu, *big_w, *big_in;
    float *rope_table;
    /* persistent per-step inputs */
    int32_t ids[T], positions[T], slots[T], seqs[T], block_tables[MAX_SEQS * MAX_BLOCKS];
    pw_attn_meta meta;
    /* activations */
    float *h, *xn, *q, *k, *v, *attn, *res, *gu, *act, *act2, *big_out, *scratch;
    float *k_cache, *v_cache;
    int32_t argmax[T];
} layer;

static void layer_init(layer *L) {
    memset(L, 0, sizeof *L);
    L->table = kt_random(VOCAB * DIM);
    L->norm_w = kt_random(DIM);
    L->wq = kt_random(N_HEADS * HD * DIM);
    L->wk = kt_random(KW * DIM);
    L->wv = kt_random(KW * DIM);
    L->wgu = kt_random(2 * FF * DIM);
    L->big_w = kt_random(BIG_N * BIG_K);
    L->big_in = kt_random(T * BIG_K);
    L->rope_table = kt_zeros(MAX_POS * HD);
    pw_k_rope_table(L->rope_table, MAX_POS, HD, 10000.0);
    L->h = kt_zeros(T * DIM), L->xn = kt_zeros(T * DIM), L->res = kt_zeros(T * DIM);
    L->q = kt_zeros(T * DIM), L->k = kt_zeros(T * KW), L->v = kt_zeros(T * KW);
    L->attn = kt_zeros(T * DIM), L->gu = kt_zeros(T * 2 * FF), L->act = kt_zeros(T * FF);
    L->act2 = kt_zeros(T * FF), L->big_out = kt_zeros(T * BIG_N);
    size_t sf = pw_k_matmul_scratch_floats(T, BIG_N, BIG_K);
    L->scratch = sf ? kt_zeros(sf) : NULL;
    L->k_cache = kt_zeros(CACHE_FLOATS), L->v_cache = kt_zeros(CACHE_FLOATS);
    for (int i = 0; i < MAX_SEQS * MAX_BLOCKS; i++) L->block_tables[i] = NUM_BLOCKS - 1 - i;
    L->meta = (pw_attn_meta){L->positions, L->slots, L->seqs, L->block_tables, MAX_BLOCKS, BLOCK};
}

static void layer_free(layer *L) {
    float *p[] = {L->table, L->norm_w, L->wq, L->wk, L->wv, L->wgu, L->big_w, L->big_in,
                  L->rope_table, L->h, L->xn, L->q, L->k, L->v, L->attn, L->res, L->gu,
                  L->act, L->act2, L->big_out, L->scratch, L->k_cache, L->v_cache};
    for (size_t i = 0; i < KT_LEN(p); i++) free(p[i]);
}

#define LAUNCH(kernel, args)                                                                   \
    do {                                                                                       \
        pw_status s_ = pw_launch(s, &(kernel), &(args), sizeof(args));                         \
        if (s_ != PW_OK) return s_;                                                            \
        n++;                                                                                   \
    } while (0)

/* The launches of one step; every argument is a pointer or a shape. */
static pw_status layer_launch(layer *L, pw_stream *s, int *n_launches) {
    int n = 0;
    pw_k_embedding_args emb = {L->h, L->ids, L->table, T, VOCAB, DIM};
    LAUNCH(pw_kernel_embedding, emb);
    pw_k_rms_norm_args norm = {L->xn, NULL, L->h, L->norm_w, T, DIM, 1e-5f};
    LAUNCH(pw_kernel_rms_norm, norm);
    pw_k_matmul_args mq = {L->q, L->xn, L->wq, NULL, T, N_HEADS * HD, DIM};
    pw_k_matmul_args mk = {L->k, L->xn, L->wk, NULL, T, KW, DIM};
    pw_k_matmul_args mv = {L->v, L->xn, L->wv, NULL, T, KW, DIM};
    LAUNCH(pw_kernel_matmul, mq);
    LAUNCH(pw_kernel_matmul, mk);
    LAUNCH(pw_kernel_matmul, mv);
    pw_k_rope_args rq = {L->q, L->q, L->positions, L->rope_table, T, N_HEADS, HD, MAX_POS};
    pw_k_rope_args rk = {L->k, L->k, L->positions, L->rope_table, T, N_KV, HD, MAX_POS};
    LAUNCH(pw_kernel_rope, rq);
    LAUNCH(pw_kernel_rope, rk);
    pw_k_attention_args at = {L->attn, L->q, L->k, L->v, L->k_cache, L->v_cache, &L->meta, T,
                              N_HEADS, N_KV, HD, N_HEADS * HD, KW, NUM_BLOCKS, MAX_SEQS};
    LAUNCH(pw_kernel_attention, at);
    pw_k_add_args add = {L->res, L->h, L->attn, T * DIM};
    LAUNCH(pw_kernel_add, add);
    pw_k_rms_norm_args fused = {L->xn, L->res, L->attn, L->norm_w, T, DIM, 1e-5f};
    LAUNCH(pw_kernel_add_rms_norm, fused);
    pw_k_matmul_args mgu = {L->gu, L->xn, L->wgu, NULL, T, 2 * FF, DIM};
    LAUNCH(pw_kernel_matmul, mgu);
    pw_k_silu_args sm = {L->act, L->gu, NULL, T, FF};
    LAUNCH(pw_kernel_silu_and_mul, sm);
    pw_k_silu_args sm2 = {L->act2, L->act, L->act, T, FF};
    LAUNCH(pw_kernel_silu_mul, sm2);
    /* The large product reads the attention output so it changes per step. */
    pw_k_add_args mix = {L->big_in, L->big_in, L->attn, T * DIM};
    LAUNCH(pw_kernel_add, mix);
    pw_k_matmul_args big = {L->big_out, L->big_in, L->big_w, L->scratch, T, BIG_N, BIG_K};
    LAUNCH(pw_kernel_matmul, big);
    pw_k_argmax_args am = {L->argmax, L->big_out, T, BIG_N};
    LAUNCH(pw_kernel_argmax, am);
    *n_launches = n;
    return PW_OK;
}

/* Step metadata: (seq, pos) per token, seq -1 = padding. */
static void set_step(layer *L, const int (*tokens)[2]) {
    for (int t = 0; t < T; t++) {
        int seq = tokens[t][0], pos = tokens[t][1];
        L->ids[t] = (int32_t)(kt_next() % VOCAB);
        L->seqs[t] = seq < 0 ? 0 : seq;
        L->positions[t] = seq < 0 ? 0 : pos;
        L->slots[t] = seq < 0 ? -1
                              : L->block_tables[seq * MAX_BLOCKS + pos / BLOCK] * BLOCK + pos % BLOCK;
    }
}

typedef struct snapshot {
    float h[T * DIM], attn[T * DIM], xn[T * DIM], res[T * DIM], act2[T * FF];
    float big_in[T * BIG_K], big_out[T * BIG_N];
    float k_cache[CACHE_FLOATS], v_cache[CACHE_FLOATS];
    int32_t argmax[T];
} snapshot;

static void take(snapshot *sn, const layer *L) {
    memcpy(sn->h, L->h, sizeof sn->h);
    memcpy(sn->attn, L->attn, sizeof sn->attn);
    memcpy(sn->xn, L->xn, sizeof sn->xn);
    memcpy(sn->res, L->res, sizeof sn->res);
    memcpy(sn->act2, L->act2, sizeof sn->act2);
    memcpy(sn->big_in, L->big_in, sizeof sn->big_in);
    memcpy(sn->big_out, L->big_out, sizeof sn->big_out);
    memcpy(sn->k_cache, L->k_cache, sizeof sn->k_cache);
    memcpy(sn->v_cache, L->v_cache, sizeof sn->v_cache);
    memcpy(sn->argmax, L->argmax, sizeof sn->argmax);
}

static void restore_state(layer *L, const snapshot *sn) {
    memcpy(L->k_cache, sn->k_cache, sizeof sn->k_cache);
    memcpy(L->v_cache, sn->v_cache, sizeof sn->v_cache);
    memcpy(L->big_in, sn->big_in, sizeof sn->big_in);
}

int main(void) {
    kt_seed(31);
    layer L;
    layer_init(&L);
    pw_pool *pool = NULL;
    pw_stream *stream = NULL;
    pw_graph *graph = NULL;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "kernels-test", &pool));
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &stream));

    static const int steps[3][T][2] = {
        {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {-1, 0}, {-1, 0}},
        {{1, 2}, {0, 4}, {2, 0}, {2, 1}, {2, 2}, {-1, 0}, {-1, 0}, {-1, 0}},
        {{2, 3}, {1, 3}, {0, 5}, {1, 4}, {0, 6}, {0, 7}, {2, 4}, {-1, 0}},
    };
    set_step(&L, steps[0]);
    int n_launches = 0;
    CHECK_OK(pw_stream_begin_capture(stream, pool));
    CHECK_OK(layer_launch(&L, stream, &n_launches));
    CHECK_OK(pw_stream_end_capture(stream, &graph));
    CHECK(graph != NULL);
    if (!graph) return pw_test_finish("kernels_launch");
    CHECK_EQ_INT(pw_graph_num_launches(graph), n_launches);
    /* Capture recorded, it did not run. */
    {
        bool untouched = true;
        for (int i = 0; i < CACHE_FLOATS; i++) untouched &= L.k_cache[i] == 0.0f;
        CHECK(untouched);
    }

    static snapshot before, eager, replayed, prev;
    int equal_steps = 0;
    for (int st = 0; st < 3; st++) {
        set_step(&L, steps[st]);
        take(&before, &L);
        int n = 0;
        CHECK_OK(layer_launch(&L, stream, &n));
        take(&eager, &L);
        restore_state(&L, &before);
        CHECK_OK(pw_graph_replay(graph, stream));
        take(&replayed, &L);
        equal_steps += kt_bitwise_equal(&eager, &replayed, sizeof eager);
        if (st > 0) CHECK(!kt_bitwise_equal(prev.attn, replayed.attn, sizeof prev.attn));
        prev = replayed;
    }
    CHECK_EQ_INT(equal_steps, 3);
    /* Padding rows of the last step's attention output are zero. */
    bool pad_zero = true;
    for (int i = 0; i < DIM; i++) pad_zero &= replayed.attn[(T - 1) * DIM + i] == 0.0f;
    CHECK(pad_zero);

    pw_graph_free(graph);
    pw_stream_free(stream);
    pw_pool_free(pool);
    layer_free(&L);
    return pw_test_finish("kernels_launch");
}
