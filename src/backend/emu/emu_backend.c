/* The emulated discrete device (see emu_backend.h and docs/cuda.md).
 *
 * Memory: every device allocation and every page-locked host buffer is a
 * mapping of its own, listed in one region table. Device regions are
 * PROT_NONE except while the device worker runs queued work; the kernels
 * then see the same addresses the host was given, so pointers stored in
 * device memory (the attention metadata) need no translation. A fault on a
 * region is reported by the SIGSEGV handler, which names the rule broken
 * and the allocation.
 *
 * Work: each stream queues what it is given; pw_stream_synchronize hands
 * the queue to the single device worker and waits. One flush runs at a
 * time, so the window in which device memory is readable belongs to it.
 *
 * One mutex (emu_lock) guards the region table, the streams' queues, the
 * live graphs and the pending host ranges; exec_lock serializes flushes. */
#include "backend/emu/emu_backend.h"
#include "backend/stream_backend.h"
#include "mem/pool_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EMU_MAX_REGIONS 4096
/* A queue this long is run without waiting for a synchronize, to bound
 * memory: the device may always finish work early. */
#define EMU_QUEUE_FLUSH_ITEMS ((size_t)1 << 16)

/* ---- the rules (names shared with docs/cuda.md and the planted-fault tests) ----------- */

#define RULE_HOST_ACCESS "host-access-to-device-memory"
#define RULE_MISSING_SYNC "host-read-before-sync"
#define RULE_READ_BEFORE_REPLAY "host-read-before-replay"
#define RULE_PAGEABLE_COPY "pageable-copy-in-capture"
#define RULE_HANDLE_IN_CAPTURE "library-handle-in-capture"
#define RULE_FREE_QUEUED "free-while-queued"
#define RULE_FREE_GRAPH "free-while-graph-live"
#define RULE_KERNEL_HOST_ARG "kernel-reads-host-memory"
#define RULE_COPY_SIDE "copy-side"

/* ---- regions ----------------------------------------------------------------------------- */

typedef struct emu_region {
    char *_Atomic base; /* NULL: free slot (read by the fault handler without the lock) */
    size_t size;
    bool pinned; /* page-locked host memory; otherwise device memory */
    atomic_bool open; /* made readable during the current flush */
} emu_region;

static emu_region regions[EMU_MAX_REGIONS];
static _Atomic size_t regions_used; /* high-water mark of slots */
static pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t page_bytes;

static atomic_ullong stat_flushes, stat_items, stat_instantiated, stat_updated, stat_replays,
    stat_regions;

static const emu_region *find_region(const void *p) {
    size_t n = atomic_load(&regions_used);
    for (size_t i = 0; i < n; i++) {
        char *b = atomic_load_explicit(&regions[i].base, memory_order_acquire);
        if (b && (const char *)p >= b && (const char *)p < b + regions[i].size) return &regions[i];
    }
    return NULL;
}

static bool is_device(const void *p, size_t bytes) {
    const emu_region *r = find_region(p);
    return r && !r->pinned && bytes <= r->size - (size_t)((const char *)p - r->base);
}

static bool is_pinned(const void *p, size_t bytes) {
    const emu_region *r = find_region(p);
    return r && r->pinned && bytes <= r->size - (size_t)((const char *)p - r->base);
}

/* ---- queued work ------------------------------------------------------------------------------ */

typedef enum item_kind { ITEM_KERNEL, ITEM_COPY, ITEM_MEMSET } item_kind;

typedef struct emu_item {
    item_kind kind;
    const pw_kernel *k;
    uint32_t argbytes;
    pw_copy_kind copy;
    void *dst;
    const void *src;
    size_t bytes;
    int value;
    void *snapshot;      /* a pageable h2d source, read when the copy was issued */
    const void *graph;   /* the graph a replayed item came from */
    _Alignas(16) unsigned char args[PW_MAX_KERNEL_ARG_BYTES];
} emu_item;

