/* Tokenizers from GGUF metadata (tokenizer.h): loading, and the public
 * entry points. The algorithms live beside it: tok_unicode.c (UTF-8, code
 * point classes), tok_merge.c (the merge machinery both share),
 * tok_spm.c (SentencePiece), tok_bpe.c (GPT-2 byte-level BPE). */
#include "model/tokenizer_internal.h"

#include <inttypes.h>
#include <string.h>

/* Control tokens llama.cpp treats as end of generation besides EOS/EOT. */
static const char *const eog_texts[] = {
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "<|end|>",
};

static uint64_t table_capacity(uint64_t n) { /* load factor <= 1/2 */
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

static void vocab_insert(pw_tokenizer *t, int32_t id) {
    const char *p = t->text[id];
    size_t n = t->text_len[id];
    for (uint64_t i = hash_bytes(p, n) & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        int32_t cur = t->slots[i];
        if (cur < 0 || (t->text_len[cur] == n && memcmp(t->text[cur], p, n) == 0)) {
            t->slots[i] = id; /* a duplicate entry resolves to the later id, as in llama.cpp */
            return;
        }
    }
}

/* ---- encode ------------------------------------------------------------------------- */

static bool is_special_type(uint8_t type) {
    return type == PW_TOKEN_CONTROL || type == PW_TOKEN_USER_DEFINED;
}

/* What encoding one text carries along: ids so far, the merge scratch,
 * whether the next plain text follows a special token (SentencePiece then
 * prefixes a space), and the USER_DEFINED ids plain text must not become
 * (a chat template's own markers). */
typedef struct encoder {
    const pw_tokenizer *t;
    merge_state m;
    id_list out;
    bool after_special;
    bool control; /* CONTROL tokens match in plain text (PW_TOKENIZE_PARSE_SPECIAL) */
    const int32_t *denied;
    int64_t n_denied;
} encoder;

static bool is_denied(const encoder *e, int32_t id) {
    for (int64_t i = 0; i < e->n_denied; i++)
        if (e->denied[i] == id) return true;
    return false;
}

/* The longest special token whose text starts at text[pos], or -1. As in
 * llama.cpp, USER_DEFINED tokens (Gemma's whitespace runs and HTML tags)
 * are always matched and CONTROL tokens only when e->control. */
static int32_t match_special(const encoder *e, const char *text, size_t pos, size_t len) {
    const pw_tokenizer *t = e->t;
    uint8_t first = (uint8_t)text[pos];
    for (int32_t k = t->special_begin[first]; k < t->special_begin[first + 1]; k++) {
        int32_t id = t->specials[k];
        if (!e->control && t->types[id] != PW_TOKEN_USER_DEFINED) continue;
        size_t sl = t->text_len[id];
        if (sl <= len - pos && memcmp(text + pos, t->text[id], sl) == 0 && !is_denied(e, id))
            return id;
    }
    return -1;
}

static pw_status encode_fragment(encoder *e, const char *text, size_t len) {
    if (len == 0) return PW_OK;
    const pw_tokenizer *t = e->t;
    if (t->kind == PW_TOKENIZER_SPM)
        return pw_tok_spm_encode_text(t, &e->m, text, len, t->add_space_prefix && e->after_special,
                                      &e->out);
    return pw_tok_bpe_encode_fragment(t, &e->m, text, len, &e->out);
}

static pw_status push_special(encoder *e, int32_t id) {
    e->after_special = true;
    return pw_tok_push_id(&e->out, id);
}

/* Encodes len bytes of text, the special tokens match_special finds
 * splitting it into fragments. */
static pw_status encode_text(encoder *e, const char *text, size_t len) {
    size_t frag = 0;
    for (size_t pos = 0; pos < len;) {
        int32_t special = match_special(e, text, pos, len);
        if (special < 0) {
            pos++;
            continue;
        }
        PW_TRY(encode_fragment(e, text + frag, pos - frag));
        PW_TRY(push_special(e, special));
        pos += e->t->text_len[special];
        frag = pos;
    }
    return encode_fragment(e, text + frag, len - frag);
}

static pw_status encoder_start(encoder *e, const pw_tokenizer *t, unsigned flags) {
    memset(e, 0, sizeof *e);
    e->t = t;
    e->control = (flags & PW_TOKENIZE_PARSE_SPECIAL) != 0;
    /* As llama.cpp: the text starts "after a special token", so it gets the
     * SentencePiece space prefix, and so does text after each special. */
    e->after_special = true;
    bool bos = (flags & PW_TOKENIZE_ADD_BOS) || ((flags & PW_TOKENIZE_ADD_SPECIAL) && t->add_bos);
    return bos && t->bos >= 0 ? pw_tok_push_id(&e->out, t->bos) : PW_OK;
}

/* EOS last when the model asks for it (ADD_SPECIAL). */
static pw_status encoder_end(encoder *e, unsigned flags) {
    const pw_tokenizer *t = e->t;
    bool eos = (flags & PW_TOKENIZE_ADD_SPECIAL) && t->add_eos && t->eos >= 0;
    return eos ? pw_tok_push_id(&e->out, t->eos) : PW_OK;
}

/* Hands the ids over (an empty result still gets an array) or frees them. */
static pw_status encoder_finish(encoder *e, pw_status s, int32_t **ids, int64_t *n_ids) {
    pw_tok_merge_state_free(&e->m);
    if (s == PW_OK && !e->out.ids) {
        e->out.ids = pw_host_alloc(sizeof *e->out.ids);
        if (!e->out.ids) s = pw_error(PW_ERR_OOM, "tokenizer: out of memory");
    }
    if (s != PW_OK) {
        pw_host_free(e->out.ids);
        return s;
    }
    *ids = e->out.ids;
    *n_ids = e->out.n;
    return PW_OK;
}

pw_status pw_tokenizer_encode(const pw_tokenizer *t, const char *text, size_t len,
                              unsigned flags, int32_t **ids, int64_t *n_ids) {
    if (!t || (!text && len) || !ids || !n_ids)
        return pw_error(PW_ERR_INVALID_ARG, "tokenizer: encode needs a tokenizer, text and outputs");
    *ids = NULL;
    *n_ids = 0;
    encoder e;
    pw_status s = encoder_start(&e, t, flags);
    if (s == PW_OK) s = encode_text(&e, text, len);
    if (s == PW_OK) s = encoder_end(&e, flags);
    return encoder_finish(&e, s, ids, n_ids);
}

/* The special token whose text is exactly the span, or -1. */
static int32_t span_token(const pw_tokenizer *t, const char *text, pw_token_span sp) {
    int32_t id = vocab_lookup(t, text + sp.start, sp.len);
    return id >= 0 && is_special_type(t->types[id]) ? id : -1;
}

pw_status pw_tokenizer_encode_marked(const pw_tokenizer *t, const char *text, size_t len,
                                     const pw_token_span *specials, int64_t n_specials,
                                     unsigned flags, int32_t **ids, int64_t *n_ids) {
    if (!t || (!text && len) || (!specials && n_specials) || n_specials < 0 || !ids || !n_ids)
        return pw_error(PW_ERR_INVALID_ARG, "tokenizer: encode needs a tokenizer, text, spans "
                        "and outputs");
    *ids = NULL;
    *n_ids = 0;
    for (int64_t i = 0; i < n_specials; i++) {
        size_t floor = i > 0 ? specials[i - 1].start + specials[i - 1].len : 0;
        if (specials[i].len == 0 || specials[i].start < floor || specials[i].len > len ||
            specials[i].start > len - specials[i].len)
            return pw_error(PW_ERR_INVALID_ARG, "tokenizer: special span %" PRId64 " [%zu, +%zu) "
                            "is empty, out of order or outside the %zu bytes of text", i,
                            specials[i].start, specials[i].len, len);
    }
    /* The spans' tokens, which plain text may not become even where they
     * are USER_DEFINED (always matched otherwise). */
    int32_t *denied = pw_host_alloc((size_t)(n_specials ? n_specials : 1) * sizeof *denied);
    if (!denied) return pw_error(PW_ERR_OOM, "tokenizer: out of memory");
    encoder e;
    pw_status s = encoder_start(&e, t, flags & ~(unsigned)PW_TOKENIZE_PARSE_SPECIAL);
    e.denied = denied;
    for (int64_t i = 0; i < n_specials; i++) { /* each once: a template has a few markers */
        int32_t id = span_token(t, text, specials[i]);
        if (id >= 0 && !is_denied(&e, id)) denied[e.n_denied++] = id;
    }
    /* A span that is not a special token stays in the plain text around it,
     * as it would be without the span. */
    size_t plain = 0;
    for (int64_t i = 0; s == PW_OK && i < n_specials; i++) {
        int32_t id = span_token(t, text, specials[i]);
        if (id < 0) continue;
        s = encode_text(&e, text + plain, specials[i].start - plain);
        if (s == PW_OK) s = push_special(&e, id);
        plain = specials[i].start + specials[i].len;
    }
    if (s == PW_OK) s = encode_text(&e, text + plain, len - plain);
    if (s == PW_OK) s = encoder_end(&e, flags);
    pw_host_free(denied);
    return encoder_finish(&e, s, ids, n_ids);
}

/* ---- decode ----------------------------------------------------------------------- */

pw_status pw_tokenizer_decode_token(const pw_tokenizer *t, int32_t prev_id, int32_t id,
                                    const char **piece, size_t *len) {
    if (id < 0 || id >= t->n_vocab)
        return pw_error(PW_ERR_INVALID_ARG, "tokenizer: token id %" PRId32
                        " out of range [0, %" PRId32 ")", id, t->n_vocab);
    const char *p = t->piece[id];
    size_t n = t->piece_len[id];
    bool at_start = prev_id < 0 || prev_id >= t->n_vocab || is_special_type(t->types[prev_id]);
    if (t->kind == PW_TOKENIZER_SPM && t->add_space_prefix && at_start && n > 0 && p[0] == ' ' &&
        !is_special_type(t->types[id])) {
        p++;
        n--;
    }
    *piece = p;
    *len = n;
    return PW_OK;
}

pw_status pw_tokenizer_decode(const pw_tokenizer *t, const int32_t *ids, int64_t n, char **text,
                              size_t *len) {
    if (!t || (!ids && n) || n < 0 || !text)
        return pw_error(PW_ERR_INVALID_ARG, "tokenizer: decode needs a tokenizer, ids and output");
    *text = NULL;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return pw_error(PW_ERR_INVALID_ARG, "tokenizer: token %" PRId64 " has id %" PRId32
                            ", out of range [0, %" PRId32 ")", i, ids[i], t->n_vocab);
        total += t->piece_len[ids[i]];
    }
    char *buf = pw_host_alloc(total + 1);
    if (!buf) return pw_error(PW_ERR_OOM, "tokenizer: out of memory decoding %" PRId64 " ids", n);
    size_t used = 0;
    int32_t prev = -1;
    for (int64_t i = 0; i < n; i++) {
        const char *piece;
        size_t pl;
        pw_tokenizer_decode_token(t, prev, ids[i], &piece, &pl);
        memcpy(buf + used, piece, pl);
        used += pl;
        prev = ids[i];
    }
    buf[used] = '\0';
    *text = buf;
    if (len) *len = used;
    return PW_OK;
}

