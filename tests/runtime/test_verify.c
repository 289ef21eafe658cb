/* verify_capture: a per-step value baked into a launch is caught, a correct
 * runnable is accepted, and a refused capture keeps nothing. */
#include "toy.h"

/* The per-step value lives in a persistent host buffer; the perturbation
 * hook writes a different value into it before each verification round. */
typedef struct step_state {
    float *scale;   /* persistent buffer */
    int rounds[8];  /* rounds the hook saw */
    int n_rounds;
    bool fail;
} step_state;

static pw_status perturb(void *user, int round) {
    step_state *st = user;
    if (st->fail) return pw_error(PW_ERR_INVALID_ARG, "hook refused");
    if (st->n_rounds < 8) st->rounds[st->n_rounds++] = round;
    *st->scale = 10.0f + (float)round;
    return PW_OK;
}

typedef struct by_pointer_args {
    const float *x;
    float *y;
    int64_t n;
    const float *scale; /* read at run time: safe */
} by_pointer_args;

typedef struct by_value_args {
    const float *x;
    float *y;
    int64_t n;
    float scale; /* copied at capture: baked in */
} by_value_args;

static void by_pointer_kernel(const void *p) {
    const by_pointer_args *a = p;
    for (int64_t i = 0; i < a->n; i++) a->y[i] = *a->scale * a->x[i];
}

static void by_value_kernel(const void *p) {
    const by_value_args *a = p;
    for (int64_t i = 0; i < a->n; i++) a->y[i] = a->scale * a->x[i];
}

static const pw_kernel k_by_pointer = {"scale_by_pointer", by_pointer_kernel, NULL, NULL};
static const pw_kernel k_by_value = {"scale_by_value", by_value_kernel, NULL, NULL};

typedef enum variant {
    SAFE,           /* per-step value read through a pointer */
    BAKED_VALUE,    /* per-step value passed by value */
    LAUNCH_COUNT,   /* number of launches depends on the step */
    LAUNCH_KIND     /* which kernel runs depends on the step */
} variant;

typedef struct step_model {
    toy_env *env;
    step_state *st;
    variant v;
    int calls;
} step_model;

/* y = scale * x, then (for every variant) a fixed second launch. */
static pw_status step_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    step_model *m = user;
    m->calls++;
    pw_tensor *x = args[0].as.tensor;
    pw_tensor *y = NULL;
    int64_t shape[2] = {pw_tensor_dim(x, 0), TOY_WIDTH};
    PW_TRY(pw_tensor_new(m->env->graph_pool, PW_F32, 2, shape, &y));
    int64_t n = pw_tensor_numel(y);
    float step = *m->st->scale;
    pw_status s = PW_OK;
    axpb_args fixed = {pw_tensor_data(x), pw_tensor_data(y), n, 1, 0};
    s = pw_launch(m->env->stream, &k_axpb, &fixed, sizeof fixed);
    if (s == PW_OK) {
        by_pointer_args pa = {pw_tensor_data(x), pw_tensor_data(y), n, m->st->scale};
        /* argument blocks are compared byte for byte, padding included */
        by_value_args va;
        memset(&va, 0, sizeof va);
        va.x = pw_tensor_data(x);
        va.y = pw_tensor_data(y);
        va.n = n;
        va.scale = step;
        switch (m->v) {
        case SAFE: s = pw_launch(m->env->stream, &k_by_pointer, &pa, sizeof pa); break;
        case BAKED_VALUE: s = pw_launch(m->env->stream, &k_by_value, &va, sizeof va); break;
        case LAUNCH_COUNT:
            for (int i = 0; i < (int)step - 9 && s == PW_OK; i++)
                s = pw_launch(m->env->stream, &k_by_pointer, &pa, sizeof pa);
            break;
        case LAUNCH_KIND:
            if ((int)step % 2) s = pw_launch(m->env->stream, &k_by_pointer, &pa, sizeof pa);
            else s = pw_launch(m->env->stream, &k_axpb, &fixed, sizeof fixed);
            break;
        }
    }
    if (s != PW_OK) {
        pw_tensor_release(y);
        return s;
    }
    *out = pw_value_tensor(y);
    return PW_OK;
}

