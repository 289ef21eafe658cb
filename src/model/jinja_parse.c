/* The Jinja parser: splits the template into text and tags the way jinja2's
 * lexer does under trim_blocks and lstrip_blocks (with "-" and "+"
 * whitespace control, comments and raw blocks), then parses each tag's
 * expression or statement into the syntax tree. Nesting is bounded. */
#include "model/jinja_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct arena_block {
    arena_block *next;
    size_t used, cap;
    max_align_t data[];
};

void *jinja_arena_alloc(pw_jinja_template *t, size_t bytes) {
    bytes = (bytes + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_block *b = t->arena;
    if (!b || b->cap - b->used < bytes) {
        size_t cap = bytes > 16384 ? bytes : 16384;
        b = pw_host_alloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = t->arena;
        b->used = 0;
        b->cap = cap;
        t->arena = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += bytes;
    memset(p, 0, bytes);
    return p;
}

void pw_jinja_template_free(pw_jinja_template *t) {
    if (!t) return;
    for (int64_t i = 0; i < t->n_lits; i++) jv_release(t->lits[i]);
    pw_host_free(t->lits);
    for (arena_block *b = t->arena, *next; b; b = next) {
        next = b->next;
        pw_host_free(b);
    }
    pw_host_free(t);
}

/* ---- the template's pieces: text and tags ------------------------------------ */

typedef enum seg_kind { SEG_TEXT, SEG_VAR, SEG_BLOCK } seg_kind;

typedef struct seg {
    seg_kind kind;
    size_t start, len; /* text, or the tag's inside */
    int line;
} seg;

typedef struct parser {
    pw_jinja_template *t;
    const char *src; /* newlines normalized */
    size_t len;
    seg *segs;
    int64_t n_segs, cap_segs, at;
    /* the expression lexer, over one tag */
    size_t pos, end;
    int line;
    int depth;
    size_t line_pos; /* line_count newlines before line_pos */
    int line_count;
} parser;

static pw_status fail(parser *p, int line, const char *fmt, ...) PW_PRINTF(3, 4);
static pw_status fail(parser *p, int line, const char *fmt, ...) {
    (void)p;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pw_error(PW_ERR_PARSE, "chat template line %d: %s", line, msg);
}

/* The line of pos; positions asked for only grow. */
static int line_at(parser *p, size_t pos) {
    for (; p->line_pos < pos && p->line_pos < p->len; p->line_pos++) p->line_count += p->src[p->line_pos] == '\n';
    return p->line_count;
}

static pw_status push_seg(parser *p, seg_kind kind, size_t start, size_t len, int line) {
    if (kind == SEG_TEXT && len == 0) return PW_OK;
    if (p->n_segs == p->cap_segs) {
        size_t cap = (size_t)p->cap_segs;
        seg *s = pw_host_grow(p->segs, sizeof *s, &cap, (size_t)p->n_segs + 1, INT64_MAX);
        if (!s) return PW_ERR_OOM;
        p->segs = s;
        p->cap_segs = (int64_t)cap;
    }
    p->segs[p->n_segs++] = (seg){kind, start, len, line};
    return PW_OK;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Where the tag opened at `open` (after its "{{"/"{%" and sign) ends: the
 * position of its closing delimiter, with strings and brackets skipped as
 * jinja2's lexer does. *sign is the '-' or '+' before the delimiter. */
static bool find_tag_end(const parser *p, size_t i, char close, size_t *inner_end, size_t *after,
                         char *sign) {
    int depth = 0;
    while (i < p->len) {
        char c = p->src[i];
        if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < p->len && p->src[j] != c) j += p->src[j] == '\\' ? 2 : 1;
            if (j >= p->len) return false;
            i = j + 1;
            continue;
        }
        if (depth == 0) {
            if ((c == '-' || c == '+') && i + 2 < p->len + 0 && p->src[i + 1] == close &&
                p->src[i + 2] == '}' && !(c == '+' && close == '}')) {
                *inner_end = i;
                *after = i + 3;
                *sign = c;
                return true;
            }
            if (c == close && i + 1 < p->len && p->src[i + 1] == '}') {
                *inner_end = i;
                *after = i + 2;
                *sign = 0;
                return true;
            }
        }
        if (c == '(' || c == '[' || c == '{') depth++;
        else if ((c == ')' || c == ']' || c == '}') && depth > 0) depth--;
        i++;
    }
    return false;
}

/* The word a block tag starts with ("raw", "endraw", ...). */
static bool tag_is(const parser *p, size_t start, size_t end, const char *word) {
    while (start < end && is_space(p->src[start])) start++;
    while (end > start && is_space(p->src[end - 1])) end--;
    size_t n = strlen(word);
    return end - start == n && memcmp(p->src + start, word, n) == 0;
}

static pw_status split(parser *p) {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < p->len) {
        /* the next tag opener */
        size_t o = pos;
        while (o + 1 < p->len && !(p->src[o] == '{' && (p->src[o + 1] == '{' || p->src[o + 1] == '%' ||
                                                         p->src[o + 1] == '#')))
            o++;
        if (o + 1 >= p->len) {
            PW_TRY(push_seg(p, SEG_TEXT, pos, p->len - pos, 0));
            break;
        }
        char kind = p->src[o + 1];
        char sign = o + 2 < p->len ? p->src[o + 2] : 0;
        if (sign != '-' && !(sign == '+' && kind != '{')) sign = 0;
        size_t text_end = o;
        if (sign == '-') {
            while (text_end > pos && is_space(p->src[text_end - 1])) text_end--;
        } else if (sign != '+' && kind != '{') {
            /* lstrip_blocks: the whitespace between a line's start and the tag */
            size_t l = text_end;
            while (l > pos && p->src[l - 1] != '\n') l--;
            bool at_line_start = l > pos || line_starting;
            bool blank = l < text_end;
            for (size_t i = l; i < text_end; i++) blank = blank && is_space(p->src[i]);
            if (at_line_start && blank) text_end = l;
        }
        PW_TRY(push_seg(p, SEG_TEXT, pos, text_end - pos, 0));
        int line = line_at(p, o);
        size_t inner = o + 2 + (sign ? 1 : 0);
        size_t inner_end, after;
        char end_sign = 0;
        if (kind == '#') {
            size_t i = inner;
            while (i + 1 < p->len && !(p->src[i] == '#' && p->src[i + 1] == '}')) i++;
            if (i + 1 >= p->len) return fail(p, line, "comment not closed");
            after = i + 2;
            end_sign = i > inner && (p->src[i - 1] == '-' || p->src[i - 1] == '+') ? p->src[i - 1] : 0;
        } else {
            if (!find_tag_end(p, inner, kind == '{' ? '}' : '%', &inner_end, &after, &end_sign))
                return fail(p, line, "%s not closed", kind == '{' ? "'{{'" : "'{%'");
            if (kind == '%' && tag_is(p, inner, inner_end, "raw")) {
                /* everything up to {% endraw %} is text */
                size_t i = after, text_start = after;
                for (;; i++) {
                    if (i + 1 >= p->len) return fail(p, line, "raw block not closed");
                    if (p->src[i] != '{' || p->src[i + 1] != '%') continue;
                    size_t in = i + 2 + (p->src[i + 2] == '-' || p->src[i + 2] == '+');
                    size_t ie, af;
                    char es;
                    if (find_tag_end(p, in, '%', &ie, &af, &es) && tag_is(p, in, ie, "endraw")) {
                        size_t te = i;
                        if (p->src[i + 2] == '-')
                            while (te > text_start && is_space(p->src[te - 1])) te--;
                        PW_TRY(push_seg(p, SEG_TEXT, text_start, te - text_start, 0));
                        after = af;
                        end_sign = es;
                        break;
                    }
                }
            } else {
                PW_TRY(push_seg(p, kind == '{' ? SEG_VAR : SEG_BLOCK, inner, inner_end - inner, line));
            }
        }
        pos = after;
        if (end_sign == '-') {
            while (pos < p->len && is_space(p->src[pos])) pos++;
        } else if (end_sign != '+' && kind != '{' && pos < p->len && p->src[pos] == '\n') {
            pos++; /* trim_blocks */
        }
        line_starting = pos > 0 && p->src[pos - 1] == '\n';
    }
    return PW_OK;
}

