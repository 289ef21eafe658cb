/* The op registry. One definition per op of the op table (op_table.h):
 * arity, argument names, whether it splits the graph, shape inference
 * (infer_<op>) and the launch that packs the kernel's args (launch_<op>).
 * op_invoke is the one generic path every bound op goes through.
 *
 * Kernels are bound by pointer: a launch takes the kernel of its id from
 * the kernel set of the stream's device (ops/kernel_set.h). Nothing here
 * asks which device that is; an op asks the set what it has (a fused
 * kernel, the scratch a kernel needs). */
#include "ops/ops.h"

#include "core/tensor.h"
#include "ops/comm.h"
#include "ops/kernel_set.h"
#include "ops/op_table.h"
#include "pw_testing.h"

#include <math.h>
#include <string.h>

/* Most tensors a tuple-returning op yields. */
#define PW_OP_MAX_OUTPUTS 3

typedef struct out_spec {
    bool none;
    pw_dtype dtype;
    int ndim;
    int64_t shape[PW_MAX_DIMS];
    /* A tuple-returning op: n_tuple f32 tensors [shape[0]][tuple_cols[i]]. */
    int n_tuple;
    int64_t tuple_cols[PW_OP_MAX_OUTPUTS];
} out_spec;

typedef struct op_def {
    const char *name;
    int nargs;
    const char *const *arg_names; /* [nargs] */
    bool splitting;
    pw_status (*infer)(const struct op_def *d, const pw_op_env *env, const pw_value *args,
                       out_spec *spec);
    /* outs: the op's outputs, allocated from its out_spec (one tensor, the
     * spec.n_tuple tensors of a tuple, or a single NULL for none). */
    pw_status (*launch)(const pw_op_env *env, const pw_value *args, pw_tensor *const *outs);
} op_def;

/* ---- kernels ------------------------------------------------------------- */

static const pw_kernel_set *kernel_set(const pw_op_env *env) {
    return pw_kernel_set_for(pw_stream_device(env->stream));
}

/* Whether the stream's kernel set has kernel id (the fused kernels are optional). */
static bool has_kernel(const pw_op_env *env, pw_kernel_id id) {
    const pw_kernel_set *set = kernel_set(env);
    return set && set->entries[id].kernel;
}

/* Tests set this (pw_ops_prefer_unfused, src/pw_testing.h) to run the
 * unfused paths of the fused ops on a set that has the fused kernels. */
static bool prefer_unfused;

void pw_ops_prefer_unfused(bool on) { prefer_unfused = on; }

/* Whether a fused op launches its fused kernel (optional in a set). */
static bool use_fused(const pw_op_env *env, pw_kernel_id id) {
    return !prefer_unfused && has_kernel(env, id);
}

/* Launches kernel id of the stream's kernel set on the stream. */
static pw_status launch_kernel(const pw_op_env *env, pw_kernel_id id, const void *args,
                               size_t argbytes) {
    const pw_kernel_set *set = kernel_set(env);
    if (!set)
        return pw_error(PW_ERR_UNSUPPORTED, "this build has no kernels for %s streams",
                        pw_device_name(pw_stream_device(env->stream)));
    const pw_kernel *k = set->entries[id].kernel;
    if (!k)
        return pw_error(PW_ERR_UNSUPPORTED, "the %s kernel set has no %s kernel", set->name,
                        pw_kernel_id_name(id));
    return pw_launch(env->stream, k, args, argbytes);
}

/* Bytes of scratch kernel id of the stream's set needs for these args. */
static size_t kernel_scratch_bytes(const pw_op_env *env, pw_kernel_id id, const void *args) {
    const pw_kernel_set *set = kernel_set(env);
    size_t (*bytes)(const void *) = set ? set->entries[id].scratch_bytes : NULL;
    return bytes ? bytes(args) : 0;
}

static pw_pool *output_pool(const pw_op_env *env) {
    return pw_stream_is_capturing(env->stream) ? pw_capture_pool() : env->pool;
}

/* Scratch for a launch, from the pool outputs come from. It is dead once
 * the launch has run, so it is released right after: safe eagerly and in a
 * captured graph alike (later launches reusing the block run after this
 * one on replay too). */
static pw_status scratch_alloc(const pw_op_env *env, size_t bytes, float **out) {
    *out = NULL;
    if (bytes == 0) return PW_OK;
    void *p = NULL;
    PW_TRY(pw_pool_alloc(output_pool(env), bytes, &p));
    *out = p;
    return PW_OK;
}

static void scratch_release(const pw_op_env *env, float *p) {
    if (p) pw_pool_release(output_pool(env), p);
}

/* ---- argument checks ------------------------------------------------------ */

static const char *kind_name(pw_value_kind k) {
    switch (k) {
    case PW_VAL_NONE: return "none";
    case PW_VAL_TENSOR: return "tensor";
    case PW_VAL_TUPLE: return "tuple";
    case PW_VAL_INT: return "int";
    case PW_VAL_FLOAT: return "float";
    case PW_VAL_BOOL: return "bool";
    case PW_VAL_STRING: return "string";
    }
    return "?";
}

/* A tensor argument of the given dtype and rank, contiguous, on the CPU.
 * dtype < 0 accepts any dtype, ndim < 0 any rank. */
static pw_status arg_tensor(const op_def *d, const pw_value *args, int i, int dtype, int ndim,
                            pw_tensor **out) {
    const char *arg = d->arg_names[i];
    if (args[i].kind != PW_VAL_TENSOR || !args[i].as.tensor)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': argument %d '%s' must be a tensor, got %s",
                        d->name, i + 1, arg, kind_name(args[i].kind));
    pw_tensor *t = args[i].as.tensor;
    char desc[96];
    if ((dtype >= 0 && t->dtype != (pw_dtype)dtype) || (ndim >= 0 && t->ndim != ndim))
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': argument %d '%s' must be a %s tensor with %d dims, got %s",
                        d->name, i + 1, arg, dtype >= 0 ? pw_dtype_name((pw_dtype)dtype) : "any",
                        ndim, pw_tensor_describe(t, desc, sizeof desc));
    if (!pw_tensor_is_contiguous(t))
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': argument %d '%s' (%s) must be contiguous",
                        d->name, i + 1, arg, pw_tensor_describe(t, desc, sizeof desc));
    *out = t;
    return PW_OK;
}

static pw_status arg_int(const op_def *d, const pw_value *args, int i, int64_t lo, int64_t hi,
                         int64_t *out) {
    const char *arg = d->arg_names[i];
    if (args[i].kind != PW_VAL_INT)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': argument %d '%s' must be an int, got %s",
                        d->name, i + 1, arg, kind_name(args[i].kind));
    if (args[i].as.i < lo || args[i].as.i > hi)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': argument %d '%s' = %lld is out of range [%lld, %lld]", d->name,
                        i + 1, arg, (long long)args[i].as.i, (long long)lo, (long long)hi);
    *out = args[i].as.i;
    return PW_OK;
}

static pw_status check_tokens(const op_def *d, const pw_op_env *env, int64_t t) {
    if (t > env->max_tokens)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': %lld tokens exceed the %lld the persistent buffers hold "
                        "(env.max_tokens)",
                        d->name, (long long)t, (long long)env->max_tokens);
    return PW_OK;
}

static void spec_2d(out_spec *s, pw_dtype dtype, int64_t rows, int64_t cols) {
    s->none = false;
    s->dtype = dtype;
    s->ndim = 2;
    s->shape[0] = rows;
    s->shape[1] = cols;
}

static pw_tensor *targ(const pw_value *args, int i) { return args[i].as.tensor; }
static float *fdata(const pw_tensor *t) { return (float *)t->data; }

/* A 2-D weight: f32, or blocks the quantized kernels take (Q8_0, Q4_0,
 * Q4_1; the tensor layer already requires whole blocks per row). */
static pw_status arg_weight(const op_def *d, const pw_value *args, int i, pw_tensor **out) {
    PW_TRY(arg_tensor(d, args, i, -1, 2, out));
    pw_dtype t = (*out)->dtype;
    if (t != PW_F32 && !pw_op_quantized_weight_supported(t))
        return pw_error(PW_ERR_UNSUPPORTED,
                        "op '%s': argument %d '%s' has dtype %s; weights must be f32, q8_0, "
                        "q4_0, q4_1, q5_0, q5_1, q4_K, q5_K or q6_K",
                        d->name, i + 1, d->arg_names[i], pw_dtype_name(t));
    return PW_OK;
}

/* ---- embedding ---------------------------------------------------------------- */

static pw_status infer_embedding(const op_def *d, const pw_op_env *env, const pw_value *args,
                                 out_spec *s) {
    pw_tensor *ids = NULL, *table = NULL;
    PW_TRY(arg_tensor(d, args, 0, PW_I32, 1, &ids));
    PW_TRY(arg_weight(d, args, 1, &table));
    spec_2d(s, PW_F32, ids->shape[0], table->shape[1]);
    return PW_OK;
}

