/* GGUF reader and writer: a write-read round trip of every metadata type
 * and every tensor type, typed getters and their errors, mmap from a file,
 * the tiny Llama helper, and stories260K when ../shared has it. */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/dequant.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pw_gguf_writer *new_writer(void) {
    pw_gguf_writer *w = NULL;
    CHECK_OK(pw_gguf_writer_new(&w));
    return w;
}

static pw_gguf *open_written(pw_gguf_writer *w, uint8_t **buf) {
    size_t len = 0;
    pw_gguf *g = NULL;
    CHECK_OK(pw_gguf_writer_to_memory(w, buf, &len));
    CHECK_OK(pw_gguf_open_memory(*buf, len, &g));
    return g;
}

static void test_metadata_round_trip(uint32_t version) {
    pw_gguf_writer *w = new_writer();
    pw_gguf_writer_set_version(w, version);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int64_t i64 = -5000000000LL;
    double f64 = 2.5e300;
    CHECK_OK(pw_gguf_writer_add_scalar(w, "t.u8", PW_GGUF_UINT8, &u8));
    CHECK_OK(pw_gguf_writer_add_scalar(w, "t.i8", PW_GGUF_INT8, &i8));
    CHECK_OK(pw_gguf_writer_add_scalar(w, "t.u16", PW_GGUF_UINT16, &u16));
    CHECK_OK(pw_gguf_writer_add_scalar(w, "t.i16", PW_GGUF_INT16, &i16));
    CHECK_OK(pw_gguf_writer_add_u32(w, "t.u32", 4000000000u));
    CHECK_OK(pw_gguf_writer_add_i32(w, "t.i32", -7));
    CHECK_OK(pw_gguf_writer_add_f32(w, "t.f32", 0.125f));
    CHECK_OK(pw_gguf_writer_add_bool(w, "t.bool", true));
    CHECK_OK(pw_gguf_writer_add_string(w, "t.str", "héllo"));
    CHECK_OK(pw_gguf_writer_add_u64(w, "t.u64", 1ULL << 40));
    CHECK_OK(pw_gguf_writer_add_scalar(w, "t.i64", PW_GGUF_INT64, &i64));
    CHECK_OK(pw_gguf_writer_add_scalar(w, "t.f64", PW_GGUF_FLOAT64, &f64));
    const int32_t ints[] = {3, -1, 4};
    const float floats[] = {1.5f, -2.0f};
    const char *const strs[] = {"a", "", "ccc"};
    CHECK_OK(pw_gguf_writer_add_array(w, "t.ints", PW_GGUF_INT32, ints, 3));
    CHECK_OK(pw_gguf_writer_add_array(w, "t.floats", PW_GGUF_FLOAT32, floats, 2));
    CHECK_OK(pw_gguf_writer_add_string_array(w, "t.strs", strs, 3));
    CHECK_OK(pw_gguf_writer_add_array(w, "t.empty", PW_GGUF_UINT8, NULL, 0));

    uint8_t *buf = NULL;
    pw_gguf *g = open_written(w, &buf);
    pw_gguf_writer_free(w);
    if (!g) return;
    CHECK_EQ_INT(pw_gguf_version(g), version);
    CHECK_EQ_INT(pw_gguf_kv_count(g), 16);
    CHECK_EQ_INT(pw_gguf_tensor_count(g), 0);
    CHECK_EQ_INT(pw_gguf_alignment(g), 32);

    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f32;
    bool b;
    const char *s;
    CHECK_OK(pw_gguf_get_u32(g, "t.u8", &u32));
    CHECK_EQ_INT(u32, 200);
    CHECK_OK(pw_gguf_get_i32(g, "t.i8", &i32));
    CHECK_EQ_INT(i32, -100);
    CHECK_OK(pw_gguf_get_u32(g, "t.u16", &u32));
    CHECK_EQ_INT(u32, 60000);
    CHECK_OK(pw_gguf_get_i32(g, "t.i16", &i32));
    CHECK_EQ_INT(i32, -30000);
    CHECK_OK(pw_gguf_get_u32(g, "t.u32", &u32));
    CHECK_EQ_INT(u32, 4000000000u);
    CHECK_OK(pw_gguf_get_i32(g, "t.i32", &i32));
    CHECK_EQ_INT(i32, -7);
    CHECK_OK(pw_gguf_get_f32(g, "t.f32", &f32));
    CHECK(f32 == 0.125f);
    CHECK_OK(pw_gguf_get_bool(g, "t.bool", &b));
    CHECK(b);
    CHECK_OK(pw_gguf_get_string(g, "t.str", &s));
    CHECK_STREQ(s, "héllo");
    CHECK_OK(pw_gguf_get_u64(g, "t.u64", &u64));
    CHECK_EQ_INT(u64, 1ULL << 40);
    const pw_gguf_kv *kv = pw_gguf_find_kv(g, "t.i64");
    int64_t i64_out;
    double f64_out;
    CHECK(kv && pw_gguf_kv_type(kv) == PW_GGUF_INT64);
    CHECK_OK(pw_gguf_kv_int(kv, &i64_out));
    CHECK_EQ_INT(i64_out, i64);
    CHECK_OK(pw_gguf_kv_float(pw_gguf_find_kv(g, "t.f64"), &f64_out));
    CHECK(f64_out == f64);
    CHECK_OK(pw_gguf_get_f32(g, "t.i32", &f32)); /* integers read as floats */
    CHECK(f32 == -7.0f);

    const pw_gguf_kv *arr;
    uint64_t n;
    int64_t iv;
    double fv;
    CHECK_OK(pw_gguf_get_array(g, "t.ints", PW_GGUF_INT32, &arr, &n));
    CHECK_EQ_INT(n, 3);
    CHECK_OK(pw_gguf_kv_array_int(arr, 1, &iv));
    CHECK_EQ_INT(iv, -1);
    CHECK_OK(pw_gguf_kv_array_int(arr, 2, &iv));
    CHECK_EQ_INT(iv, 4);
    CHECK_ERR(pw_gguf_kv_array_int(arr, 3, &iv), PW_ERR_INVALID_ARG, "index 3 is past");
    CHECK_OK(pw_gguf_get_array(g, "t.floats", PW_GGUF_TYPE_COUNT_, &arr, &n));
    CHECK_EQ_INT(n, 2);
    CHECK_OK(pw_gguf_kv_array_float(arr, 1, &fv));
    CHECK(fv == -2.0);
    CHECK_ERR(pw_gguf_kv_array_int(arr, 0, &iv), PW_ERR_FORMAT, "expected integers");
    CHECK_OK(pw_gguf_get_array(g, "t.strs", PW_GGUF_STRING, &arr, &n));
    CHECK_EQ_INT(n, 3);
    size_t len;
    CHECK_OK(pw_gguf_kv_array_string(arr, 2, &s, &len));
    CHECK(len == 3 && memcmp(s, "ccc", 3) == 0);
    CHECK_OK(pw_gguf_kv_array_string(arr, 1, &s, &len));
    CHECK_EQ_INT(len, 0);
    CHECK_ERR(pw_gguf_kv_array_float(arr, 0, &fv), PW_ERR_FORMAT, "expected numbers");
    CHECK_OK(pw_gguf_get_array(g, "t.empty", PW_GGUF_UINT8, &arr, &n));
    CHECK_EQ_INT(n, 0);

    /* Iteration sees every key in file order. */
    CHECK_STREQ(pw_gguf_kv_key(pw_gguf_kv_at(g, 0)), "t.u8");
    CHECK_STREQ(pw_gguf_kv_key(pw_gguf_kv_at(g, 15)), "t.empty");
    CHECK(pw_gguf_kv_at(g, 16) == NULL);
    CHECK(pw_gguf_kv_array_type(pw_gguf_kv_at(g, 14)) == PW_GGUF_STRING);

    /* Getter errors name the key and the types. */
    CHECK_ERR(pw_gguf_get_u32(g, "t.missing", &u32), PW_ERR_NOT_FOUND, "key 't.missing' not found");
    CHECK_ERR(pw_gguf_get_u32(g, "t.str", &u32), PW_ERR_FORMAT, "'t.str' has type string");
    CHECK_ERR(pw_gguf_get_u32(g, "t.i8", &u32), PW_ERR_FORMAT, "is negative");
    CHECK_ERR(pw_gguf_get_u32(g, "t.u64", &u32), PW_ERR_FORMAT, "does not fit uint32");
    CHECK_ERR(pw_gguf_get_i32(g, "t.u32", &i32), PW_ERR_FORMAT, "does not fit int32");
    CHECK_ERR(pw_gguf_get_i32(g, "t.f32", &i32), PW_ERR_FORMAT, "expected an integer");
    CHECK_ERR(pw_gguf_get_string(g, "t.u8", &s), PW_ERR_FORMAT, "expected string");
    CHECK_ERR(pw_gguf_get_bool(g, "t.u8", &b), PW_ERR_FORMAT, "expected bool");
    CHECK_ERR(pw_gguf_get_f32(g, "t.ints", &f32), PW_ERR_FORMAT, "'t.ints' is an array of int32");
    CHECK_ERR(pw_gguf_get_array(g, "t.u8", PW_GGUF_STRING, &arr, &n), PW_ERR_FORMAT,
              "expected an array");
    CHECK_ERR(pw_gguf_get_array(g, "t.ints", PW_GGUF_STRING, &arr, &n), PW_ERR_FORMAT,
              "array of int32, expected an array of string");
    pw_gguf_free(g);
    pw_host_free(buf);
}

