/* Tokenizer encode and decode on arbitrary bytes, with two vocabularies
 * built once at start-up: the tiny Llama writer's SentencePiece vocabulary
 * (the layout of stories260K's: specials, byte tokens, merged pieces) and a
 * small GPT-2 style byte-level BPE vocabulary with merges. The first input
 * byte picks the vocabulary and flags; the rest is text, and read as ids
 * again to decode arbitrary (also invalid) ids. Encoding then decoding must
 * give back the text for valid UTF-8 input without special-token parsing,
 * and with "<...>" marked as chat-template markers (mode bit 8) the text
 * outside them never becomes a control token. */
#include "fuzz_common.h"
#include "core/internal.h"
#include "model/gguf_writer.h"
#include "model/tokenizer.h"

typedef struct vocab {
    uint8_t *file;
    pw_gguf *gguf;
    pw_tokenizer *tok;
} vocab;

static vocab spm, bpe;

static void open_vocab(vocab *v, pw_gguf_writer *w) {
    size_t len;
    FUZZ_CHECK(pw_gguf_writer_to_memory(w, &v->file, &len) == PW_OK, "%s", pw_last_error());
    FUZZ_CHECK(pw_gguf_open_memory(v->file, len, &v->gguf) == PW_OK, "%s", pw_last_error());
    FUZZ_CHECK(pw_tokenizer_new(v->gguf, &v->tok) == PW_OK, "%s", pw_last_error());
    pw_gguf_writer_free(w);
}

/* GPT-2's byte -> code point table, as UTF-8. */
static void byte_symbol(int b, char out[4]) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        int n = 0;
        for (int k = 0; k < b; k++)
            if (!((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || (k >= 174 && k <= 255))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

static void build_bpe(void) {
    static const char *const merges[] = {"Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ th", "a n", "Ġ w"};
    enum { N_BYTES = 256, N_MERGES = sizeof merges / sizeof merges[0], N_SPECIAL = 1 };
    static char storage[N_BYTES + N_MERGES + N_SPECIAL][16];
    const char *tokens[N_BYTES + N_MERGES + N_SPECIAL];
    int32_t types[N_BYTES + N_MERGES + N_SPECIAL];
    int n = 0;
    for (int b = 0; b < N_BYTES; b++, n++) {
        byte_symbol(b, storage[n]);
        tokens[n] = storage[n];
        types[n] = PW_TOKEN_NORMAL;
    }
    for (int i = 0; i < N_MERGES; i++, n++) {
        const char *m = merges[i];
        size_t k = 0;
        for (const char *c = m; *c; c++)
            if (*c != ' ') storage[n][k++] = *c;
        storage[n][k] = 0;
        tokens[n] = storage[n];
        types[n] = PW_TOKEN_NORMAL;
    }
    snprintf(storage[n], sizeof storage[n], "<|endoftext|>");
    tokens[n] = storage[n];
    types[n] = PW_TOKEN_CONTROL;
    n++;
    pw_gguf_writer *w;
    FUZZ_CHECK(pw_gguf_writer_new(&w) == PW_OK, "writer");
    pw_gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2");
    pw_gguf_writer_add_string(w, "tokenizer.ggml.pre", "gpt2");
    pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
    pw_gguf_writer_add_array(w, "tokenizer.ggml.token_type", PW_GGUF_INT32, types, (uint64_t)n);
    pw_gguf_writer_add_string_array(w, "tokenizer.ggml.merges", merges, N_MERGES);
    pw_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(n - 1));
    pw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(n - 1));
    open_vocab(&bpe, w);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    pw_log_set_level(PW_LOG_ERROR);
    pw_gguf_writer *w;
    FUZZ_CHECK(pw_gguf_writer_new(&w) == PW_OK, "writer");
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.dim = 8;
    cfg.n_heads = 2;
    cfg.n_kv_heads = 1;
    cfg.ffn_dim = 8;
    cfg.n_layers = 1;
    FUZZ_CHECK(pw_tiny_llama_add(w, &cfg) == PW_OK, "%s", pw_last_error());
    open_vocab(&spm, w);
    build_bpe();
    return 0;
}

