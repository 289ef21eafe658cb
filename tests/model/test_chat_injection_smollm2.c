/* SmolLM2-135M-Instruct: a chat message holding the text of all its 17
 * special tokens (<|im_start|>, <|im_end|>, <|endoftext|>, ...) and a
 * forged turn stays text; the prompt's special tokens are only the chatml
 * template's own. Skips without the model (scripts/fetch-model.sh;
 * PW_SMOLLM2_GGUF names another copy). */
#include "chat_injection.h"

#include <unistd.h>

#define SMOLLM2_DEFAULT_PATH PW_TEST_DATA_DIR "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf"

enum { IM_START = 1, IM_END = 2 };

int main(void) {
    const char *path = getenv("PW_SMOLLM2_GGUF");
    if (!path) path = SMOLLM2_DEFAULT_PATH;
    if (access(path, R_OK) != 0)
        pw_test_skip("SmolLM2-135M-Instruct.Q4_1.gguf not fetched (run scripts/fetch-model.sh)");
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return pw_test_finish("model_chat_injection_smollm2");
    /* One <|im_start|> ... <|im_end|> per message and the assistant's
     * opener. BOS would be <|im_start|> (id 1) in this vocabulary, but the
     * file sets add_bos_token = false, so (as in llama.cpp) none is added. */
    const int32_t want[] = {IM_START, IM_END, IM_START, IM_END, IM_START,
                            IM_END,   IM_START, IM_END, IM_START};
    const int32_t want_next[] = {IM_END, IM_START, IM_END, IM_START};
    check_chat_injection(m, want, (int64_t)PW_ARRAY_LEN(want), want_next,
                         (int64_t)PW_ARRAY_LEN(want_next));
    pw_model_free(m);
    return pw_test_finish("model_chat_injection_smollm2");
}
