/* Automatic prefix caching.
 *  - the allocator alone: a prompt's full blocks are shared once computed
 *    (never the block of its last token), a request whose prefix another
 *    one is still computing waits for it, references count holders, cached
 *    blocks nobody holds are evicted least recently used first and a held
 *    block never, and a cancelled prefill's blocks are never shared;
 *  - hashes are only hints: with every key made equal, a hit still needs
 *    the block's tokens and its chain parent to match;
 *  - the engine: a greedy answer, and the logits its first token was
 *    sampled from, are bit for bit the same whether its prefix came from
 *    the cache and the rest was prefilled in chunks, or the whole prompt
 *    was computed in one step, in NONE, PIECEWISE and FULL, with requests
 *    arriving together (sharing through the wait) or staggered (prefills
 *    mixed with decodes), with a cache small enough to evict, and with
 *    every hash colliding; the hit counters count tokens (stories260K, and
 *    SmolLM2 with its chat template when it is fetched). */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/engine_internal.h"

#include <stdio.h>
#include <unistd.h>

/* ---- the allocator -------------------------------------------------------------------------- */

static void fill(int32_t *t, int64_t n, int32_t base) {
    for (int64_t i = 0; i < n; i++) t[i] = base + (int32_t)i;
}

static bool admit(pw_kv_blocks *kv, int64_t slot, const int32_t *tokens, int64_t n_prompt,
                  int64_t positions, int64_t *cached) {
    bool ok = false;
    CHECK_OK(pw_kv_blocks_admit(kv, slot, tokens, n_prompt, positions, &ok, cached));
    return ok;
}

static void test_sharing(void) {
    pw_kv_blocks kv;
    CHECK_OK(pw_kv_blocks_init(&kv, 4, 4, 32)); /* 4 slots, 4 positions a block */
    kv.caching = true;
    CHECK_OK(pw_kv_blocks_reset(&kv, 12));
    int32_t p[16];
    fill(p, 16, 100);
    int64_t cached = -1;

    /* slot 0: 10 prompt tokens, room for 14: 4 blocks, the 2 full prompt
     * blocks pending until computed */
    CHECK(admit(&kv, 0, p, 10, 14, &cached));
    CHECK_EQ_INT(cached, 0);
    CHECK_EQ_INT(kv.held[0], 4);
    CHECK_EQ_INT(kv.n_free, 8);
    CHECK_EQ_INT(kv.pc.state[pw_kv_blocks_row(&kv, 0)[0]], PW_BLOCK_PENDING);
    /* the same prompt meanwhile waits, taking nothing */
    CHECK(!admit(&kv, 1, p, 10, 14, &cached));
    CHECK_EQ_INT(kv.held[1], 0);
    CHECK_EQ_INT(kv.n_free, 8);
    /* computed: shared. Two full blocks of a 10-token prompt */
    pw_kv_blocks_computed(&kv, 0, p, 10);
    CHECK_EQ_INT(kv.pc.state[pw_kv_blocks_row(&kv, 0)[1]], PW_BLOCK_VALID);
    CHECK(admit(&kv, 1, p, 10, 14, &cached));
    CHECK_EQ_INT(cached, 8);
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 1)[0], pw_kv_blocks_row(&kv, 0)[0]);
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 1)[1], pw_kv_blocks_row(&kv, 0)[1]);
    CHECK(pw_kv_blocks_row(&kv, 1)[2] != pw_kv_blocks_row(&kv, 0)[2]);
    CHECK_EQ_INT(kv.ref[pw_kv_blocks_row(&kv, 0)[0]], 2);
    CHECK_EQ_INT(kv.n_free, 6); /* 2 new blocks only */

    /* 8 tokens fill two blocks, but the last token is computed: 1 block
     * hits, and the cached second block lends its first 3 rows */
    int32_t second = pw_kv_blocks_row(&kv, 0)[1];
    CHECK(admit(&kv, 2, p, 8, 9, &cached));
    CHECK_EQ_INT(cached, 7);
    CHECK_EQ_INT(kv.copies[2].from, second);
    CHECK_EQ_INT(kv.copies[2].to, pw_kv_blocks_row(&kv, 2)[1]);
    CHECK_EQ_INT(kv.copies[2].rows, 3);
    CHECK_EQ_INT(kv.ref[second], 3); /* slots 0 and 1, and the copy to come */
    pw_kv_blocks_copied(&kv, 2);
    CHECK_EQ_INT(kv.ref[second], 2);
    CHECK_EQ_INT(kv.copies[2].rows, 0);
    pw_kv_blocks_release(&kv, 2);
    /* a different second block: the first one hits, and one token of the
     * second matches */
    int32_t q[16];
    fill(q, 16, 100);
    q[5] = 7;
    CHECK(admit(&kv, 2, q, 12, 12, &cached));
    CHECK_EQ_INT(cached, 5);
    CHECK_EQ_INT(kv.copies[2].rows, 1);
    pw_kv_blocks_release(&kv, 2); /* before the copy: the hold on the lender goes too */
    CHECK_EQ_INT(kv.copies[2].rows, 0);
    CHECK_EQ_INT(kv.ref[second], 2);

    int64_t queried, hits;
    pw_kv_blocks_take_counts(&kv, &queried, &hits);
    CHECK_EQ_INT(queried, 10 + 10 + 8 + 12);
    CHECK_EQ_INT(hits, 8 + 7 + 5);
    pw_kv_blocks_take_counts(&kv, &queried, &hits);
    CHECK_EQ_INT(queried, 0);

    /* slot 0 leaves: the shared blocks stay with slot 1 */
    int32_t shared0 = pw_kv_blocks_row(&kv, 1)[0];
    pw_kv_blocks_release(&kv, 0);
    CHECK_EQ_INT(kv.ref[shared0], 1);
    pw_kv_blocks_release(&kv, 1);
    CHECK_EQ_INT(kv.ref[shared0], 0);
    CHECK_EQ_INT(kv.n_free, 12);
    /* nobody holds them, and a new request still finds them */
    CHECK(admit(&kv, 3, p, 12, 12, &cached));
    CHECK_EQ_INT(cached, 8);
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 3)[0], shared0);
    pw_kv_blocks_release(&kv, 3);
    pw_kv_blocks_free(&kv);
}

