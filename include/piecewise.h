/* piecewise: piecewise graph capture and replay for model inference, in C11.
 *
 * Public API. Every handle is opaque and comes in a _new/_free pair. Every
 * fallible function returns a pw_status; on failure pw_last_error() holds a
 * message with context (thread-local; see pw_last_error for exactly when it
 * is defined). User input never aborts the process.
 *
 * Documents cited as docs/NAME.md are installed with the headers, in
 * <prefix>/share/doc/piecewise/docs/.
 *
 * Layers (see docs/ARCHITECTURE.md), in two libraries:
 *   libpiecewise (the capture layer; this header, graph.h, runtime.h, module.h)
 *   core     status, logging, dtypes, tensors, values
 *   mem      caching pool with graph pools (stable addresses)
 *   backend  streams: eager launch, capture into a device graph, replay
 *   graph    IR, text format, splitter, stitching plan and C emission
 *   runtime  modes, batch descriptors, forward context, graph wrapper, dispatcher,
 *            relocation of recorded launches (relocate.h), piecewise modules
 *            (graph -> split -> stitching -> wrappers; module.h)
 *   libpiecewise-llm (links libpiecewise; piecewise_llm.h, which includes
 *   this header and piecewise/model.h)
 *   ops      op table, CPU and CUDA kernels
 *   model    GGUF, tokenizer, Llama graph, KV cache, engine
 */
#ifndef PIECEWISE_H
#define PIECEWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "piecewise/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PW_VERSION_MAJOR 0
#define PW_VERSION_MINOR 1
#define PW_VERSION_PATCH 0
PW_API const char *pw_version(void);

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

typedef enum pw_status {
    PW_OK = 0,
    PW_ERR_INVALID_ARG,      /* a caller passed a bad value */
    PW_ERR_PARSE,            /* malformed text input (graph text, options) */
    PW_ERR_FORMAT,           /* malformed binary input (GGUF) */
    PW_ERR_IO,               /* open/read/mmap/write failed */
    PW_ERR_OOM,              /* an allocation failed */
    PW_ERR_NOT_FOUND,        /* a named thing does not exist */
    PW_ERR_UNSUPPORTED,      /* valid but not handled by this build */
    PW_ERR_STATE,            /* call not allowed in the current state */
    PW_ERR_CAPTURE,          /* illegal operation during capture, or capture misuse */
    PW_ERR_ADDRESS_MISMATCH, /* replay inputs are not at the captured addresses */
    PW_ERR_UNSAFE_CAPTURE,   /* verify_capture found per-step values baked in */
    PW_ERR_CUDA,             /* a CUDA runtime or cuBLAS call failed */
    PW_ERR_INTERNAL,         /* a bug in piecewise */
    PW_STATUS_COUNT_
} pw_status;

/* Stable short name, e.g. "PW_ERR_PARSE". */
PW_API const char *pw_status_name(pw_status s);
/* The message of this thread's last failure.
 * - After a call returns a status other than PW_OK it describes that
 *   failure (never empty), with the context each layer added, until the
 *   thread's next call into the library.
 * - After a call returns PW_OK it is unspecified: it may still hold an
 *   older message, or one from a failure the library handled itself. Read
 *   it right after a failing call; never use it to tell whether a call
 *   failed (the status says that).
 * - Cleanup never replaces it: functions that return void (the _free and
 *   _release functions, pw_stream_abort_capture, ...) leave it as it is,
 *   so freeing things on an error path keeps the message of the error
 *   being returned. Logging and environment variables never touch it. */
PW_API const char *pw_last_error(void);
/* Empties the message (tests use it to check that a failure sets one). */
PW_API void pw_clear_error(void);

/* ------------------------------------------------------------------------ */
/* Logging: PW_LOG_LEVEL=error|warn|info|debug (default warn)                */
/* ------------------------------------------------------------------------ */

typedef enum pw_log_level {
    PW_LOG_ERROR = 0,
    PW_LOG_WARN = 1,
    PW_LOG_INFO = 2,
    PW_LOG_DEBUG = 3
} pw_log_level;

