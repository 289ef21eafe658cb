/* piecewise perplexity MODEL --file TEXT: perplexity and KL divergence
 * with llama.cpp's llama-perplexity method (tools/perplexity/perplexity.cpp
 * in its tree), so the figures compare with llama.cpp's:
 *
 *   - the text is tokenized with the model's special tokens (add_special);
 *     it needs at least 2 * ctx tokens; chunk k is tokens [k ctx, (k+1) ctx)
 *     and there are floor(n / ctx) of them (--chunks caps it);
 *   - each chunk runs on its own (empty cache); its first token becomes BOS
 *     where the model adds BOS;
 *   - the logits of positions first = ctx/2 .. ctx-2 score the next token:
 *     nll = log sum exp(logits) - logits[next], ctx - 1 - first per chunk;
 *   - PPL = exp(mean nll) +/- PPL * sqrt((mean nll^2 - mean nll^2) / (count-1)).
 *
 * --kl-divergence-base OUT saves each scored row's log-probabilities in
 * llama.cpp's own "_logits_" file (docs/models.md, "Perplexity"), so either
 * engine can read the other's; --kl-divergence BASE reads one and reports
 * the mean KL divergence of this run from it, with llama.cpp's statistics
 * (mean +/- standard error, top-token agreement). */
#include "cli.h"
#include "cli_args.h"

#include "piecewise/extend.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PPL_DEFAULT_CTX 512
#define PPL_MAX_CTX 32768
#define PPL_MAX_TEXT_BYTES ((size_t)256 << 20)
#define BASE_MAGIC "_logits_"
#define BASE_MAX_VOCAB (1 << 24)
#define BASE_MAX_CHUNKS (1 << 24)

static void usage(FILE *f) {
    fprintf(f,
            "usage: piecewise perplexity MODEL.gguf --file TEXT [options]\n"
            "\n"
            "Perplexity of MODEL on a text, with llama.cpp's llama-perplexity method:\n"
            "chunks of --ctx tokens, each run on its own, the second half of each chunk\n"
            "scored. Prints PPL +/- its standard error; progress goes to stderr.\n"
            "\n"
            "options:\n"
            "  -f, --file TEXT            the text (a regular file, at most 256 MiB)\n"
            "  -c, --ctx N                tokens per chunk (default %d)\n"
            "  --chunks N                 score at most N chunks (default: all)\n"
            "  --threads N                threads for matrix products (default 1)\n"
            "  --mode MODE                none|piecewise|full|auto (default none)\n"
            "  --kl-divergence-base OUT   also save this run's log-probabilities to OUT (a new\n"
            "                             file; llama.cpp's --kl-divergence-base format)\n"
            "  --kl-divergence BASE       compare with BASE (written by either engine): mean\n"
            "                             KL divergence and top-token agreement; --file is then\n"
            "                             optional (BASE holds the tokens; given, it must match)\n"
            "  -h, --help                 this help\n",
            PPL_DEFAULT_CTX);
}

typedef struct ppl_options {
    const char *model, *file, *save_base, *base;
    int64_t ctx, chunks, threads;
    bool ctx_given;
    pw_graph_mode mode;
} ppl_options;

