/* The Jinja evaluator: runs the syntax tree against a context, writing the
 * output with its trusted spans. Scoping follows jinja2: a for loop and a
 * macro call open a scope ("set" inside them does not reach out; namespaces
 * do), an if does not. Every step, the nesting depth and the output size
 * are bounded (pw_jinja_limits). */
#include "model/jinja_internal.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct scope {
    scope *parent;
    scope *next_all; /* every scope of the render, freed at its end */
    int64_t n, cap;
    const char **names;
    jv *vals;
};

enum { CTL_NONE = 0, CTL_BREAK, CTL_CONTINUE };

struct jctx {
    const pw_jinja_template *t;
    const jdict *globals; /* the context */
    pw_jinja_limits lim;
    int64_t steps;
    int depth;
    int ctl;
    jbuf *out;
    scope *all;
};

pw_status jctx_fail(jctx *c, int line, const char *fmt, ...) {
    (void)c;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pw_error(PW_ERR_INVALID_ARG, "chat template line %d: %s", line, msg);
}

pw_status jctx_step(jctx *c, int line) {
    if (++c->steps > c->lim.max_steps)
        return jctx_fail(c, line, "more than %lld evaluation steps", (long long)c->lim.max_steps);
    return PW_OK;
}

/* Work proportional to the bytes a value holds. */
static pw_status charge(jctx *c, int line, jv v) {
    int64_t n = v.type == JV_STR ? (int64_t)(v.u.s->len / 64)
              : v.type == JV_LIST ? v.u.l->n : v.type == JV_DICT ? v.u.d->n : 0;
    if (v.type == JV_STR && v.u.s->len > c->lim.max_output)
        return jctx_fail(c, line, "a string longer than the %zu bytes allowed", c->lim.max_output);
    c->steps += n;
    return jctx_step(c, line);
}

size_t jctx_max_string(const jctx *c) { return c->lim.max_output; }
int64_t jctx_now(const jctx *c) { return c->lim.now; }

/* ---- scopes ---------------------------------------------------------------- */

static scope *scope_new(jctx *c, scope *parent) {
    scope *s = pw_host_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->parent = parent;
    s->next_all = c->all;
    c->all = s;
    return s;
}

static void scopes_free(jctx *c) {
    /* Macros hold their scope and scopes hold macros: drop the values of all
     * first, then the scopes. */
    for (scope *s = c->all; s; s = s->next_all) {
        for (int64_t i = 0; i < s->n; i++) jv_release(s->vals[i]);
        s->n = 0;
    }
    for (scope *s = c->all, *next; s; s = next) {
        next = s->next_all;
        pw_host_free(s->names);
        pw_host_free(s->vals);
        pw_host_free(s);
    }
    c->all = NULL;
}

/* Binds name in s, taking v. */
static pw_status scope_set(scope *s, const char *name, jv v) {
    for (int64_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) {
            jv_release(s->vals[i]);
            s->vals[i] = v;
            return PW_OK;
        }
    if (s->n == s->cap) {
        size_t cap = (size_t)s->cap, cap2 = (size_t)s->cap;
        const char **names = pw_host_grow(s->names, sizeof *names, &cap, (size_t)s->n + 1, 1 << 20);
        if (names) s->names = names;
        jv *vals = names ? pw_host_grow(s->vals, sizeof *vals, &cap2, (size_t)s->n + 1, 1 << 20) : NULL;
        if (!vals) {
            jv_release(v);
            return PW_ERR_OOM;
        }
        s->vals = vals;
        s->cap = (int64_t)(cap < cap2 ? cap : cap2);
    }
    s->names[s->n] = name;
    s->vals[s->n] = v;
    s->n++;
    return PW_OK;
}

static const struct {
    const char *name;
    int fn;
} builtin_globals[] = {{"range", FN_RANGE},
                       {"namespace", FN_NAMESPACE},
                       {"dict", FN_DICT},
                       {"raise_exception", FN_RAISE},
                       {"strftime_now", FN_STRFTIME_NOW}};

/* A new reference to the variable name, or undefined. */
static jv lookup(jctx *c, scope *s, const char *name) {
    for (; s; s = s->parent)
        for (int64_t i = s->n - 1; i >= 0; i--)
            if (strcmp(s->names[i], name) == 0) return jv_retain(s->vals[i]);
    if (c->globals) {
        jv *v = jdict_find(c->globals, name, strlen(name));
        if (v) return jv_retain(*v);
    }
    for (size_t k = 0; k < PW_ARRAY_LEN(builtin_globals); k++)
        if (strcmp(builtin_globals[k].name, name) == 0)
            return (jv){.type = JV_FUNC, .u.fn = builtin_globals[k].fn};
    return jv_undef();
}

/* ---- expressions --------------------------------------------------------------- */

static pw_status eval(jctx *c, scope *s, const node *n, jv *out);
static pw_status exec_body(jctx *c, scope *s, node *const *kids, int n);

#define ENTER(c, line)                                                                             \
    do {                                                                                           \
        if (++(c)->depth > (c)->lim.max_depth) {                                                   \
            (c)->depth--;                                                                          \
            return jctx_fail(c, line, "nested deeper than %d levels", (c)->lim.max_depth);         \
        }                                                                                          \
    } while (0)

/* UTF-8 code point boundaries of s: (*offs)[i] is where code point i
 * starts, (*offs)[n] == len. */
