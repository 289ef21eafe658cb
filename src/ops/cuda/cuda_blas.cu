// The per-stream cuBLAS context of the CUDA kernels (see cuda_blas.h).
extern "C" {
#include "internal.h"
}
#include "ops/cuda/cuda_blas.h"

// cuBLAS workspace per stream: the size NVIDIA recommends for Hopper. It is
// fixed so that cuBLAS never allocates during a capture.
#define PW_CUDA_CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct blas_ctx {
    cublasHandle_t handle;
    void *workspace;
} blas_ctx;

extern "C" pw_status pw_cuda_check_blas(cublasStatus_t st, const char *call) {
    if (PW_LIKELY(st == CUBLAS_STATUS_SUCCESS)) return PW_OK;
    return pw_error(PW_ERR_CUDA, "%s failed: %s (%s)", call, cublasGetStatusName(st),
                    cublasGetStatusString(st));
}

static void blas_ctx_free(void *p) {
    blas_ctx *b = (blas_ctx *)p;
    if (!b) return;
    if (b->handle) (void)cublasDestroy(b->handle);
    if (b->workspace) (void)cudaFree(b->workspace);
    pw_host_free(b);
}

static pw_status blas_setup(blas_ctx *b, cudaStream_t stream) {
    PW_CUBLAS_TRY(cublasCreate(&b->handle));
    PW_CUBLAS_TRY(cublasSetStream(b->handle, stream));
    // cublasSetStream resets the workspace, so it is set after.
    PW_CUDA_TRY(cudaMalloc(&b->workspace, PW_CUDA_CUBLAS_WORKSPACE_BYTES));
    PW_CUBLAS_TRY(cublasSetWorkspace(b->handle, b->workspace, PW_CUDA_CUBLAS_WORKSPACE_BYTES));
    // Fixed numerics: plain FP32 (no TF32 or reduced-precision reductions),
    // no atomics, host scalars.
    PW_CUBLAS_TRY(cublasSetMathMode(b->handle, CUBLAS_PEDANTIC_MATH));
    PW_CUBLAS_TRY(cublasSetAtomicsMode(b->handle, CUBLAS_ATOMICS_NOT_ALLOWED));
    PW_CUBLAS_TRY(cublasSetPointerMode(b->handle, CUBLAS_POINTER_MODE_HOST));
    return PW_OK;
}

extern "C" pw_status pw_cuda_blas_handle(const pw_cuda_stream_ctx *ctx, cublasHandle_t *out) {
    pw_cuda_op_slot *slot = ctx->op;
    if (PW_LIKELY(slot->ctx != NULL)) {
        *out = ((blas_ctx *)slot->ctx)->handle;
        return PW_OK;
    }
    *out = NULL;
    blas_ctx *b = (blas_ctx *)pw_host_calloc(1, sizeof *b);
    if (!b) return PW_ERR_OOM;
    // Setup allocates; during a capture a relaxed window says that is intended.
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaError_t xerr = cudaThreadExchangeStreamCaptureMode(&mode);
    pw_status st = blas_setup(b, ctx->stream);
    if (xerr == cudaSuccess) (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (st != PW_OK) {
        blas_ctx_free(b);
        return st;
    }
    slot->ctx = b;
    slot->free = blas_ctx_free;
    *out = b->handle;
    return PW_OK;
}
