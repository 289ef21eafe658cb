/* piecewise against llama.cpp on real GGUF files: a peer figure.
 *
 * tests/data/llamacpp/<model stem>.json holds, for one model file, what
 * llama.cpp's llama-server gave (scripts/llamacpp-reference.py says exactly
 * how): token ids for fixed strings, and greedy continuations of several
 * prompts, sent as token ids, with the top-2 logit margin of every step.
 * For each json whose model is in models/ (PW_MODELS_DIR overrides; for
 * one file, PW_SMOLLM2_GGUF or PW_GEMMA3_GGUF), with the same sha256:
 *
 *   1. asserted: piecewise's tokenizer gives the reference ids for every
 *      string, with and without BOS (as the model asks, like llama.cpp's
 *      add_special) and special-token parsing; the greedy continuations
 *      agree in NONE, PIECEWISE and FULL on every token;
 *   2. reported, not asserted: whether piecewise's greedy continuation of
 *      each prompt_ids equals llama.cpp's up to the first near-tie (margin
 *      below NEAR_TIE_LOGITS), and, along llama.cpp's own tokens, how far
 *      piecewise's top-2 logit difference is from llama.cpp's margin.
 *
 * Correctness is judged against the float64 forward instead
 * (model_float64_golden, docs/models.md "What proves a family"): llama.cpp
 * quantizes activations too, so its tokens are a peer's, not the arbiter.
 *
 * Why the near-tie is 0.75 logits and not the strict 0.02: two correct
 * implementations that quantize activations to 8 bits (llama.cpp does, for
 * Q4_1/Q8_0 weights; so does piecewise) differ by more. Measured on
 * SmolLM2-135M-Instruct Q4_1 along the 232 reference steps: llama.cpp
 * itself, run with an f32 KV cache and no flash attention instead of its
 * default f16 cache, moves the top-2 margin by median 0.099, max 0.41
 * logits and changes the argmax at 7 steps (margins up to 0.26);
 * piecewise moves it by median 0.085, max 0.51 (6 steps, margins up to
 * 0.08). At 0.02 the greedy comparison failed on 2 of 8 prompts, at steps
 * where llama.cpp disagrees with itself the same way. The json keeps the
 * strict 0.02 (near_tie_margin) as a fact about the reference; this test
 * reports at the noise floor, with headroom, and prints for each prompt
 * whether the strict 0.02 rule holds (NONE mode; reported, not asserted). llama.cpp's own builds differ
 * as much: the references come from its AVX-512 build, and the same
 * version's AVX2 build first differs from them at 5 of 8 prompts per model
 * at margins of 0.046-0.184 (BENCHMARKS.md, "Correctness against
 * llama.cpp"; scripts/llamacpp-reference-diff.py).
 *
 * A model piecewise cannot load yet (PW_ERR_UNSUPPORTED: an architecture or
 * weight type it does not read) is skipped with the loader's message, as
 * is a json whose model is absent. The test is skipped when no model is
 * checked at all, or when piecewise was built without cJSON. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "engine_runs.h"
#include "internal.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#define REFERENCE_DIR PW_TEST_DATA_DIR "/llamacpp"
#define MODELS_DIR PW_TEST_DATA_DIR "/../../models"
/* See the comment at the top for how these were measured. */
#define NEAR_TIE_LOGITS 0.75
#define MEAN_ERROR_LOGITS 0.2
/* The strict near-tie, whose verdict per prompt is printed. */
#define STRICT_NEAR_TIE 0.02

/* Differences from llama.cpp beyond the noise floor: printed, not failures. */
static long long peer_differences;

#ifndef PW_HAVE_CJSON
int main(void) {
    pw_test_skip("built without cJSON (install libcjson-dev); llama.cpp references not checked");
    return 77;
}
#else
#include <cjson/cJSON.h>

/* ---- reading the reference ---- */

/* A cJSON array of integers as a malloc'ed int32 array (*n entries). */
static int32_t *int_array(const cJSON *a, int64_t *n) {
    *n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (*n < 0) return NULL;
    int32_t *out = malloc((size_t)(*n ? *n : 1) * sizeof *out);
    int64_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) out[i++] = (int32_t)v->valuedouble;
    return out;
}

