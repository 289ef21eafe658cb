/* The op registry: the ops of the op table (ops/op_table.h), each an op
 * name with argument checking, output shape inference and a launch of
 * kernels from the kernel set of the stream's device (ops/kernel_set.h:
 * bound by pointer, never by name). pw_op_resolve binds an op to an
 * execution environment as a pw_callable, which is what the graph plan
 * builder calls for each call_function target.
 *
 * A bound op, when called: validates its arguments (PW_ERR_INVALID_ARG
 * naming the op and the argument), infers the output shape from the input
 * shapes (the token dimension is whatever T the inputs have), allocates the
 * output from the capture pool when env->stream is capturing and from
 * env->pool otherwise, packs the kernel's args (pointers and shape
 * constants only) and launches it on env->stream. It returns the output
 * as a new reference.
 *
 * Ops (T = tokens, all activations f32 row-major):
 *   embedding(ids i32[T], table f32[V][D])           -> f32[T][D]
 *   rms_norm(x f32[T][D], w f32[D])                  -> f32[T][D]     (eps: env)
 *   matmul(x f32[T][K], w f32[N][K])                 -> f32[T][N]
 *   rope(x f32[T][H*head_dim], n_heads int)          -> f32[T][H*head_dim], a new tensor
 *                                                      (positions, table: env)
 *   silu_and_mul(gate_up f32[T][2F])                 -> f32[T][F]
 *   silu_mul(a f32[T][F], b f32[T][F])               -> f32[T][F]
 *   add(a, b f32, same shape)                        -> same shape
 *   empty_like(x)                                    -> uninitialised tensor like x
 *   attention(q, k, v, out, layer int)               -> none; writes out (the splitting op:
 *                                                      out comes from the piece before)
 *   argmax(logits f32[T][V])                         -> i32[T]
 * Fused ops (one launch each where the kernel set has the fused kernel,
 * the same bits as the ops they replace; with a set that lacks it they
 * launch those ops' kernels one by one). Weights
 * may be f32 or any block type pw_op_quantized_weight_supported takes
 * (q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K), each independently:
 *   add_rms_norm(a, b f32[T][D], w f32[D])           -> (a + b, rms_norm(a + b, w))
 *   qkv_rope(x f32[T][K], wq f32[Hq*hd][K], wk, wv f32[Hkv*hd][K], n_heads, n_kv_heads)
 *                                                    -> (rope(x wq^T), rope(x wk^T), x wv^T)
 *   gate_up_silu(x f32[T][K], w_gate, w_up f32[F][K]) -> silu(x w_gate^T) * (x w_up^T)
 * Gemma 3's ops (the CPU set has their kernels; a set without them refuses
 * the op at shape inference, before anything runs):
 *   scale(x f32, s float)                            -> x * s
 *   softcap(x f32, cap float)                        -> cap * tanh(x / cap)
 *   gate_up_gelu(x f32[T][K], w_gate, w_up f32[F][K]) -> gelu_tanh(x w_gate^T) * (x w_up^T)
 *   qkv_norm_rope(x, wq, wk, wv, q_norm f32[hd], k_norm f32[hd], n_heads, n_kv_heads, layer)
 *                                                    -> (rope(norm(x wq^T)), rope(norm(x wk^T)),
 *                                                        x wv^T): per-head RMS norm, NeoX rope
 *                                                        with env.layer_rope_table[layer]
 *   qkv_rope_neox(x, wq, wk, wv, n_heads, n_kv_heads)
 *                                                    -> qkv_rope's with NeoX rope (pairs i,
 *                                                        i + hd/2): Phi-3
 *   qkv_bias_rope_neox(x, wq, wk, wv, bq f32[Hq*hd], bk, bv f32[Hkv*hd], n_heads, n_kv_heads)
 *                                                    -> (rope(x wq^T + bq), rope(x wk^T + bk),
 *                                                        x wv^T + bv), NeoX rope: Qwen 2
 * A tuple-returning op's pw_op_infer reports its first output. q/k/v are
 * separate outputs, so no column slicing op is needed. */
#ifndef PW_OPS_H
#define PW_OPS_H

#include "piecewise.h"
#include "ops/kernel_args.h"
#include "ops/op_table.h"

/* What bound ops run against. Everything pointed to must outlive the
 * callables (and any graph captured through them); per-step values live in
 * the persistent buffers named here and are rewritten by the engine. */
