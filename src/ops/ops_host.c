/* Host-side helpers of the op layer for the layers above: the model needs
 * a few numeric routines that are the kernels' own (so results agree bit
 * for bit with what the kernels compute) and to know which weight types a
 * device's kernels read, without naming a kernel header or a device. */
#include "ops/ops.h"

int32_t pw_ops_argmax_row(const float *row, int64_t n) { return pw_k_argmax_row(row, n); }

void pw_ops_rope_table(float *table, int64_t max_pos, int64_t head_dim, double theta) {
    pw_k_rope_table(table, max_pos, head_dim, theta);
}

size_t pw_ops_rope_table_floats(int64_t max_pos, int64_t head_dim) {
    return (size_t)max_pos * (size_t)head_dim;
}

bool pw_ops_reads_weight_dtype(pw_device device, pw_dtype dtype) {
    if (dtype == PW_F32) return true;
    /* The CPU kernels read the block-quantized types in place; the CUDA
     * kernels read f32 only (docs/cuda.md). */
    return device == PW_DEVICE_CPU && pw_k_quant_supported(dtype);
}
