/* Tensor parallelism and the fixed summation order of the Llama and
 * Gemma 3 architectures (Megatron's split): the shard counts that fix the
 * order, which slice of every weight a rank holds, and loading only that
 * slice.
 *
 * The order. o and down are sums over their K dimension; it is cut into
 * shards whose number is a property of the model (never of the number of
 * ranks), every shard's partial product is computed on its own (op
 * matmul_shards) and the all-reduce sums them in shard order (op
 * all_reduce). Every load of these architectures uses it, one process
 * without --tp included, so the tokens are the same bits at every degree.
 *   - o: tp_o_shards shards of whole query heads, the smallest divisor of
 *     the head count that reaches PW_TP_SHARDS (or every head when there
 *     are fewer), whose width is whole quantization blocks;
 *   - down: tp_ffn_shards shards of the feed-forward width, the largest
 *     divisor of it up to PW_TP_SHARDS whose width is whole blocks.
 * The largest degree is the smaller of the two counts.
 *
 * The split. A rank holds a contiguous run of o's shards (its query heads)
 * and of down's (its feed-forward columns), and
 *   - q is split by columns (its heads' rows), and so are gate and up;
 *   - k and v: the KV heads its query heads attend with. While there are at
 *     least as many KV-head groups as ranks, ranks own whole groups
 *     (pw_tp_shard_range's unit). With more ranks than groups a KV head is
 *     replicated on every rank whose query heads use it, as vLLM does
 *     (Gemma 3 270M: 1 KV head, 4 query heads, --tp 4 holds it 4 times);
 *     a rank whose heads cross a group boundary without whole groups
 *     (SmolLM2 at --tp 4: heads 2-3 of groups 0-2) holds one copy per query
 *     head;
 *   - o and down by rows (their K): a rank's shards copied out of the
 *     mapping (a shard is a run of columns of every row). One process keeps
 *     them whole in the mapping instead (no copy at load; PW_SHARDS=copy
 *     copies them as a rank does): matmul_shards reads each shard where it
 *     lies, its rows a whole row apart (the kernels' row stride), decode's
 *     tiles a few rows across every shard in one pass, with the same bits;
 *   - the embedding and the LM head by vocabulary rows (above one rank),
 *     gathered after the lookup and after the head (ops embedding_vocab,
 *     lm_head_vocab): no sum, so no change of bits.
 * Norms (Gemma's per-head q/k norms included) are whole on every rank. */
#include "model/llama.h"

#include "model/gguf.h"
#include "model/model_ir.h"
#include "ops/comm.h"

#include <inttypes.h>
#include <string.h>

/* The number of shards the fixed order aims at for each row-parallel
 * product: the largest degree it allows (where the model's shapes let it),
 * and the cost on one process (shorter products; docs/tensor-parallel.md
 * measures it). */
#define PW_TP_SHARDS 4

/* How one process holds o's and down's shards: read in place from the
 * mapping (default) or copied (load_col_shards). */
#define PW_ENV_SHARDS "PW_SHARDS"

bool pw_model_tp_supported(pw_model_arch arch) {
    return arch == PW_ARCH_LLAMA || arch == PW_ARCH_GEMMA3;
}

int64_t pw_model_weight_col_shards(const pw_model *m, const pw_tensor *w) {
    if (m->tp_size < 1 || !w || pw_tensor_ndim(w) != 2) return 0;
    const pw_model_info *in = &m->info;
    for (int64_t l = 0; l < in->n_layers; l++) {
        const pw_llama_layer *L = &m->layers[l];
        if (w == L->wo && pw_tensor_dim(w, 1) == in->n_heads * in->head_dim) return m->tp_o_shards;
        if (w == L->w_down && pw_tensor_dim(w, 1) == in->ffn_dim) return m->tp_ffn_shards;
    }
    return 0;
}

