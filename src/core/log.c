/* Logging to stderr. Nothing here goes through the error channel: a log
 * line (or a bad PW_LOG_LEVEL) never touches pw_last_error(), and pw_error()
 * may log without recursing back into it. */
#include "internal.h"

#include <stdatomic.h>
#include <string.h>

#define PW_LOG_LEVEL_UNREAD (-1)

static atomic_int log_level = PW_LOG_LEVEL_UNREAD;

/* Indexed by pw_log_level; NULL-terminated for pw_env_choice. */
static const char *const level_names[] = {"error", "warn", "info", "debug", NULL};

pw_status pw_log_level_parse(const char *name, pw_log_level *out) {
    if (name) {
        for (int i = 0; level_names[i]; i++) {
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

/* The first call reads PW_LOG_LEVEL. The default is in place while it is
 * read, so the warning about a bad value is logged at that level instead of
 * asking for the level again; a level set meanwhile with pw_log_set_level
 * wins over the variable. */
pw_log_level pw_log_get_level(void) {
    int level = atomic_load_explicit(&log_level, memory_order_relaxed);
    if (PW_LIKELY(level != PW_LOG_LEVEL_UNREAD)) return (pw_log_level)level;
    int unread = PW_LOG_LEVEL_UNREAD;
    if (atomic_compare_exchange_strong(&log_level, &unread, PW_LOG_WARN)) {
        int parsed = pw_env_choice("PW_LOG_LEVEL", level_names, PW_LOG_WARN);
        int placeholder = PW_LOG_WARN;
        atomic_compare_exchange_strong(&log_level, &placeholder, parsed);
    }
    return (pw_log_level)atomic_load(&log_level);
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