static pw_status code_points(const jstr *s, size_t **offs, size_t *n) {
    size_t k = 0;
    for (size_t i = 0; i < s->len; i++) k += ((unsigned char)s->data[i] & 0xC0) != 0x80;
    size_t *o = pw_host_alloc((k + 1) * sizeof *o);
    if (!o) return PW_ERR_OOM;
    size_t j = 0;
    for (size_t i = 0; i < s->len; i++)
        if (((unsigned char)s->data[i] & 0xC0) != 0x80 || i == 0) {
            if (j < k) o[j++] = i;
        }
    k = j;
    o[k] = s->len;
    *offs = o;
    *n = k;
    return PW_OK;
}

static pw_status index_value(jctx *c, int line, jv obj, jv key, jv *out) {
    *out = jv_undef();
    if (obj.type == JV_DICT) {
        jv *v = jdict_find_value(obj.u.d, key);
        if (v) *out = jv_retain(*v);
        return PW_OK;
    }
    if ((obj.type == JV_LIST || obj.type == JV_STR) && (key.type == JV_INT || key.type == JV_BOOL)) {
        int64_t i = key.type == JV_INT ? key.u.i : key.u.b;
        if (obj.type == JV_LIST) {
            if (obj.u.l->lazy) return PW_OK; /* a generator has no items by index */
            if (i < 0) i += obj.u.l->n;
            if (i >= 0 && i < obj.u.l->n) *out = jv_retain(obj.u.l->items[i]);
            return PW_OK;
        }
        size_t *offs, n;
        PW_TRY(code_points(obj.u.s, &offs, &n));
        if (i < 0) i += (int64_t)n;
        if (i >= 0 && (size_t)i < n) *out = jstr_sub(obj.u.s, offs[i], offs[i + 1] - offs[i]);
        pw_host_free(offs);
        if (i >= 0 && (size_t)i < n && jv_failed(*out)) return PW_ERR_OOM;
        return PW_OK;
    }
    if (obj.type == JV_UNDEF) return jctx_fail(c, line, "indexing an undefined value");
    (void)c;
    return PW_OK; /* jinja2 gives undefined */
}

/* Python's slice indices for a sequence of n items. */
static pw_status slice_indices(jctx *c, int line, const jv *parts, int64_t n, int64_t *start,
                               int64_t *stop, int64_t *step) {
    *step = 1;
    for (int k = 0; k < 3; k++)
        if (parts[k].type != JV_UNDEF && parts[k].type != JV_NONE && parts[k].type != JV_INT)
            return jctx_fail(c, line, "slice indices must be integers or None");
    if (parts[2].type == JV_INT) *step = parts[2].u.i;
    if (*step == 0) return jctx_fail(c, line, "slice step cannot be zero");
    int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? n - 1 : n;
    for (int k = 0; k < 2; k++) {
        int64_t *v = k == 0 ? start : stop;
        if (parts[k].type != JV_INT) {
            *v = (*step < 0) == (k == 0) ? hi : lo;
            continue;
        }
        int64_t x = parts[k].u.i;
        if (x < 0) {
            x += n;
            if (x < lo) x = lo;
        } else if (x > hi) {
            x = hi;
        }
        *v = x;
    }
    return PW_OK;
}

static pw_status slice_value(jctx *c, int line, jv obj, const jv *parts, jv *out) {
    *out = jv_undef();
    if (obj.type == JV_LIST && obj.u.l->lazy) return jctx_fail(c, line, "a generator cannot be sliced");
    if (obj.type == JV_LIST) {
        int64_t a, b, st;
        PW_TRY(slice_indices(c, line, parts, obj.u.l->n, &a, &b, &st));
        jv l = jv_list();
        if (jv_failed(l)) return PW_ERR_OOM;
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
            pw_status s = jlist_push(l.u.l, jv_retain(obj.u.l->items[i]));
            if (s != PW_OK) {
                jv_release(l);
                return s;
            }
        }
        *out = l;
        return PW_OK;
    }
    if (obj.type == JV_STR) {
        size_t *offs, n;
        PW_TRY(code_points(obj.u.s, &offs, &n));
        int64_t a, b, st;
        pw_status s = slice_indices(c, line, parts, (int64_t)n, &a, &b, &st);
        if (s == PW_OK && st == 1) {
            *out = a < b ? jstr_sub(obj.u.s, offs[a], offs[b] - offs[a]) : jv_str("", 0, false);
            if (jv_failed(*out)) s = PW_ERR_OOM;
        } else if (s == PW_OK) {
            jbuf buf = {.max = SIZE_MAX};
            for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
                jbuf_put(&buf, obj.u.s->data + offs[i], offs[i + 1] - offs[i], false);
            *out = jbuf_to_str(&buf);
            if (jv_failed(*out)) s = PW_ERR_OOM;
        }
        pw_host_free(offs);
        return s;
    }
    return jctx_fail(c, line, "cannot slice a %s", jv_type_name(obj));
}

/* Evaluates the arguments of a call node into a (freed with args_free). */
static pw_status eval_args(jctx *c, scope *s, const node *n, jargs *a) {
    memset(a, 0, sizeof *a);
    int np = n->n_kids, nk = n->n_names;
    if (np) {
        a->pos = pw_host_calloc((size_t)np, sizeof *a->pos);
        if (!a->pos) return PW_ERR_OOM;
    }
    if (nk) {
        a->kwv = pw_host_calloc((size_t)nk, sizeof *a->kwv);
        if (!a->kwv) return PW_ERR_OOM;
        a->kwn = (const char **)n->names;
    }
    for (int i = 0; i < np; i++) {
        PW_TRY(eval(c, s, n->kids[i], &a->pos[i]));
        a->n_pos++;
    }
    for (int i = 0; i < nk; i++) {
        PW_TRY(eval(c, s, n->defaults[i], &a->kwv[i]));
        a->n_kw++;
    }
    return PW_OK;
}

