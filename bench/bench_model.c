/* bench model: a Llama GGUF model end to end through the engine.
 *
 *   decode    for each mode (none, piecewise, full) and each batch size b:
 *             b requests, each a one-token prompt (BOS), greedy, decoding
 *             --tokens tokens (llama-bench's tg128 at b = 1). tokens/s over
 *             the decode loop's wall time (from the end of the prompts' step
 *             to the end of the last step: every decode step and what runs
 *             between them, as llama-bench's tg times its generation loop;
 *             the prompt step and request set-up are outside), ms per step
 *             from the engine's own step timer (schedule, dispatch,
 *             forward, sampling), medians of --repeats runs. Speed-up is
 *             over none at the same batch. A second figure divides by the
 *             stepping thread's CPU time over the same loop instead of wall
 *             time, which a loaded machine disturbs less.
 *             --threads sets pw_set_num_threads (kernels split large
 *             matmuls and multi-token attention across a thread pool).
 *   threads   with a list (--threads 1,2,4): the tables above use the
 *             first count, then FULL decode runs again at every count and
 *             batch, to show where threads pay off and where they do not.
 *   bandwidth batch-1 FULL decode at each thread count as bytes per second:
 *             the weight bytes a token reads (every tensor once, one row
 *             of the token embedding unless it is also the LM head; the
 *             KV cache left out) times tok/s, and its share of the read
 *             bandwidth the same number of threads measure over 4 KiB and
 *             over 2 MiB pages, the faster (bench_stream.c); and how much
 *             of the model file's mapping the kernel holds in 2 MiB pages.
 *   prefill   one request whose prompt fills max_num_batched_tokens, in the
 *             default mode (FULL_AND_PIECEWISE: a prefill step runs
 *             PIECEWISE) and without the prefix cache, so every run
 *             computes the whole prompt; median of --repeats runs.
 *   capture   an engine in the default mode with the default capture list:
 *             graphs kept, total ms, ms per graph, the graph pool's peak;
 *             then the same capture with the warm-ups forced (the path
 *             before the CPU skipped them), for the time side by side.
 *             The largest single capture is measured on a second engine
 *             whose capture list holds only the largest size, in the same
 *             mode (so it captures that size's PIECEWISE and FULL graphs).
 *
 * Every engine is created (and captures) before any timed region. */
#include "bench.h"
#include "cli.h"
#include "cli_args.h"

#include "model/engine_internal.h" /* the engine's module and stream: replaying a graph alone */
#include "model/gguf.h"
#include "piecewise_llm.h"
#include "pw_config.h"
#if PW_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCHES 16
#define DEFAULT_TOKENS 128
#define DEFAULT_REPEATS 5
#define MODES 3
#define ENGINE_MIN_SEQS 64
#define ENGINE_MIN_BATCHED_TOKENS 128

#define TRY(expr)                                                                              \
    do {                                                                                       \
        pw_status s_ = (expr);                                                                 \
        if (s_ != PW_OK) return s_;                                                            \
    } while (0)

typedef struct model_opts {
    const char *path;
    int64_t batches[MAX_BATCHES];
    int n_batches;
    int threads;                       /* the first of thread_counts */
    int64_t thread_counts[MAX_BATCHES];
    int n_thread_counts;
    int64_t tokens;
    int repeats;
    int json;
    int lean; /* --lean: FULL decode and prefill only */
    int64_t tp; /* --tp N (0: without it); N > 1 needs --lean */
} model_opts;

typedef struct decode_result {
    double tok_s, step_ms; /* the decode loop's wall clock; the engine's step timer */
    double cpu_tok_s;      /* the stepping thread's CPU time: less sensitive to a loaded
                              machine; with --threads > 1 it leaves out the workers */
    /* FULL only: the batch's graph replayed alone, back to back (0: not measured) */
    double replay_us;
    size_t replay_launches, replay_nodes; /* piecewise launches; device graph nodes (CUDA) */
} decode_result;

static const pw_graph_mode bench_modes[MODES] = {PW_GRAPH_NONE, PW_GRAPH_PIECEWISE,
                                                 PW_GRAPH_FULL};
static const char *const mode_names[MODES] = {"none", "piecewise", "full"};

/* --device: every engine of the run uses it. */
static pw_device bench_device = PW_DEVICE_CPU;
/* --no-distinct-capture and --graph-cache DIR: every engine of the run too
 * (the capture figures make their own engines with and without them). */
static bool bench_capture_distinct = true;
static const char *bench_graph_cache;
/* --memory-budget, --capture, --graph-budget: every engine of the run too. */
static pw_engine_config bench_capture_cfg;

static void usage(FILE *f) {
    fprintf(f,
            "usage: piecewise bench model MODEL.gguf [--batch 1,4,16,64] [--threads N[,N...]]\n"
            "                             [--tokens %d] [--repeats %d] [--device cpu|cuda] [--json]\n"
            "                             [--graph-cache DIR] [--no-distinct-capture]\n"
            "                             [--memory-budget BYTES] [--capture eager|lazy]\n"
            "                             [--graph-budget BYTES] [--lean]\n\n"
            "Decode tokens/s and ms per step per mode (none, piecewise, full) and batch\n"
            "size (each request: BOS prompt, greedy, --tokens new tokens), prefill tokens/s,\n"
            "capture count and time, and the graph pool's peak over all capture sizes\n"
            "against the largest size alone. Figures are medians of --repeats runs.\n"
            "With several --threads counts the tables use the first, and FULL decode is\n"
            "repeated at every count (thread scaling). The capture figures include the\n"
            "graph pool bytes a dry run predicted and those the capture reserved; cold (no\n"
            "cache), the same without distinct-piece capture, and warm: a second engine\n"
            "started from the graph cache the first wrote (in --graph-cache DIR, else in a\n"
            "temporary folder removed afterwards).\n\n"
            "  --lean                     FULL decode (at every --threads count) and prefill\n"
            "                             only: no NONE or PIECEWISE decode, no capture-path,\n"
            "                             forced warm-up or graph-pool measurements (what the\n"
            "                             peer script compares; a fraction of the time); decode\n"
            "                             against the read bandwidth (the fastest of 4 KiB\n"
            "                             pages, 2 MiB pages and 2 MiB pages with software\n"
            "                             prefetch) with the model file's share in 2 MiB\n"
            "                             pages, and prefill against the int8 dot-product\n"
            "                             peak (bench peak) on the CPU\n"
            PW_CLI_CAPTURE_HELP
            PW_CLI_GRAPH_CACHE_HELP
            PW_CLI_TP_HELP
            "                             (with N > 1, --lean only; rank 0 prints the figures)\n",
            DEFAULT_TOKENS, DEFAULT_REPEATS);
}

