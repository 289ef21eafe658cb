/* Every CUDA kernel against its CPU twin (same args struct), and batch
 * invariance on the GPU: a row's result does not depend on how many other
 * rows share the launch. Skips without a GPU. */
#include "cuda_test_util.h"

#if !PW_HAVE_CUDA
int main(void) { pw_test_skip("built without the CUDA backend: skipping"); }
#else

#include "../kernels/kernel_test_util.h"
#include "ops/cpu/kernels.h"
#include "ops/ops.h"

/* Elementwise kernels: the same float operations in the same order. */
#define TOL_EXACTISH 1e-5f
/* Reductions (rms_norm, matmul, attention) sum in another order. */
#define TOL_REDUCTION 1e-3f

static pw_stream *S;
static pw_pool *P;

static void *up(const void *h, size_t bytes) { return ct_upload(S, P, h, bytes); }

static void test_elementwise(void) {
    const int64_t T = 37, D = 300, V = 50;
    float *table = kt_random((size_t)(V * D)), *x = kt_random((size_t)(T * D));
    float *w = kt_random((size_t)D), *res = kt_random((size_t)(T * D));
    int32_t ids[37];
    for (int i = 0; i < T; i++) ids[i] = (i * 7) % (int)(V + 3) - 1; /* some out of range */
    float *cpu = kt_zeros((size_t)(T * D)), *gpu = kt_zeros((size_t)(T * D));
    float *dout = up(NULL, (size_t)(T * D) * 4);

    pw_k_embedding(cpu, ids, table, T, V, D);
    pw_k_embedding_args ea = {dout, up(ids, sizeof ids), up(table, (size_t)(V * D) * 4), T, V, D};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_EMBEDDING), &ea, sizeof ea));
    ct_download(S, gpu, dout, (size_t)(T * D) * 4);
    CHECK(ct_max_abs_diff(cpu, gpu, (size_t)(T * D)) == 0.0f);

    float *dx = up(x, (size_t)(T * D) * 4), *dw = up(w, (size_t)D * 4);
    pw_k_rms_norm(cpu, x, w, T, D, 1e-5f);
    pw_k_rms_norm_args ra = {dout, NULL, dx, dw, T, D, 1e-5f};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_RMS_NORM), &ra, sizeof ra));
    ct_download(S, gpu, dout, (size_t)(T * D) * 4);
    CHECK(ct_max_abs_diff(cpu, gpu, (size_t)(T * D)) < TOL_REDUCTION);

    float *res_cpu = kt_zeros((size_t)(T * D)), *res_gpu = kt_zeros((size_t)(T * D));
    memcpy(res_cpu, res, (size_t)(T * D) * 4);
    float *dres = up(res, (size_t)(T * D) * 4);
    pw_k_add_rms_norm(cpu, res_cpu, x, w, T, D, 1e-5f);
    pw_k_rms_norm_args fa = {dout, dres, dx, dw, T, D, 1e-5f};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_ADD_RMS_NORM), &fa, sizeof fa));
    ct_download(S, gpu, dout, (size_t)(T * D) * 4);
    ct_download(S, res_gpu, dres, (size_t)(T * D) * 4);
    CHECK(ct_max_abs_diff(cpu, gpu, (size_t)(T * D)) < TOL_REDUCTION);
    CHECK(ct_max_abs_diff(res_cpu, res_gpu, (size_t)(T * D)) == 0.0f);

    const int64_t H = 5, HD = 60, MAXPOS = 64; /* H*HD == D */
    float *rt = kt_zeros((size_t)(MAXPOS * HD));
    pw_k_rope_table(rt, MAXPOS, HD, 10000.0);
    int32_t pos[37];
    for (int i = 0; i < T; i++) pos[i] = i * 2 - 3; /* includes invalid ones */
    pw_k_rope(cpu, x, pos, rt, T, H, HD, MAXPOS);
    pw_k_rope_args pa = {dout, dx, up(pos, sizeof pos), up(rt, (size_t)(MAXPOS * HD) * 4), T, H, HD, MAXPOS};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_ROPE), &pa, sizeof pa));
    ct_download(S, gpu, dout, (size_t)(T * D) * 4);
    CHECK(ct_max_abs_diff(cpu, gpu, (size_t)(T * D)) < TOL_EXACTISH);

    const int64_t F = D / 2;
    pw_k_silu_and_mul(cpu, x, T, F);
    pw_k_silu_args sa = {dout, dx, NULL, T, F};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_SILU_AND_MUL), &sa, sizeof sa));
    ct_download(S, gpu, dout, (size_t)(T * F) * 4);
    CHECK(ct_max_abs_diff(cpu, gpu, (size_t)(T * F)) < TOL_EXACTISH);

    pw_k_add(cpu, x, res, T * D);
    pw_k_add_args aa = {dout, dx, up(res, (size_t)(T * D) * 4), T * D};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_ADD), &aa, sizeof aa));
    ct_download(S, gpu, dout, (size_t)(T * D) * 4);
    CHECK(ct_max_abs_diff(cpu, gpu, (size_t)(T * D)) == 0.0f);

    x[5] = NAN;
    x[D + 7] = x[D + 3] = 10.0f; /* a tie: the lower index wins */
    int32_t am_cpu[37], am_gpu[37];
    pw_k_argmax(am_cpu, x, T, D);
    pw_k_argmax_args ga = {(int32_t *)dout, up(x, (size_t)(T * D) * 4), T, D};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_ARGMAX), &ga, sizeof ga));
    ct_download(S, am_gpu, dout, sizeof am_gpu);
    CHECK(memcmp(am_cpu, am_gpu, sizeof am_cpu) == 0);
    CHECK_EQ_INT(am_gpu[1], 3);
    free(table), free(x), free(w), free(res), free(cpu), free(gpu), free(res_cpu), free(res_gpu), free(rt);
}

