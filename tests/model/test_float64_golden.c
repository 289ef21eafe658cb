/* The golden rule: piecewise's greedy tokens agree with the float64 forward.
 *
 * tests/data/float64/<model>.ref holds, for one model file, what
 * scripts/float64-forward.py (dequantized weights, float64 activations and
 * products, llama.cpp's graphs) gave: prompts as token ids and, per greedy
 * step, the chosen token, the runner-up and the top-2 logit margin. For
 * each reference whose model is here with the same sha256:
 *
 *   1. piecewise's greedy continuation of every prompt, in NONE, PIECEWISE
 *      and FULL, equals float64's token by token up to the first step whose
 *      float64 margin is below GOLDEN_MARGIN (0.5); the three modes agree on
 *      every token;
 *   2. reported, not asserted: for tau = 0.05, 0.1 and 0.25 the number of
 *      prompts that meet the same rule at tau, and, along float64's own
 *      tokens (teacher-forced, NONE), how far piecewise's logit difference
 *      between float64's top two is from float64's margin (median, max).
 *      With PW_DEQUANTIZE=1 that error is the float32 rounding of piecewise
 *      alone, which is how the float64 forward itself is checked.
 *
 * Why 0.5: two correct implementations that quantize activations to 8 bits
 * move a top-2 margin by a median of 0.04-0.12 logits and about 0.6 at most
 * (docs/models.md, "What proves a family"); below 0.5 either answer is
 * right, and the comparison stops there.
 *
 * Models: a reference with a `synth FAMILY VOCAB` line is a synthetic
 * family file (src/model/synth_family.h), made on demand into the build
 * folder from llama.cpp's vocabulary GGUF VOCAB (in $PW_LLAMACPP_MODELS, by
 * default the unpacked llama-cpp-python sdist that bench/peers/llamacpp.sh
 * fetches); without it that family is skipped. The others are files in
 * models/ (PW_MODELS_DIR overrides) or, for stories260K, ../shared/models.
 * The engine runs on the device PW_DEVICE names (the CPU by default), so
 * PW_DEVICE=cuda holds the CUDA kernels to the same rule. A file with another sha256 fails: the
 * references name their exact file. A model piecewise refuses to load
 * (PW_ERR_UNSUPPORTED) is skipped with the loader's message.
 *
 * The Llama and Gemma 3 families run in the tensor-parallel shard order
 * (o and down summed over fixed shards, docs/tensor-parallel.md), which is
 * every load's order for them, so the rule holds for it.
 *
 *   test_model_float64_golden --write FAMILY VOCAB OUT   writes a family's file */
#include "piecewise_llm.h"
#include "test_util.h"
#include "engine_runs.h"
#include "internal.h"
#include "model/synth_family.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REFERENCE_DIR PW_TEST_DATA_DIR "/float64"
#define MODELS_DIR PW_TEST_DATA_DIR "/../../models"
#define LLAMACPP_VERSION "0.3.36"
#define GOLDEN_MARGIN 0.5
static const double reported_taus[3] = {0.05, 0.1, 0.25};

typedef struct golden_run {
    int32_t *prompt;
    int64_t n_prompt;
    int32_t *tokens, *second; /* float64's greedy token and runner-up per step */
    double *margins;
    int64_t n_steps;
} golden_run;

typedef struct golden_ref {
    char model[256], sha256[65], family[32], vocab[256];
    golden_run *runs;
    int n_runs;
} golden_ref;

static void free_ref(golden_ref *r) {
    for (int i = 0; i < r->n_runs; i++) {
        free(r->runs[i].prompt);
        free(r->runs[i].tokens);
        free(r->runs[i].second);
        free(r->runs[i].margins);
    }
    free(r->runs);
}

/* Reads a .ref file (scripts/float64-forward.py's format); false on a
 * malformed one, reported as a failure. */
