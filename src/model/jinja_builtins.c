/* The Jinja builtins chat templates use: jinja2's filters and tests, the
 * Python string and dict methods the sandbox allows (lists and dicts are
 * immutable there: append, pop, update... are refused, as in
 * transformers' ImmutableSandboxedEnvironment), and the globals range,
 * namespace, dict, raise_exception and strftime_now. Text that a filter
 * copies from its input keeps the input's trusted spans; text it makes up
 * (numbers, JSON, quotes) is data. Case mapping is ASCII only. */
#include "model/jinja_internal.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define FAIL(...) return jctx_fail(c, line, __VA_ARGS__)

static bool py_space(unsigned char ch) {
    return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f);
}

static jv new_str(const char *s, size_t n) { return jv_str(s, n, false); }

static pw_status ok_or_oom(jv v, jv *out) {
    *out = v;
    return jv_failed(v) ? PW_ERR_OOM : PW_OK;
}

/* Appends s[start, start + n) with its spans. */
static void put_sub(jbuf *b, const jstr *s, size_t start, size_t n) {
    if (n == 0) return;
    jv sub = jstr_sub(s, start, n);
    if (jv_failed(sub)) {
        b->sb.status = PW_ERR_OOM;
        return;
    }
    jbuf_put_str(b, sub.u.s);
    jv_release(sub);
}

static pw_status finish(jctx *c, int line, jbuf *b, jv *out) {
    if (jbuf_status(b) != PW_OK) {
        jbuf_discard(b);
        return b->over ? jctx_fail(c, line, "%s", pw_last_error()) : PW_ERR_OOM;
    }
    return ok_or_oom(jbuf_to_str(b), out);
}

static pw_status to_string(jctx *c, int line, jv v, jv *out) {
    if (v.type == JV_STR) {
        *out = jv_retain(v);
        return PW_OK;
    }
    jbuf b = {.max = jctx_max_string(c)};
    jv_to_text(&b, v);
    return finish(c, line, &b, out);
}

static size_t utf8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static int64_t length_of(jv v) {
    switch (v.type) {
    case JV_STR: return (int64_t)utf8_count(v.u.s->data, v.u.s->len);
    case JV_LIST: return v.u.l->n;
    case JV_DICT: return v.u.d->n;
    default: return -1;
    }
}

/* A copy of s with ASCII letters mapped by mode: 'u' upper, 'l' lower,
 * 'c' capitalize, 't' title; the spans kept (lengths do not change). */
static pw_status map_case(jv s, char mode, jv *out) {
    jv r = jstr_sub(s.u.s, 0, s.u.s->len);
    if (jv_failed(r)) return PW_ERR_OOM;
    char *d = r.u.s->data;
    bool word_start = true;
    for (size_t i = 0; i < r.u.s->len; i++) {
        unsigned char ch = (unsigned char)d[i];
        bool up = mode == 'u' || (mode == 'c' && i == 0) || (mode == 't' && word_start);
        if (mode == 't') {
            /* jinja2's title: words start after "-", whitespace and brackets */
            if (strchr("-({[<", ch) || py_space(ch)) {
                word_start = true;
                continue;
            }
            word_start = false;
        }
        d[i] = (char)(up ? toupper(ch) : tolower(ch));
    }
    *out = r;
    return PW_OK;
}

static bool is_in_chars(unsigned char ch, const jv *chars) {
    if (!chars || chars->type != JV_STR) return py_space(ch);
    return memchr(chars->u.s->data, ch, chars->u.s->len) != NULL;
}

static pw_status strip(jv s, const jv *chars, bool left, bool right, jv *out) {
    size_t a = 0, b = s.u.s->len;
    const unsigned char *d = (const unsigned char *)s.u.s->data;
    if (left)
        while (a < b && is_in_chars(d[a], chars)) a++;
    if (right)
        while (b > a && is_in_chars(d[b - 1], chars)) b--;
    return ok_or_oom(jstr_sub(s.u.s, a, b - a), out);
}

static const char *find_bytes(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (memcmp(h + i, n, nn) == 0) return h + i;
    return NULL;
}

static pw_status replace(jctx *c, int line, jv s, jv old, jv rep, int64_t count, jv *out) {
    if (old.type != JV_STR || rep.type != JV_STR) FAIL("replace() arguments must be strings");
    jbuf b = {.max = jctx_max_string(c)};
    const jstr *src = s.u.s;
    size_t pos = 0;
    int64_t done = 0;
    if (old.u.s->len == 0) {
        /* Python inserts rep between every character and at both ends */
        size_t i = 0;
        while (i <= src->len && (count < 0 || done < count) && !b.over) {
            jbuf_put_str(&b, rep.u.s);
            done++;
            if (i == src->len) break;
            size_t j = i + 1;
            while (j < src->len && ((unsigned char)src->data[j] & 0xC0) == 0x80) j++;
            put_sub(&b, src, i, j - i);
            i = j;
            pos = j;
        }
        put_sub(&b, src, pos, src->len - pos);
        return finish(c, line, &b, out);
    }
    while (count < 0 || done < count) {
        const char *hit = find_bytes(src->data + pos, src->len - pos, old.u.s->data, old.u.s->len);
        if (!hit) break;
        size_t at = (size_t)(hit - src->data);
        put_sub(&b, src, pos, at - pos);
        jbuf_put_str(&b, rep.u.s);
        pos = at + old.u.s->len;
        done++;
        if (b.over) break;
    }
    put_sub(&b, src, pos, src->len - pos);
    return finish(c, line, &b, out);
}

static pw_status split(jctx *c, int line, jv s, const jv *sep, int64_t maxsplit, jv *out) {
    jv l = jv_list();
    if (jv_failed(l)) return PW_ERR_OOM;
    const jstr *src = s.u.s;
    pw_status st = PW_OK;
    if (!sep || sep->type == JV_NONE || sep->type == JV_UNDEF) {
        size_t i = 0;
        int64_t n = 0;
        while (st == PW_OK) {
            while (i < src->len && py_space((unsigned char)src->data[i])) i++;
            if (i >= src->len) break;
            size_t j = i;
            if (maxsplit >= 0 && n >= maxsplit) {
                j = src->len;
                while (j > i && py_space((unsigned char)src->data[j - 1])) j--;
            } else {
                while (j < src->len && !py_space((unsigned char)src->data[j])) j++;
            }
            jv part = jstr_sub(src, i, j - i);
            st = jv_failed(part) ? PW_ERR_OOM : jlist_push(l.u.l, part);
            n++;
            i = j;
        }
    } else {
        if (sep->type != JV_STR) {
            jv_release(l);
            FAIL("split() separator must be a string");
        }
        if (sep->u.s->len == 0) {
            jv_release(l);
            FAIL("empty separator");
        }
        size_t pos = 0;
        int64_t n = 0;
        for (;;) {
            const char *hit = maxsplit >= 0 && n >= maxsplit
                                  ? NULL
                                  : find_bytes(src->data + pos, src->len - pos, sep->u.s->data, sep->u.s->len);
            size_t end = hit ? (size_t)(hit - src->data) : src->len;
            jv part = jstr_sub(src, pos, end - pos);
            st = jv_failed(part) ? PW_ERR_OOM : jlist_push(l.u.l, part);
            if (st != PW_OK || !hit) break;
            pos = end + sep->u.s->len;
            n++;
        }
    }
    if (st != PW_OK) {
        jv_release(l);
        return st;
    }
    (void)c;
    (void)line;
    *out = l;
    return PW_OK;
}

