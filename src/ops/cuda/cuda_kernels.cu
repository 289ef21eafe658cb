// CUDA kernels for the Llama workload: the args structs of
// ops/kernel_args.h (the launch ABI every kernel set shares) and the
// semantics the CPU kernels document (ops/cpu/kernels.h), every pointer a
// device pointer.
//
// Batch invariance: every output row is computed by one thread block (or one
// thread) whose work and reduction order depend only on the row's own
// inputs and on shape constants that do not involve the token count. The
// matmul calls cuBLAS only with a fixed token tile (PW_CUDA_MATMUL_TILE), so
// cuBLAS sees the same (m, n, k) whatever the batch; the partial last tile
// goes through scratch. See docs/cuda.md.
extern "C" {
#include "internal.h"
#include "ops/comm.h"
}
#include "ops/kernel_args.h"
#include "ops/kernel_set.h"
#include "backend/cuda/cuda_internal.h"
#include "ops/cuda/cuda_blas.h"
#include "ops/cuda/cuda_nccl.h"

#include <cuda_runtime.h>
#include <math.h>

#define PW_CUDA_BLOCK 256
#define PW_CUDA_ATTN_THREADS 128
#define PW_CUDA_MAX_GRID_X 65535

static pw_status last_launch(const char *kernel) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return PW_OK;
    return pw_error(PW_ERR_CUDA, "launching CUDA kernel %s failed: %s (%s)", kernel,
                    cudaGetErrorName(err), cudaGetErrorString(err));
}

static unsigned blocks_for(int64_t n) {
    int64_t b = (n + PW_CUDA_BLOCK - 1) / PW_CUDA_BLOCK;
    if (b < 1) b = 1;
    return (unsigned)(b > PW_CUDA_MAX_GRID_X ? PW_CUDA_MAX_GRID_X : b);
}

static pw_status check_rows(int64_t n_tokens, const char *kernel) {
    if (n_tokens < 0 || n_tokens > INT32_MAX)
        return pw_error(PW_ERR_INVALID_ARG, "CUDA kernel %s: token count %lld out of range",
                        kernel, (long long)n_tokens);
    return PW_OK;
}

// ---- embedding -------------------------------------------------------------

__global__ void embedding_kernel(float *out, const int32_t *ids, const float *table,
                                 int64_t vocab, int64_t dim) {
    int64_t t = blockIdx.x;
    int32_t id = ids[t];
    float *row = out + t * dim;
    bool ok = id >= 0 && id < vocab;
    const float *src = table + (int64_t)(ok ? id : 0) * dim;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) row[i] = ok ? src[i] : 0.0f;
}

static pw_status launch_embedding(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_embedding_args *a = (const pw_k_embedding_args *)args;
    PW_TRY(check_rows(a->n_tokens, "embedding"));
    if (a->n_tokens == 0) return PW_OK;
    embedding_kernel<<<(unsigned)a->n_tokens, PW_CUDA_BLOCK, 0, ctx->stream>>>(
        a->out, a->ids, a->table, a->vocab, a->dim);
    return last_launch("embedding");
}

// ---- rms_norm --------------------------------------------------------------

// Sum of squares in double: per-thread strided partial sums, then a fixed
// shared-memory tree. Same order for every row and every batch.
__device__ double block_sum_double(double v, double *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    double r = shared[0];
    __syncthreads();
    return r;
}

__global__ void rms_norm_kernel(float *y, float *residual, const float *x, const float *w,
                                int64_t dim, float eps) {
    __shared__ double shared[PW_CUDA_BLOCK];
    int64_t t = blockIdx.x;
    const float *xr = x + t * dim;
    float *yr = y + t * dim;
    const float *src = xr;
    if (residual) {
        float *r = residual + t * dim;
        for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) r[i] = r[i] + xr[i];
        __syncthreads();
        src = r;
    }
    double part = 0.0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) part += (double)src[i] * (double)src[i];
    double sum = block_sum_double(part, shared);
    float scale = (float)(1.0 / sqrt(sum / (double)dim + (double)eps));
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = src[i] * scale * w[i];
}

