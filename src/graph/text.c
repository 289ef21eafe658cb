/* The graph text format (docs/graph-format.md): parser and canonical printer. */
#include "graph_internal.h"


#include <ctype.h>
#include <errno.h>
#include <math.h>

/* Deepest nesting of lists/tuples in one argument. */
#define PW_IR_MAX_NESTING 32
/* A model's whole forward pass is tens of KB of text (Gemma 3: 26 KB), so
 * a graph file larger than this is not a graph (docs/graph-format.md). */
#define PW_IR_MAX_FILE_BYTES ((size_t)64 << 20)

/* ---- printing -------------------------------------------------------------------------- */

void pw_ir_format_float(double f, char *buf, size_t cap) {
    if (isnan(f)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, f);
        if (strtod(buf, NULL) == f) break;
    }
    if (!strpbrk(buf, ".e")) {
        size_t n = strlen(buf);
        if (n + 3 <= cap) memcpy(buf + n, ".0", 3);
    }
}

static void print_string(pw_sb *sb, const char *s) {
    pw_sb_puts(sb, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '"': pw_sb_puts(sb, "\\\""); break;
        case '\\': pw_sb_puts(sb, "\\\\"); break;
        case '\n': pw_sb_puts(sb, "\\n"); break;
        case '\t': pw_sb_puts(sb, "\\t"); break;
        case '\r': pw_sb_puts(sb, "\\r"); break;
        default:
            if (c < 0x20 || c == 0x7f) pw_sb_printf(sb, "\\x%02x", c);
            else pw_sb_append(sb, s, 1);
        }
    }
    pw_sb_puts(sb, "\"");
}

void pw_ir_print_arg(pw_sb *sb, const pw_ir *g, const pw_ir_arg *a) {
    char num[64];
    switch (a->kind) {
    case PW_IR_ARG_NODE:
        if (a->as.node >= 0 && a->as.node < g->nnodes) pw_sb_printf(sb, "%%%s", g->nodes[a->as.node].name);
        else pw_sb_printf(sb, "%%<bad node %d>", a->as.node);
        break;
    case PW_IR_ARG_INT: pw_sb_printf(sb, "%lld", (long long)a->as.i); break;
    case PW_IR_ARG_FLOAT:
        pw_ir_format_float(a->as.f, num, sizeof num);
        pw_sb_puts(sb, num);
        break;
    case PW_IR_ARG_STRING: print_string(sb, a->as.s); break;
    case PW_IR_ARG_BOOL: pw_sb_puts(sb, a->as.b ? "true" : "false"); break;
    case PW_IR_ARG_NONE: pw_sb_puts(sb, "none"); break;
    case PW_IR_ARG_LIST:
    case PW_IR_ARG_TUPLE: {
        bool list = a->kind == PW_IR_ARG_LIST;
        pw_sb_puts(sb, list ? "[" : "(");
        for (int i = 0; i < a->as.seq.n; i++) {
            if (i) pw_sb_puts(sb, ", ");
            pw_ir_print_arg(sb, g, &a->as.seq.items[i]);
        }
        if (!list && a->as.seq.n == 1) pw_sb_puts(sb, ",");
        pw_sb_puts(sb, list ? "]" : ")");
        break;
    }
    }
}

static void print_comments(pw_sb *sb, const pw_strvec *c, const char *indent) {
    for (int i = 0; i < c->n; i++) {
        if (c->items[i]) pw_sb_printf(sb, "%s#%s\n", indent, c->items[i]);
        else pw_sb_puts(sb, "\n");
    }
}

static void print_type(pw_sb *sb, const pw_ir_type *t) {
    if (t->kind == PW_IR_TYPE_SYMINT) {
        pw_sb_puts(sb, " : sym");
    } else if (t->kind == PW_IR_TYPE_TENSOR) {
        pw_sb_printf(sb, " : %s[", pw_dtype_name(t->dtype));
        for (int i = 0; i < t->ndim; i++) {
            if (i) pw_sb_puts(sb, ", ");
            if (t->dims[i] == PW_IR_DIM_TOKENS) pw_sb_puts(sb, "s0");
            else pw_sb_printf(sb, "%lld", (long long)t->dims[i]);
        }
        pw_sb_puts(sb, "]");
    }
}

