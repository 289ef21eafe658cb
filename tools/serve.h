/* piecewise serve: an OpenAI-compatible HTTP server. Internal interfaces
 * between its modules:
 *
 *   serve_http.c     the HTTP/1.1 server: connections, limits, routing,
 *                    bodies, auth, responses
 *   serve_framing.c  strict request framing (heads, chunked bodies)
 *   serve_request.c  JSON request parsing and validation, response bodies
 *   serve_engine.c   the one engine thread and the queue HTTP threads feed
 *   serve_metrics.c  counters and histograms, Prometheus text
 *   serve_logprobs.c the logprobs objects of answers
 *   serve_tokenize.c POST /tokenize and /detokenize
 *   serve_page.c     the chat page at / (tools/page/, embedded at build time)
 *
 * Only the engine thread calls pw_engine_*; HTTP threads hand it jobs
 * through a mutex/condvar queue and read the text it appends to them. */
#ifndef PW_SERVE_H
#define PW_SERVE_H

#include "piecewise_llm.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define SERVE_MAX_STOP 4
#define SERVE_MAX_CHOICES 16 /* "n" */
#define SERVE_DEFAULT_MAX_TOKENS 256

/* ---- metrics --------------------------------------------------------------------------------- */


void serve_metrics_init(void);
/* Request accounting: every request whose head was read is received once
 * and then either answered with a status (its whole answer written) or
 * cancelled (the client went away first). */
void serve_metrics_received(void);
void serve_metrics_request(int http_status);
void serve_metrics_request_cancelled(void);
/* The engine dropped a job whose client went away. */
void serve_metrics_cancelled(void);
/* Connections the server closed to protect itself. */
typedef enum serve_drop_reason {
    SERVE_DROP_EVICTED,        /* made room for a new connection */
    SERVE_DROP_REFUSED,        /* no room: every connection was answering a request */
    SERVE_DROP_HEADER_TIMEOUT, /* the request head took longer than --header-timeout */
    SERVE_DROP_BODY_TIMEOUT,   /* the body took longer than --body-timeout */
    SERVE_DROP_N
} serve_drop_reason;
void serve_metrics_connection_dropped(serve_drop_reason why);
void serve_metrics_ttft(double seconds);
void serve_metrics_itl(double seconds);
/* Per step (engine thread): the mode it ran in, real and padded tokens. */
void serve_metrics_step(pw_runtime_mode mode, int64_t real_tokens, int64_t padded_tokens);
void serve_metrics_engine(const pw_engine_stats *st, int64_t running, int64_t waiting);
void serve_metrics_verify(int64_t checks, int64_t mismatches);
/* Prometheus text exposition (malloc'ed), or NULL when memory ran out
 * (never a truncated text). */
char *serve_metrics_render(void);

/* ---- requests -------------------------------------------------------------------------------- */

typedef enum serve_kind { SERVE_CHAT, SERVE_COMPLETION } serve_kind;

/* An OpenAI-style error: HTTP status, message, type, param (may be NULL)
 * and code (may be NULL). */
typedef struct serve_error {
    int status;
    char message[512];
    const char *type;
    char param[64];
    const char *code;
} serve_error;

void serve_error_set(serve_error *err, int status, const char *type, const char *param,
                     const char *code, const char *fmt, ...);
/* {"error": {...}} (malloc'ed). */
char *serve_error_json(const serve_error *err);

typedef struct serve_params {
    serve_kind kind;
    int32_t *prompt; /* token ids, malloc'ed */
    int64_t n_prompt;
    int64_t max_tokens;
    /* sp.logit_bias points at bias (malloc'ed); sp.seed is the request's
     * seed, or a random one when it gave none (seeded false) */
    pw_sampling_params sp;
    pw_logit_bias *bias;
    bool seeded;
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    bool stream;
    bool include_usage; /* stream_options.include_usage */
    int n_choices;      /* "n": answers to the one prompt, 1 to SERVE_MAX_CHOICES */
} serve_params;

/* Parses and validates a request body for kind; on success fills *p
 * (free with serve_params_free), else fills *err and returns false.
 * max_model_len bounds prompt + max_tokens. */
bool serve_parse_request(const pw_model *m, serve_kind kind, const char *body, size_t len,
                         int64_t max_model_len, serve_params *p, serve_error *err);
void serve_params_free(serve_params *p);
/* *dst becomes a copy of src that owns its own memory; false when memory
 * ran out (*dst then holds nothing to free). */
bool serve_params_copy(const serve_params *src, serve_params *dst);
/* The body as a JSON value (cJSON_Delete it): valid UTF-8, one JSON value,
 * nothing after it but whitespace, no NUL in any string. NULL (with err
 * set, 400) otherwise. */
struct cJSON *serve_parse_body(const char *body, size_t len, serve_error *err);

/* POST /tokenize and /detokenize (serve_tokenize.c), shaped like
 * llama-server's: the answer's JSON (malloc'ed) in *out, or false with
 * *err. */
bool serve_tokenize(const pw_model *m, const char *body, size_t len, char **out,
                    serve_error *err);
bool serve_detokenize(const pw_model *m, const char *body, size_t len, char **out,
                      serve_error *err);
/* A chat request's "tools" and "tool_choice" (serve_tools.c): *tools_json
 * (malloc'ed) is the tools array for the chat template, or NULL when the
 * request has none or tool_choice is "none"; false with *err (400) for a
 * malformed tool or an unsupported tool_choice. */