/* ---- the expression lexer ------------------------------------------------------- */

typedef enum tok_kind { T_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP } tok_kind;

typedef struct tok {
    tok_kind kind;
    size_t start, len; /* in src */
    char op[3];
} tok;

static void skip_space(parser *p) {
    while (p->pos < p->end && is_space(p->src[p->pos])) p->pos++;
}

static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static pw_status lex(parser *p, tok *t) {
    skip_space(p);
    memset(t, 0, sizeof *t);
    t->start = p->pos;
    if (p->pos >= p->end) {
        t->kind = T_END;
        return PW_OK;
    }
    const char *s = p->src;
    char c = s[p->pos];
    if (is_name_start(c)) {
        while (p->pos < p->end && (is_name_start(s[p->pos]) || is_digit(s[p->pos]))) p->pos++;
        t->kind = T_NAME;
    } else if (is_digit(c)) {
        t->kind = T_INT;
        while (p->pos < p->end && (is_digit(s[p->pos]) || s[p->pos] == '_')) p->pos++;
        if (p->pos + 1 < p->end && s[p->pos] == '.' && is_digit(s[p->pos + 1])) {
            t->kind = T_FLOAT;
            p->pos++;
            while (p->pos < p->end && (is_digit(s[p->pos]) || s[p->pos] == '_')) p->pos++;
        }
        if (p->pos < p->end && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
            size_t q = p->pos + 1;
            if (q < p->end && (s[q] == '+' || s[q] == '-')) q++;
            if (q < p->end && is_digit(s[q])) {
                t->kind = T_FLOAT;
                p->pos = q;
                while (p->pos < p->end && is_digit(s[p->pos])) p->pos++;
            }
        }
    } else if (c == '\'' || c == '"') {
        size_t i = p->pos + 1;
        while (i < p->end && s[i] != c) i += s[i] == '\\' ? 2 : 1;
        if (i >= p->end) return fail(p, p->line, "string not closed");
        p->pos = i + 1;
        t->kind = T_STRING;
    } else {
        static const char *const two[] = {"**", "//", "==", "!=", "<=", ">="};
        t->kind = T_OP;
        for (size_t k = 0; k < PW_ARRAY_LEN(two); k++)
            if (p->pos + 1 < p->end && s[p->pos] == two[k][0] && s[p->pos + 1] == two[k][1]) {
                memcpy(t->op, two[k], 2);
                p->pos += 2;
                t->len = 2;
                return PW_OK;
            }
        if (!strchr("+-*/%~<>=()[]{},.:|", c))
            return fail(p, p->line, "unexpected character '%c'", c);
        t->op[0] = c;
        p->pos++;
    }
    t->len = p->pos - t->start;
    return PW_OK;
}

static pw_status peek(parser *p, tok *t) {
    size_t save = p->pos;
    pw_status s = lex(p, t);
    p->pos = save;
    return s;
}

static bool tok_is_op(const tok *t, const char *op) { return t->kind == T_OP && strcmp(t->op, op) == 0; }
static bool tok_is_name(const parser *p, const tok *t, const char *name) {
    return t->kind == T_NAME && t->len == strlen(name) && memcmp(p->src + t->start, name, t->len) == 0;
}

/* Consumes the next token if it is the operator op. */
static bool accept_op(parser *p, const char *op) {
    tok t;
    if (peek(p, &t) != PW_OK || !tok_is_op(&t, op)) return false;
    p->pos = t.start + t.len;
    return true;
}

static bool accept_name(parser *p, const char *name) {
    tok t;
    if (peek(p, &t) != PW_OK || !tok_is_name(p, &t, name)) return false;
    p->pos = t.start + t.len;
    return true;
}

static pw_status expect_op(parser *p, const char *op) {
    if (accept_op(p, op)) return PW_OK;
    tok t;
    PW_TRY(peek(p, &t));
    return fail(p, p->line, "expected '%s', found '%.*s'", op, (int)(t.kind == T_END ? 3 : t.len),
                t.kind == T_END ? "end" : p->src + t.start);
}

