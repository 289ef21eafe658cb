/* `piecewise inspect` on files with K-quants: every tensor is listed with
 * its type by name (q4_K, q6_K, q5_0, ...) and the per-type summary counts
 * them. Runs the built CLI on a tiny mixed-type Llama written here, and on
 * Gemma 3 270M Q4_K_M when scripts/fetch-model.sh gemma3-270m has fetched
 * it (skipped, saying so, otherwise); the Gemma file's tensor table is also
 * checked through the reader, and loading it for a run names the
 * unsupported architecture. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/dequant.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLI_PATH PW_BINARY_DIR "/piecewise"

/* The CLI's stdout for `piecewise inspect path` in a new buffer, or NULL. */
static char *inspect_output(const char *path, int *rc) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' 2>&1", CLI_PATH, path);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 4096) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    *rc = pclose(p);
    if (buf) buf[len] = '\0';
    return buf;
}

/* The tensor table line of `name` holds `type` in the type column. */
static bool lists_tensor(const char *out, const char *name, const char *type) {
    char want[256];
    size_t n = strlen(name);
    for (const char *at = strstr(out, name); at; at = strstr(at + 1, name)) {
        if (at[-1] != ' ' || at[n] != ' ') continue;
        const char *t = at + n;
        while (*t == ' ') t++;
        snprintf(want, sizeof want, "%s ", type);
        if (strncmp(t, want, strlen(want)) == 0) return true;
    }
    return false;
}

static bool summary_has(const char *out, const char *type, int64_t count) {
    const char *sec = strstr(out, "\ntensor types:\n");
    if (!sec) return false;
    char want[64];
    snprintf(want, sizeof want, "  %-5s %6lld tensors", type, (long long)count);
    return strstr(sec, want) != NULL;
}

static pw_dtype tiny_types(const char *name, pw_dtype weight_dtype, void *user) {
    (void)user;
    if (strcmp(name, "output.weight") == 0) return PW_Q6_K;
    if (strstr(name, "attn_k")) return PW_Q5_0;
    if (strstr(name, "ffn_down")) return PW_Q5_K;
    if (strstr(name, "blk.1.attn_q")) return PW_Q3_K;
    if (strstr(name, "blk.1.ffn_up")) return PW_Q2_K;
    return weight_dtype;
}

static bool cli_present(void) {
    if (access(CLI_PATH, X_OK) == 0) return true;
    pw_test_skip_part(CLI_PATH " not built: the CLI checks");
    return false;
}

static void test_tiny_inspect(void) {
    if (!cli_present()) return;
    char path[] = "/tmp/pw_test_kq_inspect_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.dim = 256;
    cfg.ffn_dim = 256;
    cfg.weight_dtype = PW_Q4_K;
    cfg.tensor_dtype = tiny_types;
    CHECK_OK(pw_tiny_llama_write_file(&cfg, path));
    int rc = -1;
    char *out = inspect_output(path, &rc);
    CHECK(out != NULL);
    CHECK_EQ_INT(rc, 0);
    if (out) {
        CHECK(lists_tensor(out, "output.weight", "q6_K"));
        CHECK(lists_tensor(out, "token_embd.weight", "q4_K"));
        CHECK(lists_tensor(out, "blk.0.attn_k.weight", "q5_0"));
        CHECK(lists_tensor(out, "blk.1.attn_k.weight", "q5_0"));
        CHECK(lists_tensor(out, "blk.0.ffn_down.weight", "q5_K"));
        CHECK(lists_tensor(out, "blk.1.attn_q.weight", "q3_K"));
        CHECK(lists_tensor(out, "blk.1.ffn_up.weight", "q2_K"));
        CHECK(lists_tensor(out, "blk.0.attn_q.weight", "q4_K"));
        CHECK(lists_tensor(out, "blk.0.attn_norm.weight", "f32"));
        /* 2 layers: 5 norms f32; q4_K: embd + (q, v, o, gate, up) + (v, o, gate) */
        CHECK(summary_has(out, "f32", 5));
        CHECK(summary_has(out, "q4_K", 9));
        CHECK(summary_has(out, "q5_0", 2));
        CHECK(summary_has(out, "q5_K", 2));
        CHECK(summary_has(out, "q6_K", 1));
        CHECK(summary_has(out, "q3_K", 1));
        CHECK(summary_has(out, "q2_K", 1));
        CHECK(strstr(out, "total: 21 tensors") != NULL);
        if (pw_test_failures) fprintf(stderr, "inspect output:\n%s\n", out);
    }
    free(out);
    unlink(path);
}

