/* The host-side helpers ops.h exports to the model layer: they are the
 * CPU kernels' own functions, so the model's rules (which weights stay
 * quantized, the rope table, the argmax tie rule) are the kernels' rules. */
#include "ops/cpu/kernels.h"
#include "ops/ops.h"

bool pw_op_quantized_weight_supported(pw_dtype type) { return pw_k_quant_supported(type); }

void pw_op_rope_table(float *table, int64_t max_pos, int64_t head_dim, double theta) {
    pw_k_rope_table(table, max_pos, head_dim, theta);
}

int32_t pw_op_argmax_row(const float *row, int64_t n) { return pw_k_argmax_row(row, n); }