static int parse_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "piecewise bench model: %s expects an integer in [%" PRId64 ", %" PRId64
                        "], got '%s'\n",
                flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

/* A comma-separated list of integers in [lo, hi] into out (at most
 * MAX_BATCHES of them). */
static int parse_list(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out,
                      int *n) {
    *n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_BATCHES) {
            fprintf(stderr, "piecewise bench model: at most %d values for %s\n", MAX_BATCHES, flag);
            return 0;
        }
        if (!parse_int(flag, tok, lo, hi, &out[*n])) return 0;
        (*n)++;
    }
    if (*n == 0) {
        fprintf(stderr, "piecewise bench model: %s needs at least one value\n", flag);
        return 0;
    }
    return 1;
}

/* 0: run, 1: exit 0 (help), 2: usage error. */
static int parse_args(int argc, char **argv, model_opts *o) {
    static const int64_t default_batches[] = {1, 4, 16, 64};
    memset(o, 0, sizeof *o);
    pw_engine_config_init(&bench_capture_cfg);
    memcpy(o->batches, default_batches, sizeof default_batches);
    o->n_batches = (int)(sizeof default_batches / sizeof default_batches[0]);
    o->threads = 1;
    o->thread_counts[0] = 1;
    o->n_thread_counts = 1;
    o->tokens = DEFAULT_TOKENS;
    o->repeats = DEFAULT_REPEATS;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int64_t v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--lean") == 0) {
            o->lean = 1;
        } else if (i + 1 < argc && strcmp(a, "--batch") == 0) {
            if (!parse_list("--batch", argv[++i], 1, 4096, o->batches, &o->n_batches)) return 2;
        } else if (i + 1 < argc && strcmp(a, "--threads") == 0) {
            if (!parse_list("--threads", argv[++i], 1, 256, o->thread_counts, &o->n_thread_counts))
                return 2;
            o->threads = (int)o->thread_counts[0];
        } else if (i + 1 < argc && strcmp(a, "--device") == 0) {
            if (pw_device_parse(argv[++i], &bench_device) != PW_OK) {
                fprintf(stderr, "piecewise bench model: --device: %s\n", pw_last_error());
                return 2;
            }
        } else if (strcmp(a, "--no-distinct-capture") == 0) {
            bench_capture_distinct = false;
        } else if (i + 1 < argc && strcmp(a, "--graph-cache") == 0) {
            bench_graph_cache = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--tokens") == 0) {
            if (!parse_int(a, argv[++i], 1, 1 << 20, &o->tokens)) return 2;
        } else if (i + 1 < argc && strcmp(a, "--repeats") == 0) {
            if (!parse_int(a, argv[++i], 1, 1000, &v)) return 2;
            o->repeats = (int)v;
        } else if ((v = pw_cli_capture_option(argc, argv, &i, &bench_capture_cfg)) != 0) {
            if (v < 0) return 2;
        } else if ((v = pw_cli_tp_option(argc, argv, &i, &o->tp)) != 0) {
            if (v < 0) return 2;
        } else if (a[0] != '-' && !o->path) {
            o->path = a;
        } else {
            fprintf(stderr, "piecewise bench model: unexpected argument '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o->path) {
        usage(stderr);
        return 2;
    }
    if (o->tp > 1 && (!o->lean || bench_graph_cache)) {
        fprintf(stderr, "piecewise bench model: --tp %lld measures --lean only, without "
                        "--graph-cache\n", (long long)o->tp);
        return 2;
    }
    return 0;
}

static int64_t max_batch(const model_opts *o) {
    int64_t m = 1;
    for (int i = 0; i < o->n_batches; i++)
        if (o->batches[i] > m) m = o->batches[i];
    return m;
}

static void quiet_config(pw_engine_config *cfg) {
    pw_engine_config_init(cfg);
    cfg->device = bench_device;
    cfg->capture_distinct = bench_capture_distinct;
    cfg->graph_cache_dir = bench_graph_cache;
    cfg->progress = PW_PROGRESS_OFF;
    cfg->print_capture_totals = false;
    cfg->memory_budget = bench_capture_cfg.memory_budget;
    cfg->capture_policy = bench_capture_cfg.capture_policy;
    cfg->graph_budget = bench_capture_cfg.graph_budget;
}

