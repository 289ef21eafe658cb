/* Synthetic models at the sizes people run: a GGUF file with a real
 * model's shape (Llama-3.2-1B, Llama-3.2-3B, Llama-3.1-8B, ...), random
 * weights in a chosen quant type, and the tokenizer of another GGUF file,
 * so piecewise and llama.cpp can be measured on the same multi-gigabyte
 * file without downloading one. The weights are random blocks, so the
 * text is noise; only speed, memory and agreement between engines mean
 * anything.
 *
 * Each 2-D weight is filled block by block from a small pool of blocks
 * quantized (by pw_quantize) from uniform random values at that tensor's
 * scale, picked at random: every block is a real encoding of its type,
 * and an 8B file is written in about the time its bytes take to reach
 * the disk. Only one tensor is in memory at a time. */
#ifndef PW_MODEL_SYNTH_H
#define PW_MODEL_SYNTH_H

#include "piecewise.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct pw_synth_shape {
    const char *name;    /* as given on the command line: "1b", "8b", ... */
    const char *model;   /* the model whose shape it is: "Llama-3.2-1B" */
    const char *arch;    /* general.architecture; "llama" for every shape today */
    int dim, n_layers, n_heads, n_kv_heads, ffn_dim, context_length;
    float rope_theta, rms_eps;
    bool tied_embeddings; /* no output.weight: the embedding is the LM head */
} pw_synth_shape;

int pw_synth_shape_count(void);
const pw_synth_shape *pw_synth_shape_at(int i);
/* NULL if no shape has that name (case-insensitive). */
const pw_synth_shape *pw_synth_shape_find(const char *name);

typedef struct pw_synth_type {
    const char *name;   /* "q4_0", ..., "q4_k_m" */
    pw_dtype dtype;     /* every 2-D weight's type, or the mix's main type */
    bool q4_k_m;        /* llama.cpp's Q4_K_M choice: Q6_K for the LM head and
                         * for attn_v/ffn_down in some layers, Q4_K elsewhere */
    uint32_t file_type; /* general.file_type, as llama.cpp numbers them */
} pw_synth_type;

int pw_synth_type_count(void);
const pw_synth_type *pw_synth_type_at(int i);
const pw_synth_type *pw_synth_type_find(const char *name);

/* Called after each tensor is written: bytes of tensor data done so far
 * and in all. */
typedef void (*pw_synth_progress)(void *user, const char *tensor, uint64_t done,
                                  uint64_t total);

typedef struct pw_synth_config {
    const pw_synth_shape *shape;
    const pw_synth_type *type;
    const char *vocab_path; /* a GGUF file whose tokenizer.* keys are copied */
    uint64_t seed;
    pw_synth_progress progress; /* may be NULL */
    void *progress_user;
} pw_synth_config;

/* Writes the model to path, which must not exist yet: the data goes to
 * "path.partial-PID" (created new, never through a link) and is linked
 * to path once complete and flushed (never replacing anything that
 * appeared there meanwhile), so an interrupted run never leaves a
 * truncated model at path. */
pw_status pw_synth_write(const pw_synth_config *c, const char *path);

#endif
