/* piecewise serve: the engine thread. One thread owns the engine and loops
 * pw_engine_step while jobs from many connections join (queued, added
 * between steps) and leave (finished, stopped by a stop string, or
 * cancelled because their client went away). Each step goes through the
 * engine's dispatcher, so a batch of any mix runs a captured graph. */
#ifdef PW_HAVE_SERVE
#include "serve.h"
#include "cli_args.h"

#include "internal.h" /* pw_error */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the engine thread waits here for work */
    pthread_t thread;
    bool started, stopping;
    pw_model *model;
    pw_engine *engine;
    serve_engine_options opt;
    int64_t max_seqs;
    serve_job *queue_head, *queue_tail;
    int64_t n_queued;
    serve_job *active; /* in the engine */
    int64_t n_active;
    int64_t steps;
} E = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

void serve_lock(void) { pthread_mutex_lock(&E.mu); }
void serve_unlock(void) { pthread_mutex_unlock(&E.mu); }

static void job_unref_locked(serve_job *j) {
    if (--j->refs > 0) return;
    serve_job *owner = j->wake_owner;
    serve_params_free(&j->p);
    if (owner == j) pthread_cond_destroy(&j->cv);
    free(j->text);
    free(j->lps);
    free(j);
    if (owner != j) job_unref_locked(owner); /* a later choice held the first one */
}

void serve_job_release(serve_job *j) {
    if (!j) return;
    serve_lock();
    job_unref_locked(j);
    serve_unlock();
}

void serve_job_cancel(serve_job *j) {
    serve_lock();
    if (j->state != JOB_DONE) {
        j->cancel = true;
        pthread_cond_signal(&E.wake);
    }
    serve_unlock();
}

void serve_job_wait_any(serve_job *j, double timeout_s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_nsec * 1e-9 + timeout_s;
    ts.tv_sec += (time_t)t;
    ts.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
    pthread_cond_timedwait(j->wake, &E.mu, &ts);
}

/* Frees jobs that were never queued (p of each, and the first's cv once made). */
static void discard_unqueued(serve_job **jobs, int n, bool cv_made) {
    for (int i = n - 1; i >= 0; i--) {
        if (!jobs[i]) continue;
        serve_params_free(&jobs[i]->p);
        if (i == 0 && cv_made) pthread_cond_destroy(&jobs[i]->cv);
        free(jobs[i]);
        jobs[i] = NULL;
    }
}

bool serve_engine_submit(serve_params *p, serve_job **jobs, serve_error *err) {
    int n = p->n_choices > 1 ? p->n_choices : 1;
    for (int i = 0; i < n; i++) jobs[i] = calloc(1, sizeof **jobs);
    bool ok = true;
    for (int i = 0; i < n; i++) ok = ok && jobs[i];
    /* the later choices are copies; the first takes p */
    for (int i = 1; ok && i < n; i++) {
        ok = serve_params_copy(p, &jobs[i]->p);
        if (ok) jobs[i]->p.sp.seed += (uint64_t)i;
    }
    if (!ok) {
        discard_unqueued(jobs, n, false);
        serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    jobs[0]->p = *p;
    memset(p, 0, sizeof *p);
    pthread_cond_init(&jobs[0]->cv, NULL);
    double now = pw_monotonic_seconds();
    for (int i = 0; i < n; i++) {
        serve_job *j = jobs[i];
        j->state = JOB_QUEUED;
        j->refs = 2;
        j->engine_id = -1;
        j->prev = j->p.prompt[j->p.n_prompt - 1];
        j->t_submit = now;
        j->choice = i;
        j->wake = &jobs[0]->cv;
        j->wake_owner = jobs[0];
        if (i > 0) jobs[0]->refs++;
    }
    serve_lock();
    /* the queue holds what the free engine slots will take plus max_queue */
    int64_t room = E.opt.max_queue + (E.max_seqs - E.n_active) - E.n_queued;
    if (E.stopping || room < n) {
        bool stopping = E.stopping;
        int64_t queued = E.n_queued;
        serve_unlock();
        discard_unqueued(jobs, n, true);
        if (stopping)
            serve_error_set(err, 503, "server_error", NULL, "shutting_down",
                            "the server is shutting down");
        else
            serve_error_set(err, 429, "rate_limit_error", NULL, "queue_full",
                            "the request queue is full (%lld waiting); retry later",
                            (long long)queued);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (E.queue_tail) E.queue_tail->next = jobs[i];
        else E.queue_head = jobs[i];
        E.queue_tail = jobs[i];
        E.n_queued++;
    }
    pthread_cond_signal(&E.wake);
    serve_unlock();
    return true;
}

/* Marks j done and drops the engine's reference. Lock held. */
static void finish_locked(serve_job *j, const char *reason) {
    j->state = JOB_DONE;
    j->finish_reason = reason;
    j->safe_len = j->len;
    pthread_cond_broadcast(j->wake);
    job_unref_locked(j);
}

static void remove_active(serve_job *j) {
    for (serve_job **pp = &E.active; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            j->next = NULL;
            E.n_active--;
            return;
        }
}

static bool append_text(serve_job *j, const char *piece, size_t n) {
    return pw_cli_text_append(&j->text, &j->len, &j->cap, piece, n);
}

/* The length of text that can be sent while generation goes on: not a
 * tail that may grow into a stop string, nor an unfinished UTF-8 char. */
static size_t safe_length(const serve_job *j) {
    size_t safe = j->len;
    for (int s = 0; s < j->p.n_stop; s++) {
        size_t sl = strlen(j->p.stop[s]);
        for (size_t k = sl - 1; k > 0; k--)
            if (k <= j->len && memcmp(j->text + j->len - k, j->p.stop[s], k) == 0) {
                if (j->len - k < safe) safe = j->len - k;
                break;
            }
    }
    /* back off to the lead byte of an incomplete trailing sequence */
    for (size_t back = 1; back <= 3 && back <= safe; back++) {
        unsigned char c = (unsigned char)j->text[safe - back];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need > back) safe -= back;
        break;
    }
    return safe;
}

