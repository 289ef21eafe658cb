/* piecewise run: generate text from one or more prompts with a GGUF model.
 * All prompts run as one batch; graphs are captured at start-up. */
#include "cli.h"
#include "cli_args.h"

#include <inttypes.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_MAX_PROMPTS 64
#define RUN_DEFAULT_TOKENS 64

static void usage(FILE *f) {
    fprintf(f,
            "usage: piecewise run MODEL.gguf -p PROMPT [-p PROMPT ...] [options]\n"
            "\n"
            "Generates a continuation of each prompt. All prompts run together as one\n"
            "batch (prefill chunks mixed with decode steps); graphs for every batch size are\n"
            "captured at start-up.\n"
            "\n"
            "options:\n"
            "  -p, --prompt TEXT          a prompt (repeat for a batch; at most %d)\n"
            "  -n, --tokens N             new tokens per prompt (default %d)\n"
            "  --device DEV               cpu|cuda (default cpu; cuda needs a GPU)\n"
            "  --mode MODE                auto|none|piecewise|full|full_decode_only\n"
            "                             (auto = FULL for decode, PIECEWISE for mixed batches)\n"
            "  --temp T                   sampling temperature, 0 = greedy (default 0)\n"
            "  --top-k K                  keep the K most likely tokens (default off)\n"
            "  --top-p P                  nucleus sampling threshold (default off)\n"
            "  --seed S                   sampling seed (default 0)\n"
            "  --threads N                threads for matrix products (default 1)\n"
            "  --max-seqs N               requests in flight (default: the number of prompts)\n"
            "  --max-batched-tokens N     tokens per step, bounds prefill chunks (default 128)\n"
            "  --capture-sizes A,B,...    batch sizes to capture (default: vLLM's list)\n"
            "  --verify-capture           capture FULL graphs twice and compare the recordings\n"
            PW_CLI_GRAPH_CACHE_HELP
            "  --raw                      do not apply the model's chat template to the prompts\n"
            "                             (models without one always run raw)\n"
            "  --system TEXT              system message for the chat template\n"
            "  --no-bos                   add no BOS/EOS (by default the ones the model's GGUF\n"
            "                             asks for: tokenizer.ggml.add_bos_token/add_eos_token)\n"
            "  -q, --quiet                print only the generated text\n"
            PW_CLI_CAPTURE_HELP
            PW_CLI_TP_HELP
            "  -h, --help                 this help\n",
            RUN_MAX_PROMPTS, RUN_DEFAULT_TOKENS);
}

typedef struct run_options {
    const char *model;
    const char *prompts[RUN_MAX_PROMPTS];
    int n_prompts;
    int64_t tokens;
    pw_engine_config cfg;
    pw_sampling_params sp;
    int64_t threads;
    int64_t tp; /* --tp: 0 without it */
    bool add_special; /* the BOS/EOS the model asks for */
    bool quiet;
    bool raw;
    const char *system;
    int64_t capture_sizes[PW_MAX_CAPTURE_SIZES];
} run_options;

static int parse_args(int argc, char **argv, run_options *o) {
    memset(o, 0, sizeof *o);
    pw_engine_config_init(&o->cfg);
    o->tokens = RUN_DEFAULT_TOKENS;
    o->add_special = true;
    o->threads = 1;
    bool max_seqs_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        int gen = pw_cli_generation_option(argc, argv, &i, &o->cfg, &o->sp, &o->threads);
        if (gen < 0) return 2;
        if (gen > 0) continue;
        int cap = pw_cli_graph_cache_option(argc, argv, &i, &o->cfg);
        if (cap < 0) return 2;
        if (cap > 0) continue;
        int tp = pw_cli_tp_option(argc, argv, &i, &o->tp);
        if (tp < 0) return 2;
        if (tp > 0) continue;
        if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) {
            if (!(v = pw_cli_value(argc, argv, &i))) return 2;
            if (o->n_prompts == RUN_MAX_PROMPTS) {
                fprintf(stderr, "piecewise run: at most %d prompts\n", RUN_MAX_PROMPTS);
                return 2;
            }
            o->prompts[o->n_prompts++] = v;
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--tokens") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 1 << 20, &o->tokens)) return 2;
        } else if (strcmp(a, "--max-seqs") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 4096, &o->cfg.max_num_seqs)) return 2;
            max_seqs_given = true;
        } else if (strcmp(a, "--max-batched-tokens") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 1 << 16, &o->cfg.max_num_batched_tokens)) return 2;
        } else if (strcmp(a, "--capture-sizes") == 0) {
            if (!(v = pw_cli_value(argc, argv, &i))) return 2;
            int n = pw_cli_int_list(v, o->capture_sizes, PW_MAX_CAPTURE_SIZES, "--capture-sizes");
            if (n < 0) return 2;
            o->cfg.capture_sizes = o->capture_sizes;
            o->cfg.n_capture_sizes = n;
        } else if (strcmp(a, "--verify-capture") == 0) {
            o->cfg.verify_capture = true;
        } else if (strcmp(a, "--raw") == 0) {
            o->raw = true;
        } else if (strcmp(a, "--system") == 0) {
            if (!(o->system = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "--no-bos") == 0) {
            o->add_special = false;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            o->quiet = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "piecewise run: unknown option '%s' (see --help)\n", a);
            return 2;
        } else if (!o->model) {
            o->model = a;
        } else {
            fprintf(stderr, "piecewise run: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "piecewise run: no model given\n\n");
        usage(stderr);
        return 2;
    }
    if (o->n_prompts == 0) {
        fprintf(stderr, "piecewise run: no prompt given (use -p TEXT)\n");
        return 2;
    }
    /* Without --max-seqs the batch is exactly the prompts, so only the
     * batch sizes this run can use are captured. */
    if (!max_seqs_given || o->cfg.max_num_seqs < o->n_prompts) o->cfg.max_num_seqs = o->n_prompts;
    if (o->cfg.max_num_batched_tokens < o->cfg.max_num_seqs)
        o->cfg.max_num_batched_tokens = o->cfg.max_num_seqs;
    return 0;
}

