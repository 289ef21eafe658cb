/* The engine: builds a piecewise module from the model's graph, sizes
 * memory (engine_memory.c), captures graphs (engine_capture.c), and runs
 * batches of requests through them.
 *
 * One step (pw_engine_step) reads top to bottom:
 *   1. schedule: one token per decoding request, then prefill chunks up to
 *      max_num_batched_tokens, written into the persistent per-step buffers;
 *   2. dispatch: the dispatcher pads to a capture size and picks NONE,
 *      PIECEWISE or FULL (consulting the lazy-capture policy, if any);
 *   3. forward: the module's FULL wrapper replays, captures or passes
 *      through to the stitching plan, whose PIECEWISE wrappers do the same
 *      for each piece, with attention eager between; the bitwise canary,
 *      when on, wraps it (forward_checked: runs it again eagerly and
 *      compares);
 *   4. sample from the logits of each request's last scheduled token; with
 *      lazy capture, capture what the route named. */
#include "model/engine_internal.h"

#include "model/sampler.h"
#include "ops/comm.h"

#include <inttypes.h>
#include <string.h>

/* ---- compilation: graph -> split -> plans -> wrappers ------------------------------- */

static pw_status resolve_op(void *user, const char *target, pw_callable *out) {
    pw_engine *e = user;
    return pw_op_resolve(&e->env, target, out);
}

/* Distinct-piece capture and the graph cache see every run of a piece and
 * of the whole forward (engine_distinct.c). */
static pw_status interpose(void *user, int piece, pw_callable plain, const pw_value *args,
                           int nargs, pw_value *out) {
    pw_engine *e = user;
    if (piece != PW_MODULE_FORWARD)
        return pw_engine_distinct_run(e, &e->pieces[piece], args, nargs, out);
    return pw_engine_forward_hooked(e, plain, args, nargs, out);
}

