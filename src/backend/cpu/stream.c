/* CPU stream: eager launches, and capture into a recorded device graph.
 *
 * A recorded graph is an array of (function pointer, argument pointer)
 * pairs whose argument bytes were copied into one arena at capture. Replay
 * is a single loop over that array: no allocation, no lookup, no branch on
 * the kernel kind. */
#include "mem/pool_internal.h"
#include "backend/stream_backend.h"
#include "backend/graph_record.h"

#include "pw_config.h"
#if PW_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "backend/emu/emu_backend.h"

#include <pthread.h>
#include <string.h>

#define PW_GRAPH_INITIAL_LAUNCHES 64
#define PW_ARENA_CHUNK 8192
#define PW_ARG_ALIGN 16

typedef struct pw_recorded_launch {
    pw_cpu_kernel_fn fn;
    const void *args;
} pw_recorded_launch;

struct pw_graph {
    pw_recorded_launch *launches;
    const pw_kernel **kernels;
    uint32_t *argbytes;
    size_t n, cap;
    char *arena;
    size_t arena_used, arena_cap;
    pw_pool *pool;
    const pw_stream_backend *backend; /* NULL for CPU graphs */
    void *device_graph;
    bool dry; /* captured during a dry run: host record only, no device graph */
};

struct pw_stream {
    pw_device device;
    const pw_stream_backend *backend; /* NULL for CPU streams */
    void *impl;
    pw_graph *recording;  /* non-NULL while capturing */
};

static _Thread_local pw_stream *tl_capture_stream;

/* Indexed by pw_device; the CPU entry stays NULL (handled inline). */
static const pw_stream_backend *device_backends[PW_DEVICE_COUNT_];

void pw_stream_register_backend(pw_device device, const pw_stream_backend *backend) {
    if (device != PW_DEVICE_CPU && (unsigned)device < PW_DEVICE_COUNT_)
        device_backends[device] = backend;
}

/* ---- the backend registry ------------------------------------------------------------------ */

static pthread_once_t backends_once = PTHREAD_ONCE_INIT;

static void register_all(void) {
#if PW_HAVE_CUDA
    pw_cuda_init();
#endif
    pw_emu_init();
}

void pw_backends_register(void) { pthread_once(&backends_once, register_all); }

/* Also at load, so that a program whose first call is pw_pool_new finds
 * device memory registered: this object is linked into every program
 * that uses a stream, and it names each backend explicitly. */
__attribute__((constructor)) static void register_at_load(void) { pw_backends_register(); }

static const pw_stream_backend *backend_of(pw_device device) {
    pw_backends_register();
    return (unsigned)device < PW_DEVICE_COUNT_ ? device_backends[device] : NULL;
}

pw_device pw_device_kernel_device(pw_device device) {
    const pw_stream_backend *b = device == PW_DEVICE_CPU ? NULL : backend_of(device);
    return b ? b->kernels : device;
}

pw_status pw_device_host_alloc(pw_device device, size_t bytes, void **out) {
    *out = NULL;
    const pw_stream_backend *b = device == PW_DEVICE_CPU ? NULL : backend_of(device);
    if (b && b->host_alloc) return b->host_alloc(bytes, out);
    *out = pw_host_alloc(bytes ? bytes : 1);
    return *out ? PW_OK : PW_ERR_OOM;
}

void pw_device_host_free(pw_device device, void *ptr) {
    if (!ptr) return;
    const pw_stream_backend *b = device == PW_DEVICE_CPU ? NULL : backend_of(device);
    if (b && b->host_free) b->host_free(ptr);
    else pw_host_free(ptr);
}
void *pw_stream_backend_handle(const pw_stream *s) { return s->impl; }
void *pw_graph_device_handle(const pw_graph *g) { return g->device_graph; }

pw_stream *pw_capturing_stream(void) { return tl_capture_stream; }
pw_pool *pw_capture_pool(void) { return pw_mem_capture_pool(); }

/* The first illegal call of a capture is kept in mem's record of the
 * thread's capture (mem/pool_internal.h), next to the pool's own refusals,
 * so end_capture reports whichever came first. */
