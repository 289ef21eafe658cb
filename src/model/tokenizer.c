/* SentencePiece and byte-level BPE tokenizers from GGUF metadata; see
 * tokenizer.h. Both merge algorithms keep the symbols of one word in a
 * doubly linked list and candidate pairs in a binary heap, discarding
 * stale pairs when popped, as llama.cpp and SentencePiece do: the order of
 * merges (best score / lowest rank first, then leftmost) decides the
 * result, so it must match theirs exactly. */
#include "model/tokenizer.h"

#include "internal.h"

#include <inttypes.h>
#include <string.h>

/* U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's visible space. */
#define SPM_SPACE "\xe2\x96\x81"
#define SPM_SPACE_LEN 3
/* llama.cpp renders the unknown token as U+2585. */
#define SPM_UNKNOWN_PIECE "\xe2\x96\x85"

/* Control tokens llama.cpp treats as end of generation besides EOS/EOT. */
static const char *const eog_texts[] = {
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "<|end|>",
};

/* ---- hash tables ------------------------------------------------------------ */

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ULL;
    return h;
}

static uint64_t hash_u64(uint64_t x) { /* splitmix64 finalizer */
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static uint64_t table_capacity(uint64_t n) { /* load factor <= 1/2 */
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
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
    int32_t *specials;       /* CONTROL / USER_DEFINED ids, longest text first */
    int32_t n_specials;
    bool special_first_byte[256];

    int32_t bos, eos, unk, eot;
    bool add_bos;
    bool add_space_prefix;
    bool split_digits; /* pre-tokenizers that isolate each digit (smollm, ...) */

    uint32_t byte_to_cp[256]; /* GPT-2 bytes_to_unicode */
    int16_t cp_to_byte[512];  /* inverse for code points < 512; -1 if none */
};

static int32_t vocab_lookup(const pw_tokenizer *t, const char *p, size_t n) {
    for (uint64_t i = hash_bytes(p, n) & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        int32_t id = t->slots[i];
        if (id < 0) return -1;
        if (t->text_len[id] == n && memcmp(t->text[id], p, n) == 0) return id;
    }
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

static const merge_entry *merge_lookup(const pw_tokenizer *t, int32_t left, int32_t right) {
    if (!t->merges || left < 0 || right < 0) return NULL;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint64_t i = hash_u64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const merge_entry *e = &t->merges[i];
        if (e->key == UINT64_MAX) return NULL;
        if (e->key == key) return e;
    }
}

/* ---- UTF-8 and character classes ----------------------------------------------- */

/* Length of the UTF-8 sequence starting at p (at most n), 1 for invalid
 * bytes, which are then handled one at a time. */
static size_t utf8_len(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (len > n) return 1;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 1;
    return len;
}

/* Decodes one code point; invalid sequences give U+FFFD for one byte. */
static uint32_t utf8_decode(const uint8_t *p, size_t n, size_t *len) {
    *len = utf8_len(p, n);
    uint8_t c = p[0];
    switch (*len) {
    case 1: return c < 0x80 ? c : 0xFFFD;
    case 2: return (uint32_t)(c & 0x1F) << 6 | (p[1] & 0x3F);
    case 3: return (uint32_t)(c & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    default:
        return (uint32_t)(c & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
               (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    }
}

static size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

static bool in_ranges(uint32_t cp, const cp_range *r, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (cp >= r[i].lo && cp <= r[i].hi) return true;
    return false;
}

/* \s: the Unicode White_Space property. */
static bool is_space(uint32_t cp) {
    static const cp_range r[] = {
        {0x09, 0x0D}, {0x20, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680},
        {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
        {0x3000, 0x3000},
    };
    return in_ranges(cp, r, PW_ARRAY_LEN(r));
}

/* \p{N}: ASCII digits and the common non-ASCII digit, fraction, superscript,
 * roman numeral and circled-number blocks. */
static bool is_number(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    static const cp_range r[] = {
        {0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},     {0x660, 0x669},
        {0x6F0, 0x6F9},   {0x7C0, 0x7C9},   {0x966, 0x96F},   {0x9E6, 0x9EF},
        {0xE50, 0xE59},   {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089},
        {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF},
        {0x2776, 0x2793}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0xFF10, 0xFF19},
    };
    return in_ranges(cp, r, PW_ARRAY_LEN(r));
}

/* \p{L}, approximated: ASCII letters, and every other non-ASCII code point
 * that is not a space, a number, or in a punctuation / symbol / combining
 * mark / private-use block listed here. */
static bool is_letter(uint32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    if (is_space(cp) || is_number(cp)) return false;
    static const cp_range not_letters[] = {
        {0x80, 0xA9},     {0xAB, 0xB4},     {0xB6, 0xB9},     {0xBB, 0xBF},
        {0xD7, 0xD7},     {0xF7, 0xF7},     {0x2C2, 0x2C5},   {0x2D2, 0x2DF},
        {0x2E5, 0x2EB},   {0x2ED, 0x2ED},   {0x2EF, 0x36F},   {0x37E, 0x37E},
        {0x387, 0x387},   {0x55A, 0x55F},   {0x589, 0x58A},   {0x5BE, 0x5BE},
        {0x5C0, 0x5C0},   {0x5C3, 0x5C3},   {0x5C6, 0x5C6},   {0x5F3, 0x5F4},
        {0x600, 0x60F},   {0x61B, 0x61F},   {0x66A, 0x66D},   {0x6D4, 0x6D4},
        {0x964, 0x965},   {0x970, 0x970},   {0xE3F, 0xE3F},   {0xE4F, 0xE4F},
        {0xE5A, 0xE5B},   {0x2000, 0x2BFF}, {0x2E00, 0x2E7F}, {0x3000, 0x3004},
        {0x3008, 0x3020}, {0x3030, 0x3030}, {0x303D, 0x303F}, {0x30FB, 0x30FB},
        {0xD800, 0xF8FF}, {0xFE00, 0xFE0F}, {0xFE10, 0xFE1F}, {0xFE30, 0xFE6F},
        {0xFEFF, 0xFEFF}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF20}, {0xFF3B, 0xFF40},
        {0xFF5B, 0xFF65}, {0xFFF0, 0xFFFF}, {0x1F000, 0x1FBFF}, {0xE0000, 0x10FFFF},
    };
    return !in_ranges(cp, not_letters, PW_ARRAY_LEN(not_letters));
}

/* ---- growable id list ------------------------------------------------------------ */

typedef struct id_list {
    int32_t *ids;
    int64_t n, cap;
} id_list;

static pw_status push_id(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 64;
        int32_t *ids = pw_host_realloc(l->ids, (size_t)cap * sizeof *ids);
        if (!ids) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for %" PRId64 " ids", cap);
        l->ids = ids;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return PW_OK;
}

/* ---- merge machinery shared by both algorithms ----------------------------------- */

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

static void merge_state_free(merge_state *m) {
    pw_host_free(m->syms);
    pw_host_free(m->heap);
}

static bool bigram_before(const bigram *a, const bigram *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

static pw_status heap_push(merge_state *m, bigram b) {
    if (m->n_heap == m->cap_heap) {
        int64_t cap = m->cap_heap ? m->cap_heap * 2 : 64;
        bigram *h = pw_host_realloc(m->heap, (size_t)cap * sizeof *h);
        if (!h) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for merge candidates");
        m->heap = h;
        m->cap_heap = cap;
    }
    int64_t i = m->n_heap++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &m->heap[parent])) break;
        m->heap[i] = m->heap[parent];
        i = parent;
    }
    m->heap[i] = b;
    return PW_OK;
}

static bigram heap_pop(merge_state *m) {
    bigram top = m->heap[0];
    bigram last = m->heap[--m->n_heap];
    int64_t i = 0;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= m->n_heap) break;
        if (child + 1 < m->n_heap && bigram_before(&m->heap[child + 1], &m->heap[child])) child++;
        if (!bigram_before(&m->heap[child], &last)) break;
        m->heap[i] = m->heap[child];
        i = child;
    }
    if (m->n_heap > 0) m->heap[i] = last;
    return top;
}

