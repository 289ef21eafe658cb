/* The stitching plan's layout, shared by the builder and interpreter
 * (plan.c), the C emitter (emit_c.c) and the native loader (native.c). */
#ifndef PW_PLAN_INTERNAL_H
#define PW_PLAN_INTERNAL_H

#include "graph_internal.h"
#include "plan_opcodes.h"

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

#endif
