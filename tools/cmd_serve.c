/* piecewise serve: an OpenAI-compatible HTTP server over one engine with
 * continuous batching. Options, start-up (compile, capture, listen) and
 * the orderly shutdown on SIGINT/SIGTERM; the server itself lives in
 * serve_*.c (see serve.h). */
#include "cli.h"
#include "cli_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: piecewise serve MODEL.gguf [options]\n"
            "\n"
            "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions,\n"
            "POST /v1/completions (both with \"stream\": true for server-sent events),\n"
            "GET /v1/models, GET /health and GET /metrics (Prometheus). One engine thread\n"
            "batches every request in flight (continuous batching through the dispatcher);\n"
            "graphs are captured before the server starts listening. SIGINT or SIGTERM stops\n"
            "accepting, lets the requests in flight finish, and exits 0.\n"
            "\n"
            "options:\n"
            "  --host ADDR              numeric address to bind (default 127.0.0.1; 0.0.0.0 for\n"
            "                           every interface)\n"
            "  --port N                 TCP port (default 8080; 0 picks a free one, printed)\n"
            "  --max-seqs N             requests the engine runs at once (default 16)\n"
            "  --max-queue N            requests that may wait for a slot beyond those;\n"
            "                           more get 429 (default 64)\n"
            "  --threads N              threads for matrix products (default 1)\n"
            "  --api-key KEY            require 'Authorization: Bearer KEY' on /v1/*\n"
            "  --mode MODE              auto|none|piecewise|full|full_decode_only (default auto)\n"
            "  --device DEV             cpu|cuda (default cpu)\n"
            "  --timeout S              close a connection idle for S seconds, or that reads\n"
            "                           none of its answer for S seconds (default 60)\n"
            "  --header-timeout S       a request head must arrive within S seconds of its\n"
            "                           first byte, however it trickles in (default 10)\n"
            "  --body-timeout S         a request body must arrive within S seconds of its\n"
            "                           head; later gets 408 (default 30)\n"
            "  --max-conns N            connections open at once (default 1024)\n"
            "  --max-conns-per-client N connections per client address that have not sent a\n"
            "                           whole request yet, idle ones included (default 64);\n"
            "                           at either limit the oldest such connection (one that\n"
            "                           has had a second at least) is closed to admit a new one\n"
            "  --ctx N                  context per request (default: the model's, at most 2048)\n"
            "  --max-batched-tokens N   tokens per step, bounds prefill chunks (default 128)\n"
            "  --kv-positions N         KV cache positions shared by all requests, raised to\n"
            "                           --ctx if smaller; resident as they are first written\n"
            "                           (default 16384)\n"
            "  --max-body BYTES         largest request body; larger gets 413 (default 1048576)\n"
            "  --model-name NAME        the id /v1/models reports (default: the model's name)\n"
            "  --verify-every N         re-run one step in N eagerly and compare the logits bit\n"
            "                           for bit (0 = off, the default)\n"
            "  --no-prefix-cache        compute every prompt in full instead of sharing the KV\n"
            "                           blocks of prefixes seen before (the answers are the\n"
            "                           same either way)\n"
            PW_CLI_CAPTURE_HELP
            PW_CLI_GRAPH_CACHE_HELP
            PW_CLI_TP_HELP
            "  -h, --help               this help\n");
}

#ifndef PW_HAVE_SERVE

int pw_cmd_serve(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) usage(stdout);
    fprintf(stderr, "piecewise serve: this build has no HTTP server: install libcjson-dev "
                    "(scripts/install-deps.sh), then re-run cmake and rebuild\n");
    return 1;
}

#else
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

typedef struct serve_options {
    const char *model;
    serve_http_options http;
    serve_engine_options eng;
    pw_engine_config cfg;
    int64_t threads;
    int64_t ctx;
    int64_t tp; /* --tp: 0 without it */
} serve_options;

