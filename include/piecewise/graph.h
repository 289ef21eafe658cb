/* piecewise public API: graph layer. Included by piecewise.h; may be included alone.
 *
 *   IR        an FX-like graph (pw_ir) with a C builder, validation, a text
 *             format (docs/graph-format.md) and DOT output
 *   split     cut a graph at splitting ops (attention) into a stitching
 *             graph plus subgraphs
 *   plan      stitching code generation (docs/codegen.md): one
 *             liveness analysis, three forms: a plan interpreter, C source,
 *             and that C compiled at run time (native)
 *
 * Strings returned through char **out are allocated with malloc; the caller
 * frees them with free(). */
/* piecewise.h first, outside the guard: it includes every layer header in
 * order, this one included, so whichever header comes first the
 * declarations appear lowest layer first. */
#include "piecewise.h"

#ifndef PIECEWISE_GRAPH_H
#define PIECEWISE_GRAPH_H

#include "piecewise/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* IR: nodes and argument values                                             */
/* ------------------------------------------------------------------------ */

/* A graph. Not pw_graph: that name is the recorded device graph. A graph
 * may own named subgraphs (the targets of its call_module nodes), so a split
 * graph is one object and one text document. */
typedef struct pw_ir pw_ir;

typedef enum pw_ir_node_kind {
    PW_IR_PLACEHOLDER = 0, /* a parameter of the graph, in order of appearance */
    PW_IR_CALL_FUNCTION,   /* a registered op: target(args, kwargs) */
    PW_IR_CALL_MODULE,     /* a submodule: a subgraph or an external piece */
    PW_IR_GETITEM,         /* args[0] is a node, args[1] an integer index */
    PW_IR_OUTPUT,          /* args[0] is the returned value; exactly one, last */
    PW_IR_NODE_KIND_COUNT_
} pw_ir_node_kind;

/* "placeholder", "call_function", ... */
PW_API const char *pw_ir_node_kind_name(pw_ir_node_kind k);

typedef enum pw_ir_arg_kind {
    PW_IR_ARG_NODE = 0, /* reference to an earlier node of the same graph */
    PW_IR_ARG_INT,
    PW_IR_ARG_FLOAT,
    PW_IR_ARG_STRING,
    PW_IR_ARG_BOOL,
    PW_IR_ARG_NONE,
    PW_IR_ARG_LIST,  /* [a, b]  (passed to callables as a pw_tuple) */
    PW_IR_ARG_TUPLE  /* (a, b)  (passed to callables as a pw_tuple) */
} pw_ir_arg_kind;

/* An argument value. Builders copy what they are given (strings and
 * items included); accessors return views into the graph, valid while the
 * graph lives and is not modified. */
typedef struct pw_ir_arg {
    pw_ir_arg_kind kind;
    union {
        int node; /* node index */
        int64_t i;
        double f;
        bool b;
        const char *s;
        struct {
            const struct pw_ir_arg *items;
            int n;
        } seq;
    } as;
} pw_ir_arg;

typedef struct pw_ir_kwarg {
    const char *name;
    pw_ir_arg value;
} pw_ir_kwarg;

static inline pw_ir_arg pw_ir_arg_node(int node) { pw_ir_arg a; a.kind = PW_IR_ARG_NODE; a.as.node = node; return a; }
static inline pw_ir_arg pw_ir_arg_int(int64_t i) { pw_ir_arg a; a.kind = PW_IR_ARG_INT; a.as.i = i; return a; }
static inline pw_ir_arg pw_ir_arg_float(double f) { pw_ir_arg a; a.kind = PW_IR_ARG_FLOAT; a.as.f = f; return a; }
static inline pw_ir_arg pw_ir_arg_string(const char *s) { pw_ir_arg a; a.kind = PW_IR_ARG_STRING; a.as.s = s; return a; }
static inline pw_ir_arg pw_ir_arg_bool(bool b) { pw_ir_arg a; a.kind = PW_IR_ARG_BOOL; a.as.b = b; return a; }
static inline pw_ir_arg pw_ir_arg_none(void) { pw_ir_arg a; a.kind = PW_IR_ARG_NONE; a.as.i = 0; return a; }
static inline pw_ir_arg pw_ir_arg_list(const pw_ir_arg *items, int n) { pw_ir_arg a; a.kind = PW_IR_ARG_LIST; a.as.seq.items = items; a.as.seq.n = n; return a; }
static inline pw_ir_arg pw_ir_arg_tuple(const pw_ir_arg *items, int n) { pw_ir_arg a; a.kind = PW_IR_ARG_TUPLE; a.as.seq.items = items; a.as.seq.n = n; return a; }

