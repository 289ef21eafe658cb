/* CUDA backend: device memory for pools, cudaStream_t streams, capture into
 * CUDA graphs, instantiation, in-place update and replay.
 *
 * stream.c owns the device-independent capture state (see
 * backend/stream_backend.h); this file only does the CUDA calls. Every
 * CUDA failure becomes PW_ERR_CUDA naming the call. The backend needs only
 * the CUDA runtime: library handles the kernels use (cuBLAS) belong to the
 * op layer, which keeps them in the stream's op slot (src/ops/cuda/). */
#include "backend/cuda/cuda_internal.h"
#include "backend/stream_backend.h"
#include "mem/pool_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static atomic_ullong stat_instantiated, stat_updated, stat_update_fallbacks, stat_replays,
    stat_graphs_live, stat_nodes_live, stat_segments;


/* ---- device probe and memory ---------------------------------------------------------- */

static bool probe_result;
static char probe_reason[256]; /* why the probe failed, with CUDA's error */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

/* The probe keeps the runtime's error: a driver older than the runtime, or
 * a missing driver, is not the same as a machine without a GPU, and the
 * message must say which (a test that skips says why). */
static void probe_device(void) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    probe_result = err == cudaSuccess && n > 0;
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(probe_reason, sizeof probe_reason,
                 "no usable CUDA device: cudaGetDeviceCount failed: %s (%s)",
                 cudaGetErrorName(err), cudaGetErrorString(err));
    } else if (n == 0) {
        snprintf(probe_reason, sizeof probe_reason,
                 "no CUDA device is available on this machine (cudaGetDeviceCount: 0)");
    }
}

static bool cuda_probe(void) {
    pthread_once(&probe_once, probe_device);
    return probe_result;
}

static bool cuda_available(const char **reason) {
    if (cuda_probe()) return true;
    *reason = probe_reason;
    return false;
}

static void *device_alloc(size_t bytes) {
    if (!cuda_probe()) {
        pw_error(PW_ERR_CUDA, "cudaMalloc: %s", probe_reason);
        return NULL;
    }
    void *p = NULL;
    /* cudaMalloc is allowed while this thread captures, but the strict
     * capture mode may flag it; a relaxed window says it is intended. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaError_t xerr = cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t err = cudaMalloc(&p, bytes);
    if (xerr == cudaSuccess) (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (err != cudaSuccess) {
        pw_cuda_check(err, "cudaMalloc");
        (void)cudaGetLastError();
        return NULL;
    }
    atomic_fetch_add(&stat_segments, 1);
    return p;
}

static void device_free(void *p) {
    if (!p) return;
    cudaError_t err = cudaFree(p);
    if (err != cudaSuccess) {
        /* cleanup: logged, the caller's error message stays */
        pw_log_warn("cudaFree failed: %s (%s)", cudaGetErrorName(err), cudaGetErrorString(err));
        return;
    }
    atomic_fetch_sub(&stat_segments, 1);
}

pw_status pw_cuda_host_alloc(size_t bytes, void **out) {
    *out = NULL;
    if (!cuda_probe()) return pw_error(PW_ERR_CUDA, "cudaMallocHost: %s", probe_reason);
    PW_CUDA_TRY(cudaMallocHost(out, bytes ? bytes : 1));
    return PW_OK;
}

void pw_cuda_host_free(void *ptr) {
    if (!ptr) return;
    cudaError_t err = cudaFreeHost(ptr);
    if (err != cudaSuccess)
        pw_log_warn("cudaFreeHost failed: %s (%s)", cudaGetErrorName(err), cudaGetErrorString(err));
}

const char *pw_cuda_device_name(char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    struct cudaDeviceProp prop;
    if (cuda_probe() && cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        snprintf(buf, cap, "%s", prop.name);
    return buf;
}

/* ---- streams ---------------------------------------------------------------------------------- */

typedef struct cuda_stream {
    pw_cuda_stream_ctx ctx;
    pw_cuda_op_slot op; /* ctx.op points here */
    bool capturing;
} cuda_stream;

/* A captured graph: the cudaGraph_t is kept for node counts and for
 * comparing two captures; the exec is what replays. */
typedef struct cuda_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    size_t n_nodes;
} cuda_graph;