typedef struct emu_list {
    emu_item *v;
    size_t n, cap;
} emu_list;

static void list_clear(emu_list *l) {
    for (size_t i = 0; i < l->n; i++) pw_host_free(l->v[i].snapshot);
    l->n = 0;
}

static void list_free(emu_list *l) {
    list_clear(l);
    pw_host_free(l->v);
    memset(l, 0, sizeof *l);
}

static emu_item *list_push(emu_list *l) {
    if (l->n == l->cap) {
        size_t cap = l->cap;
        emu_item *v = pw_host_grow(l->v, sizeof *v, &cap, l->n + 1, SIZE_MAX);
        if (!v) return NULL;
        l->v = v;
        l->cap = cap;
    }
    emu_item *it = &l->v[l->n++];
    memset(it, 0, offsetof(emu_item, args));
    return it;
}

typedef struct emu_stream {
    emu_list queue;   /* issued, not yet run */
    emu_list capture; /* the open capture's nodes */
    bool capturing;
    bool handle_ready; /* the per-stream library handle (cuBLAS on CUDA) */
    struct emu_stream *next;
} emu_stream;

typedef struct emu_graph {
    emu_list nodes;
    struct emu_graph *next;
} emu_graph;

static emu_stream *streams;  /* every live stream */
static emu_graph *graphs;    /* every live graph */
static emu_list *running;    /* the queue the worker is running, if any */

/* Host ranges (in page-locked buffers) that queued or captured work will
 * write: PROT_NONE until that work has run, so a host read before the
 * synchronization faults instead of reading stale data. */
typedef struct pending_range {
    char *lo, *hi;
    const void *owner; /* the stream (queued) or the graph (captured) that writes it */
    bool captured;
    struct pending_range *next;
} pending_range;
static pending_range *_Atomic pending;

/* Whether an item reads or writes [lo, hi). */
static bool item_uses(const emu_item *it, const char *lo, const char *hi) {
    if (it->kind == ITEM_KERNEL) {
        const pw_kernel_args *a = it->k->args;
        for (int i = 0; a && i < a->n_addresses && a->addresses[i] + sizeof(void *) <= it->argbytes;
             i++) {
            const char *p;
            memcpy(&p, it->args + a->addresses[i], sizeof p);
            if (p >= lo && p < hi) return true;
        }
        return false;
    }
    const char *d = it->dst, *s = it->src;
    if (d < hi && d + it->bytes > lo) return true;
    return it->kind == ITEM_COPY && !it->snapshot && s < hi && s + it->bytes > lo;
}

static bool list_uses(const emu_list *l, const char *lo, const char *hi) {
    for (size_t i = 0; l && i < l->n; i++)
        if (item_uses(&l->v[i], lo, hi)) return true;
    return false;
}

/* A free of [lo, hi) that queued work or a live graph still uses: the
 * device would read or write memory that is gone. free() cannot return an
 * error, so the rule is reported and the process stops (a test failure). */
static void check_free(const char *lo, const char *hi, const char *what) {
    const char *rule = NULL;
    for (emu_stream *s = streams; s && !rule; s = s->next)
        if (list_uses(&s->queue, lo, hi)) rule = RULE_FREE_QUEUED;
    if (!rule && list_uses(running, lo, hi)) rule = RULE_FREE_QUEUED;
    for (emu_graph *g = graphs; g && !rule; g = g->next)
        if (list_uses(&g->nodes, lo, hi)) rule = RULE_FREE_GRAPH;
    if (!rule) return;
    fprintf(stderr,
            "piecewise emu: rule '%s' broken: %s %p (%zu bytes) freed while %s still uses it "
            "(synchronize the stream, or free the graph, first)\n",
            rule, what, (const void *)lo, (size_t)(hi - lo),
            strcmp(rule, RULE_FREE_QUEUED) == 0 ? "work queued on a stream" : "a live graph");
    abort();
}

/* ---- the fault handler ---------------------------------------------------------------------- */