typedef struct fixture {
    toy_env env;
    float *scale;
    pw_tensor *x;
    step_state st;
    step_model model;
    pw_graph_wrapper *w;
} fixture;

static void fixture_init(fixture *f, variant v, bool verify, bool pregrow) {
    memset(f, 0, sizeof *f);
    toy_env_init(&f->env);
    f->scale = malloc(sizeof *f->scale);
    *f->scale = 3;
    f->st.scale = f->scale;
    f->x = toy_input(&f->env, 8, 1);
    f->model = (step_model){&f->env, &f->st, v, 0};
    if (pregrow) { /* a pool that already holds a segment, as after the largest capture */
        void *p;
        CHECK_OK(pw_pool_alloc(f->env.graph_pool, 4096, &p));
        CHECK_OK(pw_pool_release(f->env.graph_pool, p));
    }
    pw_wrapper_options o;
    pw_wrapper_options_init(&o);
    o.verify_capture = verify;
    o.perturb = perturb;
    o.perturb_user = &f->st;
    pw_callable c = {step_fn, &f->model, "step_model"};
    CHECK_OK(pw_graph_wrapper_new(c, PW_MODE_FULL, f->env.stream, f->env.graph_pool, &o, &f->w));
}

static void fixture_free(fixture *f) {
    pw_graph_wrapper_free(f->w);
    pw_tensor_release(f->x);
    free(f->scale);
    toy_env_free(&f->env);
}

static pw_status capture_step(fixture *f, pw_value *out) {
    pw_forward_context ctx = {PW_MODE_FULL, pw_batch_desc_make(8, 8, true, false), NULL};
    CHECK_OK(pw_forward_context_push(&ctx));
    pw_capture_phase_begin();
    pw_value arg = pw_value_tensor(f->x);
    pw_status s = pw_graph_wrapper_call(f->w, &arg, 1, out);
    CHECK_OK(pw_capture_phase_end());
    CHECK_OK(pw_forward_context_pop());
    return s;
}

static void check_refused(fixture *f) {
    pw_pool_stats st;
    pw_pool_get_stats(f->env.graph_pool, &st);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(f->w), 0);
    CHECK_EQ_INT(pw_pool_graph_refs(f->env.graph_pool), 0);
    CHECK_EQ_INT(st.allocated, 0);
    CHECK_EQ_INT(st.n_live_blocks, 0);
    CHECK(!pw_stream_is_capturing(f->env.stream));
    pw_wrapper_counters c;
    pw_graph_wrapper_get_counters(f->w, &c);
    CHECK_EQ_INT(c.graphs_captured, 0);
    CHECK_EQ_INT(c.captures_attempted, 1);
}

static void test_accepts_safe_runnable(void) {
    fixture f;
    fixture_init(&f, SAFE, true, true);
    pw_value out;
    CHECK_OK(capture_step(&f, &out));
    CHECK_EQ_INT(f.st.n_rounds, 2);
    CHECK_EQ_INT(f.st.rounds[0], 0);
    CHECK_EQ_INT(f.st.rounds[1], 1);
    CHECK_EQ_INT(f.model.calls, 2);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(f.w), 1);
    CHECK(pw_tensor_owns_storage(out.as.tensor));
    void *addr = pw_tensor_data(out.as.tensor);
    pw_value_release(out);
    /* Only the kept capture holds memory; the first was released. */
    pw_pool_stats st;
    pw_pool_get_stats(f.env.graph_pool, &st);
    CHECK_EQ_INT(st.allocated, 0);
    CHECK_EQ_INT(pw_pool_graph_refs(f.env.graph_pool), 1);

    /* The kept graph follows the per-step value. */
    pw_forward_context ctx = {PW_MODE_FULL, pw_batch_desc_make(8, 8, true, false), NULL};
    CHECK_OK(pw_forward_context_push(&ctx));
    *f.scale = -2;
    pw_value arg = pw_value_tensor(f.x);
    CHECK_OK(pw_graph_wrapper_call(f.w, &arg, 1, &out));
    CHECK(pw_tensor_data(out.as.tensor) == addr);
    CHECK(toy_check(&f.env, out.as.tensor, f.x, 8, -2, 0));
    pw_value_release(out);
    CHECK_OK(pw_forward_context_pop());
    fixture_free(&f);
}

