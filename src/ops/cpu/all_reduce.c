/* The tensor-parallel kernels: the column slice a row-parallel product's
 * shard reads, and the all-reduce that gathers every rank's shard partials
 * (ops/comm.h) and sums them in shard order.
 *
 * The sum is a plain left fold over the shards, element by element: the
 * order is fixed by the number of shards, a model constant, never by the
 * number of ranks, so one rank computing every shard and four ranks
 * computing one each give the same bits. */
#include "ops/cpu/kernels.h"

#include "ops/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pw_k_slice_cols(float *out, const float *x, int64_t n_tokens, int64_t x_cols, int64_t col0,
                     int64_t width) {
    for (int64_t t = 0; t < n_tokens; t++)
        memcpy(out + t * width, x + t * x_cols + col0, (size_t)width * sizeof *out);
}

static void slice_cols_launch(const void *args) {
    const pw_k_slice_cols_args *a = args;
    pw_k_slice_cols(a->out, a->x, a->n_tokens, a->x_cols, a->col0, a->width);
}
const pw_kernel pw_kernel_slice_cols = {"slice_cols", slice_cols_launch, NULL,
                                        PW_K_ARGS(SLICE_COLS)};

void pw_k_sum_shards(float *restrict out, const float *restrict p, int64_t n_shards, int64_t n) {
    memcpy(out, p, (size_t)n * sizeof *out);
    for (int64_t s = 1; s < n_shards; s++) {
        const float *restrict q = p + s * n;
        for (int64_t i = 0; i < n; i++) out[i] += q[i];
    }
}

static void all_reduce_shards_launch(const void *args) {
    const pw_k_all_reduce_shards_args *a = args;
    int64_t s0, s1;
    pw_tp_shard_range(a->n_shards, a->shard_unit, pw_comm_size(), pw_comm_rank(), &s0, &s1);
    if (s1 - s0 != a->local_shards) {
        /* a graph recorded for another split: summing it would be a wrong answer */
        fprintf(stderr,
                "piecewise: all-reduce recorded for %lld local shards, but rank %d of %d "
                "owns %lld\n",
                (long long)a->local_shards, pw_comm_rank(), pw_comm_size(),
                (long long)(s1 - s0));
        abort();
    }
    int64_t per_shard = a->n_tokens * a->n;
    const float *all = a->partials;
    if (pw_comm_size() > 1) {
        pw_comm_allgather_shards(a->partials, a->gather, a->n_shards, a->shard_unit, per_shard);
        all = a->gather;
    }
    pw_k_sum_shards(a->out, all, a->n_shards, per_shard);
}
const pw_kernel pw_kernel_all_reduce_shards = {"all_reduce_shards", all_reduce_shards_launch,
                                               NULL, PW_K_ARGS(ALL_REDUCE_SHARDS)};

/* ---- the vocabulary split ------------------------------------------------------------- */

/* The rank whose vocabulary rows hold `id`, or -1 outside the vocabulary. */
static int vocab_owner(int64_t vocab, int ranks, int32_t id) {
    for (int r = 0; r < ranks; r++) {
        int64_t v0, v1;
        pw_tp_shard_range(vocab, 1, ranks, r, &v0, &v1);
        if (id >= v0 && id < v1) return r;
    }
    return -1;
}

static void embedding_vocab_launch(const void *args) {
    const pw_k_embedding_vocab_args *a = args;
    int ranks = pw_comm_size(), rank = pw_comm_rank();
    int64_t v0, v1, dim = a->dim;
    pw_tp_shard_range(a->vocab, 1, ranks, rank, &v0, &v1);
    if (ranks != a->ranks || v1 - v0 != a->rows) {
        fprintf(stderr,
                "piecewise: embedding recorded for %lld ranks of %lld rows, but rank %d of %d "
                "holds %lld\n",
                (long long)a->ranks, (long long)a->rows, rank, ranks, (long long)(v1 - v0));
        abort();
    }
    for (int64_t t = 0; t < a->n_tokens; t++) {
        int32_t id = a->ids[t], local = id >= v0 && id < v1 ? (int32_t)(id - v0) : -1;
        float *row = a->local + t * dim;
        if (a->type == PW_F32) pw_k_embedding(row, &local, a->table, 1, a->rows, dim);
        else pw_k_embedding_quant(row, &local, a->table, a->type, 1, a->rows, dim);
    }
    pw_comm_allgather_shards(a->local, a->gather, ranks, 1, a->n_tokens * dim);
    for (int64_t t = 0; t < a->n_tokens; t++) {
        int owner = vocab_owner(a->vocab, ranks, a->ids[t]);
        float *out = a->out + t * dim;
        if (owner < 0) memset(out, 0, (size_t)dim * sizeof *out);
        else memcpy(out, a->gather + (owner * a->n_tokens + t) * dim, (size_t)dim * sizeof *out);
    }
}
const pw_kernel pw_kernel_embedding_vocab = {"embedding_vocab", embedding_vocab_launch, NULL,
                                             PW_K_ARGS(EMBEDDING_VOCAB)};

static void gather_vocab_launch(const void *args) {
    const pw_k_gather_vocab_args *a = args;
    int ranks = pw_comm_size();
    int64_t rows = pw_k_sampled_rows(a->meta, a->n_tokens);
    pw_comm_allgather_shards(a->local, a->gather, a->vocab, 1, rows);
    for (int r = 0; r < ranks; r++) {
        int64_t v0, v1;
        pw_tp_shard_range(a->vocab, 1, ranks, r, &v0, &v1);
        const float *block = a->gather + v0 * rows;
        for (int64_t t = 0; t < rows; t++)
            memcpy(a->out + t * a->vocab + v0, block + t * (v1 - v0),
                   (size_t)(v1 - v0) * sizeof *a->out);
    }
}
const pw_kernel pw_kernel_gather_vocab = {"gather_vocab", gather_vocab_launch, NULL,
                                          PW_K_ARGS(GATHER_VOCAB)};
