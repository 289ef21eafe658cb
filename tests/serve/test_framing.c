/* The server's HTTP/1.1 framing (tools/serve_framing.c) on its own: heads
 * that are served, heads that are refused (and with which status and
 * code), and chunked bodies whole, split at every byte, and malformed. */
#include "serve_framing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            failures++;                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
        }                                                        \
    } while (0)

/* Parses text as a whole head; the copy is kept for h's pointers. */
static bool parse(const char *text, serve_head *h, char **keep) {
    size_t n = strlen(text);
    bool bad = false;
    size_t end = serve_head_end(text, n, &bad);
    free(*keep);
    *keep = malloc(n + 1);
    memcpy(*keep, text, n + 1);
    if (bad || end == 0) {
        memset(h, 0, sizeof *h);
        h->status = -1; /* serve_head_end refused it, or it is incomplete */
        return false;
    }
    return serve_head_parse(*keep, end, h);
}

static void served(const char *text, const char *path) {
    serve_head h;
    char *keep = NULL;
    bool ok = parse(text, &h, &keep);
    CHECK(ok && strcmp(h.path, path) == 0, "served %.60s: ok=%d path=%s error=%s", text, ok,
          ok ? h.path : "", h.error ? h.error : "");
    free(keep);
}

static void refused(const char *text, int status, const char *code) {
    serve_head h;
    char *keep = NULL;
    bool ok = parse(text, &h, &keep);
    CHECK(!ok && h.status == status && (!code || (h.code && strcmp(h.code, code) == 0)),
          "refused %.60s: ok=%d status=%d (want %d) code=%s", text, ok, h.status, status,
          h.code ? h.code : "");
    free(keep);
}

