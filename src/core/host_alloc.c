#include "internal.h"
#include "pw_testing.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
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

/* The smallest capacity a growing array starts from. */
#define GROW_MIN_COUNT 4
#define GROW_MIN_BYTES 64

void *pw_host_grow(void *items, size_t elem_size, size_t *cap, size_t need, size_t max_count) {
    if (items && need <= *cap) return items;
    if (elem_size == 0) elem_size = 1;
    /* Both bounds at once: the count stays within the caller's type, and
     * count * elem_size within PTRDIFF_MAX (so it cannot wrap). */
    size_t limit = (size_t)PTRDIFF_MAX / elem_size;
    if (max_count < limit) limit = max_count;
    if (need > limit) {
        pw_error(PW_ERR_OOM,
                 "out of host memory: an array of %zu elements of %zu bytes is past its limit of "
                 "%zu elements",
                 need, elem_size, limit);
        return NULL;
    }
    size_t grown;
    if (*cap > limit / 2) {
        grown = limit; /* doubling would pass the limit: take what is left */
    } else {
        grown = *cap * 2;
        size_t min = GROW_MIN_BYTES / elem_size;
        if (min < GROW_MIN_COUNT) min = GROW_MIN_COUNT;
        if (grown < min) grown = min;
        if (grown > limit) grown = limit;
    }
    if (grown < need) grown = need;
    void *p = pw_host_realloc(items, grown * elem_size);
    if (!p) return NULL;
    *cap = grown;
    return p;
}
