/* Lowering (docs/codegen.md): walk the stitching graph; inline the chosen
 * subgraphs; bind ops; turn constants into plan-owned values. The result
 * is the flat program (pw_flat_op) that liveness and the C emitter read. */
#include "plan_internal.h"

#define GROW(arr, n, cap)                                                                      \
    (((n) < (cap)) ? true : grow_array((void **)&(arr), &(cap), sizeof *(arr), (n) + 1))

static bool grow_array(void **arr, int *cap, size_t elem, int need) {
    size_t c = (size_t)*cap;
    void *p = pw_host_grow(*arr, elem, &c, (size_t)need, INT_MAX);
    if (!p) return false;
    *arr = p;
    *cap = (int)c;
    return true;
}

enum { LV_UNSET = 0, LV_OPND, LV_SEQ, LV_CONST_ARG };

/* What an IR node became. A call_module that was inlined and returns a
 * tuple literal stays a static sequence of operands: getitems on it become
 * plain aliases and no tuple is ever built unless the whole is used. */
typedef struct lval {
    uint8_t kind;
    bool seq_is_list;
    uint32_t opnd;
    int seq_first, seq_n; /* in lower.seq */
    int materialized;     /* operand word + 1 of the built tuple, 0 if not built */
    const pw_ir_arg *arg; /* LV_CONST_ARG: a constant made into K on first use */
} lval;

typedef struct lower {
    const pw_ir *root;
    const pw_plan_options *opts;
    pw_plan *p;
    int capconsts, capfns, capsubs, capnames, capfops, capfopnds, capvals, capparams;
    uint32_t *seq;
    int nseq, capseq;
    pw_strmap fn_index;  /* target -> fns index (keys owned by p->fn_targets) */
    pw_strmap sub_index; /* target -> submodule index */
} lower;


static pw_status add_name(lower *L, const char *prefix, const char *name, int *out) {
    if (!GROW(L->p->names, L->p->nnames, L->capnames)) return pw_plan_oom();
    char buf[PW_IR_MAX_NAME * 2 + 4];
    if (prefix) snprintf(buf, sizeof buf, "%%%s.%s", prefix, name);
    else snprintf(buf, sizeof buf, "%%%s", name);
    if (!(L->p->names[L->p->nnames] = pw_host_strdup(buf))) return pw_plan_oom();
    *out = L->p->nnames++;
    return PW_OK;
}

static pw_status new_value(lower *L, int name, int *out) {
    if (!GROW(L->p->value_name, L->p->nvalues, L->capvals)) return pw_plan_oom();
    if (L->p->nvalues >= (int)PW_PLAN_MAX_INDEX)
        return pw_error(PW_ERR_UNSUPPORTED, "stitching plan: too many values");
    L->p->value_name[L->p->nvalues] = name;
    *out = L->p->nvalues++;
    return PW_OK;
}

static void free_constant_strings(pw_value v);
void pw_plan_drop_constant(pw_value v) {
    free_constant_strings(v);
    pw_value_release(v);
}

static pw_status add_const(lower *L, pw_value v, const pw_ir_arg *source, uint32_t *out) {
    pw_plan *p = L->p;
    if (!GROW(p->consts, p->nconsts, L->capconsts)) {
        pw_plan_drop_constant(v);
        return pw_plan_oom();
    }
    int cap = L->capconsts;
    char **text = pw_host_realloc(p->const_text, (size_t)cap * sizeof *text);
    if (!text) {
        pw_plan_drop_constant(v);
        return pw_plan_oom();
    }
    p->const_text = text;
    pw_sb sb = {0};
    pw_ir_print_arg(&sb, L->root, source);
    pw_status s = pw_sb_finish(&sb, &p->const_text[p->nconsts]);
    if (s != PW_OK) {
        pw_plan_drop_constant(v);
        return s;
    }
    p->consts[p->nconsts] = v;
    *out = PW_OPND(PW_SPACE_CONST, p->nconsts);
    p->nconsts++;
    return PW_OK;
}

