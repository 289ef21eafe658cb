/* The reference evaluator: runs a stitching graph straight from the IR,
 * subgraphs recursively, keeping every value until the graph returns. It
 * shares no code with the plan, which makes it a useful oracle. */
#include "graph_internal.h"
#include "pw_testing.h"

typedef struct eval_ctx {
    const pw_ir *root;
    const pw_plan_options *opts;
    const pw_callable *submods;
    int nsub;
    pw_strmap sub_index;
} eval_ctx;

typedef struct eval_frame {
    pw_value *vals;
    pw_value *temps; /* constants and built lists, released at the end */
    int ntemps, captemps;
} eval_frame;

static pw_status keep_temp(eval_frame *f, pw_value v) {
    if (f->ntemps == f->captemps) {
        size_t cap = (size_t)f->captemps;
        pw_value *t = pw_host_grow(f->temps, sizeof *t, &cap, (size_t)f->ntemps + 1, INT_MAX);
        if (!t) {
            pw_value_release(v);
            return PW_ERR_OOM;
        }
        f->temps = t;
        f->captemps = (int)cap;
    }
    f->temps[f->ntemps++] = v;
    return PW_OK;
}

/* The value of an argument, borrowed from the frame. */
static pw_status eval_arg(eval_frame *f, const pw_ir_arg *a, pw_value *out) {
    switch (a->kind) {
    case PW_IR_ARG_NODE: *out = f->vals[a->as.node]; return PW_OK;
    case PW_IR_ARG_INT: *out = pw_value_int(a->as.i); return PW_OK;
    case PW_IR_ARG_FLOAT: *out = pw_value_float(a->as.f); return PW_OK;
    case PW_IR_ARG_BOOL: out->kind = PW_VAL_BOOL; out->as.b = a->as.b; return PW_OK;
    case PW_IR_ARG_NONE: *out = pw_value_none(); return PW_OK;
    case PW_IR_ARG_STRING: out->kind = PW_VAL_STRING; out->as.s = a->as.s; return PW_OK;
    case PW_IR_ARG_LIST:
    case PW_IR_ARG_TUPLE: {
        pw_tuple *t;
        PW_TRY(pw_tuple_new(a->as.seq.n, &t));
        for (int i = 0; i < a->as.seq.n; i++) {
            pw_value item;
            pw_status s = eval_arg(f, &a->as.seq.items[i], &item);
            if (s != PW_OK) {
                pw_tuple_release(t);
                return s;
            }
            pw_tuple_set(t, i, pw_value_retain(item));
        }
        *out = pw_value_tuple(t);
        return keep_temp(f, *out);
    }
    }
    return pw_error(PW_ERR_INTERNAL, "eval: bad argument kind");
}

static pw_status eval_call_args(eval_frame *f, const pw_ir_node *n, pw_value **out) {
    pw_value *argv = pw_host_calloc((size_t)(n->nargs + n->nkwargs) + 1, sizeof *argv);
    if (!argv) return PW_ERR_OOM;
    pw_status s = PW_OK;
    for (int i = 0; i < n->nargs && s == PW_OK; i++) s = eval_arg(f, &n->args[i], &argv[i]);
    for (int i = 0; i < n->nkwargs && s == PW_OK; i++) s = eval_arg(f, &n->kwargs[i].value, &argv[n->nargs + i]);
    if (s != PW_OK) {
        pw_host_free(argv);
        return s;
    }
    *out = argv;
    return PW_OK;
}

static pw_status eval_graph(eval_ctx *c, const pw_ir *g, const pw_value *inputs, int ninputs,
                            pw_value *out);

