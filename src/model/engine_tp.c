/* Tensor parallelism with one rank in charge: rank 0 drives its engine
 * with the ordinary calls (add, continue, cancel, release a request, set
 * the canary, step) and the other ranks replay them.
 *
 * On rank 0 (pw_engine_tp_lead) every call that changes the engine's
 * state is recorded, when it is made, into a command buffer; each step
 * sends the buffer, ending with the step itself, to every other rank in
 * one message (pw_comm_send_commands, counted as a broadcast). A follower
 * (pw_engine_tp_follow) makes exactly the same calls in the same order, so
 * its scheduler, KV blocks, dispatcher and lazy captures are rank 0's by
 * construction: every rank pads the same way, replays the same graph and
 * meets the others in the same all-reduces. Inside the step rank 0 still
 * broadcasts its route and its sampled tokens (engine.c), which both
 * checks that the ranks agree and makes rank 0 the one that samples.
 *
 * A call that fails on rank 0 is taken back out of the buffer (the
 * followers never see it); a replayed call that fails on a follower means
 * the ranks no longer agree, and the follower stops with the reason (the
 * job then ends). Recording a call costs a copy of its arguments; an
 * engine that is not leading has no recorder and pays one test per call.
 *
 * The records are 8-byte aligned, so the follower reads them in place. */
#include "model/engine_internal.h"

#include "ops/comm.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum tp_op { TP_ADD = 1, TP_CONTINUE, TP_CANCEL, TP_RELEASE, TP_VERIFY, TP_STEP, TP_END };

static const char *op_name(int32_t op) {
    switch (op) {
    case TP_ADD: return "add_request";
    case TP_CONTINUE: return "continue_request";
    case TP_CANCEL: return "cancel_request";
    case TP_RELEASE: return "release_request";
    case TP_VERIFY: return "set_verify_every";
    case TP_STEP: return "step";
    case TP_END: return "end";
    default: return "an unknown command";
    }
}

/* Every record starts with this; what follows depends on op:
 *   ADD: pw_sampling_params (logit_bias NULL), n_bias pw_logit_bias, n tokens
 *   CONTINUE: n tokens (padded to 8 bytes)
 *   CANCEL, RELEASE: id; VERIFY: n (every); STEP, END: nothing. */
typedef struct tp_record {
    int32_t op;
    int32_t n_bias;
    int64_t id, n, max_new;
} tp_record;

struct pw_engine_tp {
    uint8_t *buf;
    size_t len, cap;
};

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Appends a record with `extra` bytes after its head; *out points at the
 * head (zeroed, op set). */
static pw_status append(pw_engine_tp *tp, int32_t op, size_t extra, tp_record **out) {
    size_t need = sizeof(tp_record) + pad8(extra);
    if (need > SIZE_MAX - tp->len) return PW_ERR_OOM;
    uint8_t *b = pw_host_grow(tp->buf, 1, &tp->cap, tp->len + need, SIZE_MAX);
    if (!b) return PW_ERR_OOM;
    tp->buf = b;
    memset(b + tp->len, 0, need);
    *out = (tp_record *)(b + tp->len);
    (*out)->op = op;
    tp->len += need;
    return PW_OK;
}

pw_status pw_engine_tp_record_add(pw_engine *e, const int32_t *prompt, int64_t n,
                                  int64_t max_new, const pw_sampling_params *sp, size_t *mark) {
    *mark = e->tp->len;
    pw_sampling_params given = sp ? *sp : (pw_sampling_params){0};
    int32_t nb = given.n_logit_bias > 0 && given.logit_bias ? given.n_logit_bias : 0;
    /* add_request checks the sizes; recording comes first, so bound them here */
    if (n < 1 || n > (int64_t)(INT32_MAX / sizeof *prompt) || nb > PW_MAX_LOGIT_BIAS)
        return pw_error(PW_ERR_INVALID_ARG, "request of %" PRId64 " tokens, %d biases", n, nb);
    size_t sp_bytes = pad8(sizeof given), bias_bytes = pad8((size_t)nb * sizeof(pw_logit_bias));
    tp_record *r;
    PW_TRY(append(e->tp, TP_ADD, sp_bytes + bias_bytes + (size_t)n * sizeof *prompt, &r));
    r->id = e->sched.next_id;
    r->n = n;
    r->max_new = max_new;
    r->n_bias = nb;
    uint8_t *p = (uint8_t *)(r + 1);
    given.logit_bias = NULL;
    memcpy(p, &given, sizeof given);
    if (nb) memcpy(p + sp_bytes, sp->logit_bias, (size_t)nb * sizeof(pw_logit_bias));
    memcpy(p + sp_bytes + bias_bytes, prompt, (size_t)n * sizeof *prompt);
    return PW_OK;
}

