/* The Jinja interpreter's private parts: values, the syntax tree, and the
 * functions the parser, the evaluator and the builtins share. */
#ifndef PW_MODEL_JINJA_INTERNAL_H
#define PW_MODEL_JINJA_INTERNAL_H

#include "model/jinja.h"

#include <stdint.h>
#include <string.h>

#define JINJA_MAX_PARSE_DEPTH 128
#define JINJA_MAX_ITEMS 1000000 /* elements of one list or dict */

/* ---- values ------------------------------------------------------------- */

typedef enum jv_type {
    JV_UNDEF = 0, /* a name or key that does not exist: renders as "" */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST, /* lists and tuples */
    JV_DICT, /* dicts and namespaces */
    JV_MACRO,
    JV_FUNC, /* a builtin global function (range, namespace, ...) */
} jv_type;

typedef struct jstr jstr;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jmacro jmacro;

typedef struct jv {
    uint8_t type;
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d;
        jmacro *m;
        int fn;
    } u;
} jv;

/* A string and the byte ranges of it the template wrote (trusted). */
struct jstr {
    int rc;
    bool markup; /* jinja2's Markup (the safe filter): adding a plain string escapes it */
    size_t len;
    int64_t n_spans;
    pw_jinja_span *spans;
    char data[]; /* NUL-terminated */
};

struct jlist {
    int rc;
    bool lazy;  /* a generator in jinja2 (map, select, ...): no len(), no JSON, no indexing */
    bool tuple; /* printed as (a, b) */
    int64_t n, cap;
    jv *items;
};

struct jdict {
    int rc;
    bool is_namespace; /* attributes may be assigned */
    int64_t n, cap;
    jv *keys, *vals;
};

struct pw_jinja_value {
    jv v;
};

static inline jv jv_undef(void) { return (jv){.type = JV_UNDEF}; }
static inline jv jv_none(void) { return (jv){.type = JV_NONE}; }
static inline jv jv_bool(bool b) { return (jv){.type = JV_BOOL, .u.b = b}; }
static inline jv jv_int(int64_t i) { return (jv){.type = JV_INT, .u.i = i}; }
static inline jv jv_float(double f) { return (jv){.type = JV_FLOAT, .u.f = f}; }

jv jv_retain(jv v);
void jv_release(jv v);
/* New values; type JV_UNDEF with PW_ERR_OOM set on failure (check with
 * jv_failed). */
jv jv_str(const char *s, size_t len, bool trusted);
jv jv_str_empty(size_t len, jstr **out); /* len bytes to fill, untrusted */
jv jv_list(void);
jv jv_dict(void);
static inline bool jv_failed(jv v) { return v.type == JV_UNDEF; }
pw_status jlist_push(jlist *l, jv v);   /* takes v */
pw_status jdict_put(jdict *d, jv k, jv v); /* takes k and v; replaces an equal key */
/* Borrowed; NULL if absent. */
jv *jdict_find(const jdict *d, const char *key, size_t len);
jv *jdict_find_value(const jdict *d, jv key);
bool jv_equal(jv a, jv b);
bool jv_truthy(jv v);
const char *jv_type_name(jv v);
static inline bool jv_is_number(jv v) {
    return v.type == JV_INT || v.type == JV_FLOAT || v.type == JV_BOOL;
}
static inline double jv_as_double(jv v) {
    return v.type == JV_FLOAT ? v.u.f : v.type == JV_INT ? (double)v.u.i : (double)v.u.b;
}

/* Text being built with its trusted spans: the render output, and strings
 * assembled from pieces (concatenation, join). */
typedef struct jbuf {
    pw_sb sb;
    pw_jinja_span *spans;
    int64_t n_spans, cap_spans;
    size_t max; /* bytes allowed */
    bool over;  /* an append went past max */
} jbuf;

void jbuf_put(jbuf *b, const char *s, size_t n, bool trusted);
void jbuf_put_str(jbuf *b, const jstr *s); /* keeps s's spans */
/* s with & < > " ' as HTML entities (Markup's escape), the rest keeping its spans. */
void jbuf_put_escaped(jbuf *b, const jstr *s);
pw_status jbuf_status(const jbuf *b);
jv jbuf_to_str(jbuf *b); /* frees b's memory */
void jbuf_discard(jbuf *b);
/* The span-preserving substring [start, start + n) of s. */
jv jstr_sub(const jstr *s, size_t start, size_t n);
static inline bool jstr_trusted(const jstr *s) {
    return s->len == 0 || (s->n_spans == 1 && s->spans[0].start == 0 && s->spans[0].len == s->len);
}

