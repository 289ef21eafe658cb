/* The graph wrapper: one runnable, one runtime mode, one captured graph per
 * batch descriptor.
 *
 * Entries live in an open-addressing table (linear probing, load <= 1/2)
 * keyed by descriptor, so the replay path is a hash, one or two probes, an
 * optional address check and the replay itself. A single entry is removed
 * by backward-shift deletion (the entries after it in its probe run move
 * up), so the table never needs tombstones and lookups stay as short.
 *
 * Outputs: at capture the caller gets the runnable's real output, whose
 * owning references let the caller's frees during capture reach the graph
 * pool. The entry keeps only weak aliases (pw_tensor_weak_alias) of it; each
 * replay returns new references to those same aliases. */
#include "runtime/runtime_internal.h"

#include "backend/graph_record.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define PW_WRAPPER_INITIAL_SLOTS 16
/* How many addresses an address-mismatch message lists before eliding. */
#define PW_ADDRESS_LIST_SHOWN 16
/* verify_capture compares two rounds; one extra round is allowed when the
 * first one had to grow the pool (its addresses are not comparable). */
#define PW_VERIFY_MAX_ROUNDS 3

typedef struct wrapper_entry {
    pw_batch_desc desc;
    pw_graph *graph;     /* NULL until a capture succeeds */
    pw_value output;     /* weak aliases of the captured output */
    void **input_addrs;  /* data pointers of the top-level tensor args at capture */
    int n_inputs;
} wrapper_entry;

typedef struct entry_slot {
    uint64_t hash;
    wrapper_entry *entry; /* NULL: empty slot */
} entry_slot;

/* Written only by the thread calling the wrapper, read by anyone: relaxed
 * atomics cost nothing on the hot path and keep readers race-free. */
typedef struct wrapper_counters_atomic {
    atomic_uint_least64_t graphs_captured;
    atomic_uint_least64_t captures_attempted;
    atomic_uint_least64_t replays;
    atomic_uint_least64_t pass_throughs;
} wrapper_counters_atomic;

struct pw_graph_wrapper {
    pw_callable runnable;
    pw_runtime_mode mode;
    pw_stream *stream;
    pw_pool *pool;
    pw_wrapper_options opts;
    char *name;
    bool check_addresses;
    entry_slot *slots;
    size_t slot_cap; /* power of two */
    size_t n_entries;
    size_t n_graphs;
    int capturing; /* > 0 while a capture of this wrapper runs */
    wrapper_counters_atomic counters;
    pw_graph_wrapper *reg_prev, *reg_next;
};

/* ---- registry and global counters ------------------------------------------ */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pw_graph_wrapper *registry_head;
static size_t registry_count;
static pw_wrapper_counters retired_counters; /* of wrappers already freed */
static pw_wrapper_counters counters_baseline; /* totals at the last reset */

/* What wrappers captured on this thread: a capture runs on the thread that
 * calls the wrapper, so the capture driver reads the difference across its
 * run and counts exactly its own captures, whatever other threads capture
 * meanwhile. */
static _Thread_local pw_capture_tally thread_tally;

void pw_capture_tally_get(pw_capture_tally *out) { *out = thread_tally; }

static inline void counter_bump(atomic_uint_least64_t *c) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void counters_load(const pw_graph_wrapper *w, pw_wrapper_counters *out) {
    wrapper_counters_atomic *c = (wrapper_counters_atomic *)&w->counters;
    out->graphs_captured = atomic_load_explicit(&c->graphs_captured, memory_order_relaxed);
    out->captures_attempted = atomic_load_explicit(&c->captures_attempted, memory_order_relaxed);
    out->replays = atomic_load_explicit(&c->replays, memory_order_relaxed);
    out->pass_throughs = atomic_load_explicit(&c->pass_throughs, memory_order_relaxed);
}

static void counters_add(pw_wrapper_counters *acc, const pw_wrapper_counters *c) {
    acc->graphs_captured += c->graphs_captured;
    acc->captures_attempted += c->captures_attempted;
    acc->replays += c->replays;
    acc->pass_throughs += c->pass_throughs;
}