static pw_status note_violation(pw_stream *s, pw_status code) {
    (void)s;
    return pw_mem_capture_poison(code);
}

pw_status pw_stream_new(pw_device device, pw_stream **out) {
    *out = NULL;
    const pw_stream_backend *backend = NULL;
    if (device != PW_DEVICE_CPU) {
        backend = backend_of(device);
        if (!backend)
            return pw_error(PW_ERR_UNSUPPORTED,
                            "stream: %s streams are not available in this build",
                            pw_device_name(device));
    }
    pw_stream *s = pw_host_calloc(1, sizeof *s);
    if (!s) return PW_ERR_OOM;
    s->device = device;
    s->backend = backend;
    if (backend) {
        pw_status st = backend->stream_new(&s->impl);
        if (st != PW_OK) {
            pw_host_free(s);
            return st;
        }
    }
    *out = s;
    return PW_OK;
}

void pw_stream_free(pw_stream *s) {
    if (!s) return;
    if (s->recording) pw_stream_abort_capture(s);
    if (s->backend) s->backend->stream_free(s->impl);
    pw_host_free(s);
}

pw_device pw_stream_device(const pw_stream *s) { return s->device; }
bool pw_stream_is_capturing(const pw_stream *s) { return s->recording != NULL; }

static void graph_destroy(pw_graph *g) {
    if (!g) return;
    if (g->backend && g->device_graph) g->backend->graph_free(g->device_graph);
    pw_host_free(g->launches);
    pw_host_free(g->kernels);
    pw_host_free(g->argbytes);
    pw_host_free(g->arena);
    pw_host_free(g);
}

/* Arguments are copied into an arena that grows by reallocating, so the
 * launch table keeps offsets until the capture ends and they are resolved
 * to pointers. */
static pw_status record(pw_stream *s, const pw_kernel *k, const void *args, size_t argbytes) {
    pw_graph *g = s->recording;
    if (g->n == g->cap) {
        /* the launch table sets the capacity; its parallel arrays, of smaller
         * elements, follow (so cap * their size cannot wrap either) */
        size_t cap = g->cap, need = g->cap ? g->n + 1 : PW_GRAPH_INITIAL_LAUNCHES;
        pw_recorded_launch *l = pw_host_grow(g->launches, sizeof *l, &cap, need, SIZE_MAX);
        if (!l) return note_violation(s, PW_ERR_OOM);
        g->launches = l;
        const pw_kernel **kk = pw_host_realloc(g->kernels, cap * sizeof *kk);
        if (!kk) return note_violation(s, PW_ERR_OOM);
        g->kernels = kk;
        uint32_t *ab = pw_host_realloc(g->argbytes, cap * sizeof *ab);
        if (!ab) return note_violation(s, PW_ERR_OOM);
        g->argbytes = ab;
        g->cap = cap;
    }
    size_t off = (g->arena_used + PW_ARG_ALIGN - 1) & ~(size_t)(PW_ARG_ALIGN - 1);
    if (off + argbytes > g->arena_cap) {
        size_t need = off + argbytes < PW_ARENA_CHUNK ? PW_ARENA_CHUNK : off + argbytes;
        char *a = pw_host_grow(g->arena, 1, &g->arena_cap, need, SIZE_MAX);
        if (!a) return note_violation(s, PW_ERR_OOM);
        g->arena = a;
    }
    if (argbytes) memcpy(g->arena + off, args, argbytes);
    g->arena_used = off + argbytes;
    g->launches[g->n].fn = k->cpu;
    g->launches[g->n].args = (const void *)(uintptr_t)off;
    g->kernels[g->n] = k;
    g->argbytes[g->n] = (uint32_t)argbytes;
    g->n++;
    return PW_OK;
}

/* A device launch: recorded on the host too (for pw_graph_launch_at) and
 * handed to the backend, which runs it or adds it to the device capture. */