static void args_free(jargs *a) {
    for (int i = 0; i < a->n_pos; i++) jv_release(a->pos[i]);
    for (int i = 0; i < a->n_kw; i++) jv_release(a->kwv[i]);
    pw_host_free(a->pos);
    pw_host_free(a->kwv);
}

const jv *jargs_get(const jargs *a, int pos, const char *name) {
    if (name)
        for (int i = 0; i < a->n_kw; i++)
            if (strcmp(a->kwn[i], name) == 0) return &a->kwv[i];
    if (pos >= 0 && pos < a->n_pos) return &a->pos[pos];
    return NULL;
}

static pw_status call_macro(jctx *c, int line, jmacro *m, const jargs *a, jv *out) {
    const node *def = m->def;
    ENTER(c, line);
    scope *s = scope_new(c, m->closure);
    pw_status st = s ? PW_OK : PW_ERR_OOM;
    jv varargs = jv_list(), kwargs = jv_dict();
    if (jv_failed(varargs) || jv_failed(kwargs)) st = PW_ERR_OOM;
    for (int i = 0; st == PW_OK && i < a->n_pos; i++) {
        if (i < def->n_names) st = scope_set(s, def->names[i], jv_retain(a->pos[i]));
        else st = jlist_push(varargs.u.l, jv_retain(a->pos[i]));
    }
    for (int i = 0; st == PW_OK && i < a->n_kw; i++) {
        int k = 0;
        while (k < def->n_names && strcmp(def->names[k], a->kwn[i]) != 0) k++;
        if (k < def->n_names) st = scope_set(s, def->names[k], jv_retain(a->kwv[i]));
        else {
            jv key = jv_str(a->kwn[i], strlen(a->kwn[i]), false);
            st = jv_failed(key) ? PW_ERR_OOM : jdict_put(kwargs.u.d, key, jv_retain(a->kwv[i]));
        }
    }
    for (int k = a->n_pos; st == PW_OK && k < def->n_names; k++) {
        bool given = false;
        for (int i = 0; i < a->n_kw; i++) given = given || strcmp(def->names[k], a->kwn[i]) == 0;
        if (given) continue;
        jv v = jv_undef();
        if (def->defaults[k]) st = eval(c, s, def->defaults[k], &v);
        if (st == PW_OK) st = scope_set(s, def->names[k], v);
    }
    if (st == PW_OK) {
        st = scope_set(s, "varargs", varargs);
        varargs = jv_undef();
    }
    if (st == PW_OK) {
        st = scope_set(s, "kwargs", kwargs);
        kwargs = jv_undef();
    }
    jv_release(varargs);
    jv_release(kwargs);
    jbuf buf = {.max = c->lim.max_output};
    jbuf *saved = c->out;
    if (st == PW_OK) {
        c->out = &buf;
        st = exec_body(c, s, def->kids, def->n_kids);
        c->out = saved;
        c->ctl = CTL_NONE;
    }
    c->depth--;
    if (st != PW_OK) {
        jbuf_discard(&buf);
        return st;
    }
    PW_TRY(jbuf_status(&buf));
    *out = jbuf_to_str(&buf);
    return jv_failed(*out) ? PW_ERR_OOM : PW_OK;
}

pw_status jctx_call(jctx *c, int line, jv callee, const jargs *args, jv *out) {
    *out = jv_undef();
    if (callee.type == JV_MACRO) return call_macro(c, line, callee.u.m, args, out);
    if (callee.type == JV_FUNC) return jinja_global(c, line, callee.u.fn, args, out);
    return jctx_fail(c, line, "a %s is not callable", jv_type_name(callee));
}

static pw_status concat(jctx *c, int line, jv a, jv b, jv *out) {
    jbuf buf = {.max = c->lim.max_output};
    jv_to_text(&buf, a);
    jv_to_text(&buf, b);
    if (jbuf_status(&buf) != PW_OK) {
        jbuf_discard(&buf);
        return jctx_fail(c, line, "%s", pw_last_error());
    }
    *out = jbuf_to_str(&buf);
    return jv_failed(*out) ? PW_ERR_OOM : PW_OK;
}