static const char *intern(parser *p, const char *s, size_t n) {
    char *c = jinja_arena_alloc(p->t, n + 1);
    if (!c) return NULL;
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

static pw_status expect_name(parser *p, const char **name) {
    tok t;
    PW_TRY(lex(p, &t));
    if (t.kind != T_NAME)
        return fail(p, p->line, "expected a name, found '%.*s'", (int)(t.kind == T_END ? 3 : t.len),
                    t.kind == T_END ? "end" : p->src + t.start);
    *name = intern(p, p->src + t.start, t.len);
    return *name ? PW_OK : PW_ERR_OOM;
}

static node *new_node(parser *p, node_kind kind) {
    node *n = jinja_arena_alloc(p->t, sizeof *n);
    if (n) {
        n->kind = kind;
        n->line = p->line;
    }
    return n;
}

/* A growing array of nodes, copied into the arena when done. */
typedef struct nodes {
    node **items;
    int n;
    size_t cap;
} nodes;

static pw_status nodes_push(nodes *v, node *x) {
    if (v->n >= 1 << 20) return pw_error(PW_ERR_PARSE, "chat template: too many items");
    node **p = pw_host_grow(v->items, sizeof *p, &v->cap, (size_t)v->n + 1, 1 << 20);
    if (!p) return PW_ERR_OOM;
    v->items = p;
    v->items[v->n++] = x;
    return PW_OK;
}

static pw_status nodes_finish(parser *p, nodes *v, node ***out, int *n) {
    *out = NULL;
    *n = v->n;
    if (v->n) {
        *out = jinja_arena_alloc(p->t, (size_t)v->n * sizeof **out);
        if (*out) memcpy(*out, v->items, (size_t)v->n * sizeof **out);
    }
    pw_host_free(v->items);
    v->items = NULL;
    return v->n && !*out ? PW_ERR_OOM : PW_OK;
}

static pw_status add_lit(parser *p, jv v) {
    if (jv_failed(v)) return PW_ERR_OOM;
    if (p->t->n_lits == p->t->cap_lits) {
        size_t cap = (size_t)p->t->cap_lits;
        jv *l = pw_host_grow(p->t->lits, sizeof *l, &cap, (size_t)p->t->n_lits + 1, INT64_MAX);
        if (!l) {
            jv_release(v);
            return PW_ERR_OOM;
        }
        p->t->lits = l;
        p->t->cap_lits = (int64_t)cap;
    }
    p->t->lits[p->t->n_lits++] = v;
    return PW_OK;
}

static void put_utf8(pw_sb *b, uint32_t cp) {
    char u[4];
    int n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
        u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    pw_sb_append(b, u, (size_t)n);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string literal's value, with Python's escapes undone. */
static void unescape(pw_sb *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            pw_sb_append(b, s + i, 1);
            continue;
        }
        char c = s[++i];
        const char *rep = NULL;
        switch (c) {
        case 'n': rep = "\n"; break;
        case 't': rep = "\t"; break;
        case 'r': rep = "\r"; break;
        case '\\': rep = "\\"; break;
        case '\'': rep = "'"; break;
        case '"': rep = "\""; break;
        case 'a': rep = "\a"; break;
        case 'b': rep = "\b"; break;
        case 'f': rep = "\f"; break;
        case 'v': rep = "\v"; break;
        default: break;
        }
        if (c == '0') {
            pw_sb_append(b, "", 1);
            continue;
        }
        if (rep) {
            pw_sb_append(b, rep, 1);
            continue;
        }
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits && i + (size_t)digits < n) {
            uint32_t cp = 0;
            bool ok = true;
            for (int k = 1; k <= digits; k++) {
                int h = hexval(s[i + (size_t)k]);
                ok = ok && h >= 0;
                cp = cp * 16 + (uint32_t)(h < 0 ? 0 : h);
            }
            if (ok && cp <= 0x10FFFF) {
                put_utf8(b, cp);
                i += (size_t)digits;
                continue;
            }
        }
        if (c == '\n') continue; /* a line continuation */
        pw_sb_append(b, s + i - 1, 2);
    }
}

static pw_status parse_expr(parser *p, node **out);
static pw_status parse_or(parser *p, node **out);
static pw_status parse_unary(parser *p, bool with_filter, node **out);

#define ENTER(p)                                                                                   \
    do {                                                                                           \
        if (++(p)->depth > JINJA_MAX_PARSE_DEPTH)                                                  \
            return fail(p, (p)->line, "expression nested more than %d levels",                     \
                        JINJA_MAX_PARSE_DEPTH);                                                    \
    } while (0)
#define LEAVE(p) ((p)->depth--)

/* Positional and keyword arguments up to ')', the '(' already read. */
static pw_status parse_args(parser *p, node *call) {
    nodes pos = {0}, kwv = {0};
    const char **kwn = NULL;
    size_t kwn_cap = 0;
    int n_kw = 0;
    pw_status s = PW_OK;
    while (s == PW_OK && !accept_op(p, ")")) {
        if (pos.n + n_kw > 0 && (s = expect_op(p, ",")) != PW_OK) break;
        if (accept_op(p, ")")) break;
        tok a, b;
        size_t save = p->pos;
        if ((s = lex(p, &a)) != PW_OK) break;
        if ((s = peek(p, &b)) != PW_OK) break;
        if (a.kind == T_NAME && tok_is_op(&b, "=")) {
            p->pos = b.start + b.len;
            node *v;
            if ((s = parse_expr(p, &v)) != PW_OK) break;
            const char **k = pw_host_grow(kwn, sizeof *k, &kwn_cap, (size_t)n_kw + 1, 1 << 16);
            if (!k) {
                s = PW_ERR_OOM;
                break;
            }
            kwn = k;
            if (!(kwn[n_kw++] = intern(p, p->src + a.start, a.len))) s = PW_ERR_OOM;
            if (s == PW_OK) s = nodes_push(&kwv, v);
        } else {
            p->pos = save;
            if (n_kw) {
                s = fail(p, p->line, "positional argument after keyword argument");
                break;
            }
            node *v;
            if ((s = parse_expr(p, &v)) == PW_OK) s = nodes_push(&pos, v);
        }
    }
    if (s == PW_OK) s = nodes_finish(p, &pos, &call->kids, &call->n_kids);
    else pw_host_free(pos.items);
    int nk = 0;
    if (s == PW_OK) s = nodes_finish(p, &kwv, &call->defaults, &nk);
    else pw_host_free(kwv.items);
    if (s == PW_OK && n_kw) {
        call->names = jinja_arena_alloc(p->t, (size_t)n_kw * sizeof *call->names);
        if (!call->names) s = PW_ERR_OOM;
        else memcpy(call->names, kwn, (size_t)n_kw * sizeof *kwn);
        call->n_names = n_kw;
    }
    pw_host_free(kwn);
    return s;
}