PW_API pw_log_level pw_log_get_level(void);
PW_API void pw_log_set_level(pw_log_level level);
/* Parses "error", "warn", "info", "debug". */
PW_API pw_status pw_log_level_parse(const char *name, pw_log_level *out);

/* ------------------------------------------------------------------------ */
/* Dtypes and devices                                                        */
/* ------------------------------------------------------------------------ */

typedef enum pw_dtype {
    PW_F32 = 0,
    PW_F16,
    PW_BF16,
    PW_I32,
    PW_I64,
    PW_U8,
    /* block-quantized weight types (ggml layouts) */
    PW_Q8_0,  /* 32 values: f16 scale + 32 x int8 */
    PW_Q4_0,  /* 32 values: f16 scale + 16 bytes of nibbles */
    PW_Q4_1,  /* 32 values: f16 scale + f16 min + 16 bytes of nibbles */
    /* read from GGUF files and dequantized to f32 at load (docs/gguf.md) */
    PW_Q5_0,  /* 32 values: f16 scale + 4 bytes of high bits + 16 bytes of nibbles */
    PW_Q5_1,  /* 32 values: f16 scale + f16 min + high bits + nibbles */
    PW_Q2_K,  /* 256 values in 16 groups: 2-bit quants, 4-bit scales and mins */
    PW_Q3_K,  /* 256 values in 16 groups: 3-bit quants, 6-bit scales */
    PW_Q4_K,  /* 256 values in 8 groups: 4-bit quants, 6-bit scales and mins */
    PW_Q5_K,  /* 256 values in 8 groups: 5-bit quants, 6-bit scales and mins */
    PW_Q6_K,  /* 256 values in 16 groups: 6-bit quants, 8-bit scales */
    /* Q4_0 with rows interleaved in groups of 16 (the CPU kernels' layout,
     * made at load from Q4_0 weights; docs/kernels.md): same size */
    PW_Q4_0X16,
    PW_DTYPE_COUNT_
} pw_dtype;

PW_API const char *pw_dtype_name(pw_dtype t);
/* Elements per block (1 for plain types) and bytes per block. */
PW_API int64_t pw_dtype_block_elems(pw_dtype t);
PW_API int64_t pw_dtype_block_bytes(pw_dtype t);
/* Bytes for n elements (n must be a multiple of the block size). */
PW_API int64_t pw_dtype_row_bytes(pw_dtype t, int64_t n);

/* EMU is an emulated discrete device (docs/cuda.md): the CPU kernels run
 * under CUDA's rules (memory the host cannot touch, asynchronous streams,
 * capture rules), so the device path can be tested without a GPU. */
typedef enum pw_device {
    PW_DEVICE_CPU = 0,
    PW_DEVICE_CUDA = 1,
    PW_DEVICE_EMU = 2,
    PW_DEVICE_COUNT_
} pw_device;
PW_API const char *pw_device_name(pw_device d);
PW_API pw_status pw_device_parse(const char *name, pw_device *out);
/* True if this build has the CUDA backend and a GPU is usable now. */
PW_API bool pw_cuda_available(void);
/* Why pw_cuda_available() is false: "built without the CUDA backend" or
 * "no CUDA device" (with the runtime's reason); "" when it is true. */
PW_API const char *pw_cuda_unavailable_reason(void);
/* Threads the CPU kernels may use (matrix products); default 1. */
PW_API void pw_set_num_threads(int n);
PW_API int pw_get_num_threads(void);

/* ------------------------------------------------------------------------ */
/* Caching pool                                                              */
/* ------------------------------------------------------------------------ */

/* A best-fit caching allocator over large segments obtained from the
 * device. Freed blocks are cached and coalesced with free neighbours;
 * pw_pool_trim returns wholly free segments to the device.
 *
 * A graph pool is a pool that captures allocate from. Blocks freed during a
 * capture go back to it, so later allocations in the same (or a later)
 * capture reuse them. While a graph recorded against the pool exists, the
 * pool never returns memory to the device, so no address a graph uses ever
 * moves or dangles. */
typedef struct pw_pool pw_pool;