/* Optional type of a node's value: a tensor whose dims may be the symbolic
 * token dimension (written s0 in text, like FX), or a symbolic integer (the
 * token count itself). */
#define PW_IR_DIM_TOKENS (-1)
typedef enum pw_ir_type_kind {
    PW_IR_TYPE_UNKNOWN = 0, /* no annotation */
    PW_IR_TYPE_TENSOR,      /* f32[s0, 64] */
    PW_IR_TYPE_SYMINT       /* sym: the value of s0 */
} pw_ir_type_kind;

typedef struct pw_ir_type {
    pw_ir_type_kind kind;
    pw_dtype dtype;             /* tensors */
    int ndim;                   /* tensors, 0..PW_MAX_DIMS */
    int64_t dims[PW_MAX_DIMS];  /* >= 0, or PW_IR_DIM_TOKENS */
} pw_ir_type;

/* ------------------------------------------------------------------------ */
/* IR: building                                                              */
/* ------------------------------------------------------------------------ */

/* Longest node, graph, target or keyword name. */
#define PW_IR_MAX_NAME 256

/* name: an identifier ([A-Za-z_][A-Za-z0-9_]*). */
PW_API pw_status pw_ir_new(const char *name, pw_ir **out);
PW_API void pw_ir_free(pw_ir *g);
PW_API const char *pw_ir_name(const pw_ir *g);

/* Every builder returns the new node's index through *out (may be NULL).
 * Node names are identifiers, unique within the graph. Targets of
 * call_function may contain dots ("vllm.unified_attention"). Node
 * references must name existing nodes (PW_ERR_INVALID_ARG otherwise). */
PW_API pw_status pw_ir_add_placeholder(pw_ir *g, const char *name, int *out);
PW_API pw_status pw_ir_add_call_function(pw_ir *g, const char *name, const char *target,
                                         const pw_ir_arg *args, int nargs,
                                         const pw_ir_kwarg *kwargs, int nkwargs, int *out);
PW_API pw_status pw_ir_add_call_module(pw_ir *g, const char *name, const char *target,
                                       const pw_ir_arg *args, int nargs,
                                       const pw_ir_kwarg *kwargs, int nkwargs, int *out);
PW_API pw_status pw_ir_add_getitem(pw_ir *g, const char *name, int src_node, int64_t index,
                                   int *out);
/* Adds the output node (named "output", or output_1, ... if taken). Once. */
PW_API pw_status pw_ir_set_output(pw_ir *g, pw_ir_arg value, int *out);
PW_API pw_status pw_ir_set_node_type(pw_ir *g, int node, const pw_ir_type *type);
/* A full-line comment printed just before the next node added (or before
 * the end of the graph). text excludes the leading '#'. */
PW_API pw_status pw_ir_add_comment(pw_ir *g, const char *text);

/* Submodules. pw_ir_add_subgraph takes ownership of sub (also on failure);
 * its name must be unique among g's subgraphs. */
PW_API pw_status pw_ir_add_subgraph(pw_ir *g, pw_ir *sub);
PW_API int pw_ir_num_subgraphs(const pw_ir *g);
PW_API const pw_ir *pw_ir_subgraph(const pw_ir *g, int i);
/* NULL if there is none of that name. */
PW_API const pw_ir *pw_ir_find_subgraph(const pw_ir *g, const char *name);
/* A splitting subgraph is one the splitter made around splitting ops. */
PW_API bool pw_ir_is_splitting(const pw_ir *g);
PW_API void pw_ir_set_splitting(pw_ir *g, bool splitting);

/* Deep copy, subgraphs included. */
PW_API pw_status pw_ir_clone(const pw_ir *g, pw_ir **out);