bool serve_chat_tools(const struct cJSON *root, char **tools_json, serve_error *err);
/* True if s[0..len) is well-formed UTF-8. */
bool serve_utf8_valid(const char *s, size_t len);
/* A NUL-terminated copy of s[0..n) (malloc'ed; NULL when memory ran out)
 * with each malformed byte, and each 0 byte, replaced by U+FFFD: a model
 * can emit any bytes, and JSON must carry valid text, whole. */
char *serve_utf8_repair(const char *s, size_t n);

/* ---- logprobs -------------------------------------------------------------------------------- */

/* One generated token's logprobs, as the engine gave them, and where its
 * text is in the job's text. */
typedef struct serve_logprob {
    int32_t token;
    int32_t prev; /* the token before it: the text of a token depends on it */
    float logprob;
    size_t off, len; /* its piece is text[off, off + len) */
    int32_t n_top;
    pw_token_logprob top[PW_MAX_TOP_LOGPROBS];
} serve_logprob;

/* The "logprobs" object of a choice for lp[0..n): chat's {"content": [...],
 * "refusal": null}, or the completions' {"tokens", "token_logprobs",
 * "top_logprobs", "text_offset"}. */
struct cJSON *serve_logprobs_json(const pw_model *m, serve_kind kind, const serve_logprob *lp,
                                  int64_t n);

/* ---- jobs and the engine thread -------------------------------------------------------------- */

typedef enum serve_job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE } serve_job_state;

typedef struct serve_job {
    serve_params p;
    /* guarded by the engine's mutex */
    serve_job_state state;
    bool cancel;         /* the client went away */
    char *text;          /* generated text, cut at a stop string */
    size_t len, cap;
    size_t safe_len;     /* bytes that can be sent: no partial stop string or UTF-8 char */
    int64_t n_completion;
    serve_logprob *lps;  /* with p.sp.logprobs: one per token of text (malloc'ed) */
    int64_t n_lps, cap_lps;
    const char *finish_reason; /* "stop", "length", or NULL (error/cancelled) */
    serve_error error;   /* status != 0: failed */
    /* Signalled on new text and when done: the first choice's cv, shared
     * by every choice of a request, so one wait sees them all. */
    pthread_cond_t *wake;
    pthread_cond_t cv;   /* the first choice's */
    struct serve_job *wake_owner; /* the first choice: the others hold a reference to it */
    int choice;          /* index among the request's choices */
    int refs;            /* HTTP side + engine side (+ the later choices, on the first) */
    /* engine thread only */
    int64_t engine_id;
    int64_t n_engine_tokens; /* tokens the engine gave it, end-of-generation included */
    int32_t prev;
    double t_submit, t_last;
    struct serve_job *next;
} serve_job;

typedef struct serve_engine_options {
    int64_t max_seqs;     /* the engine's request slots */
    int64_t max_queue;    /* jobs waiting for a slot; more -> 429 */
    int64_t verify_every; /* 0: off */
} serve_engine_options;

/* Starts the engine thread; it owns e from then on (frees nothing). */
pw_status serve_engine_start(pw_model *m, pw_engine *e, const serve_engine_options *opt);
/* Finishes every job in flight, then stops the thread. */
void serve_engine_stop(void);
/* Takes p (moved) and queues its p->n_choices choices as jobs[0..n): one
 * prompt answered n times, choice i sampling with seed + i. With the prefix
 * cache on, the first computes the prompt and the others share its KV
 * blocks. Each job has one reference for the caller. False, with *err and
 * no job, when they cannot all be queued (429 when the queue is full). */
bool serve_engine_submit(serve_params *p, serve_job **jobs, serve_error *err);
/* Marks the job abandoned by its client: the engine cancels it. */
void serve_job_cancel(serve_job *j);
void serve_job_release(serve_job *j);
/* Waits, at most timeout_s, for news of any choice of j's request (the
 * caller checks what changed). Lock held. */
void serve_job_wait_any(serve_job *j, double timeout_s);
void serve_lock(void);
void serve_unlock(void);

/* ---- the chat page --------------------------------------------------------------------------- */

typedef struct serve_page {
    const char *content_type;
    const char *data; /* embedded in the binary */
    size_t len;
} serve_page;

/* The embedded file served at path ("/", "/chat.js", "/chat.css"). */
bool serve_page_find(const char *path, serve_page *out);

/* ---- HTTP ------------------------------------------------------------------------------------ */

typedef struct serve_http_options {
    const char *host;
    int port;
    const char *api_key; /* NULL: no auth */
    unsigned timeout_s;  /* idle connection timeout */
    unsigned header_timeout_s; /* a request head, from its first byte */
    unsigned body_timeout_s;   /* a request body, from the end of its head */
    unsigned max_conns;        /* connections open at once */
    unsigned max_conns_per_client; /* per address, not yet sending a whole request */
    size_t max_body;     /* bytes; larger -> 413 */
    int64_t max_model_len;
    const char *model_name;
} serve_http_options;

typedef struct serve_http serve_http;

pw_status serve_http_start(const pw_model *m, const serve_http_options *opt, serve_http **out,
                           int *bound_port);
/* Stops accepting new connections; requests in flight go on. */
void serve_http_quiesce(serve_http *h);
/* Requests whose handling has started and not finished. */
int serve_http_in_flight(serve_http *h);
void serve_http_stop(serve_http *h);

#endif