/* One tensor of each supported type, read back through the mapping and
 * dequantized. The values are exact in every encoding but Q8_0, whose
 * scale 4/127 rounds: there each value is within half a step. */
static void test_tensor_round_trip(void) {
    pw_gguf_writer *w = new_writer();
    float values[64];
    for (int i = 0; i < 64; i++) values[i] = (float)((i % 16) - 8) * 0.5f; /* q4_0 exact */
    const pw_dtype types[] = {PW_F32, PW_F16, PW_BF16, PW_Q8_0, PW_Q4_0, PW_Q4_1};
    const char *names[] = {"w.f32", "w.f16", "w.bf16", "w.q8_0", "w.q4_0", "w.q4_1"};
    const uint32_t ggml_ids[] = {0, 1, 30, 8, 2, 3};
    int64_t dims[2] = {32, 2};
    for (int k = 0; k < 6; k++)
        CHECK_OK(pw_gguf_writer_add_tensor_f32(w, names[k], types[k], 2, dims, values));
    int64_t dims1[1] = {3};
    const float small[3] = {1, 2, 3};
    CHECK_OK(pw_gguf_writer_add_tensor(w, "w.vec", PW_F32, 1, dims1, small));
    uint8_t *buf = NULL;
    pw_gguf *g = open_written(w, &buf);
    pw_gguf_writer_free(w);
    if (!g) return;
    CHECK_EQ_INT(pw_gguf_tensor_count(g), 7);
    for (int k = 0; k < 6; k++) {
        const pw_gguf_tensor *t = NULL;
        CHECK_OK(pw_gguf_find_tensor(g, names[k], &t));
        if (!t) continue;
        CHECK_EQ_INT(t->dtype, types[k]);
        CHECK_EQ_INT(t->ggml_type, ggml_ids[k]);
        CHECK_EQ_INT(t->n_dims, 2);
        CHECK_EQ_INT(t->dims[0], 32);
        CHECK_EQ_INT(t->dims[1], 2);
        CHECK_EQ_INT(t->dims[2], 1);
        CHECK_EQ_INT(t->n_elements, 64);
        CHECK_EQ_INT(t->nbytes, pw_dtype_row_bytes(types[k], 64));
        CHECK_EQ_INT(((uintptr_t)t->data - (uintptr_t)buf) % 32, 0);
        float out[64];
        CHECK_OK(pw_dequantize(t->dtype, t->data, out, 64));
        float tolerance = types[k] == PW_Q8_0 ? 0.5f * 4.0f / 127.0f + 1e-3f : 0.0f;
        int close = 1;
        for (int i = 0; i < 64; i++) close &= fabsf(out[i] - values[i]) <= tolerance;
        CHECK(close);
    }
    const pw_gguf_tensor *v = pw_gguf_tensor_at(g, 6);
    CHECK(v && strcmp(v->name, "w.vec") == 0 && v->n_dims == 1 && v->nbytes == 12);
    CHECK(v && memcmp(v->data, small, 12) == 0);
    CHECK(pw_gguf_tensor_at(g, 7) == NULL);
    const pw_gguf_tensor *t;
    CHECK_ERR(pw_gguf_find_tensor(g, "nope", &t), PW_ERR_NOT_FOUND, "tensor 'nope' not found");
    pw_gguf_free(g);
    pw_host_free(buf);
}

