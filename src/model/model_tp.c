/* Tensor parallelism for the Llama architecture (Megatron's split): which
 * slice of every layer a rank holds, and loading only that slice.
 *
 * The unit is the KV-head group: one KV head and the query heads that
 * attend with it. A rank holds whole groups [g0, g1) (pw_tp_shard_range:
 * balanced, uneven when the groups do not divide, e.g. 3 groups on 2
 * ranks), so
 *   - q, k, v are split by columns (their rows in GGUF: the group's heads),
 *     and attention and the KV cache hold only the rank's heads;
 *   - o is split by rows (its K): the shard of group g is the columns of
 *     g's query heads;
 *   - gate and up are split by columns and down by rows the same way, into
 *     as many shards as there are groups (ffn_dim / groups each).
 * o and down are then sums over shards. Every shard's partial product is
 * computed on its own (op matmul_shards) and the all-reduce sums them in
 * shard order (op all_reduce), so the order is a property of the model and
 * the tokens are the same at every degree, one process included.
 * The embedding table and the LM head stay whole on every rank.
 *
 * A row-parallel shard of a quantized weight must be whole blocks (32
 * values for Q8_0/Q4_0, 256 for the K-quants); a model whose shard width
 * is not is refused with the reason. */
#include "model/llama.h"

#include "model/gguf.h"
#include "ops/comm.h"

#include <inttypes.h>
#include <string.h>

pw_model_local pw_model_local_shape(const pw_model *m) {
    const pw_model_info *in = &m->info;
    pw_model_local l = {in->n_heads, in->n_kv_heads, in->ffn_dim};
    if (m->tp_size == 0) return l;
    int64_t groups = m->tp_g1 - m->tp_g0;
    l.n_kv_heads = groups;
    l.n_heads = groups * (in->n_heads / in->n_kv_heads);
    l.ffn_dim = groups * (in->ffn_dim / m->tp_groups);
    return l;
}

pw_status pw_model_tp_plan(pw_model *m, int tp_size, int tp_rank) {
    const pw_model_info *in = &m->info;
    if (m->arch != PW_ARCH_LLAMA)
        return pw_error(PW_ERR_UNSUPPORTED,
                        "tensor parallelism splits the llama architecture only; this model is "
                        "'%s'",
                        in->arch);
    if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size)
        return pw_error(PW_ERR_INVALID_ARG, "tensor parallel rank %d of %d", tp_rank, tp_size);
    int64_t groups = in->n_kv_heads;
    if (groups < 1 || in->n_heads % groups != 0)
        return pw_error(PW_ERR_FORMAT, "%" PRId64 " heads are not groups of %" PRId64 " KV heads",
                        in->n_heads, groups);
    if (tp_size > groups)
        return pw_error(PW_ERR_INVALID_ARG,
                        "--tp %d: the model has %" PRId64 " KV-head groups, and each rank needs "
                        "at least one (use --tp %" PRId64 " or less)",
                        tp_size, groups, groups);
    if (in->ffn_dim % groups != 0)
        return pw_error(PW_ERR_UNSUPPORTED,
                        "--tp: the feed-forward width %" PRId64 " is not %" PRId64
                        " equal shards (one per KV-head group)",
                        in->ffn_dim, groups);
    m->tp_size = tp_size;
    m->tp_rank = tp_rank;
    m->tp_groups = groups;
    pw_tp_shard_range(groups, tp_size, tp_rank, &m->tp_g0, &m->tp_g1);
    return PW_OK;
}

/* Weight `name` [d1 rows][d0] as shards of `width` of its d0 columns:
 * shards [s0, s1), each a contiguous [d1][width] matrix, one after the
 * other, in one tensor [(s1 - s0) * d1][width]. The shard boundaries must
 * fall on whole blocks of the stored type. */
