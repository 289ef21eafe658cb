/* Tokenizers built from GGUF metadata (tokenizer.ggml.*), following
 * llama.cpp:
 *
 *   "llama"  SentencePiece BPE: spaces become U+2581 "▁", a "▁" is
 *            prefixed to the text (tokenizer.ggml.add_space_prefix, default
 *            true) and after every special token, adjacent pieces merge
 *            greedily by highest vocabulary score, and characters with no
 *            piece fall back to <0xNN> byte tokens.
 *   "gpt2"   byte-level BPE: a GPT-2 style pre-tokenizer splits the text
 *            into words, each word's bytes are mapped to printable code
 *            points, and merges apply in rank order (tokenizer.ggml.merges).
 *
 * With PW_TOKENIZE_PARSE_SPECIAL, the text of CONTROL tokens (<s>,
 * <|im_start|>, ...) is recognized where it appears literally and becomes
 * that single token; without it that text is plain text. USER_DEFINED
 * tokens (Gemma's whitespace runs and HTML tags) match either way, as in
 * llama.cpp. Text that mixes a template's markers with user text (a chat
 * prompt) goes through pw_tokenizer_encode_marked instead, so that only the
 * markers become special tokens.
 * docs/gguf.md lists the details and the approximations. */
#ifndef PW_MODEL_TOKENIZER_H
#define PW_MODEL_TOKENIZER_H

#include "model/gguf.h"

typedef struct pw_tokenizer pw_tokenizer;

typedef enum pw_tokenizer_kind {
    PW_TOKENIZER_SPM = 0, /* tokenizer.ggml.model "llama" */
    PW_TOKENIZER_BPE = 1, /* tokenizer.ggml.model "gpt2" */
} pw_tokenizer_kind;

/* tokenizer.ggml.token_type values (llama.cpp's numbering). */
typedef enum pw_token_type {
    PW_TOKEN_UNDEFINED = 0,
    PW_TOKEN_NORMAL = 1,
    PW_TOKEN_UNKNOWN = 2,
    PW_TOKEN_CONTROL = 3,
    PW_TOKEN_USER_DEFINED = 4,
    PW_TOKEN_UNUSED = 5,
    PW_TOKEN_BYTE = 6,
} pw_token_type;

/* Flags for pw_tokenizer_encode. */
enum {
    PW_TOKENIZE_ADD_BOS = 1u << 0,       /* start with the BOS token (if the vocab has one) */
    PW_TOKENIZE_PARSE_SPECIAL = 1u << 1, /* literal special-token text becomes the token */
    /* The special tokens the model asks for, as llama.cpp's add_special:
     * BOS first when tokenizer.ggml.add_bos_token, EOS last when
     * tokenizer.ggml.add_eos_token (defaults below). */
    PW_TOKENIZE_ADD_SPECIAL = 1u << 2,
};

/* Reads tokenizer.ggml.{model, pre, tokens, scores, token_type, merges,
 * bos_token_id, eos_token_id, unknown_token_id, eot_token_id,
 * add_bos_token, add_space_prefix}. Missing or inconsistent required
 * metadata is PW_ERR_FORMAT naming the key; an unknown model or
 * pre-tokenizer is PW_ERR_UNSUPPORTED. */
pw_status pw_tokenizer_new(const pw_gguf *g, pw_tokenizer **out);
void pw_tokenizer_free(pw_tokenizer *t);

pw_tokenizer_kind pw_tokenizer_get_kind(const pw_tokenizer *t);
int32_t pw_tokenizer_vocab_size(const pw_tokenizer *t);
/* Special ids; -1 when the vocabulary has none. */
int32_t pw_tokenizer_bos(const pw_tokenizer *t);
int32_t pw_tokenizer_eos(const pw_tokenizer *t);
int32_t pw_tokenizer_unk(const pw_tokenizer *t);
/* End of generation: EOS, EOT, or a control token llama.cpp also treats as
 * one (<|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>, <|end|>). */