/* ---- construction ---------------------------------------------------------------- */

static pw_status read_special_id(const pw_gguf *g, const char *key, int32_t n_vocab, int32_t *id) {
    const pw_gguf_kv *kv = pw_gguf_find_kv(g, key);
    if (!kv) return PW_OK;
    int64_t v;
    pw_status s = pw_gguf_kv_int(kv, &v);
    if (s != PW_OK) return s;
    if (v == (int64_t)UINT32_MAX || v == -1) { /* converters write "none" like this */
        *id = -1;
        return PW_OK;
    }
    if (v < 0 || v >= n_vocab)
        return pw_error(PW_ERR_FORMAT, "tokenizer: %s = %" PRId64 " is outside the vocabulary "
                        "[0, %" PRId32 ")", key, v, n_vocab);
    *id = (int32_t)v;
    return PW_OK;
}

static pw_status read_bool(const pw_gguf *g, const char *key, bool *out) {
    const pw_gguf_kv *kv = pw_gguf_find_kv(g, key);
    return kv ? pw_gguf_kv_bool(kv, out) : PW_OK;
}

static int parse_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static pw_status build_piece(pw_tokenizer *t, int32_t id) {
    const char *s = t->text[id];
    size_t n = t->text_len[id];
    uint8_t type = t->types[id];
    char *out = pw_host_alloc(n * 3 + 4);
    if (!out) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for token pieces");
    size_t len = 0;
    int byte = parse_byte_token(s, n);
    if (type == PW_TOKEN_CONTROL || type == PW_TOKEN_UNUSED) {
        len = 0;
    } else if (type == PW_TOKEN_BYTE && byte >= 0) {
        out[len++] = (char)byte;
    } else if (type == PW_TOKEN_UNKNOWN) {
        if (t->kind == PW_TOKENIZER_SPM) {
            memcpy(out, SPM_UNKNOWN_PIECE, sizeof SPM_UNKNOWN_PIECE - 1);
            len = sizeof SPM_UNKNOWN_PIECE - 1;
        }
    } else if (t->kind == PW_TOKENIZER_SPM || type == PW_TOKEN_USER_DEFINED) {
        for (size_t i = 0; i < n;) {
            if (t->kind == PW_TOKENIZER_SPM && i + SPM_SPACE_LEN <= n &&
                memcmp(s + i, SPM_SPACE, SPM_SPACE_LEN) == 0) {
                out[len++] = ' ';
                i += SPM_SPACE_LEN;
            } else {
                out[len++] = s[i++];
            }
        }
    } else {
        /* Byte-level: each code point stands for one byte; anything else
         * (not produced by the mapping) is copied through. */
        for (size_t i = 0; i < n;) {
            size_t cl;
            uint32_t cp = pw_tok_utf8_decode((const uint8_t *)s + i, n - i, &cl);
            int b = cp < 512 ? t->cp_to_byte[cp] : -1;
            if (b >= 0) {
                out[len++] = (char)b;
            } else {
                memcpy(out + len, s + i, cl);
                len += cl;
            }
            i += cl;
        }
    }
    out[len] = '\0';
    t->piece[id] = out;
    t->piece_len[id] = (uint32_t)len;
    return PW_OK;
}