static void print_call_args(pw_sb *sb, const pw_ir *g, const pw_ir_node *n) {
    pw_sb_puts(sb, "(");
    for (int i = 0; i < n->nargs; i++) {
        if (i) pw_sb_puts(sb, ", ");
        pw_ir_print_arg(sb, g, &n->args[i]);
    }
    for (int i = 0; i < n->nkwargs; i++) {
        if (i || n->nargs) pw_sb_puts(sb, ", ");
        pw_sb_printf(sb, "%s=", n->kwargs[i].name);
        pw_ir_print_arg(sb, g, &n->kwargs[i].value);
    }
    pw_sb_puts(sb, ")");
}

static void print_graph(pw_sb *sb, const pw_ir *g, bool first) {
    if (!first && (g->header_comments.n == 0 || g->header_comments.items[0] != NULL))
        pw_sb_puts(sb, "\n");
    print_comments(sb, &g->header_comments, "");
    pw_sb_printf(sb, "graph %s%s:", g->name, g->splitting ? " [splitting]" : "");
    if (g->header_trailing_comment) pw_sb_printf(sb, "  #%s", g->header_trailing_comment);
    pw_sb_puts(sb, "\n");
    for (int i = 0; i < g->nnodes; i++) {
        const pw_ir_node *n = &g->nodes[i];
        print_comments(sb, &n->comments, "    ");
        if (n->kind == PW_IR_OUTPUT) {
            pw_sb_puts(sb, "    return ");
            if (n->nargs > 0) pw_ir_print_arg(sb, g, &n->args[0]);
            else pw_sb_puts(sb, "none");
        } else {
            pw_sb_printf(sb, "    %%%s", n->name);
            print_type(sb, &n->type);
            pw_sb_printf(sb, " = %s", pw_ir_node_kind_name(n->kind));
            if (n->kind == PW_IR_CALL_FUNCTION || n->kind == PW_IR_CALL_MODULE)
                pw_sb_printf(sb, " %s", n->target);
            if (n->kind != PW_IR_PLACEHOLDER) print_call_args(sb, g, n);
        }
        if (n->trailing_comment) pw_sb_printf(sb, "  #%s", n->trailing_comment);
        pw_sb_puts(sb, "\n");
    }
    print_comments(sb, &g->pending_comments, "    ");
}

pw_status pw_ir_print(const pw_ir *g, char **out) {
    pw_sb sb = {0};
    print_graph(&sb, g, true);
    for (int i = 0; i < g->nsubs; i++) print_graph(&sb, g->subs[i], false);
    print_comments(&sb, &g->tail_comments, "");
    return pw_sb_finish(&sb, out);
}

/* ---- parsing ---------------------------------------------------------------------------- */

typedef struct parser {
    const char *src;
    size_t len, pos;
    int line;
    size_t line_start;
    pw_ir *root, *cur;
    pw_strvec pending; /* comments and blank lines waiting for what follows */
} parser;

#define PERR(p, ...) parse_error(p, __VA_ARGS__)

static pw_status parse_error(parser *p, const char *fmt, ...) PW_PRINTF(2, 3);
static pw_status parse_error(parser *p, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pw_error(PW_ERR_PARSE, "line %d:%d: %s", p->line, (int)(p->pos - p->line_start) + 1, msg);
}

static int peek(const parser *p) { return p->pos < p->len ? (unsigned char)p->src[p->pos] : -1; }

static void skip_ws(parser *p) {
    while (p->pos < p->len && (p->src[p->pos] == ' ' || p->src[p->pos] == '\t' || p->src[p->pos] == '\r'))
        p->pos++;
}

static bool is_ident_start(int c) { return c >= 0 && (isalpha(c) || c == '_'); }
static bool is_ident_char(int c) { return c >= 0 && (isalnum(c) || c == '_'); }

