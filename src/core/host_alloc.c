#include "internal.h"
#include "pw_testing.h"

#include <stdatomic.h>
#include <string.h>

/* Fault injection for out-of-memory tests: the n-th call fails. */
static atomic_llong fail_countdown = 0;

static bool should_fail(void) {
    long long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (PW_LIKELY(n == 0)) return false;
    n = atomic_fetch_sub(&fail_countdown, 1);
    return n == 1;
}

void pw_host_fail_nth(int64_t n) { atomic_store(&fail_countdown, (long long)n); }

void *pw_host_alloc(size_t bytes) {
    void *p = should_fail() ? NULL : malloc(bytes ? bytes : 1);
    if (!p) pw_error(PW_ERR_OOM, "out of host memory allocating %zu bytes", bytes);
    return p;
}

void *pw_host_calloc(size_t n, size_t size) {
    void *p = should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p) pw_error(PW_ERR_OOM, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *pw_host_realloc(void *old, size_t bytes) {
    void *p = should_fail() ? NULL : realloc(old, bytes ? bytes : 1);
    if (!p) pw_error(PW_ERR_OOM, "out of host memory growing a buffer to %zu bytes", bytes);
    return p;
}

void pw_host_free(void *p) { free(p); }

char *pw_host_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = pw_host_alloc(n);
    if (p) memcpy(p, s, n);
    return p;
}
