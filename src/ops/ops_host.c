/* The host-side helpers ops.h exports to the model layer: they are the
 * CPU kernels' own functions, so the model's rules (which weights stay
 * quantized, the rope table, the argmax tie rule) are the kernels' rules,
 * and the model never names a kernel header or a device. */
#include "ops/cpu/kernels.h"
#include "ops/kernel_set.h"
#include "ops/ops.h"

#include <string.h>

bool pw_op_quantized_weight_supported(pw_dtype type) { return pw_k_quant_supported(type); }

pw_dtype pw_op_preferred_weight_dtype(pw_dtype type, int64_t rows, int64_t cols) {
    (void)cols;
    return type == PW_Q4_0 && rows >= PW_K_Q40X16_ROWS ? PW_Q4_0X16 : type;
}

int64_t pw_op_weight_row_group(pw_dtype type) {
    return type == PW_Q4_0X16 ? PW_K_Q40X16_ROWS : 1;
}

bool pw_op_convert_weight(void *dst, const void *src, pw_dtype from, pw_dtype to, int64_t rows,
                          int64_t cols) {
    if (from == PW_Q4_0 && to == PW_Q4_0X16) pw_k_q4_0_interleave(dst, src, rows, cols);
    else if (from == PW_Q4_0X16 && to == PW_Q4_0) pw_k_q4_0_deinterleave(dst, src, rows, cols);
    else if (from == to) memcpy(dst, src, (size_t)pw_dtype_row_bytes(from, cols) * (size_t)rows);
    else return false;
    return true;
}

void pw_op_rope_table(float *table, int64_t max_pos, int64_t head_dim, double theta) {
    pw_k_rope_table(table, max_pos, head_dim, theta);
}

void pw_op_rope_table_scaled(float *table, int64_t max_pos, int64_t head_dim, double theta,
                             const float *freq_factors, double freq_scale) {
    pw_k_rope_table_scaled(table, max_pos, head_dim, theta, freq_factors, freq_scale);
}

size_t pw_op_rope_table_floats(int64_t max_pos, int64_t head_dim) {
    return (size_t)max_pos * (size_t)head_dim;
}

int32_t pw_op_argmax_row(const float *row, int64_t n) { return pw_k_argmax_row(row, n); }

bool pw_op_reads_weight_dtype(pw_device device, pw_dtype dtype) {
    if (dtype == PW_F32) return true;
    /* A block-quantized weight is read in place only by a kernel set that
     * has the quantized kernels; otherwise the caller supplies f32. */
    const pw_kernel_set *set = pw_kernel_set_for(device);
    return set && set->entries[PW_KERNEL_MATMUL_QUANT].kernel &&
           set->entries[PW_KERNEL_EMBEDDING_QUANT].kernel && pw_k_quant_supported(dtype) &&
           (dtype != PW_Q4_0X16 || set == pw_kernel_set_for(PW_DEVICE_CPU));
}