static void print_ids(const char *label, const int32_t *ids, int64_t n) {
    fprintf(stderr, "    %s:", label);
    for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* ---- tokenizer ---- */

static void check_tokenizer(const char *model_path, const cJSON *entries, const char *stem) {
    pw_gguf *g = NULL;
    pw_tokenizer *t = NULL;
    CHECK_OK(pw_gguf_open(model_path, &g));
    if (g) CHECK_OK(pw_tokenizer_new(g, &t));
    if (!t) {
        pw_gguf_free(g);
        return;
    }
    int checked = 0, same = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, entries) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(e, "text");
        const cJSON *add = cJSON_GetObjectItemCaseSensitive(e, "add_special");
        const cJSON *parse = cJSON_GetObjectItemCaseSensitive(e, "parse_special");
        int64_t n_ref;
        int32_t *ref = int_array(cJSON_GetObjectItemCaseSensitive(e, "ids"), &n_ref);
        CHECK(cJSON_IsString(text) && cJSON_IsBool(add) && cJSON_IsBool(parse) && ref);
        if (!cJSON_IsString(text) || !cJSON_IsBool(add) || !cJSON_IsBool(parse) || !ref) {
            free(ref);
            continue;
        }
        /* llama.cpp's add_special: BOS/EOS only where the model asks for them */
        unsigned flags = 0;
        if (cJSON_IsTrue(add)) flags |= PW_TOKENIZE_ADD_SPECIAL;
        if (cJSON_IsTrue(parse)) flags |= PW_TOKENIZE_PARSE_SPECIAL;
        int32_t *ids = NULL;
        int64_t n = 0;
        CHECK_OK(pw_tokenizer_encode(t, text->valuestring, strlen(text->valuestring), flags, &ids,
                                     &n));
        checked++;
        pw_test_checks++;
        if (n == n_ref && memcmp(ids, ref, (size_t)n * sizeof *ids) == 0) {
            same++;
        } else {
            pw_test_failures++;
            fprintf(stderr, "%s: tokenize \"%s\" (add_special %d, parse_special %d) differs:\n",
                    stem, text->valuestring, cJSON_IsTrue(add), cJSON_IsTrue(parse));
            print_ids("llama.cpp", ref, n_ref);
            print_ids("piecewise", ids, n);
        }
        pw_host_free(ids);
        free(ref);
    }
    printf("%s: tokenizer: %d of %d strings give llama.cpp's ids\n", stem, same, checked);
    pw_tokenizer_free(t);
    pw_gguf_free(g);
}

/* ---- greedy continuations ---- */

typedef struct reference_run {
    const char *prompt;
    int32_t *prompt_ids, *tokens, (*top2)[2];
    double *margins;
    int64_t n_prompt, n_tokens;
} reference_run;

static void free_runs(reference_run *r, int n) {
    for (int i = 0; i < n; i++) {
        free(r[i].prompt_ids);
        free(r[i].tokens);
        free(r[i].top2);
        free(r[i].margins);
    }
    free(r);
}

