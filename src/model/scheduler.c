/* Decode-first scheduling with chunked prefill: one token for every
 * decoding request, then prefill chunks of the oldest requests, within
 * max_num_batched_tokens. A request admitted with a cached prefix starts
 * its prefill after it: its first chunk is an ordinary chunk at a later
 * position. The scheduled tokens' ids and attention metadata
 * go into the host side of the per-step inputs. */
#include "model/scheduler.h"

#include <stdlib.h>
#include <string.h>

pw_status pw_step_inputs_init(pw_step_inputs *in, int64_t max_tokens) {
    memset(in, 0, sizeof *in);
    in->max_tokens = max_tokens;
    size_t T = (size_t)max_tokens;
    in->input_ids = pw_host_calloc(T, sizeof(int32_t));
    in->positions = pw_host_calloc(T, sizeof(int32_t));
    in->slot_mapping = pw_host_calloc(T, sizeof(int32_t));
    in->token_seq = pw_host_calloc(T, sizeof(int32_t));
    in->sample_rows = pw_host_calloc(T, sizeof(int32_t));
    if (!in->input_ids || !in->positions || !in->slot_mapping || !in->token_seq ||
        !in->sample_rows)
        return PW_ERR_OOM;
    return PW_OK;
}

void pw_step_inputs_free(pw_step_inputs *in) {
    pw_host_free(in->input_ids);
    pw_host_free(in->positions);
    pw_host_free(in->slot_mapping);
    pw_host_free(in->token_seq);
    pw_host_free(in->sample_rows);
    memset(in, 0, sizeof *in);
}

void pw_step_inputs_pad(pw_step_inputs *in, int64_t from, int64_t to) {
    /* padding tokens write nothing and attend to nothing */
    for (int64_t t = from; t < to; t++) {
        in->input_ids[t] = 0;
        in->positions[t] = 0;
        in->slot_mapping[t] = -1;
        in->token_seq[t] = 0;
    }
}

pw_status pw_scheduler_init(pw_scheduler *s, int64_t max_num_seqs,
                            int64_t max_num_batched_tokens) {
    memset(s, 0, sizeof *s);
    s->max_num_seqs = max_num_seqs;
    s->max_num_batched_tokens = max_num_batched_tokens;
    s->requests = pw_host_calloc((size_t)max_num_seqs, sizeof *s->requests);
    s->batch = pw_host_calloc((size_t)max_num_seqs, sizeof *s->batch);
    if (!s->requests || !s->batch) return PW_ERR_OOM;
    for (int64_t i = 0; i < max_num_seqs; i++) {
        s->requests[i].id = -1;
        s->requests[i].slot = i;
    }
    return PW_OK;
}

void pw_scheduler_free(pw_scheduler *s) {
    if (s->requests)
        for (int64_t i = 0; i < s->max_num_seqs; i++) pw_host_free(s->requests[i].tokens);
    pw_host_free(s->requests);
    pw_host_free(s->batch);
    memset(s, 0, sizeof *s);
}

pw_request *pw_scheduler_find(const pw_scheduler *s, int64_t id) {
    for (int64_t i = 0; i < s->max_num_seqs; i++)
        if (s->requests[i].id == id) return &s->requests[i];
    return NULL;
}

pw_request *pw_scheduler_free_slot(const pw_scheduler *s) {
    return pw_scheduler_find(s, -1);
}

bool pw_scheduler_has_work(const pw_scheduler *s) {
    for (int64_t i = 0; i < s->max_num_seqs; i++)
        if (s->requests[i].id >= 0 && !s->requests[i].finished) return true;
    return false;
}

/* Ids are given in arrival order: the smaller one is older. */
static int by_arrival(const void *a, const void *b) {
    const pw_scheduled *x = a, *y = b;
    return (x->r->id > y->r->id) - (x->r->id < y->r->id);
}

/* Candidates in s->batch: decoding requests (one pending token) first,
 * then the prefilling ones, each group oldest first. */