/* Splits buf[0, n) into one symbol per UTF-8 character. */
static pw_status init_symbols(merge_state *m, const pw_tokenizer *t, const char *buf, size_t n,
                              bool with_ids) {
    m->n_syms = 0;
    m->n_heap = 0;
    if (n > (size_t)INT32_MAX) return pw_error(PW_ERR_INVALID_ARG, "tokenizer: text too long");
    if ((int64_t)n > m->cap_syms) {
        symbol *s = pw_host_realloc(m->syms, n * sizeof *s);
        if (!s) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for %zu symbols", n);
        m->syms = s;
        m->cap_syms = (int32_t)n;
    }
    for (size_t pos = 0; pos < n;) {
        size_t len = utf8_len((const uint8_t *)buf + pos, n - pos);
        symbol *s = &m->syms[m->n_syms];
        s->prev = m->n_syms - 1;
        s->next = m->n_syms + 1;
        s->start = (uint32_t)pos;
        s->len = (uint32_t)len;
        s->id = with_ids ? vocab_lookup(t, buf + pos, len) : -1;
        m->n_syms++;
        pos += len;
    }
    if (m->n_syms > 0) m->syms[m->n_syms - 1].next = -1;
    return PW_OK;
}

static pw_status spm_try_bigram(merge_state *m, const pw_tokenizer *t, const char *buf,
                                int32_t left, int32_t right) {
    if (left < 0 || right < 0) return PW_OK;
    const symbol *l = &m->syms[left], *r = &m->syms[right];
    uint32_t size = l->len + r->len;
    int32_t id = vocab_lookup(t, buf + l->start, size);
    if (id < 0) return PW_OK;
    bigram b = {left, right, t->scores[id], size, id};
    return heap_push(m, b);
}