static pw_status launch_embedding(const pw_op_env *env, const pw_value *args,
                                  pw_tensor *const *outs) {
    pw_tensor *out = outs[0];
    pw_tensor *ids = targ(args, 0), *table = targ(args, 1);
    if (table->dtype != PW_F32) {
        pw_k_embedding_quant_args q = {fdata(out),      ids->data,       table->data,
                                       ids->shape[0],   table->shape[0], table->shape[1],
                                       table->dtype};
        return launch_kernel(env, PW_KERNEL_EMBEDDING_QUANT, &q, sizeof q);
    }
    pw_k_embedding_args a = {fdata(out), ids->data, fdata(table), ids->shape[0],
                             table->shape[0], table->shape[1]};
    return launch_kernel(env, PW_KERNEL_EMBEDDING, &a, sizeof a);
}

/* ---- rms_norm ------------------------------------------------------------------- */

static pw_status infer_rms_norm(const op_def *d, const pw_op_env *env, const pw_value *args,
                                out_spec *s) {
    pw_tensor *x = NULL, *w = NULL;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &x));
    PW_TRY(arg_tensor(d, args, 1, PW_F32, 1, &w));
    if (w->shape[0] != x->shape[1])
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': w has %lld elements but x rows have %lld",
                        d->name, (long long)w->shape[0], (long long)x->shape[1]);
    if (!(env->rms_eps > 0.0f))
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': env.rms_eps must be positive", d->name);
    spec_2d(s, PW_F32, x->shape[0], x->shape[1]);
    return PW_OK;
}

static pw_status launch_rms_norm(const pw_op_env *env, const pw_value *args,
                                 pw_tensor *const *outs) {
    pw_tensor *out = outs[0];
    pw_tensor *x = targ(args, 0), *w = targ(args, 1);
    pw_k_rms_norm_args a = {fdata(out), NULL, fdata(x), fdata(w), x->shape[0], x->shape[1],
                            env->rms_eps};
    return launch_kernel(env, PW_KERNEL_RMS_NORM, &a, sizeof a);
}

/* ---- matmul ---------------------------------------------------------------------- */

static pw_status infer_matmul(const op_def *d, const pw_op_env *env, const pw_value *args,
                              out_spec *s) {
    pw_tensor *x = NULL, *w = NULL;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &x));
    PW_TRY(arg_weight(d, args, 1, &w));
    if (w->shape[1] != x->shape[1])
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': x has K=%lld columns but w [N][K] has K=%lld", d->name,
                        (long long)x->shape[1], (long long)w->shape[1]);
    spec_2d(s, PW_F32, x->shape[0], w->shape[0]);
    return PW_OK;
}

/* y = x w^T, w's rows w_row_bytes apart (0: dense). An f32 weight's kernel
 * may want scratch (the CPU BLAS path's zero-padded tile, the CUDA matmul's
 * partial last tile): an ordinary short-lived block. */
static pw_status matmul_raw(const pw_op_env *env, float *y, const float *x, int64_t t,
                            const void *w, pw_dtype type, int64_t n, int64_t k,
                            int64_t w_row_bytes) {
    if (type != PW_F32) {
        pw_k_matmul_quant_args q = {y, x, w, t, n, k, type, 0, w_row_bytes};
        return launch_kernel(env, PW_KERNEL_MATMUL_QUANT, &q, sizeof q);
    }
    pw_k_matmul_args a = {y, x, w, NULL, t, n, k, w_row_bytes / (int64_t)sizeof(float)};
    PW_TRY(scratch_alloc(env, kernel_scratch_bytes(env, PW_KERNEL_MATMUL, &a), &a.scratch));
    pw_status s = launch_kernel(env, PW_KERNEL_MATMUL, &a, sizeof a);
    scratch_release(env, a.scratch);
    return s;
}

static pw_status matmul_rows(const pw_op_env *env, float *y, const float *x, int64_t t,
                             const pw_tensor *w) {
    return matmul_raw(env, y, x, t, w->data, w->dtype, w->shape[0], w->shape[1], 0);
}

static pw_status matmul_into(const pw_op_env *env, float *y, const pw_tensor *x,
                             const pw_tensor *w) {
    return matmul_rows(env, y, fdata(x), x->shape[0], w);
}

static pw_status launch_matmul(const pw_op_env *env, const pw_value *args,
                               pw_tensor *const *outs) {
    pw_tensor *out = outs[0];
    return matmul_into(env, fdata(out), targ(args, 0), targ(args, 1));
}

/* ---- tensor parallelism: row-parallel shards and their all-reduce ------------------ */

/* matmul_shards(x f32[T][S*Ks], w, n_shards S) -> f32[S*T][N]: shard s's
 * partial product x[:, s*Ks:(s+1)*Ks] w_s^T, each by the ordinary matmul
 * sequence on its own. w holds the shards in one of two layouts, told
 * apart by its shape (the same for S = 1):
 *   - [N][S*Ks], the whole weight (the file's mapping): w_s = columns
 *     [s*Ks, (s+1)*Ks), read where it lies, its rows a whole row apart
 *     (the kernels' row stride); in a Q4_0x16 weight, the blocks
 *     [s*Ks/32, (s+1)*Ks/32) of each group of 16 rows (N % 16 == 0);
 *   - [S*N][Ks], the shards copied out one after the other: w_s = rows
 *     [s*N, (s+1)*N).
 * Same products, same bits either way. Ks must be whole blocks of w's
 * type. */
typedef struct shard_layout {
    int64_t n, ks, row_bytes; /* row_bytes: from one row of a shard to the next */
    size_t shard_at;          /* from shard s's first block to shard s+1's */
} shard_layout;

static bool shard_layout_of(const pw_tensor *x, const pw_tensor *w, int64_t shards,
                            shard_layout *l) {
    int64_t k = x->shape[1], group = pw_op_weight_row_group(w->dtype);
    if (k % shards != 0 || (k / shards) % pw_dtype_block_elems(w->dtype) != 0) return false;
    l->ks = k / shards;
    if (w->shape[1] == k) { /* the whole weight */
        l->n = w->shape[0];
        l->row_bytes = pw_dtype_row_bytes(w->dtype, k);
        l->shard_at = (size_t)(group * pw_dtype_row_bytes(w->dtype, l->ks));
    } else if (w->shape[1] == l->ks && w->shape[0] % shards == 0) { /* stacked copies */
        l->n = w->shape[0] / shards;
        l->row_bytes = pw_dtype_row_bytes(w->dtype, l->ks);
        l->shard_at = (size_t)(l->n * l->row_bytes);
    } else {
        return false;
    }
    return l->n % group == 0;
}

static pw_status infer_matmul_shards(const op_def *d, const pw_op_env *env, const pw_value *args,
                                     out_spec *s) {
    pw_tensor *x = NULL, *w = NULL;
    int64_t shards = 0;
    shard_layout l;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &x));
    PW_TRY(arg_weight(d, args, 1, &w));
    PW_TRY(arg_int(d, args, 2, 1, 1 << 16, &shards));
    if (!shard_layout_of(x, w, shards, &l))
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': w [%lld][%lld] (%s) is neither x's K = %lld columns nor %lld "
                        "shards of them, in whole blocks%s",
                        d->name, (long long)w->shape[0], (long long)w->shape[1],
                        pw_dtype_name(w->dtype), (long long)x->shape[1], (long long)shards,
                        pw_op_weight_row_group(w->dtype) > 1 ? " and whole row groups" : "");
    spec_2d(s, PW_F32, shards * x->shape[0], l.n);
    return PW_OK;
}

