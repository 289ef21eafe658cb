/* The graph cache file (include/piecewise/graph_cache.h): write, read,
 * validate (docs/graph-cache.md).
 *
 * Everything in a file is untrusted: counts are bounded by the bytes left
 * before anything is allocated, every index and offset is checked against
 * what it refers to, and a program runs only if each address word of each
 * launch is either NULL or rebuilt from a relocation, so no address from the
 * writing process is ever used. */
#include "internal.h"

#include "piecewise/graph_cache.h"

#include <stdarg.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "PWGRAPHS"
/* 2: the header holds a hash of the kernel table (names and argument
 * layouts), and launches are checked against their kernels' extents. */
#define CACHE_FORMAT 2
/* Larger files are not read (a cache of thousands of graphs is a few MiB). */
#define CACHE_MAX_FILE_BYTES ((size_t)1 << 30)
#define CACHE_MAX_BLOCK_BYTES ((uint64_t)1 << 46)

/* An entry with its launches' kernel indices, as the file holds them. */
typedef struct cache_item {
    int32_t key;
    pw_batch_desc desc;
    pw_reloc_program *code;
    uint16_t *kernel_ids; /* [code->n_launches] */
} cache_item;

static void item_clear(cache_item *p) {
    pw_reloc_program_free(p->code);
    pw_host_free(p->kernel_ids);
    memset(p, 0, sizeof *p);
}

/* ---- bytes out ---------------------------------------------------------------------------- */

