/* Caching best-fit allocator with graph-pool semantics.
 *
 * Memory comes from the device in segments. Each segment is a doubly linked
 * list of blocks in address order; a free block is also on the pool's free
 * list. Allocation takes the smallest free block that fits (best fit) and
 * splits off the remainder; release merges the block with free neighbours.
 * A hash map from address to block makes release O(1).
 *
 * Graph pools: a device graph keeps a reference on the pool it was captured
 * into. While any reference exists, trim releases nothing, so no address a
 * graph recorded can be unmapped or handed to another pool.
 *
 * Shadow pools: the same bookkeeping over segments that are address space
 * only (PROT_NONE mappings): a dry run of a capture against one reserves
 * exactly what the real capture will, and any dereference of its addresses
 * faults instead of reading or writing memory that is not there. The
 * policy therefore never looks at where the device put a segment, only at
 * segment order and offsets, so shadow and real pools choose alike. */
#include "mem/pool_internal.h"
#include "pw_testing.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#define PW_SEGMENT_MIN ((size_t)2 << 20)     /* smallest segment from the device */
#define PW_SEGMENT_ROUND ((size_t)2 << 20)   /* segment sizes are multiples of this */
#define PW_MAP_MIN_CAP 64

typedef struct pw_block pw_block;
typedef struct pw_segment pw_segment;

struct pw_block {
    char *ptr;
    size_t size;
    bool free;
    pw_segment *segment;
    pw_block *prev, *next;           /* neighbours in the segment */
    pw_block *free_prev, *free_next; /* free list links */
};

struct pw_segment {
    char *base;
    size_t size;
    uint64_t seq; /* creation order: the tie-break, independent of addresses */
    pw_block *first;
    pw_segment *next;
};

struct pw_pool {
    char name[48];
    pw_device device;
    pw_segment *segments;
    pw_block *free_list;
    /* open-addressing map: block address -> live block */
    pw_block **map;
    size_t map_cap, map_used, map_tombs;
    pw_pool_stats stats;
    int graph_refs;
    int trim_holds;
    bool trim_pending;
    bool capturing;
    bool shadow;            /* segments are address space only */
    uint64_t next_segment_seq;
};

/* ---- device memory ------------------------------------------------------- */

static void *cpu_alloc(size_t bytes) { return aligned_alloc(PW_POOL_ALIGN, bytes); }
static void cpu_free(void *p) { free(p); }

/* CPU memory is there from the start (no lazy setup that threads could
 * race on); a device backend registers itself once, from its constructor. */
static pw_device_mem_ops device_ops[PW_DEVICE_COUNT_] = {[PW_DEVICE_CPU] = {cpu_alloc, cpu_free}};
static atomic_llong device_fail_countdown = 0;

void pw_pool_fail_nth_device_alloc(int64_t n) { atomic_store(&device_fail_countdown, (long long)n); }

void pw_mem_register_device(pw_device device, pw_device_mem_ops ops) { device_ops[device] = ops; }

static const pw_device_mem_ops *ops_for(pw_device d) {
    return device_ops[d].alloc ? &device_ops[d] : NULL;
}

/* Address space only: the mapping has no access, so nothing can be read
 * or written through it, and MAP_NORESERVE keeps it out of the commit
 * charge. mmap's alignment (a page) is a multiple of PW_POOL_ALIGN. */
