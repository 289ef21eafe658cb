/* A synthetic Llama-like graph for tests and the stitching benchmark
 * (declared in pw_testing.h). It follows vLLM's split graphs: weights are
 * placeholders, attention writes into a buffer made by the piece before it
 * and returns nothing; built with the public builder. */
#include "graph_internal.h"
#include "pw_testing.h"

#define SYN_HIDDEN 64

typedef struct syn {
    pw_ir *g;
    pw_status s;
    char name[PW_IR_MAX_NAME];
} syn;

static int ph(syn *b, const char *name, const pw_ir_type *type) {
    int id = -1;
    if (b->s == PW_OK) b->s = pw_ir_add_placeholder(b->g, name, &id);
    if (b->s == PW_OK && type) b->s = pw_ir_set_node_type(b->g, id, type);
    return id;
}

static int call(syn *b, const char *name, const char *target, const pw_ir_arg *args, int nargs,
                const pw_ir_kwarg *kw, int nkw) {
    int id = -1;
    if (b->s == PW_OK) b->s = pw_ir_add_call_function(b->g, name, target, args, nargs, kw, nkw, &id);
    return id;
}

static int item(syn *b, const char *name, int src, int index) {
    int id = -1;
    if (b->s == PW_OK) b->s = pw_ir_add_getitem(b->g, name, src, index, &id);
    return id;
}

static const char *nm(syn *b, int layer, const char *what) {
    snprintf(b->name, sizeof b->name, "l%d_%s", layer, what);
    return b->name;
}

#define N(x) pw_ir_arg_node(x)

pw_status pw_ir_synthetic_llama(int layers, pw_ir **out) {
    *out = NULL;
    if (layers < 1) return pw_error(PW_ERR_INVALID_ARG, "synthetic llama: %d layers", layers);
    syn b = {0};
    PW_TRY(pw_ir_new("llama", &b.g));
    pw_ir_type sym = {.kind = PW_IR_TYPE_SYMINT};
    pw_ir_type ids = {.kind = PW_IR_TYPE_TENSOR, .dtype = PW_I32, .ndim = 1, .dims = {PW_IR_DIM_TOKENS}};
    pw_ir_type pos = {.kind = PW_IR_TYPE_TENSOR, .dtype = PW_I64, .ndim = 1, .dims = {PW_IR_DIM_TOKENS}};
    b.s = pw_ir_add_comment(b.g, " a Llama-like model in vLLM's style; attention writes into a buffer");
    int s0 = ph(&b, "s0", &sym);
    int input_ids = ph(&b, "input_ids", &ids);
    int positions = ph(&b, "positions", &pos);
    int cos_sin = ph(&b, "cos_sin", NULL);
    int embed_w = ph(&b, "embed_w", NULL);
    enum { IN_LN, QKV, O, POST_LN, GATE_UP, DOWN, NW };
    static const char *const wnames[NW] = {"in_ln_w", "qkv_w", "o_w", "post_ln_w", "gate_up_w", "down_w"};
    int *w = pw_host_calloc((size_t)layers * NW, sizeof *w);
    if (!w) {
        pw_ir_free(b.g);
        return PW_ERR_OOM;
    }
    for (int l = 0; l < layers; l++)
        for (int k = 0; k < NW; k++) w[l * NW + k] = ph(&b, nm(&b, l, wnames[k]), NULL);
    int norm_w = ph(&b, "norm_w", NULL);

    pw_ir_kwarg eps = {"eps", pw_ir_arg_float(1e-5)};
    pw_ir_arg a2[2] = {N(input_ids), N(embed_w)};
    int residual = call(&b, "embed", "embedding", a2, 2, NULL, 0);
    for (int l = 0; l < layers && b.s == PW_OK; l++) {
        char comment[64];
        snprintf(comment, sizeof comment, " layer %d", l);
        b.s = pw_ir_add_comment(b.g, comment);
        pw_ir_arg ln_args[2] = {N(residual), N(w[l * NW + IN_LN])};
        int ln = call(&b, nm(&b, l, "ln"), "rms_norm", ln_args, 2, &eps, 1);
        pw_ir_arg qkv_args[2] = {N(ln), N(w[l * NW + QKV])};
        int qkv = call(&b, nm(&b, l, "qkv"), "linear", qkv_args, 2, NULL, 0);
        pw_ir_arg split_args[1] = {N(qkv)};
        int split = call(&b, nm(&b, l, "split"), "split_qkv", split_args, 1, NULL, 0);
        int q = item(&b, nm(&b, l, "q"), split, 0);
        int k = item(&b, nm(&b, l, "k"), split, 1);
        int v = item(&b, nm(&b, l, "v"), split, 2);
        pw_ir_arg rope_args[4] = {N(q), N(k), N(positions), N(cos_sin)};
        int rope = call(&b, nm(&b, l, "rope"), "rotary", rope_args, 4, NULL, 0);
        int qr = item(&b, nm(&b, l, "q_rot"), rope, 0);
        int kr = item(&b, nm(&b, l, "k_rot"), rope, 1);
        pw_ir_arg buf_args[2] = {N(s0), pw_ir_arg_int(SYN_HIDDEN)};
        int attn_out = call(&b, nm(&b, l, "attn_out"), "empty", buf_args, 2, NULL, 0);
        char layer_name[64];
        snprintf(layer_name, sizeof layer_name, "model.layers.%d.self_attn.attn", l);
        pw_ir_arg attn_args[5] = {N(qr), N(kr), N(v), N(attn_out), pw_ir_arg_string(layer_name)};
        call(&b, nm(&b, l, "attn"), "attention", attn_args, 5, NULL, 0);
        pw_ir_arg o_args[2] = {N(attn_out), N(w[l * NW + O])};
        int o = call(&b, nm(&b, l, "o"), "linear", o_args, 2, NULL, 0);
        pw_ir_arg add_args[2] = {N(o), N(residual)};
        int h = call(&b, nm(&b, l, "h"), "add", add_args, 2, NULL, 0);
        pw_ir_arg ln2_args[2] = {N(h), N(w[l * NW + POST_LN])};
        int ln2 = call(&b, nm(&b, l, "post_ln"), "rms_norm", ln2_args, 2, &eps, 1);
        pw_ir_arg gu_args[2] = {N(ln2), N(w[l * NW + GATE_UP])};
        int gu = call(&b, nm(&b, l, "gate_up"), "linear", gu_args, 2, NULL, 0);
        pw_ir_arg act_args[1] = {N(gu)};
        int act = call(&b, nm(&b, l, "act"), "silu_and_mul", act_args, 1, NULL, 0);
        pw_ir_arg down_args[2] = {N(act), N(w[l * NW + DOWN])};
        int down = call(&b, nm(&b, l, "down"), "linear", down_args, 2, NULL, 0);
        pw_ir_arg res_args[2] = {N(down), N(h)};
        residual = call(&b, nm(&b, l, "out"), "add", res_args, 2, NULL, 0);
    }
    pw_ir_arg fin_args[2] = {N(residual), N(norm_w)};
    int fin = call(&b, "final_norm", "rms_norm", fin_args, 2, &eps, 1);
    pw_ir_arg outs[1] = {N(fin)};
    if (b.s == PW_OK) b.s = pw_ir_set_output(b.g, pw_ir_arg_tuple(outs, 1), NULL);
    pw_host_free(w);
    if (b.s != PW_OK) {
        pw_ir_free(b.g);
        return b.s;
    }
    *out = b.g;
    return PW_OK;
}
