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

/* Exits 77, saying why (the runtime's error), unless a GPU is usable. */
static inline void ct_require_gpu(void) {
    if (!pw_cuda_available()) pw_test_skip(pw_cuda_unavailable_reason());
}

/* A device copy of n host floats (or int32s: bytes are bytes); with host
 * NULL, a zeroed buffer of that size (an output). */
static inline void *ct_upload(pw_stream *s, pw_pool *pool, const void *host, size_t bytes) {
    void *d = NULL;
    if (pw_pool_alloc(pool, bytes ? bytes : 4, &d) != PW_OK) {
        fprintf(stderr, "device alloc: %s\n", pw_last_error());
        exit(1);
    }
    pw_status st = !bytes ? PW_OK
                   : host ? pw_stream_copy_h2d(s, d, host, bytes)
                          : pw_stream_memset(s, d, 0, bytes);
    if (st != PW_OK) {
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
