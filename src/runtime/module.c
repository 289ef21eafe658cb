/* A piecewise module: graph -> split -> stitching plan (or native C) ->
 * one PIECEWISE wrapper per piece + one FULL wrapper around the stitched
 * forward -> the dispatcher's capture list.
 *
 * The wrappers nest: the FULL wrapper's runnable is the stitching, whose
 * submodule table holds the pieces' wrappers as callables. The splitting
 * subgraphs are inlined into the stitching, so the splitting ops run
 * eagerly between the pieces in PIECEWISE mode and are recorded into the
 * one graph in FULL mode. */
#include "runtime/runtime_internal.h"

#include <string.h>

typedef struct module_piece {
    pw_module *module;
    int index;
    pw_plan *plan;             /* NULL: an inlined (splitting) submodule */
    pw_graph_wrapper *wrapper; /* NULL with plan */
} module_piece;

struct pw_module {
    pw_module_options opts;
    pw_stream *stream;
    pw_pool *graph_pool;
    pw_dispatcher *dispatcher;
    pw_ir *split;
    pw_plan *stitch;
    pw_native *native; /* PW_STITCH_NATIVE only */
    module_piece *pieces; /* [n_submods], indexed like the plan's submodules */
    pw_callable *submods; /* [n_submods]: the pieces' wrappers as callables */
    int n_submods, n_pieces;
    pw_graph_wrapper *full;
};

void pw_module_options_init(pw_module_options *opts) { memset(opts, 0, sizeof *opts); }

/* ---- runnables ----------------------------------------------------------------------------- */

static pw_status run_piece_plain(void *user, const pw_value *args, int nargs, pw_value *out) {
    const module_piece *p = user;
    return pw_plan_run(p->plan, NULL, 0, args, nargs, out);
}

static pw_status run_piece(void *user, const pw_value *args, int nargs, pw_value *out) {
    module_piece *p = user;
    const pw_module *m = p->module;
    if (m->opts.interpose) {
        pw_callable plain = {run_piece_plain, p, pw_plan_submodule_name(m->stitch, p->index)};
        return m->opts.interpose(m->opts.interpose_user, p->index, plain, args, nargs, out);
    }
    return pw_plan_run(p->plan, NULL, 0, args, nargs, out);
}

static pw_status run_stitched_plain(void *user, const pw_value *args, int nargs, pw_value *out) {
    const pw_module *m = user;
    if (m->native) return pw_native_run(m->native, m->submods, m->n_submods, args, nargs, out);
    return pw_plan_run(m->stitch, m->submods, m->n_submods, args, nargs, out);
}

static pw_status run_stitched(void *user, const pw_value *args, int nargs, pw_value *out) {
    const pw_module *m = user;
    if (m->opts.interpose) {
        pw_callable plain = {run_stitched_plain, user, pw_graph_wrapper_name(m->full)};
        return m->opts.interpose(m->opts.interpose_user, PW_MODULE_FORWARD, plain, args, nargs,
                                 out);
    }
    return run_stitched_plain(user, args, nargs, out);
}

/* ---- building -------------------------------------------------------------------------------- */

static pw_status build_pieces(pw_module *m, const pw_plan_options *po) {
    int n = pw_plan_num_submodules(m->stitch);
    m->n_submods = n;
    m->pieces = pw_host_calloc((size_t)(n ? n : 1), sizeof *m->pieces);
    m->submods = pw_host_calloc((size_t)(n ? n : 1), sizeof *m->submods);
    if (!m->pieces || !m->submods) return PW_ERR_OOM;
    int last_piece = -1;
    for (int i = 0; i < n; i++)
        if (!pw_plan_submodule_inlined(m->stitch, i)) last_piece = i;
    for (int i = 0; i < n; i++) {
        module_piece *p = &m->pieces[i];
        p->module = m;
        p->index = i;
        if (pw_plan_submodule_inlined(m->stitch, i)) continue;
        const char *name = pw_plan_submodule_name(m->stitch, i);
        const pw_ir *sub = pw_ir_find_subgraph(m->split, name);
        if (!sub) return pw_error(PW_ERR_INTERNAL, "the split graph lacks submodule '%s'", name);
        PW_TRY(pw_plan_build(sub, po, &p->plan));
        pw_callable runnable = {run_piece, p, pw_ir_name(sub)};
        pw_wrapper_options wo;
        pw_wrapper_options_init(&wo);
        wo.name = name;
        /* a pool trim during a capture would release blocks the graph records */
        wo.gc_disable = true;
        /* the last piece's output leaves the model: the graph keeps only an alias */
        wo.weak_ref_output = i == last_piece;
        wo.debug_log = m->n_pieces == 0; /* one line per descriptor, not one per piece */
        PW_TRY(pw_graph_wrapper_new(runnable, PW_MODE_PIECEWISE, m->stream, m->graph_pool, &wo,
                                    &p->wrapper));
        m->submods[i] = pw_graph_wrapper_as_callable(p->wrapper);
        m->n_pieces++;
    }
    return PW_OK;
}

