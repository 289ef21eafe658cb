/* Stitching code generation (DESIGN §2.8, docs/codegen.md).
 *
 *   lower      walk the stitching graph; inline the chosen subgraphs; bind
 *              ops; turn constants into plan-owned values -> flat program
 *   liveness   for each value its last user; FREE after it unless that user
 *              builds the output (then the reference moves to the caller)
 *   registers  values share registers once freed -> compact instructions
 *   run        one dispatch loop */
#include "plan_internal.h"
#include "tensor.h"

/* Registers kept on the C stack during a run; larger frames are allocated. */
#define PW_PLAN_STACK_TEMPS 64

#define GROW(arr, n, cap)                                                                      \
    (((n) < (cap)) ? true : grow_array((void **)&(arr), &(cap), sizeof *(arr), (n) + 1))

static bool grow_array(void **arr, int *cap, size_t elem, int need) {
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *p = pw_host_realloc(*arr, (size_t)c * elem);
    if (!p) return false;
    *arr = p;
    *cap = c;
    return true;
}

/* ---- lowering --------------------------------------------------------------------------- */

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

static pw_status oom(void) { return pw_error(PW_ERR_OOM, "out of memory building a stitching plan"); }

static pw_status add_name(lower *L, const char *prefix, const char *name, int *out) {
    if (!GROW(L->p->names, L->p->nnames, L->capnames)) return oom();
    char buf[PW_IR_MAX_NAME * 2 + 4];
    if (prefix) snprintf(buf, sizeof buf, "%%%s.%s", prefix, name);
    else snprintf(buf, sizeof buf, "%%%s", name);
    if (!(L->p->names[L->p->nnames] = pw_host_strdup(buf))) return oom();
    *out = L->p->nnames++;
    return PW_OK;
}

static pw_status new_value(lower *L, int name, int *out) {
    if (!GROW(L->p->value_name, L->p->nvalues, L->capvals)) return oom();
    if (L->p->nvalues >= (int)PW_PLAN_MAX_INDEX)
        return pw_error(PW_ERR_UNSUPPORTED, "stitching plan: too many values");
    L->p->value_name[L->p->nvalues] = name;
    *out = L->p->nvalues++;
    return PW_OK;
}

static void free_constant_strings(pw_value v);
static void drop_constant(pw_value v) {
    free_constant_strings(v);
    pw_value_release(v);
}

