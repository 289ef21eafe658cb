/* Byte-level BPE ("gpt2") tokenizer on a small synthetic vocabulary and
 * merge list written by the tests' GGUF writer, with ids derived by hand,
 * and the pre-tokenizer's word boundaries against Hugging Face tokenizers.
 *
 * The boundary references come from the `tokenizers` package (0.2x):
 *   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)  (gpt2)
 *   pre_tokenizers.Sequence([Digits(individual_digits=True),
 *                            ByteLevel(add_prefix_space=False)])      (smollm)
 * .pre_tokenize_str(s), with the character offsets turned into byte
 * offsets. */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/tokenizer.h"
#include "test_util.h"

#include <string.h>

/* Vocabulary: 0..2 control tokens, 3 a user-defined one, 4 + b for the
 * mapped byte b, then one token per merge in rank order. */
#define B(c) (4 + (c))
enum {
    ID_ENDOFTEXT = 0, ID_IM_START = 1, ID_IM_END = 2, ID_TOOL = 3,
    ID_G_T = 260, ID_HE, ID_G_THE, ID_LL, ID_ELL, ID_HELL, ID_IS, ID_APOS_S, ID_G_G, ID_A_G,
    ID_12, ID_E_ACUTE, N_VOCAB,
};

static const char *const merges[] = {
    "\xc4\xa0 t",     /* Ġ t   -> Ġt   (Ġ is the mapped space, U+0120) */
    "h e",            /* he */
    "\xc4\xa0t he",   /* Ġthe */
    "l l",            /* ll */
    "e ll",           /* ell: never applies, "he" always merges first */
    "h ell",          /* hell: likewise */
    "i s",            /* is */
    "' s",            /* 's */
    "\xc4\xa0 \xc4\xa0", /* ĠĠ */
    "a \xc4\xa0",     /* aĠ: would only apply across a word boundary */
    "1 2",            /* 12 */
    "\xc3\x83 \xc2\xa9", /* Ã © -> é's two bytes (C3 A9) mapped */
    "x y",            /* "xy" is no token: ignored */
};

/* GPT-2's bytes_to_unicode, written out independently of the library. */
static unsigned mapped(unsigned b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) n++;
    return 256 + n;
}

