/* The error message's rules (include/piecewise.h, pw_last_error): a failing
 * call leaves its own message, context prepends to it, and cleanup (void
 * functions, or code between pw_error_hold and pw_error_unhold) never
 * replaces the message of the error being returned. */
#include "internal.h"
#include "test_util.h"

#include <pthread.h>
#include <string.h>

static void test_failure_sets_message(void) {
    pw_clear_error();
    pw_tensor *t = NULL;
    int64_t shape[1] = {4};
    CHECK_ERR(pw_tensor_new(NULL, PW_F32, 1, shape, &t), PW_ERR_INVALID_ARG, "pw_tensor_new: pool is NULL");
    /* a later failure replaces the message whole, it does not append */
    pw_device d;
    CHECK_ERR(pw_device_parse("tpu", &d), PW_ERR_INVALID_ARG, "unknown device 'tpu'");
    CHECK(strstr(pw_last_error(), "pool is NULL") == NULL);
}

static void test_context_prepends(void) {
    CHECK_EQ_INT(pw_error(PW_ERR_IO, "cannot open '%s'", "x"), PW_ERR_IO);
    CHECK_EQ_INT(pw_error_context(PW_ERR_IO, "loading %d", 7), PW_ERR_IO);
    CHECK_STREQ(pw_last_error(), "loading 7: cannot open 'x'");
}

static void test_hold_keeps_first_message(void) {
    pw_error(PW_ERR_PARSE, "the real error");
    pw_error_hold();
    CHECK_EQ_INT(pw_error(PW_ERR_OOM, "cleanup failed"), PW_ERR_OOM);
    CHECK_EQ_INT(pw_error_context(PW_ERR_OOM, "while cleaning"), PW_ERR_OOM);
    pw_error_hold(); /* holds nest */
    pw_error(PW_ERR_IO, "inner cleanup failed");
    pw_error_unhold();
    pw_error(PW_ERR_IO, "after the inner hold");
    pw_error_unhold();
    CHECK_STREQ(pw_last_error(), "the real error");
    /* released: errors report again */
    pw_error(PW_ERR_IO, "next error");
    CHECK_STREQ(pw_last_error(), "next error");
}

/* Void cleanup functions leave the message alone, even when their own
 * internals fail (a tensor whose block was already given back). */
static void test_cleanup_keeps_message(void) {
    pw_pool *pool = NULL, *gpool = NULL;
    pw_stream *s = NULL;
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "eager", &pool));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graph", &gpool));
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &s));
    int64_t shape[1] = {16};
    pw_tensor *a = NULL, *b = NULL;
    CHECK_OK(pw_tensor_new(pool, PW_F32, 1, shape, &a));
    CHECK_OK(pw_tensor_new(pool, PW_F32, 1, shape, &b));
    CHECK_OK(pw_stream_begin_capture(s, gpool));

    pw_error(PW_ERR_FORMAT, "the error being returned");
    pw_stream_abort_capture(s);
    pw_value_release(pw_value_tensor(a));
    /* b's block goes back twice: the second release inside pw_tensor_release fails */
    CHECK_OK(pw_pool_release(pool, pw_tensor_data(b)));
    pw_error(PW_ERR_FORMAT, "the error being returned");
    pw_tensor_release(b);
    pw_stream_free(s);
    pw_pool_free(gpool);
    pw_pool_free(pool);
    CHECK_STREQ(pw_last_error(), "the error being returned");
}

/* The message is per thread. */
static void *fail_in_thread(void *arg) {
    char *seen = arg;
    pw_error(PW_ERR_IO, "other thread");
    snprintf(seen, 64, "%s", pw_last_error());
    return NULL;
}

static void test_thread_local(void) {
    pw_error(PW_ERR_PARSE, "main thread");
    pthread_t t;
    char seen[64] = "";
    CHECK(pthread_create(&t, NULL, fail_in_thread, seen) == 0);
    pthread_join(t, NULL);
    CHECK_STREQ(seen, "other thread");
    CHECK_STREQ(pw_last_error(), "main thread");
}

int main(void) {
    test_failure_sets_message();
    test_context_prepends();
    test_hold_keeps_first_message();
    test_cleanup_keeps_message();
    test_thread_local();
    return pw_test_finish("core_error_message");
}
