/* C source of a stitching plan (docs/codegen.md): the lowered program
 * printed as one function, a statement per node, a release per FREE. The
 * text is self-contained (its prelude mirrors the value layout of
 * piecewise.h; native.c checks that layout) so the native path can compile
 * it without include paths. */
#include "plan_internal.h"
#include "tensor.h"

#include <stddef.h>

#include <ctype.h>

const char pw_emit_c_prelude[] =
    "#include <stdbool.h>\n"
    "#include <stddef.h>\n"
    "#include <stdint.h>\n"
    "\n"
    "/* The value layout of piecewise.h. */\n"
    "typedef int pw_status; /* PW_OK == 0 */\n"
    "typedef enum pw_value_kind {\n"
    "    PW_VAL_NONE, PW_VAL_TENSOR, PW_VAL_TUPLE, PW_VAL_INT, PW_VAL_FLOAT, PW_VAL_BOOL, PW_VAL_STRING\n"
    "} pw_value_kind;\n"
    "typedef struct pw_value {\n"
    "    pw_value_kind kind;\n"
    "    union { void *tensor; void *tuple; int64_t i; double f; bool b; const char *s; } as;\n"
    "} pw_value;\n"
    "typedef pw_status (*pw_callable_fn)(void *user, const pw_value *args, int nargs, pw_value *out);\n"
    "typedef struct pw_callable { pw_callable_fn fn; void *user; const char *name; } pw_callable;\n"
    "\n"
    "/* Services of the piecewise runtime. */\n"
    "typedef struct pw_stitch_rt {\n"
    "    pw_value (*retain)(pw_value v);\n"
    "    void (*release)(pw_value v);\n"
    "    /* checks that src is a tuple and index in range; retains the item */\n"
    "    pw_status (*getitem)(pw_value src, int64_t index, const char *node, pw_value *out);\n"
    "    /* a tuple of n items; takes over their references, also on failure */\n"
    "    pw_status (*tuple)(int n, const pw_value *items, pw_value *out);\n"
    "    /* adds where a call failed to the error message; returns s */\n"
    "    pw_status (*failed)(pw_status s, const char *graph, const char *node);\n"
    "    pw_status (*no_submodule)(int index, const char *graph, const char *node);\n"
    "} pw_stitch_rt;\n"
    "\n"
    "/* Tensors are counted inline (the reference count's offset in the tensor\n"
    " * is filled in below); tuples and last releases go through the runtime. */\n"
    "#define PW_TENSOR_REFS(v) (*(int *)((char *)(v).as.tensor + PW_TENSOR_REFCOUNT_OFFSET))\n"
    "#define PW_RETAIN(v) do { if ((v).kind == PW_VAL_TENSOR) PW_TENSOR_REFS(v)++; \\\n"
    "    else if ((v).kind == PW_VAL_TUPLE) rt->retain(v); } while (0)\n"
    "#define PW_RELEASE(v) do { if ((v).kind == PW_VAL_TENSOR && PW_TENSOR_REFS(v) > 1) PW_TENSOR_REFS(v)--; \\\n"
    "    else if ((v).kind == PW_VAL_TENSOR || (v).kind == PW_VAL_TUPLE) rt->release(v); } while (0)\n"
    "#if defined(__GNUC__)\n"
    "#define PW_FAILED(st) __builtin_expect((st) != 0, 0)\n"
    "#else\n"
    "#define PW_FAILED(st) ((st) != 0)\n"
    "#endif\n";

typedef struct emitter {
    const pw_plan *p;
    pw_sb sb;
    char **local; /* value -> C name */
    bool *live;
} emitter;

static void c_string(pw_sb *sb, const char *s) {
    pw_sb_puts(sb, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') pw_sb_printf(sb, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f || c == '?') pw_sb_printf(sb, "\\%03o", c); /* no trigraphs */
        else pw_sb_append(sb, s, 1);
    }
    pw_sb_puts(sb, "\"");
}

/* Constant text inside a C comment must not close it. */
static void c_comment_text(pw_sb *sb, const char *s) {
    for (; *s; s++) {
        if (s[0] == '*' && s[1] == '/') pw_sb_puts(sb, "* /");
        else if (s[0] == '/' && s[1] == '*') pw_sb_puts(sb, "/ *");
        else pw_sb_append(sb, s, 1);
        if ((s[0] == '*' && s[1] == '/') || (s[0] == '/' && s[1] == '*')) s++;
    }
}

static void emit_opnd(emitter *e, uint32_t w) {
    uint32_t i = PW_OPND_INDEX(w);
    switch (PW_OPND_SPACE(w)) {
    case PW_SPACE_TEMP: pw_sb_puts(&e->sb, e->local[i]); break;
    case PW_SPACE_PARAM: pw_sb_printf(&e->sb, "P_%s", e->p->param_names[i]); break;
    default:
        pw_sb_printf(&e->sb, "k[%u] /* ", i);
        c_comment_text(&e->sb, e->p->const_text[i]);
        pw_sb_puts(&e->sb, " */");
    }
}

