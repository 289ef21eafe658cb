/* CPU stream: eager launch, capture, replay, frozen argument bytes, stable
 * addresses, and every illegal call during capture. */
#include "test_util.h"
#include "internal.h"

typedef struct scale_args {
    const float *x;
    float *y;
    float factor; /* by value: frozen at capture */
    int n;
} scale_args;

static void scale_kernel(const void *p) {
    const scale_args *a = p;
    for (int i = 0; i < a->n; i++) a->y[i] = a->x[i] * a->factor + 1.0f;
}
static const pw_kernel k_scale = {"scale", scale_kernel, NULL, NULL};

typedef struct sum_args {
    const float *x;
    float *out;
    int n;
} sum_args;

static void sum_kernel(const void *p) {
    const sum_args *a = p;
    float s = 0;
    for (int i = 0; i < a->n; i++) s += a->x[i];
    *a->out = s;
}
static const pw_kernel k_sum = {"sum", sum_kernel, NULL, NULL};

#define N 100

static pw_status forward(pw_stream *s, const float *x, float *tmp, float *out, float factor) {
    scale_args a = {x, tmp, factor, N};
    sum_args b = {tmp, out, N};
    pw_status st = pw_launch(s, &k_scale, &a, sizeof a);
    if (st == PW_OK) st = pw_launch(s, &k_sum, &b, sizeof b);
    return st;
}

static void test_replay_equals_eager(void) {
    pw_stream *s;
    pw_pool *pool, *gpool;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "inputs", &pool));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graph", &gpool));
    float *x, *tmp, *out;
    CHECK_OK(pw_pool_alloc(pool, N * sizeof(float), (void **)&x));
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.37f;

    float factor = 3.0f;
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK(pw_stream_is_capturing(s));
    CHECK(pw_capturing_stream() == s);
    CHECK(pw_capture_pool() == gpool);
    CHECK_OK(pw_pool_alloc(gpool, N * sizeof(float), (void **)&tmp));
    CHECK_OK(pw_pool_alloc(gpool, sizeof(float), (void **)&out));
    *out = -1.0f;
    CHECK_OK(forward(s, x, tmp, out, factor));
    CHECK(*out == -1.0f); /* recorded, not run */
    pw_graph *g;
    CHECK_OK(pw_stream_end_capture(s, &g));
    CHECK(!pw_stream_is_capturing(s));
    CHECK(pw_capturing_stream() == NULL);
    CHECK_EQ_INT(pw_graph_num_launches(g), 2);

    /* the host variable changes after capture; the replay keeps 3.0 */
    factor = 100.0f;
    float eager_out, eager_tmp[N];
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < N; i++) x[i] = (float)(i * (step + 1)) * 0.11f;
        CHECK_OK(pw_graph_replay(g, s));
        CHECK_OK(forward(s, x, eager_tmp, &eager_out, 3.0f));
        CHECK(memcmp(&eager_out, out, sizeof eager_out) == 0);
        CHECK(memcmp(eager_tmp, tmp, sizeof eager_tmp) == 0);
    }
    /* launches expose the recorded bytes for verification */
    const pw_kernel *k;
    const void *args;
    size_t nb;
    CHECK_OK(pw_graph_launch_at(g, 0, &k, &args, &nb));
    CHECK(k == &k_scale);
    CHECK_EQ_INT(nb, sizeof(scale_args));
    CHECK(((const scale_args *)args)->factor == 3.0f);
    CHECK(((const scale_args *)args)->y == tmp); /* addresses are stable */
    CHECK_ERR(pw_graph_launch_at(g, 2, &k, &args, &nb), PW_ERR_INVALID_ARG, "has 2 launches");
    (void)factor;

    pw_graph_free(g);
    CHECK_OK(pw_pool_release(gpool, tmp));
    CHECK_OK(pw_pool_release(gpool, out));
    CHECK_OK(pw_pool_release(pool, x));
    pw_pool_free(gpool);
    pw_pool_free(pool);
    pw_stream_free(s);
}