/* Reads an identifier (with dots if dotted) into buf. */
static pw_status read_name(parser *p, bool dotted, char *buf, const char *what) {
    size_t start = p->pos;
    if (!is_ident_start(peek(p))) return PERR(p, "expected %s", what);
    for (;;) {
        while (is_ident_char(peek(p))) p->pos++;
        if (dotted && peek(p) == '.' && p->pos + 1 < p->len &&
            is_ident_start((unsigned char)p->src[p->pos + 1])) {
            p->pos++;
            continue;
        }
        break;
    }
    size_t n = p->pos - start;
    if (n >= PW_IR_MAX_NAME) {
        p->pos = start;
        return PERR(p, "%s is longer than %d characters", what, PW_IR_MAX_NAME - 1);
    }
    memcpy(buf, p->src + start, n);
    buf[n] = 0;
    return PW_OK;
}

static bool accept(parser *p, char c) {
    skip_ws(p);
    if (peek(p) == (unsigned char)c) {
        p->pos++;
        return true;
    }
    return false;
}

static pw_status expect(parser *p, char c, const char *context) {
    if (accept(p, c)) return PW_OK;
    return PERR(p, "expected '%c' %s", c, context);
}

/* Is `word` next (followed by a non-identifier character)? Consumes it if so. */
static bool accept_word(parser *p, const char *word) {
    skip_ws(p);
    size_t n = strlen(word);
    if (p->len - p->pos >= n && memcmp(p->src + p->pos, word, n) == 0 &&
        !is_ident_char(p->pos + n < p->len ? (unsigned char)p->src[p->pos + n] : -1)) {
        p->pos += n;
        return true;
    }
    return false;
}

/* A reference to a name not defined yet: defined later in this graph, or never? */
static pw_status unresolved_ref(parser *p, const char *name, size_t at) {
    size_t nlen = strlen(name);
    int line = p->line;
    size_t i = p->pos;
    while (i < p->len && p->src[i] != '\n') i++;
    while (i < p->len) {
        i++; /* past '\n' */
        line++;
        size_t j = i;
        while (j < p->len && (p->src[j] == ' ' || p->src[j] == '\t')) j++;
        if (p->len - j >= 6 && memcmp(p->src + j, "graph", 5) == 0 && !is_ident_char((unsigned char)p->src[j + 5]))
            break;
        if (j < p->len && p->src[j] == '%' && p->len - j - 1 >= nlen &&
            memcmp(p->src + j + 1, name, nlen) == 0 &&
            !is_ident_char(j + 1 + nlen < p->len ? (unsigned char)p->src[j + 1 + nlen] : -1)) {
            p->pos = at;
            return PERR(p, "use of '%%%s' before its definition (line %d)", name, line);
        }
        while (i < p->len && p->src[i] != '\n') i++;
    }
    p->pos = at;
    return PERR(p, "undefined reference '%%%s'", name);
}

static pw_status parse_value(parser *p, pw_ir_arg *out, int depth);

static pw_status parse_seq(parser *p, pw_ir_arg *out, char close, int depth) {
    pw_ir_arg *items = NULL;
    int n = 0, cap = 0;
    bool trailing_comma = false;
    pw_status s = PW_OK;
    for (;;) {
        skip_ws(p);
        if (accept(p, close)) break;
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            pw_ir_arg *grown = pw_host_realloc(items, (size_t)cap * sizeof *grown);
            if (!grown) {
                s = PW_ERR_OOM;
                goto fail;
            }
            items = grown;
        }
        if ((s = parse_value(p, &items[n], depth + 1)) != PW_OK) goto fail;
        n++;
        trailing_comma = accept(p, ',');
        if (!trailing_comma) {
            if (accept(p, close)) break;
            s = PERR(p, "expected ',' or '%c'", close);
            goto fail;
        }
    }
    if (close == ')' && n == 1 && !trailing_comma) {
        s = PERR(p, "a one-element tuple needs a trailing comma: (x,)");
        goto fail;
    }
    out->kind = close == ']' ? PW_IR_ARG_LIST : PW_IR_ARG_TUPLE;
    out->as.seq.items = items;
    out->as.seq.n = n;
    return PW_OK;
