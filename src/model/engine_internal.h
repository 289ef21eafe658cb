#ifndef PW_MODEL_ENGINE_INTERNAL_H
#define PW_MODEL_ENGINE_INTERNAL_H

#include "model/llama.h"
#include "model/scheduler.h"
#include "ops/ops.h"

typedef struct prob_index_scratch prob_index_scratch;

typedef struct pw_engine pw_engine;
typedef struct pw_engine_tp pw_engine_tp;

typedef struct pw_piece {
    const pw_plan *plan; /* the module's; NULL for a splitting submodule */
    int group; /* engine_distinct.c: index of the first piece with the same IR; -1: alone */
} pw_piece;

/* What the forward reads and never changes: its arguments (the weights)
 * and the rope tables. */
typedef struct pw_engine_weights {
    pw_value *params;   /* [0] token ids (set per step), then the weights */
    int n_params;
    pw_tensor **copies; /* device copies, by parameter index; NULL: used in place */
    float *rope_table;  /* device */
    /* Models with per-layer kinds (Gemma 3): the local layers' rope table
     * (device) and each layer's table; NULL for Llama. */
    float *rope_table_local;
    const float **layer_rope; /* host array [n_layers] of device tables */
} pw_engine_weights;

/* What one step reads and writes. The per-step buffers are persistent:
 * graphs read them through pointers, so they never move. The scheduler
 * writes the host side; before each forward it is copied
 * (pw_stream_copy_h2d) into buffers of the engine's device, which is all
 * the kernels read. On the CPU the copies are memcpys; the code is the same
 * for every device. */
typedef struct pw_run_state {
    pw_step_inputs host;
    struct {
        int32_t *input_ids, *positions, *slot_mapping, *token_seq, *block_tables;
        int32_t *sample_rows, *n_sample_rows;
        pw_attn_meta *meta;
    } dev;
    pw_attn_meta meta;     /* host copy of *dev.meta (its pointers are device ones) */
    /* Page-locked host memory the per-step inputs are copied from on a
     * device with asynchronous copies (a pageable source may make the copy
     * synchronous, and cannot be captured); NULL on the CPU, whose copies
     * are memcpys. Laid out as the dev buffers: ids, positions, slots,
     * token rows, sample rows (T each), the sample-row count, the tables. */
    int32_t *staging;
    pw_tensor *ids_tensor; /* over dev.input_ids */
    /* The first rows of ids_tensor, as many as the last forward's padded
     * size: kept from step to step (a decode loop runs one padded size over
     * and over) instead of a new view per step; NULL until the first forward. */
    pw_tensor *ids_slice;
    float **k_cache, **v_cache; /* per layer [num_blocks][block_size][n_kv_heads][head_dim] */
    /* [max_num_seqs][vocab]; page-locked where staging is (the rows the
     * LM head sampled come back into it every step: a pageable
     * destination halves a device's copy rate and makes it synchronous) */
    float *last_logits;
    bool last_logits_pinned;
    prob_index_scratch *sample_scratch;
    pw_step_token *step_tokens; /* [max_num_seqs]: what the last step generated */
} pw_run_state;

/* The engine's state, split like llama2.c's run.c: the configuration, the
 * weights and the run state; the scheduler and the KV block allocator, each
 * with its own state; the device resources; the compiled model and the
 * capture state around it. */
struct pw_engine {
    pw_model *model;
    pw_engine_config cfg; /* as given, with its defaults resolved */
    pw_engine_weights weights;
    pw_run_state run;
    pw_scheduler sched;
    pw_kv_blocks kv;

    pw_stream *stream;
    pw_pool *act_pool;   /* eager activations */
    pw_pool *graph_pool; /* shared by every captured graph */
    pw_pool *persistent; /* weight copies and per-step buffers: as long as the engine */
    pw_pool *kv_pool;    /* the paged KV cache, alone, so its reservation is exact */
    pw_op_env env;

    /* The compiled model: split, stitching, wrappers and dispatcher; and
     * per submodule its plan and distinct-capture group. */
    pw_module *module;
    pw_piece *pieces; /* indexed like the plan's submodules; inlined ones empty */
    int n_submods;

    pw_engine_stats stats;
    struct pw_engine_verify *verify; /* engine_verify.c; NULL: off */
    struct pw_engine_distinct *distinct; /* engine_distinct.c; NULL: neither distinct-piece
                                            capture nor the graph cache is on */
    struct pw_engine_tp *tp; /* engine_tp.c: rank 0's command recorder; NULL unless leading */
};

/* engine_config.c: *out is `given` (the defaults when NULL), checked, with
 * the defaults that depend on the model resolved (max_model_len,
 * kv_cache_positions). */
pw_status pw_engine_config_resolve(const pw_engine_config *given, const pw_model_info *in,
                                   pw_engine_config *out);

pw_status pw_engine_init_op_env(pw_engine *e);

/* The weights and the run state (engine_buffers.c): host arrays, device
 * buffers, rope tables, weight copies; everything device-side comes from
 * e->persistent, freed with it. The KV cache comes later
 * (pw_engine_alloc_kv_cache). free_buffers frees both, and the pools. */
