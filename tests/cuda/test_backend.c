/* CUDA streams, pools and graphs: what runs without a GPU (the build, the
 * error paths of a missing device) and, with one, eager launches, capture,
 * replay, in-place update, capture errors and node comparison. */
#include "cuda_test_util.h"

#if !PW_HAVE_CUDA
int main(void) { pw_test_skip("built without the CUDA backend: skipping"); }
#else

#include "ops/cpu/kernels.h"
#include "backend/stream_backend.h"
#include "backend/cuda/cuda_internal.h"

#define N_ELEMS 1000

/* Without a device every entry point says so instead of crashing, and
 * says what the runtime answered: a driver older than the runtime is not a
 * machine without a GPU. */
static void test_no_device_errors(void) {
    pw_stream *s = NULL;
    CHECK_ERR(pw_stream_new(PW_DEVICE_CUDA, &s), PW_ERR_CUDA, "cudaGetDeviceCount");
    CHECK(s == NULL);
    pw_pool *pool = NULL;
    CHECK_OK(pw_pool_new(PW_DEVICE_CUDA, "dev", &pool));
    void *p = NULL;
    CHECK(pw_pool_alloc(pool, 256, &p) != PW_OK);
    CHECK(p == NULL);
    pw_pool_free(pool);
    void *h = NULL;
    CHECK_ERR(pw_cuda_host_alloc(64, &h), PW_ERR_CUDA, "cudaGetDeviceCount");
    CHECK_ERR(pw_stream_copy_h2d(NULL, NULL, NULL, 0), PW_ERR_INVALID_ARG, "stream is NULL");
    pw_device_caps caps;
    const char *why = NULL;
    CHECK(!pw_device_available(PW_DEVICE_CUDA, &why));
    CHECK(why && strstr(why, "cudaGetDeviceCount"));
    CHECK_ERR(pw_device_get_caps(PW_DEVICE_CUDA, &caps), PW_ERR_UNSUPPORTED, "cudaGetDeviceCount");
    CHECK(strstr(pw_cuda_unavailable_reason(), "cudaGetDeviceCount"));
}

/* A failed runtime call leaves no error behind for the next launch's
 * cudaGetLastError to blame on an unrelated kernel. Needs a runtime that
 * initialized (a device and a recent enough driver): without one, every
 * call, cudaGetLastError included, keeps returning the init error. */
static void test_check_clears_error(void) {
    cudaError_t err = cudaSetDevice(1 << 20);
    CHECK(err != cudaSuccess);
    CHECK_ERR(pw_cuda_check(err, "cudaSetDevice"), PW_ERR_CUDA, "cudaSetDevice failed");
    CHECK(cudaPeekAtLastError() == cudaSuccess);
}

/* The upload helper with no host data gives a zeroed output buffer (it
 * used to hand the NULL to the copy, which refuses it). Shown on the
 * emulated device, which needs no GPU. */
static void test_upload_output_buffer(void) {
    pw_stream *s = NULL;
    pw_pool *pool = NULL;
    CHECK_OK(pw_stream_new(PW_DEVICE_EMU, &s));
    CHECK_OK(pw_pool_new(PW_DEVICE_EMU, "out", &pool));
    float *d = ct_upload(s, pool, NULL, 16 * sizeof(float));
    float back[16];
    memset(back, 0xff, sizeof back);
    ct_download(s, back, d, sizeof back);
    for (int i = 0; i < 16; i++) CHECK(back[i] == 0.0f);
    CHECK_OK(pw_pool_release(pool, d));
    pw_pool_free(pool);
    pw_stream_free(s);
}

typedef struct gpu {
    pw_stream *s;
    pw_pool *pool, *gpool;
} gpu;

static void gpu_open(gpu *g) {
    CHECK_OK(pw_stream_new(PW_DEVICE_CUDA, &g->s));
    CHECK_OK(pw_pool_new(PW_DEVICE_CUDA, "act", &g->pool));
    CHECK_OK(pw_pool_new(PW_DEVICE_CUDA, "graphs", &g->gpool));
}