static pw_status launch_matmul_shards(const pw_op_env *env, const pw_value *args,
                                      pw_tensor *const *outs) {
    pw_tensor *x = targ(args, 0), *w = targ(args, 1);
    int64_t shards = args[2].as.i, t = x->shape[0];
    shard_layout l;
    (void)shard_layout_of(x, w, shards, &l); /* infer checked it */
    int64_t n = l.n, ks = l.ks;
    if (w->dtype != PW_F32) { /* one kernel: a run of rows, every shard of it */
        pw_k_matmul_quant_args q = {fdata(outs[0]), fdata(x), w->data,   t, n, ks, w->dtype,
                                    0,              l.row_bytes, shards, (int64_t)l.shard_at};
        return launch_kernel(env, PW_KERNEL_MATMUL_QUANT, &q, sizeof q);
    }
    /* one token's shard is contiguous already; more need their columns packed */
    float *packed = NULL, *w_packed = NULL;
    if (t > 1) PW_TRY(scratch_alloc(env, (size_t)(t * ks) * sizeof(float), &packed));
    /* A device's (f32) shard of the whole weight is packed too and
     * multiplied dense, as the stacked copies are: cuBLAS picks its
     * algorithm, so its summation order, from the shape and leading
     * dimensions, and the shard's own width keeps one order for both. */
    pw_status st = PW_OK;
    pw_device kernels = pw_device_kernel_device(pw_stream_device(env->stream));
    bool pack_w = kernels != PW_DEVICE_CPU && l.row_bytes > pw_dtype_row_bytes(PW_F32, ks);
    if (pack_w) st = scratch_alloc(env, (size_t)(n * ks) * sizeof(float), &w_packed);
    for (int64_t sh = 0; sh < shards && st == PW_OK; sh++) {
        const float *xs = fdata(x) + sh * ks;
        if (packed) {
            pw_k_slice_cols_args a = {packed, fdata(x), t, x->shape[1], sh * ks, ks};
            st = launch_kernel(env, PW_KERNEL_SLICE_COLS, &a, sizeof a);
            xs = packed;
        }
        const void *ws = (const uint8_t *)w->data + (size_t)sh * l.shard_at;
        int64_t ws_row_bytes = l.row_bytes;
        if (w_packed && st == PW_OK) {
            pw_k_slice_cols_args a = {w_packed, fdata(w), n, w->shape[1], sh * ks, ks};
            st = launch_kernel(env, PW_KERNEL_SLICE_COLS, &a, sizeof a);
            ws = w_packed, ws_row_bytes = 0;
        }
        if (st == PW_OK)
            st = matmul_raw(env, fdata(outs[0]) + sh * t * n, xs, t, ws, w->dtype, n, ks,
                            ws_row_bytes);
    }
    scratch_release(env, w_packed);
    scratch_release(env, packed);
    return st;
}

/* all_reduce(partials f32[S_local*T][N], n_shards S, shard_unit U) ->
 * f32[T][N]: every rank's shard partials summed in shard order
 * (all_reduce_shards); a rank owns the shards pw_tp_shard_range(S, U)
 * gives it. */
static pw_status infer_all_reduce(const op_def *d, const pw_op_env *env, const pw_value *args,
                                  out_spec *s) {
    pw_tensor *p = NULL;
    int64_t shards = 0, unit = 0, s0, s1;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &p));
    PW_TRY(arg_int(d, args, 1, 1, 1 << 16, &shards));
    PW_TRY(arg_int(d, args, 2, 1, 1 << 16, &unit));
    if (shards < pw_comm_size())
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': %lld shards for %d ranks", d->name,
                        (long long)shards, pw_comm_size());
    pw_tp_shard_range(shards, unit, pw_comm_size(), pw_comm_rank(), &s0, &s1);
    if (p->shape[0] % (s1 - s0) != 0)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': %lld partial rows are not %lld local shards of whole tokens",
                        d->name, (long long)p->shape[0], (long long)(s1 - s0));
    spec_2d(s, PW_F32, p->shape[0] / (s1 - s0), p->shape[1]);
    return PW_OK;
}

static pw_status launch_all_reduce(const pw_op_env *env, const pw_value *args,
                                   pw_tensor *const *outs) {
    pw_tensor *p = targ(args, 0);
    int64_t shards = args[1].as.i, unit = args[2].as.i, s0, s1;
    pw_tp_shard_range(shards, unit, pw_comm_size(), pw_comm_rank(), &s0, &s1);
    int64_t t = p->shape[0] / (s1 - s0), n = p->shape[1];
    if (shards * t * n > INT32_MAX) /* MPI counts are int */
        return pw_error(PW_ERR_UNSUPPORTED,
                        "all_reduce: %lld shards of [%lld][%lld] exceed one MPI gather",
                        (long long)shards, (long long)t, (long long)n);
    pw_k_all_reduce_shards_args a = {fdata(outs[0]), fdata(p), NULL, t, n, shards, unit, s1 - s0};
    size_t gather_bytes = (size_t)(pw_tp_gather_shards(shards, unit) * t * n) * sizeof(float);
    if (pw_comm_size() > 1) PW_TRY(scratch_alloc(env, gather_bytes, &a.gather));
    pw_status st = launch_kernel(env, PW_KERNEL_ALL_REDUCE_SHARDS, &a, sizeof a);
    scratch_release(env, a.gather);
    return st;
}

/* ---- rope ---------------------------------------------------------------------------- */

static const int32_t *rope_positions(const pw_op_env *env) {
    if (env->positions) return env->positions;
    return env->attn_meta ? env->attn_meta->positions : NULL;
}

static pw_status infer_rope(const op_def *d, const pw_op_env *env, const pw_value *args,
                            out_spec *s) {
    pw_tensor *x = NULL;
    int64_t heads = 0;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &x));
    PW_TRY(arg_int(d, args, 1, 1, INT32_MAX, &heads));
    if (env->head_dim <= 0 || env->head_dim % 2)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': env.head_dim = %d must be positive and even",
                        d->name, env->head_dim);
    if (x->shape[1] != heads * env->head_dim)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': x rows have %lld values, expected n_heads * head_dim = %lld * %d",
                        d->name, (long long)x->shape[1], (long long)heads, env->head_dim);
    if (!env->rope_table || env->rope_max_pos <= 0 || !rope_positions(env))
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': env has no rope table or positions buffer", d->name);
    PW_TRY(check_tokens(d, env, x->shape[0]));
    spec_2d(s, PW_F32, x->shape[0], x->shape[1]);
    return PW_OK;
}

static pw_status launch_rope(const pw_op_env *env, const pw_value *args,
                             pw_tensor *const *outs) {
    pw_tensor *out = outs[0];
    pw_tensor *x = targ(args, 0);
    pw_k_rope_args a = {fdata(out),          fdata(x),      rope_positions(env),
                        env->rope_table,     x->shape[0],   args[1].as.i,
                        env->head_dim,       env->rope_max_pos};
    return launch_kernel(env, PW_KERNEL_ROPE, &a, sizeof a);
}

/* ---- silu ------------------------------------------------------------------------------ */

static pw_status infer_silu_and_mul(const op_def *d, const pw_op_env *env, const pw_value *args,
                                    out_spec *s) {
    pw_tensor *gu = NULL;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &gu));
    if (gu->shape[1] % 2)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': gate_up has %lld columns; it must be [T][2F]", d->name,
                        (long long)gu->shape[1]);
    spec_2d(s, PW_F32, gu->shape[0], gu->shape[1] / 2);
    return PW_OK;
}

static pw_status launch_silu_and_mul(const pw_op_env *env, const pw_value *args,
                                     pw_tensor *const *outs) {
    pw_tensor *out = outs[0];
    pw_tensor *gu = targ(args, 0);
    pw_k_silu_args a = {fdata(out), fdata(gu), NULL, gu->shape[0], gu->shape[1] / 2};
    return launch_kernel(env, PW_KERNEL_SILU_AND_MUL, &a, sizeof a);
}

static bool same_shape(const pw_tensor *a, const pw_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

static pw_status infer_binary(const op_def *d, const pw_op_env *env, const pw_value *args,
                              out_spec *s) {
    pw_tensor *a = NULL, *b = NULL;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, -1, &a));
    PW_TRY(arg_tensor(d, args, 1, PW_F32, -1, &b));
    if (!same_shape(a, b)) {
        char da[96], db[96];
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': shapes differ: %s vs %s", d->name,
                        pw_tensor_describe(a, da, sizeof da), pw_tensor_describe(b, db, sizeof db));
    }
    s->none = false;
    s->dtype = PW_F32;
    s->ndim = a->ndim;
    memcpy(s->shape, a->shape, sizeof s->shape);
    return PW_OK;
}

static pw_status infer_silu_mul(const op_def *d, const pw_op_env *env, const pw_value *args,
                                out_spec *s) {
    return infer_binary(d, env, args, s);
}

static pw_status infer_add(const op_def *d, const pw_op_env *env, const pw_value *args,
                           out_spec *s) {
    return infer_binary(d, env, args, s);
}

static pw_status launch_silu_mul(const pw_op_env *env, const pw_value *args,
                                 pw_tensor *const *outs) {
    pw_tensor *out = outs[0];
    pw_tensor *x = targ(args, 0), *y = targ(args, 1);
    pw_k_silu_args a = {fdata(out), fdata(x), fdata(y), 1, pw_tensor_numel(x)};
    return launch_kernel(env, PW_KERNEL_SILU_MUL, &a, sizeof a);
}

static pw_status launch_add(const pw_op_env *env, const pw_value *args,
                            pw_tensor *const *outs) {
    pw_tensor *out = outs[0];
    pw_tensor *x = targ(args, 0), *y = targ(args, 1);
    pw_k_add_args a = {fdata(out), fdata(x), fdata(y), pw_tensor_numel(x)};
    return launch_kernel(env, PW_KERNEL_ADD, &a, sizeof a);
}

