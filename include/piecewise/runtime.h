/* piecewise public API: runtime layer. Included by piecewise.h; may be included alone.
 *
 * Runtime modes, batch descriptors, the thread-local forward context, the
 * graph wrapper (capture once per descriptor, replay afterwards), the
 * dispatcher (which descriptor and mode a step runs with) and the capture
 * driver. Semantics: docs/runtime.md. */
/* piecewise.h first, outside the guard: it includes every layer header in
 * order, this one included, so whichever header comes first the
 * declarations appear lowest layer first. */
#include "piecewise.h"

#ifndef PIECEWISE_RUNTIME_H
#define PIECEWISE_RUNTIME_H

#include "piecewise/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Modes                                                                     */
/* ------------------------------------------------------------------------ */

/* How one step runs. A wrapper acts only when the context's mode equals
 * its own; NONE means every wrapper passes through (eager). */
typedef enum pw_runtime_mode {
    PW_MODE_NONE = 0,
    PW_MODE_PIECEWISE = 1,
    PW_MODE_FULL = 2,
    PW_RUNTIME_MODE_COUNT_
} pw_runtime_mode;

/* "NONE", "PIECEWISE", "FULL" ("?" for out-of-range values). */
PW_API const char *pw_runtime_mode_name(pw_runtime_mode m);
/* Case-insensitive; unknown names are PW_ERR_PARSE. */
PW_API pw_status pw_runtime_mode_parse(const char *name, pw_runtime_mode *out);

/* What the user configures. The composite modes pick a runtime mode per
 * batch kind: uniform decode batches use the decode mode, all others the
 * mixed mode. */
typedef enum pw_graph_mode {
    PW_GRAPH_NONE = 0,           /* graphs off */
    PW_GRAPH_PIECEWISE,          /* PIECEWISE for every batch */
    PW_GRAPH_FULL,               /* FULL for every batch */
    PW_GRAPH_FULL_DECODE_ONLY,   /* FULL for uniform decode, NONE otherwise */
    PW_GRAPH_FULL_AND_PIECEWISE, /* FULL for uniform decode, PIECEWISE otherwise */
    PW_GRAPH_MODE_COUNT_
} pw_graph_mode;

#define PW_GRAPH_MODE_DEFAULT PW_GRAPH_FULL_AND_PIECEWISE

/* "NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE". */
PW_API const char *pw_graph_mode_name(pw_graph_mode m);
/* Case-insensitive; unknown names are PW_ERR_PARSE. */
PW_API pw_status pw_graph_mode_parse(const char *name, pw_graph_mode *out);
/* Runtime mode used for uniform decode batches / for all other batches. */
PW_API pw_runtime_mode pw_graph_mode_decode_mode(pw_graph_mode m);
PW_API pw_runtime_mode pw_graph_mode_mixed_mode(pw_graph_mode m);
/* True if either the decode or the mixed mode is rm. */
PW_API bool pw_graph_mode_uses(pw_graph_mode m, pw_runtime_mode rm);

/* ------------------------------------------------------------------------ */
/* Batch descriptor: the key of a captured graph                             */
/* ------------------------------------------------------------------------ */

#define PW_NUM_REQS_UNSET (-1)
/* Enough for pw_batch_desc_format of any descriptor. */
#define PW_BATCH_DESC_FORMAT_CAP 96

typedef struct pw_batch_desc {
    int64_t num_tokens; /* already padded to a capture size when used as a key */
    int64_t num_reqs;   /* PW_NUM_REQS_UNSET in relaxed (PIECEWISE) keys */
    bool uniform;       /* every request has the same query length (pure decode) */
    bool has_lora;
} pw_batch_desc;

static inline pw_batch_desc pw_batch_desc_make(int64_t num_tokens, int64_t num_reqs,
                                               bool uniform, bool has_lora) {
    pw_batch_desc d;
    d.num_tokens = num_tokens;
    d.num_reqs = num_reqs;
    d.uniform = uniform;
    d.has_lora = has_lora;
    return d;
}

