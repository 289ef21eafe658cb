/* What a request asks of the sampler, through the engine:
 *  - logprobs and top logprobs are bitwise the same in NONE, PIECEWISE
 *    and FULL, for a request alone or in a batch with others that prefill
 *    and decode beside it, and when its prompt's prefix comes from the
 *    prefix cache;
 *  - a sampled request's tokens depend on its seed alone: the same seed
 *    gives the same tokens alone, in a batch, added after other requests
 *    (another request id), and twice in one batch; another seed differs;
 *  - logit_bias forces and bans tokens; bad sampling parameters are
 *    refused with a message. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#define MAX_REQS 4
#define MAX_OUT 16
#define TOP 5

typedef struct token_record {
    int32_t token;
    float logprob;
    int32_t n_top;
    pw_token_logprob top[TOP];
} token_record;

typedef struct request_run {
    token_record rec[MAX_OUT];
    int64_t n;
} request_run;

static const char *const prompt_text[MAX_REQS] = {
    "Once upon a time",
    "Lily and Ben went to the park to play with a big red ball and",
    "The cat sat",
    "Tom had a dog. The dog",
};

/* Runs requests [0, n) (prompt i with sampling sp[i], added at step
 * join[i]) in `mode` and records each one's tokens and logprobs. */
static int64_t last_cache_hits; /* prefix-cache hit tokens of the last run */

static pw_status run(pw_model *m, pw_graph_mode mode, const pw_sampling_params *sp,
                     const int *prompt, const int *join, int n, request_run *out) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = MAX_REQS;
    cfg.max_num_batched_tokens = 8; /* long prompts prefill in chunks beside decodes */
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    pw_status s = pw_engine_new(m, &cfg, &e);
    if (s != PW_OK) return s;
    memset(out, 0, sizeof *out * (size_t)n);
    int64_t ids[MAX_REQS] = {-1, -1, -1, -1};
    int added = 0;
    for (int step = 0; s == PW_OK && (added < n || pw_engine_has_work(e)); step++) {
        for (int i = 0; i < n && s == PW_OK; i++) {
            if (join[i] != step) continue;
            int32_t *toks;
            int64_t len;
            s = pw_model_tokenize(m, prompt_text[prompt[i]], true, &toks, &len);
            if (s == PW_OK) s = pw_engine_add_request(e, toks, len, MAX_OUT, &sp[i], &ids[i]);
            free(toks);
            added++;
        }
        const pw_step_token *t;
        int64_t nt = 0;
        if (s == PW_OK) s = pw_engine_step(e, &t, &nt);
        for (int64_t k = 0; k < nt; k++)
            for (int i = 0; i < n; i++) {
                if (ids[i] < 0 || ids[i] != t[k].request || out[i].n >= MAX_OUT) continue;
                token_record *r = &out[i].rec[out[i].n++];
                r->token = t[k].token;
                r->logprob = t[k].logprob;
                r->n_top = t[k].n_top;
                if (t[k].n_top > TOP || (t[k].n_top > 0 && !t[k].top))
                    s = pw_error(PW_ERR_INTERNAL, "test: bad top list");
                else if (t[k].n_top)
                    memcpy(r->top, t[k].top, (size_t)t[k].n_top * sizeof *r->top);
            }
        if (step > 1000) s = pw_error(PW_ERR_INTERNAL, "test: the engine does not finish");
    }
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    last_cache_hits = st.prefix_cache_hits;
    pw_engine_free(e);
    return s;
}

static bool same_run(const request_run *a, const request_run *b) {
    /* records are memset, then filled field by field: compare bits */
    return a->n == b->n && memcmp(a->rec, b->rec, (size_t)a->n * sizeof a->rec[0]) == 0;
}

static bool same_tokens(const request_run *a, const request_run *b) {
    if (a->n != b->n) return false;
    for (int64_t i = 0; i < a->n; i++)
        if (a->rec[i].token != b->rec[i].token) return false;
    return true;
}

/* Request 0 greedy with 5 top logprobs: alone, and with three others
 * (one sampled, one greedy with logprobs, one long prompt prefilling in
 * chunks), in every mode: every logprob bit is the same. */