/* The greedy entries of the reference; NULL (a failed check) if malformed. */
static reference_run *read_runs(const cJSON *greedy, int *n_runs) {
    *n_runs = cJSON_IsArray(greedy) ? cJSON_GetArraySize(greedy) : 0;
    CHECK(*n_runs > 0);
    if (*n_runs <= 0) return NULL;
    reference_run *runs = calloc((size_t)*n_runs, sizeof *runs);
    int i = 0;
    const cJSON *g;
    bool ok = true;
    cJSON_ArrayForEach(g, greedy) {
        reference_run *r = &runs[i++];
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(g, "prompt");
        const cJSON *margins = cJSON_GetObjectItemCaseSensitive(g, "margins");
        const cJSON *top2 = cJSON_GetObjectItemCaseSensitive(g, "top2");
        r->prompt = cJSON_IsString(prompt) ? prompt->valuestring : "?";
        r->prompt_ids = int_array(cJSON_GetObjectItemCaseSensitive(g, "prompt_ids"), &r->n_prompt);
        r->tokens = int_array(cJSON_GetObjectItemCaseSensitive(g, "tokens"), &r->n_tokens);
        if (!r->prompt_ids || r->n_prompt < 1 || !r->tokens || r->n_tokens < 1 ||
            !cJSON_IsArray(margins) || cJSON_GetArraySize(margins) != r->n_tokens ||
            !cJSON_IsArray(top2) || cJSON_GetArraySize(top2) != r->n_tokens) {
            ok = false;
            continue;
        }
        r->margins = malloc((size_t)r->n_tokens * sizeof *r->margins);
        r->top2 = malloc((size_t)r->n_tokens * sizeof *r->top2);
        for (int64_t k = 0; k < r->n_tokens; k++) {
            const cJSON *m = cJSON_GetArrayItem(margins, (int)k);
            const cJSON *pair = cJSON_GetArrayItem(top2, (int)k);
            r->margins[k] = cJSON_IsNumber(m) ? m->valuedouble : -1;
            r->top2[k][0] = (int32_t)cJSON_GetArrayItem(pair, 0)->valuedouble;
            r->top2[k][1] = (int32_t)cJSON_GetArrayItem(pair, 1)->valuedouble;
        }
    }
    CHECK(ok);
    if (!ok) {
        free_runs(runs, *n_runs);
        return NULL;
    }
    return runs;
}

/* Every prompt at once in one engine (the kernels are batch-invariant, so
 * each continuation is what it would be alone); out[i] gets run i's
 * tokens, n_out[i] their count. */
static pw_status continue_all(pw_model *m, pw_graph_mode mode, const reference_run *runs,
                              int n_runs, int32_t **out, int64_t *n_out) {
    /* each request may run to the longest continuation: the reference
     * stopped early only at an end of generation, and so must piecewise */
    int64_t longest = 0, max_new = 0;
    for (int i = 0; i < n_runs; i++)
        if (runs[i].n_tokens > max_new) max_new = runs[i].n_tokens;
    for (int i = 0; i < n_runs; i++)
        if (runs[i].n_prompt + max_new > longest) longest = runs[i].n_prompt + max_new;
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = n_runs;
    cfg.max_model_len = (longest + 15) / 16 * 16;
    cfg.kv_cache_positions = cfg.max_model_len * n_runs;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    PW_TRY(pw_engine_new(m, &cfg, &e));
    int64_t *ids = calloc((size_t)n_runs, sizeof *ids);
    pw_status s = PW_OK;
    for (int i = 0; i < n_runs && s == PW_OK; i++)
        s = pw_engine_add_request(e, runs[i].prompt_ids, runs[i].n_prompt, max_new, NULL, &ids[i]);
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t k;
        s = pw_engine_step(e, &t, &k);
    }
    for (int i = 0; i < n_runs && s == PW_OK; i++) {
        const int32_t *toks;
        s = pw_engine_request_output(e, ids[i], &toks, &n_out[i]);
        if (s == PW_OK) {
            out[i] = malloc((size_t)(n_out[i] ? n_out[i] : 1) * sizeof(int32_t));
            memcpy(out[i], toks, (size_t)n_out[i] * sizeof(int32_t));
        }
    }
    free(ids);
    pw_engine_free(e);
    return s;
}

/* The strict rule, reported and not asserted (see the top): does
 * `got` (n tokens) equal the reference up to its first step of margin
 * below near_tie_margin? Prints the verdict and returns it. */
static bool report_strict_rule(const reference_run *r, int index, const char *stem,
                              const int32_t *got, int64_t n, double rule) {
    int64_t diff = -1, tie = -1;
    for (int64_t s = 0; s < r->n_tokens && diff < 0; s++)
        if (s >= n || got[s] != r->tokens[s]) diff = s;
    if (diff < 0 && n != r->n_tokens) diff = n < r->n_tokens ? n : r->n_tokens;
    for (int64_t s = 0; s < r->n_tokens && tie < 0; s++)
        if (r->margins[s] < rule) tie = s;
    bool ok = diff < 0 || (tie >= 0 && tie <= diff);
    if (diff < 0)
        printf("%s: prompt %d: the %.2f rule: equal for all %lld tokens\n", stem, index, rule,
               (long long)r->n_tokens);
    else
        printf("%s: prompt %d: the %.2f rule: %s (first difference at step %lld, llama.cpp "
               "margin %.4f%s)\n",
               stem, index, rule, ok ? "met" : "not met", (long long)diff,
               diff < r->n_tokens ? r->margins[diff] : 0.0,
               ok ? ", after a near-tie" : "");
    return ok;
}