static bool arg_is_constant(const pw_ir_arg *a) {
    if (a->kind == PW_IR_ARG_NODE) return false;
    if (a->kind == PW_IR_ARG_LIST || a->kind == PW_IR_ARG_TUPLE)
        for (int i = 0; i < a->as.seq.n; i++)
            if (!arg_is_constant(&a->as.seq.items[i])) return false;
    return true;
}

/* A constant argument as a pw_value owned by the plan. Strings point at a
 * copy held in const_text's neighbour: we keep them alive in the constant's
 * own allocation (see plan_free). */
static pw_status constant_value(const pw_ir_arg *a, pw_value *out) {
    *out = pw_value_none();
    switch (a->kind) {
    case PW_IR_ARG_INT: *out = pw_value_int(a->as.i); return PW_OK;
    case PW_IR_ARG_FLOAT: *out = pw_value_float(a->as.f); return PW_OK;
    case PW_IR_ARG_BOOL: out->kind = PW_VAL_BOOL; out->as.b = a->as.b; return PW_OK;
    case PW_IR_ARG_NONE: return PW_OK;
    case PW_IR_ARG_STRING: {
        char *s = pw_host_strdup(a->as.s);
        if (!s) return pw_plan_oom();
        out->kind = PW_VAL_STRING;
        out->as.s = s;
        return PW_OK;
    }
    case PW_IR_ARG_LIST:
    case PW_IR_ARG_TUPLE: {
        pw_tuple *t;
        PW_TRY(pw_tuple_new(a->as.seq.n, &t));
        for (int i = 0; i < a->as.seq.n; i++) {
            pw_value item;
            pw_status s = constant_value(&a->as.seq.items[i], &item);
            if (s != PW_OK) {
                pw_plan_drop_constant(pw_value_tuple(t));
                return s;
            }
            pw_tuple_set(t, i, item);
        }
        *out = pw_value_tuple(t);
        return PW_OK;
    }
    default: return pw_error(PW_ERR_INTERNAL, "constant_value: not a constant");
    }
}

/* Strings inside constants are plan-owned copies; releasing a tuple does not
 * free them, so walk the constant first. */
static void free_constant_strings(pw_value v) {
    if (v.kind == PW_VAL_STRING) {
        pw_host_free((char *)v.as.s);
    } else if (v.kind == PW_VAL_TUPLE) {
        for (int i = 0; i < pw_tuple_size(v.as.tuple); i++)
            free_constant_strings(pw_tuple_get(v.as.tuple, i));
    }
}

static pw_status emit_op(lower *L, pw_flat_op op, const uint32_t *opnds, int n) {
    pw_plan *p = L->p;
    if (n > PW_PLAN_MAX_CALL_ARGS)
        return pw_error(PW_ERR_UNSUPPORTED, "stitching plan: node %s has %d arguments (most %d)",
                        p->names[op.name], n, PW_PLAN_MAX_CALL_ARGS);
    if (!GROW(p->fops, p->nfops, L->capfops)) return pw_plan_oom();
    while (p->nfopnds + n > L->capfopnds)
        if (!grow_array((void **)&p->fopnds, &L->capfopnds, sizeof *p->fopnds, p->nfopnds + n)) return pw_plan_oom();
    op.first = p->nfopnds;
    op.n = n;
    if (n > 0) memcpy(p->fopnds + p->nfopnds, opnds, (size_t)n * sizeof *opnds); /* opnds may be NULL */
    p->nfopnds += n;
    p->fops[p->nfops++] = op;
    return PW_OK;
}

static pw_status lower_arg(lower *L, lval *env, const pw_ir_arg *a, int name, bool for_output,
                           uint32_t *out);

