/* What the tokenizer's files share (tokenizer.c, tok_unicode.c,
 * tok_merge.c, tok_spm.c, tok_bpe.c): the tokenizer's layout, its lookup
 * tables, and the merge machinery. Not installed; tokenizer.h is the API. */
#ifndef PW_MODEL_TOKENIZER_INTERNAL_H
#define PW_MODEL_TOKENIZER_INTERNAL_H

#include "model/tokenizer.h"

#include "internal.h"

#include <string.h>

/* U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's visible space. */
#define SPM_SPACE "\xe2\x96\x81"
#define SPM_SPACE_LEN 3
/* llama.cpp renders the unknown token as U+2585. */
#define SPM_UNKNOWN_PIECE "\xe2\x96\x85"

/* The pre-tokenizer patterns of "gpt2" vocabularies (tokenizer.ggml.pre). */
typedef enum pw_tok_pre {
    /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PW_TOK_PRE_GPT2,
    /* \p{N} first (each number character a word), then GPT-2's pattern */
    PW_TOK_PRE_GPT2_DIGITS,
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
     *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    PW_TOK_PRE_LLAMA3,
    /* llama3's with \p{N} for \p{N}{1,3} */
    PW_TOK_PRE_QWEN2,
    /* qwen2's with combining marks inside words: [\p{L}\p{M}]+ and
     * [^\s\p{L}\p{M}\p{N}]+ */
    PW_TOK_PRE_QWEN35,
} pw_tok_pre;

/* ---- the tokenizer and its hash tables ------------------------------------------- */

static inline uint64_t hash_bytes(const char *p, size_t n) { return pw_fnv1a(PW_FNV1A_BASIS, p, n); }

static inline uint64_t hash_u64(uint64_t x) { /* splitmix64 finalizer */
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

typedef struct merge_entry {
    uint64_t key; /* left id << 32 | right id; UINT64_MAX when empty */
    int32_t rank;
    int32_t result;
} merge_entry;

struct pw_tokenizer {
    pw_tokenizer_kind kind;
    int32_t n_vocab;
    char **text;        /* NUL-terminated vocabulary entries */
    uint32_t *text_len;
    float *scores;
    uint8_t *types;
    char **piece;       /* decoded bytes per token */
    uint32_t *piece_len;

    int32_t *slots;     /* text -> id, open addressing, -1 empty */
    uint64_t slot_mask;

    merge_entry *merges; /* (left, right) -> rank, result */
    uint64_t merge_mask;

    int32_t byte_token[256]; /* SPM: <0xNN>; BPE: the mapped character's token */
    int32_t *specials;       /* CONTROL / USER_DEFINED ids by first byte, longest text first */
    int32_t n_specials;
    /* specials[special_begin[b] .. special_begin[b + 1]) start with byte b,
     * so a position is compared only with the specials that can match it
     * (Gemma has thousands, many starting with a space or newline). */
    int32_t special_begin[257];

    int32_t bos, eos, unk, eot;
    bool add_bos, add_eos; /* what ADD_SPECIAL adds */
    bool add_space_prefix;
    pw_tok_pre pre;      /* "gpt2" vocabularies: the pre-tokenizer's pattern */
    bool ignore_merges;  /* a word that is a token stays whole (llama3, as llama.cpp) */

    uint32_t byte_to_cp[256]; /* GPT-2 bytes_to_unicode */
    int16_t cp_to_byte[512];  /* inverse for code points < 512; -1 if none */
};

static inline int32_t vocab_lookup(const pw_tokenizer *t, const char *p, size_t n) {
    for (uint64_t i = hash_bytes(p, n) & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        int32_t id = t->slots[i];
        if (id < 0) return -1;
        if (t->text_len[id] == n && memcmp(t->text[id], p, n) == 0) return id;
    }
}

static inline const merge_entry *merge_lookup(const pw_tokenizer *t, int32_t left, int32_t right) {
    if (!t->merges || left < 0 || right < 0) return NULL;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint64_t i = hash_u64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const merge_entry *e = &t->merges[i];
        if (e->key == UINT64_MAX) return NULL;
        if (e->key == key) return e;
    }
}

