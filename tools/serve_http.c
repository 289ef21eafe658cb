/* piecewise serve: the HTTP/1.1 server. One acceptor thread and one thread
 * per connection, on plain sockets: the server reads every request head
 * itself and refuses ambiguous framing (serve_framing.c) instead of
 * guessing where a request ends. Then it reads the body (bounded in size
 * and time), checks the API key, routes the OpenAI endpoints, and writes
 * the answer, streaming server-sent events in chunks. A client that goes
 * away while its job runs cancels the job.
 *
 * Hostile clients: a request head must arrive within --header-timeout of
 * its first byte and its body within --body-timeout of the head, however
 * slowly the bytes trickle in. Connections that have not yet sent a whole
 * request (idle kept-alive ones included) are capped per client address;
 * at the cap, or at the server's connection limit, the oldest such
 * connection is closed to admit the new one, so a flood of slow clients
 * cannot keep a well-behaved one out. A refused request is answered, then
 * the connection is closed lingeringly (the rest of what the client sends
 * is read and dropped, within bounds) so that the client reads the answer
 * rather than a reset. */
#ifdef PW_HAVE_SERVE
#include "serve.h"
#include "serve_framing.h"

#include "internal.h" /* pw_error */

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Bytes a connection buffers beyond a request head (a pipelined request,
 * the start of a body). */
#define CONN_BUF (SERVE_HEAD_MAX + 16 * 1024)
/* A lingering close reads and drops at most this much, for at most
 * LINGER_S seconds, at most LINGER_IDLE_S of them without a byte. */
#define LINGER_BYTES ((size_t)64 << 20)
#define LINGER_S 5.0
#define LINGER_IDLE_S 2.0
/* A connection is evicted for room only after this long without a whole
 * request: a client that has just connected has time to send one. */
#define EVICT_GRACE_S 1.0

typedef struct conn conn;

struct serve_http {
    int listen_fd;
    int wake[2]; /* a pipe: stops the acceptor */
    pthread_t acceptor;
    bool acceptor_running;
    const pw_model *model;
    serve_http_options opt;
    atomic_int in_flight;
    atomic_bool draining; /* shutting down: new requests on open connections get 503 */
    atomic_llong next_id;
    pthread_mutex_t mu; /* guards the connection list */
    pthread_cond_t gone; /* signalled when a connection's thread ends */
    conn *conns;
    int n_conns;
};

struct conn {
    serve_http *h;
    int fd;
    int family;
    unsigned char addr[16];
    /* guarded by h->mu */
    bool busy;    /* a whole request read and being answered: never evicted */
    bool dropped; /* shut down by the acceptor (evicted) or by stop */
    double since; /* when it last started waiting for a request */
    conn *prev, *next;
    /* the connection's thread only */
    char buf[CONN_BUF];
    size_t have;
    char head[SERVE_HEAD_MAX]; /* the request head being answered, parsed in place */
};

/* One request on a connection. */
typedef struct req {
    serve_http *h;
    conn *c;
    serve_head head;
    bool close;     /* answer with "Connection: close", then close */
    bool head_only; /* HEAD: the answer has no body */
    bool counted;   /* its outcome is in the metrics */
    char *body;
    size_t len;
    double body_deadline;
} req;

/* ---- socket I/O ------------------------------------------------------------------------------ */

/* Milliseconds to a deadline, for poll (at least 0, at most an hour). */
static int ms_until(double deadline) {
    double ms = (deadline - pw_monotonic_seconds()) * 1e3;
    if (ms <= 0) return 0;
    return ms > 3.6e6 ? 3600000 : (int)ms + 1;
}

/* Waits for bytes until deadline: >0 bytes read, 0 the peer closed or the
 * socket failed, -1 the deadline passed. */
static ssize_t recv_by(int fd, char *dst, size_t cap, double deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, ms_until(deadline));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            if (pw_monotonic_seconds() >= deadline) return -1;
            continue;
        }
        if (r < 0) return 0;
        ssize_t n = recv(fd, dst, cap, MSG_DONTWAIT);
        if (n > 0) return n;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        return 0;
    }
}

/* Writes all of p[0..n); a client that reads nothing for --timeout seconds
 * is given up on. */
static bool send_all(serve_http *h, int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd q = {.fd = fd, .events = POLLOUT};
            int r = poll(&q, 1, (int)h->opt.timeout_s * 1000);
            if (r > 0 && !(q.revents & (POLLERR | POLLHUP | POLLNVAL))) continue;
            if (r < 0 && errno == EINTR) continue;
        }
        return false;
    }
    return true;
}

