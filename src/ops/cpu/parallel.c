/* A small persistent thread pool for the kernels.
 *
 * pw_k_parallel_for cuts [0, n) into contiguous shares, more than there
 * are threads. Shares are claimed, not assigned: the caller and every
 * awake worker take the next unclaimed share from an atomic counter until
 * none is left, and the caller then waits only for shares still running.
 * The cut is guided: with P threads, the first P shares hold half of the
 * items, the next P a quarter, the last 2P an eighth each round. A worker
 * the OS has not scheduled (a loaded machine, more threads than cores) or
 * preempts therefore holds up at most the share it took, half of a
 * thread's part at most, and late shares only an eighth: the others
 * take what it has not claimed, instead of the whole job waiting a
 * scheduler time slice for it; and the threads finish within a small
 * share of each other, so the caller seldom waits at the end of a job. Workers are started when first needed (up
 * to pw_get_num_threads() - 1 of them) and kept; between jobs they spin
 * for a short, timed while (PW_K_SPIN_NS), then sleep on a condition
 * variable, so back-to-back kernel launches in a replayed graph do not pay
 * a wake-up each, but a pool between steps, or one whose caller the OS has
 * preempted, gives its core back within tens of microseconds. The caller
 * signals only when a worker sleeps, so a job among spinning workers costs
 * no lock and no system call.
 *
 * Kernels only split work whose elements are computed independently by
 * the same code whatever the split (matmul output columns, attention
 * tokens and heads), so neither the thread count, nor the cut, nor which
 * thread runs a share changes a result bit. */
#include "ops/cpu/kernels.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

/* Most workers the pool starts (threads beyond this run serially). */
#define PW_K_MAX_WORKERS 63
/* How long a worker spins for the next job before it sleeps. The gaps
 * between one layer's kernels are a few microseconds, and waking a sleeping
 * worker costs tens (a futex wake, more in a virtual machine); gaps between
 * steps, or while the OS has preempted the caller, last milliseconds, and a
 * worker spinning through them takes a core from the caller, the server's
 * other threads and everything else on the machine. It used to be 20,000
 * pause instructions, 0.5 to 1.6 ms depending on the CPU's pause latency:
 * a serving process with 2 threads then spent 19% of its samples in the
 * worker's spin loop. Measured by time, not pauses, so it means the same on
 * every CPU. */
#define PW_K_SPIN_NS 50000
/* Pauses between two reads of the clock while spinning. */
#define PW_K_SPIN_CHECK 64
/* Guided cut: GUIDED_ROUNDS shares per thread (see share_begin). Equal
 * shares, four per thread, were measured 6-10% slower at batch 16-64 with
 * 2 threads on a quiet machine (smaller column blocks, more hand-offs); the
 * guided cut keeps half of the work in one large share per thread. Its
 * tail of eighths (rather than quarters) cuts the time a 2-thread SmolLM2
 * decode spends waiting at the end of a job by 40%. */
#define GUIDED_ROUNDS 4
/* Spin iterations the caller waits for running shares before it yields
 * its core (to the thread it is waiting for, when both share one). */
#define PW_K_WAIT_SPINS 2000

/* A ticket is (job generation << 32) | (shares << 16) | next unclaimed
 * share. Claiming is a compare-and-swap on the whole ticket, so a late
 * worker can never claim a share of a job other than the one whose
 * generation it read, and it bounds its claim by that job's own share
 * count. (The count once lived in a separate field, stored before the new
 * ticket was published: a worker holding the finished job's ticket could
 * read the next job's larger count, see its exhausted ticket as claimable,
 * win the compare-and-swap on it before the caller published the new one,
 * and run a share of the next job before that job was set up. ThreadSanitizer
 * caught it in CI.) */
#define TICKET(gen, shares, share) \
    (((uint64_t)(gen) << 32) | ((uint64_t)(uint16_t)(shares) << 16) | (uint16_t)(share))
#define TICKET_GEN(t) ((uint32_t)((t) >> 32))
#define TICKET_SHARES(t) ((uint32_t)(((t) >> 16) & 0xffffu))
#define TICKET_SHARE(t) ((uint32_t)((t) & 0xffffu))
_Static_assert(GUIDED_ROUNDS * (PW_K_MAX_WORKERS + 1) <= 0xffff, "share count fits a ticket");

typedef struct pool {
    pthread_mutex_t lock; /* protects sleeping workers' wake-up */
    pthread_cond_t wake;
    /* Workers that are, or are about to be, waiting on `wake`: raised under
     * `lock` before a worker's last look at the ticket, read by the caller
     * after it publishes one (both sequentially consistent, so either the
     * worker sees the new ticket or the caller sees the sleeper). */
    atomic_int sleepers;
    pthread_mutex_t busy; /* one job at a time; a second caller runs serially */
    pthread_t threads[PW_K_MAX_WORKERS];
    int n_workers;
    _Atomic uint64_t ticket;
    atomic_int done; /* shares finished in the current job */
    int job_threads; /* threads of the current job (for the guided cut) */
    /* The job: written by the caller before it publishes the ticket, read
     * only by a thread holding a claimed share (the caller does not start
     * another job before every share is done). */
    pw_k_range_fn fn;
    void *ctx;
    int64_t n;
} pool;

