/* Small helpers the architectures' graph builders share (llama.c,
 * gemma3.c): named placeholders, op calls and tuple items, with the first
 * error kept in the builder so a builder checks once at the end. */
#ifndef PW_MODEL_MODEL_IR_H
#define PW_MODEL_MODEL_IR_H

#include "internal.h"
#include "piecewise_llm.h"
#include "ops/ops.h"
#include "piecewise/graph.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct ir_builder {
    pw_ir *g;
    pw_status status;
    char name[64];
} ir_builder;

/* Placeholder named fmt with the layer number l substituted. */
static inline int ir_placeholder(ir_builder *b, const char *fmt, int64_t l) {
    int node = -1;
    if (b->status != PW_OK) return -1;
    snprintf(b->name, sizeof b->name, fmt, l);
    b->status = pw_ir_add_placeholder(b->g, b->name, &node);
    return node;
}

static inline void ir_node_name(ir_builder *b, const char *name, int64_t l) {
    if (l >= 0) snprintf(b->name, sizeof b->name, "%s_%" PRId64, name, l);
    else snprintf(b->name, sizeof b->name, "%s", name);
}

/* ir_call(b, "q", layer, PW_OP_MATMUL, args, 2): node q_<layer> calling the
 * op table's op; layer < 0: no suffix. */
static inline int ir_call(ir_builder *b, const char *name, int64_t l, pw_op_id op,
                          const pw_ir_arg *args, int nargs) {
    int node = -1;
    if (b->status != PW_OK) return -1;
    ir_node_name(b, name, l);
    b->status = pw_ir_add_call_function(b->g, b->name, pw_op_name(op), args, nargs, NULL, 0, &node);
    return node;
}

/* ir_getitem(b, "q", layer, src, i): node q_<layer> = src[i]. */
static inline int ir_getitem(ir_builder *b, const char *name, int64_t l, int src, int64_t index) {
    int node = -1;
    if (b->status != PW_OK) return -1;
    ir_node_name(b, name, l);
    b->status = pw_ir_add_getitem(b->g, b->name, src, index, &node);
    return node;
}

/* The graph's output (the logits) and the token-dimension types of its
 * input and output, then validation. */
static inline void ir_finish_graph(ir_builder *b, int64_t vocab, int ids, int logits) {
    if (b->status == PW_OK) b->status = pw_ir_set_output(b->g, pw_ir_arg_node(logits), NULL);
    if (b->status == PW_OK) {
        pw_ir_type t = {PW_IR_TYPE_TENSOR, PW_F32, 2, {PW_IR_DIM_TOKENS, vocab}};
        b->status = pw_ir_set_node_type(b->g, logits, &t);
    }
    if (b->status == PW_OK) {
        pw_ir_type t = {PW_IR_TYPE_TENSOR, PW_I32, 1, {PW_IR_DIM_TOKENS}};
        b->status = pw_ir_set_node_type(b->g, ids, &t);
    }
    if (b->status == PW_OK) b->status = pw_ir_validate(b->g);
}

#endif