/* Caller holds registry_lock. */
static void counters_total_locked(pw_wrapper_counters *out) {
    *out = retired_counters;
    for (pw_graph_wrapper *w = registry_head; w; w = w->reg_next) {
        pw_wrapper_counters c;
        counters_load(w, &c);
        counters_add(out, &c);
    }
}

void pw_counters_get(pw_wrapper_counters *out) {
    pw_wrapper_counters total;
    pthread_mutex_lock(&registry_lock);
    counters_total_locked(&total);
    out->graphs_captured = total.graphs_captured - counters_baseline.graphs_captured;
    out->captures_attempted = total.captures_attempted - counters_baseline.captures_attempted;
    out->replays = total.replays - counters_baseline.replays;
    out->pass_throughs = total.pass_throughs - counters_baseline.pass_throughs;
    pthread_mutex_unlock(&registry_lock);
}

void pw_counters_reset(void) {
    pthread_mutex_lock(&registry_lock);
    counters_total_locked(&counters_baseline);
    pthread_mutex_unlock(&registry_lock);
}

size_t pw_graph_wrappers_count(void) {
    pthread_mutex_lock(&registry_lock);
    size_t n = registry_count;
    pthread_mutex_unlock(&registry_lock);
    return n;
}

/* ---- options ------------------------------------------------------------------ */

void pw_wrapper_options_init(pw_wrapper_options *opts) { memset(opts, 0, sizeof *opts); }

/* ---- entries ------------------------------------------------------------------- */

static void entry_destroy(wrapper_entry *e) {
    pw_value_release(e->output);
    pw_graph_free(e->graph);
    pw_host_free(e->input_addrs);
    pw_host_free(e);
}

static inline wrapper_entry *entry_find(const pw_graph_wrapper *w, const pw_batch_desc *d,
                                        uint64_t h) {
    size_t mask = w->slot_cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const entry_slot *s = &w->slots[i];
        if (!s->entry) return NULL;
        if (s->hash == h && pw_batch_desc_equal(&s->entry->desc, d)) return s->entry;
    }
}

static void slot_place(entry_slot *slots, size_t cap, uint64_t h, wrapper_entry *e) {
    size_t mask = cap - 1;
    size_t i = (size_t)h & mask;
    while (slots[i].entry) i = (i + 1) & mask;
    slots[i].hash = h;
    slots[i].entry = e;
}

static pw_status entry_insert(pw_graph_wrapper *w, const pw_batch_desc *d, uint64_t h,
                              wrapper_entry **out) {
    if ((w->n_entries + 1) * 2 > w->slot_cap) {
        size_t cap = w->slot_cap * 2;
        entry_slot *slots = pw_host_calloc(cap, sizeof *slots);
        if (!slots) return PW_ERR_OOM;
        for (size_t i = 0; i < w->slot_cap; i++)
            if (w->slots[i].entry) slot_place(slots, cap, w->slots[i].hash, w->slots[i].entry);
        pw_host_free(w->slots);
        w->slots = slots;
        w->slot_cap = cap;
    }
    wrapper_entry *e = pw_host_calloc(1, sizeof *e);
    if (!e) return PW_ERR_OOM;
    e->desc = *d;
    e->output = pw_value_none();
    slot_place(w->slots, w->slot_cap, h, e);
    w->n_entries++;
    *out = e;
    return PW_OK;
}

/* Removes the entry in slot i: each later entry of the same probe run whose
 * home slot is not between the hole and itself (cyclically) moves into the
 * hole, so every remaining entry stays reachable from its home slot. */
static void slot_remove(pw_graph_wrapper *w, size_t i) {
    size_t mask = w->slot_cap - 1;
    size_t hole = i;
    w->slots[hole].entry = NULL;
    for (size_t j = (hole + 1) & mask; w->slots[j].entry; j = (j + 1) & mask) {
        size_t home = (size_t)w->slots[j].hash & mask;
        /* j may move to the hole when its home is not in (hole, j] */
        bool home_in_between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (home_in_between) continue;
        w->slots[hole] = w->slots[j];
        w->slots[j].entry = NULL;
        hole = j;
    }
    w->n_entries--;
}

