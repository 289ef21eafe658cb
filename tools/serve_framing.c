/* piecewise serve: strict HTTP/1.1 request framing (see serve_framing.h).
 * The rules are RFC 9112's; where the RFC lets a server either accept or
 * refuse, this code refuses whatever another parser could read differently. */
#include "serve_framing.h"

#include <string.h>

static bool is_tchar(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_ows(unsigned char c) { return c == ' ' || c == '\t'; }

/* A control character other than HTAB (field values and chunk extensions
 * may hold any other byte, obs-text included). */
static bool is_ctl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7F; }

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static bool ieq(const char *a, size_t n, const char *lit) {
    size_t m = strlen(lit);
    if (n != m) return false;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a[i]) != lit[i]) return false;
    return true;
}

static bool prefix_ieq(const char *s, const char *lit) {
    for (; *lit; s++, lit++)
        if (lower((unsigned char)*s) != *lit) return false;
    return true;
}

size_t serve_head_end(const char *buf, size_t len, bool *bad) {
    *bad = false;
    size_t i = 0;
    /* a server ignores empty lines before the request line (a client may
     * send a CRLF after a body) */
    while (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n') i += 2;
    size_t start = i;
    for (; i < len; i++) {
        char c = buf[i];
        if (c == '\0') break;
        if (c == '\n') {
            if (i == 0 || buf[i - 1] != '\r') break; /* a bare LF */
            if (i >= start + 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') return i + 1;
        } else if (i > 0 && buf[i - 1] == '\r') {
            break; /* a bare CR */
        }
    }
    if (i < len) *bad = true;
    return 0;
}

static bool fail(serve_head *h, int status, const char *code, const char *error) {
    h->status = status;
    h->code = code;
    h->error = error;
    return false;
}

/* The request target: origin form (/path?query), absolute form
 * (http://authority/path?query, which RFC 9112 says a server must accept)
 * and the asterisk form; the path is cut at the query. */
static bool parse_target(char *t, serve_head *h) {
    char *path = t;
    if (strcmp(t, "*") == 0) {
        h->path = t;
        return true;
    }
    if (prefix_ieq(t, "http://") || prefix_ieq(t, "https://")) {
        char *auth = strstr(t, "://") + 3;
        char *end = auth + strcspn(auth, "/?#");
        if (end == auth) return fail(h, 400, "malformed_request", "the request target has no host");
        if (*end != '/') {
            h->path = "/";
            return true;
        }
        path = end;
    } else if (t[0] != '/') {
        return fail(h, 400, "malformed_request", "malformed request target");
    }
    path[strcspn(path, "?#")] = '\0';
    h->path = path;
    return true;
}

static bool parse_request_line(char *line, serve_head *h) {
    size_t m = 0;
    while (is_tchar((unsigned char)line[m])) m++;
    if (m == 0 || line[m] != ' ') return fail(h, 400, "malformed_request", "malformed request line");
    if (m >= sizeof h->method) return fail(h, 501, "not_implemented", "unknown method");
    memcpy(h->method, line, m);
    h->method[m] = '\0';
    char *target = line + m + 1;
    char *sp = strchr(target, ' ');
    if (!sp || sp == target) return fail(h, 400, "malformed_request", "malformed request line");
    *sp = '\0';
    for (char *p = target; *p; p++)
        if (is_ctl((unsigned char)*p) || *p == '\t')
            return fail(h, 400, "malformed_request", "malformed request target");
    const char *v = sp + 1;
    if (strncmp(v, "HTTP/", 5) != 0 || !(v[5] >= '0' && v[5] <= '9') || v[6] != '.' ||
        !(v[7] >= '0' && v[7] <= '9') || v[8] != '\0')
        return fail(h, 400, "malformed_request", "malformed HTTP version in the request line");
    if (v[5] != '1' || v[7] > '1')
        return fail(h, 505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served");
    h->minor = v[7] - '0';
    return parse_target(target, h);
}

/* Content-Length: digits only (no sign, no list, no trailing text). Values
 * beyond 10^18 are kept as UINT64_MAX: too large for any body, not
 * malformed. */
static bool parse_length(const char *v, size_t n, serve_head *h) {
    if (n == 0) return fail(h, 400, "ambiguous_framing", "Content-Length is empty");
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return fail(h, 400, "ambiguous_framing", "Content-Length is not a decimal number");
        if (x <= 1000000000000000000ULL) x = x * 10 + (uint64_t)(v[i] - '0');
    }
    h->content_length = x > 1000000000000000000ULL ? UINT64_MAX : x;
    h->has_length = true;
    return true;
}

/* The codings of one Transfer-Encoding field: counts them and whether each
 * is "chunked" (the only coding served). */
static void scan_codings(const char *v, size_t n, int *count, bool *unknown) {
    size_t i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && v[j] != ',') j++;
        size_t a = i, b = j;
        while (a < b && is_ows((unsigned char)v[a])) a++;
        while (b > a && is_ows((unsigned char)v[b - 1])) b--;
        if (b > a) { /* empty list elements are allowed and ignored */
            (*count)++;
            if (!ieq(v + a, b - a, "chunked")) *unknown = true;
        }
        i = j + 1;
    }
}

