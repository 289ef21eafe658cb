/* The engine on the emulated discrete device (PW_DEVICE_EMU): the device
 * path (device weights and buffers, asynchronous copies from page-locked
 * staging, warm-ups, device graphs, in-place update) gives tokens and
 * logits bitwise identical to the CPU device's, in every mode, with eager
 * and lazy capture, with a memory budget (the dry run) and with several
 * requests batched together. */
#include "piecewise_llm.h"
#include "test_util.h"

#include "backend/emu/emu_backend.h"
#include "model/engine_internal.h"
#include "model/llama.h"

#define TOKENS 16
#define REQS 3

typedef struct run_out {
    int32_t tokens[REQS][TOKENS];
    int64_t n[REQS];
    float *logits; /* [vocab]: request 0's, at its first sampled token */
} run_out;

static const char *const prompts[REQS] = {"Once upon a time", "The cat", "Lily and Tom went"};

static pw_status run(pw_model *m, pw_device dev, pw_graph_mode mode, pw_capture_policy policy,
                     size_t budget, run_out *out) {
    int64_t vocab = pw_model_get_info(m)->vocab;
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.device = dev;
    cfg.mode = mode;
    cfg.capture_policy = policy;
    cfg.memory_budget = budget;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 16;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e;
    PW_TRY(pw_engine_new(m, &cfg, &e));
    /* per-step inputs go through page-locked staging where copies are
     * asynchronous, and straight from the host arrays on the CPU */
    CHECK((e->run.staging != NULL) == (dev != PW_DEVICE_CPU));
    /* o's and down's f32 weights reach a device as their column shards
     * stacked ([S*N][K/S]), which the tokens below prove gives the CPU's
     * bits; on the CPU they stay whole, in place */
    const pw_llama_layer *L0 = &m->layers[0];
    int64_t o_shards = pw_model_weight_col_shards(m, L0->wo);
    int64_t ffn_shards = pw_model_weight_col_shards(m, L0->w_down);
    CHECK(o_shards > 1 && ffn_shards > 1);
    CHECK(pw_model_weight_col_shards(m, L0->wq) == 0);
    int64_t stacked = 0;
    for (int i = 1; i < e->weights.n_params; i++) {
        const pw_tensor *t = e->weights.copies[i];
        if (!t) continue;
        if (pw_tensor_dim(t, 1) == pw_tensor_dim(L0->wo, 1) / o_shards &&
            pw_tensor_dim(t, 0) == pw_tensor_dim(L0->wo, 0) * o_shards)
            stacked++;
        else if (pw_tensor_dim(t, 1) == pw_tensor_dim(L0->w_down, 1) / ffn_shards &&
                 pw_tensor_dim(t, 0) == pw_tensor_dim(L0->w_down, 0) * ffn_shards)
            stacked++;
    }
    CHECK_EQ_INT(stacked, dev == PW_DEVICE_CPU ? 0 : 2 * pw_model_get_info(m)->n_layers);
    int64_t ids[REQS];
    pw_status s = PW_OK;
    for (int r = 0; r < REQS && s == PW_OK; r++) {
        int32_t *p;
        int64_t n;
        s = pw_model_tokenize(m, prompts[r], true, &p, &n);
        if (s == PW_OK) s = pw_engine_add_request(e, p, n, TOKENS, NULL, &ids[r]);
        free(p);
    }
    bool first = true;
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t k;
        s = pw_engine_step(e, &t, &k);
        for (int64_t i = 0; s == PW_OK && first && i < k; i++)
            if (t[i].request == ids[0]) {
                const float *l;
                s = pw_engine_last_logits(e, ids[0], &l);
                if (s == PW_OK) memcpy(out->logits, l, (size_t)vocab * sizeof(float));
                first = false;
            }
    }
    for (int r = 0; r < REQS && s == PW_OK; r++) {
        const int32_t *toks;
        s = pw_engine_request_output(e, ids[r], &toks, &out->n[r]);
        if (s == PW_OK) memcpy(out->tokens[r], toks, (size_t)out->n[r] * sizeof(int32_t));
    }
    pw_engine_free(e);
    return s;
}

static bool same(const run_out *a, const run_out *b, int64_t vocab) {
    for (int r = 0; r < REQS; r++)
        if (a->n[r] != b->n[r] || memcmp(a->tokens[r], b->tokens[r], (size_t)a->n[r] * 4) != 0)
            return false;
    return memcmp(a->logits, b->logits, (size_t)vocab * sizeof(float)) == 0;
}

int main(void) {
    char path[1024];
    if (!pw_test_shared_path("models/stories260K.gguf", path, sizeof path))
        pw_test_skip("stories260K.gguf not found under ../shared/models");
    pw_model *m;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return pw_test_finish("engine_emu");
    int64_t vocab = pw_model_get_info(m)->vocab;
    run_out cpu = {.logits = calloc((size_t)vocab, sizeof(float))};
    run_out emu = {.logits = calloc((size_t)vocab, sizeof(float))};
    CHECK_OK(run(m, PW_DEVICE_CPU, PW_GRAPH_NONE, PW_CAPTURE_EAGER, 0, &cpu));

    static const pw_graph_mode modes[] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL,
                                          PW_GRAPH_FULL_AND_PIECEWISE};
    for (size_t k = 0; k < PW_ARRAY_LEN(modes); k++)
        for (int lazy = 0; lazy < 2; lazy++) {
            pw_emu_stats before, after;
            pw_emu_get_stats(&before);
            CHECK_OK(run(m, PW_DEVICE_EMU, modes[k], lazy ? PW_CAPTURE_LAZY : PW_CAPTURE_EAGER, 0,
                         &emu));
            pw_emu_get_stats(&after);
            if (!same(&cpu, &emu, vocab))
                printf("mode %s, %s capture: tokens or logits differ from the CPU's\n",
                       pw_graph_mode_name(modes[k]), lazy ? "lazy" : "eager");
            CHECK(same(&cpu, &emu, vocab));
            /* the work ran on the device worker, and graphs replayed there */
            CHECK(after.flushes > before.flushes && after.items_executed > before.items_executed);
            if (modes[k] != PW_GRAPH_NONE)
                CHECK(after.graph_replays > before.graph_replays &&
                      after.graphs_instantiated > before.graphs_instantiated);
            CHECK_EQ_INT(after.device_regions, before.device_regions); /* nothing leaked */
        }

    /* With a memory budget the engine plans graph memory with a dry run,
     * which must never reach the device: the planning adds no device graph
     * and runs nothing, and the engine still gives the CPU's tokens. */
    pw_emu_stats before, after;
    pw_emu_get_stats(&before);
    CHECK_OK(run(m, PW_DEVICE_EMU, PW_GRAPH_FULL, PW_CAPTURE_EAGER, (size_t)256 << 20, &emu));
    pw_emu_get_stats(&after);
    CHECK(same(&cpu, &emu, vocab));
    run_out emu2 = {.logits = calloc((size_t)vocab, sizeof(float))};
    pw_emu_stats b2, a2;
    pw_emu_get_stats(&b2);
    CHECK_OK(run(m, PW_DEVICE_EMU, PW_GRAPH_FULL, PW_CAPTURE_EAGER, 0, &emu2));
    pw_emu_get_stats(&a2);
    /* same captures with and without the dry run */
    CHECK_EQ_INT(after.graphs_instantiated - before.graphs_instantiated,
                 a2.graphs_instantiated - b2.graphs_instantiated);
    free(emu2.logits);
    free(cpu.logits);
    free(emu.logits);
    pw_model_free(m);
    return pw_test_finish("engine_emu");
}
