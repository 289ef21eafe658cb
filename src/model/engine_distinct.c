/* Distinct-piece capture: each distinct piece is captured once per size,
 * and the pieces identical to it are made by relocating that capture. This
 * file is the engine's use of relocation (include/piecewise/relocate.h),
 * which does the work: it knows which pieces are the same, keeps one
 * program per group and size, and counts what it made.
 *
 * Which pieces are the same comes from the split graph: two pieces whose IR
 * is identical except for node and graph names (same ops, same arguments
 * by position, same constants and types) form a group. In a Llama every
 * layer's piece is one group. Nothing here knows it is a Llama.
 *
 * The first piece of a group captured at a size is captured for real while
 * pw_reloc_record describes it as a program (its launches with every
 * address word as an argument, a block of the capture or a persistent
 * engine region, the graph-pool allocations and releases, the output).
 * Another piece of the group at that size runs the program instead of its
 * plan (pw_reloc_program_run): what a real capture of that piece would have
 * recorded, graph-pool addresses included. With verify_capture the engine
 * proves it for every relocated piece (pw_reloc_program_run_checked).
 *
 * The program is run inside whatever capture is open, so a FULL capture,
 * which runs every piece inside one graph, relocates its layers from the
 * same programs. Arguments whose shapes, dtypes, strides or scalar values
 * differ from the recorded ones (a layer with another weight type) are
 * captured for real.
 *
 * The persistent regions are the engine's persistent pool's blocks, then
 * its KV cache pool's, in allocation order: the same list in every engine
 * built from the same model and configuration.
 *
 * With a graph cache (engine_cache.c) every piece has a program (alone, it
 * is its own group) and so has each FULL graph (the whole forward's), all
 * written to disk after the capture; the next engine loads them and runs
 * them instead of the plans. */
#include "model/engine_internal.h"

#include "model/graph_cache.h"
#include "ops/kernel_set.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- groups: pieces identical modulo names -------------------------------------------- */

static bool arg_equal(const pw_ir_arg *a, const pw_ir_arg *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case PW_IR_ARG_NODE: return a->as.node == b->as.node;
    case PW_IR_ARG_INT: return a->as.i == b->as.i;
    case PW_IR_ARG_FLOAT: return memcmp(&a->as.f, &b->as.f, sizeof a->as.f) == 0;
    case PW_IR_ARG_BOOL: return a->as.b == b->as.b;
    case PW_IR_ARG_STRING: return strcmp(a->as.s, b->as.s) == 0;
    case PW_IR_ARG_NONE: return true;
    case PW_IR_ARG_LIST:
    case PW_IR_ARG_TUPLE:
        if (a->as.seq.n != b->as.seq.n) return false;
        for (int i = 0; i < a->as.seq.n; i++)
            if (!arg_equal(&a->as.seq.items[i], &b->as.seq.items[i])) return false;
        return true;
    }
    return false;
}