/* Builds the tuple for a static sequence used as a whole. */
static pw_status materialize(lower *L, lval *lv, int name, bool for_output, uint32_t *out) {
    if (lv->materialized) {
        *out = (uint32_t)(lv->materialized - 1);
        return PW_OK;
    }
    uint32_t *items = pw_host_calloc((size_t)lv->seq_n + 1, sizeof *items);
    if (!items) return pw_plan_oom();
    memcpy(items, L->seq + lv->seq_first, (size_t)lv->seq_n * sizeof *items);
    int dst;
    pw_status s = new_value(L, name, &dst);
    if (s == PW_OK) {
        pw_flat_op op = {.op = PW_INSTR_TUPLE, .is_output = for_output, .dst = dst, .name = name};
        s = emit_op(L, op, items, lv->seq_n);
    }
    pw_host_free(items);
    if (s != PW_OK) return s;
    *out = PW_OPND(PW_SPACE_TEMP, dst);
    lv->materialized = (int)*out + 1;
    return PW_OK;
}

static pw_status lower_arg(lower *L, lval *env, const pw_ir_arg *a, int name, bool for_output,
                           uint32_t *out) {
    if (a->kind == PW_IR_ARG_NODE) {
        lval *lv = &env[a->as.node];
        if (lv->kind == LV_OPND) {
            *out = lv->opnd;
            return PW_OK;
        }
        if (lv->kind == LV_SEQ) return materialize(L, lv, name, for_output, out);
        if (lv->kind == LV_CONST_ARG) {
            PW_TRY(lower_arg(L, env, lv->arg, name, for_output, &lv->opnd));
            lv->kind = LV_OPND;
            *out = lv->opnd;
            return PW_OK;
        }
        return pw_error(PW_ERR_INTERNAL, "stitching plan: node %d used before it was lowered", a->as.node);
    }
    if (arg_is_constant(a)) {
        pw_value v;
        PW_TRY(constant_value(a, &v));
        return add_const(L, v, a, out);
    }
    /* a list or tuple with node references inside: built at run time */
    int n = a->as.seq.n;
    uint32_t *items = pw_host_calloc((size_t)n + 1, sizeof *items);
    if (!items) return pw_plan_oom();
    pw_status s = PW_OK;
    for (int i = 0; i < n && s == PW_OK; i++)
        s = lower_arg(L, env, &a->as.seq.items[i], name, for_output, &items[i]);
    int dst = -1;
    if (s == PW_OK) s = new_value(L, name, &dst);
    if (s == PW_OK) {
        pw_flat_op op = {.op = PW_INSTR_TUPLE, .is_output = for_output, .dst = dst, .name = name};
        s = emit_op(L, op, items, n);
    }
    pw_host_free(items);
    if (s == PW_OK) *out = PW_OPND(PW_SPACE_TEMP, dst);
    return s;
}

static pw_status unbound_op(void *user, const pw_value *args, int nargs, pw_value *out) {
    *out = pw_value_none();
    return pw_error(PW_ERR_STATE, "op '%s' has no implementation bound (the plan was built "
                    "without a resolver)", (const char *)user);
}

static pw_status bind_op(lower *L, const char *target, const char *where, int *out) {
    int idx = pw_strmap_get(&L->fn_index, target);
    if (idx >= 0) {
        *out = idx;
        return PW_OK;
    }
    pw_plan *p = L->p;
    if (!GROW(p->fns, p->nfns, L->capfns)) return pw_plan_oom();
    char **targets = pw_host_realloc(p->fn_targets, (size_t)L->capfns * sizeof *targets);
    if (!targets) return pw_plan_oom();
    p->fn_targets = targets;
    if (!(p->fn_targets[p->nfns] = pw_host_strdup(target))) return pw_plan_oom();
    pw_callable c = {unbound_op, p->fn_targets[p->nfns], p->fn_targets[p->nfns]};
    if (L->opts && L->opts->resolve_op) {
        memset(&c, 0, sizeof c);
        pw_status s = L->opts->resolve_op(L->opts->user, target, &c);
        if (s != PW_OK) {
            pw_host_free(p->fn_targets[p->nfns]);
            return pw_error_context(s, "%s: resolving op '%s'", where, target);
        }
        if (!c.fn) {
            pw_host_free(p->fn_targets[p->nfns]);
            return pw_error(PW_ERR_NOT_FOUND, "%s: the resolver bound op '%s' to no function", where,
                            target);
        }
    }
    p->fns[p->nfns] = c;
    if (pw_strmap_put(&L->fn_index, p->fn_targets[p->nfns], p->nfns) != PW_OK) {
        pw_host_free(p->fn_targets[p->nfns]);
        return pw_plan_oom();
    }
    *out = p->nfns++;
    return PW_OK;
}