fail:
    for (int i = 0; i < n; i++) pw_ir_arg_free(&items[i]);
    pw_host_free(items);
    return s;
}

static pw_status parse_string(parser *p, pw_ir_arg *out) {
    pw_sb sb = {0};
    size_t open = p->pos++;
    for (;;) {
        int c = peek(p);
        if (c < 0 || c == '\n') {
            pw_sb_discard(&sb);
            p->pos = open;
            return PERR(p, "unterminated string");
        }
        p->pos++;
        if (c == '"') break;
        if (c == '\\') {
            int e = peek(p);
            p->pos++;
            char ch;
            switch (e) {
            case '"': ch = '"'; break;
            case '\\': ch = '\\'; break;
            case 'n': ch = '\n'; break;
            case 't': ch = '\t'; break;
            case 'r': ch = '\r'; break;
            case 'x': {
                if (p->len - p->pos < 2 || !isxdigit((unsigned char)p->src[p->pos]) ||
                    !isxdigit((unsigned char)p->src[p->pos + 1])) {
                    pw_sb_discard(&sb);
                    return PERR(p, "\\x needs two hex digits");
                }
                char hex[3] = {p->src[p->pos], p->src[p->pos + 1], 0};
                ch = (char)strtol(hex, NULL, 16);
                p->pos += 2;
                if (ch == 0) {
                    pw_sb_discard(&sb);
                    return PERR(p, "strings cannot contain NUL");
                }
                break;
            }
            default:
                p->pos -= 2;
                pw_sb_discard(&sb);
                return PERR(p, "unknown escape '\\%c'", e < 0 ? '?' : e);
            }
            pw_sb_append(&sb, &ch, 1);
        } else {
            char ch = (char)c;
            pw_sb_append(&sb, &ch, 1);
        }
    }
    char *s;
    PW_TRY(pw_sb_finish(&sb, &s));
    out->kind = PW_IR_ARG_STRING;
    out->as.s = s;
    return PW_OK;
}

static pw_status parse_number(parser *p, pw_ir_arg *out) {
    size_t start = p->pos;
    size_t i = p->pos;
    if (i < p->len && (p->src[i] == '-' || p->src[i] == '+')) i++;
    if (p->len - i >= 3 && (memcmp(p->src + i, "inf", 3) == 0 || memcmp(p->src + i, "nan", 3) == 0)) {
        bool neg = p->src[start] == '-';
        bool nan = p->src[i] == 'n';
        p->pos = i + 3;
        if (is_ident_char(peek(p))) return PERR(p, "bad number");
        out->kind = PW_IR_ARG_FLOAT;
        out->as.f = nan ? NAN : (neg ? -INFINITY : INFINITY);
        return PW_OK;
    }
    bool is_float = false;
    size_t digits = 0;
    while (i < p->len && isdigit((unsigned char)p->src[i])) i++, digits++;
    if (i < p->len && p->src[i] == '.') {
        is_float = true;
        i++;
        while (i < p->len && isdigit((unsigned char)p->src[i])) i++, digits++;
    }
    if (!digits) return PERR(p, "expected a value");
    if (i < p->len && (p->src[i] == 'e' || p->src[i] == 'E')) {
        is_float = true;
        i++;
        if (i < p->len && (p->src[i] == '-' || p->src[i] == '+')) i++;
        if (i >= p->len || !isdigit((unsigned char)p->src[i])) {
            p->pos = i;
            return PERR(p, "bad exponent");
        }
        while (i < p->len && isdigit((unsigned char)p->src[i])) i++;
    }
    if (i < p->len && (is_ident_char((unsigned char)p->src[i]) || p->src[i] == '.')) {
        p->pos = i;
        return PERR(p, "bad number");
    }
    char buf[128];
    if (i - start >= sizeof buf) return PERR(p, "number too long");
    memcpy(buf, p->src + start, i - start);
    buf[i - start] = 0;
    errno = 0;
    if (is_float) {
        out->kind = PW_IR_ARG_FLOAT;
        out->as.f = strtod(buf, NULL);
    } else {
        out->kind = PW_IR_ARG_INT;
        out->as.i = strtoll(buf, NULL, 10);
        if (errno == ERANGE) return PERR(p, "integer %s out of range", buf);
    }
    p->pos = i;
    return PW_OK;
}