/* A cached block whose first tokens match the prompt's next ones lends
 * those rows, short of the prompt's last token: a prompt seen before
 * computes one token, and a prompt that grows a finished answer's tokens
 * computes only its new ones. Only a block complete (never a pending one),
 * chained after the same prefix; the lender, even one nobody holds, is
 * held until the copy and never handed out as a new block meanwhile. */
static void test_lending(void) {
    pw_kv_blocks kv;
    CHECK_OK(pw_kv_blocks_init(&kv, 3, 4, 32));
    kv.caching = true;
    CHECK_OK(pw_kv_blocks_reset(&kv, 6));
    int32_t p[12];
    fill(p, 12, 40);
    int64_t cached;
    /* slot 0: a 6-token prompt and 2 generated tokens, then it finishes */
    CHECK(admit(&kv, 0, p, 6, 8, &cached));
    CHECK_EQ_INT(cached, 0);
    /* the prompt computed: the first block is shared, the second is not
     * complete yet and lends nothing */
    pw_kv_blocks_computed(&kv, 0, p, 6);
    CHECK(admit(&kv, 1, p, 6, 8, &cached));
    CHECK_EQ_INT(cached, 4);
    CHECK_EQ_INT(kv.copies[1].rows, 0);
    pw_kv_blocks_release(&kv, 1);
    pw_kv_blocks_computed(&kv, 0, p, 8);
    int32_t second = pw_kv_blocks_row(&kv, 0)[1];
    pw_kv_blocks_release(&kv, 0);
    CHECK_EQ_INT(kv.n_free, 6);
    /* the same prompt: the first block hits, the second lends p[4]; the
     * last token, p[5], is computed */
    CHECK(admit(&kv, 1, p, 6, 8, &cached));
    CHECK_EQ_INT(cached, 5);
    CHECK_EQ_INT(kv.copies[1].from, second);
    CHECK(kv.copies[1].to != second);
    CHECK_EQ_INT(kv.copies[1].rows, 1);
    CHECK_EQ_INT(kv.ref[second], 1);
    CHECK_EQ_INT(kv.n_free, 3); /* the lender and the slot's 2 blocks are out of the list */
    pw_kv_blocks_copied(&kv, 1);
    CHECK_EQ_INT(kv.ref[second], 0);
    CHECK_EQ_INT(kv.pc.state[second], PW_BLOCK_VALID); /* still cached */
    pw_kv_blocks_release(&kv, 1);
    /* the next turn: the answer's tokens and 3 more; the second block is
     * a whole hit, nothing is lent */
    CHECK(admit(&kv, 1, p, 11, 12, &cached));
    CHECK_EQ_INT(cached, 8);
    CHECK_EQ_INT(kv.copies[1].rows, 0);
    pw_kv_blocks_release(&kv, 1);
    /* the same second block after a different first one: nothing */
    int32_t r[12];
    fill(r, 12, 40);
    r[0] = 1;
    CHECK(admit(&kv, 1, r, 8, 8, &cached));
    CHECK_EQ_INT(cached, 0);
    CHECK_EQ_INT(kv.copies[1].rows, 0);
    pw_kv_blocks_release(&kv, 1);
    /* a prompt within one block lends from a first block */
    CHECK(admit(&kv, 1, p, 3, 4, &cached));
    CHECK_EQ_INT(cached, 2);
    pw_kv_blocks_release(&kv, 1);
    /* a request that needs every free block: the lender is one of them,
     * so nothing is lent and the request is admitted all the same */
    CHECK(admit(&kv, 1, p, 3, 24, &cached));
    CHECK_EQ_INT(cached, 0);
    CHECK_EQ_INT(kv.copies[1].rows, 0);
    CHECK_EQ_INT(kv.n_free, 0);
    pw_kv_blocks_release(&kv, 1);
    pw_kv_blocks_free(&kv);

    /* the cache off: nothing is looked up or lent */
    CHECK_OK(pw_kv_blocks_init(&kv, 2, 4, 32));
    CHECK_OK(pw_kv_blocks_reset(&kv, 6));
    CHECK(admit(&kv, 0, p, 6, 8, &cached));
    pw_kv_blocks_computed(&kv, 0, p, 8);
    pw_kv_blocks_release(&kv, 0);
    CHECK(admit(&kv, 0, p, 6, 8, &cached));
    CHECK_EQ_INT(cached, 0);
    CHECK_EQ_INT(kv.copies[0].rows, 0);
    pw_kv_blocks_release(&kv, 0);
    pw_kv_blocks_free(&kv);
}