static void stream_free(void *impl) {
    cuda_stream *cs = impl;
    if (!cs) return;
    if (cs->ctx.stream) (void)cudaStreamSynchronize(cs->ctx.stream);
    /* the op layer's context may hold work or memory bound to the stream */
    if (cs->op.free && cs->op.ctx) cs->op.free(cs->op.ctx);
    if (cs->ctx.stream) (void)cudaStreamDestroy(cs->ctx.stream);
    pw_host_free(cs);
}

static pw_status stream_setup(cuda_stream *cs) {
    PW_CUDA_TRY(cudaStreamCreateWithFlags(&cs->ctx.stream, cudaStreamNonBlocking));
    cs->ctx.op = &cs->op;
    return PW_OK;
}

static pw_status stream_new(void **impl) {
    *impl = NULL;
    if (!cuda_probe()) return pw_error(PW_ERR_CUDA, "stream: %s", probe_reason);
    cuda_stream *cs = pw_host_calloc(1, sizeof *cs);
    if (!cs) return PW_ERR_OOM;
    pw_status st = stream_setup(cs);
    if (st != PW_OK) {
        stream_free(cs);
        return st;
    }
    *impl = cs;
    return PW_OK;
}

const pw_cuda_kernel_impl *pw_cuda_kernel_for(const pw_kernel *k) {
    return k ? k->cuda : NULL;
}

static pw_status stream_launch(void *impl, const pw_kernel *k, const void *args, size_t argbytes) {
    cuda_stream *cs = impl;
    (void)argbytes;
    const pw_cuda_kernel_impl *ki = pw_cuda_kernel_for(k);
    if (!ki)
        return pw_error(PW_ERR_UNSUPPORTED, "launch: kernel '%s' has no CUDA implementation",
                        k->name ? k->name : "(unnamed)");
    return ki->launch(args, &cs->ctx);
}

static pw_status stream_synchronize(void *impl) {
    cuda_stream *cs = impl;
    PW_CUDA_TRY(cudaStreamSynchronize(cs->ctx.stream));
    return PW_OK;
}

static pw_status stream_begin_capture(void *impl) {
    cuda_stream *cs = impl;
    /* Thread-local mode: an unsafe call on this thread (a synchronous
     * copy, a device synchronize) invalidates the capture and is reported
     * at end_capture. */
    PW_CUDA_TRY(cudaStreamBeginCapture(cs->ctx.stream, cudaStreamCaptureModeThreadLocal));
    cs->capturing = true;
    return PW_OK;
}

static void cuda_graph_destroy(cuda_graph *g) {
    if (!g) return;
    if (g->exec) {
        (void)cudaGraphExecDestroy(g->exec);
        atomic_fetch_sub(&stat_graphs_live, 1);
        atomic_fetch_sub(&stat_nodes_live, g->n_nodes);
    }
    if (g->graph) (void)cudaGraphDestroy(g->graph);
    pw_host_free(g);
}

