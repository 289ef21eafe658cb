/* Tensor-parallel loading on one process (pw_model_load_tp, no MPI
 * needed): what a rank holds and which splits are refused. The tokens at
 * several degrees are compared by tests/cli/test_tp.sh under mpirun.
 *   - the split graph runs o and down as matmul_shards + all_reduce, and
 *     its tokens agree across NONE, PIECEWISE and FULL;
 *   - a row-parallel shard that is not whole quantization blocks (o's or
 *     down's) is refused, naming the tensor and the block size. */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/gguf_writer.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[] = "/tmp/pw_test_tp_split_XXXXXX";

static bool ir_has_op(const pw_ir *g, const char *target) {
    for (int i = 0; i < pw_ir_num_nodes(g); i++) {
        const char *t = pw_ir_node_target(g, i);
        if (t && strcmp(t, target) == 0) return true;
    }
    return false;
}

/* Greedy tokens of one prompt in graph mode `mode`. */
static pw_status greedy(pw_model *m, pw_graph_mode mode, int32_t *out, int64_t n) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = 1;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e = NULL;
    PW_TRY(pw_engine_new(m, &cfg, &e));
    static const int32_t prompt[] = {1, 40, 41, 42, 43};
    int64_t id;
    pw_status s = pw_engine_add_request(e, prompt, 5, n, NULL, &id);
    while (s == PW_OK && pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t nt;
        s = pw_engine_step(e, &t, &nt);
    }
    const int32_t *toks;
    int64_t nt = 0;
    if (s == PW_OK) s = pw_engine_request_output(e, id, &toks, &nt);
    if (s == PW_OK) memcpy(out, toks + 5, (size_t)(n < nt - 5 ? n : nt - 5) * sizeof *out);
    pw_engine_free(e);
    return s;
}

static void test_split_runs(void) {
    pw_tiny_llama_config c = pw_tiny_llama_default_config();
    c.weight_dtype = PW_Q8_0;
    c.ffn_dim = 128; /* two down shards of 64: whole Q8_0 blocks */
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load_tp(path, &m));
    if (!m) return;
    pw_ir *g = NULL;
    CHECK_OK(pw_model_build_ir(m, &g));
    if (g) {
        CHECK(ir_has_op(g, "matmul_shards"));
        CHECK(ir_has_op(g, "all_reduce"));
        pw_ir_free(g);
    }
    int32_t none[12] = {0}, pw[12] = {0}, full[12] = {0};
    CHECK_OK(greedy(m, PW_GRAPH_NONE, none, 12));
    CHECK_OK(greedy(m, PW_GRAPH_PIECEWISE, pw, 12));
    CHECK_OK(greedy(m, PW_GRAPH_FULL, full, 12));
    CHECK(memcmp(none, pw, sizeof none) == 0);
    CHECK(memcmp(none, full, sizeof none) == 0);
    pw_model_free(m);
    /* the unsplit model keeps the plain products */
    CHECK_OK(pw_model_load(path, &m));
    if (m && pw_model_build_ir(m, &g) == PW_OK) {
        CHECK(!ir_has_op(g, "all_reduce"));
        pw_ir_free(g);
    }
    pw_model_free(m);
}

static void test_refused_splits(void) {
    pw_tiny_llama_config c = pw_tiny_llama_default_config();
    c.weight_dtype = PW_Q8_0; /* ffn 96: two down shards of 48, not whole blocks of 32 */
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    pw_model *m = NULL;
    CHECK_ERR(pw_model_load_tp(path, &m), PW_ERR_UNSUPPORTED,
              "tensor 'blk.0.ffn_down.weight' (q8_0) cannot be split into shards of 48 columns: "
              "a shard must be whole blocks of 32");
    CHECK(m == NULL);
    c.n_kv_heads = 4; /* one head per group: o's shards are 16 columns */
    c.ffn_dim = 128;
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    CHECK_ERR(pw_model_load_tp(path, &m), PW_ERR_UNSUPPORTED,
              "tensor 'blk.0.attn_output.weight' (q8_0) cannot be split into shards of 16 columns");
    c.weight_dtype = PW_F32; /* any shard width is whole f32 "blocks" */
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    CHECK_OK(pw_model_load_tp(path, &m));
    pw_model_free(m);
}

int main(void) {
    int fd = mkstemp(path);
    if (fd < 0) pw_test_skip("cannot create a temporary file");
    close(fd);
    test_split_runs();
    test_refused_splits();
    unlink(path);
    return pw_test_finish("model_tp_split");
}