/* A cancelled prefill's pending blocks leave the table: a request waiting
 * on them computes them itself. */
static void test_cancelled_prefill(void) {
    pw_kv_blocks kv;
    CHECK_OK(pw_kv_blocks_init(&kv, 2, 4, 32));
    kv.caching = true;
    CHECK_OK(pw_kv_blocks_reset(&kv, 8));
    int32_t p[12];
    fill(p, 12, 5);
    int64_t cached;
    CHECK(admit(&kv, 0, p, 12, 12, &cached));
    pw_kv_blocks_computed(&kv, 0, p, 4); /* the first block only */
    CHECK(!admit(&kv, 1, p, 12, 12, &cached));
    pw_kv_blocks_release(&kv, 0);
    CHECK(admit(&kv, 1, p, 12, 12, &cached));
    CHECK_EQ_INT(cached, 4);
    pw_kv_blocks_release(&kv, 1);
    pw_kv_blocks_free(&kv);
}

/* Under pressure the least recently released cached blocks go first, the
 * later blocks of a request before its earlier ones, and a held block
 * never. */
static void test_eviction(void) {
    pw_kv_blocks kv;
    CHECK_OK(pw_kv_blocks_init(&kv, 3, 2, 16));
    kv.caching = true;
    CHECK_OK(pw_kv_blocks_reset(&kv, 6));
    int32_t a[5], b[5], c[12];
    fill(a, 5, 10);
    fill(b, 5, 20);
    fill(c, 12, 30);
    int64_t cached;
    /* a and b: 3 blocks each, 2 full prompt blocks each */
    CHECK(admit(&kv, 0, a, 5, 5, &cached));
    pw_kv_blocks_computed(&kv, 0, a, 5);
    int32_t a0 = pw_kv_blocks_row(&kv, 0)[0], a1 = pw_kv_blocks_row(&kv, 0)[1];
    pw_kv_blocks_release(&kv, 0); /* a is cached, released first */
    CHECK(admit(&kv, 1, b, 5, 5, &cached));
    pw_kv_blocks_computed(&kv, 1, b, 5);
    CHECK_EQ_INT(kv.n_free, 3); /* a's blocks, cached but free */
    /* 2 new blocks: a's partial block (uncached) first, then a's last full block */
    CHECK(admit(&kv, 2, c, 4, 4, &cached));
    CHECK_EQ_INT(cached, 0);
    CHECK_EQ_INT(pw_kv_blocks_row(&kv, 2)[1], a1);
    CHECK_EQ_INT(kv.pc.state[a0], PW_BLOCK_VALID); /* a's first block survives */
    CHECK_EQ_INT(kv.pc.state[a1], PW_BLOCK_PENDING); /* reused, now c's */
    /* b is held: c cannot grow past the last free block, b's blocks untouched */
    CHECK(!pw_kv_blocks_fit(&kv, 2, 8));
    CHECK_ERR(pw_kv_blocks_reserve(&kv, 2, 8), PW_ERR_OOM, "KV cache full");
    CHECK_OK(pw_kv_blocks_reserve(&kv, 2, 6));
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(kv.ref[pw_kv_blocks_row(&kv, 1)[i]], 1);
    CHECK_EQ_INT(kv.pc.state[a0], PW_BLOCK_UNCACHED); /* the last cached one went */
    CHECK(!admit(&kv, 0, a, 5, 5, &cached));      /* nothing left for a */
    pw_kv_blocks_release(&kv, 1);
    pw_kv_blocks_release(&kv, 2);
    CHECK(admit(&kv, 0, b, 5, 5, &cached)); /* b stayed cached */
    CHECK_EQ_INT(cached, 4);
    pw_kv_blocks_release(&kv, 0);
    pw_kv_blocks_free(&kv);
}

