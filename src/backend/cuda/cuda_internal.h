/* Shared by the CUDA backend's C and CUDA sources. */
#ifndef PW_CUDA_INTERNAL_H
#define PW_CUDA_INTERNAL_H

#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pw_cuda_stream_ctx {
    cudaStream_t stream;
    pw_cuda_op_slot *op; /* the op layer's per-stream context (never NULL) */
};

/* PW_OK, or PW_ERR_CUDA naming the call that failed and CUDA's message.
 * Inline: the CUDA kernels in libpiecewise-llm check their calls the same
 * way without the backend exporting a function for it. A failed runtime
 * call also sets the thread's last error, which the next launch's
 * cudaGetLastError would report against an unrelated kernel: it is
 * cleared here, once the error has become this call's message (a sticky
 * error, which corrupts the context, stays whatever is done). */
static inline pw_status pw_cuda_check(cudaError_t err, const char *call) {
    if (err == cudaSuccess) return PW_OK;
    (void)cudaGetLastError();
    return pw_error(PW_ERR_CUDA, "%s failed: %s (%s)", call, cudaGetErrorName(err),
                    cudaGetErrorString(err));
}
#define PW_CUDA_TRY(call) PW_TRY(pw_cuda_check((call), #call))

#ifdef __cplusplus
}
#endif

#endif