static pw_status parse_value(parser *p, pw_ir_arg *out, int depth) {
    memset(out, 0, sizeof *out);
    out->kind = PW_IR_ARG_NONE;
    if (depth > PW_IR_MAX_NESTING) return PERR(p, "values nested deeper than %d", PW_IR_MAX_NESTING);
    skip_ws(p);
    int c = peek(p);
    if (c == '%') {
        size_t at = p->pos;
        p->pos++;
        char name[PW_IR_MAX_NAME];
        PW_TRY(read_name(p, false, name, "a node name after '%'"));
        int idx = pw_ir_find_node(p->cur, name);
        if (idx < 0) return unresolved_ref(p, name, at);
        out->kind = PW_IR_ARG_NODE;
        out->as.node = idx;
        return PW_OK;
    }
    if (c == '"') return parse_string(p, out);
    if (c == '[') {
        p->pos++;
        return parse_seq(p, out, ']', depth);
    }
    if (c == '(') {
        p->pos++;
        return parse_seq(p, out, ')', depth);
    }
    if (accept_word(p, "true") || accept_word(p, "false")) {
        out->kind = PW_IR_ARG_BOOL;
        out->as.b = p->src[p->pos - 1] == 'e' && p->src[p->pos - 2] == 'u';
        return PW_OK;
    }
    if (accept_word(p, "none")) return PW_OK;
    if (c == '-' || c == '+' || c == '.' || (c >= 0 && isdigit(c)) || accept_word(p, "inf") ||
        accept_word(p, "nan")) {
        if (c == 'i' || c == 'n') p->pos -= 3; /* re-read through parse_number */
        return parse_number(p, out);
    }
    if (is_ident_start(c)) {
        char word[PW_IR_MAX_NAME];
        size_t at = p->pos;
        if (read_name(p, true, word, "a value") == PW_OK) {
            p->pos = at;
            return PERR(p, "unexpected '%s' (node references start with '%%', strings are quoted)", word);
        }
    }
    return PERR(p, "expected a value");
}

typedef struct call_args {
    pw_ir_arg *args;
    int nargs, capargs;
    pw_ir_kwarg *kwargs;
    int nkwargs, capkwargs;
} call_args;

static void call_args_free(call_args *a) {
    for (int i = 0; i < a->nargs; i++) pw_ir_arg_free(&a->args[i]);
    for (int i = 0; i < a->nkwargs; i++) {
        pw_host_free((char *)a->kwargs[i].name);
        pw_ir_arg_free(&a->kwargs[i].value);
    }
    pw_host_free(a->args);
    pw_host_free(a->kwargs);
    memset(a, 0, sizeof *a);
}

