/* Distinct-piece capture (src/model/engine_distinct.c):
 *  - the split graph's identical pieces (a Llama's layers) form one group,
 *    found from the IR, not assumed: pieces that differ only in names match,
 *    pieces with another op or constant do not;
 *  - with verify_capture every patched piece, PIECEWISE graph or a layer
 *    inside a FULL graph, is checked byte for byte against a real capture of
 *    that same piece from the same pool state: an engine that starts proves
 *    it for every layer at every capture size;
 *  - counters: graphs_patched is what the groups predict, and the switch off
 *    patches nothing;
 *  - tokens are identical with and without it in every mode, and equal the
 *    eager ones;
 *  - a random model with 6 layers and one with mixed weight types (a layer
 *    whose weights have another type is captured for real), stories260K and
 *    SmolLM2 when ../shared or models/ have them. */
#include "piecewise_llm.h"
#include "engine_runs.h"
#include "test_util.h"
#include "internal.h"

#include "model/engine_internal.h"
#include "model/gguf_writer.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_OUT 12

static pw_status make_engine(pw_model *m, pw_graph_mode mode, bool distinct, bool verify,
                             const int64_t *sizes, int n_sizes, pw_engine **e) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    CHECK(cfg.capture_distinct); /* the default */
    cfg.mode = mode;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 32;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    cfg.capture_distinct = distinct;
    cfg.verify_capture = verify;
    cfg.capture_sizes = sizes;
    cfg.n_capture_sizes = n_sizes;
    return pw_engine_new(m, &cfg, e);
}

/* Pieces in groups of two or more, and how many groups. */
static void count_grouped(const pw_engine *e, int *grouped, int *groups) {
    *grouped = *groups = 0;
    for (int i = 0; i < e->n_submods; i++) {
        if (e->pieces[i].group < 0) continue;
        (*grouped)++;
        *groups += e->pieces[i].group == i;
    }
}

/* Three requests, one joining late (mixed prefill and decode steps). */
static pw_status run_tokens(pw_engine *e, pw_model *m, int32_t out[3][MAX_OUT]) {
    static const char *const prompts[3] = {"hello world", "a b c d e f g h i j", "once"};
    return run_staggered(e, m, prompts, 3, MAX_OUT, 400, &out[0][0]);
}

/* Every layer at several sizes, checked against real captures, and the
 * tokens of every mode with and without patching. */
static void check_model(pw_model *m, const char *label, const int64_t *sizes, int n_sizes,
                        bool expect_groups) {
    printf("%s\n", label);
    pw_engine *e = NULL;
    /* verify_capture: every patched piece compared with a real capture */
    CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, true, true, sizes, n_sizes, &e));
    if (!e) return;
    int grouped, groups;
    count_grouped(e, &grouped, &groups);
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    int n_cap = 0;
    (void)pw_dispatcher_capture_sizes(pw_engine_dispatcher(e), &n_cap);
    printf("  %d pieces in %d groups, %d sizes: %" PRIu64 " graphs, %" PRIu64
           " patched, %" PRIu64 " pieces patched inside FULL graphs\n",
           grouped, groups, n_cap, st.graphs_captured, st.graphs_patched,
           st.pieces_patched_in_full);
    if (expect_groups) {
        CHECK(groups >= 1);
        /* every group member but the first, at every size, in both modes */
        CHECK_EQ_INT((int64_t)st.graphs_patched, (int64_t)(grouped - groups) * n_cap);
        CHECK(st.pieces_patched_in_full >= st.graphs_patched);
    }
    int32_t ref[3][MAX_OUT], got[3][MAX_OUT];
    CHECK_OK(run_tokens(e, m, ref));
    pw_engine_free(e);

    static const pw_graph_mode modes[] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL,
                                          PW_GRAPH_FULL_AND_PIECEWISE};
    for (size_t mi = 0; mi < PW_ARRAY_LEN(modes); mi++) {
        for (int distinct = 0; distinct < 2; distinct++) {
            e = NULL;
            CHECK_OK(make_engine(m, modes[mi], distinct, false, sizes, n_sizes, &e));
            if (!e) continue;
            pw_engine_get_stats(e, &st);
            if (!distinct) CHECK_EQ_INT((int64_t)(st.graphs_patched + st.pieces_patched_in_full), 0);
            CHECK_OK(run_tokens(e, m, got));
            if (memcmp(ref, got, sizeof ref) != 0) {
                printf("  tokens differ: mode %s, distinct %d\n", pw_graph_mode_name(modes[mi]),
                       distinct);
                CHECK(false);
            }
            pw_engine_free(e);
        }
    }
}