/* Keeps token t's logprobs, its piece at text[off, off + len). */
static bool record_logprob(serve_job *j, const pw_step_token *t, int32_t prev, size_t off,
                           size_t len) {
    size_t cap = (size_t)j->cap_lps;
    serve_logprob *lp =
        pw_host_grow(j->lps, sizeof *lp, &cap, (size_t)j->n_lps + 1, SIZE_MAX / sizeof *lp);
    if (!lp) return false; /* the error is set */
    j->lps = lp;
    j->cap_lps = (int64_t)cap;
    serve_logprob *r = &lp[j->n_lps++];
    r->token = t->token;
    r->prev = prev;
    r->logprob = t->logprob;
    r->off = off;
    r->len = len;
    r->n_top = t->n_top < PW_MAX_TOP_LOGPROBS ? t->n_top : PW_MAX_TOP_LOGPROBS;
    if (r->n_top > 0) memcpy(r->top, t->top, (size_t)r->n_top * sizeof *r->top);
    return true;
}

/* Applies one generated token to its job. Returns true if the job is
 * done, with *reason (left NULL, with j->error set, when it failed); the
 * caller takes it out of the engine and then finishes it (finishing may
 * free it). */
static bool take_token(serve_job *j, const pw_step_token *t, double now, const char **reason) {
    if (j->n_engine_tokens == 0) serve_metrics_ttft(now - j->t_submit);
    else serve_metrics_itl(now - j->t_last);
    j->t_last = now;
    j->n_engine_tokens++;
    if (pw_model_is_end_of_generation(E.model, t->token)) {
        *reason = "stop";
        return true;
    }
    j->n_completion++;
    int32_t prev = j->prev;
    const char *piece = pw_model_token_text(E.model, prev, t->token);
    j->prev = t->token;
    size_t old = j->len;
    if (!append_text(j, piece, strlen(piece)) || /* fail it rather than answer with a hole */
        (j->p.sp.logprobs && !record_logprob(j, t, prev, old, j->len - old))) {
        serve_error_set(&j->error, 500, "server_error", NULL, NULL, "%s", pw_last_error());
        pw_clear_error();
        return true;
    }
    /* a stop string ends the answer before it; it may span tokens */
    size_t cut = SIZE_MAX;
    for (int s = 0; s < j->p.n_stop; s++) {
        size_t sl = strlen(j->p.stop[s]);
        size_t from = old >= sl ? old - sl + 1 : 0;
        const char *hit = memmem(j->text + from, j->len - from, j->p.stop[s], sl);
        if (hit && (size_t)(hit - j->text) < cut) cut = (size_t)(hit - j->text);
    }
    if (cut != SIZE_MAX) {
        j->len = cut;
        j->text[cut] = '\0';
        /* the tokens of the stop string are not part of the answer */
        while (j->n_lps > 0 && j->lps[j->n_lps - 1].off >= cut) j->n_lps--;
        *reason = "stop";
        return true;
    }
    if (t->finished) {
        *reason = "length";
        return true;
    }
    size_t safe = safe_length(j);
    if (safe > j->safe_len) {
        j->safe_len = safe;
        pthread_cond_broadcast(j->wake);
    }
    return false;
}

