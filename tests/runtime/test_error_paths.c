/* Error paths of the graph wrapper keep the first failure's message:
 * aborting a failed capture and releasing its output do not replace it,
 * and pw_graph_wrappers_clear_all returns its first failure with context. */
#include "toy.h"

static pw_status call1(pw_graph_wrapper *w, pw_tensor *x, pw_value *out) {
    pw_value arg = pw_value_tensor(x);
    return pw_graph_wrapper_call(w, &arg, 1, out);
}

static void test_failed_capture_keeps_message(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 2, 1);
    p.fail_with = PW_ERR_UNSUPPORTED;
    pw_graph_wrapper *w = NULL;
    CHECK_OK(pw_graph_wrapper_new(toy_piece_callable(&p, "piece"), PW_MODE_PIECEWISE, env.stream,
                                  env.graph_pool, NULL, &w));
    pw_tensor *x = toy_input(&env, 8, 0);
    pw_value out;
    toy_push(PW_MODE_PIECEWISE, 8);
    pw_capture_phase_begin();
    CHECK_EQ_INT(call1(w, x, &out), PW_ERR_UNSUPPORTED);
    /* the whole message: the wrapper's context, then the runnable's own */
    CHECK(strncmp(pw_last_error(), "graph wrapper 'piece' (PIECEWISE), capturing descriptor ", 56) == 0);
    const char *tail = strstr(pw_last_error(), ": toy piece: planted failure");
    CHECK(tail && strcmp(tail, ": toy piece: planted failure") == 0);
    CHECK(!pw_stream_is_capturing(env.stream));
    CHECK_OK(pw_capture_phase_end());
    toy_pop();
    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    toy_env_free(&env);
}

/* A runnable that clears every wrapper in the middle of its own capture. */
typedef struct clearing_piece {
    toy_piece piece;
    pw_status clear_all;
    char msg[512];
} clearing_piece;

static pw_status clearing_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    clearing_piece *c = user;
    c->clear_all = pw_graph_wrappers_clear_all();
    snprintf(c->msg, sizeof c->msg, "%s", pw_last_error());
    return toy_piece_fn(&c->piece, args, nargs, out);
}

static void test_clear_all_message(void) {
    toy_env env;
    toy_env_init(&env);
    clearing_piece cp;
    memset(&cp, 0, sizeof cp);
    toy_piece_init(&cp.piece, &env, 1, 1);
    pw_callable cc = {clearing_fn, &cp, "clearing"};
    pw_graph_wrapper *w = NULL;
    CHECK_OK(pw_graph_wrapper_new(cc, PW_MODE_PIECEWISE, env.stream, env.graph_pool, NULL, &w));
    pw_tensor *x = toy_input(&env, 8, 0);
    pw_value out;
    toy_push(PW_MODE_PIECEWISE, 8);
    pw_capture_phase_begin();
    CHECK_OK(call1(w, x, &out));
    pw_value_release(out);
    CHECK_EQ_INT(cp.clear_all, PW_ERR_STATE);
    CHECK_STREQ(cp.msg, "clearing all graph wrappers: graph wrapper 'clearing': cannot clear graphs "
                        "during its own capture");
    /* the hold clear_all took for the wrappers after its failure is released */
    pw_error(PW_ERR_IO, "reported again");
    CHECK_STREQ(pw_last_error(), "reported again");
    CHECK_OK(pw_capture_phase_end());
    toy_pop();
    pw_tensor_release(x);
    pw_graph_wrapper_free(w);
    toy_env_free(&env);
}

int main(void) {
    test_failed_capture_keeps_message();
    test_clear_all_message();
    return pw_test_finish("runtime_error_paths");
}