static bool read_ref(const char *path, golden_ref *r) {
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[512];
    bool ok = false;
    int n_runs = -1;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        if (sscanf(line, "model %255s", r->model) == 1) continue;
        if (sscanf(line, "sha256 %64s", r->sha256) == 1) continue;
        if (sscanf(line, "synth %31s %255s", r->family, r->vocab) == 2) continue;
        if (sscanf(line, "prompts %d", &n_runs) == 1) break;
    }
    if (n_runs <= 0 || n_runs > 64 || !r->model[0] || strlen(r->sha256) != 64) goto done;
    r->runs = calloc((size_t)n_runs, sizeof *r->runs);
    r->n_runs = n_runs;
    for (int i = 0; i < n_runs; i++) {
        golden_run *g = &r->runs[i];
        long long n = 0;
        if (fscanf(f, " prompt %lld", &n) != 1 || n <= 0 || n > 4096) goto done;
        g->n_prompt = n;
        g->prompt = malloc((size_t)n * sizeof *g->prompt);
        for (int64_t k = 0; k < n; k++)
            if (fscanf(f, "%d", &g->prompt[k]) != 1) goto done;
        if (fscanf(f, " steps %lld", &n) != 1 || n <= 0 || n > 4096) goto done;
        g->n_steps = n;
        g->tokens = malloc((size_t)n * sizeof *g->tokens);
        g->second = malloc((size_t)n * sizeof *g->second);
        g->margins = malloc((size_t)n * sizeof *g->margins);
        for (int64_t k = 0; k < n; k++)
            if (fscanf(f, "%d %d %lf", &g->tokens[k], &g->second[k], &g->margins[k]) != 3)
                goto done;
    }
    ok = true;
done:
    fclose(f);
    return ok;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The vocabulary folder: $PW_LLAMACPP_MODELS or the sdist in the peer cache. */
static const char *vocab_dir(char *buf, size_t cap) {
    const char *env = getenv("PW_LLAMACPP_MODELS");
    if (env && *env) return env;
    const char *cache = getenv("PW_LLAMACPP_CACHE");
    const char *home = getenv("HOME");
    if (cache && *cache)
        snprintf(buf, cap, "%s/" LLAMACPP_VERSION "/src/vendor/llama.cpp/models", cache);
    else
        snprintf(buf, cap, "%s/.cache/piecewise/llamacpp/" LLAMACPP_VERSION
                           "/src/vendor/llama.cpp/models", home ? home : ".");
    return buf;
}

/* Where the reference's model is, making a synthetic one; NULL (with a skip
 * reason in why) when it cannot be had here. */
static const char *model_path(const golden_ref *r, char *buf, size_t cap, char *why, size_t wcap) {
    char dir[512], vocab[1024];
    if (!r->family[0]) {
        const char *env = getenv("PW_MODELS_DIR");
        snprintf(buf, cap, "%s/%s", env && *env ? env : MODELS_DIR, r->model);
        if (exists(buf)) return buf;
        /* stories260K lives beside the repository (../shared/models) */
        char rel[512];
        snprintf(rel, sizeof rel, "models/%s", r->model);
        if (pw_test_shared_path(rel, buf, cap)) return buf;
        snprintf(why, wcap, "%s: not in models/ (scripts/fetch-model.sh fetches it)", r->model);
        return NULL;
    }
    snprintf(vocab, sizeof vocab, "%s/%s", vocab_dir(dir, sizeof dir), r->vocab);
    if (!exists(vocab)) {
        snprintf(why, wcap, "%s: no vocabulary %s (bench/peers/llamacpp.sh fetch unpacks it)",
                 r->model, vocab);
        return NULL;
    }
    mkdir(PW_BINARY_DIR "/synth", 0755);
    snprintf(buf, cap, PW_BINARY_DIR "/synth/%s", r->model);
    char hex[65];
    if (exists(buf) && pw_test_file_sha256(buf, hex) && strcmp(hex, r->sha256) == 0) return buf;
    pw_synth_family_config cfg;
    CHECK_OK(pw_synth_family_preset(r->family, &cfg));
    CHECK_OK(pw_synth_family_write(&cfg, vocab, buf));
    return buf;
}

/* Every prompt at once in one engine (the kernels are batch-invariant):
 * out[i] gets run i's tokens, n_out[i] their count. */