static void test_gemma(void) {
    char gemma[4096];
    if (!pw_test_model_path("PW_GEMMA3_GGUF", "gemma-3-270m-q4_k_m.gguf", gemma, sizeof gemma)) {
        pw_test_skip_part("gemma-3-270m-q4_k_m.gguf not fetched (scripts/fetch-model.sh "
                          "gemma3-270m): the Gemma checks");
        return;
    }
    pw_gguf *g = NULL;
    CHECK_OK(pw_gguf_open(gemma, &g));
    if (!g) return;
    const char *arch = NULL;
    CHECK_OK(pw_gguf_get_string(g, "general.architecture", &arch));
    CHECK(arch && strcmp(arch, "gemma3") == 0);
    /* The file's mix, as `piecewise inspect` printed it when this test was
     * written (llama.cpp's Q4_K_M falls back to q5_0 / q8_0 where rows of
     * 640 are not whole 256-blocks). */
    int64_t counts[PW_DTYPE_COUNT_] = {0};
    for (int64_t i = 0; i < pw_gguf_tensor_count(g); i++) counts[pw_gguf_tensor_at(g, i)->dtype]++;
    CHECK_EQ_INT(pw_gguf_tensor_count(g), 236);
    CHECK_EQ_INT(counts[PW_F32], 109);
    CHECK_EQ_INT(counts[PW_Q8_0], 10);
    CHECK_EQ_INT(counts[PW_Q5_0], 81);
    CHECK_EQ_INT(counts[PW_Q4_K], 27);
    CHECK_EQ_INT(counts[PW_Q6_K], 9);
    /* Every K-quant tensor dequantizes (finite values). */
    int bad = 0;
    for (int64_t i = 0; i < pw_gguf_tensor_count(g); i++) {
        const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
        if (t->dtype != PW_Q4_K && t->dtype != PW_Q6_K) continue;
        float *v = pw_host_alloc((size_t)t->n_elements * sizeof *v);
        CHECK_OK(pw_dequantize(t->dtype, t->data, v, t->n_elements));
        for (int64_t k = 0; k < t->n_elements; k++) bad += !(v[k] == v[k] && v[k] - v[k] == 0.0f);
        pw_host_free(v);
    }
    CHECK_EQ_INT(bad, 0);

    if (cli_present()) {
        int rc = -1;
        char *out = inspect_output(gemma, &rc);
        CHECK(out != NULL);
        CHECK_EQ_INT(rc, 0);
        int missing = 0;
        for (int64_t i = 0; out && i < pw_gguf_tensor_count(g); i++) {
            const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
            if (!lists_tensor(out, t->name, pw_dtype_name(t->dtype))) {
                if (missing < 4) fprintf(stderr, "inspect does not list %s\n", t->name);
                missing++;
            }
        }
        CHECK_EQ_INT(missing, 0);
        CHECK(out && summary_has(out, "q4_K", 27) && summary_has(out, "q6_K", 9) &&
              summary_has(out, "q5_0", 81));
        free(out);
    }
    pw_gguf_free(g);

    pw_model *m = NULL;
    /* the gemma3 architecture loads (tests/model/test_gemma3.c runs it) */
    CHECK_OK(pw_model_load(gemma, &m));
    if (m) CHECK_STREQ(pw_model_get_info(m)->arch, "gemma3");
    pw_model_free(m);
}

int main(void) {
    test_tiny_inspect();
    test_gemma();
    return pw_test_finish("model_kquant_inspect");
}
