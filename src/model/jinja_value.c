/* Jinja values: reference-counted strings (with their trusted spans),
 * lists and dicts; Python's str(), repr() and json.dumps of them. */
#include "model/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

jv jv_retain(jv v) {
    switch (v.type) {
    case JV_STR: v.u.s->rc++; break;
    case JV_LIST: v.u.l->rc++; break;
    case JV_DICT: v.u.d->rc++; break;
    case JV_MACRO: v.u.m->rc++; break;
    default: break;
    }
    return v;
}

void jv_release(jv v) {
    switch (v.type) {
    case JV_STR:
        if (--v.u.s->rc == 0) {
            pw_host_free(v.u.s->spans);
            pw_host_free(v.u.s);
        }
        break;
    case JV_LIST:
        if (--v.u.l->rc == 0) {
            for (int64_t i = 0; i < v.u.l->n; i++) jv_release(v.u.l->items[i]);
            pw_host_free(v.u.l->items);
            pw_host_free(v.u.l);
        }
        break;
    case JV_DICT:
        if (--v.u.d->rc == 0) {
            for (int64_t i = 0; i < v.u.d->n; i++) {
                jv_release(v.u.d->keys[i]);
                jv_release(v.u.d->vals[i]);
            }
            pw_host_free(v.u.d->keys);
            pw_host_free(v.u.d->vals);
            pw_host_free(v.u.d);
        }
        break;
    case JV_MACRO:
        if (--v.u.m->rc == 0) pw_host_free(v.u.m);
        break;
    default: break;
    }
}

jv jv_str_empty(size_t len, jstr **out) {
    *out = NULL;
    if (len > SIZE_MAX / 2) {
        pw_error(PW_ERR_OOM, "jinja: string of %zu bytes", len);
        return jv_undef();
    }
    jstr *s = pw_host_alloc(sizeof *s + len + 1);
    if (!s) return jv_undef();
    s->rc = 1;
    s->markup = false;
    s->len = len;
    s->n_spans = 0;
    s->spans = NULL;
    s->data[len] = '\0';
    *out = s;
    return (jv){.type = JV_STR, .u.s = s};
}

jv jv_str(const char *text, size_t len, bool trusted) {
    jstr *s;
    jv v = jv_str_empty(len, &s);
    if (!s) return v;
    if (len) memcpy(s->data, text, len);
    if (trusted && len) {
        s->spans = pw_host_alloc(sizeof *s->spans);
        if (!s->spans) {
            jv_release(v);
            return jv_undef();
        }
        s->spans[0] = (pw_jinja_span){0, len};
        s->n_spans = 1;
    }
    return v;
}

jv jv_list(void) {
    jlist *l = pw_host_calloc(1, sizeof *l);
    if (!l) return jv_undef();
    l->rc = 1;
    return (jv){.type = JV_LIST, .u.l = l};
}

jv jv_dict(void) {
    jdict *d = pw_host_calloc(1, sizeof *d);
    if (!d) return jv_undef();
    d->rc = 1;
    return (jv){.type = JV_DICT, .u.d = d};
}

pw_status jlist_push(jlist *l, jv v) {
    if (l->n >= JINJA_MAX_ITEMS) {
        jv_release(v);
        return pw_error(PW_ERR_INVALID_ARG, "jinja: a list holds more than %d items", JINJA_MAX_ITEMS);
    }
    if (l->n == l->cap) {
        size_t cap = (size_t)l->cap;
        jv *p = pw_host_grow(l->items, sizeof *p, &cap, (size_t)l->n + 1, JINJA_MAX_ITEMS);
        if (!p) {
            jv_release(v);
            return PW_ERR_OOM;
        }
        l->items = p;
        l->cap = (int64_t)cap;
    }
    l->items[l->n++] = v;
    return PW_OK;
}

