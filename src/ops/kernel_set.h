/* Kernel sets: one per device, each a table of that device's kernels
 * indexed by the op table's kernel ids (ops/op_table.h). The ops layer binds
 * an op's launch to a kernel by pointer through pw_kernel_set_for(device):
 * no kernel is looked up by name, and the op code never asks which device
 * it runs on, only what the set has.
 *
 * A set lacking a kernel has a NULL entry. Fused kernels are optional (the
 * fused ops launch their constituent kernels one by one on a set without
 * them); any other missing kernel makes the op that needs it fail with
 * PW_ERR_UNSUPPORTED naming the set and the kernel. */
#ifndef PW_OPS_KERNEL_SET_H
#define PW_OPS_KERNEL_SET_H

#include "piecewise.h"
#include "ops/op_table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pw_kernel_entry {
    const pw_kernel *kernel; /* NULL: the set has no such kernel */
    /* Bytes of scratch a launch with these args needs (its args' `scratch`
     * field, still NULL when asked); NULL: it never needs any. */
    size_t (*scratch_bytes)(const void *args);
} pw_kernel_entry;

typedef struct pw_kernel_set {
    const char *name; /* "cpu", "cuda": for messages */
    pw_kernel_entry entries[PW_KERNEL_COUNT_];
} pw_kernel_set;

/* The kernel set of a device; NULL when this build has none for it. */
const pw_kernel_set *pw_kernel_set_for(pw_device device);

/* "matmul", "qkv_rope", ...: the kernel table's name of id; NULL when out of range. */
const char *pw_kernel_id_name(int id);

/* The argument layout of kernel id (the one its kernels carry as
 * pw_kernel.args); NULL when id is out of range. */
const pw_kernel_args *pw_kernel_args_of(int id);

/* The id of kernel k in set, or -1 when the set has no such kernel. */
int pw_kernel_set_find(const pw_kernel_set *set, const pw_kernel *k);

/* Which copy of the device's kernels this process runs, as text ("cpu fma
 * int8=avx512-vnni"): part of a stored graph's key, since the copies lay
 * out their scratch differently. */
void pw_kernel_set_variant(pw_device device, char *buf, size_t cap);

/* The sets themselves (src/ops/cpu/kernel_set.c, src/ops/cuda/cuda_kernels.cu). */
extern const pw_kernel_set pw_kernel_set_cpu;
extern const pw_kernel_set pw_kernel_set_cuda; /* only in builds with the CUDA backend */

#ifdef __cplusplus
}
#endif

#endif