typedef struct special_entry {
    uint32_t len;
    int32_t id;
    uint8_t first; /* the text's first byte */
} special_entry;

static int compare_special(const void *a, const void *b) {
    const special_entry *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static pw_status load_vocab(pw_tokenizer *t, const pw_gguf *g) {
    const pw_gguf_kv *tokens, *scores = NULL, *types = NULL;
    uint64_t n;
    PW_TRY(pw_gguf_get_array(g, "tokenizer.ggml.tokens", PW_GGUF_STRING, &tokens, &n));
    if (n == 0 || n > (uint64_t)INT32_MAX)
        return pw_error(PW_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens has %" PRIu64
                        " entries", n);
    t->n_vocab = (int32_t)n;
    if (pw_gguf_has(g, "tokenizer.ggml.scores")) {
        uint64_t ns;
        PW_TRY(pw_gguf_get_array(g, "tokenizer.ggml.scores", PW_GGUF_TYPE_COUNT_, &scores, &ns));
        if (ns != n)
            return pw_error(PW_ERR_FORMAT, "tokenizer: tokenizer.ggml.scores has %" PRIu64
                            " entries but tokenizer.ggml.tokens has %" PRIu64, ns, n);
    }
    if (pw_gguf_has(g, "tokenizer.ggml.token_type")) {
        uint64_t nt;
        PW_TRY(pw_gguf_get_array(g, "tokenizer.ggml.token_type", PW_GGUF_TYPE_COUNT_, &types, &nt));
        if (nt != n)
            return pw_error(PW_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type has %" PRIu64
                            " entries but tokenizer.ggml.tokens has %" PRIu64, nt, n);
    }
    t->text = pw_host_calloc((size_t)n, sizeof *t->text);
    t->text_len = pw_host_calloc((size_t)n, sizeof *t->text_len);
    t->scores = pw_host_calloc((size_t)n, sizeof *t->scores);
    t->types = pw_host_calloc((size_t)n, sizeof *t->types);
    t->piece = pw_host_calloc((size_t)n, sizeof *t->piece);
    t->piece_len = pw_host_calloc((size_t)n, sizeof *t->piece_len);
    uint64_t cap = table_capacity(n);
    t->slots = pw_host_alloc((size_t)cap * sizeof *t->slots);
    if (!t->text || !t->text_len || !t->scores || !t->types || !t->piece || !t->piece_len ||
        !t->slots)
        return pw_error(PW_ERR_OOM, "tokenizer: out of memory for %" PRIu64 " tokens", n);
    memset(t->slots, 0xFF, (size_t)cap * sizeof *t->slots);
    t->slot_mask = cap - 1;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        PW_TRY(pw_gguf_kv_array_string(tokens, i, &s, &len));
        if (len > UINT32_MAX / 4)
            return pw_error(PW_ERR_FORMAT, "tokenizer: token %" PRIu64 " is %zu bytes long", i, len);
        t->text[i] = pw_host_alloc(len + 1);
        if (!t->text[i]) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for tokens");
        memcpy(t->text[i], s, len);
        t->text[i][len] = '\0';
        t->text_len[i] = (uint32_t)len;
        double score = 0.0;
        int64_t type = PW_TOKEN_NORMAL;
        if (scores) {
            pw_status st = pw_gguf_kv_array_float(scores, i, &score);
            if (st != PW_OK) return pw_error_context(st, "tokenizer: tokenizer.ggml.scores");
        }
        if (types) {
            pw_status st = pw_gguf_kv_array_int(types, i, &type);
            if (st != PW_OK) return pw_error_context(st, "tokenizer: tokenizer.ggml.token_type");
            if (type < PW_TOKEN_UNDEFINED || type > PW_TOKEN_BYTE)
                return pw_error(PW_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type[%" PRIu64
                                "] = %" PRId64 " is not a token type (0..6)", i, type);
            if (type == PW_TOKEN_UNDEFINED) type = PW_TOKEN_NORMAL;
        }
        t->scores[i] = (float)score;
        t->types[i] = (uint8_t)type;
        vocab_insert(t, (int32_t)i);
    }
    return PW_OK;
}

static pw_status load_merges(pw_tokenizer *t, const pw_gguf *g) {
    const pw_gguf_kv *merges;
    uint64_t n;
    PW_TRY(pw_gguf_get_array(g, "tokenizer.ggml.merges", PW_GGUF_STRING, &merges, &n));
    if (n > (uint64_t)INT32_MAX)
        return pw_error(PW_ERR_FORMAT, "tokenizer: %" PRIu64 " merges is too many", n);
    uint64_t cap = table_capacity(n);
    t->merges = pw_host_alloc((size_t)cap * sizeof *t->merges);
    if (!t->merges) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for %" PRIu64 " merges", n);
    for (uint64_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
    t->merge_mask = cap - 1;
    char *joined = NULL;
    size_t joined_cap = 0;
    pw_status st = PW_OK;
    for (uint64_t r = 0; r < n && st == PW_OK; r++) {
        const char *s;
        size_t len;
        st = pw_gguf_kv_array_string(merges, r, &s, &len);
        if (st != PW_OK) break;
        /* Search from index 1, as llama.cpp does. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            st = pw_error(PW_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges[%" PRIu64 "] "
                          "'%.*s' is not two tokens separated by a space", r,
                          (int)(len < 64 ? len : 64), s);
            break;
        }
        size_t ll = (size_t)(sp - s), rl = len - ll - 1;
        int32_t left = vocab_lookup(t, s, ll), right = vocab_lookup(t, sp + 1, rl);
        if (len > joined_cap) {
            char *j = pw_host_grow(joined, 1, &joined_cap, len, SIZE_MAX);
            if (!j) {
                st = pw_error(PW_ERR_OOM, "tokenizer: out of memory for merges");
                break;
            }
            joined = j;
        }
        memcpy(joined, s, ll);
        memcpy(joined + ll, sp + 1, rl);
        int32_t result = vocab_lookup(t, joined, ll + rl);
        /* A merge whose parts or result are not tokens can never apply to
         * token symbols; skip it. */
        if (left < 0 || right < 0 || result < 0) continue;
        uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
        for (uint64_t i = hash_u64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
            merge_entry *e = &t->merges[i];
            if (e->key == key) break; /* the first (best) rank wins */
            if (e->key == UINT64_MAX) {
                e->key = key;
                e->rank = (int32_t)r;
                e->result = result;
                break;
            }
        }
    }
    pw_host_free(joined);
    return st;
}

/* tokenizer.ggml.pre names and their patterns, as llama.cpp maps them. */
typedef struct pre_name {
    const char *name;
    pw_tok_pre pre;
    bool ignore_merges; /* llama.cpp's: a word that is a token stays whole */
    bool add_bos;       /* BOS added when tokenizer.ggml.add_bos_token is absent */
} pre_name;

static const pre_name pre_names[] = {
    {"default", PW_TOK_PRE_GPT2, false, false},
    {"gpt2", PW_TOK_PRE_GPT2, false, false},
    {"gpt-2", PW_TOK_PRE_GPT2, false, false},
    {"phi-2", PW_TOK_PRE_GPT2, false, false},
    {"mpt", PW_TOK_PRE_GPT2, false, false},
    {"olmo", PW_TOK_PRE_GPT2, false, false},
    {"smollm", PW_TOK_PRE_GPT2_DIGITS, false, false},
    {"starcoder", PW_TOK_PRE_GPT2_DIGITS, false, false},
    {"refact", PW_TOK_PRE_GPT2_DIGITS, false, false},
    {"command-r", PW_TOK_PRE_GPT2_DIGITS, false, false},
    {"codeshell", PW_TOK_PRE_GPT2_DIGITS, false, false},
    {"exaone", PW_TOK_PRE_GPT2_DIGITS, false, false},
    {"minerva-7b", PW_TOK_PRE_GPT2_DIGITS, false, false},
    {"llama3", PW_TOK_PRE_LLAMA3, true, true},
    {"llama-v3", PW_TOK_PRE_LLAMA3, true, true},
    {"llama-bpe", PW_TOK_PRE_LLAMA3, true, true},
    {"falcon3", PW_TOK_PRE_LLAMA3, true, true},
    {"dbrx", PW_TOK_PRE_LLAMA3, false, false},
    {"smaug-bpe", PW_TOK_PRE_LLAMA3, false, false},
    {"qwen2", PW_TOK_PRE_QWEN2, false, false},
    {"deepseek-r1-qwen", PW_TOK_PRE_QWEN2, false, false},
    {"stablelm2", PW_TOK_PRE_QWEN2, false, false},
    {"megrez", PW_TOK_PRE_QWEN2, false, false},
    {"qwen35", PW_TOK_PRE_QWEN35, false, false},
};

static pw_status load_pre_tokenizer(pw_tokenizer *t, const pw_gguf *g) {
    t->pre = PW_TOK_PRE_GPT2;
    const pw_gguf_kv *kv = pw_gguf_find_kv(g, "tokenizer.ggml.pre");
    if (!kv) return PW_OK;
    const char *pre;
    PW_TRY(pw_gguf_kv_string(kv, &pre, NULL));
    for (size_t i = 0; i < PW_ARRAY_LEN(pre_names); i++)
        if (strcmp(pre, pre_names[i].name) == 0) {
            t->pre = pre_names[i].pre;
            t->ignore_merges = pre_names[i].ignore_merges;
            t->add_bos = pre_names[i].add_bos;
            return PW_OK;
        }
    char list[512];
    size_t used = 0;
    for (size_t i = 0; i < PW_ARRAY_LEN(pre_names) && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 pre_names[i].name);
    return pw_error(PW_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%s' (tokenizer.ggml.pre) is "
                    "not supported (supported: %s)", pre, list);
}

static pw_status build(pw_tokenizer *t, const pw_gguf *g) {
    const char *model;
    PW_TRY(pw_gguf_get_string(g, "tokenizer.ggml.model", &model));
    if (strcmp(model, "llama") == 0)
        t->kind = PW_TOKENIZER_SPM;
    else if (strcmp(model, "gpt2") == 0)
        t->kind = PW_TOKENIZER_BPE;
    else
        return pw_error(PW_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%s' is not "
                        "supported (supported: llama, gpt2)", model);
    pw_tok_init_byte_map(t);
    PW_TRY(load_vocab(t, g));
    if (t->kind == PW_TOKENIZER_BPE) {
        PW_TRY(load_pre_tokenizer(t, g));
        PW_TRY(load_merges(t, g));
    }
    bool spm = t->kind == PW_TOKENIZER_SPM;
    /* llama.cpp's defaults when the ids are absent. */
    t->bos = spm ? 1 : -1;
    t->eos = spm ? 2 : -1;
    t->unk = spm ? 0 : -1;
    t->eot = -1;
    if (t->bos >= t->n_vocab) t->bos = -1;
    if (t->eos >= t->n_vocab) t->eos = -1;
    PW_TRY(read_special_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos));
    PW_TRY(read_special_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos));
    PW_TRY(read_special_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk));
    PW_TRY(read_special_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot));
    if (spm) t->add_bos = true; /* gpt2: the pre-tokenizer's default */
    t->add_eos = false;
    t->add_space_prefix = spm;
    PW_TRY(read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos));
    PW_TRY(read_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos));
    PW_TRY(read_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix));

    for (int b = 0; b < 256; b++) {
        if (spm) {
            char text[8];
            snprintf(text, sizeof text, "<0x%02X>", b);
            t->byte_token[b] = vocab_lookup(t, text, 6);
        } else {
            char text[4];
            size_t n = pw_tok_utf8_encode(t->byte_to_cp[b], text);
            t->byte_token[b] = vocab_lookup(t, text, n);
        }
    }
    for (int32_t i = 0; i < t->n_vocab; i++) PW_TRY(build_piece(t, i));

    /* Longest first, so "<|im_start|>" wins over a special that is its prefix. */
    special_entry *entries = pw_host_alloc((size_t)t->n_vocab * sizeof *entries);
    t->specials = pw_host_alloc((size_t)t->n_vocab * sizeof *t->specials);
    if (!entries || !t->specials) {
        pw_host_free(entries);
        return pw_error(PW_ERR_OOM, "tokenizer: out of memory");
    }
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (is_special_type(t->types[i]) && t->text_len[i] > 0) {
            entries[t->n_specials].len = t->text_len[i];
            entries[t->n_specials].first = (uint8_t)t->text[i][0];
            entries[t->n_specials++].id = i;
        }
    qsort(entries, (size_t)t->n_specials, sizeof *entries, compare_special);
    for (int32_t k = 0; k < t->n_specials; k++) t->specials[k] = entries[k].id;
    for (int b = 0, k = 0; b <= 256; b++) {
        while (k < t->n_specials && entries[k].first < b) k++;
        t->special_begin[b] = k;
    }
    pw_host_free(entries);
    return PW_OK;
}