static void stream_abort_capture(void *impl) {
    cuda_stream *cs = impl;
    if (!cs->capturing) return;
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(cs->ctx.stream, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    if (err != cudaSuccess) (void)cudaGetLastError();
    cs->capturing = false;
}

static pw_status graph_count_nodes(cudaGraph_t graph, size_t *n) {
    *n = 0;
    PW_CUDA_TRY(cudaGraphGetNodes(graph, NULL, n));
    return PW_OK;
}

/* Tries to turn `old` into the new capture in place. True on success; on a
 * refusal (different topology) the caller instantiates afresh. */
static bool try_update(cuda_graph *old, cudaGraph_t graph) {
    cudaGraphExecUpdateResultInfo info;
    cudaError_t err = cudaGraphExecUpdate(old->exec, graph, &info);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return true;
}

static pw_status stream_end_capture(void *impl, void *reuse, void **out) {
    cuda_stream *cs = impl;
    *out = NULL;
    cudaGraph_t graph = NULL;
    cs->capturing = false;
    PW_CUDA_TRY(cudaStreamEndCapture(cs->ctx.stream, &graph));
    size_t n_nodes = 0;
    pw_status st = graph_count_nodes(graph, &n_nodes);
    if (st != PW_OK) {
        (void)cudaGraphDestroy(graph);
        return st;
    }
    cuda_graph *old = reuse;
    if (old && old->n_nodes == n_nodes && try_update(old, graph)) {
        (void)cudaGraphDestroy(old->graph);
        old->graph = graph;
        atomic_fetch_add(&stat_updated, 1);
        *out = old;
        return PW_OK;
    }
    if (old) atomic_fetch_add(&stat_update_fallbacks, 1);
    cuda_graph *g = pw_host_calloc(1, sizeof *g);
    if (!g) {
        (void)cudaGraphDestroy(graph);
        return PW_ERR_OOM;
    }
    g->graph = graph;
    g->n_nodes = n_nodes;
    st = pw_cuda_check(cudaGraphInstantiate(&g->exec, graph, 0), "cudaGraphInstantiate");
    if (st != PW_OK) {
        g->exec = NULL;
        cuda_graph_destroy(g);
        return st;
    }
    /* Uploading now keeps the first replay as fast as the rest. */
    st = pw_cuda_check(cudaGraphUpload(g->exec, cs->ctx.stream), "cudaGraphUpload");
    atomic_fetch_add(&stat_instantiated, 1);
    atomic_fetch_add(&stat_graphs_live, 1);
    atomic_fetch_add(&stat_nodes_live, n_nodes);
    if (st != PW_OK) {
        cuda_graph_destroy(g);
        return st;
    }
    *out = g;
    return PW_OK;
}

static pw_status graph_replay(void *device_graph, void *impl) {
    cuda_graph *g = device_graph;
    cuda_stream *cs = impl;
    PW_CUDA_TRY(cudaGraphLaunch(g->exec, cs->ctx.stream));
    atomic_fetch_add_explicit(&stat_replays, 1, memory_order_relaxed);
    return PW_OK;
}

static void graph_free(void *device_graph) { cuda_graph_destroy(device_graph); }

/* ---- copies ----------------------------------------------------------------------------------- */

/* Where a pointer lives, as the runtime sees it: device (or managed)
 * memory, page-locked host memory, or plain pageable host memory. */
typedef enum mem_side { SIDE_DEVICE, SIDE_PINNED, SIDE_PAGEABLE } mem_side;

static pw_status side_of(const void *p, mem_side *out) {
    struct cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, p);
    if (err == cudaErrorInvalidValue) { /* older runtimes: not a CUDA pointer */
        (void)cudaGetLastError();
        *out = SIDE_PAGEABLE;
        return PW_OK;
    }
    PW_TRY(pw_cuda_check(err, "cudaPointerGetAttributes"));
    *out = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? SIDE_DEVICE
           : attr.type == cudaMemoryTypeHost                                       ? SIDE_PINNED
                                                                                   : SIDE_PAGEABLE;
    return PW_OK;
}

/* One side of a copy: device memory where the copy expects it, host memory
 * otherwise, and page-locked host memory when the copy is being captured
 * (CUDA cannot capture a copy from or to pageable memory). */
static pw_status check_side(const cuda_stream *cs, const void *p, bool want_device,
                            const char *what, const char *role) {
    mem_side side;
    PW_TRY(side_of(p, &side));
    if (want_device && side != SIDE_DEVICE)
        return pw_error(PW_ERR_INVALID_ARG, "%s: the %s %p is host memory, not CUDA device memory",
                        what, role, p);
    if (!want_device && side == SIDE_DEVICE)
        return pw_error(PW_ERR_INVALID_ARG, "%s: the %s %p is CUDA device memory, not host memory",
                        what, role, p);
    if (!want_device && side == SIDE_PAGEABLE && cs->capturing)
        return pw_error(PW_ERR_CAPTURE,
                        "%s during a capture: the %s %p is pageable host memory, which CUDA "
                        "cannot capture; use page-locked memory (pw_cuda_host_alloc) or copy "
                        "outside the captured region",
                        what, role, p);
    return PW_OK;
}

