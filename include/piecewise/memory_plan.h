/* piecewise public API, libpiecewise: the memory plan. Included by
 * piecewise.h; may be included alone.
 *
 * Sizing device memory before anything large is allocated, as vLLM does
 * before it sizes its KV cache: a budget, the parts that are resident
 * whatever the plan (weights, persistent buffers), the graph pool as a dry
 * run of a module's capture list predicts it (to the byte: what the real
 * capture then reserves), and from what is left the most units (KV-cache
 * blocks, say) one allocation of a pool of their own can hold, the pool's
 * rounding included. Semantics: docs/runtime.md ("Memory planning"). */
#include "piecewise.h"

#ifndef PIECEWISE_MEMORY_PLAN_H
#define PIECEWISE_MEMORY_PLAN_H

#include "piecewise/export.h"
#include "piecewise/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pw_memory_plan pw_memory_plan;

/* Resident parts a plan holds at most. */
#define PW_MEMORY_PLAN_MAX_PARTS 8

/* A plan for memory of `device`. budget: bytes in all; 0: no budget (then
 * pw_memory_plan_fit gives max_units). */
PW_API pw_status pw_memory_plan_new(pw_device device, size_t budget, pw_memory_plan **out);
/* NULL is a no-op. */
PW_API void pw_memory_plan_free(pw_memory_plan *p);

/* A resident part, named for messages ("weights"; copied, at most 31
 * bytes kept). More than PW_MEMORY_PLAN_MAX_PARTS parts is
 * PW_ERR_INVALID_ARG. */
PW_API pw_status pw_memory_plan_add(pw_memory_plan *p, const char *name, size_t bytes);
/* Bytes of the parts added so far (the graphs included, once planned). */
PW_API size_t pw_memory_plan_resident(const pw_memory_plan *p);

/* Stand-ins for buffers the captured kernels address but that are sized
 * from the plan (a KV cache whose addresses attention launches take):
 * called before the dry run with `shadow`, a pool in shadow mode
 * (pw_pool_set_shadow: address space only, never touched), to allocate
 * them from; and after it with NULL, to forget those addresses (the pool
 * is freed then). */
typedef pw_status (*pw_memory_standins_fn)(void *user, pw_pool *shadow);

/* The graph pool's bytes: pw_module_plan_capture (the dry run of the
 * module's capture list, nothing computed, no graph kept) between the two
 * calls of standins (NULL: none), added as the part "graphs (predicted)".
 * The module's graph pool must be empty. *bytes (may be NULL) gets the
 * prediction, which equals what pw_module_capture then reserves. */
PW_API pw_status pw_memory_plan_graphs(pw_memory_plan *p, pw_module *m,
                                       pw_module_inputs_fn inputs, void *user,
                                       const pw_capture_options *opts,
                                       pw_memory_standins_fn standins, void *standins_user,
                                       size_t *bytes);

/* Bytes of one allocation holding n units, before the pool's rounding
 * (monotonic in n). */
typedef size_t (*pw_memory_unit_bytes_fn)(void *user, int64_t n);

/* The most units n <= max_units whose one allocation (unit_bytes(n)) from
 * a new pool of the plan's device reserves no more than the budget leaves
 * after the resident parts; max_units when the plan has no budget. When
 * not even one fits: PW_ERR_INVALID_ARG, the message naming the budget,
 * each part and one unit (unit_name, "KV cache block"). The result and
 * its reservation are kept for pw_memory_plan_describe. */
PW_API pw_status pw_memory_plan_fit(pw_memory_plan *p, const char *unit_name,
                                    pw_memory_unit_bytes_fn unit_bytes, void *user,
                                    int64_t max_units, int64_t *units);

/* What a new pool of `device` reserves for one allocation of `bytes`: the
 * pool's segment rounding, found against a shadow pool (nothing is
 * allocated). */
PW_API pw_status pw_memory_reservation(pw_device device, size_t bytes, size_t *reserved);

/* One line for a log: the budget, each part, the fitted units and what is
 * left, e.g. "memory budget 64.0 MiB: weights 1.1 MiB, buffers 96.0 KiB,
 * graphs (predicted) 2.0 MiB, 812 KV cache blocks 60.9 MiB, unused 12.0 KiB".
 * Always NUL-terminated (cap >= 1). */
PW_API void pw_memory_plan_describe(const pw_memory_plan *p, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
