/* Relocation of recorded launches (include/piecewise/relocate.h): record a
 * callable's capture as a program of (region, offset) address words and
 * pool events, run it with other arguments, and prove a run against a real
 * capture. Which words are addresses comes from each launched kernel's
 * pw_kernel.args, declared with the kernel's argument struct. */
#include "internal.h"

#include "backend/graph_record.h"
#include "core/tensor.h"
#include "mem/pool_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    if (*cap > SIZE_MAX / 2 / elem) return false;
    size_t c = *cap ? *cap * 2 : 16;
    void *q = pw_host_realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* ---- persistent regions ---------------------------------------------------------------- */

struct pw_reloc_regions {
    pw_reloc_region *list;
    size_t n, cap;
    bool lost; /* out of host memory while observing */
};

pw_status pw_reloc_regions_new(pw_reloc_regions **out) {
    if (!out) return pw_error(PW_ERR_INVALID_ARG, "pw_reloc_regions_new: out is NULL");
    *out = pw_host_calloc(1, sizeof **out);
    return *out ? PW_OK : PW_ERR_OOM;
}

void pw_reloc_regions_free(pw_reloc_regions *r) {
    if (!r) return;
    pw_host_free(r->list);
    pw_host_free(r);
}

pw_status pw_reloc_regions_add(pw_reloc_regions *r, const void *base, size_t bytes) {
    if (!r || !base || !bytes)
        return pw_error(PW_ERR_INVALID_ARG, "pw_reloc_regions_add: regions, base and bytes are "
                                            "required");
    if (!grow((void **)&r->list, &r->cap, r->n, sizeof *r->list)) return PW_ERR_OOM;
    r->list[r->n++] = (pw_reloc_region){(uintptr_t)base, bytes};
    return PW_OK;
}

static void observe_region(void *user, bool alloc, size_t bytes, void *ptr) {
    pw_reloc_regions *r = user;
    if (!alloc || r->lost) return;
    if (!grow((void **)&r->list, &r->cap, r->n, sizeof *r->list)) {
        r->lost = true;
        return;
    }
    r->list[r->n++] = (pw_reloc_region){(uintptr_t)ptr, bytes};
}

pw_status pw_reloc_regions_observe(pw_reloc_regions *r, pw_pool *pool, bool on) {
    if (!r || !pool)
        return pw_error(PW_ERR_INVALID_ARG, "pw_reloc_regions_observe: regions and pool are "
                                            "required");
    pw_pool_observe(pool, on ? observe_region : NULL, r);
    if (!on && r->lost)
        return pw_error(PW_ERR_OOM, "pw_reloc_regions_observe: a region of pool '%s' was lost "
                                    "for want of host memory",
                        pw_pool_name(pool));
    return PW_OK;
}

const pw_reloc_region *pw_reloc_regions_list(const pw_reloc_regions *r, size_t *n) {
    *n = r ? r->n : 0;
    return r ? r->list : NULL;
}

/* ---- arguments --------------------------------------------------------------------------- */