static pw_status parse_primary(parser *p, node **out) {
    tok t;
    PW_TRY(lex(p, &t));
    const char *s = p->src + t.start;
    node *n = NULL;
    if (t.kind == T_NAME) {
        static const struct {
            const char *name;
            int type;
            bool b;
        } consts[] = {{"true", JV_BOOL, true},   {"True", JV_BOOL, true}, {"false", JV_BOOL, false},
                      {"False", JV_BOOL, false}, {"none", JV_NONE, 0},    {"None", JV_NONE, 0}};
        for (size_t k = 0; k < PW_ARRAY_LEN(consts); k++)
            if (tok_is_name(p, &t, consts[k].name)) {
                if (!(n = new_node(p, N_LIT))) return PW_ERR_OOM;
                n->lit = consts[k].type == JV_BOOL ? jv_bool(consts[k].b) : jv_none();
                *out = n;
                return PW_OK;
            }
        if (!(n = new_node(p, N_NAME)) || !(n->name = intern(p, s, t.len))) return PW_ERR_OOM;
    } else if (t.kind == T_STRING) {
        /* adjacent literals concatenate */
        pw_sb b = {0};
        pw_status st = PW_OK;
        for (;;) {
            unescape(&b, p->src + t.start + 1, t.len - 2);
            tok nx;
            if ((st = peek(p, &nx)) != PW_OK || nx.kind != T_STRING || (st = lex(p, &t)) != PW_OK) break;
        }
        if (st != PW_OK || b.status != PW_OK) {
            pw_sb_discard(&b);
            return st != PW_OK ? st : PW_ERR_OOM;
        }
        jv v = jv_str(b.data ? b.data : "", b.len, true);
        pw_sb_discard(&b);
        PW_TRY(add_lit(p, v));
        if (!(n = new_node(p, N_LIT))) return PW_ERR_OOM;
        n->lit = v;
    } else if (t.kind == T_INT || t.kind == T_FLOAT) {
        char num[64];
        size_t k = 0;
        for (size_t i = 0; i < t.len && k + 1 < sizeof num; i++)
            if (s[i] != '_') num[k++] = s[i];
        num[k] = '\0';
        if (!(n = new_node(p, N_LIT))) return PW_ERR_OOM;
        if (t.kind == T_INT) {
            char *e;
            long long v = strtoll(num, &e, 10);
            n->lit = jv_int(v);
        } else {
            n->lit = jv_float(strtod(num, NULL));
        }
    } else if (tok_is_op(&t, "(")) {
        ENTER(p);
        nodes items = {0};
        bool tuple = false;
        pw_status st = PW_OK;
        while (!accept_op(p, ")")) {
            if (items.n > 0) {
                if ((st = expect_op(p, ",")) != PW_OK) break;
                tuple = true;
                if (accept_op(p, ")")) break;
            }
            node *x;
            if ((st = parse_expr(p, &x)) != PW_OK || (st = nodes_push(&items, x)) != PW_OK) break;
        }
        LEAVE(p);
        if (st != PW_OK) {
            pw_host_free(items.items);
            return st;
        }
        if (items.n == 1 && !tuple) {
            *out = items.items[0];
            pw_host_free(items.items);
            return PW_OK;
        }
        if (!(n = new_node(p, N_TUPLE))) {
            pw_host_free(items.items);
            return PW_ERR_OOM;
        }
        PW_TRY(nodes_finish(p, &items, &n->kids, &n->n_kids));
    } else if (tok_is_op(&t, "[") || tok_is_op(&t, "{")) {
        bool dict = t.op[0] == '{';
        const char *close = dict ? "}" : "]";
        ENTER(p);
        nodes items = {0};
        pw_status st = PW_OK;
        while (!accept_op(p, close)) {
            if (items.n > 0) {
                if ((st = expect_op(p, ",")) != PW_OK) break;
                if (accept_op(p, close)) break;
            }
            node *x;
            if ((st = parse_expr(p, &x)) != PW_OK || (st = nodes_push(&items, x)) != PW_OK) break;
            if (dict) {
                if ((st = expect_op(p, ":")) != PW_OK || (st = parse_expr(p, &x)) != PW_OK ||
                    (st = nodes_push(&items, x)) != PW_OK)
                    break;
            }
        }
        LEAVE(p);
        if (st != PW_OK || !(n = new_node(p, dict ? N_DICT : N_LIST))) {
            pw_host_free(items.items);
            return st != PW_OK ? st : PW_ERR_OOM;
        }
        PW_TRY(nodes_finish(p, &items, &n->kids, &n->n_kids));
    } else {
        return fail(p, p->line, "unexpected '%.*s'", (int)(t.kind == T_END ? 3 : t.len),
                    t.kind == T_END ? "end" : s);
    }
    *out = n;
    return PW_OK;
}

