/* Distinct-piece capture: each distinct piece is captured once per size,
 * and the pieces identical to it are made by patching that capture.
 *
 * Which pieces are the same comes from the split graph: two pieces whose IR
 * is identical except for node and graph names (same ops, same arguments
 * by position, same constants and types) form a group. In a Llama every
 * layer's piece is one group. Nothing here knows it is a Llama.
 *
 * The first piece of a group captured at a size is captured for real, and
 * while it is, the engine writes down its *program*:
 *   - the launches, with every address word classified by the kernel's
 *     argument layout (ops/kernel_args.h, PW_K_POINTERS_*) as
 *       ARG k + offset    inside the piece's k-th tensor argument,
 *       BLOCK j + offset  inside the j-th block the capture allocated from
 *                         the graph pool (live at that launch),
 *       REGION r + offset inside the r-th persistent engine buffer (the
 *                         same for every piece: KV cache, rope table, ...);
 *   - the sequence of graph-pool allocations and releases the capture made,
 *     interleaved with the launches;
 *   - the output: which tensor argument or which block each output is.
 *
 * Another piece of the group at that size runs the program instead of its
 * plan: the same allocations and releases against the real pool, and the
 * same launches with the addresses of its own arguments and of its own
 * blocks. The pool is deterministic (best fit, ties to the lowest address),
 * and a real capture of that piece would make exactly that sequence of
 * allocations from exactly that pool state (same IR, same argument shapes),
 * so the patched recording holds what a real capture of the piece would
 * have recorded, graph-pool addresses included. With verify_capture the
 * engine proves it for every patched piece: it captures the piece for real,
 * rewinds the recording and the pool, runs the program, and compares the
 * two recordings byte for byte.
 *
 * The program is replayed inside whatever capture is open, so a FULL
 * capture, which runs every piece inside one graph, patches its layers
 * from the same programs. Arguments whose shapes, dtypes, strides or
 * scalar values differ from the recorded ones (a layer with another weight
 * type) are captured for real.
 *
 * With a graph cache (graph_cache.c) every piece has a program (alone, it
 * is its own group) and so has each FULL graph (the whole forward's), all
 * written to disk after the capture; the next engine loads them and runs
 * them instead of the plans. */
#include "model/engine_internal.h"

#include "backend/graph_record.h"
#include "core/tensor.h"
#include "mem/pool_internal.h"
#include "model/graph_cache.h"
#include "ops/kernel_set.h"

#include <inttypes.h>
#include <stdarg.h>
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

static bool grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t c = *cap ? *cap * 2 : 16;
    void *q = pw_host_realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

pw_status pw_engine_distinct_new(pw_engine *e) {
    if (!e->cfg.capture_distinct && !e->cfg.graph_cache_dir) return PW_OK;
    e->distinct = pw_host_calloc(1, sizeof *e->distinct);
    return e->distinct ? PW_OK : PW_ERR_OOM;
}

static void observe_region(void *user, bool alloc, size_t bytes, void *ptr) {
    struct pw_engine_distinct *d = user;
    if (!alloc || d->regions_failed) return;
    if (!grow((void **)&d->regions, &d->cap_regions, d->n_regions, sizeof *d->regions)) {
        d->regions_failed = true;
        return;
    }
    d->regions[d->n_regions++] = (pw_region){(uintptr_t)ptr, bytes};
}

void pw_engine_regions_observe(pw_engine *e, pw_pool *pool, bool on) {
    if (!e->distinct) return;
    pw_pool_observe(pool, on ? observe_region : NULL, e->distinct);
}

