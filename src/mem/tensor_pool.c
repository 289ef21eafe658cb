/* Tensors whose storage is a pool block. The pool hands the tensor a
 * release callback with the block, so the tensor (core) gives the block
 * back without knowing pools exist. */
#include "mem/pool_internal.h"
#include "core/tensor.h"

/* Runs inside the tensor's error hold: a failure is logged, the caller's
 * message stays. */
static void release_to_pool(void *pool, void *data) { (void)pw_pool_release(pool, data); }

pw_status pw_tensor_new(pw_pool *pool, pw_dtype dtype, int ndim, const int64_t *shape,
                        pw_tensor **out) {
    *out = NULL;
    if (!pool) return pw_error(PW_ERR_INVALID_ARG, "pw_tensor_new: pool is NULL");
    pw_tensor *t;
    size_t bytes;
    PW_TRY(pw_tensor_new_header(dtype, ndim, shape, &t, &bytes));
    void *data = NULL;
    pw_status s = pw_pool_alloc(pool, bytes, &data);
    if (s != PW_OK) {
        pw_tensor_release(t); /* no storage yet: frees the header only */
        return s;
    }
    pw_tensor_adopt(t, data, pw_pool_device(pool), release_to_pool, pool);
    *out = t;
    return PW_OK;
}

pw_pool *pw_tensor_pool(const pw_tensor *t) {
    return t->release == release_to_pool ? t->release_ctx : NULL;
}
