/* piecewise public API: model layer, libpiecewise-llm. Included by
 * piecewise_llm.h (the LLM users' umbrella header); may be included alone.
 *
 *   model   a Llama-family model from a GGUF file: hyperparameters, weights
 *           (dequantized to f32 where no kernel takes the stored type),
 *           tokenizer, and the model as an IR graph
 *   engine  several requests at once: paged KV cache, chunked prefill mixed
 *           with decode, the dispatcher padding each batch to a capture
 *           size, graphs captured at start-up, sampling */
/* The capture library's API first: this layer builds on it. */
#include "piecewise.h"

#ifndef PIECEWISE_MODEL_H
#define PIECEWISE_MODEL_H

#include "piecewise/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Model                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct pw_model pw_model;

/* The keys are <arch>.*, with <arch> = general.architecture ("llama" or
 * "gemma3"; docs/models.md). */
typedef struct pw_model_info {
    char arch[32];        /* general.architecture ("llama", "gemma3") */
    char name[96];        /* general.name, or the file name */
    int64_t n_layers;     /* <arch>.block_count */
    int64_t dim;          /* <arch>.embedding_length */
    int64_t ffn_dim;      /* <arch>.feed_forward_length */
    int64_t n_heads;      /* <arch>.attention.head_count */
    int64_t n_kv_heads;   /* <arch>.attention.head_count_kv (default n_heads) */
    int64_t head_dim;     /* llama: dim / n_heads; gemma3: <arch>.attention.key_length */
    int64_t vocab;        /* rows of token_embd */
    int64_t context;      /* <arch>.context_length */
    float rms_eps;        /* <arch>.attention.layer_norm_rms_epsilon */
    float rope_theta;     /* <arch>.rope.freq_base (default 10000; gemma3: its global layers') */
    bool tied_embeddings; /* no output.weight: the LM head is token_embd */
    size_t weight_bytes;  /* bytes the weights occupy (quantized types stay quantized) */
    pw_dtype file_dtype;  /* the most common weight type in the file */
} pw_model_info;

/* Maps the file, checks the architecture and every tensor's shape, and
 * prepares the weights and the tokenizer. Errors name the file and field. */
PW_API pw_status pw_model_load(const char *path, pw_model **out);
PW_API void pw_model_free(pw_model *m);

/* ---- tensor parallelism (docs/tensor-parallel.md) ------------------------
 * One model split across the processes of `mpirun -np N`: call pw_tp_init(N)
 * once before loading, then pw_model_load_tp on every rank. Each rank
 * holds its own query heads of q and o (with the KV heads they use), its
 * shards of gate/up and down, and its vocabulary rows of the embedding and
 * the LM head; the row-parallel products (o, down) sum their shards in an
 * order fixed by the model, so the tokens are bitwise the same at every
 * degree. pw_model_load runs the same order on one process (the Llama and
 * Gemma 3 architectures), so its tokens are those too. */
/* Joins the MPI job as one of tp ranks. tp = 1 needs no MPI. Errors: a tp
 * that does not match the number of processes mpirun started, a build
 * without MPI (the message says how to get it). */
PW_API pw_status pw_tp_init(int tp);
PW_API int pw_tp_rank(void);
PW_API int pw_tp_size(void);
/* Time this rank spent in the collectives since pw_tp_init: the
 * all-reduces' gathers (inside the forward, so inside the decode time) and
 * the per-step broadcasts of rank 0's decisions. */
typedef struct pw_tp_comm_stats {
    int64_t gathers, broadcasts;
    double gather_seconds, broadcast_seconds;
} pw_tp_comm_stats;
PW_API void pw_tp_get_comm_stats(pw_tp_comm_stats *out);
/* The watchdog: a rank that waits longer than this for another rank's part
 * of a step (a gather, a broadcast) prints "rank R did not answer within
 * S s" and ends the job, so a rank that hangs without dying cannot hang
 * the job. An idle follower waits for rank 0's next step without limit.
 * Seconds from 1 to PW_TP_MAX_TIMEOUT_S; the default is
 * PW_TP_DEFAULT_TIMEOUT_S. Set it before pw_tp_init or between steps. */
