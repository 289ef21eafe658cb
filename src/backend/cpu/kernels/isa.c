/* Run-time choice between the baseline and the FMA kernel copies (isa.h). */
#include "backend/cpu/kernels/isa.h"

#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static bool detect(void) {
#if PW_HAVE_FMA_KERNELS
    const char *forced = getenv("PW_KERNEL_ISA");
    if (forced && strcmp(forced, "generic") == 0) return false;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return true;
    /* The baseline copies compute every fused multiply-add with fmaf, which
     * is a library call per lane on such CPUs: same tokens, far slower. */
    pw_log_warn("this CPU lacks AVX2 or FMA: the kernels run their portable copies, which "
                "return the same results but are much slower (docs/kernels.md)");
    return false;
#else
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