static pw_status launch_rms_norm_common(const pw_k_rms_norm_args *a, float *residual,
                                        const pw_cuda_stream_ctx *ctx, const char *name) {
    PW_TRY(check_rows(a->n_tokens, name));
    if (a->n_tokens == 0) return PW_OK;
    rms_norm_kernel<<<(unsigned)a->n_tokens, PW_CUDA_BLOCK, 0, ctx->stream>>>(
        a->y, residual, a->x, a->w, a->dim, a->eps);
    return last_launch(name);
}

static pw_status launch_rms_norm(const void *args, const pw_cuda_stream_ctx *ctx) {
    return launch_rms_norm_common((const pw_k_rms_norm_args *)args, NULL, ctx, "rms_norm");
}

static pw_status launch_add_rms_norm(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_rms_norm_args *a = (const pw_k_rms_norm_args *)args;
    return launch_rms_norm_common(a, a->residual, ctx, "add_rms_norm");
}

// ---- matmul ----------------------------------------------------------------

// y[T][N] = x[T][K] * W[N][K]^T. In cuBLAS's column-major terms y is N x T,
// W is K x N (transposed in the call) and x is K x T, so the token count is
// cuBLAS's n, always PW_CUDA_MATMUL_TILE. W's rows are ldw floats apart
// (cuBLAS's lda): a column range of a wider matrix (op matmul_shards).
static pw_status sgemm_tile(const pw_cuda_stream_ctx *ctx, float *y, const float *x,
                            const float *w, int64_t ldw, int64_t n, int64_t k) {
    const float one = 1.0f, zero = 0.0f;
    cublasHandle_t blas;
    PW_TRY(pw_cuda_blas_handle(ctx, &blas));
    PW_CUBLAS_TRY(pw_cuda_blas.sgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, PW_CUDA_MATMUL_TILE,
                                      (int)k, &one, w, (int)ldw, x, (int)k, &zero, y, (int)n));
    return PW_OK;
}

static pw_status launch_matmul(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_matmul_args *a = (const pw_k_matmul_args *)args;
    PW_TRY(check_rows(a->n_tokens, "matmul"));
    const int64_t ldw = a->ldw ? a->ldw : a->k;
    if (a->n > INT32_MAX || a->k > INT32_MAX || a->n < 1 || a->k < 1 || ldw < a->k ||
        ldw > INT32_MAX)
        return pw_error(PW_ERR_INVALID_ARG,
                        "CUDA matmul: shape [%lld][%lld] (rows %lld apart) out of range",
                        (long long)a->n, (long long)a->k, (long long)ldw);
    const int64_t tile = PW_CUDA_MATMUL_TILE, full = a->n_tokens / tile * tile;
    for (int64_t t0 = 0; t0 < full; t0 += tile)
        PW_TRY(sgemm_tile(ctx, a->y + t0 * a->n, a->x + t0 * a->k, a->w, ldw, a->n, a->k));
    int64_t rest = a->n_tokens - full;
    if (rest == 0) return PW_OK;
    if (!a->scratch)
        return pw_error(PW_ERR_INVALID_ARG,
                        "CUDA matmul: %lld tokens is not a multiple of %d and no scratch was "
                        "given (pw_cuda_matmul_scratch_floats)",
                        (long long)a->n_tokens, PW_CUDA_MATMUL_TILE);
    // The tile's rows past `rest` are left as the scratch holds them: row t
    // of y depends on row t of x alone (no cuBLAS algorithm mixes columns
    // of its n dimension), so they feed only output rows that are dropped,
    // and zeroing them would cost a memset node per matmul.
    float *xs = a->scratch, *ys = a->scratch + tile * a->k;
    PW_CUDA_TRY(cudaMemcpyAsync(xs, a->x + full * a->k, (size_t)(rest * a->k) * sizeof(float),
                                cudaMemcpyDeviceToDevice, ctx->stream));
    PW_TRY(sgemm_tile(ctx, ys, xs, a->w, ldw, a->n, a->k));
    PW_CUDA_TRY(cudaMemcpyAsync(a->y + full * a->n, ys, (size_t)(rest * a->n) * sizeof(float),
                                cudaMemcpyDeviceToDevice, ctx->stream));
    return PW_OK;
}

// ---- rope ------------------------------------------------------------------

