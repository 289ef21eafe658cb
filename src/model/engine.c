/* The engine: builds a piecewise module from the model's graph, sizes
 * memory, captures graphs, and runs batches of requests through them.
 *
 * One step (pw_engine_step):
 *   1. schedule: one token per decoding request, then prefill chunks up to
 *      max_num_batched_tokens, written into the persistent per-step buffers;
 *   2. dispatch: the dispatcher pads to a capture size and picks NONE,
 *      PIECEWISE or FULL (consulting the lazy-capture policy, if any);
 *   3. forward: the module's FULL wrapper replays, captures or passes
 *      through to the stitching plan, whose PIECEWISE wrappers do the same
 *      for each piece, with attention eager between (the bitwise canary,
 *      when on, runs it again eagerly and compares);
 *   4. sample from the logits of each request's last scheduled token; with
 *      lazy capture, capture what the route named. */
#include "model/engine_internal.h"

#include "model/graph_cache.h"
#include "model/sampler.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- compilation: graph -> split -> plans -> wrappers ------------------------------- */

static pw_status resolve_op(void *user, const char *target, pw_callable *out) {
    pw_engine *e = user;
    return pw_op_resolve(&e->env, target, out);
}

static pw_status run_forward_plain(void *user, const pw_value *args, int nargs, pw_value *out) {
    pw_engine *e = user;
    return e->forward_plain.fn(e->forward_plain.user, args, nargs, out);
}

/* Distinct-piece capture and the graph cache see every run of a piece and
 * of the whole forward (engine_distinct.c). */
static pw_status interpose(void *user, int piece, pw_callable plain, const pw_value *args,
                           int nargs, pw_value *out) {
    pw_engine *e = user;
    if (piece != PW_MODULE_FORWARD)
        return pw_engine_distinct_run(e, &e->pieces[piece], args, nargs, out);
    e->forward_plain = plain;
    return pw_engine_forward_hooked(e, run_forward_plain, args, nargs, out);
}

static pw_status compile_model(pw_engine *e, const pw_dispatcher_config *dc) {
    pw_ir *ir = NULL;
    PW_TRY(pw_model_build_ir(e->model, &ir));
    const char *const *split_ops;
    int n_split_ops = pw_op_splitting_names(&split_ops);
    pw_module_options mo;
    pw_module_options_init(&mo);
    mo.name = "forward";
    mo.dispatcher = dc;
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
    e->dispatcher = pw_module_dispatcher(e->module);
    e->split = pw_module_split_graph(e->module);
    e->stitch_plan = pw_module_stitch_plan(e->module);
    e->n_submods = pw_module_num_submodules(e->module);
    e->pieces = pw_host_calloc((size_t)e->n_submods + 1, sizeof *e->pieces);
    if (!e->pieces) return PW_ERR_OOM;
    for (int i = 0; i < e->n_submods; i++) e->pieces[i].plan = pw_module_piece_plan(e->module, i);
    return pw_engine_distinct_init(e);
}

/* ---- persistent buffers and KV cache ---------------------------------------------------- */

