/* The engine's request API: requests enter the scheduler's slots, grow
 * when a conversation continues, and give their blocks back when
 * released. */
#include "model/engine_internal.h"

#include "model/sampler.h"

#include <inttypes.h>
#include <string.h>

static pw_status ensure_capacity(pw_request *r, int64_t n) {
    if (n <= r->cap) return PW_OK;
    size_t cap = (size_t)r->cap;
    int32_t *t = pw_host_grow(r->tokens, sizeof *t, &cap, (size_t)n, INT64_MAX);
    if (!t) return PW_ERR_OOM;
    r->tokens = t;
    r->cap = (int64_t)cap;
    return PW_OK;
}

/* The sampling parameters a request may carry: finite, within their
 * documented ranges, every biased token in the vocabulary. */
static pw_status check_sampling(const pw_engine *e, const pw_sampling_params *sp) {
    int64_t vocab = pw_model_get_info(e->model)->vocab;
    if (!(sp->presence_penalty >= -2.0f && sp->presence_penalty <= 2.0f) ||
        !(sp->frequency_penalty >= -2.0f && sp->frequency_penalty <= 2.0f))
        return pw_error(PW_ERR_INVALID_ARG,
                        "presence_penalty %g and frequency_penalty %g must be in [-2, 2]",
                        (double)sp->presence_penalty, (double)sp->frequency_penalty);
    if (sp->n_logit_bias < 0 || sp->n_logit_bias > PW_MAX_LOGIT_BIAS ||
        (sp->n_logit_bias > 0 && !sp->logit_bias))
        return pw_error(PW_ERR_INVALID_ARG, "logit_bias holds %d entries (at most %d)",
                        sp->n_logit_bias, PW_MAX_LOGIT_BIAS);
    for (int32_t i = 0; i < sp->n_logit_bias; i++) {
        const pw_logit_bias *b = &sp->logit_bias[i];
        if (b->token < 0 || b->token >= vocab)
            return pw_error(PW_ERR_INVALID_ARG,
                            "logit_bias names token %d, outside the vocabulary [0, %" PRId64 ")",
                            b->token, vocab);
        if (!(b->bias >= -100.0f && b->bias <= 100.0f))
            return pw_error(PW_ERR_INVALID_ARG, "logit_bias of token %d is %g; allowed -100 to 100",
                            b->token, (double)b->bias);
    }
    if (sp->top_logprobs < 0 || sp->top_logprobs > PW_MAX_TOP_LOGPROBS)
        return pw_error(PW_ERR_INVALID_ARG, "top_logprobs is %d; allowed 0 to %d",
                        sp->top_logprobs, PW_MAX_TOP_LOGPROBS);
    return PW_OK;
}

static pw_status check_tokens(const pw_engine *e, const int32_t *tokens, int64_t n) {
    int64_t vocab = pw_model_get_info(e->model)->vocab;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return pw_error(PW_ERR_INVALID_ARG,
                            "token %" PRId64 " is %d, outside the vocabulary [0, %" PRId64 ")", i,
                            tokens[i], vocab);
    return PW_OK;
}