static pw_status load_col_shards(pw_model *m, const char *name, int64_t d0, int64_t d1,
                                 int64_t width, int64_t s0, int64_t s1, bool keep,
                                 pw_tensor **out) {
    pw_tensor *full = NULL;
    size_t before = m->info.weight_bytes;
    PW_TRY(pw_model_load_weight(m, name, d0, d1, keep, &full));
    m->info.weight_bytes = before;
    pw_dtype t = pw_tensor_dtype(full);
    int64_t be = pw_dtype_block_elems(t);
    if (width % be != 0) {
        pw_tensor_release(full);
        return pw_error(PW_ERR_UNSUPPORTED,
                        "--tp: tensor '%s' (%s) cannot be split into shards of %" PRId64
                        " columns: a shard must be whole blocks of %" PRId64,
                        name, pw_dtype_name(t), width, be);
    }
    size_t full_row = (size_t)pw_dtype_row_bytes(t, d0);
    size_t shard_row = (size_t)pw_dtype_row_bytes(t, width);
    int64_t n = s1 - s0;
    uint8_t *buf = pw_host_alloc((size_t)(n * d1) * shard_row);
    if (!buf) {
        pw_tensor_release(full);
        return PW_ERR_OOM;
    }
    const uint8_t *src = pw_tensor_data(full);
    for (int64_t s = 0; s < n; s++) {
        size_t col = (size_t)pw_dtype_row_bytes(t, (s0 + s) * width);
        for (int64_t r = 0; r < d1; r++)
            memcpy(buf + (size_t)(s * d1 + r) * shard_row, src + (size_t)r * full_row + col,
                   shard_row);
    }
    /* the rest of the tensor is other ranks' (a no-op for a dequantized copy) */
    pw_gguf_release_pages(m->gguf, src, (size_t)d1 * full_row);
    pw_tensor_release(full);
    m->owned[m->n_owned++] = (float *)buf;
    int64_t shape[2] = {n * d1, width};
    PW_TRY(pw_tensor_wrap(buf, PW_DEVICE_CPU, t, 2, shape, out));
    m->info.weight_bytes += (size_t)(n * d1) * shard_row;
    return PW_OK;
}

pw_status pw_model_tp_load_layers(pw_model *m, bool keep) {
    const pw_model_info *in = &m->info;
    int64_t hd = in->head_dim, group_heads = in->n_heads / in->n_kv_heads;
    int64_t g0 = m->tp_g0, g1 = m->tp_g1, ng = g1 - g0;
    int64_t q_dim = in->n_heads * hd, kv_dim = in->n_kv_heads * hd;
    int64_t ffn_shard = in->ffn_dim / m->tp_groups;
    char name[96];
    for (int64_t l = 0; l < in->n_layers; l++) {
        pw_llama_layer *L = &m->layers[l];
        const pw_layer_weight whole[] = {
            {"attn_norm.weight", in->dim, 0, &L->attn_norm},
            {"ffn_norm.weight", in->dim, 0, &L->ffn_norm},
        };
        PW_TRY(pw_model_load_layer_weights(m, l, whole, PW_ARRAY_LEN(whole), keep));
        /* column-parallel: this rank's rows, in place in the mapping */
        const struct {
            const char *suffix;
            int64_t rows, row0, n;
            pw_tensor **dst;
        } cols[] = {
            {"attn_q.weight", q_dim, g0 * group_heads * hd, ng * group_heads * hd, &L->wq},
            {"attn_k.weight", kv_dim, g0 * hd, ng * hd, &L->wk},
            {"attn_v.weight", kv_dim, g0 * hd, ng * hd, &L->wv},
            {"ffn_gate.weight", in->ffn_dim, g0 * ffn_shard, ng * ffn_shard, &L->w_gate},
            {"ffn_up.weight", in->ffn_dim, g0 * ffn_shard, ng * ffn_shard, &L->w_up},
        };
        for (size_t i = 0; i < PW_ARRAY_LEN(cols); i++) {
            snprintf(name, sizeof name, "blk.%" PRId64 ".%s", l, cols[i].suffix);
            PW_TRY(pw_model_load_weight_rows(m, name, in->dim, cols[i].rows, cols[i].row0,
                                             cols[i].n, keep, cols[i].dst));
        }
        /* row-parallel: this rank's shards of K, copied out */
        snprintf(name, sizeof name, "blk.%" PRId64 ".attn_output.weight", l);
        PW_TRY(load_col_shards(m, name, q_dim, in->dim, group_heads * hd, g0, g1, keep, &L->wo));
        snprintf(name, sizeof name, "blk.%" PRId64 ".ffn_down.weight", l);
        PW_TRY(load_col_shards(m, name, in->ffn_dim, in->dim, ffn_shard, g0, g1, keep,
                               &L->w_down));
    }
    return PW_OK;
}
