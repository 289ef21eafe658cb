/* piecewise serve: HTTP/1.1 message framing (RFC 9112), strictly. Pure
 * functions over bytes, no sockets, so they are unit-tested and fuzzed on
 * their own:
 *
 *   serve_head_end     where a request head (request line + fields) ends
 *   serve_head_parse   the request line and the fields the server uses,
 *                      refusing every ambiguous framing (two lengths,
 *                      Content-Length with Transfer-Encoding, a space before
 *                      a colon, codings other than chunked, no Host, ...)
 *   serve_chunked_*    an incremental decoder for a chunked body
 *
 * An ambiguous head is refused rather than guessed at: a server and a proxy
 * in front of it that guess differently disagree on where a request ends,
 * and the bytes in between run as a second, smuggled request. */
#ifndef PW_SERVE_FRAMING_H
#define PW_SERVE_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a request head (request line, fields, the blank line); a longer
 * one gets 431. */
#define SERVE_HEAD_MAX (16 * 1024)
/* Field lines in one head; more get 431. */
#define SERVE_HEAD_FIELDS_MAX 100
/* Bytes of one chunk-size line (size, extensions) and of the trailer
 * section of a chunked body; longer ones get 400. */
#define SERVE_CHUNK_LINE_MAX 4096
#define SERVE_TRAILER_MAX 4096

typedef struct serve_head {
    char method[16];
    /* The request target's path, without the query, NUL-terminated, inside
     * the parsed buffer. The absolute form (http://host/path) is reduced to
     * its path. */
    const char *path;
    int minor; /* HTTP/1.<minor>: 0 or 1 */
    bool has_length;
    uint64_t content_length;
    bool chunked;
    bool keep_alive;      /* HTTP/1.1 without "Connection: close" */
    bool expect_continue; /* "Expect: 100-continue" */
    const char *authorization; /* the field's value inside the buffer, or NULL */
    /* when the head is refused: the status to answer with (400, 417, 431,
     * 501, 505), a sentence saying why, and an error code */
    int status;
    const char *error;
    const char *code;
} serve_head;

/* Length of the head at the start of buf[0..len), the blank line included:
 * 0 while it is incomplete. *bad is set (and the length is meaningless)
 * when the bytes can no longer become a valid head: a bare LF, a NUL. */
size_t serve_head_end(const char *buf, size_t len, bool *bad);

/* Parses the head buf[0..len) (as measured by serve_head_end) in place: it
 * writes NULs into buf, and h points into it. False with h->status,
 * h->error and h->code set when the request must be refused; the
 * connection is then closed after the answer, since where its next request
 * starts is unknown. */
bool serve_head_parse(char *buf, size_t len, serve_head *h);

/* An incremental decoder of a chunked body (RFC 9112 section 7.1). */
typedef struct serve_chunked {
    int state;
    uint64_t remaining; /* data bytes left in the current chunk */
    size_t line;        /* bytes of the current size line or of the trailers */
    int digits;
} serve_chunked;

typedef enum serve_chunk_result {
    SERVE_CHUNK_MORE,  /* every byte given was used; give more */
    SERVE_CHUNK_DATA,  /* body bytes at *data, *data_len of them (inside the input) */
    SERVE_CHUNK_DONE,  /* the body ended (trailers read); *used bytes were the body's */
    SERVE_CHUNK_ERROR, /* malformed: *error says how */
} serve_chunk_result;

/* Consumes bytes of in[0..n): *used says how many. On SERVE_CHUNK_DATA the
 * data bytes are inside the bytes used. Call again with the rest. */
serve_chunk_result serve_chunked_step(serve_chunked *c, const char *in, size_t n, size_t *used,
                                      const char **data, size_t *data_len, const char **error);

#endif
