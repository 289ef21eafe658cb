/* The engine's graph cache (engine_cache.c): its programs (model/
 * piece_program.h) in the capture library's cache file (include/piecewise/
 * graph_cache.h), so the next engine built from the same model and
 * configuration starts without running a single plan. docs/graph-cache.md. */
#ifndef PW_MODEL_GRAPH_CACHE_H
#define PW_MODEL_GRAPH_CACHE_H

#include "model/piece_program.h"
#include "ops/op_table.h"
#include "piecewise/graph_cache.h"

/* The kernel table of the engine's files: the device's kernel set by
 * kernel id (NULL where the set lacks one). */
void pw_graph_cache_kernels(pw_device device, const pw_kernel *table[PW_KERNEL_COUNT_]);

/* Load before the capture, store after it. Problems with the cache never
 * fail the engine: they are logged and the graphs captured. */
typedef struct pw_engine pw_engine;
void pw_graph_cache_load(pw_engine *e);
void pw_graph_cache_store(pw_engine *e);

#endif