/* ------------------------------------------------------------------------ */
/* IR: reading                                                               */
/* ------------------------------------------------------------------------ */

PW_API int pw_ir_num_nodes(const pw_ir *g);
PW_API pw_ir_node_kind pw_ir_node_kind_of(const pw_ir *g, int node);
PW_API const char *pw_ir_node_name(const pw_ir *g, int node);
/* call_function / call_module target; NULL for other kinds. */
PW_API const char *pw_ir_node_target(const pw_ir *g, int node);
PW_API int pw_ir_node_num_args(const pw_ir *g, int node);
PW_API const pw_ir_arg *pw_ir_node_arg(const pw_ir *g, int node, int i);
PW_API int pw_ir_node_num_kwargs(const pw_ir *g, int node);
PW_API const pw_ir_kwarg *pw_ir_node_kwarg(const pw_ir *g, int node, int i);
/* Distinct nodes that reference this node, in graph order. */
PW_API int pw_ir_node_num_users(const pw_ir *g, int node);
PW_API int pw_ir_node_user(const pw_ir *g, int node, int i);
PW_API const pw_ir_type *pw_ir_node_type(const pw_ir *g, int node);
/* 1-based source line if the graph was parsed, else 0. */
PW_API int pw_ir_node_line(const pw_ir *g, int node);
/* -1 if absent. */
PW_API int pw_ir_find_node(const pw_ir *g, const char *name);
PW_API int pw_ir_output_node(const pw_ir *g);
PW_API int pw_ir_num_placeholders(const pw_ir *g);

/* Checks the graph and its subgraphs: exactly one output, last; getitem
 * sources are nodes that can be tuples (not constants, not tensor- or
 * sym-typed nodes) and indices are integers; call_module arity matches the
 * subgraph's placeholders where the target is a subgraph. Errors name the
 * graph, the node and (for parsed graphs) the line. */
PW_API pw_status pw_ir_validate(const pw_ir *g);

/* ------------------------------------------------------------------------ */
/* Text format (docs/graph-format.md)                                        */
/* ------------------------------------------------------------------------ */

/* Parses a document: the first graph is returned, later graphs become its
 * subgraphs. Syntax errors, undefined, forward and duplicate names are
 * PW_ERR_PARSE with "line L:C". Meaning is pw_ir_validate's to check (so a
 * graph that is well-formed text but invalid can still be read and
 * reported on). len may be (size_t)-1 for a NUL-terminated text. */
PW_API pw_status pw_ir_parse(const char *text, size_t len, pw_ir **out);
PW_API pw_status pw_ir_parse_file(const char *path, pw_ir **out);
/* Canonical text. print(parse(print(g))) == print(g), and a canonically
 * formatted document (comments included) prints back byte for byte. */
PW_API pw_status pw_ir_print(const pw_ir *g, char **out);
/* Graphviz. Subgraphs become clusters; call_module nodes point at them;
 * splitting subgraphs and their ops are highlighted. */
PW_API pw_status pw_ir_to_dot(const pw_ir *g, char **out);

/* ------------------------------------------------------------------------ */
/* Splitter                                                                  */
/* ------------------------------------------------------------------------ */

/* split_ops[0..n_split_ops) names the splitting ops: a call_function splits
 * when its target, or the part of it after the last '.', equals one of them
 * ("vllm.unified_attention" matches "unified_attention"). The caller always
 * names them (the graph layer knows no op names): the model layer passes
 * pw_op_splitting_names() of its op table; a vLLM graph's are
 * unified_attention and unified_attention_with_output. No names (NULL or
 * n_split_ops <= 0), or a NULL or empty name, is PW_ERR_INVALID_ARG.
 *
 * One linear walk of g (which must have no call_module nodes). Each run of
 * consecutive splitting ops becomes one splitting subgraph; every other
 * maximal run becomes a plain subgraph; a getitem joins its producer's
 * subgraph. *out is the stitching graph (placeholders, call_module submod_<i>
 * per subgraph, getitems for values that cross subgraphs, output) owning the
 * subgraphs submod_0, submod_1, ... in order; pw_ir_is_splitting marks the
 * splitting ones. A subgraph with
 * several values used later returns a tuple; with one, that value; with none,
 * an empty tuple. */