static void test_capture_errors(void) {
    pw_stream *s, *s2;
    pw_pool *pool, *gpool;
    pw_graph *g = NULL;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s2));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "eager", &pool));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graph", &gpool));
    float buf[N];
    scale_args a = {buf, buf, 1, N};

    /* host synchronization during capture */
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK_OK(pw_launch(s, &k_scale, &a, sizeof a));
    CHECK_ERR(pw_stream_synchronize(s), PW_ERR_CAPTURE, "pw_stream_synchronize");
    CHECK_ERR(pw_stream_end_capture(s, &g), PW_ERR_CAPTURE, "capture abandoned");
    CHECK(g == NULL);
    CHECK(!pw_stream_is_capturing(s));
    CHECK_EQ_INT(pw_pool_graph_refs(gpool), 0);

    /* allocation from a pool other than the capture pool */
    void *p = NULL;
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK_ERR(pw_pool_alloc(pool, 64, &p), PW_ERR_CAPTURE, "allocation from pool 'eager'");
    CHECK(p == NULL);
    CHECK_ERR(pw_stream_end_capture(s, &g), PW_ERR_CAPTURE, "capture into pool 'graph'");
    CHECK(g == NULL);

    /* nested capture, on the same stream or another one on this thread */
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK_ERR(pw_stream_begin_capture(s, gpool), PW_ERR_CAPTURE, "nested");
    CHECK_ERR(pw_stream_begin_capture(s2, gpool), PW_ERR_CAPTURE, "already open");
    pw_stream_abort_capture(s);
    CHECK(!pw_stream_is_capturing(s));

    /* misuse */
    CHECK_ERR(pw_stream_end_capture(s, &g), PW_ERR_CAPTURE, "no capture is open");
    CHECK_ERR(pw_stream_begin_capture(s, NULL), PW_ERR_INVALID_ARG, "pool is NULL");
    static const pw_kernel no_cpu = {"gpu_only", NULL, NULL, NULL};
    CHECK_ERR(pw_launch(s, &no_cpu, &a, sizeof a), PW_ERR_INVALID_ARG, "gpu_only");
    char big[PW_MAX_KERNEL_ARG_BYTES + 1];
    CHECK_ERR(pw_launch(s, &k_scale, big, sizeof big), PW_ERR_INVALID_ARG, "argument bytes");
    pw_stream *cuda = NULL;
    if (!pw_cuda_available()) {
        /* no backend in this build (UNSUPPORTED), or one without a device (CUDA) */
        pw_status st = pw_stream_new(PW_DEVICE_CUDA, &cuda);
        CHECK(st == PW_ERR_UNSUPPORTED || st == PW_ERR_CUDA);
        CHECK(cuda == NULL && (strstr(pw_last_error(), "CUDA") || strstr(pw_last_error(), "cuda")));
    }

    /* after all that, a clean capture still works */
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK_OK(pw_launch(s, &k_scale, &a, sizeof a));
    CHECK_OK(pw_stream_end_capture(s, &g));
    CHECK(g != NULL);
    pw_graph_free(g);
    /* freeing a stream with an open capture abandons it */
    CHECK_OK(pw_stream_begin_capture(s2, gpool));
    pw_stream_free(s2);
    CHECK(pw_capturing_stream() == NULL);

    pw_pool_free(gpool);
    pw_pool_free(pool);
    pw_stream_free(s);
}

