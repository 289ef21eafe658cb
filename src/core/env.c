/* Environment variables: every one the library reads goes through here, so
 * each is checked the same way. A bad value is never an error a caller has
 * to handle (no call asked for it): it gets one warning per variable and
 * process, naming the variable, the value and what is accepted, and the
 * default applies. The warning goes through the log, never through the
 * error channel, so reading a variable leaves pw_last_error() alone. */
#include "internal.h"

#include <stdatomic.h>
#include <string.h>

/* Variables already warned about (their names are string literals, so the
 * pointers stay valid). More distinct variables than this are still
 * checked; only their warnings may repeat. */
#define PW_ENV_WARNED_CAP 32
static _Atomic(const char *) warned[PW_ENV_WARNED_CAP];

/* True the first time it is called for name (whichever thread gets there
 * first claims the name). */
static bool first_warning(const char *name) {
    for (int i = 0; i < PW_ENV_WARNED_CAP; i++) {
        const char *seen = atomic_load(&warned[i]);
        while (!seen) {
            if (atomic_compare_exchange_weak(&warned[i], &seen, name)) return true;
        }
        if (strcmp(seen, name) == 0) return false;
    }
    return true;
}

static void warn_once(const char *name, const char *value, const char *accepted,
                      const char *fallback) {
    if (!first_warning(name)) return;
    pw_log_warn("environment variable %s='%s' is not accepted (expected %s); using %s", name,
                value, accepted, fallback);
}

int pw_env_choice(const char *name, const char *const *choices, int default_index) {
    const char *value = getenv(name);
    if (!value || !*value) return default_index;
    int n = 0;
    for (; choices[n]; n++)
        if (strcmp(value, choices[n]) == 0) return n;
    assert(default_index >= 0 && default_index < n);
    /* "a, b or c" */
    char accepted[256];
    size_t used = 0;
    accepted[0] = '\0';
    for (int i = 0; i < n && used < sizeof accepted; i++)
        used += (size_t)snprintf(accepted + used, sizeof accepted - used, "%s%s",
                                 i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i]);
    warn_once(name, value, accepted, choices[default_index]);
    return default_index;
}

const char *pw_env_string(const char *name, bool (*valid)(const char *value), const char *accepted,
                          const char *fallback) {
    const char *value = getenv(name);
    if (!value || !*value) return NULL;
    if (valid(value)) return value;
    warn_once(name, value, accepted, fallback);
    return NULL;
}
