/* The engine's weights and run state, allocated once: host arrays the
 * scheduler and the sampler write, and in memory of the engine's device
 * (its persistent pool) the per-step buffers, the attention metadata
 * struct, the rope tables and whatever weight copies the device needs;
 * and, sized afterwards (from the memory budget, once graph memory is
 * known), the paged KV cache in a pool of its own. Host data reaches the
 * device through stream copies only, so this code is the same for every
 * device (on the CPU the copies are memcpys). */
#include "model/engine_internal.h"

#include "backend/stream_backend.h"
#include "model/dequant.h"
#include "model/sampler.h"

#include <string.h>

static pw_status alloc_host_arrays(pw_engine *e) {
    const pw_model_info *in = pw_model_get_info(e->model);
    int64_t S = e->cfg.max_num_seqs;
    pw_run_state *r = &e->run;
    PW_TRY(pw_step_inputs_init(&r->host, e->cfg.max_num_batched_tokens));
    r->step_tokens = pw_host_calloc((size_t)S, sizeof *r->step_tokens);
    size_t logits_bytes = (size_t)(S * in->vocab) * sizeof(float);
    pw_device_caps caps;
    PW_TRY(pw_device_get_caps(e->cfg.device, &caps));
    if (caps.async_copy) {
        PW_TRY(pw_device_host_alloc(e->cfg.device, logits_bytes, (void **)&r->last_logits));
        r->last_logits_pinned = true;
        memset(r->last_logits, 0, logits_bytes);
    } else {
        r->last_logits = pw_host_calloc(1, logits_bytes);
    }
    /* zeroed: the sampler's per-token marks start clear */
    r->sample_scratch = pw_host_calloc(1, pw_sampler_scratch_bytes(in->vocab));
    r->k_cache = pw_host_calloc((size_t)in->n_layers, sizeof(float *));
    r->v_cache = pw_host_calloc((size_t)in->n_layers, sizeof(float *));
    e->weights.params = pw_host_calloc((size_t)pw_model_num_params(e->model), sizeof(pw_value));
    if (!r->step_tokens || !r->last_logits || !r->sample_scratch || !r->k_cache || !r->v_cache ||
        !e->weights.params)
        return PW_ERR_OOM;
    return PW_OK;
}

static pw_status device_alloc(pw_engine *e, size_t bytes, void **out) {
    return pw_pool_alloc(e->persistent, bytes, out);
}

/* A device buffer holding a copy of `bytes` of host data. */
static pw_status device_upload(pw_engine *e, const void *host, size_t bytes, void **out) {
    PW_TRY(device_alloc(e, bytes, out));
    return pw_stream_copy_h2d(e->stream, *out, host, bytes);
}

/* The per-step buffers and the attention metadata struct that points at
 * them, in device memory. */
static pw_status alloc_step_buffers(pw_engine *e) {
    pw_run_state *r = &e->run;
    int64_t T = e->cfg.max_num_batched_tokens;
    size_t tok = (size_t)T * sizeof(int32_t);
    size_t table = (size_t)(e->kv.max_seqs * e->kv.blocks_per_seq) * sizeof(int32_t);
    PW_TRY(device_alloc(e, tok, (void **)&r->dev.input_ids));
    PW_TRY(device_alloc(e, tok, (void **)&r->dev.positions));
    PW_TRY(device_alloc(e, tok, (void **)&r->dev.slot_mapping));
    PW_TRY(device_alloc(e, tok, (void **)&r->dev.token_seq));
    PW_TRY(device_alloc(e, table, (void **)&r->dev.block_tables));
    PW_TRY(device_alloc(e, tok, (void **)&r->dev.sample_rows));
    PW_TRY(device_alloc(e, sizeof(int32_t), (void **)&r->dev.n_sample_rows));
    r->meta.positions = r->dev.positions;
    r->meta.slot_mapping = r->dev.slot_mapping;
    r->meta.token_seq = r->dev.token_seq;
    r->meta.block_tables = r->dev.block_tables;
    r->meta.max_blocks_per_seq = (int32_t)e->kv.blocks_per_seq;
    r->meta.block_size = (int32_t)e->cfg.block_size;
    r->meta.sample_rows = r->dev.sample_rows;
    r->meta.n_sample_rows = r->dev.n_sample_rows;
    PW_TRY(device_upload(e, &r->meta, sizeof r->meta, (void **)&r->dev.meta));
    pw_device_caps caps;
    PW_TRY(pw_device_get_caps(e->cfg.device, &caps));
    if (caps.async_copy)
        PW_TRY(pw_device_host_alloc(e->cfg.device, 5 * tok + sizeof(int32_t) + table,
                                    (void **)&r->staging));
    return pw_tensor_wrap(r->dev.input_ids, e->cfg.device, PW_I32, 1, &T, &r->ids_tensor);
}

