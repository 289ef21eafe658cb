/* llama.cpp's own tokenizer test vectors, byte for byte: for each
 * vocabulary family piecewise claims, models/ggml-vocab-<name>.gguf with
 * its .inp (inputs separated by "\n__ggml_vocab_test__\n") and .out (one
 * line of space-separated ids per input), read as llama.cpp's
 * tests/test-tokenizer-0.cpp reads them and encoded as it encodes them (no
 * BOS/EOS, special-token text as plain text).
 *
 * The folder comes from the llama-cpp-python sdist
 * (scripts/fetch-llamacpp-source.sh); PW_LLAMACPP_MODELS names it, else
 * $PW_LLAMACPP_CACHE (or ~/.cache/piecewise/llamacpp)/0.3.36/src/vendor/
 * llama.cpp/models. Without it the test skips. It also checks the BOS/EOS
 * each vocabulary adds (add_special) against llama.cpp's llama-tokenize. */
#include "test_util.h"
#include "internal.h"

#include "model/gguf.h"
#include "model/tokenizer.h"

#include <inttypes.h>

/* The vocabularies whose families piecewise claims. */
static const char *const claimed[] = {
    "gpt-2",    /* GPT-2 regex */
    "llama-bpe", /* Llama 3 */
    "qwen2",    /* Qwen 2 / 2.5 / 3 */
    "qwen35",   /* Qwen 3.5 */
    "llama-spm", /* Llama 2, Mistral (SentencePiece) */
    "phi-3",    /* Phi-3 (SentencePiece) */
    "starcoder", "refact", "command-r", /* GPT-2 regex with single digits, as SmolLM2 */
    "mpt", /* GPT-2 regex */
};

#define MAX_FILE_BYTES (64u << 20)

static char models_dir[4096];

static bool find_models_dir(void) {
    const char *env = getenv("PW_LLAMACPP_MODELS");
    if (env && *env) {
        snprintf(models_dir, sizeof models_dir, "%s", env);
    } else {
        const char *cache = getenv("PW_LLAMACPP_CACHE");
        const char *home = getenv("HOME");
        if (cache && *cache)
            snprintf(models_dir, sizeof models_dir, "%s/0.3.36/src/vendor/llama.cpp/models", cache);
        else if (home)
            snprintf(models_dir, sizeof models_dir,
                     "%s/.cache/piecewise/llamacpp/0.3.36/src/vendor/llama.cpp/models", home);
        else
            return false;
    }
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/ggml-vocab-gpt-2.gguf", models_dir);
    FILE *f = fopen(probe, "rb");
    if (!f) return false;
    fclose(f);
    return true;
}

/* The first occurrence of needle in hay[0, n), or NULL. */
static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t nl) {
    for (size_t i = 0; i + nl <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, nl) == 0) return hay + i;
    return NULL;
}

static int64_t total_cases, total_passed;

/* Parses one .out line into ids; false on anything but decimal ids. */
static bool parse_ids(const char *line, size_t len, int32_t **ids, int64_t *n) {
    *ids = malloc((len / 2 + 1) * sizeof **ids);
    *n = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
        if (i == len) break;
        int64_t v = 0;
        size_t start = i;
        while (i < len && line[i] >= '0' && line[i] <= '9' && i - start < 10) v = v * 10 + (line[i++] - '0');
        if (i == start || (i < len && line[i] != ' ' && line[i] != '\r' && line[i] != '\t') ||
            v > INT32_MAX)
            return false;
        (*ids)[(*n)++] = (int32_t)v;
    }
    return true;
}