typedef struct run_request {
    int64_t id;
    int32_t prev;
    char *text;
    size_t len, cap;
    bool done;
} run_request;

static bool append_text(run_request *r, const char *piece) {
    return pw_cli_text_append(&r->text, &r->len, &r->cap, piece, strlen(piece));
}

/* On a terminal, a batch streams as one block of lines, one per prompt,
 * redrawn in place after every step. */
static int redraw(const run_request *reqs, int n, int previous_lines) {
    if (previous_lines > 0) printf("\033[%dA", previous_lines);
    int lines = 0;
    for (int i = 0; i < n; i++) {
        printf("\033[J[%d] ", i + 1);
        for (size_t k = 0; k < reqs[i].len; k++) {
            char c = reqs[i].text[k];
            if (c == '\n') {
                printf("\n    ");
                lines++;
            } else {
                putchar(c);
            }
        }
        printf("\n");
        lines++;
    }
    pw_cli_flush_stdout();
    return lines;
}

/* Formats (with the chat template when chat), tokenizes and queues every
 * prompt. Returns the exit code: 0, or 1 after printing the error. */
static int add_prompts(pw_model *model, pw_engine *engine, const run_options *o, bool chat,
                       run_request *reqs) {
    for (int i = 0; i < o->n_prompts; i++) {
        int32_t *ids = NULL;
        int64_t n = 0;
        pw_status s;
        if (chat) {
            /* the prompt and system text stay text: only the template's
             * markers become special tokens */
            pw_chat_message msgs[2];
            int nm = 0;
            if (o->system) msgs[nm++] = (pw_chat_message){"system", o->system};
            msgs[nm++] = (pw_chat_message){"user", o->prompts[i]};
            s = pw_model_tokenize_chat(model, msgs, nm, true, o->add_special, &ids, &n);
        } else {
            s = pw_model_tokenize(model, o->prompts[i], o->add_special, &ids, &n);
        }
        if (s == PW_OK) s = pw_engine_add_request(engine, ids, n, o->tokens, &o->sp, &reqs[i].id);
        reqs[i].prev = n > 0 && ids ? ids[n - 1] : -1;
        free(ids);
        if (s != PW_OK) {
            char what[64];
            snprintf(what, sizeof what, "run: prompt %d", i + 1);
            return pw_cli_fail(what, s);
        }
        if (!chat && !append_text(&reqs[i], o->prompts[i])) return pw_cli_fail("run", PW_ERR_OOM);
    }
    return 0;
}

/* How the answers reach stdout: one prompt streams token by token; a batch
 * on a terminal redraws one line per prompt after every step; otherwise
 * each answer is printed whole, with its index, when it finishes. */
typedef struct run_output {
    bool stream_one;
    bool live;
    int live_lines;
} run_output;

/* Hands one step's tokens to their requests. Returns how many finished, or
 * -1 when an answer's text ran out of memory. */
static int take_tokens(pw_model *model, pw_engine *engine, run_request *reqs, int n_reqs,
                       const pw_step_token *toks, int64_t n, const run_output *out) {
    int finished = 0;
    for (int64_t k = 0; k < n; k++) {
        run_request *r = NULL;
        for (int i = 0; i < n_reqs; i++)
            if (reqs[i].id == toks[k].request) r = &reqs[i];
        if (!r) continue;
        if (!pw_model_is_end_of_generation(model, toks[k].token)) {
            const char *piece = pw_model_token_text(model, r->prev, toks[k].token);
            if (!append_text(r, piece)) return -1;
            if (out->stream_one) {
                fputs(piece, stdout);
                pw_cli_flush_stdout();
            }
        }
        r->prev = toks[k].token;
        if (toks[k].finished) {
            r->done = true;
            finished++;
            if (!out->stream_one && !out->live)
                printf("[%d] %s\n", (int)(r - reqs) + 1, r->text ? r->text : "");
            pw_engine_release_request(engine, r->id);
        }
    }
    return finished;
}

/* Steps the engine until every prompt's answer is complete. Returns the
 * exit code. */
