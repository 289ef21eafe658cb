/* piecewise public API: piecewise modules. Included by piecewise.h; may be included alone.
 *
 * A module is the whole capture chain built from one graph: the graph is
 * split at the splitting ops the caller names, the stitching graph becomes
 * a plan (or native C), every piece between two splitting ops gets a
 * PIECEWISE wrapper, the whole stitched forward a FULL wrapper, and a
 * dispatcher says which descriptors to capture and which one a step runs
 * with. Semantics: docs/modules.md; a complete program: examples/mlp.c. */
/* piecewise.h first, outside the guard: it includes every layer header in
 * order, this one included, so whichever header comes first the
 * declarations appear lowest layer first. */
#include "piecewise.h"

#ifndef PIECEWISE_MODULE_H
#define PIECEWISE_MODULE_H

#include "piecewise/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pw_module pw_module;

/* Binds a call_function target of the graph to the callable that runs it
 * (the caller's kernels): called once per distinct target while the module
 * is built. An error fails pw_module_new with that error. */
typedef struct pw_op_resolver {
    pw_status (*fn)(void *user, const char *target, pw_callable *out);
    void *user;
} pw_op_resolver;

/* How the stitching graph runs. */
typedef enum pw_stitch_kind {
    PW_STITCH_PLAN = 0, /* the plan interpreter (docs/codegen.md) */
    PW_STITCH_NATIVE,   /* the plan's C compiled at build time (pw_native_compile: falls back
                           to the plan, with a warning, when no compiler works) */
    PW_STITCH_KIND_COUNT_
} pw_stitch_kind;

/* The piece index an interposer gets for the whole stitched forward. */
#define PW_MODULE_FORWARD (-1)

/* Runs in place of a piece's code (piece: its submodule index) or of the
 * whole stitched forward (PW_MODULE_FORWARD) whenever that runs, eagerly
 * or under a capture; `plain` runs it as the module would. For code that
 * must see what a capture records. */
typedef pw_status (*pw_module_interpose_fn)(void *user, int piece, pw_callable plain,
                                            const pw_value *args, int nargs, pw_value *out);

/* Zero-initialised options are the defaults. */
typedef struct pw_module_options {
    const char *name;                      /* the FULL wrapper's name; NULL: "forward" */
    const pw_dispatcher_config *dispatcher; /* NULL: pw_dispatcher_config_init's defaults */
    pw_stitch_kind stitch;
    /* verify_capture on the FULL wrapper (its graph holds every piece's
     * launches), with the optional perturbation hook; see pw_wrapper_options. */
    bool verify_capture;
    pw_perturb_fn perturb;
    void *perturb_user;
    pw_module_interpose_fn interpose; /* optional */
    void *interpose_user;
} pw_module_options;

PW_API void pw_module_options_init(pw_module_options *opts);

/* Builds a module from graph (borrowed; the module keeps its own split
 * copy): pw_split at split_ops, pw_check_split_for_replay, one plan for
 * the stitching graph (splitting subgraphs inlined, so the splitting ops
 * run eagerly between the pieces) and one per piece, their wrappers and the
 * dispatcher. stream (where everything launches and replays) and
 * graph_pool (where every capture allocates) are borrowed and must outlive
 * the module. opts may be NULL. Errors name the stage that failed. */
PW_API pw_status pw_module_new(const pw_ir *graph, const char *const *split_ops, int n_split_ops,
                               pw_op_resolver resolver, pw_stream *stream, pw_pool *graph_pool,
                               const pw_module_options *opts, pw_module **out);
/* Frees the wrappers (and their graphs), plans and dispatcher. NULL is a no-op. */
PW_API void pw_module_free(pw_module *m);

/* One step with an explicit mode and descriptor: pushes the forward
 * context {mode, *desc, attn_metadata} for the step (so ops that read it,
 * and the pieces' wrappers, see it), then calls the FULL wrapper with
 * pw_graph_wrapper_call_as. NONE runs everything eagerly; PIECEWISE replays
 * (or, in a capture phase, captures) each piece with the splitting ops
 * eager between them; FULL replays one graph of the whole forward. args
 * are the graph's placeholders, in order; *out is a new reference. */
PW_API pw_status pw_module_run(pw_module *m, pw_runtime_mode mode, const pw_batch_desc *desc,
                               const void *attn_metadata, const pw_value *args, int nargs,
                               pw_value *out);

/* The inputs of one capture run: write the persistent input buffers for
 * desc (at most desc->num_tokens rows) and return the arguments, borrowed
 * until the next call. */
typedef pw_status (*pw_module_inputs_fn)(void *user, pw_runtime_mode mode,
                                         const pw_batch_desc *desc, const pw_value **args,
                                         int *nargs);

/* pw_capture_all over the module's capture list (PIECEWISE first, then
 * FULL, each largest first), each step a pw_module_run of inputs' arguments.
 * opts may be NULL (then, as when opts->graph_pool is NULL, the module's graph pool
 * decides the warm-ups and fills the report); out may be NULL. */
PW_API pw_status pw_module_capture(pw_module *m, pw_module_inputs_fn inputs, void *user,
                                   const pw_capture_options *opts, pw_capture_report *out);
/* pw_capture_plan over the module's capture list: predicts the graph
 * pool's reservation to the byte (the pool must be empty). */
PW_API pw_status pw_module_plan_capture(pw_module *m, pw_module_inputs_fn inputs, void *user,
                                        const pw_capture_options *opts,
                                        pw_capture_plan_report *out);
/* Captures one item (pw_capture_one), inside a capture phase of its own.
 * opts may be NULL. */
PW_API pw_status pw_module_capture_one(pw_module *m, const pw_capture_item *item,
                                       pw_module_inputs_fn inputs, void *user,
                                       const pw_capture_options *opts);

/* Pieces, stitching and wrappers, for inspection. Indices are the
 * stitching plan's submodules; the splitting ones are inlined and have no
 * plan and no wrapper (NULL). Borrowed, valid while the module lives. */
PW_API pw_dispatcher *pw_module_dispatcher(const pw_module *m);
PW_API const pw_ir *pw_module_split_graph(const pw_module *m);
PW_API const pw_plan *pw_module_stitch_plan(const pw_module *m);
/* True when the stitching runs as compiled C (PW_STITCH_NATIVE that compiled). */
PW_API bool pw_module_stitch_is_native(const pw_module *m);
PW_API int pw_module_num_submodules(const pw_module *m);
/* Submodules with a wrapper (the pieces between splitting ops). */
PW_API int pw_module_num_pieces(const pw_module *m);
PW_API const pw_plan *pw_module_piece_plan(const pw_module *m, int i);
PW_API pw_graph_wrapper *pw_module_piece_wrapper(const pw_module *m, int i);
PW_API pw_graph_wrapper *pw_module_full_wrapper(const pw_module *m);
/* Whether every wrapper item.mode uses (the FULL one, or every piece's)
 * has a graph for item.desc. */
PW_API bool pw_module_has_graphs(const pw_module *m, const pw_capture_item *item);
/* Host bytes of those graphs (pw_graph_wrapper_graph_bytes summed). */
PW_API size_t pw_module_graph_bytes(const pw_module *m, const pw_capture_item *item);
/* Frees those graphs (pw_graph_wrapper_remove on each wrapper that has one). */
PW_API pw_status pw_module_remove_graphs(pw_module *m, const pw_capture_item *item);

#ifdef __cplusplus
}
#endif
#endif