static void run_vocab(const char *name) {
    char path[4300], inp_path[4310], out_path[4310];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", models_dir, name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    pw_gguf *g = NULL;
    pw_tokenizer *t = NULL;
    char *inp = NULL, *out = NULL;
    size_t inp_len, out_len;
    if (pw_gguf_open(path, &g) != PW_OK) {
        fprintf(stderr, "%s: %s\n", name, pw_last_error());
        CHECK(!"vocabulary file opens");
        return;
    }
    CHECK_OK(pw_tokenizer_new(g, &t));
    CHECK_OK(pw_file_read_all(inp_path, "test inputs", PW_FILE_NO_LINKS, MAX_FILE_BYTES, &inp,
                              &inp_len));
    CHECK_OK(pw_file_read_all(out_path, "test outputs", PW_FILE_NO_LINKS, MAX_FILE_BYTES, &out,
                              &out_len));
    if (!t || !inp || !out) goto done;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    int64_t cases = 0, passed = 0;
    size_t ip = 0, op = 0;
    while (ip < inp_len) {
        const char *next = find_bytes(inp + ip, inp_len - ip, sep, sep_len);
        size_t case_len = next ? (size_t)(next - (inp + ip)) : inp_len - ip;
        const char *text = inp + ip;
        ip = next ? ip + case_len + sep_len : inp_len;
        /* the matching .out line */
        if (op >= out_len) {
            fprintf(stderr, "%s: more inputs than output lines\n", name);
            CHECK(!"as many outputs as inputs");
            break;
        }
        const char *nl = memchr(out + op, '\n', out_len - op);
        size_t line_len = nl ? (size_t)(nl - (out + op)) : out_len - op;
        int32_t *want;
        int64_t n_want;
        bool ok_line = parse_ids(out + op, line_len, &want, &n_want);
        CHECK(ok_line);
        op = nl ? op + line_len + 1 : out_len;
        int32_t *got = NULL;
        int64_t n_got = 0;
        pw_status s = pw_tokenizer_encode(t, text, case_len, 0, &got, &n_got);
        bool same = s == PW_OK && ok_line && n_got == n_want &&
                    (n_got == 0 || memcmp(got, want, (size_t)n_got * sizeof *got) == 0);
        cases++;
        if (same) {
            passed++;
        } else if (getenv("PW_VECTORS_VERBOSE") || cases - passed <= 3) {
            fprintf(stderr, "%s: case %" PRId64 " '%.*s' differs:\n  want", name, cases,
                    (int)(case_len < 120 ? case_len : 120), text);
            for (int64_t k = 0; k < n_want; k++) fprintf(stderr, " %" PRId32, want[k]);
            fprintf(stderr, "\n  got ");
            for (int64_t k = 0; k < n_got; k++) fprintf(stderr, " %" PRId32, got[k]);
            fprintf(stderr, "%s%s\n", s == PW_OK ? "" : " error: ", s == PW_OK ? "" : pw_last_error());
        }
        free(want);
        pw_host_free(got);
    }
    if (op < out_len && out_len - op > 1) CHECK(!"as many inputs as output lines");
    printf("%-16s %3" PRId64 "/%3" PRId64 " vectors identical\n", name, passed, cases);
    CHECK(cases > 0);
    CHECK_EQ_INT(passed, cases);
    total_cases += cases;
    total_passed += passed;
done:
    pw_host_free(inp);
    pw_host_free(out);
    pw_tokenizer_free(t);
    pw_gguf_free(g);
}

/* llama.cpp's llama-tokenize -p "Hello world" --ids (add_special: the
 * BOS/EOS each vocabulary's GGUF asks for, or its defaults) on the same
 * files, recorded here. */
static const struct {
    const char *vocab;
    int32_t ids[4];
    int n;
} add_special[] = {
    {"llama-bpe", {128000, 9906, 1917}, 3}, /* no add_bos_token key: llama3 adds BOS */
    {"qwen2", {9707, 1879}, 2},
    {"qwen35", {9707, 1879}, 2},
    {"llama-spm", {1, 15043, 3186}, 3},
    {"phi-3", {1, 15043, 3186}, 3},
    {"gpt-2", {15496, 995}, 2},
    {"starcoder", {8302, 5810}, 2},
    {"command-r", {5, 28339, 3845}, 3}, /* add_bos_token = true */
};

static void check_add_special(void) {
    for (size_t i = 0; i < PW_ARRAY_LEN(add_special); i++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", models_dir, add_special[i].vocab);
        pw_gguf *g = NULL;
        pw_tokenizer *t = NULL;
        CHECK_OK(pw_gguf_open(path, &g));
        if (g) CHECK_OK(pw_tokenizer_new(g, &t));
        int32_t *ids = NULL;
        int64_t n = 0;
        if (t) CHECK_OK(pw_tokenizer_encode(t, "Hello world", 11, pw_tokenizer_default_flags(t), &ids, &n));
        CHECK_EQ_INT(n, add_special[i].n);
        if (ids && n == add_special[i].n)
            CHECK(memcmp(ids, add_special[i].ids, (size_t)n * sizeof *ids) == 0);
        else
            fprintf(stderr, "%s: add_special ids differ from llama.cpp's\n", add_special[i].vocab);
        pw_host_free(ids);
        pw_tokenizer_free(t);
        pw_gguf_free(g);
    }
}

int main(void) {
    if (!find_models_dir())
        pw_test_skip("llama.cpp's models/ folder not found (run scripts/fetch-llamacpp-source.sh, "
                     "or set PW_LLAMACPP_MODELS)");
    const char *only = getenv("PW_VECTORS_ONLY");
    for (size_t i = 0; i < PW_ARRAY_LEN(claimed); i++)
        if (!only || strcmp(only, claimed[i]) == 0) run_vocab(claimed[i]);
    if (!only) check_add_special();
    printf("total: %" PRId64 "/%" PRId64 " vectors identical over %zu vocabularies\n",
           total_passed, total_cases, PW_ARRAY_LEN(claimed));
    return pw_test_finish("model_tokenizer_vectors");
}