static int generate(pw_model *model, pw_engine *engine, const run_options *o, bool chat,
                    run_request *reqs) {
    run_output out = {.stream_one = o->n_prompts == 1};
    /* mpirun hands its ranks a terminal whatever it writes to: a
     * tensor-parallel job prints whole answers */
    out.live = !out.stream_one && isatty(STDOUT_FILENO) && pw_tp_size() <= 1;
    if (out.stream_one && !chat) {
        fputs(o->prompts[0], stdout);
        pw_cli_flush_stdout();
    }
    int remaining = o->n_prompts;
    while (remaining > 0) {
        const pw_step_token *toks;
        int64_t n;
        pw_status s = pw_engine_step(engine, &toks, &n);
        if (s != PW_OK) return pw_cli_fail("run: step", s);
        int finished = take_tokens(model, engine, reqs, o->n_prompts, toks, n, &out);
        if (finished < 0) return pw_cli_fail("run", PW_ERR_OOM);
        remaining -= finished;
        if (out.live) out.live_lines = redraw(reqs, o->n_prompts, out.live_lines);
    }
    if (out.stream_one) printf("\n");
    pw_cli_flush_stdout();
    return 0;
}

static void print_stats(const pw_engine *engine) {
    pw_engine_stats st;
    pw_engine_get_stats(engine, &st);
    double pre = st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0;
    double dec = st.decode_seconds > 0 ? st.decode_step_tokens / st.decode_seconds : 0;
    fprintf(stderr,
            "prompt %" PRId64 " tok at %.0f tok/s | decode %" PRId64
            " tok at %.0f tok/s | %" PRIu64 " graphs captured in %.1f ms | steps: %" PRId64
            " none, %" PRId64 " piecewise, %" PRId64 " full\n",
            st.prompt_tokens, pre, st.generated_tokens, dec, st.graphs_captured,
            st.capture_seconds * 1e3, st.steps_by_mode[PW_MODE_NONE],
            st.steps_by_mode[PW_MODE_PIECEWISE], st.steps_by_mode[PW_MODE_FULL]);
    /* lazy capture: how the steps without a graph were served */
    if (st.lazy_captured || st.lazy_padded || st.lazy_eager || st.graphs_evicted)
        fprintf(stderr,
                "lazy capture: %" PRId64 " sizes captured on first use, %" PRId64
                " steps padded to a captured size, %" PRId64 " eager, %" PRId64
                " evicted | graphs hold %zu bytes\n",
                st.lazy_captured, st.lazy_padded, st.lazy_eager, st.graphs_evicted,
                st.graph_bytes);
    if (st.graph_pool_predicted)
        fprintf(stderr, "graph pool: %zu bytes reserved, %zu predicted\n",
                st.graph_pool_reserved, st.graph_pool_predicted);
}

int pw_cmd_run(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    run_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    pw_set_num_threads((int)o.threads);
    if (o.cfg.progress == PW_PROGRESS_AUTO && o.quiet) o.cfg.progress = PW_PROGRESS_OFF;
    o.cfg.print_capture_totals = !o.quiet;

    pw_model *model = NULL;
    pw_engine *engine = NULL;
    run_request reqs[RUN_MAX_PROMPTS];
    memset(reqs, 0, sizeof reqs);
    rc = pw_cli_load_model("run", o.model, o.tp, &o.cfg, &model);
    if (rc) return rc;
    if (pw_tp_rank() != 0) o.quiet = true; /* rank 0 reports for the job */
    o.cfg.print_capture_totals = !o.quiet;
    pw_status s;
    bool chat = !o.raw && pw_model_has_chat_template(model);
    /* a template that cannot be rendered is an error now, not a wrong prompt */
    if (chat && (s = pw_model_check_chat_template(model)) != PW_OK) {
        rc = pw_cli_fail("run", s);
        pw_model_free(model);
        return rc;
    }
    if (!o.quiet)
        fprintf(stderr, "%s: %s\n", pw_model_get_info(model)->name,
                chat ? "prompts formatted with the model's chat template (--raw to skip)"
                     : "raw prompts");
    s = pw_engine_new(model, &o.cfg, &engine);
    if (s != PW_OK) rc = pw_cli_fail("run: compiling and capturing", s);
    pw_tp_comm_stats comm_at_start;
    pw_tp_get_comm_stats(&comm_at_start);
    if (rc == 0 && pw_tp_rank() != 0) {
        /* the other ranks make the calls rank 0 makes, as it makes them */
        if ((s = pw_engine_tp_follow(engine)) != PW_OK) rc = pw_cli_fail("run", s);
    } else {
        if (rc == 0 && (s = pw_engine_tp_lead(engine)) != PW_OK) rc = pw_cli_fail("run", s);
        if (rc == 0) rc = add_prompts(model, engine, &o, chat, reqs);
        if (rc == 0) rc = generate(model, engine, &o, chat, reqs);
    }
    if (rc == 0 && !o.quiet) print_stats(engine);
    if (rc == 0 && o.tp > 0) pw_cli_print_tp_rank(engine, &comm_at_start);
    for (int i = 0; i < o.n_prompts; i++) free(reqs[i].text);
    pw_engine_free(engine);
    pw_model_free(model);
    return rc;
}