jv *jdict_find_value(const jdict *d, jv key) {
    for (int64_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

jv *jdict_find(const jdict *d, const char *key, size_t len) {
    for (int64_t i = 0; i < d->n; i++) {
        jv k = d->keys[i];
        if (k.type == JV_STR && k.u.s->len == len && memcmp(k.u.s->data, key, len) == 0)
            return &d->vals[i];
    }
    return NULL;
}

pw_status jdict_put(jdict *d, jv k, jv v) {
    jv *old = jdict_find_value(d, k);
    if (old) {
        jv_release(*old);
        *old = v;
        jv_release(k);
        return PW_OK;
    }
    if (d->n >= JINJA_MAX_ITEMS) {
        jv_release(k);
        jv_release(v);
        return pw_error(PW_ERR_INVALID_ARG, "jinja: a dict holds more than %d items", JINJA_MAX_ITEMS);
    }
    if (d->n == d->cap) {
        size_t cap = (size_t)d->cap, cap2 = (size_t)d->cap;
        jv *keys = pw_host_grow(d->keys, sizeof *keys, &cap, (size_t)d->n + 1, JINJA_MAX_ITEMS);
        if (keys) d->keys = keys;
        jv *vals = keys ? pw_host_grow(d->vals, sizeof *vals, &cap2, (size_t)d->n + 1, JINJA_MAX_ITEMS) : NULL;
        if (!vals) {
            jv_release(k);
            jv_release(v);
            return PW_ERR_OOM;
        }
        d->vals = vals;
        d->cap = (int64_t)(cap < cap2 ? cap : cap2);
    }
    d->keys[d->n] = k;
    d->vals[d->n] = v;
    d->n++;
    return PW_OK;
}

bool jv_equal(jv a, jv b) {
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.type == JV_FLOAT || b.type == JV_FLOAT) return jv_as_double(a) == jv_as_double(b);
        int64_t x = a.type == JV_INT ? a.u.i : a.u.b, y = b.type == JV_INT ? b.u.i : b.u.b;
        return x == y;
    }
    if (a.type != b.type) return false;
    switch (a.type) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR:
        return a.u.s->len == b.u.s->len && memcmp(a.u.s->data, b.u.s->data, a.u.s->len) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (int64_t i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->items[i], b.u.l->items[i])) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (int64_t i = 0; i < a.u.d->n; i++) {
            jv *o = jdict_find_value(b.u.d, a.u.d->keys[i]);
            if (!o || !jv_equal(a.u.d->vals[i], *o)) return false;
        }
        return true;
    case JV_MACRO: return a.u.m == b.u.m;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return false;
    }
}

bool jv_truthy(jv v) {
    switch (v.type) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->len > 0;
    case JV_LIST: return v.u.l->n > 0;
    case JV_DICT: return v.u.d->n > 0;
    default: return true;
    }
}

const char *jv_type_name(jv v) {
    static const char *const names[] = {"undefined", "none", "bool", "int",   "float",
                                        "string",    "list", "dict", "macro", "function"};
    return v.type < PW_ARRAY_LEN(names) ? names[v.type] : "?";
}

/* ---- text with trusted spans --------------------------------------------- */

static void add_span(pw_jinja_span **spans, int64_t *n, int64_t *cap, size_t start, size_t len,
                     pw_status *status) {
    if (len == 0 || *status != PW_OK) return;
    if (*n > 0 && (*spans)[*n - 1].start + (*spans)[*n - 1].len == start) {
        (*spans)[*n - 1].len += len;
        return;
    }
    if (*n == *cap) {
        size_t c = (size_t)*cap;
        pw_jinja_span *p = pw_host_grow(*spans, sizeof *p, &c, (size_t)*n + 1, SIZE_MAX / sizeof *p);
        if (!p) {
            *status = PW_ERR_OOM;
            return;
        }
        *spans = p;
        *cap = (int64_t)c;
    }
    (*spans)[(*n)++] = (pw_jinja_span){start, len};
}

void jbuf_put(jbuf *b, const char *s, size_t n, bool trusted) {
    if (b->sb.status != PW_OK || b->over || n == 0) return;
    if (n > b->max || b->sb.len > b->max - n) {
        b->over = true;
        return;
    }
    size_t at = b->sb.len;
    pw_sb_append(&b->sb, s, n);
    if (trusted) add_span(&b->spans, &b->n_spans, &b->cap_spans, at, n, &b->sb.status);
}

void jbuf_put_str(jbuf *b, const jstr *s) {
    if (b->sb.status != PW_OK || b->over || s->len == 0) return;
    size_t at = b->sb.len;
    jbuf_put(b, s->data, s->len, false);
    if (b->sb.status != PW_OK || b->over) return;
    for (int64_t i = 0; i < s->n_spans; i++)
        add_span(&b->spans, &b->n_spans, &b->cap_spans, at + s->spans[i].start, s->spans[i].len,
                 &b->sb.status);
}