/* Moves queued jobs into free engine slots and drops cancelled ones. */
static void admit_and_cancel_locked(void) {
    while (E.queue_head && E.n_active < E.max_seqs) {
        serve_job *j = E.queue_head;
        E.queue_head = j->next;
        if (!E.queue_head) E.queue_tail = NULL;
        E.n_queued--;
        j->next = NULL;
        if (j->cancel) {
            serve_metrics_cancelled();
            finish_locked(j, NULL);
            continue;
        }
        pw_status s = pw_engine_add_request(E.engine, j->p.prompt, j->p.n_prompt,
                                            j->p.max_tokens, &j->p.sp, &j->engine_id);
        if (s != PW_OK) {
            serve_error_set(&j->error, 400, "invalid_request_error", NULL, NULL, "%s",
                            pw_last_error());
            pw_clear_error();
            finish_locked(j, NULL);
            continue;
        }
        j->state = JOB_RUNNING;
        j->next = E.active;
        E.active = j;
        E.n_active++;
    }
    /* a cancelled job still queued behind a full engine leaves now too */
    for (serve_job **pp = &E.queue_head; *pp;) {
        serve_job *j = *pp;
        if (!j->cancel) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        if (E.queue_tail == j) {
            E.queue_tail = NULL;
            for (serve_job *k = E.queue_head; k; k = k->next) E.queue_tail = k;
        }
        E.n_queued--;
        j->next = NULL;
        serve_metrics_cancelled();
        finish_locked(j, NULL);
    }
    for (serve_job *j = E.active, *next; j; j = next) {
        next = j->next;
        if (!j->cancel) continue;
        if (pw_engine_cancel_request(E.engine, j->engine_id) != PW_OK) pw_clear_error();
        remove_active(j);
        serve_metrics_cancelled();
        finish_locked(j, NULL);
    }
}

static void publish_stats_locked(void) {
    pw_engine_stats st;
    pw_engine_get_stats(E.engine, &st);
    serve_metrics_engine(&st, E.n_active, E.n_queued);
    pw_engine_verify_stats vs;
    pw_engine_get_verify_stats(E.engine, &vs);
    serve_metrics_verify(vs.checks, vs.mismatches);
}

static void fail_all_active_locked(const char *msg) {
    for (serve_job *j = E.active, *next; j; j = next) {
        next = j->next;
        if (pw_engine_cancel_request(E.engine, j->engine_id) != PW_OK) pw_clear_error();
        remove_active(j);
        serve_error_set(&j->error, 500, "server_error", NULL, NULL, "engine step failed: %s", msg);
        finish_locked(j, NULL);
    }
}

static void *engine_main(void *arg) {
    (void)arg;
    serve_lock();
    for (;;) {
        admit_and_cancel_locked();
        publish_stats_locked();
        if (E.n_active == 0) {
            /* cancelling the running jobs freed slots after admission ran:
             * admit the queued ones now rather than wait for a new request */
            if (E.queue_head) continue;
            if (E.stopping) break;
            pthread_cond_wait(&E.wake, &E.mu);
            continue;
        }
        pw_engine_stats before, after;
        pw_engine_get_stats(E.engine, &before);
        /* tokens from requests already decoding: one real token each */
        int64_t decoding = 0;
        for (serve_job *j = E.active; j; j = j->next) decoding += j->n_engine_tokens > 0;
        serve_unlock();
        const pw_step_token *toks = NULL;
        int64_t n = 0;
        pw_status s = pw_engine_step(E.engine, &toks, &n);
        pw_engine_get_stats(E.engine, &after);
        serve_lock();
        E.steps++;
        if (s != PW_OK) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", pw_last_error());
            pw_clear_error();
            fprintf(stderr, "piecewise serve: step failed: %s\n", msg);
            fail_all_active_locked(msg);
            continue;
        }
        for (int m = 0; m < 3; m++)
            if (after.steps_by_mode[m] > before.steps_by_mode[m]) {
                int64_t real = after.prompt_tokens - before.prompt_tokens + decoding;
                int64_t padded = real;
                if (m != PW_MODE_NONE) {
                    int64_t p = pw_dispatcher_padded_size(pw_engine_dispatcher(E.engine), real);
                    if (p > 0) padded = p;
                }
                serve_metrics_step((pw_runtime_mode)m, real, padded);
            }
        double now = pw_monotonic_seconds();
        for (int64_t k = 0; k < n; k++) {
            serve_job *j = NULL;
            for (serve_job *a = E.active; a && !j; a = a->next)
                if (a->engine_id == toks[k].request) j = a;
            if (!j) continue;
            const char *reason = NULL;
            if (take_token(j, &toks[k], now, &reason)) {
                remove_active(j);
                pw_status rs = toks[k].finished
                                   ? pw_engine_release_request(E.engine, toks[k].request)
                                   : pw_engine_cancel_request(E.engine, toks[k].request);
                if (rs != PW_OK) pw_clear_error();
                finish_locked(j, reason);
            }
        }
    }
    publish_stats_locked();
    serve_unlock();
    return NULL;
}

pw_status serve_engine_start(pw_model *m, pw_engine *e, const serve_engine_options *opt) {
    E.model = m;
    E.engine = e;
    E.opt = *opt;
    E.max_seqs = opt->max_seqs;
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    serve_metrics_engine(&st, 0, 0);
    E.stopping = false;
    if (pthread_create(&E.thread, NULL, engine_main, NULL) != 0)
        return pw_error(PW_ERR_INTERNAL, "cannot start the engine thread");
    E.started = true;
    return PW_OK;
}

void serve_engine_stop(void) {
    if (!E.started) return;
    serve_lock();
    E.stopping = true;
    pthread_cond_signal(&E.wake);
    serve_unlock();
    pthread_join(E.thread, NULL);
    E.started = false;
}
#endif