/* Every key equal: only the tokens and the chain parent decide. */
static void test_collisions(void) {
    pw_kv_blocks kv;
    CHECK_OK(pw_kv_blocks_init(&kv, 3, 2, 16));
    kv.caching = true;
    CHECK_OK(pw_kv_blocks_reset(&kv, 16));
    kv.pc.hash_mask = 0;
    int32_t ab[5] = {1, 2, 3, 4, 9}, cb[5] = {5, 6, 3, 4, 9}, ad[5] = {1, 2, 7, 8, 9};
    int64_t cached;
    CHECK(admit(&kv, 0, cb, 5, 5, &cached));
    pw_kv_blocks_computed(&kv, 0, cb, 5);
    CHECK(admit(&kv, 1, ad, 5, 5, &cached));
    pw_kv_blocks_computed(&kv, 1, ad, 5);
    CHECK_EQ_INT(cached, 0);
    /* [1 2] hits (from ad); [3 4] is cached only after [5 6]: no hit */
    CHECK(admit(&kv, 2, ab, 5, 5, &cached));
    CHECK_EQ_INT(cached, 2);
    pw_kv_blocks_release(&kv, 2);
    pw_kv_blocks_release(&kv, 1);
    CHECK(admit(&kv, 1, cb, 5, 5, &cached));
    CHECK_EQ_INT(cached, 4);
    pw_kv_blocks_release(&kv, 0);
    pw_kv_blocks_release(&kv, 1);
    pw_kv_blocks_free(&kv);
}