typedef struct pw_pool_stats {
    size_t allocated;      /* bytes in live blocks */
    size_t reserved;       /* bytes in segments held from the device */
    size_t peak_allocated; /* high-water mark of allocated */
    size_t peak_reserved;  /* high-water mark of reserved */
    size_t n_alloc_calls;  /* successful pw_pool_alloc calls */
    size_t n_segments;     /* segments held */
    size_t n_live_blocks;  /* blocks handed out and not yet freed */
} pw_pool_stats;

PW_API pw_status pw_pool_new(pw_device device, const char *name, pw_pool **out);
/* Frees every segment. Live blocks become invalid. Refused (the pool is
 * leaked and an error logged) if graphs still reference it. */
PW_API void pw_pool_free(pw_pool *pool);
PW_API pw_status pw_pool_alloc(pw_pool *pool, size_t bytes, void **out);
/* Returns a block to the pool's cache. NULL is a no-op. Freeing a pointer
 * the pool did not hand out is PW_ERR_INVALID_ARG. */
PW_API pw_status pw_pool_release(pw_pool *pool, void *ptr);
PW_API void pw_pool_get_stats(const pw_pool *pool, pw_pool_stats *out);
PW_API void pw_pool_reset_peak(pw_pool *pool);
/* Returns wholly free segments to the device. During a capture into this
 * pool it is refused (PW_ERR_CAPTURE) unless defer is true, in which case
 * the trim runs when the capture ends. With live graphs on the pool it
 * releases nothing and returns PW_OK (*released = 0). */
PW_API pw_status pw_pool_trim(pw_pool *pool, bool defer, size_t *released);
/* Suppress trims (e.g. the graph wrapper's gc_disable); calls nest. */
PW_API void pw_pool_hold_trim(pw_pool *pool);
PW_API void pw_pool_unhold_trim(pw_pool *pool);
PW_API const char *pw_pool_name(const pw_pool *pool);
PW_API pw_device pw_pool_device(const pw_pool *pool);
/* Number of device graphs that still reference this pool. */
PW_API int pw_pool_graph_refs(const pw_pool *pool);
/* Shadow mode: the pool keeps its bookkeeping (sizes, segment sizes,
 * alignment, best-fit reuse) but its segments are address space with no
 * access, so its stats after a dry run of a capture are exactly those the
 * real capture will reach, and any use of its addresses faults. Only an
 * empty pool (no segments, no graphs, no open capture) switches;
 * otherwise PW_ERR_STATE. */
PW_API pw_status pw_pool_set_shadow(pw_pool *pool, bool on);
PW_API bool pw_pool_is_shadow(const pw_pool *pool);
/* Size granularity of blocks (alignment of every returned pointer). */
#define PW_POOL_ALIGN 64

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

#define PW_MAX_DIMS 4

/* A tensor: dtype, up to 4 dims with element strides, data pointer, device,
 * and a reference count. Storage either belongs to a pool block that the
 * tensor owns (freed to its pool when the last reference goes), or is
 * borrowed (a view, a weight in a mapped file, a replayed graph's output). */
typedef struct pw_tensor pw_tensor;

/* Allocates storage from pool (contiguous, row-major). */
PW_API pw_status pw_tensor_new(pw_pool *pool, pw_dtype dtype, int ndim, const int64_t *shape,
                        pw_tensor **out);
/* Wraps memory the caller keeps alive (contiguous). */
PW_API pw_status pw_tensor_wrap(void *data, pw_device device, pw_dtype dtype, int ndim,
                         const int64_t *shape, pw_tensor **out);
/* A view of rows [start, end) along dim 0. Keeps the base alive. */
PW_API pw_status pw_tensor_slice0(pw_tensor *base, int64_t start, int64_t end, pw_tensor **out);
/* A non-owning alias with the same data, shape and strides. It does not
 * keep the base alive: this is the graph wrapper's "weak ref" output. */
PW_API pw_status pw_tensor_weak_alias(const pw_tensor *t, pw_tensor **out);
PW_API pw_tensor *pw_tensor_retain(pw_tensor *t);
/* Drops one reference; at zero, owned storage returns to its pool. */
PW_API void pw_tensor_release(pw_tensor *t);