/* Whether the peer closed its end (checked while its job waits). */
static bool client_gone(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    char b;
    return (p.revents & POLLIN) && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Closes lingeringly: no more writing, then what the client still sends
 * is read and dropped (within bounds) before the socket closes, so that a
 * client still sending a body it was refused reads the answer instead of a
 * connection reset. */
static void linger(int fd) {
    shutdown(fd, SHUT_WR);
    double end = pw_monotonic_seconds() + LINGER_S;
    size_t total = 0;
    char scratch[16384];
    while (total < LINGER_BYTES) {
        double idle = pw_monotonic_seconds() + LINGER_IDLE_S;
        ssize_t n = recv_by(fd, scratch, sizeof scratch, idle < end ? idle : end);
        if (n <= 0) break;
        total += (size_t)n;
    }
}

/* ---- responses ------------------------------------------------------------------------------- */

static const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* Counts the request's outcome once: answered with a status, or cancelled
 * (the client went away before its whole answer was written). */
static void count(req *r, int status) {
    if (r->counted) return;
    r->counted = true;
    if (status) serve_metrics_request(status);
    else serve_metrics_request_cancelled();
}

/* Writes a whole answer with a Content-Length. extra: more header lines,
 * each ending in CRLF (may be NULL). Takes body (malloc'ed). */
static void respond(req *r, int status, const char *type, char *body, const char *extra) {
    size_t n = body ? strlen(body) : 0;
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n",
                      status, reason(status), type, n, extra ? extra : "",
                      r->close ? "Connection: close\r\n" : "");
    bool ok = hl > 0 && (size_t)hl < sizeof head;
    if (ok) {
        char *all = malloc((size_t)hl + n);
        if (all) {
            memcpy(all, head, (size_t)hl);
            if (n) memcpy(all + hl, body, n);
            ok = send_all(r->h, r->c->fd, all, (size_t)hl + (r->head_only ? 0 : n));
            free(all);
        } else {
            ok = send_all(r->h, r->c->fd, head, (size_t)hl) &&
                 (r->head_only || send_all(r->h, r->c->fd, body, n));
        }
    }
    free(body);
    if (!ok) r->close = true;
    count(r, ok ? status : 0);
}

static void send_json(req *r, int status, cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    respond(r, status, "application/json", s, NULL);
}

static void send_error(req *r, const serve_error *err) {
    char *s = serve_error_json(err);
    respond(r, err->status, "application/json", s, NULL);
}

static void send_simple_error(req *r, int status, const char *type, const char *code,
                              const char *msg) {
    serve_error err;
    serve_error_set(&err, status, type, NULL, code, "%s", msg);
    send_error(r, &err);
}

/* False when memory ran out (the key then holds "" or is missing). */
static bool add_text(cJSON *obj, const char *key, const char *s, size_t n) {
    char *t = serve_utf8_repair(s, n);
    bool ok = cJSON_AddStringToObject(obj, key, t ? t : "") != NULL && t != NULL;
    free(t);
    return ok;
}

/* Usage of a request's n choices: the prompt once, every choice's tokens. */
static cJSON *usage_json(serve_job *const *jobs, int n) {
    int64_t completion = 0;
    for (int i = 0; i < n; i++) completion += jobs[i]->n_completion;
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)jobs[0]->p.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)completion);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(jobs[0]->p.n_prompt + completion));
    return u;
}

static cJSON *response_head(serve_http *h, const char *object, const char *id) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)time(NULL));
    cJSON_AddStringToObject(root, "model", h->opt.model_name);
    return root;
}

/* ---- streaming ------------------------------------------------------------------------------- */

typedef struct stream_ctx {
    req *r;
    serve_job *job; /* the first choice */
    char id[48];
    bool role_sent[SERVE_MAX_CHOICES];
    char *pending; /* SSE bytes of the next chunk */
    size_t pend_len, pend_cap;
    /* Memory ran out building an event: the stream would miss bytes, so it
     * is not sent; the next flush fails and the connection is closed. */
    bool oom;
    double last_send;
} stream_ctx;

static void push_raw(stream_ctx *s, const char *text, size_t n) {
    if (s->oom) return;
    char *t = n > SIZE_MAX - s->pend_len
                  ? NULL
                  : pw_host_grow(s->pending, 1, &s->pend_cap, s->pend_len + n, SIZE_MAX);
    if (!t) {
        s->oom = true;
        return;
    }
    s->pending = t;
    memcpy(t + s->pend_len, text, n);
    s->pend_len += n;
}

static void push_event(stream_ctx *s, cJSON *root) {
    char *json = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) {
        s->oom = true;
        return;
    }
    push_raw(s, "data: ", 6);
    push_raw(s, json, strlen(json));
    push_raw(s, "\n\n", 2);
    free(json);
}

/* One chunk of choice `index`: text delta (may be empty), the logprobs of
 * its tokens (lp[0..n_lp); NULL: "logprobs": null) and finish reason (may
 * be NULL). */
static void push_chunk(stream_ctx *s, int index, const char *text, size_t n, bool with_text,
                       const serve_logprob *lp, int64_t n_lp, const char *finish) {
    bool chat = s->job->p.kind == SERVE_CHAT;
    cJSON *root = response_head(s->r->h, chat ? "chat.completion.chunk" : "text_completion", s->id);
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", index);
    if (chat) {
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        if (!s->role_sent[index]) {
            cJSON_AddStringToObject(delta, "role", "assistant");
            s->role_sent[index] = true;
        }
        if (with_text && !add_text(delta, "content", text, n)) s->oom = true;
    } else if (!add_text(ch, "text", text, n)) {
        s->oom = true;
    }
    cJSON *lps = lp ? serve_logprobs_json(s->r->h->model, s->job->p.kind, lp, n_lp) : NULL;
    if (lp && !lps) s->oom = true;
    if (lps) cJSON_AddItemToObject(ch, "logprobs", lps);
    else cJSON_AddNullToObject(ch, "logprobs");
    cJSON *reason = finish ? cJSON_AddStringToObject(ch, "finish_reason", finish)
                           : cJSON_AddNullToObject(ch, "finish_reason");
    /* cJSON's adds fail quietly: a chunk with a part missing is not sent */
    if (!choices || !reason) s->oom = true;
    push_event(s, root);
}

