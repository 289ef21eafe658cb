/* piecewise serve: HTTP glue on libmicrohttpd (one thread per
 * connection). Collects bodies (bounded), checks the API key, routes the
 * OpenAI endpoints, and streams server-sent events from a content-reader
 * callback that waits on its job. A client that goes away while its job
 * runs cancels the job. */
#ifdef PW_HAVE_SERVE
#include "serve.h"

#include "internal.h" /* pw_error */

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result MHD_Result;
#else
typedef int MHD_Result; /* before 0.9.71 the callbacks returned int */
#endif

struct serve_http {
    struct MHD_Daemon *daemon;
    MHD_socket listen_fd; /* after quiesce: ours to close */
    const pw_model *model;
    serve_http_options opt;
    atomic_int in_flight;
    atomic_bool draining; /* shutting down: new requests on open connections get 503 */
    atomic_llong next_id;
};

typedef struct conn_ctx {
    char *body;
    size_t len, cap;
    bool too_large;
    bool answered; /* a response was queued early (413 on Content-Length) */
} conn_ctx;

/* ---- helpers --------------------------------------------------------------------------------- */

static MHD_Result send_text(struct MHD_Connection *c, int status, const char *type, char *body) {
    size_t n = body ? strlen(body) : 0;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(n, body ? body : (char *)"", MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    serve_metrics_request(status);
    return ok;
}

static MHD_Result send_json(struct MHD_Connection *c, int status, cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return send_text(c, status, "application/json", s);
}

static MHD_Result send_error(struct MHD_Connection *c, const serve_error *err) {
    return send_text(c, err->status, "application/json", serve_error_json(err));
}

static MHD_Result send_simple_error(struct MHD_Connection *c, int status, const char *type,
                                    const char *code, const char *msg) {
    serve_error err;
    serve_error_set(&err, status, type, NULL, code, "%s", msg);
    return send_error(c, &err);
}

/* Whether the peer closed its end (checked while its job waits). */
static bool client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    char b;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* A copy of s[0..n) with malformed UTF-8 replaced by U+FFFD (a model can
 * emit any bytes; JSON must carry valid text). */
static char *valid_utf8(const char *s, size_t n) {
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                                  : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len && i + len <= n && serve_utf8_valid(s + i, len)) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

static void add_text(cJSON *obj, const char *key, const char *s, size_t n) {
    char *t = valid_utf8(s, n);
    cJSON_AddStringToObject(obj, key, t ? t : "");
    free(t);
}

static cJSON *usage_json(const serve_job *j) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->p.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)j->n_completion);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(j->p.n_prompt + j->n_completion));
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
    serve_http *h;
    struct MHD_Connection *conn;
    serve_job *job;
    char id[48];
    size_t sent;      /* text bytes already sent */
    bool role_sent, ended;
    char *pending;    /* SSE bytes not yet handed to MHD */
    size_t pend_len, pend_off, pend_cap;
    double last_send; /* when bytes last went to MHD */
} stream_ctx;

static void push_event(stream_ctx *s, cJSON *root) {
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return;
    size_t n = strlen(json);
    char *t = pw_host_grow(s->pending, 1, &s->pend_cap, s->pend_len + n + 8, SIZE_MAX);
    if (t) {
        s->pending = t;
        memcpy(t + s->pend_len, "data: ", 6);
        memcpy(t + s->pend_len + 6, json, n);
        memcpy(t + s->pend_len + 6 + n, "\n\n", 2);
        s->pend_len += n + 8;
    }
    free(json);
}

static void push_raw(stream_ctx *s, const char *text) {
    size_t n = strlen(text);
    char *t = pw_host_grow(s->pending, 1, &s->pend_cap, s->pend_len + n, SIZE_MAX);
    if (!t) return;
    s->pending = t;
    memcpy(t + s->pend_len, text, n);
    s->pend_len += n;
}