static pw_status device_launch(pw_stream *s, const pw_kernel *k, const void *args,
                               size_t argbytes) {
    if (!k)
        return pw_error(PW_ERR_INVALID_ARG, "launch: kernel is NULL");
    if (argbytes > PW_MAX_KERNEL_ARG_BYTES)
        return pw_error(PW_ERR_INVALID_ARG, "launch: kernel '%s' has %zu argument bytes (max %d)",
                        k->name, argbytes, PW_MAX_KERNEL_ARG_BYTES);
    if (!s->recording) /* a dry run's eager launches may point into a shadow pool */
        return pw_mem_dry_run_active() ? PW_OK : s->backend->launch(s->impl, k, args, argbytes);
    PW_TRY(record(s, k, args, argbytes));
    if (s->recording->dry) return PW_OK; /* the device never sees a dry run */
    pw_status st = s->backend->launch(s->impl, k, args, argbytes);
    return st == PW_OK ? PW_OK : note_violation(s, st);
}

pw_status pw_launch(pw_stream *s, const pw_kernel *k, const void *args, size_t argbytes) {
    if (PW_UNLIKELY(s->backend != NULL)) return device_launch(s, k, args, argbytes);
    if (PW_UNLIKELY(!k || !k->cpu))
        return pw_error(PW_ERR_INVALID_ARG, "launch: kernel '%s' has no CPU implementation",
                        k && k->name ? k->name : "(null)");
    if (PW_UNLIKELY(argbytes > PW_MAX_KERNEL_ARG_BYTES))
        return pw_error(PW_ERR_INVALID_ARG, "launch: kernel '%s' has %zu argument bytes (max %d)",
                        k->name, argbytes, PW_MAX_KERNEL_ARG_BYTES);
    if (s->recording) return record(s, k, args, argbytes);
    if (PW_UNLIKELY(pw_mem_dry_run_active())) return PW_OK; /* may point into a shadow pool */
    /* Eager: the kernel sees a copy, exactly as it would at replay. */
    _Alignas(16) unsigned char copy[PW_MAX_KERNEL_ARG_BYTES];
    if (argbytes) memcpy(copy, args, argbytes);
    k->cpu(copy);
    return PW_OK;
}

pw_status pw_stream_synchronize(pw_stream *s) {
    if (s->recording) {
        pw_error(PW_ERR_CAPTURE,
                 "pw_stream_synchronize called during a capture: a host synchronization "
                 "cannot be recorded in a graph");
        return note_violation(s, PW_ERR_CAPTURE);
    }
    /* a dry run issued nothing to the device */
    if (!s->backend || pw_mem_dry_run_active()) return PW_OK;
    return s->backend->synchronize(s->impl);
}

pw_status pw_stream_begin_capture(pw_stream *s, pw_pool *pool) {
    if (!pool) return pw_error(PW_ERR_INVALID_ARG, "begin_capture: pool is NULL");
    if (s->recording || tl_capture_stream)
        return pw_error(PW_ERR_CAPTURE,
                        "begin_capture: a capture is already open on this thread (nested "
                        "captures are not allowed)");
    if (pw_pool_device(pool) != s->device)
        return pw_error(PW_ERR_INVALID_ARG, "begin_capture: pool '%s' is %s memory, stream is %s",
                        pw_pool_name(pool), pw_device_name(pw_pool_device(pool)),
                        pw_device_name(s->device));
    pw_graph *g = pw_host_calloc(1, sizeof *g);
    if (!g) return PW_ERR_OOM;
    g->pool = pool;
    g->backend = s->backend;
    /* A dry run's addresses are a shadow pool's, which back nothing: its
     * capture stays a host record and never reaches the device (a device
     * capture would record copies and library setup against them). */
    g->dry = s->backend && pw_mem_dry_run_active();
    pw_status st = pw_mem_capture_open(pool);
    if (st == PW_OK && s->backend && !g->dry) {
        st = s->backend->begin_capture(s->impl);
        if (st != PW_OK) pw_mem_capture_close();
    }
    if (st != PW_OK) {
        pw_host_free(g);
        return st;
    }
    s->recording = g;
    tl_capture_stream = s;
    return PW_OK;
}