__global__ void rope_kernel(float *out, const float *x, const int32_t *positions,
                            const float *table, int64_t n_heads, int64_t head_dim,
                            int64_t max_pos) {
    int64_t t = blockIdx.x;
    const int64_t half = head_dim / 2, width = n_heads * head_dim;
    int32_t pos = positions[t];
    const float *src = x + t * width;
    float *dst = out + t * width;
    bool ok = pos >= 0 && pos < max_pos;
    const float *cs = table + (int64_t)(ok ? pos : 0) * half * 2;
    for (int64_t j = threadIdx.x; j < n_heads * half; j += blockDim.x) {
        int64_t h = j / half, i = j % half;
        const float *v = src + h * head_dim;
        float *o = dst + h * head_dim;
        float x0 = v[2 * i], x1 = v[2 * i + 1];
        if (!ok) {
            o[2 * i] = x0;
            o[2 * i + 1] = x1;
            continue;
        }
        float c = cs[2 * i], s = cs[2 * i + 1];
        o[2 * i] = x0 * c - x1 * s;
        o[2 * i + 1] = x0 * s + x1 * c;
    }
}

static pw_status launch_rope(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_rope_args *a = (const pw_k_rope_args *)args;
    PW_TRY(check_rows(a->n_tokens, "rope"));
    if (a->n_tokens == 0) return PW_OK;
    rope_kernel<<<(unsigned)a->n_tokens, PW_CUDA_BLOCK, 0, ctx->stream>>>(
        a->out, a->x, a->positions, a->table, a->n_heads, a->head_dim, a->max_pos);
    return last_launch("rope");
}

// ---- silu and add ----------------------------------------------------------

__device__ float silu(float v) { return v / (1.0f + expf(-v)); }

__global__ void silu_and_mul_kernel(float *out, const float *gate_up, int64_t n_tokens,
                                    int64_t f) {
    int64_t total = n_tokens * f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / f, j = i % f;
        const float *row = gate_up + t * 2 * f;
        out[i] = silu(row[j]) * row[f + j];
    }
}

__global__ void silu_mul_kernel(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = silu(a[i]) * b[i];
}

__global__ void add_kernel(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

static pw_status launch_silu_and_mul(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_silu_args *a = (const pw_k_silu_args *)args;
    int64_t n = a->n_tokens * a->f;
    if (n <= 0) return PW_OK;
    silu_and_mul_kernel<<<blocks_for(n), PW_CUDA_BLOCK, 0, ctx->stream>>>(a->out, a->a,
                                                                          a->n_tokens, a->f);
    return last_launch("silu_and_mul");
}

static pw_status launch_silu_mul(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_silu_args *a = (const pw_k_silu_args *)args;
    int64_t n = a->n_tokens * a->f;
    if (n <= 0) return PW_OK;
    silu_mul_kernel<<<blocks_for(n), PW_CUDA_BLOCK, 0, ctx->stream>>>(a->out, a->a, a->b, n);
    return last_launch("silu_mul");
}

static pw_status launch_add(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_add_args *a = (const pw_k_add_args *)args;
    if (a->n <= 0) return PW_OK;
    add_kernel<<<blocks_for(a->n), PW_CUDA_BLOCK, 0, ctx->stream>>>(a->out, a->a, a->b, a->n);
    return last_launch("add");
}

// ---- tensor parallelism: the fixed shard order (docs/tensor-parallel.md) -----

__global__ void slice_cols_kernel(float *out, const float *x, int64_t n_tokens, int64_t x_cols,
                                  int64_t col0, int64_t width) {
    int64_t n = n_tokens * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = x[i / width * x_cols + col0 + i % width];
}

static pw_status launch_slice_cols(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_slice_cols_args *a = (const pw_k_slice_cols_args *)args;
    int64_t n = a->n_tokens * a->width;
    if (n <= 0) return PW_OK;
    slice_cols_kernel<<<blocks_for(n), PW_CUDA_BLOCK, 0, ctx->stream>>>(
        a->out, a->x, a->n_tokens, a->x_cols, a->col0, a->width);
    return last_launch("slice_cols");
}

// Where shard s's partials start in the gather buffer: rank r's share of
// the shards (pw_tp_shard_range, repeated on the device) padded to `most`
// shards per rank, as the equal-count all-gather lays them out. One rank:
// the shards in order.
__device__ int64_t shard_offset(int64_t s, int64_t shards, int64_t unit, int ranks,
                                int64_t most) {
    if (ranks <= 1) return s;
    if (unit < 1 || shards % unit != 0 || shards / unit < ranks) unit = 1;
    int64_t units = shards / unit;
    for (int r = 0; r < ranks; r++) {
        int64_t s0 = units * r / ranks * unit, s1 = units * (r + 1) / ranks * unit;
        if (s >= s0 && s < s1) return r * most + (s - s0);
    }
    return 0;
}

// out = ((p0 + p1) + p2) + ...: each element's sum in shard order, the CPU
// kernel's sequence (pw_k_sum_shards), whatever the number of ranks.
__global__ void sum_shards_kernel(float *out, const float *p, int64_t n_shards, int64_t unit,
                                  int ranks, int64_t most, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float acc = p[shard_offset(0, n_shards, unit, ranks, most) * n + i];
        for (int64_t s = 1; s < n_shards; s++)
            acc += p[shard_offset(s, n_shards, unit, ranks, most) * n + i];
        out[i] = acc;
    }
}

