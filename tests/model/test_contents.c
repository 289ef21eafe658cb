/* A tensor or metadata key that would change the computation, and that
 * the engine does not implement, is refused at load with PW_ERR_FORMAT
 * naming it (model_contents.h): never ignored. Harmless keys and the ones
 * that restate what the engine does still load. */
#include "piecewise_llm.h"
#include "test_util.h"
#include "internal.h"

#include "model/gguf_writer.h"
#include "model/model_contents.h"

#include <unistd.h>

static char path[] = "/tmp/pw_test_contents_XXXXXX";

/* What to add to the tiny Llama (dim 64, 4 heads: head size 16, 2 layers). */
typedef struct extra {
    const char *tensor;   /* a 1-D f32 tensor of 16 elements */
    const char *key;      /* with one of: */
    const char *str;
    double num;           /* f32 when is_float, else u32 */
    bool is_float, is_bool, bool_value;
} extra;

static pw_status load_with(extra x) {
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    pw_gguf_writer *w;
    CHECK_OK(pw_gguf_writer_new(&w));
    CHECK_OK(pw_tiny_llama_add(w, &cfg));
    if (x.tensor) {
        float v[16] = {0};
        int64_t dims[1] = {16};
        CHECK_OK(pw_gguf_writer_add_tensor_f32(w, x.tensor, PW_F32, 1, dims, v));
    }
    if (x.key && x.str) CHECK_OK(pw_gguf_writer_add_string(w, x.key, x.str));
    else if (x.key && x.is_bool) CHECK_OK(pw_gguf_writer_add_bool(w, x.key, x.bool_value));
    else if (x.key && x.is_float) CHECK_OK(pw_gguf_writer_add_f32(w, x.key, (float)x.num));
    else if (x.key) CHECK_OK(pw_gguf_writer_add_u32(w, x.key, (uint32_t)x.num));
    CHECK_OK(pw_gguf_writer_to_file(w, path));
    pw_gguf_writer_free(w);
    pw_model *m = NULL;
    pw_status s = pw_model_load(path, &m);
    CHECK(s == PW_OK ? m != NULL : m == NULL);
    pw_model_free(m);
    return s;
}

static void test_tensors(void) {
    CHECK_OK(load_with((extra){0}));
    /* llama3 rope scaling's frequency factors are read (model_families
     * tests them); these 16 have the wrong size for heads of 16 */
    CHECK_ERR(load_with((extra){.tensor = "rope_freqs.weight"}), PW_ERR_FORMAT,
              "tensor 'rope_freqs.weight' has shape [16, 1], expected [8, 1]");
    /* Qwen 2's attention biases */
    CHECK_ERR(load_with((extra){.tensor = "blk.0.attn_q.bias"}), PW_ERR_FORMAT,
              "tensor 'blk.0.attn_q.bias'");
    CHECK_ERR(load_with((extra){.tensor = "blk.1.ffn_down.bias"}), PW_ERR_FORMAT,
              "tensor 'blk.1.ffn_down.bias'");
    /* Qwen 3 / Gemma's per-head norms on an architecture without them */
    CHECK_ERR(load_with((extra){.tensor = "blk.0.attn_q_norm.weight"}), PW_ERR_FORMAT,
              "tensor 'blk.0.attn_q_norm.weight'");
    /* a layer beyond block_count, a malformed index, anything unknown */
    CHECK_ERR(load_with((extra){.tensor = "blk.2.attn_norm.weight"}), PW_ERR_FORMAT,
              "tensor 'blk.2.attn_norm.weight'");
    CHECK_ERR(load_with((extra){.tensor = "blk.01.attn_norm.weight"}), PW_ERR_FORMAT,
              "tensor 'blk.01.attn_norm.weight'");
    CHECK_ERR(load_with((extra){.tensor = "blk..attn_norm.weight"}), PW_ERR_FORMAT,
              "tensor 'blk..attn_norm.weight'");
    CHECK_ERR(load_with((extra){.tensor = "whatever"}), PW_ERR_FORMAT, "tensor 'whatever'");
}