static void *shadow_reserve(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void *device_alloc(pw_pool *pool, size_t bytes) {
    if (pool->shadow) return shadow_reserve(bytes);
    long long n = atomic_load_explicit(&device_fail_countdown, memory_order_relaxed);
    if (n > 0 && atomic_fetch_sub(&device_fail_countdown, 1) == 1) return NULL;
    return ops_for(pool->device)->alloc(bytes);
}

/* ---- address map ----------------------------------------------------------- */

#define MAP_TOMB ((pw_block *)(uintptr_t)1)

static size_t hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static pw_status map_grow(pw_pool *pool) {
    size_t cap = pool->map_cap ? pool->map_cap * 2 : PW_MAP_MIN_CAP;
    if (pool->map_used * 4 < pool->map_cap) cap = pool->map_cap; /* only tombstones: rehash */
    pw_block **m = pw_host_calloc(cap, sizeof *m);
    if (!m) return PW_ERR_OOM;
    for (size_t i = 0; i < pool->map_cap; i++) {
        pw_block *b = pool->map[i];
        if (!b || b == MAP_TOMB) continue;
        size_t j = hash_ptr(b->ptr) & (cap - 1);
        while (m[j]) j = (j + 1) & (cap - 1);
        m[j] = b;
    }
    pw_host_free(pool->map);
    pool->map = m;
    pool->map_cap = cap;
    pool->map_tombs = 0;
    return PW_OK;
}

static pw_status map_insert(pw_pool *pool, pw_block *b) {
    if ((pool->map_used + pool->map_tombs + 1) * 4 > pool->map_cap * 3) PW_TRY(map_grow(pool));
    size_t j = hash_ptr(b->ptr) & (pool->map_cap - 1);
    while (pool->map[j] && pool->map[j] != MAP_TOMB) j = (j + 1) & (pool->map_cap - 1);
    if (pool->map[j] == MAP_TOMB) pool->map_tombs--;
    pool->map[j] = b;
    pool->map_used++;
    return PW_OK;
}

static pw_block *map_take(pw_pool *pool, const void *ptr) {
    if (!pool->map_cap) return NULL;
    size_t j = hash_ptr(ptr) & (pool->map_cap - 1);
    while (pool->map[j]) {
        pw_block *b = pool->map[j];
        if (b != MAP_TOMB && b->ptr == ptr) {
            pool->map[j] = MAP_TOMB;
            pool->map_used--;
            pool->map_tombs++;
            return b;
        }
        j = (j + 1) & (pool->map_cap - 1);
    }
    return NULL;
}

/* ---- free list ------------------------------------------------------------------ */

static void free_list_push(pw_pool *pool, pw_block *b) {
    b->free = true;
    b->free_prev = NULL;
    b->free_next = pool->free_list;
    if (pool->free_list) pool->free_list->free_prev = b;
    pool->free_list = b;
}

static void free_list_remove(pw_pool *pool, pw_block *b) {
    if (b->free_prev) b->free_prev->free_next = b->free_next;
    else pool->free_list = b->free_next;
    if (b->free_next) b->free_next->free_prev = b->free_prev;
    b->free_prev = b->free_next = NULL;
    b->free = false;
}

/* Position of a block in the pool's own order: oldest segment first, then
 * offset. Unlike the raw address it does not depend on where the device
 * placed the segments, so a shadow pool (other addresses) decides alike. */
static bool comes_before(const pw_block *a, const pw_block *b) {
    if (a->segment->seq != b->segment->seq) return a->segment->seq < b->segment->seq;
    return a->ptr - a->segment->base < b->ptr - b->segment->base;
}

/* Ties go to the first block in pool order so that allocation order is
 * reproducible. */
static pw_block *best_fit(pw_pool *pool, size_t size) {
    pw_block *best = NULL;
    for (pw_block *b = pool->free_list; b; b = b->free_next) {
        if (b->size < size) continue;
        /* no early exit on an exact fit: a later one in pool order may
         * follow, and the choice must depend on the free blocks, not on
         * the order of the free list */
        if (!best || b->size < best->size || (b->size == best->size && comes_before(b, best)))
            best = b;
    }
    return best;
}

/* ---- the thread's capture record ------------------------------------------------------ */

typedef struct capture_record {
    pw_pool *pool; /* NULL: no capture open on this thread */
    pw_status violation;
    char violation_msg[512];
} capture_record;

static _Thread_local capture_record tl_capture;

static void set_capturing(pw_pool *pool, bool on);

pw_status pw_mem_capture_open(pw_pool *pool) {
    if (!pool) return pw_error(PW_ERR_INVALID_ARG, "capture: pool is NULL");
    if (tl_capture.pool)
        return pw_error(PW_ERR_CAPTURE,
                        "begin_capture: a capture is already open on this thread (nested "
                        "captures are not allowed)");
    tl_capture.pool = pool;
    tl_capture.violation = PW_OK;
    tl_capture.violation_msg[0] = '\0';
    set_capturing(pool, true);
    return PW_OK;
}

void pw_mem_capture_close(void) {
    pw_pool *pool = tl_capture.pool;
    if (!pool) return;
    tl_capture.pool = NULL;
    set_capturing(pool, false);
}

pw_pool *pw_mem_capture_pool(void) { return tl_capture.pool; }

pw_status pw_mem_capture_poison(pw_status code) {
    if (tl_capture.pool && tl_capture.violation == PW_OK && code != PW_OK) {
        tl_capture.violation = code;
        snprintf(tl_capture.violation_msg, sizeof tl_capture.violation_msg, "%s",
                 pw_last_error());
    }
    return code;
}

pw_status pw_mem_capture_violation(const char **msg) {
    if (msg) *msg = tl_capture.violation_msg;
    return tl_capture.pool ? tl_capture.violation : PW_OK;
}

/* A graph may only use memory from its capture pool: an allocation from
 * another pool of the same device would give the graph an address nothing
 * keeps alive. Other devices' pools are host-side business. */
static pw_status check_capture_pool(pw_pool *pool) {
    pw_pool *cp = tl_capture.pool;
    if (PW_LIKELY(!cp)) return PW_OK;
    if (pool == cp || pool->device != cp->device) return PW_OK;
    pw_error(PW_ERR_CAPTURE,
             "allocation from pool '%s' during a capture into pool '%s': a graph may only "
             "use memory from its capture pool",
             pool->name, cp->name);
    return pw_mem_capture_poison(PW_ERR_CAPTURE);
}

/* ---- pool -------------------------------------------------------------------------- */

pw_status pw_pool_new(pw_device device, const char *name, pw_pool **out) {
    *out = NULL;
    if ((unsigned)device >= PW_DEVICE_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "pool: unknown device %d", (int)device);
    if (!ops_for(device))
        return pw_error(PW_ERR_UNSUPPORTED, "pool '%s': no %s memory in this build",
                        name ? name : "", pw_device_name(device));
    pw_pool *pool = pw_host_calloc(1, sizeof *pool);
    if (!pool) return PW_ERR_OOM;
    snprintf(pool->name, sizeof pool->name, "%s", name ? name : "pool");
    pool->device = device;
    *out = pool;
    return PW_OK;
}

static void segment_free_all(pw_pool *pool, pw_segment *seg) {
    pw_block *b = seg->first;
    while (b) {
        pw_block *n = b->next;
        pw_host_free(b);
        b = n;
    }
    if (pool->shadow) munmap(seg->base, seg->size);
    else ops_for(pool->device)->free(seg->base);
    pw_host_free(seg);
}

void pw_pool_free(pw_pool *pool) {
    if (!pool) return;
    if (pool->graph_refs > 0) {
        pw_log(PW_LOG_ERROR,
               "pool '%s' freed while %d graph(s) still use it; leaking it to keep their "
               "addresses valid",
               pool->name, pool->graph_refs);
        return;
    }
    if (pool->capturing) {
        pw_log(PW_LOG_ERROR,
               "pool '%s' freed while a capture allocates from it; leaking it (end or abort "
               "the capture first)",
               pool->name);
        return;
    }
    pw_segment *s = pool->segments;
    while (s) {
        pw_segment *n = s->next;
        segment_free_all(pool, s);
        s = n;
    }
    pw_host_free(pool->map);
    pw_host_free(pool);
}

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

static pw_status add_segment(pw_pool *pool, size_t need, pw_block **out) {
    size_t size = need <= PW_SEGMENT_MIN ? PW_SEGMENT_MIN : round_up(need, PW_SEGMENT_ROUND);
    pw_segment *seg = pw_host_calloc(1, sizeof *seg);
    pw_block *b = seg ? pw_host_calloc(1, sizeof *b) : NULL;
    char *base = b ? device_alloc(pool, size) : NULL;
    if (!base) {
        pw_host_free(b);
        pw_host_free(seg);
        return pw_error(PW_ERR_OOM, "pool '%s': out of %s memory reserving %zu bytes",
                        pool->name, pw_device_name(pool->device), size);
    }
    seg->base = base;
    seg->size = size;
    seg->seq = pool->next_segment_seq++;
    seg->first = b;
    seg->next = pool->segments;
    pool->segments = seg;
    b->ptr = base;
    b->size = size;
    b->segment = seg;
    free_list_push(pool, b);
    pool->stats.reserved += size;
    pool->stats.n_segments++;
    if (pool->stats.reserved > pool->stats.peak_reserved)
        pool->stats.peak_reserved = pool->stats.reserved;
    *out = b;
    return PW_OK;
}

static _Thread_local struct {
    pw_pool *pool;
    pw_pool_observer_fn fn;
    void *user;
} tl_observer;

void pw_pool_observe(pw_pool *pool, pw_pool_observer_fn fn, void *user) {
    tl_observer.pool = fn ? pool : NULL;
    tl_observer.fn = fn;
    tl_observer.user = user;
}

pw_status pw_pool_alloc(pw_pool *pool, size_t bytes, void **out) {
    *out = NULL;
    if (!pool) return pw_error(PW_ERR_INVALID_ARG, "pw_pool_alloc: pool is NULL");
    PW_TRY(check_capture_pool(pool));
    if (bytes > ((size_t)1 << 46))
        return pw_error(PW_ERR_OOM, "pool '%s': request of %zu bytes is too large", pool->name,
                        bytes);
    size_t size = round_up(bytes ? bytes : 1, PW_POOL_ALIGN);
    pw_block *b = best_fit(pool, size);
    if (!b) PW_TRY(add_segment(pool, size, &b));
    /* Register the address first: if that fails nothing has been split, so
     * the free block stays whole and its segment can still be trimmed. */
    PW_TRY(map_insert(pool, b));
    if (b->size - size >= PW_POOL_ALIGN) {
        pw_block *rest = pw_host_calloc(1, sizeof *rest);
        if (!rest) {
            map_take(pool, b->ptr);
            return PW_ERR_OOM;
        }
        rest->ptr = b->ptr + size;
        rest->size = b->size - size;
        rest->segment = b->segment;
        rest->prev = b;
        rest->next = b->next;
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        free_list_push(pool, rest);
    }
    free_list_remove(pool, b);
    pool->stats.allocated += b->size;
    pool->stats.n_alloc_calls++;
    pool->stats.n_live_blocks++;
    if (pool->stats.allocated > pool->stats.peak_allocated)
        pool->stats.peak_allocated = pool->stats.allocated;
    *out = b->ptr;
    if (PW_UNLIKELY(tl_observer.pool == pool)) tl_observer.fn(tl_observer.user, true, bytes, b->ptr);
    return PW_OK;
}

static void merge_with_next(pw_pool *pool, pw_block *b) {
    pw_block *n = b->next;
    free_list_remove(pool, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    pw_host_free(n);
}

pw_status pw_pool_release(pw_pool *pool, void *ptr) {
    if (!ptr) return PW_OK;
    pw_block *b = map_take(pool, ptr);
    if (!b)
        return pw_error(PW_ERR_INVALID_ARG, "pool '%s': %p was not allocated from this pool",
                        pool->name, ptr);
    pool->stats.allocated -= b->size;
    pool->stats.n_live_blocks--;
    free_list_push(pool, b);
    if (b->next && b->next->free) merge_with_next(pool, b);
    if (b->prev && b->prev->free) merge_with_next(pool, b->prev);
    if (PW_UNLIKELY(tl_observer.pool == pool)) tl_observer.fn(tl_observer.user, false, 0, ptr);
    return PW_OK;
}

void pw_pool_get_stats(const pw_pool *pool, pw_pool_stats *out) { *out = pool->stats; }

void pw_pool_reset_peak(pw_pool *pool) {
    pool->stats.peak_allocated = pool->stats.allocated;
    pool->stats.peak_reserved = pool->stats.reserved;
}

static size_t trim_now(pw_pool *pool) {
    if (pool->graph_refs > 0) return 0;
    size_t released = 0;
    pw_segment **link = &pool->segments;
    while (*link) {
        pw_segment *seg = *link;
        if (seg->first->free && seg->first->next == NULL) {
            *link = seg->next;
            free_list_remove(pool, seg->first);
            released += seg->size;
            pool->stats.reserved -= seg->size;
            pool->stats.n_segments--;
            segment_free_all(pool, seg);
        } else {
            link = &seg->next;
        }
    }
    return released;
}

pw_status pw_pool_trim(pw_pool *pool, bool defer, size_t *released) {
    if (released) *released = 0;
    if (pool->capturing || pool->trim_holds > 0) {
        if (!defer && pool->capturing)
            return pw_error(PW_ERR_CAPTURE,
                            "pool '%s': trim during a capture into this pool would free "
                            "memory the graph records (pass defer=true to trim afterwards)",
                            pool->name);
        pool->trim_pending = true;
        return PW_OK;
    }
    size_t r = trim_now(pool);
    if (released) *released = r;
    return PW_OK;
}

static void run_pending_trim(pw_pool *pool) {
    if (pool->trim_pending && !pool->capturing && pool->trim_holds == 0) {
        pool->trim_pending = false;
        trim_now(pool);
    }
}

void pw_pool_hold_trim(pw_pool *pool) { pool->trim_holds++; }
void pw_pool_unhold_trim(pw_pool *pool) {
    assert(pool->trim_holds > 0);
    pool->trim_holds--;
    run_pending_trim(pool);
}

const char *pw_pool_name(const pw_pool *pool) { return pool->name; }
pw_device pw_pool_device(const pw_pool *pool) { return pool->device; }
int pw_pool_graph_refs(const pw_pool *pool) { return pool->graph_refs; }

static void set_capturing(pw_pool *pool, bool on) {
    pool->capturing = on;
    if (!on) run_pending_trim(pool);
}
void pw_pool_graph_ref(pw_pool *pool) { pool->graph_refs++; }
void pw_pool_graph_unref(pw_pool *pool) {
    assert(pool->graph_refs > 0);
    pool->graph_refs--;
}

bool pw_pool_owns(const pw_pool *pool, const void *ptr) {
    for (const pw_segment *s = pool->segments; s; s = s->next)
        if ((const char *)ptr >= s->base && (const char *)ptr < s->base + s->size) return true;
    return false;
}

/* ---- shadow mode and the thread's dry run ------------------------------------------------- */

pw_status pw_pool_set_shadow(pw_pool *pool, bool on) {
    if (!pool) return pw_error(PW_ERR_INVALID_ARG, "pw_pool_set_shadow: pool is NULL");
    if (pool->shadow == on) return PW_OK;
    if (pool->segments || pool->graph_refs > 0 || pool->capturing)
        return pw_error(PW_ERR_STATE,
                        "pool '%s': shadow mode can only be switched on an empty pool (it holds "
                        "%zu bytes in %zu segment(s), %d graph(s) use it%s)",
                        pool->name, pool->stats.reserved, pool->stats.n_segments, pool->graph_refs,
                        pool->capturing ? ", a capture is open" : "");
    pool->shadow = on;
    return PW_OK;
}

bool pw_pool_is_shadow(const pw_pool *pool) { return pool->shadow; }

static _Thread_local int tl_dry_run;

void pw_mem_dry_run_begin(void) { tl_dry_run++; }
void pw_mem_dry_run_end(void) {
    if (tl_dry_run > 0) tl_dry_run--;
}
bool pw_mem_dry_run_active(void) { return tl_dry_run > 0; }