pw_model_local pw_model_local_shape(const pw_model *m) {
    const pw_model_info *in = &m->info;
    pw_model_local l = {in->n_heads, in->n_kv_heads, in->ffn_dim};
    if (m->tp_size == 0) return l;
    l.n_heads = m->tp_h1 - m->tp_h0;
    l.n_kv_heads = m->tp_kv_per_head ? l.n_heads : m->tp_kv1 - m->tp_kv0;
    l.ffn_dim = (m->tp_f1 - m->tp_f0) * (in->ffn_dim / m->tp_ffn_shards);
    return l;
}

/* The largest block (in values) of tensor blk.<l>.<suffix> over the layers:
 * a K-shard must be whole blocks in every layer. */
static int64_t largest_block(const pw_model *m, const char *suffix) {
    int64_t be = 1;
    char name[96];
    for (int64_t l = 0; l < m->info.n_layers; l++) {
        const pw_gguf_tensor *t;
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", l, suffix);
        if (pw_gguf_find_tensor(m->gguf, name, &t) != PW_OK) {
            pw_clear_error(); /* the loader names the missing tensor */
            continue;
        }
        int64_t b = pw_dtype_block_elems(t->dtype);
        if (b > be) be = b;
    }
    return be;
}

/* o's shard count: divisors d of the head count whose shard of
 * (heads / d) * head_dim columns is whole blocks; the smallest one that
 * reaches min(PW_TP_SHARDS, heads), else the largest below it. */
static int64_t o_shards(int64_t heads, int64_t head_dim, int64_t block) {
    int64_t want = heads < PW_TP_SHARDS ? heads : PW_TP_SHARDS, best = 1;
    for (int64_t d = 1; d <= heads; d++) {
        if (heads % d != 0 || (heads / d * head_dim) % block != 0) continue;
        best = d;
        if (d >= want) break;
    }
    return best;
}

/* down's shard count: the largest divisor d <= PW_TP_SHARDS of the width
 * whose shards are whole blocks. */
static int64_t ffn_shards(int64_t width, int64_t block) {
    int64_t best = 1;
    for (int64_t d = 1; d <= PW_TP_SHARDS && d <= width; d++)
        if (width % d == 0 && (width / d) % block == 0) best = d;
    return best;
}

pw_status pw_model_tp_plan(pw_model *m, int tp_size, int tp_rank) {
    const pw_model_info *in = &m->info;
    if (!pw_model_tp_supported(m->arch))
        return pw_error(PW_ERR_UNSUPPORTED,
                        "tensor parallelism splits the llama and gemma3 architectures only; this "
                        "model is '%s'",
                        in->arch);
    if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size)
        return pw_error(PW_ERR_INVALID_ARG, "tensor parallel rank %d of %d", tp_rank, tp_size);
    int64_t heads = in->n_heads, groups = in->n_kv_heads, hd = in->head_dim;
    if (groups < 1 || heads % groups != 0)
        return pw_error(PW_ERR_FORMAT, "%" PRId64 " heads are not groups of %" PRId64 " KV heads",
                        heads, groups);
    int64_t group = heads / groups;
    int64_t os = o_shards(heads, hd, largest_block(m, "attn_output.weight"));
    int64_t fs = ffn_shards(in->ffn_dim, largest_block(m, "ffn_down.weight"));
    int64_t most = os < fs ? os : fs;
    if (tp_size > most)
        return pw_error(PW_ERR_INVALID_ARG,
                        "--tp %d: this model's fixed summation order has %" PRId64
                        " shards of the attention output (%" PRId64 " query heads) and %" PRId64
                        " of the feed-forward (width %" PRId64
                        ", in whole quantization blocks), and each rank needs at least one of "
                        "each (use --tp %" PRId64 " or less)",
                        tp_size, os, heads, fs, in->ffn_dim, most);
    /* ranks own whole KV-head groups while there are enough of them */
    int64_t per_shard = heads / os, unit = 1;
    if (per_shard % group != 0 && group % per_shard == 0) unit = group / per_shard;
    int64_t s0, s1;
    pw_tp_shard_range(os, unit, tp_size, tp_rank, &s0, &s1);
    m->tp_size = tp_size;
    m->tp_rank = tp_rank;
    m->tp_o_shards = os;
    m->tp_o_unit = unit;
    m->tp_h0 = s0 * per_shard;
    m->tp_h1 = s1 * per_shard;
    m->tp_kv0 = m->tp_h0 / group;
    m->tp_kv1 = (m->tp_h1 - 1) / group + 1;
    bool whole_groups = m->tp_h0 % group == 0 && m->tp_h1 % group == 0;
    m->tp_kv_per_head = !whole_groups && m->tp_kv1 - m->tp_kv0 > 1;
    m->tp_ffn_shards = fs;
    pw_tp_shard_range(fs, 1, tp_size, tp_rank, &m->tp_f0, &m->tp_f1);
    return PW_OK;
}

