/* The model's internals, shared by the loader, the graph builder and the
 * engine. */
#ifndef PW_MODEL_LLAMA_H
#define PW_MODEL_LLAMA_H

#include "internal.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

#define PW_LLAMA_MAX_LAYERS 256

typedef struct pw_llama_layer {
    pw_tensor *attn_norm; /* (dim) */
    pw_tensor *wq;        /* (n_heads * head_dim, dim) */
    pw_tensor *wk;        /* (n_kv_heads * head_dim, dim) */
    pw_tensor *wv;        /* (n_kv_heads * head_dim, dim) */
    pw_tensor *wo;        /* (dim, n_heads * head_dim) */
    pw_tensor *ffn_norm;  /* (dim) */
    pw_tensor *w_gate;    /* (ffn_dim, dim) */
    pw_tensor *w_up;      /* (ffn_dim, dim) */
    pw_tensor *w_down;    /* (dim, ffn_dim) */
    /* Gemma 3 only (NULL for Llama) */
    pw_tensor *q_norm, *k_norm;  /* (head_dim): RMS norm of each query / key head */
    pw_tensor *post_attn_norm;   /* (dim): on the attention output before the residual add */
    pw_tensor *post_ffn_norm;    /* (dim): on the feed-forward output before the residual add */
    /* Qwen 2 only: biases of q, k and v */
    pw_tensor *bq, *bk, *bv;
} pw_llama_layer;

typedef enum pw_model_arch {
    PW_ARCH_LLAMA,
    PW_ARCH_GEMMA3,
    PW_ARCH_QWEN2, /* llama with q/k/v biases and NeoX rope (qwen.c) */
    PW_ARCH_QWEN3, /* llama with per-head q/k norm and NeoX rope (qwen.c) */
    PW_ARCH_PHI3,  /* llama with fused qkv and gate/up weights and NeoX rope (phi3.c) */
} pw_model_arch;

struct pw_model {
    pw_model_info info;
    pw_gguf *gguf;
    pw_tokenizer *tokenizer;
    pw_tensor *tok_embd;    /* (vocab, dim) */
    pw_llama_layer *layers; /* (n_layers) */
    pw_tensor *output_norm; /* (dim) */
    pw_tensor *output;      /* (vocab, dim); token_embd when tied */
    float **owned;          /* dequantized weight buffers */
    int n_owned;
    int dtype_counts[PW_DTYPE_COUNT_];

    pw_model_arch arch;
    /* Gemma 3 (gemma3.c); Llama leaves them 0 / NULL. */
    float rope_theta_local; /* rope base of the sliding-window layers */
    int32_t *layer_window;  /* [n_layers] sliding window of each layer, 0 = global */
    float attn_scale;       /* attention score scale; 0: 1/sqrt(head_dim) */
    float embd_scale;       /* embeddings times this (sqrt(dim)); 0: none */
    float logit_softcap;    /* logits = c tanh(logits / c) when > 0 */
    /* Rope scaling of the Llama-shaped families (family_hparams.c). */
    pw_tensor *rope_freqs;  /* [head_dim/2] frequency divisors (rope_freqs.weight); NULL: none */
    const float *rope_freq_factors; /* its data (host f32), or NULL */
    double rope_freq_scale; /* positions times this (linear scaling); 1: none */
    /* The fixed summation order and this process's share (model_tp.c).
     * tp_size 0: the unsplit model (architectures without tensor
     * parallelism). Otherwise o's K is tp_o_shards shards of whole query
     * heads and down's K tp_ffn_shards shards, model constants summed in
     * shard order at every degree, one process included; this rank holds
     * query heads [tp_h0, tp_h1), KV heads [tp_kv0, tp_kv1) (or, with
     * tp_kv_per_head, one copy of its KV head per query head), feed-forward
     * shards [tp_f0, tp_f1) and vocabulary rows [tp_v0, tp_v1). */
    int tp_size, tp_rank;
    int64_t tp_o_shards, tp_o_unit, tp_h0, tp_h1, tp_kv0, tp_kv1;
    bool tp_kv_per_head;
    int64_t tp_ffn_shards, tp_f0, tp_f1, tp_v0, tp_v1;
};

/* The heads and feed-forward width this process computes: all of them,
 * or a tensor-parallel rank's share (model_tp.c). */
typedef struct pw_model_local {
    int64_t n_heads, n_kv_heads, ffn_dim;
} pw_model_local;
pw_model_local pw_model_local_shape(const pw_model *m);

/* The number of column shards op matmul_shards reads w in when w is o's
 * or down's whole weight, as one process holds them in place (model_tp.c);
 * 0 for any other tensor (a rank's stacked copies included). */
int64_t pw_model_weight_col_shards(const pw_model *m, const pw_tensor *w);

/* model_tp.c: true for the architectures that run in the fixed shard
 * order (Llama, Gemma 3). */
bool pw_model_tp_supported(pw_model_arch arch);
/* Chooses the model's shard counts, checks that it splits into tp_size
 * ranks and sets m's tp fields (before the weights are loaded). */
