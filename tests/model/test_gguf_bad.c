/* Bad GGUF input: every prefix of a valid file, corrupted counts, lengths,
 * types, dims and offsets, and random byte flips. Each must give a clear
 * error (status and a message naming the field), never a crash. Buffers
 * are malloc'd to their exact size so ASan catches any read past the end. */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "test_util.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define TENSOR_Q "blk.0.attn_q.weight"

static uint8_t *valid_file(size_t *len) {
    pw_gguf_writer *w = NULL;
    CHECK_OK(pw_gguf_writer_new(&w));
    const char *const tokens[] = {"<s>", "a", "bc"};
    const float scores[] = {0.0f, -1.0f, -2.0f};
    CHECK_OK(pw_gguf_writer_add_string(w, "general.architecture", "llama"));
    CHECK_OK(pw_gguf_writer_add_u32(w, "general.alignment", 32));
    CHECK_OK(pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", tokens, 3));
    CHECK_OK(pw_gguf_writer_add_array(w, "tokenizer.ggml.scores", PW_GGUF_FLOAT32, scores, 3));
    CHECK_OK(pw_gguf_writer_add_bool(w, "some.flag", true));
    float q[64], norm[4] = {1, 2, 3, 4};
    for (int i = 0; i < 64; i++) q[i] = (float)i / 8.0f;
    int64_t dq[2] = {32, 2}, dn[1] = {4};
    CHECK_OK(pw_gguf_writer_add_tensor_f32(w, TENSOR_Q, PW_Q4_0, 2, dq, q));
    CHECK_OK(pw_gguf_writer_add_tensor(w, "output_norm.weight", PW_F32, 1, dn, norm));
    uint8_t *buf = NULL;
    CHECK_OK(pw_gguf_writer_to_memory(w, &buf, len));
    pw_gguf_writer_free(w);
    return buf;
}

/* Opens an exact-size heap copy of data[0, len). */
static pw_status open_copy(const uint8_t *data, size_t len) {
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, data, len);
    pw_gguf *g = NULL;
    pw_status s = pw_gguf_open_memory(copy, len, &g);
    if (s == PW_OK) {
        /* Touch everything the handle exposes, as a loader would. */
        for (int64_t i = 0; i < pw_gguf_tensor_count(g); i++) {
            const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
            volatile uint8_t sink = 0;
            for (uint64_t b = 0; b < t->nbytes; b++) sink ^= ((const uint8_t *)t->data)[b];
            (void)sink;
        }
        for (int64_t i = 0; i < pw_gguf_kv_count(g); i++) {
            const pw_gguf_kv *kv = pw_gguf_kv_at(g, i);
            for (uint64_t k = 0; k < pw_gguf_kv_array_len(kv); k++) {
                const char *str;
                size_t sl;
                double f;
                if (pw_gguf_kv_array_string(kv, k, &str, &sl) == PW_OK) {
                    volatile char c = sl ? str[sl - 1] : 0;
                    (void)c;
                } else {
                    (void)pw_gguf_kv_array_float(kv, k, &f);
                }
            }
        }
        pw_gguf_free(g);
    }
    free(copy);
    return s;
}