/* One chunk: text delta (may be empty) and finish reason (may be NULL). */
static void push_chunk(stream_ctx *s, const char *text, size_t n, bool with_text,
                       const char *finish) {
    bool chat = s->job->p.kind == SERVE_CHAT;
    cJSON *root = response_head(s->h, chat ? "chat.completion.chunk" : "text_completion", s->id);
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", 0);
    if (chat) {
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        if (!s->role_sent) {
            cJSON_AddStringToObject(delta, "role", "assistant");
            s->role_sent = true;
        }
        if (with_text) add_text(delta, "content", text, n);
    } else {
        add_text(ch, "text", text, n);
    }
    cJSON_AddNullToObject(ch, "logprobs");
    if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
    else cJSON_AddNullToObject(ch, "finish_reason");
    push_event(s, root);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *s = cls;
    for (;;) {
        if (s->pend_off < s->pend_len) {
            size_t n = s->pend_len - s->pend_off;
            if (n > max) n = max;
            memcpy(buf, s->pending + s->pend_off, n);
            s->pend_off += n;
            s->last_send = serve_now();
            return (ssize_t)n;
        }
        s->pend_len = s->pend_off = 0;
        if (s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        serve_job *j = s->job;
        serve_lock();
        while (j->state != JOB_DONE && j->safe_len <= s->sent) {
            serve_job_wait(j, s->sent, 0.2);
            if (j->state != JOB_DONE && j->safe_len <= s->sent) {
                serve_unlock();
                if (client_gone(s->conn)) return MHD_CONTENT_READER_END_WITH_ERROR;
                /* an SSE comment while the job waits (queued, or a long
                 * prefill): the connection is not idle, so the idle
                 * timeout does not close it */
                if (serve_now() - s->last_send >= 0.5 * s->h->opt.timeout_s) {
                    static const char keepalive[] = ": keep-alive\n\n";
                    if (max < sizeof keepalive - 1) return 0;
                    memcpy(buf, keepalive, sizeof keepalive - 1);
                    s->last_send = serve_now();
                    return (ssize_t)(sizeof keepalive - 1);
                }
                serve_lock();
            }
        }
        size_t upto = j->safe_len;
        bool done = j->state == JOB_DONE;
        serve_error err = j->error;
        const char *finish = j->finish_reason;
        size_t from = s->sent;
        char *text = upto > from ? malloc(upto - from) : NULL;
        if (text) memcpy(text, j->text + from, upto - from);
        serve_unlock();
        if (upto > from) {
            if (!s->role_sent && s->job->p.kind == SERVE_CHAT) push_chunk(s, "", 0, true, NULL);
            push_chunk(s, text ? text : "", text ? upto - from : 0, true, NULL);
            s->sent = upto;
        }
        free(text);
        if (done) {
            if (err.status) {
                char *e = serve_error_json(&err);
                push_raw(s, "data: ");
                push_raw(s, e ? e : "{}");
                push_raw(s, "\n\n");
                free(e);
            } else if (finish) {
                push_chunk(s, "", 0, false, finish);
                if (j->p.include_usage) {
                    bool chat = j->p.kind == SERVE_CHAT;
                    cJSON *root = response_head(
                        s->h, chat ? "chat.completion.chunk" : "text_completion", s->id);
                    cJSON_AddArrayToObject(root, "choices");
                    cJSON_AddItemToObject(root, "usage", usage_json(j));
                    push_event(s, root);
                }
            } else {
                return MHD_CONTENT_READER_END_WITH_ERROR; /* cancelled */
            }
            push_raw(s, "data: [DONE]\n\n");
            s->ended = true;
        }
    }
}

static void stream_free(void *cls) {
    stream_ctx *s = cls;
    serve_job_cancel(s->job); /* no-op when it finished */
    serve_job_release(s->job);
    free(s->pending);
    free(s);
}

/* ---- endpoints ------------------------------------------------------------------------------- */

static MHD_Result handle_generate(serve_http *h, struct MHD_Connection *c, serve_kind kind,
                                  conn_ctx *cc) {
    serve_params p;
    serve_error err = {0};
    if (!serve_parse_request(h->model, kind, cc->body ? cc->body : "", cc->len,
                             h->opt.max_model_len, &p, &err))
        return send_error(c, &err);
    serve_job *j = serve_engine_submit(&p, &err);
    if (!j) {
        serve_params_free(&p);
        return send_error(c, &err);
    }
    char id[48];
    snprintf(id, sizeof id, "%s-%lld", kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (long long)atomic_fetch_add(&h->next_id, 1));
    if (j->p.stream) {
        stream_ctx *s = calloc(1, sizeof *s);
        if (!s) {
            serve_job_cancel(j);
            serve_job_release(j);
            return send_simple_error(c, 500, "server_error", NULL, "out of memory");
        }
        s->h = h;
        s->conn = c;
        s->job = j;
        s->last_send = serve_now();
        memcpy(s->id, id, sizeof id);
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
        if (!r) {
            stream_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        serve_metrics_request(200);
        return ok;
    }
    serve_lock();
    while (j->state != JOB_DONE) {
        serve_job_wait(j, j->safe_len, 0.2);
        if (j->state == JOB_DONE) break;
        serve_unlock();
        if (client_gone(c)) {
            serve_job_cancel(j);
            serve_job_release(j);
            return MHD_NO; /* closes the connection */
        }
        serve_lock();
    }
    serve_unlock();
    MHD_Result ok;
    if (j->error.status) {
        ok = send_error(c, &j->error);
    } else {
        bool chat = kind == SERVE_CHAT;
        cJSON *root = response_head(h, chat ? "chat.completion" : "text_completion", id);
        cJSON *choices = cJSON_AddArrayToObject(root, "choices");
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddItemToArray(choices, ch);
        cJSON_AddNumberToObject(ch, "index", 0);
        if (chat) {
            cJSON *msg = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(msg, "role", "assistant");
            add_text(msg, "content", j->text ? j->text : "", j->len);
        } else {
            add_text(ch, "text", j->text ? j->text : "", j->len);
        }
        cJSON_AddNullToObject(ch, "logprobs");
        cJSON_AddStringToObject(ch, "finish_reason", j->finish_reason ? j->finish_reason : "stop");
        cJSON_AddItemToObject(root, "usage", usage_json(j));
        ok = send_json(c, 200, root);
    }
    serve_job_release(j);
    return ok;
}

static MHD_Result handle_models(serve_http *h, struct MHD_Connection *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", h->opt.model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "piecewise");
    cJSON_AddItemToArray(data, m);
    return send_json(c, 200, root);
}

typedef struct route {
    const char *path;
    const char *method;
    int kind; /* 0 chat, 1 completions, 2 models, 3 health, 4 metrics */
    bool needs_key;
} route;

static const route routes[] = {
    {"/v1/chat/completions", "POST", 0, true}, {"/v1/completions", "POST", 1, true},
    {"/v1/models", "GET", 2, true},           {"/health", "GET", 3, false},
    {"/metrics", "GET", 4, false},
};

static bool authorized(serve_http *h, struct MHD_Connection *c) {
    if (!h->opt.api_key) return true;
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!v || strncmp(v, "Bearer ", 7) != 0) return false;
    /* compare the whole key in constant time */
    const char *k = h->opt.api_key, *given = v + 7;
    size_t kl = strlen(k), gl = strlen(given);
    unsigned char diff = kl != gl;
    for (size_t i = 0; i < gl; i++) diff |= (unsigned char)(given[i] ^ k[i % (kl ? kl : 1)]);
    return diff == 0;
}

static MHD_Result dispatch(serve_http *h, struct MHD_Connection *c, const char *url,
                           const char *method, conn_ctx *cc) {
    const route *r = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(url, routes[i].path) == 0) r = &routes[i];
    if (!r) {
        char msg[160];
        snprintf(msg, sizeof msg, "no endpoint %.100s", url);
        return send_simple_error(c, 404, "invalid_request_error", "not_found", msg);
    }
    if (strcmp(method, r->method) != 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "%.16s is not allowed on %s; use %s", method, r->path, r->method);
        serve_error err;
        serve_error_set(&err, 405, "invalid_request_error", NULL, "method_not_allowed", "%s", msg);
        struct MHD_Response *resp;
        char *body = serve_error_json(&err);
        resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "Allow", r->method);
        MHD_Result ok = MHD_queue_response(c, 405, resp);
        MHD_destroy_response(resp);
        serve_metrics_request(405);
        return ok;
    }
    if (r->needs_key && !authorized(h, c))
        return send_simple_error(c, 401, "authentication_error", "invalid_api_key",
                                 "missing or wrong API key (send 'Authorization: Bearer KEY')");
    if (cc->too_large) {
        char msg[96];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", h->opt.max_body);
        return send_simple_error(c, 413, "invalid_request_error", "body_too_large", msg);
    }
    switch (r->kind) {
    case 0: return handle_generate(h, c, SERVE_CHAT, cc);
    case 1: return handle_generate(h, c, SERVE_COMPLETION, cc);
    case 2: return handle_models(h, c);
    case 3: return send_text(c, 200, "application/json", strdup("{\"status\":\"ok\"}"));
    default: {
        char *metrics = serve_metrics_render();
        if (!metrics) return send_simple_error(c, 500, "server_error", NULL, "out of memory");
        return send_text(c, 200, "text/plain; version=0.0.4", metrics);
    }
    }
}

static MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_size, void **con_cls) {
    (void)version;
    serve_http *h = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        if (!cc) return MHD_NO;
        *con_cls = cc;
        atomic_fetch_add(&h->in_flight, 1);
        if (atomic_load(&h->draining)) {
            cc->answered = true;
            return send_simple_error(c, 503, "server_error", "shutting_down",
                                     "the server is shutting down");
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > h->opt.max_body) {
            /* refuse before reading the body; MHD closes the connection */
            cc->too_large = cc->answered = true;
            char msg[96];
            snprintf(msg, sizeof msg, "the request body is larger than %zu bytes",
                     h->opt.max_body);
            return send_simple_error(c, 413, "invalid_request_error", "body_too_large", msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cc->too_large) {
            if (cc->len + *upload_size > h->opt.max_body) {
                cc->too_large = true;
                free(cc->body);
                cc->body = NULL;
                cc->len = cc->cap = 0;
            } else {
                if (cc->len + *upload_size + 1 > cc->cap) {
                    char *t = pw_host_grow(cc->body, 1, &cc->cap, cc->len + *upload_size + 1, SIZE_MAX);
                    if (!t) return MHD_NO;
                    cc->body = t;
                }
                memcpy(cc->body + cc->len, upload, *upload_size);
                cc->len += *upload_size;
                cc->body[cc->len] = '\0';
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->answered) return MHD_YES;
    cc->answered = true;
    return dispatch(h, c, url, method, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)c;
    (void)toe;
    serve_http *h = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    free(cc->body);
    free(cc);
    *con_cls = NULL;
    atomic_fetch_sub(&h->in_flight, 1);
}

pw_status serve_http_start(const pw_model *m, const serve_http_options *opt, serve_http **out,
                           int *bound_port) {
    *out = NULL;
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return pw_error(PW_ERR_OOM, "out of memory starting the HTTP server");
    h->model = m;
    h->opt = *opt;
    h->listen_fd = MHD_INVALID_SOCKET;
    atomic_init(&h->in_flight, 0);
    atomic_init(&h->draining, false);
    atomic_init(&h->next_id, 1);
    const char *host = strcmp(opt->host, "localhost") == 0 ? "127.0.0.1" : opt->host;
    struct sockaddr_in a4 = {0};
    struct sockaddr_in6 a6 = {0};
    struct sockaddr *addr;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)opt->port);
        addr = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)opt->port);
        addr = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        free(h);
        return pw_error(PW_ERR_INVALID_ARG,
                        "--host '%s' is not a numeric IPv4 or IPv6 address (or localhost)",
                        opt->host);
    }
    h->daemon = MHD_start_daemon(flags, (uint16_t)opt->port, NULL, NULL, on_request, h,
                                 MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_NOTIFY_COMPLETED,
                                 on_completed, h, MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned int)opt->timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned int)1024, MHD_OPTION_END);
    if (!h->daemon) {
        free(h);
        return pw_error(PW_ERR_IO, "cannot listen on %s port %d (in use, or not allowed)",
                        opt->host, opt->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : opt->port;
    *out = h;
    return PW_OK;
}

void serve_http_quiesce(serve_http *h) {
    if (!h) return;
    atomic_store(&h->draining, true);
    if (h->listen_fd == MHD_INVALID_SOCKET) h->listen_fd = MHD_quiesce_daemon(h->daemon);
}

int serve_http_in_flight(serve_http *h) { return h ? atomic_load(&h->in_flight) : 0; }

void serve_http_stop(serve_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->daemon);
    if (h->listen_fd != MHD_INVALID_SOCKET) close(h->listen_fd);
    free(h);
}
#endif