static struct sigaction previous_segv;

/* Set while the worker runs a flush: a fault on device memory is then the
 * device's own access (its kernels run on the CPU's threads too), and the
 * region is opened for the rest of the flush. Opening lazily keeps a flush
 * to the regions its work touches: a weight upload opens its destination,
 * not every region the device holds. */
static atomic_bool flushing;

static void report_fault(int sig, siginfo_t *info, void *uc) {
    const char *addr = info->si_addr;
    char msg[512];
    int n = 0;
    emu_region *r = (emu_region *)find_region(addr);
    if (r && !r->pinned && atomic_load(&flushing)) {
        atomic_store(&r->open, true);
        if (mprotect(r->base, r->size, PROT_READ | PROT_WRITE) == 0) return; /* retried */
    }
    if (r && !r->pinned) {
        n = snprintf(msg, sizeof msg,
                     "piecewise emu: rule '" RULE_HOST_ACCESS "' broken: the host touched %p, "
                     "%zu bytes into device allocation %p (%zu bytes); host code reaches "
                     "device memory only through stream copies\n",
                     (const void *)addr, (size_t)(addr - r->base), (void *)r->base, r->size);
    } else {
        for (pending_range *p = atomic_load(&pending); p && !n; p = p->next)
            if (addr >= p->lo && addr < p->hi)
                n = snprintf(msg, sizeof msg,
                             p->captured
                                 ? "piecewise emu: rule '" RULE_READ_BEFORE_REPLAY "' broken: "
                                   "the host touched %p in page-locked buffer [%p, %p), which "
                                   "captured work writes; replay the graph and synchronize the "
                                   "stream before reading it\n"
                                 : "piecewise emu: rule '" RULE_MISSING_SYNC "' broken: the "
                                   "host touched %p in page-locked buffer [%p, %p), which a "
                                   "queued copy writes; synchronize the stream before reading "
                                   "it\n",
                             (const void *)addr, (void *)p->lo, (void *)p->hi);
    }
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)w;
        abort();
    }
    /* not ours: whoever handled SIGSEGV before (a sanitizer), or the default */
    if (previous_segv.sa_flags & SA_SIGINFO && previous_segv.sa_sigaction) {
        previous_segv.sa_sigaction(sig, info, uc);
        return;
    }
    if (previous_segv.sa_handler != SIG_DFL && previous_segv.sa_handler != SIG_IGN &&
        !(previous_segv.sa_flags & SA_SIGINFO)) {
        previous_segv.sa_handler(sig);
        return;
    }
    signal(SIGSEGV, SIG_DFL); /* returning re-runs the access, which now kills */
}

static void install_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = report_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
}

/* ---- mappings ----------------------------------------------------------------------------- */

static size_t round_pages(size_t bytes) {
    return (bytes + page_bytes - 1) / page_bytes * page_bytes;
}

static pthread_once_t handler_once = PTHREAD_ONCE_INIT;

#define EMU_HUGE ((size_t)2 << 20)

/* Device memory is mapped on 2 MiB boundaries and asks for transparent huge
 * pages, so that changing its protection touches one entry per 2 MiB. */
static char *map_aligned(size_t size, bool pinned) {
    int prot = pinned ? PROT_READ | PROT_WRITE : PROT_NONE;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (pinned || size < EMU_HUGE) {
        char *p = mmap(NULL, size, prot, flags, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    char *raw = mmap(NULL, size + EMU_HUGE, prot, flags, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)raw + EMU_HUGE - 1) / EMU_HUGE * EMU_HUGE);
    if (p > raw) munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + size + EMU_HUGE - (p + size));
    if (tail) munmap(p + size, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE);
#endif
    return p;
}

