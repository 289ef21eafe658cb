/* piecewise chat: an interactive multi-turn chat. The conversation is one
 * engine request that grows turn by turn, so the KV cache of earlier turns
 * is reused and only the new turn is prefilled. */
#include "cli.h"
#include "cli_args.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHAT_LINE_MAX 4096
#define CHAT_DEFAULT_TOKENS 256

static void usage(FILE *f) {
    fprintf(f,
            "usage: piecewise chat MODEL.gguf [options]\n"
            "\n"
            "Chats with a model that has a chat template (e.g. SmolLM2-135M-Instruct). Type a\n"
            "message and press Enter; the answer streams back. The KV cache is kept between\n"
            "turns, so each turn only prefills what is new.\n"
            "Commands: /reset starts a new conversation, /quit (or end of input) leaves.\n"
            "\n"
            "options:\n"
            "  -n, --tokens N       most tokens per answer (default %d)\n"
            "  --system TEXT        system message (default: the template's own)\n"
            "  --mode MODE          auto|none|piecewise|full|full_decode_only (default auto)\n"
            "  --device DEV         cpu|cuda (default cpu)\n"
            "  --temp T, --top-k K, --top-p P, --seed S   sampling (default greedy)\n"
            "  --threads N          threads for matrix products (default 1)\n"
            PW_CLI_CAPTURE_HELP
            PW_CLI_GRAPH_CACHE_HELP
            PW_CLI_TP_HELP
            "  -h, --help           this help\n",
            CHAT_DEFAULT_TOKENS);
}

typedef struct chat_options {
    const char *model;
    const char *system;
    int64_t tokens;
    pw_engine_config cfg;
    pw_sampling_params sp;
    int64_t threads;
    int64_t tp; /* --tp: 0 without it */
} chat_options;

static int parse_args(int argc, char **argv, chat_options *o) {
    memset(o, 0, sizeof *o);
    pw_engine_config_init(&o->cfg);
    o->cfg.max_num_seqs = 1;
    o->cfg.max_num_batched_tokens = 64;
    o->tokens = CHAT_DEFAULT_TOKENS;
    o->threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int gen = pw_cli_generation_option(argc, argv, &i, &o->cfg, &o->sp, &o->threads);
        if (gen < 0) return 2;
        if (gen > 0) continue;
        int cap = pw_cli_graph_cache_option(argc, argv, &i, &o->cfg);
        if (cap < 0) return 2;
        if (cap > 0) continue;
        int tp = pw_cli_tp_option(argc, argv, &i, &o->tp);
        if (tp < 0) return 2;
        if (tp > 0) continue;
        if (strcmp(a, "-n") == 0 || strcmp(a, "--tokens") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 1 << 16, &o->tokens)) return 2;
        } else if (strcmp(a, "--system") == 0) {
            if (!(o->system = pw_cli_value(argc, argv, &i))) return 2;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "piecewise chat: unknown option '%s' (see --help)\n", a);
            return 2;
        } else if (!o->model) {
            o->model = a;
        } else {
            fprintf(stderr, "piecewise chat: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "piecewise chat: no model given\n\n");
        usage(stderr);
        return 2;
    }
    return 0;
}

/* Generates until the request finishes, streaming the answer. Returns
 * whether the answer ended with an end-of-turn token. */
static pw_status stream_answer(pw_model *m, pw_engine *e, int64_t id, int32_t prev, bool *closed) {
    *closed = false;
    while (pw_engine_has_work(e)) {
        const pw_step_token *toks;
        int64_t n;
        pw_status s = pw_engine_step(e, &toks, &n);
        if (s != PW_OK) return s;
        for (int64_t k = 0; k < n; k++) {
            if (toks[k].request != id) continue;
            if (pw_model_is_end_of_generation(m, toks[k].token)) {
                *closed = true;
            } else {
                fputs(pw_model_token_text(m, prev, toks[k].token), stdout);
                pw_cli_flush_stdout();
            }
            prev = toks[k].token;
        }
    }
    printf("\n");
    return PW_OK;
}

/* One user turn: the first of a conversation goes through the chat
 * template and opens a request, later ones continue it. The message and
 * the system text are plain text: only the template's markers become
 * special tokens. On failure the conversation ends (its request is
 * cancelled, *id becomes -1) but the program goes on. */
