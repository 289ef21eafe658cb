/* A Llama GGUF whose weights mix the types of a Q4_K_M download (Q4_K,
 * Q6_K, Q5_0, plus Q2_K, Q3_K, Q5_K and Q5_1 for coverage) loads and
 * generates.
 *
 * By default Q4_K, Q5_K, Q6_K, Q5_0 and Q5_1 stay quantized and go through
 * the integer kernels (matmul_kquant.c), Q2_K and Q3_K are dequantized at
 * load: the model holds fewer bytes than its f32 twin (the same model with
 * every weight replaced by its dequantized values) and gives the same
 * tokens in NONE, PIECEWISE and FULL modes and whatever batch a request
 * runs in. With PW_DEQUANTIZE=1 everything is dequantized at load and the
 * model gives exactly the tokens of the f32 twin in every mode; the test
 * first proves, tensor by tensor through the reader, that the twin holds
 * the dequantized values. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/dequant.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_REQ 3
#define NEW_TOKENS 10
#define MAX_OUT 64

/* The type each weight gets, by name, as llama-quantize's Q4_K_M mix does
 * (Q6_K for the LM head and some attn_v/ffn_down, Q5_0 where rows are not
 * a multiple of 256 in real models), with the other types sprinkled in. */
static pw_dtype mixed_types(const char *name, pw_dtype weight_dtype, void *user) {
    (void)weight_dtype;
    (void)user;
    static const struct {
        const char *name;
        pw_dtype dtype;
    } table[] = {
        {"output.weight", PW_Q6_K},          {"token_embd.weight", PW_Q4_K},
        {"blk.0.attn_k.weight", PW_Q5_0},    {"blk.0.attn_v.weight", PW_Q6_K},
        {"blk.0.ffn_down.weight", PW_Q6_K},  {"blk.1.attn_q.weight", PW_Q3_K},
        {"blk.1.ffn_gate.weight", PW_Q2_K},  {"blk.1.ffn_down.weight", PW_Q5_K},
        {"blk.1.attn_output.weight", PW_Q5_1},
    };
    for (size_t i = 0; i < PW_ARRAY_LEN(table); i++)
        if (strcmp(name, table[i].name) == 0) return table[i].dtype;
    return PW_Q4_K;
}

static pw_tiny_llama_config kquant_config(void) {
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.dim = 256; /* the K-quants need rows of 256 */
    cfg.ffn_dim = 512;
    cfg.n_heads = 4;
    cfg.n_kv_heads = 2;
    cfg.weight_dtype = PW_Q4_K;
    cfg.tensor_dtype = mixed_types;
    cfg.seed = 17;
    return cfg;
}

/* Every tensor of the f32 twin equals the dequantized tensor of the
 * quantized file, bit for bit; the quantized file has the intended types. */
static void check_twin_tensors(const char *quant_path, const char *f32_path) {
    pw_gguf *q = NULL, *f = NULL;
    CHECK_OK(pw_gguf_open(quant_path, &q));
    CHECK_OK(pw_gguf_open(f32_path, &f));
    if (!q || !f) {
        pw_gguf_free(q);
        pw_gguf_free(f);
        return;
    }
    CHECK_EQ_INT(pw_gguf_tensor_count(q), pw_gguf_tensor_count(f));
    int seen[PW_DTYPE_COUNT_] = {0};
    for (int64_t i = 0; i < pw_gguf_tensor_count(q); i++) {
        const pw_gguf_tensor *tq = pw_gguf_tensor_at(q, i), *tf;
        CHECK_OK(pw_gguf_find_tensor(f, tq->name, &tf));
        if (!tf) continue;
        seen[tq->dtype]++;
        CHECK_EQ_INT(tf->dtype, PW_F32);
        CHECK_EQ_INT(tf->n_elements, tq->n_elements);
        if (tq->n_dims == 2) CHECK_EQ_INT(tq->dtype, mixed_types(tq->name, PW_Q4_K, NULL));
        float *deq = pw_host_alloc((size_t)tq->n_elements * sizeof *deq);
        CHECK_OK(pw_dequantize(tq->dtype, tq->data, deq, tq->n_elements));
        if (memcmp(deq, tf->data, (size_t)tq->n_elements * sizeof *deq) != 0) {
            fprintf(stderr, "tensor %s (%s): the f32 twin differs from the dequantized weights\n",
                    tq->name, pw_dtype_name(tq->dtype));
            CHECK(false);
        }
        pw_host_free(deq);
    }
    const pw_dtype used[] = {PW_Q2_K, PW_Q3_K, PW_Q4_K, PW_Q5_K, PW_Q6_K, PW_Q5_0, PW_Q5_1};
    for (size_t k = 0; k < PW_ARRAY_LEN(used); k++) CHECK(seen[used[k]] > 0);
    pw_gguf_free(q);
    pw_gguf_free(f);
}

