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
 *       fixed             inside the engine's persistent buffers (the same
 *                         for every piece: KV cache, rope table, scratch);
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
 * type) are captured for real. */
#include "model/engine_internal.h"

#include "backend/graph_record.h"
#include "core/tensor.h"
#include "mem/pool_internal.h"
#include "ops/kernel_set.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef enum reloc_kind { RELOC_ARG, RELOC_BLOCK } reloc_kind;

typedef struct reloc {
    uint32_t launch;
    uint16_t byte;   /* offset of the pointer word in the launch's arguments */
    uint8_t kind;    /* reloc_kind */
    uint32_t index;  /* argument or block */
    uint64_t offset; /* bytes past the start of that argument or block */
} reloc;

typedef struct pool_event {
    bool alloc;
    uint32_t block;
    uint32_t at_launch; /* launches of the piece recorded before the event */
    size_t bytes;       /* alloc: bytes asked for */
} pool_event;

typedef struct arg_sig {
    pw_value_kind kind;
    pw_dtype dtype;
    int ndim;
    int64_t shape[PW_MAX_DIMS], stride[PW_MAX_DIMS];
    pw_value scalar; /* INT, FLOAT, BOOL: compared by value */
} arg_sig;

typedef enum out_kind { OUT_ARG, OUT_BLOCK, OUT_SCALAR } out_kind;

typedef struct out_item {
    out_kind kind;
    uint32_t index; /* argument or block */
    pw_value scalar;
} out_item;

typedef struct piece_program {
    int group;
    int64_t num_tokens;
    bool relocatable; /* false: this group at this size is captured for real */
    int nargs;
    arg_sig *sigs;
    size_t n_launches;
    const pw_kernel **kernels;
    size_t *arg_offsets; /* n_launches + 1 offsets into bytes */
    unsigned char *bytes;
    size_t n_relocs;
    reloc *relocs;
    size_t n_events;
    pool_event *events;
    size_t n_blocks;
    /* output blocks: allocated as tensors of these headers when replayed */
    bool *block_is_output;
    pw_dtype *out_dtype;
    int *out_ndim;
    int64_t (*out_shape)[PW_MAX_DIMS];
    bool out_tuple;
    int n_outs;
    out_item *outs;
    struct piece_program *next;
} piece_program;

struct pw_engine_distinct {
    piece_program *programs;
    uint64_t graphs_patched, pieces_patched_in_full, programs_recorded;
};

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

pw_status pw_engine_distinct_init(pw_engine *e) {
    for (int i = 0; i < e->n_submods; i++) e->pieces[i].group = -1;
    if (!e->cfg.capture_distinct) return PW_OK;
    int grouped = 0;
    for (int i = 0; i < e->n_submods; i++) {
        if (!e->pieces[i].plan) continue;
        const pw_ir *sub = pw_ir_find_subgraph(e->split, pw_plan_submodule_name(e->stitch_plan, i));
        for (int j = 0; j < i && e->pieces[i].group < 0; j++) {
            if (!e->pieces[j].plan) continue;
            const pw_ir *rep =
                pw_ir_find_subgraph(e->split, pw_plan_submodule_name(e->stitch_plan, j));
            if (sub && rep && pw_engine_ir_same_modulo_names(rep, sub)) {
                e->pieces[i].group = e->pieces[j].group >= 0 ? e->pieces[j].group : j;
                e->pieces[j].group = e->pieces[i].group;
            }
        }
        grouped += e->pieces[i].group >= 0;
    }
    if (grouped == 0) return PW_OK; /* nothing to share: every piece is captured for real */
    e->distinct = pw_host_calloc(1, sizeof *e->distinct);
    return e->distinct ? PW_OK : PW_ERR_OOM;
}

static void program_free(piece_program *p) {
    if (!p) return;
    pw_host_free(p->sigs);
    pw_host_free(p->kernels);
    pw_host_free(p->arg_offsets);
    pw_host_free(p->bytes);
    pw_host_free(p->relocs);
    pw_host_free(p->events);
    pw_host_free(p->block_is_output);
    pw_host_free(p->out_dtype);
    pw_host_free(p->out_ndim);
    pw_host_free(p->out_shape);
    pw_host_free(p->outs);
    pw_host_free(p);
}