/* Loads weight `name` whole (its bytes not counted) for a copy of part of it. */
static pw_status load_for_copy(pw_model *m, const char *name, int64_t d0, int64_t d1, bool keep,
                               pw_tensor **full) {
    size_t before = m->info.weight_bytes;
    pw_status s = pw_model_load_weight(m, name, d0, d1, keep, full);
    m->info.weight_bytes = before;
    return s;
}

/* Wraps the copy buf [rows][cols] as *out, of `full`'s type laid out as
 * `t` (the same bytes per row), owned by m, and drops the mapped pages of
 * `full` (the rest is other ranks'). */
static pw_status keep_copy(pw_model *m, pw_tensor *full, pw_dtype t, uint8_t *buf, int64_t rows,
                           int64_t cols, pw_tensor **out) {
    size_t full_bytes = (size_t)pw_dtype_row_bytes(pw_tensor_dtype(full), pw_tensor_dim(full, 1)) *
                        (size_t)pw_tensor_dim(full, 0);
    void *data = pw_tensor_data(full);
    pw_tensor_release(full);
    if (m->n_owned > 0 && m->owned[m->n_owned - 1] == data) {
        /* a dequantized whole (PW_DEQUANTIZE=1): the copy replaces it */
        pw_host_free(data);
        m->n_owned--;
    } else {
        pw_gguf_release_pages(m->gguf, data, full_bytes);
    }
    m->owned[m->n_owned++] = (float *)buf;
    int64_t dims[2] = {rows, cols};
    PW_TRY(pw_tensor_wrap(buf, PW_DEVICE_CPU, t, 2, dims, out));
    m->info.weight_bytes += (size_t)pw_dtype_row_bytes(t, cols) * (size_t)rows;
    return PW_OK;
}

/* One copy of a weight's column shards (copy_col_shards), cut over
 * threads by units of `group` rows of one shard: unit u is shard u / units
 * per shard, rows from (u % units per shard) * group. */
typedef struct {
    const uint8_t *src;
    uint8_t *buf;
    uint8_t **rows; /* per part: scratch of a group's rows, or NULL (no conversion) */
    int64_t d1, group, s0, width;
    size_t full_row, shard_row;
    pw_dtype from, to;
} shard_copy;

static void copy_units(void *arg, int part, int64_t u0, int64_t u1) {
    const shard_copy *c = arg;
    uint8_t *rows = c->rows ? c->rows[part] : NULL;
    int64_t per_shard = c->d1 / c->group;
    for (int64_t u = u0; u < u1; u++) {
        int64_t s = u / per_shard, r0 = u % per_shard * c->group;
        size_t col = (size_t)pw_dtype_row_bytes(c->from, (c->s0 + s) * c->width);
        uint8_t *dst = c->buf + (size_t)(s * c->d1 + r0) * c->shard_row;
        uint8_t *at = rows ? rows : dst;
        for (int64_t r = 0; r < c->group; r++)
            memcpy(at + (size_t)r * c->shard_row, c->src + (size_t)(r0 + r) * c->full_row + col,
                   c->shard_row);
        if (rows) (void)pw_op_convert_weight(dst, rows, c->from, c->to, c->group, c->width);
    }
}

/* Weight `name` [d1 rows][d0] as shards of `width` of its d0 columns:
 * shards [s0, s1), each a contiguous [d1][width] matrix, one after the
 * other, in one tensor [(s1 - s0) * d1][width]. The plan chose widths of
 * whole blocks of the stored type; a file that disagrees is refused. The
 * copy runs on the host's threads (pw_host_threads): most of its time is
 * the kernel faulting in the buffer's fresh pages, which each thread does
 * for its own part. */