static pw_status bpe_try_bigram(merge_state *m, const pw_tokenizer *t, int32_t left,
                                int32_t right) {
    if (left < 0 || right < 0) return PW_OK;
    const symbol *l = &m->syms[left], *r = &m->syms[right];
    const merge_entry *e = merge_lookup(t, l->id, r->id);
    if (!e) return PW_OK;
    bigram b = {left, right, -(double)e->rank, l->len + r->len, e->result};
    return heap_push(m, b);
}

/* Runs the merges queued in m until none applies. */
static pw_status run_merges(merge_state *m, const pw_tokenizer *t, const char *buf, bool spm) {
    while (m->n_heap > 0) {
        bigram b = heap_pop(m);
        symbol *l = &m->syms[b.left], *r = &m->syms[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.size) continue; /* stale */
        l->len += r->len;
        l->id = b.result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) m->syms[r->next].prev = b.left;
        if (spm) {
            PW_TRY(spm_try_bigram(m, t, buf, l->prev, b.left));
            PW_TRY(spm_try_bigram(m, t, buf, b.left, l->next));
        } else {
            PW_TRY(bpe_try_bigram(m, t, l->prev, b.left));
            PW_TRY(bpe_try_bigram(m, t, b.left, l->next));
        }
    }
    return PW_OK;
}

static pw_status push_unknown(const pw_tokenizer *t, id_list *out, const char *what, uint32_t v) {
    if (t->unk < 0)
        return pw_error(PW_ERR_NOT_FOUND, "tokenizer: no token for %s%02" PRIX32
                        " and the vocabulary has no unknown token", what, v);
    return push_id(out, t->unk);
}

/* ---- SentencePiece ------------------------------------------------------------------ */

