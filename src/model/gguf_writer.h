/* GGUF writer: builds a version 3 (or 2) file from metadata and tensors,
 * in memory or on disk. The tests use it to make small models and corrupt
 * variants without any external file; other engineers' tests use
 * pw_gguf_write_tiny_llama to run the whole pipeline on random weights.
 *
 * Layout choices: kvs and tensors are written in the order added; every
 * tensor's data starts at a multiple of general.alignment (32 unless a
 * uint32 general.alignment kv says otherwise) and the file ends right
 * after the last tensor's data, with no trailing padding, so every proper
 * prefix of a written file with tensors is a truncated file. */
#ifndef PW_MODEL_GGUF_WRITER_H
#define PW_MODEL_GGUF_WRITER_H

#include "model/gguf.h"

typedef struct pw_gguf_writer pw_gguf_writer;

pw_status pw_gguf_writer_new(pw_gguf_writer **out);
void pw_gguf_writer_free(pw_gguf_writer *w);
/* 3 by default; 2 has the same layout. Other values are written as given,
 * which the tests use to make unsupported-version files. */
void pw_gguf_writer_set_version(pw_gguf_writer *w, uint32_t version);

/* Scalars. value points at one element of the given type (bool: one byte). */
pw_status pw_gguf_writer_add_scalar(pw_gguf_writer *w, const char *key, pw_gguf_type type,
                                    const void *value);
pw_status pw_gguf_writer_add_u32(pw_gguf_writer *w, const char *key, uint32_t v);
pw_status pw_gguf_writer_add_i32(pw_gguf_writer *w, const char *key, int32_t v);
pw_status pw_gguf_writer_add_u64(pw_gguf_writer *w, const char *key, uint64_t v);
pw_status pw_gguf_writer_add_f32(pw_gguf_writer *w, const char *key, float v);
pw_status pw_gguf_writer_add_bool(pw_gguf_writer *w, const char *key, bool v);
pw_status pw_gguf_writer_add_string(pw_gguf_writer *w, const char *key, const char *v);
/* An array of n numeric/bool elements laid out contiguously at data. */
pw_status pw_gguf_writer_add_array(pw_gguf_writer *w, const char *key, pw_gguf_type elem_type,
                                   const void *data, uint64_t n);
pw_status pw_gguf_writer_add_string_array(pw_gguf_writer *w, const char *key,
                                          const char *const *strings, uint64_t n);

/* A tensor with dims in ggml order (dims[0] contiguous). data holds the
 * encoded bytes (pw_dtype_row_bytes of the element count) and is copied. */
pw_status pw_gguf_writer_add_tensor(pw_gguf_writer *w, const char *name, pw_dtype dtype,
                                    int n_dims, const int64_t *dims, const void *data);
/* The same from f32 values, encoded (quantized) to dtype on the way in. */
pw_status pw_gguf_writer_add_tensor_f32(pw_gguf_writer *w, const char *name, pw_dtype dtype,
                                        int n_dims, const int64_t *dims, const float *values);

/* A tensor whose bytes are produced when the file is written: fill is
 * called once, with a buffer of pw_dtype_row_bytes(dtype, elements) bytes
 * to fill, in the order tensors were added. Lets a multi-gigabyte model be
 * written while only one tensor is in memory at a time. */
typedef pw_status (*pw_gguf_tensor_fill)(void *user, const char *name, pw_dtype dtype,
                                         int64_t n_elements, void *dst, uint64_t nbytes);
pw_status pw_gguf_writer_add_tensor_filled(pw_gguf_writer *w, const char *name, pw_dtype dtype,
                                           int n_dims, const int64_t *dims,
                                           pw_gguf_tensor_fill fill, void *user);

/* Copies one key-value pair of an open file (scalar, string or array of
 * any element type), e.g. a tokenizer taken from another model. */
pw_status pw_gguf_writer_add_kv_copy(pw_gguf_writer *w, const pw_gguf_kv *kv);

/* The whole file in a new pw_host_alloc buffer (free with pw_host_free). */
pw_status pw_gguf_writer_to_memory(const pw_gguf_writer *w, uint8_t **out, size_t *len);
pw_status pw_gguf_writer_to_file(const pw_gguf_writer *w, const char *path);
/* Streams the file into fd (opened for writing by the caller; path names
 * it in messages), one tensor in memory at a time, flushed to disk. */
pw_status pw_gguf_writer_to_fd(const pw_gguf_writer *w, int fd, const char *path);

/* ---- tiny Llama models ---------------------------------------------------- */

typedef struct pw_tiny_llama_config {
    int dim;            /* embedding length */
    int n_layers;
    int n_heads;
    int n_kv_heads;
    int ffn_dim;
    int vocab_size;     /* >= PW_TINY_LLAMA_MIN_VOCAB */
    int context_length;
    float rms_eps;
    float rope_theta;
    pw_dtype weight_dtype; /* of the 2-D projection weights; norms are always f32 */
    bool tied_embeddings;  /* omit output.weight, as stories260K does */
    uint64_t seed;
    /* Optional: the type of each 2-D weight by its GGUF name (e.g. Q6_K for
     * "output.weight" and Q5_0 for "blk.0.attn_k.weight", as a Q4_K_M file
     * mixes them); NULL gives weight_dtype to all. */
    pw_dtype (*tensor_dtype)(const char *name, pw_dtype weight_dtype, void *user);
    void *tensor_dtype_user;
    /* Quantize every weight to its type, then store the dequantized values
     * as f32: the f32 twin of the quantized model, with the same random
     * draws and metadata. */
    bool store_dequantized;
    /* tokenizer.ggml.add_bos_token (default true) and add_eos_token
     * (default false) are written as !no_add_bos and add_eos. */
    bool no_add_bos, add_eos;
} pw_tiny_llama_config;

/* Three specials (<unk>, <s>, </s>), 256 byte tokens, 52 merged pieces,
 * "▁" and the 94 printable ASCII characters; the rest are <unusedN>. */
#define PW_TINY_LLAMA_MIN_VOCAB 406

/* dim 64, 2 layers, 4 heads, 2 KV heads, ffn 96, vocab 512, context 128,
 * f32 weights, untied, seed 1. */
pw_tiny_llama_config pw_tiny_llama_default_config(void);

/* Adds the llama.* metadata, a SentencePiece vocabulary (tokenizer.ggml.*:
 * model "llama", tokens, scores, token_type, bos 1, eos 2, unk 0) and
 * random weights named as llama.cpp names them (token_embd.weight,
 * blk.N.attn_q.weight, ...) to a writer. */
pw_status pw_tiny_llama_add(pw_gguf_writer *w, const pw_tiny_llama_config *cfg);
/* Convenience: a whole tiny model file. */
pw_status pw_tiny_llama_write_file(const pw_tiny_llama_config *cfg, const char *path);
pw_status pw_tiny_llama_write_memory(const pw_tiny_llama_config *cfg, uint8_t **out,
                                     size_t *len);

#endif