#define PW_TP_DEFAULT_TIMEOUT_S 60
#define PW_TP_MAX_TIMEOUT_S 86400
PW_API pw_status pw_tp_set_timeout(double seconds);
PW_API double pw_tp_timeout(void);
/* Leaves the job: MPI_Finalize, or with a non-zero exit code MPI_Abort
 * (the other ranks may be waiting in a collective). No-op without MPI. */
PW_API void pw_tp_finish(int exit_code);
/* Loads this rank's slice of the model (pw_tp_rank of pw_tp_size). Llama
 * and Gemma 3 architectures; a degree above the model's shard counts is
 * refused with the largest one that works. */
PW_API pw_status pw_model_load_tp(const char *path, pw_model **out);
PW_API const pw_model_info *pw_model_get_info(const pw_model *m);

/* The forward pass as an IR graph with a symbolic token count: placeholders
 * input_ids then every weight; the output is a logits tensor [s0, vocab]
 * whose first rows are the logits of the rows the step samples from (the
 * attention metadata's sample_rows, each request's last scheduled token, in
 * order; every row when the metadata lists none). Rows after them are not
 * written: a prefill chunk computes one row of logits, not one per token. */
PW_API pw_status pw_model_build_ir(const pw_model *m, pw_ir **out);

/* Tokenizer from the GGUF metadata. *ids is malloc'ed; free() it. The
 * text of a special token (<|im_start|>, <end_of_turn>, ...) becomes that
 * token, so the text is trusted: a whole prompt its writer formatted. Chat
 * messages go through pw_model_tokenize_chat instead. add_special adds the
 * special tokens the model asks for, as llama.cpp does: BOS first when the
 * GGUF sets tokenizer.ggml.add_bos_token (SmolLM2 does not; Gemma and
 * Llama do), EOS last when it sets tokenizer.ggml.add_eos_token. */
PW_API pw_status pw_model_tokenize(const pw_model *m, const char *text, bool add_special,
                                   int32_t **ids, int64_t *n);
/* As pw_model_tokenize, but special-token text becomes the special token
 * only with parse_special; without it the text is plain text (untrusted
 * text, such as a message, never becomes a control token). */
PW_API pw_status pw_model_tokenize_text(const pw_model *m, const char *text, bool add_special,
                                        bool parse_special, int32_t **ids, int64_t *n);
/* The text of one token, for streaming (byte tokens give their byte). The
 * pointer stays valid until the next call on this thread. */
PW_API const char *pw_model_token_text(const pw_model *m, int32_t prev, int32_t token);
/* The same bytes, whole and with their length (a piece may hold a 0 byte
 * or be long): *piece is borrowed from the model. prev is the token before
 * (-1 at the start), which decides a leading space in SentencePiece
 * vocabularies. An id outside the vocabulary is PW_ERR_INVALID_ARG. */
PW_API pw_status pw_model_token_piece(const pw_model *m, int32_t prev, int32_t token,
                                      const char **piece, size_t *len);
/* ids as text: the pieces of every token (special tokens as their text),
 * joined. *text is malloc'ed (free() it) and NUL-terminated; *len (may be
 * NULL) its length, which counts any 0 bytes inside. */
PW_API pw_status pw_model_detokenize(const pw_model *m, const int32_t *ids, int64_t n,
                                     char **text, size_t *len);
PW_API int32_t pw_model_bos(const pw_model *m);
PW_API int32_t pw_model_eos(const pw_model *m);
/* EOS and the other end-of-generation tokens (e.g. <|im_end|>). */
PW_API bool pw_model_is_end_of_generation(const pw_model *m, int32_t token);

