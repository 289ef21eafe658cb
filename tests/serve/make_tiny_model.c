/* Writes a tiny random Llama GGUF (the writer's default configuration) for
 * the serve tests to use where no model file is available, optionally with
 * a chat template (tokenizer.chat_template).
 * Usage: pw_serve_tiny_model OUT.gguf [CHAT_TEMPLATE] */
#include "model/gguf_writer.h"

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s OUT.gguf [CHAT_TEMPLATE]\n", argv[0]);
        return 2;
    }
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.context_length = 2048; /* long enough that a request outlives a client that leaves */
    pw_gguf_writer *w = NULL;
    pw_status s = pw_gguf_writer_new(&w);
    if (s == PW_OK) s = pw_tiny_llama_add(w, &cfg);
    if (s == PW_OK && argc == 3) s = pw_gguf_writer_add_string(w, "tokenizer.chat_template", argv[2]);
    if (s == PW_OK) s = pw_gguf_writer_to_file(w, argv[1]);
    pw_gguf_writer_free(w);
    if (s != PW_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], pw_last_error());
        return 1;
    }
    return 0;
}
