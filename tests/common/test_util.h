/* A minimal test harness: CHECK macros that report file:line and keep
 * going, a per-file summary, and exit code 77 for "skipped". */
#ifndef PW_TEST_UTIL_H
#define PW_TEST_UTIL_H

#include "piecewise.h"
#include "pw_testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int pw_test_failures;
extern int pw_test_checks;
extern int pw_test_skipped_parts;

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        pw_test_checks++;                                                                      \
        if (!(cond)) {                                                                         \
            pw_test_failures++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                                      \
    } while (0)

#define CHECK_OK(expr)                                                                         \
    do {                                                                                       \
        pw_test_checks++;                                                                      \
        pw_status s_ = (expr);                                                                 \
        if (s_ != PW_OK) {                                                                     \
            pw_test_failures++;                                                                \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,          \
                    pw_status_name(s_), pw_last_error());                                      \
        }                                                                                      \
    } while (0)

/* Checks the status and that the error message contains `needle`. */
#define CHECK_ERR(expr, code, needle)                                                          \
    do {                                                                                       \
        pw_test_checks++;                                                                      \
        pw_status s_ = (expr);                                                                 \
        if (s_ != (code) || !strstr(pw_last_error(), (needle))) {                              \
            pw_test_failures++;                                                                \
            fprintf(stderr, "%s:%d: %s: expected %s containing \"%s\", got %s: \"%s\"\n",      \
                    __FILE__, __LINE__, #expr, pw_status_name(code), (needle),                 \
                    pw_status_name(s_), pw_last_error());                                      \
        }                                                                                      \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                     \
    do {                                                                                       \
        pw_test_checks++;                                                                      \
        long long a_ = (long long)(a), b_ = (long long)(b);                                    \
        if (a_ != b_) {                                                                        \
            pw_test_failures++;                                                                \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a,  \
                    #b, a_, b_);                                                               \
        }                                                                                      \
    } while (0)

#define CHECK_STREQ(a, b)                                                                      \
    do {                                                                                       \
        pw_test_checks++;                                                                      \
        const char *a_ = (a), *b_ = (b);                                                       \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                               \
            pw_test_failures++;                                                                \
            fprintf(stderr, "%s:%d: strings differ:\n  %s\n  %s\n", __FILE__, __LINE__,        \
                    a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                   \
        }                                                                                      \
    } while (0)

/* Prints a summary and returns the process exit code: 1 when a check failed
 * or when no check was made (a test that cannot run calls pw_test_skip), 77
 * (CTest's skip code) when a part was skipped, 0 otherwise. */
int pw_test_finish(const char *name);
/* Prints "SKIP: reason" and exits 77 (CTest's skip code), or exits 1 when a
 * check has already failed. */
void pw_test_skip(const char *reason);
/* Records that one part of the test could not run (a model or tool is
 * missing) and says which: the other parts still run, and pw_test_finish
 * then reports a skip instead of a pass. */
void pw_test_skip_part(const char *what);
/* The engine on a device other than the CPU (PW_DEVICE) may be refused a
 * model whose kernels that device's kernel set lacks (the CUDA set runs
 * the Llama family): pw_engine_new's PW_ERR_UNSUPPORTED names the kernel.
 * True for that refusal, which counts as a check (the message names the
 * kernel) and skips the part `what`; false for anything else. */
bool pw_test_device_refused(pw_status s, const char *what);
/* The fetched model `file` under models/, or the path in the environment
 * variable `env` (PW_SMOLLM2_GGUF, PW_GEMMA3_GGUF) when set; NULL when that
 * file cannot be read. */
const char *pw_test_model_path(const char *env, const char *file, char *buf, size_t cap);
/* Reads a whole file; NULL if absent. */
char *pw_test_read_file(const char *path, size_t *len);
/* The source tree's root (the folder holding tests/), into buf. */
const char *pw_test_source_root(char *buf, size_t cap);
/* Runs fn with standard output sent to a temporary file; returns what it
 * printed (NULL if it could not be captured) and sets *rc to fn's result. */
char *pw_test_run_printing(int (*fn)(void), int *rc);
/* Path to ../shared/<rel>, or NULL if that file is absent. Env PW_SHARED_DIR wins. */
const char *pw_test_shared_path(const char *rel, char *buf, size_t cap);

/* The file's sha256 as 64 hex digits; false if it cannot be read. */
bool pw_test_file_sha256(const char *path, char out[65]);

#endif