static pw_status stream_copy(void *impl, pw_copy_kind kind, void *dst, const void *src,
                             size_t bytes) {
    cuda_stream *cs = impl;
    static const char *const names[] = {"copy_h2d", "copy_d2h", "copy_d2d"};
    static const enum cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                                cudaMemcpyDeviceToDevice};
    const char *what = names[kind];
    PW_TRY(check_side(cs, dst, kind != PW_COPY_D2H, what, "destination"));
    PW_TRY(check_side(cs, src, kind != PW_COPY_H2D, what, "source"));
    PW_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kinds[kind], cs->ctx.stream));
    return PW_OK;
}

static pw_status stream_memset(void *impl, void *dst, int value, size_t bytes) {
    cuda_stream *cs = impl;
    PW_TRY(check_side(cs, dst, true, "memset", "destination"));
    PW_CUDA_TRY(cudaMemsetAsync(dst, value, bytes, cs->ctx.stream));
    return PW_OK;
}

static void stream_caps(pw_device_caps *out) {
    out->graphs = true;
    out->graph_update = true;  /* cudaGraphExecUpdate */
    out->async_copy = true;
    out->needs_warmup = true;  /* lazy module loading, cuBLAS handles and workspaces */
}

static const pw_stream_backend cuda_stream_backend = {
    .available = cuda_available,
    .host_alloc = pw_cuda_host_alloc,
    .host_free = pw_cuda_host_free,
    .kernels = PW_DEVICE_CUDA,
    .stream_new = stream_new,
    .stream_free = stream_free,
    .launch = stream_launch,
    .synchronize = stream_synchronize,
    .begin_capture = stream_begin_capture,
    .end_capture = stream_end_capture,
    .abort_capture = stream_abort_capture,
    .replay = graph_replay,
    .graph_free = graph_free,
    .copy = stream_copy,
    .memset = stream_memset,
    .caps = stream_caps,
};

/* ---- graphs: counters, node counts, comparison ---------------------------------------------- */

void pw_cuda_get_stats(pw_cuda_stats *out) {
    out->graphs_instantiated = atomic_load(&stat_instantiated);
    out->graphs_updated = atomic_load(&stat_updated);
    out->update_fallbacks = atomic_load(&stat_update_fallbacks);
    out->graph_replays = atomic_load(&stat_replays);
    out->graphs_live = atomic_load(&stat_graphs_live);
    out->graph_nodes_live = atomic_load(&stat_nodes_live);
    out->device_segments = atomic_load(&stat_segments);
}

static pw_status cuda_graph_of(const pw_graph *g, const cuda_graph **out) {
    *out = g ? pw_graph_device_handle(g) : NULL;
    if (!*out) return pw_error(PW_ERR_INVALID_ARG, "not a CUDA graph");
    return PW_OK;
}

pw_status pw_cuda_graph_num_nodes(const pw_graph *g, size_t *out) {
    const cuda_graph *cg;
    PW_TRY(cuda_graph_of(g, &cg));
    *out = cg->n_nodes;
    return PW_OK;
}

/* Compares node i of two graphs. Kernel parameters are compared by value,
 * using the parameter sizes the runtime reports for the function. */