static int cmp_values(jctx *c, int line, jv a, jv b, pw_status *st) {
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.type == JV_INT && b.type == JV_INT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        double x = jv_as_double(a), y = jv_as_double(b);
        return (x > y) - (x < y);
    }
    if (a.type == JV_STR && b.type == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int r = memcmp(a.u.s->data, b.u.s->data, n);
        if (r) return r < 0 ? -1 : 1;
        return (a.u.s->len > b.u.s->len) - (a.u.s->len < b.u.s->len);
    }
    if (a.type == JV_LIST && b.type == JV_LIST) {
        for (int64_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            int r = cmp_values(c, line, a.u.l->items[i], b.u.l->items[i], st);
            if (r || *st != PW_OK) return r;
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    *st = jctx_fail(c, line, "cannot order a %s and a %s", jv_type_name(a), jv_type_name(b));
    return 0;
}

static bool contains(jv hay, jv needle) {
    if (hay.type == JV_STR) {
        if (needle.type != JV_STR) return false;
        if (needle.u.s->len == 0) return true;
        for (size_t i = 0; i + needle.u.s->len <= hay.u.s->len; i++)
            if (memcmp(hay.u.s->data + i, needle.u.s->data, needle.u.s->len) == 0) return true;
        return false;
    }
    if (hay.type == JV_LIST) {
        for (int64_t i = 0; i < hay.u.l->n; i++)
            if (jv_equal(hay.u.l->items[i], needle)) return true;
        return false;
    }
    if (hay.type == JV_DICT) return jdict_find_value(hay.u.d, needle) != NULL;
    return false;
}

static pw_status arith(jctx *c, int line, int op, jv a, jv b, jv *out) {
    if (op == OP_ADD && a.type == JV_STR && b.type == JV_STR) {
        if (!a.u.s->markup && !b.u.s->markup) return concat(c, line, a, b, out);
        /* Markup + str escapes the plain side, as jinja2's Markup does */
        jbuf buf = {.max = c->lim.max_output};
        if (a.u.s->markup) jbuf_put_str(&buf, a.u.s);
        else jbuf_put_escaped(&buf, a.u.s);
        if (b.u.s->markup) jbuf_put_str(&buf, b.u.s);
        else jbuf_put_escaped(&buf, b.u.s);
        if (jbuf_status(&buf) != PW_OK) {
            jbuf_discard(&buf);
            return jctx_fail(c, line, "%s", pw_last_error());
        }
        *out = jbuf_to_str(&buf);
        if (jv_failed(*out)) return PW_ERR_OOM;
        out->u.s->markup = true;
        return PW_OK;
    }
    if (op == OP_ADD && a.type == JV_LIST && b.type == JV_LIST) {
        if (a.u.l->lazy || b.u.l->lazy) return jctx_fail(c, line, "cannot add a generator and a list");
        jv l = jv_list();
        if (jv_failed(l)) return PW_ERR_OOM;
        for (int k = 0; k < 2; k++) {
            jlist *src = k ? b.u.l : a.u.l;
            for (int64_t i = 0; i < src->n; i++) {
                pw_status s = jlist_push(l.u.l, jv_retain(src->items[i]));
                if (s != PW_OK) {
                    jv_release(l);
                    return s;
                }
            }
        }
        *out = l;
        return PW_OK;
    }
    if (op == OP_MUL && ((a.type == JV_STR && b.type == JV_INT) || (a.type == JV_INT && b.type == JV_STR))) {
        jv str = a.type == JV_STR ? a : b;
        int64_t times = a.type == JV_INT ? a.u.i : b.u.i;
        jbuf buf = {.max = c->lim.max_output};
        for (int64_t i = 0; i < times && !buf.over && buf.sb.status == PW_OK; i++)
            jbuf_put_str(&buf, str.u.s);
        if (jbuf_status(&buf) != PW_OK) {
            jbuf_discard(&buf);
            return jctx_fail(c, line, "%s", pw_last_error());
        }
        *out = jbuf_to_str(&buf);
        return jv_failed(*out) ? PW_ERR_OOM : PW_OK;
    }
    if (op == OP_MOD && a.type == JV_STR) {
        jargs args = {0};
        jv one[1];
        if (b.type == JV_LIST) {
            args.pos = b.u.l->items;
            args.n_pos = (int)(b.u.l->n > INT_MAX ? INT_MAX : b.u.l->n);
        } else {
            one[0] = b;
            args.pos = one;
            args.n_pos = 1;
        }
        return jinja_filter(c, line, "format", a, &args, out);
    }
    if (!jv_is_number(a) || !jv_is_number(b))
        return jctx_fail(c, line, "unsupported operand types for arithmetic: %s and %s",
                         jv_type_name(a), jv_type_name(b));
    bool ints = a.type != JV_FLOAT && b.type != JV_FLOAT;
    int64_t x = a.type == JV_INT ? a.u.i : a.type == JV_BOOL ? a.u.b : 0;
    int64_t y = b.type == JV_INT ? b.u.i : b.type == JV_BOOL ? b.u.b : 0;
    double fx = jv_as_double(a), fy = jv_as_double(b);
    int64_t r;
    switch (op) {
    case OP_ADD:
        if (ints) {
            if (__builtin_add_overflow(x, y, &r)) return jctx_fail(c, line, "integer overflow");
            *out = jv_int(r);
        } else *out = jv_float(fx + fy);
        return PW_OK;
    case OP_SUB:
        if (ints) {
            if (__builtin_sub_overflow(x, y, &r)) return jctx_fail(c, line, "integer overflow");
            *out = jv_int(r);
        } else *out = jv_float(fx - fy);
        return PW_OK;
    case OP_MUL:
        if (ints) {
            if (__builtin_mul_overflow(x, y, &r)) return jctx_fail(c, line, "integer overflow");
            *out = jv_int(r);
        } else *out = jv_float(fx * fy);
        return PW_OK;
    case OP_DIV:
        if (fy == 0) return jctx_fail(c, line, "division by zero");
        *out = jv_float(fx / fy);
        return PW_OK;
    case OP_FLOORDIV:
    case OP_MOD:
        if (ints ? y == 0 : fy == 0) return jctx_fail(c, line, "integer division or modulo by zero");
        if (ints) {
            if (x == INT64_MIN && y == -1) return jctx_fail(c, line, "integer overflow");
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            *out = jv_int(op == OP_MOD ? m : q);
        } else {
            double q = floor(fx / fy), m = fmod(fx, fy);
            if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
            *out = jv_float(op == OP_MOD ? m : q);
        }
        return PW_OK;
    case OP_POW:
        if (ints && y >= 0) {
            int64_t acc = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(acc, x, &acc)) return jctx_fail(c, line, "integer overflow");
                if (acc == 0 || acc == 1) break;
            }
            if (x == -1) acc = (y % 2) ? -1 : 1;
            *out = jv_int(acc);
        } else *out = jv_float(pow(fx, fy));
        return PW_OK;
    default: return jctx_fail(c, line, "bad operator");
    }
}