static pw_status parse_postfix(parser *p, node **io) {
    for (;;) {
        tok t;
        PW_TRY(peek(p, &t));
        if (tok_is_op(&t, ".")) {
            p->pos = t.start + 1;
            tok nm;
            PW_TRY(lex(p, &nm));
            node *n = new_node(p, N_ATTR);
            if (!n) return PW_ERR_OOM;
            n->a = *io;
            if (nm.kind == T_NAME) {
                if (!(n->name = intern(p, p->src + nm.start, nm.len))) return PW_ERR_OOM;
            } else if (nm.kind == T_INT) {
                n->kind = N_INDEX; /* x.0 is x[0] */
                node *k = new_node(p, N_LIT);
                if (!k) return PW_ERR_OOM;
                k->lit = jv_int(strtoll(p->src + nm.start, NULL, 10));
                n->b = k;
            } else {
                return fail(p, p->line, "expected an attribute name after '.'");
            }
            *io = n;
        } else if (tok_is_op(&t, "[")) {
            p->pos = t.start + 1;
            ENTER(p);
            node *parts[3] = {NULL, NULL, NULL};
            int k = 0;
            bool slice = false;
            pw_status st = PW_OK;
            for (;;) {
                tok q;
                if ((st = peek(p, &q)) != PW_OK) break;
                if (tok_is_op(&q, ":")) {
                    p->pos = q.start + 1;
                    slice = true;
                    if (++k > 2) {
                        st = fail(p, p->line, "bad slice");
                        break;
                    }
                    continue;
                }
                if (tok_is_op(&q, "]")) {
                    p->pos = q.start + 1;
                    break;
                }
                if (parts[k]) {
                    st = fail(p, p->line, "expected ']'");
                    break;
                }
                if ((st = parse_expr(p, &parts[k])) != PW_OK) break;
            }
            LEAVE(p);
            PW_TRY(st);
            node *n = new_node(p, slice ? N_SLICE : N_INDEX);
            if (!n) return PW_ERR_OOM;
            n->a = *io;
            if (slice) {
                n->b = parts[0];
                n->c = parts[1];
                n->d = parts[2];
            } else {
                if (!parts[0]) return fail(p, p->line, "empty subscript");
                n->b = parts[0];
            }
            *io = n;
        } else if (tok_is_op(&t, "(")) {
            p->pos = t.start + 1;
            node *n = new_node(p, N_CALL);
            if (!n) return PW_ERR_OOM;
            n->a = *io;
            ENTER(p);
            pw_status st = parse_args(p, n);
            LEAVE(p);
            PW_TRY(st);
            *io = n;
        } else {
            return PW_OK;
        }
    }
}

/* Filters ("|name(args)") and tests ("is [not] name args") after a value. */
static pw_status parse_filters(parser *p, node **io) {
    for (;;) {
        tok t;
        PW_TRY(peek(p, &t));
        if (tok_is_op(&t, "|")) {
            p->pos = t.start + 1;
            node *n = new_node(p, N_FILTER);
            if (!n) return PW_ERR_OOM;
            PW_TRY(expect_name(p, &n->name));
            /* dotted filter names do not exist in the builtins; keep it simple */
            if (accept_op(p, "(")) {
                ENTER(p);
                pw_status st = parse_args(p, n);
                LEAVE(p);
                PW_TRY(st);
            }
            n->a = *io;
            *io = n;
        } else if (tok_is_name(p, &t, "is")) {
            p->pos = t.start + t.len;
            node *n = new_node(p, N_TEST);
            if (!n) return PW_ERR_OOM;
            if (accept_name(p, "not")) n->op = 1;
            PW_TRY(expect_name(p, &n->name));
            tok q;
            PW_TRY(peek(p, &q));
            if (tok_is_op(&q, "(")) {
                p->pos = q.start + 1;
                ENTER(p);
                pw_status st = parse_args(p, n);
                LEAVE(p);
                PW_TRY(st);
            } else if ((q.kind == T_NAME || q.kind == T_STRING || q.kind == T_INT || q.kind == T_FLOAT ||
                        tok_is_op(&q, "[") || tok_is_op(&q, "{")) &&
                       !tok_is_name(p, &q, "else") && !tok_is_name(p, &q, "or") &&
                       !tok_is_name(p, &q, "and") && !tok_is_name(p, &q, "if") &&
                       !tok_is_name(p, &q, "in") && !tok_is_name(p, &q, "not") &&
                       !tok_is_name(p, &q, "is")) {
                /* one argument without parentheses: "is divisibleby 3" */
                node *arg;
                PW_TRY(parse_primary(p, &arg));
                PW_TRY(parse_postfix(p, &arg));
                n->kids = jinja_arena_alloc(p->t, sizeof *n->kids);
                if (!n->kids) return PW_ERR_OOM;
                n->kids[0] = arg;
                n->n_kids = 1;
            }
            n->a = *io;
            *io = n;
        } else {
            return PW_OK;
        }
    }
}

static pw_status binary(parser *p, int op, node *a, node *b, node **out) {
    node *n = new_node(p, N_BINARY);
    if (!n) return PW_ERR_OOM;
    n->op = op;
    n->a = a;
    n->b = b;
    *out = n;
    return PW_OK;
}

static pw_status parse_unary(parser *p, bool with_filter, node **out) {
    ENTER(p);
    tok t;
    pw_status s = peek(p, &t);
    if (s == PW_OK && (tok_is_op(&t, "-") || tok_is_op(&t, "+"))) {
        p->pos = t.start + 1;
        node *n = new_node(p, N_UNARY), *a = NULL;
        if (!n) s = PW_ERR_OOM;
        if (s == PW_OK) s = parse_unary(p, false, &a);
        if (s == PW_OK) {
            n->op = t.op[0] == '-' ? OP_NEG : OP_POS;
            n->a = a;
            *out = n;
        }
    } else if (s == PW_OK) {
        s = parse_primary(p, out);
        if (s == PW_OK) s = parse_postfix(p, out);
    }
    if (s == PW_OK && with_filter) s = parse_filters(p, out);
    LEAVE(p);
    return s;
}

static pw_status parse_pow(parser *p, node **out) {
    PW_TRY(parse_unary(p, true, out));
    while (accept_op(p, "**")) {
        node *b;
        PW_TRY(parse_unary(p, true, &b));
        PW_TRY(binary(p, OP_POW, *out, b, out));
    }
    return PW_OK;
}

static pw_status parse_math2(parser *p, node **out) {
    PW_TRY(parse_pow(p, out));
    for (;;) {
        int op = accept_op(p, "*") ? OP_MUL : accept_op(p, "//") ? OP_FLOORDIV
               : accept_op(p, "/") ? OP_DIV : accept_op(p, "%") ? OP_MOD : 0;
        if (!op) return PW_OK;
        node *b;
        PW_TRY(parse_pow(p, &b));
        PW_TRY(binary(p, op, *out, b, out));
    }
}

static pw_status parse_concat(parser *p, node **out) {
    PW_TRY(parse_math2(p, out));
    while (accept_op(p, "~")) {
        node *b;
        PW_TRY(parse_math2(p, &b));
        PW_TRY(binary(p, OP_CONCAT, *out, b, out));
    }
    return PW_OK;
}