pw_status pw_engine_perturb_metadata(void *user, int round) {
    pw_engine *e = user;
    /* Different per-step values in every persistent buffer: a kernel that
     * baked any of them into its launch arguments shows up as a diff. */
    pw_step_inputs *h = &e->run.host;
    const int64_t rows = h->max_tokens;
    for (int64_t t = 0; t < rows; t++) {
        h->positions[t] = (int32_t)(round * 3 + t % 5);
        h->token_seq[t] = (int32_t)(round % 2);
        h->input_ids[t] = (int32_t)(round + 1);
        h->slot_mapping[t] = -1;
        h->sample_rows[t] = (int32_t)((t + round) % rows);
    }
    h->n_sample_rows = (int32_t)rows; /* clamped to each launch's rows */
    PW_TRY(pw_engine_stage_inputs(e, rows));
    return pw_stream_synchronize(e->stream);
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Stages the first n_padded rows of the host per-step buffers to the
 * device and makes the forward's token-id argument that many rows. */
static pw_status prepare_inputs(pw_engine *e, int64_t n_padded) {
    PW_TRY(pw_engine_stage_inputs(e, n_padded));
    if (!e->run.ids_slice || pw_tensor_dim(e->run.ids_slice, 0) != n_padded) {
        pw_tensor *ids = NULL;
        PW_TRY(pw_tensor_slice0(e->run.ids_tensor, 0, n_padded, &ids));
        pw_tensor_release(e->run.ids_slice);
        e->run.ids_slice = ids;
    }
    e->weights.params[0] = pw_value_tensor(e->run.ids_slice); /* the weights were filled in once */
    return PW_OK;
}

/* Runs the model on the first n_padded tokens of the persistent buffers
 * under (mode, desc). *logits is a new reference. */
static pw_status forward(pw_engine *e, pw_runtime_mode mode, const pw_batch_desc *desc,
                         int64_t n_padded, pw_value *logits) {
    *logits = pw_value_none();
    PW_TRY(prepare_inputs(e, n_padded));
    return pw_module_run(e->module, mode, desc, e->run.dev.meta, e->weights.params,
                         e->weights.n_params, logits);
}

/* A capture's inputs: an all-padding batch of desc's size, which samples
 * nothing. */
static pw_status capture_inputs(void *user, pw_runtime_mode mode, const pw_batch_desc *desc,
                                const pw_value **args, int *nargs) {
    pw_engine *e = user;
    (void)mode;
    pw_step_inputs_pad(&e->run.host, 0, desc->num_tokens);
    e->run.host.n_sample_rows = 0;
    PW_TRY(prepare_inputs(e, desc->num_tokens));
    *args = e->weights.params;
    *nargs = e->weights.n_params;
    return PW_OK;
}

static void engine_capture_options(const pw_engine *e, pw_capture_options *co) {
    pw_capture_options_init(co);
    co->warmups = e->cfg.warmups;
    co->force_warmups = e->cfg.force_warmups;
    co->progress = e->cfg.progress;
    co->graph_pool = e->graph_pool;
    co->print_totals = e->cfg.print_capture_totals;
}

static pw_status capture_all(pw_engine *e) {
    if (e->cfg.mode == PW_GRAPH_NONE || e->cfg.capture_policy == PW_CAPTURE_LAZY) return PW_OK;
    pw_capture_options co;
    engine_capture_options(e, &co);
    pw_capture_report rep;
    pw_graph_cache_load(e);
    PW_TRY(pw_module_capture(e->module, capture_inputs, e, &co, &rep));
    e->stats.graphs_captured = rep.graphs_captured;
    e->stats.capture_seconds = rep.seconds;
    pw_engine_distinct_counts(e, &e->stats.graphs_patched, &e->stats.pieces_patched_in_full,
                              &e->stats.graphs_from_cache);
    pw_graph_cache_store(e);
    return PW_OK;
}

/* ---- memory planning: graph bytes first, the KV cache from what is left ------------------- */

static const char *fmt_bytes(size_t bytes, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < PW_ARRAY_LEN(units)) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%zu B", bytes);
    else snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

/* The dry run of the capture list (pw_capture_plan). The attention kernels
 * take the KV cache's addresses as arguments, so it needs one: a shadow
 * cache (address space only, never touched) stands in until the real one
 * is sized. Graph memory does not depend on the number of blocks. */
static pw_status plan_graph_memory(pw_engine *e, size_t *bytes) {
    *bytes = 0;
    pw_pool *shadow_kv = NULL;
    PW_TRY(pw_pool_new(e->cfg.device, "kv cache (planning)", &shadow_kv));
    pw_status s = pw_pool_set_shadow(shadow_kv, true);
    if (s == PW_OK) s = pw_engine_alloc_kv_cache(e, shadow_kv, e->kv.blocks_per_seq);
    pw_capture_plan_report rep;
    if (s == PW_OK) {
        pw_capture_options co;
        engine_capture_options(e, &co);
        /* the dry run's addresses are a shadow's: no program is recorded from it */
        if (e->distinct) e->distinct->planning = true;
        s = pw_module_plan_capture(e->module, capture_inputs, e, &co, &rep);
        if (e->distinct) e->distinct->planning = false;
    }
    pw_pool_free(shadow_kv);
    const pw_model_info *in = pw_model_get_info(e->model);
    for (int64_t l = 0; l < in->n_layers; l++) e->run.k_cache[l] = e->run.v_cache[l] = NULL;
    if (s == PW_OK) *bytes = rep.graph_pool_bytes;
    return s;
}

/* What the KV cache pool reserves for num_blocks blocks: the same
 * allocation against a shadow pool, so segment rounding is included. */
static pw_status kv_reserved_bytes(const pw_engine *e, int64_t num_blocks, size_t *out) {
    pw_pool *p = NULL;
    PW_TRY(pw_pool_new(e->cfg.device, "kv cache (sizing)", &p));
    pw_status s = pw_pool_set_shadow(p, true);
    void *ptr;
    if (s == PW_OK) s = pw_pool_alloc(p, pw_engine_kv_cache_bytes(e, num_blocks), &ptr);
    pw_pool_stats st;
    pw_pool_get_stats(p, &st);
    pw_pool_free(p);
    *out = st.reserved;
    return s;
}

/* Weights read in place (device copies are in the persistent pool). */
static size_t weight_bytes_in_place(const pw_engine *e) {
    size_t total = 0;
    for (int i = 1; i < e->weights.n_params; i++)
        if (e->weights.params[i].kind == PW_VAL_TENSOR && !e->weights.copies[i])
            total += pw_tensor_nbytes(e->weights.params[i].as.tensor);
    return total;
}

/* The most blocks whose cache fits in `avail` bytes (0 if not even one). */
static pw_status kv_blocks_within(const pw_engine *e, size_t avail, int64_t *blocks) {
    const pw_model_info *in = pw_model_get_info(e->model);
    size_t per_block = 2 * (size_t)(in->n_layers * e->cfg.block_size * in->n_kv_heads *
                                    in->head_dim) * sizeof(float); /* before rounding */
    int64_t lo = 0, hi = (int64_t)(avail / per_block); /* reserved >= raw bytes */
    if (hi > ((int64_t)1 << 40)) hi = (int64_t)1 << 40;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        size_t r;
        PW_TRY(kv_reserved_bytes(e, mid, &r));
        if (r <= avail) lo = mid;
        else hi = mid - 1;
    }
    *blocks = lo;
    return PW_OK;
}

