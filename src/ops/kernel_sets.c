/* The kernel-set registry: which set runs each device's launches. The one
 * place that knows which kernel sets this build has. */
#include "ops/kernel_set.h"

#include "pw_config.h"

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
