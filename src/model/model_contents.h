/* What each architecture's loader understands, in one table
 * (model_contents.c): the tensors it uses and the metadata keys under the
 * architecture's prefix ("llama.", "gemma3.") it reads or may ignore.
 * Anything else in a file would change the computation in a way the
 * engine does not implement (rope_freqs.weight, a rope scaling type,
 * attention biases, per-head q/k norms on Llama, ...), so loading refuses
 * it with PW_ERR_FORMAT naming the tensor or key, instead of running the
 * model silently wrong. llama.cpp also refuses files with tensors its
 * architecture does not use.
 *
 * A new architecture, or a feature of one (llama3 rope scaling, q/k/v
 * biases), is added by extending its rows in model_contents.c. */
#ifndef PW_MODEL_MODEL_CONTENTS_H
#define PW_MODEL_MODEL_CONTENTS_H

#include "model/gguf.h"

/* Checks every tensor and every "<arch>." key of g against arch's table.
 * n_layers bounds the blk.N indices; head_dim is what keys that restate it
 * (rope.dimension_count, attention.key_length) must equal. An arch with no
 * table is PW_ERR_UNSUPPORTED. */
pw_status pw_model_check_contents(const pw_gguf *g, const char *arch, int64_t n_layers,
                                  int64_t head_dim);

#endif
