/* Bad models and bad requests: each gets a clear error, never a crash. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"

#include <unistd.h>

static char path[] = "/tmp/pw_test_bad_XXXXXX";

static void write_bytes(const uint8_t *data, size_t len) {
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

/* A tiny model with one metadata key replaced or one tensor dropped. */
static void write_variant(const char *arch, const char *drop_tensor) {
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    uint8_t *buf;
    size_t len;
    CHECK_OK(pw_tiny_llama_write_memory(&cfg, &buf, &len));
    pw_gguf *g;
    CHECK_OK(pw_gguf_open_memory(buf, len, &g));
    pw_gguf_writer *w;
    CHECK_OK(pw_gguf_writer_new(&w));
    for (int64_t i = 0; i < pw_gguf_kv_count(g); i++) {
        const pw_gguf_kv *kv = pw_gguf_kv_at(g, i);
        const char *key = pw_gguf_kv_key(kv);
        if (strcmp(key, "general.architecture") == 0) {
            CHECK_OK(pw_gguf_writer_add_string(w, key, arch));
            continue;
        }
        if (strncmp(key, "llama.", 6) == 0 && strcmp(arch, "llama") != 0) {
            char k2[128];
            snprintf(k2, sizeof k2, "%s.%s", arch, key + 6);
            int64_t v;
            if (pw_gguf_kv_int(kv, &v) == PW_OK) CHECK_OK(pw_gguf_writer_add_u32(w, k2, (uint32_t)v));
            continue;
        }
        pw_gguf_type t = pw_gguf_kv_type(kv);
        if (t == PW_GGUF_STRING) {
            const char *s;
            CHECK_OK(pw_gguf_kv_string(kv, &s, NULL));
            CHECK_OK(pw_gguf_writer_add_string(w, key, s));
        } else if (t == PW_GGUF_ARRAY && pw_gguf_kv_array_type(kv) == PW_GGUF_STRING) {
            uint64_t n = pw_gguf_kv_array_len(kv);
            char **strs = calloc(n, sizeof *strs);
            for (uint64_t j = 0; j < n; j++) {
                const char *s;
                size_t sl;
                CHECK_OK(pw_gguf_kv_array_string(kv, j, &s, &sl));
                strs[j] = strndup(s, sl);
            }
            CHECK_OK(pw_gguf_writer_add_string_array(w, key, (const char *const *)strs, n));
            for (uint64_t j = 0; j < n; j++) free(strs[j]);
            free(strs);
        } else if (t == PW_GGUF_ARRAY) {
            uint64_t n = pw_gguf_kv_array_len(kv);
            pw_gguf_type et = pw_gguf_kv_array_type(kv);
            if (et == PW_GGUF_FLOAT32) {
                float *vals = calloc(n, sizeof *vals);
                for (uint64_t j = 0; j < n; j++) {
                    double d;
                    CHECK_OK(pw_gguf_kv_array_float(kv, j, &d));
                    vals[j] = (float)d;
                }
                CHECK_OK(pw_gguf_writer_add_array(w, key, et, vals, n));
                free(vals);
            } else {
                int32_t *vals = calloc(n, sizeof *vals);
                for (uint64_t j = 0; j < n; j++) {
                    int64_t d;
                    CHECK_OK(pw_gguf_kv_array_int(kv, j, &d));
                    vals[j] = (int32_t)d;
                }
                CHECK_OK(pw_gguf_writer_add_array(w, key, PW_GGUF_INT32, vals, n));
                free(vals);
            }
        } else if (t == PW_GGUF_FLOAT32 || t == PW_GGUF_FLOAT64) {
            double d;
            CHECK_OK(pw_gguf_kv_float(kv, &d));
            CHECK_OK(pw_gguf_writer_add_f32(w, key, (float)d));
        } else if (t == PW_GGUF_BOOL) {
            bool b;
            CHECK_OK(pw_gguf_kv_bool(kv, &b));
            CHECK_OK(pw_gguf_writer_add_bool(w, key, b));
        } else {
            int64_t v;
            CHECK_OK(pw_gguf_kv_int(kv, &v));
            CHECK_OK(pw_gguf_writer_add_u32(w, key, (uint32_t)v));
        }
    }
    for (int64_t i = 0; i < pw_gguf_tensor_count(g); i++) {
        const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
        if (drop_tensor && strcmp(t->name, drop_tensor) == 0) continue;
        CHECK_OK(pw_gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->dims, t->data));
    }
    CHECK_OK(pw_gguf_writer_to_file(w, path));
    pw_gguf_writer_free(w);
    pw_gguf_free(g);
    pw_host_free(buf);
}

