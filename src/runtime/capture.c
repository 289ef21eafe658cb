/* The capture driver: warm up and capture every descriptor the dispatcher
 * lists, in its order, with a progress bar on a terminal; and its dry run,
 * the same captures against a shadow of the graph pool, which predicts the
 * bytes the real capture will reserve. */
#include "runtime/runtime_internal.h"

#include "mem/pool_internal.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#define PW_PROGRESS_BAR_WIDTH 30

void pw_capture_options_init(pw_capture_options *opts) {
    memset(opts, 0, sizeof *opts);
    opts->warmups = 1;
    opts->progress = PW_PROGRESS_AUTO;
    opts->print_totals = true;
}

static void draw_progress(size_t done, size_t total, const pw_capture_item *item) {
    size_t filled = total ? done * PW_PROGRESS_BAR_WIDTH / total : PW_PROGRESS_BAR_WIDTH;
    char bar[PW_PROGRESS_BAR_WIDTH + 1];
    for (size_t i = 0; i < PW_PROGRESS_BAR_WIDTH; i++) bar[i] = i < filled ? '=' : ' ';
    bar[PW_PROGRESS_BAR_WIDTH] = '\0';
    fprintf(stderr, "\rcapturing graphs [%s] %zu/%zu %-9s num_tokens=%-6" PRId64, bar, done,
            total, pw_runtime_mode_name(item->mode), item->desc.num_tokens);
    fflush(stderr);
}

/* Runs fwd once under a pushed context and checks it left the context
 * stack as it found it. */
static pw_status run_step(pw_forward_fn fwd, void *user, pw_runtime_mode mode,
                          const pw_batch_desc *desc) {
    pw_forward_context ctx = {mode, *desc, NULL};
    PW_TRY(pw_forward_context_push(&ctx));
    int depth = pw_forward_context_depth();
    pw_status s = fwd(user, mode, desc);
    int leaked = pw_forward_context_depth() - depth;
    while (pw_forward_context_depth() > depth) pw_forward_context_pop();
    if (pw_forward_context_depth() == depth) pw_forward_context_pop();
    if (s == PW_OK && leaked != 0)
        return pw_error(PW_ERR_STATE,
                        "the forward callback changed the forward context depth by %d (every push "
                        "needs its pop)",
                        leaked);
    return s;
}

/* A warm-up exists for lazy one-time setup (module loading, library
 * handles) that must not land in a graph; a device without any gets
 * nothing from a whole eager forward per descriptor. */
static pw_status effective_warmups(const pw_capture_options *opts, int *warmups) {
    *warmups = opts->warmups;
    if (opts->graph_pool && !opts->force_warmups) {
        pw_device_caps caps;
        PW_TRY(pw_device_get_caps(pw_pool_device(opts->graph_pool), &caps));
        if (!caps.needs_warmup) *warmups = 0;
    }
    return PW_OK;
}

/* Item i of n: its eager warm-ups, then its capture inside a capture phase;
 * a failure names the run and the descriptor. */
static pw_status capture_item(pw_forward_fn fwd, void *user, const pw_capture_item *it, int warmups,
                              size_t i, size_t n, size_t *warmup_runs) {
    char d_buf[PW_BATCH_DESC_FORMAT_CAP];
    pw_status s = PW_OK;
    for (int wu = 0; wu < warmups && s == PW_OK; wu++) {
        s = run_step(fwd, user, PW_MODE_NONE, &it->desc);
        (*warmup_runs)++;
        if (s != PW_OK)
            pw_error_context(s, "capture_all: warm-up run %d of %s %s", wu + 1,
                             pw_runtime_mode_name(it->mode),
                             pw_batch_desc_format(&it->desc, d_buf, sizeof d_buf));
    }
    if (s != PW_OK) return s;
    pw_capture_phase_begin();
    s = run_step(fwd, user, it->mode, &it->desc);
    pw_capture_phase_end();
    if (s != PW_OK)
        pw_error_context(s, "capture_all: capturing %s %s (%zu of %zu)", pw_runtime_mode_name(it->mode),
                         pw_batch_desc_format(&it->desc, d_buf, sizeof d_buf), i + 1, n);
    return s;
}

/* The report of a finished capture, its one-line summary included. */
static void fill_report(const pw_capture_options *opts, size_t n, size_t warmup_runs,
                        uint64_t graphs_captured, double seconds, pw_capture_report *report) {
    memset(report, 0, sizeof *report);
    report->descriptors = n;
    report->warmup_runs = warmup_runs;
    report->graphs_captured = graphs_captured;
    report->seconds = seconds;
    char pool_part[64] = "";
    if (opts->graph_pool) {
        pw_pool_stats st;
        pw_pool_get_stats(opts->graph_pool, &st);
        report->pool_reserved = st.reserved;
        report->pool_peak_allocated = st.peak_allocated;
        char b[32];
        snprintf(pool_part, sizeof pool_part, ", graph pool %s",
                 pw_format_bytes(st.reserved, b, sizeof b));
    }
    snprintf(report->summary, sizeof report->summary,
             "captured %" PRIu64 " graphs in %.0f ms%s", report->graphs_captured, seconds * 1e3,
             pool_part);
}

