/* cuBLAS for the CUDA kernels. The handle belongs to the op layer, not to
 * the backend (which needs only the CUDA runtime): one handle per stream,
 * created on the stream's first matmul and kept in the stream's op slot
 * (pw_cuda_op_slot), freed with the stream. */
#ifndef PW_OPS_CUDA_BLAS_H
#define PW_OPS_CUDA_BLAS_H

#include "backend/cuda/cuda_internal.h"

#include <cublas_v2.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PW_OK, or PW_ERR_CUDA naming the cuBLAS call and its status. */
pw_status pw_cuda_check_blas(cublasStatus_t st, const char *call);
#define PW_CUBLAS_TRY(call) PW_TRY(pw_cuda_check_blas((call), #call))

/* The stream's cuBLAS handle, bound to the stream with a fixed workspace
 * and fixed numerics (pedantic FP32, no atomics, host scalars); created on
 * first use. Creating it allocates device memory, so the first matmul on a
 * stream should run eagerly, before any capture (pw_device_caps
 * .needs_warmup); if it happens during one, the allocation runs in a
 * relaxed capture-mode window. */
pw_status pw_cuda_blas_handle(const pw_cuda_stream_ctx *ctx, cublasHandle_t *out);

#ifdef __cplusplus
}
#endif

#endif
