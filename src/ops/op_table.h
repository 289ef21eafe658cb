/* The op table: the one list of the ops the model graph calls and of the
 * kernels they launch. Everything that enumerates ops is generated from it:
 * the op ids below, ops.c's op definitions and callables, the op names the
 * model builder writes into the IR (pw_op_name(PW_OP_MATMUL)), the set of
 * splitting ops handed to the splitter (pw_op_splitting_names), and the
 * kernel ids every kernel set (src/ops/cpu, src/ops/cuda) indexes its table
 * by (ops/kernel_set.h).
 *
 * Adding an op: one PW_OP_TABLE row, its infer_<name> and launch_<name> in
 * ops.c, and, if it launches a new kernel, one PW_KERNEL_TABLE row plus
 * that kernel in each kernel set that has it.
 *
 * PW_OP_TABLE(X) calls X(ID, name, (argument names...), splitting) per op:
 *   ID         the id is PW_OP_<ID>
 *   name       an identifier: the IR target is "name", and ops.c implements
 *              the op as infer_<name> (checks, output shape) and
 *              launch_<name> (packs the kernel args, launches)
 *   arguments  a parenthesised list of argument names, in call order; its
 *              length is the op's arity
 *   splitting  true for ops the splitter cuts the graph at:
 *              they get their own piecewise subgraphs and are never captured
 *
 * This header is plain preprocessor and enum definitions; any layer above
 * ops may include it. The graph layer does not: the splitter gets the
 * splitting op names as a parameter. */
#ifndef PW_OP_TABLE_H
#define PW_OP_TABLE_H

/* clang-format off */
#define PW_OP_TABLE(X)                                                                   \
    X(EMBEDDING,      embedding,    ("ids", "table"),                   false)           \
    X(RMS_NORM,       rms_norm,     ("x", "w"),                         false)           \
    X(MATMUL,         matmul,       ("x", "w"),                         false)           \
    X(ROPE,           rope,         ("x", "n_heads"),                   false)           \
    X(SILU_AND_MUL,   silu_and_mul, ("gate_up"),                        false)           \
    X(SILU_MUL,       silu_mul,     ("a", "b"),                         false)           \
    X(ADD,            add,          ("a", "b"),                         false)           \
    X(EMPTY_LIKE,     empty_like,   ("x"),                              false)           \
    X(ATTENTION,      attention,    ("q", "k", "v", "out", "layer"),    true)            \
    X(ARGMAX,         argmax,       ("logits"),                         false)           \
    X(ADD_RMS_NORM,   add_rms_norm, ("a", "b", "w"),                    false)           \
    X(QKV_ROPE,       qkv_rope,     ("x", "wq", "wk", "wv", "n_heads", "n_kv_heads"), false) \
    X(GATE_UP_SILU,   gate_up_silu, ("x", "w_gate", "w_up"),            false)           \
    X(SCALE,          scale,        ("x", "s"),                         false)           \
    X(SOFTCAP,        softcap,      ("x", "cap"),                       false)           \
    X(GATE_UP_GELU,   gate_up_gelu, ("x", "w_gate", "w_up"),            false)           \
    X(QKV_NORM_ROPE,  qkv_norm_rope, ("x", "wq", "wk", "wv", "q_norm", "k_norm",        \
                                      "n_heads", "n_kv_heads", "layer"), false) \
    X(LM_HEAD,        lm_head,      ("x", "w", "softcap"),              false)           \
    X(QKV_ROPE_NEOX,  qkv_rope_neox, ("x", "wq", "wk", "wv", "n_heads", "n_kv_heads"), false) \
    X(QKV_BIAS_ROPE_NEOX, qkv_bias_rope_neox, ("x", "wq", "wk", "wv", "bq", "bk", "bv", \
                                              "n_heads", "n_kv_heads"), false)            \
    X(MATMUL_SHARDS,  matmul_shards, ("x", "w", "n_shards"),            false)           \
    X(ALL_REDUCE,     all_reduce,   ("partials", "n_shards", "shard_unit"), false)   \
    X(EMBEDDING_VOCAB, embedding_vocab, ("ids", "table", "vocab"),      false)           \
    X(LM_HEAD_VOCAB,  lm_head_vocab, ("x", "w", "softcap", "vocab"),    false)

/* PW_KERNEL_TABLE(X) calls X(ID, name) per kernel: the id is PW_KERNEL_<ID>
 * and the launch args struct is pw_k_<...>_args of ops/kernel_args.h. A
 * kernel set may lack a kernel (its entry is NULL): the fused kernels
 * (SUM_RMS_NORM, QKV_ROPE, GATE_UP_SILU, LM_HEAD) are optional, and the fused ops
 * launch their constituent kernels one by one on a set without them. */
#define PW_KERNEL_TABLE(X)                                                               \
    X(EMBEDDING,       embedding)                                                        \
    X(EMBEDDING_QUANT, embedding_quant)                                                  \
    X(RMS_NORM,        rms_norm)                                                         \
    X(ADD_RMS_NORM,    add_rms_norm)                                                     \
    X(MATMUL,          matmul)                                                           \
    X(MATMUL_QUANT,    matmul_quant)                                                     \
    X(ROPE,            rope)                                                             \
    X(SILU_AND_MUL,    silu_and_mul)                                                     \
    X(SILU_MUL,        silu_mul)                                                         \
    X(ADD,             add)                                                              \
    X(ARGMAX,          argmax)                                                           \
    X(ATTENTION,       attention)                                                        \
    X(SUM_RMS_NORM,    sum_rms_norm)                                                     \
    X(QKV_ROPE,        qkv_rope)                                                         \
    X(GATE_UP_SILU,    gate_up_silu)                                                     \
    X(GELU_MUL,        gelu_mul)                                                         \
    X(HEAD_NORM_ROPE,  head_norm_rope)                                                   \
    X(SCALE,           scale)                                                            \
    X(SOFTCAP,         softcap)                                                          \
    X(LM_HEAD,         lm_head)                                                          \
    X(SELECT_ROWS,     select_rows)                                                      \
    X(ROPE_NEOX,       rope_neox)                                                        \
    X(BIAS_ADD,        bias_add)                                                         \
    X(SLICE_COLS,      slice_cols)                                                       \
    X(ALL_REDUCE_SHARDS, all_reduce_shards)                                              \
    X(EMBEDDING_VOCAB, embedding_vocab)                                                  \
    X(GATHER_VOCAB,    gather_vocab)
/* clang-format on */

typedef enum pw_op_id {
#define PW_OP_ID_(id, name, args, splitting) PW_OP_##id,
    PW_OP_TABLE(PW_OP_ID_)
#undef PW_OP_ID_
    PW_OP_COUNT_
} pw_op_id;

typedef enum pw_kernel_id {
#define PW_KERNEL_ID_(id, name) PW_KERNEL_##id,
    PW_KERNEL_TABLE(PW_KERNEL_ID_)
#undef PW_KERNEL_ID_
    PW_KERNEL_COUNT_
} pw_kernel_id;

#endif