static pw_graph *detach(pw_stream *s) {
    pw_graph *g = s->recording;
    s->recording = NULL;
    if (tl_capture_stream == s) {
        tl_capture_stream = NULL;
        pw_mem_capture_close();
    }
    return g;
}

void pw_stream_abort_capture(pw_stream *s) {
    if (!s->recording) return;
    if (s->backend && !s->recording->dry) s->backend->abort_capture(s->impl);
    graph_destroy(detach(s));
}

/* Closes the device side of the capture: on failure the whole capture is
 * dropped and the error returned. */
static pw_status end_device_capture(pw_stream *s, void *reuse) {
    if (!s->backend || s->recording->dry) return PW_OK;
    pw_graph *g = s->recording;
    pw_status st = s->backend->end_capture(s->impl, reuse, &g->device_graph);
    if (st != PW_OK) {
        g->device_graph = NULL;
        graph_destroy(detach(s));
    }
    return st;
}

/* A capture with an illegal call in it ends in that call's error, and
 * everything it made is freed. */
static pw_status refuse_poisoned(pw_stream *s) {
    if (tl_capture_stream != s) return PW_OK; /* the record is this thread's */
    const char *msg = NULL;
    pw_status v = pw_mem_capture_violation(&msg);
    if (v == PW_OK) return PW_OK;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", msg);
    pw_stream_abort_capture(s);
    return pw_error(v, "capture abandoned: %s", copy);
}

pw_status pw_stream_end_capture(pw_stream *s, pw_graph **out) {
    *out = NULL;
    if (!s->recording)
        return pw_error(PW_ERR_CAPTURE, "end_capture: no capture is open on this stream");
    PW_TRY(refuse_poisoned(s));
    PW_TRY(end_device_capture(s, NULL));
    /* Reference the pool before the capture closes, so a trim deferred
     * during the capture cannot release what the new graph uses. */
    pw_pool_graph_ref(s->recording->pool);
    pw_graph *g = detach(s);
    for (size_t i = 0; i < g->n; i++)
        g->launches[i].args = g->arena + (uintptr_t)g->launches[i].args;
    *out = g;
    return PW_OK;
}

pw_status pw_stream_end_capture_update(pw_stream *s, pw_graph *g) {
    if (!s->recording)
        return pw_error(PW_ERR_CAPTURE, "end_capture: no capture is open on this stream");
    if (g->pool != s->recording->pool || g->backend != s->backend ||
        g->dry != s->recording->dry) {
        pw_stream_abort_capture(s);
        return pw_error(PW_ERR_INVALID_ARG,
                        "end_capture_update: the graph was captured into another pool or device");
    }
    PW_TRY(refuse_poisoned(s));
    PW_TRY(end_device_capture(s, g->device_graph));
    pw_graph *fresh = detach(s);
    for (size_t i = 0; i < fresh->n; i++)
        fresh->launches[i].args = fresh->arena + (uintptr_t)fresh->launches[i].args;
    /* Swap the recordings: g keeps its identity and its pool reference. */
    if (fresh->device_graph == g->device_graph) g->device_graph = NULL;
    pw_graph old = *g;
    *g = *fresh;
    *fresh = old;
    graph_destroy(fresh);
    return PW_OK;
}

/* A graph replayed while another capture is open on the stream becomes
 * part of that capture, launch by launch, as a CUDA graph launched during
 * stream capture becomes a child graph. */
static pw_status replay_into_capture(pw_graph *g, pw_stream *s) {
    for (size_t i = 0; i < g->n; i++)
        PW_TRY(record(s, g->kernels[i], g->launches[i].args, g->argbytes[i]));
    return PW_OK;
}

