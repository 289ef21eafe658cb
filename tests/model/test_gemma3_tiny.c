/* A tiny random Gemma 3 written with the GGUF writer, so the whole gemma3
 * path runs without the real model: its logits equal a plain double
 * precision forward written out below (embedding scale, per-head q/k norm,
 * NeoX rope with the local and global bases, a sliding window the prompt
 * crosses, post-norms, GeGLU, tied head, soft-capping) at every step of a
 * greedy generation, and the tokens are identical in NONE, PIECEWISE and
 * FULL and whatever else is in the batch. The head size (24) is not
 * dim / heads (16), as in Gemma. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"
#include "model/gguf_writer.h"

#include <math.h>
#include <unistd.h>

enum { DIM = 32, LAYERS = 3, NH = 2, NKV = 1, HD = 24, FF = 40, CTX = 64, WINDOW = 4,
       PATTERN = 2 /* layers 0 and 2 local, 1 global */ };
#define QD (NH * HD)
#define KD (NKV * HD)
#define SOFTCAP 3.0
#define EPS 1e-6
#define THETA_GLOBAL 1e6
#define THETA_LOCAL 1e4
#define N_PROMPT 10
#define N_NEW 10

static char path[] = "/tmp/pw_test_gemma3_tiny_XXXXXX";

/* The vocabulary: <pad> <eos> <bos> <unk>, the 256 byte tokens, then the
 * printable ASCII characters and "▁". */
#define VOCAB (4 + 256 + 95 + 1)

typedef struct weights {
    float embd[VOCAB * DIM], out_norm[DIM];
    struct {
        float attn_norm[DIM], wq[QD * DIM], wk[KD * DIM], wv[KD * DIM], qn[HD], kn[HD];
        float wo[DIM * QD], post_attn[DIM], ffn_norm[DIM], wg[FF * DIM], wu[FF * DIM];
        float wd[DIM * FF], post_ffw[DIM];
    } l[LAYERS];
} weights;

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static float uni(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}
static void fill(float *p, int n, float scale, float offset) {
    for (int i = 0; i < n; i++) p[i] = offset + scale * uni();
}

static void add_tensor(pw_gguf_writer *w, const char *name, int64_t d0, int64_t d1, const float *v) {
    int64_t dims[2] = {d0, d1};
    CHECK_OK(pw_gguf_writer_add_tensor_f32(w, name, PW_F32, d1 ? 2 : 1, dims, v));
}

