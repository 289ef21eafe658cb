/* GPT-2 byte-level BPE ("gpt2" vocabularies, tokenizer.h): the GPT-2
 * pre-tokenizer splits text into words, each word's bytes map to printable
 * code points, and merges apply in rank order (tokenizer.ggml.merges). */
#include "model/tokenizer_internal.h"

#include <string.h>

pw_status pw_tok_bpe_try_bigram(merge_state *m, const pw_tokenizer *t, int32_t left,
                                int32_t right) {
    if (left < 0 || right < 0) return PW_OK;
    const symbol *l = &m->syms[left], *r = &m->syms[right];
    const merge_entry *e = merge_lookup(t, l->id, r->id);
    if (!e) return PW_OK;
    bigram b = {left, right, -(double)e->rank, l->len + r->len, e->result};
    return pw_tok_heap_push(m, b);
}

void pw_tok_init_byte_map(pw_tokenizer *t) {
    /* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves,
     * the others to U+0100 upward in byte order. */
    uint32_t next = 256;
    for (int i = 0; i < 512; i++) t->cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        t->byte_to_cp[b] = printable ? (uint32_t)b : next++;
        t->cp_to_byte[t->byte_to_cp[b]] = (int16_t)b;
    }
}

/* Tokenizes one pre-tokenized word (raw bytes). */
static pw_status bpe_encode_word(const pw_tokenizer *t, merge_state *m, const char *word,
                                 size_t len, id_list *out) {
    char *buf = pw_host_alloc(len * 2 + 1); /* every mapped code point is < U+0800 */
    if (!buf) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for a word");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += pw_tok_utf8_encode(t->byte_to_cp[(uint8_t)word[i]], buf + n);
    if (t->ignore_merges) { /* a word that is a token stays whole */
        int32_t id = vocab_lookup(t, buf, n);
        if (id >= 0) {
            pw_host_free(buf);
            return pw_tok_push_id(out, id);
        }
    }
    pw_status s = pw_tok_init_symbols(m, t, buf, n, true);
    for (int32_t i = 1; s == PW_OK && i < m->n_syms; i++) s = pw_tok_bpe_try_bigram(m, t, i - 1, i);
    if (s == PW_OK) s = pw_tok_run_merges(m, t, buf, false);
    for (int32_t i = m->n_syms > 0 ? 0 : -1; s == PW_OK && i >= 0; i = m->syms[i].next) {
        const symbol *sym = &m->syms[i];
        if (sym->id >= 0) {
            s = pw_tok_push_id(out, sym->id);
            continue;
        }
        /* Not a token: one token per mapped character, i.e. per byte. */
        for (uint32_t k = 0; s == PW_OK && k < sym->len;) {
            size_t cl;
            uint32_t cp = pw_tok_utf8_decode((const uint8_t *)buf + sym->start + k, sym->len - k, &cl);
            int byte = cp < 512 ? t->cp_to_byte[cp] : -1;
            s = byte >= 0 && t->byte_token[byte] >= 0 ? pw_tok_push_id(out, t->byte_token[byte])
                                                      : pw_tok_push_unknown(t, out, "mapped character U+", cp);
            k += (uint32_t)cl;
        }
    }
    pw_host_free(buf);
    return s;
}