/* Sends bytes of the event stream: one chunk of the chunked body (HTTP/1.1)
 * or the bytes themselves (HTTP/1.0, where the body ends at the close). */
static bool stream_send(stream_ctx *s, const char *p, size_t n) {
    req *r = s->r;
    s->last_send = pw_monotonic_seconds();
    if (!n) return true;
    if (r->head.minor == 0) return send_all(r->h, r->c->fd, p, n);
    /* one write per chunk: with TCP_NODELAY each write is a packet */
    char *b = malloc(n + 24);
    if (!b) return false;
    int k = snprintf(b, 24, "%zx\r\n", n);
    memcpy(b + k, p, n);
    memcpy(b + k + n, "\r\n", 2);
    bool ok = send_all(r->h, r->c->fd, b, (size_t)k + n + 2);
    free(b);
    return ok;
}

static bool stream_flush(stream_ctx *s) {
    if (s->oom) {
        /* never a stream with bytes missing: the client sees the
         * connection close before the end of the stream */
        fprintf(stderr, "piecewise serve: out of memory building the event stream of %s; "
                        "closing the connection\n",
                s->id);
        s->pend_len = 0;
        return false;
    }
    bool ok = stream_send(s, s->pending, s->pend_len);
    s->pend_len = 0;
    return ok;
}

/* True when some choice has text not yet sent, or has ended and its end
 * is not yet sent. Lock held. */
static bool stream_news(serve_job *const *jobs, int n, const size_t *sent, const bool *ended) {
    for (int i = 0; i < n; i++)
        if (!ended[i] && (jobs[i]->state == JOB_DONE || jobs[i]->safe_len > sent[i])) return true;
    return false;
}

/* A copy of job j's logprobs from `from` on (malloc'ed; NULL when none or
 * out of memory, which sends them with a later chunk): those of the tokens
 * whose text is all within upto bytes, or, when the job is done (its text
 * final), all of them; *to is where they end. Lock held. */
static serve_logprob *take_logprobs(const serve_job *j, int64_t from, size_t upto, bool done,
                                    int64_t *to) {
    int64_t end = from;
    while (end < j->n_lps && (done || j->lps[end].off + j->lps[end].len <= upto)) end++;
    *to = from;
    if (end == from) return NULL;
    serve_logprob *lp = malloc((size_t)(end - from) * sizeof *lp);
    if (!lp) return NULL;
    memcpy(lp, j->lps + from, (size_t)(end - from) * sizeof *lp);
    *to = end;
    return lp;
}

/* Streams the answers of a request's n choices, each chunk naming its
 * choice. Counts the outcome: its status once the stream ended in full,
 * cancelled when the client left before. */
