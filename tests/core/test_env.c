/* Environment variables (src/core/env.c): unset or empty gives the default
 * silently; a bad value gives one warning naming the variable, the value
 * and the accepted values, then the default; the error message is never
 * touched. PW_LOG_LEVEL, read inside the logger, goes through the same
 * helper without recursing (a bad value used to overflow the stack). */
#include "internal.h"
#include "test_util.h"

#include <string.h>
#include <unistd.h>

typedef struct stderr_capture {
    int saved;
    char path[64];
} stderr_capture;

static void capture_begin(stderr_capture *c) {
    fflush(stderr);
    snprintf(c->path, sizeof c->path, "/tmp/pw_env_stderr_XXXXXX");
    int fd = mkstemp(c->path);
    CHECK(fd >= 0);
    c->saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

/* What was written to stderr since capture_begin (caller frees). */
static char *capture_end(stderr_capture *c) {
    fflush(stderr);
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    char *text = pw_test_read_file(c->path, NULL);
    unlink(c->path);
    return text ? text : strdup("");
}

static int count(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Runs first: the first pw_error reads the log level, which is bad. */
static void test_bad_log_level(void) {
    setenv("PW_LOG_LEVEL", "bogus", 1);
    stderr_capture c;
    capture_begin(&c);
    CHECK_EQ_INT(pw_error(PW_ERR_IO, "kept %d", 1), PW_ERR_IO);
    CHECK_EQ_INT(pw_log_get_level(), PW_LOG_WARN);
    CHECK_EQ_INT(pw_log_get_level(), PW_LOG_WARN);
    char *err = capture_end(&c);
    CHECK_EQ_INT(count(err, "PW_LOG_LEVEL='bogus'"), 1);
    CHECK(strstr(err, "error, warn, info or debug") != NULL);
    CHECK(strstr(err, "using warn") != NULL);
    CHECK_STREQ(pw_last_error(), "kept 1");
    free(err);
    unsetenv("PW_LOG_LEVEL");
}

static const char *const abc[] = {"a", "b", "c", NULL};

static void test_choice(void) {
    stderr_capture c;
    capture_begin(&c);
    unsetenv("PW_TEST_CHOICE");
    CHECK_EQ_INT(pw_env_choice("PW_TEST_CHOICE", abc, 2), 2);
    setenv("PW_TEST_CHOICE", "", 1);
    CHECK_EQ_INT(pw_env_choice("PW_TEST_CHOICE", abc, 2), 2);
    setenv("PW_TEST_CHOICE", "b", 1);
    CHECK_EQ_INT(pw_env_choice("PW_TEST_CHOICE", abc, 2), 1);
    char *err = capture_end(&c);
    CHECK_STREQ(err, ""); /* nothing to say about good values */
    free(err);

    pw_error(PW_ERR_PARSE, "unrelated failure");
    capture_begin(&c);
    setenv("PW_TEST_CHOICE", "B", 1); /* values are case-sensitive */
    CHECK_EQ_INT(pw_env_choice("PW_TEST_CHOICE", abc, 0), 0);
    setenv("PW_TEST_CHOICE", "zzz", 1);
    CHECK_EQ_INT(pw_env_choice("PW_TEST_CHOICE", abc, 0), 0);
    err = capture_end(&c);
    CHECK_EQ_INT(count(err, "PW_TEST_CHOICE"), 1); /* once per variable */
    CHECK(strstr(err, "PW_TEST_CHOICE='B' is not accepted (expected a, b or c); using a") != NULL);
    CHECK_STREQ(pw_last_error(), "unrelated failure");
    free(err);
    unsetenv("PW_TEST_CHOICE");
}

static bool starts_with_slash(const char *v) { return v[0] == '/'; }

static void test_string(void) {
    stderr_capture c;
    capture_begin(&c);
    unsetenv("PW_TEST_PATH");
    CHECK(pw_env_string("PW_TEST_PATH", starts_with_slash, "an absolute path", "/tmp") == NULL);
    setenv("PW_TEST_PATH", "/var", 1);
    const char *v = pw_env_string("PW_TEST_PATH", starts_with_slash, "an absolute path", "/tmp");
    CHECK(v && strcmp(v, "/var") == 0);
    setenv("PW_TEST_PATH", "relative", 1);
    CHECK(pw_env_string("PW_TEST_PATH", starts_with_slash, "an absolute path", "/tmp") == NULL);
    CHECK(pw_env_string("PW_TEST_PATH", starts_with_slash, "an absolute path", "/tmp") == NULL);
    char *err = capture_end(&c);
    CHECK_EQ_INT(count(err, "PW_TEST_PATH"), 1);
    CHECK(strstr(err, "PW_TEST_PATH='relative' is not accepted (expected an absolute path); using /tmp") !=
          NULL);
    free(err);
    unsetenv("PW_TEST_PATH");
}

int main(void) {
    test_bad_log_level();
    test_choice();
    test_string();
    return pw_test_finish("core_env");
}