pw_status pw_engine_tp_record_continue(pw_engine *e, int64_t id, const int32_t *tokens, int64_t n,
                                       int64_t max_new, size_t *mark) {
    *mark = e->tp->len;
    if (n < 1 || n > (int64_t)(INT32_MAX / sizeof *tokens))
        return pw_error(PW_ERR_INVALID_ARG, "continue needs tokens (got %" PRId64 ")", n);
    tp_record *r;
    PW_TRY(append(e->tp, TP_CONTINUE, (size_t)n * sizeof *tokens, &r));
    r->id = id;
    r->n = n;
    r->max_new = max_new;
    memcpy(r + 1, tokens, (size_t)n * sizeof *tokens);
    return PW_OK;
}

static pw_status record_plain(pw_engine *e, int32_t op, int64_t id, int64_t n, size_t *mark) {
    *mark = e->tp->len;
    tp_record *r;
    PW_TRY(append(e->tp, op, 0, &r));
    r->id = id;
    r->n = n;
    return PW_OK;
}

pw_status pw_engine_tp_record_cancel(pw_engine *e, int64_t id, size_t *mark) {
    return record_plain(e, TP_CANCEL, id, 0, mark);
}

pw_status pw_engine_tp_record_release(pw_engine *e, int64_t id, size_t *mark) {
    return record_plain(e, TP_RELEASE, id, 0, mark);
}

pw_status pw_engine_tp_record_verify(pw_engine *e, int64_t every, size_t *mark) {
    return record_plain(e, TP_VERIFY, 0, every, mark);
}

pw_status pw_engine_tp_settle(pw_engine *e, size_t mark, pw_status s) {
    if (s != PW_OK && mark <= e->tp->len) e->tp->len = mark;
    return s;
}

/* Sends what was recorded, ending with `op`, and starts a new buffer. */
static pw_status send_with(pw_engine *e, int32_t op) {
    size_t mark;
    PW_TRY(record_plain(e, op, 0, 0, &mark));
    pw_status s = pw_comm_send_commands(e->tp->buf, e->tp->len);
    e->tp->len = 0;
    return s;
}

pw_status pw_engine_tp_send_step(pw_engine *e) { return send_with(e, TP_STEP); }

void pw_engine_tp_end(pw_engine *e) {
    if (!e->tp) return;
    /* the followers' last command: they return from pw_engine_tp_follow */
    if (send_with(e, TP_END) != PW_OK) pw_clear_error();
    pw_host_free(e->tp->buf);
    pw_host_free(e->tp);
    e->tp = NULL;
}

pw_status pw_engine_tp_lead(pw_engine *e) {
    if (pw_comm_size() <= 1) return PW_OK; /* one process: nobody to lead */
    if (pw_comm_rank() != 0)
        return pw_error(PW_ERR_STATE, "tensor parallel rank %d cannot lead: rank 0 leads, the "
                        "others follow (pw_engine_tp_follow)", pw_comm_rank());
    if (e->tp) return PW_OK;
    if (e->stats.steps > 0 || pw_engine_has_work(e))
        return pw_error(PW_ERR_STATE, "an engine must lead from its first request");
    e->tp = pw_host_calloc(1, sizeof *e->tp);
    return e->tp ? PW_OK : PW_ERR_OOM;
}

/* ---- the follower ----------------------------------------------------------------------- */