static pw_status launch_all_reduce_shards(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_all_reduce_shards_args *a = (const pw_k_all_reduce_shards_args *)args;
    int ranks = pw_comm_size();
    int64_t s0, s1, per_shard = a->n_tokens * a->n;
    pw_tp_shard_range(a->n_shards, a->shard_unit, ranks, pw_comm_rank(), &s0, &s1);
    if (s1 - s0 != a->local_shards)
        return pw_error(PW_ERR_INVALID_ARG,
                        "all_reduce_shards: recorded for %lld local shards, this rank owns %lld",
                        (long long)a->local_shards, (long long)(s1 - s0));
    if (per_shard <= 0) return PW_OK;
    const float *all = a->partials;
    int64_t most = a->n_shards;
    if (ranks > 1) {
#if PW_HAVE_NCCL
        most = pw_tp_gather_shards(a->n_shards, a->shard_unit) / ranks;
        PW_TRY(pw_cuda_nccl_allgather(a->partials, a->gather, (size_t)(most * per_shard),
                                      ctx->stream));
        all = a->gather;
#else
        return pw_error(PW_ERR_UNSUPPORTED,
                        "all_reduce_shards: tensor parallelism on CUDA needs NCCL, and this "
                        "build has none (install NCCL and rebuild)");
#endif
    }
    sum_shards_kernel<<<blocks_for(per_shard), PW_CUDA_BLOCK, 0, ctx->stream>>>(
        a->out, all, a->n_shards, a->shard_unit, ranks, most, per_shard);
    return last_launch("all_reduce_shards");
}

// ---- select_rows: the unfused LM head's gather ------------------------------

// The sampled rows (meta's list, read on the device when the graph replays)
// first, zeros after them; every row without a list. Same rules as the CPU
// kernel: the count is clamped to the batch, a listed row outside it reads
// row 0.
__global__ void select_rows_kernel(float *out, const float *x, const pw_attn_meta *meta,
                                   int64_t n_tokens, int64_t width) {
    bool listed = meta && meta->sample_rows && meta->n_sample_rows;
    int64_t n = listed ? (int64_t)*meta->n_sample_rows : n_tokens;
    n = n < 0 ? 0 : n > n_tokens ? n_tokens : n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_tokens * width;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = i / width, col = i % width;
        if (row >= n) {
            out[i] = 0.0f;
            continue;
        }
        int64_t src = listed ? (int64_t)meta->sample_rows[row] : row;
        if (src < 0 || src >= n_tokens) src = 0;
        out[i] = x[src * width + col];
    }
}

static pw_status launch_select_rows(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_select_rows_args *a = (const pw_k_select_rows_args *)args;
    int64_t n = a->n_tokens * a->width;
    if (n <= 0) return PW_OK;
    select_rows_kernel<<<blocks_for(n), PW_CUDA_BLOCK, 0, ctx->stream>>>(a->out, a->x, a->meta,
                                                                         a->n_tokens, a->width);
    return last_launch("select_rows");
}

// ---- argmax ----------------------------------------------------------------

// Ties go to the lowest index and NaNs are never chosen, as on the CPU; the
// result is order-independent, so the tree reduction gives the same index.
__device__ bool better(float v, int64_t i, float bv, int64_t bi) {
    if (isnan(v) || i < 0) return false;
    if (bi < 0) return true;
    return v > bv || (v == bv && i < bi);
}