/* Steps compared for run r: those before the first near-tie, or all. */
static int64_t compared_steps(const reference_run *r) {
    for (int64_t k = 0; k < r->n_tokens; k++)
        if (r->margins[k] < NEAR_TIE_LOGITS) return k;
    return r->n_tokens;
}

/* Check 3 for one run: every prefix prompt_ids + tokens[0..s) is a request
 * of one new token in one engine (NONE), and its last logits are compared
 * with step s of the reference. Adds to *n_steps and *sum_error. */
static void check_forced(pw_model *m, const reference_run *r, int index, const char *stem,
                         int64_t *n_steps, double *sum_error) {
    pw_engine_config cfg;
    teacher_forced_config(&cfg, r->n_prompt, r->n_tokens);
    pw_engine *e = NULL;
    CHECK_OK(pw_engine_new(m, &cfg, &e));
    if (!e) return;
    int32_t vocab = pw_model_get_info(m)->vocab;
    int32_t *prefix = malloc((size_t)(r->n_prompt + r->n_tokens) * sizeof *prefix);
    memcpy(prefix, r->prompt_ids, (size_t)r->n_prompt * sizeof *prefix);
    memcpy(prefix + r->n_prompt, r->tokens, (size_t)r->n_tokens * sizeof *prefix);
    int64_t *ids = malloc((size_t)r->n_tokens * sizeof *ids);
    pw_status s = PW_OK;
    for (int64_t k = 0; k < r->n_tokens && s == PW_OK; k++)
        s = pw_engine_add_request(e, prefix, r->n_prompt + k, 1, NULL, &ids[k]);
    CHECK_OK(s);
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t n;
        s = pw_engine_step(e, &t, &n);
        CHECK_OK(s);
        for (int64_t j = 0; j < n && s == PW_OK; j++) {
            int64_t k = 0;
            while (k < r->n_tokens && ids[k] != t[j].request) k++;
            const float *logits;
            CHECK(k < r->n_tokens);
            if (k == r->n_tokens || pw_engine_last_logits(e, ids[k], &logits) != PW_OK) continue;
            int32_t a = r->top2[k][0], b = r->top2[k][1], best = 0;
            for (int32_t v = 1; v < vocab; v++)
                if (logits[v] > logits[best]) best = v;
            double margin = (double)logits[a] - logits[b], error = fabs(margin - r->margins[k]);
            *sum_error += error;
            (*n_steps)++;
            if (error > NEAR_TIE_LOGITS) {
                peer_differences++;
                printf(
                        "%s: prompt %d \"%s\" step %lld: logit(%d) - logit(%d) is %.4f in "
                        "piecewise, %.4f in llama.cpp\n",
                        stem, index, r->prompt, (long long)k, a, b, margin, r->margins[k]);
            }
            if (r->margins[k] >= NEAR_TIE_LOGITS && best != a) {
                peer_differences++;
                printf(
                        "%s: prompt %d \"%s\" step %lld: piecewise's argmax is %d (logit %.4f), "
                        "llama.cpp's %d (piecewise logit %.4f, llama.cpp margin %.4f)\n",
                        stem, index, r->prompt, (long long)k, best, logits[best], a, logits[a],
                        r->margins[k]);
            }
        }
    }
    free(ids);
    free(prefix);
    pw_engine_free(e);
}

