#ifndef PW_POOL_INTERNAL_H
#define PW_POOL_INTERNAL_H

#include "internal.h"

/* How a backend hands out raw device memory to pools. */
typedef struct pw_device_mem_ops {
    void *(*alloc)(size_t bytes);
    void (*free)(void *ptr);
} pw_device_mem_ops;

void pw_mem_register_device(pw_device device, pw_device_mem_ops ops);

/* Used by streams: capture state and graph references. */
void pw_pool_set_capturing(pw_pool *pool, bool on);
void pw_pool_graph_ref(pw_pool *pool);
void pw_pool_graph_unref(pw_pool *pool);
/* True if ptr lies inside one of the pool's segments. */
bool pw_pool_owns(const pw_pool *pool, const void *ptr);

/* Defined by the stream module: refuses (and poisons the open capture)
 * when this thread is capturing into a different pool of the same device. */
pw_status pw_capture_check_alloc(pw_pool *pool);

#endif