/* Chat templates: the GGUF's Jinja template (tokenizer.chat_template),
 * rendered by piecewise's Jinja interpreter as transformers renders it
 * (docs/templates.md), with messages, add_generation_prompt, bos_token and
 * eos_token. A gemma3 file without one gets Gemma 3's. A model without a
 * template is PW_ERR_NOT_FOUND; a template piecewise cannot parse is
 * PW_ERR_UNSUPPORTED naming what it lacks; an error while rendering (the
 * template's raise_exception, a bound passed) is PW_ERR_INVALID_ARG. */
typedef struct pw_chat_message {
    const char *role; /* "system", "user" or "assistant" */
    const char *content;
} pw_chat_message;

/* Whether the model has a chat template (it may still fail to render). */
PW_API bool pw_model_has_chat_template(const pw_model *m);
/* Renders a one-message conversation: PW_OK when the template can be used,
 * else the error every chat call would give. Call it at load to report a
 * broken template before any prompt. */
PW_API pw_status pw_model_check_chat_template(const pw_model *m);
/* The conversation as prompt text (*out malloc'ed; free() it), ending with
 * the assistant's turn opener when add_generation_prompt. For display:
 * pw_model_tokenize of this text would turn special-token text inside a
 * message into the token; pw_model_tokenize_chat does not. */
PW_API pw_status pw_model_apply_chat_template(const pw_model *m, const pw_chat_message *msgs, int n,
                                              bool add_generation_prompt, char **out);
/* The conversation as prompt tokens (*ids malloc'ed; free() it): the
 * template's own markers are special tokens and message contents are
 * plain text, so a message holding "<|im_end|>" or "<start_of_turn>" gets
 * the tokens of that text and cannot close its turn or open another.
 * add_special as for pw_model_tokenize. */
PW_API pw_status pw_model_tokenize_chat(const pw_model *m, const pw_chat_message *msgs, int n,
                                        bool add_generation_prompt, bool add_special, int32_t **ids,
                                        int64_t *n_ids);
/* The same with the tools the model may call: tools_json is a JSON array
 * of tool definitions, such as OpenAI's {"type": "function", "function":
 * {"name": ..., "description": ..., "parameters": {...}}}, which the
 * template receives as `tools`, as transformers, vLLM and llama.cpp pass
 * it (read as Python's json.loads reads it, so the template's tojson
 * writes it as they do). NULL: no tools (`tools` undefined, as in the
 * calls above). Text that is not a JSON array of objects (or is nested
 * deeper than 64 levels) is PW_ERR_INVALID_ARG. Tool definitions are data:
 * like message text, they never become special tokens. Reading tool calls
 * out of the model's answer is the caller's work. */
PW_API pw_status pw_model_apply_chat_template_tools(const pw_model *m, const pw_chat_message *msgs,
                                                    int n, const char *tools_json,
                                                    bool add_generation_prompt, char **out);
PW_API pw_status pw_model_tokenize_chat_tools(const pw_model *m, const pw_chat_message *msgs, int n,
                                              const char *tools_json, bool add_generation_prompt,
                                              bool add_special, int32_t **ids, int64_t *n_ids);
/* The text that follows an assistant answer to add the next user turn:
 * closes the answer (unless it ended with its end-of-turn token,
 * answer_closed) and opens the assistant's reply. For multi-turn chat that
 * keeps the KV cache. */
PW_API pw_status pw_model_chat_next_turn(const pw_model *m, const char *user, bool answer_closed,
                                         char **out);
/* The same as tokens, the user text plain as in pw_model_tokenize_chat. */
PW_API pw_status pw_model_tokenize_chat_next_turn(const pw_model *m, const char *user,
                                                  bool answer_closed, int32_t **ids,
                                                  int64_t *n_ids);

/* ------------------------------------------------------------------------ */
/* Engine                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct pw_engine pw_engine;

/* One logit_bias entry: bias is added to the token's logit before sampling. */
typedef struct pw_logit_bias {
    int32_t token;
    float bias; /* -100 to 100 (OpenAI's range): -100 in effect bans the token, 100 forces it */
} pw_logit_bias;

#define PW_MAX_LOGIT_BIAS 300 /* entries per request (OpenAI's limit) */
#define PW_MAX_TOP_LOGPROBS 20

