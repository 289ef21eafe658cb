/* Writes the generated GGUF seeds of the fuzz corpus:
 *   seed_gen OUT_DIR
 * tiny_llama.gguf   a whole (very small) Llama model with its vocabulary
 * all_types.gguf    one kv of every metadata type, arrays, a few tensors
 * v2.gguf           the same as version 2
 * Regenerate with scripts/fuzz.sh --regen-seeds. */
#include "core/internal.h"
#include "model/gguf_writer.h"

#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "seed_gen: %s: %s\n", what, pw_last_error());
    return 1;
}

static pw_status add_all_types(pw_gguf_writer *w) {
    uint8_t u8 = 7;
    int8_t i8 = -7;
    uint16_t u16 = 700;
    int16_t i16 = -700;
    double f64 = 2.5;
    int64_t i64 = -1234567890123;
    uint8_t yes = 1;
    PW_TRY(pw_gguf_writer_add_string(w, "general.architecture", "llama"));
    PW_TRY(pw_gguf_writer_add_scalar(w, "t.u8", PW_GGUF_UINT8, &u8));
    PW_TRY(pw_gguf_writer_add_scalar(w, "t.i8", PW_GGUF_INT8, &i8));
    PW_TRY(pw_gguf_writer_add_scalar(w, "t.u16", PW_GGUF_UINT16, &u16));
    PW_TRY(pw_gguf_writer_add_scalar(w, "t.i16", PW_GGUF_INT16, &i16));
    PW_TRY(pw_gguf_writer_add_u32(w, "general.alignment", 32));
    PW_TRY(pw_gguf_writer_add_i32(w, "t.i32", -5));
    PW_TRY(pw_gguf_writer_add_f32(w, "t.f32", 0.25f));
    PW_TRY(pw_gguf_writer_add_scalar(w, "t.bool", PW_GGUF_BOOL, &yes));
    PW_TRY(pw_gguf_writer_add_u64(w, "t.u64", 1u << 20));
    PW_TRY(pw_gguf_writer_add_scalar(w, "t.i64", PW_GGUF_INT64, &i64));
    PW_TRY(pw_gguf_writer_add_scalar(w, "t.f64", PW_GGUF_FLOAT64, &f64));
    const int32_t ints[] = {1, -2, 3};
    const float floats[] = {0.5f, -1.5f};
    const char *const strings[] = {"a", "\u2581b", ""};
    PW_TRY(pw_gguf_writer_add_array(w, "t.ints", PW_GGUF_INT32, ints, 3));
    PW_TRY(pw_gguf_writer_add_array(w, "t.floats", PW_GGUF_FLOAT32, floats, 2));
    PW_TRY(pw_gguf_writer_add_string_array(w, "t.strings", strings, 3));
    float values[64];
    for (int i = 0; i < 64; i++) values[i] = (float)i / 8.0f - 4.0f;
    const int64_t dims2[2] = {32, 2};
    const int64_t dims1[1] = {5};
    PW_TRY(pw_gguf_writer_add_tensor_f32(w, "f32.weight", PW_F32, 1, dims1, values));
    PW_TRY(pw_gguf_writer_add_tensor_f32(w, "f16.weight", PW_F16, 2, dims2, values));
    PW_TRY(pw_gguf_writer_add_tensor_f32(w, "q8.weight", PW_Q8_0, 2, dims2, values));
    PW_TRY(pw_gguf_writer_add_tensor_f32(w, "q4.weight", PW_Q4_0, 2, dims2, values));
    return PW_OK;
}

static int write_types(const char *dir, const char *name, uint32_t version) {
    pw_gguf_writer *w;
    if (pw_gguf_writer_new(&w) != PW_OK) return fail("writer");
    pw_gguf_writer_set_version(w, version);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pw_status s = add_all_types(w);
    if (s == PW_OK) s = pw_gguf_writer_to_file(w, path);
    pw_gguf_writer_free(w);
    return s == PW_OK ? 0 : fail(path);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: seed_gen OUT_DIR\n");
        return 2;
    }
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.dim = 8;
    cfg.n_layers = 1;
    cfg.n_heads = 2;
    cfg.n_kv_heads = 1;
    cfg.ffn_dim = 16;
    cfg.vocab_size = PW_TINY_LLAMA_MIN_VOCAB;
    cfg.context_length = 32;
    cfg.weight_dtype = PW_F16;
    cfg.tied_embeddings = true;
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny_llama.gguf", argv[1]);
    if (pw_tiny_llama_write_file(&cfg, path) != PW_OK) return fail(path);
    if (write_types(argv[1], "all_types.gguf", 3)) return 1;
    if (write_types(argv[1], "v2.gguf", 2)) return 1;
    return 0;
}
