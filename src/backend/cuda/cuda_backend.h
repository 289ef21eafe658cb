/* The CUDA backend (built when nvcc is found; see docs/cuda.md).
 *
 * pw_cuda_init() installs everything into the device-independent layers:
 * the pw_cuda_available() probe, the cudaMalloc-backed device pool
 * (pw_pool_new(PW_DEVICE_CUDA, ...)) and the cudaStream_t stream backend
 * (pw_stream_new(PW_DEVICE_CUDA, ...), capture with cudaStreamBeginCapture,
 * cudaGraphInstantiate, cudaGraphLaunch). It is idempotent; the backend
 * registry (pw_backends_register, backend/stream_backend.h) calls it.
 *
 * Kernels: a pw_kernel launched on a CUDA stream runs its `cuda` entry (a
 * const pw_cuda_kernel_impl *); a kernel without one is refused. The CUDA
 * kernels (the CUDA kernel set, src/ops/cuda) take the args structs of
 * ops/kernel_args.h, with every pointer a device pointer (the attention
 * meta struct included). */
#ifndef PW_CUDA_BACKEND_H
#define PW_CUDA_BACKEND_H

#include "piecewise.h"
#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a CUDA launcher sees: the stream and the op layer's slot on it. */
typedef struct pw_cuda_stream_ctx pw_cuda_stream_ctx;

/* One context per stream that the op layer owns (its cuBLAS handle and
 * workspace, src/ops/cuda/): created by the ops on first use, freed with
 * the stream by free(ctx), after the stream's work has finished. */
typedef struct pw_cuda_op_slot {
    void *ctx;
    void (*free)(void *ctx);
} pw_cuda_op_slot;

typedef struct pw_cuda_kernel_impl {
    pw_status (*launch)(const void *args, const pw_cuda_stream_ctx *ctx);
} pw_cuda_kernel_impl;

void pw_cuda_init(void);

/* The CUDA implementation of a kernel: k->cuda (NULL if none). */
const pw_cuda_kernel_impl *pw_cuda_kernel_for(const pw_kernel *k);

/* Copies and memsets are the device-neutral pw_stream_copy_h2d / d2h / d2d
 * and pw_stream_memset (include/piecewise.h). */

/* Pinned (page-locked) host memory for staging per-step inputs. */
pw_status pw_cuda_host_alloc(size_t bytes, void **out);
void pw_cuda_host_free(void *ptr);

/* Backend-wide counters (all streams). */
typedef struct pw_cuda_stats {
    uint64_t graphs_instantiated; /* cudaGraphInstantiate calls that succeeded */
    uint64_t graphs_updated;      /* re-captures applied with cudaGraphExecUpdate */
    uint64_t update_fallbacks;    /* re-captures whose update was refused (topology changed) */
    uint64_t graph_replays;       /* cudaGraphLaunch calls */
    uint64_t graphs_live;         /* device graphs not yet freed */
    uint64_t graph_nodes_live;    /* nodes in those graphs */
    uint64_t device_segments;     /* cudaMalloc blocks held by all pools */
} pw_cuda_stats;
void pw_cuda_get_stats(pw_cuda_stats *out);

/* Name of device 0 into buf ("" when none); returns buf. */
const char *pw_cuda_device_name(char *buf, size_t cap);

/* Number of nodes in a CUDA graph's captured cudaGraph_t. */
pw_status pw_cuda_graph_num_nodes(const pw_graph *g, size_t *out);

/* Capture-safety check at the device level: compares the kernel nodes of
 * two captures of the same thing, in order (function and parameter bytes).
 * *same is false at the first difference, described in diff. Memcpy and
 * memset nodes are compared by their parameters too. */
pw_status pw_cuda_graph_compare(const pw_graph *a, const pw_graph *b, bool *same, char *diff,
                                size_t diff_cap);

/* Kernels in this backend: fixed token tile of every cuBLAS call (see
 * docs/cuda.md: batch invariance) and the scratch a matmul needs for the
 * partial last tile. */
#define PW_CUDA_MATMUL_TILE 16
static inline size_t pw_cuda_matmul_scratch_floats(int64_t n_tokens, int64_t n, int64_t k) {
    if (n_tokens % PW_CUDA_MATMUL_TILE == 0) return 0;
    return (size_t)PW_CUDA_MATMUL_TILE * (size_t)(n + k);
}
#define PW_CUDA_ATTN_MAX_HEAD_DIM 256

#ifdef __cplusplus
}
#endif

#endif
