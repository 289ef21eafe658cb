/* The kernel-set registry: which set runs each device's launches. The one
 * place that knows which kernel sets this build has. */
#include "ops/kernel_set.h"

#include "ops/cpu/isa.h"
#include "ops/kernel_args.h"
#include "pw_config.h"

#include <stddef.h>
#include <stdio.h>

const pw_kernel_set *pw_kernel_set_for(pw_device device) {
    static const pw_kernel_set *const sets[] = {
        [PW_DEVICE_CPU] = &pw_kernel_set_cpu,
#if PW_HAVE_CUDA
        [PW_DEVICE_CUDA] = &pw_kernel_set_cuda,
#endif
    };
    return (unsigned)device < sizeof sets / sizeof sets[0] ? sets[device] : NULL;
}

static const char *const kernel_names[PW_KERNEL_COUNT_] = {
#define KERNEL_NAME_(id, name) [PW_KERNEL_##id] = #name,
    PW_KERNEL_TABLE(KERNEL_NAME_)
#undef KERNEL_NAME_
};

const char *pw_kernel_id_name(int id) {
    return id >= 0 && id < PW_KERNEL_COUNT_ ? kernel_names[id] : NULL;
}

/* ---- argument layouts --------------------------------------------------------------- */

#define LAYOUT_OFFSET_(type, field) (uint16_t) offsetof(type, field),
#define LAYOUT_COUNT_(type, field) +1
#define LAYOUT_(id, type)                                                                      \
    [PW_KERNEL_##id] = {sizeof(type), 0 PW_K_POINTERS_##id(LAYOUT_COUNT_),                     \
                        {PW_K_POINTERS_##id(LAYOUT_OFFSET_)}},
static const pw_kernel_arg_layout arg_layouts[PW_KERNEL_COUNT_] = {PW_KERNEL_ARG_LAYOUTS(LAYOUT_)};
#undef LAYOUT_
#undef LAYOUT_COUNT_
#undef LAYOUT_OFFSET_

/* Every kernel of the op table has a layout, and no list outgrows the array. */
#define LAYOUT_CHECK_(id, type)                                                                \
    _Static_assert(0 PW_K_POINTERS_##id(LAYOUT_COUNT_CHECK_) <= PW_KERNEL_MAX_POINTERS,         \
                   "too many pointer fields in " #type);
#define LAYOUT_COUNT_CHECK_(type, field) +1
PW_KERNEL_ARG_LAYOUTS(LAYOUT_CHECK_)
#undef LAYOUT_COUNT_CHECK_
#undef LAYOUT_CHECK_
#define LAYOUT_ONE_(id, type) +1
_Static_assert(0 PW_KERNEL_ARG_LAYOUTS(LAYOUT_ONE_) == PW_KERNEL_COUNT_,
               "PW_KERNEL_ARG_LAYOUTS must list every kernel of PW_KERNEL_TABLE");
#undef LAYOUT_ONE_

const pw_kernel_arg_layout *pw_kernel_arg_layout_of(int id) {
    return id >= 0 && id < PW_KERNEL_COUNT_ ? &arg_layouts[id] : NULL;
}

int pw_kernel_set_find(const pw_kernel_set *set, const pw_kernel *k) {
    if (!set || !k) return -1;
    for (int i = 0; i < PW_KERNEL_COUNT_; i++)
        if (set->entries[i].kernel == k) return i;
    return -1;
}

void pw_kernel_set_variant(pw_device device, char *buf, size_t cap) {
    const pw_kernel_set *set = pw_kernel_set_for(device);
    snprintf(buf, cap, "%s %s int8=%s", set ? set->name : "none",
             pw_k_isa_fma() ? "fma" : "generic", pw_k_isa_int8_name(pw_k_isa_int8()));
}
