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
/* Prepends context to the current message: "loading x.gguf: <old>". */
PW_INTERNAL_API pw_status pw_error_context(pw_status code, const char *fmt, ...) PW_PRINTF(2, 3);

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

/* Host allocations that report PW_ERR_OOM through the error channel.
 * pw_host_fail_nth() (pw_testing.h) is the test hook that fails the n-th call. */
PW_INTERNAL_API void *pw_host_alloc(size_t bytes);
PW_INTERNAL_API void *pw_host_calloc(size_t n, size_t size);
PW_INTERNAL_API void *pw_host_realloc(void *p, size_t bytes);
PW_INTERNAL_API void pw_host_free(void *p);
PW_INTERNAL_API char *pw_host_strdup(const char *s);

#define PW_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