typedef struct run_result {
    int32_t tokens[N_REQ][MAX_OUT];
    int64_t n[N_REQ];
    int64_t steps_by_mode[3];
} run_result;

static const char *const prompts_text[N_REQ] = {
    "Once upon a time",
    "The cat sat on the mat and the dog",
    "She",
};

/* Greedy generation for three prompts, the second joining a step later so a
 * prefill overlaps a decode. */
static pw_status generate(pw_model *m, pw_graph_mode mode, run_result *res) {
    memset(res, 0, sizeof *res);
    int32_t *prompts[N_REQ] = {0};
    int64_t lens[N_REQ] = {0}, ids[N_REQ] = {0};
    pw_status s = PW_OK;
    for (int i = 0; i < N_REQ && s == PW_OK; i++)
        s = pw_model_tokenize(m, prompts_text[i], true, &prompts[i], &lens[i]);
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 16;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    pw_engine *e = NULL;
    if (s == PW_OK) s = pw_engine_new(m, &cfg, &e);
    int added = 0, step = 0;
    while (s == PW_OK && (added < N_REQ || pw_engine_has_work(e))) {
        for (int i = 0; i < N_REQ && s == PW_OK; i++)
            if (i == step) {
                s = pw_engine_add_request(e, prompts[i], lens[i], NEW_TOKENS, NULL, &ids[i]);
                added++;
            }
        const pw_step_token *toks;
        int64_t n;
        if (s == PW_OK) s = pw_engine_step(e, &toks, &n);
        if (++step > 1000) s = pw_error(PW_ERR_INTERNAL, "test: engine does not finish");
    }
    for (int i = 0; i < N_REQ && s == PW_OK; i++) {
        const int32_t *out;
        s = pw_engine_request_output(e, ids[i], &out, &res->n[i]);
        if (s == PW_OK && res->n[i] <= MAX_OUT)
            memcpy(res->tokens[i], out, (size_t)res->n[i] * sizeof(int32_t));
    }
    if (e) {
        pw_engine_stats st;
        pw_engine_get_stats(e, &st);
        memcpy(res->steps_by_mode, st.steps_by_mode, sizeof res->steps_by_mode);
    }
    pw_engine_free(e);
    for (int i = 0; i < N_REQ; i++) pw_host_free(prompts[i]);
    return s;
}

static bool same_tokens(const run_result *a, const run_result *b) {
    for (int i = 0; i < N_REQ; i++)
        if (a->n[i] != b->n[i] ||
            memcmp(a->tokens[i], b->tokens[i], (size_t)a->n[i] * sizeof(int32_t)) != 0)
            return false;
    return true;
}

/* Each prompt on its own, one request at a time. */
static pw_status generate_alone(pw_model *m, run_result *res) {
    memset(res, 0, sizeof *res);
    pw_status s = PW_OK;
    for (int i = 0; i < N_REQ && s == PW_OK; i++) {
        int32_t *prompt = NULL;
        int64_t len = 0, id = 0;
        s = pw_model_tokenize(m, prompts_text[i], true, &prompt, &len);
        pw_engine_config cfg;
        pw_engine_config_init(&cfg);
        cfg.mode = PW_GRAPH_NONE;
        cfg.max_num_seqs = 1;
        cfg.progress = PW_PROGRESS_OFF;
        cfg.print_capture_totals = false;
        pw_engine *e = NULL;
        if (s == PW_OK) s = pw_engine_new(m, &cfg, &e);
        if (s == PW_OK) s = pw_engine_add_request(e, prompt, len, NEW_TOKENS, NULL, &id);
        for (int step = 0; s == PW_OK && pw_engine_has_work(e); step++) {
            const pw_step_token *toks;
            int64_t n;
            s = pw_engine_step(e, &toks, &n);
            if (step > 1000) s = pw_error(PW_ERR_INTERNAL, "test: engine does not finish");
        }
        const int32_t *out;
        if (s == PW_OK) s = pw_engine_request_output(e, id, &out, &res->n[i]);
        if (s == PW_OK && res->n[i] <= MAX_OUT)
            memcpy(res->tokens[i], out, (size_t)res->n[i] * sizeof(int32_t));
        pw_engine_free(e);
        pw_host_free(prompt);
    }
    return s;
}

static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
static const int mode_index[3] = {PW_MODE_NONE, PW_MODE_PIECEWISE, PW_MODE_FULL};

/* Integer kernels: fewer bytes than the twin, the same tokens in every mode
 * and batch composition. */
