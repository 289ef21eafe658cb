/* The kernels' thread pool: every item is covered exactly once whatever
 * the thread count, a stalled (preempted) thread holds up only the share
 * it took, and the kernels that split work across threads (matmul by
 * output columns, attention by tokens and head groups) return the same
 * bits with 1 to 4 threads, including inside a captured graph replayed
 * under a different thread count. */
#include "ops/cpu/kernels.h"
#include "kernel_test_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

static void count_items(void *ctx, int64_t begin, int64_t end) {
    int *hits = ctx;
    for (int64_t i = begin; i < end; i++) hits[i]++;
}

static void test_cover(void) {
    static const int threads[] = {1, 2, 3, 4, 7};
    /* around the guided cut's 4 shares per thread, and far above it */
    static const int64_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 9, 11, 12, 13, 15, 16, 17, 27, 28,
                                    29, 64, 1001};
    for (size_t ti = 0; ti < KT_LEN(threads); ti++) {
        pw_set_num_threads(threads[ti]);
        CHECK_EQ_INT(pw_k_parallel_threads(), threads[ti]);
        for (size_t si = 0; si < KT_LEN(sizes); si++) {
            int64_t n = sizes[si];
            int *hits = calloc((size_t)n + 1, sizeof *hits);
            pw_k_parallel_for(n, count_items, hits);
            int bad = 0;
            for (int64_t i = 0; i < n; i++) bad += hits[i] != 1;
            CHECK_EQ_INT(bad, 0);
            free(hits);
        }
    }
}

/* Back-to-back jobs whose share counts alternate, small then large: a
 * worker still holding the ticket of a finished small job must not take
 * the next, larger job's count as its own and claim a share of a job that
 * is not yet published (the race ThreadSanitizer once found here). Every
 * item of every job is covered exactly once, and each job is complete
 * when pw_k_parallel_for returns. */
static void test_alternating_share_counts(void) {
    static const int64_t sizes[] = {2, 1001, 3, 64, 4, 9};
    enum { ROUNDS = 3000 };
    pw_set_num_threads(3);
    int *hits = calloc(1001, sizeof *hits);
    int bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int64_t n = sizes[r % KT_LEN(sizes)];
        memset(hits, 0, (size_t)n * sizeof *hits);
        pw_k_parallel_for(n, count_items, hits);
        for (int64_t i = 0; i < n; i++) bad += hits[i] != 1;
    }
    CHECK_EQ_INT(bad, 0);
    free(hits);
}

/* Two application threads submitting jobs at once: one gets the pool, the
 * other runs its job alone; either way every item of every job is covered
 * once. Run under ThreadSanitizer by scripts/tsan-check.sh. */
typedef struct caller {
    int jobs, bad;
} caller;

static void *submit_jobs(void *arg) {
    caller *c = arg;
    enum { N = 41 };
    for (int j = 0; j < c->jobs; j++) {
        int hits[N] = {0};
        pw_k_parallel_for(N, count_items, hits);
        for (int i = 0; i < N; i++) c->bad += hits[i] != 1;
    }
    return NULL;
}