/* ---- empty_like ------------------------------------------------------------------------- */

static pw_status infer_empty_like(const op_def *d, const pw_op_env *env, const pw_value *args,
                                  out_spec *s) {
    pw_tensor *x = NULL;
    PW_TRY(arg_tensor(d, args, 0, -1, -1, &x));
    s->none = false;
    s->dtype = x->dtype;
    s->ndim = x->ndim;
    memcpy(s->shape, x->shape, sizeof s->shape);
    return PW_OK;
}

/* The output is the op: attention writes it. */
static pw_status launch_empty_like(const pw_op_env *env, const pw_value *args,
                                   pw_tensor *const *outs) {
    return PW_OK;
}

/* ---- attention ---------------------------------------------------------------------------- */

static pw_status infer_attention(const op_def *d, const pw_op_env *env, const pw_value *args,
                                 out_spec *s) {
    pw_tensor *q = NULL, *k = NULL, *v = NULL, *out = NULL;
    int64_t layer = 0;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &q));
    PW_TRY(arg_tensor(d, args, 1, PW_F32, 2, &k));
    PW_TRY(arg_tensor(d, args, 2, PW_F32, 2, &v));
    PW_TRY(arg_tensor(d, args, 3, PW_F32, 2, &out));
    if (env->n_layers <= 0 || !env->k_cache || !env->v_cache || !env->attn_meta)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': env has no KV cache or attention metadata", d->name);
    PW_TRY(arg_int(d, args, 4, 0, env->n_layers - 1, &layer));
    if (!env->k_cache[layer] || !env->v_cache[layer])
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': layer %lld has no KV cache", d->name,
                        (long long)layer);
    if (env->head_dim <= 0 || env->head_dim > 512 || env->n_kv_heads <= 0 ||
        env->n_heads % env->n_kv_heads != 0 || env->num_blocks <= 0 || env->max_seqs <= 0)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': env shape is invalid (heads %d, kv heads %d, head_dim %d, "
                        "blocks %lld, seqs %lld)",
                        d->name, env->n_heads, env->n_kv_heads, env->head_dim,
                        (long long)env->num_blocks, (long long)env->max_seqs);
    int64_t t = q->shape[0];
    int64_t qw = (int64_t)env->n_heads * env->head_dim, kw = (int64_t)env->n_kv_heads * env->head_dim;
    struct {
        pw_tensor *tensor;
        const char *name;
        int64_t width;
    } want[] = {{q, "q", qw}, {k, "k", kw}, {v, "v", kw}, {out, "out", qw}};
    for (size_t i = 0; i < PW_ARRAY_LEN(want); i++)
        if (want[i].tensor->shape[0] != t || want[i].tensor->shape[1] != want[i].width) {
            char desc[96];
            return pw_error(PW_ERR_INVALID_ARG, "op '%s': %s is %s, expected f32[%lld, %lld]",
                            d->name, want[i].name,
                            pw_tensor_describe(want[i].tensor, desc, sizeof desc),
                            (long long)t, (long long)want[i].width);
        }
    PW_TRY(check_tokens(d, env, t));
    s->none = true;
    s->ndim = 0;
    return PW_OK;
}

static pw_status launch_attention(const pw_op_env *env, const pw_value *args,
                                  pw_tensor *const *outs) {
    pw_tensor *q = targ(args, 0), *k = targ(args, 1), *v = targ(args, 2), *out = targ(args, 3);
    int64_t layer = args[4].as.i;
    pw_k_attention_args a = {
        .out = fdata(out), .q = fdata(q), .k = fdata(k), .v = fdata(v),
        .k_cache = env->k_cache[layer], .v_cache = env->v_cache[layer], .meta = env->attn_meta,
        .n_tokens = q->shape[0], .n_heads = env->n_heads, .n_kv_heads = env->n_kv_heads,
        .head_dim = env->head_dim, .q_stride = q->shape[1], .kv_stride = k->shape[1],
        .num_blocks = env->num_blocks, .max_seqs = env->max_seqs,
        .window = env->layer_window ? env->layer_window[layer] : 0, .scale = env->attn_scale};
    return launch_kernel(env, PW_KERNEL_ATTENTION, &a, sizeof a);
}

/* ---- argmax ------------------------------------------------------------------------------- */

static pw_status infer_argmax(const op_def *d, const pw_op_env *env, const pw_value *args,
                              out_spec *s) {
    pw_tensor *logits = NULL;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &logits));
    if (logits->shape[1] <= 0)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': logits have no columns", d->name);
    s->none = false;
    s->dtype = PW_I32;
    s->ndim = 1;
    s->shape[0] = logits->shape[0];
    return PW_OK;
}

static pw_status launch_argmax(const pw_op_env *env, const pw_value *args,
                               pw_tensor *const *outs) {
    pw_tensor *out = outs[0];
    pw_tensor *logits = targ(args, 0);
    pw_k_argmax_args a = {out->data, fdata(logits), logits->shape[0], logits->shape[1]};
    return launch_kernel(env, PW_KERNEL_ARGMAX, &a, sizeof a);
}

/* ---- fused ops ------------------------------------------------------------------------------
 * One launch each instead of two to five where the stream's kernel set has
 * the fused kernel (the CPU's, ops/cpu/fused.c, runs the constituent
 * kernels, so the bits are the unfused ops'). With a set that lacks it they
 * launch the constituent kernels one by one, which every set has. */

/* add_rms_norm(a, b, w) -> (a + b, rms_norm(a + b) * w) */
static pw_status infer_add_rms_norm(const op_def *d, const pw_op_env *env, const pw_value *args,
                                    out_spec *s) {
    pw_tensor *a = NULL, *w = NULL;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &a));
    PW_TRY(infer_binary(d, env, args, s));
    PW_TRY(arg_tensor(d, args, 2, PW_F32, 1, &w));
    if (w->shape[0] != s->shape[1])
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': w has %lld elements but x rows have %lld",
                        d->name, (long long)w->shape[0], (long long)s->shape[1]);
    if (!(env->rms_eps > 0.0f))
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': env.rms_eps must be positive", d->name);
    s->n_tuple = 2;
    s->tuple_cols[0] = s->tuple_cols[1] = s->shape[1];
    return PW_OK;
}

static pw_status launch_add_rms_norm(const pw_op_env *env, const pw_value *args,
                                     pw_tensor *const *outs) {
    pw_tensor *a = targ(args, 0), *b = targ(args, 1), *w = targ(args, 2);
    int64_t t = a->shape[0], dim = a->shape[1];
    if (use_fused(env, PW_KERNEL_SUM_RMS_NORM)) {
        pw_k_sum_rms_norm_args k = {fdata(outs[1]), fdata(outs[0]), fdata(a), fdata(b),
                                    fdata(w),       t,              dim,      env->rms_eps};
        return launch_kernel(env, PW_KERNEL_SUM_RMS_NORM, &k, sizeof k);
    }
    pw_k_add_args add = {fdata(outs[0]), fdata(a), fdata(b), t * dim};
    PW_TRY(launch_kernel(env, PW_KERNEL_ADD, &add, sizeof add));
    pw_k_rms_norm_args norm = {fdata(outs[1]), NULL, fdata(outs[0]), fdata(w), t, dim,
                               env->rms_eps};
    return launch_kernel(env, PW_KERNEL_RMS_NORM, &norm, sizeof norm);
}

/* A weight whose columns match x's, with `rows` rows (any when negative).
 * The messages are the matmul's and the attention's. */
static pw_status arg_weight_rows(const op_def *d, const pw_value *args, int i, const pw_tensor *x,
                                 int64_t rows, pw_tensor **out) {
    PW_TRY(arg_weight(d, args, i, out));
    if ((*out)->shape[1] != x->shape[1])
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': x has K=%lld columns but w [N][K] has K=%lld", d->name,
                        (long long)x->shape[1], (long long)(*out)->shape[1]);
    char desc[96];
    if (rows >= 0 && (*out)->shape[0] != rows)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': %s is %s, expected f32[%lld, %lld]",
                        d->name, d->arg_names[i], pw_tensor_describe(*out, desc, sizeof desc),
                        (long long)rows, (long long)x->shape[1]);
    return PW_OK;
}

