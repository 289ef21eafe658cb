/* Caching pool: randomized alloc/free against a reference model (no two
 * live blocks overlap, stats exact), coalescing, trim rules, graph pools. */
#include "test_util.h"
#include "internal.h"
#include "mem/pool_internal.h"

#include <stdint.h>

#define LIVE_MAX 256

typedef struct live_block {
    char *ptr;
    size_t size;
    unsigned char tag;
} live_block;

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t rounded(size_t n) { return (n ? n + PW_POOL_ALIGN - 1 : PW_POOL_ALIGN) / PW_POOL_ALIGN * PW_POOL_ALIGN; }

static void test_random_against_model(void) {
    pw_pool *pool;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "random", &pool));
    live_block live[LIVE_MAX];
    int n_live = 0;
    size_t expect_alloc = 0, expect_peak = 0;
    int overlaps = 0, corrupt = 0, misaligned = 0, stats_wrong = 0;
    for (int step = 0; step < 20000; step++) {
        bool do_alloc = n_live == 0 || (n_live < LIVE_MAX && rnd() % 100 < 55);
        if (do_alloc) {
            size_t size = (rnd() % 4 == 0) ? rnd() % (3u << 20) : rnd() % 4096;
            void *p;
            if (pw_pool_alloc(pool, size, &p) != PW_OK) {
                CHECK(!"alloc failed");
                break;
            }
            if ((uintptr_t)p % PW_POOL_ALIGN) misaligned++;
            for (int i = 0; i < n_live; i++) {
                char *a = live[i].ptr, *b = p;
                if (a < b + size && b < a + live[i].size) overlaps++;
            }
            unsigned char tag = (unsigned char)rnd();
            if (size) memset(p, tag, size);
            live[n_live++] = (live_block){p, size, tag};
            expect_alloc += rounded(size);
            if (expect_alloc > expect_peak) expect_peak = expect_alloc;
        } else {
            int i = (int)(rnd() % (uint64_t)n_live);
            for (size_t k = 0; k < live[i].size; k += 97)
                if ((unsigned char)live[i].ptr[k] != live[i].tag) corrupt++;
            CHECK_OK(pw_pool_release(pool, live[i].ptr));
            expect_alloc -= rounded(live[i].size);
            live[i] = live[--n_live];
        }
        pw_pool_stats st;
        pw_pool_get_stats(pool, &st);
        if (st.allocated != expect_alloc || st.peak_allocated != expect_peak ||
            st.n_live_blocks != (size_t)n_live || st.allocated > st.reserved)
            stats_wrong++;
    }
    CHECK_EQ_INT(overlaps, 0);
    CHECK_EQ_INT(corrupt, 0);
    CHECK_EQ_INT(misaligned, 0);
    CHECK_EQ_INT(stats_wrong, 0);
    for (int i = 0; i < n_live; i++) CHECK_OK(pw_pool_release(pool, live[i].ptr));
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.allocated, 0);
    size_t released = 0;
    CHECK_OK(pw_pool_trim(pool, false, &released));
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.reserved, 0);
    CHECK(released > 0);
    pw_pool_free(pool);
}

static void test_best_fit_split_coalesce(void) {
    pw_pool *pool;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "fit", &pool));
    void *a, *b, *c, *d;
    CHECK_OK(pw_pool_alloc(pool, 1000, &a));
    CHECK_OK(pw_pool_alloc(pool, 5000, &b));
    CHECK_OK(pw_pool_alloc(pool, 1000, &c));
    CHECK_OK(pw_pool_alloc(pool, 300, &d));
    /* split: consecutive blocks in one segment */
    CHECK((char *)b == (char *)a + rounded(1000));
    CHECK_OK(pw_pool_release(pool, b));
    CHECK_OK(pw_pool_release(pool, d));
    /* best fit: a 4000-byte request reuses b's hole, not the large tail */
    void *e;
    CHECK_OK(pw_pool_alloc(pool, 4000, &e));
    CHECK(e == b);
    CHECK_OK(pw_pool_release(pool, e));
    /* coalescing: freeing a, b-hole and c merges into one block at a */
    CHECK_OK(pw_pool_release(pool, a));
    CHECK_OK(pw_pool_release(pool, c));
    void *f;
    CHECK_OK(pw_pool_alloc(pool, 7000, &f));
    CHECK(f == a);
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.n_segments, 1);
    CHECK_OK(pw_pool_release(pool, f));
    pw_pool_free(pool);
}