__global__ void argmax_kernel(int32_t *out, const float *logits, int64_t vocab) {
    __shared__ float best_v[PW_CUDA_BLOCK];
    __shared__ int64_t best_i[PW_CUDA_BLOCK];
    int64_t t = blockIdx.x;
    const float *row = logits + t * vocab;
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x)
        if (better(row[i], i, bv, bi)) {
            bv = row[i];
            bi = i;
        }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s &&
            better(best_v[threadIdx.x + s], best_i[threadIdx.x + s], best_v[threadIdx.x],
                   best_i[threadIdx.x])) {
            best_v[threadIdx.x] = best_v[threadIdx.x + s];
            best_i[threadIdx.x] = best_i[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[t] = best_i[0] < 0 ? 0 : (int32_t)best_i[0];
}

static pw_status launch_argmax(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_argmax_args *a = (const pw_k_argmax_args *)args;
    PW_TRY(check_rows(a->n_tokens, "argmax"));
    if (a->n_tokens == 0) return PW_OK;
    argmax_kernel<<<(unsigned)a->n_tokens, PW_CUDA_BLOCK, 0, ctx->stream>>>(a->out, a->logits,
                                                                           a->vocab);
    return last_launch("argmax");
}

// ---- attention over the paged KV cache -------------------------------------

// Phase 1: one block per token copies its k/v rows into its cache slot.
__global__ void write_kv_kernel(pw_k_attention_args a) {
    const pw_attn_meta *m = a.meta;
    if (m->block_size <= 0) return;
    const int64_t capacity = a.num_blocks * (int64_t)m->block_size;
    int64_t t = blockIdx.x;
    int64_t slot = m->slot_mapping[t];
    if (slot < 0 || slot >= capacity) return;
    int64_t row = a.n_kv_heads * a.head_dim;
    for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
        a.k_cache[slot * row + i] = a.k[t * a.kv_stride + i];
        a.v_cache[slot * row + i] = a.v[t * a.kv_stride + i];
    }
}

__device__ int64_t slot_of(const int32_t *table, int64_t p, int64_t block_size,
                           int64_t num_blocks) {
    int64_t block = table[p / block_size];
    if (block < 0 || block >= num_blocks) return -1;
    return block * block_size + p % block_size;
}

__device__ float block_max_float(float v, float *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + s]);
        __syncthreads();
    }
    float r = shared[0];
    __syncthreads();
    return r;
}

// Phase 2: one block per (token, head). Scores of a chunk of
// PW_K_ATTN_SCORE_CHUNK positions (fixed boundaries from position 0, as on
// the CPU) go to shared memory, one position per thread, each dot product
// sequential over head_dim. Each thread then owns output dimensions and
// sums the chunk's weighted values in position order. Nothing depends on
// the batch.
__global__ void attend_kernel(pw_k_attention_args a, int64_t group) {
    __shared__ float q[PW_CUDA_ATTN_MAX_HEAD_DIM];
    __shared__ float acc[PW_CUDA_ATTN_MAX_HEAD_DIM];
    __shared__ float scores[PW_K_ATTN_SCORE_CHUNK];
    __shared__ float red[PW_CUDA_ATTN_THREADS];
    __shared__ int bad;
    const pw_attn_meta *m = a.meta;
    const int64_t t = blockIdx.x, h = blockIdx.y, hd = a.head_dim, kv_row = a.n_kv_heads * hd;
    float *out = a.out + t * a.n_heads * hd + h * hd;
    const int64_t capacity = a.num_blocks * (int64_t)m->block_size;
    const int64_t max_pos = (int64_t)m->max_blocks_per_seq * m->block_size;
    int64_t slot = m->slot_mapping[t], pos = m->positions[t], seq = m->token_seq[t];
    bool ok = m->block_size > 0 && slot >= 0 && slot < capacity && pos >= 0 && pos < max_pos && seq >= 0 &&
              seq < a.max_seqs;
    if (!ok) {
        for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) out[i] = 0.0f;
        return;
    }
    const int32_t *table = m->block_tables + seq * m->max_blocks_per_seq;
    const int64_t kv_head = h / group;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
        q[i] = a.q[t * a.q_stride + h * hd + i];
        acc[i] = 0.0f;
    }
    if (threadIdx.x == 0) bad = 0;
    __syncthreads();
    float running_max = -INFINITY, denom = 0.0f;
    for (int64_t c0 = 0; c0 <= pos; c0 += PW_K_ATTN_SCORE_CHUNK) {
        int64_t c1 = c0 + PW_K_ATTN_SCORE_CHUNK - 1 < pos ? c0 + PW_K_ATTN_SCORE_CHUNK - 1 : pos;
        float local_max = -INFINITY;
        for (int64_t p = c0 + threadIdx.x; p <= c1; p += blockDim.x) {
            int64_t s = slot_of(table, p, m->block_size, a.num_blocks);
            if (s < 0) {
                bad = 1;
                continue;
            }
            const float *k = a.k_cache + s * kv_row + kv_head * hd;
            float d = 0.0f;
            for (int64_t i = 0; i < hd; i++) d += q[i] * k[i];
            d *= scale;
            scores[p - c0] = d;
            local_max = fmaxf(local_max, d);
        }
        float chunk_max = block_max_float(local_max, red);
        if (bad) break;
        float rescale = 1.0f;
        if (chunk_max > running_max) {
            if (running_max != -INFINITY) rescale = expf(running_max - chunk_max);
            running_max = chunk_max;
        }
        // Every thread keeps the same denominator (same values, same order).
        denom *= rescale;
        for (int64_t p = c0; p <= c1; p++) denom += expf(scores[p - c0] - running_max);
        for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
            float sum = acc[i] * rescale;
            for (int64_t p = c0; p <= c1; p++) {
                float wgt = expf(scores[p - c0] - running_max);
                const float *v =
                    a.v_cache + slot_of(table, p, m->block_size, a.num_blocks) * kv_row +
                    kv_head * hd;
                sum += wgt * v[i];
            }
            acc[i] = sum;
        }
        __syncthreads();
    }
    if (bad) {
        for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) out[i] = 0.0f;
        return;
    }
    float inv = 1.0f / denom;
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) out[i] = acc[i] * inv;
}