pw_status pw_graph_replay(pw_graph *g, pw_stream *s) {
    if (PW_UNLIKELY(g->backend != NULL || s->backend != NULL || s->recording != NULL)) {
        if (g->backend != s->backend)
            return pw_error(PW_ERR_INVALID_ARG, "replay: the graph and the stream are on "
                                                "different devices");
        if (g->dry || (s->recording && s->recording->dry)) {
            if (s->recording) return replay_into_capture(g, s);
            if (pw_mem_dry_run_active()) return PW_OK; /* eager: dropped, like a launch */
            return pw_error(PW_ERR_STATE, "replay: the graph was captured in a dry run, "
                                          "which records addresses that back nothing");
        }
        if (g->backend) return g->backend->replay(g->device_graph, s->impl);
        return replay_into_capture(g, s);
    }
    const pw_recorded_launch *l = g->launches;
    const pw_recorded_launch *end = l + g->n;
    for (; l != end; l++) l->fn(l->args);
    return PW_OK;
}

void pw_graph_free(pw_graph *g) {
    if (!g) return;
    pw_pool_graph_unref(g->pool);
    graph_destroy(g);
}

size_t pw_graph_num_launches(const pw_graph *g) { return g->n; }
pw_pool *pw_graph_pool(const pw_graph *g) { return g->pool; }

pw_status pw_graph_launch_at(const pw_graph *g, size_t i, const pw_kernel **kernel,
                             const void **args, size_t *argbytes) {
    if (i >= g->n)
        return pw_error(PW_ERR_INVALID_ARG, "graph has %zu launches, asked for #%zu", g->n, i);
    *kernel = g->kernels[i];
    *args = g->launches[i].args;
    *argbytes = g->argbytes[i];
    return PW_OK;
}

/* ---- the open recording (backend/graph_record.h) ------------------------------------------ */

size_t pw_stream_capture_num_launches(const pw_stream *s) {
    return s && s->recording ? s->recording->n : 0;
}

pw_status pw_stream_capture_launch_at(const pw_stream *s, size_t i, const pw_kernel **kernel,
                                      const void **args, size_t *argbytes) {
    if (!s || !s->recording)
        return pw_error(PW_ERR_CAPTURE, "capture_launch_at: no capture is open on this stream");
    const pw_graph *g = s->recording;
    if (i >= g->n)
        return pw_error(PW_ERR_INVALID_ARG, "the open capture has %zu launches, asked for #%zu",
                        g->n, i);
    /* until the capture ends, a launch holds its offset in the arena */
    *kernel = g->kernels[i];
    *args = g->arena + (uintptr_t)g->launches[i].args;
    *argbytes = g->argbytes[i];
    return PW_OK;
}

pw_status pw_stream_capture_rewind(pw_stream *s, size_t n) {
    if (!s || !s->recording)
        return pw_error(PW_ERR_CAPTURE, "capture_rewind: no capture is open on this stream");
    if (s->backend)
        return pw_error(PW_ERR_UNSUPPORTED,
                        "capture_rewind: a capture on the %s device cannot forget launches it "
                        "already made",
                        pw_device_name(s->device));
    pw_graph *g = s->recording;
    if (n > g->n)
        return pw_error(PW_ERR_INVALID_ARG, "capture_rewind: the open capture has %zu launches, "
                                            "cannot rewind to %zu", g->n, n);
    if (n < g->n) g->arena_used = (uintptr_t)g->launches[n].args;
    g->n = n;
    return PW_OK;
}

/* The one copy of a range of launches: relocation describes a recording
 * with it and checks one, the wrapper's verify_capture compares two. */
static pw_status launch_at(const pw_graph *g, const pw_stream *s, size_t i, const pw_kernel **k,
                           const void **args, size_t *nb) {
    return g ? pw_graph_launch_at(g, i, k, args, nb) : pw_stream_capture_launch_at(s, i, k, args, nb);
}

