/* piecewise public API, libpiecewise: for code that extends piecewise.
 *
 * Kernels, ops, backends and whole libraries built on libpiecewise (as
 * libpiecewise-llm is) report errors through the same thread-local message
 * that pw_last_error() returns, log through the same logger, read
 * environment variables the same checked way, allocate host memory that
 * reports PW_ERR_OOM like the library's own, split a short host job over
 * threads, and open, read and write files the same hardened way. Declared
 * here, not copied, so that every library in a process shares one error
 * slot, one log level and one allocation counter. */
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

/* The device whose kernel set runs launches on `device`'s streams: the
 * device itself, or the CPU for a backend that runs the CPU kernels (the
 * emulated device). A kernel-set registry looks devices up through it. */
PW_API pw_device pw_device_kernel_device(pw_device device);

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
/* The device PW_DEVICE names (cpu, cuda, emu), or the CPU: the default
 * device of an engine and of the tests, so that a test suite or a script
 * runs unchanged on another device. */
PW_API pw_device pw_device_from_env(void);

/* Short jobs of the host's own split over threads of their own, outside
 * the CPU kernels' pool (whose size is the caller's thread count for
 * matrix products): a model load's copies of weights, most of whose time
 * is the kernel faulting in fresh pages on the thread that touches them.
 * fn runs part `part` of the job, its items [begin, end); it must not
 * report errors through pw_error (the message is per thread). */
typedef void (*pw_range_fn)(void *ctx, int part, int64_t begin, int64_t end);
/* Most threads of such a job: more clear fresh pages no faster (memory,
 * not the faults, becomes the limit), and a load should not take a large
 * machine. */
#define PW_HOST_THREADS_MAX 8
/* The threads such a job uses: the CPUs this process may run on, at most
 * PW_HOST_THREADS_MAX. */
PW_API int pw_host_threads(void);
/* Runs fn over [0, n) cut into `threads` contiguous parts (at most
 * PW_HOST_THREADS_MAX and n; part i is [n i / parts, n (i + 1) / parts)),
 * each on a thread of its own (the caller runs the first, and any whose
 * thread could not start), and returns when all are done. */
PW_API void pw_run_split(int64_t n, int threads, pw_range_fn fn, void *ctx);

/* The one hash: 64-bit FNV-1a of n bytes, continuing from h. Start from
 * PW_FNV1A_BASIS; chain calls to hash several pieces as one. The graph
 * cache stores these values in its files, so they never change. */
#define PW_FNV1A_BASIS UINT64_C(0xcbf29ce484222325)
PW_API uint64_t pw_fnv1a(uint64_t h, const void *data, size_t n);

/* True if s[0..len) is well-formed UTF-8: no overlong forms, surrogates,
 * truncated sequences or code points past U+10FFFF. */
PW_API bool pw_utf8_valid(const char *s, size_t len);

/* The string builder. Zero-initialise one (pw_sb sb = {0}), append to it,
 * then take the text with pw_sb_finish or drop it with pw_sb_discard. A
 * failed allocation (or a failed format) makes it stop appending and
 * remember the failure: appends need no checks, and pw_sb_finish reports
 * it, so text is never silently truncated. data is NUL-terminated after
 * each append that succeeded; len counts its bytes. */
typedef struct pw_sb {
    char *data;
    size_t len, cap;
    pw_status status; /* PW_OK, or the failure that stopped the appends */
} pw_sb;

PW_API void pw_sb_append(pw_sb *sb, const char *s, size_t n);
PW_API void pw_sb_puts(pw_sb *sb, const char *s);
PW_API void pw_sb_printf(pw_sb *sb, const char *fmt, ...) PW_PRINTF(2, 3);
/* Hands the text over (NUL-terminated, free() it; "" when nothing was
 * appended) and resets sb; or, after a failure, frees it, sets *out to NULL
 * and returns the failure (PW_ERR_OOM: "out of host memory building text"). */
PW_API pw_status pw_sb_finish(pw_sb *sb, char **out);
PW_API void pw_sb_discard(pw_sb *sb);