void pw_engine_distinct_free(pw_engine *e) {
    if (!e->distinct) return;
    for (piece_program *p = e->distinct->programs, *next; p; p = next) {
        next = p->next;
        program_free(p);
    }
    pw_host_free(e->distinct);
    e->distinct = NULL;
}

void pw_engine_distinct_counts(const pw_engine *e, uint64_t *graphs_patched,
                               uint64_t *pieces_patched_in_full) {
    *graphs_patched = e->distinct ? e->distinct->graphs_patched : 0;
    *pieces_patched_in_full = e->distinct ? e->distinct->pieces_patched_in_full : 0;
}

/* ---- arguments ----------------------------------------------------------------------- */

static bool sig_of(const pw_value *v, arg_sig *s) {
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
    case PW_VAL_INT:
    case PW_VAL_FLOAT:
    case PW_VAL_BOOL:
    case PW_VAL_NONE: s->scalar = *v; return true;
    default: return false; /* tuples and strings: not described, captured for real */
    }
}

static bool sigs_match(const piece_program *p, const pw_value *args, int nargs) {
    if (nargs != p->nargs) return false;
    for (int i = 0; i < nargs; i++) {
        arg_sig s;
        if (!sig_of(&args[i], &s) || memcmp(&s, &p->sigs[i], sizeof s) != 0) return false;
    }
    return true;
}

/* The bytes a kernel may address from a tensor argument's data pointer. */
static size_t tensor_extent(const pw_tensor *t) {
    if (pw_tensor_is_contiguous(t)) return pw_tensor_nbytes(t);
    if (pw_dtype_block_elems(t->dtype) != 1) return 0; /* a strided quantized view: unknown */
    size_t span = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) return 0;
        span += (size_t)(t->shape[i] - 1) * (size_t)t->stride[i];
    }
    return span * (size_t)pw_dtype_block_bytes(t->dtype);
}

/* ---- recording a program -------------------------------------------------------------- */

typedef struct block_info {
    uintptr_t ptr;
    size_t bytes;
    uint32_t alloc_at, release_at; /* live for launches [alloc_at, release_at) */
} block_info;

typedef struct recorder {
    pw_stream *stream;
    size_t n0;
    pool_event *events;
    size_t n_events, cap_events;
    block_info *blocks;
    size_t n_blocks, cap_blocks;
    bool failed; /* out of host memory while observing */
} recorder;

static bool grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t c = *cap ? *cap * 2 : 16;
    void *q = pw_host_realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static void observe(void *user, bool alloc, size_t bytes, void *ptr) {
    recorder *r = user;
    if (r->failed) return;
    uint32_t at = (uint32_t)(pw_stream_capture_num_launches(r->stream) - r->n0);
    if (!grow((void **)&r->events, &r->cap_events, r->n_events, sizeof *r->events)) {
        r->failed = true;
        return;
    }
    pool_event *ev = &r->events[r->n_events];
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
        if (j == 0) return; /* a block from before the capture: not the piece's business */
        r->blocks[j - 1].release_at = at;
        ev->block = (uint32_t)(j - 1);
    }
    r->n_events++;
}

static void recorder_free(recorder *r) {
    pw_host_free(r->events);
    pw_host_free(r->blocks);
}

/* Why a piece cannot be patched, for the log (and the error in checking mode). */
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

/* Classifies one non-NULL address word of launch i. */
static bool classify(const pw_engine *e, const recorder *r, const pw_value *args, int nargs,
                     uint32_t i, uintptr_t p, reloc *out, bool *fixed) {
    *fixed = false;
    for (int k = 0; k < nargs; k++) {
        if (args[k].kind != PW_VAL_TENSOR) continue;
        uintptr_t d = (uintptr_t)pw_tensor_data(args[k].as.tensor);
        if (p >= d && p < d + tensor_extent(args[k].as.tensor)) {
            out->kind = RELOC_ARG;
            out->index = (uint32_t)k;
            out->offset = p - d;
            return true;
        }
    }
    for (size_t j = r->n_blocks; j-- > 0;) {
        const block_info *b = &r->blocks[j];
        if (i >= b->alloc_at && i < b->release_at && p >= b->ptr && p < b->ptr + b->bytes) {
            out->kind = RELOC_BLOCK;
            out->index = (uint32_t)j;
            out->offset = p - b->ptr;
            return true;
        }
    }
    if (pw_pool_owns(e->persistent, (const void *)p)) {
        *fixed = true;
        return true;
    }
    return false;
}