static void gpu_close(gpu *g) {
    CHECK_OK(pw_stream_synchronize(g->s));
    pw_pool_free(g->gpool);
    pw_pool_free(g->pool);
    pw_stream_free(g->s);
}

static void fill(float *p, size_t n, float base) {
    for (size_t i = 0; i < n; i++) p[i] = base + (float)(i % 17) * 0.25f;
}

/* Eager add, then a captured add replayed after the inputs changed. */
static void test_eager_and_replay(void) {
    gpu g;
    gpu_open(&g);
    float a[N_ELEMS], b[N_ELEMS], out[N_ELEMS];
    fill(a, N_ELEMS, 1.0f);
    fill(b, N_ELEMS, -3.0f);
    float *da = ct_upload(g.s, g.pool, a, sizeof a), *db = ct_upload(g.s, g.pool, b, sizeof b);
    float *dout = ct_upload(g.s, g.pool, NULL, sizeof out);
    pw_k_add_args args = {dout, da, db, N_ELEMS};
    CHECK_OK(pw_launch(g.s, ct_kernel(PW_KERNEL_ADD), &args, sizeof args));
    ct_download(g.s, out, dout, sizeof out);
    int bad = 0;
    for (int i = 0; i < N_ELEMS; i++) bad += out[i] != a[i] + b[i];
    CHECK_EQ_INT(bad, 0);

    pw_graph *graph = NULL;
    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    CHECK_OK(pw_launch(g.s, ct_kernel(PW_KERNEL_ADD), &args, sizeof args));
    CHECK_OK(pw_launch(g.s, ct_kernel(PW_KERNEL_SILU_MUL), &(pw_k_silu_args){dout, dout, db, 1, N_ELEMS},
                       sizeof(pw_k_silu_args)));
    CHECK_OK(pw_stream_end_capture(g.s, &graph));
    CHECK_EQ_INT((int)pw_graph_num_launches(graph), 2);
    size_t nodes = 0;
    CHECK_OK(pw_cuda_graph_num_nodes(graph, &nodes));
    CHECK_EQ_INT((int)nodes, 2);
    fill(a, N_ELEMS, 5.0f); /* new per-step values in the persistent input */
    CHECK_OK(pw_stream_copy_h2d(g.s, da, a, sizeof a));
    CHECK_OK(pw_graph_replay(graph, g.s));
    ct_download(g.s, out, dout, sizeof out);
    float expect[N_ELEMS], sum[N_ELEMS];
    for (int i = 0; i < N_ELEMS; i++) sum[i] = a[i] + b[i];
    pw_k_silu_mul(expect, sum, b, N_ELEMS);
    CHECK(ct_max_abs_diff(out, expect, N_ELEMS) < 1e-5f);
    pw_cuda_stats st;
    pw_cuda_get_stats(&st);
    CHECK(st.graph_replays >= 1 && st.graphs_live >= 1);
    pw_graph_free(graph);
    gpu_close(&g);
}

