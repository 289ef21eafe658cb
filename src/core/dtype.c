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
    [PW_Q6_K] = {"q6_K", 256, 210},
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
    if ((unsigned)t >= PW_DTYPE_COUNT_) return -1;
    return n / dtypes[t].block_elems * dtypes[t].block_bytes;
}

const char *pw_device_name(pw_device d) { return d == PW_DEVICE_CUDA ? "cuda" : "cpu"; }

pw_status pw_device_parse(const char *name, pw_device *out) {
    if (name && strcmp(name, "cpu") == 0) { *out = PW_DEVICE_CPU; return PW_OK; }
    if (name && strcmp(name, "cuda") == 0) { *out = PW_DEVICE_CUDA; return PW_OK; }
    return pw_error(PW_ERR_INVALID_ARG, "unknown device '%s' (expected cpu or cuda)",
                    name ? name : "(null)");
}

/* The CUDA backend, when built and a GPU is present, installs its probe. */
static bool (*cuda_probe)(void);
void pw_backend_set_cuda_probe(bool (*probe)(void)) { cuda_probe = probe; }
bool pw_cuda_available(void) { return cuda_probe && cuda_probe(); }
const char *pw_cuda_unavailable_reason(void) {
    if (!cuda_probe) return "this build has no CUDA backend (configure with nvcc and -DPW_CUDA=ON)";
    if (!cuda_probe()) return "no CUDA device is available on this machine";
    return "";
}

/* Read by the kernels; a plain int is enough since it is set before work. */
static int num_threads = 1;
void pw_set_num_threads(int n) { num_threads = n < 1 ? 1 : n; }
int pw_get_num_threads(void) { return num_threads; }