static pw_status compare_node(cudaGraphNode_t a, cudaGraphNode_t b, size_t i, bool *same,
                              char *diff, size_t cap) {
    enum cudaGraphNodeType ta, tb;
    PW_CUDA_TRY(cudaGraphNodeGetType(a, &ta));
    PW_CUDA_TRY(cudaGraphNodeGetType(b, &tb));
    if (ta != tb) {
        *same = false;
        snprintf(diff, cap, "node %zu: types differ (%d vs %d)", i, (int)ta, (int)tb);
        return PW_OK;
    }
    if (ta == cudaGraphNodeTypeKernel) {
        struct cudaKernelNodeParams pa, pb;
        PW_CUDA_TRY(cudaGraphKernelNodeGetParams(a, &pa));
        PW_CUDA_TRY(cudaGraphKernelNodeGetParams(b, &pb));
        if (pa.func != pb.func || pa.gridDim.x != pb.gridDim.x || pa.gridDim.y != pb.gridDim.y ||
            pa.gridDim.z != pb.gridDim.z || pa.blockDim.x != pb.blockDim.x ||
            pa.blockDim.y != pb.blockDim.y || pa.blockDim.z != pb.blockDim.z ||
            pa.sharedMemBytes != pb.sharedMemBytes) {
            *same = false;
            snprintf(diff, cap, "node %zu: kernel function or launch shape differs", i);
            return PW_OK;
        }
        for (size_t p = 0;; p++) {
            size_t offset = 0, size = 0;
            cudaError_t err = cudaFuncGetParamInfo(pa.func, p, &offset, &size);
            if (err == cudaErrorInvalidValue) {
                (void)cudaGetLastError();
                break; /* past the last parameter */
            }
            PW_TRY(pw_cuda_check(err, "cudaFuncGetParamInfo"));
            if (memcmp(pa.kernelParams[p], pb.kernelParams[p], size) != 0) {
                *same = false;
                snprintf(diff, cap, "node %zu: kernel parameter %zu (%zu bytes) differs", i, p,
                         size);
                return PW_OK;
            }
        }
    } else if (ta == cudaGraphNodeTypeMemcpy) {
        struct cudaMemcpy3DParms pa, pb;
        PW_CUDA_TRY(cudaGraphMemcpyNodeGetParams(a, &pa));
        PW_CUDA_TRY(cudaGraphMemcpyNodeGetParams(b, &pb));
        if (memcmp(&pa, &pb, sizeof pa) != 0) {
            *same = false;
            snprintf(diff, cap, "node %zu: memcpy parameters differ", i);
        }
    } else if (ta == cudaGraphNodeTypeMemset) {
        struct cudaMemsetParams pa, pb;
        PW_CUDA_TRY(cudaGraphMemsetNodeGetParams(a, &pa));
        PW_CUDA_TRY(cudaGraphMemsetNodeGetParams(b, &pb));
        if (pa.dst != pb.dst || pa.value != pb.value || pa.width != pb.width ||
            pa.height != pb.height || pa.pitch != pb.pitch || pa.elementSize != pb.elementSize) {
            *same = false;
            snprintf(diff, cap, "node %zu: memset parameters differ", i);
        }
    }
    return PW_OK;
}

pw_status pw_cuda_graph_compare(const pw_graph *a, const pw_graph *b, bool *same, char *diff,
                                size_t diff_cap) {
    const cuda_graph *ga, *gb;
    PW_TRY(cuda_graph_of(a, &ga));
    PW_TRY(cuda_graph_of(b, &gb));
    *same = true;
    if (diff_cap) diff[0] = '\0';
    if (ga->n_nodes != gb->n_nodes) {
        *same = false;
        snprintf(diff, diff_cap, "node counts differ (%zu vs %zu)", ga->n_nodes, gb->n_nodes);
        return PW_OK;
    }
    size_t n = ga->n_nodes;
    cudaGraphNode_t *na = pw_host_calloc(n ? n : 1, sizeof *na);
    cudaGraphNode_t *nb = pw_host_calloc(n ? n : 1, sizeof *nb);
    pw_status st = (na && nb) ? PW_OK : PW_ERR_OOM;
    size_t n1 = n, n2 = n;
    /* Stream capture records in issue order on one stream, so the node
     * arrays of two captures of the same launches line up. */
    if (st == PW_OK) st = pw_cuda_check(cudaGraphGetNodes(ga->graph, na, &n1), "cudaGraphGetNodes");
    if (st == PW_OK) st = pw_cuda_check(cudaGraphGetNodes(gb->graph, nb, &n2), "cudaGraphGetNodes");
    for (size_t i = 0; st == PW_OK && *same && i < n; i++)
        st = compare_node(na[i], nb[i], i, same, diff, diff_cap);
    pw_host_free(na);
    pw_host_free(nb);
    return st;
}

/* ---- registration ----------------------------------------------------------------------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void register_backend(void) {
    pw_mem_register_device(PW_DEVICE_CUDA, (pw_device_mem_ops){device_alloc, device_free});
    pw_stream_register_backend(PW_DEVICE_CUDA, &cuda_stream_backend);
}

/* Called by the backend registry (pw_backends_register), by name: a
 * constructor here would never run in a program linked against the static
 * archive, since nothing else references this object. */
void pw_cuda_init(void) { pthread_once(&init_once, register_backend); }