static bool host_char(unsigned char c) {
    return is_tchar(c) || c == ':' || c == '[' || c == ']' || c == '(' || c == ')' || c == ',' ||
           c == ';' || c == '=';
}

bool serve_head_parse(char *buf, size_t len, serve_head *h) {
    memset(h, 0, sizeof *h);
    size_t i = 0;
    while (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n') i += 2;
    /* lines end in CRLF and the head in an empty line: serve_head_end
     * checked it, and the parser still stops at the buffer's end */
    char *line = buf + i, *end = buf + len;
    char *eol = NULL;
    for (char *p = line; p + 1 < end; p++)
        if (p[0] == '\r' && p[1] == '\n') {
            eol = p;
            break;
        }
    if (!eol) return fail(h, 400, "malformed_request", "the request head does not end");
    *eol = '\0';
    if (memchr(line, '\0', (size_t)(eol - line)) != NULL || strchr(line, '\r'))
        return fail(h, 400, "malformed_request", "malformed request line");
    if (!parse_request_line(line, h)) return false;

    int n_fields = 0, n_host = 0, n_codings = 0;
    bool te = false, te_unknown = false, conn_close = false;
    for (line = eol + 2;; line = eol + 2) {
        eol = NULL;
        for (char *p = line; p + 1 < end; p++)
            if (p[0] == '\r' && p[1] == '\n') {
                eol = p;
                break;
            }
        if (!eol) return fail(h, 400, "malformed_request", "the request head does not end");
        if (eol == line) break; /* the empty line */
        *eol = '\0';
        size_t ll = (size_t)(eol - line);
        if (memchr(line, '\0', ll) != NULL)
            return fail(h, 400, "malformed_request", "a header field holds a NUL byte");
        if (++n_fields > SERVE_HEAD_FIELDS_MAX)
            return fail(h, 431, "headers_too_large", "too many header fields");
        if (is_ows((unsigned char)line[0]))
            return fail(h, 400, "ambiguous_framing",
                        "a header field is folded onto a second line (obsolete line folding)");
        size_t k = 0;
        while (is_tchar((unsigned char)line[k])) k++;
        if (k < ll && is_ows((unsigned char)line[k]))
            return fail(h, 400, "ambiguous_framing",
                        "whitespace between a header field's name and its colon");
        if (k == 0 || line[k] != ':')
            return fail(h, 400, "malformed_request", "malformed header field");
        const char *name = line;
        size_t nl = k;
        char *v = line + k + 1;
        char *ve = eol;
        while (v < ve && is_ows((unsigned char)*v)) v++;
        while (ve > v && is_ows((unsigned char)ve[-1])) ve--;
        *ve = '\0';
        size_t vl = (size_t)(ve - v);
        for (size_t q = 0; q < vl; q++)
            if (is_ctl((unsigned char)v[q]))
                return fail(h, 400, "malformed_request",
                            "a header field's value holds a control character");
        if (ieq(name, nl, "content-length")) {
            if (h->has_length)
                return fail(h, 400, "ambiguous_framing", "several Content-Length fields");
            if (!parse_length(v, vl, h)) return false;
        } else if (ieq(name, nl, "transfer-encoding")) {
            te = true;
            scan_codings(v, vl, &n_codings, &te_unknown);
        } else if (ieq(name, nl, "host")) {
            if (++n_host > 1) return fail(h, 400, "missing_host", "several Host fields");
            for (size_t q = 0; q < vl; q++)
                if (!host_char((unsigned char)v[q]))
                    return fail(h, 400, "missing_host", "the Host field is not a host");
        } else if (ieq(name, nl, "connection")) {
            /* a list of tokens; only "close" matters */
            for (size_t a = 0; a <= vl;) {
                size_t b = a;
                while (b < vl && v[b] != ',') b++;
                size_t s = a, e = b;
                while (s < e && is_ows((unsigned char)v[s])) s++;
                while (e > s && is_ows((unsigned char)v[e - 1])) e--;
                if (ieq(v + s, e - s, "close")) conn_close = true;
                a = b + 1;
            }
        } else if (ieq(name, nl, "expect")) {
            if (!ieq(v, vl, "100-continue"))
                return fail(h, 417, "expectation_failed", "the only expectation served is 100-continue");
            h->expect_continue = true;
        } else if (ieq(name, nl, "authorization")) {
            if (h->authorization)
                return fail(h, 400, "malformed_request", "several Authorization fields");
            h->authorization = v;
        }
    }
    if (te) {
        if (h->has_length)
            return fail(h, 400, "ambiguous_framing",
                        "both Content-Length and Transfer-Encoding: the body's length is ambiguous");
        if (h->minor == 0)
            return fail(h, 400, "ambiguous_framing", "Transfer-Encoding in an HTTP/1.0 request");
        if (te_unknown || n_codings != 1)
            return fail(h, 400, "ambiguous_framing",
                        "unsupported Transfer-Encoding: the only coding served is chunked, alone");
        h->chunked = true;
    }
    if (h->minor == 1 && n_host == 0)
        return fail(h, 400, "missing_host", "an HTTP/1.1 request without a Host field");
    h->keep_alive = h->minor == 1 && !conn_close;
    h->status = 0;
    return true;
}

enum {
    C_SIZE,
    C_EXT_BWS,
    C_EXT,
    C_SIZE_LF,
    C_DATA,
    C_DATA_CR,
    C_DATA_LF,
    C_TRAILER,
    C_TRAILER_LINE,
    C_TRAILER_LF,
    C_END_LF,
    C_DONE,
};

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

serve_chunk_result serve_chunked_step(serve_chunked *c, const char *in, size_t n, size_t *used,
                                      const char **data, size_t *data_len, const char **error) {
    *data = NULL;
    *data_len = 0;
    *error = NULL;
    size_t i = 0;
#define CHUNK_FAIL(msg)  \
    do {                 \
        *used = i;       \
        *error = (msg);  \
        return SERVE_CHUNK_ERROR; \
    } while (0)
    while (i < n) {
        unsigned char b = (unsigned char)in[i];
        switch (c->state) {
        case C_SIZE: {
            int x = hexval(b);
            if (x >= 0) {
                if (++c->digits > 15) CHUNK_FAIL("a chunk size is too large");
                c->remaining = c->remaining * 16 + (uint64_t)x;
                c->line++;
                i++;
                continue;
            }
            if (c->digits == 0) CHUNK_FAIL("a chunk does not start with its size in hex");
            c->state = C_EXT_BWS;
            continue; /* the same byte, in the next state */
        }
        case C_EXT_BWS:
        case C_EXT:
            if (b == '\r') {
                c->state = C_SIZE_LF;
            } else if (c->state == C_EXT_BWS && !is_ows(b) && b != ';') {
                CHUNK_FAIL("malformed chunk size line");
            } else if (is_ctl(b)) {
                CHUNK_FAIL("a control character in a chunk extension");
            } else if (b == ';') {
                c->state = C_EXT;
            }
            if (++c->line > SERVE_CHUNK_LINE_MAX) CHUNK_FAIL("a chunk extension is too long");
            i++;
            continue;
        case C_SIZE_LF:
            if (b != '\n') CHUNK_FAIL("a chunk size line does not end in CRLF");
            i++;
            c->line = 0;
            c->digits = 0;
            c->state = c->remaining ? C_DATA : C_TRAILER;
            continue;
        case C_DATA: {
            size_t take = n - i;
            if ((uint64_t)take > c->remaining) take = (size_t)c->remaining;
            c->remaining -= take;
            if (c->remaining == 0) c->state = C_DATA_CR;
            *data = in + i;
            *data_len = take;
            *used = i + take;
            return SERVE_CHUNK_DATA;
        }
        case C_DATA_CR:
            if (b != '\r') CHUNK_FAIL("chunk data is not followed by CRLF");
            c->state = C_DATA_LF;
            i++;
            continue;
        case C_DATA_LF:
            if (b != '\n') CHUNK_FAIL("chunk data is not followed by CRLF");
            c->state = C_SIZE;
            i++;
            continue;
        case C_TRAILER:
        case C_TRAILER_LINE:
            if (b == '\r') {
                c->state = c->state == C_TRAILER ? C_END_LF : C_TRAILER_LF;
            } else if (is_ctl(b)) {
                CHUNK_FAIL("a control character in a trailer field");
            } else {
                c->state = C_TRAILER_LINE;
            }
            if (++c->line > SERVE_TRAILER_MAX) CHUNK_FAIL("the trailer fields are too long");
            i++;
            continue;
        case C_TRAILER_LF:
            if (b != '\n') CHUNK_FAIL("a trailer field does not end in CRLF");
            c->state = C_TRAILER;
            i++;
            continue;
        case C_END_LF:
            if (b != '\n') CHUNK_FAIL("a chunked body does not end in CRLF");
            c->state = C_DONE;
            *used = i + 1;
            return SERVE_CHUNK_DONE;
        default:
            *used = i;
            return SERVE_CHUNK_DONE;
        }
    }
#undef CHUNK_FAIL
    *used = i;
    if (c->state == C_DONE) return SERVE_CHUNK_DONE;
    /* a zero-length data step when the input ends inside a chunk */
    return SERVE_CHUNK_MORE;
}