/* Sizes the KV cache (from the budget when there is one) and allocates it. */
static pw_status size_kv_cache(pw_engine *e) {
    bool graphs = e->cfg.mode != PW_GRAPH_NONE;
    size_t graph_bytes = 0;
    if (graphs && (e->cfg.memory_budget || e->cfg.predict_graph_memory))
        PW_TRY(plan_graph_memory(e, &graph_bytes));
    e->stats.graph_pool_predicted = graph_bytes;
    pw_pool_stats ps;
    pw_pool_get_stats(e->persistent, &ps);
    e->stats.weight_bytes = weight_bytes_in_place(e);
    e->stats.buffer_bytes = ps.reserved;
    int64_t blocks = e->cfg.kv_cache_positions / e->cfg.block_size;
    if (blocks < e->kv.blocks_per_seq) blocks = e->kv.blocks_per_seq;
    char w[32], b[32], g[32], k[32], t[32], u[32];
    if (e->cfg.memory_budget) {
        size_t fixed = e->stats.weight_bytes + e->stats.buffer_bytes + graph_bytes;
        size_t one_block;
        PW_TRY(kv_reserved_bytes(e, 1, &one_block));
        blocks = 0;
        if (e->cfg.memory_budget > fixed)
            PW_TRY(kv_blocks_within(e, e->cfg.memory_budget - fixed, &blocks));
        if (blocks < 1)
            return pw_error(PW_ERR_INVALID_ARG,
                            "memory budget of %zu bytes (%s) is too small: weights %zu + buffers "
                            "%zu + graphs %zu (predicted) + one KV cache block %zu = %zu bytes "
                            "needed at least",
                            e->cfg.memory_budget, fmt_bytes(e->cfg.memory_budget, t, sizeof t),
                            e->stats.weight_bytes, e->stats.buffer_bytes, graph_bytes, one_block,
                            fixed + one_block);
        if (blocks < e->kv.blocks_per_seq)
            pw_log_warn("memory budget: the KV cache holds %" PRId64 " positions, fewer than one "
                        "request of max_model_len %" PRId64 " needs",
                        blocks * e->cfg.block_size, e->cfg.max_model_len);
    }
    PW_TRY(pw_pool_new(e->cfg.device, "kv cache", &e->kv_pool));
    /* the KV cache blocks are regions too, after the persistent ones */
    pw_engine_regions_observe(e, e->kv_pool, true);
    pw_status kv = pw_engine_alloc_kv_cache(e, e->kv_pool, blocks);
    pw_engine_regions_observe(e, e->kv_pool, false);
    PW_TRY(kv);
    pw_pool_get_stats(e->kv_pool, &ps);
    e->stats.kv_cache_bytes = ps.reserved;
    e->stats.kv_cache_blocks = blocks;
    size_t used = e->stats.weight_bytes + e->stats.buffer_bytes + graph_bytes + ps.reserved;
    if (e->cfg.memory_budget)
        pw_log_info("memory budget %s: weights %s, buffers %s, graphs %s (predicted), KV cache %s "
                    "(%" PRId64 " blocks, %" PRId64 " positions), unused %s",
                    fmt_bytes(e->cfg.memory_budget, t, sizeof t),
                    fmt_bytes(e->stats.weight_bytes, w, sizeof w),
                    fmt_bytes(e->stats.buffer_bytes, b, sizeof b),
                    fmt_bytes(graph_bytes, g, sizeof g), fmt_bytes(ps.reserved, k, sizeof k),
                    blocks, blocks * e->cfg.block_size,
                    fmt_bytes(e->cfg.memory_budget - used, u, sizeof u));
    return PW_OK;
}