static void check_greedy(pw_model *m, const cJSON *greedy, const char *stem) {
    peer_differences = 0;
    int n_runs;
    reference_run *runs = read_runs(greedy, &n_runs);
    if (!runs) return;
    static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    static const char *mode_names[3] = {"NONE", "PIECEWISE", "FULL"};
    int32_t **out[3];
    int64_t *n_out[3];
    for (int k = 0; k < 3; k++) {
        out[k] = calloc((size_t)n_runs, sizeof *out[k]);
        n_out[k] = calloc((size_t)n_runs, sizeof *n_out[k]);
        CHECK_OK(continue_all(m, modes[k], runs, n_runs, out[k], n_out[k]));
    }
    int64_t total = 0, matched = 0, rule_met = 0;
    for (int i = 0; i < n_runs; i++) {
        const reference_run *r = &runs[i];
        int64_t steps = compared_steps(r);
        bool all_match = true;
        for (int k = 0; k < 3; k++) {
            const int32_t *got = out[k][i];
            int64_t n = n_out[k][i];
            if (!got) { /* the engine failed: reported above */
                all_match = false;
                continue;
            }
            /* the modes agree on every token, near-ties included */
            if (k > 0 && out[0][i]) {
                pw_test_checks++;
                if (n != n_out[0][i] || memcmp(got, out[0][i], (size_t)n * sizeof *got) != 0) {
                    pw_test_failures++;
                    fprintf(stderr, "%s: prompt %d: %s differs from NONE\n", stem, i,
                            mode_names[k]);
                    print_ids("NONE", out[0][i], n_out[0][i]);
                    print_ids(mode_names[k], got, n);
                }
            }
            int64_t bad = -1;
            for (int64_t s = 0; s < steps && bad < 0; s++)
                if (s >= n || got[s] != r->tokens[s]) bad = s;
            /* the reference ended (end of generation) and so must piecewise */
            if (bad < 0 && steps == r->n_tokens && n != r->n_tokens) bad = n < steps ? n : steps;
            if (bad >= 0) {
                all_match = false;
                peer_differences++;
                printf(
                        "%s: prompt %d \"%s\" in %s: step %lld differs from llama.cpp "
                        "(llama.cpp %d, top two %d %d, margin %.4f; piecewise %d)\n",
                        stem, i, r->prompt, mode_names[k], (long long)bad,
                        bad < r->n_tokens ? r->tokens[bad] : -1,
                        bad < r->n_tokens ? r->top2[bad][0] : -1,
                        bad < r->n_tokens ? r->top2[bad][1] : -1,
                        bad < r->n_tokens ? r->margins[bad] : 0.0, bad < n ? got[bad] : -1);
                print_ids("llama.cpp", r->tokens, r->n_tokens);
                print_ids("piecewise", got, n);
            }
        }
        if (out[0][i]) rule_met += report_strict_rule(r, i, stem, out[0][i], n_out[0][i], STRICT_NEAR_TIE);
        matched += all_match;
        total += steps;
        printf("%s: prompt %d: %lld of %lld steps compared%s\n", stem, i, (long long)steps,
               (long long)r->n_tokens, steps < r->n_tokens ? " (then a near-tie)" : "");
    }
    printf("%s: greedy: %lld of %d prompts equal llama.cpp up to the first near-tie "
           "(margin < %.2f; %lld steps) in NONE, PIECEWISE and FULL\n",
           stem, (long long)matched, n_runs, NEAR_TIE_LOGITS, (long long)total);
    printf("%s: the strict rule (near-tie below %.2f, reported, not asserted): met on %lld of %d "
           "prompts\n",
           stem, STRICT_NEAR_TIE, (long long)rule_met, n_runs);
    int64_t forced = 0;
    double sum_error = 0;
    for (int i = 0; i < n_runs; i++) check_forced(m, &runs[i], i, stem, &forced, &sum_error);
    double mean = forced ? sum_error / (double)forced : 0;
    printf("%s: along llama.cpp's tokens: %lld steps, top-2 margin off by %.4f logits on "
           "average\n",
           stem, (long long)forced, mean);
    CHECK(forced > 0);
    if (mean > MEAN_ERROR_LOGITS) peer_differences++;
    printf("%s: differences from llama.cpp beyond the %.2f-logit noise floor (reported, not "
           "asserted): %lld\n",
           stem, NEAR_TIE_LOGITS, (long long)peer_differences);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n_runs; i++) free(out[k][i]);
        free(out[k]);
        free(n_out[k]);
    }
    free_runs(runs, n_runs);
}

/* ---- one reference file ---- */

/* The variable other tests read for the same file, if set: another copy,
 * or a path that does not exist to leave the model out (CI's sanitizer run
 * does that, since these models are too slow unoptimised). */
