/* Durations: the monotonic clock, which never jumps with the wall clock. */
#include "internal.h"

#include <time.h>

double pw_monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