static int64_t collect_candidates(pw_scheduler *s) {
    int64_t ns = 0;
    for (int pass = 0; pass < 2; pass++) {
        int64_t first = ns;
        for (int64_t i = 0; i < s->max_num_seqs; i++) {
            pw_request *r = &s->requests[i];
            if (r->id < 0 || r->finished) continue;
            int64_t pending = r->n_tokens - r->n_computed;
            bool decode = pending == 1;
            if ((pass == 0) != decode) continue;
            s->batch[ns].r = r;
            s->batch[ns].count = pending;
            ns++;
        }
        /* one request (batch-1 decode) is already in order: skip qsort's call */
        if (ns - first > 1)
            qsort(s->batch + first, (size_t)(ns - first), sizeof *s->batch, by_arrival);
    }
    return ns;
}

/* Writes `count` tokens of r, from its first uncomputed one, at row t0. */
static void place_tokens(const pw_kv_blocks *kv, pw_step_inputs *in, const pw_request *r,
                         int64_t t0, int64_t count) {
    const int32_t *table = pw_kv_blocks_row(kv, r->slot);
    const int64_t bs = kv->block_size;
    for (int64_t j = 0; j < count; j++) {
        int64_t pos = r->n_computed + j, t = t0 + j;
        int32_t block = table[pos / bs];
        in->input_ids[t] = r->tokens[pos];
        in->positions[t] = (int32_t)pos;
        in->slot_mapping[t] = (int32_t)(block * bs + pos % bs);
        in->token_seq[t] = (int32_t)r->slot;
    }
}

pw_status pw_schedule(pw_scheduler *s, pw_kv_blocks *kv, pw_step_inputs *in, int64_t *n_tokens,
                      bool *uniform) {
    int64_t ns = collect_candidates(s);
    int64_t budget = s->max_num_batched_tokens, nt = 0, kept = 0;
    bool all_decode = true;
    in->n_sample_rows = 0;
    for (int64_t i = 0; i < ns && budget > 0; i++) {
        pw_scheduled *b = &s->batch[i];
        pw_request *r = b->r;
        if (!r->admitted) {
            /* not an error: the request waits until enough blocks are free
             * (or until another request has computed the prefix it shares) */
            bool admitted;
            int64_t cached;
            /* a scoring request's scored positions are computed: the cache
             * may supply the positions before them only */
            int64_t cacheable = r->score_logits && r->score_from + 1 < r->n_prompt
                                    ? r->score_from + 1
                                    : r->n_prompt;
            PW_TRY(pw_kv_blocks_admit(kv, r->slot, r->tokens, cacheable, r->limit, &admitted,
                                      &cached));
            if (!admitted) continue;
            r->admitted = true;
            /* the prefix cache holds the K/V of its first `cached` tokens */
            r->n_computed = cached;
            b->count = r->n_tokens - r->n_computed;
        }
        int64_t take = b->count < budget ? b->count : budget;
        if (take != 1 || b->count != 1) all_decode = false;
        /* a scoring request's scored prompt positions, then (all its
         * pending tokens run) the last one's, which is sampled */
        int64_t scored_end = nt + take - (take == b->count);
        if (r->score_logits)
            for (int64_t j = nt; j < scored_end; j++)
                if (r->n_computed + (j - nt) >= r->score_from &&
                    r->n_computed + (j - nt) < r->n_prompt)
                    in->sample_rows[in->n_sample_rows++] = (int32_t)j;
        if (take == b->count) in->sample_rows[in->n_sample_rows++] = (int32_t)(nt + take - 1);
        b->count = take;
        b->start = nt;
        place_tokens(kv, in, r, nt, take);
        nt += take;
        budget -= take;
        s->batch[kept++] = *b;
    }
    s->n_batch = kept;
    *n_tokens = nt;
    *uniform = all_decode && kept > 0;
    return PW_OK;
}