static bool describe_launches(const pw_engine *e, const recorder *r, const pw_value *args,
                              int nargs, size_t n1, piece_program *p, refusal *why) {
    const pw_kernel_set *set = pw_kernel_set_for(e->device);
    size_t n = n1 - r->n0, total = 0, n_relocs = 0, cap_relocs = 0;
    p->n_launches = n;
    p->kernels = pw_host_calloc(n ? n : 1, sizeof *p->kernels);
    p->arg_offsets = pw_host_calloc(n + 1, sizeof *p->arg_offsets);
    if (!p->kernels || !p->arg_offsets) return refuse(why, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        const void *a;
        size_t nb;
        if (pw_stream_capture_launch_at(e->stream, r->n0 + i, &p->kernels[i], &a, &nb) != PW_OK)
            return refuse(why, "launch #%zu of the piece is missing from the recording", i);
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
        for (int w = 0; w < lay->n_pointers; w++) {
            uintptr_t v;
            memcpy(&v, (const char *)a + lay->pointers[w], sizeof v);
            if (!v) continue;
            reloc rl = {(uint32_t)i, lay->pointers[w], 0, 0, 0};
            bool fixed;
            if (!classify(e, r, args, nargs, (uint32_t)i, v, &rl, &fixed))
                return refuse(why, "launch #%zu (kernel %s): the address word at byte %u holds "
                                   "%p, which lies in no region (piece arguments, blocks of this "
                                   "capture, persistent engine buffers)",
                              i, k->name, (unsigned)lay->pointers[w], (void *)v);
            if (fixed) continue;
            if (!grow((void **)&p->relocs, &cap_relocs, n_relocs, sizeof *p->relocs))
                return refuse(why, "out of host memory");
            p->relocs[n_relocs++] = rl;
        }
    }
    p->n_relocs = n_relocs;
    return true;
}

static bool describe_output_tensor(const recorder *r, const pw_value *args, int nargs,
                                   const pw_tensor *t, piece_program *p, out_item *item,
                                   refusal *why) {
    for (int k = 0; k < nargs; k++)
        if (args[k].kind == PW_VAL_TENSOR && args[k].as.tensor == t) {
            item->kind = OUT_ARG;
            item->index = (uint32_t)k;
            return true;
        }
    for (size_t j = 0; j < r->n_blocks; j++) {
        const block_info *b = &r->blocks[j];
        if (b->release_at != UINT32_MAX || b->ptr != (uintptr_t)t->data) continue;
        if (t->base || !pw_tensor_is_contiguous(t) || pw_tensor_nbytes(t) != b->bytes)
            return refuse(why, "an output is a view of a block of the capture");
        if (p->block_is_output[j]) return refuse(why, "two outputs share one block");
        p->block_is_output[j] = true;
        p->out_dtype[j] = t->dtype;
        p->out_ndim[j] = t->ndim;
        memcpy(p->out_shape[j], t->shape, sizeof p->out_shape[j]);
        item->kind = OUT_BLOCK;
        item->index = (uint32_t)j;
        return true;
    }
    return refuse(why, "an output is neither an argument nor a block of the capture");
}

static bool describe_output(const recorder *r, const pw_value *args, int nargs, pw_value out,
                            piece_program *p, refusal *why) {
    size_t nb = r->n_blocks ? r->n_blocks : 1;
    p->block_is_output = pw_host_calloc(nb, sizeof *p->block_is_output);
    p->out_dtype = pw_host_calloc(nb, sizeof *p->out_dtype);
    p->out_ndim = pw_host_calloc(nb, sizeof *p->out_ndim);
    p->out_shape = pw_host_calloc(nb, sizeof *p->out_shape);
    p->out_tuple = out.kind == PW_VAL_TUPLE;
    p->n_outs = p->out_tuple ? pw_tuple_size(out.as.tuple) : 1;
    p->outs = pw_host_calloc((size_t)p->n_outs, sizeof *p->outs);
    if (!p->block_is_output || !p->out_dtype || !p->out_ndim || !p->out_shape || !p->outs)
        return refuse(why, "out of host memory");
    for (int i = 0; i < p->n_outs; i++) {
        pw_value v = p->out_tuple ? pw_tuple_get(out.as.tuple, i) : out;
        out_item *item = &p->outs[i];
        if (v.kind == PW_VAL_TENSOR) {
            if (!describe_output_tensor(r, args, nargs, v.as.tensor, p, item, why)) return false;
        } else if (v.kind == PW_VAL_INT || v.kind == PW_VAL_FLOAT || v.kind == PW_VAL_BOOL ||
                   v.kind == PW_VAL_NONE) {
            item->kind = OUT_SCALAR;
            item->scalar = v;
        } else {
            return refuse(why, "an output is a %s", v.kind == PW_VAL_TUPLE ? "nested tuple" : "string");
        }
    }
    /* every block still live is an output: anything else would be held by
     * something the program cannot reproduce */
    for (size_t j = 0; j < r->n_blocks; j++)
        if (r->blocks[j].release_at == UINT32_MAX && !p->block_is_output[j])
            return refuse(why, "block #%zu outlives the piece without being an output", j);
    return true;
}