/* How a request picks its tokens. Zero-initialised: greedy, nothing reported.
 * The transforms apply in this order to a copy of the model's logits:
 * logit_bias, the penalties, then temperature, top-k and top-p. */
typedef struct pw_sampling_params {
    float temperature; /* <= 0: greedy (the argmax of the biased, penalised logits) */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* >= 1 or <= 0: off */
    /* The request's random generator starts from this alone: the same
     * prompt, parameters and seed give the same tokens whatever else the
     * engine runs and in every run. (A server that wants n different
     * answers from one seed gives choice i the seed seed + i.) */
    uint64_t seed;
    /* OpenAI's penalties, -2 to 2 (0: off). Before each sampled token, the
     * logit of every token that occurs c > 0 times among the request's
     * tokens after its prompt (what it generated, and the turns that
     * pw_engine_continue_request appended) loses c * frequency_penalty +
     * presence_penalty. */
    float presence_penalty;
    float frequency_penalty;
    const pw_logit_bias *logit_bias; /* copied by pw_engine_add_request; tokens distinct or
                                        not (their biases add up) */
    int32_t n_logit_bias;            /* 0 to PW_MAX_LOGIT_BIAS */
    /* Report each generated token's log-probability (pw_step_token.logprob)
     * and the top_logprobs (0 to PW_MAX_TOP_LOGPROBS) most likely tokens. */
    bool logprobs;
    int32_t top_logprobs;
} pw_sampling_params;

/* A token and its log-probability. */
typedef struct pw_token_logprob {
    int32_t token;
    float logprob;
} pw_token_logprob;

/* When graphs are captured. */
typedef enum pw_capture_policy {
    PW_CAPTURE_EAGER = 0, /* every descriptor of the capture list at start-up */
    PW_CAPTURE_LAZY,      /* none at start-up; each descriptor the first time a step uses it */
    PW_CAPTURE_POLICY_COUNT_
} pw_capture_policy;

/* "eager", "lazy" ("?" out of range). */
PW_API const char *pw_capture_policy_name(pw_capture_policy p);
/* Case-insensitive; anything else is PW_ERR_PARSE naming the choices. */
PW_API pw_status pw_capture_policy_parse(const char *name, pw_capture_policy *out);

typedef struct pw_engine_config {
    pw_device device;               /* default cpu; cuda needs the CUDA backend and a GPU */
    pw_graph_mode mode;             /* default FULL_AND_PIECEWISE */
    int64_t max_num_seqs;           /* requests in flight (default 64) */
    int64_t max_num_batched_tokens; /* tokens per step, bounds prefill chunks (default 128) */
    int64_t max_model_len;          /* context per request (default: the model's, capped at 2048) */
    int64_t block_size;             /* KV cache positions per block (default 16) */
    int64_t kv_cache_positions;     /* KV cache size over all requests (default 16384) */
    const int64_t *capture_sizes;   /* optional user list */
    int n_capture_sizes;
    int warmups;                    /* eager runs before each capture, on a device that
                                       needs them (caps.needs_warmup; default 1) */
    bool force_warmups;             /* run them on every device (the CPU needs none) */
    pw_progress progress;           /* capture progress bar (default AUTO) */
    bool verify_capture;            /* capture each descriptor twice and compare */
    bool print_capture_totals;      /* one totals line on stderr after capture (default true) */
    /* Device memory for weights, buffers, graphs and the KV cache (0: no
     * budget, the KV cache has kv_cache_positions). With a budget the graph
     * memory is predicted by a dry run of the capture list and the KV cache
     * gets what is left; too small a budget is PW_ERR_INVALID_ARG with the
     * figures. Eager activations are not part of it. */
    size_t memory_budget;
    bool predict_graph_memory;      /* run the dry run without a budget too (stats, bench) */
    pw_capture_policy capture_policy; /* default EAGER */
    /* LAZY only: bytes of recorded graphs kept (0: no limit); past it the
     * least recently used descriptors' graphs are freed. */
    size_t graph_budget;
    bool capture_distinct;          /* capture each distinct piece once per size and make the
                                       identical ones (every layer of a Llama) by patching its
                                       addresses (default true; docs/runtime.md) */
    const char *graph_cache_dir;    /* keep captured graphs in this folder and start from them
                                       (NULL: off; docs/graph-cache.md) */
    bool prefix_cache;              /* share the KV blocks of prompts' common prefixes between
                                       requests, and keep them after a request ends until the
                                       memory is needed (default true; the tokens are the same
                                       either way) */
} pw_engine_config;

