// The per-stream cuBLAS context of the CUDA kernels (see cuda_blas.h).
extern "C" {
#include "internal.h"
}
#include "ops/cuda/cuda_blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <type_traits>

// cuBLAS workspace per stream: the size NVIDIA recommends for Hopper. It is
// fixed so that cuBLAS never allocates during a capture.
#define PW_CUDA_CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct blas_ctx {
    cublasHandle_t handle;
    void *workspace;
} blas_ctx;

// ---- loading cuBLAS -------------------------------------------------------

extern "C" pw_cuda_blas_api pw_cuda_blas = {};

static pthread_mutex_t g_blas_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_blas_loaded; // written under g_blas_lock; true once pw_cuda_blas is filled

// dlsym's name for an API call: the macro cublas_v2.h may map it to.
#define BLAS_SYMBOL(api) PW_CUDA_CUBLAS_STR(api)

static pw_status resolve(void *lib, const char *soname, const char *symbol, void **out) {
    dlerror();
    *out = dlsym(lib, symbol);
    if (*out) return PW_OK;
    const char *why = dlerror();
    return pw_error(PW_ERR_CUDA, "cuBLAS library '%s' has no '%s': %s", soname, symbol,
                    why ? why : "null symbol");
}

static pw_status resolve_all(void *lib, const char *soname, pw_cuda_blas_api *api) {
// The static_assert keeps each member's type the header's declaration.
#define RESOLVE(member, call)                                                                 \
    static_assert(std::is_same<decltype(api->member), decltype(&call)>::value, #call);         \
    PW_TRY(resolve(lib, soname, BLAS_SYMBOL(call), (void **)&api->member))
    RESOLVE(create, cublasCreate);
    RESOLVE(destroy, cublasDestroy);
    RESOLVE(set_stream, cublasSetStream);
    RESOLVE(set_workspace, cublasSetWorkspace);
    RESOLVE(set_math_mode, cublasSetMathMode);
    RESOLVE(set_atomics_mode, cublasSetAtomicsMode);
    RESOLVE(set_pointer_mode, cublasSetPointerMode);
    RESOLVE(sgemm, cublasSgemm);
    RESOLVE(status_name, cublasGetStatusName);
    RESOLVE(status_string, cublasGetStatusString);
#undef RESOLVE
    return PW_OK;
}

extern "C" pw_status pw_cuda_blas_load(const char *soname) {
    static const char *const default_soname = PW_CUDA_CUBLAS_SONAME;
    if (!soname) soname = default_soname;
    pthread_mutex_lock(&g_blas_lock);
    pw_status st = PW_OK;
    if (!g_blas_loaded) {
        // RTLD_LOCAL: its symbols serve only this table.
        void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        char why[512] = "unknown error"; // the loader's reason for the name asked for
        if (!lib) {
            const char *e = dlerror();
            if (e) snprintf(why, sizeof why, "%s", e);
        }
#ifdef PW_CUDA_TOOLKIT_LIB_DIR
        // Not on the loader's path: the toolkit the build found (what linking
        // it used to put in the run path).
        if (!lib && soname == default_soname) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", PW_CUDA_TOOLKIT_LIB_DIR, soname);
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
#endif
        if (!lib) {
            st = pw_error(PW_ERR_CUDA, "cannot load cuBLAS ('%s'): %s", soname, why);
        } else {
            pw_cuda_blas_api api = {};
            st = resolve_all(lib, soname, &api);
            if (st == PW_OK) {
                // Kept open for the process: handles may outlive any engine.
                pw_cuda_blas = api;
                g_blas_loaded = true;
            } else {
                dlclose(lib);
            }
        }
    }
    pthread_mutex_unlock(&g_blas_lock);
    return st;
}

// ---- handles ----------------------------------------------------------------

extern "C" pw_status pw_cuda_check_blas(cublasStatus_t st, const char *call) {
    if (PW_LIKELY(st == CUBLAS_STATUS_SUCCESS)) return PW_OK;
    return pw_error(PW_ERR_CUDA, "%s failed: %s (%s)", call, pw_cuda_blas.status_name(st),
                    pw_cuda_blas.status_string(st));
}

static void blas_ctx_free(void *p) {
    blas_ctx *b = (blas_ctx *)p;
    if (!b) return;
    if (b->handle) (void)pw_cuda_blas.destroy(b->handle);
    if (b->workspace) (void)cudaFree(b->workspace);
    pw_host_free(b);
}

static pw_status blas_setup(blas_ctx *b, cudaStream_t stream) {
    PW_CUBLAS_TRY(pw_cuda_blas.create(&b->handle));
    PW_CUBLAS_TRY(pw_cuda_blas.set_stream(b->handle, stream));
    // cublasSetStream resets the workspace, so it is set after.
    PW_CUDA_TRY(cudaMalloc(&b->workspace, PW_CUDA_CUBLAS_WORKSPACE_BYTES));
    PW_CUBLAS_TRY(pw_cuda_blas.set_workspace(b->handle, b->workspace, PW_CUDA_CUBLAS_WORKSPACE_BYTES));
    // Fixed numerics: plain FP32 (no TF32 or reduced-precision reductions),
    // no atomics, host scalars.
    PW_CUBLAS_TRY(pw_cuda_blas.set_math_mode(b->handle, CUBLAS_PEDANTIC_MATH));
    PW_CUBLAS_TRY(pw_cuda_blas.set_atomics_mode(b->handle, CUBLAS_ATOMICS_NOT_ALLOWED));
    PW_CUBLAS_TRY(pw_cuda_blas.set_pointer_mode(b->handle, CUBLAS_POINTER_MODE_HOST));
    return PW_OK;
}

extern "C" pw_status pw_cuda_blas_handle(const pw_cuda_stream_ctx *ctx, cublasHandle_t *out) {
    pw_cuda_op_slot *slot = ctx->op;
    if (PW_LIKELY(slot->ctx != NULL)) {
        *out = ((blas_ctx *)slot->ctx)->handle;
        return PW_OK;
    }
    *out = NULL;
    // Creating the handle allocates its workspace (and, on failure, frees
    // it): inside a capture that would invalidate the capture, so the
    // handle must come from an eager launch (a warm-up) first.
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    PW_CUDA_TRY(cudaStreamIsCapturing(ctx->stream, &cap));
    if (cap != cudaStreamCaptureStatusNone)
        return pw_error(PW_ERR_CAPTURE,
                        "library handle created in capture: the stream's cuBLAS handle does not "
                        "exist yet and cannot be created while the stream captures; launch the "
                        "stream's kernels once eagerly first (a warm-up)");
    PW_TRY(pw_cuda_blas_load(NULL));
    blas_ctx *b = (blas_ctx *)pw_host_calloc(1, sizeof *b);
    if (!b) return PW_ERR_OOM;
    pw_status st = blas_setup(b, ctx->stream);
    if (st != PW_OK) {
        blas_ctx_free(b);
        return st;
    }
    slot->ctx = b;
    slot->free = blas_ctx_free;
    *out = b->handle;
    return PW_OK;
}