static bool build_program(const pw_engine *e, const recorder *r, const pw_value *args,
                          int nargs, size_t n1, pw_value out, piece_program *p, refusal *why) {
    if (r->failed) return refuse(why, "out of host memory while observing the graph pool");
    p->nargs = nargs;
    p->sigs = pw_host_calloc(nargs ? (size_t)nargs : 1, sizeof *p->sigs);
    if (!p->sigs) return refuse(why, "out of host memory");
    for (int i = 0; i < nargs; i++)
        if (!sig_of(&args[i], &p->sigs[i])) return refuse(why, "argument %d is not a tensor or scalar", i);
    if (!describe_launches(e, r, args, nargs, n1, p, why)) return false;
    p->events = pw_host_alloc((r->n_events ? r->n_events : 1) * sizeof *p->events);
    if (!p->events) return refuse(why, "out of host memory");
    if (r->n_events) memcpy(p->events, r->events, r->n_events * sizeof *p->events);
    p->n_events = r->n_events;
    p->n_blocks = r->n_blocks;
    return describe_output(r, args, nargs, out, p, why);
}

/* Runs the piece's plan inside the open capture, observing the pool. */
static pw_status run_observed(pw_engine *e, pw_piece *piece, const pw_value *args, int nargs,
                              recorder *r, pw_value *out) {
    memset(r, 0, sizeof *r);
    r->stream = e->stream;
    r->n0 = pw_stream_capture_num_launches(e->stream);
    pw_pool *pool = pw_capture_pool();
    pw_pool_observe(pool, observe, r);
    pw_status s = pw_plan_run(piece->plan, NULL, 0, args, nargs, out);
    pw_pool_observe(pool, NULL, NULL);
    return s;
}

static const char *piece_name(const pw_engine *e, const pw_piece *piece) {
    return pw_plan_submodule_name(e->stitch_plan, (int)(piece - e->pieces));
}

static pw_status record_program(pw_engine *e, pw_piece *piece, int64_t num_tokens,
                                const pw_value *args, int nargs, pw_value *out) {
    recorder r;
    PW_TRY(run_observed(e, piece, args, nargs, &r, out));
    piece_program *p = pw_host_calloc(1, sizeof *p);
    if (!p) {
        recorder_free(&r);
        pw_value_release(*out);
        *out = pw_value_none();
        return PW_ERR_OOM;
    }
    p->group = piece->group;
    p->num_tokens = num_tokens;
    refusal why = {{0}};
    p->relocatable =
        build_program(e, &r, args, nargs, pw_stream_capture_num_launches(e->stream), *out, p, &why);
    recorder_free(&r);
    if (!p->relocatable) {
        if (e->cfg.verify_capture) {
            program_free(p);
            pw_value_release(*out);
            *out = pw_value_none();
            return pw_error(PW_ERR_UNSAFE_CAPTURE,
                            "distinct-piece capture of piece '%s' at %" PRId64 " tokens: %s",
                            piece_name(e, piece), num_tokens, why.msg);
        }
        pw_log_debug("distinct-piece capture: piece '%s' at %" PRId64
                     " tokens is captured for real in every layer: %s",
                     piece_name(e, piece), num_tokens, why.msg);
        /* keep only the verdict: the description is not needed */
        piece_program verdict = {.group = p->group, .num_tokens = num_tokens};
        program_free(p);
        p = pw_host_calloc(1, sizeof *p);
        if (!p) return PW_OK; /* the piece itself was captured fine */
        *p = verdict;
    }
    p->next = e->distinct->programs;
    e->distinct->programs = p;
    e->distinct->programs_recorded++;
    return PW_OK;
}