/* ---- lifetime ------------------------------------------------------------------ */

pw_status pw_graph_wrapper_new(pw_callable runnable, pw_runtime_mode mode, pw_stream *stream,
                               pw_pool *graph_pool, const pw_wrapper_options *opts,
                               pw_graph_wrapper **out) {
    *out = NULL;
    const char *label = opts && opts->name ? opts->name : runnable.name ? runnable.name : "(unnamed)";
    if (!runnable.fn)
        return pw_error(PW_ERR_INVALID_ARG, "graph wrapper '%s': the runnable has no function",
                        label);
    if (mode != PW_MODE_PIECEWISE && mode != PW_MODE_FULL)
        return pw_error(PW_ERR_INVALID_ARG,
                        "graph wrapper '%s': runtime mode must be PIECEWISE or FULL, got %s (a "
                        "runnable that never captures needs no wrapper)",
                        label, pw_runtime_mode_name(mode));
    if (!stream || !graph_pool)
        return pw_error(PW_ERR_INVALID_ARG, "graph wrapper '%s': stream and graph pool are required",
                        label);
    if (pw_stream_device(stream) != pw_pool_device(graph_pool))
        return pw_error(PW_ERR_INVALID_ARG,
                        "graph wrapper '%s': graph pool '%s' is %s memory but the stream is %s",
                        label, pw_pool_name(graph_pool), pw_device_name(pw_pool_device(graph_pool)),
                        pw_device_name(pw_stream_device(stream)));
    if (opts && (unsigned)opts->debug_check_addresses > PW_ADDRESS_CHECK_ON)
        return pw_error(PW_ERR_INVALID_ARG, "graph wrapper '%s': invalid debug_check_addresses %d",
                        label, (int)opts->debug_check_addresses);

    pw_graph_wrapper *w = pw_host_calloc(1, sizeof *w);
    if (!w) return PW_ERR_OOM;
    w->runnable = runnable;
    w->mode = mode;
    w->stream = stream;
    w->pool = graph_pool;
    if (opts) w->opts = *opts;
    w->name = pw_host_strdup(label);
    w->slots = pw_host_calloc(PW_WRAPPER_INITIAL_SLOTS, sizeof *w->slots);
    if (!w->name || !w->slots) {
        pw_host_free(w->name);
        pw_host_free(w->slots);
        pw_host_free(w);
        return PW_ERR_OOM;
    }
    w->opts.name = w->name;
    w->slot_cap = PW_WRAPPER_INITIAL_SLOTS;
    switch (w->opts.debug_check_addresses) {
    case PW_ADDRESS_CHECK_ON: w->check_addresses = true; break;
    case PW_ADDRESS_CHECK_OFF: w->check_addresses = false; break;
    default: w->check_addresses = pw_log_get_level() >= PW_LOG_DEBUG; break;
    }

    pthread_mutex_lock(&registry_lock);
    w->reg_next = registry_head;
    if (registry_head) registry_head->reg_prev = w;
    registry_head = w;
    registry_count++;
    pthread_mutex_unlock(&registry_lock);
    *out = w;
    return PW_OK;
}

static void clear_entries(pw_graph_wrapper *w) {
    for (size_t i = 0; i < w->slot_cap; i++) {
        if (w->slots[i].entry) entry_destroy(w->slots[i].entry);
        w->slots[i].entry = NULL;
    }
    w->n_entries = 0;
    w->n_graphs = 0;
}

void pw_graph_wrapper_free(pw_graph_wrapper *w) {
    if (!w) return;
    pthread_mutex_lock(&registry_lock);
    if (w->reg_prev) w->reg_prev->reg_next = w->reg_next;
    else registry_head = w->reg_next;
    if (w->reg_next) w->reg_next->reg_prev = w->reg_prev;
    registry_count--;
    pw_wrapper_counters c;
    counters_load(w, &c);
    counters_add(&retired_counters, &c);
    pthread_mutex_unlock(&registry_lock);
    clear_entries(w);
    pw_host_free(w->slots);
    pw_host_free(w->name);
    pw_host_free(w);
}

