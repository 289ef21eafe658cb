/* The graph cache file: write, read, validate (docs/graph-cache.md).
 *
 * Everything in a file is untrusted: counts are bounded by the bytes left
 * before anything is allocated, every index and offset is checked against
 * what it refers to, and a program runs only if each address word of each
 * launch is either NULL or rebuilt from a relocation, so no address from the
 * writing process is ever used. */
#include "model/graph_cache.h"

#include "core/file.h"

#include "model/engine_internal.h"
#include "model/gguf.h"
#include "ops/kernel_args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "PWGRAPHS"
#define CACHE_FORMAT 1
/* Larger files are not read (a cache of thousands of graphs is a few MiB). */
#define CACHE_MAX_FILE_BYTES ((size_t)1 << 30)
#define CACHE_MAX_BLOCK_BYTES ((uint64_t)1 << 46)

/* ---- bytes out ---------------------------------------------------------------------------- */

typedef struct writer {
    unsigned char *buf;
    size_t len, cap;
    bool oom;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (w->oom) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        unsigned char *b = pw_host_realloc(w->buf, cap);
        if (!b) {
            w->oom = true;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put_u8(writer *w, uint8_t v) { put(w, &v, 1); }
static void put_u16(writer *w, uint16_t v) { put(w, &v, 2); }
static void put_u32(writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(writer *w, uint64_t v) { put(w, &v, 8); }
static void put_i64(writer *w, int64_t v) { put(w, &v, 8); }
static void put_f64(writer *w, double v) { put(w, &v, 8); }

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_BASIS 0xcbf29ce484222325ull

static void put_sig(writer *w, const pw_arg_sig *s) {
    put_u8(w, (uint8_t)s->kind);
    put_u8(w, (uint8_t)s->ndim);
    put_u16(w, 0);
    put_u32(w, (uint32_t)s->dtype);
    for (int i = 0; i < PW_MAX_DIMS; i++) put_i64(w, s->shape[i]);
    for (int i = 0; i < PW_MAX_DIMS; i++) put_i64(w, s->stride[i]);
    put_i64(w, s->i);
    put_f64(w, s->f);
}

static void put_program(writer *w, const pw_program *p) {
    put_u32(w, (uint32_t)p->group);
    put_i64(w, p->desc.num_tokens);
    put_i64(w, p->desc.num_reqs);
    put_u8(w, p->desc.uniform);
    put_u8(w, p->desc.has_lora);
    put_u8(w, p->out_tuple);
    put_u8(w, 0);
    put_u32(w, (uint32_t)p->nargs);
    for (int i = 0; i < p->nargs; i++) put_sig(w, &p->sigs[i]);
    put_u32(w, (uint32_t)p->n_launches);
    size_t rl = 0;
    for (size_t i = 0; i < p->n_launches; i++) {
        size_t nb = p->arg_offsets[i + 1] - p->arg_offsets[i];
        put_u16(w, p->kernel_ids[i]);
        put_u16(w, (uint16_t)nb);
        /* relocated words are written as zeros: the file holds no address */
        unsigned char a[PW_MAX_KERNEL_ARG_BYTES];
        memcpy(a, p->bytes + p->arg_offsets[i], nb);
        for (; rl < p->n_relocs && p->relocs[rl].launch == i; rl++)
            memset(a + p->relocs[rl].byte, 0, sizeof(uintptr_t));
        put(w, a, nb);
    }
    put_u32(w, (uint32_t)p->n_relocs);
    for (size_t i = 0; i < p->n_relocs; i++) {
        const pw_reloc *r = &p->relocs[i];
        put_u32(w, r->launch);
        put_u16(w, r->byte);
        put_u8(w, r->kind);
        put_u8(w, 0);
        put_u32(w, r->index);
        put_u64(w, r->offset);
    }
    put_u32(w, (uint32_t)p->n_events);
    for (size_t i = 0; i < p->n_events; i++) {
        const pw_pool_event *x = &p->events[i];
        put_u8(w, x->alloc);
        put_u8(w, 0);
        put_u16(w, 0);
        put_u32(w, x->block);
        put_u32(w, x->at_launch);
        put_u64(w, x->bytes);
    }
    put_u32(w, (uint32_t)p->n_blocks);
    for (size_t j = 0; j < p->n_blocks; j++) {
        const pw_out_block *b = &p->out_blocks[j];
        put_u8(w, b->is_output);
        put_u8(w, (uint8_t)b->ndim);
        put_u16(w, 0);
        put_u32(w, (uint32_t)b->dtype);
        for (int i = 0; i < PW_MAX_DIMS; i++) put_i64(w, b->shape[i]);
    }
    put_u32(w, (uint32_t)p->n_outs);
    for (int i = 0; i < p->n_outs; i++) {
        put_u8(w, p->outs[i].kind);
        put_u8(w, 0);
        put_u16(w, 0);
        put_u32(w, p->outs[i].index);
        put_sig(w, &p->outs[i].scalar);
    }
}

pw_status pw_graph_cache_serialize(const pw_program *list, uint64_t fingerprint,
                                   const pw_region *regions, size_t n_regions,
                                   unsigned char **out, size_t *size) {
    *out = NULL;
    *size = 0;
    writer w = {0};
    put(&w, CACHE_MAGIC, 8);
    put_u32(&w, CACHE_FORMAT);
    put_u32(&w, 0);
    put_u64(&w, fingerprint);
    put_u64(&w, n_regions);
    for (size_t i = 0; i < n_regions; i++) put_u64(&w, regions[i].bytes);
    uint64_t n = 0;
    for (const pw_program *p = list; p; p = p->next) n += p->relocatable;
    put_u64(&w, n);
    for (const pw_program *p = list; p; p = p->next)
        if (p->relocatable) put_program(&w, p);
    if (!w.oom) put_u64(&w, fnv1a(FNV_BASIS, w.buf, w.len));
    if (w.oom) {
        pw_host_free(w.buf);
        return PW_ERR_OOM;
    }
    *out = w.buf;
    *size = w.len;
    return PW_OK;
}

/* ---- bytes in ----------------------------------------------------------------------------- */

typedef struct reader {
    const unsigned char *p;
    size_t left;
    bool bad;
} reader;

static bool get(reader *r, void *dst, size_t n) {
    if (r->bad || r->left < n) {
        r->bad = true;
        memset(dst, 0, n);
        return false;
    }
    memcpy(dst, r->p, n);
    r->p += n;
    r->left -= n;
    return true;
}

static uint8_t get_u8(reader *r) { uint8_t v; get(r, &v, 1); return v; }
static uint16_t get_u16(reader *r) { uint16_t v; get(r, &v, 2); return v; }
static uint32_t get_u32(reader *r) { uint32_t v; get(r, &v, 4); return v; }
static uint64_t get_u64(reader *r) { uint64_t v; get(r, &v, 8); return v; }
static int64_t get_i64(reader *r) { int64_t v; get(r, &v, 8); return v; }
static double get_f64(reader *r) { double v; get(r, &v, 8); return v; }

/* A count of items at least `min_bytes` each, or -1 when the bytes left cannot hold them. */
static int64_t get_count(reader *r, size_t min_bytes, uint64_t limit) {
    uint32_t n = get_u32(r);
    if (r->bad || n > limit || (uint64_t)n * min_bytes > r->left) {
        r->bad = true;
        return -1;
    }
    return n;
}

#define SIG_BYTES (8 + 8 * 2 * PW_MAX_DIMS + 16)

static void get_sig(reader *r, pw_arg_sig *s) {
    memset(s, 0, sizeof *s);
    s->kind = (pw_value_kind)get_u8(r);
    s->ndim = get_u8(r);
    (void)get_u16(r);
    s->dtype = (pw_dtype)get_u32(r);
    for (int i = 0; i < PW_MAX_DIMS; i++) s->shape[i] = get_i64(r);
    for (int i = 0; i < PW_MAX_DIMS; i++) s->stride[i] = get_i64(r);
    s->i = get_i64(r);
    s->f = get_f64(r);
}

static bool sig_valid(const pw_arg_sig *s) {
    switch (s->kind) {
    case PW_VAL_TENSOR:
        if ((unsigned)s->dtype >= PW_DTYPE_COUNT_ || s->ndim < 0 || s->ndim > PW_MAX_DIMS)
            return false;
        for (int i = 0; i < PW_MAX_DIMS; i++)
            if (s->shape[i] < 0 || (i >= s->ndim && (s->shape[i] || s->stride[i]))) return false;
        return true;
    case PW_VAL_INT:
    case PW_VAL_FLOAT:
    case PW_VAL_BOOL:
    case PW_VAL_NONE: return s->ndim == 0;
    default: return false;
    }
}

/* Reads one program; false on truncation or a malformed field (why set). */
static bool get_program(reader *r, pw_program *p, char *why, size_t cap) {
    p->group = (int32_t)get_u32(r);
    p->desc.num_tokens = get_i64(r);
    p->desc.num_reqs = get_i64(r);
    p->desc.uniform = get_u8(r) != 0;
    p->desc.has_lora = get_u8(r) != 0;
    p->out_tuple = get_u8(r) != 0;
    (void)get_u8(r);
    int64_t n = get_count(r, SIG_BYTES, 1 << 16);
    if (n < 0) return snprintf(why, cap, "truncated arguments"), false;
    p->nargs = (int)n;
    p->sigs = pw_host_calloc((size_t)n + 1, sizeof *p->sigs);
    if (!p->sigs) return snprintf(why, cap, "out of host memory"), false;
    for (int i = 0; i < p->nargs; i++) get_sig(r, &p->sigs[i]);
    n = get_count(r, 4, 1 << 24);
    if (n < 0) return snprintf(why, cap, "truncated launches"), false;
    p->n_launches = (size_t)n;
    p->kernel_ids = pw_host_calloc((size_t)n + 1, sizeof *p->kernel_ids);
    p->kernels = pw_host_calloc((size_t)n + 1, sizeof *p->kernels);
    p->arg_offsets = pw_host_calloc((size_t)n + 1, sizeof *p->arg_offsets);
    if (!p->kernel_ids || !p->kernels || !p->arg_offsets)
        return snprintf(why, cap, "out of host memory"), false;
    /* the argument bytes: a first pass sizes them, bounded by the file */
    size_t total = 0;
    const unsigned char *start = r->p;
    size_t left = r->left;
    for (size_t i = 0; i < p->n_launches && !r->bad; i++) {
        p->kernel_ids[i] = get_u16(r);
        uint16_t nb = get_u16(r);
        if (nb > PW_MAX_KERNEL_ARG_BYTES || nb > r->left) {
            r->bad = true;
            break;
        }
        p->arg_offsets[i] = total;
        total += nb;
        r->p += nb;
        r->left -= nb;
    }
    if (r->bad) return snprintf(why, cap, "truncated launch arguments"), false;
    p->arg_offsets[p->n_launches] = total;
    p->bytes = pw_host_alloc(total + 1);
    if (!p->bytes) return snprintf(why, cap, "out of host memory"), false;
    r->p = start;
    r->left = left;
    for (size_t i = 0; i < p->n_launches; i++) {
        (void)get_u16(r);
        (void)get_u16(r);
        get(r, p->bytes + p->arg_offsets[i], p->arg_offsets[i + 1] - p->arg_offsets[i]);
    }
    n = get_count(r, 20, 1 << 26);
    if (n < 0) return snprintf(why, cap, "truncated relocations"), false;
    p->n_relocs = (size_t)n;
    p->relocs = pw_host_calloc((size_t)n + 1, sizeof *p->relocs);
    if (!p->relocs) return snprintf(why, cap, "out of host memory"), false;
    for (size_t i = 0; i < p->n_relocs; i++) {
        pw_reloc *x = &p->relocs[i];
        x->launch = get_u32(r);
        x->byte = get_u16(r);
        x->kind = get_u8(r);
        (void)get_u8(r);
        x->index = get_u32(r);
        x->offset = get_u64(r);
    }
    n = get_count(r, 20, 1 << 26);
    if (n < 0) return snprintf(why, cap, "truncated pool events"), false;
    p->n_events = (size_t)n;
    p->events = pw_host_calloc((size_t)n + 1, sizeof *p->events);
    if (!p->events) return snprintf(why, cap, "out of host memory"), false;
    for (size_t i = 0; i < p->n_events; i++) {
        pw_pool_event *x = &p->events[i];
        x->alloc = get_u8(r) != 0;
        (void)get_u8(r);
        (void)get_u16(r);
        x->block = get_u32(r);
        x->at_launch = get_u32(r);
        x->bytes = get_u64(r);
    }
    n = get_count(r, 8 + 8 * PW_MAX_DIMS, 1 << 26);
    if (n < 0) return snprintf(why, cap, "truncated blocks"), false;
    p->n_blocks = (size_t)n;
    p->out_blocks = pw_host_calloc((size_t)n + 1, sizeof *p->out_blocks);
    if (!p->out_blocks) return snprintf(why, cap, "out of host memory"), false;
    for (size_t j = 0; j < p->n_blocks; j++) {
        pw_out_block *b = &p->out_blocks[j];
        b->is_output = get_u8(r) != 0;
        b->ndim = get_u8(r);
        (void)get_u16(r);
        b->dtype = (pw_dtype)get_u32(r);
        for (int i = 0; i < PW_MAX_DIMS; i++) b->shape[i] = get_i64(r);
    }
    n = get_count(r, 8 + SIG_BYTES, 1 << 16);
    if (n < 0) return snprintf(why, cap, "truncated outputs"), false;
    p->n_outs = (int)n;
    p->outs = pw_host_calloc((size_t)n + 1, sizeof *p->outs);
    if (!p->outs) return snprintf(why, cap, "out of host memory"), false;
    for (int i = 0; i < p->n_outs; i++) {
        p->outs[i].kind = get_u8(r);
        (void)get_u8(r);
        (void)get_u16(r);
        p->outs[i].index = get_u32(r);
        get_sig(r, &p->outs[i].scalar);
    }
    if (r->bad) return snprintf(why, cap, "truncated program"), false;
    return true;
}

/* ---- validation ------------------------------------------------------------------------------ */

static bool invalid(char *why, size_t cap, const char *fmt, ...) PW_PRINTF(3, 4);
static bool invalid(char *why, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return false;
}

static bool validate_program(pw_program *p, const pw_graph_cache_env *env, const pw_region *regions,
                             size_t n_regions, char *why, size_t cap) {
    if (p->group < PW_PROGRAM_FORWARD) return invalid(why, cap, "group %d", p->group);
    if (p->desc.num_tokens < 1) return invalid(why, cap, "%" PRId64 " tokens", p->desc.num_tokens);
    for (int i = 0; i < p->nargs; i++)
        if (!sig_valid(&p->sigs[i])) return invalid(why, cap, "argument %d is malformed", i);
    for (size_t i = 0; i < p->n_launches; i++) {
        int id = p->kernel_ids[i];
        const pw_kernel_arg_layout *lay = pw_kernel_arg_layout_of(id);
        const pw_kernel *k = lay && env->set ? env->set->entries[id].kernel : NULL;
        if (!k)
            return invalid(why, cap, "launch #%zu names kernel id %d, which the %s kernel set "
                                     "lacks", i, id, env->set ? env->set->name : "(no)");
        size_t nb = p->arg_offsets[i + 1] - p->arg_offsets[i];
        if (nb != lay->size)
            return invalid(why, cap, "launch #%zu (kernel %s) has %zu argument bytes, the kernel "
                                     "takes %zu", i, k->name, nb, lay->size);
        p->kernels[i] = k;
    }
    /* blocks: allocated in order, released at most once, live ranges */
    size_t nb = p->n_blocks;
    uint32_t *alloc_at = pw_host_calloc(nb + 1, sizeof *alloc_at);
    uint32_t *release_at = pw_host_calloc(nb + 1, sizeof *release_at);
    uint64_t *bytes = pw_host_calloc(nb + 1, sizeof *bytes);
    bool ok = alloc_at && release_at && bytes;
    if (!ok) snprintf(why, cap, "out of host memory");
    size_t next_block = 0;
    uint32_t last_at = 0;
    for (size_t i = 0; ok && i < p->n_events; i++) {
        const pw_pool_event *x = &p->events[i];
        if (x->at_launch < last_at || x->at_launch > p->n_launches)
            ok = invalid(why, cap, "pool event #%zu is out of order", i);
        else if (x->alloc && (x->block != next_block || next_block >= nb ||
                              x->bytes > CACHE_MAX_BLOCK_BYTES))
            ok = invalid(why, cap, "pool event #%zu allocates block %u", i, x->block);
        else if (!x->alloc && (x->block >= next_block || release_at[x->block] != 0 ||
                               p->out_blocks[x->block].is_output))
            ok = invalid(why, cap, "pool event #%zu releases block %u", i, x->block);
        if (!ok) break;
        last_at = x->at_launch;
        if (x->alloc) {
            alloc_at[next_block] = x->at_launch;
            bytes[next_block] = x->bytes;
            next_block++;
        } else {
            release_at[x->block] = x->at_launch + 1; /* 0: never released */
        }
    }
    if (ok && next_block != nb) ok = invalid(why, cap, "%zu blocks, %zu allocated", nb, next_block);
    for (size_t j = 0; ok && j < nb; j++) {
        const pw_out_block *b = &p->out_blocks[j];
        if (release_at[j] == 0 && !b->is_output)
            ok = invalid(why, cap, "block %zu is never released nor an output", j);
        else if (b->is_output && (pw_out_block_bytes(b) == 0 || pw_out_block_bytes(b) != bytes[j]))
            ok = invalid(why, cap, "output block %zu does not match its allocation", j);
    }
    /* relocations: by launch, on the kernel's address words, in range */
    size_t rl = 0;
    for (size_t i = 0; ok && i < p->n_launches; i++) {
        const pw_kernel_arg_layout *lay = pw_kernel_arg_layout_of(p->kernel_ids[i]);
        unsigned char *a = p->bytes + p->arg_offsets[i];
        for (int w = 0; ok && w < lay->n_pointers; w++) {
            size_t first = rl;
            bool covered = false;
            for (size_t q = first; q < p->n_relocs && p->relocs[q].launch == i; q++)
                covered |= p->relocs[q].byte == lay->pointers[w];
            uintptr_t v;
            memcpy(&v, a + lay->pointers[w], sizeof v);
            if (!covered && v)
                ok = invalid(why, cap, "launch #%zu: an address word at byte %u is not relocated",
                             i, (unsigned)lay->pointers[w]);
        }
        for (; ok && rl < p->n_relocs && p->relocs[rl].launch == i; rl++) {
            const pw_reloc *x = &p->relocs[rl];
            bool on_word = false;
            for (int w = 0; w < lay->n_pointers; w++) on_word |= x->byte == lay->pointers[w];
            uint64_t limit = 0;
            if (x->kind == PW_RELOC_ARG && x->index < (uint32_t)p->nargs &&
                p->sigs[x->index].kind == PW_VAL_TENSOR)
                limit = pw_arg_sig_extent(&p->sigs[x->index]);
            else if (x->kind == PW_RELOC_BLOCK && x->index < nb && i >= alloc_at[x->index] &&
                     (release_at[x->index] == 0 || i < release_at[x->index] - 1u))
                limit = bytes[x->index];
            else if (x->kind == PW_RELOC_REGION && x->index < n_regions)
                limit = regions[x->index].bytes;
            if (!on_word || x->offset >= limit)
                ok = invalid(why, cap, "launch #%zu: relocation #%zu is out of range", i, rl);
        }
    }
    if (ok && rl != p->n_relocs) ok = invalid(why, cap, "relocations are out of order");
    for (int i = 0; ok && i < p->n_outs; i++) {
        const pw_out_item *o = &p->outs[i];
        if (o->kind == PW_OUT_ARG)
            ok = o->index < (uint32_t)p->nargs && p->sigs[o->index].kind == PW_VAL_TENSOR;
        else if (o->kind == PW_OUT_BLOCK)
            ok = o->index < nb && p->out_blocks[o->index].is_output;
        else
            ok = o->kind == PW_OUT_SCALAR && sig_valid(&o->scalar) &&
                 o->scalar.kind != PW_VAL_TENSOR;
        if (!ok) invalid(why, cap, "output %d is malformed", i);
    }
    if (ok && !p->out_tuple && p->n_outs != 1) ok = invalid(why, cap, "%d outputs", p->n_outs);
    /* each output block is returned once */
    for (int i = 0; ok && i < p->n_outs; i++)
        for (int j = 0; ok && j < i; j++)
            if (p->outs[i].kind == PW_OUT_BLOCK && p->outs[j].kind == PW_OUT_BLOCK &&
                p->outs[i].index == p->outs[j].index)
                ok = invalid(why, cap, "outputs %d and %d share a block", j, i);
    pw_host_free(alloc_at);
    pw_host_free(release_at);
    pw_host_free(bytes);
    return ok;
}

/* The header: magic, format, a reserved word, the fingerprint. The reader
 * checks it before reading the rest of a file. */
#define CACHE_HEADER_BYTES 24

static bool header_ok(const unsigned char *h, const pw_graph_cache_env *env, char *why, size_t cap) {
    if (memcmp(h, CACHE_MAGIC, 8) != 0) return snprintf(why, cap, "not a graph cache file"), false;
    uint32_t format;
    uint64_t fp;
    memcpy(&format, h + 8, 4);
    memcpy(&fp, h + 16, 8);
    if (format != CACHE_FORMAT)
        return snprintf(why, cap, "format %u, this library reads %d", format, CACHE_FORMAT), false;
    if (!env->any_fingerprint && fp != env->fingerprint)
        return snprintf(why, cap, "written for another model, configuration or build"), false;
    return true;
}

pw_status pw_graph_cache_parse(const void *data, size_t size, const pw_graph_cache_env *env,
                               pw_program **out, size_t *n_dropped, char *why, size_t why_cap) {
    *out = NULL;
    *n_dropped = 0;
    why[0] = '\0';
    if (size < 8 + 8 + 8 + 8 + 8 + 8 || memcmp(data, CACHE_MAGIC, 8) != 0)
        return snprintf(why, why_cap, "not a graph cache file"), PW_ERR_PARSE;
    uint64_t sum;
    memcpy(&sum, (const char *)data + size - 8, 8);
    if (!env->any_checksum && fnv1a(FNV_BASIS, data, size - 8) != sum)
        return snprintf(why, why_cap, "checksum mismatch (truncated or corrupt)"), PW_ERR_PARSE;
    if (!header_ok(data, env, why, why_cap)) return PW_ERR_PARSE;
    reader r = {(const unsigned char *)data + CACHE_HEADER_BYTES, size - CACHE_HEADER_BYTES - 8,
                false};
    uint64_t n_regions = get_u64(&r);
    if (r.bad || n_regions > r.left / 8)
        return snprintf(why, why_cap, "truncated region table"), PW_ERR_PARSE;
    pw_region *regions = pw_host_calloc((size_t)n_regions + 1, sizeof *regions);
    if (!regions) return PW_ERR_OOM;
    for (uint64_t i = 0; i < n_regions; i++) regions[i].bytes = get_u64(&r);
    if (!env->any_regions) {
        bool same = n_regions == env->n_regions;
        for (uint64_t i = 0; same && i < n_regions; i++)
            same = regions[i].bytes == env->regions[i].bytes;
        if (!same) {
            pw_host_free(regions);
            return snprintf(why, why_cap, "the engine's persistent buffers differ"), PW_ERR_PARSE;
        }
    }
    uint64_t n = get_u64(&r);
    pw_status st = PW_OK;
    pw_program *list = NULL;
    for (uint64_t i = 0; st == PW_OK && i < n; i++) {
        pw_program *p = pw_host_calloc(1, sizeof *p);
        if (!p) {
            st = PW_ERR_OOM;
            break;
        }
        char reason[256];
        if (!get_program(&r, p, reason, sizeof reason)) {
            pw_program_free(p);
            snprintf(why, why_cap, "program #%" PRIu64 ": %s", i, reason);
            st = PW_ERR_PARSE;
            break;
        }
        if (!validate_program(p, env, regions, (size_t)n_regions, reason, sizeof reason)) {
            pw_log_warn("graph cache: program #%" PRIu64 " (%s at %" PRId64
                        " tokens) dropped, it will be captured: %s",
                        i, p->group == PW_PROGRAM_FORWARD ? "FULL forward" : "piece",
                        p->desc.num_tokens, reason);
            pw_program_free(p);
            (*n_dropped)++;
            continue;
        }
        p->relocatable = true;
        p->from_cache = true;
        p->next = list;
        list = p;
    }
    if (st == PW_OK && (r.bad || r.left != 0)) {
        snprintf(why, why_cap, "%zu bytes after the last program", r.left);
        st = PW_ERR_PARSE;
    }
    pw_host_free(regions);
    if (st != PW_OK) {
        for (pw_program *p = list, *next; p; p = next) {
            next = p->next;
            pw_program_free(p);
        }
        return st;
    }
    *out = list;
    return PW_OK;
}

/* ---- the engine's file ------------------------------------------------------------------------ */

static uint64_t hash_str(uint64_t h, const char *s) { return fnv1a(h, s, strlen(s) + 1); }
static uint64_t hash_i64(uint64_t h, int64_t v) { return fnv1a(h, &v, sizeof v); }

/* Everything a stored graph depends on besides its own contents. */
static uint64_t fingerprint(const pw_engine *e) {
    uint64_t h = hash_str(FNV_BASIS, "piecewise graph cache");
    h = hash_str(h, pw_version());
    char variant[128];
    pw_kernel_set_variant(e->cfg.device, variant, sizeof variant);
    h = hash_str(h, variant);
    /* the model file: its size, its header and tensor table, the first
     * bytes of every tensor */
    const pw_gguf *g = e->model->gguf;
    h = hash_i64(h, g ? (int64_t)pw_gguf_file_size(g) : -1);
    h = hash_i64(h, g ? (int64_t)pw_gguf_data_offset(g) : -1);
    int64_t nt = g ? pw_gguf_tensor_count(g) : 0;
    h = hash_i64(h, nt);
    for (int64_t i = 0; i < nt; i++) {
        const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
        h = hash_str(h, t->name);
        h = hash_i64(h, t->ggml_type);
        h = hash_i64(h, t->n_dims);
        for (int d = 0; d < t->n_dims && d < PW_GGUF_MAX_DIMS; d++) h = hash_i64(h, t->dims[d]);
        h = hash_i64(h, (int64_t)t->offset);
        h = hash_i64(h, (int64_t)t->nbytes);
        if (t->data) h = fnv1a(h, t->data, t->nbytes < 64 ? (size_t)t->nbytes : 64);
    }
    /* the engine: its configuration, its capture list, its pieces */
    const pw_engine_config *c = &e->cfg;
    int64_t cfgv[] = {c->device,     c->mode,           c->max_num_seqs, c->max_num_batched_tokens,
                      c->block_size, c->kv_cache_positions, c->max_model_len, c->max_num_batched_tokens,
                      e->n_submods};
    h = fnv1a(h, cfgv, sizeof cfgv);
    int n_sizes = 0;
    const int64_t *sizes = pw_dispatcher_capture_sizes(e->dispatcher, &n_sizes);
    h = hash_i64(h, n_sizes);
    if (sizes && n_sizes) h = fnv1a(h, sizes, (size_t)n_sizes * sizeof *sizes);
    for (int i = 0; i < e->n_submods; i++) h = hash_i64(h, e->pieces[i].group);
    const struct pw_engine_distinct *d = e->distinct;
    h = hash_i64(h, (int64_t)d->n_regions);
    for (size_t i = 0; i < d->n_regions; i++) h = hash_i64(h, (int64_t)d->regions[i].bytes);
    return h;
}

/* Reads the cache file: a regular file, never through a link, whose header
 * is checked before the rest is read. PW_ERR_NOT_FOUND when there is none
 * yet; otherwise on failure why says what was wrong with it. */
static pw_status read_file(const char *path, const pw_graph_cache_env *env, unsigned char **out,
                           size_t *size, char *why, size_t cap) {
    *out = NULL;
    *size = 0;
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) return PW_ERR_NOT_FOUND;
    int fd;
    uint64_t fsize;
    pw_status s = pw_file_open_regular(path, "graph cache", PW_FILE_NO_LINKS, CACHE_MAX_FILE_BYTES,
                                       &fd, &fsize);
    if (s != PW_OK) return snprintf(why, cap, "%s", pw_last_error()), s;
    unsigned char head[CACHE_HEADER_BYTES];
    unsigned char *buf = NULL;
    if (fsize < CACHE_HEADER_BYTES + 8) {
        snprintf(why, cap, "not a graph cache file");
        s = PW_ERR_PARSE;
    } else if ((s = pw_file_read_exact(fd, head, sizeof head, "graph cache", path)) != PW_OK) {
        snprintf(why, cap, "%s", pw_last_error());
    } else if (!header_ok(head, env, why, cap)) {
        s = PW_ERR_PARSE;
    } else if (!(buf = pw_host_alloc((size_t)fsize))) {
        snprintf(why, cap, "out of host memory");
        s = PW_ERR_OOM;
    } else {
        memcpy(buf, head, sizeof head);
        s = pw_file_read_exact(fd, buf + sizeof head, (size_t)fsize - sizeof head, "graph cache",
                               path);
        if (s != PW_OK) snprintf(why, cap, "%s", pw_last_error());
    }
    close(fd);
    if (s != PW_OK) {
        pw_host_free(buf);
        return s;
    }
    *out = buf;
    *size = (size_t)fsize;
    return PW_OK;
}

void pw_graph_cache_load(pw_engine *e) {
    struct pw_engine_distinct *d = e->distinct;
    if (!d || !e->cfg.graph_cache_dir || e->cfg.mode == PW_GRAPH_NONE) return;
    uint64_t fp = fingerprint(e);
    snprintf(d->cache_path, sizeof d->cache_path, "%s/graphs-%016" PRIx64 ".pwgc",
             e->cfg.graph_cache_dir, fp);
    pw_graph_cache_env env = {fp, false, d->regions, d->n_regions, false, false,
                              pw_kernel_set_for(e->cfg.device)};
    unsigned char *data = NULL;
    size_t size = 0;
    char why[320];
    pw_status st = read_file(d->cache_path, &env, &data, &size, why, sizeof why);
    if (st == PW_ERR_NOT_FOUND) {
        pw_log_info("graph cache: no %s yet; capturing, and writing it", d->cache_path);
        return;
    }
    if (st != PW_OK) {
        pw_log_warn("graph cache: %s ignored (%s); capturing", d->cache_path, why);
        return;
    }
    pw_program *list = NULL;
    size_t dropped = 0;
    st = pw_graph_cache_parse(data, size, &env, &list, &dropped, why, sizeof why);
    pw_host_free(data);
    if (st != PW_OK) {
        pw_log_warn("graph cache: %s ignored (%s); capturing", d->cache_path,
                    st == PW_ERR_OOM ? "out of host memory" : why);
        return;
    }
    size_t kept = 0;
    for (pw_program *p = list, *next; p; p = next) {
        next = p->next;
        /* a piece program must name a group this engine has */
        bool ok = p->group == PW_PROGRAM_FORWARD ||
                  (p->group < e->n_submods && e->pieces[p->group].group == p->group);
        if (!ok || pw_engine_find_program(e, p->group, &p->desc)) {
            pw_log_warn("graph cache: a program for group %d at %" PRId64
                        " tokens does not fit this engine; capturing it",
                        p->group, p->desc.num_tokens);
            pw_program_free(p);
            dropped++;
            continue;
        }
        p->next = d->programs;
        d->programs = p;
        kept++;
    }
    d->cache_loaded = dropped == 0;
    pw_log_info("graph cache: %zu graphs' programs from %s", kept, d->cache_path);
}

void pw_graph_cache_store(pw_engine *e) {
    struct pw_engine_distinct *d = e->distinct;
    if (!d || !d->cache_path[0] || d->cache_loaded) return;
    bool fresh = false;
    for (const pw_program *p = d->programs; p; p = p->next) fresh |= p->relocatable && !p->from_cache;
    if (!fresh) return;
    unsigned char *img = NULL;
    size_t size = 0;
    if (pw_graph_cache_serialize(d->programs, fingerprint(e), d->regions, d->n_regions, &img,
                                 &size) != PW_OK) {
        pw_log_warn("graph cache: out of host memory writing %s", d->cache_path);
        return;
    }
    (void)mkdir(e->cfg.graph_cache_dir, 0777); /* may exist; a failure shows below */
    /* The temporary file is created new (never through a link or over
     * anything already there), written, synced, then renamed over the old
     * file: a reader sees the old file or the whole new one. Anything at
     * the final name but a regular file was not put there by a writer. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", d->cache_path, (long)getpid());
    struct stat st;
    int fd = -1;
    pw_status s = PW_OK;
    if (lstat(d->cache_path, &st) == 0 && !S_ISREG(st.st_mode))
        s = pw_error(PW_ERR_IO, "graph cache: '%s' is not a regular file (a link?); left alone",
                     d->cache_path);
    if (s == PW_OK) s = pw_file_create_new(tmp, "graph cache", &fd);
    bool created = s == PW_OK;
    if (s == PW_OK) s = pw_file_write_all_sync(fd, img, size, "graph cache", tmp);
    if (fd >= 0 && close(fd) != 0 && s == PW_OK)
        s = pw_error(PW_ERR_IO, "graph cache: error closing '%s': %s", tmp, strerror(errno));
    if (s == PW_OK && rename(tmp, d->cache_path) != 0)
        s = pw_error(PW_ERR_IO, "graph cache: cannot rename '%s' to '%s': %s", tmp, d->cache_path,
                     strerror(errno));
    if (s != PW_OK) {
        pw_log_warn("graph cache: %s not written: %s", d->cache_path, pw_last_error());
        if (created) (void)unlink(tmp); /* ours: unlink removes a name, never a link's target */
    } else {
        pw_log_info("graph cache: wrote %s (%zu bytes)", d->cache_path, size);
    }
    pw_host_free(img);
}
