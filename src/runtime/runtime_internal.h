/* Shared between the runtime's own modules. Not installed. */
#ifndef PW_RUNTIME_INTERNAL_H
#define PW_RUNTIME_INTERNAL_H

#include "internal.h"

/* The current forward context of this thread, or NULL: the wrapper's hot
 * path reads it without touching the error channel. */
const pw_forward_context *pw_forward_context_current(void);

/* Clears every live wrapper that captures into `pool` (the dry run's
 * graphs, before the pool leaves shadow mode). The first failure is
 * returned; the others are cleared regardless. */
pw_status pw_graph_wrappers_clear_pool(const pw_pool *pool);

/* Captures the wrappers made on the calling thread since it started. */
typedef struct pw_capture_tally {
    uint64_t captures_attempted;
    uint64_t graphs_captured;
} pw_capture_tally;
void pw_capture_tally_get(pw_capture_tally *out);

#endif
