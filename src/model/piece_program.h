/* A captured graph described relative to what it is bound to: the launches
 * with each address word as (region, offset), the graph-pool allocations
 * and releases its capture made, and its output. Distinct-piece capture
 * (engine_distinct.c) records one per group of identical pieces and size
 * and runs it for the others; the graph cache (graph_cache.c) stores them
 * on disk and runs them at the next start.
 *
 * Address regions:
 *   ARG k     the k-th tensor argument of the captured callable (a piece's
 *             inputs and weights; the forward's token ids and weights);
 *   BLOCK j   the j-th block the capture allocated from the graph pool,
 *             live at that launch;
 *   REGION r  the r-th persistent engine block, in allocation order: the
 *             persistent pool's (step buffers, attention metadata, rope table,
 *             device weight copies), then the KV cache pool's: the same list
 *             in every engine built from the same model and configuration. */
#ifndef PW_MODEL_PIECE_PROGRAM_H
#define PW_MODEL_PIECE_PROGRAM_H

#include "internal.h"
#include "piecewise_llm.h"

typedef enum pw_reloc_kind { PW_RELOC_ARG, PW_RELOC_BLOCK, PW_RELOC_REGION, PW_RELOC_KIND_COUNT_ } pw_reloc_kind;

typedef struct pw_reloc {
    uint32_t launch;
    uint16_t byte;   /* offset of the address word in the launch's arguments */
    uint8_t kind;    /* pw_reloc_kind */
    uint32_t index;  /* argument, block or region */
    uint64_t offset; /* bytes past the start of it */
} pw_reloc;

typedef struct pw_pool_event {
    bool alloc;
    uint32_t block;
    uint32_t at_launch; /* launches of the program recorded before the event */
    uint64_t bytes;     /* alloc: bytes asked for */
} pw_pool_event;

typedef struct pw_arg_sig {
    pw_value_kind kind; /* TENSOR, INT, FLOAT, BOOL or NONE */
    pw_dtype dtype;
    int ndim;
    int64_t shape[PW_MAX_DIMS], stride[PW_MAX_DIMS];
    int64_t i; /* INT, BOOL */
    double f;  /* FLOAT */
} pw_arg_sig;

typedef enum pw_out_kind { PW_OUT_ARG, PW_OUT_BLOCK, PW_OUT_SCALAR, PW_OUT_KIND_COUNT_ } pw_out_kind;

typedef struct pw_out_item {
    uint8_t kind;   /* pw_out_kind */
    uint32_t index; /* argument or block */
    pw_arg_sig scalar;
} pw_out_item;

/* An output block is allocated as a tensor of this header when replayed. */
typedef struct pw_out_block {
    bool is_output;
    pw_dtype dtype;
    int ndim;
    int64_t shape[PW_MAX_DIMS];
} pw_out_block;

#define PW_PROGRAM_FORWARD (-1) /* group of the whole forward's program (a FULL graph) */

typedef struct pw_program {
    int group;          /* a piece group (the index of its first piece), or PW_PROGRAM_FORWARD */
    pw_batch_desc desc; /* pieces: only num_tokens is set */
    bool relocatable;   /* false: a verdict only, this key is captured for real */
    bool from_cache;
    bool counted; /* a FULL graph's program: counted once, however often verify_capture runs it */
    int nargs;
    pw_arg_sig *sigs;
    size_t n_launches;
    uint16_t *kernel_ids; /* the op table's kernel ids */
    const pw_kernel **kernels;
    size_t *arg_offsets; /* n_launches + 1 offsets into bytes */
    unsigned char *bytes;
    size_t n_relocs;
    pw_reloc *relocs; /* by launch, then byte */
    size_t n_events;
    pw_pool_event *events;
    size_t n_blocks;
    pw_out_block *out_blocks; /* [n_blocks] */
    bool out_tuple;
    int n_outs;
    pw_out_item *outs;
    struct pw_program *next;
} pw_program;

void pw_program_free(pw_program *p);

/* The engine's persistent regions, in allocation order. */
typedef struct pw_region {
    uintptr_t base;
    uint64_t bytes;
} pw_region;

/* Distinct-piece capture and graph-cache state of an engine (e->distinct). */
struct pw_engine_distinct {
    pw_program *programs;
    pw_region *regions;
    size_t n_regions, cap_regions;
    bool regions_failed;
    bool planning; /* the memory plan's dry run (shadow pools): programs are neither run nor recorded */
    uint64_t graphs_patched, pieces_patched_in_full, graphs_from_cache;
    char cache_path[4096]; /* the cache file of this engine's fingerprint; "" without */
    bool cache_loaded;     /* programs came from it: nothing new to write unless recorded */
};

/* Bytes a kernel may address from the data pointer of a tensor argument of
 * this signature; 0 when unknown (then nothing points into it). */
uint64_t pw_arg_sig_extent(const pw_arg_sig *s);

/* Bytes pw_tensor_new allocates for an output block; 0 for an invalid header. */
uint64_t pw_out_block_bytes(const pw_out_block *b);

#endif