pw_status pw_graph_wrapper_clear(pw_graph_wrapper *w) {
    if (w->capturing)
        return pw_error(PW_ERR_STATE, "graph wrapper '%s': cannot clear graphs during its own capture",
                        w->name);
    clear_entries(w);
    return PW_OK;
}

/* Clears every wrapper it can; the first failure is returned, and the
 * wrappers after it are still cleared without replacing its message. */
pw_status pw_graph_wrappers_clear_all(void) {
    pw_status first = PW_OK;
    pthread_mutex_lock(&registry_lock);
    for (pw_graph_wrapper *w = registry_head; w; w = w->reg_next) {
        pw_status s = pw_graph_wrapper_clear(w);
        if (s != PW_OK && first == PW_OK) {
            first = pw_error_context(s, "clearing all graph wrappers");
            pw_error_hold();
        }
    }
    if (first != PW_OK) pw_error_unhold();
    pthread_mutex_unlock(&registry_lock);
    return first;
}

pw_status pw_graph_wrappers_clear_pool(const pw_pool *pool) {
    pw_status first = PW_OK;
    pthread_mutex_lock(&registry_lock);
    for (pw_graph_wrapper *w = registry_head; w; w = w->reg_next) {
        if (w->pool != pool) continue;
        pw_status s = pw_graph_wrapper_clear(w);
        if (s != PW_OK && first == PW_OK) {
            first = s;
            pw_error_hold();
        }
    }
    if (first != PW_OK) pw_error_unhold();
    pthread_mutex_unlock(&registry_lock);
    return first;
}

/* ---- accessors ------------------------------------------------------------------ */

static pw_status wrapper_callable_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    return pw_graph_wrapper_call(user, args, nargs, out);
}

pw_callable pw_graph_wrapper_as_callable(pw_graph_wrapper *w) {
    pw_callable c = {wrapper_callable_fn, w, w->name};
    return c;
}

pw_callable pw_graph_wrapper_runnable(const pw_graph_wrapper *w) { return w->runnable; }
pw_runtime_mode pw_graph_wrapper_mode(const pw_graph_wrapper *w) { return w->mode; }
const char *pw_graph_wrapper_name(const pw_graph_wrapper *w) { return w->name; }
size_t pw_graph_wrapper_num_graphs(const pw_graph_wrapper *w) { return w->n_graphs; }

pw_status pw_graph_wrapper_graph(const pw_graph_wrapper *w, const pw_batch_desc *desc,
                                 pw_graph **out) {
    wrapper_entry *e = entry_find(w, desc, pw_batch_desc_hash(desc));
    *out = e ? e->graph : NULL;
    if (!*out) {
        char d[PW_BATCH_DESC_FORMAT_CAP];
        return pw_error(PW_ERR_NOT_FOUND, "graph wrapper '%s': no graph for descriptor %s",
                        w->name, pw_batch_desc_format(desc, d, sizeof d));
    }
    return PW_OK;
}

bool pw_graph_wrapper_has_graph(const pw_graph_wrapper *w, const pw_batch_desc *desc) {
    wrapper_entry *e = entry_find(w, desc, pw_batch_desc_hash(desc));
    return e && e->graph;
}

pw_status pw_graph_wrapper_remove(pw_graph_wrapper *w, const pw_batch_desc *desc) {
    char d[PW_BATCH_DESC_FORMAT_CAP];
    if (w->capturing)
        return pw_error(PW_ERR_STATE,
                        "graph wrapper '%s': cannot remove a graph during its own capture", w->name);
    uint64_t h = pw_batch_desc_hash(desc);
    size_t mask = w->slot_cap - 1;
    for (size_t i = (size_t)h & mask; w->slots[i].entry; i = (i + 1) & mask) {
        wrapper_entry *e = w->slots[i].entry;
        if (w->slots[i].hash != h || !pw_batch_desc_equal(&e->desc, desc)) continue;
        if (e->graph) w->n_graphs--;
        entry_destroy(e);
        slot_remove(w, i);
        return PW_OK;
    }
    return pw_error(PW_ERR_NOT_FOUND, "graph wrapper '%s': no graph for descriptor %s to remove",
                    w->name, pw_batch_desc_format(desc, d, sizeof d));
}

