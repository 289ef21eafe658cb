/* Gemma 3 270M (Q4_K_M): it loads as the gemma3 architecture with its
 * local/global layer pattern; the tokenizer gives llama.cpp's ids; the
 * Gemma chat template applies and <end_of_turn> ends generation; greedy
 * tokens equal llama.cpp's up to the first near-tie; and the tokens are
 * bitwise identical in NONE, PIECEWISE and FULL and whatever else shares
 * the batch, with the real sliding window and with a window shortened so
 * that a short prompt crosses it. Skips, saying so, without the model
 * (scripts/fetch-model.sh gemma3-270m; PW_GEMMA3_GGUF names another copy).
 *
 * The llama.cpp figures are from tests/data/llamacpp/gemma-3-270m-q4_k_m.json
 * (scripts/llamacpp-reference.py: llama-server 0.3.36, greedy, top-2
 * logprob margins): a few are written out here. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"
#include "model/llama.h"
#include "model/tokenizer.h"

#include <unistd.h>

#define GEMMA3_DEFAULT_PATH PW_TEST_DATA_DIR "/../../models/gemma-3-270m-q4_k_m.gguf"
#define MAX_ANSWER 16

static pw_graph_mode g_modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};

typedef struct prompt {
    const int32_t *ids;
    int64_t n;
} prompt;

/* Greedy answers of n_prompts requests submitted together (one batch). */
static pw_status answer(pw_model *m, pw_graph_mode mode, const prompt *ps, int n_prompts,
                        int64_t max_new, int32_t out[][MAX_ANSWER], int64_t *n_out) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 64;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    cfg.kv_cache_positions = 512;
    cfg.max_model_len = 128;
    pw_engine *e;
    PW_TRY(pw_engine_new(m, &cfg, &e));
    int64_t ids[4];
    pw_status s = PW_OK;
    for (int i = 0; s == PW_OK && i < n_prompts; i++)
        s = pw_engine_add_request(e, ps[i].ids, ps[i].n, max_new, NULL, &ids[i]);
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t k;
        s = pw_engine_step(e, &t, &k);
    }
    for (int i = 0; s == PW_OK && i < n_prompts; i++) {
        const int32_t *toks;
        s = pw_engine_request_output(e, ids[i], &toks, &n_out[i]);
        if (s == PW_OK) memcpy(out[i], toks, (size_t)n_out[i] * sizeof(int32_t));
    }
    pw_engine_free(e);
    return s;
}