/* The rope tables. */
static pw_status alloc_rope(pw_engine *e) {
    const pw_model_info *in = pw_model_get_info(e->model);
    pw_engine_weights *w = &e->weights;
    int64_t len = e->cfg.max_model_len;
    size_t rope_bytes = pw_op_rope_table_floats(len, in->head_dim) * sizeof(float);
    float *rope = pw_host_alloc(rope_bytes);
    if (!rope) return PW_ERR_OOM;
    /* Llama 3.x's frequency factors and linear scaling are in the table */
    const pw_model *m = e->model;
    pw_op_rope_table_scaled(rope, len, in->head_dim, in->rope_theta,
                            m->rope_freq_factors, m->rope_freq_scale);
    pw_status s = device_upload(e, rope, rope_bytes, (void **)&w->rope_table);
    /* the copy may read the host table asynchronously */
    if (s == PW_OK) s = pw_stream_synchronize(e->stream);
    /* Sliding-window layers have their own rope base (Gemma 3). */
    if (s == PW_OK && m->layer_window) {
        pw_op_rope_table(rope, len, in->head_dim, m->rope_theta_local);
        s = device_upload(e, rope, rope_bytes, (void **)&w->rope_table_local);
        if (s == PW_OK) s = pw_stream_synchronize(e->stream);
        w->layer_rope = pw_host_calloc((size_t)in->n_layers, sizeof *w->layer_rope);
        if (s == PW_OK && !w->layer_rope) s = PW_ERR_OOM;
        for (int64_t l = 0; s == PW_OK && l < in->n_layers; l++)
            w->layer_rope[l] = m->layer_window[l] > 0 ? w->rope_table_local : w->rope_table;
    }
    pw_host_free(rope);
    return s;
}

/* One layer's K (or V) cache, rounded so every layer's starts aligned. */
static size_t kv_layer_bytes(const pw_engine *e, int64_t num_blocks) {
    const pw_model_info *in = pw_model_get_info(e->model);
    /* a tensor-parallel rank caches its own KV heads only */
    size_t bytes = (size_t)num_blocks * (size_t)e->cfg.block_size *
                   (size_t)(pw_model_local_shape(e->model).n_kv_heads * in->head_dim) *
                   sizeof(float);
    return (bytes + PW_POOL_ALIGN - 1) / PW_POOL_ALIGN * PW_POOL_ALIGN;
}

size_t pw_engine_kv_cache_bytes(const pw_engine *e, int64_t num_blocks) {
    return 2 * (size_t)pw_model_get_info(e->model)->n_layers * kv_layer_bytes(e, num_blocks);
}

/* The paged KV cache. It is not cleared: attention reads only positions up
 * to the token's own, all of which its request has written (this step's
 * tokens are written before they are attended to), and padding tokens
 * neither write nor read. Leaving it untouched keeps a large host cache out
 * of resident memory until used. */
pw_status pw_engine_alloc_kv_cache(pw_engine *e, pw_pool *pool, int64_t num_blocks) {
    const pw_model_info *in = pw_model_get_info(e->model);
    e->env.num_blocks = num_blocks;
    PW_TRY(pw_kv_blocks_reset(&e->kv, num_blocks));
    /* One block for every layer's K and V: one segment, rounded once,
     * instead of a rounding per layer. */
    size_t layer = kv_layer_bytes(e, num_blocks);
    char *base;
    PW_TRY(pw_pool_alloc(pool, pw_engine_kv_cache_bytes(e, num_blocks), (void **)&base));
    for (int64_t l = 0; l < in->n_layers; l++) {
        e->run.k_cache[l] = (float *)(base + (size_t)(2 * l) * layer);
        e->run.v_cache[l] = (float *)(base + (size_t)(2 * l + 1) * layer);
    }
    return PW_OK;
}

/* w's values as f32 into out. A weight in a layout of the CPU kernels'
 * own (Q4_0x16) goes back to the file's type first, in a copy. */