/* Releases every value alive now, then returns `ret`. */
static void emit_cleanup(emitter *e, const char *ret) {
    pw_sb_puts(&e->sb, "{ ");
    for (int v = 0; v < e->p->nvalues; v++)
        if (e->live[v]) pw_sb_printf(&e->sb, "PW_RELEASE(%s); ", e->local[v]);
    pw_sb_printf(&e->sb, "return %s; }\n", ret);
}

static void emit_name_literal(emitter *e, int name) {
    c_string(&e->sb, e->p->names[name]);
}

/* The operands as a compound-literal array, or NULL when there are none. */
static void emit_opnd_array(emitter *e, const uint32_t *o, int n) {
    if (n == 0) {
        pw_sb_puts(&e->sb, "NULL");
        return;
    }
    pw_sb_puts(&e->sb, "(pw_value[]){");
    for (int j = 0; j < n; j++) {
        if (j) pw_sb_puts(&e->sb, ", ");
        emit_opnd(e, o[j]);
    }
    pw_sb_puts(&e->sb, "}");
}

static void emit_op(emitter *e, const pw_flat_op *op) {
    const pw_plan *p = e->p;
    pw_sb *sb = &e->sb;
    /* a plan whose ops take no operands has no operand array at all */
    const uint32_t *o = p->fopnds ? p->fopnds + op->first : NULL;
    switch ((pw_opcode)op->op) {
    case PW_OP_CALL:
    case PW_OP_CALLSUB: {
        bool sub = op->op == PW_OP_CALLSUB;
        const char *table = sub ? "sub" : "fn";
        pw_sb_printf(sb, "    /* %s = %s(...) */\n", p->names[op->name] + 1,
                     sub ? p->submod_names[op->fn] : p->fn_targets[op->fn]);
        if (sub) {
            pw_sb_printf(sb, "    if (!sub[%d].fn) { ", op->fn);
            for (int v = 0; v < p->nvalues; v++)
                if (e->live[v]) pw_sb_printf(sb, "PW_RELEASE(%s); ", e->local[v]);
            pw_sb_printf(sb, "return rt->no_submodule(%d, GRAPH, ", op->fn);
            emit_name_literal(e, op->name);
            pw_sb_puts(sb, "); }\n");
        }
        pw_sb_printf(sb, "    pw_value %s;\n", e->local[op->dst]);
        pw_sb_printf(sb, "    st = %s[%d].fn(%s[%d].user, ", table, op->fn, table, op->fn);
        emit_opnd_array(e, o, op->n);
        pw_sb_printf(sb, ", %d, &%s);\n", op->n, e->local[op->dst]);
        pw_sb_puts(sb, "    if (PW_FAILED(st)) { ");
        for (int v = 0; v < p->nvalues; v++)
            if (e->live[v]) pw_sb_printf(sb, "PW_RELEASE(%s); ", e->local[v]);
        pw_sb_puts(sb, "return rt->failed(st, GRAPH, ");
        emit_name_literal(e, op->name);
        pw_sb_puts(sb, "); }\n");
        break;
    }
    case PW_OP_GETITEM:
        pw_sb_printf(sb, "    pw_value %s;\n    st = rt->getitem(", e->local[op->dst]);
        emit_opnd(e, op->src);
        pw_sb_printf(sb, ", %lld, ", (long long)op->index);
        emit_name_literal(e, op->name);
        pw_sb_printf(sb, ", &%s);\n    if (PW_FAILED(st)) ", e->local[op->dst]);
        emit_cleanup(e, "st");
        break;
    case PW_OP_TUPLE: {
        pw_sb_printf(sb, "    /* %s: a tuple */\n", p->names[op->name] + 1);
        for (int j = 0; j < op->n; j++)
            if (!(o[j] & PW_OPND_MOVE)) {
                pw_sb_puts(sb, "    PW_RETAIN(");
                emit_opnd(e, o[j]);
                pw_sb_puts(sb, ");\n");
            }
        pw_sb_printf(sb, "    pw_value %s;\n    st = rt->tuple(%d, ", e->local[op->dst], op->n);
        emit_opnd_array(e, o, op->n);
        pw_sb_printf(sb, ", &%s);\n", e->local[op->dst]);
        for (int j = 0; j < op->n; j++)
            if (o[j] & PW_OPND_MOVE) e->live[PW_OPND_INDEX(o[j])] = false;
        pw_sb_puts(sb, "    if (PW_FAILED(st)) ");
        emit_cleanup(e, "st");
        break;
    }
    case PW_OP_RETURN:
        pw_sb_puts(sb, "    *out = ");
        emit_opnd(e, op->src);
        pw_sb_puts(sb, ";\n");
        if (!(op->src & PW_OPND_MOVE)) pw_sb_puts(sb, "    PW_RETAIN(*out);\n");
        else e->live[PW_OPND_INDEX(op->src)] = false;
        pw_sb_puts(sb, "    return 0;\n");
        break;
    default:
        break;
    }
    if (op->dst >= 0) e->live[op->dst] = true;
    for (int k = 0; k < op->nfree; k++) {
        int v = p->free_vals[op->free_first + k];
        pw_sb_printf(sb, "    PW_RELEASE(%s);\n", e->local[v]);
        e->live[v] = false;
    }
}