/* Matmul: close to the CPU, and row 0 bit-identical whatever T is. */
static void test_matmul(void) {
    const int64_t N = 96, K = 200, TMAX = 37;
    float *x = kt_random((size_t)(TMAX * K)), *w = kt_random((size_t)(N * K));
    float *cpu = kt_zeros((size_t)(TMAX * N)), *gpu = kt_zeros((size_t)(TMAX * N));
    float *row0 = kt_zeros((size_t)N);
    float *dx = up(x, (size_t)(TMAX * K) * 4), *dw = up(w, (size_t)(N * K) * 4);
    float *dy = up(NULL, (size_t)(TMAX * N) * 4);
    float *scratch = up(NULL, pw_cuda_matmul_scratch_floats(1, N, K) * 4);
    pw_k_matmul_own(cpu, x, w, TMAX, N, K);
    const int64_t sizes[] = {1, 16, 37};
    for (size_t i = 0; i < KT_LEN(sizes); i++) {
        pw_k_matmul_args ma = {dy, dx, dw, scratch, sizes[i], N, K};
        CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_MATMUL), &ma, sizeof ma));
        ct_download(S, gpu, dy, (size_t)(sizes[i] * N) * 4);
        CHECK(ct_max_abs_diff(cpu, gpu, (size_t)(sizes[i] * N)) < TOL_REDUCTION);
        if (i == 0) memcpy(row0, gpu, (size_t)N * 4);
        else CHECK(memcmp(row0, gpu, (size_t)N * 4) == 0);
    }
    pw_k_matmul_args bad = {dy, dx, dw, NULL, 5, N, K};
    CHECK_ERR(pw_launch(S, ct_kernel(PW_KERNEL_MATMUL), &bad, sizeof bad), PW_ERR_INVALID_ARG, "scratch");
    free(x), free(w), free(cpu), free(gpu), free(row0);
}

/* Paged attention: one sequence prefilled in one go, then the same tokens
 * again one at a time as decode steps; both match the CPU kernel, and the
 * last token's row is bit-identical between the two (batch invariance). */