static pw_status check_args(const pw_ir *graph, pw_op_resolver resolver, pw_stream *stream,
                            pw_pool *graph_pool, const pw_module_options *opts) {
    if (!graph) return pw_error(PW_ERR_INVALID_ARG, "module: the graph is NULL");
    if (!resolver.fn)
        return pw_error(PW_ERR_INVALID_ARG, "module '%s': no op resolver (resolver.fn is NULL)",
                        pw_ir_name(graph));
    if (!stream || !graph_pool)
        return pw_error(PW_ERR_INVALID_ARG, "module '%s': stream and graph pool are required",
                        pw_ir_name(graph));
    if (opts && (unsigned)opts->stitch >= PW_STITCH_KIND_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "module '%s': unknown stitch kind %d",
                        pw_ir_name(graph), (int)opts->stitch);
    return PW_OK;
}

static pw_status module_build(pw_module *m, const pw_ir *graph, const char *const *split_ops,
                              int n_split_ops, pw_op_resolver resolver,
                              const pw_dispatcher_config *dispatcher) {
    pw_dispatcher_config dc;
    if (dispatcher) dc = *dispatcher;
    else pw_dispatcher_config_init(&dc);
    PW_TRY(pw_dispatcher_new(&dc, &m->dispatcher));
    pw_status s = pw_split(graph, split_ops, n_split_ops, &m->split);
    if (s != PW_OK) return pw_error_context(s, "module '%s': splitting", pw_ir_name(graph));
    PW_TRY(pw_check_split_for_replay(m->split));
    pw_plan_options po = {0};
    po.resolve_op = resolver.fn;
    po.user = resolver.user;
    PW_TRY(pw_plan_build(m->split, &po, &m->stitch));
    if (m->opts.stitch == PW_STITCH_NATIVE) PW_TRY(pw_native_compile(m->stitch, &m->native));
    PW_TRY(build_pieces(m, &po));
    pw_callable forward = {run_stitched, m, NULL};
    pw_wrapper_options wo;
    pw_wrapper_options_init(&wo);
    wo.name = m->opts.name ? m->opts.name : "forward"; /* copied by the wrapper */
    wo.gc_disable = true;
    wo.verify_capture = m->opts.verify_capture;
    wo.perturb = m->opts.perturb;
    wo.perturb_user = m->opts.perturb_user;
    return pw_graph_wrapper_new(forward, PW_MODE_FULL, m->stream, m->graph_pool, &wo, &m->full);
}

pw_status pw_module_new(const pw_ir *graph, const char *const *split_ops, int n_split_ops,
                        pw_op_resolver resolver, pw_stream *stream, pw_pool *graph_pool,
                        const pw_module_options *opts, pw_module **out) {
    *out = NULL;
    PW_TRY(check_args(graph, resolver, stream, graph_pool, opts));
    pw_module *m = pw_host_calloc(1, sizeof *m);
    if (!m) return PW_ERR_OOM;
    if (opts) m->opts = *opts;
    m->stream = stream;
    m->graph_pool = graph_pool;
    pw_status s = module_build(m, graph, split_ops, n_split_ops, resolver, m->opts.dispatcher);
    /* what the options point at is the caller's: copied where needed, not kept */
    m->opts.name = NULL;
    m->opts.dispatcher = NULL;
    if (s != PW_OK) {
        pw_error_hold();
        pw_module_free(m);
        pw_error_unhold();
        return s;
    }
    *out = m;
    return PW_OK;
}

void pw_module_free(pw_module *m) {
    if (!m) return;
    pw_graph_wrapper_free(m->full);
    for (int i = 0; m->pieces && i < m->n_submods; i++) {
        pw_graph_wrapper_free(m->pieces[i].wrapper);
        pw_plan_free(m->pieces[i].plan);
    }
    pw_host_free(m->pieces);
    pw_host_free(m->submods);
    pw_native_free(m->native);
    pw_plan_free(m->stitch);
    pw_ir_free(m->split);
    pw_dispatcher_free(m->dispatcher);
    pw_host_free(m);
}

/* ---- running --------------------------------------------------------------------------------- */

pw_status pw_module_run(pw_module *m, pw_runtime_mode mode, const pw_batch_desc *desc,
                        const void *attn_metadata, const pw_value *args, int nargs,
                        pw_value *out) {
    *out = pw_value_none();
    if (PW_UNLIKELY(!desc))
        return pw_error(PW_ERR_INVALID_ARG, "module '%s': run without a descriptor",
                        pw_graph_wrapper_name(m->full));
    pw_forward_context ctx = {mode, *desc, attn_metadata};
    PW_TRY(pw_forward_context_push(&ctx)); /* refuses a mode outside the enum */
    pw_status s = pw_graph_wrapper_call_as(m->full, mode, desc, args, nargs, out);
    pw_forward_context_pop();
    return s;
}

/* ---- capture --------------------------------------------------------------------------------- */

typedef struct capture_step {
    pw_module *m;
    pw_module_inputs_fn inputs;
    void *user;
} capture_step;

