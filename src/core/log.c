#include "internal.h"

#include <stdatomic.h>
#include <string.h>

/* -1 means "not read from the environment yet". */
static atomic_int log_level = -1;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

pw_status pw_log_level_parse(const char *name, pw_log_level *out) {
    if (name) {
        for (int i = 0; i < (int)PW_ARRAY_LEN(level_names); i++) {
            if (strcmp(name, level_names[i]) == 0) {
                *out = (pw_log_level)i;
                return PW_OK;
            }
        }
    }
    return pw_error(PW_ERR_INVALID_ARG,
                    "unknown log level '%s' (expected error, warn, info or debug)",
                    name ? name : "(null)");
}

pw_log_level pw_log_get_level(void) {
    int level = atomic_load_explicit(&log_level, memory_order_relaxed);
    if (PW_LIKELY(level >= 0)) return (pw_log_level)level;
    pw_log_level parsed = PW_LOG_WARN;
    const char *env = getenv("PW_LOG_LEVEL");
    if (env && *env) {
        if (pw_log_level_parse(env, &parsed) != PW_OK) {
            parsed = PW_LOG_WARN;
            fprintf(stderr, "piecewise [warn] PW_LOG_LEVEL='%s' is not one of error, warn, "
                            "info, debug; using warn\n", env);
            pw_clear_error();
        }
    }
    atomic_store(&log_level, (int)parsed);
    return parsed;
}

void pw_log_set_level(pw_log_level level) { atomic_store(&log_level, (int)level); }

void pw_log(pw_log_level level, const char *fmt, ...) {
    if (level > pw_log_get_level()) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "piecewise [%s] %s\n", level_names[level], buf);
}