PW_API pw_dtype pw_tensor_dtype(const pw_tensor *t);
PW_API int pw_tensor_ndim(const pw_tensor *t);
PW_API int64_t pw_tensor_dim(const pw_tensor *t, int i);
PW_API int64_t pw_tensor_stride(const pw_tensor *t, int i);
PW_API int64_t pw_tensor_numel(const pw_tensor *t);
PW_API size_t pw_tensor_nbytes(const pw_tensor *t); /* for contiguous tensors */
PW_API void *pw_tensor_data(const pw_tensor *t);
PW_API pw_device pw_tensor_device(const pw_tensor *t);
PW_API bool pw_tensor_is_contiguous(const pw_tensor *t);
PW_API bool pw_tensor_owns_storage(const pw_tensor *t);
PW_API pw_pool *pw_tensor_pool(const pw_tensor *t); /* NULL if borrowed */
PW_API int pw_tensor_refcount(const pw_tensor *t);
/* "f32[8, 64]" into buf; returns buf. */
PW_API const char *pw_tensor_describe(const pw_tensor *t, char *buf, size_t cap);

/* ------------------------------------------------------------------------ */
/* Values: what runnables, pieces and the stitching plan pass around         */
/* ------------------------------------------------------------------------ */

typedef enum pw_value_kind {
    PW_VAL_NONE = 0,
    PW_VAL_TENSOR,
    PW_VAL_TUPLE,
    PW_VAL_INT,
    PW_VAL_FLOAT,
    PW_VAL_BOOL,
    PW_VAL_STRING
} pw_value_kind;

typedef struct pw_tuple pw_tuple;

/* A small tagged value. Tensor and tuple values hold one reference;
 * pw_value_retain/pw_value_release manage it. Strings are borrowed. */
typedef struct pw_value {
    pw_value_kind kind;
    union {
        pw_tensor *tensor;
        pw_tuple *tuple;
        int64_t i;
        double f;
        bool b;
        const char *s;
    } as;
} pw_value;

static inline pw_value pw_value_none(void) { pw_value v; v.kind = PW_VAL_NONE; v.as.i = 0; return v; }
static inline pw_value pw_value_tensor(pw_tensor *t) { pw_value v; v.kind = PW_VAL_TENSOR; v.as.tensor = t; return v; }
static inline pw_value pw_value_int(int64_t i) { pw_value v; v.kind = PW_VAL_INT; v.as.i = i; return v; }
static inline pw_value pw_value_float(double f) { pw_value v; v.kind = PW_VAL_FLOAT; v.as.f = f; return v; }

/* A new tuple of n items, each a NONE value, with one reference. */
PW_API pw_status pw_tuple_new(int n, pw_tuple **out);
PW_API int pw_tuple_size(const pw_tuple *t);
/* Borrowed view of item i. */
PW_API pw_value pw_tuple_get(const pw_tuple *t, int i);
/* Stores v, taking over the caller's reference; the old item is released. */
PW_API void pw_tuple_set(pw_tuple *t, int i, pw_value v);
PW_API pw_tuple *pw_tuple_retain(pw_tuple *t);
PW_API void pw_tuple_release(pw_tuple *t);
static inline pw_value pw_value_tuple(pw_tuple *t) { pw_value v; v.kind = PW_VAL_TUPLE; v.as.tuple = t; return v; }

PW_API pw_value pw_value_retain(pw_value v);
PW_API void pw_value_release(pw_value v);

/* A callable: what a graph wrapper wraps, what the stitching plan calls
 * through its submodule table, what a user plugs in. On success *out holds
 * a new reference (or NONE). */
typedef pw_status (*pw_callable_fn)(void *user, const pw_value *args, int nargs, pw_value *out);

typedef struct pw_callable {
    pw_callable_fn fn;
    void *user;
    const char *name; /* for errors and logs; may be NULL */
} pw_callable;

/* ------------------------------------------------------------------------ */
/* Kernels, streams and device graphs                                        */
/* ------------------------------------------------------------------------ */

/* A CPU kernel receives a pointer to its argument bytes: a copy taken at
 * launch (eager) or at capture (replayed verbatim forever). Anything that
 * must change per step therefore has to be read through a pointer to a
 * persistent buffer, never passed by value. */