/* The capture driver's forward: the caller's inputs for desc, then one run. */
static pw_status capture_forward(void *user, pw_runtime_mode mode, const pw_batch_desc *desc) {
    const capture_step *c = user;
    const pw_value *args = NULL;
    int nargs = 0;
    PW_TRY(c->inputs(c->user, mode, desc, &args, &nargs));
    pw_value out;
    PW_TRY(pw_module_run(c->m, mode, desc, NULL, args, nargs, &out));
    pw_value_release(out);
    return PW_OK;
}

/* The caller's options, with the module's graph pool where they name none. */
static void capture_options(const pw_module *m, const pw_capture_options *in,
                            pw_capture_options *o) {
    if (in) *o = *in;
    else pw_capture_options_init(o);
    if (!o->graph_pool) o->graph_pool = m->graph_pool;
}

static pw_status check_inputs(const pw_module *m, pw_module_inputs_fn inputs) {
    if (!inputs)
        return pw_error(PW_ERR_INVALID_ARG, "module '%s': capture needs an inputs callback",
                        pw_graph_wrapper_name(m->full));
    return PW_OK;
}

pw_status pw_module_capture(pw_module *m, pw_module_inputs_fn inputs, void *user,
                            const pw_capture_options *opts, pw_capture_report *out) {
    PW_TRY(check_inputs(m, inputs));
    pw_capture_options o;
    capture_options(m, opts, &o);
    capture_step c = {m, inputs, user};
    return pw_capture_all(m->dispatcher, capture_forward, &c, &o, out);
}

pw_status pw_module_plan_capture(pw_module *m, pw_module_inputs_fn inputs, void *user,
                                 const pw_capture_options *opts, pw_capture_plan_report *out) {
    PW_TRY(check_inputs(m, inputs));
    pw_capture_options o;
    capture_options(m, opts, &o);
    capture_step c = {m, inputs, user};
    return pw_capture_plan(m->dispatcher, capture_forward, &c, &o, out);
}

pw_status pw_module_capture_one(pw_module *m, const pw_capture_item *item,
                                pw_module_inputs_fn inputs, void *user,
                                const pw_capture_options *opts) {
    PW_TRY(check_inputs(m, inputs));
    pw_capture_options o;
    capture_options(m, opts, &o);
    capture_step c = {m, inputs, user};
    return pw_capture_one(capture_forward, &c, &o, item);
}

/* ---- graphs by item ---------------------------------------------------------------------------- */

bool pw_module_has_graphs(const pw_module *m, const pw_capture_item *item) {
    if (item->mode == PW_MODE_FULL) return pw_graph_wrapper_has_graph(m->full, &item->desc);
    if (item->mode != PW_MODE_PIECEWISE || m->n_pieces == 0) return false;
    for (int i = 0; i < m->n_submods; i++)
        if (m->pieces[i].wrapper && !pw_graph_wrapper_has_graph(m->pieces[i].wrapper, &item->desc))
            return false;
    return true;
}

size_t pw_module_graph_bytes(const pw_module *m, const pw_capture_item *item) {
    if (item->mode == PW_MODE_FULL) return pw_graph_wrapper_graph_bytes(m->full, &item->desc);
    if (item->mode != PW_MODE_PIECEWISE) return 0;
    size_t total = 0;
    for (int i = 0; i < m->n_submods; i++)
        if (m->pieces[i].wrapper)
            total += pw_graph_wrapper_graph_bytes(m->pieces[i].wrapper, &item->desc);
    return total;
}

pw_status pw_module_remove_graphs(pw_module *m, const pw_capture_item *item) {
    if (item->mode == PW_MODE_FULL) {
        if (!pw_graph_wrapper_has_graph(m->full, &item->desc)) return PW_OK;
        return pw_graph_wrapper_remove(m->full, &item->desc);
    }
    for (int i = 0; item->mode == PW_MODE_PIECEWISE && i < m->n_submods; i++) {
        pw_graph_wrapper *w = m->pieces[i].wrapper;
        if (w && pw_graph_wrapper_has_graph(w, &item->desc))
            PW_TRY(pw_graph_wrapper_remove(w, &item->desc));
    }
    return PW_OK;
}

/* ---- accessors --------------------------------------------------------------------------------- */

pw_dispatcher *pw_module_dispatcher(const pw_module *m) { return m->dispatcher; }
const pw_ir *pw_module_split_graph(const pw_module *m) { return m->split; }
const pw_plan *pw_module_stitch_plan(const pw_module *m) { return m->stitch; }
bool pw_module_stitch_is_native(const pw_module *m) {
    return m->native && pw_native_is_compiled(m->native);
}
int pw_module_num_submodules(const pw_module *m) { return m->n_submods; }
int pw_module_num_pieces(const pw_module *m) { return m->n_pieces; }

const pw_plan *pw_module_piece_plan(const pw_module *m, int i) {
    return i >= 0 && i < m->n_submods ? m->pieces[i].plan : NULL;
}

pw_graph_wrapper *pw_module_piece_wrapper(const pw_module *m, int i) {
    return i >= 0 && i < m->n_submods ? m->pieces[i].wrapper : NULL;
}

pw_graph_wrapper *pw_module_full_wrapper(const pw_module *m) { return m->full; }