/* ---- the engine ------------------------------------------------------------------------------- */

#define MAX_REQS 8
#define MAX_OUT 24
#define MAX_VOCAB 50000

typedef struct run_result {
    int32_t tokens[MAX_REQS][MAX_OUT];
    int64_t n[MAX_REQS];
    float *first_logits; /* [MAX_REQS][vocab]: what each first token was sampled from */
    int64_t vocab;
    pw_engine_stats st;
} run_result;

typedef struct run_spec {
    pw_graph_mode mode;
    bool cache;
    bool collide;                /* every prefix-cache key equal */
    int64_t block_size;
    int64_t kv_positions;        /* 0: the default */
    int64_t batched_tokens;
    int64_t new_tokens;
    int join[MAX_REQS];          /* step at which each request arrives */
} run_spec;

static pw_status run(pw_model *m, const run_spec *sp, int32_t *const *prompts, const int64_t *lens,
                     int n_req, run_result *res) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = sp->mode;
    cfg.max_num_seqs = MAX_REQS;
    cfg.max_num_batched_tokens = sp->batched_tokens;
    cfg.block_size = sp->block_size;
    if (sp->kv_positions) cfg.kv_cache_positions = sp->kv_positions;
    cfg.max_model_len = 256;
    cfg.prefix_cache = sp->cache;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    PW_TRY(pw_engine_new(m, &cfg, &e));
    if (sp->collide) e->kv.pc.hash_mask = 0;
    res->vocab = pw_model_get_info(m)->vocab;
    memset(res->n, 0, sizeof res->n);
    int64_t ids[MAX_REQS];
    bool has_id[MAX_REQS] = {0}, first_seen[MAX_REQS] = {0}, released[MAX_REQS] = {0};
    int added = 0, step = 0;
    pw_status s = PW_OK;
    while (s == PW_OK && (added < n_req || pw_engine_has_work(e))) {
        for (int i = 0; i < n_req && s == PW_OK; i++)
            if (sp->join[i] == step) {
                s = pw_engine_add_request(e, prompts[i], lens[i], sp->new_tokens, NULL, &ids[i]);
                has_id[i] = s == PW_OK;
                added++;
            }
        const pw_step_token *toks;
        int64_t n = 0;
        if (s == PW_OK) s = pw_engine_step(e, &toks, &n);
        for (int64_t k = 0; k < n && s == PW_OK; k++)
            for (int i = 0; i < n_req; i++) {
                if (!has_id[i] || ids[i] != toks[k].request) continue;
                if (!first_seen[i]) {
                    const float *l;
                    s = pw_engine_last_logits(e, ids[i], &l);
                    if (s == PW_OK)
                        memcpy(res->first_logits + i * res->vocab, l,
                               (size_t)res->vocab * sizeof(float));
                    first_seen[i] = true;
                }
                if (toks[k].finished && s == PW_OK) {
                    /* its blocks go back to the cache, as a server's do */
                    const int32_t *out;
                    s = pw_engine_request_output(e, ids[i], &out, &res->n[i]);
                    if (s == PW_OK && res->n[i] <= MAX_OUT)
                        memcpy(res->tokens[i], out, (size_t)res->n[i] * sizeof(int32_t));
                    if (s == PW_OK) s = pw_engine_release_request(e, ids[i]);
                    released[i] = true;
                }
            }
        if (++step > 20000) s = pw_error(PW_ERR_INTERNAL, "test: engine does not finish");
    }
    for (int i = 0; i < n_req && s == PW_OK; i++)
        if (!released[i]) s = pw_error(PW_ERR_INTERNAL, "test: request %d never finished", i);
    pw_engine_get_stats(e, &res->st);
    pw_engine_free(e);
    return s;
}

