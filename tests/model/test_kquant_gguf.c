/* The reader and writer with the newer weight types (Q5_0, Q5_1, Q2_K ..
 * Q6_K): a written tensor reads back with its ggml type id, byte size and
 * exact bytes; the reader's block and size checks hold for the 256-value
 * blocks (a dim 0 that is not whole blocks, data running past the end);
 * the types piecewise still does not read are refused naming them. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/dequant.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

#include <string.h>

static const struct {
    pw_dtype dtype;
    uint32_t ggml;
    int64_t block_elems, block_bytes;
} types[] = {
    {PW_Q5_0, 6, 32, 22},   {PW_Q5_1, 7, 32, 24},   {PW_Q2_K, 10, 256, 84},
    {PW_Q3_K, 11, 256, 110}, {PW_Q4_K, 12, 256, 144}, {PW_Q5_K, 13, 256, 176},
    {PW_Q6_K, 14, 256, 210},
};

static void test_round_trip(void) {
    enum { K = 512, N = 3 };
    static float values[K * N];
    for (int i = 0; i < K * N; i++) values[i] = (float)((i * 37) % 101 - 50) / 64.0f;
    pw_gguf_writer *w;
    CHECK_OK(pw_gguf_writer_new(&w));
    CHECK_OK(pw_gguf_writer_add_string(w, "general.architecture", "llama"));
    char name[32];
    for (size_t t = 0; t < PW_ARRAY_LEN(types); t++) {
        snprintf(name, sizeof name, "w.%s", pw_dtype_name(types[t].dtype));
        int64_t dims[2] = {K, N};
        CHECK_OK(pw_gguf_writer_add_tensor_f32(w, name, types[t].dtype, 2, dims, values));
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_OK(pw_gguf_writer_to_memory(w, &buf, &len));
    pw_gguf_writer_free(w);
    pw_gguf *g = NULL;
    CHECK_OK(pw_gguf_open_memory(buf, len, &g));
    static uint8_t enc[K * N * 4];
    static float back[K * N], direct[K * N];
    for (size_t t = 0; g && t < PW_ARRAY_LEN(types); t++) {
        snprintf(name, sizeof name, "w.%s", pw_dtype_name(types[t].dtype));
        const pw_gguf_tensor *tt = NULL;
        CHECK_OK(pw_gguf_find_tensor(g, name, &tt));
        if (!tt) continue;
        CHECK_EQ_INT(tt->dtype, types[t].dtype);
        CHECK_EQ_INT(tt->ggml_type, types[t].ggml);
        CHECK_EQ_INT(pw_dtype_block_elems(tt->dtype), types[t].block_elems);
        CHECK_EQ_INT(pw_dtype_block_bytes(tt->dtype), types[t].block_bytes);
        CHECK_EQ_INT((int64_t)tt->nbytes, K * N / types[t].block_elems * types[t].block_bytes);
        CHECK_EQ_INT((uint64_t)((const uint8_t *)tt->data - buf) % pw_gguf_alignment(g), 0);
        CHECK_OK(pw_quantize(tt->dtype, values, enc, K * N));
        CHECK(memcmp(enc, tt->data, tt->nbytes) == 0);
        CHECK_OK(pw_dequantize(tt->dtype, tt->data, back, K * N));
        CHECK_OK(pw_dequantize(tt->dtype, enc, direct, K * N));
        CHECK(memcmp(back, direct, sizeof back) == 0);
    }
    pw_gguf_free(g);
    pw_host_free(buf);
}

/* A one-tensor file: a Q4_0 tensor of dims {d0, d1}, its ggml type patched
 * to `patched` afterwards. */
static void write_patched(int64_t d0, int64_t d1, uint32_t patched, uint8_t **buf, size_t *len) {
    pw_gguf_writer *w;
    CHECK_OK(pw_gguf_writer_new(&w));
    static float zeros[4096];
    int64_t dims[2] = {d0, d1};
    CHECK_OK(pw_gguf_writer_add_tensor_f32(w, "t", PW_Q4_0, 2, dims, zeros));
    CHECK_OK(pw_gguf_writer_to_memory(w, buf, len));
    pw_gguf_writer_free(w);
    /* header 24 bytes, no kvs: name (u64 1, "t"), n_dims, dims, type */
    size_t type_at = 24 + 8 + 1 + 4 + 2 * 8;
    memcpy(*buf + type_at, &patched, 4);
}

static void test_reader_checks(void) {
    uint8_t *buf;
    size_t len;
    pw_gguf *g = NULL;
    /* rows of 32 elements are not whole q4_K blocks */
    write_patched(32, 8, 12, &buf, &len);
    CHECK_ERR(pw_gguf_open_memory(buf, len, &g), PW_ERR_FORMAT,
              "gguf: tensor 't': dim 0 (32) is not a multiple of the q4_K block size 256");
    pw_host_free(buf);
    /* 256 x 4 in q4_0 is 576 bytes; as q6_K it needs 840: past the end */
    write_patched(256, 4, 14, &buf, &len);
    CHECK_ERR(pw_gguf_open_memory(buf, len, &g), PW_ERR_FORMAT,
              "gguf: tensor 't': data [0, 840) of the data section");
    pw_host_free(buf);
    /* 256 x 4 as q4_K is exactly the 576 bytes there */
    write_patched(256, 4, 12, &buf, &len);
    CHECK_OK(pw_gguf_open_memory(buf, len, &g));
    if (g) CHECK_EQ_INT(pw_gguf_tensor_at(g, 0)->dtype, PW_Q4_K);
    pw_gguf_free(g);
    pw_host_free(buf);
    /* types still not read, named with the supported list */
    write_patched(256, 4, 15, &buf, &len);
    CHECK_ERR(pw_gguf_open_memory(buf, len, &g), PW_ERR_UNSUPPORTED,
              "has ggml type 15 (q8_K), which piecewise does not read (supported: f32, f16, "
              "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K)");
    pw_host_free(buf);
    write_patched(256, 4, 9, &buf, &len);
    CHECK_ERR(pw_gguf_open_memory(buf, len, &g), PW_ERR_UNSUPPORTED, "ggml type 9 (q8_1)");
    pw_host_free(buf);
    write_patched(256, 4, 23, &buf, &len);
    CHECK_ERR(pw_gguf_open_memory(buf, len, &g), PW_ERR_UNSUPPORTED, "ggml type 23 (iq4_xs)");
    pw_host_free(buf);
}

static void test_writer_checks(void) {
    pw_gguf_writer *w;
    CHECK_OK(pw_gguf_writer_new(&w));
    static float zeros[1024];
    int64_t dims[2] = {128, 2};
    CHECK_ERR(pw_gguf_writer_add_tensor_f32(w, "t", PW_Q5_K, 2, dims, zeros), PW_ERR_INVALID_ARG,
              "dim 0 (128) is not a multiple of the q5_K block size");
    pw_gguf_writer_free(w);
}

int main(void) {
    test_round_trip();
    test_reader_checks();
    test_writer_checks();
    return pw_test_finish("model_kquant_gguf");
}