static pw_status dequantize_weight(const pw_tensor *w, float *out) {
    pw_dtype dt = pw_tensor_dtype(w);
    if (dt != PW_Q4_0X16) return pw_dequantize(dt, pw_tensor_data(w), out, pw_tensor_numel(w));
    void *copy = pw_host_alloc(pw_tensor_nbytes(w));
    if (!copy) return PW_ERR_OOM;
    /* (a pair pw_op_convert_weight always converts) */
    (void)pw_op_convert_weight(copy, pw_tensor_data(w), dt, PW_Q4_0, pw_tensor_dim(w, 0),
                               pw_tensor_dim(w, 1));
    pw_status s = pw_dequantize(PW_Q4_0, copy, out, pw_tensor_numel(w));
    pw_host_free(copy);
    return s;
}

/* src [n][k] f32 as its `shards` column shards stacked one after the
 * other: dst [shards * n][k / shards]. */
static void stack_col_shards(float *dst, const float *src, int64_t n, int64_t k, int64_t shards) {
    int64_t ks = k / shards;
    for (int64_t s = 0; s < shards; s++)
        for (int64_t r = 0; r < n; r++)
            memcpy(dst + (s * n + r) * ks, src + r * k + s * ks, (size_t)ks * sizeof(float));
}

/* A copy of a host weight that the device's kernels can read: the same
 * dtype where they read it, f32 (dequantized) otherwise.
 *
 * o's and down's whole weights (op matmul_shards reads their K as column
 * shards) go to the device in f32 as the shards stacked one after the
 * other, the layout a tensor-parallel rank's copies have: the device
 * multiplies each shard as a dense matrix, which it then reads where it
 * lies instead of packing it into scratch at every step (for a 1B model,
 * about half the weights copied once more per step). Same products, same
 * bits (ops.c, matmul_shards). Kept block types are left whole: the CPU
 * kernels' interleaved layouts (Q4_0x16) do not cut by columns. */
static pw_status upload_weight(pw_engine *e, const pw_tensor *w, pw_tensor **out) {
    int64_t shape[PW_MAX_DIMS];
    int nd = pw_tensor_ndim(w);
    for (int i = 0; i < nd; i++) shape[i] = pw_tensor_dim(w, i);
    pw_dtype dt = pw_tensor_dtype(w);
    bool keep = pw_op_reads_weight_dtype(e->cfg.device, dt);
    pw_dtype to = keep ? dt : PW_F32;
    int64_t shards = to == PW_F32 ? pw_model_weight_col_shards(e->model, w) : 0;
    if (shards > 1 && shape[1] % shards != 0) shards = 0; /* the plan cut whole blocks */
    if (shards > 1) shape[0] *= shards, shape[1] /= shards;
    PW_TRY(pw_tensor_new(e->persistent, to, nd, shape, out));
    size_t bytes = pw_tensor_nbytes(*out);
    float *host = NULL, *stacked = NULL;
    pw_status s = PW_OK;
    if (!keep) {
        host = pw_host_alloc(bytes);
        s = host ? dequantize_weight(w, host) : PW_ERR_OOM;
    }
    const void *from = keep ? pw_tensor_data(w) : host;
    if (s == PW_OK && shards > 1) {
        stacked = pw_host_alloc(bytes);
        if (stacked)
            stack_col_shards(stacked, from, pw_tensor_dim(w, 0), pw_tensor_dim(w, 1), shards);
        else
            s = PW_ERR_OOM;
        from = stacked;
    }
    if (s == PW_OK) s = pw_stream_copy_h2d(e->stream, pw_tensor_data(*out), from, bytes);
    /* the copy reads host memory asynchronously: wait before freeing it */
    if (s == PW_OK) s = pw_stream_synchronize(e->stream);
    pw_host_free(stacked);
    pw_host_free(host);
    return s;
}

/* The forward's parameters: token ids (set per step), then the weights,
 * which never change. Weights already on the engine's device are used in
 * place (the CPU reads the mapped file); others get a device copy. */