PW_API uint64_t pw_batch_desc_hash(const pw_batch_desc *d);
PW_API bool pw_batch_desc_equal(const pw_batch_desc *a, const pw_batch_desc *b);
/* The PIECEWISE key: num_reqs unset and uniform false, because pieces do
 * not depend on them. num_tokens and has_lora are kept. */
PW_API pw_batch_desc pw_batch_desc_relax_for_piecewise(pw_batch_desc d);
/* "(num_tokens=8, num_reqs=unset, uniform=false, has_lora=false)" into
 * buf (truncated to cap); returns buf. */
PW_API const char *pw_batch_desc_format(const pw_batch_desc *d, char *buf, size_t cap);

/* ------------------------------------------------------------------------ */
/* Forward context (thread-local, nests)                                     */
/* ------------------------------------------------------------------------ */

#define PW_FORWARD_CONTEXT_MAX_DEPTH 16

typedef struct pw_forward_context {
    pw_runtime_mode mode;
    pw_batch_desc desc;
    const void *attn_metadata; /* borrowed; whatever the attention op needs */
} pw_forward_context;

/* Makes a copy of ctx the current context on this thread; the previous one
 * comes back at the matching pop. Deeper than PW_FORWARD_CONTEXT_MAX_DEPTH
 * or an invalid mode is an error. */
PW_API pw_status pw_forward_context_push(const pw_forward_context *ctx);
/* PW_ERR_STATE if nothing is pushed. */
PW_API pw_status pw_forward_context_pop(void);
/* The current context (valid until the matching pop); PW_ERR_STATE with
 * *out = NULL if none is set. */
PW_API pw_status pw_forward_context_get(const pw_forward_context **out);
PW_API bool pw_forward_context_is_set(void);
PW_API int pw_forward_context_depth(void);

/* ------------------------------------------------------------------------ */
/* Capture phase                                                             */
/* ------------------------------------------------------------------------ */

/* Captures are allowed only between begin and end on the calling thread
 * (the engine's capture phase). Calls nest; end without begin is a no-op
 * that returns PW_ERR_STATE. A wrapper asked to capture outside the phase
 * fails with PW_ERR_CAPTURE. */
PW_API void pw_capture_phase_begin(void);
PW_API pw_status pw_capture_phase_end(void);
PW_API bool pw_capture_phase_active(void);

/* ------------------------------------------------------------------------ */
/* Graph wrapper                                                             */
/* ------------------------------------------------------------------------ */

typedef struct pw_graph_wrapper pw_graph_wrapper;

/* Whether replays compare input addresses with the captured ones. */
typedef enum pw_address_check {
    PW_ADDRESS_CHECK_AUTO = 0, /* on when the log level is debug (PW_LOG_LEVEL=debug) at creation */
    PW_ADDRESS_CHECK_OFF,
    PW_ADDRESS_CHECK_ON
} pw_address_check;

/* Called before each verification capture (round 0, round 1; round 2 when
 * round 0 had to grow the pool, see docs/runtime.md) so the user can write
 * different per-step inputs into the persistent buffers. A failing status
 * aborts the capture with that status. */
typedef pw_status (*pw_perturb_fn)(void *user, int round);

/* Zero-initialised options are the defaults. */
typedef struct pw_wrapper_options {
    const char *name;          /* for logs and errors; copied; NULL: the runnable's name */
    bool gc_disable;           /* hold pool trimming during each capture */
    bool weak_ref_output;      /* release the real output when capture ends (last piece only) */
    bool debug_log;            /* log each capture at debug level */
    pw_address_check debug_check_addresses;
    bool verify_capture;       /* capture twice on first capture and compare the recordings
                                  (argument bytes include struct padding: initialise it) */
    pw_perturb_fn perturb;     /* optional, used by verify_capture */
    void *perturb_user;
} pw_wrapper_options;

PW_API void pw_wrapper_options_init(pw_wrapper_options *opts);

typedef struct pw_wrapper_counters {
    uint64_t graphs_captured;    /* captures that produced a kept graph */
    uint64_t captures_attempted; /* captures started (failed and refused ones too) */
    uint64_t replays;
    uint64_t pass_throughs;      /* calls that ran the runnable eagerly */
} pw_wrapper_counters;

