/* A small persistent thread pool for the kernels.
 *
 * pw_k_parallel_for splits [0, n) into one contiguous range per thread and
 * runs them at once, the calling thread taking the first. Workers are
 * started on first use (pw_get_num_threads() - 1 of them) and kept; between
 * jobs they spin for a short while, then sleep on a condition variable, so
 * back-to-back kernel launches in a replayed graph do not pay a wake-up
 * each but an idle pool costs nothing.
 *
 * Kernels only split work whose elements are computed independently by
 * the same code whatever the split (matmul output columns, attention
 * tokens), so the thread count never changes a result bit. */
#include "backend/cpu/kernels/kernels.h"

#include <pthread.h>
#include <stdatomic.h>

/* Most workers the pool starts (threads beyond this run serially). */
#define PW_K_MAX_WORKERS 63
/* Spin iterations a worker waits for the next job before sleeping. */
#define PW_K_SPIN_ITERS 20000

typedef struct pool {
    pthread_mutex_t lock; /* protects sleeping workers' wake-up */
    pthread_cond_t wake;
    pthread_mutex_t busy; /* one job at a time; a second caller runs serially */
    pthread_t threads[PW_K_MAX_WORKERS];
    int n_workers;
    atomic_uint generation; /* bumped per job */
    atomic_int remaining;   /* workers still running the current job */
    int participants;       /* threads in the current job, caller included */
    pw_k_range_fn fn;
    void *ctx;
    int64_t n;
} pool;

static pool g_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                      PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static int g_pool_target;
/* The generation before the first job: a worker that starts late must not
 * mistake the first job's bump for its starting point. */
static unsigned g_start_generation;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void run_share(pool *p, int index) {
    int64_t begin = p->n * index / p->participants;
    int64_t end = p->n * (index + 1) / p->participants;
    if (begin < end) p->fn(p->ctx, begin, end);
}

static void *worker_main(void *arg) {
    pool *p = &g_pool;
    int id = (int)(intptr_t)arg; /* 1-based: the caller is share 0 */
    unsigned seen = g_start_generation;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen) {
            if (++spins < PW_K_SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->lock);
            while (atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->lock);
            pthread_mutex_unlock(&p->lock);
        }
        seen = gen;
        if (id < p->participants) run_share(p, id);
        atomic_fetch_sub_explicit(&p->remaining, 1, memory_order_release);
    }
    return NULL;
}

static void start_workers(void) {
    int want = g_pool_target - 1;
    g_start_generation = atomic_load(&g_pool.generation);
    if (want > PW_K_MAX_WORKERS) want = PW_K_MAX_WORKERS;
    for (int i = 0; i < want; i++) {
        if (pthread_create(&g_pool.threads[i], NULL, worker_main, (void *)(intptr_t)(i + 1)) != 0)
            break; /* fewer workers: the split adapts */
        pthread_detach(g_pool.threads[i]);
        g_pool.n_workers++;
    }
}

int pw_k_parallel_threads(void) {
    int t = pw_get_num_threads();
    return t < 1 ? 1 : (t > PW_K_MAX_WORKERS + 1 ? PW_K_MAX_WORKERS + 1 : t);
}

void pw_k_parallel_for(int64_t n, pw_k_range_fn fn, void *ctx) {
    int threads = pw_k_parallel_threads();
    if (threads > n) threads = (int)n;
    pool *p = &g_pool;
    if (threads <= 1 || pthread_mutex_trylock(&p->busy) != 0) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    /* The pool is sized by the thread count at first parallel use. */
    if (!g_pool_target) g_pool_target = threads;
    pthread_once(&g_pool_once, start_workers);
    if (threads > p->n_workers + 1) threads = p->n_workers + 1;
    if (threads <= 1) {
        pthread_mutex_unlock(&p->busy);
        fn(ctx, 0, n);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->participants = threads;
    atomic_store(&p->remaining, p->n_workers);
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    run_share(p, 0);
    while (atomic_load_explicit(&p->remaining, memory_order_acquire) > 0) cpu_relax();
    pthread_mutex_unlock(&p->busy);
}
