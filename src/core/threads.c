/* Short jobs split over threads of their own, outside the kernels' pool:
 * the loader's copies of weights into new buffers. Their cost is mostly
 * the kernel's work of faulting in and clearing fresh anonymous pages
 * (about 1 GB/s on one core of the virtual machines measured), which runs
 * on the faulting thread, so two threads take about half the time. They
 * do not use the kernels' pool: its size is the caller's thread count for
 * matrix products (1 by default), and a load happens once, before any
 * product runs. */
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

int pw_host_threads(void) {
    int n = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n < 1) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 && online < INT_MAX ? (int)online : 1;
    }
    return n < PW_HOST_THREADS_MAX ? n : PW_HOST_THREADS_MAX;
}

typedef struct {
    pw_range_fn fn;
    void *ctx;
    int part;
    int64_t begin, end;
} split_part;

static void *run_part(void *arg) {
    split_part *p = arg;
    p->fn(p->ctx, p->part, p->begin, p->end);
    return NULL;
}

void pw_run_split(int64_t n, int threads, pw_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (threads > PW_HOST_THREADS_MAX) threads = PW_HOST_THREADS_MAX;
    if (threads > n) threads = (int)n;
    if (threads <= 1) {
        fn(ctx, 0, 0, n);
        return;
    }
    split_part part[PW_HOST_THREADS_MAX];
    pthread_t tid[PW_HOST_THREADS_MAX];
    bool started[PW_HOST_THREADS_MAX] = {false};
    for (int i = 0; i < threads; i++)
        part[i] = (split_part){fn, ctx, i, n * i / threads, n * (i + 1) / threads};
    /* parts 1.. on new threads, part 0 here; a part whose thread could not
     * start runs here too */
    for (int i = 1; i < threads; i++)
        started[i] = pthread_create(&tid[i], NULL, run_part, &part[i]) == 0;
    run_part(&part[0]);
    for (int i = 1; i < threads; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            run_part(&part[i]);
    }
}