/* ---- running a program ------------------------------------------------------------------- */

static pw_status run_program(pw_engine *e, const piece_program *p, const pw_value *args,
                             pw_value *out) {
    *out = pw_value_none();
    pw_pool *pool = pw_capture_pool();
    size_t nb = p->n_blocks ? p->n_blocks : 1;
    void **ptrs = pw_host_calloc(nb, sizeof *ptrs);
    pw_tensor **tensors = pw_host_calloc(nb, sizeof *tensors);
    bool *live = pw_host_calloc(nb, sizeof *live);
    pw_status s = ptrs && tensors && live ? PW_OK : PW_ERR_OOM;
    _Alignas(16) unsigned char buf[PW_MAX_KERNEL_ARG_BYTES];
    size_t ev = 0, rl = 0;
    for (size_t i = 0; s == PW_OK && i <= p->n_launches; i++) {
        for (; s == PW_OK && ev < p->n_events && p->events[ev].at_launch == i; ev++) {
            const pool_event *x = &p->events[ev];
            if (!x->alloc) {
                s = pw_pool_release(pool, ptrs[x->block]);
                live[x->block] = false;
            } else if (p->block_is_output[x->block]) {
                s = pw_tensor_new(pool, p->out_dtype[x->block], p->out_ndim[x->block],
                                  p->out_shape[x->block], &tensors[x->block]);
                if (s == PW_OK) ptrs[x->block] = tensors[x->block]->data;
            } else {
                s = pw_pool_alloc(pool, x->bytes, &ptrs[x->block]);
                live[x->block] = s == PW_OK;
            }
        }
        if (s != PW_OK || i == p->n_launches) break;
        size_t nbytes = p->arg_offsets[i + 1] - p->arg_offsets[i];
        memcpy(buf, p->bytes + p->arg_offsets[i], nbytes);
        for (; rl < p->n_relocs && p->relocs[rl].launch == i; rl++) {
            const reloc *x = &p->relocs[rl];
            char *base = x->kind == RELOC_ARG ? pw_tensor_data(args[x->index].as.tensor)
                                              : ptrs[x->index];
            uintptr_t v = (uintptr_t)(base + x->offset);
            memcpy(buf + x->byte, &v, sizeof v);
        }
        s = pw_launch(e->stream, p->kernels[i], buf, nbytes);
    }
    pw_tuple *tuple = NULL;
    if (s == PW_OK && p->out_tuple) s = pw_tuple_new(p->n_outs, &tuple);
    for (int i = 0; s == PW_OK && i < p->n_outs; i++) {
        const out_item *o = &p->outs[i];
        pw_value v = o->kind == OUT_SCALAR ? o->scalar
                     : o->kind == OUT_ARG  ? pw_value_retain(args[o->index])
                                           : pw_value_tensor(pw_tensor_retain(tensors[o->index]));
        if (tuple) pw_tuple_set(tuple, i, v);
        else *out = v;
    }
    if (s == PW_OK && tuple) *out = pw_value_tuple(tuple);
    else if (tuple) pw_tuple_release(tuple);
    /* the program's own references: the output holds what it returns */
    for (size_t j = 0; live && j < p->n_blocks; j++) {
        if (live[j]) (void)pw_pool_release(pool, ptrs[j]);
        pw_tensor_release(tensors[j]);
    }
    pw_host_free(ptrs);
    pw_host_free(tensors);
    pw_host_free(live);
    return s;
}

/* ---- checking: a patched piece against a real capture of it ---------------------------------- */

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

