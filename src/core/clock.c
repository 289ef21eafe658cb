/* Durations: the monotonic clock, which never jumps with the wall clock,
 * and sleeping on it. */
#include "internal.h"

#include <errno.h>
#include <time.h>

double pw_monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pw_sleep_seconds(double seconds) {
    if (!(seconds > 0)) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
