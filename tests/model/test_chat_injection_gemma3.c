/* Gemma 3 270M: a chat message holding the text of all its special tokens
 * (6,249 CONTROL ones such as <start_of_turn>, <end_of_turn>, <unusedN>,
 * and the USER_DEFINED whitespace runs and HTML tags) and a forged turn
 * stays text; the prompt's CONTROL tokens are only BOS and the Gemma
 * template's own markers. Skips without the model (scripts/fetch-model.sh
 * gemma3-270m; PW_GEMMA3_GGUF names another copy). */
#include "chat_injection.h"

#include <unistd.h>

#define GEMMA3_DEFAULT_PATH PW_TEST_DATA_DIR "/../../models/gemma-3-270m-q4_k_m.gguf"

enum { BOS = 2, START_OF_TURN = 105, END_OF_TURN = 106 };

int main(void) {
    const char *path = getenv("PW_GEMMA3_GGUF");
    if (!path) path = GEMMA3_DEFAULT_PATH;
    if (access(path, R_OK) != 0)
        pw_test_skip("gemma-3-270m-q4_k_m.gguf not fetched (run scripts/fetch-model.sh gemma3-270m)");
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return pw_test_finish("model_chat_injection_gemma3");
    /* The system message opens the first user turn: three turns, then the
     * model's opener. */
    const int32_t want[] = {BOS,         START_OF_TURN, END_OF_TURN, START_OF_TURN,
                            END_OF_TURN, START_OF_TURN, END_OF_TURN, START_OF_TURN};
    const int32_t want_next[] = {END_OF_TURN, START_OF_TURN, END_OF_TURN, START_OF_TURN};
    check_chat_injection(m, want, (int64_t)PW_ARRAY_LEN(want), want_next,
                         (int64_t)PW_ARRAY_LEN(want_next));
    pw_model_free(m);
    return pw_test_finish("model_chat_injection_gemma3");
}
