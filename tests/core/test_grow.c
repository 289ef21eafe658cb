/* pw_host_grow, the growth of every dynamic array: capacity doubles from a
 * small minimum, jumps straight to a larger need, stops at the caller's
 * count bound and at the byte bound (so neither the count nor count * size
 * can wrap), and a failure reports PW_ERR_OOM with a message while leaving
 * the array and its capacity as they were. */
#include "internal.h"
#include "test_util.h"

#include <stdint.h>

static void test_first_growth(void) {
    size_t cap = 0;
    int *a = pw_host_grow(NULL, sizeof *a, &cap, 1, INT_MAX);
    CHECK(a != NULL);
    CHECK_EQ_INT(cap, 16); /* 64 bytes of ints */
    pw_host_free(a);

    cap = 0;
    char *b = pw_host_grow(NULL, 1, &cap, 1, SIZE_MAX);
    CHECK(b != NULL);
    CHECK_EQ_INT(cap, 64);
    pw_host_free(b);

    typedef struct big { char bytes[200]; } big;
    cap = 0;
    big *c = pw_host_grow(NULL, sizeof *c, &cap, 1, INT_MAX);
    CHECK(c != NULL);
    CHECK_EQ_INT(cap, 4); /* at least 4 elements, however large */
    pw_host_free(c);

    /* need 0 still gives a block: NULL only ever means failure */
    cap = 0;
    void *d = pw_host_grow(NULL, 8, &cap, 0, SIZE_MAX);
    CHECK(d != NULL);
    CHECK(cap > 0);
    pw_host_free(d);

    /* a zero element size is taken as 1, not divided by */
    cap = 0;
    void *e = pw_host_grow(NULL, 0, &cap, 3, SIZE_MAX);
    CHECK(e != NULL);
    CHECK(cap >= 3);
    pw_host_free(e);
}

static void test_doubles_and_keeps_contents(void) {
    size_t cap = 0;
    int64_t *a = NULL;
    size_t n = 0, reallocs = 0, last_cap = 0;
    for (; n < 100000; n++) {
        if (n == cap) {
            int64_t *g = pw_host_grow(a, sizeof *a, &cap, n + 1, INT_MAX);
            CHECK(g != NULL);
            if (!g) break;
            a = g;
            if (last_cap) CHECK_EQ_INT(cap, last_cap * 2);
            last_cap = cap;
            reallocs++;
        }
        a[n] = (int64_t)n * 7;
    }
    bool intact = true;
    for (size_t i = 0; i < n; i++) intact &= a[i] == (int64_t)i * 7;
    CHECK(intact);
    CHECK_EQ_INT(reallocs, 15); /* 8, 16, ..., 131072: geometric, not one per push */
    pw_host_free(a);
}

static void test_fits_is_a_no_op(void) {
    size_t cap = 0;
    int *a = pw_host_grow(NULL, sizeof *a, &cap, 10, INT_MAX);
    CHECK(a != NULL);
    size_t before = cap;
    CHECK(pw_host_grow(a, sizeof *a, &cap, before, INT_MAX) == a);
    CHECK(pw_host_grow(a, sizeof *a, &cap, 1, INT_MAX) == a);
    CHECK_EQ_INT(cap, before);
    pw_host_free(a);
}

static void test_jumps_to_a_larger_need(void) {
    size_t cap = 0;
    char *a = pw_host_grow(NULL, 1, &cap, 10, SIZE_MAX);
    CHECK(a != NULL);
    CHECK_EQ_INT(cap, 64);
    a = pw_host_grow(a, 1, &cap, 1000, SIZE_MAX);
    CHECK(a != NULL);
    CHECK_EQ_INT(cap, 1000); /* more than double: exactly what is needed */
    pw_host_free(a);
}