static pw_status eval_binary(jctx *c, scope *s, const node *n, jv *out) {
    jv a;
    PW_TRY(eval(c, s, n->a, &a));
    if (n->op == OP_AND || n->op == OP_OR) {
        if (jv_truthy(a) == (n->op == OP_OR)) {
            *out = a;
            return PW_OK;
        }
        jv_release(a);
        return eval(c, s, n->b, out);
    }
    jv b;
    pw_status st = eval(c, s, n->b, &b);
    if (st != PW_OK) {
        jv_release(a);
        return st;
    }
    int line = n->line;
    switch (n->op) {
    case OP_EQ: *out = jv_bool(jv_equal(a, b)); break;
    case OP_NE: *out = jv_bool(!jv_equal(a, b)); break;
    case OP_LT:
    case OP_LE:
    case OP_GT:
    case OP_GE: {
        int r = cmp_values(c, line, a, b, &st);
        *out = jv_bool(n->op == OP_LT ? r < 0 : n->op == OP_LE ? r <= 0 : n->op == OP_GT ? r > 0 : r >= 0);
        break;
    }
    case OP_IN:
    case OP_NOT_IN:
        if (b.type != JV_STR && b.type != JV_LIST && b.type != JV_DICT && b.type != JV_UNDEF)
            st = jctx_fail(c, line, "argument of type %s is not iterable", jv_type_name(b));
        else if (b.type == JV_STR && a.type != JV_STR)
            st = jctx_fail(c, line, "'in <string>' requires string as left operand");
        else *out = jv_bool(contains(b, a) == (n->op == OP_IN));
        break;
    case OP_CONCAT: st = concat(c, line, a, b, out); break;
    default:
        if (a.type == JV_UNDEF || b.type == JV_UNDEF)
            st = jctx_fail(c, line, "arithmetic on an undefined value");
        else st = arith(c, line, n->op, a, b, out);
        break;
    }
    jv_release(a);
    jv_release(b);
    return st;
}

static pw_status eval_call(jctx *c, scope *s, const node *n, jv *out) {
    jargs a = {0};
    pw_status st = PW_OK;
    jv callee = jv_undef(), obj = jv_undef();
    const node *f = n->a;
    if (f->kind == N_ATTR) {
        PW_TRY(eval(c, s, f->a, &obj));
        if (obj.type == JV_DICT) {
            jv *v = jdict_find(obj.u.d, f->name, strlen(f->name));
            if (v && (v->type == JV_MACRO || v->type == JV_FUNC)) callee = jv_retain(*v);
        }
    } else {
        st = eval(c, s, f, &callee);
    }
    if (st == PW_OK) st = eval_args(c, s, n, &a);
    if (st == PW_OK) {
        if (f->kind == N_ATTR && callee.type == JV_UNDEF) {
            if (obj.type == JV_UNDEF) st = jctx_fail(c, n->line, "'%s' called on an undefined value", f->name);
            else st = jinja_method(c, n->line, obj, f->name, &a, out);
        } else {
            if (callee.type == JV_UNDEF)
                st = jctx_fail(c, n->line, "'%s' is undefined", f->kind == N_NAME ? f->name : "callee");
            else st = jctx_call(c, n->line, callee, &a, out);
        }
    }
    args_free(&a);
    jv_release(callee);
    jv_release(obj);
    return st;
}

static pw_status eval_filter(jctx *c, scope *s, const node *n, jv in, jv *out) {
    jargs a;
    pw_status st = eval_args(c, s, n, &a);
    if (st == PW_OK) st = jinja_filter(c, n->line, n->name, in, &a, out);
    args_free(&a);
    return st;
}

/* A filter chain whose innermost operand is NULL, applied to in. */
static pw_status apply_chain(jctx *c, scope *s, const node *n, jv in, jv *out) {
    jv x;
    if (n->a) PW_TRY(apply_chain(c, s, n->a, in, &x));
    else x = jv_retain(in);
    pw_status st = eval_filter(c, s, n, x, out);
    jv_release(x);
    return st;
}

