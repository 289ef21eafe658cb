/* Shared helpers for the kernel tests: deterministic random data and
 * bitwise comparison. */
#ifndef PW_KERNEL_TEST_UTIL_H
#define PW_KERNEL_TEST_UTIL_H

#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KT_LEN(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t kt_rng_state = 0x9e3779b97f4a7c15ULL;

static inline void kt_seed(uint64_t s) { kt_rng_state = s * 0x9e3779b97f4a7c15ULL + 1; }

static inline uint32_t kt_next(void) {
    kt_rng_state ^= kt_rng_state << 13;
    kt_rng_state ^= kt_rng_state >> 7;
    kt_rng_state ^= kt_rng_state << 17;
    return (uint32_t)(kt_rng_state >> 16);
}

/* Uniform in [-1, 1). */
static inline float kt_uniform(void) { return (float)(kt_next() & 0xffffff) / 8388608.0f - 1.0f; }

static inline float *kt_random(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = kt_uniform();
    return p;
}

static inline float *kt_zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static inline bool kt_bitwise_equal(const void *a, const void *b, size_t bytes) {
    return memcmp(a, b, bytes) == 0;
}

/* Largest |a-b| / (1 + |b|). */
static inline double kt_max_rel_err(const float *a, const double *ref, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
    return worst;
}

#endif