pw_status pw_launch_copy_take(const pw_graph *g, const pw_stream *s, size_t n0, size_t n1,
                              pw_launch_copy *out) {
    memset(out, 0, sizeof *out);
    size_t have = g ? pw_graph_num_launches(g) : pw_stream_capture_num_launches(s);
    if (n0 > n1 || n1 > have)
        return pw_error(PW_ERR_INVALID_ARG, "copy of launches [%zu, %zu) of a recording of %zu",
                        n0, n1, have);
    size_t n = n1 - n0, total = 0;
    out->kernels = pw_host_calloc(n ? n : 1, sizeof *out->kernels);
    out->offsets = pw_host_calloc(n + 1, sizeof *out->offsets);
    if (!out->kernels || !out->offsets) goto oom;
    for (size_t i = 0; i < n; i++) {
        const void *a;
        size_t nb;
        (void)launch_at(g, s, n0 + i, &out->kernels[i], &a, &nb); /* in range: cannot fail */
        out->offsets[i] = total;
        total += nb;
    }
    out->offsets[n] = total;
    out->bytes = pw_host_alloc(total ? total : 1);
    if (!out->bytes) goto oom;
    for (size_t i = 0; i < n; i++) {
        const pw_kernel *k;
        const void *a;
        size_t nb;
        (void)launch_at(g, s, n0 + i, &k, &a, &nb);
        if (nb) memcpy(out->bytes + out->offsets[i], a, nb);
    }
    out->n = n;
    return PW_OK;
oom:
    pw_launch_copy_free(out);
    return PW_ERR_OOM;
}

void pw_launch_copy_free(pw_launch_copy *c) {
    pw_host_free(c->kernels);
    pw_host_free(c->offsets);
    pw_host_free(c->bytes);
    memset(c, 0, sizeof *c);
}

/* ---- copies and memset ------------------------------------------------------------------ */

/* On the CPU a copy is a memcpy kernel: eager it runs at once, during a
 * capture it is recorded like any launch (so verify_capture and
 * pw_graph_launch_at see it too). A device stream records the same host
 * entry and hands the copy itself to its backend. */
typedef struct copy_args {
    void *dst;
    const void *src;
    size_t bytes;
} copy_args;

typedef struct memset_args {
    void *dst;
    size_t bytes;
    int value;
} memset_args;

static void copy_kernel(const void *p) {
    const copy_args *a = p;
    memcpy(a->dst, a->src, a->bytes);
}

static void memset_kernel(const void *p) {
    const memset_args *a = p;
    memset(a->dst, a->value, a->bytes);
}

static const pw_kernel copy_kernels[] = {
    [PW_COPY_H2D] = {"copy_h2d", copy_kernel, NULL},
    [PW_COPY_D2H] = {"copy_d2h", copy_kernel, NULL},
    [PW_COPY_D2D] = {"copy_d2d", copy_kernel, NULL},
};
static const pw_kernel memset_kernel_def = {"memset", memset_kernel, NULL, NULL};

static const char *copy_name(pw_copy_kind kind) { return copy_kernels[kind].name; }

static pw_status check_copy(const pw_stream *s, pw_copy_kind kind, const void *dst,
                            const void *src, size_t bytes) {
    const char *what = copy_name(kind);
    if (!s) return pw_error(PW_ERR_INVALID_ARG, "%s: stream is NULL", what);
    if (bytes == 0) return PW_OK;
    if (!dst || !src)
        return pw_error(PW_ERR_INVALID_ARG, "%s of %zu bytes: %s pointer is NULL", what, bytes,
                        !dst ? "destination" : "source");
    uintptr_t d = (uintptr_t)dst, r = (uintptr_t)src;
    if (d + bytes < d || r + bytes < r)
        return pw_error(PW_ERR_INVALID_ARG, "%s: %zu bytes run past the end of the address space",
                        what, bytes);
    /* Only a d2d copy has both ranges in one address space everywhere. */
    if ((kind == PW_COPY_D2D || !s->backend) && d < r + bytes && r < d + bytes)
        return pw_error(PW_ERR_INVALID_ARG,
                        "%s: source and destination ranges of %zu bytes overlap", what, bytes);
    return PW_OK;
}