static pw_status compile_model(pw_engine *e) {
    const pw_engine_config *c = &e->cfg;
    pw_dispatcher_config dc;
    pw_dispatcher_config_init(&dc);
    dc.mode = c->mode;
    dc.max_num_seqs = c->max_num_seqs;
    dc.max_num_batched_tokens = c->max_num_batched_tokens;
    dc.capture_sizes = c->capture_sizes;
    dc.n_capture_sizes = c->n_capture_sizes;
    pw_ir *ir = NULL;
    PW_TRY(pw_model_build_ir(e->model, &ir));
    const char *const *split_ops;
    int n_split_ops = pw_op_splitting_names(&split_ops);
    pw_module_options mo;
    pw_module_options_init(&mo);
    mo.name = "forward";
    mo.dispatcher = &dc;
    mo.verify_capture = e->cfg.verify_capture;
    mo.perturb = e->cfg.verify_capture ? pw_engine_perturb_metadata : NULL;
    mo.perturb_user = e;
    mo.interpose = e->distinct ? interpose : NULL;
    mo.interpose_user = e;
    mo.lazy = e->cfg.capture_policy == PW_CAPTURE_LAZY;
    mo.graph_budget = e->cfg.graph_budget;
    pw_op_resolver resolver = {resolve_op, e};
    pw_status s = pw_module_new(ir, split_ops, n_split_ops, resolver, e->stream, e->graph_pool,
                                &mo, &e->module);
    pw_ir_free(ir);
    PW_TRY(s);
    e->n_submods = pw_module_num_submodules(e->module);
    e->pieces = pw_host_calloc((size_t)e->n_submods + 1, sizeof *e->pieces);
    if (!e->pieces) return PW_ERR_OOM;
    for (int i = 0; i < e->n_submods; i++) e->pieces[i].plan = pw_module_piece_plan(e->module, i);
    return pw_engine_distinct_init(e);
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Runs the model on the first n_padded tokens of the persistent buffers
 * under (mode, desc). *logits is a new reference. */
static pw_status forward(pw_engine *e, pw_runtime_mode mode, const pw_batch_desc *desc,
                         int64_t n_padded, pw_value *logits) {
    *logits = pw_value_none();
    PW_TRY(pw_engine_prepare_forward(e, n_padded));
    return pw_module_run(e->module, mode, desc, e->run.dev.meta, e->weights.params,
                         e->weights.n_params, logits);
}

/* ---- engine lifecycle ------------------------------------------------------------------------ */

pw_status pw_engine_new(pw_model *m, const pw_engine_config *cfg_in, pw_engine **out) {
    *out = NULL;
    if (!m) return pw_error(PW_ERR_INVALID_ARG, "pw_engine_new: model is NULL");
    pw_engine_config cfg;
    PW_TRY(pw_engine_config_resolve(cfg_in, pw_model_get_info(m), &cfg));
    pw_engine *e = pw_host_calloc(1, sizeof *e);
    if (!e) return PW_ERR_OOM;
    e->model = m;
    e->cfg = cfg;

    pw_status s = pw_stream_new(e->cfg.device, &e->stream);
    if (s == PW_OK) s = pw_pool_new(e->cfg.device, "activations", &e->act_pool);
    if (s == PW_OK) s = pw_pool_new(e->cfg.device, "graphs", &e->graph_pool);
    if (s == PW_OK) s = pw_scheduler_init(&e->sched, cfg.max_num_seqs, cfg.max_num_batched_tokens);
    if (s == PW_OK)
        s = pw_kv_blocks_init(&e->kv, cfg.max_num_seqs, cfg.block_size, cfg.max_model_len);
    e->kv.caching = cfg.prefix_cache;
    if (s == PW_OK) s = pw_engine_distinct_new(e);
    if (s == PW_OK) s = pw_engine_alloc_buffers(e);
    if (s == PW_OK) s = compile_model(e);
    if (s == PW_OK) s = pw_engine_size_kv_cache(e);
    if (s == PW_OK) s = pw_engine_capture_all(e);
    if (s != PW_OK) {
        pw_engine_free(e);
        return s;
    }
    *out = e;
    return PW_OK;
}

void pw_engine_free(pw_engine *e) {
    if (!e) return;
    if (e->tp) pw_engine_tp_end(e); /* the followers stop following */
    /* Work still queued on the device (a warm-up, a step that failed
     * half-way) may use the memory freed below: let it finish first. */
    if (e->stream) {
        pw_error_hold();
        (void)pw_stream_synchronize(e->stream);
        pw_error_unhold();
    }
    pw_engine_verify_free(e);
    pw_engine_distinct_free(e);
    pw_module_free(e->module);
    pw_host_free(e->pieces);
    pw_engine_free_buffers(e);
    pw_scheduler_free(&e->sched);
    pw_kv_blocks_free(&e->kv);
    pw_pool_free(e->graph_pool);
    pw_pool_free(e->act_pool);
    pw_stream_free(e->stream);
    pw_host_free(e);
}

/* ---- one step ------------------------------------------------------------------------------------ */

/* Copies the logits of every request whose pending tokens all ran (its
 * last scheduled token) into that request's row of last_logits. The LM
 * head computed exactly those rows, in schedule order (sample_rows), so
 * the k-th such request's logits are row k. Waits for the copies, which
 * also ends the step's use of the host input arrays, so the next step may
 * rewrite them. */
static pw_status fetch_logits(pw_engine *e, const pw_tensor *logits) {
    int64_t vocab = pw_model_get_info(e->model)->vocab;
    size_t row_bytes = (size_t)vocab * sizeof(float);
    const float *dev = pw_tensor_data(logits);
    const pw_step_inputs *h = &e->run.host;
    int64_t row = 0;
    for (int64_t i = 0; i < e->sched.n_batch; i++) {
        const pw_scheduled *s = &e->sched.batch[i];
        const pw_request *r = s->r;
        /* a scoring request's prompt rows, in position order (the last
         * prompt row is also the sampled one below) */
        for (int64_t j = 0; r->score_logits && j < s->count; j++) {
            int64_t pos = r->n_computed + j;
            if (pos < r->score_from || pos >= r->n_prompt) continue;
            if (row >= h->n_sample_rows || h->sample_rows[row] != s->start + j)
                return pw_error(PW_ERR_INTERNAL, "the scored rows disagree with the schedule");
            PW_TRY(pw_stream_copy_d2h(e->stream, r->score_logits + (pos - r->score_from) * vocab,
                                      dev + row * vocab, row_bytes));
            if (j + 1 < s->count || r->n_computed + s->count < r->n_tokens) row++;
        }
        if (r->n_computed + s->count < r->n_tokens) continue;
        if (row >= h->n_sample_rows || h->sample_rows[row] != s->start + s->count - 1)
            return pw_error(PW_ERR_INTERNAL, "the sampled rows disagree with the schedule");
        PW_TRY(pw_stream_copy_d2h(e->stream, e->run.last_logits + r->slot * vocab,
                                  dev + row * vocab, row_bytes));
        row++;
    }
    return pw_stream_synchronize(e->stream);
}

/* Tensor parallelism: the other ranks take rank 0's sampled tokens (their
 * logits are the same bits, so this only makes rank 0 the one that decides). */
static pw_status follow_rank0_tokens(pw_engine *e, int64_t n_new) {
    if (pw_comm_size() <= 1 || n_new == 0) return PW_OK;
    int32_t *ids = pw_host_alloc((size_t)n_new * sizeof *ids);
    if (!ids) return PW_ERR_OOM;
    for (int64_t k = 0; k < n_new; k++) ids[k] = e->run.step_tokens[k].token;
    pw_status s = pw_comm_bcast(ids, (size_t)n_new * sizeof *ids);
    for (int64_t k = 0; s == PW_OK && k < n_new; k++) e->run.step_tokens[k].token = ids[k];
    pw_host_free(ids);
    return s;
}

/* Advances every scheduled request past its tokens and samples the next
 * token of each whose pending tokens all ran, from its last_logits row.
 * Sets *n_out to the number of new tokens (in e->run.step_tokens). */
static pw_status sample_scheduled(pw_engine *e, int64_t *prompt_tokens, int64_t *n_out) {
    int64_t vocab = pw_model_get_info(e->model)->vocab;
    int64_t n_new = 0;
    for (int64_t i = 0; i < e->sched.n_batch; i++) {
        pw_scheduled *s = &e->sched.batch[i];
        pw_request *r = s->r;
        if (r->n_computed < r->n_prompt) *prompt_tokens += s->count;
        r->n_computed += s->count;
        pw_kv_blocks_computed(&e->kv, r->slot, r->tokens, r->n_computed);
        if (r->n_computed < r->n_tokens) continue; /* prefill chunk, more to come */
        const float *row = e->run.last_logits + r->slot * vocab;
        e->run.step_tokens[n_new++] = pw_request_sample(r, row, vocab, e->run.sample_scratch);
    }
    PW_TRY(follow_rank0_tokens(e, n_new));
    int64_t k = 0;
    for (int64_t i = 0; i < e->sched.n_batch; i++) {
        pw_request *r = e->sched.batch[i].r;
        if (r->n_computed < r->n_tokens) continue;
        pw_step_token *st = &e->run.step_tokens[k++];
        r->tokens[r->n_tokens++] = st->token;
        r->finished =
            pw_model_is_end_of_generation(e->model, st->token) || r->n_tokens >= r->limit;
        st->finished = r->finished;
    }
    *n_out = n_new;
    return PW_OK;
}

/* Tensor parallelism: every rank runs the same schedule, and rank 0's
 * choice of mode and descriptor (padding) is the one every rank runs, so
 * that all of them replay the same graph and meet in the same all-reduces.
 * A rank whose schedule differs stops the job with an error. */
static pw_status agree_route(int64_t nt, pw_route *route) {
    if (pw_comm_size() <= 1) return PW_OK;
    struct {
        int64_t nt;
        pw_route route;
    } msg;
    memset(&msg, 0, sizeof msg);
    msg.nt = nt;
    msg.route = *route;
    PW_TRY(pw_comm_bcast(&msg, sizeof msg));
    if (msg.nt != nt)
        return pw_error(PW_ERR_STATE,
                        "tensor parallel rank %d scheduled %" PRId64 " tokens, rank 0 %" PRId64
                        ": the ranks disagree",
                        pw_comm_rank(), nt, msg.nt);
    *route = msg.route;
    return PW_OK;
}

static void record_step(pw_engine *e, pw_runtime_mode mode, int64_t n_tokens, int64_t n_new,
                        int64_t prompt_tokens, double seconds) {
    e->stats.steps++;
    e->stats.steps_by_mode[mode]++;
    e->stats.prompt_tokens += prompt_tokens;
    e->stats.generated_tokens += n_new;
    if (prompt_tokens > 0) {
        e->stats.prefill_seconds += seconds;
    } else {
        e->stats.decode_seconds += seconds;
        e->stats.decode_steps++;
        e->stats.decode_step_tokens += n_tokens;
    }
}

/* The forward of a step under the bitwise canary (engine_verify.c), which
 * may run the same batch again eagerly and compare; then the sampled rows'
 * logits come to the host. Rows [n_tokens, padded) become padding. */
static pw_status forward_checked(pw_engine *e, pw_runtime_mode mode, const pw_batch_desc *desc,
                                 int64_t n_tokens) {
    int64_t padded = desc->num_tokens;
    pw_step_inputs_pad(&e->run.host, n_tokens, padded);
    pw_value logits;
    PW_TRY(forward(e, mode, desc, padded, &logits));
    pw_status s = logits.kind == PW_VAL_TENSOR
                      ? PW_OK
                      : pw_error(PW_ERR_INTERNAL, "the forward returned no logits tensor");
    if (s == PW_OK) s = pw_engine_verify_step(e, mode, desc, padded, logits.as.tensor, forward);
    if (s == PW_OK) s = fetch_logits(e, logits.as.tensor);
    pw_value_release(logits);
    return s;
}

/* The rows that newly admitted requests take from a partly matching cached
 * block (pw_kv_blocks_admit): every layer's K and V, copied into the
 * request's own block on the step's stream, so before the forward reads
 * them. The same bits a forward would write there: a position's K/V depend
 * only on the tokens up to it, and the kernels are batch-invariant. */
static pw_status copy_lent_rows(pw_engine *e) {
    pw_kv_blocks *kv = &e->kv;
    const pw_model_info *in = pw_model_get_info(e->model);
    size_t row = (size_t)(pw_model_local_shape(e->model).n_kv_heads * in->head_dim);
    size_t block = row * (size_t)kv->block_size;
    for (int64_t s = 0; s < kv->max_seqs; s++) {
        const pw_kv_copy *c = &kv->copies[s];
        if (c->rows == 0) continue;
        size_t bytes = (size_t)c->rows * row * sizeof(float);
        for (int64_t l = 0; l < in->n_layers; l++) {
            PW_TRY(pw_stream_copy_d2d(e->stream, e->run.k_cache[l] + (size_t)c->to * block,
                                      e->run.k_cache[l] + (size_t)c->from * block, bytes));
            PW_TRY(pw_stream_copy_d2d(e->stream, e->run.v_cache[l] + (size_t)c->to * block,
                                      e->run.v_cache[l] + (size_t)c->from * block, bytes));
        }
        pw_kv_blocks_copied(kv, s);
    }
    return PW_OK;
}

pw_status pw_engine_step(pw_engine *e, const pw_step_token **tokens, int64_t *n_out) {
    *tokens = e->run.step_tokens;
    *n_out = 0;
    /* The step timer covers scheduling too: it is per-step work that a
     * decode rate must pay (bench model's figures and llama-bench's tg
     * both count everything between one token and the next). */
    double t0 = pw_monotonic_seconds();
    if (e->tp) PW_TRY(pw_engine_tp_send_step(e)); /* the followers step with rank 0 */
    int64_t nt;
    bool uniform;
    PW_TRY(pw_schedule(&e->sched, &e->kv, &e->run.host, &nt, &uniform));
    PW_TRY(copy_lent_rows(e));
    int64_t queried, hits;
    pw_kv_blocks_take_counts(&e->kv, &queried, &hits);
    e->stats.prefix_cache_queries += queried;
    e->stats.prefix_cache_hits += hits;
    if (nt == 0) {
        if (pw_scheduler_has_work(&e->sched))
            return pw_error(PW_ERR_STATE,
                            "no request can run: the KV cache is held by finished requests "
                            "(%" PRId64 " of %" PRId64 " blocks free); release them first",
                            e->kv.n_free, e->kv.num_blocks);
        return PW_OK;
    }
    pw_route route;
    PW_TRY(pw_dispatcher_route(pw_module_dispatcher(e->module), nt, uniform, false, &route));
    PW_TRY(agree_route(nt, &route));
    e->stats.lazy_padded += route.kind == PW_ROUTE_PADDED;
    e->stats.lazy_eager += route.kind == PW_ROUTE_EAGER;
    PW_TRY(forward_checked(e, route.mode, &route.desc, nt));
    int64_t prompt_tokens = 0, n_new = 0;
    PW_TRY(sample_scheduled(e, &prompt_tokens, &n_new));
    /* after the step has used the host arrays: the capture rewrites them */
    if (route.capture.mode != PW_MODE_NONE) PW_TRY(pw_engine_capture_lazily(e, &route.capture));
    record_step(e, route.mode, nt, n_new, prompt_tokens, pw_monotonic_seconds() - t0);
    *n_out = n_new;
    return PW_OK;
}

void pw_engine_get_stats(const pw_engine *e, pw_engine_stats *out) { *out = e->stats; }

/* Keeps what describes the engine (capture, memory), clears what counts steps. */
void pw_engine_reset_stats(pw_engine *e) {
    pw_engine_stats keep = e->stats;
    memset(&e->stats, 0, sizeof e->stats);
    e->stats.graphs_captured = keep.graphs_captured;
    e->stats.capture_seconds = keep.capture_seconds;
    e->stats.graph_pool_reserved = keep.graph_pool_reserved;
    e->stats.graph_pool_peak = keep.graph_pool_peak;
    e->stats.graph_pool_predicted = keep.graph_pool_predicted;
    e->stats.weight_bytes = keep.weight_bytes;
    e->stats.buffer_bytes = keep.buffer_bytes;
    e->stats.kv_cache_bytes = keep.kv_cache_bytes;
    e->stats.kv_cache_blocks = keep.kv_cache_blocks;
    e->stats.graph_bytes = keep.graph_bytes;
    e->stats.graphs_patched = keep.graphs_patched;
    e->stats.pieces_patched_in_full = keep.pieces_patched_in_full;
    e->stats.graphs_from_cache = keep.graphs_from_cache;
}

const pw_dispatcher *pw_engine_dispatcher(const pw_engine *e) {
    return pw_module_dispatcher(e->module);
}
const pw_plan *pw_engine_plan(const pw_engine *e) { return pw_module_stitch_plan(e->module); }
const pw_ir *pw_engine_split_graph(const pw_engine *e) { return pw_module_split_graph(e->module); }
