/* The engine's memory: the KV cache sized through the capture library's
 * memory plan (include/piecewise/memory_plan.h). Weights read in place and
 * the persistent buffers are resident; the graph pool is what the capture
 * dry run predicts; the KV cache gets as many blocks as fit in what the
 * budget leaves (without a budget, kv_cache_positions of them), in a pool
 * of its own so that its reservation is exact. */
#include "model/engine_internal.h"

#include "model/piece_program.h"

#include <inttypes.h>

/* The dry run's KV cache: attention launches take the cache's addresses,
 * so the dry run needs one before the real one is sized. A shadow (address
 * space only) of one request's blocks stands in: graph memory does not
 * depend on the number of blocks. No program is recorded from the dry
 * run's shadow addresses. */
static pw_status kv_standins(void *user, pw_pool *shadow) {
    pw_engine *e = user;
    if (e->distinct) e->distinct->planning = shadow != NULL;
    if (shadow) return pw_engine_alloc_kv_cache(e, shadow, e->kv.blocks_per_seq);
    const pw_model_info *in = pw_model_get_info(e->model);
    for (int64_t l = 0; l < in->n_layers; l++) e->run.k_cache[l] = e->run.v_cache[l] = NULL;
    return PW_OK;
}

static size_t kv_bytes(void *user, int64_t num_blocks) {
    return pw_engine_kv_cache_bytes(user, num_blocks);
}

/* Weights read in place (device copies are in the persistent pool). A
 * tensor bound to two parameters (a tied LM head is the embedding) is
 * counted once. */
static size_t weight_bytes_in_place(const pw_engine *e) {
    size_t total = 0;
    for (int i = 1; i < e->weights.n_params; i++) {
        if (e->weights.params[i].kind != PW_VAL_TENSOR || e->weights.copies[i]) continue;
        const void *data = pw_tensor_data(e->weights.params[i].as.tensor);
        bool seen = false;
        for (int j = 1; j < i && !seen; j++)
            seen = e->weights.params[j].kind == PW_VAL_TENSOR && !e->weights.copies[j] &&
                   pw_tensor_data(e->weights.params[j].as.tensor) == data;
        if (!seen) total += pw_tensor_nbytes(e->weights.params[i].as.tensor);
    }
    return total;
}

/* The plan: resident parts, the graphs (when a budget needs them or the
 * prediction was asked for), then the blocks. */
static pw_status plan_blocks(pw_engine *e, pw_memory_plan *plan, int64_t *blocks) {
    pw_pool_stats ps;
    pw_pool_get_stats(e->persistent, &ps);
    e->stats.weight_bytes = weight_bytes_in_place(e);
    e->stats.buffer_bytes = ps.reserved;
    PW_TRY(pw_memory_plan_add(plan, "weights", e->stats.weight_bytes));
    PW_TRY(pw_memory_plan_add(plan, "buffers", e->stats.buffer_bytes));
    if (e->cfg.mode != PW_GRAPH_NONE && (e->cfg.memory_budget || e->cfg.predict_graph_memory)) {
        pw_capture_options co;
        pw_engine_capture_options(e, &co);
        PW_TRY(pw_memory_plan_graphs(plan, e->module, pw_engine_capture_inputs, e, &co,
                                     kv_standins, e, &e->stats.graph_pool_predicted));
    }
    int64_t configured = e->cfg.kv_cache_positions / e->cfg.block_size;
    if (configured < e->kv.blocks_per_seq) configured = e->kv.blocks_per_seq;
    /* with a budget the budget decides, up to 2^40 blocks */
    int64_t most = e->cfg.memory_budget ? (int64_t)1 << 40 : configured;
    PW_TRY(pw_memory_plan_fit(plan, "KV cache block", kv_bytes, e, most, blocks));
    if (e->cfg.memory_budget && *blocks < e->kv.blocks_per_seq)
        pw_log_warn("memory budget: the KV cache holds %" PRId64 " positions, fewer than one "
                    "request of max_model_len %" PRId64 " needs",
                    *blocks * e->cfg.block_size, e->cfg.max_model_len);
    return PW_OK;
}

pw_status pw_engine_size_kv_cache(pw_engine *e) {
    pw_memory_plan *plan = NULL;
    PW_TRY(pw_memory_plan_new(e->cfg.device, e->cfg.memory_budget, &plan));
    int64_t blocks = 0;
    pw_status s = plan_blocks(e, plan, &blocks);
    if (s == PW_OK && e->cfg.memory_budget) {
        char line[512];
        pw_memory_plan_describe(plan, line, sizeof line);
        pw_log_info("%s (%" PRId64 " positions)", line, blocks * e->cfg.block_size);
    }
    pw_memory_plan_free(plan);
    PW_TRY(s);
    PW_TRY(pw_pool_new(e->cfg.device, "kv cache", &e->kv_pool));
    /* the KV cache blocks are regions too, after the persistent ones */
    pw_engine_regions_observe(e, e->kv_pool, true);
    s = pw_engine_alloc_kv_cache(e, e->kv_pool, blocks);
    pw_engine_regions_observe(e, e->kv_pool, false);
    PW_TRY(s);
    pw_pool_stats ps;
    pw_pool_get_stats(e->kv_pool, &ps);
    e->stats.kv_cache_bytes = ps.reserved;
    e->stats.kv_cache_blocks = blocks;
    return PW_OK;
}