static size_t recorded_bytes(const pw_graph *g) {
    if (!g) return 0;
    size_t n = pw_graph_num_launches(g);
    /* per launch: the entry point, the argument pointer, the kernel and its size */
    size_t bytes = n * (sizeof(void *) * 3 + sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        const pw_kernel *k;
        const void *args;
        size_t nb = 0;
        (void)pw_graph_launch_at(g, i, &k, &args, &nb); /* i < n: cannot fail */
        bytes += nb;
    }
    return bytes;
}

size_t pw_graph_wrapper_graph_bytes(const pw_graph_wrapper *w, const pw_batch_desc *desc) {
    wrapper_entry *e = entry_find(w, desc, pw_batch_desc_hash(desc));
    return e ? recorded_bytes(e->graph) : 0;
}

void pw_graph_wrapper_get_counters(const pw_graph_wrapper *w, pw_wrapper_counters *out) {
    counters_load(w, out);
}

/* ---- addresses ------------------------------------------------------------------ */

static int count_tensor_args(const pw_value *args, int nargs) {
    int n = 0;
    for (int i = 0; i < nargs; i++) n += args[i].kind == PW_VAL_TENSOR;
    return n;
}

static void format_addresses(char *buf, size_t cap, void *const *addrs, int n) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && i < PW_ADDRESS_LIST_SHOWN && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%p", i ? ", " : "", addrs[i]);
    if (n > PW_ADDRESS_LIST_SHOWN && used < cap)
        used += (size_t)snprintf(buf + used, cap - used, ", ... (%d more)", n - PW_ADDRESS_LIST_SHOWN);
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

static pw_status check_addresses(const pw_graph_wrapper *w, const wrapper_entry *e,
                                 const pw_value *args, int nargs) {
    int k = 0;
    bool same = true;
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind != PW_VAL_TENSOR) continue;
        if (k >= e->n_inputs || pw_tensor_data(args[i].as.tensor) != e->input_addrs[k]) same = false;
        k++;
    }
    if (PW_LIKELY(same && k == e->n_inputs)) return PW_OK;

    void *now[PW_ADDRESS_LIST_SHOWN + 1];
    int n_now = 0;
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind != PW_VAL_TENSOR) continue;
        if (n_now < (int)PW_ARRAY_LEN(now)) now[n_now] = pw_tensor_data(args[i].as.tensor);
        n_now++;
    }
    char d[PW_BATCH_DESC_FORMAT_CAP], expected[640], got[640];
    format_addresses(expected, sizeof expected, e->input_addrs, e->n_inputs);
    format_addresses(got, sizeof got, now, n_now);
    return pw_error(PW_ERR_ADDRESS_MISMATCH,
                    "graph wrapper '%s' (%s), descriptor %s: input addresses differ from the "
                    "capture; expected %s, got %s (inputs must live in persistent buffers)",
                    w->name, pw_runtime_mode_name(w->mode),
                    pw_batch_desc_format(&e->desc, d, sizeof d), expected, got);
}

static pw_status record_addresses(wrapper_entry *e, const pw_value *args, int nargs) {
    int n = count_tensor_args(args, nargs);
    void **addrs = NULL;
    if (n > 0) {
        addrs = pw_host_alloc((size_t)n * sizeof *addrs);
        if (!addrs) return PW_ERR_OOM;
    }
    int k = 0;
    for (int i = 0; i < nargs; i++)
        if (args[i].kind == PW_VAL_TENSOR) addrs[k++] = pw_tensor_data(args[i].as.tensor);
    pw_host_free(e->input_addrs);
    e->input_addrs = addrs;
    e->n_inputs = n;
    return PW_OK;
}

