/* Phi-3 (general.architecture = phi3), following llama.cpp's phi3 graph:
 * the Llama layer with NeoX rope (pair i is (i, i + head_dim/2)) and fused
 * weights, which are loaded as views of their parts (no copy when they stay
 * in the mapping):
 *   attn_qkv.weight [dim, q + 2 kv]  rows q, then k, then v (or separate
 *                                     attn_q / attn_k / attn_v, which
 *                                     llama.cpp accepts too);
 *   ffn_up.weight   [dim, 2 ffn]     rows gate, then up (llama.cpp's swiglu
 *                                     takes silu of the first half).
 * Long-context Phi-3 files carry rope_factors_long / rope_factors_short
 * (longrope), which pick per-position frequency factors and an attention
 * factor: not implemented, refused by name. phi3.attention.sliding_window
 * is read and not used, as llama.cpp does (it disables Phi-3's window). */
#include "model/llama.h"

#include <inttypes.h>
#include <stdio.h>

static bool has_tensor(const pw_model *m, const char *name) {
    const pw_gguf_tensor *t;
    if (pw_gguf_find_tensor(m->gguf, name, &t) == PW_OK) return true;
    pw_clear_error();
    return false;
}

pw_status pw_phi3_load_layers(pw_model *m, bool keep) {
    const pw_model_info *in = &m->info;
    int64_t q_dim = in->n_heads * in->head_dim, kv_dim = in->n_kv_heads * in->head_dim;
    int64_t ffn = in->ffn_dim;
    static const char *const longrope[] = {"rope_factors_long.weight", "rope_factors_short.weight",
                                           "blk.0.rope_factors_long.weight",
                                           "blk.0.rope_factors_short.weight"};
    for (size_t i = 0; i < PW_ARRAY_LEN(longrope); i++)
        if (has_tensor(m, longrope[i]))
            return pw_error(PW_ERR_FORMAT, "phi3: tensor '%s' asks for longrope scaling, which "
                            "piecewise does not implement", longrope[i]);
    char name[96];
    for (int64_t l = 0; l < in->n_layers; l++) {
        pw_llama_layer *L = &m->layers[l];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%" PRId64 ".%s", l, suffix), name)
        PW_TRY(pw_model_load_weight(m, NAME("attn_norm.weight"), in->dim, 0, keep, &L->attn_norm));
        if (has_tensor(m, NAME("attn_qkv.weight"))) {
            int64_t rows = q_dim + 2 * kv_dim;
            PW_TRY(pw_model_load_weight_rows(m, name, in->dim, rows, 0, q_dim, keep, &L->wq));
            PW_TRY(pw_model_load_weight_rows(m, name, in->dim, rows, q_dim, kv_dim, keep, &L->wk));
            PW_TRY(pw_model_load_weight_rows(m, name, in->dim, rows, q_dim + kv_dim, kv_dim, keep,
                                             &L->wv));
        } else {
            PW_TRY(pw_model_load_weight(m, NAME("attn_q.weight"), in->dim, q_dim, keep, &L->wq));
            PW_TRY(pw_model_load_weight(m, NAME("attn_k.weight"), in->dim, kv_dim, keep, &L->wk));
            PW_TRY(pw_model_load_weight(m, NAME("attn_v.weight"), in->dim, kv_dim, keep, &L->wv));
        }
        PW_TRY(pw_model_load_weight(m, NAME("attn_output.weight"), q_dim, in->dim, keep, &L->wo));
        PW_TRY(pw_model_load_weight(m, NAME("ffn_norm.weight"), in->dim, 0, keep, &L->ffn_norm));
        NAME("ffn_up.weight");
        PW_TRY(pw_model_load_weight_rows(m, name, in->dim, 2 * ffn, 0, ffn, keep, &L->w_gate));
        PW_TRY(pw_model_load_weight_rows(m, name, in->dim, 2 * ffn, ffn, ffn, keep, &L->w_up));
        PW_TRY(pw_model_load_weight(m, NAME("ffn_down.weight"), ffn, in->dim, keep, &L->w_down));
#undef NAME
    }
    return PW_OK;
}
