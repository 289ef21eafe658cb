/* The test harness itself (tests/common/test_util.c): a test that checked
 * nothing fails, a test with a skipped part reports a skip (77), never a
 * pass, and a skip after a failed check fails. */
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

/* pw_test_finish on the given counters; the real ones are put back. */
static int finish_with(int checks, int failures, int skipped) {
    int c = pw_test_checks, f = pw_test_failures, s = pw_test_skipped_parts;
    pw_test_checks = checks;
    pw_test_failures = failures;
    pw_test_skipped_parts = skipped;
    fflush(stdout);
    int rc = pw_test_finish("harness (simulated)");
    pw_test_checks = c;
    pw_test_failures = f;
    pw_test_skipped_parts = s;
    return rc;
}

/* The exit status of a child that calls pw_test_skip after `failures`
 * failed checks. */
static int skip_status(int failures) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        pw_test_failures = failures;
        pw_test_skip("simulated");
        _exit(3); /* not reached */
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

int main(void) {
    CHECK_EQ_INT(finish_with(0, 0, 0), 1);  /* nothing checked: fails */
    CHECK_EQ_INT(finish_with(5, 0, 0), 0);  /* checked, all passed */
    CHECK_EQ_INT(finish_with(5, 1, 0), 1);  /* a failure */
    CHECK_EQ_INT(finish_with(5, 0, 1), 77); /* a part skipped: a skip, not a pass */
    CHECK_EQ_INT(finish_with(0, 0, 1), 77); /* nothing could run: a skip */
    CHECK_EQ_INT(finish_with(5, 1, 1), 1);  /* a failure wins over a skip */
    CHECK_EQ_INT(skip_status(0), 77);
    CHECK_EQ_INT(skip_status(2), 1);
    return pw_test_finish("core_harness");
}
