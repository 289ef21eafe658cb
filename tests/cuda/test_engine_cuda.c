/* The engine on CUDA: stories260K greedy tokens equal the CPU's, logits
 * agree within a stated tolerance, and FULL, PIECEWISE and NONE give the
 * same tokens. Skips, saying so, without a GPU or the CUDA backend. */
#include "piecewise_llm.h"
#include "test_util.h"

#include <math.h>

#define TOKENS 24
/* Max |cpu - cuda| over the logits of the prompt's last token. cuBLAS and
 * the CPU sum in different orders; 1e-3 relative to the logit range. */
#define LOGIT_TOLERANCE 2e-3f

static pw_status generate(pw_model *m, pw_device dev, pw_graph_mode mode, const int32_t *prompt,
                          int64_t n, int32_t *out, float *first_logits, int64_t vocab) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.device = dev;
    cfg.mode = mode;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 16;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    pw_status s = pw_engine_new(m, &cfg, &e);
    if (s != PW_OK) return s;
    int64_t id;
    s = pw_engine_add_request(e, prompt, n, TOKENS, NULL, &id);
    bool first = true;
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t k;
        s = pw_engine_step(e, &t, &k);
        if (s == PW_OK && first && k > 0) {
            const float *l;
            s = pw_engine_last_logits(e, id, &l);
            if (s == PW_OK) memcpy(first_logits, l, (size_t)vocab * sizeof(float));
            first = false;
        }
    }
    const int32_t *toks;
    int64_t nt;
    if (s == PW_OK) s = pw_engine_request_output(e, id, &toks, &nt);
    if (s == PW_OK) memcpy(out, toks, (size_t)nt * sizeof(int32_t));
    pw_engine_free(e);
    return s;
}

int main(void) {
    if (!pw_cuda_available()) {
        printf("SKIP: %s\n", pw_cuda_unavailable_reason());
        /* without a device the engine refuses cuda with the same reason */
        char path[1024];
        if (pw_test_shared_path("models/stories260K.gguf", path, sizeof path)) {
            pw_model *m;
            if (pw_model_load(path, &m) == PW_OK) {
                pw_engine_config cfg;
                pw_engine_config_init(&cfg);
                cfg.device = PW_DEVICE_CUDA;
                pw_engine *e = NULL;
                CHECK_ERR(pw_engine_new(m, &cfg, &e), PW_ERR_UNSUPPORTED, "device cuda");
                CHECK(e == NULL);
                pw_model_free(m);
            }
        }
        if (pw_test_failures) return pw_test_finish("cuda_engine");
        return 77;
    }
    char path[1024];
    if (!pw_test_shared_path("models/stories260K.gguf", path, sizeof path))
        pw_test_skip("stories260K.gguf not found under ../shared/models");
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return pw_test_finish("cuda_engine");
    int64_t vocab = pw_model_get_info(m)->vocab;
    int32_t *prompt;
    int64_t n;
    CHECK_OK(pw_model_tokenize(m, "Once upon a time", true, &prompt, &n));
    int32_t cpu[TOKENS], gpu[3][TOKENS];
    float *cpu_logits = calloc((size_t)vocab, sizeof(float));
    float *gpu_logits = calloc((size_t)vocab, sizeof(float));
    CHECK_OK(generate(m, PW_DEVICE_CPU, PW_GRAPH_NONE, prompt, n, cpu, cpu_logits, vocab));
    static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(generate(m, PW_DEVICE_CUDA, modes[k], prompt, n, gpu[k], gpu_logits, vocab));
        CHECK(memcmp(gpu[k], cpu, sizeof cpu) == 0);
        float worst = 0;
        for (int64_t v = 0; v < vocab; v++) worst = fmaxf(worst, fabsf(gpu_logits[v] - cpu_logits[v]));
        printf("mode %s: max |logit difference| vs CPU = %g\n", pw_graph_mode_name(modes[k]), worst);
        CHECK(worst <= LOGIT_TOLERANCE);
    }
    free(cpu_logits);
    free(gpu_logits);
    free(prompt);
    pw_model_free(m);
    return pw_test_finish("cuda_engine");
}