static void utf8(unsigned cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

typedef struct owned {
    uint8_t *buf;
    pw_gguf *g;
    pw_tokenizer *t;
} owned;

static void owned_free(owned *o) {
    pw_tokenizer_free(o->t);
    pw_gguf_free(o->g);
    pw_host_free(o->buf);
}

typedef void (*extra_kvs)(pw_gguf_writer *w);

static pw_status build(const char *pre, extra_kvs extra, bool with_merges, owned *o) {
    static char texts[N_VOCAB][16];
    const char *tokens[N_VOCAB];
    int32_t types[N_VOCAB];
    const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"};
    for (int i = 0; i < 4; i++) {
        tokens[i] = specials[i];
        types[i] = i < 3 ? 3 : 4;
    }
    for (unsigned b = 0; b < 256; b++) {
        utf8(mapped(b), texts[B(b)]);
        tokens[B(b)] = texts[B(b)];
        types[B(b)] = 1;
    }
    for (int k = 0; k < N_VOCAB - ID_G_T; k++) {
        /* merge k's result: its two halves joined */
        const char *m = merges[k], *sp = strchr(m + 1, ' ');
        snprintf(texts[ID_G_T + k], sizeof texts[0], "%.*s%s", (int)(sp - m), m, sp + 1);
        tokens[ID_G_T + k] = texts[ID_G_T + k];
        types[ID_G_T + k] = 1;
    }
    pw_gguf_writer *w = NULL;
    PW_TRY(pw_gguf_writer_new(&w));
    pw_status s = pw_gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2");
    if (s == PW_OK && pre) s = pw_gguf_writer_add_string(w, "tokenizer.ggml.pre", pre);
    if (s == PW_OK) s = pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", tokens, N_VOCAB);
    if (s == PW_OK)
        s = pw_gguf_writer_add_array(w, "tokenizer.ggml.token_type", PW_GGUF_INT32, types, N_VOCAB);
    if (s == PW_OK && with_merges)
        s = pw_gguf_writer_add_string_array(w, "tokenizer.ggml.merges", merges,
                                            sizeof merges / sizeof merges[0]);
    if (s == PW_OK) s = pw_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", ID_IM_END);
    if (s == PW_OK && extra) extra(w);
    size_t len;
    if (s == PW_OK) s = pw_gguf_writer_to_memory(w, &o->buf, &len);
    pw_gguf_writer_free(w);
    if (s == PW_OK) s = pw_gguf_open_memory(o->buf, len, &o->g);
    if (s == PW_OK) s = pw_tokenizer_new(o->g, &o->t);
    return s;
}

static void check_encode(const pw_tokenizer *t, const char *text, unsigned flags,
                         const int32_t *want, int64_t n_want) {
    int32_t *ids = NULL;
    int64_t n = -1;
    CHECK_OK(pw_tokenizer_encode(t, text, strlen(text), flags, &ids, &n));
    pw_test_checks++;
    if (!(n == n_want && memcmp(ids, want, (size_t)n * sizeof *ids) == 0)) {
        pw_test_failures++;
        fprintf(stderr, "encode \"%s\": got", text);
        for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    if (n >= 0) {
        /* Byte-level BPE decodes back to the exact input. */
        char *back = NULL;
        CHECK_OK(pw_tokenizer_decode(t, ids, n, &back, NULL));
        if (!(flags & PW_TOKENIZE_PARSE_SPECIAL)) CHECK_STREQ(back, text);
        pw_host_free(back);
    }
    pw_host_free(ids);
}
#define ENCODE(t, text, flags, ...)                                                            \
    do {                                                                                       \
        const int32_t want_[] = {__VA_ARGS__};                                                 \
        check_encode(t, text, flags, want_, (int64_t)(sizeof want_ / sizeof want_[0]));        \
    } while (0)

static void test_gpt2_vocab(void) {
    owned o = {0};
    CHECK_OK(build(NULL, NULL, true, &o));
    pw_tokenizer *t = o.t;
    if (!t) {
        owned_free(&o);
        return;
    }
    CHECK_EQ_INT(pw_tokenizer_get_kind(t), PW_TOKENIZER_BPE);
    CHECK_EQ_INT(pw_tokenizer_vocab_size(t), N_VOCAB);
    CHECK_EQ_INT(pw_tokenizer_bos(t), -1);
    CHECK_EQ_INT(pw_tokenizer_eos(t), ID_IM_END);
    CHECK(!pw_tokenizer_adds_bos(t));
    CHECK_EQ_INT(pw_tokenizer_default_flags(t), PW_TOKENIZE_ADD_SPECIAL | PW_TOKENIZE_PARSE_SPECIAL);
    CHECK(pw_tokenizer_is_eog(t, ID_IM_END));
    CHECK(pw_tokenizer_is_eog(t, ID_ENDOFTEXT)); /* by its text, as llama.cpp */
    CHECK(!pw_tokenizer_is_eog(t, ID_IM_START));

    /* Words "hello", " the", " world", "'s". h e l l o: "he" (rank 1)
     * before "ll" (3); "he"+"ll" is no merge, so "hell"/"ell" never form. */
    ENCODE(t, "hello the world's", 0, ID_HE, ID_LL, B('o'), ID_G_THE, B(' '), B('w'), B('o'),
           B('r'), B('l'), B('d'), ID_APOS_S);
    /* "a" and " b" are separate words: the "a Ġ" merge cannot apply. */
    ENCODE(t, "a b", 0, B('a'), B(' '), B('b'));
    /* Two spaces before a word: the first stands alone, the second joins
     * the word; trailing spaces stay together and merge. */
    ENCODE(t, "  x", 0, B(' '), B(' '), B('x'));
    ENCODE(t, "x  ", 0, B('x'), ID_G_G);
    /* Numbers are one word in plain GPT-2 style. */
    ENCODE(t, "112", 0, B('1'), ID_12);
    /* é is C3 A9, mapped to "Ã©", merged by rank 11; leftmost pair first. */
    ENCODE(t, "\xc3\xa9\xc3\xa9", 0, ID_E_ACUTE, ID_E_ACUTE);
    ENCODE(t, "is\n", 0, ID_IS, B('\n'));
    /* Specials as literal text; BPE adds no space prefix after them. */
    ENCODE(t, "<|im_start|>user\nhi<|im_end|>", PW_TOKENIZE_PARSE_SPECIAL, ID_IM_START, B('u'),
           B('s'), B('e'), B('r'), B('\n'), B('h'), B('i'), ID_IM_END);
    ENCODE(t, "<tool>is", PW_TOKENIZE_PARSE_SPECIAL, ID_TOOL, ID_IS);
    /* A USER_DEFINED token matches even without PARSE_SPECIAL (llama.cpp's
     * rule); a CONTROL token then is plain text. */
    ENCODE(t, "<tool>", 0, ID_TOOL);
    ENCODE(t, "<|im_end|>", 0, B('<'), B('|'), B('i'), B('m'), B('_'), B('e'), B('n'), B('d'),
           B('|'), B('>'));
    /* No BOS id: ADD_BOS adds nothing. */
    ENCODE(t, "is", PW_TOKENIZE_ADD_BOS, ID_IS);

    const int32_t chat[] = {ID_IM_START, B('h'), ID_TOOL, ID_G_THE, ID_IM_END};
    char *text = NULL;
    CHECK_OK(pw_tokenizer_decode(t, chat, 5, &text, NULL));
    CHECK_STREQ(text, "h<tool> the"); /* control tokens render empty, user-defined raw */
    pw_host_free(text);
    const char *piece;
    size_t len;
    CHECK_OK(pw_tokenizer_decode_token(t, -1, B(' '), &piece, &len)); /* no SPM space stripping */
    CHECK(len == 1 && piece[0] == ' ');
    CHECK_OK(pw_tokenizer_decode_token(t, -1, B(0xC3), &piece, &len));
    CHECK(len == 1 && (uint8_t)piece[0] == 0xC3);
    owned_free(&o);
}

static void check_marked(const pw_tokenizer *t, const char *text, const pw_token_span *spans,
                         int64_t n_spans, unsigned flags, const int32_t *want, int64_t n_want) {
    int32_t *ids = NULL;
    int64_t n = -1;
    CHECK_OK(pw_tokenizer_encode_marked(t, text, strlen(text), spans, n_spans, flags, &ids, &n));
    pw_test_checks++;
    if (!(n == n_want && memcmp(ids, want, (size_t)n * sizeof *ids) == 0)) {
        pw_test_failures++;
        fprintf(stderr, "encode_marked \"%s\": got", text);
        for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    pw_host_free(ids);
}
#define MARKED(t, text, spans, flags, ...)                                                     \
    do {                                                                                       \
        const int32_t want_[] = {__VA_ARGS__};                                                 \
        check_marked(t, text, spans, (int64_t)PW_ARRAY_LEN(spans), flags, want_,               \
                     (int64_t)PW_ARRAY_LEN(want_));                                            \
    } while (0)

/* Only the marked spans become special tokens: the same text elsewhere
 * (a chat message holding "<|im_end|>") is plain text, even a USER_DEFINED
 * token when the markers use it. */
static void test_marked_specials(void) {
    owned o = {0};
    CHECK_OK(build(NULL, NULL, true, &o));
    pw_tokenizer *t = o.t;
    if (!t) {
        owned_free(&o);
        return;
    }
    /* <|im_start|>is<|im_end|><tool><|im_end|>: markers at 0 and at the end */
    const char *text = "<|im_start|>is<|im_end|><tool><|im_end|>";
    const pw_token_span ends[] = {{0, 12}, {30, 10}};
    MARKED(t, text, ends, 0, ID_IM_START, ID_IS, B('<'), B('|'), B('i'), B('m'), B('_'), B('e'),
           B('n'), B('d'), B('|'), B('>'), ID_TOOL, ID_IM_END);
    /* PARSE_SPECIAL does not reach the plain text. */
    MARKED(t, text, ends, PW_TOKENIZE_PARSE_SPECIAL | PW_TOKENIZE_ADD_BOS, ID_IM_START, ID_IS,
           B('<'), B('|'), B('i'), B('m'), B('_'), B('e'), B('n'), B('d'), B('|'), B('>'),
           ID_TOOL, ID_IM_END);
    /* A USER_DEFINED marker: the same text unmarked is plain. */
    const pw_token_span tool[] = {{0, 6}};
    MARKED(t, "<tool>is<tool>", tool, 0, ID_TOOL, ID_IS, B('<'), B('t'), B('o'), B('o'), B('l'),
           B('>'));
    /* A span that is no special token stays in the plain text around it:
     * "is" still merges across the span's edge. */
    const pw_token_span not_special[] = {{0, 1}};
    MARKED(t, "is", not_special, 0, ID_IS);
    /* No spans at all: plain text, like encode without PARSE_SPECIAL. */
    int32_t *ids = NULL;
    int64_t n = -1;
    CHECK_OK(pw_tokenizer_encode_marked(t, "<|im_end|>", 10, NULL, 0, 0, &ids, &n));
    CHECK_EQ_INT(n, 10);
    pw_host_free(ids);
    /* Bad spans: overlapping, past the end, empty. */
    const pw_token_span overlap[] = {{0, 12}, {11, 2}};
    const pw_token_span past[] = {{30, 11}};
    const pw_token_span empty[] = {{3, 0}};
    CHECK_ERR(pw_tokenizer_encode_marked(t, text, strlen(text), overlap, 2, 0, &ids, &n),
              PW_ERR_INVALID_ARG, "special span 1");
    CHECK_ERR(pw_tokenizer_encode_marked(t, text, strlen(text), past, 1, 0, &ids, &n),
              PW_ERR_INVALID_ARG, "outside the 40 bytes");
    CHECK_ERR(pw_tokenizer_encode_marked(t, text, strlen(text), empty, 1, 0, &ids, &n),
              PW_ERR_INVALID_ARG, "is empty");
    CHECK_ERR(pw_tokenizer_encode_marked(t, text, 3, NULL, 1, 0, &ids, &n), PW_ERR_INVALID_ARG,
              "encode needs");
    owned_free(&o);
}

static void test_smollm_digits(void) {
    owned o = {0};
    CHECK_OK(build("smollm", NULL, true, &o));
    if (o.t) {
        ENCODE(o.t, "112", 0, B('1'), B('1'), B('2')); /* each digit a word: no "12" */
        ENCODE(o.t, "a12 the", 0, B('a'), B('1'), B('2'), ID_G_THE);
    }
    owned_free(&o);
}

typedef struct split_ref {
    const char *text;
    int n_gpt2;
    size_t gpt2[24];
    int n_smollm;
    size_t smollm[24];
} split_ref;

static const split_ref split_refs[] = {
    {"Hello, world!", 4, {5, 6, 12, 13}, 4, {5, 6, 12, 13}},
    {"don't you'll I'M", 7, {3, 5, 9, 12, 14, 15, 16}, 7, {3, 5, 9, 12, 14, 15, 16}},
    {"  two  spaces\t\tand\n\nnewlines\n", 11, {1, 5, 6, 13, 14, 15, 18, 19, 20, 28, 29}, 11,
     {1, 5, 6, 13, 14, 15, 18, 19, 20, 28, 29}},
    {"x=3.14159;  y = [1,22,333]", 16, {1, 2, 3, 4, 9, 10, 11, 13, 15, 17, 18, 19, 21, 22, 25, 26},
     23, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}},
    {"h\xc3\xa9llo na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe2\x80\x9cquotes\xe2\x80\x9d "
     "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82",
     9, {6, 13, 19, 23, 27, 33, 36, 46, 51}, 9, {6, 13, 19, 23, 27, 33, 36, 46, 51}},
    {"tail   ", 2, {4, 7}, 2, {4, 7}},
    {" a", 1, {2}, 1, {2}},
    {"it's 2024!!", 4, {2, 4, 9, 11}, 8, {2, 4, 5, 6, 7, 8, 9, 11}},
    {"a\xc2\xa0" "b", 3, {1, 3, 4}, 3, {1, 3, 4}},
    {"\xc2\xbc \xc2\xbd x\xc2\xb2", 4, {2, 5, 7, 9}, 5, {2, 3, 5, 7, 9}},
    {"'hello' 'S", 5, {1, 6, 7, 9, 10}, 5, {1, 6, 7, 9, 10}},
};

static void check_split(const pw_tokenizer *t, const char *text, const size_t *want, int n_want,
                        const char *mode) {
    size_t *ends = NULL;
    int64_t n = 0;
    CHECK_OK(pw_tokenizer_pretokenize(t, text, strlen(text), &ends, &n));
    pw_test_checks++;
    if (!(n == n_want && memcmp(ends, want, (size_t)n * sizeof *ends) == 0)) {
        pw_test_failures++;
        fprintf(stderr, "%s split \"%s\": got", mode, text);
        for (int64_t i = 0; i < n; i++) fprintf(stderr, " %zu", ends[i]);
        fprintf(stderr, "\n");
    }
    pw_host_free(ends);
}

static void test_pretokenizer_references(void) {
    owned gpt2 = {0}, smollm = {0};
    CHECK_OK(build(NULL, NULL, true, &gpt2));
    CHECK_OK(build("smollm", NULL, true, &smollm));
    if (gpt2.t && smollm.t)
        for (size_t i = 0; i < sizeof split_refs / sizeof split_refs[0]; i++) {
            const split_ref *r = &split_refs[i];
            check_split(gpt2.t, r->text, r->gpt2, r->n_gpt2, "gpt2");
            check_split(smollm.t, r->text, r->smollm, r->n_smollm, "smollm");
        }
    owned_free(&gpt2);
    owned_free(&smollm);
}

static void add_bos_on(pw_gguf_writer *w) {
    pw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", ID_ENDOFTEXT);
    pw_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
}

static void bad_merge(pw_gguf_writer *w) {
    const char *m[] = {"h e", "he"};
    pw_gguf_writer_add_string_array(w, "tokenizer.ggml.merges", m, 2);
}

static void test_options_and_errors(void) {
    owned o = {0};
    CHECK_OK(build(NULL, add_bos_on, true, &o));
    if (o.t) {
        CHECK(pw_tokenizer_adds_bos(o.t));
        ENCODE(o.t, "is", pw_tokenizer_default_flags(o.t), ID_ENDOFTEXT, ID_IS);
    }
    owned_free(&o);

    owned e = {0};
    CHECK_ERR(build(NULL, NULL, false, &e), PW_ERR_NOT_FOUND, "key 'tokenizer.ggml.merges' not found");
    owned_free(&e);
    memset(&e, 0, sizeof e);
    CHECK_ERR(build(NULL, bad_merge, false, &e), PW_ERR_FORMAT,
              "tokenizer.ggml.merges[1] 'he' is not two tokens separated by a space");
    owned_free(&e);
    memset(&e, 0, sizeof e);
    CHECK_ERR(build("deepseek-llm", NULL, true, &e), PW_ERR_UNSUPPORTED,
              "pre-tokenizer 'deepseek-llm' (tokenizer.ggml.pre) is not supported (supported: "
              "default, gpt2");
    owned_free(&e);
}

/* A vocabulary that lacks a byte's token and has no unknown token. */
static void test_missing_byte(void) {
    const char *tokens[] = {"a", "b", "ab"};
    const char *m[] = {"a b"};
    pw_gguf_writer *w = NULL;
    CHECK_OK(pw_gguf_writer_new(&w));
    CHECK_OK(pw_gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2"));
    CHECK_OK(pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", tokens, 3));
    CHECK_OK(pw_gguf_writer_add_string_array(w, "tokenizer.ggml.merges", m, 1));
    owned o = {0};
    size_t len;
    CHECK_OK(pw_gguf_writer_to_memory(w, &o.buf, &len));
    pw_gguf_writer_free(w);
    CHECK_OK(pw_gguf_open_memory(o.buf, len, &o.g));
    if (o.g) CHECK_OK(pw_tokenizer_new(o.g, &o.t));
    if (o.t) {
        const int32_t ab[] = {2};
        check_encode(o.t, "ab", 0, ab, 1);
        int32_t *ids = NULL;
        int64_t n;
        CHECK_ERR(pw_tokenizer_encode(o.t, "az", 2, 0, &ids, &n), PW_ERR_NOT_FOUND,
                  "no token for mapped character U+7A and the vocabulary has no unknown token");
    }
    owned_free(&o);
}

int main(void) {
    test_marked_specials();
    test_gpt2_vocab();
    test_smollm_digits();
    test_pretokenizer_references();
    test_options_and_errors();
    test_missing_byte();
    return pw_test_finish("model_tokenizer_bpe");
}