pw_status pw_tokenizer_new(const pw_gguf *g, pw_tokenizer **out) {
    if (!g || !out) return pw_error(PW_ERR_INVALID_ARG, "tokenizer: new needs a gguf and an output");
    *out = NULL;
    pw_tokenizer *t = pw_host_calloc(1, sizeof *t);
    if (!t) return pw_error(PW_ERR_OOM, "tokenizer: out of memory");
    pw_status s = build(t, g);
    if (s != PW_OK) {
        pw_tokenizer_free(t);
        return s;
    }
    *out = t;
    return PW_OK;
}

void pw_tokenizer_free(pw_tokenizer *t) {
    if (!t) return;
    if (t->text)
        for (int32_t i = 0; i < t->n_vocab; i++) pw_host_free(t->text[i]);
    if (t->piece)
        for (int32_t i = 0; i < t->n_vocab; i++) pw_host_free(t->piece[i]);
    pw_host_free(t->text);
    pw_host_free(t->text_len);
    pw_host_free(t->scores);
    pw_host_free(t->types);
    pw_host_free(t->piece);
    pw_host_free(t->piece_len);
    pw_host_free(t->slots);
    pw_host_free(t->merges);
    pw_host_free(t->specials);
    pw_host_free(t);
}

/* ---- accessors ---------------------------------------------------------------------- */

