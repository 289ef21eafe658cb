/* Toy kernels and runnables for the runtime tests: a "piece" computes
 * y = a * x + b on the first num_tokens rows of its input (num_tokens from
 * the forward context when one is set), launching one kernel on a CPU
 * stream and allocating y from the graph pool. */
#ifndef PW_TEST_RUNTIME_TOY_H
#define PW_TEST_RUNTIME_TOY_H

#include "internal.h"
#include "test_util.h"

#define TOY_WIDTH 4 /* floats per token row */

typedef struct toy_env {
    pw_stream *stream;
    pw_pool *graph_pool; /* captures allocate here; outputs always come from here */
    pw_pool *input_pool; /* persistent input buffers */
} toy_env;

static inline void toy_env_init(toy_env *env) {
    memset(env, 0, sizeof *env);
    CHECK_OK(pw_stream_new(PW_DEVICE_CPU, &env->stream));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "graphs", &env->graph_pool));
    CHECK_OK(pw_pool_new(PW_DEVICE_CPU, "inputs", &env->input_pool));
}

static inline void toy_env_free(toy_env *env) {
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

static const pw_kernel k_axpb = {"axpb", axpb_kernel, NULL, NULL};

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

/* A persistent input buffer of `rows` token rows, filled with base + i. */
static inline pw_tensor *toy_input(toy_env *env, int64_t rows, float base) {
    int64_t shape[2] = {rows, TOY_WIDTH};
    pw_tensor *x = NULL;
    CHECK_OK(pw_tensor_new(env->input_pool, PW_F32, 2, shape, &x));
    float *d = pw_tensor_data(x);
    for (int64_t i = 0; i < rows * TOY_WIDTH; i++) d[i] = base + (float)i;
    return x;
}

static inline void toy_fill(pw_tensor *x, float base) {
    float *d = pw_tensor_data(x);
    for (int64_t i = 0; i < pw_tensor_numel(x); i++) d[i] = base + (float)i;
}

/* Pushes {mode, num_tokens relaxed} as the forward context. */
static inline void toy_push(pw_runtime_mode mode, int64_t num_tokens) {
    pw_forward_context ctx = {mode, pw_batch_desc_make(num_tokens, PW_NUM_REQS_UNSET, false, false),
                              NULL};
    CHECK_OK(pw_forward_context_push(&ctx));
}

static inline void toy_pop(void) { CHECK_OK(pw_forward_context_pop()); }

/* True if y[i] == a * x[i] + b for the first rows token rows. */
static inline bool toy_check(const pw_tensor *y, const pw_tensor *x, int64_t rows, float a, float b) {
    const float *yd = pw_tensor_data(y), *xd = pw_tensor_data(x);
    for (int64_t i = 0; i < rows * TOY_WIDTH; i++)
        if (yd[i] != a * xd[i] + b) return false;
    return true;
}

#endif
