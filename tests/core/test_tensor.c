/* Tensors, values, status names, log levels. */
#include "test_util.h"
#include "core/tensor.h"

#include <stdlib.h>

static void test_tensor_basics(void) {
    pw_pool *pool;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "t", &pool));
    int64_t shape[2] = {6, 64};
    pw_tensor *t;
    CHECK_OK(pw_tensor_new(pool, PW_F32, 2, shape, &t));
    CHECK_EQ_INT(pw_tensor_numel(t), 384);
    CHECK_EQ_INT(pw_tensor_nbytes(t), 384 * 4);
    CHECK_EQ_INT(pw_tensor_stride(t, 0), 64);
    CHECK_EQ_INT(pw_tensor_stride(t, 1), 1);
    CHECK(pw_tensor_is_contiguous(t));
    CHECK(pw_tensor_owns_storage(t));
    CHECK(pw_tensor_pool(t) == pool);
    CHECK(pw_tensor_device(t) == PW_DEVICE_CPU);
    char buf[64];
    CHECK_STREQ(pw_tensor_describe(t, buf, sizeof buf), "f32[6, 64]");

    pw_tensor *v;
    CHECK_OK(pw_tensor_slice0(t, 2, 5, &v));
    CHECK_EQ_INT(pw_tensor_dim(v, 0), 3);
    CHECK((char *)pw_tensor_data(v) == (char *)pw_tensor_data(t) + 2 * 64 * 4);
    CHECK(!pw_tensor_owns_storage(v));
    CHECK_EQ_INT(pw_tensor_refcount(t), 2); /* the view keeps its base alive */
    pw_tensor *bad_view;
    CHECK_ERR(pw_tensor_slice0(t, 4, 7, &bad_view), PW_ERR_INVALID_ARG, "out of range");
    CHECK(bad_view == NULL);

    pw_pool_stats st;
    pw_tensor_release(t);
    pw_pool_get_stats(pool, &st);
    CHECK(st.allocated > 0);
    pw_tensor *w;
    CHECK_OK(pw_tensor_slice0(t, 0, 1, &w)); /* still valid through the view */
    pw_tensor_release(w);
    pw_tensor_release(v);
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.allocated, 0);

    /* weak alias: same data, no ownership, no keep-alive */
    CHECK_OK(pw_tensor_new(pool, PW_F32, 2, shape, &t));
    pw_tensor *alias;
    CHECK_OK(pw_tensor_weak_alias(t, &alias));
    CHECK(pw_tensor_data(alias) == pw_tensor_data(t));
    CHECK_EQ_INT(pw_tensor_refcount(t), 1);
    pw_tensor_release(alias);
    pw_tensor_release(t);

    /* quantized shapes must be whole blocks */
    int64_t q[2] = {4, 48};
    CHECK_ERR(pw_tensor_new(pool, PW_Q4_1, 2, q, &t), PW_ERR_INVALID_ARG, "multiple of the q4_1 block");
    int64_t q2[2] = {4, 64};
    CHECK_OK(pw_tensor_new(pool, PW_Q4_1, 2, q2, &t));
    CHECK_EQ_INT(pw_tensor_nbytes(t), 4 * 2 * 20);
    pw_tensor_release(t);
    int64_t bad[5] = {1, 1, 1, 1, 1};
    CHECK_ERR(pw_tensor_new(pool, PW_F32, 5, bad, &t), PW_ERR_INVALID_ARG, "at most 4");
    int64_t huge[1] = {(int64_t)1 << 62};
    CHECK_ERR(pw_tensor_new(pool, PW_F32, 1, huge, &t), PW_ERR_INVALID_ARG, "byte size overflows");
    int64_t neg[1] = {-3};
    CHECK_ERR(pw_tensor_new(pool, PW_F32, 1, neg, &t), PW_ERR_INVALID_ARG, "negative");
    pw_pool_free(pool);
}