static pw_status launch_attention(const void *args, const pw_cuda_stream_ctx *ctx) {
    const pw_k_attention_args *a = (const pw_k_attention_args *)args;
    PW_TRY(check_rows(a->n_tokens, "attention"));
    if (a->head_dim < 1 || a->head_dim > PW_CUDA_ATTN_MAX_HEAD_DIM || a->n_kv_heads < 1 ||
        a->n_heads < 1 || a->n_heads % a->n_kv_heads != 0 || a->n_heads > PW_CUDA_MAX_GRID_X)
        return pw_error(PW_ERR_UNSUPPORTED,
                        "CUDA attention: heads %lld/%lld with head_dim %lld not supported "
                        "(head_dim <= %d, n_heads a multiple of n_kv_heads)",
                        (long long)a->n_heads, (long long)a->n_kv_heads, (long long)a->head_dim,
                        PW_CUDA_ATTN_MAX_HEAD_DIM);
    if (a->n_tokens == 0) return PW_OK;
    // The meta struct lives in device memory (the engine rewrites what it
    // points to each step), so block size and table width are read there.
    write_kv_kernel<<<(unsigned)a->n_tokens, PW_CUDA_BLOCK, 0, ctx->stream>>>(*a);
    PW_TRY(last_launch("attention (write_kv)"));
    dim3 grid((unsigned)a->n_tokens, (unsigned)a->n_heads);
    attend_kernel<<<grid, PW_CUDA_ATTN_THREADS, 0, ctx->stream>>>(*a, a->n_heads / a->n_kv_heads);
    return last_launch("attention");
}

// ---- the CUDA kernel set ---------------------------------------------------
// Indexed by the op table's kernel ids (ops/op_table.h). No quantized and no
// fused kernels yet: the fused ops launch their constituent kernels here,
// and a quantized weight's matmul or embedding is refused by the ops layer
// naming this set and the kernel.

static const pw_cuda_kernel_impl impl_embedding = {launch_embedding};
static const pw_cuda_kernel_impl impl_rms_norm = {launch_rms_norm};
static const pw_cuda_kernel_impl impl_add_rms_norm = {launch_add_rms_norm};
static const pw_cuda_kernel_impl impl_matmul = {launch_matmul};
static const pw_cuda_kernel_impl impl_rope = {launch_rope};
static const pw_cuda_kernel_impl impl_silu_and_mul = {launch_silu_and_mul};
static const pw_cuda_kernel_impl impl_silu_mul = {launch_silu_mul};
static const pw_cuda_kernel_impl impl_add = {launch_add};
static const pw_cuda_kernel_impl impl_argmax = {launch_argmax};
static const pw_cuda_kernel_impl impl_attention = {launch_attention};
static const pw_cuda_kernel_impl impl_select_rows = {launch_select_rows};
static const pw_cuda_kernel_impl impl_slice_cols = {launch_slice_cols};
static const pw_cuda_kernel_impl impl_all_reduce_shards = {launch_all_reduce_shards};