static pw_status add_const(lower *L, pw_value v, const pw_ir_arg *source, uint32_t *out) {
    pw_plan *p = L->p;
    if (!GROW(p->consts, p->nconsts, L->capconsts)) {
        drop_constant(v);
        return oom();
    }
    int cap = L->capconsts;
    char **text = pw_host_realloc(p->const_text, (size_t)cap * sizeof *text);
    if (!text) {
        drop_constant(v);
        return oom();
    }
    p->const_text = text;
    pw_sb sb = {0};
    pw_ir_print_arg(&sb, L->root, source);
    pw_status s = pw_sb_finish(&sb, &p->const_text[p->nconsts]);
    if (s != PW_OK) {
        drop_constant(v);
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
        if (!s) return oom();
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
                drop_constant(pw_value_tuple(t));
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
    if (!GROW(p->fops, p->nfops, L->capfops)) return oom();
    while (p->nfopnds + n > L->capfopnds)
        if (!grow_array((void **)&p->fopnds, &L->capfopnds, sizeof *p->fopnds, p->nfopnds + n)) return oom();
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
    if (!items) return oom();
    memcpy(items, L->seq + lv->seq_first, (size_t)lv->seq_n * sizeof *items);
    int dst;
    pw_status s = new_value(L, name, &dst);
    if (s == PW_OK) {
        pw_flat_op op = {.op = PW_OP_TUPLE, .is_output = for_output, .dst = dst, .name = name};
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
    if (!items) return oom();
    pw_status s = PW_OK;
    for (int i = 0; i < n && s == PW_OK; i++)
        s = lower_arg(L, env, &a->as.seq.items[i], name, for_output, &items[i]);
    int dst = -1;
    if (s == PW_OK) s = new_value(L, name, &dst);
    if (s == PW_OK) {
        pw_flat_op op = {.op = PW_OP_TUPLE, .is_output = for_output, .dst = dst, .name = name};
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
    if (!GROW(p->fns, p->nfns, L->capfns)) return oom();
    char **targets = pw_host_realloc(p->fn_targets, (size_t)L->capfns * sizeof *targets);
    if (!targets) return oom();
    p->fn_targets = targets;
    if (!(p->fn_targets[p->nfns] = pw_host_strdup(target))) return oom();
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
        return oom();
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
    if (!GROW(p->submod_names, p->nsubmods, L->capsubs)) return oom();
    bool *inl = pw_host_realloc(p->submod_inlined, (size_t)L->capsubs * sizeof *inl);
    if (!inl) return oom();
    p->submod_inlined = inl;
    if (!(p->submod_names[p->nsubmods] = pw_host_strdup(target))) return oom();
    p->submod_inlined[p->nsubmods] = inlined;
    if (pw_strmap_put(&L->sub_index, p->submod_names[p->nsubmods], p->nsubmods) != PW_OK) {
        pw_host_free(p->submod_names[p->nsubmods]);
        return oom();
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
    if (!ph || !set) s = oom();
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
    if (!ops) return oom();
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
    pw_flat_op op = {.op = PW_OP_GETITEM, .dst = dst, .src = src->opnd, .index = index, .name = name};
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
        if (!items) return oom();
        pw_status s = PW_OK;
        for (int i = 0; i < n && s == PW_OK; i++) s = lower_arg(L, env, &a->as.seq.items[i], name, false, &items[i]);
        while (s == PW_OK && L->nseq + n > L->capseq)
            if (!grow_array((void **)&L->seq, &L->capseq, sizeof *L->seq, L->nseq + n)) s = oom();
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

static pw_status lower_graph(lower *L, const pw_ir *g, const uint32_t *ph_opnds, int nph,
                             const char *prefix, lval *result) {
    bool top = ph_opnds == NULL && result == NULL;
    lval *env = pw_host_calloc((size_t)g->nnodes + 1, sizeof *env);
    if (!env) return oom();
    char where[PW_IR_MAX_NAME * 2 + 64];
    pw_status s = PW_OK;
    int ph = 0;
    bool have_output = false;
    pw_plan *p = L->p;
    for (int i = 0; i < g->nnodes && s == PW_OK; i++) {
        const pw_ir_node *n = &g->nodes[i];
        switch (n->kind) {
        case PW_IR_PLACEHOLDER:
            env[i].kind = LV_OPND;
            if (top) {
                if (!GROW(p->param_names, p->nparams, L->capparams) ||
                    !(p->param_names[p->nparams] = pw_host_strdup(n->name))) {
                    s = oom();
                    break;
                }
                env[i].opnd = PW_OPND(PW_SPACE_PARAM, p->nparams);
                p->nparams++;
            } else {
                assert(ph < nph);
                env[i].opnd = ph_opnds[ph];
            }
            ph++;
            break;
        case PW_IR_CALL_FUNCTION: {
            int fn = -1;
            s = bind_op(L, n->target, pw_ir_where(g, i, where, sizeof where), &fn);
            if (s == PW_OK) s = lower_call(L, env, g, i, prefix, PW_OP_CALL, fn);
            break;
        }
        case PW_IR_CALL_MODULE: {
            if (!top) {
                s = pw_error(PW_ERR_INVALID_ARG, "%s: call_module inside a graph being inlined (%s)",
                             pw_ir_where(g, i, where, sizeof where), prefix);
                break;
            }
            bool inl = L->opts && L->opts->should_inline
                           ? L->opts->should_inline(L->opts->user, L->root, n->target)
                           : default_should_inline(L->root, n->target);
            int idx = -1;
            s = submodule_index(L, n->target, inl, &idx);
            if (s != PW_OK) break;
            if (p->submod_inlined[idx] != inl) {
                s = pw_error(PW_ERR_INVALID_ARG, "%s: should_inline gave different answers for '%s'",
                             pw_ir_where(g, i, where, sizeof where), n->target);
                break;
            }
            if (inl) s = inline_call(L, env, g, i, &env[i]);
            else s = lower_call(L, env, g, i, prefix, PW_OP_CALLSUB, idx);
            break;
        }
        case PW_IR_GETITEM:
            s = lower_getitem(L, env, g, i, prefix);
            break;
        case PW_IR_OUTPUT: {
            have_output = true;
            if (n->nargs != 1) {
                s = pw_error(PW_ERR_INVALID_ARG, "%s: output takes one value",
                             pw_ir_where(g, i, where, sizeof where));
                break;
            }
            int name;
            s = add_name(L, prefix, n->name, &name);
            if (s != PW_OK) break;
            if (!top) {
                s = lower_inlined_output(L, env, &n->args[0], name, result);
                break;
            }
            uint32_t w;
            s = lower_arg(L, env, &n->args[0], name, true, &w);
            if (s == PW_OK) {
                pw_flat_op op = {.op = PW_OP_RETURN, .is_output = true, .dst = -1, .src = w, .name = name};
                s = emit_op(L, op, NULL, 0);
            }
            break;
        }
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

/* ---- liveness and registers ---------------------------------------------------------------- */

static bool is_temp(uint32_t w) { return PW_OPND_SPACE(w) == PW_SPACE_TEMP; }

static pw_status analyse(pw_plan *p) {
    int nv = p->nvalues;
    int *last_use = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    int *def_at = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    int *count = pw_host_calloc((size_t)p->nfops + 1, sizeof(int));
    bool *freed = pw_host_calloc((size_t)nv + 1, sizeof(bool));
    pw_status s = PW_OK;
    if (!last_use || !def_at || !count || !freed) {
        s = oom();
        goto done;
    }
    for (int v = 0; v < nv; v++) last_use[v] = def_at[v] = -1;
    for (int i = 0; i < p->nfops; i++) {
        pw_flat_op *op = &p->fops[i];
        if (op->dst >= 0) def_at[op->dst] = i;
        for (int j = 0; j < op->n; j++)
            if (is_temp(p->fopnds[op->first + j])) last_use[PW_OPND_INDEX(p->fopnds[op->first + j])] = i;
        if ((op->op == PW_OP_GETITEM || op->op == PW_OP_RETURN) && is_temp(op->src))
            last_use[PW_OPND_INDEX(op->src)] = i;
    }
    /* where each value is freed: after its last user, or right after it is
     * made if nobody uses it; never if the last user builds the output */
    int *free_at = def_at; /* reused: free position per value, -1 for none */
    for (int v = 0; v < nv; v++) {
        int at = last_use[v] < 0 ? def_at[v] : last_use[v];
        free_at[v] = (last_use[v] >= 0 && p->fops[last_use[v]].is_output) ? -1 : at;
        if (free_at[v] >= 0) count[free_at[v]]++;
    }
    p->free_vals = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    if (!p->free_vals) {
        s = oom();
        goto done;
    }
    int pos = 0;
    for (int i = 0; i < p->nfops; i++) {
        p->fops[i].free_first = pos;
        p->fops[i].nfree = 0;
        pos += count[i];
    }
    for (int v = 0; v < nv; v++) /* ascending value order: deterministic */
        if (free_at[v] >= 0) {
            pw_flat_op *op = &p->fops[free_at[v]];
            p->free_vals[op->free_first + op->nfree++] = v;
        }
    p->nfree_vals = pos;
    /* output builders take over the references of values they are the last
     * user of (the last occurrence, so earlier ones can still be read) */
    for (int i = 0; i < p->nfops; i++) {
        pw_flat_op *op = &p->fops[i];
        if (!op->is_output) continue;
        if (op->op == PW_OP_RETURN) {
            if (is_temp(op->src) && last_use[PW_OPND_INDEX(op->src)] == i) op->src |= PW_OPND_MOVE;
            continue;
        }
        for (int j = op->n - 1; j >= 0; j--) {
            uint32_t w = p->fopnds[op->first + j];
            if (!is_temp(w) || last_use[PW_OPND_INDEX(w)] != i || freed[PW_OPND_INDEX(w)]) continue;
            freed[PW_OPND_INDEX(w)] = true; /* moved */
            p->fopnds[op->first + j] = w | PW_OPND_MOVE;
        }
    }
done:
    pw_host_free(last_use);
    pw_host_free(def_at);
    pw_host_free(count);
    pw_host_free(freed);
    return s;
}

static uint32_t to_reg(uint32_t w, const int *reg) {
    if (!is_temp(w)) return w;
    return (w & PW_OPND_MOVE) | PW_OPND(PW_SPACE_TEMP, reg[PW_OPND_INDEX(w)]);
}

static pw_status assign_registers(pw_plan *p) {
    int nv = p->nvalues;
    int *reg = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    int *free_regs = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    p->code = pw_host_calloc((size_t)(p->nfops + p->nfree_vals) + 1, sizeof *p->code);
    p->code_name = pw_host_calloc((size_t)(p->nfops + p->nfree_vals) + 1, sizeof *p->code_name);
    p->opnds = pw_host_calloc((size_t)p->nfopnds + 1, sizeof *p->opnds);
    if (!reg || !free_regs || !p->code || !p->code_name || !p->opnds) {
        pw_host_free(reg);
        pw_host_free(free_regs);
        return oom();
    }
    int nfree = 0;
    for (int i = 0; i < p->nfops; i++) {
        const pw_flat_op *op = &p->fops[i];
        if (op->dst >= 0) {
            reg[op->dst] = nfree ? free_regs[--nfree] : p->ntemps++;
        }
        pw_instr in = {.op = op->op, .n = (uint16_t)op->n};
        in.a = op->dst >= 0 ? (uint32_t)reg[op->dst] : 0;
        switch (op->op) {
        case PW_OP_CALL:
        case PW_OP_CALLSUB:
            in.b = (uint32_t)op->fn;
            /* fallthrough */
        case PW_OP_TUPLE:
            in.c = (uint32_t)p->nopnds;
            for (int j = 0; j < op->n; j++) p->opnds[p->nopnds++] = to_reg(p->fopnds[op->first + j], reg);
            p->nnodes++;
            break;
        case PW_OP_GETITEM:
            in.b = to_reg(op->src, reg);
            in.c = (uint32_t)(int32_t)op->index;
            p->nnodes++;
            break;
        case PW_OP_RETURN:
            in.b = to_reg(op->src, reg);
            break;
        }
        p->code_name[p->ncode] = op->name;
        p->code[p->ncode++] = in;
        for (int k = 0; k < op->nfree; k++) {
            int v = p->free_vals[op->free_first + k];
            pw_instr fr = {.op = PW_OP_FREE, .a = (uint32_t)reg[v]};
            p->code_name[p->ncode] = p->value_name[v];
            p->code[p->ncode++] = fr;
            free_regs[nfree++] = reg[v];
        }
    }
    pw_host_free(reg);
    pw_host_free(free_regs);
    return PW_OK;
}

/* ---- building and freeing ------------------------------------------------------------------ */

static void free_strs(char **v, int n) {
    for (int i = 0; i < n; i++) pw_host_free(v[i]);
    pw_host_free(v);
}

void pw_plan_free(pw_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->nconsts; i++) {
        free_constant_strings(p->consts[i]);
        pw_value_release(p->consts[i]);
    }
    pw_host_free(p->consts);
    free_strs(p->const_text, p->nconsts);
    free_strs(p->param_names, p->nparams);
    pw_host_free(p->fns);
    free_strs(p->fn_targets, p->nfns);
    free_strs(p->submod_names, p->nsubmods);
    pw_host_free(p->submod_inlined);
    free_strs(p->names, p->nnames);
    pw_host_free(p->fops);
    pw_host_free(p->fopnds);
    pw_host_free(p->free_vals);
    pw_host_free(p->value_name);
    pw_host_free(p->code);
    pw_host_free(p->opnds);
    pw_host_free(p->code_name);
    pw_host_free(p->graph_name);
    pw_host_free(p->function_name);
    pw_host_free(p);
}

pw_status pw_plan_build(const pw_ir *stitch, const pw_plan_options *opts, pw_plan **out) {
    *out = NULL;
    if (!stitch) return pw_error(PW_ERR_INVALID_ARG, "pw_plan_build: no graph");
    const char *fname = opts && opts->function_name ? opts->function_name : "pw_stitch";
    if (!pw_ir_is_identifier(fname))
        return pw_error(PW_ERR_INVALID_ARG, "function name '%s' is not an identifier", fname);
    pw_plan *p = pw_host_calloc(1, sizeof *p);
    if (!p) return oom();
    lower L = {.root = stitch, .opts = opts, .p = p};
    pw_status s = PW_OK;
    if (!(p->graph_name = pw_host_strdup(stitch->name)) || !(p->function_name = pw_host_strdup(fname)))
        s = oom();
    if (s == PW_OK) s = lower_graph(&L, stitch, NULL, 0, NULL, NULL);
    if (s == PW_OK) s = analyse(p);
    if (s == PW_OK) s = assign_registers(p);
    pw_host_free(L.seq);
    pw_strmap_free(&L.fn_index);
    pw_strmap_free(&L.sub_index);
    if (s != PW_OK) {
        pw_plan_free(p);
        return s;
    }
    *out = p;
    return PW_OK;
}

int pw_plan_num_params(const pw_plan *p) { return p->nparams; }
int pw_plan_num_submodules(const pw_plan *p) { return p->nsubmods; }
const char *pw_plan_submodule_name(const pw_plan *p, int i) {
    return i >= 0 && i < p->nsubmods ? p->submod_names[i] : NULL;
}
bool pw_plan_submodule_inlined(const pw_plan *p, int i) {
    return i >= 0 && i < p->nsubmods && p->submod_inlined[i];
}
int pw_plan_num_nodes(const pw_plan *p) { return p->nnodes; }

/* ---- the interpreter ------------------------------------------------------------------------ */

/* Reference counting on the hot path: tensors are counted inline (the
 * layout is the library's own, tensor.h); only a last release, and tuples,
 * go through the core functions. Scalars and strings are not counted. */
static inline void value_retain(pw_value v) {
    if (v.kind == PW_VAL_TENSOR) v.as.tensor->refcount++;
    else if (v.kind == PW_VAL_TUPLE) pw_tuple_retain(v.as.tuple);
}
static inline void value_release(pw_value v) {
    if (v.kind == PW_VAL_TENSOR) {
        if (v.as.tensor->refcount > 1) v.as.tensor->refcount--;
        else pw_tensor_release(v.as.tensor);
    } else if (v.kind == PW_VAL_TUPLE) {
        pw_tuple_release(v.as.tuple);
    }
}

static const char *value_kind_name(pw_value_kind k) {
    static const char *const names[] = {"none", "tensor", "tuple", "int", "float", "bool", "string"};
    return (unsigned)k < PW_ARRAY_LEN(names) ? names[k] : "?";
}

/* Shared by the plan and the native function: getitem with its checks. */
pw_status pw_plan_getitem(pw_value src, int64_t index, const char *node, pw_value *out);
pw_status pw_plan_getitem(pw_value src, int64_t index, const char *node, pw_value *out) {
    if (PW_UNLIKELY(src.kind != PW_VAL_TUPLE))
        return pw_error(PW_ERR_INVALID_ARG, "stitching: node %s: getitem on a non-tuple value (%s)",
                        node, value_kind_name(src.kind));
    int n = pw_tuple_size(src.as.tuple);
    int64_t i = index < 0 ? index + n : index;
    if (PW_UNLIKELY(i < 0 || i >= n))
        return pw_error(PW_ERR_INVALID_ARG, "stitching: node %s: index %lld out of range for a "
                        "tuple of %d", node, (long long)index, n);
    *out = pw_tuple_get(src.as.tuple, (int)i);
    value_retain(*out);
    return PW_OK;
}

pw_status pw_plan_check_call(const pw_plan *p, const pw_callable *submods, int nsub, int nargs);
pw_status pw_plan_check_call(const pw_plan *p, const pw_callable *submods, int nsub, int nargs) {
    if (nargs != p->nparams)
        return pw_error(PW_ERR_INVALID_ARG, "stitching %s: %d arguments given, the graph takes %d",
                        p->graph_name, nargs, p->nparams);
    if (nsub < p->nsubmods || (p->nsubmods && !submods))
        return pw_error(PW_ERR_INVALID_ARG, "stitching %s: %d submodules given, the plan needs %d",
                        p->graph_name, nsub, p->nsubmods);
    return PW_OK;
}

pw_status pw_plan_run(const pw_plan *p, const pw_callable *submods, int nsub, const pw_value *args,
                      int nargs, pw_value *out) {
    *out = pw_value_none();
    PW_TRY(pw_plan_check_call(p, submods, nsub, nargs));
    pw_value stack_temps[PW_PLAN_STACK_TEMPS];
    pw_value *T = stack_temps;
    if (p->ntemps > PW_PLAN_STACK_TEMPS && !(T = pw_host_alloc((size_t)p->ntemps * sizeof *T)))
        return PW_ERR_OOM;
    memset(T, 0, (size_t)p->ntemps * sizeof *T); /* all NONE */
    const pw_value *const space[3] = {T, args, p->consts};
#define V(w) (space[PW_OPND_SPACE(w)][PW_OPND_INDEX(w)])
    pw_value argv[PW_PLAN_MAX_CALL_ARGS];
    const uint32_t *const opnds = p->opnds;
    pw_status s = PW_OK;
    const pw_instr *ip = p->code;
    for (;; ip++) {
        switch ((pw_opcode)ip->op) {
        case PW_OP_CALL: {
            const uint32_t *o = opnds + ip->c;
            for (int j = 0; j < ip->n; j++) argv[j] = V(o[j]);
            const pw_callable *fn = &p->fns[ip->b];
            s = fn->fn(fn->user, argv, ip->n, &T[ip->a]);
            if (PW_UNLIKELY(s != PW_OK)) goto call_failed;
            break;
        }
        case PW_OP_CALLSUB: {
            const uint32_t *o = opnds + ip->c;
            for (int j = 0; j < ip->n; j++) argv[j] = V(o[j]);
            const pw_callable *fn = &submods[ip->b];
            if (PW_UNLIKELY(!fn->fn)) {
                s = pw_error(PW_ERR_INVALID_ARG, "stitching %s: node %s: submodule %u (%s) has no "
                             "callable", p->graph_name, p->names[p->code_name[ip - p->code]], ip->b,
                             p->submod_names[ip->b]);
                goto fail;
            }
            s = fn->fn(fn->user, argv, ip->n, &T[ip->a]);
            if (PW_UNLIKELY(s != PW_OK)) goto call_failed;
            break;
        }
        case PW_OP_GETITEM:
            s = pw_plan_getitem(V(ip->b), (int32_t)ip->c, p->names[p->code_name[ip - p->code]], &T[ip->a]);
            if (PW_UNLIKELY(s != PW_OK)) goto fail;
            break;
        case PW_OP_TUPLE: {
            pw_tuple *t;
            s = pw_tuple_new(ip->n, &t);
            if (PW_UNLIKELY(s != PW_OK)) goto fail;
            const uint32_t *o = opnds + ip->c;
            for (int j = 0; j < ip->n; j++) {
                uint32_t w = o[j];
                pw_value v = V(w);
                if (w & PW_OPND_MOVE) T[PW_OPND_INDEX(w)] = pw_value_none();
                else value_retain(v);
                pw_tuple_set(t, j, v);
            }
            T[ip->a] = pw_value_tuple(t);
            break;
        }
        case PW_OP_FREE:
            value_release(T[ip->a]);
            T[ip->a] = pw_value_none();
            break;
        case PW_OP_RETURN: {
            uint32_t w = ip->b;
            *out = V(w);
            if (w & PW_OPND_MOVE) T[PW_OPND_INDEX(w)] = pw_value_none();
            else value_retain(*out);
            goto done;
        }
        default:
            s = pw_error(PW_ERR_INTERNAL, "stitching: bad opcode %d", ip->op);
            goto fail;
        }
    }
#undef V
call_failed:
    T[ip->a] = pw_value_none();
    s = pw_error_context(s, "stitching %s: node %s", p->graph_name, p->names[p->code_name[ip - p->code]]);
fail:
    for (int i = 0; i < p->ntemps; i++) value_release(T[i]);
    if (T != stack_temps) pw_host_free(T);
    return s;
done:
    for (int i = 0; i < p->ntemps; i++) value_release(T[i]); /* all NONE unless a bug */
    if (T != stack_temps) pw_host_free(T);
    return PW_OK;
}

/* ---- disassembly ---------------------------------------------------------------------------- */

static void print_opnd(pw_sb *sb, uint32_t w) {
    static const char prefix[] = {'r', 'p', 'k', '?'};
    pw_sb_printf(sb, "%s%c%u", (w & PW_OPND_MOVE) ? "move " : "", prefix[PW_OPND_SPACE(w)], PW_OPND_INDEX(w));
}

static void print_opnds(pw_sb *sb, const pw_plan *p, const pw_instr *in) {
    pw_sb_puts(sb, "(");
    for (int j = 0; j < in->n; j++) {
        if (j) pw_sb_puts(sb, ", ");
        print_opnd(sb, p->opnds[in->c + j]);
    }
    pw_sb_puts(sb, ")");
}

pw_status pw_plan_print(const pw_plan *p, char **out) {
    pw_sb sb = {0};
    int ninl = 0;
    for (int i = 0; i < p->nsubmods; i++) ninl += p->submod_inlined[i];
    pw_sb_printf(&sb, "; plan %s: %d params, %d constants, %d ops, %d submodules (%d inlined), "
                 "%d registers, %d instructions\n", p->graph_name, p->nparams, p->nconsts, p->nfns,
                 p->nsubmods, ninl, p->ntemps, p->ncode);
    for (int i = 0; i < p->nparams; i++) pw_sb_printf(&sb, "; p%d = %%%s\n", i, p->param_names[i]);
    for (int i = 0; i < p->nconsts; i++) pw_sb_printf(&sb, "; k%d = %s\n", i, p->const_text[i]);
    for (int i = 0; i < p->nfns; i++) pw_sb_printf(&sb, "; fn%d = %s\n", i, p->fn_targets[i]);
    for (int i = 0; i < p->nsubmods; i++)
        pw_sb_printf(&sb, "; sub%d = %s%s\n", i, p->submod_names[i], p->submod_inlined[i] ? " (inlined)" : "");
    for (int pc = 0; pc < p->ncode; pc++) {
        const pw_instr *in = &p->code[pc];
        size_t start = sb.len;
        pw_sb_printf(&sb, "%5d  ", pc);
        switch ((pw_opcode)in->op) {
        case PW_OP_CALL:
            pw_sb_printf(&sb, "CALL     r%u := fn%u", in->a, in->b);
            print_opnds(&sb, p, in);
            break;
        case PW_OP_CALLSUB:
            pw_sb_printf(&sb, "CALLSUB  r%u := sub%u", in->a, in->b);
            print_opnds(&sb, p, in);
            break;
        case PW_OP_GETITEM:
            pw_sb_printf(&sb, "GETITEM  r%u := ", in->a);
            print_opnd(&sb, in->b);
            pw_sb_printf(&sb, "[%d]", (int32_t)in->c);
            break;
        case PW_OP_TUPLE:
            pw_sb_printf(&sb, "TUPLE    r%u := ", in->a);
            print_opnds(&sb, p, in);
            break;
        case PW_OP_FREE: pw_sb_printf(&sb, "FREE     r%u", in->a); break;
        case PW_OP_RETURN:
            pw_sb_puts(&sb, "RETURN   ");
            print_opnd(&sb, in->b);
            break;
        default: pw_sb_printf(&sb, "?%d", in->op);
        }
        size_t w = sb.len - start;
        if (w < 48) pw_sb_printf(&sb, "%*s", (int)(48 - w), "");
        pw_sb_printf(&sb, " ; %s\n", p->names[p->code_name[pc]]);
    }
    return pw_sb_finish(&sb, out);
}