pw_status pw_engine_alloc_buffers(pw_engine *e);
void pw_engine_free_buffers(pw_engine *e);
/* Bytes of the KV cache of num_blocks blocks (every layer's K and V, one
 * allocation). */
size_t pw_engine_kv_cache_bytes(const pw_engine *e, int64_t num_blocks);
/* Sets num_blocks, the free-block list and the op env's block count, and
 * allocates every layer's K and V cache from `pool` (a shadow pool for the
 * graph-memory dry run, e->kv_pool for real). */
pw_status pw_engine_alloc_kv_cache(pw_engine *e, pw_pool *pool, int64_t num_blocks);
/* Copies the host side of the per-step buffers (the first n_tokens rows;
 * the block tables when they changed) to the device buffers the kernels
 * read. Runs before the forward, outside any capture. */
pw_status pw_engine_stage_inputs(pw_engine *e, int64_t n_tokens);
/* Stages the first n_padded rows and makes the forward's token-id
 * argument (weights.params[0]) that many rows. */
pw_status pw_engine_prepare_forward(pw_engine *e, int64_t n_padded);

/* engine_memory.c: sizes the KV cache through the memory plan (from the
 * budget, when there is one) and allocates it. */
pw_status pw_engine_size_kv_cache(pw_engine *e);

/* engine_capture.c: a capture's inputs (an all-padding batch of desc's
 * size, which samples nothing), the engine's capture options, the capture
 * of the whole list at start-up (through the graph cache) and of one item
 * a step's route named. */
pw_status pw_engine_capture_inputs(void *user, pw_runtime_mode mode, const pw_batch_desc *desc,
                                   const pw_value **args, int *nargs);
void pw_engine_capture_options(const pw_engine *e, pw_capture_options *co);
pw_status pw_engine_capture_all(pw_engine *e);
pw_status pw_engine_capture_lazily(pw_engine *e, const pw_capture_item *item);

/* engine_verify.c: the bitwise canary, called after a step's forward with
 * its logits (the rows of e->run.host's sample_rows) and the forward itself
 * (to re-run eagerly). */
typedef pw_status (*pw_engine_forward_fn)(pw_engine *e, pw_runtime_mode mode,
                                          const pw_batch_desc *desc, int64_t n_padded,
                                          pw_value *logits);
pw_status pw_engine_verify_step(pw_engine *e, pw_runtime_mode mode, const pw_batch_desc *desc,
                                int64_t n_padded, pw_tensor *logits, pw_engine_forward_fn forward);
void pw_engine_verify_free(pw_engine *e);
/* verify_capture's perturbation: other values in every per-step buffer. */
pw_status pw_engine_perturb_metadata(void *user, int round);

/* engine_distinct.c: distinct-piece capture and the graph cache's
 * programs (model/piece_program.h). new (before the buffers) sets up the
 * state when either is on; regions_observe brackets the persistent
 * allocations; init groups the pieces whose IR is the same modulo names
 * (after compile, before capture). distinct_run is the pieces' runnable and
 * forward_hooked the forward's: inside a capture they record a program, run
 * one, or run the plan. */
pw_status pw_engine_distinct_new(pw_engine *e);
void pw_engine_regions_observe(pw_engine *e, pw_pool *pool, bool on);
bool pw_engine_ir_same_modulo_names(const pw_ir *a, const pw_ir *b);
pw_status pw_engine_distinct_init(pw_engine *e);
pw_status pw_engine_distinct_run(pw_engine *e, pw_piece *piece, const pw_value *args, int nargs,
                                 pw_value *out);
pw_status pw_engine_forward_hooked(pw_engine *e, pw_callable plain, const pw_value *args,
                                   int nargs, pw_value *out);
struct pw_program;
const struct pw_program *pw_engine_find_program(const pw_engine *e, int group,
                                                const pw_batch_desc *d);
void pw_engine_distinct_counts(const pw_engine *e, uint64_t *graphs_patched,
                               uint64_t *pieces_patched_in_full, uint64_t *graphs_from_cache);
void pw_engine_distinct_free(pw_engine *e);

/* engine_tp.c: rank 0's recorder (e->tp set). Each record_* appends the
 * call about to be made and sets *mark; pw_engine_tp_settle(e, mark, s)
 * then keeps it if the call's status s is PW_OK, else takes it back out,
 * and returns s. send_step sends the
 * buffer ending with a step (at the start of pw_engine_step); end sends
 * the last command and frees the recorder (pw_engine_free). */
pw_status pw_engine_tp_record_add(pw_engine *e, const int32_t *prompt, int64_t n,
                                  int64_t max_new, const pw_sampling_params *sp, size_t *mark);
pw_status pw_engine_tp_record_continue(pw_engine *e, int64_t id, const int32_t *tokens, int64_t n,
                                       int64_t max_new, size_t *mark);
pw_status pw_engine_tp_record_cancel(pw_engine *e, int64_t id, size_t *mark);
pw_status pw_engine_tp_record_release(pw_engine *e, int64_t id, size_t *mark);
pw_status pw_engine_tp_record_verify(pw_engine *e, int64_t every, size_t *mark);
pw_status pw_engine_tp_settle(pw_engine *e, size_t mark, pw_status s);
pw_status pw_engine_tp_send_step(pw_engine *e);
void pw_engine_tp_end(pw_engine *e);

#endif