static const char *model_path_override(const char *file) {
    static const struct {
        const char *file, *env;
    } overrides[] = {
        {"SmolLM2-135M-Instruct.Q4_1.gguf", "PW_SMOLLM2_GGUF"},
        {"gemma-3-270m-q4_k_m.gguf", "PW_GEMMA3_GGUF"},
    };
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++)
        if (strcmp(file, overrides[i].file) == 0) return getenv(overrides[i].env);
    return NULL;
}

/* Checks one json; true if its model was there and loaded. */
static bool check_reference(const char *json_path, const char *models_dir) {
    size_t len;
    char *text = pw_test_read_file(json_path, &len);
    CHECK(text != NULL);
    if (!text) return false;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    CHECK(doc != NULL);
    if (!doc) {
        fprintf(stderr, "%s: not valid JSON\n", json_path);
        return false;
    }
    bool loaded = false;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(doc, "model");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(doc, "model_sha256");
    CHECK(cJSON_IsString(model) && cJSON_IsString(sha));
    if (!cJSON_IsString(model) || !cJSON_IsString(sha)) goto done;
    const char *stem = model->valuestring;
    char path[4096];
    const char *own = model_path_override(stem);
    if (own)
        snprintf(path, sizeof path, "%s", own);
    else
        snprintf(path, sizeof path, "%s/%s", models_dir, stem);
    char why[4096 + 512];
    if (access(path, R_OK) != 0) {
        snprintf(why, sizeof why, "%s: %s cannot be read (scripts/fetch-model.sh fetches it)",
                 stem, path);
        pw_test_skip_part(why);
        goto done;
    }
    char hex[65];
    CHECK(pw_test_file_sha256(path, hex));
    if (strcmp(hex, sha->valuestring) != 0) {
        snprintf(why, sizeof why, "%s: %s has sha256 %s, the reference was made from %s", stem,
                 path, hex, sha->valuestring);
        pw_test_skip_part(why);
        goto done;
    }
    pw_model *m = NULL;
    pw_status s = pw_model_load(path, &m);
    if (s == PW_ERR_UNSUPPORTED) {
        snprintf(why, sizeof why, "%s: piecewise cannot load it: %s", stem, pw_last_error());
        pw_test_skip_part(why);
        fflush(stdout);
        goto done;
    }
    CHECK_OK(s);
    if (s != PW_OK) goto done;
    loaded = true;
    check_tokenizer(path, cJSON_GetObjectItemCaseSensitive(doc, "tokenize"), stem);
    check_greedy(m, cJSON_GetObjectItemCaseSensitive(doc, "greedy"), stem);
    pw_model_free(m);
done:
    cJSON_Delete(doc);
    return loaded;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void) {
    const char *models_dir = getenv("PW_MODELS_DIR");
    if (!models_dir) models_dir = MODELS_DIR;
    /* PW_LLAMACPP_REFERENCE_DIR: another folder of references (a trimmed
     * one for slow builds, or new ones before they are committed) */
    const char *ref_dir = getenv("PW_LLAMACPP_REFERENCE_DIR");
    if (!ref_dir) ref_dir = REFERENCE_DIR;
    DIR *d = opendir(ref_dir);
    CHECK(d != NULL);
    if (!d) {
        fprintf(stderr, "cannot open the reference folder %s\n", ref_dir);
        return pw_test_finish("model_llamacpp_reference");
    }
    char *names[64];
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && n < 64) {
        size_t l = strlen(ent->d_name);
        if (l > 5 && strcmp(ent->d_name + l - 5, ".json") == 0) {
            names[n] = malloc(strlen(ref_dir) + l + 2);
            sprintf(names[n], "%s/%s", ref_dir, ent->d_name);
            n++;
        }
    }
    closedir(d);
    CHECK(n > 0);
    qsort(names, (size_t)n, sizeof *names, compare_names);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        checked += check_reference(names[i], models_dir);
        free(names[i]);
    }
    if (checked == 0 && pw_test_failures == 0)
        pw_test_skip("no reference's model is present and loadable; nothing compared");
    return pw_test_finish("model_llamacpp_reference");
}
#endif