static pw_status eval_inner(jctx *c, scope *s, const node *n, jv *out) {
    *out = jv_undef();
    switch (n->kind) {
    case N_LIT: *out = jv_retain(n->lit); return PW_OK;
    case N_NAME: *out = lookup(c, s, n->name); return PW_OK;
    case N_LIST:
    case N_TUPLE: {
        jv l = jv_list();
        if (jv_failed(l)) return PW_ERR_OOM;
        for (int i = 0; i < n->n_kids; i++) {
            jv x;
            pw_status st = eval(c, s, n->kids[i], &x);
            if (st == PW_OK) st = jlist_push(l.u.l, x);
            if (st != PW_OK) {
                jv_release(l);
                return st;
            }
        }
        l.u.l->tuple = n->kind == N_TUPLE;
        *out = l;
        return PW_OK;
    }
    case N_DICT: {
        jv d = jv_dict();
        if (jv_failed(d)) return PW_ERR_OOM;
        for (int i = 0; i + 1 < n->n_kids; i += 2) {
            jv k, v = jv_undef();
            pw_status st = eval(c, s, n->kids[i], &k);
            if (st == PW_OK && (st = eval(c, s, n->kids[i + 1], &v)) != PW_OK) jv_release(k);
            if (st == PW_OK) st = jdict_put(d.u.d, k, v);
            if (st != PW_OK) {
                jv_release(d);
                return st;
            }
        }
        *out = d;
        return PW_OK;
    }
    case N_ATTR: {
        jv obj;
        PW_TRY(eval(c, s, n->a, &obj));
        pw_status st = PW_OK;
        if (obj.type == JV_DICT) {
            jv *v = jdict_find(obj.u.d, n->name, strlen(n->name));
            if (v) *out = jv_retain(*v);
        } else if (obj.type == JV_UNDEF) {
            st = jctx_fail(c, n->line, "'%s' of an undefined value", n->name);
        }
        jv_release(obj);
        return st;
    }
    case N_INDEX: {
        jv obj, key;
        PW_TRY(eval(c, s, n->a, &obj));
        pw_status st = eval(c, s, n->b, &key);
        if (st == PW_OK) {
            st = index_value(c, n->line, obj, key, out);
            jv_release(key);
        }
        jv_release(obj);
        return st;
    }
    case N_SLICE: {
        jv obj, parts[3] = {jv_undef(), jv_undef(), jv_undef()};
        PW_TRY(eval(c, s, n->a, &obj));
        const node *pn[3] = {n->b, n->c, n->d};
        pw_status st = PW_OK;
        for (int k = 0; k < 3 && st == PW_OK; k++)
            if (pn[k]) st = eval(c, s, pn[k], &parts[k]);
        if (st == PW_OK) st = slice_value(c, n->line, obj, parts, out);
        for (int k = 0; k < 3; k++) jv_release(parts[k]);
        jv_release(obj);
        return st;
    }
    case N_CALL: return eval_call(c, s, n, out);
    case N_FILTER: {
        jv in;
        PW_TRY(eval(c, s, n->a, &in));
        pw_status st = eval_filter(c, s, n, in, out);
        jv_release(in);
        return st;
    }
    case N_TEST: {
        jv in;
        PW_TRY(eval(c, s, n->a, &in));
        jargs a;
        pw_status st = eval_args(c, s, n, &a);
        bool r = false;
        if (st == PW_OK) st = jinja_test(c, n->line, n->name, in, &a, &r);
        args_free(&a);
        jv_release(in);
        if (st == PW_OK) *out = jv_bool(r != (n->op == 1));
        return st;
    }
    case N_UNARY: {
        jv a;
        PW_TRY(eval(c, s, n->a, &a));
        pw_status st = PW_OK;
        if (n->op == OP_NOT) *out = jv_bool(!jv_truthy(a));
        else if (a.type == JV_INT && n->op == OP_NEG) {
            if (a.u.i == INT64_MIN) st = jctx_fail(c, n->line, "integer overflow");
            else *out = jv_int(-a.u.i);
        } else if (a.type == JV_FLOAT) *out = jv_float(n->op == OP_NEG ? -a.u.f : a.u.f);
        else if (a.type == JV_INT || a.type == JV_BOOL)
            *out = jv_int(n->op == OP_NEG ? -(int64_t)(a.type == JV_INT ? a.u.i : a.u.b)
                                           : (a.type == JV_INT ? a.u.i : a.u.b));
        else st = jctx_fail(c, n->line, "bad operand type for unary -: %s", jv_type_name(a));
        jv_release(a);
        return st;
    }
    case N_BINARY: return eval_binary(c, s, n, out);
    case N_COND: {
        jv cond;
        PW_TRY(eval(c, s, n->b, &cond));
        bool t = jv_truthy(cond);
        jv_release(cond);
        if (t) return eval(c, s, n->a, out);
        if (n->c) return eval(c, s, n->c, out);
        return PW_OK;
    }
    default: return jctx_fail(c, n->line, "a statement where an expression belongs");
    }
}

static pw_status eval(jctx *c, scope *s, const node *n, jv *out) {
    *out = jv_undef();
    PW_TRY(jctx_step(c, n->line));
    ENTER(c, n->line);
    pw_status st = eval_inner(c, s, n, out);
    c->depth--;
    if (st == PW_OK) st = charge(c, n->line, *out);
    if (st != PW_OK) {
        jv_release(*out);
        *out = jv_undef();
    }
    return st;
}

/* ---- statements ---------------------------------------------------------------- */

static pw_status assign(jctx *c, scope *s, const node *target, jv v) {
    if (target->kind == N_NAME) return scope_set(s, target->name, v);
    if (target->kind == N_ATTR) {
        jv ns;
        pw_status st = eval(c, s, target->a, &ns);
        if (st == PW_OK && (ns.type != JV_DICT || !ns.u.d->is_namespace))
            st = jctx_fail(c, target->line, "cannot assign attribute '%s' on a %s", target->name,
                           jv_type_name(ns));
        jv key = st == PW_OK ? jv_str(target->name, strlen(target->name), false) : jv_undef();
        if (st == PW_OK && jv_failed(key)) st = PW_ERR_OOM;
        if (st == PW_OK) {
            st = jdict_put(ns.u.d, key, v);
            v = jv_undef();
        }
        jv_release(v);
        jv_release(ns);
        return st;
    }
    /* unpacking into names */
    pw_status st = PW_OK;
    if (v.type != JV_LIST || v.u.l->n != target->n_kids)
        st = jctx_fail(c, target->line, "cannot unpack a %s into %d names", jv_type_name(v), target->n_kids);
    for (int i = 0; st == PW_OK && i < target->n_kids; i++)
        st = scope_set(s, target->kids[i]->name, jv_retain(v.u.l->items[i]));
    jv_release(v);
    return st;
}