static pw_status parse_call_args(parser *p, call_args *a) {
    PW_TRY(expect(p, '(', "to open the argument list"));
    for (;;) {
        if (accept(p, ')')) return PW_OK;
        skip_ws(p);
        /* keyword: identifier followed by '=' */
        size_t at = p->pos;
        char key[PW_IR_MAX_NAME];
        bool is_kw = false;
        if (is_ident_start(peek(p)) && read_name(p, false, key, "a keyword") == PW_OK) {
            skip_ws(p);
            is_kw = peek(p) == '=';
            if (is_kw) p->pos++;
            else p->pos = at;
        }
        if (is_kw) {
            for (int i = 0; i < a->nkwargs; i++)
                if (strcmp(a->kwargs[i].name, key) == 0) {
                    p->pos = at;
                    return PERR(p, "keyword '%s' given twice", key);
                }
            if (a->nkwargs == a->capkwargs) {
                int cap = a->capkwargs ? a->capkwargs * 2 : 4;
                pw_ir_kwarg *k = pw_host_realloc(a->kwargs, (size_t)cap * sizeof *k);
                if (!k) return PW_ERR_OOM;
                a->kwargs = k;
                a->capkwargs = cap;
            }
            pw_ir_kwarg *kw = &a->kwargs[a->nkwargs];
            PW_TRY(parse_value(p, &kw->value, 0));
            if (!(kw->name = pw_host_strdup(key))) {
                pw_ir_arg_free(&kw->value);
                return PW_ERR_OOM;
            }
            a->nkwargs++;
        } else {
            if (a->nkwargs) return PERR(p, "positional argument after keyword arguments");
            if (a->nargs == a->capargs) {
                int cap = a->capargs ? a->capargs * 2 : 4;
                pw_ir_arg *g = pw_host_realloc(a->args, (size_t)cap * sizeof *g);
                if (!g) return PW_ERR_OOM;
                a->args = g;
                a->capargs = cap;
            }
            PW_TRY(parse_value(p, &a->args[a->nargs], 0));
            a->nargs++;
        }
        if (accept(p, ',')) continue;
        if (accept(p, ')')) return PW_OK;
        return PERR(p, "expected ',' or ')' in the argument list");
    }
}

static pw_status parse_type(parser *p, pw_ir_type *t) {
    memset(t, 0, sizeof *t);
    skip_ws(p);
    char word[PW_IR_MAX_NAME];
    size_t at = p->pos;
    PW_TRY(read_name(p, false, word, "a type (sym or a dtype such as f32)"));
    if (strcmp(word, "sym") == 0) {
        t->kind = PW_IR_TYPE_SYMINT;
        return PW_OK;
    }
    int dt = -1;
    for (int i = 0; i < PW_DTYPE_COUNT_; i++)
        if (strcmp(word, pw_dtype_name((pw_dtype)i)) == 0) dt = i;
    if (dt < 0) {
        p->pos = at;
        return PERR(p, "unknown type '%s'", word);
    }
    t->kind = PW_IR_TYPE_TENSOR;
    t->dtype = (pw_dtype)dt;
    PW_TRY(expect(p, '[', "after the dtype"));
    if (accept(p, ']')) return PW_OK;
    for (;;) {
        skip_ws(p);
        if (t->ndim == PW_MAX_DIMS) return PERR(p, "more than %d dimensions", PW_MAX_DIMS);
        if (accept_word(p, "s0")) {
            t->dims[t->ndim++] = PW_IR_DIM_TOKENS;
        } else if (isdigit(peek(p))) {
            pw_ir_arg num;
            PW_TRY(parse_number(p, &num));
            if (num.kind != PW_IR_ARG_INT) return PERR(p, "a dimension is an integer or s0");
            t->dims[t->ndim++] = num.as.i;
        } else {
            return PERR(p, "a dimension is an integer or s0");
        }
        if (accept(p, ']')) return PW_OK;
        PW_TRY(expect(p, ',', "between dimensions"));
    }
}

/* After a statement: optional "# comment", then end of line. */
static pw_status parse_line_end(parser *p, char **trailing) {
    skip_ws(p);
    if (peek(p) == '#') {
        size_t start = ++p->pos;
        while (p->pos < p->len && p->src[p->pos] != '\n') p->pos++;
        size_t end = p->pos;
        while (end > start && (p->src[end - 1] == ' ' || p->src[end - 1] == '\t' || p->src[end - 1] == '\r'))
            end--;
        /* comments are kept as C strings: a NUL would silently cut them */
        if (memchr(p->src + start, 0, end - start)) return PERR(p, "NUL byte in a comment");
        *trailing = pw_host_alloc(end - start + 1);
        if (!*trailing) return PW_ERR_OOM;
        memcpy(*trailing, p->src + start, end - start);
        (*trailing)[end - start] = 0;
    }
    if (p->pos < p->len && p->src[p->pos] != '\n') return PERR(p, "unexpected text at the end of the line");
    return PW_OK;
}