/* qkv_rope(x, wq, wk, wv, n_heads, n_kv_heads) -> (rope(x wq^T), rope(x wk^T), x wv^T) */
static pw_status infer_qkv_rope(const op_def *d, const pw_op_env *env, const pw_value *args,
                                out_spec *s) {
    pw_tensor *x = NULL, *wq = NULL, *wk = NULL, *wv = NULL;
    int64_t heads = 0, kv_heads = 0;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &x));
    PW_TRY(arg_int(d, args, 4, 1, INT32_MAX / 1024, &heads));
    PW_TRY(arg_int(d, args, 5, 1, INT32_MAX / 1024, &kv_heads));
    if (env->head_dim <= 0 || env->head_dim % 2)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': env.head_dim = %d must be positive and even",
                        d->name, env->head_dim);
    PW_TRY(arg_weight_rows(d, args, 1, x, heads * env->head_dim, &wq));
    PW_TRY(arg_weight_rows(d, args, 2, x, kv_heads * env->head_dim, &wk));
    PW_TRY(arg_weight_rows(d, args, 3, x, kv_heads * env->head_dim, &wv));
    if (!env->rope_table || env->rope_max_pos <= 0 || !rope_positions(env))
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': env has no rope table or positions buffer", d->name);
    PW_TRY(check_tokens(d, env, x->shape[0]));
    spec_2d(s, PW_F32, x->shape[0], wq->shape[0]);
    s->n_tuple = 3;
    s->tuple_cols[0] = wq->shape[0];
    s->tuple_cols[1] = wk->shape[0];
    s->tuple_cols[2] = wv->shape[0];
    return PW_OK;
}

/* Unfused: three matmuls, then rope on q and on k in place. */
static pw_status qkv_rope_unfused(const pw_op_env *env, const pw_value *args,
                                  pw_tensor *const *outs) {
    pw_tensor *x = targ(args, 0);
    int64_t t = x->shape[0], rope_heads[2] = {args[4].as.i, args[5].as.i};
    for (int i = 0; i < 3; i++) PW_TRY(matmul_into(env, fdata(outs[i]), x, targ(args, 1 + i)));
    for (int i = 0; i < 2; i++) {
        pw_k_rope_args r = {fdata(outs[i]), fdata(outs[i]), rope_positions(env),
                            env->rope_table, t, rope_heads[i], env->head_dim,
                            env->rope_max_pos};
        PW_TRY(launch_kernel(env, PW_KERNEL_ROPE, &r, sizeof r));
    }
    return PW_OK;
}

static pw_status launch_qkv_rope(const pw_op_env *env, const pw_value *args,
                                 pw_tensor *const *outs) {
    if (!use_fused(env, PW_KERNEL_QKV_ROPE)) return qkv_rope_unfused(env, args, outs);
    pw_tensor *x = targ(args, 0), *wq = targ(args, 1), *wk = targ(args, 2), *wv = targ(args, 3);
    pw_k_qkv_rope_args k = {
        .q = fdata(outs[0]), .k = fdata(outs[1]), .v = fdata(outs[2]), .x = fdata(x),
        .wq = wq->data, .wk = wk->data, .wv = wv->data,
        .tq = wq->dtype, .tk = wk->dtype, .tv = wv->dtype, .scratch = NULL,
        .positions = rope_positions(env), .rope_table = env->rope_table,
        .n_tokens = x->shape[0], .dim = x->shape[1], .n_heads = args[4].as.i,
        .n_kv_heads = args[5].as.i, .head_dim = env->head_dim, .max_pos = env->rope_max_pos};
    PW_TRY(scratch_alloc(env, kernel_scratch_bytes(env, PW_KERNEL_QKV_ROPE, &k), &k.scratch));
    pw_status s = launch_kernel(env, PW_KERNEL_QKV_ROPE, &k, sizeof k);
    scratch_release(env, k.scratch);
    return s;
}

/* gate_up_silu(x, w_gate, w_up) -> silu(x w_gate^T) * (x w_up^T) */
static pw_status infer_gate_up_silu(const op_def *d, const pw_op_env *env, const pw_value *args,
                                    out_spec *s) {
    pw_tensor *x = NULL, *wg = NULL, *wu = NULL;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &x));
    PW_TRY(arg_weight_rows(d, args, 1, x, -1, &wg));
    PW_TRY(arg_weight_rows(d, args, 2, x, wg->shape[0], &wu));
    spec_2d(s, PW_F32, x->shape[0], wg->shape[0]);
    return PW_OK;
}

/* Fused: `up` (x w_up^T, [T][F]) and the kernel's matmul scratch share
 * one short-lived block. */
static pw_status gate_up_silu_fused(const pw_op_env *env, pw_tensor *out, const pw_tensor *x,
                                    const pw_tensor *wg, const pw_tensor *wu) {
    int64_t t = x->shape[0], f = wg->shape[0], dim = x->shape[1];
    size_t up_floats = (size_t)(t * f);
    pw_k_gate_up_silu_args k = {fdata(out), fdata(x), wg->data, wu->data, wg->dtype,
                                wu->dtype,  NULL,     NULL,     t,        dim,
                                f};
    size_t mm_bytes = kernel_scratch_bytes(env, PW_KERNEL_GATE_UP_SILU, &k);
    PW_TRY(scratch_alloc(env, up_floats * sizeof(float) + mm_bytes, &k.up));
    k.scratch = mm_bytes ? k.up + up_floats : NULL;
    pw_status s = launch_kernel(env, PW_KERNEL_GATE_UP_SILU, &k, sizeof k);
    scratch_release(env, k.up);
    return s;
}

/* Unfused: out = x w_gate^T, up = x w_up^T, out = silu(out) * up. */
static pw_status gate_up_silu_unfused(const pw_op_env *env, pw_tensor *out, const pw_tensor *x,
                                      const pw_tensor *wg, const pw_tensor *wu) {
    int64_t t = x->shape[0], f = wg->shape[0];
    float *up = NULL;
    PW_TRY(scratch_alloc(env, (size_t)(t * f) * sizeof(float), &up));
    pw_status s = matmul_into(env, fdata(out), x, wg);
    if (s == PW_OK) s = matmul_into(env, up, x, wu);
    if (s == PW_OK) {
        pw_k_silu_args k = {fdata(out), fdata(out), up, 1, t * f};
        s = launch_kernel(env, PW_KERNEL_SILU_MUL, &k, sizeof k);
    }
    scratch_release(env, up);
    return s;
}

static pw_status launch_gate_up_silu(const pw_op_env *env, const pw_value *args,
                                     pw_tensor *const *outs) {
    pw_tensor *x = targ(args, 0), *wg = targ(args, 1), *wu = targ(args, 2);
    return use_fused(env, PW_KERNEL_GATE_UP_SILU) ? gate_up_silu_fused(env, outs[0], x, wg, wu)
                                                   : gate_up_silu_unfused(env, outs[0], x, wg, wu);
}

/* ---- Gemma 3 ------------------------------------------------------------------------------
 * Their kernels are in the CPU set only; a set without one refuses the op
 * here, at shape inference (the plan is built before any step runs). The
 * windowed attention is part of the same refusal: a set with these kernels
 * must honour pw_k_attention_args.window. */

static pw_status require_kernel(const op_def *d, const pw_op_env *env, pw_kernel_id id) {
    if (has_kernel(env, id)) return PW_OK;
    const pw_kernel_set *set = kernel_set(env);
    return pw_error(PW_ERR_UNSUPPORTED,
                    "op '%s': the %s kernel set has no %s kernel (Gemma 3, Qwen 2, Qwen 3 "
                    "and Phi-3 models run on the CPU only)",
                    d->name, set ? set->name : pw_device_name(pw_stream_device(env->stream)),
                    pw_kernel_id_name(id));
}

static pw_status arg_float(const op_def *d, const pw_value *args, int i, double *out) {
    if (args[i].kind == PW_VAL_FLOAT) *out = args[i].as.f;
    else if (args[i].kind == PW_VAL_INT) *out = (double)args[i].as.i;
    else
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': argument %d '%s' must be a float, got %s",
                        d->name, i + 1, d->arg_names[i], kind_name(args[i].kind));
    if (!isfinite(*out))
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': argument %d '%s' must be finite", d->name,
                        i + 1, d->arg_names[i]);
    return PW_OK;
}

static pw_status infer_scale_like(const op_def *d, const pw_op_env *env, const pw_value *args,
                                  out_spec *s, pw_kernel_id id, bool nonzero) {
    pw_tensor *x = NULL;
    double v = 0;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, -1, &x));
    PW_TRY(arg_float(d, args, 1, &v));
    if (nonzero && !(v > 0))
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': cap must be positive, got %g", d->name, v);
    PW_TRY(require_kernel(d, env, id));
    s->none = false;
    s->dtype = PW_F32;
    s->ndim = x->ndim;
    memcpy(s->shape, x->shape, sizeof s->shape);
    return PW_OK;
}

static double float_arg(const pw_value *args, int i) {
    return args[i].kind == PW_VAL_FLOAT ? args[i].as.f : (double)args[i].as.i;
}

static pw_status infer_scale(const op_def *d, const pw_op_env *env, const pw_value *args,
                             out_spec *s) {
    return infer_scale_like(d, env, args, s, PW_KERNEL_SCALE, false);
}