/* mode must be PIECEWISE or FULL. stream is where the runnable launches and
 * where graphs replay; graph_pool is the shared pool captures allocate
 * from. Both are borrowed and must outlive the wrapper. opts may be NULL. */
PW_API pw_status pw_graph_wrapper_new(pw_callable runnable, pw_runtime_mode mode, pw_stream *stream,
                                      pw_pool *graph_pool, const pw_wrapper_options *opts,
                                      pw_graph_wrapper **out);
/* Frees every graph of the wrapper and the wrapper. NULL is a no-op. */
PW_API void pw_graph_wrapper_free(pw_graph_wrapper *w);

/* Reads the forward context (PW_ERR_STATE if none) and then:
 *  - context mode NONE or not the wrapper's mode: calls the runnable;
 *  - no graph for the context's descriptor: captures one (only inside the
 *    capture phase) and returns the runnable's real output;
 *  - otherwise: replays, and returns new references to the same output
 *    tensors as every previous replay of that descriptor.
 * On success *out holds a new reference. */
PW_API pw_status pw_graph_wrapper_call(pw_graph_wrapper *w, const pw_value *args, int nargs,
                                       pw_value *out);
/* pw_graph_wrapper_call with the mode and descriptor given instead of read
 * from the forward context: the wrapper passes through unless mode is its
 * own, else replays desc's graph or captures one. The thread's context is
 * neither read nor changed, so a runnable that reads it (or nested
 * wrappers called with pw_graph_wrapper_call) still sees whatever the
 * caller pushed; pw_module_run (piecewise/module.h) makes the whole chain
 * explicit. A mode outside the enum or a NULL desc is PW_ERR_INVALID_ARG. */
PW_API pw_status pw_graph_wrapper_call_as(pw_graph_wrapper *w, pw_runtime_mode mode,
                                          const pw_batch_desc *desc, const pw_value *args,
                                          int nargs, pw_value *out);
/* The wrapper as a callable (user = w), so wrappers nest and plug into
 * anything that takes a pw_callable. */
PW_API pw_callable pw_graph_wrapper_as_callable(pw_graph_wrapper *w);
/* The wrapped runnable (the seed's unwrap). */
PW_API pw_callable pw_graph_wrapper_runnable(const pw_graph_wrapper *w);
PW_API pw_runtime_mode pw_graph_wrapper_mode(const pw_graph_wrapper *w);
PW_API const char *pw_graph_wrapper_name(const pw_graph_wrapper *w);
/* Number of descriptors with a captured graph. */
PW_API size_t pw_graph_wrapper_num_graphs(const pw_graph_wrapper *w);
/* The graph captured for desc; PW_ERR_NOT_FOUND if none. Borrowed. */
PW_API pw_status pw_graph_wrapper_graph(const pw_graph_wrapper *w, const pw_batch_desc *desc,
                                        pw_graph **out);
/* True if a graph is captured for desc (no error is set either way). */
PW_API bool pw_graph_wrapper_has_graph(const pw_graph_wrapper *w, const pw_batch_desc *desc);
/* Frees the graph (and kept output alias) of one descriptor; the next call
 * for it captures again. PW_ERR_NOT_FOUND if the wrapper has no entry for
 * desc; refused (PW_ERR_STATE) during the wrapper's own capture. */
PW_API pw_status pw_graph_wrapper_remove(pw_graph_wrapper *w, const pw_batch_desc *desc);
/* Host bytes desc's recorded graph holds (its launch table and argument
 * bytes; 0 if none). Graph-pool memory is shared by all graphs and not
 * counted. */
PW_API size_t pw_graph_wrapper_graph_bytes(const pw_graph_wrapper *w, const pw_batch_desc *desc);
PW_API void pw_graph_wrapper_get_counters(const pw_graph_wrapper *w, pw_wrapper_counters *out);
/* Frees every graph (and kept output alias) of this wrapper; the next call
 * for a descriptor captures again. Refused (PW_ERR_STATE) while the
 * wrapper is in the middle of its own capture. */