static size_t find(const uint8_t *buf, size_t len, const char *needle) {
    const uint8_t *p = memmem(buf, len, needle, strlen(needle));
    CHECK(p != NULL);
    return p ? (size_t)(p - buf) : 0;
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Applies one corruption to a fresh copy of the valid file and checks the
 * error. */
typedef void (*corruption)(uint8_t *buf, size_t len);

static void expect_corrupt(const uint8_t *valid, size_t len, corruption corrupt, pw_status code,
                           const char *needle, const char *what) {
    uint8_t *buf = malloc(len);
    memcpy(buf, valid, len);
    corrupt(buf, len);
    pw_gguf *g = NULL;
    pw_status s = pw_gguf_open_memory(buf, len, &g);
    pw_test_checks++;
    if (s != code || !strstr(pw_last_error(), needle)) {
        pw_test_failures++;
        fprintf(stderr, "%s: expected %s containing \"%s\", got %s: \"%s\"\n", what,
                pw_status_name(code), needle, pw_status_name(s), pw_last_error());
    }
    if (s == PW_OK) pw_gguf_free(g);
    free(buf);
}

/* Offsets of one tensor info's fields. */
static size_t tensor_info_field(uint8_t *buf, size_t len, const char *name, int field) {
    size_t at = find(buf, len, name) + strlen(name);
    uint32_t n_dims;
    memcpy(&n_dims, buf + at, 4);
    if (field == 0) return at;        /* n_dims */
    if (field == 1) return at + 4;    /* dims[0] */
    if (field == 2) return at + 12;   /* dims[1] */
    if (field == 3) return at + 4 + 8 * n_dims; /* type */
    return at + 8 + 8 * n_dims;       /* offset */
}

/* The value type of a key (4 bytes after it), and its first value byte. */
static size_t kv_type_at(uint8_t *buf, size_t len, const char *key) {
    return find(buf, len, key) + strlen(key);
}

#define CORRUPTION(name, body) static void name(uint8_t *buf, size_t len) { (void)len; body; }

CORRUPTION(bad_magic, buf[0] = 'X')
CORRUPTION(version_1, put_u32(buf + 4, 1))
CORRUPTION(version_4, put_u32(buf + 4, 4))
CORRUPTION(version_big_endian, put_u32(buf + 4, 0x03000000u))
CORRUPTION(huge_kv_count, put_u64(buf + 16, UINT64_MAX))
CORRUPTION(huge_tensor_count, put_u64(buf + 8, 1ULL << 40))
CORRUPTION(one_more_kv, { uint64_t n; memcpy(&n, buf + 16, 8); put_u64(buf + 16, n + 1); })
CORRUPTION(huge_key_length, put_u64(buf + 24, UINT64_MAX))
CORRUPTION(unknown_value_type, put_u32(buf + kv_type_at(buf, len, "general.architecture"), 13))
CORRUPTION(huge_string_length,
           put_u64(buf + kv_type_at(buf, len, "general.architecture") + 4, UINT64_MAX - 5))
CORRUPTION(unknown_elem_type, put_u32(buf + kv_type_at(buf, len, "tokenizer.ggml.tokens") + 4, 77))
CORRUPTION(nested_array, put_u32(buf + kv_type_at(buf, len, "tokenizer.ggml.tokens") + 4, 9))
CORRUPTION(huge_string_count,
           put_u64(buf + kv_type_at(buf, len, "tokenizer.ggml.tokens") + 8, 1ULL << 62))
CORRUPTION(huge_float_count,
           put_u64(buf + kv_type_at(buf, len, "tokenizer.ggml.scores") + 8, (1ULL << 62) + 1))
CORRUPTION(huge_element_length,
           put_u64(buf + kv_type_at(buf, len, "tokenizer.ggml.tokens") + 16, 1ULL << 50))
CORRUPTION(alignment_zero, put_u32(buf + kv_type_at(buf, len, "general.alignment") + 4, 0))
CORRUPTION(alignment_48, put_u32(buf + kv_type_at(buf, len, "general.alignment") + 4, 48))
CORRUPTION(alignment_wrong_type, put_u32(buf + kv_type_at(buf, len, "general.alignment"), 5))
CORRUPTION(n_dims_zero, put_u32(buf + tensor_info_field(buf, len, TENSOR_Q, 0), 0))
CORRUPTION(n_dims_five, put_u32(buf + tensor_info_field(buf, len, TENSOR_Q, 0), 5))
CORRUPTION(dim_negative, put_u64(buf + tensor_info_field(buf, len, TENSOR_Q, 1), 1ULL << 63))
CORRUPTION(dims_overflow, {
    put_u64(buf + tensor_info_field(buf, len, TENSOR_Q, 1), 1ULL << 32);
    put_u64(buf + tensor_info_field(buf, len, TENSOR_Q, 2), 1ULL << 32);
})
CORRUPTION(dim_not_block_multiple, put_u64(buf + tensor_info_field(buf, len, TENSOR_Q, 1), 33))
CORRUPTION(too_many_rows, put_u64(buf + tensor_info_field(buf, len, TENSOR_Q, 2), 1000))
CORRUPTION(type_iq2_xxs, put_u32(buf + tensor_info_field(buf, len, TENSOR_Q, 3), 16))
CORRUPTION(type_unknown, put_u32(buf + tensor_info_field(buf, len, TENSOR_Q, 3), 99))
CORRUPTION(offset_misaligned, {
    size_t at = tensor_info_field(buf, len, "output_norm.weight", 4);
    uint64_t off;
    memcpy(&off, buf + at, 8);
    put_u64(buf + at, off + 4);
})
CORRUPTION(offset_past_end, put_u64(buf + tensor_info_field(buf, len, TENSOR_Q, 4), 1ULL << 20))
CORRUPTION(offset_wraps, put_u64(buf + tensor_info_field(buf, len, TENSOR_Q, 4), UINT64_MAX - 31))

static void test_corruptions(const uint8_t *valid, size_t len) {
#define EXPECT(fn, code, needle) expect_corrupt(valid, len, fn, code, needle, #fn)
    EXPECT(bad_magic, PW_ERR_FORMAT, "bad magic 58 47 55 46");
    EXPECT(version_1, PW_ERR_UNSUPPORTED, "version 1");
    EXPECT(version_4, PW_ERR_UNSUPPORTED, "unsupported version 4 (supported: 2, 3)");
    EXPECT(version_big_endian, PW_ERR_UNSUPPORTED, "big-endian");
    EXPECT(huge_kv_count, PW_ERR_FORMAT, "kv_count 18446744073709551615 cannot fit");
    EXPECT(huge_tensor_count, PW_ERR_FORMAT, "tensor_count 1099511627776 cannot fit");
    EXPECT(huge_key_length, PW_ERR_FORMAT,
           "gguf: kv 0: key length 18446744073709551615 at offset 24 exceeds");
    EXPECT(unknown_value_type, PW_ERR_FORMAT,
           "gguf: kv 0 'general.architecture': unknown value type 13");
    EXPECT(huge_string_length, PW_ERR_FORMAT,
           "kv 0 'general.architecture': string value length 18446744073709551610");
    EXPECT(unknown_elem_type, PW_ERR_FORMAT,
           "'tokenizer.ggml.tokens': unknown array element type 77");
    EXPECT(nested_array, PW_ERR_UNSUPPORTED, "'tokenizer.ggml.tokens': arrays of arrays");
    EXPECT(huge_string_count, PW_ERR_FORMAT,
           "'tokenizer.ggml.tokens': array of 4611686018427387904 strings cannot fit");
    EXPECT(huge_float_count, PW_ERR_FORMAT,
           "'tokenizer.ggml.scores': array of 4611686018427387905 float32 elements");
    EXPECT(huge_element_length, PW_ERR_FORMAT,
           "'tokenizer.ggml.tokens': element 0 of 3: string element length 1125899906842624");
    EXPECT(alignment_zero, PW_ERR_FORMAT, "general.alignment must be a non-zero power of two, got 0");
    EXPECT(alignment_48, PW_ERR_FORMAT, "power of two, got 48");
    EXPECT(alignment_wrong_type, PW_ERR_FORMAT, "general.alignment has type int32, expected uint32");
    EXPECT(n_dims_zero, PW_ERR_FORMAT, "tensor '" TENSOR_Q "': n_dims 0 is outside [1, 4]");
    EXPECT(n_dims_five, PW_ERR_FORMAT, "n_dims 5 is outside [1, 4]");
    EXPECT(dim_negative, PW_ERR_FORMAT, "dim 0 is 9223372036854775808, larger than INT64_MAX");
    EXPECT(dims_overflow, PW_ERR_FORMAT, "tensor '" TENSOR_Q "': element count overflows");
    EXPECT(dim_not_block_multiple, PW_ERR_FORMAT, "dim 0 (33) is not a multiple of the q4_0 block");
    EXPECT(too_many_rows, PW_ERR_FORMAT, "tensor '" TENSOR_Q "': data [0, 18000) of the data");
    EXPECT(too_many_rows, PW_ERR_FORMAT, "exceeds file size");
    EXPECT(type_iq2_xxs, PW_ERR_UNSUPPORTED,
           "tensor '" TENSOR_Q "' has ggml type 16 (iq2_xxs), which piecewise does not read");
    EXPECT(type_unknown, PW_ERR_FORMAT, "tensor '" TENSOR_Q "': unknown ggml type 99");
    EXPECT(offset_misaligned, PW_ERR_FORMAT, "'output_norm.weight': data offset 68 is not a "
                                             "multiple of the alignment 32");
    EXPECT(offset_past_end, PW_ERR_FORMAT, "data [1048576, 1048612)");
    EXPECT(offset_wraps, PW_ERR_FORMAT, "exceeds file size");
#undef EXPECT
    /* A kv count one too high reads the tensor infos as a kv: some error,
     * never a crash. */
    uint8_t *buf = malloc(len);
    memcpy(buf, valid, len);
    one_more_kv(buf, len);
    pw_gguf *g = NULL;
    pw_status s = pw_gguf_open_memory(buf, len, &g);
    CHECK(s != PW_OK && strncmp(pw_last_error(), "gguf: ", 6) == 0);
    if (s == PW_OK) pw_gguf_free(g);
    free(buf);
}

static void test_duplicates(void) {
    pw_gguf_writer *w = NULL;
    CHECK_OK(pw_gguf_writer_new(&w));
    CHECK_OK(pw_gguf_writer_add_u32(w, "x.a", 1));
    CHECK_OK(pw_gguf_writer_add_u32(w, "x.b", 2));
    CHECK_OK(pw_gguf_writer_add_string(w, "x.a", "again"));
    uint8_t *buf;
    size_t len;
    CHECK_OK(pw_gguf_writer_to_memory(w, &buf, &len));
    pw_gguf_writer_free(w);
    CHECK_ERR(open_copy(buf, len), PW_ERR_FORMAT, "gguf: duplicate key 'x.a'");
    pw_host_free(buf);

    CHECK_OK(pw_gguf_writer_new(&w));
    float v[2] = {1, 2};
    int64_t d[1] = {2};
    CHECK_OK(pw_gguf_writer_add_tensor(w, "t", PW_F32, 1, d, v));
    CHECK_OK(pw_gguf_writer_add_tensor(w, "u", PW_F32, 1, d, v));
    CHECK_OK(pw_gguf_writer_add_tensor(w, "t", PW_F32, 1, d, v));
    CHECK_OK(pw_gguf_writer_to_memory(w, &buf, &len));
    pw_gguf_writer_free(w);
    CHECK_ERR(open_copy(buf, len), PW_ERR_FORMAT, "gguf: duplicate tensor name 't'");
    pw_host_free(buf);
}

/* Every proper prefix of a file with tensor data is truncated somewhere. */
static void test_every_prefix(const uint8_t *valid, size_t len) {
    CHECK_OK(open_copy(valid, len));
    int wrong = 0, truncated_messages = 0;
    for (size_t cut = 0; cut < len; cut++) {
        pw_status s = open_copy(valid, cut);
        const char *msg = pw_last_error();
        if (s != PW_ERR_FORMAT || strncmp(msg, "gguf: ", 6) != 0) {
            if (wrong++ < 5)
                fprintf(stderr, "prefix %zu of %zu: %s \"%s\"\n", cut, len, pw_status_name(s), msg);
        }
        if (strstr(msg, "truncated") || strstr(msg, "exceeds") || strstr(msg, "cannot fit"))
            truncated_messages++;
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(truncated_messages, len);
    /* A field cut in half names the field and the sizes. */
    size_t at = kv_type_at((uint8_t *)valid, len, "some.flag");
    CHECK_ERR(open_copy(valid, at + 2), PW_ERR_FORMAT,
              "gguf: kv 4 'some.flag': truncated: value type needs 4 bytes at offset");
    CHECK_ERR(open_copy(valid, 10), PW_ERR_FORMAT, "gguf: header: truncated: tensor_count");
    CHECK_ERR(open_copy(valid, 3), PW_ERR_FORMAT, "too small for the magic");
    CHECK_ERR(open_copy(valid, len - 1), PW_ERR_FORMAT,
              "gguf: tensor 'output_norm.weight': data [64, 80) of the data section at");
}

/* Also through the mmap path. */
static void test_truncated_file(const uint8_t *valid, size_t len) {
    char path[] = "/tmp/pw_test_gguf_bad_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, valid, len / 2) == (ssize_t)(len / 2));
    close(fd);
    pw_gguf *g = NULL;
    pw_status s = pw_gguf_open(path, &g);
    CHECK(s == PW_ERR_FORMAT && strncmp(pw_last_error(), "gguf: ", 6) == 0);
    if (s == PW_OK) pw_gguf_free(g);
    unlink(path);
}

/* Random byte flips: any outcome but a crash (or a leak, under ASan). */
static void test_random_flips(const uint8_t *valid, size_t len) {
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    int ok = 0, failed = 0;
    uint8_t *buf = malloc(len);
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, valid, len);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            size_t at = (size_t)(rng % len);
            buf[at] = (uint8_t)(rng >> 32);
        }
        pw_status s = open_copy(buf, len);
        if (s == PW_OK) {
            ok++;
        } else {
            failed++;
            if (pw_last_error()[0] == '\0') failed += 1000000;
        }
    }
    free(buf);
    CHECK(failed < 1000000); /* every failure had a message */
    CHECK(ok + failed % 1000000 == 3000);
    printf("random flips: %d opened, %d rejected\n", ok, failed % 1000000);
}