static pw_status take_pending(parser *p, pw_strvec *into) {
    pw_strvec_free(into);
    *into = p->pending;
    memset(&p->pending, 0, sizeof p->pending);
    return PW_OK;
}

static pw_status parse_header(parser *p) {
    char name[PW_IR_MAX_NAME];
    skip_ws(p);
    size_t at = p->pos;
    PW_TRY(read_name(p, false, name, "a graph name"));
    if (p->root && (strcmp(p->root->name, name) == 0 || pw_ir_find_subgraph(p->root, name))) {
        p->pos = at;
        return PERR(p, "duplicate graph name '%s'", name);
    }
    bool splitting = false;
    if (accept(p, '[')) {
        if (!accept_word(p, "splitting")) return PERR(p, "expected 'splitting' in the graph attributes");
        PW_TRY(expect(p, ']', "after the graph attributes"));
        splitting = true;
    }
    PW_TRY(expect(p, ':', "after the graph name"));
    pw_ir *g;
    PW_TRY(pw_ir_new(name, &g));
    g->splitting = splitting;
    g->line = p->line;
    take_pending(p, &g->header_comments);
    pw_status s = parse_line_end(p, &g->header_trailing_comment);
    if (s == PW_OK && p->root) {
        s = pw_ir_add_subgraph(p->root, g);
        if (s != PW_OK) return s;
    } else if (s == PW_OK) {
        p->root = g;
    } else {
        pw_ir_free(g);
        return s;
    }
    p->cur = g;
    return PW_OK;
}

static pw_status parse_node(parser *p) {
    pw_ir *g = p->cur;
    size_t at = p->pos;
    if (!g) return PERR(p, "node outside a graph (start one with 'graph NAME:')");
    if (pw_ir_output_node(g) >= 0) return PERR(p, "node after 'return'");
    pw_ir_node n;
    memset(&n, 0, sizeof n);
    n.line = p->line;
    call_args a = {0};
    char name[PW_IR_MAX_NAME], target[PW_IR_MAX_NAME];
    pw_status s;
    if (accept_word(p, "return")) {
        pw_ir_unique_name(g, "output", name, sizeof name);
        n.kind = PW_IR_OUTPUT;
        a.args = pw_host_calloc(1, sizeof *a.args);
        if (!a.args) return PW_ERR_OOM;
        a.nargs = 1;
        if ((s = parse_value(p, &a.args[0], 0)) != PW_OK) goto fail;
    } else {
        p->pos++; /* '%' */
        if ((s = read_name(p, false, name, "a node name after '%'")) != PW_OK) goto fail;
        if (pw_ir_find_node(g, name) >= 0) {
            p->pos = at;
            s = PERR(p, "duplicate node name '%%%s' (first defined on line %d)", name,
                     g->nodes[pw_ir_find_node(g, name)].line);
            goto fail;
        }
        if (accept(p, ':') && (s = parse_type(p, &n.type)) != PW_OK) goto fail;
        if ((s = expect(p, '=', "after the node name")) != PW_OK) goto fail;
        skip_ws(p);
        size_t kind_at = p->pos;
        char kind[PW_IR_MAX_NAME];
        if ((s = read_name(p, false, kind, "a node kind")) != PW_OK) goto fail;
        if (strcmp(kind, "placeholder") == 0) {
            n.kind = PW_IR_PLACEHOLDER;
        } else if (strcmp(kind, "call_function") == 0 || strcmp(kind, "call_module") == 0) {
            n.kind = kind[5] == 'f' ? PW_IR_CALL_FUNCTION : PW_IR_CALL_MODULE;
            skip_ws(p);
            if ((s = read_name(p, true, target, "a target name")) != PW_OK) goto fail;
            if (!(n.target = pw_host_strdup(target))) {
                s = PW_ERR_OOM;
                goto fail;
            }
            if ((s = parse_call_args(p, &a)) != PW_OK) goto fail;
        } else if (strcmp(kind, "getitem") == 0) {
            n.kind = PW_IR_GETITEM;
            if ((s = parse_call_args(p, &a)) != PW_OK) goto fail;
        } else {
            p->pos = kind_at;
            s = PERR(p, "unsupported node kind '%s' (placeholder, call_function, call_module, getitem)",
                     kind);
            goto fail;
        }
    }
    if ((s = parse_line_end(p, &n.trailing_comment)) != PW_OK) goto fail;
    if (!(n.name = pw_host_strdup(name))) {
        s = PW_ERR_OOM;
        goto fail;
    }
    n.args = a.args;
    n.nargs = a.nargs;
    n.kwargs = a.kwargs;
    n.nkwargs = a.nkwargs;
    memset(&a, 0, sizeof a);
    take_pending(p, &n.comments);
    return pw_ir_append_node(g, &n, NULL);
fail:
    call_args_free(&a);
    pw_host_free(n.target);
    pw_host_free(n.trailing_comment);
    return s;
}

