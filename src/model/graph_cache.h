/* The graph cache: an engine's programs (model/piece_program.h) on disk, so
 * the next engine built from the same model and configuration starts
 * without running a single plan. docs/graph-cache.md describes the file. */
#ifndef PW_MODEL_GRAPH_CACHE_H
#define PW_MODEL_GRAPH_CACHE_H

#include "model/piece_program.h"
#include "ops/kernel_set.h"

/* What a file is checked against. */
typedef struct pw_graph_cache_env {
    uint64_t fingerprint;
    bool any_fingerprint;     /* the fuzzer: accept the file's */
    const pw_reloc_region *regions; /* the engine's persistent regions */
    size_t n_regions;
    bool any_regions; /* the fuzzer: accept the file's region table */
    bool any_checksum; /* the fuzzer: reach the programs of a mutated file */
    const pw_kernel_set *set;
} pw_graph_cache_env;

/* The file's programs. A file that is not a cache file, is truncated, has a
 * bad checksum, another format version, fingerprint or region table is
 * refused as a whole (PW_ERR_PARSE, the reason in `why`); a program that
 * fails validation (kernel ids, argument sizes, relocations in range, every
 * address word relocated) is dropped alone and logged with its reason.
 * *out gets the others, marked from_cache, kernels resolved from env->set. */
pw_status pw_graph_cache_parse(const void *data, size_t size, const pw_graph_cache_env *env,
                               pw_program **out, size_t *n_dropped, char *why, size_t why_cap);

/* The relocatable programs of list as one file image (pw_host_free it). */
pw_status pw_graph_cache_serialize(const pw_program *list, uint64_t fingerprint,
                                   const pw_reloc_region *regions, size_t n_regions,
                                   unsigned char **out, size_t *size);

/* Engine side (engine_distinct.c's state): load before the capture, store
 * after it. Problems with the cache never fail the engine: they are logged
 * and the graphs captured. */
typedef struct pw_engine pw_engine;
void pw_graph_cache_load(pw_engine *e);
void pw_graph_cache_store(pw_engine *e);

#endif