/* ---- weak outputs --------------------------------------------------------------- */

/* Same structure as v, every tensor replaced by a non-owning alias. */
static pw_status make_weak(pw_value v, pw_value *out) {
    *out = pw_value_none();
    if (v.kind == PW_VAL_TENSOR) {
        pw_tensor *a;
        PW_TRY(pw_tensor_weak_alias(v.as.tensor, &a));
        *out = pw_value_tensor(a);
        return PW_OK;
    }
    if (v.kind == PW_VAL_TUPLE) {
        int n = pw_tuple_size(v.as.tuple);
        pw_tuple *t;
        PW_TRY(pw_tuple_new(n, &t));
        for (int i = 0; i < n; i++) {
            pw_value item;
            pw_status s = make_weak(pw_tuple_get(v.as.tuple, i), &item);
            if (s != PW_OK) {
                pw_tuple_release(t);
                return s;
            }
            pw_tuple_set(t, i, item);
        }
        *out = pw_value_tuple(t);
        return PW_OK;
    }
    *out = v; /* scalars and borrowed strings carry no storage */
    return PW_OK;
}

/* ---- capture --------------------------------------------------------------------- */

/* One capture of the runnable into a new graph. On failure nothing is kept:
 * the stream capture is aborted and no output is returned. */
static pw_status capture_once(pw_graph_wrapper *w, const pw_value *args, int nargs,
                              pw_graph **graph, pw_value *output, pw_value *weak) {
    *graph = NULL;
    *output = pw_value_none();
    *weak = pw_value_none();
    if (w->opts.gc_disable) pw_pool_hold_trim(w->pool);
    pw_status s = pw_stream_begin_capture(w->stream, w->pool);
    if (s == PW_OK) {
        s = w->runnable.fn(w->runnable.user, args, nargs, output);
        if (s != PW_OK) *output = pw_value_none(); /* a failing runnable returns nothing */
        if (s == PW_OK) s = make_weak(*output, weak);
        if (s == PW_OK && w->opts.weak_ref_output) {
            /* Freed while the capture is open, exactly where the seed frees it,
             * so the memory is back in the pool for whatever comes next. */
            pw_value_release(*output);
            *output = pw_value_retain(*weak);
        }
        if (s == PW_OK) s = pw_stream_end_capture(w->stream, graph);
        else pw_stream_abort_capture(w->stream); /* keeps the runnable's message */
        if (s != PW_OK) {
            pw_value_release(*output);
            pw_value_release(*weak);
            *output = *weak = pw_value_none();
        }
    }
    if (w->opts.gc_disable) pw_pool_unhold_trim(w->pool);
    return s;
}

static const char *kernel_label(const pw_kernel *k) {
    return k && k->name ? k->name : "(unnamed)";
}

/* Compares a first recording with a second one, launch by launch. */
static pw_status snapshot_compare(const pw_launch_copy *a, const pw_graph *b) {
    size_t nb_launches = pw_graph_num_launches(b);
    size_t common = a->n < nb_launches ? a->n : nb_launches;
    for (size_t i = 0; i < common; i++) {
        const pw_kernel *k;
        const void *args;
        size_t nb;
        PW_TRY(pw_graph_launch_at(b, i, &k, &args, &nb));
        /* the same kernel may be two descriptors with the same entry points */
        if (k != a->kernels[i] && (!k || !a->kernels[i] || k->cpu != a->kernels[i]->cpu ||
                                   k->cuda != a->kernels[i]->cuda))
            return pw_error(PW_ERR_UNSAFE_CAPTURE,
                            "verify_capture: launch #%zu is kernel %s in the "
                            "first capture and kernel %s in the second: the launch sequence "
                            "depends on per-step values; capture refused",
                            i, kernel_label(a->kernels[i]), kernel_label(k));
        size_t na = a->offsets[i + 1] - a->offsets[i];
        if (na != nb)
            return pw_error(PW_ERR_UNSAFE_CAPTURE,
                            "verify_capture: launch #%zu (kernel %s): argument "
                            "sizes differ between captures (%zu vs %zu bytes); capture refused",
                            i, kernel_label(k), na, nb);
        const unsigned char *x = a->bytes + a->offsets[i], *y = args;
        size_t lo = 0;
        while (lo < nb && x[lo] == y[lo]) lo++;
        if (lo == nb) continue;
        size_t hi = nb;
        while (x[hi - 1] == y[hi - 1]) hi--;
        return pw_error(PW_ERR_UNSAFE_CAPTURE,
                        "verify_capture: launch #%zu (kernel %s): argument "
                        "bytes [%zu,%zu) differ between captures: a per-step value was baked "
                        "into the graph (read it through a persistent buffer instead); capture "
                        "refused",
                        i, kernel_label(k), lo, hi);
    }
    if (a->n != nb_launches)
        return pw_error(PW_ERR_UNSAFE_CAPTURE,
                        "verify_capture: the captures recorded %zu and %zu "
                        "launches: the launch sequence depends on per-step values; capture "
                        "refused",
                        a->n, nb_launches);
    return PW_OK;
}