static void *map_region(size_t bytes, bool pinned) {
    /* only a program that uses the device has its faults looked at */
    pthread_once(&handler_once, install_handler);
    size_t size = round_pages(bytes ? bytes : 1);
    char *p = map_aligned(size, pinned);
    if (!p) return NULL;
    pthread_mutex_lock(&emu_lock);
    size_t n = atomic_load(&regions_used), slot = n;
    for (size_t i = 0; i < n; i++)
        if (!atomic_load(&regions[i].base)) {
            slot = i;
            break;
        }
    if (slot == EMU_MAX_REGIONS) {
        pthread_mutex_unlock(&emu_lock);
        munmap(p, size);
        return NULL;
    }
    regions[slot].size = size;
    regions[slot].pinned = pinned;
    atomic_store(&regions[slot].open, false);
    atomic_store_explicit(&regions[slot].base, p, memory_order_release);
    if (slot == n) atomic_store(&regions_used, n + 1);
    pthread_mutex_unlock(&emu_lock);
    atomic_fetch_add(&stat_regions, 1);
    return p;
}

static void unmap_region(void *ptr, bool pinned) {
    if (!ptr) return;
    pthread_mutex_lock(&emu_lock);
    emu_region *r = (emu_region *)find_region(ptr);
    if (!r || r->pinned != pinned || r->base != ptr) {
        pthread_mutex_unlock(&emu_lock);
        pw_log_warn("emu: free of %p, which is not a %s allocation", ptr,
                    pinned ? "page-locked host" : "device");
        return;
    }
    check_free(r->base, r->base + r->size, pinned ? "page-locked host buffer" : "device memory");
    size_t size = r->size;
    atomic_store(&r->base, NULL);
    pthread_mutex_unlock(&emu_lock);
    munmap(ptr, size);
    atomic_fetch_sub(&stat_regions, 1);
}

static void *device_alloc(size_t bytes) { return map_region(bytes, false); }
static void device_free(void *p) { unmap_region(p, false); }

static pw_status host_alloc(size_t bytes, void **out) {
    *out = map_region(bytes, true);
    if (!*out) return pw_error(PW_ERR_OOM, "emu: no page-locked host memory for %zu bytes", bytes);
    return PW_OK;
}
static void host_free(void *p) { unmap_region(p, true); }

/* Device memory readable (during a flush) or not; pending host ranges
 * protected again. Under emu_lock. */
static void set_device_access(bool on) {
    atomic_store(&flushing, on);
    size_t n = atomic_load(&regions_used);
    for (size_t i = 0; i < n; i++) {
        char *b = atomic_load(&regions[i].base);
        if (!b) continue;
        /* device regions open on first touch (report_fault) */
        if (!regions[i].pinned && !on && atomic_exchange(&regions[i].open, false))
            mprotect(b, regions[i].size, PROT_NONE);
        else if (regions[i].pinned && on) mprotect(b, regions[i].size, PROT_READ | PROT_WRITE);
    }
    if (!on)
        for (pending_range *p = atomic_load(&pending); p; p = p->next)
            mprotect(p->lo, (size_t)(p->hi - p->lo), PROT_NONE);
}

static void add_pending(void *dst, size_t bytes, const void *owner, bool captured) {
    const emu_region *r = find_region(dst);
    pending_range *p = pw_host_calloc(1, sizeof *p);
    if (!p || !r) {
        pw_host_free(p);
        return; /* a check the device can do without */
    }
    uintptr_t lo = (uintptr_t)dst / page_bytes * page_bytes;
    uintptr_t hi = ((uintptr_t)dst + bytes + page_bytes - 1) / page_bytes * page_bytes;
    if (lo < (uintptr_t)r->base) lo = (uintptr_t)r->base;
    if (hi > (uintptr_t)r->base + r->size) hi = (uintptr_t)r->base + r->size;
    p->lo = (char *)lo;
    p->hi = (char *)hi;
    p->owner = owner;
    p->captured = captured;
    p->next = atomic_load(&pending);
    atomic_store(&pending, p);
    mprotect(p->lo, hi - lo, PROT_NONE);
}

/* Drops the ranges `owner` writes and makes their pages readable again
 * (pages another pending range shares are protected again after). */
