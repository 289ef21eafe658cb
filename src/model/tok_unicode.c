/* UTF-8 and the code point classes of the pre-tokenizers (tokenizer.h):
 * White_Space, and \p{L}, \p{N}, \p{M} from the Unicode tables in
 * tok_unicode_data.c. */
#include "model/tokenizer_internal.h"

/* ---- UTF-8 and character classes ----------------------------------------------- */

/* Length of the UTF-8 sequence starting at p (at most n), 1 for invalid
 * bytes, which are then handled one at a time. */
size_t pw_tok_utf8_len(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (len > n) return 1;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 1;
    return len;
}

/* Decodes one code point; invalid sequences give U+FFFD for one byte. */
uint32_t pw_tok_utf8_decode(const uint8_t *p, size_t n, size_t *len) {
    *len = pw_tok_utf8_len(p, n);
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

size_t pw_tok_utf8_encode(uint32_t cp, char *out) {
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
bool pw_tok_is_space(uint32_t cp) {
    static const cp_range r[] = {
        {0x09, 0x0D}, {0x20, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680},
        {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
        {0x3000, 0x3000},
    };
    return in_ranges(cp, r, PW_ARRAY_LEN(r));
}

/* The general-category class of cp (tok_unicode_data.c): 0 other, 1 \p{L},
 * 2 \p{N}, 3 \p{M}. */
static unsigned unicode_class(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    size_t lo = 0, hi = pw_tok_unicode_n_ranges; /* the last entry starting at or before cp */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((pw_tok_unicode_ranges[mid] >> 2) <= cp) lo = mid;
        else hi = mid;
    }
    return pw_tok_unicode_ranges[lo] & 3u;
}

bool pw_tok_is_number(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return unicode_class(cp) == 2;
}

bool pw_tok_is_letter(uint32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return unicode_class(cp) == 1;
}

bool pw_tok_is_mark(uint32_t cp) { return cp >= 0x80 && unicode_class(cp) == 3; }