static size_t pool_reserved(pw_pool *pool) {
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    return st.reserved;
}

/* Captures until two consecutive rounds start from the same pool state, and
 * compares their recordings. Every round but the last is released completely
 * (output, then graph) so the deterministic pool hands the last round the
 * same addresses. */
static pw_status capture_verified(pw_graph_wrapper *w, const pw_value *args, int nargs,
                                  pw_graph **graph, pw_value *output, pw_value *weak) {
    pw_launch_copy prev = {0};
    bool have_prev = false;
    pw_status s = PW_OK;
    for (int round = 0; round < PW_VERIFY_MAX_ROUNDS; round++) {
        if (w->opts.perturb) {
            s = w->opts.perturb(w->opts.perturb_user, round);
            if (s != PW_OK) {
                pw_error_context(s, "verify_capture perturbation hook, round %d", round);
                break;
            }
        }
        size_t reserved_before = pool_reserved(w->pool);
        s = capture_once(w, args, nargs, graph, output, weak);
        if (s != PW_OK) break;
        bool pool_grew = pool_reserved(w->pool) != reserved_before;
        if (have_prev) {
            s = snapshot_compare(&prev, *graph);
            break;
        }
        if (round + 1 == PW_VERIFY_MAX_ROUNDS) {
            s = pw_error(PW_ERR_CAPTURE,
                         "verify_capture: the graph pool grew in each of %d captures, so no two "
                         "of them are comparable (capture the largest descriptor first)",
                         PW_VERIFY_MAX_ROUNDS);
            break;
        }
        s = pw_launch_copy_take(*graph, NULL, 0, pw_graph_num_launches(*graph), &prev);
        /* A round that grew the pool ran on a smaller pool than the next one
         * will, so its addresses differ for a harmless reason: it only sizes
         * the pool, and the next round becomes the reference. */
        have_prev = s == PW_OK && !pool_grew;
        if (!have_prev) pw_launch_copy_free(&prev);
        pw_value_release(*output);
        pw_value_release(*weak);
        pw_graph_free(*graph);
        *output = *weak = pw_value_none();
        *graph = NULL;
        if (s != PW_OK) break;
    }
    pw_launch_copy_free(&prev);
    if (s != PW_OK) {
        pw_value_release(*output);
        pw_value_release(*weak);
        pw_graph_free(*graph);
        *output = *weak = pw_value_none();
        *graph = NULL;
    }
    return s;
}