/* scale and softcap: y = f(x, s) elementwise, one kernel each */
static pw_status launch_scale_like(const pw_op_env *env, const pw_value *args,
                                   pw_tensor *const *outs, pw_kernel_id kernel) {
    pw_tensor *x = targ(args, 0);
    pw_k_scale_args a = {fdata(outs[0]), fdata(x), pw_tensor_numel(x), (float)float_arg(args, 1)};
    return launch_kernel(env, kernel, &a, sizeof a);
}

static pw_status launch_scale(const pw_op_env *env, const pw_value *args,
                              pw_tensor *const *outs) {
    return launch_scale_like(env, args, outs, PW_KERNEL_SCALE);
}

static pw_status infer_softcap(const op_def *d, const pw_op_env *env, const pw_value *args,
                               out_spec *s) {
    return infer_scale_like(d, env, args, s, PW_KERNEL_SOFTCAP, true);
}

static pw_status launch_softcap(const pw_op_env *env, const pw_value *args,
                                pw_tensor *const *outs) {
    return launch_scale_like(env, args, outs, PW_KERNEL_SOFTCAP);
}

/* gate_up_gelu(x, w_gate, w_up) -> gelu_tanh(x w_gate^T) * (x w_up^T) */
static pw_status infer_gate_up_gelu(const op_def *d, const pw_op_env *env, const pw_value *args,
                                    out_spec *s) {
    PW_TRY(infer_gate_up_silu(d, env, args, s));
    return require_kernel(d, env, PW_KERNEL_GELU_MUL);
}

/* out = x w_gate^T, up = x w_up^T, out = gelu_tanh(out) * up. */
static pw_status launch_gate_up_gelu(const pw_op_env *env, const pw_value *args,
                                     pw_tensor *const *outs) {
    pw_tensor *out = outs[0], *x = targ(args, 0), *wg = targ(args, 1), *wu = targ(args, 2);
    int64_t t = x->shape[0], f = wg->shape[0];
    float *up = NULL;
    PW_TRY(scratch_alloc(env, (size_t)(t * f) * sizeof(float), &up));
    pw_status s = matmul_into(env, fdata(out), x, wg);
    if (s == PW_OK) s = matmul_into(env, up, x, wu);
    if (s == PW_OK) {
        pw_k_gelu_mul_args k = {fdata(out), fdata(out), up, t * f};
        s = launch_kernel(env, PW_KERNEL_GELU_MUL, &k, sizeof k);
    }
    scratch_release(env, up);
    return s;
}

static const float *layer_rope_table(const pw_op_env *env, int64_t layer) {
    if (env->layer_rope_table && env->layer_rope_table[layer]) return env->layer_rope_table[layer];
    return env->rope_table;
}

/* qkv_norm_rope(x, wq, wk, wv, q_norm, k_norm, n_heads, n_kv_heads, layer) */
static pw_status infer_qkv_norm_rope(const op_def *d, const pw_op_env *env, const pw_value *args,
                                     out_spec *s) {
    pw_tensor *x = NULL, *wq = NULL, *wk = NULL, *wv = NULL, *qn = NULL, *kn = NULL;
    int64_t heads = 0, kv_heads = 0, layer = 0;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &x));
    PW_TRY(arg_int(d, args, 6, 1, INT32_MAX / 1024, &heads));
    PW_TRY(arg_int(d, args, 7, 1, INT32_MAX / 1024, &kv_heads));
    if (env->n_layers <= 0)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': env has no layers", d->name);
    PW_TRY(arg_int(d, args, 8, 0, env->n_layers - 1, &layer));
    if (env->head_dim <= 0 || env->head_dim % 2)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': env.head_dim = %d must be positive and even",
                        d->name, env->head_dim);
    PW_TRY(arg_weight_rows(d, args, 1, x, heads * env->head_dim, &wq));
    PW_TRY(arg_weight_rows(d, args, 2, x, kv_heads * env->head_dim, &wk));
    PW_TRY(arg_weight_rows(d, args, 3, x, kv_heads * env->head_dim, &wv));
    for (int i = 4; i < 6; i++) {
        pw_tensor *w = NULL;
        PW_TRY(arg_tensor(d, args, i, PW_F32, 1, &w));
        if (w->shape[0] != env->head_dim)
            return pw_error(PW_ERR_INVALID_ARG, "op '%s': %s has %lld elements, expected head_dim %d",
                            d->name, d->arg_names[i], (long long)w->shape[0], env->head_dim);
        if (i == 4) qn = w;
        else kn = w;
    }
    (void)qn, (void)kn;
    if (!(env->rms_eps > 0.0f))
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': env.rms_eps must be positive", d->name);
    if (!layer_rope_table(env, layer) || env->rope_max_pos <= 0 || !rope_positions(env))
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': env has no rope table or positions buffer", d->name);
    PW_TRY(check_tokens(d, env, x->shape[0]));
    PW_TRY(require_kernel(d, env, PW_KERNEL_HEAD_NORM_ROPE));
    spec_2d(s, PW_F32, x->shape[0], wq->shape[0]);
    s->n_tuple = 3;
    s->tuple_cols[0] = wq->shape[0];
    s->tuple_cols[1] = wk->shape[0];
    s->tuple_cols[2] = wv->shape[0];
    return PW_OK;
}

/* Three matmuls, then the per-head norm and rope on q and on k in place. */
static pw_status launch_qkv_norm_rope(const pw_op_env *env, const pw_value *args,
                                      pw_tensor *const *outs) {
    pw_tensor *x = targ(args, 0);
    int64_t t = x->shape[0], heads[2] = {args[6].as.i, args[7].as.i}, layer = args[8].as.i;
    for (int i = 0; i < 3; i++) PW_TRY(matmul_into(env, fdata(outs[i]), x, targ(args, 1 + i)));
    for (int i = 0; i < 2; i++) {
        pw_k_head_norm_rope_args r = {fdata(outs[i]),      fdata(targ(args, 4 + i)),
                                      rope_positions(env), layer_rope_table(env, layer),
                                      t,                   heads[i],
                                      env->head_dim,       env->rope_max_pos,
                                      env->rms_eps};
        PW_TRY(launch_kernel(env, PW_KERNEL_HEAD_NORM_ROPE, &r, sizeof r));
    }
    return PW_OK;
}

/* ---- lm_head ------------------------------------------------------------------------------
 * lm_head(x, w, softcap): the logits of the rows the step samples from only
 * (attn_meta->sample_rows, each request's last scheduled token; every row
 * without a list), soft-capped when softcap > 0. A prefill chunk of 128
 * tokens needs one row of logits, not 128, and the LM head is the model's
 * largest matmul (Gemma 3: 262k x 640, more multiply-adds per token than
 * all its layers). Output rows 0..n-1 are the sampled rows' logits in list
 * order; the rows after them are not written by the fused kernel. The
 * count is read when the kernel runs, so a captured graph of a padded size
 * serves every step of that size. */

static pw_status infer_lm_head(const op_def *d, const pw_op_env *env, const pw_value *args,
                               out_spec *s) {
    double cap = 0;
    PW_TRY(infer_matmul(d, env, args, s));
    PW_TRY(arg_float(d, args, 2, &cap));
    if (cap < 0)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': softcap must be 0 (none) or positive, got %g", d->name, cap);
    if (use_fused(env, PW_KERNEL_LM_HEAD)) return PW_OK;
    PW_TRY(require_kernel(d, env, PW_KERNEL_SELECT_ROWS));
    return cap > 0 ? require_kernel(d, env, PW_KERNEL_SOFTCAP) : PW_OK;
}

/* Unfused: gather the sampled rows (zeros after them), multiply all
 * n_tokens rows, cap them: the fused kernel's bits on the sampled rows. */
static pw_status lm_head_unfused(const pw_op_env *env, float *y, const pw_tensor *x,
                                 const pw_tensor *w, float cap) {
    int64_t t = x->shape[0], k = x->shape[1];
    float *rows = NULL;
    PW_TRY(scratch_alloc(env, (size_t)(t * k) * sizeof(float), &rows));
    pw_k_select_rows_args g = {rows, fdata(x), env->attn_meta, t, k};
    pw_status s = launch_kernel(env, PW_KERNEL_SELECT_ROWS, &g, sizeof g);
    if (s == PW_OK) s = matmul_rows(env, y, rows, t, w);
    if (s == PW_OK && cap > 0) {
        pw_k_scale_args c = {y, y, t * w->shape[0], cap};
        s = launch_kernel(env, PW_KERNEL_SOFTCAP, &c, sizeof c);
    }
    scratch_release(env, rows);
    return s;
}

static pw_status lm_head_into(const pw_op_env *env, float *y, const pw_tensor *x,
                              const pw_tensor *w, float cap) {
    if (!use_fused(env, PW_KERNEL_LM_HEAD)) return lm_head_unfused(env, y, x, w, cap);
    pw_k_lm_head_args a = {y,           fdata(x),    w->data,     NULL,      env->attn_meta,
                           x->shape[0], w->shape[0], w->shape[1], w->dtype, cap};
    PW_TRY(scratch_alloc(env, kernel_scratch_bytes(env, PW_KERNEL_LM_HEAD, &a), &a.scratch));
    pw_status s = launch_kernel(env, PW_KERNEL_LM_HEAD, &a, sizeof a);
    scratch_release(env, a.scratch);
    return s;
}

