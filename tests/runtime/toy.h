/* Toy kernels and runnables for the runtime tests: a "piece" computes
 * y = a * x + b on the first num_tokens rows of its input (num_tokens from
 * the forward context when one is set), launching one kernel on a stream
 * of the test device (test_device.h) and allocating y from the graph pool.
 * Inputs are filled and outputs checked through stream copies, so the
 * tests hold on a discrete device too. */
#ifndef PW_TEST_RUNTIME_TOY_H
#define PW_TEST_RUNTIME_TOY_H

#include "internal.h"
#include "test_device.h"
#include "test_util.h"

#include <stddef.h>

#define TOY_WIDTH 4 /* floats per token row */

typedef struct toy_env {
    pw_stream *stream;
    pw_pool *graph_pool; /* captures allocate here; outputs always come from here */
    pw_pool *input_pool; /* persistent input buffers */
} toy_env;

static inline void toy_env_init(toy_env *env) {
    memset(env, 0, sizeof *env);
    CHECK_OK(pw_stream_new(pw_test_device(), &env->stream));
    CHECK_OK(pw_pool_new(pw_test_device(), "graphs", &env->graph_pool));
    CHECK_OK(pw_pool_new(pw_test_device(), "inputs", &env->input_pool));
    CHECK_OK(pw_test_warm_up(env->stream));
}

static inline void toy_env_free(toy_env *env) {
    CHECK_OK(pw_stream_synchronize(env->stream)); /* nothing queued may use what is freed */
    pw_pool_free(env->input_pool);
    pw_pool_free(env->graph_pool);
    pw_stream_free(env->stream);
}

typedef struct axpb_args {
    const float *x;
    float *y;
    int64_t n;
    float a, b;
} axpb_args;

static void axpb_kernel(const void *p) {
    const axpb_args *a = p;
    for (int64_t i = 0; i < a->n; i++) a->y[i] = a->a * a->x[i] + a->b;
}

/* Its address words, so that a device that checks launches (the emulated
 * one) knows x and y are device addresses. */
static const pw_kernel_args axpb_layout = {
    sizeof(axpb_args), 2, {offsetof(axpb_args, x), offsetof(axpb_args, y)}, NULL};
static const pw_kernel k_axpb = {"axpb", axpb_kernel, NULL, &axpb_layout};

typedef struct toy_piece {
    toy_env *env;
    float a, b;
    int calls;              /* times the runnable body ran (eager or under capture) */
    pw_status fail_with;    /* non-OK: fail after launching, to test failed captures */
    bool sync_during_call;  /* make an illegal call (synchronize) */
    pw_pool *alloc_from;    /* allocate y here instead of the graph pool */
} toy_piece;

static inline void toy_piece_init(toy_piece *p, toy_env *env, float a, float b) {
    memset(p, 0, sizeof *p);
    p->env = env;
    p->a = a;
    p->b = b;
}

static inline int64_t toy_rows(const pw_tensor *x) {
    const pw_forward_context *ctx = NULL;
    int64_t rows = pw_tensor_dim(x, 0);
    if (pw_forward_context_get(&ctx) == PW_OK && ctx->desc.num_tokens < rows)
        rows = ctx->desc.num_tokens;
    pw_clear_error();
    return rows;
}

static pw_status toy_piece_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    toy_piece *p = user;
    p->calls++;
    if (nargs < 1 || args[0].kind != PW_VAL_TENSOR)
        return pw_error(PW_ERR_INVALID_ARG, "toy piece: expected a tensor argument");
    pw_tensor *x = args[0].as.tensor;
    int64_t shape[2] = {toy_rows(x), TOY_WIDTH};
    pw_tensor *y = NULL;
    PW_TRY(pw_tensor_new(p->alloc_from ? p->alloc_from : p->env->graph_pool, PW_F32, 2, shape, &y));
    axpb_args a = {pw_tensor_data(x), pw_tensor_data(y), shape[0] * TOY_WIDTH, p->a, p->b};
    pw_status s = pw_launch(p->env->stream, &k_axpb, &a, sizeof a);
    if (s == PW_OK && p->sync_during_call) s = pw_stream_synchronize(p->env->stream);
    if (s == PW_OK && p->fail_with != PW_OK)
        s = pw_error(p->fail_with, "toy piece: planted failure");
    if (s != PW_OK) {
        pw_tensor_release(y);
        return s;
    }
    *out = pw_value_tensor(y);
    return PW_OK;
}

static inline pw_callable toy_piece_callable(toy_piece *p, const char *name) {
    pw_callable c = {toy_piece_fn, p, name};
    return c;
}

/* x[i] = base + i, written through env's stream. */
static inline void toy_fill(toy_env *env, pw_tensor *x, float base) {
    int64_t n = pw_tensor_numel(x);
    float *d = malloc((size_t)n * sizeof *d);
    CHECK(d != NULL);
    if (!d) return;
    for (int64_t i = 0; i < n; i++) d[i] = base + (float)i;
    CHECK_OK(pw_test_write(env->stream, pw_tensor_data(x), d, (size_t)n * sizeof *d));
    free(d);
}

/* A persistent input buffer of `rows` token rows, filled with base + i. */
static inline pw_tensor *toy_input(toy_env *env, int64_t rows, float base) {
    int64_t shape[2] = {rows, TOY_WIDTH};
    pw_tensor *x = NULL;
    CHECK_OK(pw_tensor_new(env->input_pool, PW_F32, 2, shape, &x));
    toy_fill(env, x, base);
    return x;
}

/* Pushes {mode, num_tokens relaxed} as the forward context. */
static inline void toy_push(pw_runtime_mode mode, int64_t num_tokens) {
    pw_forward_context ctx = {mode, pw_batch_desc_make(num_tokens, PW_NUM_REQS_UNSET, false, false),
                              NULL};
    CHECK_OK(pw_forward_context_push(&ctx));
}

static inline void toy_pop(void) { CHECK_OK(pw_forward_context_pop()); }

/* True if y[i] == a * x[i] + b for the first rows token rows, once the
 * work queued on env's stream has run. */
static inline bool toy_check(toy_env *env, const pw_tensor *y, const pw_tensor *x, int64_t rows,
                             float a, float b) {
    float *yd = pw_test_read_tensor(env->stream, y), *xd = pw_test_read_tensor(env->stream, x);
    bool ok = yd && xd;
    for (int64_t i = 0; ok && i < rows * TOY_WIDTH; i++) ok = yd[i] == a * xd[i] + b;
    free(yd);
    free(xd);
    return ok;
}

#endif
