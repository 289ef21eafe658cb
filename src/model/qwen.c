/* Qwen 2 / 2.5 (general.architecture = qwen2) and Qwen 3 (qwen3): the Llama
 * layer with two differences each, following llama.cpp's qwen2 and qwen3
 * graphs:
 *   qwen2  q, k and v have biases (attn_q.bias, attn_k.bias, attn_v.bias),
 *          added after the projections (op qkv_bias_rope_neox);
 *   qwen3  q and k are RMS-normed per head (attn_q_norm, attn_k_norm, the
 *          epsilon of the layer norms) before rope, and a head may be wider
 *          than embedding_length / head_count (attention.key_length): op
 *          qkv_norm_rope, as Gemma 3's.
 * Both rotate NeoX style (pair i is (i, i + head_dim/2)), scale attention by
 * 1/sqrt(head_dim) and use silu(gate) * up; the LM head is token_embd when
 * the file has no output.weight. Hyperparameters: family_hparams.c. */
#include "model/llama.h"


pw_status pw_qwen_load_layers(pw_model *m, bool keep) {
    const pw_model_info *in = &m->info;
    bool qwen3 = m->arch == PW_ARCH_QWEN3;
    int64_t q_dim = in->n_heads * in->head_dim, kv_dim = in->n_kv_heads * in->head_dim;
    for (int64_t l = 0; l < in->n_layers; l++) {
        pw_llama_layer *L = &m->layers[l];
        const pw_layer_weight want[] = {
            {"attn_norm.weight", in->dim, 0, &L->attn_norm},
            {"attn_q.weight", in->dim, q_dim, &L->wq},
            {"attn_k.weight", in->dim, kv_dim, &L->wk},
            {"attn_v.weight", in->dim, kv_dim, &L->wv},
            {"attn_output.weight", q_dim, in->dim, &L->wo},
            {"ffn_norm.weight", in->dim, 0, &L->ffn_norm},
            {"ffn_gate.weight", in->dim, in->ffn_dim, &L->w_gate},
            {"ffn_up.weight", in->dim, in->ffn_dim, &L->w_up},
            {"ffn_down.weight", in->ffn_dim, in->dim, &L->w_down},
            /* the family's own */
            {qwen3 ? "attn_q_norm.weight" : "attn_q.bias", qwen3 ? in->head_dim : q_dim, 0,
             qwen3 ? &L->q_norm : &L->bq},
            {qwen3 ? "attn_k_norm.weight" : "attn_k.bias", qwen3 ? in->head_dim : kv_dim, 0,
             qwen3 ? &L->k_norm : &L->bk},
            {"attn_v.bias", kv_dim, 0, &L->bv},
        };
        size_t n = qwen3 ? PW_ARRAY_LEN(want) - 1 : PW_ARRAY_LEN(want);
        PW_TRY(pw_model_load_layer_weights(m, l, want, n, keep));
    }
    return PW_OK;
}