static void drop_pending(const void *owner) {
    bool any = false;
    pending_range *_Atomic *link = &pending;
    for (pending_range *p = atomic_load(link); p; p = atomic_load(link)) {
        if (p->owner != owner) {
            link = (pending_range *_Atomic *)&p->next;
            continue;
        }
        atomic_store(link, p->next);
        mprotect(p->lo, (size_t)(p->hi - p->lo), PROT_READ | PROT_WRITE);
        pw_host_free(p);
        any = true;
    }
    if (any)
        for (pending_range *p = atomic_load(&pending); p; p = p->next)
            mprotect(p->lo, (size_t)(p->hi - p->lo), PROT_NONE);
}

/* ---- the device worker -------------------------------------------------------------------- */

static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static emu_list *job; /* handed to the worker; NULL once it has run */
static pthread_once_t worker_once = PTHREAD_ONCE_INIT;

static void run_item(const emu_item *it) {
    switch (it->kind) {
    case ITEM_KERNEL: {
        _Alignas(16) unsigned char copy[PW_MAX_KERNEL_ARG_BYTES];
        if (it->argbytes) memcpy(copy, it->args, it->argbytes);
        it->k->cpu(copy);
        break;
    }
    case ITEM_COPY:
        memcpy(it->dst, it->snapshot ? it->snapshot : it->src, it->bytes);
        break;
    case ITEM_MEMSET:
        memset(it->dst, it->value, it->bytes);
        break;
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&emu_lock);
    for (;;) {
        while (!job) pthread_cond_wait(&work_cond, &emu_lock);
        emu_list *l = job;
        set_device_access(true);
        pthread_mutex_unlock(&emu_lock);
        for (size_t i = 0; i < l->n; i++) run_item(&l->v[i]);
        pthread_mutex_lock(&emu_lock);
        set_device_access(false);
        atomic_fetch_add(&stat_items, l->n);
        job = NULL;
        pthread_cond_broadcast(&done_cond);
    }
    return NULL;
}

static void start_worker(void) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, worker_main, NULL) != 0) {
        fprintf(stderr, "piecewise emu: cannot start the device worker thread\n");
        abort();
    }
    pthread_attr_destroy(&attr);
}

/* Runs everything queued on cs, in order, on the worker; then what it
 * wrote is the host's to read. */
static void flush(emu_stream *cs) {
    pthread_once(&worker_once, start_worker);
    pthread_mutex_lock(&exec_lock);
    pthread_mutex_lock(&emu_lock);
    if (cs->queue.n) {
        emu_list work = cs->queue;
        memset(&cs->queue, 0, sizeof cs->queue);
        running = &work;
        job = &work;
        pthread_cond_signal(&work_cond);
        while (job) pthread_cond_wait(&done_cond, &emu_lock);
        running = NULL;
        /* what the host waited for is now there to read */
        drop_pending(cs);
        const void *last = NULL;
        for (size_t i = 0; i < work.n; i++)
            if (work.v[i].graph && work.v[i].graph != last) drop_pending(last = work.v[i].graph);
        list_clear(&work);
        cs->queue = work; /* keep the array for the next steps */
        atomic_fetch_add(&stat_flushes, 1);
    }
    pthread_mutex_unlock(&emu_lock);
    pthread_mutex_unlock(&exec_lock);
}

/* ---- streams ---------------------------------------------------------------------------- */

static pw_status stream_new(void **impl) {
    emu_stream *cs = pw_host_calloc(1, sizeof *cs);
    if (!cs) return PW_ERR_OOM;
    pthread_mutex_lock(&emu_lock);
    cs->next = streams;
    streams = cs;
    pthread_mutex_unlock(&emu_lock);
    *impl = cs;
    return PW_OK;
}