/* Valid UTF-8 without NUL (which the byte-level decode must round trip). */
static bool valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n || c == 0) return false;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > FUZZ_MAX_TEXT) return 0;
    uint8_t mode = data[0];
    const vocab *v = (mode & 1) ? &bpe : &spm;
    unsigned flags = (mode & 2) ? PW_TOKENIZE_ADD_BOS : 0;
    if (mode & 4) flags |= PW_TOKENIZE_PARSE_SPECIAL;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int32_t *ids = NULL;
    int64_t n = 0;
    if (pw_tokenizer_encode(v->tok, text, len, flags, &ids, &n) == PW_OK) {
        int32_t vocab_size = pw_tokenizer_vocab_size(v->tok);
        for (int64_t i = 0; i < n; i++)
            FUZZ_CHECK(ids[i] >= 0 && ids[i] < vocab_size, "id %d outside the vocabulary", ids[i]);
        char *back = NULL;
        size_t back_len = 0;
        FUZZ_CHECK(pw_tokenizer_decode(v->tok, ids, n, &back, &back_len) == PW_OK,
                   "decode of encoded ids failed: %s", pw_last_error());
        FUZZ_CHECK(back[back_len] == '\0', "decode result not terminated");
        /* SentencePiece drops only the prefix space it added and decodes
         * "\u2581" as a space (as llama.cpp does), so text not starting
         * with a space and without "\u2581" round trips; byte-level BPE
         * always does. */
        bool plain = !(flags & PW_TOKENIZE_PARSE_SPECIAL) && valid_utf8(data + 1, len);
        bool spm_ok = v == &spm && (len == 0 || text[0] != ' ') &&
                      !memmem(text, len, "\xe2\x96\x81", 3);
        if (plain && (v == &bpe || spm_ok))
            FUZZ_CHECK(back_len == len && memcmp(back, text, len) == 0,
                       "round trip differs: %zu bytes in, %zu out", len, back_len);
        pw_host_free(back);
        pw_host_free(ids);
    }

    /* Marked specials (chat prompts): each "<...>" is a marker span; the
     * text outside them must never become a CONTROL token, so the output
     * holds at most one per span (plus BOS). */
    if (mode & 8) {
        pw_token_span spans[64];
        int64_t n_spans = 0;
        for (size_t i = 0; i < len && n_spans < 64; i++) {
            const char *close = text[i] == '<' ? memchr(text + i, '>', len - i) : NULL;
            if (!close) continue;
            spans[n_spans++] = (pw_token_span){i, (size_t)(close - (text + i)) + 1};
            i = (size_t)(close - text);
        }
        int32_t *marked = NULL;
        int64_t n_marked = 0;
        FUZZ_CHECK(pw_tokenizer_encode_marked(v->tok, text, len, spans, n_spans, flags, &marked,
                                              &n_marked) == PW_OK,
                   "encode_marked failed: %s", pw_last_error());
        int64_t controls = 0;
        for (int64_t i = 0; i < n_marked; i++) {
            FUZZ_CHECK(marked[i] >= 0 && marked[i] < pw_tokenizer_vocab_size(v->tok),
                       "id %d outside the vocabulary", marked[i]);
            controls += pw_tokenizer_token_type(v->tok, marked[i]) == PW_TOKEN_CONTROL;
        }
        FUZZ_CHECK(controls <= n_spans + ((flags & PW_TOKENIZE_ADD_BOS) ? 1 : 0),
                   "%lld control tokens from %lld marker spans", (long long)controls,
                   (long long)n_spans);
        pw_host_free(marked);
    }

    /* The same bytes as raw ids: out-of-range ids must be refused. */
    int64_t nid = (int64_t)(len / 4);
    if (nid > 0) {
        int32_t *raw = malloc((size_t)nid * sizeof *raw);
        memcpy(raw, text, (size_t)nid * sizeof *raw);
        for (int64_t i = 0; i < nid; i++) raw[i] = raw[i] % (pw_tokenizer_vocab_size(v->tok) + 8);
        char *out = NULL;
        if (pw_tokenizer_decode(v->tok, raw, nid, &out, NULL) == PW_OK) pw_host_free(out);
        for (int64_t i = 0; i < nid; i++) {
            const char *piece;
            size_t plen;
            if (pw_tokenizer_decode_token(v->tok, i ? raw[i - 1] : -1, raw[i], &piece, &plen) == PW_OK && plen)
                (void)piece[plen - 1];
        }
        free(raw);
    }
    return 0;
}