static int parse_args(int argc, char **argv, serve_options *o) {
    memset(o, 0, sizeof *o);
    pw_engine_config_init(&o->cfg);
    o->http.host = "127.0.0.1";
    o->http.port = 8080;
    o->http.timeout_s = 60;
    o->http.header_timeout_s = 10;
    o->http.body_timeout_s = 30;
    o->http.max_conns = 1024;
    o->http.max_conns_per_client = 64;
    o->http.max_body = 1 << 20;
    o->cfg.max_num_seqs = 16;
    o->eng.max_queue = 64;
    o->threads = 1;
    bool batched_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        int cap = pw_cli_graph_cache_option(argc, argv, &i, &o->cfg);
        if (cap < 0) return 2;
        if (cap > 0) continue;
        int tp = pw_cli_tp_option(argc, argv, &i, &o->tp);
        if (tp < 0) return 2;
        if (tp > 0) continue;
        if (strcmp(a, "--host") == 0) {
            if (!(o->http.host = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "--port") == 0) {
            if (pw_cli_int(argc, argv, &i, 0, 65535, &n)) return 2;
            o->http.port = (int)n;
        } else if (strcmp(a, "--max-seqs") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 1024, &o->cfg.max_num_seqs)) return 2;
        } else if (strcmp(a, "--max-queue") == 0) {
            if (pw_cli_int(argc, argv, &i, 0, 1 << 20, &o->eng.max_queue)) return 2;
        } else if (strcmp(a, "--threads") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 256, &o->threads)) return 2;
        } else if (strcmp(a, "--api-key") == 0) {
            if (!(o->http.api_key = pw_cli_value(argc, argv, &i))) return 2;
            if (!o->http.api_key[0]) {
                fprintf(stderr, "piecewise serve: --api-key: the key is empty\n");
                return 2;
            }
        } else if (strcmp(a, "--mode") == 0) {
            if (!(v = pw_cli_value(argc, argv, &i)) || pw_cli_parse_mode(v, &o->cfg.mode))
                return 2;
        } else if (strcmp(a, "--device") == 0) {
            if (!(v = pw_cli_value(argc, argv, &i))) return 2;
            if (pw_device_parse(v, &o->cfg.device) != PW_OK) {
                fprintf(stderr, "piecewise serve: --device: %s\n", pw_last_error());
                return 2;
            }
        } else if (strcmp(a, "--timeout") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 86400, &n)) return 2;
            o->http.timeout_s = (unsigned)n;
        } else if (strcmp(a, "--header-timeout") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 86400, &n)) return 2;
            o->http.header_timeout_s = (unsigned)n;
        } else if (strcmp(a, "--body-timeout") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 86400, &n)) return 2;
            o->http.body_timeout_s = (unsigned)n;
        } else if (strcmp(a, "--max-conns") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 65536, &n)) return 2;
            o->http.max_conns = (unsigned)n;
        } else if (strcmp(a, "--max-conns-per-client") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 65536, &n)) return 2;
            o->http.max_conns_per_client = (unsigned)n;
        } else if (strcmp(a, "--ctx") == 0) {
            if (pw_cli_int(argc, argv, &i, 2, 1 << 20, &o->ctx)) return 2;
        } else if (strcmp(a, "--max-batched-tokens") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 1 << 16, &o->cfg.max_num_batched_tokens)) return 2;
            batched_given = true;
        } else if (strcmp(a, "--kv-positions") == 0) {
            if (pw_cli_int(argc, argv, &i, 16, (int64_t)1 << 24, &o->cfg.kv_cache_positions))
                return 2;
        } else if (strcmp(a, "--max-body") == 0) {
            if (pw_cli_int(argc, argv, &i, 64, (int64_t)1 << 30, &n)) return 2;
            o->http.max_body = (size_t)n;
        } else if (strcmp(a, "--model-name") == 0) {
            if (!(o->http.model_name = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "--no-prefix-cache") == 0) {
            o->cfg.prefix_cache = false;
        } else if (strcmp(a, "--verify-every") == 0) {
            if (pw_cli_int(argc, argv, &i, 0, INT32_MAX, &o->eng.verify_every)) return 2;
        } else if ((n = pw_cli_capture_option(argc, argv, &i, &o->cfg)) != 0) {
            if (n < 0) return 2;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "piecewise serve: unknown option '%s' (see --help)\n", a);
            return 2;
        } else if (!o->model) {
            o->model = a;
        } else {
            fprintf(stderr, "piecewise serve: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "piecewise serve: no model given\n\n");
        usage(stderr);
        return 2;
    }
    if (o->cfg.max_num_batched_tokens < o->cfg.max_num_seqs) {
        if (batched_given) {
            fprintf(stderr,
                    "piecewise serve: --max-batched-tokens (%lld) must be at least --max-seqs "
                    "(%lld)\n",
                    (long long)o->cfg.max_num_batched_tokens, (long long)o->cfg.max_num_seqs);
            return 2;
        }
        o->cfg.max_num_batched_tokens = o->cfg.max_num_seqs;
    }
    return 0;
}