/* Out-of-memory while recording: the capture fails cleanly. */
static void test_capture_oom(void) {
    pw_stream *s;
    pw_pool *gpool;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graph", &gpool));
    float buf[N];
    scale_args a = {buf, buf, 1, N};
    for (int nth = 1; nth <= 4; nth++) {
        pw_graph *g = NULL;
        CHECK_OK(pw_stream_begin_capture(s, gpool));
        pw_host_fail_nth(nth);
        pw_status st = PW_OK;
        for (int i = 0; i < 100 && st == PW_OK; i++) st = pw_launch(s, &k_scale, &a, sizeof a);
        pw_host_fail_nth(0);
        CHECK(st == PW_ERR_OOM);
        CHECK_ERR(pw_stream_end_capture(s, &g), PW_ERR_OOM, "out of host memory");
        CHECK(g == NULL);
    }
    pw_pool_free(gpool);
    pw_stream_free(s);
}

/* A graph replayed during another capture is recorded into it. */
static void test_replay_inside_capture(void) {
    pw_stream *s;
    pw_pool *gpool;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graph", &gpool));
    float x[N], tmp[N], out = 0;
    for (int i = 0; i < N; i++) x[i] = 1.0f;
    pw_graph *inner, *outer;
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK_OK(forward(s, x, tmp, &out, 2.0f));
    CHECK_OK(pw_stream_end_capture(s, &inner));
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK_OK(pw_graph_replay(inner, s));
    CHECK(out == 0.0f); /* recorded, not run */
    CHECK_OK(pw_stream_end_capture(s, &outer));
    CHECK_EQ_INT(pw_graph_num_launches(outer), 2);
    CHECK_OK(pw_graph_replay(outer, s));
    CHECK(out == 3.0f * N);
    pw_graph_free(outer);
    pw_graph_free(inner);
    pw_pool_free(gpool);
    pw_stream_free(s);
}

/* Copies and memset on a CPU stream: eager they run at once; captured they
 * are recorded like launches and redone by every replay. */
