/* Run-time choice between the baseline and the FMA kernel copies (isa.h). */
#include "ops/cpu/isa.h"

#include "internal.h"

#include <stdatomic.h>
#if PW_HAVE_FMA_KERNELS
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

static bool detect(void) {
    /* read in every build, so a bad value warns the same everywhere */
    static const char *const isa_names[] = {"auto", "generic", NULL};
    bool forced_generic = pw_env_choice("PW_KERNEL_ISA", isa_names, 0) == 1;
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