static void write_model(const weights *W) {
    pw_gguf_writer *w;
    CHECK_OK(pw_gguf_writer_new(&w));
    CHECK_OK(pw_gguf_writer_add_string(w, "general.architecture", "gemma3"));
    CHECK_OK(pw_gguf_writer_add_string(w, "general.name", "tiny gemma3"));
    struct { const char *k; uint32_t v; } u[] = {
        {"gemma3.context_length", CTX}, {"gemma3.embedding_length", DIM},
        {"gemma3.block_count", LAYERS}, {"gemma3.feed_forward_length", FF},
        {"gemma3.attention.head_count", NH}, {"gemma3.attention.head_count_kv", NKV},
        {"gemma3.attention.key_length", HD}, {"gemma3.attention.value_length", HD},
        {"gemma3.attention.sliding_window", WINDOW},
        {"gemma3.attention.sliding_window_pattern", PATTERN}};
    for (size_t i = 0; i < sizeof u / sizeof *u; i++) CHECK_OK(pw_gguf_writer_add_u32(w, u[i].k, u[i].v));
    CHECK_OK(pw_gguf_writer_add_f32(w, "gemma3.attention.layer_norm_rms_epsilon", (float)EPS));
    CHECK_OK(pw_gguf_writer_add_f32(w, "gemma3.rope.freq_base", (float)THETA_GLOBAL));
    CHECK_OK(pw_gguf_writer_add_f32(w, "gemma3.final_logit_softcapping", (float)SOFTCAP));
    /* tokenizer */
    static char texts[VOCAB][8];
    const char *tokens[VOCAB];
    float scores[VOCAB];
    int32_t types[VOCAB];
    const char *specials[4] = {"<pad>", "<eos>", "<bos>", "<unk>"};
    for (int i = 0; i < VOCAB; i++) {
        if (i < 4) snprintf(texts[i], sizeof texts[i], "%s", specials[i]), types[i] = i == 3 ? 2 : 3;
        else if (i < 260) snprintf(texts[i], sizeof texts[i], "<0x%02X>", i - 4), types[i] = 6;
        else if (i < VOCAB - 1) texts[i][0] = (char)(32 + i - 260), texts[i][1] = 0, types[i] = 1;
        else snprintf(texts[i], sizeof texts[i], "\xe2\x96\x81"), types[i] = 1;
        tokens[i] = texts[i];
        scores[i] = i < 260 ? 0.0f : -(float)i;
    }
    CHECK_OK(pw_gguf_writer_add_string(w, "tokenizer.ggml.model", "llama"));
    CHECK_OK(pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", tokens, VOCAB));
    CHECK_OK(pw_gguf_writer_add_array(w, "tokenizer.ggml.scores", PW_GGUF_FLOAT32, scores, VOCAB));
    CHECK_OK(pw_gguf_writer_add_array(w, "tokenizer.ggml.token_type", PW_GGUF_INT32, types, VOCAB));
    CHECK_OK(pw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 2));
    CHECK_OK(pw_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 1));
    CHECK_OK(pw_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 3));
    CHECK_OK(pw_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", false));
    /* weights, in ggml order: dims[0] is the row length */
    add_tensor(w, "token_embd.weight", DIM, VOCAB, W->embd);
    char name[64];
    for (int l = 0; l < LAYERS; l++) {
#define T2(suffix, d0, d1, v) snprintf(name, sizeof name, "blk.%d." suffix ".weight", l), add_tensor(w, name, d0, d1, v)
        T2("attn_norm", DIM, 0, W->l[l].attn_norm);
        T2("attn_q", DIM, QD, W->l[l].wq);
        T2("attn_k", DIM, KD, W->l[l].wk);
        T2("attn_v", DIM, KD, W->l[l].wv);
        T2("attn_q_norm", HD, 0, W->l[l].qn);
        T2("attn_k_norm", HD, 0, W->l[l].kn);
        T2("attn_output", QD, DIM, W->l[l].wo);
        T2("post_attention_norm", DIM, 0, W->l[l].post_attn);
        T2("ffn_norm", DIM, 0, W->l[l].ffn_norm);
        T2("ffn_gate", DIM, FF, W->l[l].wg);
        T2("ffn_up", DIM, FF, W->l[l].wu);
        T2("ffn_down", FF, DIM, W->l[l].wd);
        T2("post_ffw_norm", DIM, 0, W->l[l].post_ffw);
#undef T2
    }
    add_tensor(w, "output_norm.weight", DIM, 0, W->out_norm);
    CHECK_OK(pw_gguf_writer_to_file(w, path));
    pw_gguf_writer_free(w);
}

/* ---- the reference forward, in double -------------------------------------------- */

static void rms(double *y, const double *x, const float *w, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + EPS);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
}
static void mat(double *y, const float *w, const double *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int c = 0; c < cols; c++) s += (double)w[r * cols + c] * x[c];
        y[r] = s;
    }
}
static void rope_neox(double *v, int pos, double theta) {
    for (int i = 0; i < HD / 2; i++) {
        double a = pos * pow(theta, -2.0 * i / HD), x0 = v[i], x1 = v[i + HD / 2];
        v[i] = x0 * cos(a) - x1 * sin(a);
        v[i + HD / 2] = x0 * sin(a) + x1 * cos(a);
    }
}
static double gelu(double v) { return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }

/* Logits [n][VOCAB] of every position of ids[0..n). */
static void reference(const weights *W, const int32_t *ids, int n, double *logits) {
    static double h[CTX][DIM], K[LAYERS][CTX][KD], V[LAYERS][CTX][KD];
    for (int t = 0; t < n; t++)
        for (int i = 0; i < DIM; i++) h[t][i] = W->embd[ids[t] * DIM + i] * sqrtf((float)DIM);
    for (int l = 0; l < LAYERS; l++) {
        bool local = l % PATTERN < PATTERN - 1;
        double theta = local ? THETA_LOCAL : THETA_GLOBAL;
        static double Q[CTX][QD];
        for (int t = 0; t < n; t++) {
            double x[DIM];
            rms(x, h[t], W->l[l].attn_norm, DIM);
            mat(Q[t], W->l[l].wq, x, QD, DIM);
            mat(K[l][t], W->l[l].wk, x, KD, DIM);
            mat(V[l][t], W->l[l].wv, x, KD, DIM);
            for (int hh = 0; hh < NH; hh++) rms(Q[t] + hh * HD, Q[t] + hh * HD, W->l[l].qn, HD), rope_neox(Q[t] + hh * HD, t, theta);
            for (int hh = 0; hh < NKV; hh++) rms(K[l][t] + hh * HD, K[l][t] + hh * HD, W->l[l].kn, HD), rope_neox(K[l][t] + hh * HD, t, theta);
        }
        for (int t = 0; t < n; t++) {
            double att[QD];
            int lo = local && t >= WINDOW ? t - WINDOW + 1 : 0;
            for (int hh = 0; hh < NH; hh++) {
                int kv = hh / (NH / NKV);
                double sc[CTX], mx = -INFINITY, den = 0;
                for (int j = lo; j <= t; j++) {
                    double d = 0;
                    for (int i = 0; i < HD; i++) d += Q[t][hh * HD + i] * K[l][j][kv * HD + i];
                    sc[j] = d / sqrt((double)HD);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int i = 0; i < HD; i++) att[hh * HD + i] = 0;
                for (int j = lo; j <= t; j++) {
                    double e = exp(sc[j] - mx);
                    den += e;
                    for (int i = 0; i < HD; i++) att[hh * HD + i] += e * V[l][j][kv * HD + i];
                }
                for (int i = 0; i < HD; i++) att[hh * HD + i] /= den;
            }
            double o[DIM], on[DIM], x2[DIM], g[FF], u[FF], d[DIM], dn[DIM];
            mat(o, W->l[l].wo, att, DIM, QD);
            rms(on, o, W->l[l].post_attn, DIM);
            for (int i = 0; i < DIM; i++) h[t][i] += on[i];
            rms(x2, h[t], W->l[l].ffn_norm, DIM);
            mat(g, W->l[l].wg, x2, FF, DIM);
            mat(u, W->l[l].wu, x2, FF, DIM);
            for (int i = 0; i < FF; i++) g[i] = gelu(g[i]) * u[i];
            mat(d, W->l[l].wd, g, DIM, FF);
            rms(dn, d, W->l[l].post_ffw, DIM);
            for (int i = 0; i < DIM; i++) h[t][i] += dn[i];
        }
    }
    for (int t = 0; t < n; t++) {
        double x[DIM];
        rms(x, h[t], W->out_norm, DIM);
        mat(logits + (size_t)t * VOCAB, W->embd, x, VOCAB, DIM);
        for (int v = 0; v < VOCAB; v++)
            logits[(size_t)t * VOCAB + v] = SOFTCAP * tanh(logits[(size_t)t * VOCAB + v] / SOFTCAP);
    }
}

/* ---- the engine ------------------------------------------------------------------------- */

typedef struct run {
    int32_t tokens[2][N_NEW];
    int64_t n[2];
    float logits[N_NEW][VOCAB]; /* of request 0, per step */
} run;

/* False when the engine's device refuses the model (pw_test_device_refused). */
static bool generate(pw_model *m, pw_graph_mode mode, const int32_t *const *prompts,
                     const int64_t *n_prompt, int n_req, run *out) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = 2;
    cfg.max_num_batched_tokens = 16;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    cfg.kv_cache_positions = 2 * CTX;
    cfg.max_model_len = CTX;
    pw_engine *e = NULL;
    pw_status st = pw_engine_new(m, &cfg, &e);
    if (pw_test_device_refused(st, "Gemma 3")) return false;
    CHECK_OK(st);
    if (!e) return true;
    int64_t ids[2];
    for (int r = 0; r < n_req; r++)
        CHECK_OK(pw_engine_add_request(e, prompts[r], n_prompt[r], N_NEW, NULL, &ids[r]));
    int step = 0;
    while (pw_engine_has_work(e)) {
        const pw_step_token *t;
        int64_t k;
        pw_status s = pw_engine_step(e, &t, &k);
        CHECK_OK(s);
        if (s != PW_OK) break;
        for (int64_t i = 0; i < k; i++)
            if (t[i].request == ids[0] && step < N_NEW) {
                const float *lg;
                CHECK_OK(pw_engine_last_logits(e, ids[0], &lg));
                memcpy(out->logits[step++], lg, sizeof out->logits[0]);
            }
    }
    for (int r = 0; r < n_req; r++) {
        const int32_t *toks;
        CHECK_OK(pw_engine_request_output(e, ids[r], &toks, &out->n[r]));
        memcpy(out->tokens[r], toks, (size_t)out->n[r] * sizeof(int32_t));
    }
    pw_engine_free(e);
    return true;
}

