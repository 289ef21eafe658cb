/* Synthetic GGUFs of the model families piecewise runs: a family's real
 * vocabulary (every tokenizer.* key copied from a vocabulary-only GGUF, such
 * as llama.cpp's models/ggml-vocab-*.gguf) with the family's architecture
 * at a small shape and deterministic random weights, named and laid out as
 * llama.cpp's converter writes them, so llama.cpp and piecewise run the same
 * file. The golden tests make them on demand into their build folder; they
 * are never committed (docs/models.md). */
#ifndef PW_MODEL_SYNTH_FAMILY_H
#define PW_MODEL_SYNTH_FAMILY_H

#include "internal.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

typedef struct pw_synth_family_config {
    const char *arch;   /* "llama", "qwen2", "qwen3" or "phi3" */
    int dim;            /* embedding length */
    int n_layers;
    int n_heads;
    int n_kv_heads;
    int head_dim;       /* 0: dim / n_heads; qwen3 may set another (attention.key_length) */
    int ffn_dim;
    int context_length;
    float rope_theta;
    float rms_eps;
    bool llama3_rope;   /* llama: rope_freqs.weight (Llama 3.x's rope scaling), factors
                           rising from 1 to 8 over the pairs (synth_family.c says why) */
    pw_dtype weight_dtype; /* of the 2-D weights; norms, biases and rope_freqs are f32 */
    bool tied_embeddings;  /* no output.weight: the LM head is token_embd */
    uint64_t seed;
} pw_synth_family_config;

/* The shapes the golden tests use for a family name: "llama3" (llama,
 * rope_freqs), "qwen2", "qwen3", "phi3" and "mistral" (llama, as for a
 * SentencePiece vocabulary): dim 256, 4 layers, F16 weights (which piecewise
 * computes with in f32, so its logits are within float32 rounding of the
 * float64 forward's and a comparison runs until a true near-tie), the
 * family's rope base and norm epsilon, embeddings tied for Qwen as in its
 * small models. PW_ERR_INVALID_ARG for another name. */
pw_status pw_synth_family_preset(const char *family, pw_synth_family_config *out);

/* Gives cfg another size: the dim, layers, heads, KV heads and FFN width of
 * shape (synth.h, e.g. "1b", Llama-3.2-1B's), and its 2-D weights the type
 * dtype (PW_F16 or a quant type), for measuring a family's speed at a real
 * size. What makes the family stays: Qwen 3's q is twice dim wide (as in
 * Qwen3-0.6B, 16 heads of 128 at dim 1024), Phi-3 has as many KV heads as
 * heads, and the embedding tying, rope and norm constants are the
 * preset's. shape NULL keeps the size. */
struct pw_synth_shape;
void pw_synth_family_resize(pw_synth_family_config *cfg, const struct pw_synth_shape *shape,
                            pw_dtype dtype);

/* Writes the model to out_path: metadata for cfg->arch, the tokenizer.* keys
 * of vocab_path (a GGUF; its tensors, if any, are not copied) and random
 * weights. */
pw_status pw_synth_family_write(const pw_synth_family_config *cfg, const char *vocab_path,
                                const char *out_path);

/* Adds a copy of one metadata key (as read from another file) to a writer:
 * integers as u32 (scalars) or i32 (arrays), floats as f32, strings,
 * bools and string arrays as they are. */
pw_status pw_synth_copy_kv(pw_gguf_writer *w, const pw_gguf_kv *kv);

#endif