static pool g_pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                      .wake = PTHREAD_COND_INITIALIZER,
                      .busy = PTHREAD_MUTEX_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* First item of share s (of `shares`, with `threads` threads): the guided
 * cut when shares == GUIDED_ROUNDS * threads, in eighths of n / threads:
 * shares 0 .. P-1 four eighths each, P .. 2P-1 two, 2P .. 4P-1 one each;
 * otherwise equal shares. A function of (n, shares, threads, s) only. */
static int64_t share_begin(int64_t n, int shares, int threads, int s) {
    if (shares != GUIDED_ROUNDS * threads) return n * s / shares;
    const int64_t p = threads;
    int64_t eighths = s <= p ? 4 * (int64_t)s : s <= 2 * p ? 2 * (int64_t)s + 2 * p : s + 4 * p;
    return n * eighths / (8 * p);
}

/* Claims and runs shares of job `gen` until none is left. */
static void run_shares(pool *p, uint32_t gen) {
    uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    for (;;) {
        if (TICKET_GEN(t) != gen) return;
        uint32_t share = TICKET_SHARE(t);
        int shares = (int)TICKET_SHARES(t);
        if (share >= (uint32_t)shares) return;
        if (!atomic_compare_exchange_weak_explicit(&p->ticket, &t, TICKET(gen, shares, share + 1),
                                                   memory_order_acq_rel, memory_order_acquire))
            continue;
        /* Claimed: the job cannot change until this share is done. */
        int64_t begin = share_begin(p->n, shares, p->job_threads, (int)share);
        int64_t end = share_begin(p->n, shares, p->job_threads, (int)share + 1);
        if (begin < end) p->fn(p->ctx, begin, end);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    }
}

/* Waits until the ticket's generation is not `seen`: spins for up to
 * PW_K_SPIN_NS, then sleeps. Returns the new generation. */
static uint32_t wait_for_job(pool *p, uint32_t seen) {
    uint32_t gen;
    int64_t deadline = 0;
    for (int spins = 0;; spins++) {
        gen = TICKET_GEN(atomic_load_explicit(&p->ticket, memory_order_acquire));
        if (gen != seen) return gen;
        if (spins % PW_K_SPIN_CHECK == 0) {
            int64_t t = now_ns();
            if (!deadline) deadline = t + PW_K_SPIN_NS;
            else if (t >= deadline) break;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1);
    while ((gen = TICKET_GEN(atomic_load(&p->ticket))) == seen) pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->lock);
    return gen;
}

static void *worker_main(void *arg) {
    pool *p = &g_pool;
    uint32_t seen = (uint32_t)(uintptr_t)arg; /* the generation when the pool started */
    for (;;) {
        seen = wait_for_job(p, seen);
        run_shares(p, seen);
    }
    return NULL;
}

/* Starts workers until the pool has `want` (called with `busy` held, so no
 * job is in flight and the ticket's generation is the one a new worker
 * waits to see change). */
static void grow_workers(pool *p, int want) {
    if (want > PW_K_MAX_WORKERS) want = PW_K_MAX_WORKERS;
    uintptr_t gen = TICKET_GEN(atomic_load(&p->ticket));
    while (p->n_workers < want) {
        if (pthread_create(&p->threads[p->n_workers], NULL, worker_main, (void *)gen) != 0)
            break; /* fewer workers: the split adapts */
        pthread_detach(p->threads[p->n_workers]);
        p->n_workers++;
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
    /* The pool grows to the largest thread count asked for (workers are
     * kept; a smaller count leaves the extra ones asleep). */
    if (threads > p->n_workers + 1) grow_workers(p, threads - 1);
    if (threads > p->n_workers + 1) threads = p->n_workers + 1;
    if (threads <= 1) {
        pthread_mutex_unlock(&p->busy);
        fn(ctx, 0, n);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->job_threads = threads;
    /* the guided cut where n has room for it, else one item per share
     * (threads <= n) */
    const int shares = n >= (int64_t)GUIDED_ROUNDS * threads ? GUIDED_ROUNDS * threads : (int)n;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t gen = TICKET_GEN(atomic_load_explicit(&p->ticket, memory_order_relaxed)) + 1;
    atomic_store(&p->ticket, TICKET(gen, shares, 0));
    if (atomic_load(&p->sleepers) > 0) {
        /* a sleeper holds `lock` from its last look at the ticket until it
         * waits, so this broadcast cannot fall between the two */
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    run_shares(p, gen);
    for (int spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < shares;) {
        if (++spins < PW_K_WAIT_SPINS) {
            cpu_relax();
        } else {
            sched_yield();
            spins = 0;
        }
    }
    pthread_mutex_unlock(&p->busy);
}

typedef struct cols_split {
    int64_t n, group;
    pw_k_range_fn fn;
    void *ctx;
} cols_split;

static void cols_split_range(void *arg, int64_t begin, int64_t end) {
    const cols_split *c = arg;
    int64_t j1 = end * c->group < c->n ? end * c->group : c->n;
    c->fn(c->ctx, begin * c->group, j1);
}

void pw_k_parallel_cols(int64_t n, int64_t group, pw_k_range_fn fn, void *ctx) {
    cols_split c = {n, group, fn, ctx};
    pw_k_parallel_for((n + group - 1) / group, cols_split_range, &c);
}
