/* The engine's graph cache: which file (a fingerprint of the model, the
 * configuration and the build), which programs go in it, and which of a
 * file's programs fit this engine. The file itself is the capture
 * library's (include/piecewise/graph_cache.h); docs/graph-cache.md. */
#include "model/engine_internal.h"

#include "model/gguf.h"
#include "model/graph_cache.h"
#include "ops/kernel_set.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>


static uint64_t hash_str(uint64_t h, const char *s) { return pw_fnv1a(h, s, strlen(s) + 1); }
static uint64_t hash_i64(uint64_t h, int64_t v) { return pw_fnv1a(h, &v, sizeof v); }

/* Everything a stored graph depends on besides its own contents. */
static uint64_t fingerprint(const pw_engine *e) {
    uint64_t h = hash_str(PW_FNV1A_BASIS, "piecewise graph cache");
    h = hash_str(h, pw_version());
    h = hash_str(h, pw_sources_build_id);
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
        if (t->data) h = pw_fnv1a(h, t->data, t->nbytes < 64 ? (size_t)t->nbytes : 64);
    }
    /* the engine: its configuration, its capture list, its pieces */
    const pw_engine_config *c = &e->cfg;
    int64_t cfgv[] = {c->device,     c->mode,           c->max_num_seqs, c->max_num_batched_tokens,
                      c->block_size, c->kv_cache_positions, c->max_model_len, c->max_num_batched_tokens,
                      e->n_submods};
    h = pw_fnv1a(h, cfgv, sizeof cfgv);
    int n_sizes = 0;
    const int64_t *sizes = pw_dispatcher_capture_sizes(pw_module_dispatcher(e->module), &n_sizes);
    h = hash_i64(h, n_sizes);
    if (sizes && n_sizes) h = pw_fnv1a(h, sizes, (size_t)n_sizes * sizeof *sizes);
    for (int i = 0; i < e->n_submods; i++) h = hash_i64(h, e->pieces[i].group);
    const struct pw_engine_distinct *d = e->distinct;
    size_t n_regions = 0;
    const pw_reloc_region *regions = pw_reloc_regions_list(d->regions, &n_regions);
    h = hash_i64(h, (int64_t)n_regions);
    for (size_t i = 0; i < n_regions; i++) h = hash_i64(h, (int64_t)regions[i].bytes);
    return h;
}

void pw_graph_cache_kernels(pw_device device, const pw_kernel *table[PW_KERNEL_COUNT_]) {
    const pw_kernel_set *set = pw_kernel_set_for(device);
    for (int i = 0; i < PW_KERNEL_COUNT_; i++) table[i] = set ? set->entries[i].kernel : NULL;
}

/* A file names each launch's kernel by its op-table id. */
static void cache_spec(const pw_engine *e, uint64_t fp,
                       const pw_kernel *table[PW_KERNEL_COUNT_], pw_graph_cache_spec *spec) {
    pw_graph_cache_kernels(e->cfg.device, table);
    memset(spec, 0, sizeof *spec);
    spec->fingerprint = fp;
    spec->regions = e->distinct->regions;
    spec->kernels = table;
    spec->n_kernels = PW_KERNEL_COUNT_;
}

void pw_graph_cache_load(pw_engine *e) {
    struct pw_engine_distinct *d = e->distinct;
    if (!d || !e->cfg.graph_cache_dir || e->cfg.mode == PW_GRAPH_NONE) return;
    uint64_t fp = fingerprint(e);
    snprintf(d->cache_path, sizeof d->cache_path, "%s/graphs-%016" PRIx64 ".pwgc",
             e->cfg.graph_cache_dir, fp);
    const pw_kernel *table[PW_KERNEL_COUNT_];
    pw_graph_cache_spec spec;
    cache_spec(e, fp, table, &spec);
    pw_graph_cache_entry *entries = NULL;
    size_t n = 0, dropped = 0;
    char why[320];
    pw_status st =
        pw_graph_cache_read(d->cache_path, &spec, &entries, &n, &dropped, why, sizeof why);
    if (st == PW_ERR_NOT_FOUND) {
        pw_log_info("graph cache: no %s yet; capturing, and writing it", d->cache_path);
        return;
    }
    if (st != PW_OK) {
        pw_log_warn("graph cache: %s ignored (%s); capturing", d->cache_path, why);
        return;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        pw_graph_cache_entry *x = &entries[i];
        /* a piece program must name a group this engine has */
        bool ok = x->key == PW_PROGRAM_FORWARD ||
                  (x->key >= 0 && x->key < e->n_submods && e->pieces[x->key].group == x->key);
        pw_program *p = NULL;
        if (ok && !pw_engine_find_program(e, x->key, &x->desc)) p = pw_host_calloc(1, sizeof *p);
        if (!p) {
            pw_log_warn("graph cache: a program for group %d at %" PRId64
                        " tokens does not fit this engine; capturing it",
                        (int)x->key, x->desc.num_tokens);
            dropped++;
            continue;
        }
        p->group = x->key;
        p->desc = x->desc;
        p->code = x->program;
        x->program = NULL;
        p->relocatable = true;
        p->from_cache = true;
        p->next = d->programs;
        d->programs = p;
        kept++;
    }
    pw_graph_cache_entries_free(entries, n);
    d->cache_loaded = dropped == 0;
    pw_log_info("graph cache: %zu graphs' programs from %s", kept, d->cache_path);
}

void pw_graph_cache_store(pw_engine *e) {
    struct pw_engine_distinct *d = e->distinct;
    if (!d || !d->cache_path[0] || d->cache_loaded) return;
    size_t n = 0;
    bool fresh = false;
    for (const pw_program *p = d->programs; p; p = p->next) {
        n += p->relocatable;
        fresh |= p->relocatable && !p->from_cache;
    }
    if (!fresh) return;
    pw_graph_cache_entry *entries = pw_host_calloc(n, sizeof *entries);
    if (!entries) {
        pw_log_warn("graph cache: out of host memory writing %s", d->cache_path);
        return;
    }
    size_t i = 0;
    for (const pw_program *p = d->programs; p; p = p->next)
        if (p->relocatable) entries[i++] = (pw_graph_cache_entry){p->group, p->desc, p->code};
    const pw_kernel *table[PW_KERNEL_COUNT_];
    pw_graph_cache_spec spec;
    cache_spec(e, fingerprint(e), table, &spec);
    (void)mkdir(e->cfg.graph_cache_dir, 0777); /* may exist; a failure shows below */
    if (pw_graph_cache_write(d->cache_path, &spec, entries, n) != PW_OK)
        pw_log_warn("graph cache: %s not written: %s", d->cache_path, pw_last_error());
    else
        pw_log_info("graph cache: wrote %s", d->cache_path);
    pw_host_free(entries); /* the programs stay the engine's */
}