static pw_status copy_col_shards(pw_model *m, const char *name, int64_t d0, int64_t d1,
                                 int64_t width, int64_t s0, int64_t s1, bool keep,
                                 pw_tensor **out) {
    pw_tensor *full = NULL;
    PW_TRY(load_for_copy(m, name, d0, d1, keep, &full));
    pw_dtype t = pw_tensor_dtype(full);
    int64_t be = pw_dtype_block_elems(t);
    if (width % be != 0) {
        pw_tensor_release(full);
        return pw_error(PW_ERR_UNSUPPORTED,
                        "tensor '%s' (%s) cannot be split into shards of %" PRId64
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
    /* One process: the shards in the kernels' preferred layout (Q4_0x16),
     * when each shard's rows are whole groups (so the tensor is also that
     * layout as a whole), converted from a group's rows copied at a time
     * (a scratch of them per thread): the same bytes moved once, no second
     * copy. */
    pw_dtype to = m->tp_size <= 1 ? pw_model_preferred_dtype(t, d1, width) : t;
    int64_t group = pw_op_weight_row_group(to);
    if (to != t && d1 % group != 0) to = t, group = 1;
    int parts = pw_host_threads();
    if ((int64_t)parts > n * (d1 / group)) parts = (int)(n * (d1 / group));
    uint8_t *scratch[PW_HOST_THREADS_MAX] = {NULL};
    bool converting = to != t;
    for (int i = 0; converting && i < parts; i++) {
        scratch[i] = pw_host_alloc((size_t)group * shard_row);
        if (!scratch[i]) converting = false;
    }
    if (to != t && !converting) { /* no memory for the rows: the file's layout */
        pw_clear_error();
        to = t, group = 1;
    }
    shard_copy c = {.src = pw_tensor_data(full), .buf = buf, .rows = converting ? scratch : NULL,
                    .d1 = d1, .group = group, .s0 = s0, .width = width, .full_row = full_row,
                    .shard_row = shard_row, .from = t, .to = to};
    pw_run_split(n * (d1 / group), parts, copy_units, &c);
    for (int i = 0; i < parts; i++) pw_host_free(scratch[i]);
    return keep_copy(m, full, to, buf, n * d1, width, out);
}

/* Weight `name` [d1 rows][d0] for op matmul_shards, whole, read in place:
 * the op reads shard s as columns [s * width, (s + 1) * width) of every
 * row (the kernels' row stride), as any other weight from the mapping
 * (Q4_0 interleaved into Q4_0x16 like q, when its rows are whole groups
 * of 16: the op's condition). One process only (it holds every shard);
 * PW_SHARDS=in-place. */
static pw_status map_col_shards(pw_model *m, const char *name, int64_t d0, int64_t d1,
                                int64_t width, bool keep, pw_tensor **out) {
    PW_TRY(pw_model_load_weight(m, name, d0, d1, keep, out));
    pw_dtype t = pw_tensor_dtype(*out);
    int64_t be = pw_dtype_block_elems(t);
    if (width % be != 0) /* *out is the model's now, released with it */
        return pw_error(PW_ERR_UNSUPPORTED,
                        "tensor '%s' (%s) cannot be split into shards of %" PRId64
                        " columns: a shard must be whole blocks of %" PRId64,
                        name, pw_dtype_name(t), width, be);
    if (d1 % pw_op_weight_row_group(pw_model_preferred_dtype(t, d1, d0)) != 0) return PW_OK;
    return pw_model_prefer_layout(m, out);
}

/* o's or down's shards [s0, s1) of `width` columns (above). One process
 * reads them in place by default: no copy at load (its fresh pages were
 * most of an 8B file's start-up), and decode streams the whole rows in one
 * pass across the shards (pw_k_matmul_quant_shards) about as fast as the
 * dense copies (BENCHMARKS.md, "o and down in place"). PW_SHARDS=copy
 * copies them out as a rank always does. */
static pw_status load_col_shards(pw_model *m, const char *name, int64_t d0, int64_t d1,
                                 int64_t width, int64_t s0, int64_t s1, bool keep,
                                 pw_tensor **out) {
    static const char *const values[] = {"copy", "in-place", NULL};
    if (m->tp_size <= 1 && pw_env_choice(PW_ENV_SHARDS, values, 1) == 1)
        return map_col_shards(m, name, d0, d1, width, keep, out);
    return copy_col_shards(m, name, d0, d1, width, s0, s1, keep, out);
}

/* k or v [kv_dim rows][dim] with one copy of its KV head per query head of
 * the rank (head h attends with KV head h / group). */
static pw_status load_kv_per_head(pw_model *m, const char *name, bool keep, pw_tensor **out) {
    const pw_model_info *in = &m->info;
    int64_t hd = in->head_dim, group = in->n_heads / in->n_kv_heads;
    pw_tensor *full = NULL;
    PW_TRY(load_for_copy(m, name, in->dim, in->n_kv_heads * hd, keep, &full));
    size_t head_bytes = (size_t)pw_dtype_row_bytes(pw_tensor_dtype(full), in->dim) * (size_t)hd;
    int64_t n = m->tp_h1 - m->tp_h0;
    uint8_t *buf = pw_host_alloc((size_t)n * head_bytes);
    if (!buf) {
        pw_tensor_release(full);
        return PW_ERR_OOM;
    }
    const uint8_t *src = pw_tensor_data(full);
    for (int64_t i = 0; i < n; i++)
        memcpy(buf + (size_t)i * head_bytes, src + (size_t)((m->tp_h0 + i) / group) * head_bytes,
               head_bytes);
    return keep_copy(m, full, pw_tensor_dtype(full), buf, n * hd, in->dim, out);
}

pw_status pw_model_tp_load_layers(pw_model *m, bool keep) {
    const pw_model_info *in = &m->info;
    bool gemma = m->arch == PW_ARCH_GEMMA3;
    int64_t hd = in->head_dim, q_dim = in->n_heads * hd, kv_dim = in->n_kv_heads * hd;
    int64_t h0 = m->tp_h0, nh = m->tp_h1 - m->tp_h0;
    int64_t kv0 = m->tp_kv0, nkv = m->tp_kv1 - m->tp_kv0;
    int64_t ffn_shard = in->ffn_dim / m->tp_ffn_shards;
    int64_t heads_per_shard = in->n_heads / m->tp_o_shards;
    char name[96];
    for (int64_t l = 0; l < in->n_layers; l++) {
        pw_llama_layer *L = &m->layers[l];
        const pw_layer_weight whole[] = {
            {"attn_norm.weight", in->dim, 0, &L->attn_norm},
            {"ffn_norm.weight", in->dim, 0, &L->ffn_norm},
            {"attn_q_norm.weight", hd, 0, &L->q_norm},
            {"attn_k_norm.weight", hd, 0, &L->k_norm},
            {"post_attention_norm.weight", in->dim, 0, &L->post_attn_norm},
            {"post_ffw_norm.weight", in->dim, 0, &L->post_ffn_norm},
        };
        PW_TRY(pw_model_load_layer_weights(m, l, whole, gemma ? PW_ARRAY_LEN(whole) : 2, keep));
        /* column-parallel: this rank's rows, in place in the mapping */
        const struct {
            const char *suffix;
            int64_t rows, row0, n;
            pw_tensor **dst;
        } cols[] = {
            {"attn_q.weight", q_dim, h0 * hd, nh * hd, &L->wq},
            {"ffn_gate.weight", in->ffn_dim, m->tp_f0 * ffn_shard,
             (m->tp_f1 - m->tp_f0) * ffn_shard, &L->w_gate},
            {"ffn_up.weight", in->ffn_dim, m->tp_f0 * ffn_shard, (m->tp_f1 - m->tp_f0) * ffn_shard,
             &L->w_up},
            {"attn_k.weight", kv_dim, kv0 * hd, nkv * hd, &L->wk},
            {"attn_v.weight", kv_dim, kv0 * hd, nkv * hd, &L->wv},
        };
        size_t n_cols = m->tp_kv_per_head ? 3 : PW_ARRAY_LEN(cols);
        for (size_t i = 0; i < n_cols; i++) {
            snprintf(name, sizeof name, "blk.%" PRId64 ".%s", l, cols[i].suffix);
            PW_TRY(pw_model_load_weight_rows(m, name, in->dim, cols[i].rows, cols[i].row0,
                                             cols[i].n, keep, cols[i].dst));
            /* one process: whole weights, in the kernels' preferred layout
             * (a rank's row slices keep the file's) */
            if (m->tp_size <= 1) PW_TRY(pw_model_prefer_layout(m, cols[i].dst));
        }
        if (m->tp_kv_per_head) {
            snprintf(name, sizeof name, "blk.%" PRId64 ".attn_k.weight", l);
            PW_TRY(load_kv_per_head(m, name, keep, &L->wk));
            snprintf(name, sizeof name, "blk.%" PRId64 ".attn_v.weight", l);
            PW_TRY(load_kv_per_head(m, name, keep, &L->wv));
        }
        /* row-parallel: this rank's shards of K, copied out */
        snprintf(name, sizeof name, "blk.%" PRId64 ".attn_output.weight", l);
        PW_TRY(load_col_shards(m, name, q_dim, in->dim, heads_per_shard * hd,
                               h0 / heads_per_shard, m->tp_h1 / heads_per_shard, keep, &L->wo));
        snprintf(name, sizeof name, "blk.%" PRId64 ".ffn_down.weight", l);
        PW_TRY(load_col_shards(m, name, in->ffn_dim, in->dim, ffn_shard, m->tp_f0, m->tp_f1, keep,
                               &L->w_down));
    }
    return PW_OK;
}

int pw_model_row_parallel(ir_builder *b, const pw_model *m, const char *name, int64_t l, int x,
                          int w, bool ffn) {
    pw_ir_arg a[3];
    a[0] = pw_ir_arg_node(x), a[1] = pw_ir_arg_node(w);
    if (!m->tp_size) return ir_call(b, name, l, PW_OP_MATMUL, a, 2);
    int64_t shards = ffn ? m->tp_ffn_shards : m->tp_o_shards;
    int64_t unit = ffn ? 1 : m->tp_o_unit;
    int64_t local = ffn ? m->tp_f1 - m->tp_f0
                        : (m->tp_h1 - m->tp_h0) / (m->info.n_heads / m->tp_o_shards);
    char partials[48];
    snprintf(partials, sizeof partials, "%s_partials", name);
    a[2] = pw_ir_arg_int(local);
    int p = ir_call(b, partials, l, PW_OP_MATMUL_SHARDS, a, 3);
    a[0] = pw_ir_arg_node(p), a[1] = pw_ir_arg_int(shards), a[2] = pw_ir_arg_int(unit);
    return ir_call(b, name, l, PW_OP_ALL_REDUCE, a, 3);
}

int pw_model_embed(ir_builder *b, const pw_model *m, int ids, int table) {
    pw_ir_arg a[3] = {pw_ir_arg_node(ids), pw_ir_arg_node(table), pw_ir_arg_int(m->info.vocab)};
    if (m->tp_size <= 1) return ir_call(b, "embed", -1, PW_OP_EMBEDDING, a, 2);
    return ir_call(b, "embed", -1, PW_OP_EMBEDDING_VOCAB, a, 3);
}

int pw_model_logits(ir_builder *b, const pw_model *m, int x, int head, float softcap) {
    pw_ir_arg a[4] = {pw_ir_arg_node(x), pw_ir_arg_node(head), pw_ir_arg_float(softcap),
                      pw_ir_arg_int(m->info.vocab)};
    if (m->tp_size <= 1) return ir_call(b, "logits", -1, PW_OP_LM_HEAD, a, 3);
    return ir_call(b, "logits", -1, PW_OP_LM_HEAD_VOCAB, a, 4);
}