pw_tokenizer_kind pw_tokenizer_get_kind(const pw_tokenizer *t) { return t->kind; }
int32_t pw_tokenizer_vocab_size(const pw_tokenizer *t) { return t->n_vocab; }
int32_t pw_tokenizer_bos(const pw_tokenizer *t) { return t->bos; }
int32_t pw_tokenizer_eos(const pw_tokenizer *t) { return t->eos; }
int32_t pw_tokenizer_unk(const pw_tokenizer *t) { return t->unk; }
bool pw_tokenizer_adds_bos(const pw_tokenizer *t) { return t->add_bos; }
bool pw_tokenizer_adds_eos(const pw_tokenizer *t) { return t->add_eos; }

unsigned pw_tokenizer_default_flags(const pw_tokenizer *t) {
    (void)t;
    return PW_TOKENIZE_ADD_SPECIAL | PW_TOKENIZE_PARSE_SPECIAL;
}

bool pw_tokenizer_is_eog(const pw_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return false;
    if (id == t->eos || id == t->eot) return true;
    if (t->types[id] != PW_TOKEN_CONTROL) return false;
    for (size_t i = 0; i < PW_ARRAY_LEN(eog_texts); i++)
        if (strcmp(t->text[id], eog_texts[i]) == 0) return true;
    return false;
}

const char *pw_tokenizer_token_text(const pw_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->text[id] : NULL;
}

pw_token_type pw_tokenizer_token_type(const pw_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? (pw_token_type)t->types[id] : PW_TOKEN_UNDEFINED;
}

pw_status pw_tokenizer_find(const pw_tokenizer *t, const char *text, int32_t *id) {
    *id = vocab_lookup(t, text, strlen(text));
    if (*id < 0) return pw_error(PW_ERR_NOT_FOUND, "tokenizer: no token '%s' in the vocabulary", text);
    return PW_OK;
}
