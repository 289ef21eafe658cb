/* The plan interpreter: one dispatch loop over the instructions of
 * plan_opcodes.h. */
#include "plan_internal.h"

/* Registers kept on the C stack during a run; larger frames are allocated. */
#define PW_PLAN_STACK_TEMPS 64

static const char *value_kind_name(pw_value_kind k) {
    static const char *const names[] = {"none", "tensor", "tuple", "int", "float", "bool", "string"};
    return (unsigned)k < PW_ARRAY_LEN(names) ? names[k] : "?";
}

/* Shared by the plan and the native function: getitem with its checks. */
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
    pw_plan_value_retain(*out);
    return PW_OK;
}

pw_status pw_plan_check_call(const pw_plan *p, const pw_callable *submods, int nsub, int nargs) {
    if (nargs != p->nparams)
        return pw_error(PW_ERR_INVALID_ARG, "stitching %s: %d arguments given, the graph takes %d",
                        p->graph_name, nargs, p->nparams);
    if (nsub < p->nsubmods || (p->nsubmods && !submods))
        return pw_error(PW_ERR_INVALID_ARG, "stitching %s: %d submodules given, the plan needs %d",
                        p->graph_name, nsub, p->nsubmods);
    return PW_OK;
}

/* V(w): the value operand w names, in the run's three spaces. */
#define V(w) (space[PW_OPND_SPACE(w)][PW_OPND_INDEX(w)])

/* TUPLE: T[A] := (V(O[C]), ...), each item retained, or moved out of T. */
static inline pw_status run_tuple(const pw_instr *ip, const uint32_t *opnds, const pw_value *const space[3],
                                  pw_value *T) {
    pw_tuple *t;
    PW_TRY(pw_tuple_new(ip->n, &t));
    const uint32_t *o = opnds + ip->c;
    for (int j = 0; j < ip->n; j++) {
        uint32_t w = o[j];
        pw_value v = V(w);
        if (w & PW_OPND_MOVE) T[PW_OPND_INDEX(w)] = pw_value_none();
        else pw_plan_value_retain(v);
        pw_tuple_set(t, j, v);
    }
    T[ip->a] = pw_value_tuple(t);
    return PW_OK;
}

/* Releases what the registers still hold (nothing after a clean run). */
static void release_frame(pw_value *T, int ntemps, const pw_value *stack_temps) {
    for (int i = 0; i < ntemps; i++) pw_plan_value_release(T[i]);
    if (T != stack_temps) pw_host_free(T);
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
    pw_value argv[PW_PLAN_MAX_CALL_ARGS];
    const uint32_t *const opnds = p->opnds;
    pw_status s = PW_OK;
    const pw_instr *ip = p->code;
    for (;; ip++) {
        switch ((pw_instr_op)ip->op) {
        case PW_INSTR_CALL: {
            const uint32_t *o = opnds + ip->c;
            for (int j = 0; j < ip->n; j++) argv[j] = V(o[j]);
            const pw_callable *fn = &p->fns[ip->b];
            s = fn->fn(fn->user, argv, ip->n, &T[ip->a]);
            if (PW_UNLIKELY(s != PW_OK)) goto call_failed;
            break;
        }
        case PW_INSTR_CALLSUB: {
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
        case PW_INSTR_GETITEM:
            s = pw_plan_getitem(V(ip->b), (int32_t)ip->c, p->names[p->code_name[ip - p->code]], &T[ip->a]);
            if (PW_UNLIKELY(s != PW_OK)) goto fail;
            break;
        case PW_INSTR_TUPLE:
            s = run_tuple(ip, opnds, space, T);
            if (PW_UNLIKELY(s != PW_OK)) goto fail;
            break;
        case PW_INSTR_FREE:
            pw_plan_value_release(T[ip->a]);
            T[ip->a] = pw_value_none();
            break;
        case PW_INSTR_RETURN: {
            uint32_t w = ip->b;
            *out = V(w);
            if (w & PW_OPND_MOVE) T[PW_OPND_INDEX(w)] = pw_value_none();
            else pw_plan_value_retain(*out);
            release_frame(T, p->ntemps, stack_temps); /* all NONE unless a bug */
            return PW_OK;
        }
        default:
            s = pw_error(PW_ERR_INTERNAL, "stitching: bad opcode %d", ip->op);
            goto fail;
        }
    }
call_failed:
    T[ip->a] = pw_value_none();
    s = pw_error_context(s, "stitching %s: node %s", p->graph_name, p->names[p->code_name[ip - p->code]]);
fail:
    release_frame(T, p->ntemps, stack_temps);
    return s;
}

#undef V