PW_API pw_status pw_graph_wrapper_clear(pw_graph_wrapper *w);
/* pw_graph_wrapper_clear on every live wrapper (e.g. before re-capture).
 * Returns the first error; clears the others regardless. */
PW_API pw_status pw_graph_wrappers_clear_all(void);
/* Number of live wrappers (all threads). */
PW_API size_t pw_graph_wrappers_count(void);

/* Totals over all wrappers of the process since start or the last reset.
 * Several models capturing on several threads all add to them: the counts
 * of one model are its wrappers' (pw_graph_wrapper_get_counters) and its
 * capture driver's reports. */
PW_API void pw_counters_get(pw_wrapper_counters *out);
PW_API void pw_counters_reset(void);

/* ------------------------------------------------------------------------ */
/* Dispatcher                                                                */
/* ------------------------------------------------------------------------ */

typedef struct pw_dispatcher pw_dispatcher;

/* Upper bound of the default maximum capture size. */
#define PW_DEFAULT_MAX_CAPTURE_SIZE 512
/* Largest number of capture sizes a dispatcher accepts. */
#define PW_MAX_CAPTURE_SIZES 1024

typedef struct pw_dispatcher_config {
    pw_graph_mode mode;
    int64_t max_num_seqs;           /* > 0 */
    int64_t max_num_batched_tokens; /* > 0; bounds every capture size */
    /* Optional user list (NULL: the default list). De-duplicated, sorted;
     * sizes above max_num_batched_tokens are dropped. */
    const int64_t *capture_sizes;
    int n_capture_sizes;
    /* Optional explicit maximum (0: derived). With a user list it must
     * equal the list's largest kept size; without one it bounds the
     * default list. */
    int64_t max_capture_size;
    bool lora_enabled; /* also make keys with has_lora = true */
} pw_dispatcher_config;

/* mode = PW_GRAPH_MODE_DEFAULT, max_num_seqs = 256,
 * max_num_batched_tokens = 8192, default sizes, no LoRA. */
PW_API void pw_dispatcher_config_init(pw_dispatcher_config *cfg);

/* One descriptor to capture and the mode to capture it in. */
typedef struct pw_capture_item {
    pw_runtime_mode mode;
    pw_batch_desc desc;
} pw_capture_item;

PW_API pw_status pw_dispatcher_new(const pw_dispatcher_config *cfg, pw_dispatcher **out);
PW_API void pw_dispatcher_free(pw_dispatcher *d);

/* Picks the mode and descriptor of a step:
 *  - graphs off or num_tokens > max capture size: NONE with the exact,
 *    unpadded descriptor;
 *  - else pad num_tokens to the smallest capture size >= it, then try the
 *    exact FULL key (uniform decode: num_reqs = padded size, uniform), then
 *    the relaxed key (FULL if the mixed mode is FULL, else PIECEWISE), and
 *    fall back to NONE with the exact descriptor.
 * num_tokens < 1 is PW_ERR_INVALID_ARG. No allocation, no locks. */
PW_API pw_status pw_dispatch(const pw_dispatcher *d, int64_t num_tokens, bool uniform_decode,
                             bool has_lora, pw_runtime_mode *mode, pw_batch_desc *desc);
PW_API pw_graph_mode pw_dispatcher_graph_mode(const pw_dispatcher *d);
/* Sorted ascending; borrowed. */
PW_API const int64_t *pw_dispatcher_capture_sizes(const pw_dispatcher *d, int *n);
PW_API int64_t pw_dispatcher_max_capture_size(const pw_dispatcher *d);
/* Smallest capture size >= n, or -1 if n < 1 or n > the maximum. */
PW_API int64_t pw_dispatcher_padded_size(const pw_dispatcher *d, int64_t n);
/* The descriptors to capture: PIECEWISE first, then FULL, each largest
 * first. Borrowed; *n is the count. */
PW_API const pw_capture_item *pw_dispatcher_capture_list(const pw_dispatcher *d, size_t *n);

/* ------------------------------------------------------------------------ */
/* Capture driver                                                            */
/* ------------------------------------------------------------------------ */

