/* The engine's graphs: what a capture runs (an all-padding batch of the
 * descriptor's size), the capture of the whole list at start-up (through
 * the graph cache when there is one), and lazy capture of what a step's
 * route named. The capture itself is the library's (pw_module_capture,
 * pw_module_capture_one). */
#include "model/engine_internal.h"

#include "model/graph_cache.h"


pw_status pw_engine_capture_inputs(void *user, pw_runtime_mode mode, const pw_batch_desc *desc,
                                   const pw_value **args, int *nargs) {
    pw_engine *e = user;
    (void)mode;
    pw_step_inputs_pad(&e->run.host, 0, desc->num_tokens);
    e->run.host.n_sample_rows = 0;
    PW_TRY(pw_engine_prepare_forward(e, desc->num_tokens));
    *args = e->weights.params;
    *nargs = e->weights.n_params;
    return PW_OK;
}

void pw_engine_capture_options(const pw_engine *e, pw_capture_options *co) {
    pw_capture_options_init(co);
    co->warmups = e->cfg.warmups;
    co->force_warmups = e->cfg.force_warmups;
    co->progress = e->cfg.progress;
    co->graph_pool = e->graph_pool;
    co->print_totals = e->cfg.print_capture_totals;
}

static void record_graph_pool(pw_engine *e) {
    pw_pool_stats ps;
    pw_pool_get_stats(e->graph_pool, &ps);
    e->stats.graph_pool_reserved = ps.reserved;
    e->stats.graph_pool_peak = ps.peak_allocated;
}

pw_status pw_engine_capture_all(pw_engine *e) {
    if (e->cfg.mode != PW_GRAPH_NONE && e->cfg.capture_policy != PW_CAPTURE_LAZY) {
        pw_capture_options co;
        pw_engine_capture_options(e, &co);
        pw_capture_report rep;
        pw_graph_cache_load(e);
        PW_TRY(pw_module_capture(e->module, pw_engine_capture_inputs, e, &co, &rep));
        e->stats.graphs_captured = rep.graphs_captured;
        e->stats.capture_seconds = rep.seconds;
        pw_engine_distinct_counts(e, &e->stats.graphs_patched, &e->stats.pieces_patched_in_full,
                                  &e->stats.graphs_from_cache);
        pw_graph_cache_store(e);
    }
    record_graph_pool(e);
    return PW_OK;
}

/* Captures what the dispatcher routed around, after the step that first
 * needed it; the module's lazy policy evicts past the graph budget. */
pw_status pw_engine_capture_lazily(pw_engine *e, const pw_capture_item *item) {
    pw_capture_options co;
    pw_engine_capture_options(e, &co);
    co.progress = PW_PROGRESS_OFF;
    co.print_totals = false;
    const pw_lazy_capture *lz = pw_module_lazy_capture(e->module);
    pw_lazy_capture_stats before, after;
    pw_lazy_capture_get_stats(lz, &before);
    double t0 = pw_monotonic_seconds();
    PW_TRY(pw_module_capture_one(e->module, item, pw_engine_capture_inputs, e, &co));
    e->stats.capture_seconds += pw_monotonic_seconds() - t0;
    e->stats.graphs_captured +=
        item->mode == PW_MODE_FULL ? 1 : (uint64_t)pw_module_num_pieces(e->module);
    e->stats.lazy_captured++;
    pw_lazy_capture_get_stats(lz, &after);
    e->stats.graphs_evicted += (int64_t)(after.evicted - before.evicted);
    e->stats.graph_bytes = after.bytes;
    record_graph_pool(e);
    return PW_OK;
}
