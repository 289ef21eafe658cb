/* PW_KERNEL_ISA=avx2 caps the kernels at their AVX2 copies on a CPU that
 * has more (so the AVX2 path can be measured on an AVX-512 machine), and
 * the copies a test may call directly stay available. */
#include "ops/cpu/isa.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

int main(void) {
    /* before any kernel runs: the choice is made once per process */
    CHECK(setenv("PW_KERNEL_ISA", "avx2", 1) == 0);
    if (!pw_k_isa_fma()) {
        /* no AVX2 here (or the build has no such copies): the cap leaves the
         * portable copies */
        CHECK_EQ_INT(pw_k_isa_int8(), PW_K_INT8_GENERIC);
        pw_test_skip("CPU or build without AVX2 copies: only the portable cap checked");
    }
    CHECK_EQ_INT(pw_k_isa_int8(), PW_K_INT8_AVX2);
    CHECK_STREQ(pw_k_isa_int8_name(pw_k_isa_int8()), "avx2");
    /* what the CPU runs is unchanged: the tests still compare every copy */
    if (pw_k_isa_int8_runs(PW_K_INT8_AVX512VNNI))
        printf("AVX-512 VNNI CPU: the AVX2 copy chosen all the same\n");
    CHECK(pw_k_isa_int8_runs(PW_K_INT8_AVX2));
    return pw_test_finish("kernels_isa_cap");
}
