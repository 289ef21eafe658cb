/* Binds the engine's persistent state (stream, pools, KV cache, attention
 * metadata, rope table) into the op environment the plan's ops run in. */
#include "model/engine_internal.h"

pw_status pw_engine_init_op_env(pw_engine *e) {
    const pw_model_info *in = pw_model_get_info(e->model);
    pw_op_env *env = &e->env;
    env->stream = e->stream;
    env->pool = e->act_pool;
    env->attn_meta = e->run.dev.meta;
    env->k_cache = e->run.k_cache;
    env->v_cache = e->run.v_cache;
    env->n_layers = (int)in->n_layers;
    pw_model_local local = pw_model_local_shape(e->model); /* a tensor-parallel rank's heads */
    env->n_heads = (int)local.n_heads;
    env->n_kv_heads = (int)local.n_kv_heads;
    env->head_dim = (int)in->head_dim;
    env->num_blocks = e->kv.num_blocks;
    env->max_seqs = e->cfg.max_num_seqs;
    env->max_tokens = e->cfg.max_num_batched_tokens;
    env->rope_table = e->weights.rope_table;
    env->rope_max_pos = e->cfg.max_model_len;
    env->rms_eps = in->rms_eps;
    env->positions = e->run.dev.positions;
    /* Per-layer kinds (Gemma 3): model constants, read at launch. */
    env->layer_rope_table = e->weights.layer_rope;
    env->layer_window = e->model->layer_window;
    env->attn_scale = e->model->attn_scale;
    return PW_OK;
}