static pw_status capture(pw_graph_wrapper *w, wrapper_entry *e, const pw_value *args, int nargs,
                         pw_value *out) {
    counter_bump(&w->counters.captures_attempted);
    thread_tally.captures_attempted++;
    char d[PW_BATCH_DESC_FORMAT_CAP];
    if (!pw_capture_phase_active())
        return pw_error(PW_ERR_CAPTURE,
                        "graph wrapper '%s' (%s): capture of descriptor %s requested outside the "
                        "capture phase; graphs are captured only between pw_capture_phase_begin "
                        "and pw_capture_phase_end (pw_capture_all opens it)",
                        w->name, pw_runtime_mode_name(w->mode),
                        pw_batch_desc_format(&e->desc, d, sizeof d));
    if (w->opts.debug_log)
        pw_log_debug("graph wrapper '%s': capturing a graph on (%s, %s)", w->name,
                     pw_runtime_mode_name(w->mode), pw_batch_desc_format(&e->desc, d, sizeof d));
    PW_TRY(record_addresses(e, args, nargs));

    pw_graph *graph = NULL;
    /* NONE until a capture fills them: error paths release them */
    pw_value output = pw_value_none(), weak = pw_value_none();
    w->capturing++;
    pw_status s = w->opts.verify_capture
                      ? capture_verified(w, args, nargs, &graph, &output, &weak)
                      : capture_once(w, args, nargs, &graph, &output, &weak);
    w->capturing--;
    if (s != PW_OK)
        return pw_error_context(s, "graph wrapper '%s' (%s), capturing descriptor %s", w->name,
                                pw_runtime_mode_name(w->mode),
                                pw_batch_desc_format(&e->desc, d, sizeof d));
    e->graph = graph;
    e->output = weak;
    w->n_graphs++;
    counter_bump(&w->counters.graphs_captured);
    thread_tally.graphs_captured++;
    *out = output;
    return PW_OK;
}

/* ---- call -------------------------------------------------------------------------- */

/* The one body behind both calls: only where mode and descriptor come from
 * differs, so the explicit call adds nothing to the context's hot path. */
static inline pw_status wrapper_call_as(pw_graph_wrapper *w, pw_runtime_mode mode,
                                        const pw_batch_desc *desc, const pw_value *args,
                                        int nargs, pw_value *out) {
    if (mode != w->mode) {
        /* NONE (warm-up, eager) or another wrapper's mode: this is how a FULL
         * wrapper and the PIECEWISE wrappers inside it each act only in their
         * own mode. */
        counter_bump(&w->counters.pass_throughs);
        return w->runnable.fn(w->runnable.user, args, nargs, out);
    }
    uint64_t h = pw_batch_desc_hash(desc);
    wrapper_entry *e = entry_find(w, desc, h);
    if (PW_LIKELY(e && e->graph)) {
        if (w->check_addresses) PW_TRY(check_addresses(w, e, args, nargs));
        PW_TRY(pw_graph_replay(e->graph, w->stream));
        counter_bump(&w->counters.replays);
        *out = pw_value_retain(e->output);
        return PW_OK;
    }
    if (!e) PW_TRY(entry_insert(w, desc, h, &e));
    return capture(w, e, args, nargs, out);
}

pw_status pw_graph_wrapper_call(pw_graph_wrapper *w, const pw_value *args, int nargs,
                                pw_value *out) {
    *out = pw_value_none();
    const pw_forward_context *ctx = pw_forward_context_current();
    if (PW_UNLIKELY(!ctx))
        return pw_error(PW_ERR_STATE,
                        "graph wrapper '%s': no forward context is set on this thread (push one "
                        "with pw_forward_context_push around the model call, or call "
                        "pw_graph_wrapper_call_as)",
                        w->name);
    return wrapper_call_as(w, ctx->mode, &ctx->desc, args, nargs, out);
}

pw_status pw_graph_wrapper_call_as(pw_graph_wrapper *w, pw_runtime_mode mode,
                                   const pw_batch_desc *desc, const pw_value *args, int nargs,
                                   pw_value *out) {
    *out = pw_value_none();
    if (PW_UNLIKELY((unsigned)mode >= PW_RUNTIME_MODE_COUNT_ || !desc))
        return pw_error(PW_ERR_INVALID_ARG,
                        "graph wrapper '%s': call_as needs a valid runtime mode (got %d) and a "
                        "descriptor",
                        w->name, (int)mode);
    return wrapper_call_as(w, mode, desc, args, nargs, out);
}