static void stream_job(req *r, serve_job *const *jobs, int n, const char *id) {
    serve_http *h = r->h;
    stream_ctx s = {.r = r, .job = jobs[0], .last_send = pw_monotonic_seconds()};
    memcpy(s.id, id, sizeof s.id);
    if (r->head.minor == 0) r->close = true;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Cache-Control: no-cache\r\n%s%s\r\n",
                      r->head.minor ? "Transfer-Encoding: chunked\r\n" : "",
                      r->close ? "Connection: close\r\n" : "");
    bool ok = send_all(h, r->c->fd, head, (size_t)hl);
    size_t sent[SERVE_MAX_CHOICES] = {0};
    int64_t lp_sent[SERVE_MAX_CHOICES] = {0}; /* logprobs sent */
    bool ended[SERVE_MAX_CHOICES] = {0};
    int n_ended = 0, status = 0;
    bool chat = jobs[0]->p.kind == SERVE_CHAT;
    while (ok) {
        serve_lock();
        while (!stream_news(jobs, n, sent, ended)) {
            serve_job_wait_any(jobs[0], 0.2);
            if (!stream_news(jobs, n, sent, ended)) {
                serve_unlock();
                if (client_gone(r->c->fd)) {
                    ok = false;
                    break;
                }
                /* an SSE comment while the job waits (queued, or a long
                 * prefill): the connection is not idle */
                if (pw_monotonic_seconds() - s.last_send >= 0.5 * h->opt.timeout_s &&
                    !stream_send(&s, ": keep-alive\n\n", 14)) {
                    ok = false;
                    break;
                }
                serve_lock();
            }
        }
        if (!ok) break;
        size_t upto[SERVE_MAX_CHOICES];
        bool done[SERVE_MAX_CHOICES];
        serve_error err[SERVE_MAX_CHOICES];
        const char *finish[SERVE_MAX_CHOICES];
        char *text[SERVE_MAX_CHOICES];
        serve_logprob *lps[SERVE_MAX_CHOICES];
        int64_t lp_to[SERVE_MAX_CHOICES];
        for (int i = 0; i < n; i++) {
            serve_job *j = jobs[i];
            upto[i] = j->safe_len;
            done[i] = j->state == JOB_DONE && !ended[i];
            err[i] = j->error;
            finish[i] = j->finish_reason;
            text[i] = upto[i] > sent[i] ? malloc(upto[i] - sent[i]) : NULL;
            if (text[i]) memcpy(text[i], j->text + sent[i], upto[i] - sent[i]);
            lps[i] = take_logprobs(j, lp_sent[i], upto[i], done[i], &lp_to[i]);
        }
        serve_unlock();
        bool failed = false, cancelled = false;
        for (int i = 0; i < n; i++) {
            if (upto[i] > sent[i] || lps[i]) {
                if (upto[i] > sent[i] && !text[i]) s.oom = true; /* the text is never skipped */
                if (!s.role_sent[i] && chat) push_chunk(&s, i, "", 0, true, NULL, 0, NULL);
                static const serve_logprob none;
                if (text[i] || upto[i] == sent[i])
                    push_chunk(&s, i, text[i] ? text[i] : "", text[i] ? upto[i] - sent[i] : 0,
                               true, jobs[i]->p.sp.logprobs ? (lps[i] ? lps[i] : &none) : NULL,
                               lp_to[i] - lp_sent[i], NULL);
                sent[i] = upto[i];
                lp_sent[i] = lp_to[i];
            }
            free(lps[i]);
            free(text[i]);
            if (!done[i] || failed || cancelled) continue;
            if (err[i].status) {
                /* one choice failed: the stream ends with its error */
                char *e = serve_error_json(&err[i]);
                if (!e) s.oom = true;
                push_raw(&s, "data: ", 6);
                push_raw(&s, e ? e : "{}", e ? strlen(e) : 2);
                push_raw(&s, "\n\n", 2);
                free(e);
                status = err[i].status;
                failed = true;
            } else if (finish[i]) {
                push_chunk(&s, i, "", 0, false, NULL, 0, finish[i]);
                ended[i] = true;
                n_ended++;
            } else {
                cancelled = true;
            }
        }
        if (cancelled) {
            ok = false;
            break;
        }
        if (failed || n_ended == n) {
            if (!failed) {
                if (jobs[0]->p.include_usage) {
                    cJSON *root = response_head(
                        h, chat ? "chat.completion.chunk" : "text_completion", s.id);
                    cJSON_AddArrayToObject(root, "choices");
                    serve_lock();
                    cJSON_AddItemToObject(root, "usage", usage_json(jobs, n));
                    serve_unlock();
                    push_event(&s, root);
                }
                status = 200;
            }
            push_raw(&s, "data: [DONE]\n\n", 14);
            ok = stream_flush(&s);
            if (ok && r->head.minor) ok = send_all(h, r->c->fd, "0\r\n\r\n", 5);
            break;
        }
        ok = stream_flush(&s);
    }
    free(s.pending);
    /* no-ops for the choices that finished; the others stop (the client
     * left, or a sibling choice failed) */
    for (int i = 0; i < n; i++) serve_job_cancel(jobs[i]);
    if (!ok) r->close = true;
    count(r, ok ? status : 0);
}

/* ---- endpoints ------------------------------------------------------------------------------- */

static void release_jobs(serve_job *const *jobs, int n) {
    for (int i = 0; i < n; i++) serve_job_release(jobs[i]);
}

static void handle_generate(req *r, serve_kind kind) {
    serve_http *h = r->h;
    serve_params p;
    serve_error err = {0};
    if (!serve_parse_request(h->model, kind, r->body ? r->body : "", r->len,
                             h->opt.max_model_len, &p, &err)) {
        send_error(r, &err);
        return;
    }
    serve_job *jobs[SERVE_MAX_CHOICES];
    if (!serve_engine_submit(&p, jobs, &err)) {
        serve_params_free(&p);
        send_error(r, &err);
        return;
    }
    int n = jobs[0]->p.n_choices > 1 ? jobs[0]->p.n_choices : 1;
    char id[48];
    snprintf(id, sizeof id, "%s-%lld", kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (long long)atomic_fetch_add(&h->next_id, 1));
    if (jobs[0]->p.stream) {
        stream_job(r, jobs, n, id);
        release_jobs(jobs, n);
        return;
    }
    serve_lock();
    for (int i = 0; i < n;) {
        if (jobs[i]->state == JOB_DONE) {
            i++;
            continue;
        }
        serve_job_wait_any(jobs[0], 0.2);
        if (jobs[i]->state == JOB_DONE) continue;
        serve_unlock();
        if (client_gone(r->c->fd)) {
            for (int k = 0; k < n; k++) serve_job_cancel(jobs[k]);
            release_jobs(jobs, n);
            r->close = true;
            count(r, 0);
            return;
        }
        serve_lock();
    }
    serve_unlock();
    const serve_error *failed = NULL;
    for (int i = 0; i < n && !failed; i++)
        if (jobs[i]->error.status) failed = &jobs[i]->error;
    if (failed) {
        send_error(r, failed);
    } else {
        bool chat = kind == SERVE_CHAT;
        cJSON *root = response_head(h, chat ? "chat.completion" : "text_completion", id);
        cJSON *choices = cJSON_AddArrayToObject(root, "choices");
        for (int i = 0; i < n; i++) {
            const serve_job *j = jobs[i];
            cJSON *ch = cJSON_CreateObject();
            cJSON_AddItemToArray(choices, ch);
            cJSON_AddNumberToObject(ch, "index", i);
            if (chat) {
                cJSON *msg = cJSON_AddObjectToObject(ch, "message");
                cJSON_AddStringToObject(msg, "role", "assistant");
                add_text(msg, "content", j->text ? j->text : "", j->len);
            } else {
                add_text(ch, "text", j->text ? j->text : "", j->len);
            }
            if (j->p.sp.logprobs)
                cJSON_AddItemToObject(ch, "logprobs",
                                      serve_logprobs_json(h->model, kind, j->lps, j->n_lps));
            else cJSON_AddNullToObject(ch, "logprobs");
            cJSON_AddStringToObject(ch, "finish_reason",
                                    j->finish_reason ? j->finish_reason : "stop");
        }
        cJSON_AddItemToObject(root, "usage", usage_json(jobs, n));
        send_json(r, 200, root);
    }
    release_jobs(jobs, n);
}