static pw_status submodule_index(lower *L, const char *target, bool inlined, int *out) {
    int idx = pw_strmap_get(&L->sub_index, target);
    if (idx >= 0) {
        *out = idx;
        return PW_OK;
    }
    pw_plan *p = L->p;
    if (!GROW(p->submod_names, p->nsubmods, L->capsubs)) return pw_plan_oom();
    bool *inl = pw_host_realloc(p->submod_inlined, (size_t)L->capsubs * sizeof *inl);
    if (!inl) return pw_plan_oom();
    p->submod_inlined = inl;
    if (!(p->submod_names[p->nsubmods] = pw_host_strdup(target))) return pw_plan_oom();
    p->submod_inlined[p->nsubmods] = inlined;
    if (pw_strmap_put(&L->sub_index, p->submod_names[p->nsubmods], p->nsubmods) != PW_OK) {
        pw_host_free(p->submod_names[p->nsubmods]);
        return pw_plan_oom();
    }
    *out = p->nsubmods++;
    return PW_OK;
}

static bool default_should_inline(const pw_ir *root, const char *target) {
    const pw_ir *sub = pw_ir_find_subgraph(root, target);
    return sub && sub->splitting;
}

static pw_status lower_graph(lower *L, const pw_ir *g, const uint32_t *ph_opnds, int nph,
                             const char *prefix, lval *result);

/* Operands for the placeholders of an inlined subgraph: positional
 * arguments in order, keyword arguments by placeholder name. */
static pw_status inline_call(lower *L, lval *env, const pw_ir *caller, int node, lval *result) {
    const pw_ir_node *n = &caller->nodes[node];
    char where[PW_IR_MAX_NAME * 2 + 64];
    pw_ir_where(caller, node, where, sizeof where);
    const pw_ir *sub = pw_ir_find_subgraph(L->root, n->target);
    if (!sub)
        return pw_error(PW_ERR_NOT_FOUND, "%s: cannot inline '%s': there is no subgraph of that name",
                        where, n->target);
    int nph = pw_ir_num_placeholders(sub);
    if (n->nargs + n->nkwargs != nph)
        return pw_error(PW_ERR_INVALID_ARG, "%s: call_module %s with %d arguments, but the subgraph "
                        "has %d placeholders", where, n->target, n->nargs + n->nkwargs, nph);
    uint32_t *ph = pw_host_calloc((size_t)nph + 1, sizeof *ph);
    bool *set = pw_host_calloc((size_t)nph + 1, sizeof *set);
    pw_status s = PW_OK;
    if (!ph || !set) s = pw_plan_oom();
    int name;
    if (s == PW_OK) s = add_name(L, NULL, n->name, &name);
    for (int i = 0; i < n->nargs && s == PW_OK; i++) {
        s = lower_arg(L, env, &n->args[i], name, false, &ph[i]);
        set[i] = true;
    }
    for (int k = 0; k < n->nkwargs && s == PW_OK; k++) {
        int pos = -1, count = 0;
        for (int i = 0; i < sub->nnodes; i++) {
            if (sub->nodes[i].kind != PW_IR_PLACEHOLDER) continue;
            if (strcmp(sub->nodes[i].name, n->kwargs[k].name) == 0) pos = count;
            count++;
        }
        if (pos < 0 || set[pos]) {
            s = pw_error(PW_ERR_INVALID_ARG, "%s: keyword '%s' %s", where, n->kwargs[k].name,
                         pos < 0 ? "names no placeholder of the subgraph" : "repeats an argument");
            break;
        }
        s = lower_arg(L, env, &n->kwargs[k].value, name, false, &ph[pos]);
        set[pos] = true;
    }
    if (s == PW_OK) s = lower_graph(L, sub, ph, nph, n->name, result);
    pw_host_free(ph);
    pw_host_free(set);
    return s;
}