int main(void) {
    static weights W;
    fill(W.embd, VOCAB * DIM, 1.0f, 0.0f);
    fill(W.out_norm, DIM, 0.2f, 1.0f);
    for (int l = 0; l < LAYERS; l++) {
        fill(W.l[l].attn_norm, DIM, 0.2f, 1.0f), fill(W.l[l].ffn_norm, DIM, 0.2f, 1.0f);
        fill(W.l[l].post_attn, DIM, 0.2f, 1.0f), fill(W.l[l].post_ffw, DIM, 0.2f, 1.0f);
        fill(W.l[l].qn, HD, 0.2f, 1.0f), fill(W.l[l].kn, HD, 0.2f, 1.0f);
        fill(W.l[l].wq, QD * DIM, 0.3f, 0), fill(W.l[l].wk, KD * DIM, 0.3f, 0);
        fill(W.l[l].wv, KD * DIM, 0.3f, 0), fill(W.l[l].wo, DIM * QD, 0.3f, 0);
        fill(W.l[l].wg, FF * DIM, 0.3f, 0), fill(W.l[l].wu, FF * DIM, 0.3f, 0);
        fill(W.l[l].wd, DIM * FF, 0.3f, 0);
    }
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return pw_test_finish("model_gemma3_tiny");
    close(fd);
    write_model(&W);
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(path, &m));
    if (!m) return pw_test_finish("model_gemma3_tiny");
    CHECK_STREQ(pw_model_get_info(m)->arch, "gemma3");
    CHECK_EQ_INT(pw_model_get_info(m)->head_dim, HD);

    int32_t *p0;
    int64_t n0;
    CHECK_OK(pw_model_tokenize(m, "Hi, tiny!", true, &p0, &n0));
    CHECK_EQ_INT(n0, N_PROMPT); /* BOS and one token per character (the space as "▁") */
    static const int32_t p1[] = {2, 300, 301, 302};
    const int32_t *prompts[2] = {p0, p1};
    int64_t n_prompt[2] = {n0, 4};

    static run runs[3], pair[3];
    static const pw_graph_mode modes[3] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE, PW_GRAPH_FULL};
    for (int k = 0; k < 3; k++) {
        if (!generate(m, modes[k], prompts, n_prompt, 1, &runs[k])) {
            free(p0);
            pw_model_free(m);
            unlink(path);
            return pw_test_finish("model_gemma3_tiny");
        }
        generate(m, modes[k], prompts, n_prompt, 2, &pair[k]);
    }
    /* the logits of every step against the reference over the same tokens */
    int32_t all[CTX];
    memcpy(all, p0, (size_t)n0 * sizeof *all);
    memcpy(all + n0, runs[0].tokens[0], (size_t)runs[0].n[0] * sizeof *all);
    static double ref[CTX * VOCAB];
    CHECK_EQ_INT(runs[0].n[0], N_NEW);
    reference(&W, all, (int)(n0 + N_NEW - 1), ref);
    double worst = 0;
    for (int s = 0; s < N_NEW; s++)
        for (int v = 0; v < VOCAB; v++) {
            double e = fabs(runs[0].logits[s][v] - ref[(size_t)(n0 - 1 + s) * VOCAB + v]);
            if (!(e <= worst)) worst = e;
        }
    if (!(worst < 1e-3)) fprintf(stderr, "largest logit error against the reference: %g\n", worst);
    CHECK(worst < 1e-3);
    /* the same tokens, and logits, in every mode and batch */
    for (int k = 0; k < 3; k++) {
        CHECK(runs[k].n[0] == N_NEW && pair[k].n[0] == N_NEW && pair[k].n[1] == N_NEW);
        CHECK(memcmp(runs[k].tokens[0], runs[0].tokens[0], sizeof runs[0].tokens[0]) == 0);
        CHECK(memcmp(pair[k].tokens[0], runs[0].tokens[0], sizeof runs[0].tokens[0]) == 0);
        CHECK(memcmp(pair[k].tokens[1], pair[0].tokens[1], sizeof pair[0].tokens[1]) == 0);
        CHECK(memcmp(runs[k].logits, runs[0].logits, sizeof runs[0].logits) == 0);
    }
    free(p0);
    pw_model_free(m);
    unlink(path);
    return pw_test_finish("model_gemma3_tiny");
}