static void check_integer_kernels(const char *qpath, const char *fpath) {
    pw_model *mq = NULL, *mf = NULL;
    CHECK_OK(pw_model_load(qpath, &mq));
    CHECK_OK(pw_model_load(fpath, &mf));
    if (mq && mf) {
        const pw_model_info *iq = pw_model_get_info(mq), *ifp = pw_model_get_info(mf);
        CHECK_EQ_INT(iq->file_dtype, PW_Q4_K); /* the most common weight type */
        CHECK_EQ_INT(ifp->file_dtype, PW_F32);
        /* kept quantized: well under half the twin's f32 bytes */
        CHECK(iq->weight_bytes * 2 < ifp->weight_bytes);
        run_result ref, r, alone;
        CHECK_OK(generate(mq, PW_GRAPH_NONE, &ref));
        for (int i = 0; i < N_REQ; i++) CHECK(ref.n[i] > 0);
        for (int k = 1; k < 3; k++) {
            CHECK_OK(generate(mq, modes[k], &r));
            CHECK(r.steps_by_mode[mode_index[k]] > 0); /* the mode really ran */
            bool ok = same_tokens(&r, &ref);
            if (!ok)
                fprintf(stderr, "mode %s: the quantized model's tokens differ from NONE's\n",
                        pw_graph_mode_name(modes[k]));
            CHECK(ok);
        }
        CHECK_OK(generate_alone(mq, &alone));
        bool ok = same_tokens(&alone, &ref);
        if (!ok) fprintf(stderr, "alone: the quantized model's tokens differ from batched\n");
        CHECK(ok);
    }
    pw_model_free(mq);
    pw_model_free(mf);
}

/* PW_DEQUANTIZE=1: the same f32 bytes in memory as the twin, and its
 * tokens in every mode. */
static void check_dequantized(const char *qpath, const char *fpath) {
    setenv("PW_DEQUANTIZE", "1", 1);
    pw_model *mq = NULL, *mf = NULL;
    CHECK_OK(pw_model_load(qpath, &mq));
    CHECK_OK(pw_model_load(fpath, &mf));
    unsetenv("PW_DEQUANTIZE");
    if (mq && mf) {
        const pw_model_info *iq = pw_model_get_info(mq), *ifp = pw_model_get_info(mf);
        CHECK_EQ_INT((int64_t)iq->weight_bytes, (int64_t)ifp->weight_bytes);
        run_result ref, rq, rf;
        CHECK_OK(generate(mf, PW_GRAPH_NONE, &ref));
        for (int i = 0; i < N_REQ; i++) CHECK(ref.n[i] > 0);
        for (int k = 0; k < 3; k++) {
            CHECK_OK(generate(mq, modes[k], &rq));
            CHECK_OK(generate(mf, modes[k], &rf));
            CHECK(rq.steps_by_mode[mode_index[k]] > 0);
            bool q_ok = same_tokens(&rq, &ref), f_ok = same_tokens(&rf, &ref);
            if (!q_ok || !f_ok)
                fprintf(stderr, "mode %s: quantized model %s, f32 twin %s the f32 NONE tokens\n",
                        pw_graph_mode_name(modes[k]), q_ok ? "matches" : "differs from",
                        f_ok ? "matches" : "differs from");
            CHECK(q_ok);
            CHECK(f_ok);
        }
    }
    pw_model_free(mq);
    pw_model_free(mf);
}

static void test_mixed_kquant_model(void) {
    char qpath[] = "/tmp/pw_test_kquant_XXXXXX", fpath[] = "/tmp/pw_test_kquant_f32_XXXXXX";
    int fd = mkstemp(qpath);
    CHECK(fd >= 0);
    close(fd);
    fd = mkstemp(fpath);
    CHECK(fd >= 0);
    close(fd);
    pw_tiny_llama_config cfg = kquant_config();
    CHECK_OK(pw_tiny_llama_write_file(&cfg, qpath));
    cfg.store_dequantized = true;
    CHECK_OK(pw_tiny_llama_write_file(&cfg, fpath));
    check_twin_tensors(qpath, fpath);
    check_integer_kernels(qpath, fpath);
    check_dequantized(qpath, fpath);
    unlink(qpath);
    unlink(fpath);
}

