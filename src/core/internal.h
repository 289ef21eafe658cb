/* Internal helpers shared by every module (the functions themselves are
 * public, in piecewise/extend.h): branch hints, PW_TRY, log macros. Not
 * installed. */
#ifndef PW_INTERNAL_H
#define PW_INTERNAL_H

#include "piecewise.h"
#include "piecewise/extend.h" /* pw_error, pw_log, pw_env_*, pw_host_* */

#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define PW_LIKELY(x) __builtin_expect(!!(x), 1)
#define PW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PW_LIKELY(x) (x)
#define PW_UNLIKELY(x) (x)
#endif

/* Propagate a failing status unchanged. */
#define PW_TRY(expr)                                                                           \
    do {                                                                                       \
        pw_status pw_try_s_ = (expr);                                                          \
        if (PW_UNLIKELY(pw_try_s_ != PW_OK)) return pw_try_s_;                                 \
    } while (0)

#define PW_LOG_ENABLED(level) ((level) <= pw_log_get_level())
#define pw_log_debug(...) do { if (PW_LOG_ENABLED(PW_LOG_DEBUG)) pw_log(PW_LOG_DEBUG, __VA_ARGS__); } while (0)
#define pw_log_info(...) do { if (PW_LOG_ENABLED(PW_LOG_INFO)) pw_log(PW_LOG_INFO, __VA_ARGS__); } while (0)
#define pw_log_warn(...) pw_log(PW_LOG_WARN, __VA_ARGS__)

#define PW_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* bytes for a message: "512 B", "1.5 KiB", "64.0 MiB" (strbuf.c). Returns buf. */
const char *pw_format_bytes(size_t bytes, char *buf, size_t cap);

#endif
