/* The engine on a CUDA device. The engine keeps writing its per-step
 * inputs into host arrays; here they get device mirrors that never move
 * (so captured graphs stay valid), staged with one copy each before every
 * forward, outside any capture. The KV cache, the rope table, the
 * attention metadata struct and f32 copies of the weights live in a
 * device pool of their own; the logits are copied back for sampling. */
#include "model/engine_internal.h"

#include "pw_config.h"

#if PW_HAVE_CUDA

#include "backend/cuda/cuda_backend.h"
#include "model/dequant.h"

#include <string.h>

typedef struct pw_engine_cuda {
    pw_pool *persistent; /* device memory that lives as long as the engine */
    int32_t *ids, *positions, *slot_mapping, *token_seq, *block_tables;
    pw_attn_meta *meta;
    pw_tensor **weights; /* device copies, in parameter order from 1 */
    int n_weights;
    float *host_logits;  /* [max_tokens][vocab] */
} pw_engine_cuda;

static pw_status device_alloc(pw_engine *e, size_t bytes, void **out) {
    return pw_pool_alloc(e->cuda->persistent, bytes, out);
}

static pw_status upload(pw_engine *e, void *dst, const void *src, size_t bytes) {
    return pw_cuda_copy_to_device(e->stream, dst, src, bytes);
}

/* An f32 device copy of a (possibly quantized) host weight. */
static pw_status upload_weight(pw_engine *e, const pw_tensor *w, pw_tensor **out) {
    int64_t shape[PW_MAX_DIMS];
    int nd = pw_tensor_ndim(w);
    for (int i = 0; i < nd; i++) shape[i] = pw_tensor_dim(w, i);
    int64_t n = pw_tensor_numel(w);
    float *host = pw_host_alloc((size_t)n * sizeof(float));
    if (!host) return PW_ERR_OOM;
    pw_status s = pw_dequantize(pw_tensor_dtype(w), pw_tensor_data(w), host, n);
    void *dev = NULL;
    if (s == PW_OK) s = device_alloc(e, (size_t)n * sizeof(float), &dev);
    if (s == PW_OK) s = upload(e, dev, host, (size_t)n * sizeof(float));
    /* the copy reads host memory asynchronously: wait before freeing it */
    if (s == PW_OK) s = pw_stream_synchronize(e->stream);
    pw_host_free(host);
    if (s == PW_OK) s = pw_tensor_wrap(dev, PW_DEVICE_CUDA, PW_F32, nd, shape, out);
    return s;
}

pw_status pw_engine_cuda_setup(pw_engine *e) {
    const pw_model_info *in = pw_model_get_info(e->model);
    pw_engine_cuda *c = pw_host_calloc(1, sizeof *c);
    if (!c) return PW_ERR_OOM;
    e->cuda = c;
    PW_TRY(pw_pool_new(PW_DEVICE_CUDA, "engine persistent", &c->persistent));
    int64_t T = e->max_tokens, S = e->cfg.max_num_seqs;
    size_t tok_bytes = (size_t)T * sizeof(int32_t);
    size_t table_bytes = (size_t)(S * e->blocks_per_seq) * sizeof(int32_t);
    PW_TRY(device_alloc(e, tok_bytes, (void **)&c->ids));
    PW_TRY(device_alloc(e, tok_bytes, (void **)&c->positions));
    PW_TRY(device_alloc(e, tok_bytes, (void **)&c->slot_mapping));
    PW_TRY(device_alloc(e, tok_bytes, (void **)&c->token_seq));
    PW_TRY(device_alloc(e, table_bytes, (void **)&c->block_tables));
    PW_TRY(device_alloc(e, sizeof *c->meta, (void **)&c->meta));
    pw_attn_meta dm = e->meta;
    dm.positions = c->positions;
    dm.slot_mapping = c->slot_mapping;
    dm.token_seq = c->token_seq;
    dm.block_tables = c->block_tables;
    PW_TRY(upload(e, c->meta, &dm, sizeof dm));

    size_t layer_bytes = (size_t)e->num_blocks * (size_t)e->cfg.block_size *
                         (size_t)(in->n_kv_heads * in->head_dim) * sizeof(float);
    for (int64_t l = 0; l < in->n_layers; l++) {
        PW_TRY(device_alloc(e, layer_bytes, (void **)&e->k_cache[l]));
        PW_TRY(device_alloc(e, layer_bytes, (void **)&e->v_cache[l]));
        PW_TRY(pw_cuda_memset(e->stream, e->k_cache[l], 0, layer_bytes));
        PW_TRY(pw_cuda_memset(e->stream, e->v_cache[l], 0, layer_bytes));
    }
    size_t rope_bytes = (size_t)e->max_model_len * (size_t)in->head_dim * sizeof(float);
    float *rope = pw_host_alloc(rope_bytes);
    if (!rope) return PW_ERR_OOM;
    pw_k_rope_table(rope, e->max_model_len, in->head_dim, in->rope_theta);
    pw_status s = device_alloc(e, rope_bytes, (void **)&e->rope_table);
    if (s == PW_OK) s = upload(e, e->rope_table, rope, rope_bytes);
    if (s == PW_OK) s = pw_stream_synchronize(e->stream);
    pw_host_free(rope);
    PW_TRY(s);

    int np = e->n_params; /* e->params holds the host weights here */
    c->weights = pw_host_calloc((size_t)np, sizeof *c->weights);
    if (!c->weights) return PW_ERR_OOM;
    for (int i = 1; i < np; i++) {
        PW_TRY(upload_weight(e, e->params[i].as.tensor, &c->weights[i]));
        c->n_weights = i + 1;
    }
    c->host_logits = pw_host_alloc((size_t)T * (size_t)in->vocab * sizeof(float));
    if (!c->host_logits) return PW_ERR_OOM;

    e->block_tables_dirty = true;
    e->kernel_meta = c->meta;
    e->kernel_positions = c->positions;
    int64_t shape[1] = {T};
    return pw_tensor_wrap(c->ids, PW_DEVICE_CUDA, PW_I32, 1, shape, &e->ids_tensor);
}

