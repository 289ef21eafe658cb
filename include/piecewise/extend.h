/* piecewise public API, libpiecewise: for code that extends piecewise.
 *
 * Kernels, ops, backends and whole libraries built on libpiecewise (as
 * libpiecewise-llm is) report errors through the same thread-local message
 * that pw_last_error() returns, log through the same logger, read
 * environment variables the same checked way, allocate host memory that
 * reports PW_ERR_OOM like the library's own, and open, read and write files
 * the same hardened way. Declared here, not
 * copied, so that every library in a process shares one error slot, one
 * log level and one allocation counter. */
#ifndef PIECEWISE_EXTEND_H
#define PIECEWISE_EXTEND_H

#include "piecewise.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PW_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PW_PRINTF(a, b)
#endif

/* Sets the thread's last error and returns code, so call sites read
 *   return pw_error(PW_ERR_PARSE, "line %d: ...", line);
 * Inside a pw_error_hold() the message is left alone and the failure is
 * logged as a warning instead. */
PW_API pw_status pw_error(pw_status code, const char *fmt, ...) PW_PRINTF(2, 3);
/* Prepends context to the current message ("loading x.gguf: <old>") and
 * returns code. Only right after a failing call (the message is unspecified
 * after a success). */
PW_API pw_status pw_error_context(pw_status code, const char *fmt, ...) PW_PRINTF(2, 3);
/* Cleanup on an error path must not replace the message of the error being
 * returned: between pw_error_hold() and pw_error_unhold() on a thread,
 * pw_error() and pw_error_context() leave the message alone. Holds nest. */
PW_API void pw_error_hold(void);
PW_API void pw_error_unhold(void);

/* One line on stderr when level <= pw_log_get_level(). Never touches the
 * error message. */
PW_API void pw_log(pw_log_level level, const char *fmt, ...) PW_PRINTF(2, 3);

/* Environment variables. A bad value gets one warning per variable and
 * process, naming the variable, the value and the accepted values, then
 * the default; unset or empty means the default, silently. `name` must
 * outlive the process (a string literal). */
/* Index of the variable's value in the NULL-terminated `choices`, or
 * default_index. */
PW_API int pw_env_choice(const char *name, const char *const *choices, int default_index);
/* The value when valid(value) holds, else NULL (unset, empty, or refused
 * with a warning that says it expected `accepted` and is using `fallback`). */
PW_API const char *pw_env_string(const char *name, bool (*valid)(const char *value),
                                 const char *accepted, const char *fallback);

/* Host allocations that fail with PW_ERR_OOM set through pw_error (NULL
 * returned); pw_host_free(NULL) is a no-op. */
PW_API void *pw_host_alloc(size_t bytes);
PW_API void *pw_host_calloc(size_t n, size_t size);
PW_API void *pw_host_realloc(void *p, size_t bytes);
PW_API void pw_host_free(void *p);
PW_API char *pw_host_strdup(const char *s);

/* Files named by a user or found in a folder: opened so that nothing but a
 * regular file is ever read (a FIFO or a device neither blocks the open nor
 * feeds an unbounded read), read with a bound the caller derives from the
 * format, and written only through a new file of our own (docs/errors.md,
 * "Files"). Whether the last component of a path may be a symbolic link. A path the
 * user typed may be one (a models folder of links); a name inside a folder
 * the program manages (the graph cache) never is. */
typedef enum pw_file_links { PW_FILE_FOLLOW_LINKS, PW_FILE_NO_LINKS } pw_file_links;

/* Opens path for reading without blocking, checks with fstat on the open
 * descriptor that it is a regular file of at most max_bytes, and hands back
 * a blocking descriptor (close it) and the size. `what` names the file in
 * messages ("gguf", "graph file"). Errors: PW_ERR_IO (cannot open, not a
 * regular file, a link with PW_FILE_NO_LINKS, larger than max_bytes). */
PW_API pw_status pw_file_open_regular(const char *path, const char *what, pw_file_links links,
                                      uint64_t max_bytes, int *fd, uint64_t *size);

/* Reads exactly n bytes from fd's current position; PW_ERR_IO with a
 * message naming what and path when it fails or the file ends first. */
PW_API pw_status pw_file_read_exact(int fd, void *buf, size_t n, const char *what,
                                    const char *path);

/* The whole of a regular file of at most max_bytes, NUL-terminated (the
 * terminator not counted in *len), in pw_host_alloc memory. Errors as
 * pw_file_open_regular, plus PW_ERR_OOM and a file that changes size while
 * it is read. */
PW_API pw_status pw_file_read_all(const char *path, const char *what, pw_file_links links,
                                  size_t max_bytes, char **out, size_t *len);

/* Creates path for writing, failing if anything at all is there (a file, a
 * link, dangling or not, a FIFO): O_CREAT|O_EXCL|O_NOFOLLOW. PW_ERR_IO with
 * the reason otherwise. */
PW_API pw_status pw_file_create_new(const char *path, const char *what, int *fd);

/* Writes all n bytes, then fsyncs. PW_ERR_IO naming what and path on a
 * short write, a write error (a full disk) or a failed fsync. */
PW_API pw_status pw_file_write_all_sync(int fd, const void *buf, size_t n, const char *what,
                                        const char *path);

#ifdef __cplusplus
}
#endif

#endif
