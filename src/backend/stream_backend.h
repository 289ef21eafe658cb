/* How a non-CPU backend plugs into pw_stream / pw_graph (src/backend/cpu/stream.c).
 *
 * stream.c keeps the device-independent part of every stream: the capture
 * state, the thread's open capture, the capture pool and its graph
 * references, the violation that poisons a capture, and a host record of
 * every launch (kernel and argument bytes, so pw_graph_launch_at and the
 * runtime's verify_capture work for any device). A backend adds the device
 * work: its own stream handle, eager launches, device capture,
 * instantiation and replay. */
#ifndef PW_STREAM_BACKEND_H
#define PW_STREAM_BACKEND_H

#include "piecewise.h"

/* Which sides of a stream copy are host memory. */
typedef enum pw_copy_kind { PW_COPY_H2D, PW_COPY_D2H, PW_COPY_D2D } pw_copy_kind;

typedef struct pw_stream_backend {
    pw_status (*stream_new)(void **impl);
    void (*stream_free)(void *impl);
    /* Eager outside a capture; recorded into the device capture inside one. */
    pw_status (*launch)(void *impl, const pw_kernel *k, const void *args, size_t argbytes);
    pw_status (*synchronize)(void *impl);
    pw_status (*begin_capture)(void *impl);
    /* Ends the device capture. With `reuse` (a device graph from an earlier
     * end_capture on any stream of this backend) the backend may update it
     * in place and return it as *out; otherwise *out is a new device graph. */
    pw_status (*end_capture)(void *impl, void *reuse, void **out);
    void (*abort_capture)(void *impl);
    pw_status (*replay)(void *device_graph, void *impl);
    void (*graph_free)(void *device_graph);
    /* A copy or memset in stream order: issued eagerly outside a capture,
     * added to the device capture inside one. stream.c has checked the
     * arguments that do not depend on the device (NULL, size, overlap). */
    pw_status (*copy)(void *impl, pw_copy_kind kind, void *dst, const void *src, size_t bytes);
    pw_status (*memset)(void *impl, void *dst, int value, size_t bytes);
    /* The backend's capabilities (the device is available when asked). */
    void (*caps)(pw_device_caps *out);
    /* Whether the device is usable now; false with *reason saying why. */
    bool (*available)(const char **reason);
    /* Page-locked host memory, which captured copies may read and write. */
    pw_status (*host_alloc)(size_t bytes, void **out);
    void (*host_free)(void *ptr);
    /* The device whose kernel set runs this backend's launches (its own,
     * or the CPU's for a backend that runs the CPU kernels). */
    pw_device kernels;
} pw_stream_backend;

/* Installs the backend for `device` (PW_DEVICE_CPU cannot be replaced). */
void pw_stream_register_backend(pw_device device, const pw_stream_backend *backend);

/* The backend registry: registers every backend this build has, once,
 * by explicit calls (a backend's object is linked because the registry
 * names it, not because something else happened to reference it). Every
 * entry point that looks a device up runs it first. */
void pw_backends_register(void);

/* pw_device_kernel_device (piecewise/extend.h) and pw_device_host_alloc /
 * pw_device_host_free (piecewise.h) ask the registered backend. */

/* The backend handle of a stream and of a graph (NULL for CPU). */
void *pw_stream_backend_handle(const pw_stream *s);
void *pw_graph_device_handle(const pw_graph *g);

/* Ends the capture open on s and makes `g` (a graph captured earlier into
 * the same pool on a stream of the same device) do what was just captured,
 * updating the device graph in place where the backend can. On error g is
 * unchanged. */
pw_status pw_stream_end_capture_update(pw_stream *s, pw_graph *g);

#endif