static bool same_answers(const run_result *a, const run_result *b, int n_req, const char *what) {
    bool ok = true;
    for (int i = 0; i < n_req; i++) {
        bool same = a->n[i] == b->n[i] &&
                    memcmp(a->tokens[i], b->tokens[i], (size_t)a->n[i] * sizeof(int32_t)) == 0;
        bool same_logits = memcmp(a->first_logits + i * a->vocab, b->first_logits + i * b->vocab,
                                  (size_t)a->vocab * sizeof(float)) == 0;
        if (!same) fprintf(stderr, "%s: request %d: tokens differ\n", what, i);
        if (!same_logits) fprintf(stderr, "%s: request %d: first logits differ\n", what, i);
        ok = ok && same && same_logits;
    }
    return ok;
}

static void tokenize_all(pw_model *m, const char *prefix, const char *const *tails, int n,
                         int32_t **prompts, int64_t *lens) {
    for (int i = 0; i < n; i++) {
        char text[2048];
        snprintf(text, sizeof text, "%s%s", prefix, tails[i]);
        CHECK_OK(pw_model_tokenize(m, text, true, &prompts[i], &lens[i]));
    }
}

static const char *const story_prefix =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her big red ball. One day, her mom said";
static const char *const story_tails[MAX_REQS] = {
    " that they would go", " no", " that the sun", " hello to the dog",
    "", " that the cat was", " yes", " that Ben",
};

static void check_engine(pw_model *m, const char *label, int32_t *const *prompts,
                         const int64_t *lens, int n_req, int64_t new_tokens, bool every_variant) {
    static run_result ref, got;
    int64_t vocab = pw_model_get_info(m)->vocab;
    ref.first_logits = pw_host_calloc((size_t)(MAX_REQS * vocab), sizeof(float));
    got.first_logits = pw_host_calloc((size_t)(MAX_REQS * vocab), sizeof(float));
    CHECK(ref.first_logits && got.first_logits);
    if (!ref.first_logits || !got.first_logits) goto out;
    static const pw_graph_mode modes[] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    for (size_t k = 0; k < PW_ARRAY_LEN(modes); k++) {
        if (!every_variant && modes[k] == PW_GRAPH_PIECEWISE) continue;
        run_spec sp = {.mode = modes[k], .block_size = 4, .batched_tokens = 16,
                       .new_tokens = new_tokens};
        /* the reference: every prompt computed in full in one prefill step,
         * each request on its own; the runs below prefill in chunks of 16
         * after a cached prefix */
        memset(&ref.n, 0, sizeof ref.n);
        for (int i = 0; i < n_req; i++) {
            CHECK(lens[i] <= 128); /* one prefill step */
            static run_result one;
            one.first_logits = ref.first_logits + i * vocab;
            int32_t *const *pi = prompts + i;
            run_spec solo = sp;
            solo.join[0] = 0;
            solo.batched_tokens = 128; /* the whole prompt in one step: no chunks */
            CHECK_OK(run(m, &solo, pi, lens + i, 1, &one));
            ref.n[i] = one.n[0];
            memcpy(ref.tokens[i], one.tokens[0], sizeof one.tokens[0]);
            ref.vocab = vocab;
            CHECK_EQ_INT(one.st.prefix_cache_hits, 0);
        }
        char what[160];
        /* together: the first computes the shared prefix, the rest wait and share it */
        sp.cache = true;
        for (int i = 0; i < n_req; i++) sp.join[i] = 0;
        CHECK_OK(run(m, &sp, prompts, lens, n_req, &got));
        snprintf(what, sizeof what, "%s %s together", label, pw_graph_mode_name(modes[k]));
        CHECK(same_answers(&ref, &got, n_req, what));
        CHECK(got.st.prefix_cache_hits > 0);
        int64_t q = 0;
        for (int i = 0; i < n_req; i++) q += lens[i];
        CHECK_EQ_INT(got.st.prefix_cache_queries, q);
        CHECK(got.st.prefix_cache_hits < q);
        /* the cache off: the same, no lookups */
        sp.cache = false;
        CHECK_OK(run(m, &sp, prompts, lens, n_req, &got));
        snprintf(what, sizeof what, "%s %s cache off", label, pw_graph_mode_name(modes[k]));
        CHECK(same_answers(&ref, &got, n_req, what));
        CHECK_EQ_INT(got.st.prefix_cache_queries, 0);
        if (!every_variant) continue;
        /* staggered: cached prefills run in batches with decodes */
        sp.cache = true;
        for (int i = 0; i < n_req; i++) sp.join[i] = (i % 4) * 5 + i / 4;
        CHECK_OK(run(m, &sp, prompts, lens, n_req, &got));
        snprintf(what, sizeof what, "%s %s staggered", label, pw_graph_mode_name(modes[k]));
        CHECK(same_answers(&ref, &got, n_req, what));
        CHECK(got.st.prefix_cache_hits > 0);
        /* blocks of 16, a cache that must evict, and every key colliding */
        sp.block_size = 16;
        sp.kv_positions = 256;
        CHECK_OK(run(m, &sp, prompts, lens, n_req, &got));
        snprintf(what, sizeof what, "%s %s small cache", label, pw_graph_mode_name(modes[k]));
        CHECK(same_answers(&ref, &got, n_req, what));
        sp.block_size = 4;
        sp.kv_positions = 0;
        sp.collide = true;
        CHECK_OK(run(m, &sp, prompts, lens, n_req, &got));
        snprintf(what, sizeof what, "%s %s colliding keys", label, pw_graph_mode_name(modes[k]));
        CHECK(same_answers(&ref, &got, n_req, what));
        CHECK(got.st.prefix_cache_hits > 0);
    }
out:
    pw_host_free(ref.first_logits);
    pw_host_free(got.first_logits);
}