pw_status jbuf_status(const jbuf *b) {
    if (b->sb.status != PW_OK) return pw_error(b->sb.status, "jinja: out of memory building text");
    if (b->over)
        return pw_error(PW_ERR_INVALID_ARG, "jinja: text longer than the %zu bytes allowed", b->max);
    return PW_OK;
}

void jbuf_discard(jbuf *b) {
    pw_sb_discard(&b->sb);
    pw_host_free(b->spans);
    b->spans = NULL;
    b->n_spans = b->cap_spans = 0;
}

jv jbuf_to_str(jbuf *b) {
    jv v = jv_undef();
    if (jbuf_status(b) == PW_OK) {
        jstr *s;
        v = jv_str_empty(b->sb.len, &s);
        if (s) {
            if (b->sb.len) memcpy(s->data, b->sb.data, b->sb.len);
            s->spans = b->spans;
            s->n_spans = b->n_spans;
            b->spans = NULL;
        }
    }
    jbuf_discard(b);
    return v;
}

jv jstr_sub(const jstr *s, size_t start, size_t n) {
    jbuf b = {.max = SIZE_MAX};
    jbuf_put(&b, s->data + start, n, false);
    pw_status st = PW_OK;
    for (int64_t i = 0; i < s->n_spans; i++) {
        size_t lo = s->spans[i].start, hi = lo + s->spans[i].len;
        if (lo < start) lo = start;
        if (hi > start + n) hi = start + n;
        if (lo < hi) add_span(&b.spans, &b.n_spans, &b.cap_spans, lo - start, hi - lo, &st);
    }
    if (st != PW_OK) b.sb.status = st;
    if (n == 0) return jv_str("", 0, false);
    return jbuf_to_str(&b);
}

/* ---- str(), repr(), json ---------------------------------------------------- */

void jv_format_float(double f, char *out, size_t cap) {
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp: [-]d.ddde[+-]XX; digits and the decimal point's position. */
    char digits[24];
    int nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < 20) digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    int decpt = exp10 + 1;
    char *o = out;
    size_t left = cap;
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        int k_ = snprintf(o, left, __VA_ARGS__);                                                   \
        if (k_ < 0 || (size_t)k_ >= left) return;                                                  \
        o += k_;                                                                                   \
        left -= (size_t)k_;                                                                        \
    } while (0)
    if (neg) EMIT("-");
    if (decpt <= -4 || decpt > 16) {
        EMIT("%c", digits[0]);
        if (nd > 1) EMIT(".%s", digits + 1);
        EMIT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        EMIT("0.");
        for (int i = 0; i < -decpt; i++) EMIT("0");
        EMIT("%s", digits);
    } else {
        for (int i = 0; i < decpt; i++) EMIT("%c", i < nd ? digits[i] : '0');
        EMIT(".");
        if (nd > decpt) EMIT("%s", digits + decpt);
        else EMIT("0");
    }
#undef EMIT
}

static void put_cstr(jbuf *b, const char *s) { jbuf_put(b, s, strlen(s), false); }

static void repr_str(jbuf *b, const jstr *s) {
    bool has_sq = memchr(s->data, '\'', s->len) != NULL, has_dq = memchr(s->data, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_put(b, &q, 1, false);
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->data[i];
        char esc[8];
        if (c == '\\' || c == (unsigned char)q) {
            esc[0] = '\\';
            esc[1] = (char)c;
            jbuf_put(b, esc, 2, false);
        } else if (c == '\n') put_cstr(b, "\\n");
        else if (c == '\r') put_cstr(b, "\\r");
        else if (c == '\t') put_cstr(b, "\\t");
        else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            put_cstr(b, esc);
        } else jbuf_put(b, (const char *)&s->data[i], 1, false);
    }
    jbuf_put(b, &q, 1, false);
}

static void jv_repr(jbuf *b, jv v, int depth);

static void repr_container(jbuf *b, jv v, int depth) {
    if (depth > 64) {
        put_cstr(b, "...");
        return;
    }
    if (v.type == JV_LIST) {
        put_cstr(b, v.u.l->tuple ? "(" : "[");
        for (int64_t i = 0; i < v.u.l->n; i++) {
            if (i) put_cstr(b, ", ");
            jv_repr(b, v.u.l->items[i], depth + 1);
        }
        put_cstr(b, !v.u.l->tuple ? "]" : v.u.l->n == 1 ? ",)" : ")");
    } else if (v.u.d->is_namespace) {
        put_cstr(b, "<Namespace>");
    } else {
        put_cstr(b, "{");
        for (int64_t i = 0; i < v.u.d->n; i++) {
            if (i) put_cstr(b, ", ");
            jv_repr(b, v.u.d->keys[i], depth + 1);
            put_cstr(b, ": ");
            jv_repr(b, v.u.d->vals[i], depth + 1);
        }
        put_cstr(b, "}");
    }
}