static pw_status launch_lm_head(const pw_op_env *env, const pw_value *args,
                                pw_tensor *const *outs) {
    return lm_head_into(env, fdata(outs[0]), targ(args, 0), targ(args, 1),
                        (float)float_arg(args, 2));
}

/* ---- the vocabulary split of the embedding and the LM head (tensor parallelism) ---------
 * A rank holds vocabulary rows pw_tp_shard_range(vocab, 1) of the table
 * and of the head. Neither op sums across ranks: the lookup takes each
 * token's row from the rank that holds it, and the head's logits are laid
 * side by side, so both give the unsplit ops' bits. */

/* Rows [*v0, *v1) of `vocab` this rank holds; `rows` (the weight's) must match. */
static pw_status vocab_rows(const op_def *d, int64_t vocab, int64_t rows, int64_t *v0,
                            int64_t *v1) {
    pw_tp_shard_range(vocab, 1, pw_comm_size(), pw_comm_rank(), v0, v1);
    if (rows != *v1 - *v0)
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': %lld weight rows, but rank %d of %d holds %lld of the "
                        "vocabulary's %lld",
                        d->name, (long long)rows, pw_comm_rank(), pw_comm_size(),
                        (long long)(*v1 - *v0), (long long)vocab);
    return PW_OK;
}

/* embedding_vocab(ids i32[T], table [V_r][D], vocab V) -> f32[T][D] */
static pw_status infer_embedding_vocab(const op_def *d, const pw_op_env *env,
                                       const pw_value *args, out_spec *s) {
    int64_t vocab = 0, v0, v1;
    PW_TRY(infer_embedding(d, env, args, s));
    PW_TRY(arg_int(d, args, 2, 1, INT32_MAX, &vocab));
    PW_TRY(vocab_rows(d, vocab, targ(args, 1)->shape[0], &v0, &v1));
    return require_kernel(d, env, PW_KERNEL_EMBEDDING_VOCAB);
}

static pw_status launch_embedding_vocab(const pw_op_env *env, const pw_value *args,
                                        pw_tensor *const *outs) {
    pw_tensor *ids = targ(args, 0), *table = targ(args, 1);
    int64_t t = ids->shape[0], dim = table->shape[1], ranks = pw_comm_size();
    if (ranks * t * dim > INT32_MAX) /* MPI counts are int */
        return pw_error(PW_ERR_UNSUPPORTED, "embedding_vocab: %lld tokens of %lld exceed one "
                        "MPI gather", (long long)t, (long long)dim);
    pw_k_embedding_vocab_args a = {fdata(outs[0]), ids->data,   table->data,     NULL,
                                   NULL,           t,           args[2].as.i,    table->shape[0],
                                   dim,            ranks,       table->dtype,    0};
    PW_TRY(scratch_alloc(env, (size_t)((ranks + 1) * t * dim) * sizeof(float), &a.local));
    a.gather = a.local + t * dim;
    pw_status st = launch_kernel(env, PW_KERNEL_EMBEDDING_VOCAB, &a, sizeof a);
    scratch_release(env, a.local);
    return st;
}

/* lm_head_vocab(x, w [V_r][K], softcap, vocab V) -> f32[T][V]: lm_head on
 * this rank's rows, then its sampled rows gathered. */
static pw_status infer_lm_head_vocab(const op_def *d, const pw_op_env *env,
                                     const pw_value *args, out_spec *s) {
    int64_t vocab = 0, v0, v1;
    PW_TRY(infer_lm_head(d, env, args, s));
    PW_TRY(arg_int(d, args, 3, 1, INT32_MAX, &vocab));
    PW_TRY(vocab_rows(d, vocab, targ(args, 1)->shape[0], &v0, &v1));
    spec_2d(s, PW_F32, targ(args, 0)->shape[0], vocab);
    return require_kernel(d, env, PW_KERNEL_GATHER_VOCAB);
}

static pw_status launch_lm_head_vocab(const pw_op_env *env, const pw_value *args,
                                      pw_tensor *const *outs) {
    pw_tensor *x = targ(args, 0), *w = targ(args, 1);
    int64_t t = x->shape[0], vocab = args[3].as.i, cols = w->shape[0];
    if (t * vocab > INT32_MAX) /* MPI counts are int */
        return pw_error(PW_ERR_UNSUPPORTED, "lm_head_vocab: %lld rows of %lld logits exceed one "
                        "MPI gather", (long long)t, (long long)vocab);
    float *local = NULL;
    PW_TRY(scratch_alloc(env, (size_t)(t * (cols + vocab)) * sizeof(float), &local));
    pw_status st = lm_head_into(env, local, x, w, (float)float_arg(args, 2));
    if (st == PW_OK) {
        pw_k_gather_vocab_args a = {fdata(outs[0]), local, local + t * cols, env->attn_meta,
                                    t,              vocab, cols};
        st = launch_kernel(env, PW_KERNEL_GATHER_VOCAB, &a, sizeof a);
    }
    scratch_release(env, local);
    return st;
}

/* ---- qkv with NeoX rope (Qwen 2, Phi-3) ------------------------------------------------------
 * qkv_rope_neox(x, wq, wk, wv, n_heads, n_kv_heads) and
 * qkv_bias_rope_neox(x, wq, wk, wv, bq, bk, bv, n_heads, n_kv_heads):
 * q = x wq^T (+ bq), k = x wk^T (+ bk), v = x wv^T (+ bv), then q and k
 * rotated NeoX style in place. Three matmuls, a bias add each, two ropes:
 * every launch row-local, so the op is batch-invariant as its kernels are. */

static pw_status infer_qkv_neox(const op_def *d, const pw_op_env *env, const pw_value *args,
                                int heads_at, out_spec *s) {
    pw_tensor *x = NULL, *w[3] = {NULL, NULL, NULL};
    int64_t heads = 0, kv_heads = 0;
    PW_TRY(arg_tensor(d, args, 0, PW_F32, 2, &x));
    PW_TRY(arg_int(d, args, heads_at, 1, INT32_MAX / 1024, &heads));
    PW_TRY(arg_int(d, args, heads_at + 1, 1, INT32_MAX / 1024, &kv_heads));
    if (env->head_dim <= 0 || env->head_dim % 2)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': env.head_dim = %d must be positive and even",
                        d->name, env->head_dim);
    int64_t rows[3] = {heads * env->head_dim, kv_heads * env->head_dim, kv_heads * env->head_dim};
    for (int i = 0; i < 3; i++) PW_TRY(arg_weight_rows(d, args, 1 + i, x, rows[i], &w[i]));
    if (heads_at == 7) {
        for (int i = 0; i < 3; i++) {
            pw_tensor *b = NULL;
            PW_TRY(arg_tensor(d, args, 4 + i, PW_F32, 1, &b));
            if (b->shape[0] != rows[i])
                return pw_error(PW_ERR_INVALID_ARG, "op '%s': %s has %lld elements, expected %lld",
                                d->name, d->arg_names[4 + i], (long long)b->shape[0],
                                (long long)rows[i]);
        }
        PW_TRY(require_kernel(d, env, PW_KERNEL_BIAS_ADD));
    }
    if (!env->rope_table || env->rope_max_pos <= 0 || !rope_positions(env))
        return pw_error(PW_ERR_INVALID_ARG,
                        "op '%s': env has no rope table or positions buffer", d->name);
    PW_TRY(check_tokens(d, env, x->shape[0]));
    PW_TRY(require_kernel(d, env, PW_KERNEL_ROPE_NEOX));
    spec_2d(s, PW_F32, x->shape[0], rows[0]);
    s->n_tuple = 3;
    for (int i = 0; i < 3; i++) s->tuple_cols[i] = rows[i];
    return PW_OK;
}

static pw_status infer_qkv_rope_neox(const op_def *d, const pw_op_env *env, const pw_value *args,
                                     out_spec *s) {
    return infer_qkv_neox(d, env, args, 4, s);
}

static pw_status infer_qkv_bias_rope_neox(const op_def *d, const pw_op_env *env,
                                          const pw_value *args, out_spec *s) {
    return infer_qkv_neox(d, env, args, 7, s);
}