typedef struct pw_op_env {
    pw_stream *stream;             /* where kernels are launched */
    pw_pool *pool;                 /* outputs when not capturing */
    const pw_attn_meta *attn_meta; /* persistent attention metadata */
    float *const *k_cache;         /* [n_layers] each [num_blocks][block_size][n_kv_heads][head_dim] */
    float *const *v_cache;         /* [n_layers] */
    int n_layers, n_heads, n_kv_heads, head_dim;
    int64_t num_blocks;            /* blocks per layer cache */
    int64_t max_seqs;              /* rows of attn_meta->block_tables */
    int64_t max_tokens;            /* capacity of the persistent per-token buffers */
    const float *rope_table;       /* pw_k_rope_table layout, [rope_max_pos][head_dim/2][2] */
    int64_t rope_max_pos;
    float rms_eps;
    const int32_t *positions;      /* [max_tokens] for rope; NULL: attn_meta->positions */
    /* Per-layer variants (Gemma 3: local layers with a sliding window and
     * their own rope base). Model constants, host arrays read at launch. */
    const float *const *layer_rope_table; /* [n_layers] for qkv_norm_rope; NULL: rope_table */
    const int32_t *layer_window;   /* [n_layers] attention window, 0 = full; NULL: all full */
    float attn_scale;              /* attention score scale; 0: 1/sqrt(head_dim) */
} pw_op_env;

/* Binds op `name` to env. PW_ERR_NOT_FOUND for an unknown name. The
 * callable's user pointer is env itself. */
pw_status pw_op_resolve(const pw_op_env *env, const char *name, pw_callable *out);
/* The same, shaped as the graph plan builder's resolve_op hook
 * (user = const pw_op_env *). */
pw_status pw_op_resolve_hook(void *env, const char *target, pw_callable *out);

/* Output dtype and shape of op `name` for these arguments, without
 * allocating or launching. An op returning none gives *ndim = 0 and
 * *returns_none = true. */
pw_status pw_op_infer(const pw_op_env *env, const char *name, const pw_value *args, int nargs,
                      pw_dtype *dtype, int *ndim, int64_t shape[PW_MAX_DIMS], bool *returns_none);

/* Host-side pieces of the kernels the model layer needs, so that it never
 * includes ops/cpu or ops/cuda headers (src/ops/ops_host.c). */
/* True for the block types (Q8_0, Q4_0, Q4_1) the weight-taking ops
 * (matmul, embedding and the fused ops) take as they are; other weights
 * must be f32. */
bool pw_op_quantized_weight_supported(pw_dtype type);
/* The dtype the CPU kernels would rather have a weight of `type` in, with
 * `rows` rows of `cols` (type itself when none: only Q4_0 has one, Q4_0x16,
 * from 16 rows). */
pw_dtype pw_op_preferred_weight_dtype(pw_dtype type, int64_t rows, int64_t cols);
/* How many rows of a weight the layout `type` interleaves into one group
 * (16 for Q4_0x16, 1 for a layout of whole rows): a weight whose rows are
 * several matrices stacked keeps each one's groups its own when their row
 * counts are multiples of it. */
int64_t pw_op_weight_row_group(pw_dtype type);
/* Writes rows [0, rows) of a weight from src, laid out as `from`, into dst
 * as `to` (a pair that pw_op_preferred_weight_dtype gives, or its
 * reverse, or from == to); dst and src do not overlap. False for any other
 * pair (nothing written). */
bool pw_op_convert_weight(void *dst, const void *src, pw_dtype from, pw_dtype to, int64_t rows,
                          int64_t cols);
/* The rope table env.rope_table points to: [max_pos][head_dim/2][2] (cos,
 * sin) of pos * theta^(-2i/head_dim), computed in double; head_dim even. */
void pw_op_rope_table(float *table, int64_t max_pos, int64_t head_dim, double theta);
/* The first index of the largest value of row[0..n), the argmax op's rule
 * (NaN never wins; all NaN gives 0). */
int32_t pw_op_argmax_row(const float *row, int64_t n);
/* Floats in the rope table of pw_op_rope_table. */
size_t pw_op_rope_table_floats(int64_t max_pos, int64_t head_dim);
/* pw_op_rope_table with frequency divisors freq_factors [head_dim/2] (NULL:
 * none; Llama 3.x's rope_freqs) and positions scaled by freq_scale (linear
 * rope scaling; 1: none): the angle of pair i at position p is
 * freq_scale * p * theta^(-2i/head_dim) / freq_factors[i]. */
void pw_op_rope_table_scaled(float *table, int64_t max_pos, int64_t head_dim, double theta,
                             const float *freq_factors, double freq_scale);
/* True when the kernels of `device` read weights of `dtype` directly
 * (asked of the device's kernel set); otherwise the caller supplies f32. */
bool pw_op_reads_weight_dtype(pw_device device, pw_dtype dtype);

/* True for ops that split the graph (attention). */
bool pw_op_is_splitting(const char *name);
/* The names of the op table's splitting ops (the set to give pw_split),
 * in table order; *out ends with a NULL after the returned count. */
int pw_op_splitting_names(const char *const **out);
/* Registry listing, for tools and tests: PW_OP_COUNT_ ops, and the IR target
 * name of op id i (a pw_op_id), NULL outside [0, PW_OP_COUNT_). */
int pw_op_count(void);
const char *pw_op_name(int i);

#endif

