/* The kernel-set registry: which set runs each device's launches. The one
 * place that knows which kernel sets this build has. */
#include "ops/kernel_set.h"

#include "ops/cpu/isa.h"
#include "ops/kernel_args.h"
#include "piecewise/extend.h"
#include "pw_config.h"

#include <stddef.h>
#include <stdio.h>

const pw_kernel_set *pw_kernel_set_for(pw_device device) {
    /* a backend may run another device's kernels (the CPU's, emulated) */
    device = pw_device_kernel_device(device);
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

/* ---- argument layouts: from the field tables of ops/kernel_args.h ------------------------ */

#define ADDRESS_OFFSET_(S, type, name) (uint16_t) offsetof(S, name),
#define ADDRESS_COUNT_(S, type, name) +1
#define SKIP_(S, type, name)
#define LAYOUT_(id, S, FIELDS)                                                                 \
    [PW_KERNEL_##id] = {sizeof(S), 0 FIELDS(ADDRESS_COUNT_, SKIP_, S),                         \
                        {FIELDS(ADDRESS_OFFSET_, SKIP_, S)}, pw_kernel_word_extent},
const pw_kernel_args pw_kernel_arg_tables[PW_KERNEL_COUNT_] = {PW_KERNEL_ARG_TABLES(LAYOUT_)};
#undef LAYOUT_

/* What the tables declare is what the structs hold: a value field must be
 * a number, so an address cannot be declared as a value and be left out of
 * the layout, and an address field must be a pointer. Every kernel of the
 * op table has a table, and none outgrows PW_KERNEL_MAX_ADDRESSES. */
#define IS_NUMBER_(S, name)                                                                    \
    _Generic(((S *)0)->name, int64_t: 1, int32_t: 1, float: 1, double: 1, pw_dtype: 1, default: 0)
#define CHECK_VALUE_(S, type, name)                                                            \
    _Static_assert(IS_NUMBER_(S, name), #S "." #name " is declared a value (V) but is not a "   \
                                        "number: declare an address with A");
#define CHECK_ADDRESS_(S, type, name)                                                          \
    _Static_assert(!IS_NUMBER_(S, name) && sizeof(((S *)0)->name) == sizeof(void *),           \
                   #S "." #name " is declared an address (A) but is not a pointer");
#define CHECK_(id, S, FIELDS)                                                                  \
    FIELDS(CHECK_ADDRESS_, CHECK_VALUE_, S)                                                    \
    _Static_assert(0 FIELDS(ADDRESS_COUNT_, SKIP_, S) <= PW_KERNEL_MAX_ADDRESSES,              \
                   "too many address fields in " #S);
PW_KERNEL_ARG_TABLES(CHECK_)
#undef CHECK_
#undef CHECK_ADDRESS_
#undef CHECK_VALUE_
#undef IS_NUMBER_
#undef SKIP_
#undef ADDRESS_COUNT_
#undef ADDRESS_OFFSET_
#define ONE_(id, S, FIELDS) +1
_Static_assert(0 PW_KERNEL_ARG_TABLES(ONE_) == PW_KERNEL_COUNT_,
               "PW_KERNEL_ARG_TABLES must list every kernel of PW_KERNEL_TABLE");
#undef ONE_

const pw_kernel_args *pw_kernel_args_of(int id) {
    return id >= 0 && id < PW_KERNEL_COUNT_ ? &pw_kernel_arg_tables[id] : NULL;
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
