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

void pw_k_sum_shards(float *out, const float *p, int64_t n_shards, int64_t n) {
    memcpy(out, p, (size_t)n * sizeof *out);
    for (int64_t s = 1; s < n_shards; s++) {
        const float *q = p + s * n;
        for (int64_t i = 0; i < n; i++) out[i] += q[i];
    }
}

static void all_reduce_shards_launch(const void *args) {
    const pw_k_all_reduce_shards_args *a = args;
    int64_t s0, s1;
    pw_tp_shard_range(a->n_shards, pw_comm_size(), pw_comm_rank(), &s0, &s1);
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
        pw_comm_allgather_shards(a->partials, a->gather, a->n_shards, per_shard);
        all = a->gather;
    }
    pw_k_sum_shards(a->out, all, a->n_shards, per_shard);
}
const pw_kernel pw_kernel_all_reduce_shards = {"all_reduce_shards", all_reduce_shards_launch,
                                               NULL, PW_K_ARGS(ALL_REDUCE_SHARDS)};