static void stream_free(void *impl) {
    emu_stream *cs = impl;
    if (!cs) return;
    flush(cs); /* as cudaStreamDestroy: queued work still completes */
    pthread_mutex_lock(&emu_lock);
    for (emu_stream **l = &streams; *l; l = &(*l)->next)
        if (*l == cs) {
            *l = cs->next;
            break;
        }
    drop_pending(cs);
    pthread_mutex_unlock(&emu_lock);
    list_free(&cs->queue);
    list_free(&cs->capture);
    pw_host_free(cs);
}

/* Where issued work goes: the open capture, or the queue. */
static emu_item *issue(emu_stream *cs) {
    emu_item *it = list_push(cs->capturing ? &cs->capture : &cs->queue);
    if (!it) pw_error(PW_ERR_OOM, "emu: cannot queue more work");
    return it;
}

static void after_issue(emu_stream *cs) {
    if (!cs->capturing && cs->queue.n >= EMU_QUEUE_FLUSH_ITEMS) flush(cs);
}

static pw_status stream_launch(void *impl, const pw_kernel *k, const void *args, size_t argbytes) {
    emu_stream *cs = impl;
    if (!k->cpu)
        return pw_error(PW_ERR_UNSUPPORTED, "launch: kernel '%s' has no CPU implementation, "
                                            "which the emulated device runs",
                        k->name ? k->name : "(unnamed)");
    /* Every address a kernel is given is device memory, as on CUDA (where
     * a host pointer is an illegal address). */
    const pw_kernel_args *a = k->args;
    for (int i = 0; a && i < a->n_addresses && a->addresses[i] + sizeof(void *) <= argbytes; i++) {
        const void *p;
        memcpy(&p, (const char *)args + a->addresses[i], sizeof p);
        if (p && !is_device(p, 1))
            return pw_error(PW_ERR_INVALID_ARG,
                            "rule '" RULE_KERNEL_HOST_ARG "': launch of '%s': address argument %d "
                            "(%p) is not device memory; a device kernel cannot read host memory",
                            k->name, i, p);
    }
    if (cs->capturing && !cs->handle_ready)
        return pw_error(PW_ERR_CAPTURE,
                        "rule '" RULE_HANDLE_IN_CAPTURE "': the stream's library handle does not "
                        "exist yet and cannot be created while the stream captures (on CUDA: "
                        "cuBLAS setup allocates); launch the stream's kernels once eagerly first "
                        "(a warm-up)");
    cs->handle_ready = true;
    pthread_mutex_lock(&emu_lock);
    emu_item *it = issue(cs);
    if (it) {
        it->kind = ITEM_KERNEL;
        it->k = k;
        it->argbytes = (uint32_t)argbytes;
        if (argbytes) memcpy(it->args, args, argbytes);
    }
    pthread_mutex_unlock(&emu_lock);
    if (!it) return PW_ERR_OOM;
    after_issue(cs);
    return PW_OK;
}

static pw_status stream_synchronize(void *impl) {
    flush(impl);
    return PW_OK;
}

static pw_status stream_begin_capture(void *impl) {
    emu_stream *cs = impl;
    cs->capturing = true;
    return PW_OK;
}

static void stream_abort_capture(void *impl) {
    emu_stream *cs = impl;
    pthread_mutex_lock(&emu_lock);
    list_clear(&cs->capture);
    drop_pending(&cs->capture);
    pthread_mutex_unlock(&emu_lock);
    cs->capturing = false;
}

/* Same nodes in the same order (kernels and kinds): what CUDA's in-place
 * update accepts (cudaGraphExecUpdate refuses a changed topology). */
static bool same_topology(const emu_list *a, const emu_list *b) {
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].kind != b->v[i].kind || a->v[i].k != b->v[i].k ||
            a->v[i].copy != b->v[i].copy)
            return false;
    return true;
}

static void retag_pending(const void *from, const void *to) {
    for (pending_range *p = atomic_load(&pending); p; p = p->next)
        if (p->owner == from) p->owner = to;
}

