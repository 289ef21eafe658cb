/* Shared helpers for the libFuzzer targets (fuzz/fuzz_*.c). A finding is a
 * crash, a sanitizer report, or abort() from FUZZ_CHECK when an invariant
 * that must hold for every input (a round trip, a differential check) does
 * not. Errors returned by the library are the expected outcome for most
 * inputs and are not findings. */
#ifndef PW_FUZZ_COMMON_H
#define PW_FUZZ_COMMON_H

#include "piecewise_llm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                                  \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* Inputs beyond this are cut: the parsers are linear, so longer inputs
 * only slow the fuzzer down without reaching new code. */
#define FUZZ_MAX_TEXT (64 * 1024)

#endif