typedef struct writer {
    unsigned char *buf;
    size_t len, cap;
    bool oom;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (w->oom) return;
    if (n > w->cap - w->len) {
        size_t need = n > SIZE_MAX - w->len ? SIZE_MAX : w->len + n; /* refused, not wrapped */
        unsigned char *b = pw_host_grow(w->buf, 1, &w->cap, need, SIZE_MAX);
        if (!b) {
            w->oom = true;
            return;
        }
        w->buf = b;
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


static void put_sig(writer *w, const pw_reloc_sig *s) {
    put_u8(w, (uint8_t)s->kind);
    put_u8(w, (uint8_t)s->ndim);
    put_u16(w, 0);
    put_u32(w, (uint32_t)s->dtype);
    for (int i = 0; i < PW_MAX_DIMS; i++) put_i64(w, s->shape[i]);
    for (int i = 0; i < PW_MAX_DIMS; i++) put_i64(w, s->stride[i]);
    put_i64(w, s->i);
    put_f64(w, s->f);
}

static void put_program(writer *w, const cache_item *p) {
    put_u32(w, (uint32_t)p->key);
    put_i64(w, p->desc.num_tokens);
    put_i64(w, p->desc.num_reqs);
    put_u8(w, p->desc.uniform);
    put_u8(w, p->desc.has_lora);
    put_u8(w, p->code->out_tuple);
    put_u8(w, 0);
    put_u32(w, (uint32_t)p->code->nargs);
    for (int i = 0; i < p->code->nargs; i++) put_sig(w, &p->code->sigs[i]);
    put_u32(w, (uint32_t)p->code->n_launches);
    size_t rl = 0;
    for (size_t i = 0; i < p->code->n_launches; i++) {
        size_t nb = p->code->arg_offsets[i + 1] - p->code->arg_offsets[i];
        put_u16(w, p->kernel_ids[i]);
        put_u16(w, (uint16_t)nb);
        /* relocated words are written as zeros: the file holds no address */
        unsigned char a[PW_MAX_KERNEL_ARG_BYTES];
        memcpy(a, p->code->bytes + p->code->arg_offsets[i], nb);
        for (; rl < p->code->n_relocs && p->code->relocs[rl].launch == i; rl++)
            memset(a + p->code->relocs[rl].byte, 0, sizeof(uintptr_t));
        put(w, a, nb);
    }
    put_u32(w, (uint32_t)p->code->n_relocs);
    for (size_t i = 0; i < p->code->n_relocs; i++) {
        const pw_reloc *r = &p->code->relocs[i];
        put_u32(w, r->launch);
        put_u16(w, r->byte);
        put_u8(w, r->kind);
        put_u8(w, 0);
        put_u32(w, r->index);
        put_u64(w, r->offset);
    }
    put_u32(w, (uint32_t)p->code->n_events);
    for (size_t i = 0; i < p->code->n_events; i++) {
        const pw_reloc_event *x = &p->code->events[i];
        put_u8(w, x->alloc);
        put_u8(w, 0);
        put_u16(w, 0);
        put_u32(w, x->block);
        put_u32(w, x->at_launch);
        put_u64(w, x->bytes);
    }
    put_u32(w, (uint32_t)p->code->n_blocks);
    for (size_t j = 0; j < p->code->n_blocks; j++) {
        const pw_reloc_out_block *b = &p->code->out_blocks[j];
        put_u8(w, b->is_output);
        put_u8(w, (uint8_t)b->ndim);
        put_u16(w, 0);
        put_u32(w, (uint32_t)b->dtype);
        for (int i = 0; i < PW_MAX_DIMS; i++) put_i64(w, b->shape[i]);
    }
    put_u32(w, (uint32_t)p->code->n_outs);
    for (int i = 0; i < p->code->n_outs; i++) {
        put_u8(w, p->code->outs[i].kind);
        put_u8(w, 0);
        put_u16(w, 0);
        put_u32(w, p->code->outs[i].index);
        put_sig(w, &p->code->outs[i].scalar);
    }
}

static int kernel_index(const pw_graph_cache_spec *spec, const pw_kernel *k) {
    for (int i = 0; i < spec->n_kernels; i++)
        if (spec->kernels[i] == k) return i;
    return -1;
}

static bool spec_ok(const pw_graph_cache_spec *spec) {
    return spec && spec->n_kernels >= 0 && spec->n_kernels <= UINT16_MAX + 1 &&
           (spec->kernels || spec->n_kernels == 0);
}

/* The kernel table as a file depends on it: each kernel's name and
 * argument layout, by index. A file written against another table (kernels
 * added, removed, reordered, or an argument struct changed) is refused. */
static uint64_t kernels_hash(const pw_graph_cache_spec *spec) {
    uint64_t h = pw_fnv1a(PW_FNV1A_BASIS, "kernel table", 12);
    int64_t n = spec->n_kernels;
    h = pw_fnv1a(h, &n, sizeof n);
    for (int i = 0; i < spec->n_kernels; i++) {
        const pw_kernel *k = spec->kernels[i];
        const char *name = k && k->name ? k->name : "";
        h = pw_fnv1a(h, name, strlen(name) + 1);
        int64_t v[2 + PW_KERNEL_MAX_ADDRESSES] = {-1, -1};
        if (k && k->args) {
            v[0] = (int64_t)k->args->size;
            v[1] = k->args->n_addresses;
            for (int w = 0; w < k->args->n_addresses && w < PW_KERNEL_MAX_ADDRESSES; w++)
                v[2 + w] = k->args->addresses[w];
        }
        h = pw_fnv1a(h, v, sizeof v);
    }
    return h;
}

pw_status pw_graph_cache_serialize(const pw_graph_cache_spec *spec,
                                   const pw_graph_cache_entry *entries, size_t n,
                                   unsigned char **out, size_t *size) {
    if (!out || !size || !spec_ok(spec) || (n && !entries))
        return pw_error(PW_ERR_INVALID_ARG, "graph cache: serialize needs a spec with a kernel "
                                            "table, the entries and out");
    *out = NULL;
    *size = 0;
    for (size_t i = 0; i < n; i++) {
        const pw_reloc_program *c = entries[i].program;
        if (!c) return pw_error(PW_ERR_INVALID_ARG, "graph cache: entry %zu has no program", i);
        for (size_t l = 0; l < c->n_launches; l++)
            if (kernel_index(spec, c->kernels[l]) < 0)
                return pw_error(PW_ERR_INVALID_ARG, "graph cache: entry %zu launches kernel %s, "
                                                    "which the kernel table lacks",
                                i, c->kernels[l] && c->kernels[l]->name ? c->kernels[l]->name
                                                                         : "?");
    }
    size_t n_regions = 0;
    const pw_reloc_region *regions = pw_reloc_regions_list(spec->regions, &n_regions);
    writer w = {0};
    put(&w, CACHE_MAGIC, 8);
    put_u32(&w, CACHE_FORMAT);
    put_u32(&w, 0);
    put_u64(&w, spec->fingerprint);
    put_u64(&w, kernels_hash(spec));
    put_u64(&w, n_regions);
    for (size_t i = 0; i < n_regions; i++) put_u64(&w, regions[i].bytes);
    put_u64(&w, n);
    for (size_t i = 0; i < n && !w.oom; i++) {
        const pw_reloc_program *c = entries[i].program;
        uint16_t *ids = pw_host_calloc(c->n_launches + 1, sizeof *ids);
        if (!ids) {
            w.oom = true;
            break;
        }
        for (size_t l = 0; l < c->n_launches; l++)
            ids[l] = (uint16_t)kernel_index(spec, c->kernels[l]);
        cache_item item = {entries[i].key, entries[i].desc, (pw_reloc_program *)c, ids};
        put_program(&w, &item);
        pw_host_free(ids);
    }
    if (!w.oom) put_u64(&w, pw_fnv1a(PW_FNV1A_BASIS, w.buf, w.len));
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

static void get_sig(reader *r, pw_reloc_sig *s) {
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

static bool sig_valid(const pw_reloc_sig *s) {
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
static bool get_program(reader *r, cache_item *p, char *why, size_t cap) {
    p->code = pw_host_calloc(1, sizeof *p->code);
    if (!p->code) return snprintf(why, cap, "out of host memory"), false;
    p->key = (int32_t)get_u32(r);
    p->desc.num_tokens = get_i64(r);
    p->desc.num_reqs = get_i64(r);
    p->desc.uniform = get_u8(r) != 0;
    p->desc.has_lora = get_u8(r) != 0;
    p->code->out_tuple = get_u8(r) != 0;
    (void)get_u8(r);
    int64_t n = get_count(r, SIG_BYTES, 1 << 16);
    if (n < 0) return snprintf(why, cap, "truncated arguments"), false;
    p->code->nargs = (int)n;
    p->code->sigs = pw_host_calloc((size_t)n + 1, sizeof *p->code->sigs);
    if (!p->code->sigs) return snprintf(why, cap, "out of host memory"), false;
    for (int i = 0; i < p->code->nargs; i++) get_sig(r, &p->code->sigs[i]);
    n = get_count(r, 4, 1 << 24);
    if (n < 0) return snprintf(why, cap, "truncated launches"), false;
    p->code->n_launches = (size_t)n;
    p->kernel_ids = pw_host_calloc((size_t)n + 1, sizeof *p->kernel_ids);
    p->code->kernels = pw_host_calloc((size_t)n + 1, sizeof *p->code->kernels);
    p->code->arg_offsets = pw_host_calloc((size_t)n + 1, sizeof *p->code->arg_offsets);
    if (!p->kernel_ids || !p->code->kernels || !p->code->arg_offsets)
        return snprintf(why, cap, "out of host memory"), false;
    /* the argument bytes: a first pass sizes them, bounded by the file */
    size_t total = 0;
    const unsigned char *start = r->p;
    size_t left = r->left;
    for (size_t i = 0; i < p->code->n_launches && !r->bad; i++) {
        p->kernel_ids[i] = get_u16(r);
        uint16_t nb = get_u16(r);
        if (nb > PW_MAX_KERNEL_ARG_BYTES || nb > r->left) {
            r->bad = true;
            break;
        }
        p->code->arg_offsets[i] = total;
        total += nb;
        r->p += nb;
        r->left -= nb;
    }
    if (r->bad) return snprintf(why, cap, "truncated launch arguments"), false;
    p->code->arg_offsets[p->code->n_launches] = total;
    p->code->bytes = pw_host_alloc(total + 1);
    if (!p->code->bytes) return snprintf(why, cap, "out of host memory"), false;
    r->p = start;
    r->left = left;
    for (size_t i = 0; i < p->code->n_launches; i++) {
        (void)get_u16(r);
        (void)get_u16(r);
        get(r, p->code->bytes + p->code->arg_offsets[i],
            p->code->arg_offsets[i + 1] - p->code->arg_offsets[i]);
    }
    n = get_count(r, 20, 1 << 26);
    if (n < 0) return snprintf(why, cap, "truncated relocations"), false;
    p->code->n_relocs = (size_t)n;
    p->code->relocs = pw_host_calloc((size_t)n + 1, sizeof *p->code->relocs);
    if (!p->code->relocs) return snprintf(why, cap, "out of host memory"), false;
    for (size_t i = 0; i < p->code->n_relocs; i++) {
        pw_reloc *x = &p->code->relocs[i];
        x->launch = get_u32(r);
        x->byte = get_u16(r);
        x->kind = get_u8(r);
        (void)get_u8(r);
        x->index = get_u32(r);
        x->offset = get_u64(r);
    }
    n = get_count(r, 20, 1 << 26);
    if (n < 0) return snprintf(why, cap, "truncated pool events"), false;
    p->code->n_events = (size_t)n;
    p->code->events = pw_host_calloc((size_t)n + 1, sizeof *p->code->events);
    if (!p->code->events) return snprintf(why, cap, "out of host memory"), false;
    for (size_t i = 0; i < p->code->n_events; i++) {
        pw_reloc_event *x = &p->code->events[i];
        x->alloc = get_u8(r) != 0;
        (void)get_u8(r);
        (void)get_u16(r);
        x->block = get_u32(r);
        x->at_launch = get_u32(r);
        x->bytes = get_u64(r);
    }
    n = get_count(r, 8 + 8 * PW_MAX_DIMS, 1 << 26);
    if (n < 0) return snprintf(why, cap, "truncated blocks"), false;
    p->code->n_blocks = (size_t)n;
    p->code->out_blocks = pw_host_calloc((size_t)n + 1, sizeof *p->code->out_blocks);
    if (!p->code->out_blocks) return snprintf(why, cap, "out of host memory"), false;
    for (size_t j = 0; j < p->code->n_blocks; j++) {
        pw_reloc_out_block *b = &p->code->out_blocks[j];
        b->is_output = get_u8(r) != 0;
        b->ndim = get_u8(r);
        (void)get_u16(r);
        b->dtype = (pw_dtype)get_u32(r);
        for (int i = 0; i < PW_MAX_DIMS; i++) b->shape[i] = get_i64(r);
    }
    n = get_count(r, 8 + SIG_BYTES, 1 << 16);
    if (n < 0) return snprintf(why, cap, "truncated outputs"), false;
    p->code->n_outs = (int)n;
    p->code->outs = pw_host_calloc((size_t)n + 1, sizeof *p->code->outs);
    if (!p->code->outs) return snprintf(why, cap, "out of host memory"), false;
    for (int i = 0; i < p->code->n_outs; i++) {
        p->code->outs[i].kind = get_u8(r);
        (void)get_u8(r);
        (void)get_u16(r);
        p->code->outs[i].index = get_u32(r);
        get_sig(r, &p->code->outs[i].scalar);
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

static bool validate_program(cache_item *p, const pw_graph_cache_spec *spec,
                             const pw_reloc_region *regions, size_t n_regions, char *why,
                             size_t cap) {
    if (p->desc.num_tokens < 1) return invalid(why, cap, "%" PRId64 " tokens", p->desc.num_tokens);
    for (int i = 0; i < p->code->nargs; i++)
        if (!sig_valid(&p->code->sigs[i])) return invalid(why, cap, "argument %d is malformed", i);
    for (size_t i = 0; i < p->code->n_launches; i++) {
        int id = p->kernel_ids[i];
        const pw_kernel *k = id < spec->n_kernels ? spec->kernels[id] : NULL;
        const pw_kernel_args *lay = k ? k->args : NULL;
        if (!lay || lay->n_addresses < 0 || lay->n_addresses > PW_KERNEL_MAX_ADDRESSES)
            return invalid(why, cap, "launch #%zu names kernel %d, which the kernel table lacks "
                                     "(or it declares no argument layout)", i, id);
        size_t nb = p->code->arg_offsets[i + 1] - p->code->arg_offsets[i];
        if (nb != lay->size)
            return invalid(why, cap, "launch #%zu (kernel %s) has %zu argument bytes, the kernel "
                                     "takes %zu", i, k->name, nb, lay->size);
        p->code->kernels[i] = k;
    }
    /* blocks: allocated in order, released at most once, live ranges */
    size_t nb = p->code->n_blocks;
    uint32_t *alloc_at = pw_host_calloc(nb + 1, sizeof *alloc_at);
    uint32_t *release_at = pw_host_calloc(nb + 1, sizeof *release_at);
    uint64_t *bytes = pw_host_calloc(nb + 1, sizeof *bytes);
    bool ok = alloc_at && release_at && bytes;
    if (!ok) snprintf(why, cap, "out of host memory");
    size_t next_block = 0;
    uint32_t last_at = 0;
    for (size_t i = 0; ok && i < p->code->n_events; i++) {
        const pw_reloc_event *x = &p->code->events[i];
        if (x->at_launch < last_at || x->at_launch > p->code->n_launches)
            ok = invalid(why, cap, "pool event #%zu is out of order", i);
        else if (x->alloc && (x->block != next_block || next_block >= nb ||
                              x->bytes > CACHE_MAX_BLOCK_BYTES))
            ok = invalid(why, cap, "pool event #%zu allocates block %u", i, x->block);
        else if (!x->alloc && (x->block >= next_block || release_at[x->block] != 0 ||
                               p->code->out_blocks[x->block].is_output))
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
        const pw_reloc_out_block *b = &p->code->out_blocks[j];
        if (release_at[j] == 0 && !b->is_output)
            ok = invalid(why, cap, "block %zu is never released nor an output", j);
        else if (b->is_output &&
                 (pw_reloc_out_block_bytes(b) == 0 || pw_reloc_out_block_bytes(b) != bytes[j]))
            ok = invalid(why, cap, "output block %zu does not match its allocation", j);
    }
    /* relocations: by launch, on the kernel's address words, and each word
     * with what the kernel touches through it inside its buffer */
    size_t rl = 0;
    for (size_t i = 0; ok && i < p->code->n_launches; i++) {
        const pw_kernel *k = p->code->kernels[i];
        const pw_kernel_args *lay = k->args;
        unsigned char *a = p->code->bytes + p->code->arg_offsets[i];
        uint64_t extent[PW_KERNEL_MAX_ADDRESSES] = {0};
        for (int w = 0; ok && w < lay->n_addresses; w++) {
            bool nullable = true;
            if (lay->extent) extent[w] = lay->extent(k, a, w, &nullable);
            bool covered = false;
            for (size_t q = rl; q < p->code->n_relocs && p->code->relocs[q].launch == i; q++)
                covered |= p->code->relocs[q].byte == lay->addresses[w];
            uintptr_t v;
            memcpy(&v, a + lay->addresses[w], sizeof v);
            if (!covered && v)
                ok = invalid(why, cap, "launch #%zu: an address word at byte %u is not relocated",
                             i, (unsigned)lay->addresses[w]);
            else if (!covered && !nullable)
                ok = invalid(why, cap, "launch #%zu (kernel %s): the address word at byte %u is "
                                       "NULL, which the kernel does not accept",
                             i, k->name, (unsigned)lay->addresses[w]);
        }
        for (; ok && rl < p->code->n_relocs && p->code->relocs[rl].launch == i; rl++) {
            const pw_reloc *x = &p->code->relocs[rl];
            int word = -1;
            for (int w = 0; w < lay->n_addresses; w++)
                if (x->byte == lay->addresses[w]) word = w;
            uint64_t limit = 0;
            if (x->kind == PW_RELOC_ARG && x->index < (uint32_t)p->code->nargs &&
                p->code->sigs[x->index].kind == PW_VAL_TENSOR)
                limit = pw_reloc_sig_extent(&p->code->sigs[x->index]);
            else if (x->kind == PW_RELOC_BLOCK && x->index < nb && i >= alloc_at[x->index] &&
                     (release_at[x->index] == 0 || i < release_at[x->index] - 1u))
                limit = bytes[x->index];
            else if (x->kind == PW_RELOC_REGION && x->index < n_regions)
                limit = regions[x->index].bytes;
            if (word < 0 || x->offset >= limit)
                ok = invalid(why, cap, "launch #%zu: relocation #%zu is out of range", i, rl);
            else if (extent[word] > limit - x->offset)
                ok = invalid(why, cap, "launch #%zu (kernel %s): the word at byte %u reaches "
                                       "%" PRIu64 " bytes from offset %" PRIu64 " of a buffer "
                                       "of %" PRIu64 " bytes",
                             i, k->name, (unsigned)x->byte, extent[word], x->offset, limit);
        }
    }
    if (ok && rl != p->code->n_relocs) ok = invalid(why, cap, "relocations are out of order");
    for (int i = 0; ok && i < p->code->n_outs; i++) {
        const pw_reloc_out *o = &p->code->outs[i];
        if (o->kind == PW_RELOC_OUT_ARG)
            ok = o->index < (uint32_t)p->code->nargs &&
                 p->code->sigs[o->index].kind == PW_VAL_TENSOR;
        else if (o->kind == PW_RELOC_OUT_BLOCK)
            ok = o->index < nb && p->code->out_blocks[o->index].is_output;
        else
            ok = o->kind == PW_RELOC_OUT_SCALAR && sig_valid(&o->scalar) &&
                 o->scalar.kind != PW_VAL_TENSOR;
        if (!ok) invalid(why, cap, "output %d is malformed", i);
    }
    if (ok && !p->code->out_tuple && p->code->n_outs != 1)
        ok = invalid(why, cap, "%d outputs", p->code->n_outs);
    /* each output block is returned once */
    for (int i = 0; ok && i < p->code->n_outs; i++)
        for (int j = 0; ok && j < i; j++)
            if (p->code->outs[i].kind == PW_RELOC_OUT_BLOCK &&
                p->code->outs[j].kind == PW_RELOC_OUT_BLOCK &&
                p->code->outs[i].index == p->code->outs[j].index)
                ok = invalid(why, cap, "outputs %d and %d share a block", j, i);
    pw_host_free(alloc_at);
    pw_host_free(release_at);
    pw_host_free(bytes);
    return ok;
}

/* The header: magic, format, a reserved word, the fingerprint, the kernel
 * table's hash. The reader checks it before reading the rest of a file. */
#define CACHE_HEADER_BYTES 32

static bool header_ok(const unsigned char *h, const pw_graph_cache_spec *spec, char *why,
                      size_t cap) {
    if (memcmp(h, CACHE_MAGIC, 8) != 0) return snprintf(why, cap, "not a graph cache file"), false;
    uint32_t format;
    uint64_t fp, kh;
    memcpy(&format, h + 8, 4);
    memcpy(&fp, h + 16, 8);
    memcpy(&kh, h + 24, 8);
    if (format != CACHE_FORMAT)
        return snprintf(why, cap, "format %u, this library reads %d", format, CACHE_FORMAT), false;
    if (spec->accept & PW_GRAPH_CACHE_ANY_FINGERPRINT) return true;
    if (fp != spec->fingerprint)
        return snprintf(why, cap, "written for another model, configuration or build"), false;
    if (kh != kernels_hash(spec))
        return snprintf(why, cap, "written for other kernels (their names or argument layouts "
                                  "differ)"),
               false;
    return true;
}

void pw_graph_cache_entries_free(pw_graph_cache_entry *entries, size_t n) {
    if (!entries) return;
    for (size_t i = 0; i < n; i++) pw_reloc_program_free(entries[i].program);
    pw_host_free(entries);
}

pw_status pw_graph_cache_parse(const void *data, size_t size, const pw_graph_cache_spec *spec,
                               pw_graph_cache_entry **entries, size_t *n_entries,
                               size_t *n_dropped, char *why, size_t why_cap) {
    if (!entries || !n_entries || !n_dropped || !why || !why_cap || !spec_ok(spec) ||
        (size && !data))
        return pw_error(PW_ERR_INVALID_ARG, "graph cache: parse needs the data, a spec with a "
                                            "kernel table and the outputs");
    *entries = NULL;
    *n_entries = 0;
    *n_dropped = 0;
    why[0] = '\0';
    /* the header, the region and program counts, the checksum */
    if (size < CACHE_HEADER_BYTES + 8 + 8 + 8 || memcmp(data, CACHE_MAGIC, 8) != 0)
        return snprintf(why, why_cap, "not a graph cache file"), PW_ERR_PARSE;
    uint64_t sum;
    memcpy(&sum, (const char *)data + size - 8, 8);
    if (!(spec->accept & PW_GRAPH_CACHE_ANY_CHECKSUM) && pw_fnv1a(PW_FNV1A_BASIS, data, size - 8) != sum)
        return snprintf(why, why_cap, "checksum mismatch (truncated or corrupt)"), PW_ERR_PARSE;
    if (!header_ok(data, spec, why, why_cap)) return PW_ERR_PARSE;
    reader r = {(const unsigned char *)data + CACHE_HEADER_BYTES, size - CACHE_HEADER_BYTES - 8,
                false};
    uint64_t n_regions = get_u64(&r);
    if (r.bad || n_regions > r.left / 8)
        return snprintf(why, why_cap, "truncated region table"), PW_ERR_PARSE;
    pw_reloc_region *regions = pw_host_calloc((size_t)n_regions + 1, sizeof *regions);
    if (!regions) return PW_ERR_OOM;
    for (uint64_t i = 0; i < n_regions; i++) regions[i].bytes = get_u64(&r);
    if (!(spec->accept & PW_GRAPH_CACHE_ANY_REGIONS)) {
        size_t n_mine = 0;
        const pw_reloc_region *mine = pw_reloc_regions_list(spec->regions, &n_mine);
        bool same = n_regions == n_mine;
        for (uint64_t i = 0; same && i < n_regions; i++) same = regions[i].bytes == mine[i].bytes;
        if (!same) {
            pw_host_free(regions);
            return snprintf(why, why_cap, "the persistent regions differ"), PW_ERR_PARSE;
        }
    }
    uint64_t n = get_u64(&r);
    pw_status st = PW_OK;
    /* every program takes more than 8 bytes: n is bounded by the file */
    pw_graph_cache_entry *list = NULL;
    size_t kept = 0;
    if (r.bad || n > r.left / 8) {
        snprintf(why, why_cap, "truncated program table");
        st = PW_ERR_PARSE;
    } else if (!(list = pw_host_calloc((size_t)n + 1, sizeof *list))) {
        st = PW_ERR_OOM;
    }
    for (uint64_t i = 0; st == PW_OK && i < n; i++) {
        cache_item p = {0};
        char reason[256];
        if (!get_program(&r, &p, reason, sizeof reason)) {
            item_clear(&p);
            snprintf(why, why_cap, "program #%" PRIu64 ": %s", i, reason);
            st = PW_ERR_PARSE;
            break;
        }
        if (!validate_program(&p, spec, regions, (size_t)n_regions, reason, sizeof reason)) {
            pw_log_warn("graph cache: program #%" PRIu64 " (key %d at %" PRId64
                        " tokens) dropped, it will be captured: %s",
                        i, (int)p.key, p.desc.num_tokens, reason);
            item_clear(&p);
            (*n_dropped)++;
            continue;
        }
        list[kept].key = p.key;
        list[kept].desc = p.desc;
        list[kept].program = p.code;
        kept++;
        p.code = NULL;
        item_clear(&p);
    }
    if (st == PW_OK && (r.bad || r.left != 0)) {
        snprintf(why, why_cap, "%zu bytes after the last program", r.left);
        st = PW_ERR_PARSE;
    }
    pw_host_free(regions);
    if (st != PW_OK) {
        pw_graph_cache_entries_free(list, kept);
        return st;
    }
    *entries = list;
    *n_entries = kept;
    return PW_OK;
}

/* ---- files ----------------------------------------------------------------------------------- */

/* Reads a cache file: a regular file, never through a link, whose header
 * is checked before the rest is read. PW_ERR_NOT_FOUND when there is none
 * yet; otherwise on failure why says what was wrong with it. */
static pw_status read_file(const char *path, const pw_graph_cache_spec *spec, unsigned char **out,
                           size_t *size, char *why, size_t cap) {
    *out = NULL;
    *size = 0;
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) {
        snprintf(why, cap, "no such file");
        return PW_ERR_NOT_FOUND;
    }
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
    } else if (!header_ok(head, spec, why, cap)) {
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

pw_status pw_graph_cache_read(const char *path, const pw_graph_cache_spec *spec,
                              pw_graph_cache_entry **entries, size_t *n, size_t *n_dropped,
                              char *why, size_t why_cap) {
    if (!path || !entries || !n || !n_dropped || !why || !why_cap || !spec_ok(spec))
        return pw_error(PW_ERR_INVALID_ARG, "graph cache: read needs a path, a spec with a kernel "
                                            "table and the outputs");
    *entries = NULL;
    *n = 0;
    *n_dropped = 0;
    unsigned char *data = NULL;
    size_t size = 0;
    pw_status st = read_file(path, spec, &data, &size, why, why_cap);
    if (st != PW_OK) return st;
    st = pw_graph_cache_parse(data, size, spec, entries, n, n_dropped, why, why_cap);
    pw_host_free(data);
    if (st == PW_ERR_OOM) snprintf(why, why_cap, "out of host memory");
    return st;
}

pw_status pw_graph_cache_write(const char *path, const pw_graph_cache_spec *spec,
                               const pw_graph_cache_entry *entries, size_t n) {
    if (!path) return pw_error(PW_ERR_INVALID_ARG, "graph cache: write needs a path");
    unsigned char *img = NULL;
    size_t size = 0;
    PW_TRY(pw_graph_cache_serialize(spec, entries, n, &img, &size));
    /* The temporary file is created new (never through a link or over
     * anything already there), written, synced, then renamed over the old
     * file: a reader sees the old file or the whole new one. Anything at
     * the final name but a regular file was not put there by a writer. */
    size_t cap = strlen(path) + 32;
    char *tmp = pw_host_alloc(cap);
    if (!tmp) {
        pw_host_free(img);
        return PW_ERR_OOM;
    }
    snprintf(tmp, cap, "%s.%ld.tmp", path, (long)getpid());
    struct stat st;
    int fd = -1;
    pw_status s = PW_OK;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        s = pw_error(PW_ERR_IO, "graph cache: '%s' is not a regular file (a link?); left alone",
                     path);
    if (s == PW_OK) s = pw_file_create_new(tmp, "graph cache", &fd);
    bool created = s == PW_OK;
    if (s == PW_OK) s = pw_file_write_all_sync(fd, img, size, "graph cache", tmp);
    if (fd >= 0 && close(fd) != 0 && s == PW_OK)
        s = pw_error(PW_ERR_IO, "graph cache: error closing '%s': %s", tmp, strerror(errno));
    if (s == PW_OK && rename(tmp, path) != 0)
        s = pw_error(PW_ERR_IO, "graph cache: cannot rename '%s' to '%s': %s", tmp, path,
                     strerror(errno));
    if (s != PW_OK && created) {
        pw_error_hold();
        (void)unlink(tmp); /* ours: unlink removes a name, never a link's target */
        pw_error_unhold();
    }
    pw_host_free(tmp);
    pw_host_free(img);
    return s;
}