static void test_count_bound(void) {
    size_t cap = 0;
    int *a = pw_host_grow(NULL, sizeof *a, &cap, 5, 10);
    CHECK(a != NULL);
    CHECK_EQ_INT(cap, 10); /* the minimum of 16 ints, clamped to the bound */
    /* past the bound: refused, nothing changed */
    pw_clear_error();
    CHECK(pw_host_grow(a, sizeof *a, &cap, 11, 10) == NULL);
    CHECK(strstr(pw_last_error(), "out of host memory") != NULL);
    CHECK(strstr(pw_last_error(), "limit of 10 elements") != NULL);
    CHECK_EQ_INT(cap, 10);
    a[9] = 42; /* still ours */
    CHECK_EQ_INT(a[9], 42);

    /* doubling would pass the bound: it takes what is left */
    size_t cap2 = 0;
    int *b = pw_host_grow(NULL, sizeof *b, &cap2, 4, 4);
    CHECK(b != NULL);
    CHECK_EQ_INT(cap2, 4);
    size_t cap3 = 3;
    int *d = pw_host_grow(NULL, sizeof *d, &cap3, 4, 5);
    CHECK(d != NULL);
    CHECK_EQ_INT(cap3, 5); /* 3 * 2 > 5: the bound, not 6 */
    pw_host_free(d);
    pw_host_free(b);
    pw_host_free(a);
}

/* An int count at INT_MAX cannot grow: the call refuses before touching
 * the (here fake) block, instead of wrapping the count. */
static void test_int_count_at_its_limit(void) {
    int fake;
    size_t cap = INT_MAX;
    pw_clear_error();
    CHECK(pw_host_grow(&fake, sizeof(int), &cap, (size_t)INT_MAX + 1, INT_MAX) == NULL);
    CHECK_EQ_INT(pw_last_error()[0] != 0, 1);
    CHECK_EQ_INT(cap, INT_MAX);
}

/* count * elem_size would wrap size_t (or pass PTRDIFF_MAX): refused. */
static void test_byte_bound(void) {
    int fake;
    size_t elem = SIZE_MAX / 2, cap = 1;
    pw_clear_error();
    CHECK(pw_host_grow(&fake, elem, &cap, 3, SIZE_MAX) == NULL);
    CHECK(strstr(pw_last_error(), "out of host memory") != NULL);
    CHECK_EQ_INT(cap, 1);

    size_t big = (size_t)1 << 40;
    cap = 0;
    CHECK(pw_host_grow(NULL, big, &cap, (size_t)1 << 24, SIZE_MAX) == NULL);
    CHECK_EQ_INT(cap, 0);
}

/* The allocation itself fails (injected): NULL, PW_ERR_OOM's message, and
 * the old block intact. */
static void test_allocation_failure(void) {
    size_t cap = 0;
    int *a = pw_host_grow(NULL, sizeof *a, &cap, 16, INT_MAX);
    CHECK(a != NULL);
    for (int i = 0; i < 16; i++) a[i] = i;
    pw_clear_error();
    pw_host_fail_nth(1);
    CHECK(pw_host_grow(a, sizeof *a, &cap, 17, INT_MAX) == NULL);
    pw_host_fail_nth(0);
    CHECK(strstr(pw_last_error(), "out of host memory") != NULL);
    CHECK_EQ_INT(cap, 16);
    bool intact = true;
    for (int i = 0; i < 16; i++) intact &= a[i] == i;
    CHECK(intact);
    /* and it grows once memory is back */
    int *g = pw_host_grow(a, sizeof *a, &cap, 17, INT_MAX);
    CHECK(g != NULL);
    if (g) a = g;
    CHECK_EQ_INT(cap, 32);
    pw_host_free(a);
}

int main(void) {
    pw_log_set_level(PW_LOG_ERROR);
    test_first_growth();
    test_doubles_and_keeps_contents();
    test_fits_is_a_no_op();
    test_jumps_to_a_larger_need();
    test_count_bound();
    test_int_count_at_its_limit();
    test_byte_bound();
    test_allocation_failure();
    return pw_test_finish("core_grow");
}