static void test_keys(void) {
    /* rope scaling: none and linear (llama.cpp's default type, a no-op at
     * factor 1) load; the others are refused */
    CHECK_OK(load_with((extra){.key = "llama.rope.scaling.type", .str = "none"}));
    CHECK_OK(load_with((extra){.key = "llama.rope.scaling.type", .str = "linear"}));
    CHECK_ERR(load_with((extra){.key = "llama.rope.scaling.type", .str = "llama3"}), PW_ERR_FORMAT,
              "metadata key 'llama.rope.scaling.type' = 'llama3' is not implemented");
    CHECK_ERR(load_with((extra){.key = "llama.rope.scaling.type", .str = "yarn"}), PW_ERR_FORMAT,
              "'llama.rope.scaling.type' = 'yarn'");
    CHECK_OK(load_with((extra){.key = "llama.rope.scaling.factor", .num = 1, .is_float = true}));
    /* linear scaling by a factor is implemented for llama (family_hparams.c) */
    CHECK_OK(load_with((extra){.key = "llama.rope.scaling.factor", .num = 8, .is_float = true}));
    CHECK_OK(load_with((extra){.key = "llama.rope.scaling.original_context_length", .num = 8192}));
    /* keys that restate the head size must agree with it */
    CHECK_OK(load_with((extra){.key = "llama.attention.key_length", .num = 16}));
    CHECK_ERR(load_with((extra){.key = "llama.attention.key_length", .num = 8}), PW_ERR_FORMAT,
              "metadata key 'llama.attention.key_length' = 8 differs from the head size 16");
    CHECK_ERR(load_with((extra){.key = "llama.attention.value_length", .num = 32}), PW_ERR_FORMAT,
              "'llama.attention.value_length' = 32");
    CHECK_ERR(load_with((extra){.key = "llama.attention.key_length", .str = "16"}), PW_ERR_FORMAT,
              "llama.attention.key_length");
    CHECK_OK(load_with((extra){.key = "llama.attention.causal", .is_bool = true, .bool_value = true}));
    CHECK_ERR(load_with((extra){.key = "llama.attention.causal", .is_bool = true}), PW_ERR_FORMAT,
              "'llama.attention.causal' = false");
    /* a mixture of experts, soft-capping, anything unknown under the prefix */
    CHECK_ERR(load_with((extra){.key = "llama.expert_count", .num = 8}), PW_ERR_FORMAT,
              "metadata key 'llama.expert_count' is not part of the llama architecture");
    CHECK_ERR(load_with((extra){.key = "llama.attn_logit_softcapping", .num = 50, .is_float = true}),
              PW_ERR_FORMAT, "'llama.attn_logit_softcapping'");
    /* outside the architecture's prefix: not the model's computation */
    CHECK_OK(load_with((extra){.key = "general.description", .str = "anything"}));
    CHECK_OK(load_with((extra){.key = "quantize.imatrix.chunks_count", .num = 100}));
}

/* The gemma3 rows, on a file with no weights: the check reads names only. */
static void test_gemma3_rows(void) {
    pw_gguf_writer *w;
    CHECK_OK(pw_gguf_writer_new(&w));
    CHECK_OK(pw_gguf_writer_add_string(w, "general.architecture", "gemma3"));
    CHECK_OK(pw_gguf_writer_add_u32(w, "gemma3.attention.sliding_window", 512));
    CHECK_OK(pw_gguf_writer_add_u32(w, "gemma3.rope.dimension_count", 256));
    float v[4] = {0};
    int64_t dims[1] = {4};
    const char *names[] = {"token_embd.weight", "blk.0.attn_q_norm.weight",
                           "blk.17.post_ffw_norm.weight", "blk.3.post_attention_norm.weight"};
    for (size_t i = 0; i < PW_ARRAY_LEN(names); i++)
        CHECK_OK(pw_gguf_writer_add_tensor_f32(w, names[i], PW_F32, 1, dims, v));
    uint8_t *buf;
    size_t len;
    CHECK_OK(pw_gguf_writer_to_memory(w, &buf, &len));
    pw_gguf *g;
    CHECK_OK(pw_gguf_open_memory(buf, len, &g));
    CHECK_OK(pw_model_check_contents(g, "gemma3", 18, 256));
    CHECK_ERR(pw_model_check_contents(g, "gemma3", 17, 256), PW_ERR_FORMAT,
              "tensor 'blk.17.post_ffw_norm.weight' is not part of the gemma3 architecture");
    CHECK_ERR(pw_model_check_contents(g, "gemma3", 18, 128), PW_ERR_FORMAT,
              "'gemma3.rope.dimension_count' = 256 differs from the head size 128");
    /* the same tensors are not Llama's */
    CHECK_ERR(pw_model_check_contents(g, "llama", 18, 256), PW_ERR_FORMAT,
              "tensor 'blk.0.attn_q_norm.weight' is not part of the llama architecture");
    CHECK_ERR(pw_model_check_contents(g, "gpt9", 18, 256), PW_ERR_UNSUPPORTED, "gpt9");
    pw_gguf_free(g);
    pw_host_free(buf);
    pw_gguf_writer_free(w);
}

int main(void) {
    int fd = mkstemp(path);
    if (fd < 0) pw_test_skip("cannot create a temporary file");
    close(fd);
    test_tensors();
    test_keys();
    test_gemma3_rows();
    unlink(path);
    return pw_test_finish("model_contents");
}