static pw_status make_locals(emitter *e) {
    const pw_plan *p = e->p;
    pw_strmap used = {0};
    pw_status s = PW_OK;
    for (int v = 0; v < p->nvalues && s == PW_OK; v++) {
        const char *name = p->names[p->value_name[v]] + 1; /* without '%' */
        char base[PW_IR_MAX_NAME * 2 + 8], buf[PW_IR_MAX_NAME * 2 + 32];
        size_t n = 0;
        base[n++] = 'v';
        base[n++] = '_';
        for (const char *c = name; *c && n + 3 < sizeof base; c++) {
            if (*c == '.') {
                base[n++] = '_';
                base[n++] = '_';
            } else {
                base[n++] = isalnum((unsigned char)*c) ? *c : '_';
            }
        }
        base[n] = 0;
        snprintf(buf, sizeof buf, "%s", base);
        for (int k = 2; pw_strmap_get(&used, buf) >= 0; k++) snprintf(buf, sizeof buf, "%s_%d", base, k);
        if (!(e->local[v] = pw_host_strdup(buf))) s = PW_ERR_OOM;
        else s = pw_strmap_put(&used, e->local[v], v);
    }
    pw_strmap_free(&used);
    return s;
}

pw_status pw_plan_emit_c(const pw_plan *p, char **out) {
    *out = NULL;
    emitter e = {.p = p};
    e.local = pw_host_calloc((size_t)p->nvalues + 1, sizeof *e.local);
    e.live = pw_host_calloc((size_t)p->nvalues + 1, sizeof *e.live);
    pw_status s = (!e.local || !e.live) ? PW_ERR_OOM : make_locals(&e);
    if (s == PW_OK) {
        pw_sb *sb = &e.sb;
        int ninl = 0;
        for (int i = 0; i < p->nsubmods; i++) ninl += p->submod_inlined[i];
        pw_sb_printf(sb, "/* Generated by piecewise %s: the stitching function of graph %s.\n"
                     " * %d parameters, %d submodules (%d inlined), %d bound ops, %d nodes.\n"
                     " * Values are released right after their last user; values the output\n"
                     " * uses are handed to the caller; parameters are never released. */\n",
                     pw_version(), p->graph_name, p->nparams, p->nsubmods, ninl, p->nfns, p->nnodes);
        pw_sb_puts(sb, pw_emit_c_prelude);
        _Static_assert(sizeof(((struct pw_tensor *)0)->refcount) == sizeof(int), "tensor refcount is an int");
        pw_sb_printf(sb, "#define PW_TENSOR_REFCOUNT_OFFSET %zu\n", offsetof(struct pw_tensor, refcount));
        pw_sb_puts(sb, "\n/* Submodule table (index: name):\n");
        for (int i = 0; i < p->nsubmods; i++)
            pw_sb_printf(sb, " *   %d: %s%s\n", i, p->submod_names[i], p->submod_inlined[i] ? " (inlined)" : "");
        pw_sb_puts(sb, " * Bound ops (index: target):\n");
        for (int i = 0; i < p->nfns; i++) pw_sb_printf(sb, " *   %d: %s\n", i, p->fn_targets[i]);
        pw_sb_puts(sb, " */\n\n#define GRAPH ");
        c_string(sb, p->graph_name);
        pw_sb_puts(sb, "\n");
        for (int i = 0; i < p->nparams; i++) pw_sb_printf(sb, "#define P_%s (p[%d])\n", p->param_names[i], i);
        pw_sb_printf(sb, "\npw_status %s(const pw_stitch_rt *rt, const pw_callable *fn, const pw_callable *sub,\n"
                     "        const pw_value *k, const pw_value *p, pw_value *out)\n{\n"
                     "    pw_status st;\n    (void)st; (void)fn; (void)sub; (void)k; (void)p;\n",
                     p->function_name);
        for (int i = 0; i < p->nfops; i++) emit_op(&e, &p->fops[i]);
        pw_sb_puts(sb, "}\n\n");
        for (int i = 0; i < p->nparams; i++) pw_sb_printf(sb, "#undef P_%s\n", p->param_names[i]);
        pw_sb_puts(sb, "#undef GRAPH\n");
        s = pw_sb_finish(sb, out);
    } else {
        s = pw_error(s, "out of memory emitting C");
    }
    if (e.local)
        for (int v = 0; v < p->nvalues; v++) pw_host_free(e.local[v]);
    pw_host_free(e.local);
    pw_host_free(e.live);
    pw_sb_discard(&e.sb);
    return s;
}