static pw_status render_body(jctx *c, scope *s, node *const *kids, int n, jv *out) {
    jbuf buf = {.max = c->lim.max_output};
    jbuf *saved = c->out;
    c->out = &buf;
    pw_status st = exec_body(c, s, kids, n);
    c->out = saved;
    if (st == PW_OK) st = jbuf_status(&buf);
    if (st != PW_OK) {
        jbuf_discard(&buf);
        return st;
    }
    *out = jbuf_to_str(&buf);
    return jv_failed(*out) ? PW_ERR_OOM : PW_OK;
}

/* The items a for loop walks: a new list. */
static pw_status iteration_items(jctx *c, int line, jv v, jv *out) {
    if (v.type == JV_LIST) {
        *out = jv_retain(v);
        return PW_OK;
    }
    jv l = jv_list();
    if (jv_failed(l)) return PW_ERR_OOM;
    pw_status st = PW_OK;
    if (v.type == JV_DICT) {
        for (int64_t i = 0; st == PW_OK && i < v.u.d->n; i++)
            st = jlist_push(l.u.l, jv_retain(v.u.d->keys[i]));
    } else if (v.type == JV_STR) {
        size_t *offs, n;
        st = code_points(v.u.s, &offs, &n);
        for (size_t i = 0; st == PW_OK && i < n; i++) {
            jv ch = jstr_sub(v.u.s, offs[i], offs[i + 1] - offs[i]);
            st = jv_failed(ch) ? PW_ERR_OOM : jlist_push(l.u.l, ch);
        }
        if (st == PW_OK || n) pw_host_free(offs);
    } else if (v.type != JV_UNDEF) {
        st = jctx_fail(c, line, "'%s' object is not iterable", jv_type_name(v));
    }
    if (st != PW_OK) {
        jv_release(l);
        return st;
    }
    *out = l;
    return PW_OK;
}

static pw_status set_key(jdict *d, const char *key, jv v) {
    jv k = jv_str(key, strlen(key), false);
    if (jv_failed(k)) {
        jv_release(v);
        return PW_ERR_OOM;
    }
    return jdict_put(d, k, v);
}

static pw_status exec_for(jctx *c, scope *outer, const node *n) {
    jv iter, items = jv_undef(), kept = jv_undef();
    PW_TRY(eval(c, outer, n->a, &iter));
    pw_status st = iteration_items(c, n->line, iter, &items);
    jv_release(iter);
    PW_TRY(st);
    scope *s = scope_new(c, outer);
    if (!s) st = PW_ERR_OOM;
    /* the loop's filter ("for x in xs if cond") decides what loop.* counts */
    if (st == PW_OK && n->b) {
        kept = jv_list();
        if (jv_failed(kept)) st = PW_ERR_OOM;
        for (int64_t i = 0; st == PW_OK && i < items.u.l->n; i++) {
            jv x = items.u.l->items[i], cond = jv_undef();
            if (n->n_names == 1) st = scope_set(s, n->names[0], jv_retain(x));
            else {
                if (x.type != JV_LIST || x.u.l->n != n->n_names)
                    st = jctx_fail(c, n->line, "cannot unpack a %s into %d loop variables",
                                   jv_type_name(x), n->n_names);
                for (int k = 0; st == PW_OK && k < n->n_names; k++)
                    st = scope_set(s, n->names[k], jv_retain(x.u.l->items[k]));
            }
            if (st == PW_OK) st = eval(c, s, n->b, &cond);
            if (st == PW_OK && jv_truthy(cond)) st = jlist_push(kept.u.l, jv_retain(x));
            jv_release(cond);
        }
    } else if (st == PW_OK) {
        kept = jv_retain(items);
    }
    jv_release(items);
    int64_t len = st == PW_OK ? kept.u.l->n : 0;
    for (int64_t i = 0; st == PW_OK && i < len; i++) {
        if ((st = jctx_step(c, n->line)) != PW_OK) break;
        jv x = kept.u.l->items[i];
        if (n->n_names == 1) {
            st = scope_set(s, n->names[0], jv_retain(x));
        } else {
            if (x.type != JV_LIST || x.u.l->n != n->n_names)
                st = jctx_fail(c, n->line, "cannot unpack a %s into %d loop variables", jv_type_name(x),
                               n->n_names);
            for (int k = 0; st == PW_OK && k < n->n_names; k++)
                st = scope_set(s, n->names[k], jv_retain(x.u.l->items[k]));
        }
        jv loop = jv_dict();
        if (st == PW_OK && jv_failed(loop)) st = PW_ERR_OOM;
        if (st == PW_OK) {
            jdict *d = loop.u.d;
            st = set_key(d, "index", jv_int(i + 1));
            if (st == PW_OK) st = set_key(d, "index0", jv_int(i));
            if (st == PW_OK) st = set_key(d, "revindex", jv_int(len - i));
            if (st == PW_OK) st = set_key(d, "revindex0", jv_int(len - i - 1));
            if (st == PW_OK) st = set_key(d, "first", jv_bool(i == 0));
            if (st == PW_OK) st = set_key(d, "last", jv_bool(i == len - 1));
            if (st == PW_OK) st = set_key(d, "length", jv_int(len));
            if (st == PW_OK) st = set_key(d, "depth", jv_int(1));
            if (st == PW_OK) st = set_key(d, "depth0", jv_int(0));
            if (st == PW_OK && i > 0) st = set_key(d, "previtem", jv_retain(kept.u.l->items[i - 1]));
            if (st == PW_OK && i + 1 < len) st = set_key(d, "nextitem", jv_retain(kept.u.l->items[i + 1]));
            if (st == PW_OK) {
                st = scope_set(s, "loop", loop);
                loop = jv_undef();
            }
        }
        jv_release(loop);
        if (st == PW_OK) st = exec_body(c, s, n->kids, n->n_kids);
        int ctl = c->ctl;
        c->ctl = CTL_NONE;
        if (ctl == CTL_BREAK) break;
    }
    jv_release(kept);
    if (st == PW_OK && len == 0 && n->n_kids2) st = exec_body(c, outer, n->kids2, n->n_kids2);
    return st;
}