static bool affix(jv s, jv x, bool start) {
    if (x.type != JV_STR || x.u.s->len > s.u.s->len) return false;
    size_t at = start ? 0 : s.u.s->len - x.u.s->len;
    return memcmp(s.u.s->data + at, x.u.s->data, x.u.s->len) == 0;
}

/* The attribute path "a.b.0" of v, or undefined. A new reference. */
static jv attr_path(jv v, const char *path) {
    jv cur = jv_retain(v);
    while (*path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        jv next = jv_undef();
        if (cur.type == JV_DICT) {
            jv *x = jdict_find(cur.u.d, path, n);
            if (x) next = jv_retain(*x);
        } else if (cur.type == JV_LIST && n > 0 && isdigit((unsigned char)path[0])) {
            int64_t i = strtoll(path, NULL, 10);
            if (i >= 0 && i < cur.u.l->n) next = jv_retain(cur.u.l->items[i]);
        }
        jv_release(cur);
        cur = next;
        if (!dot) break;
        path = dot + 1;
    }
    return cur;
}

static const char *str_arg(const jv *v) { return v && v->type == JV_STR ? v->u.s->data : NULL; }

/* Items of an iterable as a list (new reference). */
static pw_status as_list(jctx *c, int line, jv v, jv *out) {
    if (v.type == JV_LIST) {
        *out = jv_retain(v);
        return PW_OK;
    }
    jv l = jv_list();
    if (jv_failed(l)) return PW_ERR_OOM;
    pw_status st = PW_OK;
    if (v.type == JV_DICT) {
        for (int64_t i = 0; st == PW_OK && i < v.u.d->n; i++) st = jlist_push(l.u.l, jv_retain(v.u.d->keys[i]));
    } else if (v.type == JV_STR) {
        for (size_t i = 0; st == PW_OK && i < v.u.s->len;) {
            size_t j = i + 1;
            while (j < v.u.s->len && ((unsigned char)v.u.s->data[j] & 0xC0) == 0x80) j++;
            jv ch = jstr_sub(v.u.s, i, j - i);
            st = jv_failed(ch) ? PW_ERR_OOM : jlist_push(l.u.l, ch);
            i = j;
        }
    } else if (v.type != JV_UNDEF) {
        jv_release(l);
        FAIL("'%s' object is not iterable", jv_type_name(v));
    }
    if (st != PW_OK) {
        jv_release(l);
        return st;
    }
    *out = l;
    return PW_OK;
}

/* Ordering for sort, dictsort, min, max, unique: strings compare lowercased
 * unless case_sensitive. */