static pw_status parse_math1(parser *p, node **out) {
    PW_TRY(parse_concat(p, out));
    for (;;) {
        int op = accept_op(p, "+") ? OP_ADD : accept_op(p, "-") ? OP_SUB : 0;
        if (!op) return PW_OK;
        node *b;
        PW_TRY(parse_concat(p, &b));
        PW_TRY(binary(p, op, *out, b, out));
    }
}

static pw_status parse_compare(parser *p, node **out) {
    PW_TRY(parse_math1(p, out));
    node *last = NULL; /* the previous comparison of a chain */
    for (;;) {
        int op = accept_op(p, "==") ? OP_EQ : accept_op(p, "!=") ? OP_NE : accept_op(p, "<=") ? OP_LE
               : accept_op(p, ">=") ? OP_GE : accept_op(p, "<") ? OP_LT : accept_op(p, ">") ? OP_GT
               : accept_name(p, "in") ? OP_IN : 0;
        if (!op) {
            tok a, b;
            size_t save = p->pos;
            PW_TRY(lex(p, &a));
            PW_TRY(peek(p, &b));
            if (tok_is_name(p, &a, "not") && tok_is_name(p, &b, "in")) {
                p->pos = b.start + b.len;
                op = OP_NOT_IN;
            } else {
                p->pos = save;
                return PW_OK;
            }
        }
        node *b;
        PW_TRY(parse_math1(p, &b));
        if (!last) {
            PW_TRY(binary(p, op, *out, b, out));
            last = *out;
        } else {
            /* a < b < c is a < b and b < c */
            node *cmp;
            PW_TRY(binary(p, op, last->b, b, &cmp));
            PW_TRY(binary(p, OP_AND, *out, cmp, out));
            last = cmp;
        }
    }
}

static pw_status parse_not(parser *p, node **out) {
    if (accept_name(p, "not")) {
        ENTER(p);
        node *n = new_node(p, N_UNARY), *a = NULL;
        pw_status s = n ? parse_not(p, &a) : PW_ERR_OOM;
        LEAVE(p);
        PW_TRY(s);
        n->op = OP_NOT;
        n->a = a;
        *out = n;
        return PW_OK;
    }
    return parse_compare(p, out);
}

static pw_status parse_and(parser *p, node **out) {
    PW_TRY(parse_not(p, out));
    while (accept_name(p, "and")) {
        node *b;
        PW_TRY(parse_not(p, &b));
        PW_TRY(binary(p, OP_AND, *out, b, out));
    }
    return PW_OK;
}

static pw_status parse_or(parser *p, node **out) {
    PW_TRY(parse_and(p, out));
    while (accept_name(p, "or")) {
        node *b;
        PW_TRY(parse_and(p, &b));
        PW_TRY(binary(p, OP_OR, *out, b, out));
    }
    return PW_OK;
}

/* or-expressions with "x if c else y" */
static pw_status parse_expr(parser *p, node **out) {
    ENTER(p);
    pw_status s = parse_or(p, out);
    while (s == PW_OK && accept_name(p, "if")) {
        node *n = new_node(p, N_COND);
        if (!n) {
            s = PW_ERR_OOM;
            break;
        }
        n->a = *out;
        if ((s = parse_or(p, &n->b)) != PW_OK) break;
        if (accept_name(p, "else") && (s = parse_expr(p, &n->c)) != PW_OK) break;
        *out = n;
    }
    LEAVE(p);
    return s;
}

/* An expression, or a tuple of them without parentheses ("a, b"). */
static pw_status parse_tuple(parser *p, node **out) {
    PW_TRY(parse_expr(p, out));
    tok t;
    PW_TRY(peek(p, &t));
    if (!tok_is_op(&t, ",")) return PW_OK;
    nodes items = {0};
    pw_status s = nodes_push(&items, *out);
    while (s == PW_OK && accept_op(p, ",")) {
        if ((s = peek(p, &t)) != PW_OK || t.kind == T_END) break;
        node *x;
        if ((s = parse_expr(p, &x)) == PW_OK) s = nodes_push(&items, x);
    }
    node *n = s == PW_OK ? new_node(p, N_TUPLE) : NULL;
    if (!n) {
        pw_host_free(items.items);
        return s != PW_OK ? s : PW_ERR_OOM;
    }
    PW_TRY(nodes_finish(p, &items, &n->kids, &n->n_kids));
    *out = n;
    return PW_OK;
}

static pw_status expect_end(parser *p) {
    tok t;
    PW_TRY(peek(p, &t));
    if (t.kind != T_END)
        return fail(p, p->line, "unexpected '%.*s' at the end of the tag", (int)t.len, p->src + t.start);
    return PW_OK;
}

/* ---- statements ------------------------------------------------------------------ */

/* Points the lexer at segment i's inside. */
static void enter_seg(parser *p, const seg *s) {
    p->pos = s->start;
    p->end = s->start + s->len;
    p->line = s->line;
}

/* The first word of a block tag, the lexer left after it. */
static pw_status block_word(parser *p, const seg *s, const char **word, size_t *n) {
    enter_seg(p, s);
    tok t;
    PW_TRY(lex(p, &t));
    if (t.kind != T_NAME) return fail(p, s->line, "expected a statement name");
    *word = p->src + t.start;
    *n = t.len;
    return PW_OK;
}

static bool word_is(const char *w, size_t n, const char *name) {
    return n == strlen(name) && memcmp(w, name, n) == 0;
}

static pw_status parse_body(parser *p, const char *const *stops, nodes *body, const char **stop_word,
                            size_t *stop_len);

/* parse_body into a node array, ending at one of stops. */
static pw_status body_into(parser *p, const char *const *stops, node ***kids, int *n_kids,
                           const char **stop, size_t *stop_len) {
    nodes body = {0};
    pw_status s = parse_body(p, stops, &body, stop, stop_len);
    if (s != PW_OK) {
        pw_host_free(body.items);
        return s;
    }
    return nodes_finish(p, &body, kids, n_kids);
}