static int parse_args(int argc, char **argv, ppl_options *o) {
    memset(o, 0, sizeof *o);
    o->ctx = PPL_DEFAULT_CTX;
    o->chunks = -1;
    o->threads = 1;
    o->mode = PW_GRAPH_NONE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) {
            if (!(o->file = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "-c") == 0 || strcmp(a, "--ctx") == 0) {
            if (pw_cli_int(argc, argv, &i, 16, PPL_MAX_CTX, &o->ctx)) return 2;
            o->ctx_given = true;
        } else if (strcmp(a, "--chunks") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, BASE_MAX_CHUNKS, &o->chunks)) return 2;
        } else if (strcmp(a, "--threads") == 0) {
            if (pw_cli_int(argc, argv, &i, 1, 1024, &o->threads)) return 2;
        } else if (strcmp(a, "--mode") == 0) {
            const char *v = pw_cli_value(argc, argv, &i);
            if (!v || pw_cli_parse_mode(v, &o->mode)) return 2;
        } else if (strcmp(a, "--kl-divergence-base") == 0) {
            if (!(o->save_base = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "--kl-divergence") == 0) {
            if (!(o->base = pw_cli_value(argc, argv, &i))) return 2;
        } else if (a[0] == '-') {
            fprintf(stderr, "piecewise perplexity: unknown option '%s'\n", a);
            return 2;
        } else if (!o->model) {
            o->model = a;
        } else {
            fprintf(stderr, "piecewise perplexity: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "piecewise perplexity: no model given\n");
        return 2;
    }
    if (!o->file && !o->base) {
        fprintf(stderr, "piecewise perplexity: no text given (--file TEXT)\n");
        return 2;
    }
    if (o->save_base && o->base) {
        fprintf(stderr, "piecewise perplexity: --kl-divergence-base and --kl-divergence are "
                        "separate runs\n");
        return 2;
    }
    return 0;
}

/* ---- llama.cpp's log-probability rows --------------------------------------------- */

/* uint16 entries per row: two floats (scale, min log-prob), then n_vocab
 * quantized log-probabilities, padded to an even count. */
static int64_t row_entries(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }

static int nearest_int(float fval) { /* llama.cpp's, for identical rounding */
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* The negative log-likelihood of tok under logits, and (row non-NULL) the
 * row quantized as llama.cpp stores it. */
static double score_row(const float *logits, int64_t n_vocab, int32_t tok, uint16_t *row) {
    float max_logit = logits[0], min_logit = logits[0];
    for (int64_t i = 1; i < n_vocab; i++) {
        if (logits[i] > max_logit) max_logit = logits[i];
        if (logits[i] < min_logit) min_logit = logits[i];
    }
    double sum_exp = 0.0;
    for (int64_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    if (row) {
        if (min_logit < max_logit - 16) min_logit = max_logit - 16;
        const float log_sum_exp = (float)log(sum_exp);
        const float min_log_prob = min_logit - max_logit - log_sum_exp;
        const float scale = (max_logit - min_logit) / 65535.f;
        memcpy(row, &scale, sizeof scale);
        memcpy(row + 2, &min_log_prob, sizeof min_log_prob);
        uint16_t *q = row + 4;
        memset(q, 0, (size_t)(row_entries(n_vocab) - 4) * sizeof *q);
        if (scale != 0.0f) {
            const float inv = 1 / scale;
            for (int64_t i = 0; i < n_vocab; i++)
                q[i] = logits[i] > min_logit ? (uint16_t)nearest_int(inv * (logits[i] - min_logit)) : 0;
        }
    }
    return (double)max_logit + log(sum_exp) - (double)logits[tok];
}

/* llama.cpp's kl_divergence_result and its per-row update. */
typedef struct kld_sums {
    double nll, nll2, nll_base, nll_base2, nll_nll_base, kld, kld2;
    int64_t same_top, count;
} kld_sums;

static void kld_row(const float *logits, int64_t n_vocab, int32_t tok, const uint16_t *base,
                    kld_sums *k) {
    float max_logit = logits[0];
    int64_t imax = 0;
    for (int64_t i = 1; i < n_vocab; i++)
        if (logits[i] > max_logit) {
            max_logit = logits[i];
            imax = i;
        }
    double sum_exp = 0.0;
    for (int64_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    float scale, min_log_prob;
    memcpy(&scale, base, sizeof scale);
    memcpy(&min_log_prob, base + 2, sizeof min_log_prob);
    const uint16_t *q = base + 4;
    const float nll = max_logit + log_sum_exp - logits[tok];
    const float nll_base = -(scale * q[tok] + min_log_prob);
    k->nll += nll;
    k->nll2 += (double)nll * nll;
    k->nll_base += nll_base;
    k->nll_base2 += (double)nll_base * nll_base;
    k->nll_nll_base += (double)nll * nll_base;
    const float log_norm = max_logit + log_sum_exp;
    double sum = 0;
    int64_t imax_base = -1;
    float best_base = 0;
    for (int64_t i = 0; i < n_vocab; i++) {
        const float p_log_base = scale * q[i] + min_log_prob;
        if (i == 0 || p_log_base > best_base) {
            best_base = p_log_base;
            imax_base = i;
        }
        if (p_log_base > -16.f) sum += expf(p_log_base) * (p_log_base - logits[i] + log_norm);
    }
    k->kld += sum;
    k->kld2 += sum * sum;
    k->count++;
    k->same_top += imax == imax_base;
}

/* Mean and standard error, as llama.cpp computes them. */
static void mean_and_error(double sum, double sum2, int64_t count, double *mean, double *err) {
    *mean = count ? sum / (double)count : 0;
    double var = count ? sum2 / (double)count - *mean * *mean : 0;
    *err = var > 0 && count > 10 ? sqrt(var / (double)(count - 1)) : 0;
}

/* ---- the base file ----------------------------------------------------------------- */

/* What --kl-divergence read: the header, the tokens, and an open
 * descriptor positioned at the first chunk's rows. */
typedef struct base_file {
    int fd;
    int64_t n_ctx, n_vocab, n_chunk;
    int32_t *tokens;
} base_file;

static pw_status read_i32(int fd, const char *path, int32_t *v) {
    return pw_file_read_exact(fd, v, sizeof *v, "kl-divergence base", path);
}

static pw_status open_base(const char *path, int64_t vocab, base_file *b) {
    memset(b, 0, sizeof *b);
    b->fd = -1;
    uint64_t size;
    pw_status st = pw_file_open_regular(path, "kl-divergence base", PW_FILE_NO_LINKS, UINT64_MAX,
                                        &b->fd, &size);
    if (st != PW_OK) return st;
    char magic[8];
    int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
    pw_status s = size < 20 ? pw_error(PW_ERR_FORMAT, "kl-divergence base: '%s' (%" PRIu64
                                       " bytes) is too short for a header", path, size)
                            : pw_file_read_exact(b->fd, magic, 8, "kl-divergence base", path);
    if (s == PW_OK && memcmp(magic, BASE_MAGIC, 8) != 0)
        s = pw_error(PW_ERR_FORMAT, "kl-divergence base: '%s' is not a log-probability file "
                     "(no \"_logits_\" header)", path);
    if (s == PW_OK) s = read_i32(b->fd, path, &n_ctx);
    if (s == PW_OK) s = read_i32(b->fd, path, &n_vocab);
    if (s == PW_OK) s = read_i32(b->fd, path, &n_chunk);
    if (s == PW_OK && (n_ctx < 16 || n_ctx > PPL_MAX_CTX || n_vocab < 1 ||
                       n_vocab > BASE_MAX_VOCAB || n_chunk < 1 || n_chunk > BASE_MAX_CHUNKS))
        s = pw_error(PW_ERR_FORMAT, "kl-divergence base: '%s' has ctx %" PRId32 ", vocabulary %"
                     PRId32 ", %" PRId32 " chunks (bounds: ctx 16..%d, vocabulary 1..%d, "
                     "chunks 1..%d)", path, n_ctx, n_vocab, n_chunk, PPL_MAX_CTX,
                     BASE_MAX_VOCAB, BASE_MAX_CHUNKS);
    if (s == PW_OK && n_vocab != vocab)
        s = pw_error(PW_ERR_INVALID_ARG, "kl-divergence base: '%s' was computed with a vocabulary "
                     "of %" PRId32 " tokens, this model has %" PRId64 " (another model family?)",
                     path, n_vocab, vocab);
    if (s == PW_OK) {
        /* sizes in uint64: every factor is bounded above */
        uint64_t rows = (uint64_t)(n_ctx - 1 - n_ctx / 2) * (uint64_t)n_chunk;
        uint64_t want = 20 + (uint64_t)n_ctx * (uint64_t)n_chunk * 4 +
                        rows * (uint64_t)row_entries(n_vocab) * 2;
        if (size != want)
            s = pw_error(PW_ERR_FORMAT, "kl-divergence base: '%s' is %" PRIu64 " bytes, but its "
                         "header (ctx %" PRId32 ", vocabulary %" PRId32 ", %" PRId32 " chunks) "
                         "needs %" PRIu64, path, size, n_ctx, n_vocab, n_chunk, want);
    }
    if (s == PW_OK) {
        b->n_ctx = n_ctx;
        b->n_vocab = n_vocab;
        b->n_chunk = n_chunk;
        b->tokens = malloc((size_t)n_ctx * (size_t)n_chunk * sizeof *b->tokens);
        if (!b->tokens) s = pw_error(PW_ERR_OOM, "kl-divergence base: out of memory");
    }
    if (s == PW_OK)
        s = pw_file_read_exact(b->fd, b->tokens, (size_t)n_ctx * (size_t)n_chunk * sizeof *b->tokens,
                               "kl-divergence base", path);
    for (int64_t i = 0; s == PW_OK && i < b->n_ctx * b->n_chunk; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= vocab)
            s = pw_error(PW_ERR_FORMAT, "kl-divergence base: '%s': token %" PRId64 " is %" PRId32
                         ", outside the vocabulary", path, i, b->tokens[i]);
    if (s != PW_OK) {
        close(b->fd);
        free(b->tokens);
        memset(b, 0, sizeof *b);
        b->fd = -1;
    }
    return s;
}

/* ---- the run ----------------------------------------------------------------------- */

typedef struct ppl_run {
    pw_model *model;
    pw_engine *engine;
    int64_t vocab, ctx, first, n_chunk;
    int32_t *tokens; /* n_chunk * ctx */
    bool add_bos;
    int32_t bos;
    float *logits;   /* (ctx - 1 - first) rows */
    uint16_t *rows;  /* the same rows quantized (saving or comparing) */
} ppl_run;

/* The logits of positions first .. ctx-2 of chunk c. */
static pw_status run_chunk(ppl_run *r, int64_t c) {
    int32_t *chunk = r->tokens + c * r->ctx;
    int32_t saved = chunk[0];
    if (r->add_bos) chunk[0] = r->bos; /* llama.cpp: each chunk starts with BOS */
    int64_t id;
    pw_status s = pw_engine_add_scoring_request(r->engine, chunk, r->ctx - 1, r->first, r->logits,
                                                &id);
    chunk[0] = saved;
    while (s == PW_OK && pw_engine_has_work(r->engine)) {
        const pw_step_token *t;
        int64_t n;
        s = pw_engine_step(r->engine, &t, &n);
    }
    if (s == PW_OK) s = pw_engine_release_request(r->engine, id);
    return s;
}

static int fail_free(const char *what, pw_status s) { return pw_cli_fail(what, s); }

static pw_status read_text_tokens(const ppl_options *o, const pw_model *m, int32_t **tokens,
                                  int64_t *n) {
    char *text = NULL;
    size_t len = 0;
    pw_status st = pw_file_read_all(o->file, "perplexity text", PW_FILE_NO_LINKS,
                                    PPL_MAX_TEXT_BYTES, &text, &len);
    if (st != PW_OK) return st;
    if (strlen(text) != len) {
        pw_host_free(text);
        return pw_error(PW_ERR_INVALID_ARG, "perplexity text: '%s' holds a NUL byte (not a text "
                        "file?)", o->file);
    }
    pw_status s = pw_model_tokenize(m, text, true, tokens, n);
    pw_host_free(text);
    return s;
}

int pw_cmd_perplexity(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    ppl_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    pw_set_num_threads((int)o.threads);

    ppl_run r;
    memset(&r, 0, sizeof r);
    base_file base = {.fd = -1};
    int out_fd = -1;
    int32_t *text_tokens = NULL;
    int64_t n_text = 0;
    pw_status s = pw_model_load(o.model, &r.model);
    if (s != PW_OK) return fail_free("perplexity", s);
    r.vocab = pw_model_get_info(r.model)->vocab;
    int32_t *probe = NULL;
    int64_t n_probe = 0;
    /* the model's add_special: BOS (and EOS, which llama.cpp refuses here) */
    s = pw_model_tokenize(r.model, "", true, &probe, &n_probe);
    if (s == PW_OK) {
        r.add_bos = n_probe > 0 && probe[0] == pw_model_bos(r.model);
        r.bos = pw_model_bos(r.model);
        if (n_probe > (r.add_bos ? 1 : 0))
            s = pw_error(PW_ERR_UNSUPPORTED, "perplexity: the model adds EOS to every text "
                         "(tokenizer.ggml.add_eos_token), which llama.cpp's method does not allow");
    }
    free(probe);
    if (s == PW_OK && o.file) s = read_text_tokens(&o, r.model, &text_tokens, &n_text);
    if (s == PW_OK && o.base) s = open_base(o.base, r.vocab, &base);
    if (s == PW_OK && o.base) {
        if (o.ctx_given && o.ctx != base.n_ctx)
            s = pw_error(PW_ERR_INVALID_ARG, "perplexity: '%s' was computed with --ctx %" PRId64
                         ", not %" PRId64, o.base, base.n_ctx, o.ctx);
        o.ctx = base.n_ctx;
        if (s == PW_OK && text_tokens &&
            (n_text < base.n_ctx * base.n_chunk ||
             memcmp(text_tokens, base.tokens, (size_t)(base.n_ctx * base.n_chunk) * 4) != 0))
            s = pw_error(PW_ERR_INVALID_ARG, "perplexity: '%s' was computed on another text (or "
                         "another tokenizer) than '%s'", o.base, o.file);
    }
    if (s != PW_OK) {
        rc = fail_free("perplexity", s);
        goto done;
    }
    r.ctx = o.ctx;
    r.first = r.ctx / 2;
    if (o.base) {
        r.tokens = base.tokens;
        r.n_chunk = base.n_chunk;
    } else {
        if (n_text < 2 * r.ctx) {
            fprintf(stderr, "piecewise: perplexity: '%s' tokenizes to %" PRId64 " tokens; --ctx %"
                    PRId64 " needs at least %" PRId64 "\n", o.file, n_text, r.ctx, 2 * r.ctx);
            rc = 1;
            goto done;
        }
        r.tokens = text_tokens;
        r.n_chunk = n_text / r.ctx;
    }
    if (o.chunks > 0 && o.chunks < r.n_chunk) r.n_chunk = o.chunks;

    int64_t n_rows = r.ctx - 1 - r.first;
    r.logits = malloc((size_t)n_rows * (size_t)r.vocab * sizeof *r.logits);
    if (o.save_base || o.base) r.rows = malloc((size_t)n_rows * (size_t)row_entries(r.vocab) * 2);
    if (!r.logits || ((o.save_base || o.base) && !r.rows)) {
        rc = fail_free("perplexity", pw_error(PW_ERR_OOM, "perplexity: out of memory for %" PRId64
                                              " rows of logits", n_rows));
        goto done;
    }
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = o.mode;
    cfg.max_num_seqs = 1;
    cfg.max_model_len = (r.ctx + 15) / 16 * 16;
    cfg.kv_cache_positions = cfg.max_model_len;
    cfg.max_num_batched_tokens = r.ctx < 512 ? r.ctx : 512;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    s = pw_engine_new(r.model, &cfg, &r.engine);
    if (s == PW_OK && o.save_base) {
        s = pw_file_create_new(o.save_base, "kl-divergence base", &out_fd);
        int32_t hdr[3] = {(int32_t)r.ctx, (int32_t)r.vocab, (int32_t)r.n_chunk};
        if (s == PW_OK)
            s = pw_file_write_all_sync(out_fd, BASE_MAGIC, 8, "kl-divergence base", o.save_base);
        if (s == PW_OK)
            s = pw_file_write_all_sync(out_fd, hdr, sizeof hdr, "kl-divergence base", o.save_base);
        if (s == PW_OK)
            s = pw_file_write_all_sync(out_fd, r.tokens, (size_t)(r.n_chunk * r.ctx) * 4,
                                       "kl-divergence base", o.save_base);
    }
    if (s != PW_OK) {
        rc = fail_free("perplexity", s);
        goto done;
    }
    fprintf(stderr, "perplexity: %" PRId64 " chunks of %" PRId64 " tokens, %" PRId64
            " scored per chunk%s\n", r.n_chunk, r.ctx, n_rows,
            r.add_bos ? " (each chunk starts with BOS)" : "");

    double nll = 0, nll2 = 0;
    int64_t count = 0;
    kld_sums k = {0};
    size_t row_bytes = (size_t)row_entries(r.vocab) * 2;
    for (int64_t c = 0; c < r.n_chunk && s == PW_OK; c++) {
        s = run_chunk(&r, c);
        if (s == PW_OK && o.base)
            s = pw_file_read_exact(base.fd, r.rows, (size_t)n_rows * row_bytes,
                                   "kl-divergence base", o.base);
        for (int64_t i = 0; s == PW_OK && i < n_rows; i++) {
            const float *row = r.logits + i * r.vocab;
            int32_t next = r.tokens[c * r.ctx + r.first + i + 1];
            if (o.base) {
                kld_row(row, r.vocab, next, r.rows + i * (row_bytes / 2), &k);
                continue;
            }
            double v = score_row(row, r.vocab, next, o.save_base ? r.rows + i * (row_bytes / 2) : NULL);
            nll += v;
            nll2 += v * v;
            count++;
        }
        if (s == PW_OK && o.save_base)
            s = pw_file_write_all_sync(out_fd, r.rows, (size_t)n_rows * row_bytes,
                                       "kl-divergence base", o.save_base);
        if (s == PW_OK) {
            double shown = o.base ? exp(k.nll / (double)k.count) : exp(nll / (double)count);
            fprintf(stderr, "[%" PRId64 "]%.4f,", c + 1, shown);
            fflush(stderr);
        }
    }
    fprintf(stderr, "\n");
    if (s != PW_OK) {
        rc = fail_free("perplexity", s);
        goto done;
    }
    if (o.base) {
        double m, e, mb, eb;
        mean_and_error(k.nll, k.nll2, k.count, &m, &e);
        mean_and_error(k.nll_base, k.nll_base2, k.count, &mb, &eb);
        printf("tokens scored                 : %" PRId64 " (%" PRId64 " chunks of %" PRId64 ")\n",
               k.count, r.n_chunk, r.ctx);
        printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", exp(m), exp(m) * e);
        printf("Mean PPL(base)                : %10.6f ± %10.6f\n", exp(mb), exp(mb) * eb);
        mean_and_error(k.kld, k.kld2, k.count, &m, &e);
        printf("Mean    KLD                   : %10.6f ± %10.6f\n", m, e);
        double p = (double)k.same_top / (double)k.count;
        double pe = k.count > 1 ? sqrt(p * (1 - p) / (double)(k.count - 1)) : 0;
        printf("Same top p                    : %6.3f ± %5.3f %%\n", 100 * p, 100 * pe);
    } else {
        double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
        double ppl = exp(mean);
        double err = var > 0 && count > 1 ? sqrt(var / (double)(count - 1)) * ppl : 0;
        printf("tokens scored: %" PRId64 " (%" PRId64 " chunks of %" PRId64 ")\n", count,
               r.n_chunk, r.ctx);
        printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
    }
    pw_cli_flush_stdout();
done:
    if (out_fd >= 0) {
        close(out_fd);
        if (rc != 0) unlink(o.save_base); /* our own partial file, created O_EXCL above */
    }
    if (base.fd >= 0) close(base.fd);
    free(base.tokens);
    free(text_tokens);
    free(r.logits);
    free(r.rows);
    pw_engine_free(r.engine);
    pw_model_free(r.model);
    return rc;
}
