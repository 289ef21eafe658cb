/* The "gpt2" tokenizer on SmolLM2-135M-Instruct's vocabulary (49152 tokens,
 * 48900 merges, pre-tokenizer "smollm"), against reference ids. Skips,
 * saying so, when the model has not been fetched into models/ (or
 * PW_SMOLLM2_GGUF names another copy).
 *
 * Where the references come from: tests/data/tokenizer/reference_ids.py
 * `bpe`, which rebuilds the tokenizer with Hugging Face `tokenizers` (0.2x)
 * from this GGUF's tokens and merges, with SmolLM2's tokenizer.json
 * pre-tokenizer (Digits(individual_digits) then ByteLevel without a prefix
 * space) and its control tokens as special tokens, then encodes without
 * adding special tokens:
 *
 *   python3 tests/data/tokenizer/reference_ids.py bpe \
 *       models/SmolLM2-135M-Instruct.Q4_1.gguf "Hello, world!" ... */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "test_util.h"

#include <string.h>
#include <unistd.h>

#define SMOLLM2_DEFAULT_PATH PW_TEST_DATA_DIR "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct reference {
    const char *text;
    int n;
    int32_t ids[32];
} reference;

static const reference references[] = {
    {"Hello, world!", 4, {19556, 28, 905, 17}},
    {"The year 2024 has 365 days.", 14,
     {504, 713, 216, 34, 32, 34, 36, 553, 216, 35, 38, 37, 2009, 30}},
    {"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n", 12,
     {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198}},
    {"  multiple   spaces\tand\nnewlines\n\n", 10,
     {216, 2701, 256, 5600, 197, 397, 198, 2241, 5110, 1116}},
    {"h\xc3\xa9llo na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe2\x80\x9cquotes\xe2\x80\x9d "
     "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82",
     19,
     {88, 2756, 31394, 15486, 46494, 37366, 1841, 619, 385, 2346, 573, 17097, 241, 115, 40993,
      179, 120, 248, 47526}},
    {"don't you'll I'M", 7, {12420, 982, 346, 3060, 339, 23, 61}},
    {"x=3.14159;  y = [1,22,333]", 23,
     {104, 45, 35, 30, 33, 36, 33, 37, 41, 43, 216, 329, 446, 933, 33, 28, 34, 34, 28, 35, 35,
      35, 77}},
};

int main(void) {
    const char *path = getenv("PW_SMOLLM2_GGUF");
    if (!path) path = SMOLLM2_DEFAULT_PATH;
    if (access(path, R_OK) != 0)
        pw_test_skip("models/SmolLM2-135M-Instruct.Q4_1.gguf has not been fetched (run "
                     "scripts/fetch-model.sh, or set PW_SMOLLM2_GGUF); SmolLM2 tokenizer references not checked");
    pw_gguf *g = NULL;
    pw_tokenizer *t = NULL;
    CHECK_OK(pw_gguf_open(path, &g));
    if (g) CHECK_OK(pw_tokenizer_new(g, &t));
    if (!t) {
        pw_gguf_free(g);
        return pw_test_finish("model_tokenizer_smollm");
    }
    CHECK_EQ_INT(pw_tokenizer_get_kind(t), PW_TOKENIZER_BPE);
    CHECK_EQ_INT(pw_tokenizer_vocab_size(t), 49152);
    CHECK_EQ_INT(pw_tokenizer_bos(t), 1);
    CHECK_EQ_INT(pw_tokenizer_eos(t), 2);
    CHECK(!pw_tokenizer_adds_bos(t)); /* tokenizer.ggml.add_bos_token = false */
    CHECK(pw_tokenizer_is_eog(t, 2)); /* <|im_end|> */
    CHECK(pw_tokenizer_is_eog(t, 0)); /* <|endoftext|> */
    CHECK(!pw_tokenizer_is_eog(t, 1));

    for (size_t r = 0; r < sizeof references / sizeof references[0]; r++) {
        const reference *ref = &references[r];
        int32_t *ids = NULL;
        int64_t n = 0;
        CHECK_OK(pw_tokenizer_encode(t, ref->text, strlen(ref->text),
                                     pw_tokenizer_default_flags(t), &ids, &n));
        int same = n == ref->n && memcmp(ids, ref->ids, (size_t)n * sizeof *ids) == 0;
        pw_test_checks++;
        if (!same) {
            pw_test_failures++;
            fprintf(stderr, "\"%s\": got", ref->text);
            for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        /* Decoding renders control tokens as nothing; everything else
         * comes back byte for byte. */
        char *back = NULL;
        CHECK_OK(pw_tokenizer_decode(t, ids, n, &back, NULL));
        if (strstr(ref->text, "<|im_start|>"))
            CHECK_STREQ(back, "user\nWhat is the capital of France?\n");
        else
            CHECK_STREQ(back, ref->text);
        pw_host_free(back);
        pw_host_free(ids);
    }
    pw_tokenizer_free(t);
    pw_gguf_free(g);
    return pw_test_finish("model_tokenizer_smollm");
}