/* The errors of the CPU stream hold on CUDA too, and clean up. */
static void test_capture_errors(void) {
    gpu g;
    gpu_open(&g);
    pw_graph *graph = NULL;
    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    CHECK_ERR(pw_stream_begin_capture(g.s, g.gpool), PW_ERR_CAPTURE, "nested");
    CHECK_ERR(pw_stream_synchronize(g.s), PW_ERR_CAPTURE, "during a capture");
    CHECK_ERR(pw_stream_end_capture(g.s, &graph), PW_ERR_CAPTURE, "synchronize");
    CHECK(graph == NULL && !pw_stream_is_capturing(g.s));

    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    void *p = NULL;
    CHECK_ERR(pw_pool_alloc(g.pool, 256, &p), PW_ERR_CAPTURE, "capture pool");
    /* pageable host memory cannot be captured: refused, and it poisons too */
    float pageable[4] = {0};
    void *dev = NULL;
    CHECK_OK(pw_pool_alloc(g.gpool, sizeof pageable, &dev));
    CHECK_ERR(pw_stream_copy_h2d(g.s, dev, pageable, sizeof pageable), PW_ERR_CAPTURE, "pageable");
    CHECK_ERR(pw_stream_end_capture(g.s, &graph), PW_ERR_CAPTURE, "pool");

    pw_kernel nameless = {"no_such_kernel", NULL, NULL, NULL};
    CHECK_ERR(pw_launch(g.s, &nameless, NULL, 0), PW_ERR_UNSUPPORTED, "no CUDA implementation");
    /* Kernels are bound by pointer: the CPU "add" is not found by its name. */
    CHECK_ERR(pw_launch(g.s, &pw_kernel_add, NULL, 0), PW_ERR_UNSUPPORTED,
              "kernel 'add' has no CUDA implementation");

    /* The stream is usable again after the failed captures. */
    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    CHECK_OK(pw_stream_end_capture(g.s, &graph));
    CHECK(graph != NULL);
    pw_stream *cpu = NULL;
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &cpu));
    CHECK_ERR(pw_graph_replay(graph, cpu), PW_ERR_INVALID_ARG, "different devices");
    pw_stream_free(cpu);
    pw_graph_free(graph);
    gpu_close(&g);
}

/* Re-capturing with other pointers updates the executable graph in place;
 * comparing two captures finds the changed parameter. */
static void test_update_and_compare(void) {
    gpu g;
    gpu_open(&g);
    float a[N_ELEMS], out[N_ELEMS];
    fill(a, N_ELEMS, 2.0f);
    float *da = ct_upload(g.s, g.pool, a, sizeof a);
    float *d1 = ct_upload(g.s, g.pool, NULL, sizeof a), *d2 = ct_upload(g.s, g.pool, NULL, sizeof a);
    pw_k_add_args to1 = {d1, da, da, N_ELEMS}, to2 = {d2, da, da, N_ELEMS};
    pw_graph *g1 = NULL, *g1b = NULL, *g2 = NULL;
    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    CHECK_OK(pw_launch(g.s, ct_kernel(PW_KERNEL_ADD), &to1, sizeof to1));
    CHECK_OK(pw_stream_end_capture(g.s, &g1));
    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    CHECK_OK(pw_launch(g.s, ct_kernel(PW_KERNEL_ADD), &to1, sizeof to1));
    CHECK_OK(pw_stream_end_capture(g.s, &g1b));
    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    CHECK_OK(pw_launch(g.s, ct_kernel(PW_KERNEL_ADD), &to2, sizeof to2));
    CHECK_OK(pw_stream_end_capture(g.s, &g2));
    bool same = false;
    char diff[256];
    CHECK_OK(pw_cuda_graph_compare(g1, g1b, &same, diff, sizeof diff));
    CHECK(same);
    CHECK_OK(pw_cuda_graph_compare(g1, g2, &same, diff, sizeof diff));
    CHECK(!same && strstr(diff, "parameter 0") != NULL);

    pw_cuda_stats before, after;
    pw_cuda_get_stats(&before);
    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    CHECK_OK(pw_launch(g.s, ct_kernel(PW_KERNEL_ADD), &to2, sizeof to2));
    CHECK_OK(pw_stream_end_capture_update(g.s, g1));
    pw_cuda_get_stats(&after);
    CHECK(after.graphs_updated == before.graphs_updated + 1);
    CHECK_OK(pw_graph_replay(g1, g.s));
    ct_download(g.s, out, d2, sizeof out);
    int bad = 0;
    for (int i = 0; i < N_ELEMS; i++) bad += out[i] != a[i] + a[i];
    CHECK_EQ_INT(bad, 0);
    CHECK_OK(pw_cuda_graph_compare(g1, g2, &same, diff, sizeof diff));
    CHECK(same);
    pw_graph_free(g1);
    pw_graph_free(g1b);
    pw_graph_free(g2);
    gpu_close(&g);
}

