/* JSON text as a template value (pw_jinja_from_json), read as Python's
 * json.loads reads it, so that a template's `tojson` writes it back as
 * transformers would: a number with a fraction or an exponent stays a
 * float (1.0 is written "1.0"), keys keep their order and a repeated key
 * keeps its first place with its last value. A JSON library that keeps
 * only a double per number cannot tell 1 from 1.0, which the output shows,
 * hence this reader of strict JSON (RFC 8259).
 *
 * The text comes from clients: it must be valid UTF-8, nesting is bounded,
 * integers must fit 64 bits, numbers must be finite, and strings cannot
 * hold a NUL (template values are C strings). Every string is data, never
 * the template's own text. */
#include "model/jinja.h"
#include "model/tokenizer_internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct reader {
    const char *s;
    size_t n, at;
} reader;

static pw_status fail(const reader *r, const char *what) {
    return pw_error(PW_ERR_INVALID_ARG, "JSON: %s at byte %zu", what, r->at);
}

static void skip_space(reader *r) {
    while (r->at < r->n && strchr(" \t\r\n", r->s[r->at]) && r->s[r->at]) r->at++;
}

static bool literal(reader *r, const char *word) {
    size_t len = strlen(word);
    if (r->n - r->at < len || memcmp(r->s + r->at, word, len) != 0) return false;
    r->at += len;
    return true;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits after "\u". */
static bool hex4(reader *r, uint32_t *out) {
    if (r->n - r->at < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(r->s[r->at + (size_t)i]);
        if (d < 0) return false;
        v = v << 4 | (uint32_t)d;
    }
    r->at += 4;
    *out = v;
    return true;
}

/* A string (r->at on its opening quote) into sb. */
static pw_status read_string(reader *r, pw_sb *sb) {
    r->at++;
    for (;;) {
        if (r->at >= r->n) return fail(r, "unterminated string");
        unsigned char c = (unsigned char)r->s[r->at];
        if (c == '"') {
            r->at++;
            return sb->status;
        }
        if (c < 0x20) return fail(r, "control character in a string");
        if (c != '\\') {
            size_t run = r->at;
            while (run < r->n && r->s[run] != '"' && r->s[run] != '\\' && (unsigned char)r->s[run] >= 0x20)
                run++;
            pw_sb_append(sb, r->s + r->at, run - r->at);
            r->at = run;
            continue;
        }
        if (++r->at >= r->n) return fail(r, "unterminated string");
        char e = r->s[r->at++];
        static const char escapes[] = "\"\\/bfnrt", bytes[] = "\"\\/\b\f\n\r\t";
        const char *plain = e ? strchr(escapes, e) : NULL;
        if (plain) {
            pw_sb_append(sb, &bytes[plain - escapes], 1);
            continue;
        }
        if (e != 'u') return fail(r, "bad escape in a string");
        uint32_t cp;
        if (!hex4(r, &cp)) return fail(r, "bad \\u escape");
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(r, "lone surrogate in a \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (!literal(r, "\\u") || !hex4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return fail(r, "lone surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0) return fail(r, "a string holds a NUL character");
        char utf8[4];
        pw_sb_append(sb, utf8, pw_tok_utf8_encode(cp, utf8));
    }
}

/* A number, as json.loads reads it: an int without fraction or exponent,
 * else a float. */
static pw_status read_number(reader *r, pw_jinja_value **out) {
    size_t start = r->at;
    bool is_float = false;
    if (r->at < r->n && r->s[r->at] == '-') r->at++;
    if (r->at >= r->n || r->s[r->at] < '0' || r->s[r->at] > '9') return fail(r, "bad number");
    if (r->s[r->at] == '0') r->at++;
    else
        while (r->at < r->n && r->s[r->at] >= '0' && r->s[r->at] <= '9') r->at++;
    if (r->at < r->n && r->s[r->at] == '.') {
        is_float = true;
        size_t digits = ++r->at;
        while (r->at < r->n && r->s[r->at] >= '0' && r->s[r->at] <= '9') r->at++;
        if (r->at == digits) return fail(r, "bad number");
    }
    if (r->at < r->n && (r->s[r->at] == 'e' || r->s[r->at] == 'E')) {
        is_float = true;
        r->at++;
        if (r->at < r->n && (r->s[r->at] == '+' || r->s[r->at] == '-')) r->at++;
        size_t digits = r->at;
        while (r->at < r->n && r->s[r->at] >= '0' && r->s[r->at] <= '9') r->at++;
        if (r->at == digits) return fail(r, "bad number");
    }
    char buf[64];
    size_t len = r->at - start;
    if (len >= sizeof buf) return fail(r, "number too long");
    memcpy(buf, r->s + start, len);
    buf[len] = '\0';
    errno = 0;
    if (!is_float) {
        long long v = strtoll(buf, NULL, 10);
        if (errno == ERANGE) return fail(r, "integer out of the 64-bit range");
        *out = pw_jinja_int((int64_t)v);
    } else {
        double d = strtod(buf, NULL);
        if (!isfinite(d)) return fail(r, "number out of range");
        *out = pw_jinja_float(d);
    }
    return *out ? PW_OK : PW_ERR_OOM;
}

static pw_status read_value(reader *r, int depth, pw_jinja_value **out);

/* The byte c, consumed; false (nothing consumed) when another comes. */
static bool accept(reader *r, char c) {
    if (r->at >= r->n || r->s[r->at] != c) return false;
    r->at++;
    return true;
}

/* After a list item or a dict entry: true at ',' (another follows), false
 * at the closing bracket or with *s set to the error of any other byte. */
static bool next_item(reader *r, char close, pw_status *s) {
    skip_space(r);
    if (accept(r, ',')) return true;
    if (!accept(r, close)) *s = fail(r, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
    return false;
}

static pw_status read_list(reader *r, int depth, pw_jinja_value **out) {
    pw_jinja_value *list = pw_jinja_list();
    if (!list) return PW_ERR_OOM;
    r->at++;
    skip_space(r);
    pw_status s = PW_OK;
    if (!accept(r, ']')) {
        for (;;) {
            pw_jinja_value *v = NULL;
            if ((s = read_value(r, depth + 1, &v)) != PW_OK) break;
            if ((s = pw_jinja_append(list, v)) != PW_OK) break;
            if (!next_item(r, ']', &s)) break;
        }
    }
    if (s != PW_OK) {
        pw_jinja_value_free(list);
        return s;
    }
    *out = list;
    return PW_OK;
}

static pw_status read_dict(reader *r, int depth, pw_jinja_value **out) {
    pw_jinja_value *dict = pw_jinja_dict();
    if (!dict) return PW_ERR_OOM;
    r->at++;
    skip_space(r);
    pw_status s = PW_OK;
    if (!accept(r, '}')) {
        for (;;) {
            skip_space(r);
            if (r->at >= r->n || r->s[r->at] != '"') {
                s = fail(r, "expected a string key");
                break;
            }
            pw_sb key = {0};
            char *k = NULL;
            if ((s = read_string(r, &key)) != PW_OK || (s = pw_sb_finish(&key, &k)) != PW_OK) {
                pw_sb_discard(&key);
                break;
            }
            skip_space(r);
            pw_jinja_value *v = NULL;
            if (r->at >= r->n || r->s[r->at] != ':') {
                s = fail(r, "expected ':'");
            } else {
                r->at++;
                s = read_value(r, depth + 1, &v);
            }
            if (s == PW_OK) s = pw_jinja_set(dict, k, v);
            free(k);
            if (s != PW_OK || !next_item(r, '}', &s)) break;
        }
    }
    if (s != PW_OK) {
        pw_jinja_value_free(dict);
        return s;
    }
    *out = dict;
    return PW_OK;
}

static pw_status read_value(reader *r, int depth, pw_jinja_value **out) {
    *out = NULL;
    if (depth >= JSON_MAX_DEPTH) return fail(r, "nested deeper than 64 levels");
    skip_space(r);
    if (r->at >= r->n) return fail(r, "unexpected end");
    char c = r->s[r->at];
    if (c == '{') return read_dict(r, depth, out);
    if (c == '[') return read_list(r, depth, out);
    if (c == '"') {
        pw_sb sb = {0};
        char *text = NULL;
        pw_status s = read_string(r, &sb);
        if (s == PW_OK) s = pw_sb_finish(&sb, &text);
        pw_sb_discard(&sb);
        if (s != PW_OK) return s;
        *out = pw_jinja_string(text, strlen(text), false);
        free(text);
        return *out ? PW_OK : PW_ERR_OOM;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return read_number(r, out);
    if (literal(r, "true")) *out = pw_jinja_bool(true);
    else if (literal(r, "false")) *out = pw_jinja_bool(false);
    else if (literal(r, "null")) *out = pw_jinja_none();
    else return fail(r, "unexpected character");
    return *out ? PW_OK : PW_ERR_OOM;
}

pw_status pw_jinja_from_json(const char *text, size_t len, pw_jinja_value **out) {
    *out = NULL;
    if (!text) return pw_error(PW_ERR_INVALID_ARG, "JSON: no text");
    if (!pw_utf8_valid(text, len)) return pw_error(PW_ERR_INVALID_ARG, "JSON: not valid UTF-8");
    reader r = {text, len, 0};
    pw_jinja_value *v = NULL;
    PW_TRY(read_value(&r, 0, &v));
    skip_space(&r);
    if (r.at != r.n) {
        pw_jinja_value_free(v);
        return fail(&r, "text after the value");
    }
    *out = v;
    return PW_OK;
}