static void test_attention(void) {
    enum { T = 20, H = 4, KVH = 2, HD = 32, BS = 4, NB = 8, MB = 8 };
    const int64_t qw = H * HD, kw = KVH * HD, cache = (int64_t)NB * BS * kw;
    float *q = kt_random(T * qw), *k = kt_random(T * kw), *v = kt_random(T * kw);
    int32_t pos[T], slots[T], seq[T], tables[2 * MB];
    for (int i = 0; i < 2 * MB; i++) tables[i] = (i * 3 + 1) % NB;
    for (int t = 0; t < T; t++) {
        pos[t] = t;
        seq[t] = 1;
        slots[t] = tables[MB + t / BS] * BS + t % BS;
    }
    float *kc = kt_zeros((size_t)cache), *vc = kt_zeros((size_t)cache), *cpu = kt_zeros(T * qw);
    pw_attn_meta hm = {pos, slots, seq, tables, MB, BS};
    pw_k_attention_args ha = {cpu, q, k, v, kc, vc, &hm, T, H, KVH, HD, qw, kw, NB, 2};
    pw_k_attention(&ha);

    int32_t *dpos = (int32_t *)up(pos, sizeof pos), *dslots = (int32_t *)up(slots, sizeof slots);
    int32_t *dseq = (int32_t *)up(seq, sizeof seq), *dtab = (int32_t *)up(tables, sizeof tables);
    pw_attn_meta dm = {dpos, dslots, dseq, dtab, MB, BS};
    pw_attn_meta *dmeta = (pw_attn_meta *)up(&dm, sizeof dm);
    float *dq = up(q, T * qw * 4), *dk = up(k, T * kw * 4), *dv = up(v, T * kw * 4);
    float *dkc = up(NULL, (size_t)cache * 4), *dvc = up(NULL, (size_t)cache * 4);
    float *dout = up(NULL, T * qw * 4), *gpu = kt_zeros(T * qw), *last = kt_zeros(qw);
    CHECK_OK(pw_stream_memset(S, dkc, 0, (size_t)cache * 4));
    CHECK_OK(pw_stream_memset(S, dvc, 0, (size_t)cache * 4));
    pw_k_attention_args da = {dout, dq, dk, dv, dkc, dvc, dmeta, T, H, KVH, HD, qw, kw, NB, 2};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_ATTENTION), &da, sizeof da));
    ct_download(S, gpu, dout, T * qw * 4);
    CHECK(ct_max_abs_diff(cpu, gpu, T * qw) < TOL_REDUCTION);
    memcpy(last, gpu + (T - 1) * qw, qw * 4);

    /* Decode: token t alone, its metadata at row 0 of the buffers. */
    CHECK_OK(pw_stream_memset(S, dkc, 0, (size_t)cache * 4));
    CHECK_OK(pw_stream_memset(S, dvc, 0, (size_t)cache * 4));
    for (int t = 0; t < T; t++) {
        CHECK_OK(pw_stream_copy_h2d(S, dpos, &pos[t], 4));
        CHECK_OK(pw_stream_copy_h2d(S, dslots, &slots[t], 4));
        pw_k_attention_args one = {dout, dq + t * qw, dk + t * kw, dv + t * kw, dkc, dvc, dmeta,
                                   1, H, KVH, HD, qw, kw, NB, 2};
        CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_ATTENTION), &one, sizeof one));
        CHECK_OK(pw_stream_synchronize(S)); /* pos[t] is read from host memory by the copy */
    }
    ct_download(S, gpu, dout, qw * 4);
    CHECK(memcmp(gpu, last, qw * 4) == 0);

    /* Padding (slot -1) gives a zero row. */
    int32_t pad = -1;
    CHECK_OK(pw_stream_copy_h2d(S, dslots, &pad, 4));
    pw_k_attention_args one = {dout, dq, dk, dv, dkc, dvc, dmeta, 1, H, KVH, HD, qw, kw, NB, 2};
    CHECK_OK(pw_launch(S, ct_kernel(PW_KERNEL_ATTENTION), &one, sizeof one));
    ct_download(S, gpu, dout, qw * 4);
    float zeros[H * HD] = {0};
    CHECK(memcmp(gpu, zeros, sizeof zeros) == 0);

    pw_k_attention_args big = da;
    big.head_dim = PW_CUDA_ATTN_MAX_HEAD_DIM + 2;
    CHECK_ERR(pw_launch(S, ct_kernel(PW_KERNEL_ATTENTION), &big, sizeof big), PW_ERR_UNSUPPORTED, "head_dim");
    free(q), free(k), free(v), free(kc), free(vc), free(cpu), free(gpu), free(last);
}

/* Through the op registry: the CUDA kernel set has no quantized kernels,
 * so a matmul on a Q8_0 weight is refused naming the set and the kernel
 * (no kernel is looked up by name, and nothing is launched). */
static void test_missing_kernel(void) {
    const int64_t T = 2, K = 32, N = 4;
    pw_tensor *x = NULL, *w = NULL;
    CHECK_OK(pw_tensor_wrap(up(NULL, (size_t)(T * K) * 4), PW_DEVICE_CUDA, PW_F32, 2,
                            (int64_t[]){T, K}, &x));
    CHECK_OK(pw_tensor_wrap(up(NULL, (size_t)(N * pw_dtype_row_bytes(PW_Q8_0, K))), PW_DEVICE_CUDA,
                            PW_Q8_0, 2, (int64_t[]){N, K}, &w));
    pw_op_env env = {.stream = S, .pool = P};
    pw_callable mm;
    CHECK_OK(pw_op_resolve(&env, "matmul", &mm));
    pw_value out = pw_value_none();
    if (x && w)
        CHECK_ERR(mm.fn(mm.user, (pw_value[]){pw_value_tensor(x), pw_value_tensor(w)}, 2, &out),
                  PW_ERR_UNSUPPORTED, "the cuda kernel set has no matmul_quant kernel");
    CHECK(out.kind == PW_VAL_NONE);
    pw_tensor_release(x);
    pw_tensor_release(w);
}

int main(void) {
    ct_require_gpu();
    kt_seed(42);
    CHECK_OK(pw_stream_new(PW_DEVICE_CUDA, &S));
    CHECK_OK(pw_pool_new(PW_DEVICE_CUDA, "test", &P));
    test_elementwise();
    test_matmul();
    test_attention();
    test_missing_kernel();
    CHECK_OK(pw_stream_synchronize(S));
    pw_pool_free(P);
    pw_stream_free(S);
    return pw_test_finish("cuda_kernels");
}
#endif