static pw_status eval_node(eval_ctx *c, const pw_ir *g, eval_frame *f, int i, bool top, int *ph,
                           const pw_value *inputs, int ninputs, pw_value *out) {
    const pw_ir_node *n = &g->nodes[i];
    char where[PW_IR_MAX_NAME * 2 + 64];
    pw_ir_where(g, i, where, sizeof where);
    switch (n->kind) {
    case PW_IR_PLACEHOLDER:
        if (*ph >= ninputs) return pw_error(PW_ERR_INVALID_ARG, "%s: missing argument", where);
        f->vals[i] = inputs[(*ph)++];
        return PW_OK;
    case PW_IR_CALL_FUNCTION:
    case PW_IR_CALL_MODULE: {
        pw_callable fn = {0};
        const pw_ir *inline_sub = NULL;
        if (n->kind == PW_IR_CALL_FUNCTION) {
            if (!c->opts || !c->opts->resolve_op)
                return pw_error(PW_ERR_STATE, "%s: op '%s' has no implementation bound", where, n->target);
            PW_TRY(c->opts->resolve_op(c->opts->user, n->target, &fn));
        } else {
            if (!top) return pw_error(PW_ERR_INVALID_ARG, "%s: call_module inside a graph being inlined", where);
            bool inl = c->opts && c->opts->should_inline
                           ? c->opts->should_inline(c->opts->user, c->root, n->target)
                           : (pw_ir_find_subgraph(c->root, n->target) &&
                              pw_ir_find_subgraph(c->root, n->target)->splitting);
            if (inl) {
                if (!(inline_sub = pw_ir_find_subgraph(c->root, n->target)))
                    return pw_error(PW_ERR_NOT_FOUND, "%s: no subgraph '%s' to inline", where, n->target);
            } else {
                int idx = pw_strmap_get(&c->sub_index, n->target);
                if (idx < 0 || idx >= c->nsub || !c->submods[idx].fn)
                    return pw_error(PW_ERR_INVALID_ARG, "%s: submodule %d (%s) has no callable", where, idx,
                                    n->target);
                fn = c->submods[idx];
            }
        }
        pw_value *argv;
        PW_TRY(eval_call_args(f, n, &argv));
        pw_status s = inline_sub ? eval_graph(c, inline_sub, argv, n->nargs + n->nkwargs, &f->vals[i])
                                 : fn.fn(fn.user, argv, n->nargs + n->nkwargs, &f->vals[i]);
        pw_host_free(argv);
        if (s != PW_OK) {
            f->vals[i] = pw_value_none();
            return pw_error_context(s, "%s", where);
        }
        return PW_OK;
    }
    case PW_IR_GETITEM: {
        if (n->nargs != 2 || n->args[0].kind != PW_IR_ARG_NODE || n->args[1].kind != PW_IR_ARG_INT)
            return pw_error(PW_ERR_INVALID_ARG, "%s: getitem needs (node, integer)", where);
        pw_value src = f->vals[n->args[0].as.node];
        if (src.kind != PW_VAL_TUPLE) return pw_error(PW_ERR_INVALID_ARG, "%s: getitem on a non-tuple", where);
        int64_t k = n->args[1].as.i, size = pw_tuple_size(src.as.tuple);
        if (k < 0) k += size;
        if (k < 0 || k >= size) return pw_error(PW_ERR_INVALID_ARG, "%s: index out of range", where);
        f->vals[i] = pw_value_retain(pw_tuple_get(src.as.tuple, (int)k));
        return PW_OK;
    }
    case PW_IR_OUTPUT: {
        pw_value v;
        PW_TRY(eval_arg(f, &n->args[0], &v));
        *out = pw_value_retain(v);
        return PW_OK;
    }
    default:
        return pw_error(PW_ERR_UNSUPPORTED, "%s: unsupported node kind", where);
    }
}

static pw_status eval_graph(eval_ctx *c, const pw_ir *g, const pw_value *inputs, int ninputs,
                            pw_value *out) {
    *out = pw_value_none();
    bool top = g == c->root;
    eval_frame f = {0};
    f.vals = pw_host_calloc((size_t)g->nnodes + 1, sizeof *f.vals);
    if (!f.vals) return PW_ERR_OOM;
    int ph = 0;
    bool returned = false;
    pw_status s = PW_OK;
    for (int i = 0; i < g->nnodes && s == PW_OK; i++) {
        s = eval_node(c, g, &f, i, top, &ph, inputs, ninputs, out);
        if (g->nodes[i].kind == PW_IR_OUTPUT) returned = true;
    }
    if (s == PW_OK && !returned) s = pw_error(PW_ERR_INVALID_ARG, "graph %s: missing output", g->name);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind != PW_IR_PLACEHOLDER) pw_value_release(f.vals[i]);
    for (int i = 0; i < f.ntemps; i++) pw_value_release(f.temps[i]);
    pw_host_free(f.vals);
    pw_host_free(f.temps);
    if (s != PW_OK) {
        pw_value_release(*out);
        *out = pw_value_none();
    }
    return s;
}

pw_status pw_ir_run(const pw_ir *stitch, const pw_plan_options *opts, const pw_callable *submods,
                    int nsub, const pw_value *args, int nargs, pw_value *out) {
    *out = pw_value_none();
    eval_ctx c = {.root = stitch, .opts = opts, .submods = submods, .nsub = nsub};
    int next = 0;
    pw_status s = PW_OK;
    for (int i = 0; i < stitch->nnodes && s == PW_OK; i++)
        if (stitch->nodes[i].kind == PW_IR_CALL_MODULE && pw_strmap_get(&c.sub_index, stitch->nodes[i].target) < 0)
            s = pw_strmap_put(&c.sub_index, stitch->nodes[i].target, next++);
    if (s == PW_OK && nargs != pw_ir_num_placeholders(stitch))
        s = pw_error(PW_ERR_INVALID_ARG, "graph %s: %d arguments given, it takes %d", stitch->name, nargs,
                     pw_ir_num_placeholders(stitch));
    if (s == PW_OK) s = eval_graph(&c, stitch, args, nargs, out);
    pw_strmap_free(&c.sub_index);
    return s;
}