static pw_status parse_if(parser *p, node *n) {
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    PW_TRY(parse_tuple(p, &n->a));
    PW_TRY(expect_end(p));
    const char *w = NULL;
    size_t wn = 0;
    PW_TRY(body_into(p, stops, &n->kids, &n->n_kids, &w, &wn));
    if (word_is(w, wn, "elif")) {
        node *e = new_node(p, N_IF);
        if (!e) return PW_ERR_OOM;
        n->kids2 = jinja_arena_alloc(p->t, sizeof *n->kids2);
        if (!n->kids2) return PW_ERR_OOM;
        n->kids2[0] = e;
        n->n_kids2 = 1;
        return parse_if(p, e);
    }
    if (word_is(w, wn, "else")) {
        static const char *const end[] = {"endif", NULL};
        PW_TRY(expect_end(p));
        PW_TRY(body_into(p, end, &n->kids2, &n->n_kids2, &w, &wn));
    }
    return expect_end(p);
}

static pw_status parse_target_names(parser *p, node *n) {
    const char *names[16];
    int k = 0;
    bool paren = accept_op(p, "(");
    do {
        if (k == 16) return fail(p, p->line, "too many loop variables");
        PW_TRY(expect_name(p, &names[k]));
        k++;
    } while (accept_op(p, ","));
    if (paren) PW_TRY(expect_op(p, ")"));
    n->names = jinja_arena_alloc(p->t, (size_t)k * sizeof *n->names);
    if (!n->names) return PW_ERR_OOM;
    memcpy(n->names, names, (size_t)k * sizeof *names);
    n->n_names = k;
    return PW_OK;
}

static pw_status parse_for(parser *p, node *n) {
    PW_TRY(parse_target_names(p, n));
    if (!accept_name(p, "in")) return fail(p, p->line, "expected 'in' in a for loop");
    /* the iterable: an or-expression (a trailing "if" is the loop's filter) */
    ENTER(p);
    pw_status st = parse_or(p, &n->a);
    LEAVE(p);
    PW_TRY(st);
    {
        tok t;
        PW_TRY(peek(p, &t));
        if (tok_is_op(&t, ",")) {
            /* a tuple without parentheses */
            nodes items = {0};
            pw_status s = nodes_push(&items, n->a);
            while (s == PW_OK && accept_op(p, ",")) {
                node *x;
                if ((s = parse_or(p, &x)) == PW_OK) s = nodes_push(&items, x);
            }
            node *tu = s == PW_OK ? new_node(p, N_TUPLE) : NULL;
            if (!tu) {
                pw_host_free(items.items);
                return s != PW_OK ? s : PW_ERR_OOM;
            }
            PW_TRY(nodes_finish(p, &items, &tu->kids, &tu->n_kids));
            n->a = tu;
        }
    }
    if (accept_name(p, "if")) PW_TRY(parse_expr(p, &n->b));
    if (accept_name(p, "recursive")) return fail(p, p->line, "recursive loops are not supported");
    PW_TRY(expect_end(p));
    static const char *const stops[] = {"else", "endfor", NULL};
    const char *w = NULL;
    size_t wn = 0;
    PW_TRY(body_into(p, stops, &n->kids, &n->n_kids, &w, &wn));
    if (word_is(w, wn, "else")) {
        static const char *const end[] = {"endfor", NULL};
        PW_TRY(expect_end(p));
        PW_TRY(body_into(p, end, &n->kids2, &n->n_kids2, &w, &wn));
    }
    return expect_end(p);
}

static pw_status parse_set(parser *p, node *n) {
    /* target: name, name.attr, or names */
    const char *first;
    PW_TRY(expect_name(p, &first));
    node *target = new_node(p, N_NAME);
    if (!target) return PW_ERR_OOM;
    target->name = first;
    if (accept_op(p, ".")) {
        node *a = new_node(p, N_ATTR);
        if (!a) return PW_ERR_OOM;
        a->a = target;
        PW_TRY(expect_name(p, &a->name));
        target = a;
    } else {
        tok t;
        PW_TRY(peek(p, &t));
        if (tok_is_op(&t, ",")) {
            node *tu = new_node(p, N_TUPLE);
            if (!tu) return PW_ERR_OOM;
            nodes items = {0};
            pw_status s = nodes_push(&items, target);
            while (s == PW_OK && accept_op(p, ",")) {
                node *x = new_node(p, N_NAME);
                if (!x) s = PW_ERR_OOM;
                if (s == PW_OK) s = expect_name(p, &x->name);
                if (s == PW_OK) s = nodes_push(&items, x);
            }
            if (s != PW_OK) {
                pw_host_free(items.items);
                return s;
            }
            PW_TRY(nodes_finish(p, &items, &tu->kids, &tu->n_kids));
            target = tu;
        }
    }
    n->a = target;
    if (accept_op(p, "=")) {
        PW_TRY(parse_tuple(p, &n->b));
        return expect_end(p);
    }
    /* {% set x %}...{% endset %}, optionally with filters */
    if (target->kind != N_NAME) return fail(p, p->line, "a block set assigns one name");
    tok t;
    PW_TRY(peek(p, &t));
    if (tok_is_op(&t, "|")) {
        node *chain = NULL;
        PW_TRY(parse_filters(p, &chain));
        n->c = chain;
    }
    PW_TRY(expect_end(p));
    static const char *const stops[] = {"endset", NULL};
    const char *w = NULL;
    size_t wn = 0;
    PW_TRY(body_into(p, stops, &n->kids, &n->n_kids, &w, &wn));
    n->d = n->a; /* marks a block set */
    return expect_end(p);
}

static pw_status parse_macro(parser *p, node *n) {
    PW_TRY(expect_name(p, &n->name));
    PW_TRY(expect_op(p, "("));
    const char *names[64];
    node *defs[64];
    int k = 0;
    while (!accept_op(p, ")")) {
        if (k > 0) PW_TRY(expect_op(p, ","));
        if (accept_op(p, ")")) break;
        if (k == 64) return fail(p, p->line, "a macro takes at most 64 parameters");
        PW_TRY(expect_name(p, &names[k]));
        defs[k] = NULL;
        if (accept_op(p, "=")) PW_TRY(parse_expr(p, &defs[k]));
        k++;
    }
    PW_TRY(expect_end(p));
    if (k) {
        n->names = jinja_arena_alloc(p->t, (size_t)k * sizeof *n->names);
        n->defaults = jinja_arena_alloc(p->t, (size_t)k * sizeof *n->defaults);
        if (!n->names || !n->defaults) return PW_ERR_OOM;
        memcpy(n->names, names, (size_t)k * sizeof *names);
        memcpy(n->defaults, defs, (size_t)k * sizeof *defs);
    }
    n->n_names = k;
    static const char *const stops[] = {"endmacro", NULL};
    const char *w = NULL;
    size_t wn = 0;
    PW_TRY(body_into(p, stops, &n->kids, &n->n_kids, &w, &wn));
    return expect_end(p);
}