static void chat_turn(pw_model *model, pw_engine *engine, const chat_options *o, const char *line,
                      int64_t *id, bool *closed) {
    int32_t *ids = NULL;
    int64_t n = 0;
    pw_status s;
    if (*id < 0) {
        pw_chat_message msgs[2];
        int nm = 0;
        if (o->system) msgs[nm++] = (pw_chat_message){"system", o->system};
        msgs[nm++] = (pw_chat_message){"user", line};
        s = pw_model_tokenize_chat(model, msgs, nm, true, true, &ids, &n);
    } else {
        s = pw_model_tokenize_chat_next_turn(model, line, *closed, &ids, &n);
    }
    if (s == PW_OK) {
        if (*id < 0) s = pw_engine_add_request(engine, ids, n, o->tokens, &o->sp, id);
        else s = pw_engine_continue_request(engine, *id, ids, n, o->tokens);
    }
    int32_t prev = n > 0 ? ids[n - 1] : -1;
    free(ids);
    if (s == PW_OK) s = stream_answer(model, engine, *id, prev, closed);
    if (s != PW_OK) {
        /* a full context or a bad turn ends this conversation, not the program */
        fprintf(stderr, "piecewise chat: %s (%s); starting a new conversation\n", pw_last_error(),
                pw_status_name(s));
        /* the request may already be gone; either way it no longer runs */
        if (*id >= 0) (void)pw_engine_cancel_request(engine, *id);
        *id = -1;
    }
}

/* Reads one line of input into line (NUL-terminated, without its newline
 * or a trailing CR). False at the end of the input. A line that is too
 * long, or holds a NUL byte (which would cut the message short), is read
 * to its end and refused whole with a message (*skip set); the session
 * goes on. */
static bool read_turn(char *line, size_t cap, bool *skip) {
    *skip = false;
    size_t n = 0;
    bool overlong = false, nul = false;
    int c;
    while ((c = getchar()) != EOF && c != '\n') {
        if (c == '\0') nul = true;
        if (n + 1 < cap) line[n++] = (char)c;
        else overlong = true;
    }
    if (c == EOF && n == 0) return false;
    line[n] = '\0';
    if (overlong) {
        fprintf(stderr, "piecewise chat: a message is at most %zu bytes; ignored\n", cap - 1);
        *skip = true;
    } else if (nul) {
        fprintf(stderr, "piecewise chat: a message cannot hold a NUL byte; ignored\n");
        *skip = true;
    } else {
        if (n > 0 && line[n - 1] == '\r') line[--n] = '\0';
        *skip = n == 0;
    }
    return true;
}

/* Reads turns until the input ends or /quit; /reset starts a new
 * conversation. */
static void chat_loop(pw_model *model, pw_engine *engine, const chat_options *o, bool tty) {
    char line[CHAT_LINE_MAX];
    int64_t id = -1;
    bool closed = true;
    for (;;) {
        if (tty) {
            printf("> ");
            pw_cli_flush_stdout();
        }
        bool skip;
        if (!read_turn(line, sizeof line, &skip)) break;
        if (skip) continue;
        if (strcmp(line, "/quit") == 0 || strcmp(line, "/exit") == 0) break;
        if (strcmp(line, "/reset") == 0) {
            if (id >= 0) pw_engine_release_request(engine, id);
            id = -1;
            printf("(new conversation)\n");
            continue;
        }
        chat_turn(model, engine, o, line, &id, &closed);
    }
}

int pw_cmd_chat(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    chat_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    pw_set_num_threads((int)o.threads);
    bool tty = isatty(STDIN_FILENO);
    if (!tty) o.cfg.progress = PW_PROGRESS_OFF;
    pw_model *model = NULL;
    pw_engine *engine = NULL;
    rc = pw_cli_load_model("chat", o.model, o.tp, &o.cfg, &model);
    if (rc) return rc;
    /* rank 0 reads the input (mpirun hands it its standard input) */
    bool leader = pw_tp_rank() == 0;
    tty = tty && leader;
    pw_status s;
    if ((s = pw_model_check_chat_template(model)) != PW_OK) {
        rc = pw_cli_fail("chat", s);
        pw_model_free(model);
        return rc;
    }
    o.cfg.max_model_len = pw_model_get_info(model)->context;
    if (o.cfg.max_model_len > 8192) o.cfg.max_model_len = 8192;
    o.cfg.kv_cache_positions = o.cfg.max_model_len;
    s = pw_engine_new(model, &o.cfg, &engine);
    if (s != PW_OK) {
        rc = pw_cli_fail("chat: compiling and capturing", s);
    } else if (!leader) {
        /* the other ranks make the engine calls rank 0 makes */
        if ((s = pw_engine_tp_follow(engine)) != PW_OK) rc = pw_cli_fail("chat", s);
    } else if ((s = pw_engine_tp_lead(engine)) != PW_OK) {
        rc = pw_cli_fail("chat", s);
    } else {
        if (tty)
            fprintf(stderr, "chatting with %s; /reset for a new conversation, /quit to leave\n",
                    pw_model_get_info(model)->name);
        chat_loop(model, engine, &o, tty);
        if (tty) {
            pw_engine_stats st;
            pw_engine_get_stats(engine, &st);
            fprintf(stderr, "%" PRId64 " prompt tokens, %" PRId64 " generated, decode %.0f tok/s\n",
                    st.prompt_tokens, st.generated_tokens,
                    st.decode_seconds > 0 ? st.decode_step_tokens / st.decode_seconds : 0.0);
        }
    }
    pw_engine_free(engine);
    pw_model_free(model);
    return rc;
}
