/* The scheduler and the KV block allocator on their own, without an engine
 * or a model:
 *  - blocks: a fresh cache hands out ids 0, 1, ... in position order; a
 *    slot's row grows only as needed; fit and reserve agree; past
 *    max_model_len or with too few free blocks reserve fails with a message
 *    and takes nothing; release returns every block;
 *  - the scheduler: decoding requests first, then prefill chunks oldest
 *    first within the token budget; a request whose blocks do not fit waits;
 *    each row's position, slot mapping and sequence follow the block table;
 *    the sampled rows are each finishing request's last token; padding rows
 *    write nothing. */
#include "test_util.h"
#include "internal.h"

#include "model/scheduler.h"

static void test_blocks(void) {
    pw_kv_blocks kv;
    CHECK_OK(pw_kv_blocks_init(&kv, 3, 4, 10)); /* 3 slots, 4 positions a block */
    CHECK_EQ_INT(kv.blocks_per_seq, 3);
    CHECK(kv.tables_dirty); /* never staged */
    CHECK_OK(pw_kv_blocks_reset(&kv, 5));
    CHECK_EQ_INT(kv.n_free, 5);
    CHECK_EQ_INT(pw_kv_blocks_for(&kv, 0), 0);
    CHECK_EQ_INT(pw_kv_blocks_for(&kv, 4), 1);
    CHECK_EQ_INT(pw_kv_blocks_for(&kv, 5), 2);

    kv.tables_dirty = false;
    CHECK(pw_kv_blocks_fit(&kv, 1, 6));
    CHECK_OK(pw_kv_blocks_reserve(&kv, 1, 6));
    CHECK(kv.tables_dirty);
    CHECK_EQ_INT(kv.held[1], 2);
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 1)[0], 0);
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 1)[1], 1);
    kv.tables_dirty = false;
    CHECK_OK(pw_kv_blocks_reserve(&kv, 1, 8)); /* still two blocks: nothing changes */
    CHECK(!kv.tables_dirty);
    CHECK_EQ_INT(kv.n_free, 3);

    /* past max_model_len: refused, nothing taken */
    CHECK(!pw_kv_blocks_fit(&kv, 0, 13));
    CHECK_ERR(pw_kv_blocks_reserve(&kv, 0, 13), PW_ERR_INVALID_ARG, "max_model_len is 10");
    CHECK_EQ_INT(kv.held[0], 0);
    CHECK_OK(pw_kv_blocks_reserve(&kv, 0, 9)); /* 3 blocks: ids 2, 3, 4 */
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 0)[2], 4);
    CHECK_EQ_INT(kv.n_free, 0);
    /* the cache is full: refused with the count, nothing taken */
    CHECK(!pw_kv_blocks_fit(&kv, 2, 1));
    CHECK_ERR(pw_kv_blocks_reserve(&kv, 2, 1), PW_ERR_OOM, "1 blocks needed, 0 free");
    CHECK_EQ_INT(kv.held[2], 0);

    pw_kv_blocks_release(&kv, 1);
    CHECK_EQ_INT(kv.held[1], 0);
    CHECK_EQ_INT(kv.n_free, 2);
    CHECK_OK(pw_kv_blocks_reserve(&kv, 2, 5)); /* the released blocks, in their old order */
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 2)[0], 0);
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 2)[1], 1);
    pw_kv_blocks_release(&kv, 0);
    pw_kv_blocks_release(&kv, 2);
    CHECK_EQ_INT(kv.n_free, 5);
    pw_kv_blocks_free(&kv);
}

/* Puts a request with `n` tokens (n_computed of them already in the cache)
 * in slot `slot`. */
static pw_request *add(pw_scheduler *s, int64_t slot, int64_t n, int64_t n_computed,
                       int64_t limit) {
    pw_request *r = pw_scheduler_free_slot(s);
    CHECK(r && r->slot == slot);
    if (!r) return NULL;
    r->tokens = pw_host_calloc((size_t)limit, sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) r->tokens[i] = (int32_t)(100 * slot + i);
    r->cap = limit;
    r->n_tokens = n;
    r->n_prompt = n;
    r->n_computed = n_computed;
    r->limit = limit;
    r->id = s->next_id++;
    return r;
}