static pw_status stream_end_capture(void *impl, void *reuse, void **out) {
    emu_stream *cs = impl;
    *out = NULL;
    cs->capturing = false;
    emu_graph *old = reuse;
    pthread_mutex_lock(&emu_lock);
    if (old && same_topology(&old->nodes, &cs->capture)) {
        /* in place: the graph keeps its identity, its nodes take the new
         * arguments (the old nodes' pending ranges were written by replays
         * that no longer matter) */
        emu_list prev = old->nodes;
        old->nodes = cs->capture;
        cs->capture = prev;
        list_clear(&cs->capture);
        drop_pending(old);
        retag_pending(&cs->capture, old);
        pthread_mutex_unlock(&emu_lock);
        atomic_fetch_add(&stat_updated, 1);
        *out = old;
        return PW_OK;
    }
    emu_graph *g = pw_host_calloc(1, sizeof *g);
    if (!g) {
        list_clear(&cs->capture);
        drop_pending(&cs->capture);
        pthread_mutex_unlock(&emu_lock);
        return PW_ERR_OOM;
    }
    g->nodes = cs->capture;
    memset(&cs->capture, 0, sizeof cs->capture);
    retag_pending(&cs->capture, g);
    g->next = graphs;
    graphs = g;
    pthread_mutex_unlock(&emu_lock);
    atomic_fetch_add(&stat_instantiated, 1);
    *out = g;
    return PW_OK;
}

static pw_status graph_replay(void *device_graph, void *impl) {
    emu_graph *g = device_graph;
    emu_stream *cs = impl;
    pthread_mutex_lock(&emu_lock);
    /* into a capture: a child graph; otherwise queued as one unit */
    emu_list *to = cs->capturing ? &cs->capture : &cs->queue;
    for (size_t i = 0; i < g->nodes.n; i++) {
        emu_item *it = list_push(to);
        if (!it) {
            pthread_mutex_unlock(&emu_lock);
            return pw_error(PW_ERR_OOM, "emu: cannot queue graph replay");
        }
        size_t keep = it - to->v;
        *it = g->nodes.v[i];
        to->v[keep].snapshot = NULL; /* captured copies read page-locked memory at run time */
        to->v[keep].graph = cs->capturing ? NULL : g;
    }
    pthread_mutex_unlock(&emu_lock);
    atomic_fetch_add_explicit(&stat_replays, 1, memory_order_relaxed);
    after_issue(cs);
    return PW_OK;
}

static void graph_free(void *device_graph) {
    emu_graph *g = device_graph;
    if (!g) return;
    pthread_mutex_lock(&emu_lock);
    for (emu_graph **l = &graphs; *l; l = &(*l)->next)
        if (*l == g) {
            *l = g->next;
            break;
        }
    drop_pending(g);
    pthread_mutex_unlock(&emu_lock);
    list_free(&g->nodes);
    pw_host_free(g);
}

/* ---- copies ----------------------------------------------------------------------------- */

static pw_status check_side(const emu_stream *cs, const void *p, size_t bytes, bool want_device,
                            const char *what, const char *role) {
    if (want_device) {
        if (!is_device(p, bytes))
            return pw_error(PW_ERR_INVALID_ARG,
                            "rule '" RULE_COPY_SIDE "': %s: the %s %p (%zu bytes) is not device "
                            "memory of the emulated device",
                            what, role, p, bytes);
        return PW_OK;
    }
    if (find_region(p) && !is_pinned(p, bytes))
        return pw_error(PW_ERR_INVALID_ARG,
                        "rule '" RULE_COPY_SIDE "': %s: the %s %p is device memory, not host "
                        "memory",
                        what, role, p);
    if (cs->capturing && !is_pinned(p, bytes))
        return pw_error(PW_ERR_CAPTURE,
                        "rule '" RULE_PAGEABLE_COPY "': %s during a capture: the %s %p is "
                        "pageable host memory, which CUDA cannot capture; use page-locked memory "
                        "or copy outside the captured region",
                        what, role, p);
    return PW_OK;
}

