/* Writes a tiny random Llama GGUF (the writer's default configuration) for
 * the serve tests to use where no model file is available.
 * Usage: pw_serve_tiny_model OUT.gguf */
#include "model/gguf_writer.h"

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.gguf\n", argv[0]);
        return 2;
    }
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.context_length = 2048; /* long enough that a request outlives a client that leaves */
    if (pw_tiny_llama_write_file(&cfg, argv[1]) != PW_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], pw_last_error());
        return 1;
    }
    return 0;
}