pw_status pw_engine_distinct_init(pw_engine *e) {
    for (int i = 0; i < e->n_submods; i++) e->pieces[i].group = -1;
    if (!e->distinct) return PW_OK;
    if (e->distinct->regions_failed) return PW_ERR_OOM;
    bool share = e->cfg.capture_distinct, every = e->cfg.graph_cache_dir != NULL;
    for (int i = 0; i < e->n_submods; i++) {
        if (!e->pieces[i].plan) continue;
        const pw_ir *sub = pw_ir_find_subgraph(e->split, pw_plan_submodule_name(e->stitch_plan, i));
        for (int j = 0; share && j < i && e->pieces[i].group < 0; j++) {
            if (!e->pieces[j].plan) continue;
            const pw_ir *rep =
                pw_ir_find_subgraph(e->split, pw_plan_submodule_name(e->stitch_plan, j));
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
    pw_host_free(p->sigs);
    pw_host_free(p->kernel_ids);
    pw_host_free(p->kernels);
    pw_host_free(p->arg_offsets);
    pw_host_free(p->bytes);
    pw_host_free(p->relocs);
    pw_host_free(p->events);
    pw_host_free(p->out_blocks);
    pw_host_free(p->outs);
    pw_host_free(p);
}

void pw_engine_distinct_free(pw_engine *e) {
    if (!e->distinct) return;
    for (pw_program *p = e->distinct->programs, *next; p; p = next) {
        next = p->next;
        pw_program_free(p);
    }
    pw_host_free(e->distinct->regions);
    pw_host_free(e->distinct);
    e->distinct = NULL;
}

/* ---- arguments ----------------------------------------------------------------------- */

static bool sig_of(const pw_value *v, pw_arg_sig *s) {
    memset(s, 0, sizeof *s);
    s->kind = v->kind;
    switch (v->kind) {
    case PW_VAL_TENSOR: {
        const pw_tensor *t = v->as.tensor;
        if (!t) return false;
        s->dtype = t->dtype;
        s->ndim = t->ndim;
        for (int i = 0; i < t->ndim; i++) {
            s->shape[i] = t->shape[i];
            s->stride[i] = t->stride[i];
        }
        return true;
    }
    case PW_VAL_INT: s->i = v->as.i; return true;
    case PW_VAL_BOOL: s->i = v->as.b; return true;
    case PW_VAL_FLOAT: s->f = v->as.f; return true;
    case PW_VAL_NONE: return true;
    default: return false; /* tuples and strings: not described, captured for real */
    }
}

static pw_value sig_scalar(const pw_arg_sig *s) {
    pw_value v = pw_value_none();
    v.kind = s->kind;
    if (s->kind == PW_VAL_INT) v.as.i = s->i;
    else if (s->kind == PW_VAL_BOOL) v.as.b = s->i != 0;
    else if (s->kind == PW_VAL_FLOAT) v.as.f = s->f;
    return v;
}

static bool sigs_match(const pw_program *p, const pw_value *args, int nargs) {
    if (nargs != p->nargs) return false;
    for (int i = 0; i < nargs; i++) {
        pw_arg_sig s;
        if (!sig_of(&args[i], &s) || memcmp(&s, &p->sigs[i], sizeof s) != 0) return false;
    }
    return true;
}

/* ---- recording a program -------------------------------------------------------------- */

typedef struct block_info {
    uintptr_t ptr;
    size_t bytes;
    uint32_t alloc_at, release_at; /* live for launches [alloc_at, release_at) */
} block_info;

/* Recorders nest (a piece's inside the forward's, in a FULL capture): every
 * open one sees each event. */
typedef struct recorder {
    pw_stream *stream;
    size_t n0;
    pw_pool_event *events;
    size_t n_events, cap_events;
    block_info *blocks;
    size_t n_blocks, cap_blocks;
    bool failed; /* out of host memory while observing */
    struct recorder *parent;
} recorder;

static _Thread_local recorder *tl_recorders;

static void record_event(recorder *r, bool alloc, size_t bytes, void *ptr) {
    if (r->failed) return;
    uint32_t at = (uint32_t)(pw_stream_capture_num_launches(r->stream) - r->n0);
    if (!grow((void **)&r->events, &r->cap_events, r->n_events, sizeof *r->events)) {
        r->failed = true;
        return;
    }
    pw_pool_event *ev = &r->events[r->n_events];
    memset(ev, 0, sizeof *ev);
    ev->alloc = alloc;
    ev->at_launch = at;
    ev->bytes = bytes;
    if (alloc) {
        if (!grow((void **)&r->blocks, &r->cap_blocks, r->n_blocks, sizeof *r->blocks)) {
            r->failed = true;
            return;
        }
        r->blocks[r->n_blocks] = (block_info){(uintptr_t)ptr, bytes, at, UINT32_MAX};
        ev->block = (uint32_t)r->n_blocks++;
    } else {
        size_t j = r->n_blocks;
        while (j > 0 && !(r->blocks[j - 1].ptr == (uintptr_t)ptr &&
                          r->blocks[j - 1].release_at == UINT32_MAX))
            j--;
        if (j == 0) return; /* a block from before the recording: not the program's */
        r->blocks[j - 1].release_at = at;
        ev->block = (uint32_t)(j - 1);
    }
    r->n_events++;
}

static void observe(void *user, bool alloc, size_t bytes, void *ptr) {
    (void)user;
    for (recorder *r = tl_recorders; r; r = r->parent) record_event(r, alloc, bytes, ptr);
}

static void recorder_push(recorder *r, pw_stream *s) {
    memset(r, 0, sizeof *r);
    r->stream = s;
    r->n0 = pw_stream_capture_num_launches(s);
    r->parent = tl_recorders;
    tl_recorders = r;
    pw_pool_observe(pw_capture_pool(), observe, NULL);
}

static void recorder_pop(recorder *r) {
    tl_recorders = r->parent;
    if (!tl_recorders) pw_pool_observe(pw_capture_pool(), NULL, NULL);
}

static void recorder_free(recorder *r) {
    pw_host_free(r->events);
    pw_host_free(r->blocks);
}

/* While a piece is checked against a real capture, the real run and its
 * release are not part of any program. */
static recorder *recorders_suspend(void) {
    recorder *top = tl_recorders;
    tl_recorders = NULL;
    if (top) pw_pool_observe(pw_capture_pool(), NULL, NULL);
    return top;
}

static void recorders_resume(recorder *top) {
    tl_recorders = top;
    if (top) pw_pool_observe(pw_capture_pool(), observe, NULL);
}

/* Why a capture cannot be described, for the log (and the error in checking mode). */
typedef struct refusal {
    char msg[320];
} refusal;

static bool refuse(refusal *why, const char *fmt, ...) PW_PRINTF(2, 3);
static bool refuse(refusal *why, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->msg, sizeof why->msg, fmt, ap);
    va_end(ap);
    return false;
}

struct arg_range;
static bool describe_launches_in(const pw_engine *e, const struct recorder *r,
                                 const struct arg_range *args, int nargs, size_t n1,
                                 pw_program *p, struct refusal *why);

/* The data range of each tensor argument, computed once per recording. */
typedef struct arg_range {
    uintptr_t start, end; /* end == start: not a tensor, or nothing addressable */
} arg_range;

/* Classifies one non-NULL address word of launch i. */
static bool classify(const pw_engine *e, const recorder *r, const arg_range *args, int nargs,
                     uint32_t i, uintptr_t p, pw_reloc *out) {
    for (int k = 0; k < nargs; k++) {
        if (p >= args[k].start && p < args[k].end) {
            out->kind = PW_RELOC_ARG;
            out->index = (uint32_t)k;
            out->offset = p - args[k].start;
            return true;
        }
    }
    for (size_t j = r->n_blocks; j-- > 0;) {
        const block_info *b = &r->blocks[j];
        if (i >= b->alloc_at && i < b->release_at && p >= b->ptr && p < b->ptr + b->bytes) {
            out->kind = PW_RELOC_BLOCK;
            out->index = (uint32_t)j;
            out->offset = p - b->ptr;
            return true;
        }
    }
    const struct pw_engine_distinct *d = e->distinct;
    for (size_t j = 0; j < d->n_regions; j++) {
        if (p >= d->regions[j].base && p < d->regions[j].base + d->regions[j].bytes) {
            out->kind = PW_RELOC_REGION;
            out->index = (uint32_t)j;
            out->offset = p - d->regions[j].base;
            return true;
        }
    }
    return false;
}

/* p->sigs are set: they give the arguments' extents. */
static bool describe_launches(const pw_engine *e, const recorder *r, const pw_value *args,
                              int nargs, size_t n1, pw_program *p, refusal *why) {
    arg_range *ranges = pw_host_calloc(nargs ? (size_t)nargs : 1, sizeof *ranges);
    if (!ranges) return refuse(why, "out of host memory");
    for (int k = 0; k < nargs; k++) {
        if (args[k].kind != PW_VAL_TENSOR) continue;
        ranges[k].start = (uintptr_t)pw_tensor_data(args[k].as.tensor);
        ranges[k].end = ranges[k].start + pw_arg_sig_extent(&p->sigs[k]);
    }
    bool ok = describe_launches_in(e, r, ranges, nargs, n1, p, why);
    pw_host_free(ranges);
    return ok;
}

static bool describe_launches_in(const pw_engine *e, const recorder *r, const arg_range *args,
                                 int nargs, size_t n1, pw_program *p, refusal *why) {
    const pw_kernel_set *set = pw_kernel_set_for(e->cfg.device);
    size_t n = n1 - r->n0, total = 0, n_relocs = 0, cap_relocs = 0;
    p->n_launches = n;
    p->kernels = pw_host_calloc(n ? n : 1, sizeof *p->kernels);
    p->kernel_ids = pw_host_calloc(n ? n : 1, sizeof *p->kernel_ids);
    p->arg_offsets = pw_host_calloc(n + 1, sizeof *p->arg_offsets);
    if (!p->kernels || !p->kernel_ids || !p->arg_offsets) return refuse(why, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        const void *a;
        size_t nb;
        if (pw_stream_capture_launch_at(e->stream, r->n0 + i, &p->kernels[i], &a, &nb) != PW_OK)
            return refuse(why, "launch #%zu is missing from the recording", i);
        p->arg_offsets[i] = total;
        total += nb;
    }
    p->arg_offsets[n] = total;
    p->bytes = pw_host_alloc(total ? total : 1);
    if (!p->bytes) return refuse(why, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        const pw_kernel *k;
        const void *a;
        size_t nb;
        (void)pw_stream_capture_launch_at(e->stream, r->n0 + i, &k, &a, &nb);
        memcpy(p->bytes + p->arg_offsets[i], a, nb);
        int id = pw_kernel_set_find(set, k);
        const pw_kernel_arg_layout *lay = pw_kernel_arg_layout_of(id);
        if (!lay)
            return refuse(why, "launch #%zu (kernel %s) is not a kernel of the %s kernel set, so "
                               "its address words are unknown", i, k && k->name ? k->name : "?",
                          set ? set->name : "(none)");
        if (lay->size != nb)
            return refuse(why, "launch #%zu (kernel %s) has %zu argument bytes, its layout %zu",
                          i, k->name, nb, lay->size);
        p->kernel_ids[i] = (uint16_t)id;
        for (int w = 0; w < lay->n_pointers; w++) {
            uintptr_t v;
            memcpy(&v, (const char *)a + lay->pointers[w], sizeof v);
            if (!v) continue;
            pw_reloc rl = {(uint32_t)i, lay->pointers[w], 0, 0, 0};
            if (!classify(e, r, args, nargs, (uint32_t)i, v, &rl))
                return refuse(why, "launch #%zu (kernel %s): the address word at byte %u holds "
                                   "%p, which lies in no region (arguments, blocks of this "
                                   "capture, persistent engine buffers)",
                              i, k->name, (unsigned)lay->pointers[w], (void *)v);
            if (!grow((void **)&p->relocs, &cap_relocs, n_relocs, sizeof *p->relocs))
                return refuse(why, "out of host memory");
            p->relocs[n_relocs++] = rl;
        }
    }
    p->n_relocs = n_relocs;
    return true;
}

static bool describe_output_tensor(const recorder *r, const pw_value *args, int nargs,
                                   const pw_tensor *t, pw_program *p, pw_out_item *item,
                                   refusal *why) {
    for (int k = 0; k < nargs; k++)
        if (args[k].kind == PW_VAL_TENSOR && args[k].as.tensor == t) {
            item->kind = PW_OUT_ARG;
            item->index = (uint32_t)k;
            return true;
        }
    for (size_t j = 0; j < r->n_blocks; j++) {
        const block_info *b = &r->blocks[j];
        if (b->release_at != UINT32_MAX || b->ptr != (uintptr_t)t->data) continue;
        if (t->base || !pw_tensor_is_contiguous(t) || pw_tensor_nbytes(t) != b->bytes)
            return refuse(why, "an output is a view of a block of the capture");
        pw_out_block *ob = &p->out_blocks[j];
        if (ob->is_output) return refuse(why, "two outputs share one block");
        ob->is_output = true;
        ob->dtype = t->dtype;
        ob->ndim = t->ndim;
        memcpy(ob->shape, t->shape, sizeof ob->shape);
        item->kind = PW_OUT_BLOCK;
        item->index = (uint32_t)j;
        return true;
    }
    return refuse(why, "an output is neither an argument nor a block of the capture");
}

static bool describe_output(const recorder *r, const pw_value *args, int nargs, pw_value out,
                            pw_program *p, refusal *why) {
    p->out_blocks = pw_host_calloc(r->n_blocks ? r->n_blocks : 1, sizeof *p->out_blocks);
    p->out_tuple = out.kind == PW_VAL_TUPLE;
    p->n_outs = p->out_tuple ? pw_tuple_size(out.as.tuple) : 1;
    p->outs = pw_host_calloc(p->n_outs ? (size_t)p->n_outs : 1, sizeof *p->outs);
    if (!p->out_blocks || !p->outs) return refuse(why, "out of host memory");
    for (int i = 0; i < p->n_outs; i++) {
        pw_value v = p->out_tuple ? pw_tuple_get(out.as.tuple, i) : out;
        pw_out_item *item = &p->outs[i];
        if (v.kind == PW_VAL_TENSOR) {
            if (!describe_output_tensor(r, args, nargs, v.as.tensor, p, item, why)) return false;
        } else if (sig_of(&v, &item->scalar)) {
            item->kind = PW_OUT_SCALAR;
        } else {
            return refuse(why, "an output is a %s", v.kind == PW_VAL_TUPLE ? "nested tuple" : "string");
        }
    }
    /* every block still live is an output: anything else would be held by
     * something the program cannot reproduce */
    for (size_t j = 0; j < r->n_blocks; j++)
        if (r->blocks[j].release_at == UINT32_MAX && !p->out_blocks[j].is_output)
            return refuse(why, "block #%zu outlives the capture without being an output", j);
    return true;
}

static bool build_program(const pw_engine *e, const recorder *r, const pw_value *args,
                          int nargs, size_t n1, pw_value out, pw_program *p, refusal *why) {
    if (r->failed) return refuse(why, "out of host memory while observing the graph pool");
    p->nargs = nargs;
    p->sigs = pw_host_calloc(nargs ? (size_t)nargs : 1, sizeof *p->sigs);
    if (!p->sigs) return refuse(why, "out of host memory");
    for (int i = 0; i < nargs; i++)
        if (!sig_of(&args[i], &p->sigs[i]))
            return refuse(why, "argument %d is not a tensor or a scalar", i);
    if (!describe_launches(e, r, args, nargs, n1, p, why)) return false;
    p->events = pw_host_alloc((r->n_events ? r->n_events : 1) * sizeof *p->events);
    if (!p->events) return refuse(why, "out of host memory");
    if (r->n_events) memcpy(p->events, r->events, r->n_events * sizeof *p->events);
    p->n_events = r->n_events;
    p->n_blocks = r->n_blocks;
    return describe_output(r, args, nargs, out, p, why);
}

static const char *program_label(const pw_engine *e, int group, char *buf, size_t cap) {
    if (group == PW_PROGRAM_FORWARD) return "the forward";
    snprintf(buf, cap, "piece '%s'", pw_plan_submodule_name(e->stitch_plan, group));
    return buf;
}

/* Runs `run` (the plan of a piece or the forward) inside the open capture,
 * observing the pool, and keeps what it did as the program of (group, desc). */
static pw_status record_program(pw_engine *e, int group, const pw_batch_desc *desc,
                                pw_status (*run)(void *, const pw_value *, int, pw_value *),
                                void *run_user, const pw_value *args, int nargs, pw_value *out) {
    recorder r;
    recorder_push(&r, e->stream);
    pw_status st = run(run_user, args, nargs, out);
    recorder_pop(&r);
    if (st != PW_OK) {
        recorder_free(&r);
        return st;
    }
    pw_program *p = pw_host_calloc(1, sizeof *p);
    if (!p) {
        recorder_free(&r);
        pw_value_release(*out);
        *out = pw_value_none();
        return PW_ERR_OOM;
    }
    p->group = group;
    p->desc = *desc;
    refusal why = {{0}};
    p->relocatable =
        build_program(e, &r, args, nargs, pw_stream_capture_num_launches(e->stream), *out, p, &why);
    recorder_free(&r);
    if (!p->relocatable) {
        char label[320];
        program_label(e, group, label, sizeof label);
        if (e->cfg.verify_capture) {
            pw_program_free(p);
            pw_value_release(*out);
            *out = pw_value_none();
            return pw_error(PW_ERR_UNSAFE_CAPTURE,
                            "distinct-piece capture of %s at %" PRId64 " tokens: %s", label,
                            desc->num_tokens, why.msg);
        }
        pw_log_debug("distinct-piece capture: %s at %" PRId64
                     " tokens is captured for real every time: %s",
                     label, desc->num_tokens, why.msg);
        /* keep only the verdict */
        pw_program verdict = {.group = group, .desc = *desc};
        pw_program_free(p);
        p = pw_host_calloc(1, sizeof *p);
        if (!p) return PW_OK; /* the capture itself went fine */
        *p = verdict;
    }
    p->next = e->distinct->programs;
    e->distinct->programs = p;
    return PW_OK;
}

#define RUN_SMALL_BLOCKS 64

/* ---- running a program ------------------------------------------------------------------- */

static pw_status run_program(pw_engine *e, const pw_program *p, const pw_value *args,
                             pw_value *out) {
    *out = pw_value_none();
    pw_pool *pool = pw_capture_pool();
    size_t nb = p->n_blocks ? p->n_blocks : 1;
    /* a piece has a few blocks: no allocation for their bookkeeping */
    void *ptrs_small[RUN_SMALL_BLOCKS];
    pw_tensor *tensors_small[RUN_SMALL_BLOCKS];
    bool live_small[RUN_SMALL_BLOCKS];
    bool small = nb <= RUN_SMALL_BLOCKS;
    void **ptrs = small ? ptrs_small : pw_host_alloc(nb * sizeof *ptrs);
    pw_tensor **tensors = small ? tensors_small : pw_host_alloc(nb * sizeof *tensors);
    bool *live = small ? live_small : pw_host_alloc(nb * sizeof *live);
    pw_status s = ptrs && tensors && live ? PW_OK : PW_ERR_OOM;
    if (s == PW_OK) {
        memset(ptrs, 0, nb * sizeof *ptrs);
        memset(tensors, 0, nb * sizeof *tensors);
        memset(live, 0, nb * sizeof *live);
    }
    _Alignas(16) unsigned char buf[PW_MAX_KERNEL_ARG_BYTES];
    size_t ev = 0, rl = 0;
    const pw_region *regions = e->distinct->regions;
    for (size_t i = 0; s == PW_OK && i <= p->n_launches; i++) {
        for (; s == PW_OK && ev < p->n_events && p->events[ev].at_launch == i; ev++) {
            const pw_pool_event *x = &p->events[ev];
            const pw_out_block *ob = &p->out_blocks[x->block];
            if (!x->alloc) {
                s = pw_pool_release(pool, ptrs[x->block]);
                live[x->block] = false;
            } else if (ob->is_output) {
                s = pw_tensor_new(pool, ob->dtype, ob->ndim, ob->shape, &tensors[x->block]);
                if (s == PW_OK) ptrs[x->block] = tensors[x->block]->data;
            } else {
                s = pw_pool_alloc(pool, (size_t)x->bytes, &ptrs[x->block]);
                live[x->block] = s == PW_OK;
            }
        }
        if (s != PW_OK || i == p->n_launches) break;
        size_t nbytes = p->arg_offsets[i + 1] - p->arg_offsets[i];
        memcpy(buf, p->bytes + p->arg_offsets[i], nbytes);
        for (; rl < p->n_relocs && p->relocs[rl].launch == i; rl++) {
            const pw_reloc *x = &p->relocs[rl];
            uintptr_t base = x->kind == PW_RELOC_ARG
                                 ? (uintptr_t)pw_tensor_data(args[x->index].as.tensor)
                             : x->kind == PW_RELOC_BLOCK ? (uintptr_t)ptrs[x->index]
                                                         : regions[x->index].base;
            uintptr_t v = base + (uintptr_t)x->offset;
            memcpy(buf + x->byte, &v, sizeof v);
        }
        s = pw_launch(e->stream, p->kernels[i], buf, nbytes);
    }
    pw_tuple *tuple = NULL;
    if (s == PW_OK && p->out_tuple) s = pw_tuple_new(p->n_outs, &tuple);
    for (int i = 0; s == PW_OK && i < p->n_outs; i++) {
        const pw_out_item *o = &p->outs[i];
        pw_value v = o->kind == PW_OUT_SCALAR ? sig_scalar(&o->scalar)
                     : o->kind == PW_OUT_ARG  ? pw_value_retain(args[o->index])
                                              : pw_value_tensor(pw_tensor_retain(tensors[o->index]));
        if (tuple) pw_tuple_set(tuple, i, v);
        else *out = v;
    }
    if (s == PW_OK && tuple) *out = pw_value_tuple(tuple);
    else if (tuple) pw_tuple_release(tuple);
    /* the program's own references: the output holds what it returns */
    for (size_t j = 0; ptrs && tensors && live && j < p->n_blocks; j++) {
        if (live[j]) (void)pw_pool_release(pool, ptrs[j]);
        pw_tensor_release(tensors[j]);
    }
    if (!small) {
        pw_host_free(ptrs);
        pw_host_free(tensors);
        pw_host_free(live);
    }
    return s;
}

/* ---- checking: a program against a real capture -------------------------------------------- */

typedef struct launch_copy {
    size_t n;
    const pw_kernel **kernels;
    size_t *offsets;
    unsigned char *bytes;
} launch_copy;

static void launch_copy_free(launch_copy *c) {
    pw_host_free(c->kernels);
    pw_host_free(c->offsets);
    pw_host_free(c->bytes);
    memset(c, 0, sizeof *c);
}

static pw_status launch_copy_take(pw_stream *s, size_t n0, launch_copy *c) {
    memset(c, 0, sizeof *c);
    size_t n = pw_stream_capture_num_launches(s) - n0, total = 0;
    c->kernels = pw_host_calloc(n ? n : 1, sizeof *c->kernels);
    c->offsets = pw_host_calloc(n + 1, sizeof *c->offsets);
    if (!c->kernels || !c->offsets) goto oom;
    for (size_t i = 0; i < n; i++) {
        const void *a;
        size_t nb;
        PW_TRY(pw_stream_capture_launch_at(s, n0 + i, &c->kernels[i], &a, &nb));
        c->offsets[i] = total;
        total += nb;
    }
    c->offsets[n] = total;
    c->bytes = pw_host_alloc(total ? total : 1);
    if (!c->bytes) goto oom;
    for (size_t i = 0; i < n; i++) {
        const pw_kernel *k;
        const void *a;
        size_t nb;
        (void)pw_stream_capture_launch_at(s, n0 + i, &k, &a, &nb);
        memcpy(c->bytes + c->offsets[i], a, nb);
    }
    c->n = n;
    return PW_OK;
oom:
    launch_copy_free(c);
    return PW_ERR_OOM;
}

static pw_status compare_with_real(const pw_engine *e, const char *label, int64_t num_tokens,
                                   const launch_copy *real, size_t n0) {
    size_t n = pw_stream_capture_num_launches(e->stream) - n0;
    if (n != real->n)
        return pw_error(PW_ERR_UNSAFE_CAPTURE,
                        "distinct-piece capture of %s at %" PRId64
                        " tokens: the patched graph has %zu launches, a real capture %zu",
                        label, num_tokens, n, real->n);
    for (size_t i = 0; i < n; i++) {
        const pw_kernel *k;
        const void *a;
        size_t nb;
        PW_TRY(pw_stream_capture_launch_at(e->stream, n0 + i, &k, &a, &nb));
        size_t nr = real->offsets[i + 1] - real->offsets[i];
        if (k != real->kernels[i] || nb != nr)
            return pw_error(PW_ERR_UNSAFE_CAPTURE,
                            "distinct-piece capture of %s at %" PRId64
                            " tokens: launch #%zu is kernel %s (%zu argument bytes) patched and "
                            "%s (%zu) in a real capture",
                            label, num_tokens, i, k->name, nb, real->kernels[i]->name, nr);
        const unsigned char *x = real->bytes + real->offsets[i], *y = a;
        size_t lo = 0;
        while (lo < nb && x[lo] == y[lo]) lo++;
        if (lo == nb) continue;
        size_t hi = nb;
        while (x[hi - 1] == y[hi - 1]) hi--;
        return pw_error(PW_ERR_UNSAFE_CAPTURE,
                        "distinct-piece capture of %s at %" PRId64
                        " tokens: launch #%zu (kernel %s): argument bytes [%zu,%zu) of the "
                        "patched graph differ from a real capture",
                        label, num_tokens, i, k->name, lo, hi);
    }
    return PW_OK;
}

#define CHECKED_OUTPUTS_MAX 16

/* The data addresses of v's tensors, in order; false when there are more than fit. */
static bool output_addresses(pw_value v, void **addrs, int *n) {
    if (v.kind == PW_VAL_TENSOR) {
        if (*n == CHECKED_OUTPUTS_MAX) return false;
        addrs[(*n)++] = pw_tensor_data(v.as.tensor);
        return true;
    }
    if (v.kind != PW_VAL_TUPLE) return true;
    for (int i = 0; i < pw_tuple_size(v.as.tuple); i++)
        if (!output_addresses(pw_tuple_get(v.as.tuple, i), addrs, n)) return false;
    return true;
}

static size_t reserved_bytes(pw_pool *pool) {
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    return st.reserved;
}

/* Captures for real, takes the recording, rewinds the capture and gives
 * the blocks back (the pool is as before), runs the program, compares. */
static pw_status run_program_checked(pw_engine *e, const pw_program *p,
                                     pw_status (*run)(void *, const pw_value *, int, pw_value *),
                                     void *run_user, const pw_value *args, int nargs,
                                     pw_value *out) {
    pw_pool *pool = pw_capture_pool();
    size_t n0 = pw_stream_capture_num_launches(e->stream);
    pw_value real = pw_value_none();
    launch_copy copy = {0};
    pw_status s = PW_OK;
    recorder *outer = recorders_suspend();
    /* a real capture that grew the pool ran on a smaller pool than the
     * program will: repeat it on the grown one, which is what it compares to */
    for (int round = 0; round < 2 && s == PW_OK; round++) {
        size_t before = reserved_bytes(pool);
        pw_value_release(real);
        real = pw_value_none();
        s = pw_stream_capture_rewind(e->stream, n0);
        if (s == PW_OK) s = run(run_user, args, nargs, &real);
        if (s == PW_OK && reserved_bytes(pool) == before) break;
    }
    if (s == PW_OK) s = launch_copy_take(e->stream, n0, &copy);
    /* the real output is compared by address after the program ran: keep
     * the addresses, give the blocks back */
    void *real_addrs[CHECKED_OUTPUTS_MAX], *addrs[CHECKED_OUTPUTS_MAX];
    int n_real = 0, n = 0;
    bool addrs_fit = output_addresses(real, real_addrs, &n_real);
    pw_value_release(real);
    if (s == PW_OK) s = pw_stream_capture_rewind(e->stream, n0);
    recorders_resume(outer);
    char label[320];
    program_label(e, p->group, label, sizeof label);
    if (s == PW_OK) s = run_program(e, p, args, out);
    if (s == PW_OK) s = compare_with_real(e, label, p->desc.num_tokens, &copy, n0);
    if (s == PW_OK && addrs_fit &&
        (!output_addresses(*out, addrs, &n) || n != n_real ||
         memcmp(addrs, real_addrs, (size_t)n * sizeof *addrs) != 0))
        s = pw_error(PW_ERR_UNSAFE_CAPTURE,
                     "distinct-piece capture of %s at %" PRId64
                     " tokens: the patched output lies elsewhere than a real capture's",
                     label, p->desc.num_tokens);
    launch_copy_free(&copy);
    if (s != PW_OK) {
        pw_value_release(*out);
        *out = pw_value_none();
    }
    return s;
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
                            pw_status (*run)(void *, const pw_value *, int, pw_value *),
                            void *run_user, const pw_value *args, int nargs, pw_value *out) {
    const pw_program *p = pw_engine_find_program(e, group, key);
    if (!p) return record_program(e, group, key, run, run_user, args, nargs, out);
    if (!p->relocatable || !sigs_match(p, args, nargs)) return run(run_user, args, nargs, out);
    pw_status s = e->cfg.verify_capture && pw_stream_device(e->stream) == PW_DEVICE_CPU
                      ? run_program_checked(e, p, run, run_user, args, nargs, out)
                      : run_program(e, p, args, out);
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
    return run_hooked(e, piece->group, &key, ctx->mode, run_piece_plan, piece, args, nargs, out);
}

pw_status pw_engine_forward_hooked(pw_engine *e,
                                   pw_status (*run)(void *, const pw_value *, int, pw_value *),
                                   const pw_value *args, int nargs, pw_value *out) {
    *out = pw_value_none();
    const pw_forward_context *ctx = NULL;
    /* only FULL graphs are the whole forward's, and only the cache keeps them */
    if (!e->distinct || e->distinct->planning || !e->cfg.graph_cache_dir ||
        !pw_stream_is_capturing(e->stream) ||
        pw_forward_context_get(&ctx) != PW_OK || ctx->mode != PW_MODE_FULL)
        return run(e, args, nargs, out);
    return run_hooked(e, PW_PROGRAM_FORWARD, &ctx->desc, ctx->mode, run, e, args, nargs, out);
}

void pw_engine_distinct_counts(const pw_engine *e, uint64_t *graphs_patched,
                               uint64_t *pieces_patched_in_full, uint64_t *graphs_from_cache) {
    const struct pw_engine_distinct *d = e->distinct;
    *graphs_patched = d ? d->graphs_patched : 0;
    *pieces_patched_in_full = d ? d->pieces_patched_in_full : 0;
    *graphs_from_cache = d ? d->graphs_from_cache : 0;
}

/* ---- sizes ---------------------------------------------------------------------------------- */

#define EXTENT_LIMIT ((uint64_t)1 << 50)

/* a * b, or EXTENT_LIMIT past it */
static uint64_t mul_capped(uint64_t a, uint64_t b) {
    if (a && b > EXTENT_LIMIT / a) return EXTENT_LIMIT;
    return a * b;
}

static uint64_t elems_to_bytes(pw_dtype dtype, uint64_t elems) {
    int64_t be = pw_dtype_block_elems(dtype), bb = pw_dtype_block_bytes(dtype);
    if (be <= 0 || bb <= 0) return 0;
    return mul_capped(elems / (uint64_t)be, (uint64_t)bb);
}

uint64_t pw_arg_sig_extent(const pw_arg_sig *s) {
    if (s->kind != PW_VAL_TENSOR || (unsigned)s->dtype >= PW_DTYPE_COUNT_ || s->ndim < 0 ||
        s->ndim > PW_MAX_DIMS)
        return 0;
    uint64_t numel = 1, span = 1;
    bool contiguous = true;
    int64_t expect = 1;
    for (int i = s->ndim - 1; i >= 0; i--) {
        if (s->shape[i] <= 0 || s->stride[i] < 0) return 0;
        if (s->shape[i] != 1 && s->stride[i] != expect) contiguous = false;
        expect = (int64_t)mul_capped((uint64_t)expect, (uint64_t)s->shape[i]);
        numel = mul_capped(numel, (uint64_t)s->shape[i]);
        span += mul_capped((uint64_t)(s->shape[i] - 1), (uint64_t)s->stride[i]);
    }
    if (contiguous) return elems_to_bytes(s->dtype, numel);
    if (pw_dtype_block_elems(s->dtype) != 1) return 0; /* a strided quantized view: unknown */
    return elems_to_bytes(s->dtype, span);
}

uint64_t pw_out_block_bytes(const pw_out_block *b) {
    if ((unsigned)b->dtype >= PW_DTYPE_COUNT_ || b->ndim < 0 || b->ndim > PW_MAX_DIMS) return 0;
    uint64_t numel = 1;
    for (int i = 0; i < b->ndim; i++) {
        if (b->shape[i] < 0) return 0;
        numel = mul_capped(numel, (uint64_t)b->shape[i]);
    }
    if (numel % (uint64_t)pw_dtype_block_elems(b->dtype)) return 0;
    return elems_to_bytes(b->dtype, numel);
}