/* Length of the GPT-2 pre-tokenizer match at text[pos] (within [0, end)):
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t gpt2_match(const uint8_t *text, size_t pos, size_t end) {
    if (text[pos] == '\'') {
        static const char *const suffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
        for (size_t k = 0; k < PW_ARRAY_LEN(suffixes); k++) {
            size_t sl = strlen(suffixes[k]);
            if (pos + 1 + sl <= end && memcmp(text + pos + 1, suffixes[k], sl) == 0) return 1 + sl;
        }
    }
    size_t cl;
    uint32_t cp = pw_tok_utf8_decode(text + pos, end - pos, &cl);
    size_t start = pos;
    if (cp == ' ' && pos + cl < end) { /* " ?" before a letter, number or other run */
        size_t nl;
        uint32_t next = pw_tok_utf8_decode(text + pos + cl, end - pos - cl, &nl);
        if (!pw_tok_is_space(next)) {
            pos += cl;
            cp = next;
            cl = nl;
        }
    }
    if (!pw_tok_is_space(cp)) {
        int cls = pw_tok_is_letter(cp) ? 0 : pw_tok_is_number(cp) ? 1 : 2;
        while (pos < end) {
            uint32_t c = pw_tok_utf8_decode(text + pos, end - pos, &cl);
            int ccls = pw_tok_is_space(c) ? -1 : pw_tok_is_letter(c) ? 0 : pw_tok_is_number(c) ? 1 : 2;
            if (ccls != cls) break;
            pos += cl;
        }
        return pos - start;
    }
    /* A whitespace run: keep its last character for the next word unless
     * the run ends the text or is a single character. */
    size_t last = pos;
    while (pos < end) {
        uint32_t c = pw_tok_utf8_decode(text + pos, end - pos, &cl);
        if (!pw_tok_is_space(c)) break;
        last = pos;
        pos += cl;
    }
    if (pos < end && last > start) return last - start;
    return pos - start;
}

/* One code point of text[0, end) at pos, classified; `in` is false past
 * the end (every class false), as llama.cpp's matchers see it. */
typedef struct cp_info {
    uint32_t cp;
    size_t len;
    bool in, letter, number, space, mark;
} cp_info;

static cp_info cp_at(const uint8_t *text, size_t pos, size_t end) {
    cp_info c = {0};
    if (pos >= end) return c;
    c.in = true;
    c.cp = pw_tok_utf8_decode(text + pos, end - pos, &c.len);
    c.space = pw_tok_is_space(c.cp);
    c.letter = !c.space && pw_tok_is_letter(c.cp);
    c.number = !c.space && !c.letter && pw_tok_is_number(c.cp);
    c.mark = !c.space && !c.letter && !c.number && pw_tok_is_mark(c.cp);
    return c;
}

static uint32_t ascii_lower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

/* Length of the match at text[pos] (within [0, end)) of Llama 3's pattern
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * or its Qwen variants (\p{N} one at a time; Qwen 3.5: marks count with
 * letters), alternative by alternative as llama.cpp's hand-written
 * matchers take them. */
static size_t llama3_match(pw_tok_pre pre, const uint8_t *text, size_t pos, size_t end) {
    const size_t start = pos;
    const bool marks = pre == PW_TOK_PRE_QWEN35;
    const int max_digits = pre == PW_TOK_PRE_LLAMA3 ? 3 : 1;
#define WORDISH(x) ((x).letter || (marks && (x).mark))
    cp_info c = cp_at(text, pos, end);
    if (c.cp == '\'' && pos + 1 < end) { /* contractions, any case */
        cp_info n1 = cp_at(text, pos + 1, end), n2 = cp_at(text, pos + 1 + n1.len, end);
        uint32_t a = ascii_lower(n1.cp), b = n2.in ? ascii_lower(n2.cp) : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1 + n1.len;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return 1 + n1.len + n2.len;
    }
    if (c.cp != '\r' && c.cp != '\n' && !c.number) { /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        cp_info next = cp_at(text, pos + c.len, end);
        if (WORDISH(c) || WORDISH(next)) {
            pos += c.len;
            for (cp_info x = next; x.in && WORDISH(x); x = cp_at(text, pos, end)) pos += x.len;
            return pos - start;
        }
    }
    if (c.number) { /* \p{N}{1,3} or \p{N} */
        int n = 0;
        for (cp_info x = c; x.in && x.number && n < max_digits; x = cp_at(text, pos, end), n++)
            pos += x.len;
        return pos - start;
    }
    /* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
    cp_info f = c.cp == ' ' ? cp_at(text, pos + c.len, end) : c;
    if (!(f.space || WORDISH(f) || f.number)) {
        if (c.cp == ' ') pos += c.len;
        for (cp_info x = f; x.in && !(x.space || WORDISH(x) || x.number); x = cp_at(text, pos, end))
            pos += x.len;
        while (pos < end && (text[pos] == '\r' || text[pos] == '\n')) pos++;
        return pos - start;
    }
#undef WORDISH
    /* whitespace: \s*[\r\n]+, else \s+(?!\S), else \s+ */
    size_t p = pos, last = pos, after_newline = 0;
    int n_space = 0;
    for (cp_info x = c; x.in && x.space; x = cp_at(text, p, end)) {
        if (x.cp == '\r' || x.cp == '\n') after_newline = p + x.len;
        last = p;
        p += x.len;
        n_space++;
    }
    if (after_newline) return after_newline - start;
    if (n_space > 1 && p < end) return last - start;
    if (n_space > 0) return p - start;
    return c.len; /* nothing matches: one code point */
}

