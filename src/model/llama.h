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
} pw_llama_layer;

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
};

/* Number of forward parameters: input_ids plus every weight. */
int pw_model_num_params(const pw_model *m);
/* Fills params (borrowed values) in the graph's placeholder order. */
int pw_model_params(const pw_model *m, pw_value *params, pw_tensor *input_ids);

#endif
