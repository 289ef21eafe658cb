/* pw_run_split, the host's short jobs over threads (a load's copies): the
 * parts cover [0, n) once each, contiguous and in order of their index, as
 * the header says; at most PW_HOST_THREADS_MAX and at most n of them; each
 * part on a thread of its own beyond the first; nothing runs for n <= 0. */
#include "internal.h"
#include "test_util.h"

#include <pthread.h>
#include <stdatomic.h>

#define ITEMS 1000

typedef struct {
    atomic_int hits[ITEMS];
    atomic_int calls;
    int64_t begin[PW_HOST_THREADS_MAX + 4], end[PW_HOST_THREADS_MAX + 4];
    pthread_t thread[PW_HOST_THREADS_MAX + 4];
    int bad_part;
} record;

static void mark(void *ctx, int part, int64_t begin, int64_t end) {
    record *r = ctx;
    atomic_fetch_add(&r->calls, 1);
    if (part < 0 || part >= PW_HOST_THREADS_MAX) {
        r->bad_part = 1;
        return;
    }
    r->begin[part] = begin, r->end[part] = end;
    r->thread[part] = pthread_self();
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&r->hits[i], 1);
}

static void check_split(int64_t n, int threads) {
    static record r;
    memset(&r, 0, sizeof r);
    pw_run_split(n, threads, mark, &r);
    int parts = threads < 1 ? 1 : threads;
    if (parts > PW_HOST_THREADS_MAX) parts = PW_HOST_THREADS_MAX;
    if (parts > n) parts = (int)n;
    if (n <= 0) {
        CHECK(atomic_load(&r.calls) == 0);
        return;
    }
    CHECK(!r.bad_part);
    CHECK(atomic_load(&r.calls) == parts);
    for (int64_t i = 0; i < n; i++) CHECK(atomic_load(&r.hits[i]) == 1);
    for (int p = 0; p < parts; p++) {
        CHECK(r.begin[p] == n * p / parts);
        CHECK(r.end[p] == n * (p + 1) / parts);
        CHECK(r.end[p] > r.begin[p]);
    }
    CHECK(pthread_equal(r.thread[0], pthread_self()));
    for (int p = 1; p < parts; p++) CHECK(!pthread_equal(r.thread[p], pthread_self()));
}

int main(void) {
    int t = pw_host_threads();
    CHECK(t >= 1 && t <= PW_HOST_THREADS_MAX);
    check_split(0, 4);
    check_split(-3, 4);
    check_split(1, 4);    /* fewer items than threads: one part */
    check_split(3, 8);    /* three parts */
    check_split(ITEMS, 1); /* the caller alone */
    check_split(ITEMS, 0);
    check_split(ITEMS, 2);
    check_split(ITEMS, 3); /* uneven parts */
    check_split(ITEMS, PW_HOST_THREADS_MAX);
    check_split(ITEMS, 100); /* capped */
    check_split(ITEMS, t);
    return pw_test_finish("core_threads");
}