/* Tokenizes one run of plain text: optional "▁" prefix, spaces escaped. */
static pw_status spm_encode_text(const pw_tokenizer *t, merge_state *m, const char *text,
                                 size_t len, bool prefix_space, id_list *out) {
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t cap = len + (spaces + 1) * (SPM_SPACE_LEN - 1) + SPM_SPACE_LEN + 1;
    char *buf = pw_host_alloc(cap);
    if (!buf) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for %zu bytes of text", len);
    size_t n = 0;
    if (prefix_space) {
        memcpy(buf, SPM_SPACE, SPM_SPACE_LEN);
        n = SPM_SPACE_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, SPM_SPACE, SPM_SPACE_LEN);
            n += SPM_SPACE_LEN;
        } else {
            buf[n++] = text[i];
        }
    }
    pw_status s = init_symbols(m, t, buf, n, false);
    for (int32_t i = 1; s == PW_OK && i < m->n_syms; i++) s = spm_try_bigram(m, t, buf, i - 1, i);
    if (s == PW_OK) s = run_merges(m, t, buf, true);
    for (int32_t i = m->n_syms > 0 ? 0 : -1; s == PW_OK && i >= 0; i = m->syms[i].next) {
        const symbol *sym = &m->syms[i];
        int32_t id = vocab_lookup(t, buf + sym->start, sym->len);
        if (id >= 0) {
            s = push_id(out, id);
            continue;
        }
        for (uint32_t k = 0; s == PW_OK && k < sym->len; k++) {
            uint8_t byte = (uint8_t)buf[sym->start + k];
            s = t->byte_token[byte] >= 0 ? push_id(out, t->byte_token[byte])
                                         : push_unknown(t, out, "byte 0x", byte);
        }
    }
    pw_host_free(buf);
    return s;
}

/* ---- byte-level BPE --------------------------------------------------------------- */

