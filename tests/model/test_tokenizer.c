/* SentencePiece ("llama") tokenizer on the tiny Llama vocabulary from the
 * tests' GGUF writer, with ids derived by hand from its merge list, and
 * every error path of building a tokenizer from metadata. */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/tokenizer.h"
#include "test_util.h"

#include <string.h>

/* Ids in the tiny vocabulary (gguf_writer.c): 0 <unk>, 1 <s>, 2 </s>,
 * 3 + b for byte b, 259 + k for merge k, 311 "▁", 312 + c - '!' for the
 * printable ASCII character c. */
#define BYTE(b) (3 + (b))
#define CHAR(c) (312 + ((c) - '!'))
enum {
    ID_SP = 311, ID_HE = 260, ID_A = 261, ID_LL = 274, ID_H = 273, ID_ONCE = 300,
    ID_UPON = 303, ID_TIME = 306, ID_THE_LOWER = 263, ID_T = 259,
};

typedef struct owned_gguf {
    uint8_t *buf;
    pw_gguf *g;
} owned_gguf;

static void owned_free(owned_gguf *o) {
    pw_gguf_free(o->g);
    pw_host_free(o->buf);
}

static pw_status open_writer(pw_gguf_writer *w, owned_gguf *o) {
    size_t len;
    o->g = NULL;
    PW_TRY(pw_gguf_writer_to_memory(w, &o->buf, &len));
    return pw_gguf_open_memory(o->buf, len, &o->g);
}

static pw_tokenizer *tiny_tokenizer(owned_gguf *o) {
    pw_gguf_writer *w = NULL;
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.n_layers = 1;
    CHECK_OK(pw_gguf_writer_new(&w));
    CHECK_OK(pw_tiny_llama_add(w, &cfg));
    CHECK_OK(open_writer(w, o));
    pw_gguf_writer_free(w);
    pw_tokenizer *t = NULL;
    CHECK_OK(pw_tokenizer_new(o->g, &t));
    return t;
}