static pw_status parse_statement(parser *p, const seg *s, node **out) {
    const char *w = NULL;
    size_t wn = 0;
    PW_TRY(block_word(p, s, &w, &wn));
    node_kind kind = word_is(w, wn, "if") ? N_IF : word_is(w, wn, "for") ? N_FOR
                   : word_is(w, wn, "set") ? N_SET : word_is(w, wn, "macro") ? N_MACRO
                   : word_is(w, wn, "filter") ? N_FILTER_BLOCK : word_is(w, wn, "break") ? N_BREAK
                   : word_is(w, wn, "continue") ? N_CONTINUE : word_is(w, wn, "generation") ? N_BLOCK
                   : N_TEXT;
    if (kind == N_TEXT)
        return fail(p, s->line, "unsupported statement '%.*s'", (int)wn, w);
    node *n = new_node(p, kind);
    if (!n) return PW_ERR_OOM;
    *out = n;
    ENTER(p);
    pw_status st = PW_OK;
    switch (kind) {
    case N_IF: st = parse_if(p, n); break;
    case N_FOR: st = parse_for(p, n); break;
    case N_SET: st = parse_set(p, n); break;
    case N_MACRO: st = parse_macro(p, n); break;
    case N_BREAK:
    case N_CONTINUE: st = expect_end(p); break;
    case N_BLOCK: {
        static const char *const stops[] = {"endgeneration", NULL};
        const char *e = NULL;
        size_t en = 0;
        st = expect_end(p);
        if (st == PW_OK) st = body_into(p, stops, &n->kids, &n->n_kids, &e, &en);
        if (st == PW_OK) st = expect_end(p);
        break;
    }
    case N_FILTER_BLOCK: {
        /* "filter name(args) | name2": a chain applied to the body */
        node *chain = new_node(p, N_FILTER);
        if (!chain) {
            st = PW_ERR_OOM;
            break;
        }
        st = expect_name(p, &chain->name);
        if (st == PW_OK && accept_op(p, "(")) st = parse_args(p, chain);
        if (st == PW_OK) st = parse_filters(p, &chain);
        if (st == PW_OK) st = expect_end(p);
        n->a = chain;
        static const char *const stops[] = {"endfilter", NULL};
        const char *e = NULL;
        size_t en = 0;
        if (st == PW_OK) st = body_into(p, stops, &n->kids, &n->n_kids, &e, &en);
        if (st == PW_OK) st = expect_end(p);
        break;
    }
    default: break;
    }
    LEAVE(p);
    return st;
}

/* Statements until a block tag whose word is in stops (NULL-terminated;
 * NULL stops: the end of the template). The lexer is left after the stop
 * word. */
static pw_status parse_body(parser *p, const char *const *stops, nodes *body, const char **stop_word,
                            size_t *stop_len) {
    int open_line = p->at > 0 ? p->segs[p->at - 1].line : 1;
    while (p->at < p->n_segs) {
        const seg *s = &p->segs[p->at++];
        node *n = NULL;
        if (s->kind == SEG_TEXT) {
            jv v = jv_str(p->src + s->start, s->len, true);
            PW_TRY(add_lit(p, v));
            if (!(n = new_node(p, N_TEXT))) return PW_ERR_OOM;
            n->lit = v;
        } else if (s->kind == SEG_VAR) {
            enter_seg(p, s);
            if (!(n = new_node(p, N_OUTPUT))) return PW_ERR_OOM;
            PW_TRY(parse_tuple(p, &n->a));
            PW_TRY(expect_end(p));
        } else {
            const char *w = NULL;
            size_t wn = 0;
            PW_TRY(block_word(p, s, &w, &wn));
            for (int k = 0; stops && stops[k]; k++)
                if (word_is(w, wn, stops[k])) {
                    *stop_word = w;
                    *stop_len = wn;
                    return PW_OK;
                }
            if (wn > 3 && (memcmp(w, "end", 3) == 0 || word_is(w, wn, "else") || word_is(w, wn, "elif")))
                return fail(p, s->line, "unexpected '%.*s'", (int)wn, w);
            PW_TRY(parse_statement(p, s, &n));
        }
        PW_TRY(nodes_push(body, n));
    }
    if (stops) {
        int last = 0;
        while (stops[last + 1]) last++;
        return fail(p, open_line, "'%s' missing at the end of the template", stops[last]);
    }
    return PW_OK;
}

pw_status pw_jinja_parse(const char *src, size_t len, pw_jinja_template **out) {
    *out = NULL;
    if (!src && len) return pw_error(PW_ERR_INVALID_ARG, "jinja: no template text");
    pw_jinja_template *t = pw_host_calloc(1, sizeof *t);
    if (!t) return PW_ERR_OOM;
    /* jinja2 reads "\r\n" and "\r" as "\n", and drops one final newline */
    char *norm = pw_host_alloc(len + 1);
    if (!norm) {
        pw_host_free(t);
        return PW_ERR_OOM;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            norm[n++] = src[i];
        }
    }
    if (n > 0 && norm[n - 1] == '\n') n--;
    norm[n] = '\0';
    parser p = {.t = t, .src = norm, .len = n, .line_count = 1};
    pw_status s = split(&p);
    nodes body = {0};
    if (s == PW_OK) s = parse_body(&p, NULL, &body, NULL, NULL);
    node *root = NULL;
    if (s == PW_OK) {
        root = new_node(&p, N_BLOCK);
        if (!root) s = PW_ERR_OOM;
    }
    if (s == PW_OK) s = nodes_finish(&p, &body, &root->kids, &root->n_kids);
    else pw_host_free(body.items);
    pw_host_free(p.segs);
    pw_host_free(norm);
    if (s != PW_OK) {
        pw_jinja_template_free(t);
        return s == PW_ERR_OOM ? pw_error(PW_ERR_OOM, "chat template: out of memory parsing") : s;
    }
    t->root = root;
    *out = t;
    return PW_OK;
}