/* Out of memory at every allocation of an open: PW_ERR_OOM, nothing leaked
 * (ASan), and the open succeeds once allocations do. */
static void test_out_of_memory(const uint8_t *valid, size_t len) {
    int failures = 0, wrong = 0;
    for (int64_t nth = 1; nth < 10000; nth++) {
        pw_host_fail_nth(nth);
        pw_gguf *g = NULL;
        pw_status s = pw_gguf_open_memory(valid, len, &g);
        pw_host_fail_nth(0);
        if (s == PW_OK) {
            pw_gguf_free(g);
            break;
        }
        failures++;
        if (s != PW_ERR_OOM || !strstr(pw_last_error(), "out of")) wrong++;
    }
    CHECK(failures > 5);
    CHECK_EQ_INT(wrong, 0);

    /* And in the writer. */
    wrong = 0;
    for (int64_t nth = 1; nth < 10000; nth++) {
        pw_host_fail_nth(nth);
        uint8_t *buf = NULL;
        size_t n = 0;
        pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
        cfg.n_layers = 1;
        pw_status s = pw_tiny_llama_write_memory(&cfg, &buf, &n);
        pw_host_fail_nth(0);
        if (s == PW_OK) {
            pw_host_free(buf);
            break;
        }
        if (s != PW_ERR_OOM) wrong++;
    }
    CHECK_EQ_INT(wrong, 0);
}

int main(void) {
    size_t len = 0;
    uint8_t *valid = valid_file(&len);
    if (!valid) return pw_test_finish("model_gguf_bad");
    test_corruptions(valid, len);
    test_duplicates();
    test_every_prefix(valid, len);
    test_truncated_file(valid, len);
    test_random_flips(valid, len);
    test_out_of_memory(valid, len);
    pw_host_free(valid);
    return pw_test_finish("model_gguf_bad");
}