/* Copies and memset: eager, and captured into a graph whose replay redoes
 * them with the new contents of the (pinned) host buffers. */
static void test_copies(void) {
    gpu g;
    gpu_open(&g);
    pw_device_caps caps;
    CHECK_OK(pw_device_get_caps(PW_DEVICE_CUDA, &caps));
    CHECK(caps.graphs && caps.graph_update && caps.async_copy && caps.needs_warmup);
    enum { n = 256 };
    float *in = NULL, *out = NULL;
    CHECK_OK(pw_cuda_host_alloc(n * sizeof(float), (void **)&in));
    CHECK_OK(pw_cuda_host_alloc(n * sizeof(float), (void **)&out));
    void *da = NULL, *db = NULL;
    CHECK_OK(pw_pool_alloc(g.pool, n * sizeof(float), &da));
    CHECK_OK(pw_pool_alloc(g.pool, n * sizeof(float), &db));
    for (int i = 0; i < n; i++) in[i] = (float)i;
    CHECK_OK(pw_stream_copy_h2d(g.s, da, in, n * sizeof(float)));
    CHECK_OK(pw_stream_copy_d2d(g.s, db, da, n * sizeof(float)));
    CHECK_OK(pw_stream_memset(g.s, db, 0, 16));
    CHECK_OK(pw_stream_copy_d2h(g.s, out, db, n * sizeof(float)));
    CHECK_OK(pw_stream_synchronize(g.s));
    CHECK(out[0] == 0.0f && out[3] == 0.0f && out[4] == 4.0f && out[n - 1] == (float)(n - 1));
    /* wrong sides */
    float pageable[4] = {0};
    CHECK_ERR(pw_stream_copy_h2d(g.s, pageable, in, sizeof pageable), PW_ERR_INVALID_ARG,
              "not CUDA device memory");
    CHECK_ERR(pw_stream_copy_d2h(g.s, da, db, 16), PW_ERR_INVALID_ARG, "not host memory");
    CHECK_ERR(pw_stream_memset(g.s, pageable, 0, 16), PW_ERR_INVALID_ARG, "not CUDA device");

    pw_graph *graph = NULL;
    CHECK_OK(pw_stream_begin_capture(g.s, g.gpool));
    CHECK_OK(pw_stream_copy_h2d(g.s, da, in, n * sizeof(float)));
    CHECK_OK(pw_stream_copy_d2d(g.s, db, da, n * sizeof(float)));
    CHECK_OK(pw_stream_memset(g.s, db, 0, 16));
    CHECK_OK(pw_stream_copy_d2h(g.s, out, db, n * sizeof(float)));
    CHECK_OK(pw_stream_end_capture(g.s, &graph));
    CHECK_EQ_INT((int)pw_graph_num_launches(graph), 4);
    size_t nodes = 0;
    CHECK_OK(pw_cuda_graph_num_nodes(graph, &nodes));
    CHECK_EQ_INT((int)nodes, 4);
    for (int i = 0; i < n; i++) in[i] = (float)(2 * i + 1);
    memset(out, 0xff, n * sizeof(float));
    CHECK_OK(pw_graph_replay(graph, g.s));
    CHECK_OK(pw_stream_synchronize(g.s));
    CHECK(out[0] == 0.0f && out[4] == 9.0f && out[n - 1] == (float)(2 * n - 1));
    pw_graph_free(graph);
    pw_cuda_host_free(in);
    pw_cuda_host_free(out);
    gpu_close(&g);
}

int main(void) {
    /* no pw_cuda_init(): the backend registry registers CUDA by itself */
    test_upload_output_buffer();
    if (!pw_cuda_available()) {
        test_no_device_errors();
        if (pw_test_finish("cuda_backend (no device)") != 0) return 1;
        pw_test_skip(pw_cuda_unavailable_reason());
    }
    test_check_clears_error();
    test_eager_and_replay();
    test_capture_errors();
    test_update_and_compare();
    test_copies();
    return pw_test_finish("cuda_backend");
}
#endif
