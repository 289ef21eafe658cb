#include "internal.h"

#include <string.h>

typedef struct dtype_info {
    const char *name;
    int64_t block_elems;
    int64_t block_bytes;
} dtype_info;

static const dtype_info dtypes[PW_DTYPE_COUNT_] = {
    [PW_F32] = {"f32", 1, 4},    [PW_F16] = {"f16", 1, 2},     [PW_BF16] = {"bf16", 1, 2},
    [PW_I32] = {"i32", 1, 4},    [PW_I64] = {"i64", 1, 8},     [PW_U8] = {"u8", 1, 1},
    [PW_Q8_0] = {"q8_0", 32, 34}, [PW_Q4_0] = {"q4_0", 32, 18}, [PW_Q4_1] = {"q4_1", 32, 20},
    [PW_Q5_0] = {"q5_0", 32, 22}, [PW_Q5_1] = {"q5_1", 32, 24}, [PW_Q2_K] = {"q2_K", 256, 84},
    [PW_Q3_K] = {"q3_K", 256, 110}, [PW_Q4_K] = {"q4_K", 256, 144}, [PW_Q5_K] = {"q5_K", 256, 176},
    [PW_Q6_K] = {"q6_K", 256, 210}, [PW_Q4_0X16] = {"q4_0x16", 32, 18},
};

const char *pw_dtype_name(pw_dtype t) {
    return (unsigned)t < PW_DTYPE_COUNT_ ? dtypes[t].name : "?";
}
int64_t pw_dtype_block_elems(pw_dtype t) {
    return (unsigned)t < PW_DTYPE_COUNT_ ? dtypes[t].block_elems : 0;
}
int64_t pw_dtype_block_bytes(pw_dtype t) {
    return (unsigned)t < PW_DTYPE_COUNT_ ? dtypes[t].block_bytes : 0;
}
int64_t pw_dtype_row_bytes(pw_dtype t, int64_t n) {
    if ((unsigned)t >= PW_DTYPE_COUNT_ || n < 0) return -1;
    int64_t blocks = n / dtypes[t].block_elems;
    if (blocks > INT64_MAX / dtypes[t].block_bytes) return -1; /* sizes from a file */
    return blocks * dtypes[t].block_bytes;
}

static const char *const device_names[PW_DEVICE_COUNT_] = {
    [PW_DEVICE_CPU] = "cpu", [PW_DEVICE_CUDA] = "cuda", [PW_DEVICE_EMU] = "emu"};

const char *pw_device_name(pw_device d) {
    return (unsigned)d < PW_DEVICE_COUNT_ ? device_names[d] : "unknown";
}

pw_status pw_device_parse(const char *name, pw_device *out) {
    for (int d = 0; name && d < PW_DEVICE_COUNT_; d++)
        if (strcmp(name, device_names[d]) == 0) {
            *out = (pw_device)d;
            return PW_OK;
        }
    return pw_error(PW_ERR_INVALID_ARG, "unknown device '%s' (expected cpu, cuda or emu)",
                    name ? name : "(null)");
}

pw_device pw_device_from_env(void) {
    const char *names[PW_DEVICE_COUNT_ + 1];
    for (int d = 0; d < PW_DEVICE_COUNT_; d++) names[d] = device_names[d];
    names[PW_DEVICE_COUNT_] = NULL;
    return (pw_device)pw_env_choice("PW_DEVICE", names, PW_DEVICE_CPU);
}

/* Read by the kernels; a plain int is enough since it is set before work. */
static int num_threads = 1;
void pw_set_num_threads(int n) { num_threads = n < 1 ? 1 : n; }
int pw_get_num_threads(void) { return num_threads; }
