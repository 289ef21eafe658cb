/* Stitching code generation (docs/codegen.md), one file per
 * stage:
 *
 *   plan_lower.c   walk the stitching graph; inline the chosen subgraphs;
 *                  bind ops; turn constants into plan-owned values -> flat
 *                  program
 *   plan_regs.c    liveness: for each value its last user; FREE after it
 *                  unless that user builds the output (then the reference
 *                  moves to the caller); registers: values share them once
 *                  freed -> compact instructions
 *   plan_run.c     run: one dispatch loop
 *   plan_disasm.c  pw_plan_print
 *
 * emit_c.c prints the same program as C and native.c compiles that. This
 * file builds a plan from the stages and frees it. */
#include "plan_internal.h"

pw_status pw_plan_oom(void) { return pw_error(PW_ERR_OOM, "out of memory building a stitching plan"); }

static void free_strs(char **v, int n) {
    for (int i = 0; i < n; i++) pw_host_free(v[i]);
    pw_host_free(v);
}

void pw_plan_free(pw_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->nconsts; i++) pw_plan_drop_constant(p->consts[i]);
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
    if (!p) return pw_plan_oom();
    pw_status s = PW_OK;
    if (!(p->graph_name = pw_host_strdup(stitch->name)) || !(p->function_name = pw_host_strdup(fname)))
        s = pw_plan_oom();
    if (s == PW_OK) s = pw_plan_lower(stitch, opts, p);
    if (s == PW_OK) s = pw_plan_analyse(p);
    if (s == PW_OK) s = pw_plan_assign_registers(p);
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