/* ---- UTF-8 and character classes (tok_unicode.c) --------------------------------- */

/* Length of the UTF-8 sequence starting at p (at most n), 1 for invalid
 * bytes, which are then handled one at a time. */
size_t pw_tok_utf8_len(const uint8_t *p, size_t n);
/* Decodes one code point; invalid sequences give U+FFFD for one byte. */
uint32_t pw_tok_utf8_decode(const uint8_t *p, size_t n, size_t *len);
/* Writes cp as UTF-8 (1 to 4 bytes) and returns the length. */
size_t pw_tok_utf8_encode(uint32_t cp, char *out);
/* \s (White_Space), \p{N}, \p{L} of the pre-tokenizers' patterns, as
 * llama.cpp classifies code points (general categories N*, L*). */
bool pw_tok_is_space(uint32_t cp);
bool pw_tok_is_number(uint32_t cp);
bool pw_tok_is_letter(uint32_t cp);
/* \p{M}: combining marks. */
bool pw_tok_is_mark(uint32_t cp);
/* Generated tables (tok_unicode_data.c, scripts/gen-unicode-classes.py). */
extern const char pw_tok_unicode_version[];
extern const uint32_t pw_tok_unicode_ranges[];
extern const size_t pw_tok_unicode_n_ranges;

/* ---- growable id list and merge machinery (tok_merge.c) -------------------------- */

typedef struct id_list {
    int32_t *ids;
    int64_t n, cap;
} id_list;

typedef struct symbol {
    int32_t prev, next;
    uint32_t start, len; /* byte span in the word buffer; len 0 once merged away */
    int32_t id;          /* BPE: token of the span, -1 if none */
} symbol;

typedef struct bigram {
    int32_t left, right;
    double priority; /* higher first: SPM score, BPE -rank */
    uint32_t size;   /* left.len + right.len when queued */
    int32_t result;  /* BPE: merged token */
} bigram;

typedef struct merge_state {
    symbol *syms;
    int32_t n_syms, cap_syms;
    bigram *heap;
    int64_t n_heap, cap_heap;
} merge_state;

pw_status pw_tok_push_id(id_list *l, int32_t id);
/* The unknown token for a byte or character with no token of its own, or
 * PW_ERR_NOT_FOUND when the vocabulary has none. */
pw_status pw_tok_push_unknown(const pw_tokenizer *t, id_list *out, const char *what, uint32_t v);
void pw_tok_merge_state_free(merge_state *m);
pw_status pw_tok_heap_push(merge_state *m, bigram b);
/* Splits buf[0, n) into one symbol per UTF-8 character. */
pw_status pw_tok_init_symbols(merge_state *m, const pw_tokenizer *t, const char *buf, size_t n,
                              bool with_ids);
/* Runs the merges queued in m until none applies. */
pw_status pw_tok_run_merges(merge_state *m, const pw_tokenizer *t, const char *buf, bool spm);

/* ---- SentencePiece (tok_spm.c) --------------------------------------------------- */

/* Queues the merge of symbols left and right if their text is a token. */
pw_status pw_tok_spm_try_bigram(merge_state *m, const pw_tokenizer *t, const char *buf,
                                int32_t left, int32_t right);
/* Tokenizes one run of plain text: optional U+2581 prefix, spaces escaped. */
pw_status pw_tok_spm_encode_text(const pw_tokenizer *t, merge_state *m, const char *text,
                                 size_t len, bool prefix_space, id_list *out);

/* ---- byte-level BPE (tok_bpe.c) -------------------------------------------------- */

/* Queues the merge of symbols left and right if a merge rule joins them. */
pw_status pw_tok_bpe_try_bigram(merge_state *m, const pw_tokenizer *t, int32_t left,
                                int32_t right);
/* GPT-2's bytes_to_unicode and its inverse. */
void pw_tok_init_byte_map(pw_tokenizer *t);
/* Pre-tokenizes text (no special tokens) and encodes each word. */
pw_status pw_tok_bpe_encode_fragment(const pw_tokenizer *t, merge_state *m, const char *text,
                                     size_t len, id_list *out);

#endif