static void handle_models(req *r) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", r->h->opt.model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "piecewise");
    cJSON_AddItemToArray(data, m);
    send_json(r, 200, root);
}

/* POST /tokenize, /detokenize: llama-server's shapes (serve_tokenize.c). */
static void handle_tokens(req *r, bool tokenize) {
    serve_error err = {0};
    char *out = NULL;
    const char *body = r->body ? r->body : "";
    bool ok = tokenize ? serve_tokenize(r->h->model, body, r->len, &out, &err)
                       : serve_detokenize(r->h->model, body, r->len, &out, &err);
    if (ok) respond(r, 200, "application/json", out, NULL);
    else send_error(r, &err);
}

/* The chat page's files, with a policy that lets the page load nothing but
 * itself and talk to nothing but this server: no inline script or style,
 * no other origin, no framing. */
static void handle_page(req *r) {
    serve_page page;
    if (!serve_page_find(r->head.path, &page)) {
        send_simple_error(r, 404, "invalid_request_error", "not_found", "no such page");
        return;
    }
    char *body = malloc(page.len + 1);
    if (!body) {
        send_simple_error(r, 500, "server_error", NULL, "out of memory");
        return;
    }
    memcpy(body, page.data, page.len + 1);
    respond(r, 200, page.content_type, body,
            "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
            "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'\r\n"
            "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
            "Cache-Control: no-cache\r\n");
}

typedef struct route {
    const char *path;
    const char *method;
    int kind; /* 0 chat, 1 completions, 2 models, 3 health, 4 metrics, 5 tokenize,
                 6 detokenize, 7 the chat page */
    bool needs_key;
} route;

/* The page is open even with --api-key: it holds no secret, and asks for
 * the key itself. */
static const route routes[] = {
    {"/v1/chat/completions", "POST", 0, true}, {"/v1/completions", "POST", 1, true},
    {"/v1/models", "GET", 2, true},           {"/health", "GET", 3, false},
    {"/metrics", "GET", 4, false},            {"/tokenize", "POST", 5, true},
    {"/detokenize", "POST", 6, true},         {"/", "GET", 7, false},
    {"/chat.js", "GET", 7, false},            {"/chat.css", "GET", 7, false},
};

/* "Authorization: Bearer KEY", the scheme in any case (RFC 9110 11.1). */
static bool authorized(req *r) {
    const char *k = r->h->opt.api_key;
    if (!k) return true;
    const char *v = r->head.authorization;
    if (!v || strncasecmp(v, "bearer", 6) != 0 || (v[6] != ' ' && v[6] != '\t')) return false;
    const char *given = v + 7;
    while (*given == ' ' || *given == '\t') given++;
    /* compare the whole key in constant time */
    size_t kl = strlen(k), gl = strlen(given);
    unsigned char diff = kl != gl;
    for (size_t i = 0; i < gl; i++) diff |= (unsigned char)(given[i] ^ k[i % (kl ? kl : 1)]);
    return diff == 0;
}

/* The path for a message: bytes outside printable ASCII as %XX, so that
 * the error body stays valid UTF-8 whatever the client sent. */
static void escape_path(const char *path, char *out, size_t cap) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p && o + 4 < cap; p++) {
        if (*p > 0x20 && *p < 0x7F) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
}

static void dispatch(req *r) {
    const char *path = r->head.path, *method = r->head.method;
    const route *rt = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(path, routes[i].path) == 0) rt = &routes[i];
    if (!rt) {
        char shown[128], msg[160];
        escape_path(path, shown, 100);
        snprintf(msg, sizeof msg, "no endpoint %s", shown);
        send_simple_error(r, 404, "invalid_request_error", "not_found", msg);
        return;
    }
    if (strcmp(method, rt->method) != 0) {
        serve_error err;
        serve_error_set(&err, 405, "invalid_request_error", NULL, "method_not_allowed",
                        "%s is not allowed on %s; use %s", method, rt->path, rt->method);
        char allow[32];
        snprintf(allow, sizeof allow, "Allow: %s\r\n", rt->method);
        respond(r, 405, "application/json", serve_error_json(&err), allow);
        return;
    }
    if (rt->needs_key && !authorized(r)) {
        send_simple_error(r, 401, "authentication_error", "invalid_api_key",
                          "missing or wrong API key (send 'Authorization: Bearer KEY')");
        return;
    }
    switch (rt->kind) {
    case 0: handle_generate(r, SERVE_CHAT); break;
    case 1: handle_generate(r, SERVE_COMPLETION); break;
    case 2: handle_models(r); break;
    case 3: respond(r, 200, "application/json", strdup("{\"status\":\"ok\"}"), NULL); break;
    case 5: handle_tokens(r, true); break;
    case 6: handle_tokens(r, false); break;
    case 7: handle_page(r); break;
    default: {
        char *metrics = serve_metrics_render();
        if (metrics) respond(r, 200, "text/plain; version=0.0.4", metrics, NULL);
        else send_simple_error(r, 500, "server_error", NULL, "out of memory");
        break;
    }
    }
}