static pw_status lower_call(lower *L, lval *env, const pw_ir *g, int node, const char *prefix,
                            uint8_t opcode, int fn) {
    const pw_ir_node *n = &g->nodes[node];
    int total = n->nargs + n->nkwargs;
    uint32_t *ops = pw_host_calloc((size_t)total + 1, sizeof *ops);
    if (!ops) return pw_plan_oom();
    int name, dst;
    pw_status s = add_name(L, prefix, n->name, &name);
    for (int i = 0; i < n->nargs && s == PW_OK; i++) s = lower_arg(L, env, &n->args[i], name, false, &ops[i]);
    for (int i = 0; i < n->nkwargs && s == PW_OK; i++)
        s = lower_arg(L, env, &n->kwargs[i].value, name, false, &ops[n->nargs + i]);
    if (s == PW_OK) s = new_value(L, name, &dst);
    if (s == PW_OK) {
        pw_flat_op op = {.op = opcode, .dst = dst, .fn = fn, .name = name};
        s = emit_op(L, op, ops, total);
    }
    pw_host_free(ops);
    if (s == PW_OK) {
        env[node].kind = LV_OPND;
        env[node].opnd = PW_OPND(PW_SPACE_TEMP, dst);
    }
    return s;
}

static pw_status lower_getitem(lower *L, lval *env, const pw_ir *g, int node, const char *prefix) {
    const pw_ir_node *n = &g->nodes[node];
    char where[PW_IR_MAX_NAME * 2 + 64];
    pw_ir_where(g, node, where, sizeof where);
    if (n->nargs != 2 || n->nkwargs)
        return pw_error(PW_ERR_INVALID_ARG, "%s: getitem takes (source, index)", where);
    if (n->args[1].kind != PW_IR_ARG_INT)
        return pw_error(PW_ERR_INVALID_ARG, "%s: getitem with a non-integer index", where);
    int64_t index = n->args[1].as.i;
    if (n->args[0].kind != PW_IR_ARG_NODE)
        return pw_error(PW_ERR_INVALID_ARG, "%s: getitem on a non-tuple (a constant)", where);
    lval *src = &env[n->args[0].as.node];
    if (src->kind == LV_CONST_ARG) {
        uint32_t ignored;
        int name;
        PW_TRY(add_name(L, prefix, n->name, &name));
        PW_TRY(lower_arg(L, env, &n->args[0], name, false, &ignored));
    }
    if (src->kind == LV_SEQ) {
        int64_t i = index < 0 ? index + src->seq_n : index;
        if (i < 0 || i >= src->seq_n)
            return pw_error(PW_ERR_INVALID_ARG, "%s: index %lld out of range for the %d results of "
                            "inlined %s", where, (long long)index, src->seq_n,
                            g->nodes[n->args[0].as.node].name);
        env[node].kind = LV_OPND;
        env[node].opnd = L->seq[src->seq_first + i];
        return PW_OK;
    }
    if (PW_OPND_SPACE(src->opnd) == PW_SPACE_CONST) {
        pw_value v = L->p->consts[PW_OPND_INDEX(src->opnd)];
        if (v.kind != PW_VAL_TUPLE)
            return pw_error(PW_ERR_INVALID_ARG, "%s: getitem on a non-tuple (a constant)", where);
    }
    if (index < INT32_MIN || index > INT32_MAX)
        return pw_error(PW_ERR_UNSUPPORTED, "%s: getitem index %lld out of range", where, (long long)index);
    int name, dst;
    PW_TRY(add_name(L, prefix, n->name, &name));
    PW_TRY(new_value(L, name, &dst));
    pw_flat_op op = {.op = PW_INSTR_GETITEM, .dst = dst, .src = src->opnd, .index = index, .name = name};
    PW_TRY(emit_op(L, op, NULL, 0));
    env[node].kind = LV_OPND;
    env[node].opnd = PW_OPND(PW_SPACE_TEMP, dst);
    return PW_OK;
}