/* Replays one record at buf[*pos, len); *end is set by END. */
static pw_status replay(pw_engine *e, const uint8_t *buf, size_t len, size_t *pos, bool *end) {
    if (len - *pos < sizeof(tp_record))
        return pw_error(PW_ERR_FORMAT, "a command cut short at byte %zu of %zu", *pos, len);
    const tp_record *r = (const tp_record *)(buf + *pos);
    *pos += sizeof *r;
    size_t rest = len - *pos;
    const uint8_t *p = buf + *pos;
    int64_t id = -1;
    switch (r->op) {
    case TP_ADD: {
        size_t sp_bytes = pad8(sizeof(pw_sampling_params));
        if (r->n_bias < 0 || r->n_bias > PW_MAX_LOGIT_BIAS || r->n < 1 ||
            (uint64_t)r->n > rest / sizeof(int32_t))
            return pw_error(PW_ERR_FORMAT, "an add_request command out of bounds");
        size_t bias_bytes = pad8((size_t)r->n_bias * sizeof(pw_logit_bias));
        size_t total = sp_bytes + bias_bytes + pad8((size_t)r->n * sizeof(int32_t));
        if (total > rest) return pw_error(PW_ERR_FORMAT, "an add_request command cut short");
        pw_sampling_params sp;
        memcpy(&sp, p, sizeof sp);
        sp.n_logit_bias = r->n_bias;
        sp.logit_bias = r->n_bias ? (const pw_logit_bias *)(p + sp_bytes) : NULL;
        const int32_t *prompt = (const int32_t *)(p + sp_bytes + bias_bytes);
        PW_TRY(pw_engine_add_request(e, prompt, r->n, r->max_new, &sp, &id));
        if (id != r->id)
            return pw_error(PW_ERR_STATE, "request %" PRId64 " here is %" PRId64 " on rank 0",
                            id, r->id);
        *pos += total;
        return PW_OK;
    }
    case TP_CONTINUE: {
        if (r->n < 1 || (uint64_t)r->n > rest / sizeof(int32_t))
            return pw_error(PW_ERR_FORMAT, "a continue_request command out of bounds");
        *pos += pad8((size_t)r->n * sizeof(int32_t));
        if (*pos > len) return pw_error(PW_ERR_FORMAT, "a continue_request command cut short");
        return pw_engine_continue_request(e, r->id, (const int32_t *)p, r->n, r->max_new);
    }
    case TP_CANCEL: return pw_engine_cancel_request(e, r->id);
    case TP_RELEASE: return pw_engine_release_request(e, r->id);
    case TP_VERIFY: return pw_engine_set_verify_every(e, r->n);
    case TP_STEP: {
        const pw_step_token *toks;
        int64_t n;
        /* rank 0 decides what a failed step means (serve fails the
         * requests and goes on): its next commands say it; a failure on
         * this rank alone stops the two ranks meeting, and the watchdog
         * then ends the job */
        if (pw_engine_step(e, &toks, &n) != PW_OK) {
            fprintf(stderr, "piecewise: tensor parallel rank %d: step failed: %s\n",
                    pw_comm_rank(), pw_last_error());
            pw_clear_error();
        }
        return PW_OK;
    }
    case TP_END: *end = true; return PW_OK;
    default: return pw_error(PW_ERR_FORMAT, "unknown command %d", r->op);
    }
}

pw_status pw_engine_tp_follow(pw_engine *e) {
    if (pw_comm_size() <= 1 || pw_comm_rank() == 0)
        return pw_error(PW_ERR_STATE, "tensor parallel rank %d of %d: only ranks other than 0 "
                        "follow", pw_comm_rank(), pw_comm_size());
    if (e->tp) return pw_error(PW_ERR_STATE, "an engine cannot both lead and follow");
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    pw_status s = PW_OK;
    for (bool end = false; s == PW_OK && !end;) {
        s = pw_comm_recv_commands(&buf, &cap, &len);
        for (size_t pos = 0; s == PW_OK && pos < len && !end;) {
            int32_t op = len - pos >= sizeof(int32_t) ? ((const tp_record *)(buf + pos))->op : 0;
            s = replay(e, buf, len, &pos, &end);
            if (s != PW_OK) {
                char why[256];
                snprintf(why, sizeof why, "%s", pw_last_error());
                s = pw_error(s, "tensor parallel rank %d could not follow rank 0 (%s): %s",
                             pw_comm_rank(), op_name(op), why);
            }
        }
    }
    pw_host_free(buf);
    return s;
}