static pw_model *tiny_model(int n_layers, pw_dtype (*types)(const char *, pw_dtype, void *)) {
    char path[] = "/tmp/pw_test_distinct_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    pw_tiny_llama_config tc = pw_tiny_llama_default_config();
    tc.n_layers = n_layers;
    tc.tensor_dtype = types;
    pw_model *m = NULL;
    CHECK_OK(pw_tiny_llama_write_file(&tc, path));
    CHECK_OK(pw_model_load(path, &m));
    unlink(path);
    return m;
}

/* Layer 3's feed-forward weights in Q8_0: the same IR, another launch. */
static pw_dtype mixed_types(const char *name, pw_dtype dflt, void *user) {
    (void)user;
    if (strncmp(name, "blk.3.ffn", 9) == 0) return PW_Q8_0;
    return dflt;
}

static void check_groups_from_ir(void) {
    const char *a_text = "graph a:\n"
                         "    %x = placeholder\n"
                         "    %w = placeholder\n"
                         "    %y = call_function matmul(%x, %w)\n"
                         "    %z = call_function rms_norm(%y, %w, eps=1e-05)\n"
                         "    return %z\n";
    const char *b_text = "graph b:\n"
                         "    %input = placeholder\n"
                         "    %weight = placeholder\n"
                         "    %mm = call_function matmul(%input, %weight)\n"
                         "    %out = call_function rms_norm(%mm, %weight, eps=1e-05)\n"
                         "    return %out\n";
    const char *c_text = "graph c:\n"
                         "    %x = placeholder\n"
                         "    %w = placeholder\n"
                         "    %y = call_function matmul(%x, %w)\n"
                         "    %z = call_function rms_norm(%y, %w, eps=1e-06)\n"
                         "    return %z\n";
    const char *d_text = "graph d:\n"
                         "    %x = placeholder\n"
                         "    %w = placeholder\n"
                         "    %y = call_function matmul(%w, %x)\n"
                         "    %z = call_function rms_norm(%y, %w, eps=1e-05)\n"
                         "    return %z\n";
    pw_ir *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_OK(pw_ir_parse(a_text, strlen(a_text), &a));
    CHECK_OK(pw_ir_parse(b_text, strlen(b_text), &b));
    CHECK_OK(pw_ir_parse(c_text, strlen(c_text), &c));
    CHECK_OK(pw_ir_parse(d_text, strlen(d_text), &d));
    if (a && b && c && d) {
        CHECK(pw_engine_ir_same_modulo_names(a, b));  /* only the names differ */
        CHECK(!pw_engine_ir_same_modulo_names(a, c)); /* another constant */
        CHECK(!pw_engine_ir_same_modulo_names(a, d)); /* arguments swapped */
    }
    pw_ir_free(a);
    pw_ir_free(b);
    pw_ir_free(c);
    pw_ir_free(d);
}

int main(void) {
    check_groups_from_ir();

    static const int64_t sizes[] = {1, 2, 4, 8, 16, 32};
    pw_model *m = tiny_model(6, NULL);
    if (m) check_model(m, "random 6-layer model", sizes, (int)PW_ARRAY_LEN(sizes), true);
    pw_model_free(m);

    /* a layer with another weight type: same IR, so the same group, but its
     * arguments differ and it is captured for real (still checked) */
    m = tiny_model(5, mixed_types);
    if (m) check_model(m, "random 5-layer model, layer 3 in Q8_0", sizes, 3, false);
    pw_model_free(m);

    char path[4096];
    if (pw_test_shared_path("models/stories260K.gguf", path, sizeof path)) {
        m = NULL;
        CHECK_OK(pw_model_load(path, &m));
        if (m) check_model(m, "stories260K", sizes, (int)PW_ARRAY_LEN(sizes), true);
        pw_model_free(m);
    } else {
        pw_test_skip_part("stories260K.gguf not found under ../shared/models");
    }
    char smol_buf[4096];
    const char *smol = pw_test_model_path("PW_SMOLLM2_GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf",
                                          smol_buf, sizeof smol_buf);
    if (smol) {
        m = NULL;
        CHECK_OK(pw_model_load(smol, &m));
        static const int64_t smol_sizes[] = {1, 4, 16};
        if (m) check_model(m, "SmolLM2-135M", smol_sizes, 3, true);
        pw_model_free(m);
    } else {
        pw_test_skip_part("SmolLM2-135M-Instruct.Q4_1.gguf not fetched (scripts/fetch-model.sh)");
    }
    return pw_test_finish("model_engine_distinct");
}
