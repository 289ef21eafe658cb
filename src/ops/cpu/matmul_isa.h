/* The two copies of the own matmul's tile code (matmul_body.h), private to
 * this folder and the tests, which compare them bit for bit. */
#ifndef PW_KERNELS_MATMUL_ISA_H
#define PW_KERNELS_MATMUL_ISA_H

#include "ops/cpu/isa.h"

#include <stdint.h>

/* Columns processed together (at least 8) so that their weight rows stay in
 * L1 (half of a 32 KiB L1d) while every row tile of x streams past them.
 * 16 KiB measured 4-12% faster than 128 KiB (L2-sized) at T = 4..64 for
 * the 64-wide stories260K weights; 8 and 24 KiB were no better. */
#define MM_COL_BLOCK_BYTES (16 * 1024)

/* Rows [0, n_tokens), columns [j0, j1) of y[T][N] = x[T][K] * W[N][K]^T
 * (y's row stride is n, W's ldw >= k): the unit of work of one thread. */
PW_ISA_DECLARE(void, pw_k_matmul_cols,
               (float *y, const float *x, const float *w, int64_t ldw, int64_t n_tokens,
                int64_t n, int64_t k, int64_t j0, int64_t j1));

#endif
