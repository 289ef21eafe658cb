/* Wrap your own C function: one graph per batch size, picked by a dispatcher.
 * Walkthrough: docs/example-wrap-your-function.md (this file is compiled and
 * run by the runtime_example test). */
#include <piecewise.h>
#include <stdio.h>

#define TRY(expr) do { if ((expr) != PW_OK) { fprintf(stderr, "%s\n", pw_last_error()); return 1; } } while (0)

typedef struct { const float *x; float *y; int64_t n; } kernel_args;
static void double_plus_one(const void *p) {
    const kernel_args *a = p;
    for (int64_t i = 0; i < a->n; i++) a->y[i] = 2 * a->x[i] + 1;
}
static const pw_kernel kernel = {"double_plus_one", double_plus_one, NULL};

typedef struct { pw_stream *stream; pw_pool *pool; pw_graph_wrapper *wrapper; pw_tensor *x; } app;

/* Your function: y = 2x + 1 over the batch's tokens. x is a persistent
 * buffer; y comes from the graph pool; n is fixed per graph. */
static pw_status my_function(void *user, const pw_value *args, int nargs, pw_value *out) {
    app *a = user;
    const pw_forward_context *ctx;
    pw_tensor *y;
    if (pw_forward_context_get(&ctx) != PW_OK) return PW_ERR_STATE;
    int64_t n = ctx->desc.num_tokens;
    if (pw_tensor_new(a->pool, PW_F32, 1, &n, &y) != PW_OK) return PW_ERR_OOM;
    kernel_args k = {pw_tensor_data(args[0].as.tensor), pw_tensor_data(y), n};
    pw_status s = pw_launch(a->stream, &kernel, &k, sizeof k);
    if (s == PW_OK) *out = pw_value_tensor(y);
    else pw_tensor_release(y);
    return s;
}

/* One step for the capture driver, which has set the forward context. */
static pw_status step(void *user, pw_runtime_mode mode, const pw_batch_desc *desc) {
    app *a = user;
    pw_value x = pw_value_tensor(a->x), y;
    pw_status s = pw_graph_wrapper_call(a->wrapper, &x, 1, &y);
    pw_value_release(y);
    return s;
}

int main(void) {
    app a;
    int64_t max_tokens = 64;
    TRY(pw_stream_new(PW_DEVICE_CPU, &a.stream));
    TRY(pw_pool_new(PW_DEVICE_CPU, "graphs", &a.pool));
    TRY(pw_tensor_new(a.pool, PW_F32, 1, &max_tokens, &a.x));
    pw_callable fn = {my_function, &a, "my_function"};
    TRY(pw_graph_wrapper_new(fn, PW_MODE_PIECEWISE, a.stream, a.pool, NULL, &a.wrapper));

    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.mode = PW_GRAPH_PIECEWISE;
    cfg.max_num_seqs = 32; /* capture sizes 1, 2, 4, 8, ..., 64 */
    pw_dispatcher *d;
    TRY(pw_dispatcher_new(&cfg, &d));
    TRY(pw_capture_all(d, step, &a, NULL, NULL));

    /* Serve a batch of 5 tokens: write inputs in place, dispatch, replay. */
    float *x = pw_tensor_data(a.x);
    for (int i = 0; i < 5; i++) x[i] = (float)i;
    pw_forward_context ctx = {PW_MODE_NONE, {0}, NULL};
    TRY(pw_dispatch(d, 5, false, false, &ctx.mode, &ctx.desc));
    TRY(pw_forward_context_push(&ctx));
    pw_value in = pw_value_tensor(a.x), out;
    TRY(pw_graph_wrapper_call(a.wrapper, &in, 1, &out));
    TRY(pw_forward_context_pop());
    const float *y = pw_tensor_data(out.as.tensor);
    printf("%s graph for %lld tokens: y =", pw_runtime_mode_name(ctx.mode),
           (long long)ctx.desc.num_tokens);
    for (int i = 0; i < 5; i++) printf(" %g", y[i]);
    printf("\n");

    pw_value_release(out);
    pw_dispatcher_free(d);
    pw_graph_wrapper_free(a.wrapper);
    pw_tensor_release(a.x);
    pw_pool_free(a.pool);
    pw_stream_free(a.stream);
    return 0;
}