static pw_status stream_copy(void *impl, pw_copy_kind kind, void *dst, const void *src,
                             size_t bytes) {
    emu_stream *cs = impl;
    static const char *const names[] = {"copy_h2d", "copy_d2h", "copy_d2d"};
    PW_TRY(check_side(cs, dst, bytes, kind != PW_COPY_D2H, names[kind], "destination"));
    PW_TRY(check_side(cs, src, bytes, kind != PW_COPY_H2D, names[kind], "source"));
    void *snapshot = NULL;
    /* A pageable source is read when the copy is issued (CUDA stages it
     * before returning); a page-locked one when the copy runs. */
    if (kind == PW_COPY_H2D && !cs->capturing && !is_pinned(src, bytes)) {
        snapshot = pw_host_alloc(bytes);
        if (!snapshot) return PW_ERR_OOM;
        memcpy(snapshot, src, bytes);
    }
    pthread_mutex_lock(&emu_lock);
    emu_item *it = issue(cs);
    if (it) {
        it->kind = ITEM_COPY;
        it->copy = kind;
        it->dst = dst;
        it->src = src;
        it->bytes = bytes;
        it->snapshot = snapshot;
        if (kind == PW_COPY_D2H && is_pinned(dst, bytes))
            add_pending(dst, bytes, cs->capturing ? (const void *)&cs->capture : cs, cs->capturing);
    }
    pthread_mutex_unlock(&emu_lock);
    if (!it) {
        pw_host_free(snapshot);
        return PW_ERR_OOM;
    }
    after_issue(cs);
    return PW_OK;
}

static pw_status stream_memset(void *impl, void *dst, int value, size_t bytes) {
    emu_stream *cs = impl;
    PW_TRY(check_side(cs, dst, bytes, true, "memset", "destination"));
    pthread_mutex_lock(&emu_lock);
    emu_item *it = issue(cs);
    if (it) {
        it->kind = ITEM_MEMSET;
        it->dst = dst;
        it->bytes = bytes;
        it->value = value;
    }
    pthread_mutex_unlock(&emu_lock);
    if (!it) return PW_ERR_OOM;
    after_issue(cs);
    return PW_OK;
}

static void stream_caps(pw_device_caps *out) {
    /* what CUDA reports, so callers take the CUDA path's branches */
    out->graphs = true;
    out->graph_update = true;
    out->async_copy = true;
    out->needs_warmup = true;
}

static bool emu_available(const char **reason) {
    (void)reason;
    return true;
}

static const pw_stream_backend emu_stream_backend = {
    .stream_new = stream_new,
    .stream_free = stream_free,
    .launch = stream_launch,
    .synchronize = stream_synchronize,
    .begin_capture = stream_begin_capture,
    .end_capture = stream_end_capture,
    .abort_capture = stream_abort_capture,
    .replay = graph_replay,
    .graph_free = graph_free,
    .copy = stream_copy,
    .memset = stream_memset,
    .caps = stream_caps,
    .available = emu_available,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .kernels = PW_DEVICE_CPU,
};

void pw_emu_get_stats(pw_emu_stats *out) {
    out->flushes = atomic_load(&stat_flushes);
    out->items_executed = atomic_load(&stat_items);
    out->graphs_instantiated = atomic_load(&stat_instantiated);
    out->graphs_updated = atomic_load(&stat_updated);
    out->graph_replays = atomic_load(&stat_replays);
    out->device_regions = atomic_load(&stat_regions);
}

/* ---- registration ------------------------------------------------------------------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void register_backend(void) {
    long pg = sysconf(_SC_PAGESIZE);
    page_bytes = pg > 0 ? (size_t)pg : 4096;
    pw_mem_register_device(PW_DEVICE_EMU, (pw_device_mem_ops){device_alloc, device_free});
    pw_stream_register_backend(PW_DEVICE_EMU, &emu_stream_backend);
}

void pw_emu_init(void) { pthread_once(&init_once, register_backend); }