static void test_release_errors(void) {
    pw_pool *pool, *other;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "mine", &pool));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "other", &other));
    void *p;
    int x;
    CHECK_OK(pw_pool_alloc(pool, 10, &p));
    CHECK_ERR(pw_pool_release(other, p), PW_ERR_INVALID_ARG, "was not allocated from this pool");
    CHECK_ERR(pw_pool_release(pool, &x), PW_ERR_INVALID_ARG, "'mine'");
    CHECK_OK(pw_pool_release(pool, p));
    CHECK_ERR(pw_pool_release(pool, p), PW_ERR_INVALID_ARG, "not allocated");
    CHECK_OK(pw_pool_release(pool, NULL));
    CHECK_ERR(pw_pool_alloc(pool, (size_t)1 << 50, &p), PW_ERR_OOM, "too large");
    pw_pool_free(pool);
    pw_pool_free(other);
}

static void test_device_oom_injection(void) {
    pw_pool *pool;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "oom", &pool));
    void *p = NULL;
    pw_pool_fail_nth_device_alloc(1);
    CHECK_ERR(pw_pool_alloc(pool, 100, &p), PW_ERR_OOM, "out of cpu memory");
    CHECK(p == NULL);
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.reserved, 0);
    /* the pool stays usable */
    CHECK_OK(pw_pool_alloc(pool, 100, &p));
    CHECK_OK(pw_pool_release(pool, p));
    pw_pool_free(pool);
}

/* Host allocations (block headers, the address map) failing one at a time
 * inside pw_pool_alloc: each failure leaves the pool whole, so a trim can
 * still return every segment. */
static void test_host_oom_sweep(void) {
    for (int nth = 1; nth <= 6; nth++) {
        pw_pool *pool;
        CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "sweep", &pool));
        void *p = NULL;
        pw_host_fail_nth(nth);
        pw_status s = pw_pool_alloc(pool, 100, &p);
        pw_host_fail_nth(0);
        pw_pool_stats st;
        pw_pool_get_stats(pool, &st);
        if (s != PW_OK) {
            CHECK(s == PW_ERR_OOM);
            CHECK(p == NULL);
            CHECK_EQ_INT(st.allocated, 0);
        } else {
            CHECK_OK(pw_pool_release(pool, p));
        }
        size_t released = 0;
        CHECK_OK(pw_pool_trim(pool, false, &released));
        pw_pool_get_stats(pool, &st);
        CHECK_EQ_INT(st.reserved, 0);
        pw_pool_free(pool);
    }
}

static void noop_kernel(const void *a) { (void)a; }
static const pw_kernel k_noop = {"noop", noop_kernel, NULL, NULL};

static void test_trim_rules(void) {
    pw_pool *pool;
    pw_stream *s;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graphs", &pool));
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    void *p;
    CHECK_OK(pw_stream_begin_capture(s, pool));
    CHECK_OK(pw_pool_alloc(pool, 4096, &p));
    CHECK_OK(pw_launch(s, &k_noop, &p, sizeof p));
    CHECK_ERR(pw_pool_trim(pool, false, NULL), PW_ERR_CAPTURE, "trim during a capture");
    size_t released = 1;
    CHECK_OK(pw_pool_trim(pool, true, &released)); /* deferred */
    CHECK_EQ_INT(released, 0);
    CHECK_OK(pw_pool_release(pool, p)); /* freed during capture: back to this pool */
    pw_graph *g;
    CHECK_OK(pw_stream_end_capture(s, &g));
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    /* the deferred trim ran at end of capture but a graph now holds the pool */
    CHECK(st.reserved > 0);
    CHECK_EQ_INT(pw_pool_graph_refs(pool), 1);
    CHECK_OK(pw_pool_trim(pool, false, &released));
    CHECK_EQ_INT(released, 0);
    pw_graph_free(g);
    CHECK_EQ_INT(pw_pool_graph_refs(pool), 0);
    /* held trims are deferred until the last unhold */
    pw_pool_hold_trim(pool);
    CHECK_OK(pw_pool_trim(pool, false, &released));
    CHECK_EQ_INT(released, 0);
    pw_pool_get_stats(pool, &st);
    CHECK(st.reserved > 0);
    pw_pool_unhold_trim(pool);
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.reserved, 0);
    pw_stream_free(s);
    pw_pool_free(pool);
}

/* Captures of several sizes into one shared pool, largest first: each
 * capture's scratch is freed inside the capture, so smaller ones fit into
 * what the largest reserved. */
