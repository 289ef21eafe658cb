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
#elif defined(PW_ISA_AVXVNNI_COPY)
#define PW_ISA(fn) fn##_avxvnni
#elif defined(PW_ISA_AVX512VNNI_COPY)
#define PW_ISA(fn) fn##_avx512vnni
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

/* Integer dot-product levels (the quantized matmul, matmul_quant_body.h):
 * besides NAME.c and NAME_fma.c (AVX2: vpmaddubsw + vpmaddwd), a kernel may
 * have NAME_avxvnni.c (built with AVX-VNNI: vpdpbusd on 256 bits) and
 * NAME_avx512vnni.c (AVX-512 F/BW/VL + VNNI: vpdpbusd on 256 bits with 32
 * registers). All return the same bits: integer sums are exact whatever
 * instruction forms them, and the float steps are the same operations. */
typedef enum pw_k_int8_isa {
    PW_K_INT8_GENERIC = 0,
    PW_K_INT8_AVX2 = 1,
    PW_K_INT8_AVXVNNI = 2,
    PW_K_INT8_AVX512VNNI = 3,
} pw_k_int8_isa;
/* The best level this CPU runs: GENERIC when pw_k_isa_fma() is false
 * (PW_KERNEL_ISA=generic included), else AVX2 or a VNNI level it has, at
 * most the one PW_KERNEL_ISA names (avx2, avx-vnni, avx512-vnni).
 * Decided once per process. */
pw_k_int8_isa pw_k_isa_int8(void);
/* Whether this CPU (and build) can run a given level's copy; tests call
 * every copy that runs and compare them. */
bool pw_k_isa_int8_runs(pw_k_int8_isa level);
/* "generic", "avx2", "avx-vnni", "avx512-vnni". */
const char *pw_k_isa_int8_name(pw_k_int8_isa level);
/* Whether the AVX-512 VNNI copy may use GFNI's affine byte transform
 * (vgf2p8affineqb, in its Q6_K decode tile): the CPU has it (AMD Zen 4,
 * Intel Ice Lake and later; not Cascade Lake), unless a test turned it off
 * with pw_k_isa_gfni_set(false) to run the path without it, which returns
 * the same bits. Decided once per process. */
bool pw_k_isa_gfni(void);
void pw_k_isa_gfni_set(bool on);

#endif