static void test_concurrent_callers(void) {
    pw_set_num_threads(3);
    caller cs[2] = {{2000, 0}, {2000, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, submit_jobs, &cs[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK_EQ_INT(cs[0].bad + cs[1].bad, 0);
}

/* Each share waits (up to 5 s) until `want` shares are running at once:
 * only true when the pool has grown to that many threads. */
typedef struct rendezvous {
    atomic_int entered;
    int want;
    atomic_int met;
} rendezvous;

static void meet(void *ctx, int64_t begin, int64_t end) {
    rendezvous *r = ctx;
    atomic_fetch_add(&r->entered, 1);
    for (long spins = 0; spins < 50000000L && atomic_load(&r->entered) < r->want; spins++)
        sched_yield();
    if (atomic_load(&r->entered) >= r->want) atomic_fetch_add(&r->met, 1);
    (void)begin, (void)end;
}

static void test_pool_grows(void) {
    int hits[2] = {0};
    pw_set_num_threads(2);
    pw_k_parallel_for(2, count_items, hits); /* the pool has at least 1 worker */
    pw_set_num_threads(3);
    rendezvous r = {0, 3, 0};
    pw_k_parallel_for(3, meet, &r);
    CHECK_EQ_INT(atomic_load(&r.met), 3);
}

/* A thread that stalls in its first share (as if preempted there) holds
 * up that share only: the others take every share it has not claimed.
 * The first share a worker (not the caller) runs waits, up to 5 s, until
 * all the other items are done (the caller's first share waits for that
 * worker to arrive); with a share per thread it would hold half the job,
 * with the guided cut at most a quarter (2 threads: its first shares hold
 * a quarter each, its last an eighth). */
typedef struct stall {
    pthread_t caller;
    atomic_int done;        /* items finished */
    atomic_int stalled;     /* 1 once a worker took its stalling share */
    atomic_int stalled_items, met;
    int n;
} stall;

static void stall_items(void *ctx, int64_t begin, int64_t end) {
    stall *st = ctx;
    int expected = 0;
    if (pthread_equal(pthread_self(), st->caller)) {
        /* the caller's first share waits for a worker to join the job */
        for (long spins = 0; spins < 50000000L && !atomic_load(&st->stalled) &&
                             atomic_load(&st->done) == 0;
             spins++)
            sched_yield();
    } else if (atomic_compare_exchange_strong(&st->stalled, &expected, 1)) {
        int mine = (int)(end - begin);
        atomic_store(&st->stalled_items, mine);
        for (long spins = 0; spins < 50000000L && atomic_load(&st->done) < st->n - mine; spins++)
            sched_yield();
        if (atomic_load(&st->done) == st->n - mine) atomic_store(&st->met, 1);
    }
    atomic_fetch_add(&st->done, (int)(end - begin));
}

static void test_stalled_worker(void) {
    pw_set_num_threads(2);
    int woke = 0;
    for (int attempt = 0; attempt < 50 && !woke; attempt++) {
        stall st = {pthread_self(), 0, 0, 0, 0, 400};
        pw_k_parallel_for(st.n, stall_items, &st);
        CHECK_EQ_INT(atomic_load(&st.done), st.n);
        /* the worker may not have woken before the caller took every share */
        if (!atomic_load(&st.stalled)) continue;
        woke = 1;
        printf("stalled worker: held %d of %d items, the others did the rest: %s\n",
               atomic_load(&st.stalled_items), st.n, atomic_load(&st.met) ? "yes" : "no");
        CHECK(atomic_load(&st.met));
        CHECK(atomic_load(&st.stalled_items) <= st.n / 4);
    }
    if (!woke) printf("stalled worker: the worker never took a share (loaded machine)\n");
}

static float *matmul_with(int threads, const float *x, const float *w, int64_t t, int64_t n,
                          int64_t k) {
    pw_set_num_threads(threads);
    float *y = kt_zeros((size_t)(t * n));
    pw_k_matmul_own(y, x, w, t, n, k);
    return y;
}

static void test_matmul(void) {
    /* Above PW_K_PARALLEL_MIN_MACS, with a column count that leaves a
     * partial group of 8. */
    const int64_t t = 33, n = 101, k = 72;
    CHECK(t * n * k >= PW_K_PARALLEL_MIN_MACS);
    float *x = kt_random((size_t)(t * k)), *w = kt_random((size_t)(n * k));
    float *one = matmul_with(1, x, w, t, n, k);
    float *two = matmul_with(2, x, w, t, n, k);
    CHECK(kt_bitwise_equal(one, two, (size_t)(t * n) * sizeof(float)));
    free(two);
    float *three = matmul_with(3, x, w, t, n, k);
    float *four = matmul_with(4, x, w, t, n, k);
    CHECK(kt_bitwise_equal(one, three, (size_t)(t * n) * sizeof(float)));
    CHECK(kt_bitwise_equal(one, four, (size_t)(t * n) * sizeof(float)));
    /* A row alone (below the threshold: serial) matches its row in the
     * split batch. */
    float *alone = matmul_with(4, x + 17 * k, w, 1, n, k);
    CHECK(kt_bitwise_equal(alone, four + 17 * n, (size_t)n * sizeof(float)));
    free(x), free(w), free(one), free(three), free(four), free(alone);
}

enum { HEADS = 4, KV_HEADS = 2, HD = 8, BLOCK = 16, BLOCKS = 8, TOKENS = 40 };

/* One sequence prefilled in one step: every token attends over its
 * prefix, so the split over tokens is exercised with real work. */
static float *attention_with(int threads, const float *q, const float *k, const float *v) {
    pw_set_num_threads(threads);
    size_t cache = (size_t)BLOCKS * BLOCK * KV_HEADS * HD;
    float *k_cache = kt_zeros(cache), *v_cache = kt_zeros(cache);
    float *out = kt_random((size_t)TOKENS * HEADS * HD);
    int32_t pos[TOKENS], slot[TOKENS], seq[TOKENS], table[BLOCKS];
    for (int b = 0; b < BLOCKS; b++) table[b] = BLOCKS - 1 - b;
    for (int t = 0; t < TOKENS; t++) {
        pos[t] = t, seq[t] = 0;
        slot[t] = table[t / BLOCK] * BLOCK + t % BLOCK;
    }
    pw_attn_meta meta = {pos, slot, seq, table, BLOCKS, BLOCK};
    pw_k_attention_args a = {out, q, k, v, k_cache, v_cache, &meta, TOKENS, HEADS, KV_HEADS,
                             HD, HEADS * HD, KV_HEADS * HD, BLOCKS, 1};
    pw_k_attention(&a);
    free(k_cache), free(v_cache);
    return out;
}

/* The quantized matmul splits by column groups too: Q4_1 and Q8_0 weights
 * (scale 1.0 and minimum 0.5 as f16, random quants), 1 vs 2, 3, 4 threads. */
static void test_matmul_quant(void) {
    const int64_t t = 9, n = 101, k = 160; /* 5 blocks of 32 per row */
    CHECK(t * n * k >= PW_K_PARALLEL_MIN_MACS);
    const pw_dtype types[] = {PW_Q4_1, PW_Q8_0};
    const int64_t block_bytes[] = {20, 34};
    float *x = kt_random((size_t)(t * k));
    for (int ti = 0; ti < 2; ti++) {
        int64_t row_bytes = k / 32 * block_bytes[ti];
        uint8_t *w = malloc((size_t)(n * row_bytes));
        for (int64_t i = 0; i < n * row_bytes; i++) w[i] = (uint8_t)(kt_next() & 0xff);
        for (int64_t b = 0; b < n * k / 32; b++) {
            uint8_t *blk = w + b * block_bytes[ti];
            blk[0] = 0x00, blk[1] = 0x3C; /* d = 1.0 */
            if (types[ti] == PW_Q4_1) blk[2] = 0x00, blk[3] = 0x38; /* m = 0.5 */
        }
        float *y1 = kt_zeros((size_t)(t * n)), *yn = kt_zeros((size_t)(t * n));
        pw_set_num_threads(1);
        pw_k_matmul_quant(y1, x, w, types[ti], t, n, k);
        for (int th = 2; th <= 4; th++) {
            pw_set_num_threads(th);
            pw_k_matmul_quant(yn, x, w, types[ti], t, n, k);
            CHECK(kt_bitwise_equal(y1, yn, (size_t)(t * n) * sizeof(float)));
        }
        free(w), free(y1), free(yn);
    }
    free(x);
}

/* Decode (one token) splits by head groups: 1 to 4 threads, same bits. A
 * long context so that the step is worth splitting. */
static void test_attention_decode(void) {
    enum { DH = 6, DKV = 3, DHD = 64, DBLOCK = 16, DBLOCKS = 20, POS = 300 };
    size_t cache = (size_t)DBLOCKS * DBLOCK * DKV * DHD;
    float *k_cache = kt_random(cache), *v_cache = kt_random(cache);
    float *q = kt_random((size_t)DH * DHD), *k = kt_random((size_t)DKV * DHD),
          *v = kt_random((size_t)DKV * DHD);
    int32_t pos = POS, seq = 0, table[DBLOCKS];
    for (int b = 0; b < DBLOCKS; b++) table[b] = (b * 7) % DBLOCKS;
    int32_t slot = table[POS / DBLOCK] * DBLOCK + POS % DBLOCK;
    pw_attn_meta meta = {&pos, &slot, &seq, table, DBLOCKS, DBLOCK};
    float *out[4];
    for (int th = 1; th <= 4; th++) {
        pw_set_num_threads(th);
        out[th - 1] = kt_random((size_t)DH * DHD);
        pw_k_attention_args a = {out[th - 1], q, k, v, k_cache, v_cache, &meta, 1, DH, DKV,
                                 DHD, DH * DHD, DKV * DHD, DBLOCKS, 1};
        pw_k_attention(&a);
        if (th > 1) CHECK(kt_bitwise_equal(out[0], out[th - 1], (size_t)DH * DHD * sizeof(float)));
    }
    for (int i = 0; i < 4; i++) free(out[i]);
    free(k_cache), free(v_cache), free(q), free(k), free(v);
}

static void test_attention(void) {
    float *q = kt_random((size_t)TOKENS * HEADS * HD), *k = kt_random((size_t)TOKENS * KV_HEADS * HD),
          *v = kt_random((size_t)TOKENS * KV_HEADS * HD);
    float *one = attention_with(1, q, k, v), *three = attention_with(3, q, k, v),
          *four = attention_with(4, q, k, v), *two = attention_with(2, q, k, v);
    size_t bytes = (size_t)TOKENS * HEADS * HD * sizeof(float);
    CHECK(kt_bitwise_equal(one, two, bytes));
    free(two);
    CHECK(kt_bitwise_equal(one, three, bytes));
    CHECK(kt_bitwise_equal(one, four, bytes));
    free(q), free(k), free(v), free(one), free(three), free(four);
}

/* A graph captured with one thread count and replayed under another gives
 * the eager result: the thread count is read at run time, never baked
 * into the recorded arguments. */
static void test_replay(void) {
    const int64_t t = 32, n = 64, k = 80;
    float *x = kt_random((size_t)(t * k)), *w = kt_random((size_t)(n * k));
    float *y = kt_zeros((size_t)(t * n));
    float *ref = matmul_with(1, x, w, t, n, k);
    pw_stream *s = NULL;
    pw_pool *pool = NULL;
    pw_graph *g = NULL;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graph", &pool));
    pw_set_num_threads(1);
    CHECK_OK(pw_stream_begin_capture(s, pool));
    pw_k_matmul_args args = {y, x, w, NULL, t, n, k};
    CHECK_OK(pw_launch(s, &pw_kernel_matmul, &args, sizeof args));
    CHECK_OK(pw_stream_end_capture(s, &g));
    pw_set_num_threads(4);
    CHECK_OK(pw_graph_replay(g, s));
    CHECK(kt_bitwise_equal(y, ref, (size_t)(t * n) * sizeof(float)));
    pw_graph_free(g);
    pw_pool_free(pool);
    pw_stream_free(s);
    free(x), free(w), free(y), free(ref);
}

int main(void) {
    kt_seed(11);
    test_cover();
    test_alternating_share_counts();
    test_concurrent_callers();
    test_pool_grows();
    test_stalled_worker();
    test_matmul();
    test_matmul_quant();
    test_attention();
    test_attention_decode();
    test_replay();
    pw_set_num_threads(1);
    return pw_test_finish("kernels_parallel");
}