static void test_pool_growth_round_is_not_compared(void) {
    /* A fresh pool grows during the first round, so that round only sizes
     * the pool and two more are compared. */
    fixture f;
    fixture_init(&f, SAFE, true, false);
    pw_value out;
    CHECK_OK(capture_step(&f, &out));
    CHECK_EQ_INT(f.st.n_rounds, 3);
    CHECK_EQ_INT(f.st.rounds[2], 2);
    pw_value_release(out);
    fixture_free(&f);
}

static void test_catches_baked_value(void) {
    fixture f;
    fixture_init(&f, BAKED_VALUE, true, true);
    pw_value out;
    /* by_value_args.scale is the float at bytes [24,28); 10.0f and 11.0f
     * (0x41200000, 0x41300000) differ only in byte 26 on little-endian. */
    CHECK_ERR(capture_step(&f, &out), PW_ERR_UNSAFE_CAPTURE,
              "launch #1 (kernel scale_by_value): argument bytes [26,27) differ between captures");
    CHECK(strstr(pw_last_error(), "descriptor (num_tokens=8, num_reqs=8, uniform=true"));
    CHECK(strstr(pw_last_error(), "capture refused"));
    CHECK(out.kind == PW_VAL_NONE);
    check_refused(&f);
    fixture_free(&f);

    /* The same runnable without verification captures "successfully": the
     * bug verification exists to find. */
    fixture_init(&f, BAKED_VALUE, false, true);
    CHECK_OK(capture_step(&f, &out));
    pw_value_release(out);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(f.w), 1);
    fixture_free(&f);
}

static void test_catches_launch_sequence_changes(void) {
    fixture f;
    pw_value out;
    fixture_init(&f, LAUNCH_COUNT, true, true);
    CHECK_ERR(capture_step(&f, &out), PW_ERR_UNSAFE_CAPTURE, "the captures recorded 2 and 3 launches");
    check_refused(&f);
    fixture_free(&f);

    fixture_init(&f, LAUNCH_KIND, true, true);
    CHECK_ERR(capture_step(&f, &out), PW_ERR_UNSAFE_CAPTURE,
              "launch #1 is kernel axpb in the first capture and kernel scale_by_pointer in the second");
    check_refused(&f);
    fixture_free(&f);
}

static void test_hook_failure_and_retry(void) {
    fixture f;
    fixture_init(&f, SAFE, true, true);
    pw_value out;
    f.st.fail = true;
    CHECK_ERR(capture_step(&f, &out), PW_ERR_INVALID_ARG, "perturbation hook, round 0: hook refused");
    check_refused(&f);
    f.st.fail = false;
    CHECK_OK(capture_step(&f, &out));
    pw_value_release(out);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(f.w), 1);
    fixture_free(&f);
}

static void test_verify_with_weak_output(void) {
    fixture f;
    fixture_init(&f, SAFE, true, true);
    pw_graph_wrapper_free(f.w);
    pw_wrapper_options o;
    pw_wrapper_options_init(&o);
    o.verify_capture = true;
    o.weak_ref_output = true;
    o.perturb = perturb;
    o.perturb_user = &f.st;
    pw_callable c = {step_fn, &f.model, "step_model"};
    CHECK_OK(pw_graph_wrapper_new(c, PW_MODE_FULL, f.env.stream, f.env.graph_pool, &o, &f.w));
    pw_value out;
    CHECK_OK(capture_step(&f, &out));
    CHECK(!pw_tensor_owns_storage(out.as.tensor));
    pw_value_release(out);
    pw_pool_stats st;
    pw_pool_get_stats(f.env.graph_pool, &st);
    CHECK_EQ_INT(st.allocated, 0);
    fixture_free(&f);
}

int main(void) {
    test_accepts_safe_runnable();
    test_pool_growth_round_is_not_compared();
    test_catches_baked_value();
    test_catches_launch_sequence_changes();
    test_hook_failure_and_retry();
    test_verify_with_weak_output();
    return pw_test_finish("runtime_verify");
}
