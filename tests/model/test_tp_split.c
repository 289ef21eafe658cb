/* Tensor-parallel loading on one process (pw_model_load_tp, no MPI
 * needed): the fixed order's shard counts, what a rank holds and which
 * degrees are refused. The tokens at several degrees are compared by
 * tests/cli/test_tp.sh under mpirun.
 *   - the graph runs o and down as matmul_shards + all_reduce, with and
 *     without --tp, and its tokens agree across NONE, PIECEWISE, FULL and
 *     a load without --tp;
 *   - the shard counts are whole quantization blocks, and a degree above
 *     them is refused with the largest that works;
 *   - ranks own whole KV-head groups while there are enough of them, and
 *     replicate KV heads beyond. */
#include "piecewise_llm.h"
#include "internal.h"
#include "model/gguf_writer.h"
#include "model/llama.h"
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
    c.ffn_dim = 128; /* four down shards of 32: whole Q8_0 blocks */
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load_tp(path, &m));
    if (!m) return;
    pw_ir *g = NULL;
    CHECK_OK(pw_model_build_ir(m, &g));
    if (g) {
        CHECK(ir_has_op(g, "matmul_shards"));
        CHECK(ir_has_op(g, "all_reduce"));
        /* one rank: the plain lookup and head (a vocabulary split is a copy) */
        CHECK(ir_has_op(g, "embedding") && !ir_has_op(g, "embedding_vocab"));
        CHECK(ir_has_op(g, "lm_head") && !ir_has_op(g, "lm_head_vocab"));
        pw_ir_free(g);
    }
    int32_t none[12] = {0}, pw[12] = {0}, full[12] = {0}, plain[12] = {0};
    CHECK_OK(greedy(m, PW_GRAPH_NONE, none, 12));
    CHECK_OK(greedy(m, PW_GRAPH_PIECEWISE, pw, 12));
    CHECK_OK(greedy(m, PW_GRAPH_FULL, full, 12));
    CHECK(memcmp(none, pw, sizeof none) == 0);
    CHECK(memcmp(none, full, sizeof none) == 0);
    pw_model_free(m);
    /* a load without tensor parallelism runs the same fixed order: one set
     * of bits with and without --tp */
    CHECK_OK(pw_model_load(path, &m));
    if (m && pw_model_build_ir(m, &g) == PW_OK) {
        CHECK(ir_has_op(g, "all_reduce"));
        pw_ir_free(g);
    }
    if (m) CHECK_OK(greedy(m, PW_GRAPH_FULL, plain, 12));
    CHECK(memcmp(none, plain, sizeof none) == 0);
    pw_model_free(m);
}

/* The shard counts follow the quantization blocks, and a degree above
 * them is refused with the largest one that works. */
static void test_shard_counts(void) {
    pw_tiny_llama_config c = pw_tiny_llama_default_config();
    c.weight_dtype = PW_Q8_0; /* o: 4 heads of 16, whole blocks of 32 in shards of 2 heads;
                                 ffn 96: 3 shards of 32 */
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return;
    CHECK(m->tp_o_shards == 2 && m->tp_ffn_shards == 3);
    CHECK_OK(pw_model_tp_plan(m, 2, 1));
    CHECK(m->tp_h0 == 2 && m->tp_h1 == 4 && m->tp_kv0 == 1 && m->tp_kv1 == 2);
    CHECK(m->tp_f0 == 1 && m->tp_f1 == 3);
    CHECK_ERR(pw_model_tp_plan(m, 3, 0), PW_ERR_INVALID_ARG,
              "--tp 3: this model's fixed summation order has 2 shards of the attention output "
              "(4 query heads) and 3 of the feed-forward (width 96, in whole quantization "
              "blocks), and each rank needs at least one of each (use --tp 2 or less)");
    pw_model_free(m);
    m = NULL;
    c.ffn_dim = 32; /* one block wide: one shard, one rank */
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    CHECK_OK(pw_model_load(path, &m));
    if (m) {
        CHECK(m->tp_ffn_shards == 1);
        CHECK_ERR(pw_model_tp_plan(m, 2, 0), PW_ERR_INVALID_ARG, "use --tp 1 or less");
    }
    pw_model_free(m);
}

/* KV heads when the ranks outnumber the groups: SmolLM2's shape, 9 query
 * heads in 3 groups. Up to 3 ranks own whole groups; at 4 a KV head is
 * replicated on every rank that uses it, one copy per query head where a
 * rank's heads cross a group boundary. */
static void test_kv_replication(void) {
    pw_tiny_llama_config c = pw_tiny_llama_default_config();
    c.dim = 72, c.n_heads = 9, c.n_kv_heads = 3, c.ffn_dim = 64;
    CHECK_OK(pw_tiny_llama_write_file(&c, path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return;
    CHECK(m->tp_o_shards == 9 && m->tp_o_unit == 3 && m->tp_ffn_shards >= 4);
    static const struct {
        int tp, rank;
        int64_t h0, h1, kv0, kv1;
        bool per_head;
        int64_t local_kv;
    } want[] = {
        {2, 0, 0, 3, 0, 1, false, 1}, {2, 1, 3, 9, 1, 3, false, 2},
        {4, 0, 0, 2, 0, 1, false, 1}, {4, 1, 2, 4, 0, 2, true, 2},
        {4, 2, 4, 6, 1, 2, false, 1}, {4, 3, 6, 9, 2, 3, false, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK_OK(pw_model_tp_plan(m, want[i].tp, want[i].rank));
        pw_model_local l = pw_model_local_shape(m);
        CHECK(m->tp_h0 == want[i].h0 && m->tp_h1 == want[i].h1);
        CHECK(m->tp_kv0 == want[i].kv0 && m->tp_kv1 == want[i].kv1);
        CHECK(m->tp_kv_per_head == want[i].per_head && l.n_kv_heads == want[i].local_kv);
        CHECK(l.n_heads == want[i].h1 - want[i].h0 && l.n_heads % l.n_kv_heads == 0);
    }
    pw_model_free(m);
}

int main(void) {
    int fd = mkstemp(path);
    if (fd < 0) pw_test_skip("cannot create a temporary file");
    close(fd);
    test_split_runs();
    test_shard_counts();
    test_kv_replication();
    unlink(path);
    return pw_test_finish("model_tp_split");
}