static void test_copies(void) {
    pw_stream *s;
    pw_pool *gpool;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graph", &gpool));
    pw_device_caps caps;
    CHECK_OK(pw_device_get_caps(PW_DEVICE_CPU, &caps));
    CHECK(caps.graphs && !caps.graph_update && !caps.async_copy && !caps.needs_warmup);
    const char *why = "unset";
    CHECK(pw_device_available(PW_DEVICE_CPU, &why) && why[0] == '\0');
    CHECK_ERR(pw_device_get_caps(PW_DEVICE_CPU, NULL), PW_ERR_INVALID_ARG, "NULL");
    CHECK_ERR(pw_device_get_caps((pw_device)7, &caps), PW_ERR_INVALID_ARG, "unknown device");
    CHECK(!pw_device_available((pw_device)7, &why) && strstr(why, "unknown device"));
    CHECK(pw_device_available(PW_DEVICE_CPU, NULL));
    if (!pw_device_available(PW_DEVICE_CUDA, &why)) {
        /* no backend in this build, or no GPU: the reason is passed on */
        CHECK(why[0] != '\0');
        CHECK_ERR(pw_device_get_caps(PW_DEVICE_CUDA, &caps), PW_ERR_UNSUPPORTED, "device cuda: ");
        CHECK(strstr(pw_last_error(), why) != NULL);
    }

    int32_t host[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8] = {0};
    int32_t *dev = NULL, *dev2 = NULL;
    CHECK_OK(pw_pool_alloc(gpool, sizeof host, (void **)&dev));
    CHECK_OK(pw_pool_alloc(gpool, sizeof host, (void **)&dev2));
    /* eager */
    CHECK_OK(pw_stream_copy_h2d(s, dev, host, sizeof host));
    CHECK_OK(pw_stream_copy_d2d(s, dev2, dev, sizeof host));
    CHECK_OK(pw_stream_memset(s, dev2, 0, 2 * sizeof(int32_t)));
    CHECK_OK(pw_stream_copy_d2h(s, back, dev2, sizeof back));
    CHECK_OK(pw_stream_synchronize(s));
    CHECK(back[0] == 0 && back[1] == 0 && back[2] == 3 && back[7] == 8);
    CHECK_OK(pw_stream_memset(s, back, 0xff, sizeof back));
    CHECK(back[3] == -1);

    /* captured: nothing runs until replay, then each replay redoes it */
    pw_graph *g = NULL;
    memset(back, 0, sizeof back);
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK_OK(pw_stream_copy_h2d(s, dev, host, sizeof host));
    CHECK_OK(pw_stream_copy_d2d(s, dev2, dev, sizeof host));
    CHECK_OK(pw_stream_memset(s, dev2, 0, sizeof(int32_t)));
    CHECK_OK(pw_stream_copy_d2h(s, back, dev2, sizeof back));
    CHECK_OK(pw_stream_copy_d2h(s, back, dev2, 0)); /* empty: not recorded */
    CHECK_OK(pw_stream_end_capture(s, &g));
    CHECK(back[7] == 0);
    CHECK_EQ_INT(pw_graph_num_launches(g), 4);
    const pw_kernel *k;
    const void *args;
    size_t ab;
    CHECK_OK(pw_graph_launch_at(g, 0, &k, &args, &ab));
    CHECK_STREQ(k->name, "copy_h2d");
    CHECK_OK(pw_graph_launch_at(g, 2, &k, &args, &ab));
    CHECK_STREQ(k->name, "memset");
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 8; i++) host[i] = 10 * (round + 1) + i;
        CHECK_OK(pw_graph_replay(g, s));
        CHECK(back[0] == 0 && back[1] == 10 * (round + 1) + 1 && back[7] == 10 * (round + 1) + 7);
    }
    pw_graph_free(g);

    /* errors: clear message, nothing done */
    CHECK_ERR(pw_stream_copy_h2d(NULL, dev, host, 4), PW_ERR_INVALID_ARG, "stream is NULL");
    CHECK_ERR(pw_stream_copy_h2d(s, NULL, host, 4), PW_ERR_INVALID_ARG, "destination pointer is NULL");
    CHECK_ERR(pw_stream_copy_d2h(s, back, NULL, 4), PW_ERR_INVALID_ARG, "source pointer is NULL");
    CHECK_ERR(pw_stream_copy_d2d(s, dev + 1, dev, 8), PW_ERR_INVALID_ARG, "overlap");
    CHECK_ERR(pw_stream_copy_d2d(s, dev, (const void *)(uintptr_t)(UINTPTR_MAX - 2), 8), PW_ERR_INVALID_ARG,
              "address space");
    CHECK_ERR(pw_stream_memset(s, NULL, 0, 4), PW_ERR_INVALID_ARG, "destination is NULL");
    CHECK_ERR(pw_stream_memset(s, dev, 256, 4), PW_ERR_INVALID_ARG, "not a byte");
    CHECK_ERR(pw_stream_memset(s, (void *)(uintptr_t)(UINTPTR_MAX - 2), 0, 8),
              PW_ERR_INVALID_ARG, "address space");
    CHECK_ERR(pw_stream_memset(NULL, dev, 0, 4), PW_ERR_INVALID_ARG, "stream is NULL");
    CHECK_OK(pw_stream_copy_h2d(s, NULL, NULL, 0)); /* zero bytes: nothing to check */
    /* a failed copy during a capture does not record and does not poison */
    CHECK_OK(pw_stream_begin_capture(s, gpool));
    CHECK_ERR(pw_stream_copy_d2d(s, dev + 1, dev, 8), PW_ERR_INVALID_ARG, "overlap");
    CHECK_OK(pw_stream_end_capture(s, &g));
    CHECK_EQ_INT(pw_graph_num_launches(g), 0);
    pw_graph_free(g);

    CHECK_OK(pw_pool_release(gpool, dev));
    CHECK_OK(pw_pool_release(gpool, dev2));
    pw_pool_free(gpool);
    pw_stream_free(s);
}

int main(void) {
    test_replay_inside_capture();
    test_replay_equals_eager();
    test_capture_errors();
    test_capture_oom();
    test_copies();
    return pw_test_finish("core_stream");
}
