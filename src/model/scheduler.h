/* The scheduler: the request slots, and for each step the batch it runs,
 * written as the host side of the forward's per-step inputs. */
#ifndef PW_MODEL_SCHEDULER_H
#define PW_MODEL_SCHEDULER_H

#include "model/kv_blocks.h"

#include "piecewise/model.h"

typedef struct pw_request {
    int64_t id;            /* -1: a free slot */
    int64_t slot;          /* index in the slots, row of the block tables */
    int32_t *tokens;       /* prompt, then generated tokens */
    int64_t n_tokens, cap;
    int64_t n_prompt;
    int64_t n_computed;    /* tokens whose K/V are in the cache */
    int64_t limit;         /* stop when n_tokens reaches this */
    bool finished;
    bool admitted;         /* KV blocks reserved */
    pw_sampling_params sp;
    uint64_t rng;
    /* Scoring (pw_engine_add_scoring_request): the logits of prompt
     * positions [score_from, n_prompt) go to score_logits, one row each;
     * score_logits NULL: an ordinary request. */
    float *score_logits;
    int64_t score_from;
} pw_request;

/* One request's share of a step: tokens [start, start + count) of the batch. */
typedef struct pw_scheduled {
    pw_request *r;
    int64_t start; /* first token row in the batch */
    int64_t count; /* tokens scheduled */
} pw_scheduled;

/* The host side of the forward's per-step inputs, one row per token of
 * the batch: what the scheduler writes and the engine copies to the
 * device before each forward. */
typedef struct pw_step_inputs {
    int64_t max_tokens; /* rows */
    int32_t *input_ids, *positions, *slot_mapping, *token_seq;
    /* The rows whose logits this step computes (each finishing request's
     * last scheduled token, and a scoring request's scored prompt rows),
     * ascending, and how many: the LM head computes only those, in this
     * order. */
    int32_t *sample_rows;
    int32_t n_sample_rows;
} pw_step_inputs;

pw_status pw_step_inputs_init(pw_step_inputs *in, int64_t max_tokens);
void pw_step_inputs_free(pw_step_inputs *in);
/* Rows [from, to) become padding: no cache write, no attention. */
void pw_step_inputs_pad(pw_step_inputs *in, int64_t from, int64_t to);

typedef struct pw_scheduler {
    int64_t max_num_seqs;           /* request slots */
    int64_t max_num_batched_tokens; /* tokens one step runs at most */
    pw_request *requests;           /* [max_num_seqs] */
    int64_t next_id;
    pw_scheduled *batch;            /* [max_num_seqs]: the last step's, in row order */
    int64_t n_batch;
} pw_scheduler;

pw_status pw_scheduler_init(pw_scheduler *s, int64_t max_num_seqs,
                            int64_t max_num_batched_tokens);
void pw_scheduler_free(pw_scheduler *s);
/* The request with this id; NULL when there is none. */
pw_request *pw_scheduler_find(const pw_scheduler *s, int64_t id);
/* A free slot; NULL when every slot is in use. */
pw_request *pw_scheduler_free_slot(const pw_scheduler *s);
/* True when some request has tokens left to compute or generate. */
bool pw_scheduler_has_work(const pw_scheduler *s);
/* Decode-first scheduling with chunked prefill: fills s->batch, admits
 * requests whose KV blocks fit (reserving them in kv, sharing the prefix
 * cache's blocks of their prompt, whose tokens they then skip) and writes the
 * batch's rows of `in`. *uniform when every scheduled request decodes
 * exactly one token. */
pw_status pw_schedule(pw_scheduler *s, pw_kv_blocks *kv, pw_step_inputs *in, int64_t *n_tokens,
                      bool *uniform);

#endif
