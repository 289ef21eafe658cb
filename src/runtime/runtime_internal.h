/* Shared between the runtime's own modules. Not installed. */
#ifndef PW_RUNTIME_INTERNAL_H
#define PW_RUNTIME_INTERNAL_H

#include "internal.h"

/* The current forward context of this thread, or NULL: the wrapper's hot
 * path reads it without touching the error channel. */
const pw_forward_context *pw_forward_context_current(void);

#endif