static void test_shared_pool_reuse(void) {
    pw_pool *pool;
    pw_stream *s;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "shared", &pool));
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    size_t sizes[] = {512 * 1024, 256 * 1024, 64 * 1024, 4096, 64};
    pw_graph *graphs[5];
    size_t largest_peak = 0;
    for (int i = 0; i < 5; i++) {
        CHECK_OK(pw_stream_begin_capture(s, pool));
        void *a, *b, *c;
        CHECK_OK(pw_pool_alloc(pool, sizes[i], &a));
        CHECK_OK(pw_pool_alloc(pool, sizes[i], &b));
        CHECK_OK(pw_launch(s, &k_noop, &a, sizeof a));
        CHECK_OK(pw_pool_release(pool, a));
        CHECK_OK(pw_pool_alloc(pool, sizes[i], &c));
        CHECK(c == a); /* freed during capture: reused within it */
        CHECK_OK(pw_pool_release(pool, b));
        CHECK_OK(pw_pool_release(pool, c));
        CHECK_OK(pw_stream_end_capture(s, &graphs[i]));
        pw_pool_stats st;
        pw_pool_get_stats(pool, &st);
        if (i == 0) largest_peak = st.peak_reserved;
        else CHECK_EQ_INT(st.peak_reserved, largest_peak);
    }
    for (int i = 0; i < 5; i++) pw_graph_free(graphs[i]);
    pw_stream_free(s);
    pw_pool_free(pool);
}

/* The pool consults mem's own record of the thread's capture: no stream
 * is involved (mem sits below the backend and never calls it). */
static void test_capture_record_without_stream(void) {
    pw_pool *gpool, *other;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graph", &gpool));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "other", &other));
    CHECK(pw_mem_capture_pool() == NULL);
    CHECK(pw_mem_capture_violation(NULL) == PW_OK);
    CHECK_ERR(pw_mem_capture_open(NULL), PW_ERR_INVALID_ARG, "pool is NULL");

    CHECK_OK(pw_mem_capture_open(gpool));
    CHECK(pw_mem_capture_pool() == gpool);
    CHECK(pw_capture_pool() == gpool); /* the public query reads the same record */
    CHECK_ERR(pw_mem_capture_open(other), PW_ERR_CAPTURE, "nested");
    void *p = NULL, *q = NULL;
    CHECK_OK(pw_pool_alloc(gpool, 100, &p));
    CHECK_ERR(pw_pool_alloc(other, 100, &q), PW_ERR_CAPTURE, "capture pool");
    CHECK(q == NULL);
    const char *msg = NULL;
    CHECK(pw_mem_capture_violation(&msg) == PW_ERR_CAPTURE);
    CHECK(msg && strstr(msg, "'other'") && strstr(msg, "'graph'"));
    /* the first violation wins */
    pw_error(PW_ERR_OOM, "a later failure");
    CHECK(pw_mem_capture_poison(PW_ERR_OOM) == PW_ERR_OOM);
    CHECK(pw_mem_capture_violation(&msg) == PW_ERR_CAPTURE && strstr(msg, "'other'"));
    /* the capture pool refuses an immediate trim while the record is open */
    CHECK_ERR(pw_pool_trim(gpool, false, NULL), PW_ERR_CAPTURE, "trim during a capture");
    CHECK_OK(pw_pool_trim(gpool, true, NULL)); /* deferred */
    CHECK_OK(pw_pool_release(gpool, p));
    /* freeing the capture pool while the capture is open is refused (the
     * pool stays valid), so the record never points at freed memory */
    pw_pool_free(gpool); /* logs the refusal */
    CHECK_OK(pw_pool_alloc(gpool, 100, &p));
    CHECK_OK(pw_pool_release(gpool, p));
    pw_mem_capture_close();
    pw_pool_stats st;
    pw_pool_get_stats(gpool, &st);
    CHECK_EQ_INT(st.reserved, 0); /* the deferred trim ran at close */
    CHECK(pw_mem_capture_pool() == NULL);
    CHECK(pw_mem_capture_violation(NULL) == PW_OK);
    pw_mem_capture_close(); /* closing twice is harmless */
    CHECK_OK(pw_pool_alloc(other, 100, &q));
    CHECK_OK(pw_pool_release(other, q));
    pw_pool_free(other);
    pw_pool_free(gpool);
}

int main(void) {
    test_random_against_model();
    test_best_fit_split_coalesce();
    test_release_errors();
    test_device_oom_injection();
    test_host_oom_sweep();
    test_trim_rules();
    test_shared_pool_reuse();
    test_capture_record_without_stream();
    return pw_test_finish("core_pool");
}