static void heads(void) {
    served("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", "/health");
    served("\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n", "/health");
    served("GET /health?x=1#f HTTP/1.1\r\nHost: x\r\n\r\n", "/health");
    served("GET /health HTTP/1.0\r\n\r\n", "/health"); /* Host optional in 1.0 */
    served("POST http://h:80/v1/completions HTTP/1.1\r\nHost: h\r\n\r\n", "/v1/completions");
    served("POST HTTPS://h/v1/completions?q HTTP/1.1\r\nHost: h\r\n\r\n", "/v1/completions");
    served("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n", "/");
    served("GET http://h?x HTTP/1.1\r\nHost: h\r\n\r\n", "/");
    served("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", "*");
    served("GET /\xff HTTP/1.1\r\nHost: x\r\nX-Any: caf\xc3\xa9 \t\r\n\r\n", "/\xff");

    serve_head h;
    char *keep = NULL;
    CHECK(parse("POST /a HTTP/1.1\r\nHost: x\r\ncontent-LENGTH:  0012 \r\nConnection: a, Close\r\n"
                "Expect: 100-Continue\r\nAuthorization: Bearer  k \r\n\r\n",
                &h, &keep),
          "fields");
    CHECK(h.has_length && h.content_length == 12 && !h.chunked && !h.keep_alive &&
              h.expect_continue && strcmp(h.authorization, "Bearer  k") == 0 &&
              strcmp(h.method, "POST") == 0 && h.minor == 1,
          "fields parsed: len=%llu keep=%d", (unsigned long long)h.content_length, h.keep_alive);
    CHECK(parse("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ChunKed\r\n\r\n", &h, &keep) &&
              h.chunked && !h.has_length && h.keep_alive,
          "chunked");
    CHECK(parse("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ,chunked, \r\n\r\n", &h, &keep) &&
              h.chunked,
          "empty list elements are ignored");
    CHECK(parse("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
                &h, &keep) &&
              h.content_length == UINT64_MAX,
          "a huge length is kept as too large");
    CHECK(parse("GET / HTTP/1.0\r\n\r\n", &h, &keep) && !h.keep_alive, "1.0 closes");
    free(keep);

    refused("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            400, "ambiguous_framing");
    refused("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            400, "ambiguous_framing");
    refused("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400,
            "ambiguous_framing");
    refused("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\n", 400, "ambiguous_framing");
    refused("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length : 3\r\n\r\n", 400, "ambiguous_framing");
    refused("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length\t: 3\r\n\r\n", 400, "ambiguous_framing");
    refused("POST /a HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400, "ambiguous_framing");
    const char *lengths[] = {"-1", "+3", "3 abc", "0x3", "", "3.0", "3,"};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n",
                 lengths[i]);
        refused(buf, 400, "ambiguous_framing");
    }
    const char *codings[] = {"identity", "gzip, chunked", "chunked, gzip", "chunked, chunked",
                             "chunked;q=1", "xchunked", ""};
    for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n",
                 codings[i]);
        refused(buf, 400, "ambiguous_framing");
    }
    refused("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
            400, "ambiguous_framing");
    refused("POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "ambiguous_framing");
    refused("GET / HTTP/1.1\r\n\r\n", 400, "missing_host");
    refused("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, "missing_host");
    refused("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "missing_host");
    refused("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "missing_host");
    refused("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400, "missing_host");
    refused("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "http_version_not_supported");
    refused("GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505, "http_version_not_supported");
    refused("GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400, "malformed_request");
    refused("GET / http/1.1\r\nHost: a\r\n\r\n", 400, "malformed_request");
    refused("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed_request");
    refused("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400, "malformed_request");
    refused("GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed_request");
    refused("GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed_request");
    refused("GET http:///a HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed_request");
    refused("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed_request");
    refused("VERYLONGMETHODNAME / HTTP/1.1\r\nHost: a\r\n\r\n", 501, "not_implemented");
    refused("GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n", 400, "malformed_request");
    refused("GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n", 400, "malformed_request");
    refused("GET / HTTP/1.1\r\nHost: a\r\nX\r\n\r\n", 400, "malformed_request");
    refused("GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", 417, "expectation_failed");
    refused("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n", 400,
            "malformed_request");
    /* serve_head_end refuses bare CR, bare LF and NUL, and waits for more */
    refused("GET / HTTP/1.1\nHost: a\n\n", -1, NULL);
    refused("GET / HTTP/1.1\rHost: a\r\n\r\n", -1, NULL);
    refused("GET / HTTP/1.1\r\nHost: a\r\n", -1, NULL);
    bool bad;
    CHECK(serve_head_end("GET /\0 HTTP/1.1\r\n\r\n", 20, &bad) == 0 && bad, "a NUL is bad");
    CHECK(serve_head_end("GET / HTTP/1.1\r\n\r", 17, &bad) == 0 && !bad, "incomplete, not bad");
    CHECK(serve_head_end("GET / HTTP/1.0\r\n\r\nrest", 22, &bad) == 18 && !bad, "end at 18");
    /* too many fields */
    char *big = malloc(SERVE_HEAD_MAX);
    size_t o = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 0; i < SERVE_HEAD_FIELDS_MAX; i++) o += (size_t)sprintf(big + o, "X%d: y\r\n", i);
    strcpy(big + o, "\r\n");
    refused(big, 431, "headers_too_large");
    free(big);
}

/* Decodes body fed in pieces of `step` bytes: the data, or NULL on error
 * (then *error set). *rest: bytes after the body. */
static char *dechunk(const char *body, size_t n, size_t step, const char **error, size_t *rest) {
    serve_chunked c = {0};
    char *out = malloc(n + 1);
    size_t o = 0, i = 0;
    *error = NULL;
    while (i < n) {
        size_t give = n - i < step ? n - i : step;
        size_t used;
        const char *d;
        size_t dl;
        serve_chunk_result r = serve_chunked_step(&c, body + i, give, &used, &d, &dl, error);
        if (r == SERVE_CHUNK_ERROR) {
            free(out);
            return NULL;
        }
        if (used > give) {
            *error = "used more than given";
            free(out);
            return NULL;
        }
        if (r == SERVE_CHUNK_DATA) {
            memcpy(out + o, d, dl);
            o += dl;
        }
        i += used;
        if (r == SERVE_CHUNK_DONE) {
            out[o] = '\0';
            *rest = n - i;
            return out;
        }
        if (r == SERVE_CHUNK_MORE && used != give) {
            *error = "MORE without using every byte";
            free(out);
            return NULL;
        }
    }
    *error = "incomplete";
    free(out);
    return NULL;
}

static void chunked(void) {
    const char *ok = "5;a=b;c=\"d e\"\r\nhello\r\n1 \t;x\r\n \r\nA\r\n0123456789\r\n"
                     "0\r\nX-T: 1\r\nY: 2\r\n\r\nNEXT";
    for (size_t step = 1; step <= strlen(ok); step++) {
        const char *err;
        size_t rest = 0;
        char *d = dechunk(ok, strlen(ok), step, &err, &rest);
        CHECK(d && strcmp(d, "hello 0123456789") == 0 && rest == 4,
              "chunked in steps of %zu: %s (%s) rest %zu", step, d ? d : "", err ? err : "", rest);
        free(d);
    }
    const char *bad[] = {
        "zz\r\nabc\r\n0\r\n\r\n",    /* size not hex */
        "\r\n",                       /* no size */
        "3\r\nabcX\r\n0\r\n\r\n",     /* no CRLF after data */
        "3\nabc\r\n0\r\n\r\n",        /* bare LF */
        "3\r\nabc\n0\r\n\r\n",        /* bare LF after data */
        "3 x\r\nabc\r\n0\r\n\r\n",    /* junk instead of an extension */
        "3;a\x01\r\nabc\r\n0\r\n\r\n", /* control character in an extension */
        "10000000000000000\r\n",      /* 17 hex digits */
        "0\r\nX: \x01\r\n\r\n",       /* control character in a trailer */
        "0\r\nX: 1\n\r\n",            /* bare LF in a trailer */
        "0\r\n\rX",                   /* bad end */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *err;
        size_t rest;
        char *d = dechunk(bad[i], strlen(bad[i]), 3, &err, &rest);
        CHECK(!d && err, "malformed chunked body %zu refused (%s)", i, err ? err : "");
        free(d);
    }
    /* a 60 KB extension and 5 KB of trailers are refused */
    size_t n = 70000;
    char *ext = malloc(n);
    memset(ext, 'e', n);
    memcpy(ext, "5;x=", 4);
    const char *err;
    size_t rest;
    char *d = dechunk(ext, n, 4096, &err, &rest);
    CHECK(!d && err && strstr(err, "too long"), "a 60 KB chunk extension: %s", err ? err : "");
    free(d);
    memset(ext, 'x', n);
    memcpy(ext, "0\r\nT: ", 6);
    d = dechunk(ext, n, 4096, &err, &rest);
    CHECK(!d && err && strstr(err, "too long"), "5 KB of trailers: %s", err ? err : "");
    free(d);
    free(ext);
}

int main(void) {
    heads();
    chunked();
    if (failures) {
        fprintf(stderr, "serve_framing: %d failure(s)\n", failures);
        return 1;
    }
    printf("serve_framing: all checks passed\n");
    return 0;
}