static pw_status greedy_all(pw_model *m, pw_graph_mode mode, const golden_ref *r, int32_t **out,
                            int64_t *n_out) {
    int64_t longest = 0, max_new = 0;
    for (int i = 0; i < r->n_runs; i++)
        if (r->runs[i].n_steps > max_new) max_new = r->runs[i].n_steps;
    for (int i = 0; i < r->n_runs; i++)
        if (r->runs[i].n_prompt + max_new > longest) longest = r->runs[i].n_prompt + max_new;
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = r->n_runs;
    cfg.max_model_len = (longest + 15) / 16 * 16;
    cfg.kv_cache_positions = cfg.max_model_len * r->n_runs;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    PW_TRY(pw_engine_new(m, &cfg, &e));
    int64_t *ids = calloc((size_t)r->n_runs, sizeof *ids);
    pw_status s = PW_OK;
    for (int i = 0; i < r->n_runs && s == PW_OK; i++)
        s = pw_engine_add_request(e, r->runs[i].prompt, r->runs[i].n_prompt, r->runs[i].n_steps,
                                  NULL, &ids[i]);
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t k;
        s = pw_engine_step(e, &t, &k);
    }
    for (int i = 0; i < r->n_runs && s == PW_OK; i++) {
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

/* The first step where got differs from float64 (n_steps if none). */
static int64_t first_difference(const golden_run *g, const int32_t *got, int64_t n) {
    for (int64_t k = 0; k < g->n_steps; k++)
        if (k >= n || got[k] != g->tokens[k]) return k;
    return g->n_steps;
}

/* Whether the rule at tau holds: equal up to the first margin below tau. */
static bool rule_met(const golden_run *g, const int32_t *got, int64_t n, double tau) {
    int64_t diff = first_difference(g, got, n);
    if (diff >= g->n_steps) return true;
    for (int64_t k = 0; k <= diff; k++)
        if (g->margins[k] < tau) return true;
    return false;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Along float64's tokens (each prefix a one-token request, NONE), how far
 * piecewise's logit(top1) - logit(top2) is from float64's margin. */
static void report_forced(pw_model *m, const golden_ref *r) {
    int64_t total = 0;
    for (int i = 0; i < r->n_runs; i++) total += r->runs[i].n_steps;
    double *err = malloc((size_t)total * sizeof *err);
    int64_t n_err = 0, flips = 0;
    for (int i = 0; i < r->n_runs; i++) {
        const golden_run *g = &r->runs[i];
        pw_engine_config cfg;
        teacher_forced_config(&cfg, g->n_prompt, g->n_steps);
        pw_engine *e = NULL;
        CHECK_OK(pw_engine_new(m, &cfg, &e));
        if (!e) break;
        int32_t *prefix = malloc((size_t)(g->n_prompt + g->n_steps) * sizeof *prefix);
        memcpy(prefix, g->prompt, (size_t)g->n_prompt * sizeof *prefix);
        memcpy(prefix + g->n_prompt, g->tokens, (size_t)g->n_steps * sizeof *prefix);
        int64_t *ids = malloc((size_t)g->n_steps * sizeof *ids);
        pw_status s = PW_OK;
        for (int64_t k = 0; k < g->n_steps && s == PW_OK; k++)
            s = pw_engine_add_request(e, prefix, g->n_prompt + k, 1, NULL, &ids[k]);
        CHECK_OK(s);
        int32_t vocab = (int32_t)pw_model_get_info(m)->vocab;
        while (s == PW_OK && pw_engine_has_work(e)) {
            const pw_step_token *t;
            int64_t n;
            s = pw_engine_step(e, &t, &n);
            CHECK_OK(s);
            for (int64_t j = 0; j < n && s == PW_OK; j++) {
                int64_t k = 0;
                while (k < g->n_steps && ids[k] != t[j].request) k++;
                const float *logits;
                if (k == g->n_steps || pw_engine_last_logits(e, ids[k], &logits) != PW_OK) continue;
                int32_t best = 0;
                for (int32_t v = 1; v < vocab; v++)
                    if (logits[v] > logits[best]) best = v;
                double margin = (double)logits[g->tokens[k]] - logits[g->second[k]];
                err[n_err++] = fabs(margin - g->margins[k]);
                if (best != g->tokens[k]) flips++;
            }
        }
        free(ids);
        free(prefix);
        pw_engine_free(e);
    }
    if (n_err > 0) {
        qsort(err, (size_t)n_err, sizeof *err, cmp_double);
        printf("%s: teacher-forced over %lld steps: margin error median %.2e, max %.2e; "
               "argmax differs from float64 at %lld steps\n",
               r->model, (long long)n_err, err[n_err / 2], err[n_err - 1], (long long)flips);
    }
    free(err);
}

static void check_model(pw_model *m, const golden_ref *r) {
    static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    static const char *mode_names[3] = {"NONE", "PIECEWISE", "FULL"};
    int32_t **out[3];
    int64_t *n_out[3];
    for (int k = 0; k < 3; k++) {
        out[k] = calloc((size_t)r->n_runs, sizeof *out[k]);
        n_out[k] = calloc((size_t)r->n_runs, sizeof *n_out[k]);
        CHECK_OK(greedy_all(m, modes[k], r, out[k], n_out[k]));
    }
    int met[3] = {0, 0, 0}, golden = 0;
    for (int i = 0; i < r->n_runs; i++) {
        const golden_run *g = &r->runs[i];
        for (int k = 0; k < 3; k++) {
            if (!out[k][i]) continue;
            if (k > 0 && out[0][i]) {
                pw_test_checks++;
                if (n_out[k][i] != n_out[0][i] ||
                    memcmp(out[k][i], out[0][i], (size_t)n_out[0][i] * sizeof(int32_t)) != 0) {
                    pw_test_failures++;
                    fprintf(stderr, "%s: prompt %d: %s differs from NONE\n", r->model, i,
                            mode_names[k]);
                }
            }
        }
        const int32_t *got = out[0][i];
        if (!got) continue;
        int64_t n = n_out[0][i], diff = first_difference(g, got, n);
        bool ok = rule_met(g, got, n, GOLDEN_MARGIN);
        golden += ok;
        pw_test_checks++;
        if (!ok) {
            pw_test_failures++;
            fprintf(stderr,
                    "%s: prompt %d: step %lld differs from float64 (float64 %d, runner-up %d, "
                    "margin %.4f; piecewise %d) before any margin below %.2f\n",
                    r->model, i, (long long)diff, g->tokens[diff], g->second[diff],
                    g->margins[diff], diff < n ? got[diff] : -1, GOLDEN_MARGIN);
        }
        for (int t = 0; t < 3; t++) met[t] += rule_met(g, got, n, reported_taus[t]);
        if (diff < g->n_steps)
            printf("%s: prompt %d: equal to float64 for %lld of %lld steps (float64 margin at "
                   "the difference %.4f)\n",
                   r->model, i, (long long)diff, (long long)g->n_steps, g->margins[diff]);
        else
            printf("%s: prompt %d: equal to float64 for all %lld steps\n", r->model, i,
                   (long long)g->n_steps);
    }
    printf("%s: the %.2f rule holds on %d/%d prompts; tau 0.05: %d/%d, tau 0.1: %d/%d, "
           "tau 0.25: %d/%d\n",
           r->model, GOLDEN_MARGIN, golden, r->n_runs, met[0], r->n_runs, met[1], r->n_runs,
           met[2], r->n_runs);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < r->n_runs; i++) free(out[k][i]);
        free(out[k]);
        free(n_out[k]);
    }
}