static void test_values(void) {
    pw_pool *pool;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "v", &pool));
    int64_t shape[1] = {16};
    pw_tensor *t;
    CHECK_OK(pw_tensor_new(pool, PW_I32, 1, shape, &t));
    pw_tuple *tup;
    CHECK_OK(pw_tuple_new(3, &tup));
    /* the same tensor in two slots: freed once, when the tuple goes */
    pw_tuple_set(tup, 0, pw_value_tensor(pw_tensor_retain(t)));
    pw_tuple_set(tup, 1, pw_value_tensor(t));
    pw_tuple_set(tup, 2, pw_value_int(7));
    CHECK_EQ_INT(pw_tensor_refcount(t), 2);
    pw_value item = pw_value_retain(pw_tuple_get(tup, 0));
    pw_tuple_release(tup);
    CHECK_EQ_INT(pw_tensor_refcount(t), 1);
    pw_value_release(item);
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.allocated, 0);
    pw_pool_free(pool);
}

static void test_names(void) {
    CHECK_STREQ(pw_status_name(PW_ERR_PARSE), "PW_ERR_PARSE");
    CHECK_STREQ(pw_status_name((pw_status)999), "PW_ERR_UNKNOWN");
    for (int i = 0; i < PW_STATUS_COUNT_; i++) CHECK(pw_status_name((pw_status)i)[0] == 'P');
    pw_log_level l;
    CHECK_OK(pw_log_level_parse("debug", &l));
    CHECK_EQ_INT(l, PW_LOG_DEBUG);
    CHECK_ERR(pw_log_level_parse("loud", &l), PW_ERR_INVALID_ARG, "unknown log level 'loud'");
    pw_device d;
    CHECK_OK(pw_device_parse("cpu", &d));
    CHECK_ERR(pw_device_parse("tpu", &d), PW_ERR_INVALID_ARG, "unknown device 'tpu'");
    CHECK_STREQ(pw_dtype_name(PW_BF16), "bf16");
    CHECK_EQ_INT(pw_dtype_row_bytes(PW_Q8_0, 64), 68);
    pw_clear_error();
    CHECK_STREQ(pw_last_error(), "");
}

/* Core frees owned storage through the callback its allocator set; a pool
 * tensor names its pool, a tensor from another allocator does not. */
typedef struct counting_alloc {
    int releases;
    void *last;
} counting_alloc;

static void counting_release(void *ctx, void *data) {
    counting_alloc *c = ctx;
    c->releases++;
    c->last = data;
    free(data);
}

static void test_release_callback(void) {
    int64_t shape[2] = {3, 4};
    pw_tensor *t;
    size_t bytes = 0;
    CHECK_OK(pw_tensor_new_header(PW_F32, 2, shape, &t, &bytes));
    CHECK_EQ_INT(bytes, 48);
    CHECK(!pw_tensor_owns_storage(t));
    counting_alloc c = {0};
    void *data = malloc(bytes);
    pw_tensor_adopt(t, data, PW_DEVICE_CPU, counting_release, &c);
    CHECK(pw_tensor_owns_storage(t));
    CHECK(pw_tensor_pool(t) == NULL); /* not a pool block */
    pw_tensor *row;
    CHECK_OK(pw_tensor_slice0(t, 1, 2, &row));
    CHECK(!pw_tensor_owns_storage(row));
    pw_tensor_release(t);
    CHECK_EQ_INT(c.releases, 0); /* the slice keeps it alive */
    pw_tensor_release(row);
    CHECK_EQ_INT(c.releases, 1);
    CHECK(c.last == data);
    CHECK_ERR(pw_tensor_new_header(PW_F32, 5, shape, &t, &bytes), PW_ERR_INVALID_ARG,
              "dimensions");

    pw_pool *pool;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "t", &pool));
    CHECK_OK(pw_tensor_new(pool, PW_F32, 2, shape, &t));
    CHECK(pw_tensor_pool(t) == pool);
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.n_live_blocks, 1);
    pw_tensor_release(t);
    pw_pool_get_stats(pool, &st);
    CHECK_EQ_INT(st.n_live_blocks, 0);
    pw_pool_free(pool);
}

int main(void) {
    test_tensor_basics();
    test_values();
    test_names();
    test_release_callback();
    return pw_test_finish("core_tensor");
}