PW_API void pw_engine_config_init(pw_engine_config *cfg);

typedef struct pw_engine_stats {
    int64_t steps;
    int64_t steps_by_mode[3];      /* indexed by pw_runtime_mode */
    int64_t prompt_tokens;         /* prefill tokens processed */
    int64_t generated_tokens;
    double prefill_seconds;        /* steps that carried prefill tokens */
    double decode_seconds;         /* pure decode steps */
    int64_t decode_steps;
    int64_t decode_step_tokens;    /* real tokens in pure decode steps */
    uint64_t graphs_captured;        /* every graph, patched ones included */
    uint64_t graphs_patched;         /* PIECEWISE graphs made by patching a distinct piece */
    uint64_t pieces_patched_in_full; /* pieces patched inside FULL graphs (runs: a FULL
                                        descriptor verify_capture captures twice counts twice) */
    uint64_t graphs_from_cache;      /* graphs made from the graph cache's programs */
    double capture_seconds;
    size_t graph_pool_reserved;
    size_t graph_pool_peak;
    size_t graph_pool_predicted;   /* the dry run's figure (0: not planned) */
    size_t weight_bytes;           /* weights the engine reads in place (copies are buffers) */
    size_t buffer_bytes;           /* persistent pool: step buffers, rope table, weight copies */
    size_t kv_cache_bytes;         /* the KV cache pool's reservation */
    int64_t kv_cache_blocks;
    /* lazy capture: how steps without a graph were served */
    int64_t lazy_padded;           /* replayed a larger captured size */
    int64_t lazy_eager;            /* ran eagerly (no captured size fits) */
    int64_t lazy_captured;         /* descriptors captured after their first step */
    int64_t graphs_evicted;        /* descriptors whose graphs the graph budget freed */
    size_t graph_bytes;            /* bytes of the recorded graphs kept now (lazy) */
    int64_t prefix_cache_queries;  /* prompt tokens of admitted requests (prefix cache on) */
    int64_t prefix_cache_hits;     /* of those, tokens whose K/V came from the prefix cache */
} pw_engine_stats;

/* Compiles the model (graph, split, stitching plan, one PIECEWISE wrapper
 * per piece and a FULL wrapper around the forward), builds the KV cache,
 * and captures every descriptor the dispatcher lists. */
PW_API pw_status pw_engine_new(pw_model *m, const pw_engine_config *cfg, pw_engine **out);
PW_API void pw_engine_free(pw_engine *e);

/* Queues a request. The prompt must be non-empty and, with max_new_tokens,
 * fit in max_model_len. *id (may be NULL) identifies it. */
PW_API pw_status pw_engine_add_request(pw_engine *e, const int32_t *prompt, int64_t n_prompt,
                                       int64_t max_new_tokens, const pw_sampling_params *sp,
                                       int64_t *id);

/* Queues a request that scores its prompt: as it runs, the logits of each
 * prompt position p in [score_from, n_prompt) (the model's prediction of
 * the token after p) are written to logits + (p - score_from) * vocab,
 * the caller's buffer, which must stay valid until the request finishes.
 * It then generates one token (greedy) and finishes. For perplexity. */
PW_API pw_status pw_engine_add_scoring_request(pw_engine *e, const int32_t *prompt,
                                               int64_t n_prompt, int64_t score_from,
                                               float *logits, int64_t *id);