pw_status pw_ir_parse(const char *text, size_t len, pw_ir **out) {
    *out = NULL;
    if (!text) return pw_error(PW_ERR_INVALID_ARG, "graph text is NULL");
    if (len == (size_t)-1) len = strlen(text);
    parser p = {.src = text, .len = len, .line = 1};
    pw_status s = PW_OK;
    while (s == PW_OK && p.pos < p.len) {
        skip_ws(&p);
        int c = peek(&p);
        if (c == '\n' || c < 0) {
            if (c == '\n' || p.pos > p.line_start) s = pw_strvec_push(&p.pending, NULL);
        } else if (c == '#') {
            size_t start = ++p.pos;
            while (p.pos < p.len && p.src[p.pos] != '\n') p.pos++;
            size_t end = p.pos;
            while (end > start && (p.src[end - 1] == ' ' || p.src[end - 1] == '\t' || p.src[end - 1] == '\r'))
                end--;
            if (memchr(p.src + start, 0, end - start)) {
                s = PERR(&p, "NUL byte in a comment");
                break;
            }
            char *line = pw_host_alloc(end - start + 1);
            if (!line) {
                s = PW_ERR_OOM;
                break;
            }
            memcpy(line, p.src + start, end - start);
            line[end - start] = 0;
            s = pw_strvec_push(&p.pending, line);
            pw_host_free(line);
        } else if (c == 0) {
            s = PERR(&p, "NUL byte in graph text");
        } else if (accept_word(&p, "graph")) {
            s = parse_header(&p);
        } else if (c == '%' || accept_word(&p, "return")) {
            if (c != '%') p.pos -= 6;
            s = parse_node(&p);
        } else {
            s = PERR(&p, "expected '%%name = ...', 'return' or 'graph NAME:'");
        }
        if (s != PW_OK) break;
        if (p.pos < p.len) { /* at '\n' */
            p.pos++;
            p.line++;
            p.line_start = p.pos;
        }
    }
    if (s == PW_OK && !p.root) s = pw_error(PW_ERR_PARSE, "line %d:1: no graph in the text", p.line);
    if (s != PW_OK) {
        pw_strvec_free(&p.pending);
        pw_ir_free(p.root);
        return s;
    }
    /* comments after the last node belong to the document's end */
    take_pending(&p, &p.root->tail_comments);
    *out = p.root;
    return PW_OK;
}

pw_status pw_ir_parse_file(const char *path, pw_ir **out) {
    *out = NULL;
    char *text;
    size_t len;
    PW_TRY(pw_file_read_all(path, "graph file", PW_FILE_FOLLOW_LINKS, PW_IR_MAX_FILE_BYTES, &text,
                            &len));
    pw_status s = pw_ir_parse(text, len, out);
    pw_host_free(text);
    if (s != PW_OK) return pw_error_context(s, "%s", path);
    return PW_OK;
}
