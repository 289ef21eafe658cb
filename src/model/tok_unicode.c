/* UTF-8 and the code point classes of the GPT-2 pre-tokenizer (tokenizer.h). */
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

/* \p{N}: ASCII digits and the common non-ASCII digit, fraction, superscript,
 * roman numeral and circled-number blocks. */
bool pw_tok_is_number(uint32_t cp) {
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
bool pw_tok_is_letter(uint32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    if (pw_tok_is_space(cp) || pw_tok_is_number(cp)) return false;
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