/* ---- lazy capture ------------------------------------------------------------------------------- */

/* Captures what the dispatcher routed around, after the step that first
 * needed it; the module's lazy policy evicts past the graph budget. */
static pw_status capture_lazily(pw_engine *e, const pw_capture_item *item) {
    pw_capture_options co;
    engine_capture_options(e, &co);
    co.progress = PW_PROGRESS_OFF;
    co.print_totals = false;
    const pw_lazy_capture *lz = pw_module_lazy_capture(e->module);
    pw_lazy_capture_stats before, after;
    pw_lazy_capture_get_stats(lz, &before);
    double t0 = now_seconds();
    PW_TRY(pw_module_capture_one(e->module, item, capture_inputs, e, &co));
    e->stats.capture_seconds += now_seconds() - t0;
    e->stats.graphs_captured +=
        item->mode == PW_MODE_FULL ? 1 : (uint64_t)pw_module_num_pieces(e->module);
    e->stats.lazy_captured++;
    pw_lazy_capture_get_stats(lz, &after);
    e->stats.graphs_evicted += (int64_t)(after.evicted - before.evicted);
    e->stats.graph_bytes = after.bytes;
    pw_pool_stats ps;
    pw_pool_get_stats(e->graph_pool, &ps);
    e->stats.graph_pool_reserved = ps.reserved;
    e->stats.graph_pool_peak = ps.peak_allocated;
    return PW_OK;
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

    pw_dispatcher_config dc;
    pw_dispatcher_config_init(&dc);
    dc.mode = cfg.mode;
    dc.max_num_seqs = cfg.max_num_seqs;
    dc.max_num_batched_tokens = cfg.max_num_batched_tokens;
    dc.capture_sizes = cfg.capture_sizes;
    dc.n_capture_sizes = cfg.n_capture_sizes;

    pw_status s = pw_stream_new(e->cfg.device, &e->stream);
    if (s == PW_OK) s = pw_pool_new(e->cfg.device, "activations", &e->act_pool);
    if (s == PW_OK) s = pw_pool_new(e->cfg.device, "graphs", &e->graph_pool);
    if (s == PW_OK) s = pw_scheduler_init(&e->sched, cfg.max_num_seqs, cfg.max_num_batched_tokens);
    if (s == PW_OK)
        s = pw_kv_blocks_init(&e->kv, cfg.max_num_seqs, cfg.block_size, cfg.max_model_len);
    if (s == PW_OK) s = pw_engine_distinct_new(e);
    if (s == PW_OK) s = pw_engine_alloc_buffers(e);
    if (s == PW_OK) s = compile_model(e, &dc);
    if (s == PW_OK) s = size_kv_cache(e);
    if (s == PW_OK) s = capture_all(e);
    if (s != PW_OK) {
        pw_engine_free(e);
        return s;
    }
    pw_pool_stats ps;
    pw_pool_get_stats(e->graph_pool, &ps);
    e->stats.graph_pool_reserved = ps.reserved;
    e->stats.graph_pool_peak = ps.peak_allocated;
    *out = e;
    return PW_OK;
}