bool pw_tokenizer_is_eog(const pw_tokenizer *t, int32_t id);
/* The model's own choice (tokenizer.ggml.add_bos_token; absent: true for
 * "llama" and for the Llama 3 pre-tokenizers, false for other "gpt2"
 * vocabularies, as llama.cpp). */
bool pw_tokenizer_adds_bos(const pw_tokenizer *t);
/* tokenizer.ggml.add_eos_token (absent: false). */
bool pw_tokenizer_adds_eos(const pw_tokenizer *t);
/* ADD_SPECIAL plus PARSE_SPECIAL. */
unsigned pw_tokenizer_default_flags(const pw_tokenizer *t);

/* Encodes len bytes of text (need not be NUL-terminated or valid UTF-8).
 * ADD_BOS and ADD_SPECIAL together give one BOS.
 * *ids is a new pw_host_alloc array of *n_ids ids (free with pw_host_free;
 * non-NULL even when empty). */
pw_status pw_tokenizer_encode(const pw_tokenizer *t, const char *text, size_t len,
                              unsigned flags, int32_t **ids, int64_t *n_ids);

/* A byte range [start, start + len) of a text. */
typedef struct pw_token_span {
    size_t start, len;
} pw_token_span;

/* Encodes len bytes of text in which only the spans listed in specials
 * (ascending, non-empty, not overlapping) are special tokens: each span
 * whose bytes are exactly a CONTROL or USER_DEFINED token's text becomes
 * that token. Everything else is plain text, encoded as by
 * pw_tokenizer_encode without PW_TOKENIZE_PARSE_SPECIAL, except that it
 * never becomes one of the spans' tokens (even a USER_DEFINED one). A span
 * that is not a special token's text stays plain text. flags: only
 * PW_TOKENIZE_ADD_BOS counts. Chat templates mark their own markers this
 * way, so message text cannot open or close a turn. Bad spans are
 * PW_ERR_INVALID_ARG. */
pw_status pw_tokenizer_encode_marked(const pw_tokenizer *t, const char *text, size_t len,
                                     const pw_token_span *specials, int64_t n_specials,
                                     unsigned flags, int32_t **ids, int64_t *n_ids);

/* The bytes one token contributes to the output, for streaming. prev_id is
 * the token before it (-1 at the start): for "llama" vocabularies the
 * space that encoding prefixed is dropped at the start and after a special
 * token (BOS included). Control tokens give "". A byte token gives its one
 * byte, so a multi-byte character may arrive over several calls. *piece
 * stays valid while t lives; it is not NUL-terminated. */
pw_status pw_tokenizer_decode_token(const pw_tokenizer *t, int32_t prev_id, int32_t id,
                                    const char **piece, size_t *len);
/* The concatenated pieces of ids as a new NUL-terminated pw_host_alloc
 * string (*len, may be NULL, excludes the NUL). */
pw_status pw_tokenizer_decode(const pw_tokenizer *t, const int32_t *ids, int64_t n, char **text,
                              size_t *len);

/* The pre-tokenizer's word boundaries for len bytes of text (no special
 * tokens): (*ends)[i] is the byte offset where word i ends. "llama" text is
 * one word. *ends is a new pw_host_alloc array. For tests and debugging. */
pw_status pw_tokenizer_pretokenize(const pw_tokenizer *t, const char *text, size_t len,
                                   size_t **ends, int64_t *n_words);

/* The raw vocabulary entry (NUL-terminated copy), NULL if id is out of range. */
const char *pw_tokenizer_token_text(const pw_tokenizer *t, int32_t id);
pw_token_type pw_tokenizer_token_type(const pw_tokenizer *t, int32_t id);
/* Exact lookup of a vocabulary entry; PW_ERR_NOT_FOUND if absent. */
pw_status pw_tokenizer_find(const pw_tokenizer *t, const char *text, int32_t *id);

#endif