/* Host allocations that fail with PW_ERR_OOM set through pw_error (NULL
 * returned); pw_host_free(NULL) is a no-op. */
PW_API void *pw_host_alloc(size_t bytes);
PW_API void *pw_host_calloc(size_t n, size_t size);
PW_API void *pw_host_realloc(void *p, size_t bytes);
/* Growth of every dynamic array (after Lua's luaM_growvector): makes
 * `items`, an array of *cap elements of elem_size bytes, hold at least
 * `need` elements. When they fit it returns items as they are; otherwise
 * the capacity doubles (from at least 4 elements or 64 bytes), and at
 * least to `need`, bounded by max_count elements and by PTRDIFF_MAX bytes.
 * Pass the largest value the caller's count type holds as max_count
 * (INT_MAX for an int count, SIZE_MAX when it is a size_t), so that
 * neither the count nor the byte size can wrap. Returns the block, maybe
 * moved, with *cap updated; or NULL with PW_ERR_OOM set through pw_error
 * ("out of host memory ...") when memory runs out or `need` passes a
 * bound, and then items is still valid and *cap unchanged. Never returns
 * NULL on success, even for need 0. Typical use:
 *
 *   size_t cap = (size_t)v->cap;
 *   int *items = pw_host_grow(v->items, sizeof *items, &cap, (size_t)v->n + 1, INT_MAX);
 *   if (!items) return PW_ERR_OOM;
 *   v->items = items;
 *   v->cap = (int)cap;
 */
PW_API void *pw_host_grow(void *items, size_t elem_size, size_t *cap, size_t need,
                          size_t max_count);

PW_API void pw_host_free(void *p);
PW_API char *pw_host_strdup(const char *s);

/* Seconds on the monotonic clock (for durations: never jumps with the
 * wall clock). */
PW_API double pw_monotonic_seconds(void);
/* Sleeps for `seconds` (restarted after a signal; nothing for <= 0). */
PW_API void pw_sleep_seconds(double seconds);

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

/* How the kernel holds a file's pages (src/core/pages.c): its size, the
 * bytes of it resident in a mapping, and of those the ones mapped in huge
 * pages (2 MiB on x86-64). */
typedef struct pw_file_pages {
    uint64_t size, resident, huge;
} pw_file_pages;

/* Bytes of the mapping that holds addr mapped in huge pages (anonymous,
 * file or shared memory); *resident (may be NULL) gets its resident bytes.
 * 0 where /proc/self/smaps cannot say (not Linux, no /proc). */
PW_API size_t pw_pages_huge_bytes(const void *addr, size_t *resident);
/* The same over this process's mappings of the file at path. */
PW_API size_t pw_pages_file_huge_bytes(const char *path, size_t *resident);

/* Anonymous zeroed memory of `bytes` on a 2 MiB boundary, a mapping of its
 * own whose page size the advice sets (huge: 2 MiB pages where the kernel
 * grants them; else 4 KiB ones), not malloc: for measuring what the page
 * size does. NULL when it cannot be mapped. Free with pw_pages_free(p,
 * bytes). */
PW_API void *pw_pages_alloc(size_t bytes, bool huge);
PW_API void pw_pages_free(void *p, size_t bytes);

/* Brings the regular file at path (links followed, as a model path) into
 * the page cache: maps it with huge-page advice and reads a byte of every
 * page, then reports in *before how it is held. With `recache`, when part
 * of it sits in small pages, drops the file's cached pages that no process
 * maps and reads them again, now in 2 MiB folios where the kernel makes
 * them for files, and reports that in *after (else *after = *before).
 * Nothing is written; a process that maps the file keeps its pages.
 * Errors: those of pw_file_open_regular; PW_ERR_IO when it cannot be
 * mapped or its pages dropped. */
PW_API pw_status pw_file_cache_pages(const char *path, bool recache, pw_file_pages *before,
                                     pw_file_pages *after);

#ifdef __cplusplus
}
#endif

#endif
