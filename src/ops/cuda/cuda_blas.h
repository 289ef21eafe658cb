/* cuBLAS for the CUDA kernels. The handle belongs to the op layer, not to
 * the backend (which needs only the CUDA runtime): one handle per stream,
 * created on the stream's first matmul and kept in the stream's op slot
 * (pw_cuda_op_slot), freed with the stream.
 *
 * The library is opened with dlopen on the first matmul, not linked: merely
 * loading libcublasLt relocates its ~96 MB data segment and touches its
 * ~88 MB of zeroed data, about 140 MB of resident memory that a process
 * running on the CPU (or never reaching a matmul) would pay for nothing. */
#ifndef PW_OPS_CUDA_BLAS_H
#define PW_OPS_CUDA_BLAS_H

#include "backend/cuda/cuda_internal.h"

#include <cublas_v2.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The soname the CUDA kernels open (the cuBLAS they were compiled against). */
#define PW_CUDA_CUBLAS_STR_(x) #x
#define PW_CUDA_CUBLAS_STR(x) PW_CUDA_CUBLAS_STR_(x)
#define PW_CUDA_CUBLAS_SONAME "libcublas.so." PW_CUDA_CUBLAS_STR(CUBLAS_VER_MAJOR)

/* Opens cuBLAS (`soname`, or PW_CUDA_CUBLAS_SONAME when NULL) and resolves
 * the calls the kernels make, once per process: later calls return PW_OK
 * at once. PW_ERR_CUDA naming the library and the loader's message when it
 * cannot be opened or lacks a call (nothing is kept then, so a later call
 * tries again). Thread-safe. */
pw_status pw_cuda_blas_load(const char *soname);

/* The cuBLAS calls the kernels make, resolved by pw_cuda_blas_load (the
 * table is valid once that returned PW_OK). cublas_v2.h maps some names to
 * their _v2 symbols; the members are named after the API. */
typedef struct pw_cuda_blas_api {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*set_atomics_mode)(cublasHandle_t, cublasAtomicsMode_t);
    cublasStatus_t (*set_pointer_mode)(cublasHandle_t, cublasPointerMode_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const float *, const float *, int, const float *, int,
                            const float *, float *, int);
    const char *(*status_name)(cublasStatus_t);
    const char *(*status_string)(cublasStatus_t);
} pw_cuda_blas_api;
extern pw_cuda_blas_api pw_cuda_blas;

/* PW_OK, or PW_ERR_CUDA naming the cuBLAS call and its status. */
pw_status pw_cuda_check_blas(cublasStatus_t st, const char *call);
#define PW_CUBLAS_TRY(call) PW_TRY(pw_cuda_check_blas((call), #call))

/* The stream's cuBLAS handle (loading cuBLAS first), bound to the stream with a fixed workspace
 * and fixed numerics (pedantic FP32, no atomics, host scalars); created on
 * first use. Creating it allocates device memory, so the first matmul on a
 * stream should run eagerly, before any capture (pw_device_caps
 * .needs_warmup); during a capture it is refused with PW_ERR_CAPTURE
 * (setup allocates, and its failure path frees, neither of which a
 * capture may contain). */
pw_status pw_cuda_blas_handle(const pw_cuda_stream_ctx *ctx, cublasHandle_t *out);

#ifdef __cplusplus
}
#endif

#endif