static void test_custom_alignment(void) {
    pw_gguf_writer *w = new_writer();
    CHECK_OK(pw_gguf_writer_add_u32(w, "general.alignment", 256));
    float v[5] = {1, 2, 3, 4, 5};
    int64_t d[1] = {5};
    CHECK_OK(pw_gguf_writer_add_tensor(w, "a", PW_F32, 1, d, v));
    CHECK_OK(pw_gguf_writer_add_tensor(w, "b", PW_F32, 1, d, v));
    uint8_t *buf = NULL;
    pw_gguf *g = open_written(w, &buf);
    pw_gguf_writer_free(w);
    if (!g) return;
    CHECK_EQ_INT(pw_gguf_alignment(g), 256);
    CHECK_EQ_INT(pw_gguf_data_offset(g) % 256, 0);
    CHECK_EQ_INT(pw_gguf_tensor_at(g, 1)->offset, 256);
    CHECK(memcmp(pw_gguf_tensor_at(g, 1)->data, v, sizeof v) == 0);
    pw_gguf_free(g);
    pw_host_free(buf);
}

static void test_writer_errors(void) {
    pw_gguf_writer *w = new_writer();
    int64_t d[2] = {33, 1};
    float v[33] = {0};
    CHECK_ERR(pw_gguf_writer_add_tensor_f32(w, "q", PW_Q8_0, 2, d, v), PW_ERR_INVALID_ARG,
              "not a multiple of the q8_0 block size");
    CHECK_ERR(pw_gguf_writer_add_tensor(w, "i", PW_I32, 1, d, v), PW_ERR_INVALID_ARG,
              "dtype i32 has no ggml type");
    CHECK_ERR(pw_gguf_writer_add_tensor(w, "five", PW_F32, 5, d, v), PW_ERR_INVALID_ARG,
              "n_dims 5 outside [1, 4]");
    CHECK_ERR(pw_gguf_writer_add_u32(w, "general.alignment", 24), PW_ERR_INVALID_ARG,
              "not a power of two");
    CHECK_ERR(pw_gguf_writer_add_array(w, "s", PW_GGUF_STRING, v, 1), PW_ERR_INVALID_ARG,
              "use add_string_array");
    CHECK_ERR(pw_gguf_writer_to_file(w, "/nonexistent-dir/x.gguf"), PW_ERR_IO, "cannot create");
    pw_gguf_writer_free(w);
}

