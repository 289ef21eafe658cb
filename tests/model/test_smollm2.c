/* SmolLM2-135M-Instruct (Q4_1), the main job's model: it loads, its chat
 * template applies, and a greedy answer is deterministic and identical in
 * NONE, PIECEWISE and FULL. Skips, saying so, when scripts/fetch-model.sh
 * has not been run (or PW_SMOLLM2_GGUF names another copy). */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include <unistd.h>

#define SMOLLM2_DEFAULT_PATH PW_TEST_DATA_DIR "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define ANSWER_TOKENS 12

static pw_status answer(pw_model *m, pw_graph_mode mode, const int32_t *prompt, int64_t n,
                        int32_t *out, int64_t *n_out, int64_t *steps_in_mode) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = 2;
    cfg.max_num_batched_tokens = 32;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    cfg.kv_cache_positions = 256;
    cfg.max_model_len = 256;
    pw_engine *e;
    PW_TRY(pw_engine_new(m, &cfg, &e));
    int64_t id;
    pw_status s = pw_engine_add_request(e, prompt, n, ANSWER_TOKENS, NULL, &id);
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t k;
        s = pw_engine_step(e, &t, &k);
    }
    const int32_t *toks;
    if (s == PW_OK) s = pw_engine_request_output(e, id, &toks, n_out);
    if (s == PW_OK) memcpy(out, toks, (size_t)*n_out * sizeof(int32_t));
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    *steps_in_mode = mode == PW_GRAPH_NONE ? st.steps_by_mode[PW_MODE_NONE]
                     : mode == PW_GRAPH_FULL ? st.steps_by_mode[PW_MODE_FULL]
                                             : st.steps_by_mode[PW_MODE_PIECEWISE];
    pw_engine_free(e);
    return s;
}

int main(void) {
    const char *path = getenv("PW_SMOLLM2_GGUF");
    if (!path) path = SMOLLM2_DEFAULT_PATH;
    if (access(path, R_OK) != 0)
        pw_test_skip("SmolLM2-135M-Instruct.Q4_1.gguf not fetched (run scripts/fetch-model.sh)");
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return pw_test_finish("model_smollm2");
    const pw_model_info *in = pw_model_get_info(m);
    CHECK_EQ_INT(in->n_layers, 30);
    CHECK_EQ_INT(in->dim, 576);
    CHECK_EQ_INT(in->n_heads, 9);
    CHECK_EQ_INT(in->n_kv_heads, 3);
    CHECK_EQ_INT(in->vocab, 49152);
    CHECK(pw_model_has_chat_template(m));

    /* the template's default system prompt opens the conversation */
    pw_chat_message user = {"user", "What is the capital of France? Answer in one sentence."};
    char *text;
    CHECK_OK(pw_model_apply_chat_template(m, &user, 1, true, &text));
    static const char head[] = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
                               "trained by Hugging Face<|im_end|>\n<|im_start|>user\n";
    CHECK(strncmp(text, head, sizeof head - 1) == 0);
    free(text);
    /* the next turn after an answer closed by <|im_end|> does not repeat it */
    CHECK_OK(pw_model_chat_next_turn(m, "Thanks", true, &text));
    CHECK_STREQ(text, "\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n");
    free(text);
    CHECK_OK(pw_model_chat_next_turn(m, "Thanks", false, &text));
    CHECK_STREQ(text, "<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n");
    free(text);
    CHECK_OK(pw_model_apply_chat_template(m, &user, 1, true, &text));
    int32_t *prompt;
    int64_t n;
    CHECK_OK(pw_model_tokenize(m, text, false, &prompt, &n));
    free(text);

    static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    int32_t out[3][ANSWER_TOKENS], again[ANSWER_TOKENS];
    int64_t nout[3], nagain, steps;
    for (int k = 0; k < 3; k++) {
        CHECK_OK(answer(m, modes[k], prompt, n, out[k], &nout[k], &steps));
        CHECK(steps > 0);
    }
    CHECK_OK(answer(m, PW_GRAPH_NONE, prompt, n, again, &nagain, &steps));
    CHECK(nagain == nout[0] && memcmp(again, out[0], (size_t)nagain * sizeof(int32_t)) == 0);
    for (int k = 1; k < 3; k++)
        CHECK(nout[k] == nout[0] && memcmp(out[k], out[0], (size_t)nout[0] * sizeof(int32_t)) == 0);
    /* the answer names Paris */
    char answer_text[512] = "";
    int32_t prev = prompt[n - 1];
    for (int64_t i = 0; i < nout[0]; i++) {
        strncat(answer_text, pw_model_token_text(m, prev, out[0][i]), sizeof answer_text - strlen(answer_text) - 1);
        prev = out[0][i];
    }
    printf("answer: %s\n", answer_text);
    CHECK(strstr(answer_text, "Paris") != NULL);
    free(prompt);
    pw_model_free(m);
    return pw_test_finish("model_smollm2");
}
