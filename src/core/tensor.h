/* The tensor layout, visible to the library's own modules (kernels read
 * fields directly; the public API only has accessors). */
#ifndef PW_TENSOR_H
#define PW_TENSOR_H

#include "internal.h"

struct pw_tensor {
    void *data;
    pw_dtype dtype;
    int ndim;
    int64_t shape[PW_MAX_DIMS];
    int64_t stride[PW_MAX_DIMS]; /* in elements (blocks for quantized rows) */
    pw_device device;
    int refcount;
    pw_pool *pool;     /* non-NULL: data is a block of this pool, freed at refcount 0 */
    pw_tensor *base;   /* a slice keeps its base alive */
};

/* Row-major contiguous strides for shape. */
void pw_tensor_set_contiguous(pw_tensor *t);

#endif