static void test_tiny_llama_file(void) {
    char path[] = "/tmp/pw_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.weight_dtype = PW_Q4_1;
    cfg.tied_embeddings = true;
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));
    pw_gguf *g = NULL;
    CHECK_OK(pw_gguf_open(path, &g));
    unlink(path);
    if (!g) return;
    const char *arch;
    uint32_t u;
    CHECK_OK(pw_gguf_get_string(g, "general.architecture", &arch));
    CHECK_STREQ(arch, "llama");
    CHECK_OK(pw_gguf_get_u32(g, "llama.block_count", &u));
    CHECK_EQ_INT(u, 2);
    CHECK_OK(pw_gguf_get_u32(g, "llama.rope.dimension_count", &u));
    CHECK_EQ_INT(u, 16);
    /* embd + output_norm + 9 per layer; tied: no output.weight */
    CHECK_EQ_INT(pw_gguf_tensor_count(g), 2 + 9 * 2);
    const pw_gguf_tensor *t = NULL;
    CHECK_OK(pw_gguf_find_tensor(g, "blk.1.attn_k.weight", &t));
    CHECK(t && t->dtype == PW_Q4_1 && t->dims[0] == 64 && t->dims[1] == 32);
    CHECK_OK(pw_gguf_find_tensor(g, "blk.0.ffn_down.weight", &t));
    CHECK(t && t->dims[0] == 96 && t->dims[1] == 64);
    CHECK_OK(pw_gguf_find_tensor(g, "token_embd.weight", &t));
    CHECK(t && t->dims[0] == 64 && t->dims[1] == 512);
    CHECK_OK(pw_gguf_find_tensor(g, "output_norm.weight", &t));
    CHECK(t && t->dtype == PW_F32 && t->n_dims == 1);
    CHECK_ERR(pw_gguf_find_tensor(g, "output.weight", &t), PW_ERR_NOT_FOUND, "output.weight");
    const pw_gguf_kv *tokens;
    uint64_t n;
    CHECK_OK(pw_gguf_get_array(g, "tokenizer.ggml.tokens", PW_GGUF_STRING, &tokens, &n));
    CHECK_EQ_INT(n, 512);
    pw_gguf_free(g);

    /* Same seed, same bytes; another seed, other weights. */
    uint8_t *a, *b, *c;
    size_t la, lb, lc;
    CHECK_OK(pw_tiny_llama_write_memory(&cfg, &a, &la));
    CHECK_OK(pw_tiny_llama_write_memory(&cfg, &b, &lb));
    cfg.seed = 2;
    CHECK_OK(pw_tiny_llama_write_memory(&cfg, &c, &lc));
    CHECK(la == lb && memcmp(a, b, la) == 0);
    CHECK(la == lc && memcmp(a, c, la) != 0);
    pw_host_free(a);
    pw_host_free(b);
    pw_host_free(c);

    cfg = pw_tiny_llama_default_config();
    cfg.vocab_size = 100;
    CHECK_ERR(pw_tiny_llama_write_memory(&cfg, &a, &la), PW_ERR_INVALID_ARG, "below the minimum");
    cfg = pw_tiny_llama_default_config();
    cfg.n_kv_heads = 3;
    CHECK_ERR(pw_tiny_llama_write_memory(&cfg, &a, &la), PW_ERR_INVALID_ARG, "multiple of 3 KV");
    cfg = pw_tiny_llama_default_config();
    cfg.ffn_dim = 100;
    cfg.weight_dtype = PW_Q8_0;
    CHECK_ERR(pw_tiny_llama_write_memory(&cfg, &a, &la), PW_ERR_INVALID_ARG, "block size");
}