void pw_engine_free(pw_engine *e) {
    if (!e) return;
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
        if (s->r->n_computed + s->count < s->r->n_tokens) continue;
        if (row >= h->n_sample_rows || h->sample_rows[row] != s->start + s->count - 1)
            return pw_error(PW_ERR_INTERNAL, "the sampled rows disagree with the schedule");
        PW_TRY(pw_stream_copy_d2h(e->stream, e->run.last_logits + s->r->slot * vocab,
                                  dev + row * vocab, row_bytes));
        row++;
    }
    return pw_stream_synchronize(e->stream);
}

/* Advances every scheduled request past its tokens and samples the next
 * token of each whose pending tokens all ran, from its last_logits row.
 * Returns the number of new tokens (in e->run.step_tokens). */
static int64_t sample_scheduled(pw_engine *e, int64_t *prompt_tokens) {
    int64_t vocab = pw_model_get_info(e->model)->vocab;
    int64_t n_new = 0;
    for (int64_t i = 0; i < e->sched.n_batch; i++) {
        pw_scheduled *s = &e->sched.batch[i];
        pw_request *r = s->r;
        if (r->n_computed < r->n_prompt) *prompt_tokens += s->count;
        r->n_computed += s->count;
        if (r->n_computed < r->n_tokens) continue; /* prefill chunk, more to come */
        const float *row = e->run.last_logits + r->slot * vocab;
        int32_t tok = pw_sample(row, vocab, &r->sp, &r->rng, e->run.sample_scratch);
        r->tokens[r->n_tokens++] = tok;
        r->finished = pw_model_is_end_of_generation(e->model, tok) || r->n_tokens >= r->limit;
        e->run.step_tokens[n_new++] = (pw_step_token){r->id, tok, r->finished};
    }
    return n_new;
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

pw_status pw_engine_step(pw_engine *e, const pw_step_token **tokens, int64_t *n_out) {
    *tokens = e->run.step_tokens;
    *n_out = 0;
    /* The step timer covers scheduling too: it is per-step work that a
     * decode rate must pay (bench model's figures and llama-bench's tg
     * both count everything between one token and the next). */
    double t0 = now_seconds();
    int64_t nt;
    bool uniform;
    PW_TRY(pw_schedule(&e->sched, &e->kv, &e->run.host, &nt, &uniform));
    if (nt == 0) {
        if (pw_scheduler_has_work(&e->sched))
            return pw_error(PW_ERR_STATE,
                            "no request can run: the KV cache is held by finished requests "
                            "(%" PRId64 " of %" PRId64 " blocks free); release them first",
                            e->kv.n_free, e->kv.num_blocks);
        return PW_OK;
    }
    pw_route route;
    PW_TRY(pw_dispatcher_route(e->dispatcher, nt, uniform, false, &route));
    e->stats.lazy_padded += route.kind == PW_ROUTE_PADDED;
    e->stats.lazy_eager += route.kind == PW_ROUTE_EAGER;
    pw_runtime_mode mode = route.mode;
    pw_batch_desc desc = route.desc;
    PW_TRY(forward_checked(e, mode, &desc, nt));
    int64_t prompt_tokens = 0;
    int64_t n_new = sample_scheduled(e, &prompt_tokens);
    /* after the step has used the host arrays: the capture rewrites them */
    if (route.capture.mode != PW_MODE_NONE) PW_TRY(capture_lazily(e, &route.capture));
    record_step(e, mode, nt, n_new, prompt_tokens, now_seconds() - t0);
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

const pw_dispatcher *pw_engine_dispatcher(const pw_engine *e) { return e->dispatcher; }
const pw_plan *pw_engine_plan(const pw_engine *e) { return e->stitch_plan; }
const pw_ir *pw_engine_split_graph(const pw_engine *e) { return e->split; }