/* Walks the pre-tokenizer's words. With PW_TOK_PRE_GPT2_DIGITS each number
 * character is a word of its own and the regex runs on the text between
 * them, with the end of that stretch acting as the end of text. */
typedef struct word_iter {
    const uint8_t *text;
    size_t len, pos, stretch_end;
} word_iter;

static bool next_word(const pw_tokenizer *t, word_iter *it, size_t *start, size_t *end) {
    if (it->pos >= it->len) return false;
    *start = it->pos;
    if (t->pre == PW_TOK_PRE_LLAMA3 || t->pre == PW_TOK_PRE_QWEN2 || t->pre == PW_TOK_PRE_QWEN35) {
        it->pos += llama3_match(t->pre, it->text, it->pos, it->len);
        *end = it->pos;
        return true;
    }
    if (t->pre != PW_TOK_PRE_GPT2_DIGITS) {
        it->stretch_end = it->len;
    } else if (it->pos >= it->stretch_end) {
        size_t cl;
        uint32_t cp = pw_tok_utf8_decode(it->text + it->pos, it->len - it->pos, &cl);
        if (pw_tok_is_number(cp)) {
            it->pos += cl;
            it->stretch_end = it->pos;
            *end = it->pos;
            return true;
        }
        size_t e = it->pos;
        while (e < it->len) {
            cp = pw_tok_utf8_decode(it->text + e, it->len - e, &cl);
            if (pw_tok_is_number(cp)) break;
            e += cl;
        }
        it->stretch_end = e;
    }
    it->pos += gpt2_match(it->text, it->pos, it->stretch_end);
    *end = it->pos;
    return true;
}

pw_status pw_tok_bpe_encode_fragment(const pw_tokenizer *t, merge_state *m, const char *text,
                                     size_t len, id_list *out) {
    word_iter it = {(const uint8_t *)text, len, 0, 0};
    size_t start, end;
    while (next_word(t, &it, &start, &end))
        PW_TRY(bpe_encode_word(t, m, text + start, end - start, out));
    return PW_OK;
}

pw_status pw_tokenizer_pretokenize(const pw_tokenizer *t, const char *text, size_t len,
                                   size_t **ends, int64_t *n_words) {
    if (!t || (!text && len) || !ends || !n_words)
        return pw_error(PW_ERR_INVALID_ARG, "tokenizer: pretokenize needs text and outputs");
    *ends = pw_host_alloc((len + 1) * sizeof **ends);
    if (!*ends) return pw_error(PW_ERR_OOM, "tokenizer: out of memory");
    *n_words = 0;
    if (t->kind == PW_TOKENIZER_SPM) {
        if (len) (*ends)[(*n_words)++] = len;
        return PW_OK;
    }
    word_iter it = {(const uint8_t *)text, len, 0, 0};
    size_t start, end;
    while (next_word(t, &it, &start, &end)) (*ends)[(*n_words)++] = end;
    return PW_OK;
}
