/* Helpers for the CUDA tests: skipping without a GPU, device buffers. */
#ifndef PW_CUDA_TEST_UTIL_H
#define PW_CUDA_TEST_UTIL_H

#include "pw_config.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if PW_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "ops/kernel_set.h"

/* The CUDA kernel set's kernel of id (kernels are bound by pointer, never
 * looked up by name). */
static inline const pw_kernel *ct_kernel(pw_kernel_id id) {
    return pw_kernel_set_cuda.entries[id].kernel;
}

/* Exits 77 with "no CUDA device: skipping" unless a GPU is usable. */
static inline void ct_require_gpu(void) {
    pw_cuda_init();
    if (!pw_cuda_available()) pw_test_skip("no CUDA device: skipping");
}

/* A device copy of n host floats (or int32s: bytes are bytes). */
static inline void *ct_upload(pw_stream *s, pw_pool *pool, const void *host, size_t bytes) {
    void *d = NULL;
    if (pw_pool_alloc(pool, bytes ? bytes : 4, &d) != PW_OK) {
        fprintf(stderr, "device alloc: %s\n", pw_last_error());
        exit(1);
    }
    if (bytes && pw_stream_copy_h2d(s, d, host, bytes) != PW_OK) {
        fprintf(stderr, "upload: %s\n", pw_last_error());
        exit(1);
    }
    return d;
}

static inline void ct_download(pw_stream *s, void *host, const void *dev, size_t bytes) {
    if (pw_stream_copy_d2h(s, host, dev, bytes) != PW_OK || pw_stream_synchronize(s) != PW_OK) {
        fprintf(stderr, "download: %s\n", pw_last_error());
        exit(1);
    }
}

static inline float ct_max_abs_diff(const float *a, const float *b, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float d = a[i] - b[i];
        if (d < 0) d = -d;
        if (d > m || d != d) m = d != d ? 1e30f : d;
    }
    return m;
}
#endif

#endif
