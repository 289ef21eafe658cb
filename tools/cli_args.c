#include "cli_args.h"
#include "cli.h"

#include "piecewise/extend.h"

#include <errno.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pw_cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "piecewise: option %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

static int parse_int(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end != '\0') {
        fprintf(stderr, "piecewise: %s: '%s' is not an integer\n", opt, v);
        return 1;
    }
    if (x < lo || x > hi) {
        fprintf(stderr, "piecewise: %s: %lld is outside [%lld, %lld]\n", opt, x, (long long)lo,
                (long long)hi);
        return 1;
    }
    *out = x;
    return 0;
}

int pw_cli_int(int argc, char **argv, int *i, int64_t lo, int64_t hi, int64_t *out) {
    const char *opt = argv[*i];
    const char *v = pw_cli_value(argc, argv, i);
    return v ? parse_int(opt, v, lo, hi, out) : 1;
}

int pw_cli_double(int argc, char **argv, int *i, double lo, double hi, double *out) {
    const char *opt = argv[*i];
    const char *v = pw_cli_value(argc, argv, i);
    if (!v) return 1;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end != '\0' || x != x) {
        fprintf(stderr, "piecewise: %s: '%s' is not a number\n", opt, v);
        return 1;
    }
    if (x < lo || x > hi) {
        fprintf(stderr, "piecewise: %s: %g is outside [%g, %g]\n", opt, x, lo, hi);
        return 1;
    }
    *out = x;
    return 0;
}

int pw_cli_int_list(const char *text, int64_t *out, int cap, const char *option) {
    int n = 0;
    const char *p = text;
    while (*p) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item) {
            fprintf(stderr, "piecewise: %s: bad list '%s' (expected e.g. 1,4,16)\n", option, text);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (n == cap) {
            fprintf(stderr, "piecewise: %s: more than %d values\n", option, cap);
            return -1;
        }
        if (parse_int(option, item, 1, 1 << 20, &out[n])) return -1;
        n++;
        p += len;
        if (*p == ',') p++;
    }
    if (n == 0) {
        fprintf(stderr, "piecewise: %s: empty list\n", option);
        return -1;
    }
    return n;
}

int pw_cli_parse_mode(const char *text, pw_graph_mode *out) {
    if (strcmp(text, "auto") == 0) {
        *out = PW_GRAPH_MODE_DEFAULT;
        return 0;
    }
    if (pw_graph_mode_parse(text, out) == PW_OK) return 0;
    fprintf(stderr,
            "piecewise: --mode: unknown mode '%s' (expected auto, none, piecewise, full, "
            "full_decode_only or full_and_piecewise)\n",
            text);
    return 1;
}

int pw_cli_parse_bytes(const char *text, const char *option, size_t *out) {
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"", 1},           {"B", 1},
                 {"K", 1024.0},     {"KiB", 1024.0},
                 {"M", 1048576.0},  {"MiB", 1048576.0},
                 {"G", 1073741824.0}, {"GiB", 1073741824.0}};
    char *end;
    errno = 0;
    double x = strtod(text, &end);
    bool number = end != text && errno == 0 && x == x && (text[0] >= '0' && text[0] <= '9');
    for (size_t u = 0; number && u < sizeof units / sizeof units[0]; u++) {
        if (strcmp(end, units[u].suffix) != 0) continue;
        double bytes = x * units[u].scale;
        if (bytes < 1 || bytes > 1e18 || bytes != (double)(size_t)bytes) {
            fprintf(stderr, "piecewise: %s: '%s' is not a whole number of bytes >= 1\n", option,
                    text);
            return 1;
        }
        *out = (size_t)bytes;
        return 0;
    }
    fprintf(stderr,
            "piecewise: %s: '%s' is not a byte count (expected e.g. 1048576, 512M, 2GiB; "
            "suffixes K, M, G, KiB, MiB, GiB)\n",
            option, text);
    return 1;
}

int pw_cli_capture_option(int argc, char **argv, int *i, pw_engine_config *cfg) {
    const char *a = argv[*i], *v;
    if (strcmp(a, "--memory-budget") == 0) {
        if (!(v = pw_cli_value(argc, argv, i)) || pw_cli_parse_bytes(v, a, &cfg->memory_budget))
            return -1;
    } else if (strcmp(a, "--graph-budget") == 0) {
        if (!(v = pw_cli_value(argc, argv, i)) || pw_cli_parse_bytes(v, a, &cfg->graph_budget))
            return -1;
    } else if (strcmp(a, "--capture") == 0) {
        if (!(v = pw_cli_value(argc, argv, i))) return -1;
        if (pw_capture_policy_parse(v, &cfg->capture_policy) != PW_OK) {
            fprintf(stderr, "piecewise: --capture: %s\n", pw_last_error());
            return -1;
        }
    } else {
        return 0;
    }
    return 1;
}