static int order(jctx *c, int line, jv a, jv b, bool case_sensitive, pw_status *st) {
    if (a.type == JV_STR && b.type == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        for (size_t i = 0; i < n; i++) {
            int x = (unsigned char)a.u.s->data[i], y = (unsigned char)b.u.s->data[i];
            if (!case_sensitive) {
                x = tolower(x);
                y = tolower(y);
            }
            if (x != y) return x < y ? -1 : 1;
        }
        return (a.u.s->len > b.u.s->len) - (a.u.s->len < b.u.s->len);
    }
    if (jv_is_number(a) && jv_is_number(b)) {
        double x = jv_as_double(a), y = jv_as_double(b);
        return (x > y) - (x < y);
    }
    if (a.type == JV_LIST && b.type == JV_LIST) {
        for (int64_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            int r = order(c, line, a.u.l->items[i], b.u.l->items[i], case_sensitive, st);
            if (r || *st != PW_OK) return r;
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    *st = jctx_fail(c, line, "cannot order a %s and a %s", jv_type_name(a), jv_type_name(b));
    return 0;
}

typedef struct sort_spec {
    const char *attribute;
    bool case_sensitive, reverse, by_value; /* by_value: dictsort by="value" on pairs */
    int pair_index;                          /* -1, or the pair element to compare */
} sort_spec;

static jv sort_key(jv v, const sort_spec *sp) {
    if (sp->pair_index >= 0 && v.type == JV_LIST && v.u.l->n > sp->pair_index)
        return jv_retain(v.u.l->items[sp->pair_index]);
    if (sp->attribute) return attr_path(v, sp->attribute);
    return jv_retain(v);
}

/* A stable merge sort of items[0, n) that stops at the first error. */
static pw_status merge_sort(jctx *c, int line, jv *items, int64_t n, const sort_spec *sp) {
    if (n < 2) return PW_OK;
    jv *tmp = pw_host_alloc((size_t)n * sizeof *tmp);
    if (!tmp) return PW_ERR_OOM;
    pw_status st = PW_OK;
    for (int64_t w = 1; w < n && st == PW_OK; w *= 2) {
        for (int64_t lo = 0; lo < n && st == PW_OK; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                jv ka = sort_key(items[i], sp), kb = sort_key(items[j], sp);
                int r = order(c, line, ka, kb, sp->case_sensitive, &st);
                jv_release(ka);
                jv_release(kb);
                if (st != PW_OK) break;
                if (sp->reverse) r = -r;
                tmp[k++] = r <= 0 ? items[i++] : items[j++];
            }
            if (st != PW_OK) break;
            while (i < mid) tmp[k++] = items[i++];
            while (j < hi) tmp[k++] = items[j++];
            memcpy(items + lo, tmp + lo, (size_t)(hi - lo) * sizeof *items);
        }
        if (st == PW_OK) st = jctx_step(c, line);
    }
    pw_host_free(tmp);
    return st;
}

static pw_status copy_list(jv l, jv *out) {
    jv r = jv_list();
    if (jv_failed(r)) return PW_ERR_OOM;
    for (int64_t i = 0; i < l.u.l->n; i++) {
        pw_status st = jlist_push(r.u.l, jv_retain(l.u.l->items[i]));
        if (st != PW_OK) {
            jv_release(r);
            return st;
        }
    }
    *out = r;
    return PW_OK;
}

/* printf-style formatting ("%s" % x, "..."|format(...)). */
static pw_status percent_format(jctx *c, int line, jv fmt, const jargs *a, jv *out) {
    jbuf b = {.max = jctx_max_string(c)};
    const jstr *f = fmt.u.s;
    int arg = 0;
    size_t run = 0;
    pw_status st = PW_OK;
    for (size_t i = 0; i < f->len && st == PW_OK; i++) {
        if (f->data[i] != '%') continue;
        put_sub(&b, f, run, i - run);
        size_t j = i + 1;
        char spec[16] = "%";
        size_t sn = 1;
        while (j < f->len && strchr("-+ #0123456789.", f->data[j]) && sn < 10) spec[sn++] = f->data[j++];
        if (j >= f->len) {
            st = jctx_fail(c, line, "incomplete format");
            break;
        }
        char conv = f->data[j];
        run = j + 1;
        i = j;
        if (conv == '%') {
            jbuf_put(&b, "%", 1, false);
            continue;
        }
        if (arg >= a->n_pos) {
            st = jctx_fail(c, line, "not enough arguments for format string");
            break;
        }
        jv v = a->pos[arg++];
        char num[128];
        if (conv == 's' && sn == 1) {
            jv_to_text(&b, v);
        } else if (conv == 's' || conv == 'r') {
            jv sv;
            if ((st = to_string(c, line, v, &sv)) != PW_OK) break;
            spec[sn++] = 's';
            spec[sn] = '\0';
            int k = snprintf(NULL, 0, spec, sv.u.s->data);
            char *tmp = k >= 0 ? pw_host_alloc((size_t)k + 1) : NULL;
            if (tmp) {
                snprintf(tmp, (size_t)k + 1, spec, sv.u.s->data);
                jbuf_put(&b, tmp, (size_t)k, false);
                pw_host_free(tmp);
            } else st = PW_ERR_OOM;
            jv_release(sv);
        } else if (strchr("di", conv) && jv_is_number(v)) {
            spec[sn++] = 'l';
            spec[sn++] = 'l';
            spec[sn++] = 'd';
            spec[sn] = '\0';
            snprintf(num, sizeof num, spec, (long long)(v.type == JV_FLOAT ? (int64_t)v.u.f : v.type == JV_INT ? v.u.i : v.u.b));
            jbuf_put(&b, num, strlen(num), false);
        } else if (strchr("xXo", conv) && (v.type == JV_INT || v.type == JV_BOOL)) {
            snprintf(num, sizeof num, conv == 'x' ? "%llx" : conv == 'X' ? "%llX" : "%llo",
                     (long long)(v.type == JV_INT ? v.u.i : v.u.b));
            jbuf_put(&b, num, strlen(num), false);
        } else if (strchr("feEgG", conv) && jv_is_number(v)) {
            spec[sn++] = conv;
            spec[sn] = '\0';
            snprintf(num, sizeof num, spec, jv_as_double(v));
            jbuf_put(&b, num, strlen(num), false);
        } else {
            st = jctx_fail(c, line, "unsupported format %%%c for a %s", conv, jv_type_name(v));
        }
    }
    if (st != PW_OK) {
        jbuf_discard(&b);
        return st;
    }
    put_sub(&b, f, run, f->len - run);
    return finish(c, line, &b, out);
}

/* Python's str.format with "{}", "{0}" and "{name}" fields (no format specs). */
static pw_status brace_format(jctx *c, int line, jv fmt, const jargs *a, jv *out) {
    jbuf b = {.max = jctx_max_string(c)};
    const jstr *f = fmt.u.s;
    int auto_idx = 0;
    size_t run = 0;
    for (size_t i = 0; i < f->len; i++) {
        char ch = f->data[i];
        if ((ch == '{' || ch == '}') && i + 1 < f->len && f->data[i + 1] == ch) {
            put_sub(&b, f, run, i - run + 1);
            i++;
            run = i + 1;
            continue;
        }
        if (ch == '}') {
            jbuf_discard(&b);
            FAIL("single '}' encountered in format string");
        }
        if (ch != '{') continue;
        size_t j = i + 1;
        while (j < f->len && f->data[j] != '}') j++;
        if (j >= f->len) {
            jbuf_discard(&b);
            FAIL("single '{' encountered in format string");
        }
        put_sub(&b, f, run, i - run);
        const char *field = f->data + i + 1;
        size_t fn = j - i - 1;
        const jv *v = NULL;
        if (fn == 0) v = jargs_get(a, auto_idx++, NULL);
        else if (isdigit((unsigned char)field[0])) v = jargs_get(a, atoi(field), NULL);
        else
            for (int k = 0; k < a->n_kw; k++)
                if (strlen(a->kwn[k]) == fn && memcmp(a->kwn[k], field, fn) == 0) v = &a->kwv[k];
        if (!v) {
            jbuf_discard(&b);
            FAIL("format field '%.*s' has no argument", (int)fn, field);
        }
        jv_to_text(&b, *v);
        run = j + 1;
        i = j;
    }
    put_sub(&b, f, run, f->len - run);
    return finish(c, line, &b, out);
}

static pw_status join(jctx *c, int line, jv in, const jv *sep, const char *attribute, jv *out) {
    jv items;
    PW_TRY(as_list(c, line, in, &items));
    jbuf b = {.max = jctx_max_string(c)};
    for (int64_t i = 0; i < items.u.l->n && !b.over; i++) {
        if (i && sep) jv_to_text(&b, *sep);
        if (attribute) {
            jv x = attr_path(items.u.l->items[i], attribute);
            jv_to_text(&b, x);
            jv_release(x);
        } else {
            jv_to_text(&b, items.u.l->items[i]);
        }
    }
    jv_release(items);
    return finish(c, line, &b, out);
}

static pw_status indent(jctx *c, int line, jv s, int64_t width, const jv *wstr, bool first, bool blank,
                        jv *out) {
    jbuf pad = {.max = 4096};
    if (wstr && wstr->type == JV_STR) jbuf_put(&pad, wstr->u.s->data, wstr->u.s->len, false);
    else
        for (int64_t i = 0; i < width && i < 4096; i++) jbuf_put(&pad, " ", 1, false);
    jbuf b = {.max = jctx_max_string(c)};
    const jstr *src = s.u.s;
    size_t start = 0;
    bool first_line = true;
    /* jinja2: newline = "\n"; lines after the first get the pad when not blank (or blank=True) */
    while (start <= src->len) {
        const char *nl = memchr(src->data + start, '\n', src->len - start);
        size_t end = nl ? (size_t)(nl - src->data) : src->len;
        bool empty = end == start;
        if ((first_line ? first : true) && (blank || !empty))
            jbuf_put(&b, pad.sb.data ? pad.sb.data : "", pad.sb.len, false);
        put_sub(&b, src, start, end - start + (nl ? 1 : 0));
        first_line = false;
        if (!nl) break;
        start = end + 1;
    }
    jbuf_discard(&pad);
    return finish(c, line, &b, out);
}

static pw_status to_int(jv v, int64_t dflt, jv *out) {
    if (v.type == JV_INT) *out = v;
    else if (v.type == JV_BOOL) *out = jv_int(v.u.b);
    else if (v.type == JV_FLOAT) *out = isfinite(v.u.f) && fabs(v.u.f) < 9e18 ? jv_int((int64_t)v.u.f) : jv_int(dflt);
    else if (v.type == JV_STR) {
        char *end;
        const char *d = v.u.s->data;
        long long x = strtoll(d, &end, 10);
        while (*end && py_space((unsigned char)*end)) end++;
        if (end != d && !*end) *out = jv_int(x);
        else {
            double f = strtod(d, &end);
            while (*end && py_space((unsigned char)*end)) end++;
            *out = end != d && !*end && isfinite(f) && fabs(f) < 9e18 ? jv_int((int64_t)f) : jv_int(dflt);
        }
    } else *out = jv_int(dflt);
    return PW_OK;
}

/* select/reject/selectattr/rejectattr: the items for which the test (or
 * truthiness) holds, or does not. */
static pw_status select_items(jctx *c, int line, jv in, const jargs *a, bool attr, bool keep, jv *out) {
    jv items;
    if (!jv_truthy(in)) return ok_or_oom(jv_list(), out); /* jinja2: "if value: for item in value" */
    PW_TRY(as_list(c, line, in, &items));
    int first_test = attr ? 1 : 0;
    const char *attribute = attr ? str_arg(jargs_get(a, 0, NULL)) : NULL;
    if (attr && !attribute) {
        jv_release(items);
        FAIL("selectattr/rejectattr need an attribute name");
    }
    const jv *tv = jargs_get(a, first_test, NULL);
    const char *test = str_arg(tv);
    jargs targs = {0};
    if (a->n_pos > first_test + 1) {
        targs.pos = a->pos + first_test + 1;
        targs.n_pos = a->n_pos - first_test - 1;
    }
    jv r = jv_list();
    pw_status st = jv_failed(r) ? PW_ERR_OOM : PW_OK;
    for (int64_t i = 0; st == PW_OK && i < items.u.l->n; i++) {
        jv x = items.u.l->items[i];
        jv subject = attribute ? attr_path(x, attribute) : jv_retain(x);
        bool t = false;
        if (test) st = jinja_test(c, line, test, subject, &targs, &t);
        else t = jv_truthy(subject);
        jv_release(subject);
        if (st == PW_OK && t == keep) st = jlist_push(r.u.l, jv_retain(x));
    }
    jv_release(items);
    if (st != PW_OK) {
        jv_release(r);
        return st;
    }
    *out = r;
    return PW_OK;
}

static pw_status map_items(jctx *c, int line, jv in, const jargs *a, jv *out) {
    jv items;
    if (!jv_truthy(in)) return ok_or_oom(jv_list(), out);
    PW_TRY(as_list(c, line, in, &items));
    const char *attribute = str_arg(jargs_get(a, -1, "attribute"));
    const jv *dflt = jargs_get(a, -1, "default");
    const char *filter = attribute ? NULL : str_arg(jargs_get(a, 0, NULL));
    if (!attribute && !filter) {
        jv_release(items);
        FAIL("map needs a filter name or attribute=");
    }
    jargs fargs = {0};
    if (filter && a->n_pos > 1) {
        fargs.pos = a->pos + 1;
        fargs.n_pos = a->n_pos - 1;
    }
    jv r = jv_list();
    pw_status st = jv_failed(r) ? PW_ERR_OOM : PW_OK;
    for (int64_t i = 0; st == PW_OK && i < items.u.l->n; i++) {
        jv x = items.u.l->items[i], y;
        if (attribute) {
            y = attr_path(x, attribute);
            if (y.type == JV_UNDEF && dflt) y = jv_retain(*dflt);
        } else {
            st = jinja_filter(c, line, filter, x, &fargs, &y);
        }
        if (st == PW_OK) st = jlist_push(r.u.l, y);
    }
    jv_release(items);
    if (st != PW_OK) {
        jv_release(r);
        return st;
    }
    *out = r;
    return PW_OK;
}

static pw_status items_of(jctx *c, int line, jv in, jv *out) {
    jv r = jv_list();
    if (jv_failed(r)) return PW_ERR_OOM;
    if (in.type == JV_UNDEF) {
        *out = r;
        return PW_OK;
    }
    if (in.type != JV_DICT) {
        jv_release(r);
        FAIL("items() of a %s", jv_type_name(in));
    }
    pw_status st = PW_OK;
    for (int64_t i = 0; st == PW_OK && i < in.u.d->n; i++) {
        jv pair = jv_list();
        if (jv_failed(pair)) st = PW_ERR_OOM;
        else pair.u.l->tuple = true;
        if (st == PW_OK) st = jlist_push(pair.u.l, jv_retain(in.u.d->keys[i]));
        if (st == PW_OK) st = jlist_push(pair.u.l, jv_retain(in.u.d->vals[i]));
        if (st == PW_OK) st = jlist_push(r.u.l, pair);
        else jv_release(pair);
    }
    if (st != PW_OK) {
        jv_release(r);
        return st;
    }
    *out = r;
    return PW_OK;
}

/* Marks a filter's list result as the generator jinja2 returns. */
static pw_status lazy(pw_status st, jv *out) {
    if (st == PW_OK && out->type == JV_LIST) out->u.l->lazy = true;
    return st;
}

static bool arg_bool(const jv *v, bool dflt) { return v ? jv_truthy(*v) : dflt; }

pw_status jinja_filter(jctx *c, int line, const char *name, jv in, const jargs *a, jv *out) {
    *out = jv_undef();
    const jv *a0 = jargs_get(a, 0, NULL);
#define IS(n) (strcmp(name, n) == 0)
    if (IS("safe")) {
        if (in.type != JV_STR || in.u.s->markup) {
            if (in.type == JV_STR) {
                *out = jv_retain(in);
                return PW_OK;
            }
            PW_TRY(to_string(c, line, in, out));
        } else {
            PW_TRY(ok_or_oom(jstr_sub(in.u.s, 0, in.u.s->len), out));
        }
        out->u.s->markup = true;
        return PW_OK;
    }
    if (IS("default") || IS("d")) {
        const jv *dv = jargs_get(a, 0, "default_value");
        bool boolean = arg_bool(jargs_get(a, 1, "boolean"), false);
        if (in.type == JV_UNDEF || (boolean && !jv_truthy(in)))
            *out = dv ? jv_retain(*dv) : new_str("", 0);
        else *out = jv_retain(in);
        return jv_failed(*out) && !(dv && dv->type == JV_UNDEF) ? PW_ERR_OOM : PW_OK;
    }
    if (IS("length") || IS("count")) {
        if (in.type == JV_UNDEF) {
            *out = jv_int(0);
            return PW_OK;
        }
        int64_t n = in.type == JV_LIST && in.u.l->lazy ? -1 : length_of(in);
        if (n < 0) FAIL("object of type '%s' has no len()", jv_type_name(in));
        *out = jv_int(n);
        return PW_OK;
    }
    if (IS("string")) return to_string(c, line, in, out);
    if (IS("tojson")) {
        const jv *ind = jargs_get(a, 0, "indent");
        int indent = ind && ind->type == JV_INT ? (int)(ind->u.i < 0 ? 0 : ind->u.i > 64 ? 64 : ind->u.i) : -1;
        jbuf b = {.max = jctx_max_string(c)};
        pw_status st = jv_to_json(&b, in, indent, 0);
        if (st != PW_OK) {
            jbuf_discard(&b);
            FAIL("%s", pw_last_error());
        }
        return finish(c, line, &b, out);
    }
    if (IS("items")) return lazy(items_of(c, line, in, out), out);
    if (IS("list")) {
        jv l;
        PW_TRY(as_list(c, line, in, &l));
        if (in.type != JV_LIST) {
            *out = l;
            return PW_OK;
        }
        pw_status st = copy_list(l, out);
        jv_release(l);
        return st;
    }
    if (IS("join")) return join(c, line, in, jargs_get(a, 0, "d"), str_arg(jargs_get(a, 1, "attribute")), out);
    if (IS("map")) return lazy(map_items(c, line, in, a, out), out);
    if (IS("select") || IS("reject")) return lazy(select_items(c, line, in, a, false, IS("select"), out), out);
    if (IS("selectattr") || IS("rejectattr"))
        return lazy(select_items(c, line, in, a, true, IS("selectattr"), out), out);
    if (IS("first") || IS("last")) {
        if (IS("last") && in.type == JV_LIST && in.u.l->lazy) FAIL("'generator' object is not reversible");
        jv l;
        PW_TRY(as_list(c, line, in, &l));
        if (l.u.l->n) *out = jv_retain(l.u.l->items[IS("first") ? 0 : l.u.l->n - 1]);
        jv_release(l);
        return PW_OK;
    }
    if (IS("reverse")) {
        jv l;
        PW_TRY(as_list(c, line, in, &l));
        jv r;
        pw_status st = copy_list(l, &r);
        jv_release(l);
        PW_TRY(st);
        for (int64_t i = 0, j = r.u.l->n - 1; i < j; i++, j--) {
            jv t = r.u.l->items[i];
            r.u.l->items[i] = r.u.l->items[j];
            r.u.l->items[j] = t;
        }
        if (in.type != JV_STR) {
            *out = r;
            r.u.l->lazy = in.type == JV_LIST; /* reversed() of a list is an iterator */
            return PW_OK;
        }
        st = join(c, line, r, NULL, NULL, out);
        jv_release(r);
        return st;
    }
    if (IS("sort") || IS("dictsort") || IS("unique") || IS("min") || IS("max")) {
        sort_spec sp = {.attribute = str_arg(jargs_get(a, -1, "attribute")),
                        .case_sensitive = arg_bool(jargs_get(a, IS("sort") ? 1 : 0, "case_sensitive"), false),
                        .reverse = IS("sort") ? arg_bool(jargs_get(a, 0, "reverse"), false)
                                              : IS("dictsort") && arg_bool(jargs_get(a, 2, "reverse"), false),
                        .pair_index = -1};
        jv l;
        if (IS("dictsort")) {
            PW_TRY(items_of(c, line, in, &l));
            const char *by = str_arg(jargs_get(a, 1, "by"));
            sp.pair_index = by && strcmp(by, "value") == 0 ? 1 : 0;
        } else {
            jv src;
            PW_TRY(as_list(c, line, in, &src));
            pw_status st = copy_list(src, &l);
            jv_release(src);
            PW_TRY(st);
        }
        pw_status st = PW_OK;
        if (IS("unique")) {
            jv r = jv_list();
            if (jv_failed(r)) st = PW_ERR_OOM;
            for (int64_t i = 0; st == PW_OK && i < l.u.l->n; i++) {
                jv ki = sort_key(l.u.l->items[i], &sp);
                bool seen = false;
                for (int64_t j = 0; j < r.u.l->n && !seen && st == PW_OK; j++) {
                    jv kj = sort_key(r.u.l->items[j], &sp);
                    seen = order(c, line, ki, kj, sp.case_sensitive, &st) == 0 &&
                           (sp.case_sensitive || ki.type == JV_STR || jv_equal(ki, kj));
                    if (st != PW_OK) { /* unorderable values: compare for equality */
                        pw_clear_error();
                        st = PW_OK;
                        seen = jv_equal(ki, kj);
                    }
                    jv_release(kj);
                }
                jv_release(ki);
                if (st == PW_OK && !seen) st = jlist_push(r.u.l, jv_retain(l.u.l->items[i]));
            }
            jv_release(l);
            if (st != PW_OK) {
                jv_release(r);
                return st;
            }
            *out = r;
            r.u.l->lazy = true;
            return PW_OK;
        }
        st = merge_sort(c, line, l.u.l->items, l.u.l->n, &sp);
        if (st == PW_OK && (IS("min") || IS("max"))) {
            if (l.u.l->n) *out = jv_retain(l.u.l->items[IS("min") ? 0 : l.u.l->n - 1]);
            jv_release(l);
            return PW_OK;
        }
        if (st != PW_OK) {
            jv_release(l);
            return st;
        }
        *out = l;
        return PW_OK;
    }
    if (IS("int")) return to_int(in, a0 && a0->type == JV_INT ? a0->u.i : 0, out);
    if (IS("float")) {
        if (jv_is_number(in)) *out = jv_float(jv_as_double(in));
        else if (in.type == JV_STR) {
            char *end;
            double f = strtod(in.u.s->data, &end);
            *out = jv_float(end != in.u.s->data && !*end ? f : 0.0);
        } else *out = jv_float(0.0);
        return PW_OK;
    }
    if (IS("abs")) {
        if (in.type == JV_INT) *out = in.u.i == INT64_MIN ? jv_float(9.2233720368547758e18) : jv_int(in.u.i < 0 ? -in.u.i : in.u.i);
        else if (in.type == JV_FLOAT) *out = jv_float(fabs(in.u.f));
        else if (in.type == JV_BOOL) *out = jv_int(in.u.b);
        else FAIL("bad operand type for abs(): %s", jv_type_name(in));
        return PW_OK;
    }
    if (IS("round")) {
        if (!jv_is_number(in)) FAIL("round of a %s", jv_type_name(in));
        int64_t prec = a0 && a0->type == JV_INT ? a0->u.i : 0;
        const char *method = str_arg(jargs_get(a, 1, "method"));
        double m = pow(10.0, (double)(prec > 15 ? 15 : prec < -15 ? -15 : prec)), x = jv_as_double(in) * m;
        double r = method && strcmp(method, "floor") == 0 ? floor(x) : method && strcmp(method, "ceil") == 0 ? ceil(x) : nearbyint(x);
        *out = jv_float(r / m);
        return PW_OK;
    }
    if (IS("sum")) {
        jv l;
        PW_TRY(as_list(c, line, in, &l));
        const char *attribute = str_arg(jargs_get(a, 0, "attribute"));
        const jv *start = jargs_get(a, 1, "start");
        jv acc = start ? jv_retain(*start) : jv_int(0);
        pw_status st = PW_OK;
        for (int64_t i = 0; st == PW_OK && i < l.u.l->n; i++) {
            jv x = attribute ? attr_path(l.u.l->items[i], attribute) : jv_retain(l.u.l->items[i]);
            if (!jv_is_number(acc) || !jv_is_number(x)) st = jctx_fail(c, line, "sum of a %s", jv_type_name(x));
            else if (acc.type == JV_FLOAT || x.type == JV_FLOAT) acc = jv_float(jv_as_double(acc) + jv_as_double(x));
            else acc = jv_int((acc.type == JV_INT ? acc.u.i : acc.u.b) + (x.type == JV_INT ? x.u.i : x.u.b));
            jv_release(x);
        }
        jv_release(l);
        if (st != PW_OK) {
            jv_release(acc);
            return st;
        }
        *out = acc;
        return PW_OK;
    }
    if (IS("attr")) {
        const char *n = str_arg(a0);
        if (n && in.type == JV_DICT) {
            jv *v = jdict_find(in.u.d, n, strlen(n));
            if (v) *out = jv_retain(*v);
        }
        return PW_OK;
    }
    if (IS("batch") || IS("slice") || IS("groupby") || IS("truncate") || IS("wordwrap") ||
        IS("center") || IS("urlencode") || IS("xmlattr") || IS("striptags") || IS("filesizeformat") ||
        IS("pprint") || IS("random"))
        FAIL("the filter '%s' is not supported", name);
    /* the rest work on strings */
    jv s;
    PW_TRY(to_string(c, line, in, &s));
    pw_status st = PW_OK;
    if (IS("trim")) st = strip(s, a0, true, true, out);
    else if (IS("upper")) st = map_case(s, 'u', out);
    else if (IS("lower")) st = map_case(s, 'l', out);
    else if (IS("capitalize")) st = map_case(s, 'c', out);
    else if (IS("title")) st = map_case(s, 't', out);
    else if (IS("replace")) {
        const jv *old = a0, *rep = jargs_get(a, 1, "new"), *count = jargs_get(a, 2, "count");
        if (!old || !rep) st = jctx_fail(c, line, "replace needs two arguments");
        else st = replace(c, line, s, *old, *rep, count && count->type == JV_INT ? count->u.i : -1, out);
    } else if (IS("indent")) {
        const jv *w = jargs_get(a, 0, "width");
        st = indent(c, line, s, w && w->type == JV_INT ? w->u.i : 4, w && w->type == JV_STR ? w : NULL,
                    arg_bool(jargs_get(a, 1, "first"), false), arg_bool(jargs_get(a, 2, "blank"), false), out);
    } else if (IS("format")) st = percent_format(c, line, s, a, out);
    else if (IS("wordcount")) {
        int64_t n = 0;
        bool in_word = false;
        for (size_t i = 0; i < s.u.s->len; i++) {
            unsigned char ch = (unsigned char)s.u.s->data[i];
            bool w = isalnum(ch) || ch == '_' || ch >= 0x80;
            if (w && !in_word) n++;
            in_word = w;
        }
        *out = jv_int(n);
    } else if (IS("escape") || IS("e") || IS("forceescape")) {
        if (s.u.s->markup && !IS("forceescape")) {
            *out = jv_retain(s);
        } else {
            jbuf b = {.max = jctx_max_string(c)};
            jbuf_put_escaped(&b, s.u.s);
            st = finish(c, line, &b, out);
            if (st == PW_OK) out->u.s->markup = true;
        }
    } else st = jctx_fail(c, line, "no filter named '%s'", name);
    jv_release(s);
    return st;
#undef IS
}

pw_status jinja_test(jctx *c, int line, const char *name, jv in, const jargs *a, bool *out) {
    const jv *a0 = jargs_get(a, 0, NULL);
#define IS(n) (strcmp(name, n) == 0)
    if (IS("defined")) *out = in.type != JV_UNDEF;
    else if (IS("undefined")) *out = in.type == JV_UNDEF;
    else if (IS("none")) *out = in.type == JV_NONE;
    else if (IS("boolean")) *out = in.type == JV_BOOL;
    else if (IS("true")) *out = in.type == JV_BOOL && in.u.b;
    else if (IS("false")) *out = in.type == JV_BOOL && !in.u.b;
    else if (IS("integer")) *out = in.type == JV_INT;
    else if (IS("float")) *out = in.type == JV_FLOAT;
    else if (IS("number")) *out = jv_is_number(in);
    else if (IS("string")) *out = in.type == JV_STR;
    else if (IS("mapping")) *out = in.type == JV_DICT && !in.u.d->is_namespace;
    else if (IS("iterable") || IS("sequence"))
        *out = in.type == JV_STR || (in.type == JV_LIST && !(in.u.l->lazy && IS("sequence"))) || in.type == JV_UNDEF ||
               (in.type == JV_DICT && !in.u.d->is_namespace);
    else if (IS("callable")) *out = in.type == JV_MACRO || in.type == JV_FUNC;
    else if (IS("odd") || IS("even") || IS("divisibleby")) {
        if (in.type != JV_INT && in.type != JV_BOOL) FAIL("test '%s' of a %s", name, jv_type_name(in));
        int64_t x = in.type == JV_INT ? in.u.i : in.u.b;
        if (IS("divisibleby")) {
            if (!a0 || a0->type != JV_INT || a0->u.i == 0) FAIL("divisibleby needs a non-zero integer");
            *out = x % a0->u.i == 0;
        } else *out = (x % 2 != 0) == IS("odd");
    } else if (IS("lower") || IS("upper")) {
        if (in.type != JV_STR) {
            *out = false;
            return PW_OK;
        }
        bool cased = false, ok = true;
        for (size_t i = 0; i < in.u.s->len; i++) {
            unsigned char ch = (unsigned char)in.u.s->data[i];
            if (isalpha(ch)) {
                cased = true;
                ok = ok && (IS("lower") ? islower(ch) : isupper(ch));
            }
        }
        *out = cased && ok;
    } else if (IS("in")) {
        if (!a0) FAIL("test 'in' needs an argument");
        if (a0->type == JV_STR) *out = in.type == JV_STR && find_bytes(a0->u.s->data, a0->u.s->len, in.u.s->data, in.u.s->len);
        else if (a0->type == JV_LIST) {
            *out = false;
            for (int64_t i = 0; i < a0->u.l->n && !*out; i++) *out = jv_equal(a0->u.l->items[i], in);
        } else if (a0->type == JV_DICT) *out = jdict_find_value(a0->u.d, in) != NULL;
        else FAIL("test 'in' on a %s", jv_type_name(*a0));
    } else if (IS("sameas")) {
        if (!a0) FAIL("test 'sameas' needs an argument");
        *out = in.type == a0->type && (in.type == JV_NONE || in.type == JV_UNDEF ||
                                       (in.type == JV_BOOL && in.u.b == a0->u.b) ||
                                       (in.type == JV_INT && in.u.i == a0->u.i && in.u.i >= -5 && in.u.i <= 256) ||
                                       (in.type == JV_STR && in.u.s == a0->u.s) || (in.type == JV_LIST && in.u.l == a0->u.l) ||
                                       (in.type == JV_DICT && in.u.d == a0->u.d));
    } else if (IS("equalto") || IS("eq") || IS("==") || IS("ne") || IS("!=")) {
        if (!a0) FAIL("test '%s' needs an argument", name);
        *out = jv_equal(in, *a0) == !(IS("ne") || IS("!="));
    } else if (IS("lt") || IS("<") || IS("le") || IS("<=") || IS("gt") || IS(">") || IS("ge") || IS(">=") ||
               IS("lessthan") || IS("greaterthan")) {
        if (!a0) FAIL("test '%s' needs an argument", name);
        pw_status st = PW_OK;
        int r = order(c, line, in, *a0, true, &st);
        PW_TRY(st);
        *out = IS("lt") || IS("<") || IS("lessthan") ? r < 0 : IS("le") || IS("<=") ? r <= 0
             : IS("gt") || IS(">") || IS("greaterthan") ? r > 0 : r >= 0;
    } else FAIL("no test named '%s'", name);
    return PW_OK;
#undef IS
}

pw_status jinja_method(jctx *c, int line, jv obj, const char *name, const jargs *a, jv *out) {
    *out = jv_undef();
    const jv *a0 = jargs_get(a, 0, NULL), *a1 = jargs_get(a, 1, NULL);
#define IS(n) (strcmp(name, n) == 0)
    if (obj.type == JV_STR) {
        if (IS("strip") || IS("lstrip") || IS("rstrip"))
            return strip(obj, a0 && a0->type == JV_STR ? a0 : NULL, !IS("rstrip"), !IS("lstrip"), out);
        if (IS("split") || IS("rsplit")) {
            const jv *sep = jargs_get(a, 0, "sep"), *mx = jargs_get(a, 1, "maxsplit");
            int64_t maxsplit = mx && mx->type == JV_INT ? mx->u.i : -1;
            if (IS("rsplit") && maxsplit >= 0) FAIL("rsplit with maxsplit is not supported");
            return split(c, line, obj, sep, maxsplit, out);
        }
        if (IS("startswith") || IS("endswith")) {
            if (!a0) FAIL("%s needs an argument", name);
            bool r = false;
            if (a0->type == JV_LIST)
                for (int64_t i = 0; i < a0->u.l->n && !r; i++) r = affix(obj, a0->u.l->items[i], IS("startswith"));
            else if (a0->type == JV_STR) r = affix(obj, *a0, IS("startswith"));
            else FAIL("%s first arg must be str or a tuple of str", name);
            *out = jv_bool(r);
            return PW_OK;
        }
        if (IS("replace")) {
            if (!a0 || !a1) FAIL("replace needs two arguments");
            const jv *n = jargs_get(a, 2, "count");
            return replace(c, line, obj, *a0, *a1, n && n->type == JV_INT ? n->u.i : -1, out);
        }
        if (IS("upper")) return map_case(obj, 'u', out);
        if (IS("lower")) return map_case(obj, 'l', out);
        if (IS("capitalize")) return map_case(obj, 'c', out);
        if (IS("title")) return map_case(obj, 't', out);
        if (IS("format")) return brace_format(c, line, obj, a, out);
        if (IS("join")) {
            if (!a0) FAIL("join needs an argument");
            return join(c, line, *a0, &obj, NULL, out);
        }
        if (IS("find") || IS("rfind") || IS("count") || IS("index")) {
            if (!a0 || a0->type != JV_STR) FAIL("%s needs a string", name);
            const jstr *h = obj.u.s, *n = a0->u.s;
            int64_t r = -1, cnt = 0;
            for (size_t i = 0; i + n->len <= h->len; i++)
                if (memcmp(h->data + i, n->data, n->len) == 0) {
                    if (r < 0 || IS("rfind")) r = (int64_t)utf8_count(h->data, i);
                    cnt++;
                    if (IS("count") && n->len) i += n->len - 1;
                    if (IS("find") || IS("index")) break;
                }
            if (IS("index") && r < 0) FAIL("substring not found");
            *out = jv_int(IS("count") ? cnt : r);
            return PW_OK;
        }
        if (IS("splitlines")) {
            jv nl = new_str("\n", 1);
            if (jv_failed(nl)) return PW_ERR_OOM;
            jv parts;
            pw_status st = split(c, line, obj, &nl, -1, &parts);
            jv_release(nl);
            PW_TRY(st);
            if (parts.u.l->n && parts.u.l->items[parts.u.l->n - 1].u.s->len == 0) {
                jv_release(parts.u.l->items[--parts.u.l->n]);
            }
            *out = parts;
            return PW_OK;
        }
        if (IS("isdigit") || IS("isalpha") || IS("isspace") || IS("isalnum") || IS("isupper") || IS("islower")) {
            bool r = obj.u.s->len > 0, cased = false;
            for (size_t i = 0; i < obj.u.s->len; i++) {
                unsigned char ch = (unsigned char)obj.u.s->data[i];
                if (IS("isdigit")) r = r && isdigit(ch);
                else if (IS("isalpha")) r = r && isalpha(ch);
                else if (IS("isspace")) r = r && py_space(ch);
                else if (IS("isalnum")) r = r && isalnum(ch);
                else if (isalpha(ch)) {
                    cased = true;
                    r = r && (IS("isupper") ? isupper(ch) : islower(ch));
                }
            }
            *out = jv_bool(r && (cased || !(IS("isupper") || IS("islower"))));
            return PW_OK;
        }
    } else if (obj.type == JV_DICT) {
        if (IS("get")) {
            if (!a0) FAIL("get needs a key");
            jv *v = jdict_find_value(obj.u.d, *a0);
            *out = v ? jv_retain(*v) : a1 ? jv_retain(*a1) : jv_none();
            return PW_OK;
        }
        if (IS("items")) return items_of(c, line, obj, out);
        if (IS("keys") || IS("values")) {
            jv r = jv_list();
            if (jv_failed(r)) return PW_ERR_OOM;
            for (int64_t i = 0; i < obj.u.d->n; i++) {
                pw_status st = jlist_push(r.u.l, jv_retain(IS("keys") ? obj.u.d->keys[i] : obj.u.d->vals[i]));
                if (st != PW_OK) {
                    jv_release(r);
                    return st;
                }
            }
            *out = r;
            return PW_OK;
        }
        jv *index0 = jdict_find(obj.u.d, "index0", 6);
        if (IS("cycle") && index0 && index0->type == JV_INT && jdict_find(obj.u.d, "revindex0", 9)) {
            if (a->n_pos == 0) FAIL("no items for cycling given");
            *out = jv_retain(a->pos[index0->u.i % a->n_pos]);
            return PW_OK;
        }
    }
    if ((obj.type == JV_LIST || obj.type == JV_DICT) &&
        (IS("append") || IS("pop") || IS("extend") || IS("insert") || IS("remove") || IS("clear") ||
         IS("update") || IS("setdefault") || IS("popitem") || IS("sort") || IS("reverse")))
        FAIL("access to attribute '%s' of '%s' object is unsafe (templates cannot change values)", name,
             jv_type_name(obj));
    FAIL("a %s has no method '%s'", jv_type_name(obj), name);
#undef IS
}

pw_status jinja_global(jctx *c, int line, int fn, const jargs *a, jv *out) {
    *out = jv_undef();
    if (fn == FN_RAISE) {
        const jv *msg = jargs_get(a, 0, NULL);
        jbuf b = {.max = 4096};
        if (msg) jv_to_text(&b, *msg);
        jv m = jbuf_to_str(&b);
        pw_status st = jctx_fail(c, line, "the template raised an error: %s", jv_failed(m) ? "?" : m.u.s->data);
        jv_release(m);
        return st;
    }
    if (fn == FN_RANGE) {
        int64_t v[3] = {0, 0, 1};
        if (a->n_pos < 1 || a->n_pos > 3) FAIL("range expects 1 to 3 arguments");
        for (int i = 0; i < a->n_pos; i++) {
            if (a->pos[i].type != JV_INT && a->pos[i].type != JV_BOOL) FAIL("range arguments must be integers");
            int64_t x = a->pos[i].type == JV_INT ? a->pos[i].u.i : a->pos[i].u.b;
            if (a->n_pos == 1) v[1] = x;
            else v[i] = x;
        }
        if (v[2] == 0) FAIL("range() arg 3 must not be zero");
        /* jinja2's sandbox refuses ranges over 100000 items */
        double count = ceil(((double)v[1] - (double)v[0]) / (double)v[2]);
        if (count > 100000) FAIL("range too big, maximum size for range is 100000");
        jv l = jv_list();
        if (jv_failed(l)) return PW_ERR_OOM;
        for (int64_t x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) {
            pw_status st = jlist_push(l.u.l, jv_int(x));
            if (st != PW_OK) {
                jv_release(l);
                return st;
            }
        }
        *out = l;
        return PW_OK;
    }
    if (fn == FN_NAMESPACE || fn == FN_DICT) {
        jv d = jv_dict();
        if (jv_failed(d)) return PW_ERR_OOM;
        d.u.d->is_namespace = fn == FN_NAMESPACE;
        pw_status st = PW_OK;
        for (int i = 0; st == PW_OK && i < a->n_pos; i++) {
            if (a->pos[i].type != JV_DICT) {
                st = jctx_fail(c, line, "%s() takes a dict or keyword arguments", fn == FN_DICT ? "dict" : "namespace");
                break;
            }
            for (int64_t k = 0; st == PW_OK && k < a->pos[i].u.d->n; k++)
                st = jdict_put(d.u.d, jv_retain(a->pos[i].u.d->keys[k]), jv_retain(a->pos[i].u.d->vals[k]));
        }
        for (int i = 0; st == PW_OK && i < a->n_kw; i++) {
            jv k = new_str(a->kwn[i], strlen(a->kwn[i]));
            st = jv_failed(k) ? PW_ERR_OOM : jdict_put(d.u.d, k, jv_retain(a->kwv[i]));
        }
        if (st != PW_OK) {
            jv_release(d);
            return st;
        }
        *out = d;
        return PW_OK;
    }
    if (fn == FN_STRFTIME_NOW) {
        const char *fmt = str_arg(jargs_get(a, 0, NULL));
        if (!fmt) FAIL("strftime_now needs a format string");
        time_t now = jctx_now(c) ? (time_t)jctx_now(c) : time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm)) FAIL("strftime_now: no local time");
        char buf[256];
        size_t n = strlen(fmt) < 64 ? strftime(buf, sizeof buf, fmt, &tm) : 0;
        if (n == 0 && fmt[0]) FAIL("strftime_now: format too long or empty result");
        return ok_or_oom(new_str(buf, n), out);
    }
    FAIL("unknown function");
}