static int write_family(const char *family, const char *vocab, const char *out) {
    pw_synth_family_config cfg;
    pw_status s = pw_synth_family_preset(family, &cfg);
    if (s == PW_OK) s = pw_synth_family_write(&cfg, vocab, out);
    if (s != PW_OK) {
        fprintf(stderr, "%s\n", pw_last_error());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--write") == 0) return write_family(argv[2], argv[3], argv[4]);
    DIR *d = opendir(REFERENCE_DIR);
    if (!d) {
        pw_test_skip("no " REFERENCE_DIR);
        return 77;
    }
    int checked = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        size_t len = strlen(ent->d_name);
        if (len < 5 || strcmp(ent->d_name + len - 4, ".ref") != 0) continue;
        char path[1024], mbuf[1024], why[1536], hex[65];
        snprintf(path, sizeof path, "%s/%s", REFERENCE_DIR, ent->d_name);
        golden_ref r;
        bool ok = read_ref(path, &r);
        CHECK(ok);
        if (!ok) {
            fprintf(stderr, "%s: malformed reference\n", path);
            free_ref(&r);
            continue;
        }
        const char *mp = model_path(&r, mbuf, sizeof mbuf, why, sizeof why);
        if (!mp) {
            pw_test_skip_part(why);
            free_ref(&r);
            continue;
        }
        CHECK(pw_test_file_sha256(mp, hex));
        pw_test_checks++;
        if (strcmp(hex, r.sha256) != 0) {
            pw_test_failures++;
            fprintf(stderr, "%s: sha256 %s, the reference was made from %s\n", mp, hex, r.sha256);
            free_ref(&r);
            continue;
        }
        pw_model *m = NULL;
        pw_status s = pw_model_load(mp, &m);
        if (s == PW_ERR_UNSUPPORTED) {
            snprintf(why, sizeof why, "%s: %s", r.model, pw_last_error());
            pw_test_skip_part(why);
            free_ref(&r);
            continue;
        }
        CHECK_OK(s);
        if (m) {
            check_model(m, &r);
            report_forced(m, &r);
            checked++;
            pw_model_free(m);
        }
        free_ref(&r);
    }
    closedir(d);
    if (checked == 0) {
        pw_test_skip("no model of tests/data/float64 is here");
        return 77;
    }
    return pw_test_finish("model_float64_golden");
}
