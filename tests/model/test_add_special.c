/* The special tokens a model asks for (tokenizer.ggml.add_bos_token,
 * add_eos_token) are the ones added, as llama.cpp's add_special adds them:
 * on tiny models with each setting, and on SmolLM2 (add_bos_token =
 * false: no BOS) and Gemma 3 (BOS) against llama.cpp's own ids for the
 * same prompt (llama-server's /tokenize with add_special, recorded in
 * tests/data/llamacpp/<model>.json by scripts/llamacpp-reference.py). */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"
#include "model/llama.h"

#include <unistd.h>

static char path[] = "/tmp/pw_test_add_special_XXXXXX";

static pw_model *tiny(bool no_add_bos, bool add_eos) {
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.no_add_bos = no_add_bos;
    cfg.add_eos = add_eos;
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    return m;
}

/* pw_model_tokenize(text, add_special) starts with BOS (1) iff want_bos and
 * ends with EOS (2) iff want_eos; without add_special, neither. */
static void check_tiny(pw_model *m, bool want_bos, bool want_eos) {
    if (!m) return;
    int32_t *plain = NULL, *special = NULL;
    int64_t n_plain = 0, n_special = 0;
    CHECK_OK(pw_model_tokenize(m, "Once upon a time", false, &plain, &n_plain));
    CHECK_OK(pw_model_tokenize(m, "Once upon a time", true, &special, &n_special));
    if (!plain || !special) goto done;
    CHECK(n_plain > 0 && plain[0] != 1 && plain[n_plain - 1] != 2);
    CHECK_EQ_INT(n_special, n_plain + want_bos + want_eos);
    if (n_special != n_plain + want_bos + want_eos) goto done;
    CHECK(memcmp(special + want_bos, plain, (size_t)n_plain * sizeof *plain) == 0);
    if (want_bos) CHECK_EQ_INT(special[0], 1);
    if (want_eos) CHECK_EQ_INT(special[n_special - 1], 2);
    CHECK_EQ_INT(pw_tokenizer_adds_bos(m->tokenizer), want_bos);
    CHECK_EQ_INT(pw_tokenizer_adds_eos(m->tokenizer), want_eos);
    /* a chat-style marked encode adds them the same way */
    int32_t *marked = NULL;
    int64_t n_marked = 0;
    const char *text = "Once upon a time";
    CHECK_OK(pw_tokenizer_encode_marked(m->tokenizer, text, strlen(text), NULL, 0,
                                        PW_TOKENIZE_ADD_SPECIAL, &marked, &n_marked));
    CHECK_EQ_INT(n_marked, n_special);
    if (marked && n_marked == n_special)
        CHECK(memcmp(marked, special, (size_t)n_special * sizeof *marked) == 0);
    pw_host_free(marked);
done:
    free(plain);
    free(special);
}

static void check_model(const char *env, const char *file, const char *text, const int32_t *want,
                        int64_t n_want) {
    char buf[4096];
    const char *p = pw_test_model_path(env, file, buf, sizeof buf);
    if (!p) {
        pw_test_skip_part(file);
        return;
    }
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(p, &m));
    if (!m) return;
    int32_t *ids = NULL;
    int64_t n = 0;
    CHECK_OK(pw_model_tokenize(m, text, true, &ids, &n));
    CHECK_EQ_INT(n, n_want);
    if (ids && n == n_want) CHECK(memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    free(ids);
    pw_model_free(m);
}

int main(void) {
    int fd = mkstemp(path);
    if (fd < 0) pw_test_skip("cannot create a temporary file");
    close(fd);
    pw_model *m = tiny(false, false); /* the default: BOS, no EOS */
    check_tiny(m, true, false);
    pw_model_free(m);
    m = tiny(true, false);
    check_tiny(m, false, false);
    pw_model_free(m);
    m = tiny(false, true);
    check_tiny(m, true, true);
    pw_model_free(m);
    m = tiny(true, true);
    check_tiny(m, false, true);
    pw_model_free(m);
    unlink(path);

    /* llama.cpp's ids for "Hello world" with add_special (the json files'
     * first tokenize entry): SmolLM2 adds no BOS, Gemma 3 adds <bos> (2). */
    static const int32_t smollm2[] = {19556, 905};
    static const int32_t gemma3[] = {2, 9259, 1902};
    check_model("PW_SMOLLM2_GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", "Hello world", smollm2, 2);
    check_model("PW_GEMMA3_GGUF", "gemma-3-270m-q4_k_m.gguf", "Hello world", gemma3, 3);
    return pw_test_finish("model_add_special");
}