/* The output of an inlined subgraph: an operand, or a static sequence. */
static pw_status lower_inlined_output(lower *L, lval *env, const pw_ir_arg *a, int name, lval *result) {
    memset(result, 0, sizeof *result);
    if (a->kind == PW_IR_ARG_NODE) {
        *result = env[a->as.node];
        result->materialized = result->kind == LV_SEQ ? result->materialized : 0;
        return PW_OK;
    }
    if ((a->kind == PW_IR_ARG_LIST || a->kind == PW_IR_ARG_TUPLE) && !arg_is_constant(a)) {
        int n = a->as.seq.n;
        uint32_t *items = pw_host_calloc((size_t)n + 1, sizeof *items);
        if (!items) return pw_plan_oom();
        pw_status s = PW_OK;
        for (int i = 0; i < n && s == PW_OK; i++) s = lower_arg(L, env, &a->as.seq.items[i], name, false, &items[i]);
        while (s == PW_OK && L->nseq + n > L->capseq)
            if (!grow_array((void **)&L->seq, &L->capseq, sizeof *L->seq, L->nseq + n)) s = pw_plan_oom();
        if (s == PW_OK) {
            memcpy(L->seq + L->nseq, items, (size_t)n * sizeof *items);
            result->kind = LV_SEQ;
            result->seq_is_list = a->kind == PW_IR_ARG_LIST;
            result->seq_first = L->nseq;
            result->seq_n = n;
            L->nseq += n;
        }
        pw_host_free(items);
        return s;
    }
    /* a constant: only made if somebody uses it */
    result->kind = LV_CONST_ARG;
    result->arg = a;
    return PW_OK;
}

/* A placeholder: parameter p<i> of the top graph, or the caller's operand
 * for placeholder ph of an inlined one. */
static pw_status lower_placeholder(lower *L, const pw_ir_node *n, bool top, const uint32_t *ph_opnds,
                                   int ph, int nph, lval *lv) {
    pw_plan *p = L->p;
    lv->kind = LV_OPND;
    if (!top) {
        assert(ph < nph);
        lv->opnd = ph_opnds[ph];
        return PW_OK;
    }
    if (!GROW(p->param_names, p->nparams, L->capparams) ||
        !(p->param_names[p->nparams] = pw_host_strdup(n->name)))
        return pw_plan_oom();
    lv->opnd = PW_OPND(PW_SPACE_PARAM, p->nparams);
    p->nparams++;
    return PW_OK;
}

/* A call_module: inlined or called through the submodule table, as
 * should_inline decides (only in the top graph). */
static pw_status lower_call_module(lower *L, lval *env, const pw_ir *g, int node, const char *prefix,
                                   bool top) {
    const pw_ir_node *n = &g->nodes[node];
    char where[PW_IR_MAX_NAME * 2 + 64];
    if (!top)
        return pw_error(PW_ERR_INVALID_ARG, "%s: call_module inside a graph being inlined (%s)",
                        pw_ir_where(g, node, where, sizeof where), prefix);
    bool inl = L->opts && L->opts->should_inline
                   ? L->opts->should_inline(L->opts->user, L->root, n->target)
                   : default_should_inline(L->root, n->target);
    int idx = -1;
    PW_TRY(submodule_index(L, n->target, inl, &idx));
    if (L->p->submod_inlined[idx] != inl)
        return pw_error(PW_ERR_INVALID_ARG, "%s: should_inline gave different answers for '%s'",
                        pw_ir_where(g, node, where, sizeof where), n->target);
    if (inl) return inline_call(L, env, g, node, &env[node]);
    return lower_call(L, env, g, node, prefix, PW_INSTR_CALLSUB, idx);
}

