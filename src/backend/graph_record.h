/* The recording of a capture while it is still open: what distinct-piece
 * capture (src/model/engine_distinct.c) reads to describe a piece's
 * launches, and rewinds to check a patched piece against a real capture.
 * Launches are numbered from the start of the capture; the argument bytes
 * returned are the recording's copy, valid until the next launch. */
#ifndef PW_BACKEND_GRAPH_RECORD_H
#define PW_BACKEND_GRAPH_RECORD_H

#include "internal.h"

/* Launches recorded so far by the capture open on s; 0 when none is open. */
PW_INTERNAL_API size_t pw_stream_capture_num_launches(const pw_stream *s);

/* Launch i of the open capture. PW_ERR_CAPTURE when no capture is open,
 * PW_ERR_INVALID_ARG when i is not below the number recorded. */
PW_INTERNAL_API pw_status pw_stream_capture_launch_at(const pw_stream *s, size_t i,
                                                      const pw_kernel **kernel,
                                                      const void **args, size_t *argbytes);

/* Forgets launches [n, end) of the open capture, as if they had never been
 * made. Only a CPU recording can: a device capture already holds its
 * nodes (PW_ERR_UNSUPPORTED). */
PW_INTERNAL_API pw_status pw_stream_capture_rewind(pw_stream *s, size_t n);

#endif