typedef void (*pw_cpu_kernel_fn)(const void *args);

/* Largest number of address words in one kernel's arguments. */
#define PW_KERNEL_MAX_ADDRESSES 16

/* Where a kernel's argument bytes hold addresses: the byte offsets of its
 * pointer fields. Relocation (piecewise/relocate.h) rewrites exactly these
 * words when it moves a recorded launch onto other buffers, and a stored
 * graph keeps exactly these as (region, offset); every other byte is a
 * value and is copied as it is. Declare it where the argument struct is
 * declared, from the same field list (the ops layer generates both from
 * one table per kernel), so that no address can be left out. */
typedef struct pw_kernel pw_kernel;

/* What a launch of kernel k with these argument bytes touches through its
 * address word `word` (an index into addresses): the bytes from the word's
 * address on that the kernel may read or write, derived from the values in
 * the arguments only (the address words themselves may read as 0); 0 when
 * it cannot say. *nullable: whether the kernel accepts NULL there. A graph
 * cache keeps a restored launch only when each word's [address, address +
 * extent) lies inside the buffer it is relocated into (docs/graph-cache.md). */
typedef uint64_t (*pw_kernel_extent_fn)(const pw_kernel *k, const void *args, int word,
                                        bool *nullable);

typedef struct pw_kernel_args {
    size_t size;      /* bytes of the argument struct */
    int n_addresses;
    uint16_t addresses[PW_KERNEL_MAX_ADDRESSES]; /* byte offsets of the address words */
    pw_kernel_extent_fn extent; /* NULL: no extent known (only a word's base is checked) */
} pw_kernel_args;

/* A kernel as a stream launches it. Streams run what they are given by
 * pointer and never look a kernel up by name: a CPU stream calls `cpu`, a
 * CUDA stream `cuda` (its backend's launcher), and refuses a kernel whose
 * entry for it is NULL. Each kernel set (the ops layer's per-device kernel
 * tables) fills the entry of its own device. `name` is for messages. */
struct pw_kernel {
    const char *name;
    pw_cpu_kernel_fn cpu;       /* NULL: not a CPU kernel */
    const void *cuda;           /* a CUDA backend launcher; NULL: not a CUDA kernel */
    const pw_kernel_args *args; /* its address words; NULL: its launches are never relocated
                                   (a capture that launches it is always made for real) */
};

typedef struct pw_stream pw_stream;
typedef struct pw_graph pw_graph;

/* Largest argument block for one launch. */
#define PW_MAX_KERNEL_ARG_BYTES 512

PW_API pw_status pw_stream_new(pw_device device, pw_stream **out);
PW_API void pw_stream_free(pw_stream *s);
PW_API pw_device pw_stream_device(const pw_stream *s);

/* Eager: runs the kernel now. Capturing: records it (no execution). */
PW_API pw_status pw_launch(pw_stream *s, const pw_kernel *k, const void *args, size_t argbytes);
/* Waits for all work. During a capture it is an error that invalidates
 * the capture. */
PW_API pw_status pw_stream_synchronize(pw_stream *s);

/* Starts recording launches on s. Allocations from any pool other than
 * `pool` on this thread fail while the capture is open; a nested capture
 * fails. */
PW_API pw_status pw_stream_begin_capture(pw_stream *s, pw_pool *pool);
/* Ends the capture. If an illegal call happened during it, returns that
 * error (with the call named) and frees everything the capture made. */
PW_API pw_status pw_stream_end_capture(pw_stream *s, pw_graph **out);
/* Abandons an open capture (for error paths): no graph, nothing leaked. */
PW_API void pw_stream_abort_capture(pw_stream *s);
PW_API bool pw_stream_is_capturing(const pw_stream *s);
/* The capture open on this thread, or NULL. */
PW_API pw_stream *pw_capturing_stream(void);
PW_API pw_pool *pw_capture_pool(void);