static pw_status compare_with_real(const pw_engine *e, const pw_piece *piece, int64_t num_tokens,
                                   const launch_copy *real, size_t n0) {
    size_t n = pw_stream_capture_num_launches(e->stream) - n0;
    const char *name = piece_name(e, piece);
    if (n != real->n)
        return pw_error(PW_ERR_UNSAFE_CAPTURE,
                        "distinct-piece capture of piece '%s' at %" PRId64
                        " tokens: the patched graph has %zu launches, a real capture %zu",
                        name, num_tokens, n, real->n);
    for (size_t i = 0; i < n; i++) {
        const pw_kernel *k;
        const void *a;
        size_t nb;
        PW_TRY(pw_stream_capture_launch_at(e->stream, n0 + i, &k, &a, &nb));
        size_t nr = real->offsets[i + 1] - real->offsets[i];
        if (k != real->kernels[i] || nb != nr)
            return pw_error(PW_ERR_UNSAFE_CAPTURE,
                            "distinct-piece capture of piece '%s' at %" PRId64
                            " tokens: launch #%zu is kernel %s (%zu argument bytes) patched and "
                            "%s (%zu) in a real capture",
                            name, num_tokens, i, k->name, nb, real->kernels[i]->name, nr);
        const unsigned char *x = real->bytes + real->offsets[i], *y = a;
        size_t lo = 0;
        while (lo < nb && x[lo] == y[lo]) lo++;
        if (lo == nb) continue;
        size_t hi = nb;
        while (x[hi - 1] == y[hi - 1]) hi--;
        return pw_error(PW_ERR_UNSAFE_CAPTURE,
                        "distinct-piece capture of piece '%s' at %" PRId64
                        " tokens: launch #%zu (kernel %s): argument bytes [%zu,%zu) of the "
                        "patched graph differ from a real capture",
                        name, num_tokens, i, k->name, lo, hi);
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

/* Captures the piece for real, takes its recording, rewinds the capture
 * and the pool to where they were, runs the program, and compares. */
static pw_status run_program_checked(pw_engine *e, pw_piece *piece, const piece_program *p,
                                     const pw_value *args, int nargs, pw_value *out) {
    pw_pool *pool = pw_capture_pool();
    size_t n0 = pw_stream_capture_num_launches(e->stream);
    pw_value real = pw_value_none();
    launch_copy copy = {0};
    pw_status s = PW_OK;
    /* a real capture that grew the pool ran on a smaller pool than the
     * program will: repeat it on the grown one, which is what it compares to */
    for (int round = 0; round < 2 && s == PW_OK; round++) {
        size_t before = reserved_bytes(pool);
        pw_value_release(real);
        real = pw_value_none();
        s = pw_stream_capture_rewind(e->stream, n0);
        if (s == PW_OK) s = pw_plan_run(piece->plan, NULL, 0, args, nargs, &real);
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
    if (s == PW_OK) s = run_program(e, p, args, out);
    if (s == PW_OK) s = compare_with_real(e, piece, p->num_tokens, &copy, n0);
    if (s == PW_OK && addrs_fit &&
        (!output_addresses(*out, addrs, &n) || n != n_real ||
         memcmp(addrs, real_addrs, (size_t)n * sizeof *addrs) != 0))
        s = pw_error(PW_ERR_UNSAFE_CAPTURE,
                     "distinct-piece capture of piece '%s' at %" PRId64
                     " tokens: the patched piece's output lies elsewhere than a real capture's",
                     piece_name(e, piece), p->num_tokens);
    launch_copy_free(&copy);
    if (s != PW_OK) {
        pw_value_release(*out);
        *out = pw_value_none();
    }
    return s;
}

/* ---- the hook ---------------------------------------------------------------------------- */

static const piece_program *find_program(const pw_engine *e, int group, int64_t num_tokens) {
    for (const piece_program *p = e->distinct->programs; p; p = p->next)
        if (p->group == group && p->num_tokens == num_tokens) return p;
    return NULL;
}

pw_status pw_engine_distinct_run(pw_engine *e, pw_piece *piece, const pw_value *args, int nargs,
                                 pw_value *out) {
    *out = pw_value_none();
    const pw_forward_context *ctx = NULL;
    if (!e->distinct || piece->group < 0 || !pw_stream_is_capturing(e->stream) ||
        pw_forward_context_get(&ctx) != PW_OK)
        return pw_plan_run(piece->plan, NULL, 0, args, nargs, out);
    int64_t num_tokens = ctx->desc.num_tokens;
    const piece_program *p = find_program(e, piece->group, num_tokens);
    if (!p) return record_program(e, piece, num_tokens, args, nargs, out);
    if (!p->relocatable || !sigs_match(p, args, nargs))
        return pw_plan_run(piece->plan, NULL, 0, args, nargs, out);
    pw_status s = e->cfg.verify_capture && pw_stream_device(e->stream) == PW_DEVICE_CPU
                      ? run_program_checked(e, piece, p, args, nargs, out)
                      : run_program(e, p, args, out);
    if (s != PW_OK) return s;
    if (ctx->mode == PW_MODE_PIECEWISE) e->distinct->graphs_patched++;
    else e->distinct->pieces_patched_in_full++;
    return PW_OK;
}
