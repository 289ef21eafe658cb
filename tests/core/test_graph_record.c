/* What relocation (runtime/relocate.c) needs from the layers below it:
 *  - the open recording of a CPU capture can be read launch by launch and
 *    rewound (backend/graph_record.h), with clear errors outside a capture
 *    or out of range, and a range of launches of an open recording or of a
 *    finished graph copied by one function;
 *  - a pool observer sees exactly its pool's allocations and releases
 *    (mem/pool_internal.h);
 *  - the pool's choice among equal free blocks is the lowest address
 *    whatever order they were freed in, so repeating a sequence of
 *    allocations from the same free blocks gives the same blocks. */
#include "test_util.h"
#include "internal.h"

#include "backend/graph_record.h"
#include "mem/pool_internal.h"

typedef struct add_args {
    float *x;
    float v;
} add_args;

static void add_kernel(const void *p) {
    const add_args *a = p;
    *a->x += a->v;
}
static const pw_kernel k_add = {"add", add_kernel, NULL, NULL};

static void test_recording(void) {
    pw_stream *s = NULL;
    pw_pool *pool = NULL;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graphs", &pool));
    const pw_kernel *k;
    const void *args;
    size_t nb;
    CHECK_EQ_INT((int64_t)pw_stream_capture_num_launches(s), 0);
    CHECK_ERR(pw_stream_capture_launch_at(s, 0, &k, &args, &nb), PW_ERR_CAPTURE,
              "no capture is open on this stream");
    CHECK_ERR(pw_stream_capture_rewind(s, 0), PW_ERR_CAPTURE, "no capture is open");

    float x = 0;
    CHECK_OK(pw_stream_begin_capture(s, pool));
    for (int i = 1; i <= 3; i++) {
        add_args a = {&x, (float)i};
        CHECK_OK(pw_launch(s, &k_add, &a, sizeof a));
    }
    CHECK_EQ_INT((int64_t)pw_stream_capture_num_launches(s), 3);
    CHECK_OK(pw_stream_capture_launch_at(s, 1, &k, &args, &nb));
    CHECK(k == &k_add);
    CHECK_EQ_INT((int64_t)nb, (int64_t)sizeof(add_args));
    CHECK(args && ((const add_args *)args)->v == 2.0f && ((const add_args *)args)->x == &x);
    CHECK_ERR(pw_stream_capture_launch_at(s, 3, &k, &args, &nb), PW_ERR_INVALID_ARG,
              "the open capture has 3 launches, asked for #3");
    CHECK_ERR(pw_stream_capture_rewind(s, 4), PW_ERR_INVALID_ARG,
              "the open capture has 3 launches, cannot rewind to 4");
    /* forget the last two, record another: the graph is add 1, add 10 */
    CHECK_OK(pw_stream_capture_rewind(s, 1));
    CHECK_EQ_INT((int64_t)pw_stream_capture_num_launches(s), 1);
    add_args ten = {&x, 10.0f};
    CHECK_OK(pw_launch(s, &k_add, &ten, sizeof ten));
    CHECK_OK(pw_stream_capture_launch_at(s, 1, &k, &args, &nb));
    CHECK(((const add_args *)args)->v == 10.0f);
    /* launches [1, 2) of the open recording */
    pw_launch_copy copy;
    CHECK_OK(pw_launch_copy_take(NULL, s, 1, 2, &copy));
    CHECK_EQ_INT((int64_t)copy.n, 1);
    if (copy.n == 1) {
        CHECK(copy.kernels[0] == &k_add);
        CHECK_EQ_INT((int64_t)copy.offsets[1], (int64_t)sizeof(add_args));
        CHECK(((const add_args *)copy.bytes)->v == 10.0f);
    }
    pw_launch_copy_free(&copy);
    CHECK(copy.kernels == NULL && copy.n == 0);
    CHECK_ERR(pw_launch_copy_take(NULL, s, 1, 3, &copy), PW_ERR_INVALID_ARG,
              "copy of launches [1, 3) of a recording of 2");
    pw_graph *g = NULL;
    CHECK_OK(pw_stream_end_capture(s, &g));
    CHECK_EQ_INT((int64_t)pw_stream_capture_num_launches(s), 0);
    if (g) {
        CHECK_EQ_INT((int64_t)pw_graph_num_launches(g), 2);
        /* the whole finished graph */
        CHECK_OK(pw_launch_copy_take(g, NULL, 0, 2, &copy));
        CHECK_EQ_INT((int64_t)copy.n, 2);
        if (copy.n == 2) {
            CHECK(((const add_args *)(copy.bytes + copy.offsets[0]))->v == 1.0f);
            CHECK(((const add_args *)(copy.bytes + copy.offsets[1]))->v == 10.0f);
        }
        pw_launch_copy_free(&copy);
        CHECK_OK(pw_graph_replay(g, s));
        CHECK(x == 11.0f);
        pw_graph_free(g);
    }
    pw_pool_free(pool);
    pw_stream_free(s);
}

typedef struct seen {
    int allocs, releases;
    void *last;
    size_t last_bytes;
} seen;

static void count(void *user, bool alloc, size_t bytes, void *ptr) {
    seen *s = user;
    if (alloc) {
        s->allocs++;
        s->last_bytes = bytes;
    } else {
        s->releases++;
    }
    s->last = ptr;
}

static void test_observer(void) {
    pw_pool *a = NULL, *b = NULL;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "a", &a));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "b", &b));
    seen s = {0};
    pw_pool_observe(a, count, &s);
    void *p = NULL, *q = NULL;
    CHECK_OK(pw_pool_alloc(a, 100, &p));
    CHECK_OK(pw_pool_alloc(b, 100, &q)); /* another pool: not seen */
    CHECK_EQ_INT(s.allocs, 1);
    CHECK(s.last == p && s.last_bytes == 100);
    CHECK_OK(pw_pool_release(a, p));
    CHECK_OK(pw_pool_release(b, q));
    CHECK_EQ_INT(s.releases, 1);
    CHECK(s.last == p);
    CHECK_ERR(pw_pool_release(a, (char *)p + 1), PW_ERR_INVALID_ARG, "was not allocated");
    CHECK_EQ_INT(s.releases, 1); /* a refused release is not an event */
    pw_pool_observe(a, NULL, NULL);
    CHECK_OK(pw_pool_alloc(a, 100, &p));
    CHECK_EQ_INT(s.allocs, 1);
    CHECK_OK(pw_pool_release(a, p));
    pw_pool_free(a);
    pw_pool_free(b);
}

static void test_equal_blocks_lowest_first(void) {
    for (int order = 0; order < 2; order++) {
        pw_pool *pool = NULL;
        CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "p", &pool));
        void *blk[4] = {0};
        for (int i = 0; i < 4; i++) CHECK_OK(pw_pool_alloc(pool, 4096, &blk[i]));
        /* free blocks 0 and 2 (their neighbours stay allocated), in either order */
        CHECK_OK(pw_pool_release(pool, blk[order ? 2 : 0]));
        CHECK_OK(pw_pool_release(pool, blk[order ? 0 : 2]));
        void *p = NULL;
        CHECK_OK(pw_pool_alloc(pool, 4096, &p));
        CHECK(p == blk[0] && p < blk[2]);
        CHECK_OK(pw_pool_release(pool, p));
        for (int i = 1; i < 4; i += 2) CHECK_OK(pw_pool_release(pool, blk[i]));
        pw_pool_free(pool);
    }
}

int main(void) {
    test_recording();
    test_observer();
    test_equal_blocks_lowest_first();
    return pw_test_finish("core_graph_record");
}