/* A prompt seen before, after its request finished, computes only its last
 * token (the rest shared or lent), and the next turn of a conversation
 * (the prompt, the answer, a new question) only what is new; both answer,
 * and sample their first token from logits, bit for bit as a full prefill
 * does, in NONE, PIECEWISE and FULL. */
static void check_repeat(pw_model *m, const char *label, const int32_t *prompt, int64_t len) {
    enum { NEW = 12 };
    static run_result ref, got, one;
    int64_t vocab = pw_model_get_info(m)->vocab;
    ref.first_logits = pw_host_calloc((size_t)(3 * vocab), sizeof(float));
    got.first_logits = pw_host_calloc((size_t)(3 * vocab), sizeof(float));
    int32_t *turn = malloc((size_t)(len + NEW + 3) * sizeof *turn);
    CHECK(ref.first_logits && got.first_logits && turn && len >= 3 && len + NEW + 3 <= 128);
    if (!ref.first_logits || !got.first_logits || !turn || len < 3 || len + NEW + 3 > 128)
        goto out;
    static const pw_graph_mode modes[] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    for (size_t k = 0; k < PW_ARRAY_LEN(modes); k++) {
        run_spec solo = {.mode = modes[k], .block_size = 4, .batched_tokens = 128,
                         .new_tokens = NEW};
        int32_t *pp = (int32_t *)prompt;
        one.first_logits = ref.first_logits;
        CHECK_OK(run(m, &solo, &pp, &len, 1, &one));
        ref.n[0] = ref.n[1] = one.n[0];
        memcpy(ref.tokens[0], one.tokens[0], sizeof one.tokens[0]);
        memcpy(ref.tokens[1], one.tokens[0], sizeof one.tokens[0]);
        memcpy(ref.first_logits + vocab, ref.first_logits, (size_t)vocab * sizeof(float));
        /* the next turn: the prompt, the answer, three more tokens */
        int64_t answer = one.n[0], turn_len = len + answer + 3;
        memcpy(turn, prompt, (size_t)len * sizeof *turn);
        memcpy(turn + len, one.tokens[0], (size_t)one.n[0] * sizeof *turn);
        memcpy(turn + len + one.n[0], prompt, 3 * sizeof *turn);
        one.first_logits = ref.first_logits + 2 * vocab;
        CHECK_OK(run(m, &solo, &turn, &turn_len, 1, &one));
        ref.n[2] = one.n[0];
        memcpy(ref.tokens[2], one.tokens[0], sizeof one.tokens[0]);
        ref.vocab = got.vocab = vocab;

        /* one after the other, each arriving once the one before finished */
        run_spec sp = {.mode = modes[k], .block_size = 4, .batched_tokens = 16, .new_tokens = NEW,
                       .cache = true, .join = {0, NEW + 4, 2 * (NEW + 4)}};
        int32_t *prompts[3] = {pp, pp, turn};
        int64_t lens[3] = {len, len, turn_len};
        CHECK_OK(run(m, &sp, prompts, lens, 2, &got));
        char what[160];
        snprintf(what, sizeof what, "%s %s repeated prompt", label, pw_graph_mode_name(modes[k]));
        CHECK(same_answers(&ref, &got, 2, what));
        CHECK_EQ_INT(got.st.prefix_cache_hits, len - 1);
        CHECK_EQ_INT(got.st.prompt_tokens, len + 1);
        CHECK_OK(run(m, &sp, prompts, lens, 3, &got));
        snprintf(what, sizeof what, "%s %s next turn", label, pw_graph_mode_name(modes[k]));
        CHECK(same_answers(&ref, &got, 3, what));
        /* the next turn finds the first turn's full blocks: its prompt and
         * its answer but the last token, never computed */
        CHECK_EQ_INT(got.st.prefix_cache_hits, (len - 1) + (len + answer - 1) / 4 * 4);
    }
out:
    free(turn);
    pw_host_free(ref.first_logits);
    pw_host_free(got.first_logits);
}