PW_API pw_status pw_split(const pw_ir *g, const char *const *split_ops, int n_split_ops,
                          pw_ir **out);

/* Refuses a split graph whose splitting subgraphs return values that later
 * nodes read (a splitting op that allocates its own output, whose address
 * would change from one replay to the next): such a graph cannot be replayed
 * piecewise. PW_ERR_UNSUPPORTED naming the subgraph, the op and the reader. */
PW_API pw_status pw_check_split_for_replay(const pw_ir *split);

/* ------------------------------------------------------------------------ */
/* Stitching plan (docs/codegen.md)                                          */
/* ------------------------------------------------------------------------ */

typedef struct pw_plan pw_plan;

typedef struct pw_plan_options {
    /* Whether the call_module with this target is inlined (its ops go into
     * the flat plan) or called through the submodule table. NULL: inline
     * exactly the splitting subgraphs. Inlining a target that is not a
     * subgraph is PW_ERR_NOT_FOUND. */
    bool (*should_inline)(void *user, const pw_ir *stitch, const char *target);
    /* Binds every call_function target reached (top level or inlined) to a
     * callable at build time. Required if there is any call_function. */
    pw_status (*resolve_op)(void *user, const char *target, pw_callable *out);
    void *user;
    /* Name of the function in emitted C (an identifier); NULL: "pw_stitch". */
    const char *function_name;
} pw_plan_options;

/* Runtime conventions (same for the plan and the native function):
 *  - a callable gets its positional arguments, then its keyword values in
 *    order; arguments are borrowed; constants are pw_values (strings borrowed
 *    from the plan, lists/tuples as plan-owned pw_tuples);
 *  - a call returns a new reference; getitem retains the item;
 *  - parameters are borrowed from the caller and never released;
 *  - a value is released right after its last user unless that user is the
 *    output, which hands the reference to the caller; an unused value is
 *    released right after it is made;
 *  - *out receives a new reference (parameters and constants in the output
 *    are retained);
 *  - on error everything the run owns is released and *out is NONE. */
PW_API pw_status pw_plan_build(const pw_ir *stitch, const pw_plan_options *opts, pw_plan **out);
PW_API void pw_plan_free(pw_plan *p);
PW_API int pw_plan_num_params(const pw_plan *p);
/* Every call_module target in first-seen order (inlined ones included, as
 * vLLM numbers them); the submodule table passed to run is indexed the same way and
 * entries of inlined targets are ignored (may be {NULL}). */
PW_API int pw_plan_num_submodules(const pw_plan *p);
PW_API const char *pw_plan_submodule_name(const pw_plan *p, int i);
PW_API bool pw_plan_submodule_inlined(const pw_plan *p, int i);
/* Nodes the function executes: calls, getitems, tuple builds (after inlining). */
PW_API int pw_plan_num_nodes(const pw_plan *p);
PW_API pw_status pw_plan_run(const pw_plan *p, const pw_callable *submods, int nsub,
                             const pw_value *args, int nargs, pw_value *out);
/* Disassembly: one instruction per line with the node it comes from. */
PW_API pw_status pw_plan_print(const pw_plan *p, char **out);
/* Self-contained C source of the same function (see docs/codegen.md). */
PW_API pw_status pw_plan_emit_c(const pw_plan *p, char **out);

/* ------------------------------------------------------------------------ */
/* Native: the emitted C compiled at run time                                */
/* ------------------------------------------------------------------------ */

/* Compiles pw_plan_emit_c(plan) with the system C compiler (env PW_CC, else
 * CC, else the compiler piecewise was built with) into a shared object and
 * loads it. If that fails, logs one warning and falls back to running the
 * plan (still PW_OK; pw_native_is_compiled says which). The plan must
 * outlive the native function. */
typedef struct pw_native pw_native;
PW_API pw_status pw_native_compile(const pw_plan *plan, pw_native **out);
PW_API void pw_native_free(pw_native *n);
PW_API bool pw_native_is_compiled(const pw_native *n);
PW_API pw_status pw_native_run(const pw_native *n, const pw_callable *submods, int nsub,
                               const pw_value *args, int nargs, pw_value *out);

#ifdef __cplusplus
}
#endif
#endif