static void scalar_text(jbuf *b, jv v) {
    char num[48];
    switch (v.type) {
    case JV_NONE: put_cstr(b, "None"); break;
    case JV_BOOL: put_cstr(b, v.u.b ? "True" : "False"); break;
    case JV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v.u.i);
        put_cstr(b, num);
        break;
    case JV_FLOAT:
        jv_format_float(v.u.f, num, sizeof num);
        put_cstr(b, num);
        break;
    case JV_MACRO: put_cstr(b, "<Macro>"); break;
    case JV_FUNC: put_cstr(b, "<function>"); break;
    default: break;
    }
}

static void jv_repr(jbuf *b, jv v, int depth) {
    if (v.type == JV_STR) repr_str(b, v.u.s);
    else if (v.type == JV_LIST || v.type == JV_DICT) repr_container(b, v, depth);
    else if (v.type == JV_UNDEF) put_cstr(b, "Undefined");
    else scalar_text(b, v);
}

void jv_to_text(jbuf *b, jv v) {
    if (v.type == JV_STR) jbuf_put_str(b, v.u.s);
    else if (v.type == JV_LIST || v.type == JV_DICT) repr_container(b, v, 0);
    else scalar_text(b, v);
}

static void json_str(jbuf *b, const char *s, size_t n) {
    put_cstr(b, "\"");
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            esc = u;
        }
        if (esc) {
            jbuf_put(b, s + run, i - run, false);
            put_cstr(b, esc);
            run = i + 1;
        }
    }
    jbuf_put(b, s + run, n - run, false);
    put_cstr(b, "\"");
}

static void json_newline(jbuf *b, int indent, int level) {
    put_cstr(b, "\n");
    for (int i = 0; i < indent * level && !b->over; i++) put_cstr(b, " ");
}

pw_status jv_to_json(jbuf *b, jv v, int indent, int depth) {
    if (depth > 128) return pw_error(PW_ERR_INVALID_ARG, "tojson: value nested too deeply");
    char num[48];
    switch (v.type) {
    case JV_NONE: put_cstr(b, "null"); return PW_OK;
    case JV_BOOL: put_cstr(b, v.u.b ? "true" : "false"); return PW_OK;
    case JV_INT:
    case JV_FLOAT:
        if (v.type == JV_FLOAT && isnan(v.u.f)) put_cstr(b, "NaN");
        else if (v.type == JV_FLOAT && isinf(v.u.f)) put_cstr(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            scalar_text(b, v);
        }
        (void)num;
        return PW_OK;
    case JV_STR: json_str(b, v.u.s->data, v.u.s->len); return PW_OK;
    case JV_LIST:
        if (v.u.l->lazy)
            return pw_error(PW_ERR_INVALID_ARG, "tojson: Object of type generator is not JSON serializable");
        if (v.u.l->n == 0) {
            put_cstr(b, "[]");
            return PW_OK;
        }
        put_cstr(b, "[");
        for (int64_t i = 0; i < v.u.l->n; i++) {
            if (i) put_cstr(b, indent >= 0 ? "," : ", ");
            if (indent >= 0) json_newline(b, indent, depth + 1);
            PW_TRY(jv_to_json(b, v.u.l->items[i], indent, depth + 1));
        }
        if (indent >= 0) json_newline(b, indent, depth);
        put_cstr(b, "]");
        return PW_OK;
    case JV_DICT:
        if (v.u.d->is_namespace)
            return pw_error(PW_ERR_INVALID_ARG, "tojson: a namespace is not JSON serializable");
        if (v.u.d->n == 0) {
            put_cstr(b, "{}");
            return PW_OK;
        }
        put_cstr(b, "{");
        for (int64_t i = 0; i < v.u.d->n; i++) {
            if (i) put_cstr(b, indent >= 0 ? "," : ", ");
            if (indent >= 0) json_newline(b, indent, depth + 1);
            jv k = v.u.d->keys[i];
            if (k.type == JV_STR) json_str(b, k.u.s->data, k.u.s->len);
            else if (k.type == JV_NONE) put_cstr(b, "\"null\"");
            else if (k.type == JV_BOOL) put_cstr(b, k.u.b ? "\"true\"" : "\"false\"");
            else if (k.type == JV_INT || k.type == JV_FLOAT) {
                put_cstr(b, "\"");
                scalar_text(b, k);
                put_cstr(b, "\"");
            } else return pw_error(PW_ERR_INVALID_ARG, "tojson: keys must be str, int, float, bool or None");
            put_cstr(b, ": ");
            PW_TRY(jv_to_json(b, v.u.d->vals[i], indent, depth + 1));
        }
        if (indent >= 0) json_newline(b, indent, depth);
        put_cstr(b, "}");
        return PW_OK;
    default:
        return pw_error(PW_ERR_INVALID_ARG, "tojson: Object of type %s is not JSON serializable",
                        v.type == JV_UNDEF ? "Undefined" : jv_type_name(v));
    }
}

