/* Chat templates: where a model's template comes from. */
#ifndef PW_MODEL_CHAT_H
#define PW_MODEL_CHAT_H

#include "model/gguf.h"

/* The Jinja source of the file's chat template: tokenizer.chat_template, or
 * Gemma 3's for a gemma3 file without one. PW_ERR_NOT_FOUND otherwise.
 * *src stays valid while g (or the program) lives. */
pw_status pw_chat_template_source(const pw_gguf *g, const char **src);

#endif