static bool same_tokens(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    return na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

static void check_tokenize(const pw_model *m, const char *text, unsigned flags,
                           const int32_t *want, int64_t n_want) {
    int32_t *ids;
    int64_t n;
    CHECK_OK(pw_tokenizer_encode(m->tokenizer, text, strlen(text), flags, &ids, &n));
    bool ok = same_tokens(ids, n, want, n_want);
    if (!ok) fprintf(stderr, "tokenize \"%s\" (flags %u) differs from llama.cpp\n", text, flags);
    CHECK(ok);
    pw_host_free(ids);
}

static void test_tokenizer(const pw_model *m) {
    const unsigned both = PW_TOKENIZE_ADD_BOS | PW_TOKENIZE_PARSE_SPECIAL;
    static const int32_t hello[] = {2, 9259, 1902};
    check_tokenize(m, "Hello world", both, hello, 3);
    /* user-defined whitespace-run tokens (139 = three spaces, 255968 = tab) */
    static const int32_t spaces[] = {43819, 139,  35220, 255968, 624, 255968,
                                     39218, 108,  624,   861,    8721, 107};
    check_tokenize(m, "multiple   spaces\tand\ttabs\n\nand newlines\n", 0, spaces, 12);
    /* user-defined HTML tags match without PARSE_SPECIAL, as in llama.cpp */
    static const int32_t html[] = {200, 15640, 209, 833, 1414, 236793, 236743, 201, 1693, 1229, 210};
    check_tokenize(m, "<b>bold</b> &amp; <i>italics</i>", 0, html, 11);
    static const int32_t accents[] = {2,      9322,   236959, 16756, 5581,   115362,
                                      236787, 33443,  236764, 120362, 236764, 96008,
                                      236764, 59958,  619,    1136};
    check_tokenize(m, "Gr\xc3\xbc\xc3\x9f" "e aus K\xc3\xb6ln: caf\xc3\xa9, na\xc3\xafve, "
                      "fa\xc3\xa7" "ade, \xc3\x98resund", both, accents, 16);
    /* control tokens are plain text without PARSE_SPECIAL */
    int32_t id;
    CHECK_OK(pw_tokenizer_find(m->tokenizer, "<end_of_turn>", &id));
    CHECK_EQ_INT(id, 106);
    CHECK(pw_model_is_end_of_generation(m, 106));
    CHECK(pw_model_is_end_of_generation(m, 1)); /* <eos> */
    CHECK(!pw_model_is_end_of_generation(m, 107));
}

/* The chat prompt of the llama.cpp reference (its greedy prompt 8). */
static const int32_t chat_ids[] = {2,     105,    2364, 107, 3689,  563,    506, 5279,
                                   529,   7001,   236881, 25685, 528, 886, 13315, 236761,
                                   106,   107,    105,  4368, 107};

static void test_chat(pw_model *m) {
    CHECK(pw_model_has_chat_template(m));
    pw_chat_message user = {"user", "What is the capital of France? Answer in one sentence.\n"};
    char *text;
    CHECK_OK(pw_model_apply_chat_template(m, &user, 1, true, &text));
    CHECK_STREQ(text, "<start_of_turn>user\nWhat is the capital of France? Answer in one "
                      "sentence.<end_of_turn>\n<start_of_turn>model\n");
    int32_t *ids;
    int64_t n;
    CHECK_OK(pw_model_tokenize(m, text, true, &ids, &n));
    CHECK(same_tokens(ids, n, chat_ids, (int64_t)PW_ARRAY_LEN(chat_ids)));
    free(ids);
    free(text);
    pw_chat_message conv[3] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}};
    CHECK_OK(pw_model_apply_chat_template(m, conv, 3, false, &text));
    CHECK_STREQ(text, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                      "<start_of_turn>model\nHello.<end_of_turn>\n");
    free(text);
    CHECK_OK(pw_model_chat_next_turn(m, "Thanks", true, &text));
    CHECK_STREQ(text, "\n<start_of_turn>user\nThanks<end_of_turn>\n<start_of_turn>model\n");
    free(text);
}

/* llama.cpp's greedy continuation of "The capital of France is" and its
 * top-2 margins (logprob difference); piecewise must agree up to the first
 * step whose margin is below NEAR_TIE. */
#define NEAR_TIE 0.02f
static const int32_t capital_prompt[] = {2, 818, 5279, 529, 7001, 563};
static const int32_t capital_ref[] = {506, 5279, 529, 506, 2891, 529, 7001, 236761, 1030, 563};
/* "Once upon a time, there was a little": llama.cpp's first ten tokens.
 * Its steps 1 and 2 are close calls (llama.cpp's top-2 margins 0.22 and
 * 0.14), below the 0.75 logits that 8-bit activations move a margin by on
 * this model (the integer kernels pick the other token at step 2, the f32
 * path does not; docs/kernels.md): only step 0 (margin 1.40) is held to
 * llama.cpp here; model_llamacpp_reference compares longer stretches with
 * that measured bound. */
#define ONCE_SURE_STEPS 1
static const int32_t once_prompt[] = {2, 14946, 3324, 496, 990, 236764, 993, 691, 496, 2268};
static const int32_t once_ref[] = {3953, 7489, 60708, 236761, 2625, 691, 496, 1401, 6538, 3953};