/* Tokenizes one pre-tokenized word (raw bytes). */
static pw_status bpe_encode_word(const pw_tokenizer *t, merge_state *m, const char *word,
                                 size_t len, id_list *out) {
    char *buf = pw_host_alloc(len * 2 + 1); /* every mapped code point is < U+0800 */
    if (!buf) return pw_error(PW_ERR_OOM, "tokenizer: out of memory for a word");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += utf8_encode(t->byte_to_cp[(uint8_t)word[i]], buf + n);
    pw_status s = init_symbols(m, t, buf, n, true);
    for (int32_t i = 1; s == PW_OK && i < m->n_syms; i++) s = bpe_try_bigram(m, t, i - 1, i);
    if (s == PW_OK) s = run_merges(m, t, buf, false);
    for (int32_t i = m->n_syms > 0 ? 0 : -1; s == PW_OK && i >= 0; i = m->syms[i].next) {
        const symbol *sym = &m->syms[i];
        if (sym->id >= 0) {
            s = push_id(out, sym->id);
            continue;
        }
        /* Not a token: one token per mapped character, i.e. per byte. */
        for (uint32_t k = 0; s == PW_OK && k < sym->len;) {
            size_t cl;
            uint32_t cp = utf8_decode((const uint8_t *)buf + sym->start + k, sym->len - k, &cl);
            int byte = cp < 512 ? t->cp_to_byte[cp] : -1;
            s = byte >= 0 && t->byte_token[byte] >= 0 ? push_id(out, t->byte_token[byte])
                                                      : push_unknown(t, out, "mapped character U+", cp);
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
    uint32_t cp = utf8_decode(text + pos, end - pos, &cl);
    size_t start = pos;
    if (cp == ' ' && pos + cl < end) { /* " ?" before a letter, number or other run */
        size_t nl;
        uint32_t next = utf8_decode(text + pos + cl, end - pos - cl, &nl);
        if (!is_space(next)) {
            pos += cl;
            cp = next;
            cl = nl;
        }
    }
    if (!is_space(cp)) {
        int cls = is_letter(cp) ? 0 : is_number(cp) ? 1 : 2;
        while (pos < end) {
            uint32_t c = utf8_decode(text + pos, end - pos, &cl);
            int ccls = is_space(c) ? -1 : is_letter(c) ? 0 : is_number(c) ? 1 : 2;
            if (ccls != cls) break;
            pos += cl;
        }
        return pos - start;
    }
    /* A whitespace run: keep its last character for the next word unless
     * the run ends the text or is a single character. */
    size_t last = pos;
    while (pos < end) {
        uint32_t c = utf8_decode(text + pos, end - pos, &cl);
        if (!is_space(c)) break;
        last = pos;
        pos += cl;
    }
    if (pos < end && last > start) return last - start;
    return pos - start;
}

/* Walks the pre-tokenizer's words. With split_digits each number
 * character is a word of its own and the regex runs on the text between
 * them, with the end of that stretch acting as the end of text. */
typedef struct word_iter {
    const uint8_t *text;
    size_t len, pos, stretch_end;
} word_iter;

static bool next_word(const pw_tokenizer *t, word_iter *it, size_t *start, size_t *end) {
    if (it->pos >= it->len) return false;
    *start = it->pos;
    if (!t->split_digits) {
        it->stretch_end = it->len;
    } else if (it->pos >= it->stretch_end) {
        size_t cl;
        uint32_t cp = utf8_decode(it->text + it->pos, it->len - it->pos, &cl);
        if (is_number(cp)) {
            it->pos += cl;
            it->stretch_end = it->pos;
            *end = it->pos;
            return true;
        }
        size_t e = it->pos;
        while (e < it->len) {
            cp = utf8_decode(it->text + e, it->len - e, &cl);
            if (is_number(cp)) break;
            e += cl;
        }
        it->stretch_end = e;
    }
    it->pos += gpt2_match(it->text, it->pos, it->stretch_end);
    *end = it->pos;
    return true;
}

static pw_status bpe_encode_fragment(const pw_tokenizer *t, merge_state *m, const char *text,
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

/* ---- encode ------------------------------------------------------------------------- */

/* The longest special token whose text starts at text[pos], or -1. */
static int32_t match_special(const pw_tokenizer *t, const char *text, size_t pos, size_t len) {
    if (!t->special_first_byte[(uint8_t)text[pos]]) return -1;
    for (int32_t k = 0; k < t->n_specials; k++) {
        int32_t id = t->specials[k];
        size_t sl = t->text_len[id];
        if (sl <= len - pos && memcmp(text + pos, t->text[id], sl) == 0) return id;
    }
    return -1;
}

static pw_status encode_fragment(const pw_tokenizer *t, merge_state *m, const char *text,
                                 size_t len, bool after_special, id_list *out) {
    if (len == 0) return PW_OK;
    if (t->kind == PW_TOKENIZER_SPM)
        return spm_encode_text(t, m, text, len, t->add_space_prefix && after_special, out);
    return bpe_encode_fragment(t, m, text, len, out);
}

pw_status pw_tokenizer_encode(const pw_tokenizer *t, const char *text, size_t len,
                              unsigned flags, int32_t **ids, int64_t *n_ids) {
    if (!t || (!text && len) || !ids || !n_ids)
        return pw_error(PW_ERR_INVALID_ARG, "tokenizer: encode needs a tokenizer, text and outputs");
    *ids = NULL;
    *n_ids = 0;
    id_list out = {0};
    merge_state m = {0};
    pw_status s = PW_OK;
    if ((flags & PW_TOKENIZE_ADD_BOS) && t->bos >= 0) s = push_id(&out, t->bos);
    /* As llama.cpp: the text starts "after a special token", so it gets the
     * SentencePiece space prefix, and so does text after each special. */
    bool after_special = true;
    size_t frag = 0;
    for (size_t pos = 0; s == PW_OK && pos < len;) {
        int32_t special = (flags & PW_TOKENIZE_PARSE_SPECIAL) ? match_special(t, text, pos, len) : -1;
        if (special < 0) {
            pos++;
            continue;
        }
        s = encode_fragment(t, &m, text + frag, pos - frag, after_special, &out);
        if (s == PW_OK) s = push_id(&out, special);
        after_special = true;
        pos += t->text_len[special];
        frag = pos;
    }
    if (s == PW_OK) s = encode_fragment(t, &m, text + frag, len - frag, after_special, &out);
    merge_state_free(&m);
    if (s == PW_OK && !out.ids) {
        out.ids = pw_host_alloc(sizeof *out.ids);
        if (!out.ids) s = pw_error(PW_ERR_OOM, "tokenizer: out of memory");
    }
    if (s != PW_OK) {
        pw_host_free(out.ids);
        return s;
    }
    *ids = out.ids;
    *n_ids = out.n;
    return PW_OK;
}

/* ---- decode ----------------------------------------------------------------------- */

static bool is_special_type(uint8_t type) {
    return type == PW_TOKEN_CONTROL || type == PW_TOKEN_USER_DEFINED;
}

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

static void init_byte_map(pw_tokenizer *t) {
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

/* "<0xNN>" -> NN, or -1. */
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
            uint32_t cp = utf8_decode((const uint8_t *)s + i, n - i, &cl);
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
} special_entry;

static int compare_special(const void *a, const void *b) {
    const special_entry *x = a, *y = b;
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
            char *j = pw_host_realloc(joined, len);
            if (!j) {
                st = pw_error(PW_ERR_OOM, "tokenizer: out of memory for merges");
                break;
            }
            joined = j;
            joined_cap = len;
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

static pw_status load_pre_tokenizer(pw_tokenizer *t, const pw_gguf *g) {
    const pw_gguf_kv *kv = pw_gguf_find_kv(g, "tokenizer.ggml.pre");
    if (!kv) return PW_OK;
    const char *pre;
    PW_TRY(pw_gguf_kv_string(kv, &pre, NULL));
    /* llama.cpp gives these the GPT-2 regex preceded by \p{N} (one word per
     * number character); "default" and "gpt2" use the GPT-2 regex alone. */
    static const char *const digit_split[] = {"smollm", "starcoder", "refact", "command-r",
                                              "codeshell", "exaone", "minerva"};
    for (size_t i = 0; i < PW_ARRAY_LEN(digit_split); i++)
        if (strcmp(pre, digit_split[i]) == 0) {
            t->split_digits = true;
            return PW_OK;
        }
    if (strcmp(pre, "default") == 0 || strcmp(pre, "gpt2") == 0 || strcmp(pre, "gpt-2") == 0)
        return PW_OK;
    return pw_error(PW_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%s' (tokenizer.ggml.pre) is "
                    "not supported (supported: default, gpt2, smollm, starcoder, refact, "
                    "command-r, codeshell, exaone, minerva)", pre);
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
    init_byte_map(t);
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
    t->add_bos = spm;
    t->add_space_prefix = spm;
    PW_TRY(read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos));
    PW_TRY(read_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix));

    for (int b = 0; b < 256; b++) {
        if (spm) {
            char text[8];
            snprintf(text, sizeof text, "<0x%02X>", b);
            t->byte_token[b] = vocab_lookup(t, text, 6);
        } else {
            char text[4];
            size_t n = utf8_encode(t->byte_to_cp[b], text);
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
            entries[t->n_specials++].id = i;
            t->special_first_byte[(uint8_t)t->text[i][0]] = true;
        }
    qsort(entries, (size_t)t->n_specials, sizeof *entries, compare_special);
    for (int32_t k = 0; k < t->n_specials; k++) t->specials[k] = entries[k].id;
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

unsigned pw_tokenizer_default_flags(const pw_tokenizer *t) {
    return (t->add_bos ? PW_TOKENIZE_ADD_BOS : 0u) | PW_TOKENIZE_PARSE_SPECIAL;
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