static pw_status add_request(pw_engine *e, const int32_t *prompt, int64_t n_prompt,
                             int64_t max_new_tokens, const pw_sampling_params *sp, int64_t *id) {
    if (!prompt || n_prompt < 1) return pw_error(PW_ERR_INVALID_ARG, "the prompt is empty");
    if (max_new_tokens < 1)
        return pw_error(PW_ERR_INVALID_ARG, "max_new_tokens must be >= 1 (got %" PRId64 ")",
                        max_new_tokens);
    /* compared by subtraction: the sum of two user values may overflow */
    if (n_prompt > e->cfg.max_model_len || max_new_tokens > e->cfg.max_model_len - n_prompt)
        return pw_error(PW_ERR_INVALID_ARG,
                        "prompt of %" PRId64 " tokens plus %" PRId64
                        " new tokens exceeds the context of %" PRId64 " tokens",
                        n_prompt, max_new_tokens, e->cfg.max_model_len);
    if (pw_kv_blocks_for(&e->kv, n_prompt + max_new_tokens) > e->kv.num_blocks)
        return pw_error(PW_ERR_INVALID_ARG, "request needs more KV cache than the engine has");
    PW_TRY(check_tokens(e, prompt, n_prompt));
    pw_sampling_params given = sp ? *sp : (pw_sampling_params){0};
    PW_TRY(check_sampling(e, &given));
    pw_request *r = pw_scheduler_free_slot(&e->sched);
    if (!r)
        return pw_error(PW_ERR_STATE, "all %" PRId64 " request slots are in use (max_num_seqs)",
                        e->cfg.max_num_seqs);
    PW_TRY(ensure_capacity(r, n_prompt + max_new_tokens));
    memcpy(r->tokens, prompt, (size_t)n_prompt * sizeof(int32_t));
    r->n_tokens = n_prompt;
    r->n_prompt = n_prompt;
    r->n_computed = 0;
    r->limit = n_prompt + max_new_tokens;
    r->finished = false;
    r->admitted = false;
    r->sp = given;
    r->n_bias = given.n_logit_bias;
    if (r->n_bias)
        memcpy(r->bias, given.logit_bias, (size_t)r->n_bias * sizeof *r->bias);
    r->sp.logit_bias = NULL; /* the caller's array need not outlive this call */
    r->id = e->sched.next_id++;
    /* from the seed alone, never the id: a seeded request is reproducible
     * whatever ran before it or beside it */
    r->rng = pw_sampler_seed(r->sp.seed);
    r->score_logits = NULL;
    r->score_from = 0;
    if (id) *id = r->id;
    return PW_OK;
}

/* With tensor parallelism rank 0 leads (engine_tp.c): each call that
 * changes what the engine runs is recorded for the other ranks, and taken
 * back if it fails. */
pw_status pw_engine_add_request(pw_engine *e, const int32_t *prompt, int64_t n_prompt,
                                int64_t max_new_tokens, const pw_sampling_params *sp,
                                int64_t *id) {
    if (id) *id = -1;
    if (!e->tp) return add_request(e, prompt, n_prompt, max_new_tokens, sp, id);
    size_t mark;
    if (!prompt || n_prompt < 1) return pw_error(PW_ERR_INVALID_ARG, "the prompt is empty");
    PW_TRY(pw_engine_tp_record_add(e, prompt, n_prompt, max_new_tokens, sp, &mark));
    return pw_engine_tp_settle(e, mark, add_request(e, prompt, n_prompt, max_new_tokens, sp, id));
}

pw_status pw_engine_add_scoring_request(pw_engine *e, const int32_t *prompt, int64_t n_prompt,
                                        int64_t score_from, float *logits, int64_t *id) {
    if (id) *id = -1;
    if (e->tp)
        return pw_error(PW_ERR_UNSUPPORTED,
                        "scoring requests are not supported with tensor parallelism");
    if (!logits || score_from < 0 || score_from >= n_prompt)
        return pw_error(PW_ERR_INVALID_ARG, "scoring needs a logits buffer and 0 <= score_from "
                        "(%" PRId64 ") < the prompt's %" PRId64 " tokens", score_from, n_prompt);
    int64_t rid;
    PW_TRY(pw_engine_add_request(e, prompt, n_prompt, 1, NULL, &rid));
    pw_request *r = pw_scheduler_find(&e->sched, rid);
    r->score_logits = logits;
    r->score_from = score_from;
    if (id) *id = rid;
    return PW_OK;
}