/* ---- reading a request ----------------------------------------------------------------------- */

static void set_busy(conn *c, bool busy) {
    serve_http *h = c->h;
    pthread_mutex_lock(&h->mu);
    c->busy = busy;
    if (!busy) c->since = pw_monotonic_seconds();
    pthread_mutex_unlock(&h->mu);
}

static void body_too_large(req *r) {
    char msg[96];
    snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", r->h->opt.max_body);
    r->close = true;
    send_simple_error(r, 413, "invalid_request_error", "body_too_large", msg);
}

/* 408: the body missed its deadline, or no byte of it came for --timeout. */
static void body_timeout(req *r) {
    serve_http *h = r->h;
    char msg[96];
    if (pw_monotonic_seconds() >= r->body_deadline) {
        snprintf(msg, sizeof msg, "the request body did not arrive within %u seconds",
                 h->opt.body_timeout_s);
        serve_metrics_connection_dropped(SERVE_DROP_BODY_TIMEOUT);
    } else {
        snprintf(msg, sizeof msg, "no byte of the request body came for %u seconds",
                 h->opt.timeout_s);
    }
    r->close = true;
    send_simple_error(r, 408, "invalid_request_error", "request_timeout", msg);
}

static bool body_append(req *r, const char *p, size_t n, size_t *cap) {
    if (r->len + n + 1 > *cap) {
        char *t = pw_host_grow(r->body, 1, cap, r->len + n + 1, SIZE_MAX);
        if (!t) return false;
        r->body = t;
    }
    memcpy(r->body + r->len, p, n);
    r->len += n;
    r->body[r->len] = '\0';
    return true;
}

/* Reads the body after a head of head_len bytes in c->buf. Leaves the
 * bytes after it (a pipelined request) at the start of c->buf. False when
 * the request was answered (or the client left) and the connection must
 * close. */
static bool read_body(req *r, size_t head_len) {
    conn *c = r->c;
    serve_http *h = r->h;
    const serve_head *hd = &r->head;
    size_t pos = head_len, cap = 0;
    double deadline = r->body_deadline = pw_monotonic_seconds() + h->opt.body_timeout_s;
    if (hd->has_length && hd->content_length > h->opt.max_body) {
        body_too_large(r);
        return false;
    }
    if (hd->expect_continue && (hd->chunked || (hd->has_length && hd->content_length > 0)) &&
        !send_all(h, c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25)) {
        count(r, 0);
        return false;
    }
    if (hd->has_length) {
        size_t want = (size_t)hd->content_length;
        r->body = malloc(want + 1);
        if (!r->body) {
            r->close = true;
            send_simple_error(r, 500, "server_error", NULL, "out of memory");
            return false;
        }
        size_t take = c->have - pos < want ? c->have - pos : want;
        memcpy(r->body, c->buf + pos, take);
        r->len = take;
        pos += take;
        while (r->len < want) {
            double idle = pw_monotonic_seconds() + h->opt.timeout_s;
            ssize_t n = recv_by(c->fd, r->body + r->len, want - r->len,
                                idle < deadline ? idle : deadline);
            if (n < 0) {
                body_timeout(r);
                return false;
            }
            if (n == 0) {
                count(r, 0); /* the client left mid-body */
                return false;
            }
            r->len += (size_t)n;
        }
        r->body[r->len] = '\0';
    } else if (hd->chunked) {
        serve_chunked ck = {0};
        for (;;) {
            if (pos == c->have) {
                pos = c->have = 0;
                double idle = pw_monotonic_seconds() + h->opt.timeout_s;
                ssize_t n = recv_by(c->fd, c->buf, sizeof c->buf, idle < deadline ? idle : deadline);
                if (n < 0) {
                    body_timeout(r);
                    return false;
                }
                if (n == 0) {
                    count(r, 0);
                    return false;
                }
                c->have = (size_t)n;
            }
            size_t used;
            const char *data, *error;
            size_t dl;
            serve_chunk_result res =
                serve_chunked_step(&ck, c->buf + pos, c->have - pos, &used, &data, &dl, &error);
            pos += used;
            if (res == SERVE_CHUNK_ERROR) {
                r->close = true;
                send_simple_error(r, 400, "invalid_request_error", "malformed_chunked_body",
                                  error);
                return false;
            }
            if (res == SERVE_CHUNK_DATA) {
                if (r->len + dl > h->opt.max_body) {
                    body_too_large(r);
                    return false;
                }
                if (!body_append(r, data, dl, &cap)) {
                    r->close = true;
                    send_simple_error(r, 500, "server_error", NULL, "out of memory");
                    return false;
                }
            }
            if (res == SERVE_CHUNK_DONE) break;
        }
    }
    memmove(c->buf, c->buf + pos, c->have - pos);
    c->have -= pos;
    return true;
}

/* Answers one request whose head is c->buf[0..head_len). False: close the
 * connection after it. */
