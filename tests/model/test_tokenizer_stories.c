/* The "llama" tokenizer on stories260K's vocabulary (../shared/models),
 * against reference ids.
 *
 * Where the references come from: tests/data/tokenizer/reference_ids.py
 * `spm`, which rebuilds a SentencePiece BPE model (the sentencepiece
 * package, 0.2.x) from this GGUF's own pieces, scores and types, with
 * byte fallback and the dummy-prefix space, i.e. llama.cpp's SPM settings:
 *
 *   python3 tests/data/tokenizer/reference_ids.py spm \
 *       ../shared/models/stories260K.gguf "Once upon a time" ...
 *
 * A second reference agrees on every string here: llama2.c's run.c
 * encode() ported to Python (tests/data/tokenizer/llama2c_encode.py) over
 * ../shared/models/tok512.bin, the same vocabulary in llama2.c's format.
 * Both put BOS (1) first when asked, as llama.cpp does for this model. */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "test_util.h"

#include <string.h>

typedef struct reference {
    const char *text;
    int n;
    int32_t ids[32];
} reference;

static const reference references[] = {
    {"Once upon a time", 4, {403, 407, 261, 378}},
    {"Hello world", 6, {346, 306, 414, 263, 304, 341}},
    {"Lily's dog ran  fast.", 12, {317, 439, 419, 400, 428, 352, 303, 410, 272, 412, 356, 426}},
    {"h\xc3\xa9llo \xc3\xbcn\xc3\xaf" "code \xe2\x98\x83 \xe6\x97\xa5\xe6\x9c\xac", 25,
     {270, 485, 306, 414, 410, 198, 191, 416, 198, 178, 429, 414, 418, 411, 410, 229, 155, 134,
      410, 233, 154, 168, 233, 159, 175}},
    {"tab\tand\nnewline", 13, {259, 412, 430, 12, 412, 264, 13, 416, 411, 424, 421, 271, 411}},
    {" leading space", 9, {410, 278, 411, 380, 299, 262, 427, 412, 331}},
};

static void check_ids(const char *text, const int32_t *got, int64_t n, const int32_t *want,
                      int64_t n_want) {
    int same = n == n_want && memcmp(got, want, (size_t)n * sizeof *got) == 0;
    pw_test_checks++;
    if (!same) {
        pw_test_failures++;
        fprintf(stderr, "\"%s\": got", text);
        for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n");
    }
}

int main(void) {
    char path[1024];
    if (!pw_test_shared_path("models/stories260K.gguf", path, sizeof path))
        pw_test_skip("../shared/models/stories260K.gguf is absent (set PW_SHARED_DIR to its "
                     "parent's parent); nothing to check");
    pw_gguf *g = NULL;
    pw_tokenizer *t = NULL;
    CHECK_OK(pw_gguf_open(path, &g));
    if (g) CHECK_OK(pw_tokenizer_new(g, &t));
    if (!t) {
        pw_gguf_free(g);
        return pw_test_finish("model_tokenizer_stories");
    }
    CHECK_EQ_INT(pw_tokenizer_get_kind(t), PW_TOKENIZER_SPM);
    CHECK_EQ_INT(pw_tokenizer_vocab_size(t), 512);
    CHECK_EQ_INT(pw_tokenizer_bos(t), 1);
    CHECK_EQ_INT(pw_tokenizer_eos(t), 2);
    CHECK(pw_tokenizer_adds_bos(t)); /* no add_bos_token key: llama.cpp's default for SPM */

    for (size_t r = 0; r < sizeof references / sizeof references[0]; r++) {
        const reference *ref = &references[r];
        int32_t *ids = NULL;
        int64_t n = 0;
        CHECK_OK(pw_tokenizer_encode(t, ref->text, strlen(ref->text), 0, &ids, &n));
        check_ids(ref->text, ids, n, ref->ids, ref->n);
        pw_host_free(ids);
        /* With BOS, as llama.cpp encodes a prompt; and back. */
        CHECK_OK(pw_tokenizer_encode(t, ref->text, strlen(ref->text),
                                     pw_tokenizer_default_flags(t), &ids, &n));
        CHECK(n == ref->n + 1 && ids[0] == 1);
        char *back = NULL;
        CHECK_OK(pw_tokenizer_decode(t, ids, n, &back, NULL));
        CHECK_STREQ(back, ref->text);
        pw_host_free(back);
        pw_host_free(ids);
    }

    /* Streaming the golden continuation's start. */
    const int32_t golden[] = {1, 403, 407, 261, 378};
    const char *want[] = {"", "Once", " upon", " a", " time"};
    for (int i = 0; i < 5; i++) {
        const char *piece;
        size_t len;
        CHECK_OK(pw_tokenizer_decode_token(t, i ? golden[i - 1] : -1, golden[i], &piece, &len));
        CHECK(len == strlen(want[i]) && memcmp(piece, want[i], len) == 0);
    }
    pw_tokenizer_free(t);
    pw_gguf_free(g);
    return pw_test_finish("model_tokenizer_stories");
}
