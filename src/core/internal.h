/* Internal helpers shared by every module: error reporting, logging,
 * checked allocation. Not installed. */
#ifndef PW_INTERNAL_H
#define PW_INTERNAL_H

#include "piecewise.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define PW_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define PW_LIKELY(x) __builtin_expect(!!(x), 1)
#define PW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PW_PRINTF(a, b)
#define PW_LIKELY(x) (x)
#define PW_UNLIKELY(x) (x)
#endif

/* Exported from libpiecewise.so for libpiecewise-llm.so, which must share
 * the one error slot, logger and allocation counter rather than have its own
 * copies. Not API: declared only here (not installed); the api_exports test
 * lists every function marked with it. */
#if defined(__GNUC__) || defined(__clang__)
#define PW_INTERNAL_API __attribute__((visibility("default")))
#else
#define PW_INTERNAL_API
#endif

/* Sets the thread's last error and returns code, so call sites read
 *   return pw_error(PW_ERR_PARSE, "line %d: ...", line); */
PW_INTERNAL_API pw_status pw_error(pw_status code, const char *fmt, ...) PW_PRINTF(2, 3);
/* Prepends context to the current message: "loading x.gguf: <old>". Only
 * right after a failing call (the message is unspecified after a success). */
PW_INTERNAL_API pw_status pw_error_context(pw_status code, const char *fmt, ...) PW_PRINTF(2, 3);

/* Cleanup on an error path must not replace the message of the error being
 * returned. Between pw_error_hold() and pw_error_unhold() on a thread,
 * pw_error() and pw_error_context() return their code and leave the message
 * alone (a failure there is logged as a warning instead). Holds nest. Void
 * cleanup functions (_free, _release, abort) that call fallible code wrap it
 * in a hold, so their callers need no workaround. */
void pw_error_hold(void);
void pw_error_unhold(void);

/* Propagate a failing status unchanged. */
#define PW_TRY(expr)                                                                           \
    do {                                                                                       \
        pw_status pw_try_s_ = (expr);                                                          \
        if (PW_UNLIKELY(pw_try_s_ != PW_OK)) return pw_try_s_;                                 \
    } while (0)

PW_INTERNAL_API void pw_log(pw_log_level level, const char *fmt, ...) PW_PRINTF(2, 3);
#define PW_LOG_ENABLED(level) ((level) <= pw_log_get_level())
#define pw_log_debug(...) do { if (PW_LOG_ENABLED(PW_LOG_DEBUG)) pw_log(PW_LOG_DEBUG, __VA_ARGS__); } while (0)
#define pw_log_info(...) do { if (PW_LOG_ENABLED(PW_LOG_INFO)) pw_log(PW_LOG_INFO, __VA_ARGS__); } while (0)
#define pw_log_warn(...) pw_log(PW_LOG_WARN, __VA_ARGS__)

/* Environment variables (src/core/env.c). Every variable the library reads
 * goes through these, so a bad value is handled the same way everywhere:
 * one warning per variable and process, naming the variable, the value and
 * the accepted values, then the default. Unset or empty means the default,
 * silently. Neither touches the error message. `name` must be a string
 * literal (the warning list keeps the pointer). */

/* Index of the variable's value in the NULL-terminated `choices`, or
 * default_index (also the index of the value the warning says is used). */
PW_INTERNAL_API int pw_env_choice(const char *name, const char *const *choices, int default_index);
/* The value when valid(value) holds, else NULL (unset, empty, or refused
 * with a warning that says it expected `accepted` and is using `fallback`). */
PW_INTERNAL_API const char *pw_env_string(const char *name, bool (*valid)(const char *value), const char *accepted,
                          const char *fallback);

/* Host allocations that report PW_ERR_OOM through the error channel.
 * pw_host_fail_nth() (pw_testing.h) is the test hook that fails the n-th call. */
PW_INTERNAL_API void *pw_host_alloc(size_t bytes);
PW_INTERNAL_API void *pw_host_calloc(size_t n, size_t size);
PW_INTERNAL_API void *pw_host_realloc(void *p, size_t bytes);
PW_INTERNAL_API void pw_host_free(void *p);
PW_INTERNAL_API char *pw_host_strdup(const char *s);

#define PW_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