/* biases: args index of bq (bk, bv follow), or 0 for none; heads_at: n_heads's index. */
static pw_status launch_qkv_neox(const pw_op_env *env, const pw_value *args,
                                 pw_tensor *const *outs, int biases, int heads_at) {
    pw_tensor *x = targ(args, 0);
    int64_t t = x->shape[0], heads[2] = {args[heads_at].as.i, args[heads_at + 1].as.i};
    for (int i = 0; i < 3; i++) {
        PW_TRY(matmul_into(env, fdata(outs[i]), x, targ(args, 1 + i)));
        if (biases) {
            pw_k_bias_add_args b = {fdata(outs[i]), fdata(outs[i]), fdata(targ(args, biases + i)),
                                    t, outs[i]->shape[1]};
            PW_TRY(launch_kernel(env, PW_KERNEL_BIAS_ADD, &b, sizeof b));
        }
    }
    for (int i = 0; i < 2; i++) {
        pw_k_rope_args r = {fdata(outs[i]), fdata(outs[i]), rope_positions(env),
                            env->rope_table, t, heads[i], env->head_dim, env->rope_max_pos};
        PW_TRY(launch_kernel(env, PW_KERNEL_ROPE_NEOX, &r, sizeof r));
    }
    return PW_OK;
}

static pw_status launch_qkv_rope_neox(const pw_op_env *env, const pw_value *args,
                                      pw_tensor *const *outs) {
    return launch_qkv_neox(env, args, outs, 0, 4);
}

static pw_status launch_qkv_bias_rope_neox(const pw_op_env *env, const pw_value *args,
                                           pw_tensor *const *outs) {
    return launch_qkv_neox(env, args, outs, 4, 7);
}

/* ---- the table ------------------------------------------------------------------------------
 * Generated from op_table.h: each op's argument names, its definition and
 * one trampoline per op so that a callable's user pointer can be the env
 * itself (binding allocates nothing). */

#define OP_ARG_NAMES_(...) {__VA_ARGS__}
#define OP_ARGS_(id, name, args, splitting) \
    static const char *const op_args_##name[] = OP_ARG_NAMES_ args;
PW_OP_TABLE(OP_ARGS_)
#undef OP_ARGS_

static const op_def op_defs[PW_OP_COUNT_] = {
#define OP_DEF_(id, name, args, splitting)                                                     \
    [PW_OP_##id] = {#name, (int)PW_ARRAY_LEN(op_args_##name), op_args_##name, splitting,       \
                    infer_##name, launch_##name},
    PW_OP_TABLE(OP_DEF_)
#undef OP_DEF_
};

static const op_def *find_op(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < PW_OP_COUNT_; i++)
        if (strcmp(op_defs[i].name, name) == 0) return &op_defs[i];
    return NULL;
}

static pw_status check_call(const op_def *d, const pw_op_env *env, const pw_value *args,
                            int nargs, out_spec *spec) {
    if (!env || !env->stream)
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': no execution environment or stream",
                        d->name);
    if (nargs != d->nargs || (nargs > 0 && !args))
        return pw_error(PW_ERR_INVALID_ARG, "op '%s': expects %d argument%s, got %d", d->name,
                        d->nargs, d->nargs == 1 ? "" : "s", nargs);
    memset(spec, 0, sizeof *spec);
    return d->infer(d, env, args, spec);
}

/* A tuple-returning op: every output allocated, one launch, the tuple. */
static pw_status invoke_tuple(const op_def *d, const pw_op_env *env, const pw_value *args,
                              const out_spec *spec, pw_value *out) {
    pw_pool *pool = output_pool(env);
    if (!pool) return pw_error(PW_ERR_INVALID_ARG, "op '%s': env has no pool for outputs", d->name);
    pw_tuple *tuple = NULL;
    PW_TRY(pw_tuple_new(spec->n_tuple, &tuple));
    pw_tensor *outs[PW_OP_MAX_OUTPUTS] = {0};
    pw_status s = PW_OK;
    for (int i = 0; i < spec->n_tuple && s == PW_OK; i++) {
        int64_t shape[PW_MAX_DIMS] = {spec->shape[0], spec->tuple_cols[i]};
        s = pw_tensor_new(pool, PW_F32, 2, shape, &outs[i]);
        /* the tuple takes the reference */
        if (s == PW_OK) pw_tuple_set(tuple, i, pw_value_tensor(outs[i]));
    }
    if (s == PW_OK) s = d->launch(env, args, outs);
    if (s != PW_OK) {
        pw_tuple_release(tuple);
        return pw_error_context(s, "op '%s'", d->name);
    }
    *out = pw_value_tuple(tuple);
    return PW_OK;
}

static pw_status op_invoke(const op_def *d, void *user, const pw_value *args, int nargs,
                           pw_value *out) {
    *out = pw_value_none();
    const pw_op_env *env = user;
    out_spec spec;
    PW_TRY(check_call(d, env, args, nargs, &spec));
    /* Kernels run where the stream is, from that device's kernel set. */
    pw_device dev = pw_stream_device(env->stream);
    for (int i = 0; i < nargs; i++)
        if (args[i].kind == PW_VAL_TENSOR && args[i].as.tensor &&
            args[i].as.tensor->device != dev)
            return pw_error(PW_ERR_INVALID_ARG,
                            "op '%s': argument %d '%s' is %s memory but the stream is %s",
                            d->name, i + 1, d->arg_names[i], pw_device_name(args[i].as.tensor->device),
                            pw_device_name(dev));
    if (spec.n_tuple > 0) return invoke_tuple(d, env, args, &spec, out);
    pw_tensor *result = NULL;
    if (!spec.none) {
        pw_pool *pool = output_pool(env);
        if (!pool)
            return pw_error(PW_ERR_INVALID_ARG, "op '%s': env has no pool for outputs", d->name);
        PW_TRY(pw_tensor_new(pool, spec.dtype, spec.ndim, spec.shape, &result));
    }
    pw_status s = d->launch(env, args, &result);
    if (s != PW_OK) {
        pw_tensor_release(result);
        return pw_error_context(s, "op '%s'", d->name);
    }
    if (result) *out = pw_value_tensor(result);
    return PW_OK;
}

#define OP_TRAMPOLINE_(id, name, args, splitting)                                              \
    static pw_status call_##name(void *user, const pw_value *args_, int nargs, pw_value *out) { \
        return op_invoke(&op_defs[PW_OP_##id], user, args_, nargs, out);                         \
    }
PW_OP_TABLE(OP_TRAMPOLINE_)
#undef OP_TRAMPOLINE_

static const pw_callable_fn op_fns[PW_OP_COUNT_] = {
#define OP_FN_(id, name, args, splitting) [PW_OP_##id] = call_##name,
    PW_OP_TABLE(OP_FN_)
#undef OP_FN_
};

/* The splitting ops' names, in table order: the row's `splitting` token
 * (true or false, pasted before stdbool expands it) picks OP_IF_true. */
#define OP_IF_true(x) x,
#define OP_IF_false(x)
#define OP_SPLITTING_NAME_(id, name, args, splitting) OP_IF_##splitting(#name)
static const char *const op_splitting_names[] = {PW_OP_TABLE(OP_SPLITTING_NAME_) NULL};
#undef OP_SPLITTING_NAME_
#undef OP_IF_true
#undef OP_IF_false

pw_status pw_op_resolve(const pw_op_env *env, const char *name, pw_callable *out) {
    memset(out, 0, sizeof *out);
    if (!env) return pw_error(PW_ERR_INVALID_ARG, "pw_op_resolve: env is NULL");
    const op_def *d = find_op(name);
    if (!d) return pw_error(PW_ERR_NOT_FOUND, "unknown op '%s'", name ? name : "(null)");
    out->fn = op_fns[d - op_defs];
    out->user = (void *)env;
    out->name = d->name;
    return PW_OK;
}

pw_status pw_op_resolve_hook(void *env, const char *target, pw_callable *out) {
    return pw_op_resolve(env, target, out);
}

pw_status pw_op_infer(const pw_op_env *env, const char *name, const pw_value *args, int nargs,
                      pw_dtype *dtype, int *ndim, int64_t shape[PW_MAX_DIMS],
                      bool *returns_none) {
    const op_def *d = find_op(name);
    if (!d) return pw_error(PW_ERR_NOT_FOUND, "unknown op '%s'", name ? name : "(null)");
    out_spec spec;
    PW_TRY(check_call(d, env, args, nargs, &spec));
    *dtype = spec.dtype;
    *ndim = spec.ndim;
    memcpy(shape, spec.shape, sizeof spec.shape);
    *returns_none = spec.none;
    return PW_OK;
}

int pw_op_splitting_names(const char *const **out) {
    *out = op_splitting_names;
    return (int)PW_ARRAY_LEN(op_splitting_names) - 1; /* the NULL that ends it */
}

bool pw_op_is_splitting(const char *name) {
    const op_def *d = find_op(name);
    return d && d->splitting;
}

int pw_op_count(void) { return PW_OP_COUNT_; }

const char *pw_op_name(int i) { return i >= 0 && i < PW_OP_COUNT_ ? op_defs[i].name : NULL; }