/* The writer refuses a K-quant tensor whose rows are not whole blocks. */
static void test_writer_checks_blocks(void) {
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config(); /* dim 64 */
    cfg.weight_dtype = PW_Q4_K;
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_ERR(pw_tiny_llama_write_memory(&cfg, &buf, &len), PW_ERR_INVALID_ARG,
              "must be multiples of the q4_K block size");
    cfg = kquant_config();
    cfg.store_dequantized = true;
    cfg.ffn_dim = 288; /* ffn_down rows of 288: not whole 256-blocks */
    CHECK_ERR(pw_tiny_llama_write_memory(&cfg, &buf, &len), PW_ERR_INVALID_ARG,
              "must be multiples of the q4_K block size");
    cfg.ffn_dim = 512;
    cfg.weight_dtype = PW_F32; /* the table still asks for K-quants */
    cfg.store_dequantized = false;
    cfg.dim = 96;
    cfg.n_heads = 3;
    cfg.n_kv_heads = 1;
    CHECK_ERR(pw_tiny_llama_write_memory(&cfg, &buf, &len), PW_ERR_INVALID_ARG,
              "dim 0 (96) is not a multiple of the q4_K block size");
    cfg.store_dequantized = true;
    CHECK_ERR(pw_tiny_llama_write_memory(&cfg, &buf, &len), PW_ERR_INVALID_ARG,
              "dim 0 (96) is not a multiple of the q4_K block size");
    CHECK(buf == NULL);
}

/* A file's bytes, hashed (FNV-1a). */
static uint64_t file_hash(const char *path) {
    FILE *f = fopen(path, "rb");
    uint64_t h = 1469598103934665603ull;
    if (!f) return 0;
    for (int c; (c = fgetc(f)) != EOF;) h = (h ^ (uint64_t)c) * 1099511628211ull;
    fclose(f);
    return h;
}

/* How many of the model's 2-D weights have `dtype`. */
static int weights_of(const pw_model *m, pw_dtype dtype) {
    pw_value params[512];
    CHECK(pw_model_num_params(m) <= 512);
    int n = pw_model_params(m, params, NULL), count = 0;
    for (int i = 1; i < n; i++)
        if (params[i].kind == PW_VAL_TENSOR && pw_tensor_ndim(params[i].as.tensor) == 2 &&
            pw_tensor_dtype(params[i].as.tensor) == dtype)
            count++;
    return count;
}

/* Q4_0 weights are converted at load into the interleaved Q4_0x16 layout
 * (docs/kernels.md): the tokens are those of the file's layout
 * (PW_INTERLEAVE=0) in every mode and batch, the held bytes the same, and
 * the file is never changed (a second model from it, loaded while the
 * first is alive, reads the file's layout). */
static void test_q4_0_interleaved_model(void) {
    char path[] = "/tmp/pw_test_q4_0_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config(); /* dim 64, ffn 96 */
    cfg.weight_dtype = PW_Q4_0;
    cfg.tied_embeddings = true; /* the embedding table is the LM head */
    cfg.seed = 23;
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));
    uint64_t before = file_hash(path);
    pw_model *mx = NULL, *m0 = NULL;
    CHECK_OK(pw_model_load(path, &mx));
    setenv("PW_INTERLEAVE", "0", 1);
    CHECK_OK(pw_model_load(path, &m0));
    unsetenv("PW_INTERLEAVE");
    if (mx && m0) {
        /* every projection, the embedding and the LM head are
         * interleaved, o and down shard by shard as they are copied into
         * their K-shards (each shard's rows are whole groups here) */
        CHECK(weights_of(mx, PW_Q4_0X16) > 0);
        CHECK_EQ_INT(weights_of(mx, PW_Q4_0), 0);
        CHECK_EQ_INT(weights_of(m0, PW_Q4_0X16), 0);
        CHECK_EQ_INT(weights_of(m0, PW_Q4_0),
                     weights_of(mx, PW_Q4_0) + weights_of(mx, PW_Q4_0X16));
        CHECK_EQ_INT((int64_t)pw_model_get_info(mx)->weight_bytes,
                     (int64_t)pw_model_get_info(m0)->weight_bytes);
        CHECK_EQ_INT(pw_model_get_info(mx)->file_dtype, PW_Q4_0);
        run_result ref, r, alone;
        CHECK_OK(generate(m0, PW_GRAPH_NONE, &ref));
        for (int i = 0; i < N_REQ; i++) CHECK(ref.n[i] > 0);
        for (int k = 0; k < 3; k++) {
            CHECK_OK(generate(mx, modes[k], &r));
            CHECK(r.steps_by_mode[mode_index[k]] > 0);
            bool ok = same_tokens(&r, &ref);
            if (!ok)
                fprintf(stderr, "mode %s: the interleaved weights' tokens differ\n",
                        pw_graph_mode_name(modes[k]));
            CHECK(ok);
        }
        CHECK_OK(generate_alone(mx, &alone));
        CHECK(same_tokens(&alone, &ref));
    }
    pw_model_free(mx);
    pw_model_free(m0);
    CHECK(file_hash(path) == before);
    unlink(path);
}

int main(void) {
    test_mixed_kquant_model();
    test_q4_0_interleaved_model();
    test_writer_checks_blocks();
    return pw_test_finish("model_kquant_model");
}
