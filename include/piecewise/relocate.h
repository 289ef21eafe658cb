/* piecewise public API, libpiecewise: relocation of recorded launches.
 * Included by piecewise.h; may be included alone.
 *
 * A capture records launches whose argument bytes hold addresses. A
 * *relocatable program* is such a recording described relative to what it
 * is bound to: every address word (the words a kernel's pw_kernel.args
 * names) as (region, offset), with
 *   ARG k     the k-th tensor argument of the recorded callable;
 *   BLOCK j   the j-th block the recording allocated from the capture's
 *             graph pool, live at that launch;
 *   REGION r  the r-th persistent region (pw_reloc_regions: buffers that
 *             outlive every graph, the same list wherever the program runs);
 * together with the graph-pool allocations and releases the recording made,
 * interleaved with its launches, and what its output is.
 *
 * Running the program with other arguments inside an open capture makes the
 * same allocations against the pool and records the same launches with the
 * addresses moved. The pool is deterministic (best fit, ties to the lowest
 * address), so from the same pool state this is exactly what a real capture
 * of the callable with those arguments would record, pool addresses
 * included, when the callable launches the same kernels for arguments of
 * the same shapes (pw_reloc_program_matches). pw_reloc_program_run_checked
 * proves it for one run by comparing with a real capture byte for byte.
 *
 * Uses: a model whose layers are one piece repeated captures one layer per
 * size and relocates it onto the others (distinct-piece capture), and a
 * program written to disk starts the next process without running the
 * callable (the engine's graph cache). docs/runtime.md describes both. */
#include "piecewise.h"

#ifndef PIECEWISE_RELOCATE_H
#define PIECEWISE_RELOCATE_H

#include "piecewise/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Persistent regions                                                        */
/* ------------------------------------------------------------------------ */

typedef struct pw_reloc_region {
    uintptr_t base;
    uint64_t bytes;
} pw_reloc_region;

/* The buffers a program may address besides its arguments and its own
 * blocks, in the order they were added: REGION r is the r-th. */
typedef struct pw_reloc_regions pw_reloc_regions;

PW_API pw_status pw_reloc_regions_new(pw_reloc_regions **out);
PW_API void pw_reloc_regions_free(pw_reloc_regions *r);
/* Appends [base, base + bytes). */
PW_API pw_status pw_reloc_regions_add(pw_reloc_regions *r, const void *base, size_t bytes);
/* Between on and off, every block this thread allocates from pool is
 * appended (allocation order is what makes two processes' lists agree).
 * One pool at a time. Turning it off returns PW_ERR_OOM if a region was
 * lost for want of host memory meanwhile. */
PW_API pw_status pw_reloc_regions_observe(pw_reloc_regions *r, pw_pool *pool, bool on);
/* The regions, borrowed; *n is the count. */
PW_API const pw_reloc_region *pw_reloc_regions_list(const pw_reloc_regions *r, size_t *n);

/* ------------------------------------------------------------------------ */
/* Programs                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum pw_reloc_kind {
    PW_RELOC_ARG,
    PW_RELOC_BLOCK,
    PW_RELOC_REGION,
    PW_RELOC_KIND_COUNT_
} pw_reloc_kind;

/* One address word of one launch. */
typedef struct pw_reloc {
    uint32_t launch;
    uint16_t byte;   /* offset of the word in the launch's arguments */
    uint8_t kind;    /* pw_reloc_kind */
    uint32_t index;  /* argument, block or region */
    uint64_t offset; /* bytes past its start */
} pw_reloc;

/* One allocation or release from the graph pool. */
typedef struct pw_reloc_event {
    bool alloc;
    uint32_t block;
    uint32_t at_launch; /* launches of the program made before it */
    uint64_t bytes;     /* alloc: bytes asked for */
} pw_reloc_event;

/* An argument as the program was recorded with: a tensor's dtype, shape
 * and strides, or a scalar's value. */
typedef struct pw_reloc_sig {
    pw_value_kind kind; /* TENSOR, INT, FLOAT, BOOL or NONE */
    pw_dtype dtype;
    int ndim;
    int64_t shape[PW_MAX_DIMS], stride[PW_MAX_DIMS];
    int64_t i; /* INT, BOOL */
    double f;  /* FLOAT */
} pw_reloc_sig;

