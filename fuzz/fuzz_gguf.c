/* GGUF reader fed whole files: if the bytes open, every metadata value
 * (scalars, strings, array elements) and every tensor's data range is
 * read, the tokenizer is built from the metadata and used, and the file is
 * loaded as a model (through a memfd, since the loader takes a path). */
#include "fuzz_common.h"
#include "core/internal.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

#include <sys/mman.h>
#include <unistd.h>

/* Arrays are read at their first and last few elements: enough to hit the
 * bounds, without making a huge array cost a huge time. */
#define ARRAY_PROBE 8

static volatile uint64_t sink;

static void read_kv(const pw_gguf_kv *kv) {
    const char *key = pw_gguf_kv_key(kv);
    FUZZ_CHECK(key != NULL, "kv without a key");
    sink += strlen(key);
    int64_t i;
    uint64_t u;
    double f;
    bool b;
    const char *s;
    size_t len;
    if (pw_gguf_kv_int(kv, &i) == PW_OK) sink += (uint64_t)i;
    if (pw_gguf_kv_uint(kv, &u) == PW_OK) sink += u;
    if (pw_gguf_kv_float(kv, &f) == PW_OK) sink += (uint64_t)(f == f);
    if (pw_gguf_kv_bool(kv, &b) == PW_OK) sink += b;
    if (pw_gguf_kv_string(kv, &s, &len) == PW_OK) {
        FUZZ_CHECK(s[len] == '\0', "kv string not terminated");
        if (len) sink += (unsigned char)s[len - 1];
    }
    if (pw_gguf_kv_type(kv) != PW_GGUF_ARRAY) return;
    uint64_t n = pw_gguf_kv_array_len(kv);
    for (uint64_t k = 0; k < n; k++) {
        if (k == ARRAY_PROBE && n > 2 * ARRAY_PROBE) k = n - ARRAY_PROBE;
        if (pw_gguf_kv_array_int(kv, k, &i) == PW_OK) sink += (uint64_t)i;
        if (pw_gguf_kv_array_float(kv, k, &f) == PW_OK) sink += (uint64_t)(f == f);
        if (pw_gguf_kv_array_string(kv, k, &s, &len) == PW_OK && len) sink += (unsigned char)s[len - 1];
    }
    /* one past the end must be refused */
    FUZZ_CHECK(pw_gguf_kv_array_int(kv, n, &i) != PW_OK, "array index past the end accepted");
}

static void use_tokenizer(const pw_gguf *g) {
    pw_tokenizer *t = NULL;
    if (pw_tokenizer_new(g, &t) != PW_OK) return;
    static const char text[] = "Once upon a time, <s> there was \xe2\x96\x81 a caf\xc3\xa9 123 \xff";
    int32_t *ids = NULL;
    int64_t n = 0;
    if (pw_tokenizer_encode(t, text, sizeof text - 1, pw_tokenizer_default_flags(t), &ids, &n) == PW_OK) {
        char *back = NULL;
        if (pw_tokenizer_decode(t, ids, n, &back, NULL) == PW_OK) pw_host_free(back);
        pw_host_free(ids);
    }
    int32_t vocab = pw_tokenizer_vocab_size(t);
    for (int32_t id = 0; id < vocab && id < 64; id++) {
        const char *piece;
        size_t len;
        if (pw_tokenizer_decode_token(t, id ? id - 1 : -1, id, &piece, &len) == PW_OK && len)
            sink += (unsigned char)piece[len - 1];
    }
    pw_tokenizer_free(t);
}

static void load_as_model(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz.gguf", 0);
    if (fd < 0) return;
    if (write(fd, data, size) == (ssize_t)size) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        pw_model *m = NULL;
        if (pw_model_load(path, &m) == PW_OK) {
            int32_t *ids = NULL;
            int64_t n = 0;
            if (pw_model_tokenize(m, "hello world", true, &ids, &n) == PW_OK) free(ids);
            pw_model_free(m);
        }
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pw_log_set_level(PW_LOG_ERROR);
    pw_gguf *g = NULL;
    if (pw_gguf_open_memory(data, size, &g) != PW_OK) return 0;
    for (int64_t i = 0; i < pw_gguf_kv_count(g); i++) read_kv(pw_gguf_kv_at(g, i));
    for (int64_t i = 0; i < pw_gguf_tensor_count(g); i++) {
        const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
        const pw_gguf_tensor *found = NULL;
        FUZZ_CHECK(pw_gguf_find_tensor(g, t->name, &found) == PW_OK, "tensor '%s' not found by name", t->name);
        FUZZ_CHECK(t->n_dims >= 0 && t->n_dims <= PW_GGUF_MAX_DIMS, "tensor with %d dims", t->n_dims);
        if (t->nbytes) {
            const uint8_t *p = t->data;
            FUZZ_CHECK(p >= data && p + t->nbytes <= data + size, "tensor '%s' data outside the file", t->name);
            sink += p[0] + p[t->nbytes - 1];
        }
    }
    use_tokenizer(g);
    pw_gguf_free(g);
    load_as_model(data, size);
    return 0;
}
