/* The stitching plan's layout, shared by the builder (plan.c and its
 * stages plan_lower.c, plan_regs.c), the interpreter (plan_run.c), the
 * disassembler (plan_disasm.c), the C emitter (emit_c.c) and the native
 * loader (native.c). */
#ifndef PW_PLAN_INTERNAL_H
#define PW_PLAN_INTERNAL_H

#include "graph_internal.h"
#include "plan_opcodes.h"
#include "tensor.h"

/* One operation of the lowered program, before register allocation: what
 * liveness analyses and the C emitter prints. Temporaries are numbered per
 * value (SSA), operands use the same words as instructions but index values
 * instead of registers. */
typedef struct pw_flat_op {
    uint8_t op;       /* CALL, CALLSUB, GETITEM, TUPLE or RETURN */
    bool is_output;   /* built for the output: may move its operands */
    int dst;          /* value defined, or -1 */
    int fn;           /* CALL: fns index; CALLSUB: submodule index */
    uint32_t src;     /* GETITEM source operand; RETURN operand */
    int64_t index;    /* GETITEM */
    int first, n;     /* operands in fopnds */
    int free_first, nfree; /* values released right after, in free_vals */
    int name;         /* index in names: the node this comes from */
} pw_flat_op;

struct pw_plan {
    char *graph_name;
    char *function_name;
    int nparams;
    char **param_names;

    /* constants */
    pw_value *consts;
    char **const_text; /* how each constant reads in the graph text */
    int nconsts;

    /* bound ops */
    pw_callable *fns;
    char **fn_targets;
    int nfns;

    /* submodule table layout */
    char **submod_names;
    bool *submod_inlined;
    int nsubmods;

    /* names of nodes ("%x", or "%submod_1.x" inside an inlined subgraph) */
    char **names;
    int nnames;

    /* the lowered program */
    pw_flat_op *fops;
    int nfops;
    uint32_t *fopnds;
    int nfopnds;
    int *free_vals;
    int nfree_vals;
    int *value_name; /* value -> names index */
    int nvalues;

    /* the executable form */
    pw_instr *code;
    int ncode;
    uint32_t *opnds;
    int nopnds;
    int *code_name; /* instruction -> names index */
    int ntemps;     /* registers */
    int nnodes;     /* calls, getitems and tuple builds executed */
};

/* ---- the stages of pw_plan_build (plan.c) ---------------------------------------------- */

/* The error of a failed allocation while building. */
pw_status pw_plan_oom(void);
/* plan_lower.c: the flat program, parameters, constants, bound ops and the
 * submodule table of stitch into p. */
pw_status pw_plan_lower(const pw_ir *stitch, const pw_plan_options *opts, pw_plan *p);
/* Frees a constant made by lowering (its strings are plan-owned copies). */
void pw_plan_drop_constant(pw_value v);
/* plan_regs.c: liveness (FREE points and MOVE operands), then registers
 * and the instructions. */
pw_status pw_plan_analyse(pw_plan *p);
pw_status pw_plan_assign_registers(pw_plan *p);

/* ---- shared by the interpreter (plan_run.c) and the native function ---------------------- */

/* Reference counting on the hot path: tensors are counted inline (the
 * layout is the library's own, tensor.h); only a last release, and tuples,
 * go through the core functions. Scalars and strings are not counted. The
 * native function gets these through its runtime table (native.c). */
static inline void pw_plan_value_retain(pw_value v) {
    if (v.kind == PW_VAL_TENSOR) v.as.tensor->refcount++;
    else if (v.kind == PW_VAL_TUPLE) pw_tuple_retain(v.as.tuple);
}
static inline void pw_plan_value_release(pw_value v) {
    if (v.kind == PW_VAL_TENSOR) {
        if (v.as.tensor->refcount > 1) v.as.tensor->refcount--;
        else pw_tensor_release(v.as.tensor);
    } else if (v.kind == PW_VAL_TUPLE) {
        pw_tuple_release(v.as.tuple);
    }
}

/* getitem with its checks (tuple, index in range); retains the item. */
pw_status pw_plan_getitem(pw_value src, int64_t index, const char *node, pw_value *out);
/* The argument and submodule counts a run of p needs. */
pw_status pw_plan_check_call(const pw_plan *p, const pw_callable *submods, int nsub, int nargs);

#endif