static bool type_equal(const pw_ir_type *a, const pw_ir_type *b) {
    if (!a || !b) return a == b;
    if (a->kind != b->kind) return false;
    if (a->kind != PW_IR_TYPE_TENSOR) return true;
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

static bool str_equal(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

bool pw_engine_ir_same_modulo_names(const pw_ir *a, const pw_ir *b) {
    int n = pw_ir_num_nodes(a);
    if (n != pw_ir_num_nodes(b) || pw_ir_num_subgraphs(a) || pw_ir_num_subgraphs(b) ||
        pw_ir_output_node(a) != pw_ir_output_node(b))
        return false;
    for (int i = 0; i < n; i++) {
        if (pw_ir_node_kind_of(a, i) != pw_ir_node_kind_of(b, i) ||
            !str_equal(pw_ir_node_target(a, i), pw_ir_node_target(b, i)) ||
            !type_equal(pw_ir_node_type(a, i), pw_ir_node_type(b, i)))
            return false;
        int na = pw_ir_node_num_args(a, i), nk = pw_ir_node_num_kwargs(a, i);
        if (na != pw_ir_node_num_args(b, i) || nk != pw_ir_node_num_kwargs(b, i)) return false;
        for (int j = 0; j < na; j++)
            if (!arg_equal(pw_ir_node_arg(a, i, j), pw_ir_node_arg(b, i, j))) return false;
        for (int j = 0; j < nk; j++) {
            const pw_ir_kwarg *x = pw_ir_node_kwarg(a, i, j), *y = pw_ir_node_kwarg(b, i, j);
            if (strcmp(x->name, y->name) != 0 || !arg_equal(&x->value, &y->value)) return false;
        }
    }
    return true;
}

/* ---- state ----------------------------------------------------------------------------- */

pw_status pw_engine_distinct_new(pw_engine *e) {
    if (!e->cfg.capture_distinct && !e->cfg.graph_cache_dir) return PW_OK;
    e->distinct = pw_host_calloc(1, sizeof *e->distinct);
    if (!e->distinct) return PW_ERR_OOM;
    return pw_reloc_regions_new(&e->distinct->regions);
}

void pw_engine_regions_observe(pw_engine *e, pw_pool *pool, bool on) {
    if (!e->distinct) return;
    if (pw_reloc_regions_observe(e->distinct->regions, pool, on) != PW_OK)
        e->distinct->regions_failed = true;
}

pw_status pw_engine_distinct_init(pw_engine *e) {
    for (int i = 0; i < e->n_submods; i++) e->pieces[i].group = -1;
    if (!e->distinct) return PW_OK;
    if (e->distinct->regions_failed) return PW_ERR_OOM;
    bool share = e->cfg.capture_distinct, every = e->cfg.graph_cache_dir != NULL;
    const pw_ir *split = pw_module_split_graph(e->module);
    const pw_plan *stitch = pw_module_stitch_plan(e->module);
    for (int i = 0; i < e->n_submods; i++) {
        if (!e->pieces[i].plan) continue;
        const pw_ir *sub = pw_ir_find_subgraph(split, pw_plan_submodule_name(stitch, i));
        for (int j = 0; share && j < i && e->pieces[i].group < 0; j++) {
            if (!e->pieces[j].plan) continue;
            const pw_ir *rep = pw_ir_find_subgraph(split, pw_plan_submodule_name(stitch, j));
            if (sub && rep && pw_engine_ir_same_modulo_names(rep, sub)) {
                e->pieces[i].group = e->pieces[j].group >= 0 ? e->pieces[j].group : j;
                e->pieces[j].group = e->pieces[i].group;
            }
        }
    }
    /* with a cache every piece has a program, alone in its group if need be */
    for (int i = 0; every && i < e->n_submods; i++)
        if (e->pieces[i].plan && e->pieces[i].group < 0) e->pieces[i].group = i;
    return PW_OK;
}

void pw_program_free(pw_program *p) {
    if (!p) return;
    pw_reloc_program_free(p->code);
    pw_host_free(p);
}

void pw_engine_distinct_free(pw_engine *e) {
    if (!e->distinct) return;
    for (pw_program *p = e->distinct->programs, *next; p; p = next) {
        next = p->next;
        pw_program_free(p);
    }
    pw_reloc_regions_free(e->distinct->regions);
    pw_host_free(e->distinct);
    e->distinct = NULL;
}

/* ---- recording ------------------------------------------------------------------------------ */

static const char *program_label(const pw_engine *e, int group, char *buf, size_t cap) {
    if (group == PW_PROGRAM_FORWARD) return "the forward";
    snprintf(buf, cap, "piece '%s'", pw_plan_submodule_name(pw_module_stitch_plan(e->module), group));
    return buf;
}

/* False when a launch is not a kernel of the engine's set: the graph cache
 * names kernels by their id in it. */
static bool in_kernel_set(const pw_engine *e, const pw_reloc_program *code, char *why) {
    const pw_kernel_set *set = pw_kernel_set_for(e->cfg.device);
    for (size_t i = 0; i < code->n_launches; i++)
        if (pw_kernel_set_find(set, code->kernels[i]) < 0)
            return snprintf(why, PW_RELOC_WHY_CAP, "launch #%zu (kernel %s) is not a kernel of "
                                                   "the %s kernel set", i,
                            code->kernels[i]->name, set ? set->name : "(none)"),
                   false;
    return true;
}

/* Runs `run` (the plan of a piece or the forward) inside the open capture
 * and keeps what it did as the program of (group, desc), or the verdict
 * that it cannot be relocated. */
static pw_status record_program(pw_engine *e, int group, const pw_batch_desc *desc, pw_callable run,
                                const pw_value *args, int nargs, pw_value *out) {
    char why[PW_RELOC_WHY_CAP];
    pw_reloc_program *code = NULL;
    PW_TRY(pw_reloc_record(e->stream, e->distinct->regions, run, args, nargs, out, &code, why));
    pw_program *p = pw_host_calloc(1, sizeof *p);
    if (!p) {
        pw_reloc_program_free(code);
        pw_value_release(*out);
        *out = pw_value_none();
        return PW_ERR_OOM;
    }
    p->group = group;
    p->desc = *desc;
    p->code = code;
    if (p->code && !in_kernel_set(e, p->code, why)) {
        pw_reloc_program_free(p->code);
        p->code = NULL;
    }
    p->relocatable = p->code != NULL;
    if (!p->relocatable) {
        char label[320];
        program_label(e, group, label, sizeof label);
        if (e->cfg.verify_capture) {
            pw_program_free(p);
            pw_value_release(*out);
            *out = pw_value_none();
            return pw_error(PW_ERR_UNSAFE_CAPTURE,
                            "distinct-piece capture of %s at %" PRId64 " tokens: %s", label,
                            desc->num_tokens, why);
        }
        pw_log_debug("distinct-piece capture: %s at %" PRId64
                     " tokens is captured for real every time: %s",
                     label, desc->num_tokens, why);
    }
    p->next = e->distinct->programs;
    e->distinct->programs = p;
    return PW_OK;
}

/* ---- the hooks ---------------------------------------------------------------------------- */

static bool desc_key_equal(const pw_batch_desc *a, const pw_batch_desc *b) {
    return a->num_tokens == b->num_tokens && a->num_reqs == b->num_reqs &&
           a->uniform == b->uniform && a->has_lora == b->has_lora;
}

const pw_program *pw_engine_find_program(const pw_engine *e, int group, const pw_batch_desc *d) {
    for (const pw_program *p = e->distinct->programs; p; p = p->next)
        if (p->group == group && desc_key_equal(&p->desc, d)) return p;
    return NULL;
}

/* Records, patches from, or bypasses the program of (group, key). */
static pw_status run_hooked(pw_engine *e, int group, const pw_batch_desc *key, pw_runtime_mode mode,
                            pw_callable run, const pw_value *args, int nargs, pw_value *out) {
    const pw_program *p = pw_engine_find_program(e, group, key);
    if (!p) return record_program(e, group, key, run, args, nargs, out);
    if (!p->relocatable || !pw_reloc_program_matches(p->code, args, nargs))
        return run.fn(run.user, args, nargs, out);
    pw_status s;
    if (e->cfg.verify_capture && pw_stream_device(e->stream) == PW_DEVICE_CPU) {
        char name[320], label[360];
        snprintf(label, sizeof label, "%s at %" PRId64 " tokens",
                 program_label(e, p->group, name, sizeof name), p->desc.num_tokens);
        s = pw_reloc_program_run_checked(p->code, e->stream, e->distinct->regions, run, args,
                                         nargs, label, out);
    } else {
        s = pw_reloc_program_run(p->code, e->stream, e->distinct->regions, args, nargs, out);
    }
    if (s != PW_OK) return s;
    struct pw_engine_distinct *d = e->distinct;
    if (p->from_cache && mode == PW_MODE_FULL) {
        /* one FULL graph per forward program, even when verify_capture
         * captures its descriptor twice */
        if (group == PW_PROGRAM_FORWARD && !p->counted) d->graphs_from_cache++;
        ((pw_program *)p)->counted = true;
    } else if (p->from_cache) {
        d->graphs_from_cache++;
    } else if (mode == PW_MODE_PIECEWISE) {
        d->graphs_patched++;
    } else {
        d->pieces_patched_in_full++;
    }
    return PW_OK;
}

static pw_status run_piece_plan(void *user, const pw_value *args, int nargs, pw_value *out) {
    const pw_piece *piece = user;
    return pw_plan_run(piece->plan, NULL, 0, args, nargs, out);
}

pw_status pw_engine_distinct_run(pw_engine *e, pw_piece *piece, const pw_value *args, int nargs,
                                 pw_value *out) {
    *out = pw_value_none();
    const pw_forward_context *ctx = NULL;
    if (!e->distinct || e->distinct->planning || piece->group < 0 ||
        !pw_stream_is_capturing(e->stream) ||
        pw_forward_context_get(&ctx) != PW_OK)
        return pw_plan_run(piece->plan, NULL, 0, args, nargs, out);
    /* a piece does not depend on the descriptor's other fields */
    pw_batch_desc key = {ctx->desc.num_tokens, 0, false, false};
    pw_callable run = {run_piece_plan, piece, "piece"};
    return run_hooked(e, piece->group, &key, ctx->mode, run, args, nargs, out);
}

pw_status pw_engine_forward_hooked(pw_engine *e, pw_callable plain, const pw_value *args,
                                   int nargs, pw_value *out) {
    *out = pw_value_none();
    const pw_forward_context *ctx = NULL;
    /* only FULL graphs are the whole forward's, and only the cache keeps them */
    if (!e->distinct || e->distinct->planning || !e->cfg.graph_cache_dir ||
        !pw_stream_is_capturing(e->stream) ||
        pw_forward_context_get(&ctx) != PW_OK || ctx->mode != PW_MODE_FULL)
        return plain.fn(plain.user, args, nargs, out);
    return run_hooked(e, PW_PROGRAM_FORWARD, &ctx->desc, ctx->mode, plain, args, nargs, out);
}

void pw_engine_distinct_counts(const pw_engine *e, uint64_t *graphs_patched,
                               uint64_t *pieces_patched_in_full, uint64_t *graphs_from_cache) {
    const struct pw_engine_distinct *d = e->distinct;
    *graphs_patched = d ? d->graphs_patched : 0;
    *pieces_patched_in_full = d ? d->pieces_patched_in_full : 0;
    *graphs_from_cache = d ? d->graphs_from_cache : 0;
}