int pw_cli_generation_option(int argc, char **argv, int *i, pw_engine_config *cfg,
                             pw_sampling_params *sp, int64_t *threads) {
    const char *a = argv[*i], *v;
    double d;
    int64_t n;
    int cap = pw_cli_capture_option(argc, argv, i, cfg);
    if (cap != 0) return cap;
    if (strcmp(a, "--mode") == 0) {
        if (!(v = pw_cli_value(argc, argv, i)) || pw_cli_parse_mode(v, &cfg->mode)) return -1;
    } else if (strcmp(a, "--device") == 0) {
        if (!(v = pw_cli_value(argc, argv, i))) return -1;
        if (pw_device_parse(v, &cfg->device) != PW_OK) {
            fprintf(stderr, "piecewise: --device: %s\n", pw_last_error());
            return -1;
        }
    } else if (strcmp(a, "--temp") == 0) {
        if (pw_cli_double(argc, argv, i, 0, 100, &d)) return -1;
        sp->temperature = (float)d;
    } else if (strcmp(a, "--top-k") == 0) {
        if (pw_cli_int(argc, argv, i, 0, 1 << 30, &n)) return -1;
        sp->top_k = (int32_t)n;
    } else if (strcmp(a, "--top-p") == 0) {
        if (pw_cli_double(argc, argv, i, 0, 1, &d)) return -1;
        sp->top_p = (float)d;
    } else if (strcmp(a, "--seed") == 0) {
        if (pw_cli_int(argc, argv, i, 0, INT64_MAX, &n)) return -1;
        sp->seed = (uint64_t)n;
    } else if (strcmp(a, "--threads") == 0) {
        if (pw_cli_int(argc, argv, i, 1, 256, threads)) return -1;
    } else {
        return 0;
    }
    return 1;
}

bool pw_cli_text_append(char **text, size_t *len, size_t *cap, const char *piece, size_t n) {
    if (n >= *cap - *len) {
        /* a size past SIZE_MAX is refused by pw_host_grow's bound, not wrapped */
        size_t need = n > SIZE_MAX - 1 - *len ? SIZE_MAX : *len + n + 1;
        char *t = pw_host_grow(*text, 1, cap, need, SIZE_MAX);
        if (!t) return false;
        *text = t;
    }
    memcpy(*text + *len, piece, n);
    *len += n;
    (*text)[*len] = '\0';
    return true;
}

/* ---- capture options (distinct-piece capture, the graph cache) ---------- */

int pw_cli_graph_cache_option(int argc, char **argv, int *i, pw_engine_config *cfg) {
    const char *a = argv[*i];
    if (strcmp(a, "--no-distinct-capture") == 0) {
        cfg->capture_distinct = false;
        return 1;
    }
    if (strcmp(a, "--graph-cache") == 0) {
        const char *v = pw_cli_value(argc, argv, i);
        if (!v) return -1;
        if (!v[0]) {
            fprintf(stderr, "piecewise: --graph-cache: the folder name is empty\n");
            return -1;
        }
        cfg->graph_cache_dir = v;
        return 1;
    }
    return 0;
}

/* ---- tensor parallelism ------------------------------------------------- */

/* --tp-timeout without --tp is a mistake worth saying (pw_cli_load_model) */
static bool tp_timeout_given;

int pw_cli_tp_option(int argc, char **argv, int *i, int64_t *tp) {
    if (strcmp(argv[*i], "--tp-timeout") == 0) {
        int64_t s;
        if (pw_cli_int(argc, argv, i, 1, PW_TP_MAX_TIMEOUT_S, &s)) return -1;
        tp_timeout_given = true;
        /* pw_cli_int has checked the range pw_tp_set_timeout accepts */
        return pw_tp_set_timeout((double)s) == PW_OK ? 1 : -1;
    }
    if (strcmp(argv[*i], "--tp") != 0) return 0;
    return pw_cli_int(argc, argv, i, 1, 64, tp) ? -1 : 1;
}

int pw_cli_load_model(const char *cmd, const char *path, int64_t tp, pw_engine_config *cfg,
                      pw_model **out) {
    *out = NULL;
    char what[64];
    snprintf(what, sizeof what, "%s", cmd);
    if (tp == 0) {
        if (tp_timeout_given) {
            fprintf(stderr, "piecewise %s: --tp-timeout applies only with --tp N\n", cmd);
            return 2;
        }
        pw_status s = pw_model_load(path, out);
        return s == PW_OK ? 0 : pw_cli_fail(what, s);
    }
    pw_status s = pw_tp_init((int)tp);
    if (s != PW_OK) return pw_cli_fail(what, s);
    if (tp > 1 && cfg && cfg->graph_cache_dir) {
        fprintf(stderr, "piecewise %s: --graph-cache is not supported with --tp %lld yet\n", cmd,
                (long long)tp);
        return 2;
    }
    if (pw_tp_rank() != 0) {
        if (!freopen("/dev/null", "w", stdout)) return pw_cli_fail(what, PW_ERR_IO);
        if (cfg) {
            cfg->progress = PW_PROGRESS_OFF;
            cfg->print_capture_totals = false;
        }
    }
    s = pw_model_load_tp(path, out);
    if (s != PW_OK) {
        snprintf(what, sizeof what, "%s: rank %d", cmd, pw_tp_rank());
        return pw_cli_fail(what, s);
    }
    return 0;
}

void pw_cli_print_tp_rank(const pw_engine *engine, const pw_tp_comm_stats *since) {
    pw_engine_stats st;
    pw_engine_get_stats(engine, &st);
    struct rusage ru;
    long peak_kib = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
    pw_tp_comm_stats cs;
    pw_tp_get_comm_stats(&cs);
    cs.gather_seconds -= since->gather_seconds;
    cs.broadcast_seconds -= since->broadcast_seconds;
    double steps = st.steps > 0 ? (double)st.steps : 1;
    double busy = st.prefill_seconds + st.decode_seconds;
    fprintf(stderr,
            "tp rank %d of %d: %zu weight bytes, %zu KV cache bytes, peak RSS %ld KiB; "
            "all-reduce gathers %.1f us/step (%.1f%% of the steps' time), rank 0's step "
            "broadcasts %.1f us/step\n",
            pw_tp_rank(), pw_tp_size(), st.weight_bytes, st.kv_cache_bytes, peak_kib,
            cs.gather_seconds / steps * 1e6, busy > 0 ? 100.0 * cs.gather_seconds / busy : 0.0,
            cs.broadcast_seconds / steps * 1e6);
}