pw_status pw_capture_all(const pw_dispatcher *d, pw_forward_fn fwd, void *user,
                         const pw_capture_options *opts, pw_capture_report *out) {
    if (!d || !fwd)
        return pw_error(PW_ERR_INVALID_ARG, "capture_all: dispatcher and forward callback are required");
    pw_capture_options defaults;
    pw_capture_options_init(&defaults);
    if (!opts) opts = &defaults;
    if (opts->warmups < 0)
        return pw_error(PW_ERR_INVALID_ARG, "capture_all: warmups must be >= 0, got %d",
                        opts->warmups);
    if (pw_capture_phase_active())
        return pw_error(PW_ERR_STATE, "capture_all: a capture phase is already open on this thread");
    int warmups;
    PW_TRY(effective_warmups(opts, &warmups));

    size_t n = 0;
    const pw_capture_item *items = pw_dispatcher_capture_list(d, &n);
    bool bar = opts->progress == PW_PROGRESS_ON ||
               (opts->progress == PW_PROGRESS_AUTO && isatty(STDERR_FILENO));
    pw_capture_tally before, after;
    pw_capture_tally_get(&before);
    double t0 = pw_monotonic_seconds();
    pw_status s = PW_OK;
    size_t warmup_runs = 0;
    for (size_t i = 0; i < n && s == PW_OK; i++) {
        s = capture_item(fwd, user, &items[i], warmups, i, n, &warmup_runs);
        if (s == PW_OK && bar) draw_progress(i + 1, n, &items[i]);
    }
    if (bar && n) fprintf(stderr, "\n");
    if (s != PW_OK) return s;

    double seconds = pw_monotonic_seconds() - t0;
    pw_capture_tally_get(&after);
    pw_capture_report report;
    fill_report(opts, n, warmup_runs, after.graphs_captured - before.graphs_captured, seconds, &report);
    pw_log_info("%s (%zu descriptors)", report.summary, n);
    if (opts->print_totals) fprintf(stderr, "%s\n", report.summary);
    if (out) *out = report;
    return PW_OK;
}

pw_status pw_capture_one(pw_forward_fn fwd, void *user, const pw_capture_options *opts,
                         const pw_capture_item *item) {
    if (!fwd || !item)
        return pw_error(PW_ERR_INVALID_ARG, "capture_one: forward callback and item are required");
    pw_capture_options defaults;
    pw_capture_options_init(&defaults);
    if (!opts) opts = &defaults;
    if (opts->warmups < 0)
        return pw_error(PW_ERR_INVALID_ARG, "capture_one: warmups must be >= 0, got %d",
                        opts->warmups);
    if (pw_capture_phase_active())
        return pw_error(PW_ERR_STATE, "capture_one: a capture phase is already open on this thread");
    int warmups;
    PW_TRY(effective_warmups(opts, &warmups));
    size_t warmup_runs = 0;
    return capture_item(fwd, user, item, warmups, 0, 1, &warmup_runs);
}

/* ---- the dry run ---------------------------------------------------------------------------- */

/* Puts the pool back as it was: no graph of the dry run left, no segment,
 * out of shadow mode. A failure here (a block still held: something kept a
 * dry-run output) is an error of its own. */
static pw_status end_dry_run(pw_pool *pool) {
    pw_status s = pw_graph_wrappers_clear_pool(pool);
    if (s != PW_OK) return s;
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    if (st.n_live_blocks > 0)
        return pw_error(PW_ERR_STATE,
                        "capture_plan: %zu block(s) (%zu bytes) of the shadow graph pool '%s' are "
                        "still held after the dry run (a captured output outlived its step)",
                        st.n_live_blocks, st.allocated, pw_pool_name(pool));
    PW_TRY(pw_pool_trim(pool, false, NULL));
    return pw_pool_set_shadow(pool, false);
}

pw_status pw_capture_plan(const pw_dispatcher *d, pw_forward_fn fwd, void *user,
                          const pw_capture_options *opts, pw_capture_plan_report *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!d || !fwd)
        return pw_error(PW_ERR_INVALID_ARG,
                        "capture_plan: dispatcher and forward callback are required");
    if (!opts || !opts->graph_pool)
        return pw_error(PW_ERR_INVALID_ARG,
                        "capture_plan: options with the graph pool to plan are required");
    if (pw_capture_phase_active())
        return pw_error(PW_ERR_STATE, "capture_plan: a capture phase is already open on this thread");
    pw_pool *pool = opts->graph_pool;
    pw_status s = pw_pool_set_shadow(pool, true);
    if (s != PW_OK)
        return pw_error_context(s, "capture_plan: the graph pool must be empty before the real "
                                   "capture");

    size_t n = 0;
    const pw_capture_item *items = pw_dispatcher_capture_list(d, &n);
    pw_capture_tally before, after;
    pw_capture_tally_get(&before);
    double t0 = pw_monotonic_seconds();
    size_t warmup_runs = 0;
    /* No warm-ups: they compute, and a dry run computes nothing. */
    pw_mem_dry_run_begin();
    for (size_t i = 0; i < n && s == PW_OK; i++)
        s = capture_item(fwd, user, &items[i], 0, i, n, &warmup_runs);
    pw_mem_dry_run_end();
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    pw_capture_tally_get(&after);
    double seconds = pw_monotonic_seconds() - t0;
    if (s != PW_OK) {
        pw_error_context(s, "capture_plan (dry run)");
        pw_error_hold(); /* cleanup keeps the dry run's message */
        (void)end_dry_run(pool);
        pw_error_unhold();
        return s;
    }
    PW_TRY(end_dry_run(pool));
    if (out) {
        out->descriptors = n;
        out->graphs = after.graphs_captured - before.graphs_captured;
        out->graph_pool_bytes = st.reserved;
        out->graph_pool_segments = st.n_segments;
        out->seconds = seconds;
    }
    char b[32];
    pw_log_info("capture plan: %zu descriptors would reserve %s (%zu bytes) of graph pool '%s' "
                "(dry run in %.1f ms)",
                n, pw_format_bytes(st.reserved, b, sizeof b), st.reserved, pw_pool_name(pool),
                seconds * 1e3);
    return PW_OK;
}