/* One forward step for the driver. The driver has already pushed a forward
 * context {mode, *desc, attn_metadata = NULL}; a callback that needs
 * attention metadata pushes its own nested context and pops it. */
typedef pw_status (*pw_forward_fn)(void *user, pw_runtime_mode mode, const pw_batch_desc *desc);

typedef enum pw_progress {
    PW_PROGRESS_AUTO = 0, /* a bar on stderr when stderr is a terminal */
    PW_PROGRESS_OFF,
    PW_PROGRESS_ON
} pw_progress;

typedef struct pw_capture_options {
    int warmups;          /* eager runs per descriptor before its capture (>= 0), on a
                             device that needs them (see graph_pool) */
    pw_progress progress;
    pw_pool *graph_pool;  /* optional: its stats go into the report and the totals line;
                             when its device reports !needs_warmup (the CPU records
                             without computing and has no lazy setup) the warm-ups
                             are skipped */
    bool print_totals;    /* print the totals line on stderr (it is always logged at info) */
    bool force_warmups;   /* run the warm-ups even where the device does not need them */
} pw_capture_options;

/* warmups = 1, progress AUTO, no pool, totals printed, warm-ups not forced. */
PW_API void pw_capture_options_init(pw_capture_options *opts);

#define PW_CAPTURE_SUMMARY_CAP 128

typedef struct pw_capture_report {
    size_t descriptors;       /* descriptors captured */
    size_t warmup_runs;       /* eager warm-up runs made (0 where the device needs none) */
    uint64_t graphs_captured; /* graphs kept by the captures of this run (on the calling
                                 thread; another thread's captures are not counted) */
    double seconds;
    size_t pool_reserved;     /* graph pool bytes reserved at the end (0 without a pool) */
    size_t pool_peak_allocated;
    char summary[PW_CAPTURE_SUMMARY_CAP]; /* "captured 102 graphs in 38 ms, graph pool 1.2 MiB" */
} pw_capture_report;

/* For each descriptor of pw_dispatcher_capture_list, in order: `warmups`
 * eager runs (context mode NONE, same descriptor; none when graph_pool's
 * device reports !needs_warmup and force_warmups is off), then one run with the
 * descriptor's mode inside the capture phase, so the wrappers capture.
 * Stops at the first error, with the descriptor in the message. opts and
 * out may be NULL. */
PW_API pw_status pw_capture_all(const pw_dispatcher *d, pw_forward_fn fwd, void *user,
                                const pw_capture_options *opts, pw_capture_report *out);

/* One descriptor as pw_capture_all captures each of its list (warm-ups
 * where the device needs them, then the capture inside a capture phase):
 * lazy capture, when a step first needs it. opts may be NULL. */
PW_API pw_status pw_capture_one(pw_forward_fn fwd, void *user, const pw_capture_options *opts,
                                const pw_capture_item *item);

/* What a dry run of the capture list found. */
typedef struct pw_capture_plan_report {
    size_t descriptors;         /* descriptors of the capture list */
    uint64_t graphs;            /* graphs the dry run recorded (and freed); its own only,
                                   as pw_capture_report.graphs_captured */
    size_t graph_pool_bytes;    /* bytes the real capture will reserve in the graph pool */
    size_t graph_pool_segments; /* segments it will reserve them in */
    double seconds;
} pw_capture_plan_report;

/* The dry run: every descriptor of the capture list captured, in the same
 * order as pw_capture_all, against opts->graph_pool switched to shadow
 * mode (pw_pool_set_shadow), with no warm-ups and every eager launch on the
 * thread dropped, so nothing computes and no shadow address is used. The
 * pool's reservation at the end is, byte for byte, what pw_capture_all will
 * reserve from the same empty pool; then every graph of the dry run is
 * freed and the pool is empty and real again. The pool must be empty
 * (PW_ERR_STATE); the forward must be deterministic in what it allocates.
 * Its captures count in the wrapper counters like any other. out may be
 * NULL. */
PW_API pw_status pw_capture_plan(const pw_dispatcher *d, pw_forward_fn fwd, void *user,
                                 const pw_capture_options *opts, pw_capture_plan_report *out);

#ifdef __cplusplus
}
#endif
#endif