static pw_status stream_copy(pw_stream *s, pw_copy_kind kind, void *dst, const void *src,
                             size_t bytes) {
    PW_TRY(check_copy(s, kind, dst, src, bytes));
    if (bytes == 0) return PW_OK;
    copy_args a = {dst, src, bytes};
    if (!s->backend) return pw_launch(s, &copy_kernels[kind], &a, sizeof a);
    if (s->recording) PW_TRY(record(s, &copy_kernels[kind], &a, sizeof a));
    if (pw_mem_dry_run_active()) return PW_OK; /* the device never sees a dry run */
    pw_status st = s->backend->copy(s->impl, kind, dst, src, bytes);
    if (st != PW_OK && s->recording) return note_violation(s, st);
    return st;
}

pw_status pw_stream_copy_h2d(pw_stream *s, void *dst, const void *src, size_t bytes) {
    return stream_copy(s, PW_COPY_H2D, dst, src, bytes);
}

pw_status pw_stream_copy_d2h(pw_stream *s, void *dst, const void *src, size_t bytes) {
    return stream_copy(s, PW_COPY_D2H, dst, src, bytes);
}

pw_status pw_stream_copy_d2d(pw_stream *s, void *dst, const void *src, size_t bytes) {
    return stream_copy(s, PW_COPY_D2D, dst, src, bytes);
}

pw_status pw_stream_memset(pw_stream *s, void *dst, int value, size_t bytes) {
    if (!s) return pw_error(PW_ERR_INVALID_ARG, "memset: stream is NULL");
    if (value < 0 || value > 255)
        return pw_error(PW_ERR_INVALID_ARG, "memset: value %d is not a byte (0..255)", value);
    if (bytes == 0) return PW_OK;
    if (!dst) return pw_error(PW_ERR_INVALID_ARG, "memset of %zu bytes: destination is NULL", bytes);
    if ((uintptr_t)dst + bytes < (uintptr_t)dst)
        return pw_error(PW_ERR_INVALID_ARG,
                        "memset: %zu bytes run past the end of the address space", bytes);
    memset_args a = {dst, bytes, value};
    if (!s->backend) return pw_launch(s, &memset_kernel_def, &a, sizeof a);
    if (s->recording) PW_TRY(record(s, &memset_kernel_def, &a, sizeof a));
    if (pw_mem_dry_run_active()) return PW_OK; /* the device never sees a dry run */
    pw_status st = s->backend->memset(s->impl, dst, value, bytes);
    if (st != PW_OK && s->recording) return note_violation(s, st);
    return st;
}

/* ---- devices: availability and capabilities ------------------------------------------------ */

bool pw_device_available(pw_device device, const char **reason) {
    if (reason) *reason = "";
    if (device == PW_DEVICE_CPU) return true;
    if ((unsigned)device >= PW_DEVICE_COUNT_) {
        if (reason) *reason = "unknown device";
        return false;
    }
    const pw_stream_backend *b = backend_of(device);
    if (!b) {
        if (reason)
            *reason = device == PW_DEVICE_CUDA
                          ? "this build has no CUDA backend (configure with nvcc and -DPW_CUDA=ON)"
                          : "this build has no backend for the device";
        return false;
    }
    const char *why = "";
    if (b->available(&why)) return true;
    if (reason) *reason = why;
    return false;
}

bool pw_cuda_available(void) { return pw_device_available(PW_DEVICE_CUDA, NULL); }

const char *pw_cuda_unavailable_reason(void) {
    const char *why = "";
    (void)pw_device_available(PW_DEVICE_CUDA, &why);
    return why;
}

pw_status pw_device_get_caps(pw_device device, pw_device_caps *out) {
    if (!out) return pw_error(PW_ERR_INVALID_ARG, "device caps: out is NULL");
    memset(out, 0, sizeof *out);
    if ((unsigned)device >= PW_DEVICE_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "device caps: unknown device %d", (int)device);
    const char *why = "";
    if (!pw_device_available(device, &why))
        return pw_error(PW_ERR_UNSUPPORTED, "device %s: %s", pw_device_name(device), why);
    if (device == PW_DEVICE_CPU) {
        /* recorded graphs; nothing instantiated to update; copies are
         * memcpys done on return; no lazy setup to warm up */
        out->graphs = true;
        return PW_OK;
    }
    device_backends[device]->caps(out);
    return PW_OK;
}