void jbuf_put_escaped(jbuf *b, const jstr *s) {
    size_t run = 0;
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->data[i];
        const char *e = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;"
                      : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
        if (!e) continue;
        if (i > run) {
            jv sub = jstr_sub(s, run, i - run);
            if (jv_failed(sub)) {
                b->sb.status = PW_ERR_OOM;
                return;
            }
            jbuf_put_str(b, sub.u.s);
            jv_release(sub);
        }
        put_cstr(b, e);
        run = i + 1;
    }
    if (run < s->len) {
        jv sub = jstr_sub(s, run, s->len - run);
        if (jv_failed(sub)) {
            b->sb.status = PW_ERR_OOM;
            return;
        }
        jbuf_put_str(b, sub.u.s);
        jv_release(sub);
    }
}

/* ---- the public constructors ------------------------------------------------- */

static pw_jinja_value *box(jv v) {
    if (v.type == JV_UNDEF) return NULL;
    pw_jinja_value *b = pw_host_alloc(sizeof *b);
    if (!b) {
        jv_release(v);
        return NULL;
    }
    b->v = v;
    return b;
}

pw_jinja_value *pw_jinja_none(void) { return box(jv_none()); }
pw_jinja_value *pw_jinja_bool(bool b) { return box(jv_bool(b)); }
pw_jinja_value *pw_jinja_int(int64_t i) { return box(jv_int(i)); }
pw_jinja_value *pw_jinja_float(double f) { return box(jv_float(f)); }
pw_jinja_value *pw_jinja_string(const char *s, size_t len, bool trusted) {
    return box(jv_str(s, len, trusted));
}
pw_jinja_value *pw_jinja_list(void) { return box(jv_list()); }
pw_jinja_value *pw_jinja_dict(void) { return box(jv_dict()); }

bool pw_jinja_is_list_of_dicts(const pw_jinja_value *v) {
    if (!v || v->v.type != JV_LIST) return false;
    for (int64_t i = 0; i < v->v.u.l->n; i++)
        if (v->v.u.l->items[i].type != JV_DICT) return false;
    return true;
}

void pw_jinja_value_free(pw_jinja_value *v) {
    if (!v) return;
    jv_release(v->v);
    pw_host_free(v);
}

pw_status pw_jinja_append(pw_jinja_value *list, pw_jinja_value *v) {
    if (!list || !v || list->v.type != JV_LIST) {
        pw_jinja_value_free(v);
        return list && list->v.type != JV_LIST
                   ? pw_error(PW_ERR_INVALID_ARG, "jinja: append to a value that is not a list")
                   : pw_error(PW_ERR_OOM, "jinja: out of memory building the context");
    }
    jv x = v->v;
    pw_host_free(v);
    return jlist_push(list->v.u.l, x);
}

pw_status pw_jinja_set(pw_jinja_value *dict, const char *key, pw_jinja_value *v) {
    if (!dict || !v || !key || dict->v.type != JV_DICT) {
        pw_jinja_value_free(v);
        return dict && key && dict->v.type != JV_DICT
                   ? pw_error(PW_ERR_INVALID_ARG, "jinja: set on a value that is not a dict")
                   : pw_error(PW_ERR_OOM, "jinja: out of memory building the context");
    }
    jv k = jv_str(key, strlen(key), false);
    jv x = v->v;
    pw_host_free(v);
    if (jv_failed(k)) {
        jv_release(x);
        return PW_ERR_OOM;
    }
    return jdict_put(dict->v.u.d, k, x);
}