static bool serve_one(conn *c, size_t head_len, bool head_bad) {
    serve_http *h = c->h;
    req r = {.h = h, .c = c};
    atomic_fetch_add(&h->in_flight, 1);
    serve_metrics_received();
    bool parsed = false;
    if (!head_bad && head_len > 0 && head_len <= SERVE_HEAD_MAX) {
        /* parsed in a copy: reading the body moves the bytes after the head */
        memcpy(c->head, c->buf, head_len);
        parsed = serve_head_parse(c->head, head_len, &r.head);
    }
    if (head_bad || head_len == 0 || head_len > SERVE_HEAD_MAX) {
        r.close = true;
        if (head_bad)
            send_simple_error(&r, 400, "invalid_request_error", "malformed_request",
                              "malformed request head (a bare CR or LF, or a NUL byte)");
        else
            send_simple_error(&r, 431, "invalid_request_error", "headers_too_large",
                              "the request head is larger than 16 KiB");
    } else if (!parsed) {
        r.close = true;
        send_simple_error(&r, r.head.status, "invalid_request_error", r.head.code, r.head.error);
    } else {
        r.close = !r.head.keep_alive;
        r.head_only = strcmp(r.head.method, "HEAD") == 0;
        /* a request that arrived before the shutdown is answered in full */
        bool draining = atomic_load(&h->draining);
        if (!read_body(&r, head_len)) {
            r.close = true; /* answered, or the client left: where the next request starts is unknown */
        } else {
            set_busy(c, true);
            if (draining) {
                r.close = true;
                send_simple_error(&r, 503, "server_error", "shutting_down",
                                  "the server is shutting down");
            } else {
                dispatch(&r);
            }
        }
    }
    count(&r, 0);
    free(r.body);
    atomic_fetch_sub(&h->in_flight, 1);
    return !r.close;
}

static void conn_unlink_locked(serve_http *h, conn *c) {
    if (c->prev) c->prev->next = c->next;
    else h->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    h->n_conns--;
}

static void *conn_main(void *arg) {
    conn *c = arg;
    serve_http *h = c->h;
    bool keep = true, lingering = false;
    while (keep) {
        /* wait for a request head: --timeout while idle, then
         * --header-timeout from its first byte however it trickles in */
        double first = c->have ? pw_monotonic_seconds() : 0;
        size_t head_len = 0;
        bool bad = false;
        for (;;) {
            if (c->have) {
                head_len = serve_head_end(c->buf, c->have, &bad);
                if (head_len || bad || c->have >= SERVE_HEAD_MAX) break;
            }
            double deadline = pw_monotonic_seconds() + h->opt.timeout_s;
            if (first) {
                double hd = first + h->opt.header_timeout_s;
                if (hd < deadline) deadline = hd;
            }
            size_t room = (c->have < SERVE_HEAD_MAX ? SERVE_HEAD_MAX : CONN_BUF) - c->have;
            ssize_t n = recv_by(c->fd, c->buf + c->have, room, deadline);
            if (n <= 0) {
                if (n < 0 && first && pw_monotonic_seconds() >= first + h->opt.header_timeout_s)
                    serve_metrics_connection_dropped(SERVE_DROP_HEADER_TIMEOUT);
                keep = false;
                break;
            }
            if (!c->have) first = pw_monotonic_seconds();
            c->have += (size_t)n;
        }
        if (!keep) break;
        keep = serve_one(c, head_len, bad);
        lingering = !keep;
        if (keep) set_busy(c, false);
    }
    set_busy(c, false);
    if (lingering) linger(c->fd);
    pthread_mutex_lock(&h->mu);
    conn_unlink_locked(h, c);
    close(c->fd);
    pthread_cond_broadcast(&h->gone);
    pthread_mutex_unlock(&h->mu);
    free(c);
    return NULL;
}

/* ---- accepting ------------------------------------------------------------------------------- */

static void addr_key(const struct sockaddr_storage *ss, int *family, unsigned char key[16]) {
    memset(key, 0, 16);
    *family = ss->ss_family;
    if (ss->ss_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const unsigned char *a = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
        /* an IPv4-mapped address is that IPv4 client */
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
        if (memcmp(a, mapped, 12) == 0) {
            *family = AF_INET;
            memcpy(key, a + 12, 4);
        } else {
            memcpy(key, a, 16);
        }
    }
}

/* Closes a connection that has not sent a whole request: its thread sees
 * the shutdown and ends. */
static void drop_locked(conn *c) {
    c->dropped = true;
    shutdown(c->fd, SHUT_RDWR);
}

/* Admits a new connection. At the per-address cap it evicts that
 * address's oldest unproven connection, at the limit the oldest of any
 * address; only connections unproven for EVICT_GRACE_S at least, so that a
 * client that has just connected has time to send its request. With no such
 * connection a new one is still admitted below the limit, and refused at
 * it. */
