/* The server's request framing (tools/serve_framing.c) on arbitrary bytes:
 * a request head, then the rest read as a chunked body. The first input
 * byte picks how the body is cut into pieces. Invariants: a head is either
 * served (a path, a known method) or refused with a 4xx/5xx status and a
 * message; the chunked decoder never claims more bytes than it was given,
 * its data lies inside its input, and decoding in pieces gives the same
 * bytes and the same verdict as decoding in one go. */
#include "fuzz_common.h"
#include "serve_framing.h"

typedef struct decoded {
    serve_chunk_result end; /* DONE, ERROR, or MORE when the input ran out */
    size_t used;            /* bytes the body took */
    uint8_t *data;
    size_t len;
} decoded;

static decoded dechunk(const char *in, size_t n, size_t step) {
    decoded d = {SERVE_CHUNK_MORE, 0, malloc(n + 1), 0};
    serve_chunked c = {0};
    while (d.used < n) {
        size_t give = n - d.used < step ? n - d.used : step;
        size_t used;
        const char *data, *error;
        size_t dl;
        serve_chunk_result r = serve_chunked_step(&c, in + d.used, give, &used, &data, &dl, &error);
        FUZZ_CHECK(used <= give, "used %zu of %zu", used, give);
        d.used += used;
        if (r == SERVE_CHUNK_ERROR) {
            FUZZ_CHECK(error != NULL, "an error without a message");
            d.end = r;
            return d;
        }
        if (r == SERVE_CHUNK_DATA) {
            FUZZ_CHECK(data >= in && data + dl <= in + d.used && dl > 0, "data outside the input");
            memcpy(d.data + d.len, data, dl);
            d.len += dl;
        }
        if (r == SERVE_CHUNK_DONE) {
            d.end = r;
            return d;
        }
        if (r == SERVE_CHUNK_MORE) FUZZ_CHECK(used == give, "MORE with bytes left");
    }
    return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (size > FUZZ_MAX_TEXT) size = FUZZ_MAX_TEXT;
    size_t step = (size_t)data[0] % 17 + 1;
    const char *in = (const char *)data + 1;
    size_t n = size - 1;

    bool bad;
    size_t end = serve_head_end(in, n, &bad);
    FUZZ_CHECK(end <= n, "head end %zu beyond %zu", end, n);
    if (end && end <= SERVE_HEAD_MAX) {
        char *head = malloc(end);
        memcpy(head, in, end);
        serve_head h;
        if (serve_head_parse(head, end, &h)) {
            FUZZ_CHECK(h.path && h.path[0] && h.method[0] && h.status == 0, "served without a path");
            FUZZ_CHECK(h.path[0] == '/' || h.path[0] == '*', "path %s", h.path);
            FUZZ_CHECK(!(h.chunked && h.has_length), "both chunked and a length");
            FUZZ_CHECK(h.minor == 0 || h.minor == 1, "minor %d", h.minor);
        } else {
            FUZZ_CHECK(h.status >= 400 && h.status < 600 && h.error && h.code, "refused without why");
        }
        free(head);
    }

    const char *body = in + end;
    size_t bn = n - end;
    decoded whole = dechunk(body, bn, bn ? bn : 1);
    decoded parts = dechunk(body, bn, step);
    FUZZ_CHECK(whole.end == parts.end && whole.len == parts.len &&
                   memcmp(whole.data, parts.data, whole.len) == 0,
               "pieces of %zu differ from the whole: %d/%d, %zu/%zu bytes", step, whole.end,
               parts.end, whole.len, parts.len);
    if (whole.end == SERVE_CHUNK_DONE) FUZZ_CHECK(whole.used == parts.used, "ends differ");
    free(whole.data);
    free(parts.data);
    return 0;
}