static pw_status bind_params(pw_engine *e) {
    pw_engine_weights *w = &e->weights;
    w->n_params = pw_model_params(e->model, w->params, NULL);
    w->copies = pw_host_calloc((size_t)w->n_params, sizeof *w->copies);
    if (!w->copies) return PW_ERR_OOM;
    for (int i = 1; i < w->n_params; i++) {
        const pw_tensor *t = w->params[i].as.tensor;
        if (w->params[i].kind != PW_VAL_TENSOR || pw_tensor_device(t) == e->cfg.device) continue;
        PW_TRY(upload_weight(e, t, &w->copies[i]));
        w->params[i] = pw_value_tensor(w->copies[i]);
    }
    return PW_OK;
}

pw_status pw_engine_alloc_buffers(pw_engine *e) {
    PW_TRY(alloc_host_arrays(e));
    PW_TRY(pw_pool_new(e->cfg.device, "engine persistent", &e->persistent));
    /* the persistent blocks are the regions stored graphs address (engine_distinct.c) */
    pw_engine_regions_observe(e, e->persistent, true);
    pw_status s = alloc_step_buffers(e);
    if (s == PW_OK) s = alloc_rope(e);
    if (s == PW_OK) s = bind_params(e);
    pw_engine_regions_observe(e, e->persistent, false);
    PW_TRY(s);
    return pw_engine_init_op_env(e);
}

void pw_engine_free_buffers(pw_engine *e) {
    pw_engine_weights *w = &e->weights;
    pw_run_state *r = &e->run;
    pw_tensor_release(r->ids_slice);
    pw_tensor_release(r->ids_tensor);
    for (int i = 0; w->copies && i < w->n_params; i++) pw_tensor_release(w->copies[i]);
    /* the rope tables, weight copies and step buffers are blocks of e->persistent */
    pw_pool_free(e->persistent);
    pw_pool_free(e->kv_pool);
    pw_host_free(w->copies);
    pw_host_free(w->params);
    pw_host_free((void *)w->layer_rope);
    pw_step_inputs_free(&r->host);
    pw_device_host_free(e->cfg.device, r->staging);
    pw_host_free(r->k_cache);
    pw_host_free(r->v_cache);
    if (r->last_logits_pinned)
        pw_device_host_free(e->cfg.device, r->last_logits);
    else
        pw_host_free(r->last_logits);
    pw_host_free(r->sample_scratch);
    pw_host_free(r->step_tokens);
    memset(w, 0, sizeof *w);
    memset(r, 0, sizeof *r);
    e->persistent = e->kv_pool = NULL;
}

/* One per-step input: through the page-locked staging slot where the
 * device has one, straight from the host array otherwise. The slot is free
 * to overwrite: every step ends in a synchronization (its logits). */
static pw_status stage(pw_engine *e, void *dev, const void *host, size_t bytes, size_t slot) {
    if (!e->run.staging) return pw_stream_copy_h2d(e->stream, dev, host, bytes);
    char *staged = (char *)e->run.staging + slot;
    memcpy(staged, host, bytes);
    return pw_stream_copy_h2d(e->stream, dev, staged, bytes);
}

pw_status pw_engine_stage_inputs(pw_engine *e, int64_t n_tokens) {
    const pw_step_inputs *h = &e->run.host;
    size_t tok = (size_t)n_tokens * sizeof(int32_t);
    size_t slot = (size_t)e->cfg.max_num_batched_tokens * sizeof(int32_t);
    PW_TRY(stage(e, e->run.dev.input_ids, h->input_ids, tok, 0));
    PW_TRY(stage(e, e->run.dev.positions, h->positions, tok, slot));
    PW_TRY(stage(e, e->run.dev.slot_mapping, h->slot_mapping, tok, 2 * slot));
    PW_TRY(stage(e, e->run.dev.token_seq, h->token_seq, tok, 3 * slot));
    if (h->n_sample_rows > 0)
        PW_TRY(stage(e, e->run.dev.sample_rows, h->sample_rows,
                     (size_t)h->n_sample_rows * sizeof(int32_t), 4 * slot));
    PW_TRY(stage(e, e->run.dev.n_sample_rows, &h->n_sample_rows, sizeof h->n_sample_rows,
                 5 * slot));
    if (!e->kv.tables_dirty) return PW_OK;
    e->kv.tables_dirty = false;
    return stage(e, e->run.dev.block_tables, e->kv.tables,
                 (size_t)(e->kv.max_seqs * e->kv.blocks_per_seq) * sizeof(int32_t),
                 5 * slot + sizeof(int32_t));
}

pw_status pw_engine_prepare_forward(pw_engine *e, int64_t n_padded) {
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
