/* Gemma 3 files with missing or impossible metadata fail to load with
 * PW_ERR_FORMAT (or UNSUPPORTED) and a message naming the key and the
 * file, leaving nothing behind. The files are written with the GGUF
 * writer: the metadata of Gemma 3 270M, one key removed or changed. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"
#include "model/gguf_writer.h"

#include <unistd.h>

static char path[] = "/tmp/pw_test_gemma3_XXXXXX";

typedef struct variant {
    const char *drop;      /* key left out, or NULL */
    const char *key;       /* key given `value` instead, or NULL */
    uint32_t value;
    float fvalue;          /* for the f32 keys */
} variant;

static const char *const u32_keys[] = {
    "gemma3.context_length",          "gemma3.embedding_length",
    "gemma3.block_count",             "gemma3.feed_forward_length",
    "gemma3.attention.head_count",    "gemma3.attention.head_count_kv",
    "gemma3.attention.key_length",    "gemma3.attention.value_length",
    "gemma3.attention.sliding_window"};
static const uint32_t u32_values[] = {32768, 640, 18, 2048, 4, 1, 256, 256, 512};

static void write_variant(variant v) {
    pw_gguf_writer *w;
    CHECK_OK(pw_gguf_writer_new(&w));
    CHECK_OK(pw_gguf_writer_add_string(w, "general.architecture", "gemma3"));
    for (size_t i = 0; i < PW_ARRAY_LEN(u32_keys); i++) {
        if (v.drop && strcmp(v.drop, u32_keys[i]) == 0) continue;
        uint32_t x = v.key && strcmp(v.key, u32_keys[i]) == 0 ? v.value : u32_values[i];
        CHECK_OK(pw_gguf_writer_add_u32(w, u32_keys[i], x));
    }
    const char *f32_keys[] = {"gemma3.attention.layer_norm_rms_epsilon", "gemma3.rope.freq_base"};
    const float f32_values[] = {1e-6f, 1e6f};
    for (size_t i = 0; i < PW_ARRAY_LEN(f32_keys); i++) {
        if (v.drop && strcmp(v.drop, f32_keys[i]) == 0) continue;
        float x = v.key && strcmp(v.key, f32_keys[i]) == 0 ? v.fvalue : f32_values[i];
        CHECK_OK(pw_gguf_writer_add_f32(w, f32_keys[i], x));
    }
    if (v.key && strcmp(v.key, "gemma3.attention.sliding_window_pattern") == 0)
        CHECK_OK(pw_gguf_writer_add_u32(w, v.key, v.value));
    if (v.key && strcmp(v.key, "gemma3.final_logit_softcapping") == 0)
        CHECK_OK(pw_gguf_writer_add_f32(w, v.key, v.fvalue));
    CHECK_OK(pw_gguf_writer_to_file(w, path));
    pw_gguf_writer_free(w);
}

static void expect(variant v, pw_status code, const char *needle) {
    write_variant(v);
    pw_model *m = (pw_model *)&m;
    pw_status s = pw_model_load(path, &m);
    CHECK_EQ_INT(s, code);
    CHECK(m == NULL);
    if (!strstr(pw_last_error(), needle) || !strstr(pw_last_error(), path))
        fprintf(stderr, "message '%s' lacks '%s' or the path\n", pw_last_error(), needle);
    CHECK(strstr(pw_last_error(), needle) != NULL);
    CHECK(strstr(pw_last_error(), path) != NULL);
}

int main(void) {
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return pw_test_finish("model_gemma3_format");
    close(fd);
    /* every required key, missing */
    const char *required[] = {"gemma3.block_count", "gemma3.embedding_length",
                              "gemma3.feed_forward_length", "gemma3.attention.head_count",
                              "gemma3.context_length", "gemma3.attention.sliding_window",
                              "gemma3.attention.layer_norm_rms_epsilon"};
    for (size_t i = 0; i < PW_ARRAY_LEN(required); i++) {
        char needle[128];
        snprintf(needle, sizeof needle, "gemma3: missing hyperparameter %s", required[i]);
        expect((variant){.drop = required[i]}, PW_ERR_FORMAT, needle);
    }
    /* impossible values */
    expect((variant){.key = "gemma3.attention.head_count_kv", .value = 3}, PW_ERR_FORMAT,
           "head_count_kv (3) must divide attention.head_count (4)");
    expect((variant){.key = "gemma3.attention.sliding_window", .value = 0}, PW_ERR_FORMAT,
           "gemma3.attention.sliding_window is 0");
    expect((variant){.key = "gemma3.block_count", .value = 0}, PW_ERR_FORMAT,
           "gemma3.block_count is 0");
    expect((variant){.key = "gemma3.attention.key_length", .value = 255}, PW_ERR_FORMAT,
           "key_length 255 must be even");
    expect((variant){.key = "gemma3.attention.value_length", .value = 128}, PW_ERR_UNSUPPORTED,
           "value_length 128 differs from key_length 256");
    expect((variant){.key = "gemma3.rope.freq_base", .fvalue = -1.0f}, PW_ERR_FORMAT,
           "gemma3.rope.freq_base = -1 must be positive");
    expect((variant){.key = "gemma3.attention.layer_norm_rms_epsilon", .fvalue = 0.0f},
           PW_ERR_FORMAT, "layer_norm_rms_epsilon = 0 must be positive");
    expect((variant){.key = "gemma3.attention.sliding_window_pattern", .value = 0}, PW_ERR_FORMAT,
           "sliding_window_pattern is 0");
    expect((variant){.key = "gemma3.final_logit_softcapping", .fvalue = -30.0f}, PW_ERR_FORMAT,
           "final_logit_softcapping = -30 must be positive");
    /* good metadata, then the first missing weight */
    expect((variant){0}, PW_ERR_NOT_FOUND, "'token_embd.weight'");
    unlink(path);
    return pw_test_finish("model_gemma3_format");
}