/* The output: a RETURN in the top graph; the result of an inlined one. */
static pw_status lower_output(lower *L, lval *env, const pw_ir *g, int node, const char *prefix,
                              bool top, lval *result) {
    const pw_ir_node *n = &g->nodes[node];
    char where[PW_IR_MAX_NAME * 2 + 64];
    if (n->nargs != 1)
        return pw_error(PW_ERR_INVALID_ARG, "%s: output takes one value",
                        pw_ir_where(g, node, where, sizeof where));
    int name;
    PW_TRY(add_name(L, prefix, n->name, &name));
    if (!top) return lower_inlined_output(L, env, &n->args[0], name, result);
    uint32_t w;
    PW_TRY(lower_arg(L, env, &n->args[0], name, true, &w));
    pw_flat_op op = {.op = PW_INSTR_RETURN, .is_output = true, .dst = -1, .src = w, .name = name};
    return emit_op(L, op, NULL, 0);
}

static pw_status lower_graph(lower *L, const pw_ir *g, const uint32_t *ph_opnds, int nph,
                             const char *prefix, lval *result) {
    bool top = ph_opnds == NULL && result == NULL;
    lval *env = pw_host_calloc((size_t)g->nnodes + 1, sizeof *env);
    if (!env) return pw_plan_oom();
    char where[PW_IR_MAX_NAME * 2 + 64];
    pw_status s = PW_OK;
    int ph = 0;
    bool have_output = false;
    for (int i = 0; i < g->nnodes && s == PW_OK; i++) {
        const pw_ir_node *n = &g->nodes[i];
        switch (n->kind) {
        case PW_IR_PLACEHOLDER:
            s = lower_placeholder(L, n, top, ph_opnds, ph++, nph, &env[i]);
            break;
        case PW_IR_CALL_FUNCTION: {
            int fn = -1;
            s = bind_op(L, n->target, pw_ir_where(g, i, where, sizeof where), &fn);
            if (s == PW_OK) s = lower_call(L, env, g, i, prefix, PW_INSTR_CALL, fn);
            break;
        }
        case PW_IR_CALL_MODULE:
            s = lower_call_module(L, env, g, i, prefix, top);
            break;
        case PW_IR_GETITEM:
            s = lower_getitem(L, env, g, i, prefix);
            break;
        case PW_IR_OUTPUT:
            have_output = true;
            s = lower_output(L, env, g, i, prefix, top, result);
            break;
        default:
            s = pw_error(PW_ERR_UNSUPPORTED, "%s: unsupported node kind %d for code generation",
                         pw_ir_where(g, i, where, sizeof where), (int)n->kind);
        }
        if (s == PW_OK && n->kind == PW_IR_OUTPUT && i != g->nnodes - 1)
            s = pw_error(PW_ERR_INVALID_ARG, "%s: the output must be the last node",
                         pw_ir_where(g, i, where, sizeof where));
    }
    if (s == PW_OK && !have_output) s = pw_error(PW_ERR_INVALID_ARG, "graph %s: missing output", g->name);
    pw_host_free(env);
    return s;
}

pw_status pw_plan_lower(const pw_ir *stitch, const pw_plan_options *opts, pw_plan *p) {
    lower L = {.root = stitch, .opts = opts, .p = p};
    pw_status s = lower_graph(&L, stitch, NULL, 0, NULL, NULL);
    pw_host_free(L.seq);
    pw_strmap_free(&L.fn_index);
    pw_strmap_free(&L.sub_index);
    return s;
}