/* An engine that holds every decode batch of the run at once. */
static pw_status decode_engine(pw_model *m, const model_opts *o, pw_graph_mode mode,
                               pw_engine **out) {
    pw_engine_config cfg;
    quiet_config(&cfg);
    int64_t b = max_batch(o);
    const pw_model_info *in = pw_model_get_info(m);
    cfg.mode = mode;
    cfg.max_num_seqs = b > ENGINE_MIN_SEQS ? b : ENGINE_MIN_SEQS;
    cfg.max_num_batched_tokens =
        cfg.max_num_seqs > ENGINE_MIN_BATCHED_TOKENS ? cfg.max_num_seqs : ENGINE_MIN_BATCHED_TOKENS;
    int64_t per_request = o->tokens + 1 + cfg.block_size;
    cfg.kv_cache_positions = cfg.max_num_seqs * per_request;
    if (o->tokens + 1 > in->context) cfg.max_model_len = o->tokens + 1;
    return pw_engine_new(m, &cfg, out);
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Adds n requests with the given prompt and runs until all finish, then
 * releases them. *decode_wall and *decode_cpu (may be NULL) get the wall
 * time and the calling thread's CPU time from the end of the first step
 * (the prompts') to the end of the last: every decode step and everything
 * between them (the loop, pw_engine_has_work), as llama-bench's tg times
 * its whole generation loop. Each clock is read twice per run, not per
 * step: a thread CPU-time read is a system call, and two per step cost
 * about as much as the scheduler. */
static pw_status run_requests(pw_engine *e, const int32_t *prompt, int64_t n_prompt, int64_t n,
                              int64_t max_new, const pw_sampling_params *sp, double *decode_wall,
                              double *decode_cpu) {
    int64_t ids[4096];
    double w0 = 0, c0 = 0;
    for (int64_t i = 0; i < n; i++) TRY(pw_engine_add_request(e, prompt, n_prompt, max_new, sp, &ids[i]));
    for (int64_t step = 0; pw_engine_has_work(e); step++) {
        const pw_step_token *toks;
        int64_t nt;
        TRY(pw_engine_step(e, &toks, &nt));
        if (step == 0) w0 = wall_seconds(), c0 = cpu_seconds();
    }
    double w1 = wall_seconds(), c1 = cpu_seconds();
    for (int64_t i = 0; i < n; i++) TRY(pw_engine_release_request(e, ids[i]));
    if (decode_wall) *decode_wall = w0 > 0 ? w1 - w0 : 0;
    if (decode_cpu) *decode_cpu = c0 > 0 ? c1 - c0 : 0;
    return PW_OK;
}

/* Greedy, with the end-of-generation tokens banned (logit bias -100), so
 * that every request decodes all its tokens, as llama-bench's do: a random
 * model with tied embeddings tends to repeat its input, and where BOS is
 * also EOS (Qwen's vocabulary) it would stop at once. */
static void greedy_without_eog(const pw_model *m, pw_logit_bias *bias, pw_sampling_params *sp) {
    *sp = (pw_sampling_params){0};
    int32_t vocab = (int32_t)pw_model_get_info(m)->vocab;
    for (int32_t t = 0; t < vocab && sp->n_logit_bias < PW_MAX_LOGIT_BIAS; t++)
        if (pw_model_is_end_of_generation(m, t)) bias[sp->n_logit_bias++] = (pw_logit_bias){t, -100.0f};
    sp->logit_bias = bias;
}

static pw_status measure_decode(pw_engine *e, pw_model *m, const model_opts *o, int64_t batch,
                                decode_result *out) {
    double tok_s[1000], step_ms[1000], cpu_tok_s[1000];
    pw_logit_bias bias[PW_MAX_LOGIT_BIAS];
    pw_sampling_params sp;
    greedy_without_eog(m, bias, &sp);
    /* BOS, or token 0 in a vocabulary without one */
    int32_t bos = pw_model_bos(m) >= 0 ? pw_model_bos(m) : 0;
    /* One unmeasured run warms caches and the pools' free lists. */
    TRY(run_requests(e, &bos, 1, batch, o->tokens, &sp, NULL, NULL));
    for (int r = 0; r < o->repeats; r++) {
        double wall = 0, cpu = 0;
        pw_engine_reset_stats(e);
        TRY(run_requests(e, &bos, 1, batch, o->tokens, &sp, &wall, &cpu));
        pw_engine_stats st;
        pw_engine_get_stats(e, &st);
        tok_s[r] = (double)st.decode_step_tokens / (wall > 0 ? wall : 1e-12);
        step_ms[r] = st.decode_steps ? 1e3 * st.decode_seconds / (double)st.decode_steps : 0;
        cpu_tok_s[r] = (double)st.decode_step_tokens / (cpu > 0 ? cpu : 1e-12);
    }
    out->tok_s = pw_bench_median(tok_s, (size_t)o->repeats);
    out->step_ms = pw_bench_median(step_ms, (size_t)o->repeats);
    out->cpu_tok_s = pw_bench_median(cpu_tok_s, (size_t)o->repeats);
    return PW_OK;
}

/* The FULL graph of a pure-decode batch replayed alone, back to back: the
 * time of one step's kernels without the engine's host work around them
 * (inputs, scheduling, logits, sampling), which the decode table's ms/step
 * includes. Replaying it again rewrites the last step's KV-cache slots with
 * the same values, so the engine is left as it was. */
#define REPLAY_ROUNDS 100
static pw_status measure_replay(pw_engine *e, const model_opts *o, int64_t batch,
                                decode_result *out) {
    pw_graph_wrapper *w = pw_module_full_wrapper(e->module);
    /* FULL mode keeps one graph per size for every batch (relaxed key);
     * auto mode one per uniform decode size */
    pw_batch_desc d = pw_batch_desc_make(batch, batch, true, false);
    if (w && !pw_graph_wrapper_has_graph(w, &d))
        d = pw_batch_desc_make(batch, PW_NUM_REQS_UNSET, false, false);
    if (!w || !pw_graph_wrapper_has_graph(w, &d)) return PW_OK; /* not a capture size */
    pw_graph *g;
    TRY(pw_graph_wrapper_graph(w, &d, &g));
    out->replay_launches = pw_graph_num_launches(g);
#if PW_HAVE_CUDA
    if (bench_device == PW_DEVICE_CUDA) TRY(pw_cuda_graph_num_nodes(g, &out->replay_nodes));
#endif
    double us[64];
    int n = o->repeats < 64 ? o->repeats : 64;
    TRY(pw_stream_synchronize(e->stream));
    for (int r = 0; r < n; r++) {
        for (int k = 0; k < 3; k++) TRY(pw_graph_replay(g, e->stream));
        TRY(pw_stream_synchronize(e->stream));
        double t0 = wall_seconds();
        for (int k = 0; k < REPLAY_ROUNDS; k++) TRY(pw_graph_replay(g, e->stream));
        TRY(pw_stream_synchronize(e->stream));
        us[r] = (wall_seconds() - t0) * 1e6 / REPLAY_ROUNDS;
    }
    out->replay_us = pw_bench_median(us, (size_t)n);
    return PW_OK;
}

typedef struct capture_result {
    uint64_t graphs;
    uint64_t graphs_patched, pieces_patched_in_full; /* distinct-piece capture */
    double ms;
    double ms_no_distinct; /* the same capture with every piece captured for real */
    double warm_ms;        /* an engine started from the graph cache a first one wrote */
    uint64_t warm_graphs_from_cache;
    double ms_forced_warmups; /* the same capture with the warm-ups forced (the old path) */
    size_t pool_peak, largest_single;
    size_t predicted_pool_bytes, pool_reserved_bytes; /* the dry run's figure, the capture's */
    int64_t largest_size;
    int n_sizes;
    double prefill_tok_s;
    int64_t prefill_tokens;
    double peak_gflops; /* one core, bench peak; 0 on the CUDA device */
    double peak_int8_gops; /* one core's int8 dot-product peak (bench peak); 0 on CUDA */
    double bytes_per_token; /* weight bytes one decode token reads (weight_bytes_per_token) */
    double stream_gbs[MAX_BATCHES]; /* read bandwidth at each --threads count; 0: not measured */
    double int8_gops_at[MAX_BATCHES]; /* int8 peak of that many threads together; 0: not measured */
    /* the model file's mapped bytes resident, and of them those in huge
     * pages (bench_stream.c): how the page cache holds the file decides
     * what decode's reads cost */
    size_t file_resident, file_huge;
} capture_result;

/* Weight bytes a decode token reads: every tensor of the file once, but of
 * the token embedding one row, unless the model has no output.weight (the
 * embedding is then the LM head too, read whole). The KV cache is left out
 * (at the short contexts of these runs it is a few MB against GB). 0 when
 * the file cannot be read. */
static double weight_bytes_per_token(const char *path) {
    pw_gguf *g = NULL;
    if (pw_gguf_open(path, &g) != PW_OK) return 0;
    double bytes = 0;
    const pw_gguf_tensor *out = NULL;
    bool tied = pw_gguf_find_tensor(g, "output.weight", &out) != PW_OK;
    for (int64_t i = 0; i < pw_gguf_tensor_count(g); i++) {
        const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
        if (strcmp(t->name, "token_embd.weight") == 0 && !tied)
            bytes += (double)t->nbytes / (double)(t->dims[1] > 0 ? t->dims[1] : 1);
        else
            bytes += (double)t->nbytes;
    }
    pw_gguf_free(g);
    return bytes;
}

/* The decode ceilings at each thread count: bytes per token and the read
 * bandwidth with that many threads, and the int8 dot-product peak of that
 * many threads together (threads sharing a core add less than a core). */
static void measure_bandwidth(const model_opts *o, capture_result *c) {
    c->bytes_per_token = weight_bytes_per_token(o->path);
    c->file_huge = pw_pages_file_huge_bytes(o->path, &c->file_resident);
    for (int t = 0; t < o->n_thread_counts; t++) {
        const char *how;
        c->stream_gbs[t] = pw_bench_stream_gbs((int)o->thread_counts[t], 5, NULL);
        c->int8_gops_at[t] = pw_bench_peak_int8_gops_threads((int)o->thread_counts[t], 5, &how);
    }
}

static pw_status measure_prefill(pw_engine *e, pw_model *m, const model_opts *o,
                                 capture_result *c) {
    const pw_model_info *in = pw_model_get_info(m);
    int64_t n = ENGINE_MIN_BATCHED_TOKENS;
    if (n + 1 > in->context) n = in->context - 1;
    int32_t prompt[ENGINE_MIN_BATCHED_TOKENS];
    /* Deterministic tokens spread over the vocabulary; BOS first. */
    prompt[0] = pw_model_bos(m) >= 0 ? pw_model_bos(m) : 0;
    for (int64_t i = 1; i < n; i++) prompt[i] = (int32_t)((i * 7919) % in->vocab);
    double tok_s[1000];
    const pw_sampling_params greedy = {0};

    TRY(run_requests(e, prompt, n, 1, 1, &greedy, NULL, NULL));
    for (int r = 0; r < o->repeats; r++) {
        pw_engine_reset_stats(e);
        TRY(run_requests(e, prompt, n, 1, 1, &greedy, NULL, NULL));
        pw_engine_stats st;
        pw_engine_get_stats(e, &st);
        /* every run computes the whole prompt (its engine has no prefix
         * cache, which would hand the repeats all but the last token) */
        if (st.prompt_tokens != n) {
            fprintf(stderr, "piecewise bench model: prefill computed %" PRId64 " of its %" PRId64
                    " prompt tokens\n", st.prompt_tokens, n);
            return PW_ERR_STATE;
        }
        tok_s[r] = (double)st.prompt_tokens / (st.prefill_seconds > 0 ? st.prefill_seconds : 1e-12);
    }
    c->prefill_tok_s = pw_bench_median(tok_s, (size_t)o->repeats);
    c->prefill_tokens = n;
    return PW_OK;
}

/* Default-mode engine with the default capture list, then one with only
 * the largest size. */
/* Cold capture without distinct-piece capture, then warm: one engine
 * writes the graph cache, a second starts from it. */
static pw_status measure_capture_paths(pw_model *m, capture_result *c) {
    pw_engine_config cfg;
    quiet_config(&cfg);
    cfg.graph_cache_dir = NULL;
    cfg.capture_distinct = false;
    pw_engine *e = NULL;
    pw_engine_stats st;
    TRY(pw_engine_new(m, &cfg, &e));
    pw_engine_get_stats(e, &st);
    c->ms_no_distinct = st.capture_seconds * 1e3;
    pw_engine_free(e);

    char tmp[] = "/tmp/pw_bench_graph_cache_XXXXXX";
    const char *dir = bench_graph_cache;
    if (!dir && !(dir = mkdtemp(tmp))) {
        fprintf(stderr, "piecewise bench model: cannot make a temporary folder for the graph "
                        "cache: %s\n", strerror(errno));
        return PW_ERR_IO;
    }
    quiet_config(&cfg);
    cfg.graph_cache_dir = dir;
    pw_status s = PW_OK;
    for (int round = 0; round < 2 && s == PW_OK; round++) {
        e = NULL;
        s = pw_engine_new(m, &cfg, &e);
        if (s == PW_OK) pw_engine_get_stats(e, &st);
        pw_engine_free(e);
    }
    if (s == PW_OK) {
        c->warm_ms = st.capture_seconds * 1e3;
        c->warm_graphs_from_cache = st.graphs_from_cache;
    }
    if (!bench_graph_cache) { /* the bench's own folder: its one file, then itself */
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            char path[sizeof tmp + 512];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            (void)unlink(path);
        }
        if (d) closedir(d);
        (void)rmdir(dir);
    }
    return s;
}

static pw_status measure_capture(pw_model *m, const model_opts *o, capture_result *c) {
    pw_engine_config cfg;
    quiet_config(&cfg);
    cfg.graph_cache_dir = NULL; /* cold */
    cfg.predict_graph_memory = true;
    cfg.prefix_cache = false; /* measure_prefill repeats its prompt */
    pw_engine *e = NULL;
    TRY(pw_engine_new(m, &cfg, &e));
    cfg.predict_graph_memory = false;
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    c->predicted_pool_bytes = st.graph_pool_predicted;
    c->pool_reserved_bytes = st.graph_pool_reserved;
    c->graphs = st.graphs_captured;
    c->graphs_patched = st.graphs_patched;
    c->pieces_patched_in_full = st.pieces_patched_in_full;
    c->ms = st.capture_seconds * 1e3;
    c->pool_peak = st.graph_pool_peak;
    int n_sizes = 0;
    pw_dispatcher_capture_sizes(pw_engine_dispatcher(e), &n_sizes);
    c->n_sizes = n_sizes;
    c->largest_size = pw_dispatcher_max_capture_size(pw_engine_dispatcher(e));
    pw_status s = measure_prefill(e, m, o, c);
    pw_engine_free(e);
    TRY(s);

    cfg.force_warmups = true;
    TRY(pw_engine_new(m, &cfg, &e));
    pw_engine_get_stats(e, &st);
    c->ms_forced_warmups = st.capture_seconds * 1e3;
    pw_engine_free(e);
    cfg.force_warmups = false;

    int64_t only[1] = {c->largest_size};
    cfg.capture_sizes = only;
    cfg.n_capture_sizes = 1;
    TRY(pw_engine_new(m, &cfg, &e));
    pw_engine_get_stats(e, &st);
    c->largest_single = st.graph_pool_peak;
    pw_engine_free(e);
    return measure_capture_paths(m, c);
}

/* Floating-point operations per decoded token (a multiply-add counts 2):
 * every matrix product of a layer and the classifier, plus attention's
 * q.k and weights.v products over the mean context of the decode steps
 * (a request decodes positions 1 .. tokens-1, attending over pos+1
 * positions). Norms, rope, activations and softmax are left out (under 3%
 * here), so this is a floor on the work and the GFLOP/s column a floor on
 * the rate; it puts a throughput next to what one core can do at most. */
static double flops_per_token(const pw_model_info *in, int64_t tokens) {
    double q = (double)(in->n_heads * in->head_dim), kv = (double)(in->n_kv_heads * in->head_dim);
    double d = (double)in->dim, f = (double)in->ffn_dim;
    double layer_macs = d * q + 2.0 * d * kv + q * d + 3.0 * d * f;
    double mean_ctx = (double)(tokens + 2) / 2.0;
    double attn_macs = 2.0 * q * mean_ctx;
    return 2.0 * ((double)in->n_layers * (layer_macs + attn_macs) + d * (double)in->vocab);
}

/* Operations per token of the matrix products alone (projections and the
 * classifier, a multiply-add counts 2): with quantized weights these are
 * the integer dot products, set against bench peak's int8 figure. */
static double matmul_ops_per_token(const pw_model_info *in) {
    double q = (double)(in->n_heads * in->head_dim), kv = (double)(in->n_kv_heads * in->head_dim);
    double d = (double)in->dim, f = (double)in->ffn_dim;
    double layer_macs = d * q + 2.0 * d * kv + q * d + 3.0 * d * f;
    return 2.0 * ((double)in->n_layers * layer_macs + d * (double)in->vocab);
}

/* Operations per prompt token of a prefill of n tokens: every layer's
 * products for each token, the classifier for the last one only (a step
 * computes the logits of the rows it samples from). */
static double prefill_ops_per_token(const pw_model_info *in, int64_t n) {
    double classifier = 2.0 * (double)in->dim * (double)in->vocab;
    return matmul_ops_per_token(in) - classifier + classifier / (double)(n > 0 ? n : 1);
}

/* Share of one core's int8 peak (per thread) that tok_s tokens per second
 * of matrix products reach. */
static double int8_fraction(const pw_model_info *in, const capture_result *c, double tok_s,
                            int threads) {
    if (c->peak_int8_gops <= 0) return 0;
    return tok_s * matmul_ops_per_token(in) / (c->peak_int8_gops * 1e9 * threads);
}

static void print_table(const model_opts *o, const pw_model_info *in,
                        decode_result res[MODES][MAX_BATCHES], const capture_result *c) {
    printf("model %s: %" PRId64 " layers, dim %" PRId64 ", ffn %" PRId64 ", vocab %" PRId64
           "; %d thread%s, %" PRId64 " tokens per request, median of %d\n\n",
           in->name, in->n_layers, in->dim, in->ffn_dim, in->vocab, o->threads,
           o->threads == 1 ? "" : "s", o->tokens, o->repeats);
    double flops = flops_per_token(in, o->tokens);
    printf("%-10s %6s %14s %10s %9s %14s %8s\n", "mode", "batch", "decode tok/s", "ms/step",
           "vs none", "cpu-time tok/s", "GFLOP/s");
    printf("(cpu-time: tokens over the stepping thread's CPU time, robust to a loaded machine;\n"
           " GFLOP/s: %.2f MFLOP of matrix products and attention per token, times tok/s)\n",
           flops / 1e6);
    for (int b = 0; b < o->n_batches; b++)
        for (int mi = 0; mi < MODES; mi++) {
            const decode_result *r = &res[mi][b];
            printf("%-10s %6" PRId64 " %14.0f %10.4f %8.2fx %14.0f %8.2f\n", mode_names[mi],
                   o->batches[b], r->tok_s, r->step_ms, r->tok_s / res[0][b].tok_s, r->cpu_tok_s,
                   r->tok_s * flops / 1e9);
        }
    printf("\npiecewise - full per step (eager attention between pieces, stitching):\n");
    for (int b = 0; b < o->n_batches; b++)
        printf("  batch %-4" PRId64 " %8.1f us per step, %6.2f us per layer\n", o->batches[b],
               1e3 * (res[1][b].step_ms - res[2][b].step_ms),
               1e3 * (res[1][b].step_ms - res[2][b].step_ms) / (double)in->n_layers);
    printf("none - full per step (per-op dispatch: checks, allocation, launch):\n");
    for (int b = 0; b < o->n_batches; b++)
        printf("  batch %-4" PRId64 " %8.1f us per step\n", o->batches[b],
               1e3 * (res[0][b].step_ms - res[2][b].step_ms));
    printf("full graph replayed alone (one step's kernels without the host work around them):\n");
    for (int b = 0; b < o->n_batches; b++) {
        const decode_result *r = &res[2][b];
        if (r->replay_us <= 0) continue;
        printf("  batch %-4" PRId64 " %8.1f us per replay, %zu launches", o->batches[b],
               r->replay_us, r->replay_launches);
        if (r->replay_nodes) printf(" (%zu device graph nodes)", r->replay_nodes);
        printf("; host work %.1f us per step\n", 1e3 * r->step_ms - r->replay_us);
    }
    int last = o->n_batches - 1;
    printf("full: batch %" PRId64 " throughput is %.2fx batch %" PRId64 "\n", o->batches[last],
           res[2][last].tok_s / res[2][0].tok_s, o->batches[0]);
    if (c->peak_gflops > 0) {
        double ceiling = c->peak_gflops * 1e9 / flops / o->threads;
        printf("ceiling: one core's measured f32 peak is %.1f GFLOP/s (bench peak), so at most\n"
               "  %.0f tok/s per thread for this model; full batch %" PRId64 " is at %.0f%%, batch %" PRId64
               " at %.0f%%\n",
               c->peak_gflops, ceiling, o->batches[0],
               100.0 * res[2][0].tok_s / (ceiling * o->threads), o->batches[last],
               100.0 * res[2][last].tok_s / (ceiling * o->threads));
    }
    if (c->peak_int8_gops > 0)
        printf("int8: one core's dot-product peak is %.1f GOP/s (bench peak); the matrix products\n"
               "  (%.2f MOP per token), were they all integer dot products, reach %.1f%% of it\n"
               "  at full batch %" PRId64 ", %.1f%% at batch %" PRId64 ", %.1f%% in prefill\n",
               c->peak_int8_gops, matmul_ops_per_token(in) / 1e6,
               100.0 * int8_fraction(in, c, res[2][0].tok_s, o->threads), o->batches[0],
               100.0 * int8_fraction(in, c, res[2][last].tok_s, o->threads), o->batches[last],
               100.0 * c->prefill_tok_s * prefill_ops_per_token(in, c->prefill_tokens) /
                   (c->peak_int8_gops * 1e9));
    printf("\nprefill   %" PRId64 "-token prompt: %.0f tok/s\n", c->prefill_tokens,
           c->prefill_tok_s);
    printf("capture   %" PRIu64 " graphs (%d sizes, PIECEWISE and FULL) in %.1f ms, %.3f ms/graph\n",
           c->graphs, c->n_sizes, c->ms, c->graphs ? c->ms / (double)c->graphs : 0.0);
    printf("          with warm-ups forced (every descriptor runs eagerly first): %.1f ms\n",
           c->ms_forced_warmups);
    printf("          %" PRIu64 " of them patched from a distinct piece (and %" PRIu64
           " pieces inside FULL graphs); every piece captured for real: %.1f ms\n",
           c->graphs_patched, c->pieces_patched_in_full, c->ms_no_distinct);
    printf("          warm start from the graph cache: %.1f ms (%" PRIu64 " graphs from it)\n",
           c->warm_ms, c->warm_graphs_from_cache);
    printf("graph pool %zu bytes reserved, %zu predicted by the dry run%s\n",
           c->pool_reserved_bytes, c->predicted_pool_bytes,
           c->pool_reserved_bytes == c->predicted_pool_bytes ? " (exact)" : " (MISMATCH)");
    printf("graph pool peak %.1f KiB over all sizes, %.1f KiB for size %" PRId64
           " alone: %.2fx\n",
           (double)c->pool_peak / 1024.0, (double)c->largest_single / 1024.0, c->largest_size,
           c->largest_single ? (double)c->pool_peak / (double)c->largest_single : 0.0);
}

static void bandwidth_json(const model_opts *o, const capture_result *c, const double *tok_s);

static void print_json(const model_opts *o, const pw_model_info *in,
                       decode_result res[MODES][MAX_BATCHES], const capture_result *c,
                       decode_result (*scaling)[MAX_BATCHES], const double *b1_tok_s) {
    printf("{\"runs\":[");
    int first = 1;
    for (int mi = 0; mi < MODES; mi++)
        for (int b = 0; b < o->n_batches; b++) {
            const decode_result *r = &res[mi][b];
            printf("%s{\"mode\":\"%s\",\"batch\":%" PRId64
                   ",\"decode_tok_s\":%.1f,\"step_ms\":%.5f,\"speedup_vs_none\":%.3f,"
                   "\"decode_tok_s_cpu\":%.1f,\"gflop_s\":%.3f,\"int8_peak_fraction\":%.4f",
                   first ? "" : ",", mode_names[mi], o->batches[b], r->tok_s, r->step_ms,
                   r->tok_s / res[0][b].tok_s, r->cpu_tok_s,
                   r->tok_s * flops_per_token(in, o->tokens) / 1e9,
                   int8_fraction(in, c, r->tok_s, o->threads));
            if (r->replay_us > 0) /* FULL: its graph replayed alone */
                printf(",\"replay_us\":%.3f,\"replay_launches\":%zu,\"replay_nodes\":%zu",
                       r->replay_us, r->replay_launches, r->replay_nodes);
            printf("}");
            first = 0;
        }
    printf("],\"threads\":%d,\"tokens\":%" PRId64 ",\"prefill_tok_s\":%.1f,", o->threads,
           o->tokens, c->prefill_tok_s);
    printf("\"flop_per_token\":%.0f,\"peak_gflop_s\":%.2f,", flops_per_token(in, o->tokens),
           c->peak_gflops);
    printf("\"matmul_op_per_token\":%.0f,\"peak_int8_gop_s\":%.2f,"
           "\"prefill_int8_peak_fraction\":%.4f,",
           matmul_ops_per_token(in), c->peak_int8_gops,
           c->peak_int8_gops > 0 ? c->prefill_tok_s * prefill_ops_per_token(in, c->prefill_tokens) /
                                       (c->peak_int8_gops * 1e9)
                                 : 0.0);
    if (scaling) {
        printf("\"thread_scaling\":[");
        for (int t = 0; t < o->n_thread_counts; t++)
            for (int b = 0; b < o->n_batches; b++)
                printf("%s{\"threads\":%" PRId64 ",\"batch\":%" PRId64 ",\"decode_tok_s\":%.1f}",
                       t || b ? "," : "", o->thread_counts[t], o->batches[b], scaling[t][b].tok_s);
        printf("],");
    }
    bandwidth_json(o, c, b1_tok_s);
    printf("\"capture\":{\"graphs_captured\":%" PRIu64 ",\"graphs_patched\":%" PRIu64
           ",\"pieces_patched_in_full\":%" PRIu64 ",\"ms_no_distinct\":%.3f,\"warm_ms\":%.3f,"
           "\"warm_graphs_from_cache\":%" PRIu64 ",",
           c->graphs - c->graphs_patched, c->graphs_patched, c->pieces_patched_in_full,
           c->ms_no_distinct, c->warm_ms, c->warm_graphs_from_cache);
    printf("\"graphs\":%" PRIu64 ",\"ms\":%.3f,\"ms_forced_warmups\":%.3f,"
           "\"ms_per_graph\":%.4f,"
           "\"predicted_pool_bytes\":%zu,\"pool_reserved_bytes\":%zu,"
           "\"pool_peak_bytes\":%zu,\"largest_single_bytes\":%zu,\"largest_size\":%" PRId64 "}}\n",
           c->graphs, c->ms, c->ms_forced_warmups, c->graphs ? c->ms / (double)c->graphs : 0.0,
           c->predicted_pool_bytes, c->pool_reserved_bytes, c->pool_peak,
           c->largest_single, c->largest_size);
}

/* FULL decode at every thread count and batch: scaling[t][b]. */
static pw_status measure_scaling(pw_model *m, const model_opts *o,
                                 decode_result scaling[MAX_BATCHES][MAX_BATCHES]) {
    pw_status s = PW_OK;
    for (int t = 0; t < o->n_thread_counts && s == PW_OK; t++) {
        pw_set_num_threads((int)o->thread_counts[t]);
        pw_engine *e = NULL;
        s = decode_engine(m, o, PW_GRAPH_FULL, &e);
        for (int b = 0; b < o->n_batches && s == PW_OK; b++)
            s = measure_decode(e, m, o, o->batches[b], &scaling[t][b]);
        pw_engine_free(e);
    }
    pw_set_num_threads(o->threads);
    return s;
}

static void print_scaling(const model_opts *o, decode_result scaling[MAX_BATCHES][MAX_BATCHES]) {
    printf("\nthreads (full mode, decode tok/s; speed-up over %d thread%s):\n%-8s", o->threads,
           o->threads == 1 ? "" : "s", "batch");
    for (int t = 0; t < o->n_thread_counts; t++) printf(" %10" PRId64 " thr", o->thread_counts[t]);
    printf("\n");
    for (int b = 0; b < o->n_batches; b++) {
        printf("%-8" PRId64, o->batches[b]);
        for (int t = 0; t < o->n_thread_counts; t++)
            printf(" %8.0f %4.2fx", scaling[t][b].tok_s, scaling[t][b].tok_s / scaling[0][b].tok_s);
        printf("\n");
    }
}

/* Batch-1 FULL decode at each thread count as bytes read per second, and
 * its share of the read bandwidth that many threads measured (tok_s[t]:
 * the decode rate at thread_counts[t]); then its matrix products' share of
 * the int8 peak of that many threads together, the other ceiling (a
 * quantized product's dot products, unpacking and scaling cost more than
 * one instruction per 64 multiply-adds, so decode can be bound by the
 * arithmetic well below 100%). */
static void print_bandwidth(const model_opts *o, const pw_model_info *in,
                            const capture_result *c, const double *tok_s) {
    if (c->bytes_per_token <= 0 || c->stream_gbs[0] <= 0) return;
    printf("\ndecode batch 1 against memory bandwidth (%.1f MB of weights read per token):\n",
           c->bytes_per_token / 1e6);
    if (c->file_resident > 0)
        printf("  the file's mapping: %.1f MB resident, %.1f%% of it in 2 MiB pages\n",
               (double)c->file_resident / 1e6,
               100.0 * (double)c->file_huge / (double)c->file_resident);
    for (int t = 0; t < o->n_thread_counts; t++)
        printf("  %3" PRId64 " thread%s %8.1f tok/s x %.1f MB = %6.1f GB/s, %5.1f%% of the %.1f "
               "GB/s %" PRId64 " thread%s read\n",
               o->thread_counts[t], o->thread_counts[t] == 1 ? " " : "s", tok_s[t],
               c->bytes_per_token / 1e6, tok_s[t] * c->bytes_per_token / 1e9,
               c->stream_gbs[t] > 0 ? 100.0 * tok_s[t] * c->bytes_per_token / 1e9 / c->stream_gbs[t] : 0.0,
               c->stream_gbs[t], o->thread_counts[t], o->thread_counts[t] == 1 ? "" : "s");
    if (c->int8_gops_at[0] <= 0) return;
    printf("and against the int8 dot-product peak (%.2f MOP of matrix products per token):\n",
           matmul_ops_per_token(in) / 1e6);
    for (int t = 0; t < o->n_thread_counts; t++)
        printf("  %3" PRId64 " thread%s %8.1f GOP/s, %5.1f%% of the %.1f GOP/s %" PRId64
               " thread%s reach together (%.2fx one)\n",
               o->thread_counts[t], o->thread_counts[t] == 1 ? " " : "s",
               tok_s[t] * matmul_ops_per_token(in) / 1e9,
               c->int8_gops_at[t] > 0
                   ? 100.0 * tok_s[t] * matmul_ops_per_token(in) / 1e9 / c->int8_gops_at[t]
                   : 0.0,
               c->int8_gops_at[t], o->thread_counts[t], o->thread_counts[t] == 1 ? "" : "s",
               c->int8_gops_at[t] / c->int8_gops_at[0]);
}

/* The batch-1 column's index, or -1. */
static int batch1_index(const model_opts *o) {
    for (int b = 0; b < o->n_batches; b++)
        if (o->batches[b] == 1) return b;
    return -1;
}

static void bandwidth_json(const model_opts *o, const capture_result *c, const double *tok_s) {
    printf("\"weight_bytes_per_token\":%.0f,\"file_resident_bytes\":%zu,"
           "\"file_huge_page_bytes\":%zu,\"bandwidth\":[",
           c->bytes_per_token, c->file_resident, c->file_huge);
    for (int t = 0; t < o->n_thread_counts; t++)
        printf("%s{\"threads\":%" PRId64 ",\"stream_gb_s\":%.2f,\"peak_int8_gop_s\":%.2f,"
               "\"decode_gb_s\":%.3f,\"stream_fraction\":%.4f}",
               t ? "," : "", o->thread_counts[t], c->stream_gbs[t], c->int8_gops_at[t],
               tok_s ? tok_s[t] * c->bytes_per_token / 1e9 : 0.0,
               tok_s && c->stream_gbs[t] > 0
                   ? tok_s[t] * c->bytes_per_token / 1e9 / c->stream_gbs[t] : 0.0);
    printf("],");
}

/* --lean: FULL decode at every thread count, then prefill in an engine of
 * the default configuration, as measure_capture would measure it. */
static pw_status run_lean(pw_model *m, const model_opts *o,
                          decode_result scaling[MAX_BATCHES][MAX_BATCHES], capture_result *c) {
    TRY(measure_scaling(m, o, scaling));
    /* a tensor-parallel job measures its ranks' decode, not one core's bandwidth */
    if (bench_device == PW_DEVICE_CPU && pw_tp_size() <= 1) {
        measure_bandwidth(o, c);
        const char *how;
        c->peak_int8_gops = pw_bench_peak_int8_gops(9, &how);
    }
    pw_engine_config cfg;
    quiet_config(&cfg);
    cfg.prefix_cache = false; /* measure_prefill repeats its prompt */
    pw_engine *e = NULL;
    TRY(pw_engine_new(m, &cfg, &e));
    pw_status s = measure_prefill(e, m, o, c);
    pw_engine_free(e);
    return s;
}

static void print_lean(const model_opts *o, const pw_model_info *in,
                       decode_result scaling[MAX_BATCHES][MAX_BATCHES], const capture_result *c) {
    int b1 = batch1_index(o);
    double b1_tok_s[MAX_BATCHES];
    for (int t = 0; t < o->n_thread_counts; t++) b1_tok_s[t] = b1 >= 0 ? scaling[t][b1].tok_s : 0;
    if (o->json) {
        printf("{\"lean\":true,\"runs\":[");
        for (int b = 0; b < o->n_batches; b++)
            printf("%s{\"mode\":\"full\",\"batch\":%" PRId64 ",\"decode_tok_s\":%.1f,"
                   "\"step_ms\":%.5f,\"decode_tok_s_cpu\":%.1f}",
                   b ? "," : "", o->batches[b], scaling[0][b].tok_s, scaling[0][b].step_ms,
                   scaling[0][b].cpu_tok_s);
        printf("],\"threads\":%d,\"tokens\":%" PRId64 ",\"prefill_tok_s\":%.1f,"
               "\"thread_scaling\":[",
               o->threads, o->tokens, c->prefill_tok_s);
        for (int t = 0; t < o->n_thread_counts; t++)
            for (int b = 0; b < o->n_batches; b++)
                printf("%s{\"threads\":%" PRId64 ",\"batch\":%" PRId64 ",\"decode_tok_s\":%.1f}",
                       t || b ? "," : "", o->thread_counts[t], o->batches[b], scaling[t][b].tok_s);
        printf("],\"peak_int8_gop_s\":%.2f,\"prefill_int8_peak_fraction\":%.4f,",
               c->peak_int8_gops,
               c->peak_int8_gops > 0 ? c->prefill_tok_s *
                                           prefill_ops_per_token(in, c->prefill_tokens) /
                                           (c->peak_int8_gops * 1e9 * o->threads)
                                     : 0.0);
        bandwidth_json(o, c, b1 >= 0 ? b1_tok_s : NULL);
        printf("\"cores\":%d}\n", pw_bench_cores());
        return;
    }
    printf("model %s: %" PRId64 " layers, dim %" PRId64 ", vocab %" PRId64 "; %" PRId64
           " tokens per request, median of %d (lean: FULL decode and prefill only)\n",
           in->name, in->n_layers, in->dim, in->vocab, o->tokens, o->repeats);
    print_scaling(o, scaling);
    if (b1 >= 0) print_bandwidth(o, in, c, b1_tok_s);
    printf("\nprefill   %" PRId64 "-token prompt, %d thread%s: %.0f tok/s\n", c->prefill_tokens,
           o->threads, o->threads == 1 ? "" : "s", c->prefill_tok_s);
    if (c->peak_int8_gops > 0) {
        double gops = c->prefill_tok_s * prefill_ops_per_token(in, c->prefill_tokens) / 1e9;
        printf("          %.1f GOP/s of matrix products (%.1f MOP per prompt token): %.1f%% of\n"
               "          the int8 dot-product peak of %d core%s (%.1f GOP/s each, bench peak)\n",
               gops, prefill_ops_per_token(in, c->prefill_tokens) / 1e6,
               100.0 * gops / (c->peak_int8_gops * o->threads), o->threads,
               o->threads == 1 ? "" : "s", c->peak_int8_gops);
    }
}

int pw_bench_model(int argc, char **argv) {
    model_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : 2;
    pw_set_num_threads(o.threads);
    pw_model *m = NULL;
    rc = pw_cli_load_model("bench model: loading the model", o.path, o.tp, NULL, &m);
    if (rc) return rc;
    pw_status s = PW_OK;
    const pw_model_info *in = pw_model_get_info(m);
    if (o.tokens + 1 > in->context) {
        fprintf(stderr, "piecewise bench model: --tokens %" PRId64 " exceeds the context of %" PRId64 "\n",
                o.tokens, in->context);
        pw_model_free(m);
        return 2;
    }
    decode_result res[MODES][MAX_BATCHES];
    capture_result cap = {0};
    static decode_result scaling[MAX_BATCHES][MAX_BATCHES];
    if (o.lean) {
        s = run_lean(m, &o, scaling, &cap);
        if (s == PW_OK) print_lean(&o, in, scaling, &cap);
        pw_model_free(m);
        return s == PW_OK ? 0 : pw_cli_fail("bench model", s);
    }
    for (int mi = 0; mi < MODES && s == PW_OK; mi++) {
        pw_engine *e = NULL;
        s = decode_engine(m, &o, bench_modes[mi], &e);
        for (int b = 0; b < o.n_batches && s == PW_OK; b++) {
            res[mi][b] = (decode_result){0};
            s = measure_decode(e, m, &o, o.batches[b], &res[mi][b]);
            if (s == PW_OK && bench_modes[mi] == PW_GRAPH_FULL)
                s = measure_replay(e, &o, o.batches[b], &res[mi][b]);
        }
        pw_engine_free(e);
    }
    if (s == PW_OK) s = measure_capture(m, &o, &cap);
    if (s == PW_OK && o.n_thread_counts > 1) s = measure_scaling(m, &o, scaling);
    if (s == PW_OK && bench_device == PW_DEVICE_CPU) {
        const char *how;
        cap.peak_gflops = pw_bench_peak_gflops(9, &how);
        cap.peak_int8_gops = pw_bench_peak_int8_gops(9, &how);
        measure_bandwidth(&o, &cap);
    }
    int b1 = batch1_index(&o);
    double b1_tok_s[MAX_BATCHES];
    for (int t = 0; t < o.n_thread_counts; t++)
        b1_tok_s[t] = b1 < 0 ? 0 : o.n_thread_counts > 1 ? scaling[t][b1].tok_s : res[2][b1].tok_s;
    if (s != PW_OK) {
        pw_model_free(m);
        return pw_cli_fail("bench model", s);
    }
    if (o.json) {
        print_json(&o, in, res, &cap, o.n_thread_counts > 1 ? scaling : NULL,
                   b1 >= 0 ? b1_tok_s : NULL);
    } else {
        print_table(&o, in, res, &cap);
        if (o.n_thread_counts > 1) print_scaling(&o, scaling);
        if (b1 >= 0) print_bandwidth(&o, in, &cap, b1_tok_s);
    }
    pw_model_free(m);
    return 0;
}