static void admit(serve_http *h, int fd, const struct sockaddr_storage *ss) {
    conn *c = malloc(sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    memset(c, 0, offsetof(conn, buf));
    c->h = h;
    c->fd = fd;
    c->have = 0;
    addr_key(ss, &c->family, c->addr);
    double now = pw_monotonic_seconds();
    c->since = now;
    pthread_mutex_lock(&h->mu);
    int same = 0, total = 0;
    conn *oldest_same = NULL, *oldest = NULL;
    for (conn *k = h->conns; k; k = k->next) {
        if (k->dropped) continue;
        total++;
        if (k->busy) continue;
        bool mine = k->family == c->family && memcmp(k->addr, c->addr, 16) == 0;
        same += mine;
        if (now - k->since < EVICT_GRACE_S) continue;
        if (!oldest || k->since < oldest->since) oldest = k;
        if (mine && (!oldest_same || k->since < oldest_same->since)) oldest_same = k;
    }
    if (same >= (int)h->opt.max_conns_per_client && oldest_same) {
        drop_locked(oldest_same);
        serve_metrics_connection_dropped(SERVE_DROP_EVICTED);
        total--;
        if (oldest == oldest_same) {
            oldest = NULL;
            for (conn *k = h->conns; k; k = k->next)
                if (!k->dropped && !k->busy && now - k->since >= EVICT_GRACE_S &&
                    (!oldest || k->since < oldest->since))
                    oldest = k;
        }
    }
    if (total >= (int)h->opt.max_conns) {
        if (!oldest) {
            /* every connection is answering a request or just arrived */
            pthread_mutex_unlock(&h->mu);
            serve_metrics_connection_dropped(SERVE_DROP_REFUSED);
            close(fd);
            free(c);
            return;
        }
        drop_locked(oldest);
        serve_metrics_connection_dropped(SERVE_DROP_EVICTED);
    }
    c->next = h->conns;
    if (h->conns) h->conns->prev = c;
    h->conns = c;
    h->n_conns++;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, conn_main, c);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        conn_unlink_locked(h, c);
        close(fd);
        free(c);
    }
    pthread_mutex_unlock(&h->mu);
}

static void *accept_main(void *arg) {
    serve_http *h = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = h->listen_fd, .events = POLLIN},
                              {.fd = h->wake[0], .events = POLLIN}};
        int r = poll(p, 2, -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || p[1].revents) break;
        if (!(p[0].revents & POLLIN)) continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept(h->listen_fd, (struct sockaddr *)&ss, &sl);
        if (fd < 0) {
            /* out of descriptors: let connections finish rather than spin */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                poll(NULL, 0, 10);
            continue;
        }
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        admit(h, fd, &ss);
    }
    return NULL;
}

pw_status serve_http_start(const pw_model *m, const serve_http_options *opt, serve_http **out,
                           int *bound_port) {
    *out = NULL;
    const char *host = strcmp(opt->host, "localhost") == 0 ? "127.0.0.1" : opt->host;
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)opt->port);
        sl = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)opt->port);
        sl = sizeof *a6;
    } else {
        return pw_error(PW_ERR_INVALID_ARG,
                        "--host '%s' is not a numeric IPv4 or IPv6 address (or localhost)",
                        opt->host);
    }
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return pw_error(PW_ERR_OOM, "out of memory starting the HTTP server");
    h->model = m;
    h->opt = *opt;
    h->wake[0] = h->wake[1] = -1;
    atomic_init(&h->in_flight, 0);
    atomic_init(&h->draining, false);
    atomic_init(&h->next_id, 1);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->gone, NULL);
    int one = 1;
    h->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (h->listen_fd < 0 ||
        setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(h->listen_fd, (struct sockaddr *)&ss, sl) != 0 || listen(h->listen_fd, 1024) != 0) {
        if (h->listen_fd >= 0) close(h->listen_fd);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->gone);
        free(h);
        return pw_error(PW_ERR_IO, "cannot listen on %s port %d (in use, or not allowed)",
                        opt->host, opt->port);
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    *bound_port = opt->port;
    if (getsockname(h->listen_fd, (struct sockaddr *)&bound, &bl) == 0)
        *bound_port = ntohs(bound.ss_family == AF_INET6
                                ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                : ((struct sockaddr_in *)&bound)->sin_port);
    if (pipe(h->wake) != 0 || pthread_create(&h->acceptor, NULL, accept_main, h) != 0) {
        if (h->wake[0] >= 0) {
            close(h->wake[0]);
            close(h->wake[1]);
        }
        close(h->listen_fd);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->gone);
        free(h);
        return pw_error(PW_ERR_IO, "cannot start the HTTP server's threads");
    }
    h->acceptor_running = true;
    *out = h;
    return PW_OK;
}

void serve_http_quiesce(serve_http *h) {
    if (!h) return;
    atomic_store(&h->draining, true);
    if (h->acceptor_running) {
        ssize_t w = write(h->wake[1], "x", 1);
        (void)w;
        pthread_join(h->acceptor, NULL);
        h->acceptor_running = false;
        close(h->listen_fd);
        h->listen_fd = -1;
    }
}

int serve_http_in_flight(serve_http *h) { return h ? atomic_load(&h->in_flight) : 0; }

void serve_http_stop(serve_http *h) {
    if (!h) return;
    serve_http_quiesce(h);
    /* every connection left: its thread sees the shutdown and ends (one
     * waiting on a job cancels it) */
    pthread_mutex_lock(&h->mu);
    for (conn *k = h->conns; k; k = k->next) drop_locked(k);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    while (h->n_conns > 0)
        if (pthread_cond_timedwait(&h->gone, &h->mu, &ts) != 0) break;
    int left = h->n_conns;
    pthread_mutex_unlock(&h->mu);
    close(h->wake[0]);
    close(h->wake[1]);
    if (left > 0) return; /* threads still hold h: leave it to the exit */
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->gone);
    free(h);
}
#endif