pw_status pw_model_tp_plan(pw_model *m, int tp_size, int tp_rank);
/* Loads this rank's layers (the split ones sliced) of a planned model. */
pw_status pw_model_tp_load_layers(pw_model *m, bool keep_quantized);
typedef struct ir_builder ir_builder; /* model/model_ir.h */
/* A row-parallel product (o, down) in the IR: the shards' partial products
 * (matmul_shards) and the all-reduce that sums them in shard order. */
int pw_model_row_parallel(ir_builder *b, const pw_model *m, const char *name, int64_t l, int x,
                          int w, bool ffn);
/* The embedding lookup and the LM head (softcap 0: none): the plain ops on
 * one rank; above one, this rank's vocabulary rows and a gather
 * (embedding_vocab, lm_head_vocab). */
int pw_model_embed(ir_builder *b, const pw_model *m, int ids, int table);
int pw_model_logits(ir_builder *b, const pw_model *m, int x, int head, float softcap);

/* What llama.c shares with the other architectures' builders. */
/* True unless PW_DEQUANTIZE=1. */
bool pw_model_keep_quantized_weights(void);
/* Finds tensor `name`, checks its shape [d0] (d1 = 0) or [d0, d1] (ggml
 * order) and wraps it (quantized blocks where the ops take them, else f32). */
pw_status pw_model_load_weight(pw_model *m, const char *name, int64_t d0, int64_t d1,
                               bool keep_quantized, pw_tensor **out);
/* One weight of a layer: the name after "blk.<l>.", its shape (d1 = 0 for
 * 1-D) and where it goes. */
typedef struct {
    const char *suffix;
    int64_t d0, d1;
    pw_tensor **dst;
} pw_layer_weight;
/* Loads want[0..n) of layer l with pw_model_load_weight. */
pw_status pw_model_load_layer_weights(pw_model *m, int64_t l, const pw_layer_weight *want,
                                      size_t n, bool keep_quantized);
/* Sets info.vocab, tok_embd, output_norm and output (tied when absent) and
 * info.file_dtype; the layers are loaded by the caller in between. */
pw_status pw_model_load_embeddings(pw_model *m, bool keep_quantized);
pw_status pw_model_load_head(pw_model *m, bool keep_quantized);

/* Moves pw_host_alloc'ed ids into a new malloc'ed array for the public
 * API (host_ids is freed either way). */
pw_status pw_model_ids_to_caller(int32_t *host_ids, int64_t n, int32_t **ids);

/* Like pw_model_load_weight for rows [row0, row0 + rows) of a 2-D tensor
 * [d0, d1] (ggml order): a view of one part of a fused weight (Phi-3's
 * attn_qkv and ffn_up), kept quantized or dequantized as a whole weight is. */
pw_status pw_model_load_weight_rows(pw_model *m, const char *name, int64_t d0, int64_t d1,
                                    int64_t row0, int64_t rows, bool keep_quantized,
                                    pw_tensor **out);

/* The Llama-shaped families (family_hparams.c): every "<arch>." key checked,
 * rope scaling read (none or linear) or refused. info.arch and m->arch set. */
pw_status pw_model_read_llama_like_hparams(pw_model *m);
/* rope_freqs.weight into m->rope_freqs when the file has it. */
pw_status pw_model_load_rope_freqs(pw_model *m);
/* Qwen 2 and Qwen 3 (qwen.c), Phi-3 (phi3.c): their layers' weights. */
pw_status pw_qwen_load_layers(pw_model *m, bool keep_quantized);
pw_status pw_phi3_load_layers(pw_model *m, bool keep_quantized);

/* Gemma 3 (gemma3.c). */
pw_status pw_gemma3_read_hparams(pw_model *m);
/* Weights per layer in pw_model_params order. */
#define PW_GEMMA3_WEIGHTS_PER_LAYER 13
/* Replaces a whole 2-D weight *t by a copy in the layout the CPU kernels
 * prefer for its type (Q4_0 rows interleaved in groups of 16; the same
 * bits), releasing the file's pages behind it; a no-op for other types,
 * under PW_INTERLEAVE=0, or without memory for the copy. */
pw_status pw_model_prefer_layout(pw_model *m, pw_tensor **t);
/* The layout pw_model_prefer_layout gives a weight of `from` with `rows`
 * rows of `cols` (from itself under PW_INTERLEAVE=0). */
pw_dtype pw_model_preferred_dtype(pw_dtype from, int64_t rows, int64_t cols);
void pw_gemma3_layer_weights(const pw_llama_layer *L, pw_tensor **out);
pw_status pw_gemma3_build_ir(const pw_model *m, pw_ir **out);

/* Number of forward parameters: input_ids plus every weight. */
int pw_model_num_params(const pw_model *m);
/* Fills params (borrowed values) in the graph's placeholder order. */
int pw_model_params(const pw_model *m, pw_value *params, pw_tensor *input_ids);

#endif
