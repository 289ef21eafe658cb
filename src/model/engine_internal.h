#ifndef PW_MODEL_ENGINE_INTERNAL_H
#define PW_MODEL_ENGINE_INTERNAL_H

#include "ops/cpu/kernels.h"
#include "model/llama.h"
#include "ops/ops.h"

typedef struct prob_index_scratch prob_index_scratch;

typedef struct pw_request {
    int64_t id;            /* -1: free slot */
    int64_t slot;          /* index in requests[], row of block_tables */
    int64_t arrival;
    int32_t *tokens;       /* prompt, then generated tokens */
    int64_t n_tokens, cap;
    int64_t n_prompt;
    int64_t n_computed;    /* tokens whose K/V are in the cache */
    int64_t n_generated;
    int64_t max_new;
    int64_t limit;         /* stop when n_tokens reaches this */
    int64_t n_blocks;      /* KV blocks held */
    bool finished;
    bool admitted;         /* KV blocks reserved */
    bool queued_or_live;
    pw_sampling_params sp;
    uint64_t rng;
} pw_request;

typedef struct pw_sched {
    pw_request *r;
    int64_t start; /* first token row in the batch */
    int64_t count; /* tokens scheduled */
} pw_sched;

typedef struct pw_piece {
    pw_plan *plan;
    pw_graph_wrapper *wrapper;
} pw_piece;

struct pw_engine {
    pw_model *model;
    pw_engine_config cfg;
    int64_t max_model_len;
    int64_t max_tokens; /* rows of the persistent token buffers */

    pw_stream *stream;
    pw_pool *act_pool;   /* eager activations */
    pw_pool *graph_pool; /* shared by every captured graph */
    pw_dispatcher *dispatcher;

    /* compiled model */
    pw_ir *ir, *split;
    pw_plan *stitch_plan;
    pw_piece *pieces; /* indexed like the plan's submodules; inlined ones empty */
    pw_callable *submods;
    int n_submods, n_pieces;
    pw_graph_wrapper *full;
    pw_value *params; /* [0] token ids (per step), then the weights (fixed) */
    int n_params;

    /* persistent per-step buffers: graphs read them through pointers. The
     * engine writes the host arrays; on CUDA they are staged to device
     * mirrors before each forward. */
    int32_t *input_ids, *positions, *slot_mapping, *token_seq, *block_tables;
    pw_attn_meta meta;           /* host view (CPU kernels read this one) */
    const pw_attn_meta *kernel_meta; /* what kernels read: &meta, or a device copy */
    const int32_t *kernel_positions;
    pw_tensor *ids_tensor;       /* over the kernel-visible token ids */
    float **k_cache, **v_cache;  /* per layer [num_blocks][block_size][n_kv_heads][head_dim] */
    float *rope_table;           /* kernel-visible */
    pw_op_env env;
    pw_device device;
    struct pw_engine_cuda *cuda; /* device state; NULL on the CPU */

    /* KV blocks */
    int64_t num_blocks, blocks_per_seq;
    int32_t *free_blocks;
    int64_t n_free_blocks;
    bool block_tables_dirty; /* changed since the device copy was staged */

    /* requests */
    pw_request *requests; /* max_num_seqs slots */
    int64_t next_id;
    pw_sched *sched;
    pw_step_token *step_tokens;
    float *last_logits; /* [max_num_seqs][vocab] */
    prob_index_scratch *sample_scratch;

    pw_engine_stats stats;
    pw_wrapper_counters counters_before;
    struct pw_engine_verify *verify; /* engine_verify.c; NULL: off */
};

pw_status pw_engine_init_op_env(pw_engine *e);

/* CUDA (engine_cuda.c; without the backend they report PW_ERR_UNSUPPORTED):
 * device buffers, KV cache, rope table and weights; per-step staging of
 * the host inputs; the logits copied back. */
pw_status pw_engine_cuda_setup(pw_engine *e);
void pw_engine_cuda_free(pw_engine *e);
pw_status pw_engine_cuda_stage_inputs(pw_engine *e, int64_t n_padded);
/* Replaces the weight parameters (all but params[0]) with device copies. */
void pw_engine_cuda_params(pw_engine *e, pw_value *params, int nparams);
/* Copies logits rows [lo, hi) to the host; *host points at row 0 of a
 * host array laid out like the device tensor (rows outside are stale). */
pw_status pw_engine_cuda_logits(pw_engine *e, const pw_tensor *logits, int64_t lo, int64_t hi,
                                const float **host);
void pw_engine_free_op_env(pw_engine *e);
pw_status pw_engine_perturb_metadata(void *user, int round);

/* engine_verify.c: the bitwise canary, called by the step after the
 * forward with the forward itself (to re-run eagerly). */
typedef pw_status (*pw_engine_forward_fn)(pw_engine *e, pw_runtime_mode mode,
                                          const pw_batch_desc *desc, int64_t n_padded,
                                          pw_value *logits);
pw_status pw_engine_verify_step(pw_engine *e, pw_runtime_mode mode, const pw_batch_desc *desc,
                                int64_t n_real, int64_t n_padded, pw_tensor *logits,
                                pw_engine_forward_fn forward);
void pw_engine_verify_free(pw_engine *e);

#endif
