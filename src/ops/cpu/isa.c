/* Run-time choice between the baseline and the FMA kernel copies (isa.h). */
#include "ops/cpu/isa.h"

#include "internal.h"

#include <stdatomic.h>
#if PW_HAVE_FMA_KERNELS
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

/* PW_KERNEL_ISA: auto, or the highest copy to use. The int8 levels' names
 * are pw_k_isa_int8_name's; "avx2" runs the AVX2 copy of every kernel on a
 * CPU that has more (to measure the AVX2 path on an AVX-512 machine). */
enum { ISA_AUTO, ISA_GENERIC, ISA_AVX2, ISA_AVXVNNI, ISA_AVX512VNNI };

static int isa_cap(void) {
    /* 0 = not read yet; racing first calls read the same variable (one
     * warning: pw_env_choice warns once per bad value) */
    static _Atomic int cap;
    int c = atomic_load_explicit(&cap, memory_order_relaxed);
    if (c == 0) {
        static const char *const isa_names[] = {"auto",     "generic",     "avx2",
                                                "avx-vnni", "avx512-vnni", NULL};
        c = 1 + pw_env_choice("PW_KERNEL_ISA", isa_names, ISA_AUTO);
        atomic_store_explicit(&cap, c, memory_order_relaxed);
    }
    return c - 1;
}

static bool detect(void) {
    /* read in every build, so a bad value warns the same everywhere */
    bool forced_generic = isa_cap() == ISA_GENERIC;
#if PW_HAVE_FMA_KERNELS
    if (forced_generic) return false;
    __builtin_cpu_init();
    /* F16C (CPUID leaf 1, ECX bit 29) comes with every AVX2+FMA CPU, but a
     * virtual machine may hide it; clang's __builtin_cpu_supports does not
     * know it, so ask CPUID. */
    unsigned eax, ebx, ecx = 0, edx;
    bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) return true;
    /* The baseline copies compute every fused multiply-add with fmaf, which
     * is a library call per lane on such CPUs: same tokens, far slower. */
    pw_log_warn("this CPU lacks AVX2, FMA or F16C: the kernels run their portable copies, which "
                "return the same results but are much slower (docs/kernels.md)");
    return false;
#else
    (void)forced_generic;
    return false;
#endif
}

bool pw_k_isa_fma(void) {
    /* 0 = not decided yet, 1 = baseline, 2 = FMA. Racing first calls all
     * compute the same answer. */
    static _Atomic int choice;
    int c = atomic_load_explicit(&choice, memory_order_relaxed);
    if (c == 0) {
        c = detect() ? 2 : 1;
        atomic_store_explicit(&choice, c, memory_order_relaxed);
    }
    return c == 2;
}

/* ---- integer dot-product levels ---------------------------------------- */

#if PW_HAVE_FMA_KERNELS
/* AVX-VNNI: CPUID leaf 7 subleaf 1, EAX bit 4 (the VEX-encoded vpdpbusd);
 * asked of CPUID because older compilers' __builtin_cpu_supports does not
 * know it. The YMM state the OS must save is already checked by the AVX2
 * test behind pw_k_isa_fma(). */
static bool has_avxvnni(void) {
    unsigned eax, ebx, ecx, edx;
    if (__get_cpuid_max(0, NULL) < 7) return false;
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    return (eax & (1u << 4)) != 0;
}

/* AVX-512 F, BW, VL and VNNI; GCC's and clang's checks include the OS's
 * support for the ZMM state (XCR0). */
static bool has_avx512vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}
#endif

/* -1 = not decided yet, else 0 or 1; racing first calls compute the same */
static _Atomic int gfni_choice = -1;

bool pw_k_isa_gfni(void) {
    int c = atomic_load_explicit(&gfni_choice, memory_order_relaxed);
    if (c < 0) {
        c = 0;
#if PW_HAVE_FMA_KERNELS
        /* GFNI: CPUID leaf 7 subleaf 0, ECX bit 8 (asked of CPUID, as
         * AVX-VNNI is, for compilers whose __builtin_cpu_supports lacks it) */
        unsigned eax, ebx, ecx = 0, edx;
        if (__get_cpuid_max(0, NULL) >= 7) {
            __cpuid_count(7, 0, eax, ebx, ecx, edx);
            c = (ecx & (1u << 8)) != 0;
        }
#endif
        atomic_store_explicit(&gfni_choice, c, memory_order_relaxed);
    }
    return c == 1;
}

void pw_k_isa_gfni_set(bool on) {
    atomic_store_explicit(&gfni_choice, -1, memory_order_relaxed);
    if (!on || !pw_k_isa_gfni()) atomic_store_explicit(&gfni_choice, 0, memory_order_relaxed);
}

bool pw_k_isa_int8_runs(pw_k_int8_isa level) {
    switch (level) {
    case PW_K_INT8_GENERIC: return true;
#if PW_HAVE_FMA_KERNELS
    case PW_K_INT8_AVX2: return pw_k_isa_fma();
    case PW_K_INT8_AVXVNNI: return pw_k_isa_fma() && has_avxvnni();
    case PW_K_INT8_AVX512VNNI: return pw_k_isa_fma() && has_avx512vnni();
#endif
    default: return false;
    }
}

pw_k_int8_isa pw_k_isa_int8(void) {
    /* -1 = not decided yet. Racing first calls all compute the same answer. */
    static _Atomic int choice = -1;
    int c = atomic_load_explicit(&choice, memory_order_relaxed);
    if (c < 0) {
        c = PW_K_INT8_GENERIC;
        /* the best level at or below PW_KERNEL_ISA's */
        int top = PW_K_INT8_AVX512VNNI;
        switch (isa_cap()) {
        case ISA_AVX2: top = PW_K_INT8_AVX2; break;
        case ISA_AVXVNNI: top = PW_K_INT8_AVXVNNI; break;
        default: break;
        }
        for (int l = top; l > PW_K_INT8_GENERIC; l--)
            if (pw_k_isa_int8_runs((pw_k_int8_isa)l)) {
                c = l;
                break;
            }
        atomic_store_explicit(&choice, c, memory_order_relaxed);
    }
    return (pw_k_int8_isa)c;
}

const char *pw_k_isa_int8_name(pw_k_int8_isa level) {
    switch (level) {
    case PW_K_INT8_AVX2: return "avx2";
    case PW_K_INT8_AVXVNNI: return "avx-vnni";
    case PW_K_INT8_AVX512VNNI: return "avx512-vnni";
    default: return "generic";
    }
}