static bool sig_of(const pw_value *v, pw_reloc_sig *s) {
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

static pw_value sig_scalar(const pw_reloc_sig *s) {
    pw_value v = pw_value_none();
    v.kind = s->kind;
    if (s->kind == PW_VAL_INT) v.as.i = s->i;
    else if (s->kind == PW_VAL_BOOL) v.as.b = s->i != 0;
    else if (s->kind == PW_VAL_FLOAT) v.as.f = s->f;
    return v;
}

bool pw_reloc_program_matches(const pw_reloc_program *p, const pw_value *args, int nargs) {
    if (!p || nargs != p->nargs) return false;
    for (int i = 0; i < nargs; i++) {
        pw_reloc_sig s;
        if (!sig_of(&args[i], &s) || memcmp(&s, &p->sigs[i], sizeof s) != 0) return false;
    }
    return true;
}

void pw_reloc_program_free(pw_reloc_program *p) {
    if (!p) return;
    pw_host_free(p->sigs);
    pw_host_free(p->kernels);
    pw_host_free(p->arg_offsets);
    pw_host_free(p->bytes);
    pw_host_free(p->relocs);
    pw_host_free(p->events);
    pw_host_free(p->out_blocks);
    pw_host_free(p->outs);
    pw_host_free(p);
}

/* ---- recording ----------------------------------------------------------------------------- */

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
    pw_reloc_event *events;
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
    pw_reloc_event *ev = &r->events[r->n_events];
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

/* While a program is checked against a real capture, the real run and its
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

static bool refuse(char *why, const char *fmt, ...) PW_PRINTF(2, 3);
static bool refuse(char *why, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, PW_RELOC_WHY_CAP, fmt, ap);
    va_end(ap);
    return false;
}

/* The data range of each tensor argument. */
typedef struct arg_range {
    uintptr_t start, end; /* end == start: not a tensor, or nothing addressable */
} arg_range;

/* Classifies one non-NULL address word of launch i. */
static bool classify(const pw_reloc_regions *regions, const recorder *r, const arg_range *args,
                     int nargs, uint32_t i, uintptr_t p, pw_reloc *out) {
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
    size_t n_regions = 0;
    const pw_reloc_region *reg = pw_reloc_regions_list(regions, &n_regions);
    for (size_t j = 0; j < n_regions; j++) {
        if (p >= reg[j].base && p < reg[j].base + reg[j].bytes) {
            out->kind = PW_RELOC_REGION;
            out->index = (uint32_t)j;
            out->offset = p - reg[j].base;
            return true;
        }
    }
    return false;
}

/* The launches [r->n0, end) with each address word classified. */
static bool describe_launches(const pw_reloc_regions *regions, const recorder *r,
                              const arg_range *args, int nargs, pw_reloc_program *p, char *why) {
    pw_launch_copy copy;
    size_t n1 = pw_stream_capture_num_launches(r->stream);
    if (pw_launch_copy_take(NULL, r->stream, r->n0, n1, &copy) != PW_OK)
        return refuse(why, "out of host memory");
    p->n_launches = copy.n;
    p->kernels = copy.kernels;
    p->arg_offsets = copy.offsets;
    p->bytes = copy.bytes;
    size_t n_relocs = 0, cap_relocs = 0;
    for (size_t i = 0; i < p->n_launches; i++) {
        const pw_kernel *k = p->kernels[i];
        const unsigned char *a = p->bytes + p->arg_offsets[i];
        size_t nb = p->arg_offsets[i + 1] - p->arg_offsets[i];
        const pw_kernel_args *lay = k ? k->args : NULL;
        if (!lay)
            return refuse(why, "launch #%zu (kernel %s) declares no argument layout "
                               "(pw_kernel.args), so its address words are unknown",
                          i, k && k->name ? k->name : "?");
        if (lay->size != nb || lay->n_addresses < 0 || lay->n_addresses > PW_KERNEL_MAX_ADDRESSES)
            return refuse(why, "launch #%zu (kernel %s) has %zu argument bytes, its layout %zu",
                          i, k->name, nb, lay->size);
        for (int w = 0; w < lay->n_addresses; w++) {
            if ((size_t)lay->addresses[w] + sizeof(uintptr_t) > nb)
                return refuse(why, "launch #%zu (kernel %s): address word at byte %u is past "
                                   "its %zu argument bytes",
                              i, k->name, (unsigned)lay->addresses[w], nb);
            uintptr_t v;
            memcpy(&v, a + lay->addresses[w], sizeof v);
            if (!v) continue;
            pw_reloc rl = {(uint32_t)i, lay->addresses[w], 0, 0, 0};
            if (!classify(regions, r, args, nargs, (uint32_t)i, v, &rl))
                return refuse(why, "launch #%zu (kernel %s): the address word at byte %u holds "
                                   "%p, which lies in no region (arguments, blocks of this "
                                   "capture, persistent regions)",
                              i, k->name, (unsigned)lay->addresses[w], (void *)v);
            if (!grow((void **)&p->relocs, &cap_relocs, n_relocs, sizeof *p->relocs))
                return refuse(why, "out of host memory");
            p->relocs[n_relocs++] = rl;
        }
    }
    p->n_relocs = n_relocs;
    return true;
}

static bool describe_output_tensor(const recorder *r, const pw_value *args, int nargs,
                                   const pw_tensor *t, pw_reloc_program *p, pw_reloc_out *item,
                                   char *why) {
    for (int k = 0; k < nargs; k++)
        if (args[k].kind == PW_VAL_TENSOR && args[k].as.tensor == t) {
            item->kind = PW_RELOC_OUT_ARG;
            item->index = (uint32_t)k;
            return true;
        }
    for (size_t j = 0; j < r->n_blocks; j++) {
        const block_info *b = &r->blocks[j];
        if (b->release_at != UINT32_MAX || b->ptr != (uintptr_t)t->data) continue;
        if (t->base || !pw_tensor_is_contiguous(t) || pw_tensor_nbytes(t) != b->bytes)
            return refuse(why, "an output is a view of a block of the capture");
        pw_reloc_out_block *ob = &p->out_blocks[j];
        if (ob->is_output) return refuse(why, "two outputs share one block");
        ob->is_output = true;
        ob->dtype = t->dtype;
        ob->ndim = t->ndim;
        memcpy(ob->shape, t->shape, sizeof ob->shape);
        item->kind = PW_RELOC_OUT_BLOCK;
        item->index = (uint32_t)j;
        return true;
    }
    return refuse(why, "an output is neither an argument nor a block of the capture");
}

static bool describe_output(const recorder *r, const pw_value *args, int nargs, pw_value out,
                            pw_reloc_program *p, char *why) {
    p->out_blocks = pw_host_calloc(r->n_blocks ? r->n_blocks : 1, sizeof *p->out_blocks);
    p->out_tuple = out.kind == PW_VAL_TUPLE;
    p->n_outs = p->out_tuple ? pw_tuple_size(out.as.tuple) : 1;
    p->outs = pw_host_calloc(p->n_outs ? (size_t)p->n_outs : 1, sizeof *p->outs);
    if (!p->out_blocks || !p->outs) return refuse(why, "out of host memory");
    for (int i = 0; i < p->n_outs; i++) {
        pw_value v = p->out_tuple ? pw_tuple_get(out.as.tuple, i) : out;
        pw_reloc_out *item = &p->outs[i];
        if (v.kind == PW_VAL_TENSOR) {
            if (!describe_output_tensor(r, args, nargs, v.as.tensor, p, item, why)) return false;
        } else if (sig_of(&v, &item->scalar)) {
            item->kind = PW_RELOC_OUT_SCALAR;
        } else {
            return refuse(why, "an output is a %s",
                          v.kind == PW_VAL_TUPLE ? "nested tuple" : "string");
        }
    }
    /* every block still live is an output: anything else would be held by
     * something the program cannot reproduce */
    for (size_t j = 0; j < r->n_blocks; j++)
        if (r->blocks[j].release_at == UINT32_MAX && !p->out_blocks[j].is_output)
            return refuse(why, "block #%zu outlives the capture without being an output", j);
    return true;
}

static bool build_program(const pw_reloc_regions *regions, const recorder *r, const pw_value *args,
                          int nargs, pw_value out, pw_reloc_program *p, char *why) {
    if (r->failed) return refuse(why, "out of host memory while observing the graph pool");
    p->nargs = nargs;
    p->sigs = pw_host_calloc(nargs ? (size_t)nargs : 1, sizeof *p->sigs);
    if (!p->sigs) return refuse(why, "out of host memory");
    for (int i = 0; i < nargs; i++)
        if (!sig_of(&args[i], &p->sigs[i]))
            return refuse(why, "argument %d is not a tensor or a scalar", i);
    arg_range *ranges = pw_host_calloc(nargs ? (size_t)nargs : 1, sizeof *ranges);
    if (!ranges) return refuse(why, "out of host memory");
    for (int k = 0; k < nargs; k++) {
        if (args[k].kind != PW_VAL_TENSOR) continue;
        ranges[k].start = (uintptr_t)pw_tensor_data(args[k].as.tensor);
        ranges[k].end = ranges[k].start + pw_reloc_sig_extent(&p->sigs[k]);
    }
    bool ok = describe_launches(regions, r, ranges, nargs, p, why);
    pw_host_free(ranges);
    if (!ok) return false;
    p->events = pw_host_alloc((r->n_events ? r->n_events : 1) * sizeof *p->events);
    if (!p->events) return refuse(why, "out of host memory");
    if (r->n_events) memcpy(p->events, r->events, r->n_events * sizeof *p->events);
    p->n_events = r->n_events;
    p->n_blocks = r->n_blocks;
    return describe_output(r, args, nargs, out, p, why);
}

pw_status pw_reloc_record(pw_stream *s, const pw_reloc_regions *regions, pw_callable run,
                          const pw_value *args, int nargs, pw_value *out,
                          pw_reloc_program **program, char *why) {
    *out = pw_value_none();
    *program = NULL;
    why[0] = '\0';
    if (!s || !run.fn || nargs < 0 || (nargs && !args))
        return pw_error(PW_ERR_INVALID_ARG, "pw_reloc_record: stream, callable and arguments are "
                                            "required");
    if (!pw_stream_is_capturing(s))
        return pw_error(PW_ERR_CAPTURE, "pw_reloc_record: no capture is open on the stream");
    recorder r;
    recorder_push(&r, s);
    pw_status st = run.fn(run.user, args, nargs, out);
    recorder_pop(&r);
    if (st != PW_OK) {
        recorder_free(&r);
        return st;
    }
    pw_reloc_program *p = pw_host_calloc(1, sizeof *p);
    if (!p) {
        refuse(why, "out of host memory");
    } else if (!build_program(regions, &r, args, nargs, *out, p, why)) {
        pw_reloc_program_free(p);
        p = NULL;
    }
    recorder_free(&r);
    *program = p;
    return PW_OK;
}

/* ---- running ------------------------------------------------------------------------------- */

#define RUN_SMALL_BLOCKS 64

pw_status pw_reloc_program_run(const pw_reloc_program *p, pw_stream *s,
                               const pw_reloc_regions *regions, const pw_value *args, int nargs,
                               pw_value *out) {
    *out = pw_value_none();
    if (!p || !s || nargs != p->nargs || (nargs && !args))
        return pw_error(PW_ERR_INVALID_ARG, "pw_reloc_program_run: program, stream and its %d "
                                            "arguments are required",
                        p ? p->nargs : 0);
    pw_pool *pool = pw_capture_pool();
    if (!pool || !pw_stream_is_capturing(s))
        return pw_error(PW_ERR_CAPTURE, "pw_reloc_program_run: no capture is open on the stream");
    size_t n_regions = 0;
    const pw_reloc_region *reg = pw_reloc_regions_list(regions, &n_regions);
    size_t nb = p->n_blocks ? p->n_blocks : 1;
    /* a piece has a few blocks: no allocation for their bookkeeping */
    void *ptrs_small[RUN_SMALL_BLOCKS];
    pw_tensor *tensors_small[RUN_SMALL_BLOCKS];
    bool live_small[RUN_SMALL_BLOCKS];
    bool small = nb <= RUN_SMALL_BLOCKS;
    void **ptrs = small ? ptrs_small : pw_host_alloc(nb * sizeof *ptrs);
    pw_tensor **tensors = small ? tensors_small : pw_host_alloc(nb * sizeof *tensors);
    bool *live = small ? live_small : pw_host_alloc(nb * sizeof *live);
    pw_status st = ptrs && tensors && live ? PW_OK : PW_ERR_OOM;
    if (st == PW_OK) {
        memset(ptrs, 0, nb * sizeof *ptrs);
        memset(tensors, 0, nb * sizeof *tensors);
        memset(live, 0, nb * sizeof *live);
    }
    _Alignas(16) unsigned char buf[PW_MAX_KERNEL_ARG_BYTES];
    size_t ev = 0, rl = 0;
    for (size_t i = 0; st == PW_OK && i <= p->n_launches; i++) {
        for (; st == PW_OK && ev < p->n_events && p->events[ev].at_launch == i; ev++) {
            const pw_reloc_event *x = &p->events[ev];
            const pw_reloc_out_block *ob = &p->out_blocks[x->block];
            if (!x->alloc) {
                st = pw_pool_release(pool, ptrs[x->block]);
                live[x->block] = false;
            } else if (ob->is_output) {
                st = pw_tensor_new(pool, ob->dtype, ob->ndim, ob->shape, &tensors[x->block]);
                if (st == PW_OK) ptrs[x->block] = tensors[x->block]->data;
            } else {
                st = pw_pool_alloc(pool, (size_t)x->bytes, &ptrs[x->block]);
                live[x->block] = st == PW_OK;
            }
        }
        if (st != PW_OK || i == p->n_launches) break;
        size_t nbytes = p->arg_offsets[i + 1] - p->arg_offsets[i];
        memcpy(buf, p->bytes + p->arg_offsets[i], nbytes);
        for (; rl < p->n_relocs && p->relocs[rl].launch == i; rl++) {
            const pw_reloc *x = &p->relocs[rl];
            uintptr_t base =
                x->kind == PW_RELOC_ARG     ? (uintptr_t)pw_tensor_data(args[x->index].as.tensor)
                : x->kind == PW_RELOC_BLOCK ? (uintptr_t)ptrs[x->index]
                : x->index < n_regions      ? reg[x->index].base
                                            : 0;
            if (!base) {
                st = pw_error(PW_ERR_INVALID_ARG, "pw_reloc_program_run: launch #%zu addresses "
                                                  "region %u of %zu",
                              i, x->index, n_regions);
                break;
            }
            uintptr_t v = base + (uintptr_t)x->offset;
            memcpy(buf + x->byte, &v, sizeof v);
        }
        if (st == PW_OK) st = pw_launch(s, p->kernels[i], buf, nbytes);
    }
    pw_tuple *tuple = NULL;
    if (st == PW_OK && p->out_tuple) st = pw_tuple_new(p->n_outs, &tuple);
    for (int i = 0; st == PW_OK && i < p->n_outs; i++) {
        const pw_reloc_out *o = &p->outs[i];
        pw_value v = o->kind == PW_RELOC_OUT_SCALAR ? sig_scalar(&o->scalar)
                     : o->kind == PW_RELOC_OUT_ARG
                         ? pw_value_retain(args[o->index])
                         : pw_value_tensor(pw_tensor_retain(tensors[o->index]));
        if (tuple) pw_tuple_set(tuple, i, v);
        else *out = v;
    }
    if (st == PW_OK && tuple) *out = pw_value_tuple(tuple);
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
    return st;
}

/* ---- checking: a run against a real capture -------------------------------------------------- */

static pw_status compare_with_real(pw_stream *s, const char *label, const pw_launch_copy *real,
                                   size_t n0) {
    pw_launch_copy got;
    PW_TRY(pw_launch_copy_take(NULL, s, n0, pw_stream_capture_num_launches(s), &got));
    pw_status st = PW_OK;
    if (got.n != real->n)
        st = pw_error(PW_ERR_UNSAFE_CAPTURE,
                      "relocation of %s: the relocated graph has %zu launches, a real capture %zu",
                      label, got.n, real->n);
    for (size_t i = 0; st == PW_OK && i < got.n; i++) {
        const pw_kernel *k = got.kernels[i];
        size_t nb = got.offsets[i + 1] - got.offsets[i];
        size_t nr = real->offsets[i + 1] - real->offsets[i];
        if (k != real->kernels[i] || nb != nr) {
            st = pw_error(PW_ERR_UNSAFE_CAPTURE,
                          "relocation of %s: launch #%zu is kernel %s (%zu argument bytes) "
                          "relocated and %s (%zu) in a real capture",
                          label, i, k->name, nb, real->kernels[i]->name, nr);
            break;
        }
        const unsigned char *x = real->bytes + real->offsets[i], *y = got.bytes + got.offsets[i];
        size_t lo = 0;
        while (lo < nb && x[lo] == y[lo]) lo++;
        if (lo == nb) continue;
        size_t hi = nb;
        while (x[hi - 1] == y[hi - 1]) hi--;
        st = pw_error(PW_ERR_UNSAFE_CAPTURE,
                      "relocation of %s: launch #%zu (kernel %s): argument bytes [%zu,%zu) of the "
                      "relocated graph differ from a real capture",
                      label, i, k->name, lo, hi);
    }
    pw_launch_copy_free(&got);
    return st;
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

pw_status pw_reloc_program_run_checked(const pw_reloc_program *p, pw_stream *s,
                                       const pw_reloc_regions *regions, pw_callable run,
                                       const pw_value *args, int nargs, const char *label,
                                       pw_value *out) {
    *out = pw_value_none();
    if (!p || !s || !run.fn)
        return pw_error(PW_ERR_INVALID_ARG, "pw_reloc_program_run_checked: program, stream and "
                                            "callable are required");
    pw_pool *pool = pw_capture_pool();
    if (!pool || !pw_stream_is_capturing(s))
        return pw_error(PW_ERR_CAPTURE, "pw_reloc_program_run_checked: no capture is open on the "
                                        "stream");
    if (!label) label = "a program";
    size_t n0 = pw_stream_capture_num_launches(s);
    pw_value real = pw_value_none();
    pw_launch_copy copy = {0};
    pw_status st = PW_OK;
    recorder *outer = recorders_suspend();
    /* a real capture that grew the pool ran on a smaller pool than the
     * program will: repeat it on the grown one, which is what it compares to */
    for (int round = 0; round < 2 && st == PW_OK; round++) {
        size_t before = reserved_bytes(pool);
        pw_value_release(real);
        real = pw_value_none();
        st = pw_stream_capture_rewind(s, n0);
        if (st == PW_OK) st = run.fn(run.user, args, nargs, &real);
        if (st == PW_OK && reserved_bytes(pool) == before) break;
    }
    if (st == PW_OK)
        st = pw_launch_copy_take(NULL, s, n0, pw_stream_capture_num_launches(s), &copy);
    /* the real output is compared by address after the program ran: keep
     * the addresses, give the blocks back */
    void *real_addrs[CHECKED_OUTPUTS_MAX], *addrs[CHECKED_OUTPUTS_MAX];
    int n_real = 0, n = 0;
    bool addrs_fit = output_addresses(real, real_addrs, &n_real);
    pw_value_release(real);
    if (st == PW_OK) st = pw_stream_capture_rewind(s, n0);
    recorders_resume(outer);
    if (st == PW_OK) st = pw_reloc_program_run(p, s, regions, args, nargs, out);
    if (st == PW_OK) st = compare_with_real(s, label, &copy, n0);
    if (st == PW_OK && addrs_fit &&
        (!output_addresses(*out, addrs, &n) || n != n_real ||
         memcmp(addrs, real_addrs, (size_t)n * sizeof *addrs) != 0))
        st = pw_error(PW_ERR_UNSAFE_CAPTURE,
                      "relocation of %s: the relocated output lies elsewhere than a real "
                      "capture's",
                      label);
    pw_launch_copy_free(&copy);
    if (st != PW_OK) {
        pw_value_release(*out);
        *out = pw_value_none();
    }
    return st;
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

uint64_t pw_reloc_sig_extent(const pw_reloc_sig *s) {
    if (!s || s->kind != PW_VAL_TENSOR || (unsigned)s->dtype >= PW_DTYPE_COUNT_ || s->ndim < 0 ||
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

uint64_t pw_reloc_out_block_bytes(const pw_reloc_out_block *b) {
    if (!b || (unsigned)b->dtype >= PW_DTYPE_COUNT_ || b->ndim < 0 || b->ndim > PW_MAX_DIMS)
        return 0;
    uint64_t numel = 1;
    for (int i = 0; i < b->ndim; i++) {
        if (b->shape[i] < 0) return 0;
        numel = mul_capped(numel, (uint64_t)b->shape[i]);
    }
    if (numel % (uint64_t)pw_dtype_block_elems(b->dtype)) return 0;
    return elems_to_bytes(b->dtype, numel);
}
