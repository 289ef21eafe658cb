/* Decode-first scheduling with chunked prefill: one token for every
 * decoding request, then prefill chunks of the oldest requests, within
 * max_num_batched_tokens. The scheduled tokens' ids and attention metadata
 * go into the host side of the engine's persistent per-step buffers. */
#include "model/engine_internal.h"

#include <stdlib.h>

static int by_arrival(const void *a, const void *b) {
    const pw_sched *x = a, *y = b;
    return (x->r->arrival > y->r->arrival) - (x->r->arrival < y->r->arrival);
}

/* Candidates in e->sched: decoding requests (one pending token) first,
 * then the prefilling ones, each group oldest first. */
static int64_t collect_candidates(pw_engine *e) {
    int64_t ns = 0;
    for (int pass = 0; pass < 2; pass++) {
        int64_t first = ns;
        for (int64_t i = 0; i < e->cfg.max_num_seqs; i++) {
            pw_request *r = &e->requests[i];
            if (r->id < 0 || r->finished) continue;
            int64_t pending = r->n_tokens - r->n_computed;
            bool decode = pending == 1;
            if ((pass == 0) != decode) continue;
            e->sched[ns].r = r;
            e->sched[ns].count = pending;
            ns++;
        }
        /* one request (batch-1 decode) is already in order: skip qsort's call */
        if (ns - first > 1)
            qsort(e->sched + first, (size_t)(ns - first), sizeof *e->sched, by_arrival);
    }
    return ns;
}

/* Writes `count` tokens of r, from its first uncomputed one, at row t0. */
static void place_tokens(pw_engine *e, const pw_request *r, int64_t t0, int64_t count) {
    const int32_t *table = &e->block_tables[r->slot * e->blocks_per_seq];
    for (int64_t j = 0; j < count; j++) {
        int64_t pos = r->n_computed + j, t = t0 + j;
        int32_t block = table[pos / e->cfg.block_size];
        e->input_ids[t] = r->tokens[pos];
        e->positions[t] = (int32_t)pos;
        e->slot_mapping[t] = (int32_t)(block * e->cfg.block_size + pos % e->cfg.block_size);
        e->token_seq[t] = (int32_t)r->slot;
    }
}

pw_status pw_schedule(pw_engine *e, int64_t *n_sched, int64_t *n_tokens, bool *uniform) {
    int64_t ns = collect_candidates(e);
    int64_t budget = e->cfg.max_num_batched_tokens, nt = 0, kept = 0;
    bool all_decode = true;
    e->n_sample_rows = 0;
    for (int64_t i = 0; i < ns && budget > 0; i++) {
        pw_sched *s = &e->sched[i];
        pw_request *r = s->r;
        if (!r->admitted) {
            /* not an error: the request waits until enough blocks are free */
            if (!pw_kv_blocks_fit(e, r, r->limit)) continue;
            PW_TRY(pw_kv_blocks_reserve(e, r, r->limit));
            r->admitted = true;
        }
        int64_t take = s->count < budget ? s->count : budget;
        if (take != 1 || s->count != 1) all_decode = false;
        /* all its pending tokens run: the last one's logits are sampled */
        if (take == s->count) e->sample_rows[e->n_sample_rows++] = (int32_t)(nt + take - 1);
        s->count = take;
        s->start = nt;
        place_tokens(e, r, nt, take);
        nt += take;
        budget -= take;
        e->sched[kept++] = *s;
    }
    *n_sched = kept;
    *n_tokens = nt;
    *uniform = all_decode && kept > 0;
    return PW_OK;
}

void pw_schedule_fill_padding(pw_engine *e, int64_t from, int64_t to) {
    /* padding tokens write nothing and attend to nothing */
    for (int64_t t = from; t < to; t++) {
        e->input_ids[t] = 0;
        e->positions[t] = 0;
        e->slot_mapping[t] = -1;
        e->token_seq[t] = 0;
    }
}