static void test_schedule(void) {
    pw_scheduler s;
    pw_kv_blocks kv;
    pw_step_inputs in;
    CHECK_OK(pw_scheduler_init(&s, 3, 6));
    CHECK_OK(pw_kv_blocks_init(&kv, 3, 4, 16));
    CHECK_OK(pw_kv_blocks_reset(&kv, 6));
    CHECK_OK(pw_step_inputs_init(&in, 6));
    CHECK(!pw_scheduler_has_work(&s));

    pw_request *old = add(&s, 0, 5, 0, 8);    /* prefill of 5, 2 blocks */
    pw_request *young = add(&s, 1, 7, 0, 12); /* prefill of 7, 3 blocks */
    CHECK(pw_scheduler_has_work(&s));
    CHECK(pw_scheduler_find(&s, young->id) == young);
    CHECK(pw_scheduler_find(&s, 99) == NULL);

    /* step 1: the older prefill whole, then a chunk of the younger one */
    int64_t nt = 0;
    bool uniform = true;
    CHECK_OK(pw_schedule(&s, &kv, &in, &nt, &uniform));
    CHECK_EQ_INT(nt, 6);
    CHECK(!uniform);
    CHECK_EQ_INT(s.n_batch, 2);
    CHECK(s.batch[0].r == old && s.batch[0].start == 0 && s.batch[0].count == 5);
    CHECK(s.batch[1].r == young && s.batch[1].start == 5 && s.batch[1].count == 1);
    CHECK_EQ_INT(in.n_sample_rows, 1); /* only the older request finishes its prompt */
    CHECK_EQ_INT(in.sample_rows[0], 4);
    /* the older request holds blocks 0 and 1, the younger 2, 3, 4 */
    CHECK_EQ_INT(in.input_ids[4], 4);
    CHECK_EQ_INT(in.positions[4], 4);
    CHECK_EQ_INT(in.slot_mapping[4], 1 * 4 + 0);
    CHECK_EQ_INT(in.token_seq[4], 0);
    CHECK_EQ_INT(in.input_ids[5], 100);
    CHECK_EQ_INT(in.slot_mapping[5], 2 * 4 + 0);
    CHECK_EQ_INT(in.token_seq[5], 1);
    CHECK(old->admitted && young->admitted);
    CHECK_EQ_INT(kv.n_free, 1);

    /* the step ran: the older request decodes next; a third waits for blocks */
    old->n_computed = 5;
    old->tokens[old->n_tokens++] = 7;
    young->n_computed = 1;
    pw_request *waiting = add(&s, 2, 6, 0, 8); /* needs 2 blocks, 1 free */
    CHECK_OK(pw_schedule(&s, &kv, &in, &nt, &uniform));
    CHECK_EQ_INT(s.n_batch, 2);
    CHECK(s.batch[0].r == old && s.batch[0].count == 1); /* decode first */
    CHECK(s.batch[1].r == young && s.batch[1].start == 1 && s.batch[1].count == 5);
    CHECK(!waiting->admitted);
    CHECK_EQ_INT(in.positions[0], 5);
    CHECK_EQ_INT(in.slot_mapping[0], 1 * 4 + 1);
    CHECK_EQ_INT(in.n_sample_rows, 1);
    CHECK_EQ_INT(in.sample_rows[0], 0);

    /* only decoding requests: a uniform batch */
    young->n_computed = 6;
    old->n_computed = 6;
    old->tokens[old->n_tokens++] = 8;
    waiting->finished = true; /* out of the way */
    CHECK_OK(pw_schedule(&s, &kv, &in, &nt, &uniform));
    CHECK_EQ_INT(nt, 2);
    CHECK(uniform);
    CHECK_EQ_INT(in.n_sample_rows, 2);

    /* padding rows write nothing */
    pw_step_inputs_pad(&in, 2, 4);
    CHECK_EQ_INT(in.slot_mapping[2], -1);
    CHECK_EQ_INT(in.slot_mapping[3], -1);
    CHECK_EQ_INT(in.input_ids[3], 0);

    pw_step_inputs_free(&in);
    pw_kv_blocks_free(&kv);
    pw_scheduler_free(&s); /* frees the requests' tokens */
}

int main(void) {
    test_blocks();
    test_schedule();
    return pw_test_finish("model_scheduler");
}