typedef struct pw_step_token {
    int64_t request;
    int32_t token;
    bool finished; /* EOS or token limit reached with this token */
    /* With sp.logprobs (else 0, 0, NULL): the log-probability of token
     * under the model's own distribution, log_softmax of its raw logits,
     * before logit_bias, penalties, temperature, top-k and top-p; and the
     * n_top (sp.top_logprobs) most likely tokens under the same
     * distribution, most likely first, ties to the lowest id (borrowed
     * until the next step). Computed on the host from logits that are
     * bitwise the same in every mode and batch, in a fixed order, so they
     * are bitwise reproducible too. */
    float logprob;
    int32_t n_top;
    const pw_token_logprob *top;
} pw_step_token;

/* Runs one step: schedules decode tokens and prefill chunks, dispatches,
 * runs the forward, samples. *tokens (borrowed until the next step) lists
 * the tokens generated in this step. */
PW_API pw_status pw_engine_step(pw_engine *e, const pw_step_token **tokens, int64_t *n_tokens);
PW_API bool pw_engine_has_work(const pw_engine *e);
/* Generated tokens so far (borrowed). */
PW_API pw_status pw_engine_request_output(const pw_engine *e, int64_t id, const int32_t **tokens,
                                          int64_t *n);
/* Removes a finished request and frees its KV blocks. */
PW_API pw_status pw_engine_release_request(pw_engine *e, int64_t id);
/* Stops a request whether or not it has finished, and releases it. */
PW_API pw_status pw_engine_cancel_request(pw_engine *e, int64_t id);
/* Appends tokens to a finished request's context and lets it generate
 * again, reusing its KV cache (multi-turn chat). */
PW_API pw_status pw_engine_continue_request(pw_engine *e, int64_t id, const int32_t *tokens,
                                            int64_t n, int64_t max_new_tokens);
PW_API void pw_engine_get_stats(const pw_engine *e, pw_engine_stats *out);
PW_API void pw_engine_reset_stats(pw_engine *e);
/* The logits of the last step for request id's last token (borrowed, vocab
 * floats), for tests that compare modes. */
PW_API pw_status pw_engine_last_logits(const pw_engine *e, int64_t id, const float **logits);
PW_API const pw_dispatcher *pw_engine_dispatcher(const pw_engine *e);
/* The compiled stitching plan and split graph (borrowed). */
PW_API const pw_plan *pw_engine_plan(const pw_engine *e);
PW_API const pw_ir *pw_engine_split_graph(const pw_engine *e);

/* Tensor parallelism with one rank in charge (docs/tensor-parallel.md):
 * every rank builds its engine with the same configuration; then rank 0
 * calls pw_engine_tp_lead and uses its engine as usual (from one thread at
 * a time), while every other rank calls pw_engine_tp_follow, which makes
 * the same calls rank 0 made (add, continue, cancel, release, set the
 * canary, step) in the same order, and returns once rank 0 frees its
 * engine. Each step, rank 0 sends the calls made since the last one in
 * one message. Not recorded: the statistics calls (each rank keeps its
 * own) and scoring requests (refused while leading). A follower waits for
 * rank 0's next step without spinning and without limit; within a step
 * the watchdog (pw_tp_set_timeout) applies. pw_engine_tp_lead is a no-op
 * in a job of one process. */
PW_API pw_status pw_engine_tp_lead(pw_engine *e);
PW_API pw_status pw_engine_tp_follow(pw_engine *e);

/* Online bitwise canary: one step in `every` (0: off) that ran captured
 * graphs (PIECEWISE or FULL) runs again eagerly (NONE) on the same batch
 * and the logits are compared bit for bit; a difference is logged (the
 * descriptor, the mode, the first differing row) and counted. */
typedef struct pw_engine_verify_stats {
    int64_t checks;
    int64_t mismatches;
    char last[256]; /* the last difference found */
} pw_engine_verify_stats;
PW_API pw_status pw_engine_set_verify_every(pw_engine *e, int64_t every);
PW_API void pw_engine_get_verify_stats(const pw_engine *e, pw_engine_verify_stats *out);

#ifdef __cplusplus
}
#endif
#endif
