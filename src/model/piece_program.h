/* The engine's programs: one relocatable program (include/piecewise/
 * relocate.h) per piece group and size, and per FULL descriptor with the
 * graph cache, with what the engine keeps about each. Distinct-piece
 * capture (engine_distinct.c) records them and runs them for the other
 * pieces of a group; the graph cache (engine_cache.c) stores them on disk
 * and runs them at the next start. */
#ifndef PW_MODEL_PIECE_PROGRAM_H
#define PW_MODEL_PIECE_PROGRAM_H

#include "internal.h"
#include "piecewise_llm.h"

#define PW_PROGRAM_FORWARD (-1) /* group of the whole forward's program (a FULL graph) */

typedef struct pw_program {
    int group;          /* a piece group (the index of its first piece), or PW_PROGRAM_FORWARD */
    pw_batch_desc desc; /* pieces: only num_tokens is set */
    bool relocatable;   /* false: a verdict only (code NULL), this key is captured for real */
    bool from_cache;
    bool counted; /* a FULL graph's program: counted once, however often verify_capture runs it */
    pw_reloc_program *code;
    struct pw_program *next;
} pw_program;

void pw_program_free(pw_program *p);

/* Distinct-piece capture and graph-cache state of an engine (e->distinct). */
struct pw_engine_distinct {
    pw_program *programs;
    pw_reloc_regions *regions; /* the persistent pool's blocks, then the KV cache pool's */
    bool regions_failed;
    bool planning; /* the memory plan's dry run (shadow pools): programs are neither run nor recorded */
    uint64_t graphs_patched, pieces_patched_in_full, graphs_from_cache;
    char cache_path[4096]; /* the cache file of this engine's fingerprint; "" without */
    bool cache_loaded;     /* programs came from it: nothing new to write unless recorded */
};

#endif