static const pw_kernel k_embedding = {"embedding", NULL, &impl_embedding, PW_K_ARGS(EMBEDDING)};
static const pw_kernel k_rms_norm = {"rms_norm", NULL, &impl_rms_norm, PW_K_ARGS(RMS_NORM)};
static const pw_kernel k_add_rms_norm = {"add_rms_norm", NULL, &impl_add_rms_norm,
                                         PW_K_ARGS(ADD_RMS_NORM)};
static const pw_kernel k_matmul = {"matmul", NULL, &impl_matmul, PW_K_ARGS(MATMUL)};
static const pw_kernel k_rope = {"rope", NULL, &impl_rope, PW_K_ARGS(ROPE)};
static const pw_kernel k_silu_and_mul = {"silu_and_mul", NULL, &impl_silu_and_mul,
                                         PW_K_ARGS(SILU_AND_MUL)};
static const pw_kernel k_silu_mul = {"silu_mul", NULL, &impl_silu_mul, PW_K_ARGS(SILU_MUL)};
static const pw_kernel k_add = {"add", NULL, &impl_add, PW_K_ARGS(ADD)};
static const pw_kernel k_argmax = {"argmax", NULL, &impl_argmax, PW_K_ARGS(ARGMAX)};
static const pw_kernel k_attention = {"attention", NULL, &impl_attention, PW_K_ARGS(ATTENTION)};
static const pw_kernel k_select_rows = {"select_rows", NULL, &impl_select_rows,
                                        PW_K_ARGS(SELECT_ROWS)};
static const pw_kernel k_slice_cols = {"slice_cols", NULL, &impl_slice_cols,
                                       PW_K_ARGS(SLICE_COLS)};
static const pw_kernel k_all_reduce_shards = {"all_reduce_shards", NULL, &impl_all_reduce_shards,
                                              PW_K_ARGS(ALL_REDUCE_SHARDS)};

static size_t matmul_scratch(const void *args) {
    const pw_k_matmul_args *a = (const pw_k_matmul_args *)args;
    return pw_cuda_matmul_scratch_floats(a->n_tokens, a->n, a->k) * sizeof(float);
}

// C++ has no array designators, so the table is filled by id in a
// constexpr function: still a constant, built at compile time.
static constexpr pw_kernel_set make_cuda_kernel_set() {
    pw_kernel_set set{};
    set.name = "cuda";
    set.entries[PW_KERNEL_EMBEDDING] = {&k_embedding, nullptr};
    set.entries[PW_KERNEL_RMS_NORM] = {&k_rms_norm, nullptr};
    set.entries[PW_KERNEL_ADD_RMS_NORM] = {&k_add_rms_norm, nullptr};
    set.entries[PW_KERNEL_MATMUL] = {&k_matmul, matmul_scratch};
    set.entries[PW_KERNEL_ROPE] = {&k_rope, nullptr};
    set.entries[PW_KERNEL_SILU_AND_MUL] = {&k_silu_and_mul, nullptr};
    set.entries[PW_KERNEL_SILU_MUL] = {&k_silu_mul, nullptr};
    set.entries[PW_KERNEL_ADD] = {&k_add, nullptr};
    set.entries[PW_KERNEL_ARGMAX] = {&k_argmax, nullptr};
    set.entries[PW_KERNEL_ATTENTION] = {&k_attention, nullptr};
    set.entries[PW_KERNEL_SELECT_ROWS] = {&k_select_rows, nullptr};
    set.entries[PW_KERNEL_SLICE_COLS] = {&k_slice_cols, nullptr};
    set.entries[PW_KERNEL_ALL_REDUCE_SHARDS] = {&k_all_reduce_shards, nullptr};
    return set;
}

// Declared extern "C" in ops/kernel_set.h.
constexpr pw_kernel_set pw_kernel_set_cuda = make_cuda_kernel_set();
