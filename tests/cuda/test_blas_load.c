/* cuBLAS is opened on first use (dlopen), not linked: loading it without a
 * GPU, the error for a library that cannot be opened, and that a CPU-only
 * process never maps it. */
#include "cuda_test_util.h"

#if !PW_HAVE_CUDA
int main(void) { pw_test_skip("built without the CUDA backend: skipping"); }
#else

#include "ops/cuda/cuda_blas.h"

#include <stdbool.h>

/* True when a mapping of this process names `needle`. */
static bool mapped(const char *needle) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

int main(void) {
    /* Nothing has asked for a matmul yet: cuBLAS is not in the process. */
    CHECK(!mapped("libcublas"));
    CHECK_ERR(pw_cuda_blas_load("libpw-no-such-cublas.so.0"), PW_ERR_CUDA,
              "cannot load cuBLAS ('libpw-no-such-cublas.so.0')");
    CHECK(pw_cuda_blas.sgemm == NULL);
    /* The default library resolves every call without a device (a toolkit
     * install always has it: the build found cuBLAS's headers beside it). */
    CHECK_OK(pw_cuda_blas_load(NULL));
    CHECK(pw_cuda_blas.sgemm != NULL && pw_cuda_blas.create != NULL);
    CHECK(mapped("libcublas"));
    CHECK_STREQ(pw_cuda_blas.status_name(CUBLAS_STATUS_NOT_INITIALIZED),
                "CUBLAS_STATUS_NOT_INITIALIZED");
    /* Loaded once: a second call (even naming another library) is a no-op. */
    CHECK_OK(pw_cuda_blas_load("libpw-no-such-cublas.so.0"));
    return pw_test_finish("cuda_blas_load");
}
#endif