/* Waits for SIGINT/SIGTERM (blocked in every thread, taken here). */
static int wait_signal(const sigset_t *set, double timeout_s) {
    if (timeout_s < 0) {
        int sig = 0;
        return sigwait(set, &sig) == 0 ? sig : -1;
    }
    struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

int pw_cmd_serve(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    serve_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    /* every thread started from here on inherits the blocked set, so the
     * signals reach only sigwait below */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    pw_set_num_threads((int)o.threads);

    pw_model *model = NULL;
    pw_engine *engine = NULL;
    serve_http *http = NULL;
    rc = pw_cli_load_model("serve", o.model, o.tp, &o.cfg, &model);
    if (rc) return rc;
    pw_status s;
    /* a template that cannot be rendered fails here, before compiling and
     * listening, not on every chat request */
    if (pw_model_has_chat_template(model) && (s = pw_model_check_chat_template(model)) != PW_OK) {
        rc = pw_cli_fail("serve", s);
        goto done;
    }
    const pw_model_info *info = pw_model_get_info(model);
    int64_t ctx = o.ctx ? o.ctx : (info->context < 2048 ? info->context : 2048);
    o.cfg.max_model_len = ctx;
    if (o.cfg.kv_cache_positions < ctx) o.cfg.kv_cache_positions = ctx;
    s = pw_engine_new(model, &o.cfg, &engine);
    if (s != PW_OK) {
        rc = pw_cli_fail("serve: compiling and capturing", s);
        goto done;
    }
    if (o.eng.verify_every > 0) s = pw_engine_set_verify_every(engine, o.eng.verify_every);
    if (s != PW_OK) {
        rc = pw_cli_fail("serve: --verify-every", s);
        goto done;
    }
    if (pw_tp_rank() != 0) {
        /* rank 0 serves HTTP; this rank makes the engine calls it makes,
         * until it stops (a signal here waits for rank 0's end) */
        fprintf(stderr, "piecewise serve: tensor parallel rank %d of %d follows rank 0\n",
                pw_tp_rank(), pw_tp_size());
        if ((s = pw_engine_tp_follow(engine)) != PW_OK) rc = pw_cli_fail("serve", s);
        goto done;
    }
    if ((s = pw_engine_tp_lead(engine)) != PW_OK) {
        rc = pw_cli_fail("serve", s);
        goto done;
    }
    o.eng.max_seqs = o.cfg.max_num_seqs;
    serve_metrics_init();
    s = serve_engine_start(model, engine, &o.eng);
    if (s != PW_OK) {
        rc = pw_cli_fail("serve", s);
        goto done;
    }
    o.http.max_model_len = ctx;
    if (!o.http.model_name) o.http.model_name = info->name;
    int port = 0;
    s = serve_http_start(model, &o.http, &http, &port);
    if (s != PW_OK) {
        rc = pw_cli_fail("serve", s);
        serve_engine_stop();
        goto done;
    }
    fprintf(stderr,
            "piecewise serve: %s on http://%s:%d (max %lld requests at once, context %lld)\n",
            o.http.model_name, o.http.host, port, (long long)o.cfg.max_num_seqs, (long long)ctx);
    if (pw_tp_size() > 1)
        fprintf(stderr,
                "piecewise serve: tensor parallel over %d ranks; SIGINT or SIGTERM to this "
                "rank 0 (pid %ld) stops the job in order (a signal to mpirun ends it at once)\n",
                pw_tp_size(), (long)getpid());
    fflush(stderr);

    int sig = wait_signal(&sigs, -1);
    fprintf(stderr, "piecewise serve: %s: finishing %d request(s) in flight\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", serve_http_in_flight(http));
    serve_http_quiesce(http);
    while (serve_http_in_flight(http) > 0) {
        /* a second signal stops at once */
        if (wait_signal(&sigs, 0.05) > 0) {
            fprintf(stderr, "piecewise serve: second signal: stopping now\n");
            break;
        }
    }
    serve_http_stop(http);
    serve_engine_stop();
    fprintf(stderr, "piecewise serve: stopped\n");
done:
    pw_engine_free(engine);
    pw_model_free(model);
    return rc;
}
#endif