/* Python's str() of v into b (strings keep their spans; other values are
 * data), and repr() for values inside lists and dicts. */
void jv_to_text(jbuf *b, jv v);
/* json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=False) as
 * transformers' tojson; indent < 0 for none. PW_ERR_INVALID_ARG for a value
 * JSON cannot hold. */
pw_status jv_to_json(jbuf *b, jv v, int indent, int depth);
/* Python's repr of a float ("1.0", "0.1", "1e-05"). */
void jv_format_float(double f, char *out, size_t cap);

/* ---- syntax tree ---------------------------------------------------------- */

typedef enum node_kind {
    /* expressions */
    N_LIT,
    N_NAME,
    N_LIST,
    N_TUPLE,
    N_DICT, /* kids: key, value, key, value, ... */
    N_ATTR, /* a.name */
    N_INDEX,
    N_SLICE, /* a[b:c:d], any of b, c, d NULL */
    N_CALL,  /* a(kids..., kw...) */
    N_FILTER, /* a|name(kids..., kw...); a NULL in a filter block */
    N_TEST,   /* a is [not] name(kids...) (op 1 when negated) */
    N_UNARY,  /* op a */
    N_BINARY, /* a op b */
    N_COND,   /* a if b else c */
    /* statements */
    N_TEXT,
    N_OUTPUT,
    N_IF,    /* if a: kids else kids2 */
    N_FOR,   /* for names in a [if b]: kids else kids2 */
    N_SET,   /* a = b, or a = the output of kids (block set) */
    N_MACRO, /* name(names = defaults): kids */
    N_FILTER_BLOCK, /* a (a filter chain with a NULL innermost operand) over kids */
    N_BREAK,
    N_CONTINUE,
    N_BLOCK, /* kids: a template body (generation blocks render as their body) */
} node_kind;

/* Binary and unary operators (op of N_BINARY, N_UNARY). */
enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOT_IN, OP_AND, OP_OR,
    OP_NOT, OP_NEG, OP_POS,
};

typedef struct node node;
struct node {
    node_kind kind;
    int op;
    int line;
    node *a, *b, *c, *d;
    node **kids, **kids2;
    int n_kids, n_kids2;
    const char *name;
    const char **names; /* N_FOR targets, N_MACRO parameters, N_CALL keyword names */
    node **defaults;    /* N_MACRO parameter defaults (NULL entries: none); N_CALL keyword values */
    int n_names;
    jv lit;
};

/* The builtin global functions (JV_FUNC). */
enum { FN_RANGE = 1, FN_NAMESPACE, FN_DICT, FN_RAISE, FN_STRFTIME_NOW };

typedef struct arena_block arena_block;

struct pw_jinja_template {
    node *root;
    arena_block *arena;
    jv *lits; /* the string literals, released with the template */
    int64_t n_lits, cap_lits;
};

/* Memory that lives as long as the template; NULL with PW_ERR_OOM set. */
void *jinja_arena_alloc(pw_jinja_template *t, size_t bytes);

/* ---- evaluation ------------------------------------------------------------ */

typedef struct jctx jctx;
typedef struct scope scope;

struct jmacro {
    int rc;
    const node *def;
    scope *closure; /* where it was defined (lives until the render ends) */
};

/* Arguments of a call, a filter, a test or a method. */
typedef struct jargs {
    jv *pos;
    int n_pos;
    const char **kwn;
    jv *kwv;
    int n_kw;
} jargs;

/* A render error at a template line (PW_ERR_INVALID_ARG). */
pw_status jctx_fail(jctx *c, int line, const char *fmt, ...) PW_PRINTF(3, 4);
/* Counts an evaluation step; an error past the step bound. */
pw_status jctx_step(jctx *c, int line);
size_t jctx_max_string(const jctx *c);
int64_t jctx_now(const jctx *c); /* strftime_now's time */
/* Calls a macro or builtin function. */
pw_status jctx_call(jctx *c, int line, jv callee, const jargs *args, jv *out);

/* The builtins (jinja_builtins.c). Each sets *out to a new reference. A
 * name that does not exist is an error naming it. */
pw_status jinja_filter(jctx *c, int line, const char *name, jv in, const jargs *args, jv *out);
pw_status jinja_test(jctx *c, int line, const char *name, jv in, const jargs *args, bool *out);
pw_status jinja_method(jctx *c, int line, jv obj, const char *name, const jargs *args, jv *out);
pw_status jinja_global(jctx *c, int line, int fn, const jargs *args, jv *out);
/* The keyword argument name, or positional argument pos, or NULL. */
const jv *jargs_get(const jargs *a, int pos, const char *name);

#endif
