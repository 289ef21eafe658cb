#include "tensor.h"

#include <inttypes.h>
#include <string.h>

void pw_tensor_set_contiguous(pw_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

static pw_status check_shape(pw_dtype dtype, int ndim, const int64_t *shape, int64_t *numel) {
    if ((unsigned)dtype >= PW_DTYPE_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "tensor: unknown dtype %d", (int)dtype);
    if (ndim < 0 || ndim > PW_MAX_DIMS)
        return pw_error(PW_ERR_INVALID_ARG, "tensor: %d dimensions (at most %d)", ndim,
                        PW_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return pw_error(PW_ERR_INVALID_ARG, "tensor: negative size %" PRId64 " in dim %d",
                            shape[i], i);
        if (shape[i] && n > INT64_MAX / shape[i])
            return pw_error(PW_ERR_INVALID_ARG, "tensor: element count overflows");
        n *= shape[i];
    }
    int64_t be = pw_dtype_block_elems(dtype);
    if (n / be > INT64_MAX / pw_dtype_block_bytes(dtype))
        return pw_error(PW_ERR_INVALID_ARG, "tensor: byte size overflows");
    if (ndim > 0 && shape[ndim - 1] % be != 0)
        return pw_error(PW_ERR_INVALID_ARG,
                        "tensor: last dim %" PRId64 " is not a multiple of the %s block (%" PRId64
                        ")",
                        shape[ndim - 1], pw_dtype_name(dtype), be);
    *numel = n;
    return PW_OK;
}

static pw_tensor *tensor_header(pw_dtype dtype, int ndim, const int64_t *shape) {
    pw_tensor *t = pw_host_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    pw_tensor_set_contiguous(t);
    t->refcount = 1;
    return t;
}

pw_status pw_tensor_new_header(pw_dtype dtype, int ndim, const int64_t *shape, pw_tensor **out,
                               size_t *bytes) {
    int64_t numel;
    *out = NULL;
    *bytes = 0;
    PW_TRY(check_shape(dtype, ndim, shape, &numel));
    pw_tensor *t = tensor_header(dtype, ndim, shape);
    if (!t) return PW_ERR_OOM;
    *bytes = (size_t)(numel / pw_dtype_block_elems(dtype) * pw_dtype_block_bytes(dtype));
    *out = t;
    return PW_OK;
}

void pw_tensor_adopt(pw_tensor *t, void *data, pw_device device, pw_tensor_release_fn release,
                     void *ctx) {
    t->data = data;
    t->device = device;
    t->release = release;
    t->release_ctx = ctx;
}

pw_status pw_tensor_wrap(void *data, pw_device device, pw_dtype dtype, int ndim,
                         const int64_t *shape, pw_tensor **out) {
    int64_t numel;
    *out = NULL;
    PW_TRY(check_shape(dtype, ndim, shape, &numel));
    pw_tensor *t = tensor_header(dtype, ndim, shape);
    if (!t) return PW_ERR_OOM;
    t->data = data;
    t->device = device;
    *out = t;
    return PW_OK;
}

pw_status pw_tensor_slice0(pw_tensor *base, int64_t start, int64_t end, pw_tensor **out) {
    *out = NULL;
    if (!base || base->ndim < 1)
        return pw_error(PW_ERR_INVALID_ARG, "slice: tensor has no dimension 0");
    if (start < 0 || end < start || end > base->shape[0])
        return pw_error(PW_ERR_INVALID_ARG,
                        "slice: rows [%" PRId64 ", %" PRId64 ") out of range for %" PRId64
                        " rows",
                        start, end, base->shape[0]);
    pw_tensor *t = pw_host_calloc(1, sizeof *t);
    if (!t) return PW_ERR_OOM;
    *t = *base;
    t->refcount = 1;
    t->release = NULL;
    t->release_ctx = NULL;
    t->shape[0] = end - start;
    int64_t elems = start * base->stride[0];
    int64_t be = pw_dtype_block_elems(base->dtype);
    /* strides count elements; quantized rows are whole blocks */
    t->data = (char *)base->data + elems / be * pw_dtype_block_bytes(base->dtype);
    t->base = pw_tensor_retain(base);
    *out = t;
    return PW_OK;
}

pw_status pw_tensor_weak_alias(const pw_tensor *src, pw_tensor **out) {
    pw_tensor *t = pw_host_calloc(1, sizeof *t);
    *out = NULL;
    if (!t) return PW_ERR_OOM;
    *t = *src;
    t->refcount = 1;
    t->release = NULL;
    t->release_ctx = NULL;
    t->base = NULL;
    *out = t;
    return PW_OK;
}

pw_tensor *pw_tensor_retain(pw_tensor *t) {
    if (t) t->refcount++;
    return t;
}

void pw_tensor_release(pw_tensor *t) {
    if (!t) return;
    assert(t->refcount > 0);
    if (--t->refcount > 0) return;
    if (t->release) {
        /* releasing is cleanup: a failure must not replace the caller's message */
        pw_error_hold();
        t->release(t->release_ctx, t->data);
        pw_error_unhold();
    }
    pw_tensor_release(t->base);
    pw_host_free(t);
}

pw_dtype pw_tensor_dtype(const pw_tensor *t) { return t->dtype; }
int pw_tensor_ndim(const pw_tensor *t) { return t->ndim; }
int64_t pw_tensor_dim(const pw_tensor *t, int i) {
    return (i >= 0 && i < t->ndim) ? t->shape[i] : 1;
}
int64_t pw_tensor_stride(const pw_tensor *t, int i) {
    return (i >= 0 && i < t->ndim) ? t->stride[i] : 0;
}
int64_t pw_tensor_numel(const pw_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}
size_t pw_tensor_nbytes(const pw_tensor *t) {
    return (size_t)(pw_tensor_numel(t) / pw_dtype_block_elems(t->dtype) *
                    pw_dtype_block_bytes(t->dtype));
}
void *pw_tensor_data(const pw_tensor *t) { return t->data; }
pw_device pw_tensor_device(const pw_tensor *t) { return t->device; }
bool pw_tensor_owns_storage(const pw_tensor *t) { return t->release != NULL; }
int pw_tensor_refcount(const pw_tensor *t) { return t->refcount; }

bool pw_tensor_is_contiguous(const pw_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

const char *pw_tensor_describe(const pw_tensor *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "%s[", pw_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %" PRId64 : "%" PRId64, t->shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}