static void check_encode(const pw_tokenizer *t, const char *text, unsigned flags,
                         const int32_t *want, int64_t n_want) {
    int32_t *ids = NULL;
    int64_t n = -1;
    CHECK_OK(pw_tokenizer_encode(t, text, strlen(text), flags, &ids, &n));
    int same = n == n_want && (n == 0 || memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    pw_test_checks++;
    if (!same) {
        pw_test_failures++;
        fprintf(stderr, "encode \"%s\": got", text);
        for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, ", want");
        for (int64_t i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    pw_host_free(ids);
}
#define ENCODE(t, text, flags, ...)                                                            \
    do {                                                                                       \
        const int32_t want_[] = {__VA_ARGS__};                                                 \
        check_encode(t, text, flags, want_, (int64_t)(sizeof want_ / sizeof want_[0]));        \
    } while (0)

static void check_round_trip(const pw_tokenizer *t, const char *text) {
    int32_t *ids = NULL;
    int64_t n = 0;
    char *back = NULL;
    CHECK_OK(pw_tokenizer_encode(t, text, strlen(text), PW_TOKENIZE_ADD_BOS, &ids, &n));
    CHECK_OK(pw_tokenizer_decode(t, ids, n, &back, NULL));
    CHECK_STREQ(back, text);
    /* Streaming the pieces gives the same bytes. */
    size_t cap = strlen(text) + 16, used = 0;
    char *streamed = calloc(1, cap);
    for (int64_t i = 0; i < n; i++) {
        const char *piece;
        size_t len;
        CHECK_OK(pw_tokenizer_decode_token(t, i ? ids[i - 1] : -1, ids[i], &piece, &len));
        if (used + len < cap) memcpy(streamed + used, piece, len);
        used += len;
    }
    CHECK(used < cap && strcmp(streamed, text) == 0);
    free(streamed);
    pw_host_free(back);
    pw_host_free(ids);
}

static void test_tiny_spm(void) {
    owned_gguf o = {0};
    pw_tokenizer *t = tiny_tokenizer(&o);
    if (!t) {
        owned_free(&o);
        return;
    }
    CHECK_EQ_INT(pw_tokenizer_get_kind(t), PW_TOKENIZER_SPM);
    CHECK_EQ_INT(pw_tokenizer_vocab_size(t), 512);
    CHECK_EQ_INT(pw_tokenizer_bos(t), 1);
    CHECK_EQ_INT(pw_tokenizer_eos(t), 2);
    CHECK_EQ_INT(pw_tokenizer_unk(t), 0);
    CHECK(pw_tokenizer_adds_bos(t));
    CHECK_EQ_INT(pw_tokenizer_default_flags(t), PW_TOKENIZE_ADD_SPECIAL | PW_TOKENIZE_PARSE_SPECIAL);
    CHECK(pw_tokenizer_is_eog(t, 2));
    CHECK(!pw_tokenizer_is_eog(t, 1));
    CHECK(!pw_tokenizer_is_eog(t, 99999));
    CHECK_STREQ(pw_tokenizer_token_text(t, ID_ONCE), "\xe2\x96\x81Once");
    CHECK(pw_tokenizer_token_text(t, 512) == NULL);
    CHECK_EQ_INT(pw_tokenizer_token_type(t, BYTE(0x41)), PW_TOKEN_BYTE);
    CHECK_EQ_INT(pw_tokenizer_token_type(t, 1), PW_TOKEN_CONTROL);
    int32_t id;
    CHECK_OK(pw_tokenizer_find(t, "he", &id));
    CHECK_EQ_INT(id, ID_HE);
    CHECK_ERR(pw_tokenizer_find(t, "zzz", &id), PW_ERR_NOT_FOUND, "no token 'zzz'");

    /* "▁Once▁upon▁a▁time": every word reaches its whole-word piece through
     * the score order (e.g. ▁ u p o n: "on" -7 first, then "▁u" -43, "▁up"
     * -44, "▁upon"). */
    ENCODE(t, "Once upon a time", PW_TOKENIZE_ADD_BOS, 1, ID_ONCE, ID_UPON, ID_A, ID_TIME);
    ENCODE(t, "Once upon a time", 0, ID_ONCE, ID_UPON, ID_A, ID_TIME);
    /* ▁ h e l l o !: "he" (-2) beats "▁h" (-15); then "ll" (-16); "▁he"
     * is no piece, so "▁" stays alone. */
    ENCODE(t, "hello!", 0, ID_SP, ID_HE, ID_LL, CHAR('o'), CHAR('!'));
    /* ▁ t h e: "▁t" (-1) merges before "he" (-2); "▁th" is no piece, so
     * "he" merges next, and "▁t" + "he" = "▁the". */
    ENCODE(t, "the", 0, ID_THE_LOWER);
    /* é (C3 A9) has no piece: byte fallback. */
    ENCODE(t, "é", 0, ID_SP, BYTE(0xC3), BYTE(0xA9));
    /* Two spaces: the prefix "▁" and the text's own. */
    ENCODE(t, " a", 0, ID_SP, ID_A);
    ENCODE(t, "", PW_TOKENIZE_ADD_BOS, 1);
    int32_t *none = NULL;
    int64_t n_none = -1;
    CHECK_OK(pw_tokenizer_encode(t, "", 0, 0, &none, &n_none));
    CHECK(none != NULL && n_none == 0);
    pw_host_free(none);
    /* Tabs and newlines are not spaces for SentencePiece: bytes. */
    ENCODE(t, "a\tb\n", 0, ID_A, BYTE('\t'), CHAR('b'), BYTE('\n'));

    /* Special tokens as literal text: recognized only when asked; the text
     * after a special gets the space prefix again, as in llama.cpp. */
    ENCODE(t, "<s>hi</s>", PW_TOKENIZE_PARSE_SPECIAL, 1, ID_H, CHAR('i'), 2);
    ENCODE(t, "<s>hi</s>", 0, ID_SP, CHAR('<'), CHAR('s'), CHAR('>'), CHAR('h'), CHAR('i'), CHAR('<'),
           CHAR('/'), CHAR('s'), CHAR('>'));
    /* Marked spans (a chat template's markers) are the only specials; the
     * text after each gets the space prefix, as after a parsed special. */
    const pw_token_span marks[] = {{0, 3}, {9, 4}};
    int32_t *marked = NULL;
    int64_t n_marked = -1;
    CHECK_OK(pw_tokenizer_encode_marked(t, "<s>hi<s> </s>a", 14, marks, 2, PW_TOKENIZE_ADD_BOS,
                                        &marked, &n_marked));
    const int32_t want_marked[] = {1, 1, ID_H, CHAR('i'), CHAR('<'), CHAR('s'), CHAR('>'), ID_SP,
                                   2, ID_A};
    CHECK(n_marked == 10 && memcmp(marked, want_marked, sizeof want_marked) == 0);
    pw_host_free(marked);
    /* <unk> is UNKNOWN, not CONTROL: never matched as a special. */
    ENCODE(t, "<unk>", PW_TOKENIZE_PARSE_SPECIAL, ID_SP, CHAR('<'), CHAR('u'), CHAR('n'),
           CHAR('k'), CHAR('>'));

    /* Decoding: BOS renders empty, the prefix space is dropped after it. */
    const int32_t once[] = {1, ID_ONCE, ID_UPON, ID_A, ID_TIME, 2};
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(pw_tokenizer_decode(t, once, 6, &text, &len));
    CHECK_STREQ(text, "Once upon a time");
    CHECK_EQ_INT(len, 16);
    pw_host_free(text);
    const char *piece;
    CHECK_OK(pw_tokenizer_decode_token(t, -1, 1, &piece, &len));
    CHECK_EQ_INT(len, 0);
    CHECK_OK(pw_tokenizer_decode_token(t, 1, ID_ONCE, &piece, &len));
    CHECK(len == 4 && memcmp(piece, "Once", 4) == 0);
    CHECK_OK(pw_tokenizer_decode_token(t, ID_ONCE, ID_UPON, &piece, &len));
    CHECK(len == 5 && memcmp(piece, " upon", 5) == 0);
    CHECK_OK(pw_tokenizer_decode_token(t, ID_UPON, BYTE(0xC3), &piece, &len));
    CHECK(len == 1 && (uint8_t)piece[0] == 0xC3);
    CHECK_OK(pw_tokenizer_decode_token(t, ID_UPON, 0, &piece, &len));
    CHECK(len == 3 && memcmp(piece, "\xe2\x96\x85", 3) == 0); /* <unk> as llama.cpp shows it */
    CHECK_ERR(pw_tokenizer_decode_token(t, -1, 512, &piece, &len), PW_ERR_INVALID_ARG,
              "token id 512 out of range [0, 512)");
    const int32_t bad[] = {5, -3};
    CHECK_ERR(pw_tokenizer_decode(t, bad, 2, &text, NULL), PW_ERR_INVALID_ARG,
              "token 1 has id -3, out of range");

    check_round_trip(t, "Once upon a time");
    check_round_trip(t, "hello, world!  two spaces");
    check_round_trip(t, " leading and trailing ");
    check_round_trip(t, "naïve café — 日本語 🙂");
    check_round_trip(t, "tabs\tand\nnewlines\n");
    check_round_trip(t, "");

    size_t *ends = NULL;
    int64_t n_words;
    CHECK_OK(pw_tokenizer_pretokenize(t, "a b", 3, &ends, &n_words));
    CHECK(n_words == 1 && ends[0] == 3);
    pw_host_free(ends);

    pw_tokenizer_free(t);
    owned_free(&o);
}

/* ---- errors building from metadata ---------------------------------------------- */

typedef void (*vocab_edit)(pw_gguf_writer *w);

static const char *const three_tokens[] = {"<unk>", "<s>", "a"};

static pw_status build_with(const char *model, vocab_edit edit, bool with_tokens) {
    pw_gguf_writer *w = NULL;
    CHECK_OK(pw_gguf_writer_new(&w));
    if (model) CHECK_OK(pw_gguf_writer_add_string(w, "tokenizer.ggml.model", model));
    if (with_tokens)
        CHECK_OK(pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", three_tokens, 3));
    if (edit) edit(w);
    owned_gguf o = {0};
    CHECK_OK(open_writer(w, &o));
    pw_gguf_writer_free(w);
    pw_tokenizer *t = NULL;
    pw_status s = o.g ? pw_tokenizer_new(o.g, &t) : PW_ERR_INTERNAL;
    pw_tokenizer_free(t);
    owned_free(&o);
    return s;
}

static void short_scores(pw_gguf_writer *w) {
    const float s[2] = {0, 0};
    pw_gguf_writer_add_array(w, "tokenizer.ggml.scores", PW_GGUF_FLOAT32, s, 2);
}
static void string_scores(pw_gguf_writer *w) {
    pw_gguf_writer_add_string_array(w, "tokenizer.ggml.scores", three_tokens, 3);
}
static void bad_token_type(pw_gguf_writer *w) {
    const int32_t ty[3] = {2, 9, 1};
    pw_gguf_writer_add_array(w, "tokenizer.ggml.token_type", PW_GGUF_INT32, ty, 3);
}
static void long_token_types(pw_gguf_writer *w) {
    const int32_t ty[4] = {2, 3, 1, 1};
    pw_gguf_writer_add_array(w, "tokenizer.ggml.token_type", PW_GGUF_INT32, ty, 4);
}
static void bos_out_of_range(pw_gguf_writer *w) {
    pw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 50);
}
static void eos_string(pw_gguf_writer *w) {
    pw_gguf_writer_add_string(w, "tokenizer.ggml.eos_token_id", "2");
}
static void add_bos_not_bool(pw_gguf_writer *w) {
    pw_gguf_writer_add_u32(w, "tokenizer.ggml.add_bos_token", 1);
}
static void int_tokens(pw_gguf_writer *w) {
    const int32_t v[2] = {1, 2};
    pw_gguf_writer_add_array(w, "tokenizer.ggml.tokens", PW_GGUF_INT32, v, 2);
}
static void empty_tokens(pw_gguf_writer *w) {
    pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", NULL, 0);
}

static void test_metadata_errors(void) {
    CHECK_ERR(build_with(NULL, NULL, true), PW_ERR_NOT_FOUND, "key 'tokenizer.ggml.model' not found");
    CHECK_ERR(build_with("bert", NULL, true), PW_ERR_UNSUPPORTED,
              "tokenizer.ggml.model 'bert' is not supported (supported: llama, gpt2)");
    CHECK_ERR(build_with("llama", NULL, false), PW_ERR_NOT_FOUND, "'tokenizer.ggml.tokens' not found");
    CHECK_ERR(build_with("llama", int_tokens, false), PW_ERR_FORMAT,
              "'tokenizer.ggml.tokens' is an array of int32, expected an array of string");
    CHECK_ERR(build_with("llama", empty_tokens, false), PW_ERR_FORMAT,
              "tokenizer.ggml.tokens has 0 entries");
    CHECK_ERR(build_with("llama", short_scores, true), PW_ERR_FORMAT,
              "tokenizer.ggml.scores has 2 entries but tokenizer.ggml.tokens has 3");
    CHECK_ERR(build_with("llama", string_scores, true), PW_ERR_FORMAT,
              "tokenizer.ggml.scores: gguf: key 'tokenizer.ggml.scores' is an array of string");
    CHECK_ERR(build_with("llama", bad_token_type, true), PW_ERR_FORMAT,
              "tokenizer.ggml.token_type[1] = 9 is not a token type");
    CHECK_ERR(build_with("llama", long_token_types, true), PW_ERR_FORMAT,
              "tokenizer.ggml.token_type has 4 entries but tokenizer.ggml.tokens has 3");
    CHECK_ERR(build_with("llama", bos_out_of_range, true), PW_ERR_FORMAT,
              "tokenizer.ggml.bos_token_id = 50 is outside the vocabulary [0, 3)");
    CHECK_ERR(build_with("llama", eos_string, true), PW_ERR_FORMAT,
              "'tokenizer.ggml.eos_token_id' has type string");
    CHECK_ERR(build_with("llama", add_bos_not_bool, true), PW_ERR_FORMAT,
              "'tokenizer.ggml.add_bos_token' has type uint32, expected bool");
    CHECK_ERR(pw_tokenizer_new(NULL, NULL), PW_ERR_INVALID_ARG, "needs a gguf");
}

/* A vocabulary without byte tokens: unknown characters become <unk>; with
 * no <unk> either, encoding says which byte it could not represent. */
static void no_unk(pw_gguf_writer *w) {
    pw_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", UINT32_MAX);
    pw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", UINT32_MAX);
}

static void test_missing_byte_tokens(void) {
    for (int with_unk = 1; with_unk >= 0; with_unk--) {
        pw_gguf_writer *w = NULL;
        CHECK_OK(pw_gguf_writer_new(&w));
        CHECK_OK(pw_gguf_writer_add_string(w, "tokenizer.ggml.model", "llama"));
        CHECK_OK(pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", three_tokens, 3));
        if (!with_unk) no_unk(w);
        owned_gguf o = {0};
        CHECK_OK(open_writer(w, &o));
        pw_gguf_writer_free(w);
        pw_tokenizer *t = NULL;
        CHECK_OK(pw_tokenizer_new(o.g, &t));
        if (t) {
            int32_t *ids = NULL;
            int64_t n = 0;
            if (with_unk) {
                CHECK_OK(pw_tokenizer_encode(t, "a", 1, PW_TOKENIZE_ADD_BOS, &ids, &n));
                /* "▁" is no piece and there are no byte tokens: one <unk>
                 * per byte of its UTF-8 (E2 96 81), then "a". */
                CHECK(n == 5 && ids[0] == 1 && ids[1] == 0 && ids[2] == 0 && ids[3] == 0 &&
                      ids[4] == 2);
                pw_host_free(ids);
            } else {
                CHECK_EQ_INT(pw_tokenizer_bos(t), -1);
                CHECK_ERR(pw_tokenizer_encode(t, "a", 1, PW_TOKENIZE_ADD_BOS, &ids, &n),
                          PW_ERR_NOT_FOUND, "no token for byte 0xE2 and the vocabulary has no "
                                            "unknown token");
            }
            CHECK_ERR(pw_tokenizer_encode(t, NULL, 3, 0, &ids, &n), PW_ERR_INVALID_ARG, "encode needs");
        }
        pw_tokenizer_free(t);
        owned_free(&o);
    }
}

/* Out of memory at every allocation of building, encoding and decoding. */
static void test_out_of_memory(void) {
    owned_gguf o = {0};
    pw_tokenizer *base = tiny_tokenizer(&o);
    pw_tokenizer_free(base);
    if (!o.g) return;
    int wrong = 0, attempts = 0;
    const char *sample = "<s>Once upon a time, caf\xc3\xa9";
    for (int64_t nth = 1; nth < 100000; nth++) {
        pw_host_fail_nth(nth);
        pw_tokenizer *t = NULL;
        int32_t *ids = NULL;
        int64_t n = 0;
        char *text = NULL;
        pw_status s = pw_tokenizer_new(o.g, &t);
        if (s == PW_OK) s = pw_tokenizer_encode(t, sample, strlen(sample), 3, &ids, &n);
        if (s == PW_OK) s = pw_tokenizer_decode(t, ids, n, &text, NULL);
        pw_host_fail_nth(0);
        pw_host_free(text);
        pw_host_free(ids);
        pw_tokenizer_free(t);
        attempts++;
        if (s == PW_OK) break;
        if (s != PW_ERR_OOM) wrong++;
    }
    CHECK(attempts > 1000);
    CHECK_EQ_INT(wrong, 0);
    owned_free(&o);
}

int main(void) {
    test_tiny_spm();
    test_metadata_errors();
    test_missing_byte_tokens();
    test_out_of_memory();
    return pw_test_finish("model_tokenizer");
}