static void test_open_errors(void) {
    pw_gguf *g;
    CHECK_ERR(pw_gguf_open("/nonexistent/model.gguf", &g), PW_ERR_IO, "cannot open '/nonexistent");
    CHECK_ERR(pw_gguf_open("/tmp", &g), PW_ERR_IO, "not a regular file");
    char path[] = "/tmp/pw_test_gguf_empty_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        CHECK_ERR(pw_gguf_open(path, &g), PW_ERR_FORMAT, "file size 0");
        /* a link to a model is followed: the file it names is what counts */
        char link[64];
        snprintf(link, sizeof link, "%s.link", path);
        CHECK(symlink(path, link) == 0);
        CHECK_ERR(pw_gguf_open(link, &g), PW_ERR_FORMAT, "file size 0");
        unlink(link);
        unlink(path);
    }
    /* a FIFO with no writer: refused at once, not waited on */
    char dir[] = "/tmp/pw_test_gguf_fifo_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/model.gguf", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_ERR(pw_gguf_open(fifo, &g), PW_ERR_IO, "is not a regular file (it is a FIFO)");
    unlink(fifo);
    rmdir(dir);
    CHECK_ERR(pw_gguf_open("/dev/zero", &g), PW_ERR_IO, "(it is a character device)");
}

static void test_stories260k(void) {
    char path[1024];
    if (!pw_test_shared_path("models/stories260K.gguf", path, sizeof path)) {
        pw_test_skip_part("../shared/models/stories260K.gguf absent: its checks");
        return;
    }
    pw_gguf *g = NULL;
    CHECK_OK(pw_gguf_open(path, &g));
    if (!g) return;
    CHECK_EQ_INT(pw_gguf_version(g), 3);
    CHECK_EQ_INT(pw_gguf_kv_count(g), 19);
    CHECK_EQ_INT(pw_gguf_tensor_count(g), 48);
    uint32_t u;
    float eps;
    CHECK_OK(pw_gguf_get_u32(g, "llama.embedding_length", &u));
    CHECK_EQ_INT(u, 64);
    CHECK_OK(pw_gguf_get_u32(g, "llama.attention.head_count_kv", &u));
    CHECK_EQ_INT(u, 4);
    CHECK_OK(pw_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps));
    CHECK(fabsf(eps - 1e-5f) < 1e-9f);
    const pw_gguf_tensor *t = NULL;
    CHECK_OK(pw_gguf_find_tensor(g, "blk.0.attn_k.weight", &t));
    CHECK(t && t->dtype == PW_F32 && t->dims[0] == 64 && t->dims[1] == 32 && t->nbytes == 8192);
    CHECK_OK(pw_gguf_find_tensor(g, "token_embd.weight", &t));
    CHECK(t && t->dims[0] == 64 && t->dims[1] == 512);
    pw_gguf_free(g);
}

int main(void) {
    test_metadata_round_trip(3);
    test_metadata_round_trip(2);
    test_tensor_round_trip();
    test_custom_alignment();
    test_writer_errors();
    test_tiny_llama_file();
    test_open_errors();
    test_stories260k();
    return pw_test_finish("model_gguf");
}