static void check_logprobs_bitwise(pw_model *m, const char *label) {
    pw_sampling_params sp[MAX_REQS] = {
        {.logprobs = true, .top_logprobs = TOP},
        {.temperature = 0.8f, .seed = 5, .logprobs = true, .top_logprobs = 2},
        {.logprobs = true},
        {0},
    };
    int prompt[MAX_REQS] = {0, 1, 2, 3}, join_solo[1] = {0}, join_mix[MAX_REQS] = {2, 0, 1, 3};
    static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    static request_run ref[1], solo[1], mix[MAX_REQS], mix_ref[MAX_REQS];
    CHECK_OK(run(m, PW_GRAPH_NONE, sp, prompt, join_solo, 1, ref));
    CHECK(ref[0].n > 0);
    /* the chosen token's logprob is the first of the top list, greedy */
    for (int64_t i = 0; i < ref[0].n; i++) {
        CHECK_EQ_INT(ref[0].rec[i].n_top, TOP);
        CHECK_EQ_INT(ref[0].rec[i].top[0].token, ref[0].rec[i].token);
        CHECK(ref[0].rec[i].top[0].logprob == ref[0].rec[i].logprob);
        CHECK(ref[0].rec[i].logprob <= 0.0f && ref[0].rec[i].top[4].logprob <= ref[0].rec[i].logprob);
    }
    CHECK_OK(run(m, PW_GRAPH_NONE, sp, prompt, join_mix, MAX_REQS, mix_ref));
    for (int k = 0; k < 3; k++) {
        CHECK_OK(run(m, modes[k], sp, prompt, join_solo, 1, solo));
        CHECK_OK(run(m, modes[k], sp, prompt, join_mix, MAX_REQS, mix));
        bool a = same_run(&solo[0], &ref[0]), b = same_run(&mix[0], &ref[0]);
        bool c = true;
        for (int i = 1; i < MAX_REQS; i++) c = c && same_run(&mix[i], &mix_ref[i]);
        if (!a || !b || !c)
            fprintf(stderr, "%s: logprobs differ in %s (solo %d, batched %d, others %d)\n", label,
                    pw_graph_mode_name(modes[k]), a, b, c);
        CHECK(a && b && c);
    }
    /* a request without logprobs gets none */
    CHECK_EQ_INT(mix_ref[3].rec[0].n_top, 0);
    CHECK(mix_ref[3].rec[0].logprob == 0.0f);
    CHECK_EQ_INT(mix_ref[2].rec[0].n_top, 0);
    CHECK(mix_ref[2].rec[0].logprob < 0.0f);
}

/* A long prompt asked again after it finished finds its prefix in the
 * prefix cache: the logprobs are the same bits as computing it, in every
 * mode. */
static void check_logprobs_cache_hit(pw_model *m, const char *label) {
    pw_sampling_params sp[2] = {{.logprobs = true, .top_logprobs = TOP},
                                {.logprobs = true, .top_logprobs = TOP}};
    int prompt[2] = {1, 1}, join[2] = {0, 40};
    static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    for (int k = 0; k < 3; k++) {
        static request_run out[2];
        CHECK_OK(run(m, modes[k], sp, prompt, join, 2, out));
        bool same = same_run(&out[0], &out[1]);
        if (!same || last_cache_hits == 0)
            fprintf(stderr, "%s: %s: a cache hit's logprobs differ (%d) or no hit (%lld)\n",
                    label, pw_graph_mode_name(modes[k]), !same, (long long)last_cache_hits);
        CHECK(same && last_cache_hits > 0);
    }
}

/* A seeded sampled request gives the same tokens alone, in a batch, with
 * another request id, and beside its twin. */
static void check_seed_reproducible(pw_model *m, const char *label) {
    pw_sampling_params hot = {.temperature = 1.5f, .seed = 1234};
    pw_sampling_params sp[MAX_REQS] = {hot, {.temperature = 1.0f, .seed = 99}, hot, {0}};
    int prompt[MAX_REQS] = {0, 1, 0, 2};
    static request_run solo[1], late[MAX_REQS], twins[MAX_REQS], other[1];
    int join_solo[1] = {0};
    CHECK_OK(run(m, PW_GRAPH_FULL_AND_PIECEWISE, sp, prompt, join_solo, 1, solo));
    /* request 0 joins last: its id is 3, and others are mid-decode */
    int join_late[MAX_REQS] = {4, 0, 9, 1};
    CHECK_OK(run(m, PW_GRAPH_FULL_AND_PIECEWISE, sp, prompt, join_late, MAX_REQS, late));
    int join_twins[MAX_REQS] = {0, 0, 0, 0};
    CHECK_OK(run(m, PW_GRAPH_NONE, sp, prompt, join_twins, MAX_REQS, twins));
    bool ok = same_tokens(&solo[0], &late[0]) && same_tokens(&solo[0], &late[2]) &&
              same_tokens(&solo[0], &twins[0]) && same_tokens(&solo[0], &twins[2]);
    if (!ok) fprintf(stderr, "%s: a seeded request's tokens changed with its company\n", label);
    CHECK(ok);
    pw_sampling_params sp2[1] = {{.temperature = 1.5f, .seed = 1235}};
    CHECK_OK(run(m, PW_GRAPH_FULL_AND_PIECEWISE, sp2, prompt, join_solo, 1, other));
    CHECK(!same_tokens(&solo[0], &other[0]));
}

