/* The tensor layout, visible to the library's own modules (kernels read
 * fields directly; the public API only has accessors). */
#ifndef PW_TENSOR_H
#define PW_TENSOR_H

#include "internal.h"

/* How an owning tensor gives its storage back. */
typedef void (*pw_tensor_release_fn)(void *ctx, void *data);

struct pw_tensor {
    void *data;
    pw_dtype dtype;
    int ndim;
    int64_t shape[PW_MAX_DIMS];
    int64_t stride[PW_MAX_DIMS]; /* in elements (blocks for quantized rows) */
    pw_device device;
    int refcount;
    /* Owned storage: release(release_ctx, data) runs at refcount 0. The
     * allocator that handed out the block sets it (a pool: mem/tensor_pool.c),
     * so core never calls an allocator by name. NULL: borrowed storage. */
    pw_tensor_release_fn release;
    void *release_ctx;
    pw_tensor *base;   /* a slice keeps its base alive */
};

/* Row-major contiguous strides for shape. */
void pw_tensor_set_contiguous(pw_tensor *t);

/* A contiguous tensor header with no storage yet (data NULL, borrowed),
 * after validating dtype and shape; *bytes is the storage it needs. */
pw_status pw_tensor_new_header(pw_dtype dtype, int ndim, const int64_t *shape, pw_tensor **out,
                               size_t *bytes);
/* Gives t storage it owns: data on `device`, released by release(ctx, data). */
void pw_tensor_adopt(pw_tensor *t, void *data, pw_device device, pw_tensor_release_fn release,
                     void *ctx);

#endif