void pw_engine_cuda_free(pw_engine *e) {
    pw_engine_cuda *c = e->cuda;
    if (!c) return;
    for (int i = 0; i < c->n_weights; i++) pw_tensor_release(c->weights[i]);
    pw_host_free(c->weights);
    pw_host_free(c->host_logits);
    pw_pool_free(c->persistent);
    pw_host_free(c);
    e->cuda = NULL;
}

pw_status pw_engine_cuda_stage_inputs(pw_engine *e, int64_t n_padded) {
    pw_engine_cuda *c = e->cuda;
    size_t tok = (size_t)n_padded * sizeof(int32_t);
    PW_TRY(upload(e, c->ids, e->input_ids, tok));
    PW_TRY(upload(e, c->positions, e->positions, tok));
    PW_TRY(upload(e, c->slot_mapping, e->slot_mapping, tok));
    PW_TRY(upload(e, c->token_seq, e->token_seq, tok));
    if (!e->block_tables_dirty) return PW_OK;
    e->block_tables_dirty = false;
    return upload(e, c->block_tables, e->block_tables,
                  (size_t)(e->cfg.max_num_seqs * e->blocks_per_seq) * sizeof(int32_t));
}

void pw_engine_cuda_params(pw_engine *e, pw_value *params, int nparams) {
    for (int i = 1; i < nparams && i < e->cuda->n_weights; i++)
        params[i] = pw_value_tensor(e->cuda->weights[i]);
}

pw_status pw_engine_cuda_logits(pw_engine *e, const pw_tensor *logits, int64_t lo, int64_t hi,
                                const float **host) {
    size_t row = (size_t)pw_model_get_info(e->model)->vocab;
    const float *src = (const float *)pw_tensor_data(logits) + (size_t)lo * row;
    PW_TRY(pw_cuda_copy_to_host(e->stream, e->cuda->host_logits + (size_t)lo * row, src,
                                (size_t)(hi - lo) * row * sizeof(float)));
    *host = e->cuda->host_logits;
    return PW_OK;
}

#else /* !PW_HAVE_CUDA */

pw_status pw_engine_cuda_setup(pw_engine *e) {
    (void)e;
    return pw_error(PW_ERR_UNSUPPORTED, "device cuda: %s", pw_cuda_unavailable_reason());
}
void pw_engine_cuda_free(pw_engine *e) { (void)e; }
pw_status pw_engine_cuda_stage_inputs(pw_engine *e, int64_t n_padded) {
    (void)e;
    (void)n_padded;
    return pw_error(PW_ERR_UNSUPPORTED, "device cuda: %s", pw_cuda_unavailable_reason());
}
void pw_engine_cuda_params(pw_engine *e, pw_value *params, int nparams) {
    (void)e;
    (void)params;
    (void)nparams;
}
pw_status pw_engine_cuda_logits(pw_engine *e, const pw_tensor *logits, int64_t lo, int64_t hi,
                                const float **host) {
    (void)e;
    (void)logits;
    (void)lo;
    (void)hi;
    (void)host;
    return pw_error(PW_ERR_UNSUPPORTED, "device cuda: %s", pw_cuda_unavailable_reason());
}

#endif
