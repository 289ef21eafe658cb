/* The recording of a capture while it is still open, and copies of a range
 * of launches. Relocation (runtime/relocate.c) reads an open recording to
 * describe a callable's launches and rewinds it to check a relocated
 * recording against a real capture; the graph wrapper's verify_capture
 * compares two finished graphs. Launches are numbered from the start of
 * the capture; the argument bytes returned are the recording's copy, valid
 * until the next launch. Inside libpiecewise only. */
#ifndef PW_BACKEND_GRAPH_RECORD_H
#define PW_BACKEND_GRAPH_RECORD_H

#include "internal.h"

/* Launches recorded so far by the capture open on s; 0 when none is open. */
size_t pw_stream_capture_num_launches(const pw_stream *s);

/* Launch i of the open capture. PW_ERR_CAPTURE when no capture is open,
 * PW_ERR_INVALID_ARG when i is not below the number recorded. */
pw_status pw_stream_capture_launch_at(const pw_stream *s, size_t i, const pw_kernel **kernel,
                                      const void **args, size_t *argbytes);

/* Forgets launches [n, end) of the open capture, as if they had never been
 * made. Only a CPU recording can: a device capture already holds its
 * nodes (PW_ERR_UNSUPPORTED). */
pw_status pw_stream_capture_rewind(pw_stream *s, size_t n);

/* A copy of launches: kernels and argument bytes, packed. */
typedef struct pw_launch_copy {
    size_t n;
    const pw_kernel **kernels; /* [n] */
    size_t *offsets;           /* [n + 1] offsets into bytes */
    unsigned char *bytes;
} pw_launch_copy;

/* Copies launches [n0, n1) of the finished graph g, or, with g NULL, of the
 * capture open on s. On failure *out is empty. */
pw_status pw_launch_copy_take(const pw_graph *g, const pw_stream *s, size_t n0, size_t n1,
                              pw_launch_copy *out);
/* Frees the arrays and empties c. */
void pw_launch_copy_free(pw_launch_copy *c);

#endif
