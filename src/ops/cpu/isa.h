/* Instruction-set variants of the CPU kernels (private to this folder).
 *
 * A kernel whose inner loops gain from fused multiply-adds keeps those
 * loops in a body file (NAME_body.h) that is compiled twice: once by
 * NAME.c for the baseline ISA and once by NAME_fma.c, which CMake builds
 * with -mavx2 -mfma -mf16c on x86-64 (every CPU with AVX2 and FMA has
 * F16C). PW_ISA(fn) gives each copy its own symbol, and pw_k_isa_fma()
 * picks one at run time.
 *
 * Both copies return the same bits: the body multiplies and adds only
 * through pw_v8_madd / pw_madd (vec_math.h), which are a single rounding
 * everywhere (the FMA instruction in one copy, the correctly rounded C
 * fmaf in the other). The baseline copy is slow on CPUs without FMA (fmaf
 * is then a library call per lane); it is there so such machines compute
 * the same tokens, not to be fast. */
#ifndef PW_KERNELS_ISA_H
#define PW_KERNELS_ISA_H

#include "pw_config.h"

#include <stdbool.h>

/* The copy a file builds is fixed by the file, not by the compiler flags
 * (a -march=native build defines __FMA__ in the baseline file too): a
 * NAME_fma.c file defines PW_ISA_FMA_COPY before including anything. */
#if defined(PW_ISA_FMA_COPY)
#define PW_ISA(fn) fn##_fma
#else
#define PW_ISA(fn) fn##_generic
#endif

/* True when the FMA copies are built and this CPU runs them (AVX2, FMA, F16C),
 * unless PW_KERNEL_ISA=generic is set in the environment, which forces the
 * baseline copies (tests compare the two). Decided once per process. */
bool pw_k_isa_fma(void);

/* Calls the FMA copy of a body function where it runs, else the baseline
 * copy: PW_ISA_CALL(fn, args...) for a function declared through
 * PW_ISA_DECLARE. */
#if PW_HAVE_FMA_KERNELS
#define PW_ISA_CALL(fn, ...) (pw_k_isa_fma() ? fn##_fma(__VA_ARGS__) : fn##_generic(__VA_ARGS__))
#define PW_ISA_DECLARE(ret, fn, params) ret fn##_fma params; ret fn##_generic params
#else
#define PW_ISA_CALL(fn, ...) fn##_generic(__VA_ARGS__)
#define PW_ISA_DECLARE(ret, fn, params) ret fn##_generic params
#endif

#endif