static void test_greedy_and_modes(pw_model *m) {
    prompt ps[2] = {{capital_prompt, 6}, {once_prompt, 10}};
    int32_t out[3][4][MAX_ANSWER];
    int64_t nout[3][4];
    for (int k = 0; k < 3; k++)
        CHECK_OK(answer(m, g_modes[k], ps, 1, (int64_t)PW_ARRAY_LEN(capital_ref), out[k], nout[k]));
    /* every reference step here has a margin above NEAR_TIE */
    CHECK(same_tokens(out[0][0], nout[0][0], capital_ref, (int64_t)PW_ARRAY_LEN(capital_ref)));
    for (int k = 1; k < 3; k++) CHECK(same_tokens(out[k][0], nout[k][0], out[0][0], nout[0][0]));
    /* both prompts in one batch, in every mode: each answer is the one it
     * gets alone */
    int32_t solo[1][MAX_ANSWER];
    int64_t nsolo[1];
    CHECK_OK(answer(m, PW_GRAPH_NONE, &ps[1], 1, 10, solo, nsolo));
    CHECK(nsolo[0] >= ONCE_SURE_STEPS && same_tokens(solo[0], ONCE_SURE_STEPS, once_ref, ONCE_SURE_STEPS));
    for (int k = 0; k < 3; k++) {
        int32_t both[2][MAX_ANSWER];
        int64_t nboth[2];
        CHECK_OK(answer(m, g_modes[k], ps, 2, 10, both, nboth));
        CHECK(same_tokens(both[0], nboth[0], capital_ref, 10));
        CHECK(same_tokens(both[1], nboth[1], solo[0], nsolo[0]));
    }
}

/* With the local layers' window cut to 4 a 10-token prompt and its answer
 * cross it: the modes and batch compositions still agree bit for bit, and
 * the answer differs from the full-window one (the window is in effect). */
static void test_short_window(pw_model *m) {
    int32_t saved[64];
    int64_t L = m->info.n_layers;
    memcpy(saved, m->layer_window, (size_t)L * sizeof *saved);
    for (int64_t l = 0; l < L; l++)
        if (m->layer_window[l] > 0) m->layer_window[l] = 4;
    prompt ps[2] = {{once_prompt, 10}, {capital_prompt, 6}};
    int32_t out[3][4][MAX_ANSWER];
    int64_t nout[3][4];
    for (int k = 0; k < 3; k++) CHECK_OK(answer(m, g_modes[k], ps, 2, 12, out[k], nout[k]));
    for (int k = 1; k < 3; k++)
        for (int r = 0; r < 2; r++)
            CHECK(same_tokens(out[k][r], nout[k][r], out[0][r], nout[0][r]));
    int32_t solo[1][MAX_ANSWER];
    int64_t nsolo[1];
    CHECK_OK(answer(m, PW_GRAPH_FULL, ps, 1, 12, solo, nsolo));
    CHECK(same_tokens(solo[0], nsolo[0], out[0][0], nout[0][0]));
    memcpy(m->layer_window, saved, (size_t)L * sizeof *saved);
    int32_t wide[1][MAX_ANSWER];
    int64_t nwide[1];
    CHECK_OK(answer(m, PW_GRAPH_NONE, ps, 1, 12, wide, nwide));
    CHECK(!same_tokens(wide[0], nwide[0], out[0][0], nout[0][0]));
}

int main(void) {
    const char *path = getenv("PW_GEMMA3_GGUF");
    if (!path) path = GEMMA3_DEFAULT_PATH;
    if (access(path, R_OK) != 0)
        pw_test_skip("gemma-3-270m-q4_k_m.gguf not fetched (run scripts/fetch-model.sh gemma3-270m)");
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return pw_test_finish("model_gemma3");
    const pw_model_info *in = pw_model_get_info(m);
    CHECK_STREQ(in->arch, "gemma3");
    CHECK_EQ_INT(in->n_layers, 18);
    CHECK_EQ_INT(in->dim, 640);
    CHECK_EQ_INT(in->n_heads, 4);
    CHECK_EQ_INT(in->n_kv_heads, 1);
    CHECK_EQ_INT(in->head_dim, 256);
    CHECK_EQ_INT(in->vocab, 262144);
    CHECK(in->tied_embeddings);
    CHECK(in->n_layers <= 64);
    /* every sixth layer global, the others a 512-position window */
    for (int64_t l = 0; l < in->n_layers; l++) CHECK_EQ_INT(m->layer_window[l], l % 6 == 5 ? 0 : 512);
    CHECK(m->rope_theta_local == 10000.0f && in->rope_theta == 1000000.0f);
    CHECK(m->logit_softcap == 0.0f);
    test_tokenizer(m);
    test_chat(m);
    test_greedy_and_modes(m);
    test_short_window(m);
    pw_model_free(m);
    return pw_test_finish("model_gemma3");
}