static void check_logit_bias(pw_model *m) {
    int prompt[1] = {0}, join[1] = {0};
    static request_run plain[1], forced[1], banned[1];
    pw_sampling_params sp = {0};
    CHECK_OK(run(m, PW_GRAPH_NONE, &sp, prompt, join, 1, plain));
    /* +100 on one ordinary token: every token is that one */
    int32_t *ids;
    int64_t n;
    CHECK_OK(pw_model_tokenize(m, "e", false, &ids, &n));
    pw_logit_bias force = {ids[n - 1], 100.0f};
    free(ids);
    sp.logit_bias = &force;
    sp.n_logit_bias = 1;
    CHECK_OK(run(m, PW_GRAPH_NONE, &sp, prompt, join, 1, forced));
    CHECK_EQ_INT(forced[0].n, MAX_OUT);
    for (int64_t i = 0; i < forced[0].n; i++) CHECK_EQ_INT(forced[0].rec[i].token, force.token);
    /* -100 on the greedy first token: another first token */
    pw_logit_bias ban = {plain[0].rec[0].token, -100.0f};
    sp.logit_bias = &ban;
    CHECK_OK(run(m, PW_GRAPH_NONE, &sp, prompt, join, 1, banned));
    CHECK(banned[0].rec[0].token != ban.token);
}

static void check_bad_params(pw_model *m) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = PW_GRAPH_NONE;
    cfg.max_num_seqs = 1;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (!e) return;
    int32_t prompt[2] = {1, 40};
    int64_t id, vocab = pw_model_get_info(m)->vocab;
    pw_logit_bias out_of_vocab = {(int32_t)vocab, 1.0f}, too_big = {5, 101.0f};
    static pw_logit_bias many[PW_MAX_LOGIT_BIAS + 1];
    pw_sampling_params sp = {.logit_bias = &out_of_vocab, .n_logit_bias = 1};
    CHECK_ERR(pw_engine_add_request(e, prompt, 2, 4, &sp, &id), PW_ERR_INVALID_ARG,
              "outside the vocabulary");
    sp.logit_bias = &too_big;
    CHECK_ERR(pw_engine_add_request(e, prompt, 2, 4, &sp, &id), PW_ERR_INVALID_ARG,
              "allowed -100 to 100");
    sp.logit_bias = many;
    sp.n_logit_bias = PW_MAX_LOGIT_BIAS + 1;
    CHECK_ERR(pw_engine_add_request(e, prompt, 2, 4, &sp, &id), PW_ERR_INVALID_ARG, "at most 300");
    sp = (pw_sampling_params){.presence_penalty = 2.5f};
    CHECK_ERR(pw_engine_add_request(e, prompt, 2, 4, &sp, &id), PW_ERR_INVALID_ARG, "[-2, 2]");
    sp = (pw_sampling_params){.frequency_penalty = NAN};
    CHECK_ERR(pw_engine_add_request(e, prompt, 2, 4, &sp, &id), PW_ERR_INVALID_ARG, "[-2, 2]");
    sp = (pw_sampling_params){.logprobs = true, .top_logprobs = PW_MAX_TOP_LOGPROBS + 1};
    CHECK_ERR(pw_engine_add_request(e, prompt, 2, 4, &sp, &id), PW_ERR_INVALID_ARG,
              "top_logprobs");
    /* nothing was queued by the refusals */
    CHECK(!pw_engine_has_work(e));
    pw_engine_free(e);
}

static void check_model(pw_model *m, const char *label) {
    check_logprobs_bitwise(m, label);
    check_logprobs_cache_hit(m, label);
    check_seed_reproducible(m, label);
    check_logit_bias(m);
    check_bad_params(m);
}

int main(void) {
    char path[] = "/tmp/pw_test_sampling_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    pw_tiny_llama_config tiny = pw_tiny_llama_default_config();
    CHECK_OK(pw_tiny_llama_write_file(&tiny, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (m) check_model(m, "tiny");
    pw_model_free(m);
    unlink(path);
    char shared[1024];
    if (pw_test_shared_path("models/stories260K.gguf", shared, sizeof shared)) {
        m = NULL;
        CHECK_OK(pw_model_load(shared, &m));
        if (m) check_model(m, "stories260K");
        pw_model_free(m);
    } else {
        pw_test_skip_part("stories260K.gguf not found under ../shared/models: its sampling checks");
    }
    return pw_test_finish("model_engine_sampling");
}