static pw_status exec_node(jctx *c, scope *s, const node *n) {
    PW_TRY(jctx_step(c, n->line));
    switch (n->kind) {
    case N_TEXT: jbuf_put_str(c->out, n->lit.u.s); return jbuf_status(c->out);
    case N_OUTPUT: {
        jv v;
        PW_TRY(eval(c, s, n->a, &v));
        if (v.type == JV_LIST && v.u.l->lazy) {
            jv_release(v);
            return jctx_fail(c, n->line, "printing a generator (its text names a memory address)");
        }
        jv_to_text(c->out, v);
        jv_release(v);
        return jbuf_status(c->out);
    }
    case N_IF: {
        jv cond;
        PW_TRY(eval(c, s, n->a, &cond));
        bool t = jv_truthy(cond);
        jv_release(cond);
        return t ? exec_body(c, s, n->kids, n->n_kids) : exec_body(c, s, n->kids2, n->n_kids2);
    }
    case N_FOR: return exec_for(c, s, n);
    case N_SET: {
        jv v;
        if (n->b) {
            PW_TRY(eval(c, s, n->b, &v));
        } else {
            PW_TRY(render_body(c, s, n->kids, n->n_kids, &v));
            if (n->c) {
                jv f;
                pw_status st = apply_chain(c, s, n->c, v, &f);
                jv_release(v);
                PW_TRY(st);
                v = f;
            }
        }
        return assign(c, s, n->a, v);
    }
    case N_MACRO: {
        jmacro *m = pw_host_calloc(1, sizeof *m);
        if (!m) return PW_ERR_OOM;
        m->rc = 1;
        m->def = n;
        m->closure = s;
        return scope_set(s, n->name, (jv){.type = JV_MACRO, .u.m = m});
    }
    case N_FILTER_BLOCK: {
        jv body, v;
        PW_TRY(render_body(c, s, n->kids, n->n_kids, &body));
        pw_status st = apply_chain(c, s, n->a, body, &v);
        jv_release(body);
        PW_TRY(st);
        jv_to_text(c->out, v);
        jv_release(v);
        return jbuf_status(c->out);
    }
    case N_BREAK: c->ctl = CTL_BREAK; return PW_OK;
    case N_CONTINUE: c->ctl = CTL_CONTINUE; return PW_OK;
    case N_BLOCK: return exec_body(c, s, n->kids, n->n_kids);
    default: return jctx_fail(c, n->line, "an expression where a statement belongs");
    }
}

static pw_status exec_body(jctx *c, scope *s, node *const *kids, int n) {
    if (n == 0) return PW_OK;
    ENTER(c, kids[0]->line);
    pw_status st = PW_OK;
    for (int i = 0; i < n && st == PW_OK && c->ctl == CTL_NONE; i++) st = exec_node(c, s, kids[i]);
    c->depth--;
    return st;
}

pw_status pw_jinja_render(const pw_jinja_template *t, const pw_jinja_value *context,
                          const pw_jinja_limits *limits, pw_jinja_rendered *out) {
    memset(out, 0, sizeof *out);
    if (!t) return pw_error(PW_ERR_INVALID_ARG, "jinja: no template");
    if (context && context->v.type != JV_DICT)
        return pw_error(PW_ERR_INVALID_ARG, "jinja: the context must be a dict");
    jctx c = {.t = t, .globals = context ? context->v.u.d : NULL};
    if (limits) c.lim = *limits;
    if (!c.lim.max_output) c.lim.max_output = (size_t)4 << 20;
    if (!c.lim.max_steps) c.lim.max_steps = 1000 * 1000;
    if (!c.lim.max_depth) c.lim.max_depth = 500;
    jbuf buf = {.max = c.lim.max_output};
    c.out = &buf;
    scope *top = scope_new(&c, NULL);
    pw_status st = top ? exec_body(&c, top, t->root->kids, t->root->n_kids) : PW_ERR_OOM;
    scopes_free(&c);
    if (st == PW_OK) st = jbuf_status(&buf);
    if (st != PW_OK) {
        jbuf_discard(&buf);
        if (st == PW_ERR_OOM) return pw_error(PW_ERR_OOM, "chat template: out of memory rendering");
        return st;
    }
    out->len = buf.sb.len;
    out->text = buf.sb.data;
    if (!out->text) {
        out->text = pw_host_calloc(1, 1);
        if (!out->text) {
            jbuf_discard(&buf);
            return PW_ERR_OOM;
        }
    }
    out->trusted = buf.spans;
    out->n_trusted = buf.n_spans;
    return PW_OK;
}

void pw_jinja_rendered_free(pw_jinja_rendered *r) {
    if (!r) return;
    pw_host_free(r->text);
    pw_host_free(r->trusted);
    memset(r, 0, sizeof *r);
}
