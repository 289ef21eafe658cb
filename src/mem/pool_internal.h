#ifndef PW_POOL_INTERNAL_H
#define PW_POOL_INTERNAL_H

#include "internal.h"

/* How a backend hands out raw device memory to pools. */
typedef struct pw_device_mem_ops {
    void *(*alloc)(size_t bytes);
    void (*free)(void *ptr);
} pw_device_mem_ops;

void pw_mem_register_device(pw_device device, pw_device_mem_ops ops);

/* ---- the thread's open capture, as memory sees it ------------------------
 *
 * mem owns the record the pool consults on every allocation: which pool the
 * capture open on this thread allocates from, and the first illegal call
 * made during it (the violation that poisons the capture). The stream layer
 * opens and closes the record around a capture and reports its own illegal
 * calls into it; the pool never calls the stream.
 *
 * While a record is open, an allocation from another pool of the same
 * device is refused with PW_ERR_CAPTURE and poisons the capture; the
 * capture pool refuses an immediate trim. */

/* Opens the record for `pool` on this thread. PW_ERR_CAPTURE if one is
 * already open (captures do not nest). */
pw_status pw_mem_capture_open(pw_pool *pool);
/* Closes the record (no-op when none is open) and runs a trim of the
 * capture pool deferred during it. */
void pw_mem_capture_close(void);
/* The capture pool of this thread's open record, or NULL. */
pw_pool *pw_mem_capture_pool(void);
/* Records `code` with the thread's current error message as the capture's
 * violation unless one is already recorded; returns code. No-op (returns
 * code) without an open record. */
pw_status pw_mem_capture_poison(pw_status code);
/* The recorded violation (PW_OK if none) and its message. */
pw_status pw_mem_capture_violation(const char **msg);

/* ---- dry runs --------------------------------------------------------------
 *
 * A dry run is a capture against a shadow pool (pw_pool_set_shadow): its
 * addresses back nothing, so nothing may run. Captures record without
 * running anyway; the stream also drops every eager launch made on this
 * thread while a dry run is open (the eager ops between pieces would read
 * shadow addresses). Calls nest. */
void pw_mem_dry_run_begin(void);
void pw_mem_dry_run_end(void);
bool pw_mem_dry_run_active(void);

/* Used by streams: graph references. */
void pw_pool_graph_ref(pw_pool *pool);
void pw_pool_graph_unref(pw_pool *pool);
/* True if ptr lies inside one of the pool's segments. */
bool pw_pool_owns(const pw_pool *pool, const void *ptr);

/* An observer of this thread's successful allocations and releases in one
 * pool: alloc is true with the bytes asked for and the block, false with
 * the block given back. Relocation (runtime/relocate.c) records a capture's
 * allocation sequence with it, to repeat that sequence when it runs the
 * program (the pool is deterministic, so the same sequence from the same
 * state gives the same blocks), and lists persistent regions with it. One
 * observer per thread; fn NULL stops observing. */
typedef void (*pw_pool_observer_fn)(void *user, bool alloc, size_t bytes, void *ptr);
void pw_pool_observe(pw_pool *pool, pw_pool_observer_fn fn, void *user);

#endif