typedef enum pw_reloc_out_kind {
    PW_RELOC_OUT_ARG,
    PW_RELOC_OUT_BLOCK,
    PW_RELOC_OUT_SCALAR,
    PW_RELOC_OUT_KIND_COUNT_
} pw_reloc_out_kind;

/* One item of the output: an argument, a block or a scalar. */
typedef struct pw_reloc_out {
    uint8_t kind;   /* pw_reloc_out_kind */
    uint32_t index; /* argument or block */
    pw_reloc_sig scalar;
} pw_reloc_out;

/* A block that is an output is allocated as a tensor of this header. */
typedef struct pw_reloc_out_block {
    bool is_output;
    pw_dtype dtype;
    int ndim;
    int64_t shape[PW_MAX_DIMS];
} pw_reloc_out_block;

/* The program: plain data, so that it can be stored and read back (all
 * arrays from pw_host_alloc; pw_reloc_program_free frees them). */
typedef struct pw_reloc_program {
    int nargs;
    pw_reloc_sig *sigs;        /* [nargs] */
    size_t n_launches;
    const pw_kernel **kernels; /* [n_launches] */
    size_t *arg_offsets;       /* [n_launches + 1] offsets into bytes */
    unsigned char *bytes;      /* the argument bytes as recorded */
    size_t n_relocs;
    pw_reloc *relocs;          /* by launch, then byte */
    size_t n_events;
    pw_reloc_event *events;    /* in order */
    size_t n_blocks;
    pw_reloc_out_block *out_blocks; /* [n_blocks] */
    bool out_tuple;            /* the output is a tuple of n_outs items (else one item) */
    int n_outs;
    pw_reloc_out *outs;
} pw_reloc_program;

#define PW_RELOC_WHY_CAP 320

/* Runs `run` on args inside the capture open on stream s (PW_ERR_CAPTURE
 * when none is) and describes what it recorded. Its status and output are
 * run's. *program is the program, or NULL when the recording cannot be
 * described (an address in no region, a kernel without pw_kernel.args, an
 * output that is a view, ...), with the reason in why (at least
 * PW_RELOC_WHY_CAP bytes). Recordings nest: a program recorded inside
 * another's recording is part of both. */
PW_API pw_status pw_reloc_record(pw_stream *s, const pw_reloc_regions *regions, pw_callable run,
                                 const pw_value *args, int nargs, pw_value *out,
                                 pw_reloc_program **program, char *why);
/* True when args have the kinds, dtypes, shapes, strides and scalar values
 * the program was recorded with. */
PW_API bool pw_reloc_program_matches(const pw_reloc_program *p, const pw_value *args, int nargs);
/* Runs the program inside the capture open on s: its allocations and
 * releases against the capture's pool, its launches with the addresses of
 * args, of its blocks and of regions. On success *out holds the output. */
PW_API pw_status pw_reloc_program_run(const pw_reloc_program *p, pw_stream *s,
                                      const pw_reloc_regions *regions, const pw_value *args,
                                      int nargs, pw_value *out);
/* pw_reloc_program_run, proven: captures `run` for real first, forgets that
 * recording and gives its blocks back, runs the program and compares the
 * two recordings byte for byte and the outputs by address. A difference is
 * PW_ERR_UNSAFE_CAPTURE naming `label`, the launch and the bytes. Needs a
 * stream whose capture can forget launches (CPU; PW_ERR_UNSUPPORTED
 * otherwise). */
PW_API pw_status pw_reloc_program_run_checked(const pw_reloc_program *p, pw_stream *s,
                                              const pw_reloc_regions *regions, pw_callable run,
                                              const pw_value *args, int nargs, const char *label,
                                              pw_value *out);
/* NULL is a no-op. */
PW_API void pw_reloc_program_free(pw_reloc_program *p);

/* Bytes a kernel may address from the data pointer of a tensor argument of
 * this signature; 0 when unknown (then nothing may point into it). */
PW_API uint64_t pw_reloc_sig_extent(const pw_reloc_sig *s);
/* Bytes an output block's tensor takes; 0 for an invalid header. */
PW_API uint64_t pw_reloc_out_block_bytes(const pw_reloc_out_block *b);

#ifdef __cplusplus
}
#endif
#endif