static void test_bad_files(void) {
    pw_model *m = NULL;
    CHECK_ERR(pw_model_load("/nonexistent/model.gguf", &m), PW_ERR_IO, "/nonexistent/model.gguf");
    CHECK(m == NULL);

    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    uint8_t *buf;
    size_t len;
    CHECK_OK(pw_tiny_llama_write_memory(&cfg, &buf, &len));
    /* truncated at several points: header, metadata, tensor table, data */
    size_t cuts[] = {3, 20, 200, len / 3, len / 2, len - 1};
    for (size_t i = 0; i < PW_ARRAY_LEN(cuts); i++) {
        write_bytes(buf, cuts[i]);
        pw_status s = pw_model_load(path, &m);
        CHECK(s == PW_ERR_FORMAT || s == PW_ERR_IO);
        CHECK(strstr(pw_last_error(), path) != NULL);
        CHECK(m == NULL);
    }
    /* corrupt: bad magic */
    buf[0] = 'X';
    write_bytes(buf, len);
    CHECK_ERR(pw_model_load(path, &m), PW_ERR_FORMAT, "magic");
    pw_host_free(buf);

    write_variant("gpt9", NULL);
    CHECK_ERR(pw_model_load(path, &m), PW_ERR_UNSUPPORTED, "model architecture 'gpt9' is not supported (supported: llama, gemma3, qwen2, qwen3, phi3)");
    write_variant("llama", "blk.1.ffn_down.weight");
    CHECK_ERR(pw_model_load(path, &m), PW_ERR_NOT_FOUND, "missing tensor 'blk.1.ffn_down.weight'");
    write_variant("llama", NULL);
    CHECK_OK(pw_model_load(path, &m));
    pw_model_free(m);
}

static void test_bad_requests(void) {
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return;
    pw_engine_config ec;
    pw_engine_config_init(&ec);
    ec.progress = PW_PROGRESS_OFF;
    ec.print_capture_totals = false;
    ec.max_num_seqs = 2;
    ec.max_num_batched_tokens = 8;
    pw_engine *e;
    CHECK_OK(pw_engine_new(m, &ec, &e));
    int64_t ctx = pw_model_get_info(m)->context;
    int32_t *long_prompt = calloc((size_t)ctx + 1, sizeof(int32_t));
    for (int64_t i = 0; i <= ctx; i++) long_prompt[i] = 5;
    int64_t id;
    CHECK_ERR(pw_engine_add_request(e, long_prompt, ctx + 1, 1, NULL, &id), PW_ERR_INVALID_ARG,
              "exceeds the context");
    CHECK_ERR(pw_engine_add_request(e, long_prompt, ctx - 2, 5, NULL, &id), PW_ERR_INVALID_ARG,
              "exceeds the context");
    CHECK_ERR(pw_engine_add_request(e, long_prompt, 0, 5, NULL, &id), PW_ERR_INVALID_ARG, "empty");
    /* prompt + max_new_tokens would overflow int64 */
    CHECK_ERR(pw_engine_add_request(e, long_prompt, 3, INT64_MAX, NULL, &id), PW_ERR_INVALID_ARG,
              "exceeds the context");
    CHECK_ERR(pw_engine_add_request(e, long_prompt, 3, 0, NULL, &id), PW_ERR_INVALID_ARG,
              "max_new_tokens");
    long_prompt[1] = 1 << 20;
    CHECK_ERR(pw_engine_add_request(e, long_prompt, 3, 2, NULL, &id), PW_ERR_INVALID_ARG,
              "outside the vocabulary");
    long_prompt[1] = 5;
    CHECK_OK(pw_engine_add_request(e, long_prompt, 3, 2, NULL, &id));
    int64_t id2;
    CHECK_OK(pw_engine_add_request(e, long_prompt, 3, 2, NULL, &id2));
    CHECK_ERR(pw_engine_add_request(e, long_prompt, 3, 2, NULL, NULL), PW_ERR_STATE, "slots");
    CHECK_ERR(pw_engine_release_request(e, id), PW_ERR_STATE, "still running");
    CHECK_ERR(pw_engine_release_request(e, 999), PW_ERR_NOT_FOUND, "no request 999");
    while (pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t n;
        CHECK_OK(pw_engine_step(e, &t, &n));
    }
    CHECK_OK(pw_engine_release_request(e, id));
    pw_engine_free(e);

    /* a finished request that is not released holds its KV blocks */
    ec.kv_cache_positions = 16;
    ec.block_size = 16;
    ec.max_model_len = 16;
    CHECK_OK(pw_engine_new(m, &ec, &e));
    CHECK_OK(pw_engine_add_request(e, long_prompt, 3, 2, NULL, &id));
    CHECK_OK(pw_engine_add_request(e, long_prompt, 3, 2, NULL, &id2));
    const pw_step_token *t;
    int64_t n;
    CHECK_OK(pw_engine_step(e, &t, &n)); /* the first request takes the only block */
    CHECK_OK(pw_engine_step(e, &t, &n));
    CHECK_ERR(pw_engine_step(e, &t, &n), PW_ERR_STATE, "held by finished requests");
    CHECK_OK(pw_engine_release_request(e, id));
    while (pw_engine_has_work(e)) CHECK_OK(pw_engine_step(e, &t, &n));
    pw_engine_free(e);
    ec.kv_cache_positions = 0;
    ec.max_model_len = 0;

    ec.max_num_batched_tokens = 1;
    CHECK_ERR(pw_engine_new(m, &ec, &e), PW_ERR_INVALID_ARG, "max_num_batched_tokens");
    ec.max_num_batched_tokens = 8;
    ec.block_size = 0;
    CHECK_ERR(pw_engine_new(m, &ec, &e), PW_ERR_INVALID_ARG, "block_size");
    free(long_prompt);
    pw_model_free(m);
}

int main(void) {
    int fd = mkstemp(path);
    if (fd < 0) pw_test_skip("cannot create a temporary file");
    close(fd);
    test_bad_files();
    test_bad_requests();
    unlink(path);
    return pw_test_finish("model_errors");
}