static pw_status continue_request(pw_engine *e, int64_t id, const int32_t *tokens, int64_t n,
                                  int64_t max_new_tokens) {
    pw_request *r = pw_scheduler_find(&e->sched, id);
    if (!r) return pw_error(PW_ERR_NOT_FOUND, "no request %" PRId64, id);
    if (!r->finished) return pw_error(PW_ERR_STATE, "request %" PRId64 " is still running", id);
    if (n < 1 || max_new_tokens < 1)
        return pw_error(PW_ERR_INVALID_ARG, "continue needs tokens and max_new_tokens >= 1");
    int64_t room = e->cfg.max_model_len - r->n_tokens;
    if (n > room || max_new_tokens > room - n)
        return pw_error(PW_ERR_INVALID_ARG,
                        "conversation of %" PRId64 " tokens plus %" PRId64 " new and %" PRId64
                        " to generate would exceed the context of %" PRId64 " tokens",
                        r->n_tokens, n, max_new_tokens, e->cfg.max_model_len);
    PW_TRY(check_tokens(e, tokens, n));
    PW_TRY(ensure_capacity(r, r->n_tokens + n + max_new_tokens));
    PW_TRY(pw_kv_blocks_reserve(&e->kv, r->slot, r->n_tokens + n + max_new_tokens));
    memcpy(r->tokens + r->n_tokens, tokens, (size_t)n * sizeof(int32_t));
    r->score_logits = NULL; /* scoring covered the first prompt only */
    r->n_tokens += n;
    r->limit = r->n_tokens + max_new_tokens;
    r->finished = false;
    return PW_OK;
}

/* Gives a finished request's slot and KV blocks back. */
static pw_status release_request(pw_engine *e, int64_t id) {
    pw_request *r = pw_scheduler_find(&e->sched, id);
    if (!r) return pw_error(PW_ERR_NOT_FOUND, "no request %" PRId64, id);
    if (!r->finished) return pw_error(PW_ERR_STATE, "request %" PRId64 " is still running", id);
    pw_kv_blocks_release(&e->kv, r->slot);
    r->id = -1;
    r->admitted = false;
    return PW_OK;
}

static pw_status cancel_request(pw_engine *e, int64_t id) {
    pw_request *r = pw_scheduler_find(&e->sched, id);
    if (!r) return pw_error(PW_ERR_NOT_FOUND, "no request %" PRId64, id);
    r->finished = true;
    return release_request(e, id);
}

pw_status pw_engine_continue_request(pw_engine *e, int64_t id, const int32_t *tokens, int64_t n,
                                     int64_t max_new_tokens) {
    if (!e->tp) return continue_request(e, id, tokens, n, max_new_tokens);
    size_t mark;
    if (!tokens || n < 1)
        return pw_error(PW_ERR_INVALID_ARG, "continue needs tokens and max_new_tokens >= 1");
    PW_TRY(pw_engine_tp_record_continue(e, id, tokens, n, max_new_tokens, &mark));
    return pw_engine_tp_settle(e, mark, continue_request(e, id, tokens, n, max_new_tokens));
}

pw_status pw_engine_cancel_request(pw_engine *e, int64_t id) {
    if (!e->tp) return cancel_request(e, id);
    size_t mark;
    PW_TRY(pw_engine_tp_record_cancel(e, id, &mark));
    return pw_engine_tp_settle(e, mark, cancel_request(e, id));
}

pw_status pw_engine_release_request(pw_engine *e, int64_t id) {
    if (!e->tp) return release_request(e, id);
    size_t mark;
    PW_TRY(pw_engine_tp_record_release(e, id, &mark));
    return pw_engine_tp_settle(e, mark, release_request(e, id));
}

pw_status pw_engine_request_output(const pw_engine *e, int64_t id, const int32_t **tokens,
                                   int64_t *n) {
    const pw_request *r = pw_scheduler_find(&e->sched, id);
    if (!r) return pw_error(PW_ERR_NOT_FOUND, "no request %" PRId64, id);
    *tokens = r->tokens + r->n_prompt;
    *n = r->n_tokens - r->n_prompt;
    return PW_OK;
}

pw_status pw_engine_last_logits(const pw_engine *e, int64_t id, const float **logits) {
    const pw_request *r = pw_scheduler_find(&e->sched, id);
    if (!r) return pw_error(PW_ERR_NOT_FOUND, "no request %" PRId64, id);
    *logits = e->run.last_logits + r->slot * pw_model_get_info(e->model)->vocab;
    return PW_OK;
}

bool pw_engine_has_work(const pw_engine *e) { return pw_scheduler_has_work(&e->sched); }