/* Copies and memset on a stream, ordered with its launches. "Device"
 * memory is memory of the stream's device (from a pool of that device);
 * on a CPU stream both sides are host memory and each copy is a memcpy.
 *   h2d: host src -> device dst;  d2h: device src -> host dst;
 *   d2d: device -> device (the ranges must not overlap);
 *   memset: every byte of dst set to value (0..255).
 * Eager, the work is issued at once; on a device with asynchronous copies
 * (pw_device_caps.async_copy) it completes in stream order, so host memory
 * a copy reads or writes must stay valid and untouched until
 * pw_stream_synchronize. During a capture the call is recorded like a
 * launch and repeats at every replay with the same addresses and size.
 * On CUDA a captured h2d/d2h needs page-locked host memory (cudaMallocHost,
 * pw_cuda_host_alloc): pageable host memory cannot be captured, so it is
 * refused with PW_ERR_CAPTURE and poisons the capture.
 * bytes == 0 does nothing. Errors: PW_ERR_INVALID_ARG for a NULL stream, a
 * NULL pointer with bytes > 0, overlapping d2d ranges, a memset value
 * outside 0..255, or (CUDA) a pointer on the wrong side (e.g. a host
 * pointer as the device destination of h2d). */
PW_API pw_status pw_stream_copy_h2d(pw_stream *s, void *dst, const void *src, size_t bytes);
PW_API pw_status pw_stream_copy_d2h(pw_stream *s, void *dst, const void *src, size_t bytes);
PW_API pw_status pw_stream_copy_d2d(pw_stream *s, void *dst, const void *src, size_t bytes);
PW_API pw_status pw_stream_memset(pw_stream *s, void *dst, int value, size_t bytes);

/* What a device's backend can do, so that callers need not branch on the
 * device itself. */
typedef struct pw_device_caps {
    bool graphs;       /* captures replay as recorded graphs (CPU and CUDA: true) */
    bool graph_update; /* a re-capture can update an instantiated device graph in place
                          (pw_stream_end_capture_update; CUDA: cudaGraphExecUpdate).
                          CPU: false, there is nothing instantiated to update */
    bool async_copy;   /* stream copies complete asynchronously (CPU: false) */
    bool needs_warmup; /* first launches do one-time setup (module loading, library
                          handles, workspaces) that must run eagerly before a capture
                          (CPU: false, CUDA: true) */
} pw_device_caps;

/* True when `device` can be used now (backend built in and a device
 * present); otherwise false with *reason (if reason is not NULL) saying
 * why, e.g. "built without the CUDA backend". CPU is always available. */
PW_API bool pw_device_available(pw_device device, const char **reason);
/* Capabilities of an available device; PW_ERR_UNSUPPORTED with the reason
 * when it is not available, PW_ERR_INVALID_ARG for NULL out or an unknown
 * device. */
PW_API pw_status pw_device_get_caps(pw_device device, pw_device_caps *out);
/* Host memory that copies on `device`'s streams may read and write
 * asynchronously and inside a capture: page-locked on a device with
 * asynchronous copies (CUDA: cudaMallocHost), plain host memory on the CPU.
 * Stage per-step inputs in it. Free it with pw_device_host_free on the same
 * device, after the copies that use it have completed. */
PW_API pw_status pw_device_host_alloc(pw_device device, size_t bytes, void **out);
PW_API void pw_device_host_free(pw_device device, void *ptr);

/* Runs every recorded launch in order. No allocation, no lookups. */
PW_API pw_status pw_graph_replay(pw_graph *g, pw_stream *s);
PW_API void pw_graph_free(pw_graph *g);
PW_API size_t pw_graph_num_launches(const pw_graph *g);
/* Launch i of the recording: kernel, argument bytes. For verification. */
PW_API pw_status pw_graph_launch_at(const pw_graph *g, size_t i, const pw_kernel **kernel,
                             const void **args, size_t *argbytes);
PW_API pw_pool *pw_graph_pool(const pw_graph *g);

#ifdef __cplusplus
}
#endif

/* Each layer above the core declares its public API in its own header.
 * The LLM API (libpiecewise-llm) is not part of this umbrella: its users
 * include piecewise_llm.h. */
#include "piecewise/graph.h"
#include "piecewise/runtime.h"
#include "piecewise/relocate.h"
#include "piecewise/module.h"
#include "piecewise/memory_plan.h"

#endif /* PIECEWISE_H */
