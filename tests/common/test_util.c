#include "test_util.h"

#include <unistd.h>

int pw_test_failures = 0;
int pw_test_checks = 0;
int pw_test_skipped_parts = 0;

int pw_test_finish(const char *name) {
    if (pw_test_failures) {
        fprintf(stderr, "%s: %d of %d checks FAILED\n", name, pw_test_failures, pw_test_checks);
        return 1;
    }
    /* A part that could not run makes the whole test a skip, never a pass. */
    if (pw_test_skipped_parts) {
        printf("SKIP: %s: %d checks passed, %d part(s) skipped (see above)\n", name,
               pw_test_checks, pw_test_skipped_parts);
        return 77;
    }
    /* A test that checked nothing proved nothing: it must check or skip. */
    if (pw_test_checks == 0) {
        fprintf(stderr, "%s: no checks were made (a test that cannot run must skip)\n", name);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, pw_test_checks);
    return 0;
}

void pw_test_skip_part(const char *what) {
    printf("SKIP (part): %s\n", what);
    pw_test_skipped_parts++;
}

void pw_test_skip(const char *reason) {
    /* a check that failed before the skip still fails the test */
    if (pw_test_failures) {
        fprintf(stderr, "%d of %d checks FAILED before the skip (%s)\n", pw_test_failures,
                pw_test_checks, reason);
        exit(1);
    }
    printf("SKIP: %s\n", reason);
    exit(77);
}

char *pw_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len) *len = (size_t)n;
    }
    return buf;
}

const char *pw_test_shared_path(const char *rel, char *buf, size_t cap) {
    const char *dir = getenv("PW_SHARED_DIR");
#ifdef PW_SHARED_DIR
    if (!dir) dir = PW_SHARED_DIR;
#endif
    if (!dir) return NULL;
    snprintf(buf, cap, "%s/%s", dir, rel);
    FILE *f = fopen(buf, "rb");
    if (!f) return NULL;
    fclose(f);
    return buf;
}

const char *pw_test_model_path(const char *env, const char *file, char *buf, size_t cap) {
    const char *path = getenv(env);
    if (path) {
        snprintf(buf, cap, "%s", path);
    } else {
        snprintf(buf, cap, "%s/../../models/%s", PW_TEST_DATA_DIR, file);
    }
    FILE *f = fopen(buf, "rb");
    if (!f) return NULL;
    fclose(f);
    return buf;
}

const char *pw_test_source_root(char *buf, size_t cap) {
    /* __FILE__ is <root>/tests/common/test_util.c */
    snprintf(buf, cap, "%s", __FILE__);
    for (int i = 0; i < 3; i++) {
        char *slash = strrchr(buf, '/');
        if (slash) *slash = '\0';
    }
    return buf;
}

char *pw_test_run_printing(int (*fn)(void), int *rc) {
    char path[] = "/tmp/pw_test_stdout_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    *rc = fn();
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(fd);
    size_t len = 0;
    char *printed = pw_test_read_file(path, &len);
    unlink(path);
    return printed;
}
