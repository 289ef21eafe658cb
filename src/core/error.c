#include "internal.h"

#include <string.h>

#define PW_ERROR_CAP 2048

static _Thread_local char last_error[PW_ERROR_CAP];

static const char *const status_names[PW_STATUS_COUNT_] = {
    [PW_OK] = "PW_OK",
    [PW_ERR_INVALID_ARG] = "PW_ERR_INVALID_ARG",
    [PW_ERR_PARSE] = "PW_ERR_PARSE",
    [PW_ERR_FORMAT] = "PW_ERR_FORMAT",
    [PW_ERR_IO] = "PW_ERR_IO",
    [PW_ERR_OOM] = "PW_ERR_OOM",
    [PW_ERR_NOT_FOUND] = "PW_ERR_NOT_FOUND",
    [PW_ERR_UNSUPPORTED] = "PW_ERR_UNSUPPORTED",
    [PW_ERR_STATE] = "PW_ERR_STATE",
    [PW_ERR_CAPTURE] = "PW_ERR_CAPTURE",
    [PW_ERR_ADDRESS_MISMATCH] = "PW_ERR_ADDRESS_MISMATCH",
    [PW_ERR_UNSAFE_CAPTURE] = "PW_ERR_UNSAFE_CAPTURE",
    [PW_ERR_CUDA] = "PW_ERR_CUDA",
    [PW_ERR_INTERNAL] = "PW_ERR_INTERNAL",
};

const char *pw_version(void) { return "0.1.0"; }

const char *pw_status_name(pw_status s) {
    if ((unsigned)s >= PW_STATUS_COUNT_) return "PW_ERR_UNKNOWN";
    return status_names[s];
}

const char *pw_last_error(void) { return last_error; }

void pw_clear_error(void) { last_error[0] = '\0'; }

/* > 0 while cleanup on an error path runs on this thread (pw_error_hold). */
static _Thread_local int hold_depth;

void pw_error_hold(void) { hold_depth++; }

void pw_error_unhold(void) {
    assert(hold_depth > 0);
    hold_depth--;
}

pw_status pw_error(pw_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (PW_UNLIKELY(hold_depth > 0)) {
        /* Cleanup failed while another error is being returned: that error
         * keeps its message, and this one is only logged. */
        char held[PW_ERROR_CAP];
        vsnprintf(held, sizeof held, fmt, ap);
        va_end(ap);
        pw_log_warn("error during cleanup, not returned (%s): %s", pw_status_name(code), held);
        return code;
    }
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    pw_log_debug("error %s: %s", pw_status_name(code), last_error);
    return code;
}

pw_status pw_error_context(pw_status code, const char *fmt, ...) {
    if (PW_UNLIKELY(hold_depth > 0)) return code;
    char prefix[512];
    char old[PW_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    snprintf(last_error, sizeof last_error, "%s: %s", prefix, old);
    return code;
}