static void test_stories260k(void) {
    char path[1024];
    if (!pw_test_shared_path("models/stories260K.gguf", path, sizeof path)) {
        pw_test_skip_part("stories260K.gguf not found under ../shared/models: the engine checks");
        return;
    }
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return;
    int32_t *prompts[MAX_REQS];
    int64_t lens[MAX_REQS];
    tokenize_all(m, story_prefix, story_tails, MAX_REQS, prompts, lens);
    check_engine(m, "stories260K", prompts, lens, MAX_REQS, 12, true);
    /* the same prompt many times over: the answers of n choices */
    int32_t *same[MAX_REQS];
    int64_t same_lens[MAX_REQS];
    for (int i = 0; i < MAX_REQS; i++) {
        same[i] = prompts[0];
        same_lens[i] = lens[0];
    }
    check_engine(m, "stories260K one prompt", same, same_lens, 4, 12, false);
    check_repeat(m, "stories260K", prompts[0], lens[0]);
    for (int i = 0; i < MAX_REQS; i++) free(prompts[i]);
    pw_model_free(m);
}

/* SmolLM2 from models/, or PW_SMOLLM2_GGUF (the sanitizer run names a
 * missing file: an unoptimised build takes minutes over it). */
static void test_smollm2(void) {
    char path[4096];
    if (!pw_test_model_path("PW_SMOLLM2_GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", path,
                            sizeof path)) {
        pw_test_skip_part("SmolLM2-135M-Instruct.Q4_1.gguf not fetched (scripts/fetch-model.sh) "
                          "or PW_SMOLLM2_GGUF unreadable: the chat-template checks");
        return;
    }
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return;
    static const char *const questions[3] = {"What is a cat?", "Name a colour.",
                                             "Say hello."};
    int32_t *prompts[3];
    int64_t lens[3];
    for (int i = 0; i < 3; i++) {
        pw_chat_message msgs[2] = {
            {"system", "You are a helpful assistant who answers briefly and kindly, in plain "
                       "words, and never makes things up."},
            {"user", questions[i]}};
        CHECK_OK(pw_model_tokenize_chat(m, msgs, 2, true, true, &prompts[i], &lens[i]));
    }
    check_engine(m, "SmolLM2", prompts, lens, 3, 6, false);
    check_repeat(m, "SmolLM2", prompts[0], lens[0]);
    for (int i = 0; i < 3; i++) free(prompts[i]);
    pw_model_free(m);
}

int main(void) {
    test_sharing();
    test_lending();
    test_cancelled_prefill();
    test_eviction();
    test_collisions();
    test_stories260k();
    test_smollm2();
    return pw_test_finish("model_prefix_cache");
}
