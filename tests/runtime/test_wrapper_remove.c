/* Removing single wrapper entries (lazy capture's eviction): the table is
 * open addressing with linear probing, and removal is backward-shift
 * deletion. After every removal, in several orders and table sizes, every
 * remaining descriptor is still found and replays its own graph, removed
 * ones are gone and capture again, and the graph count follows. */
#include "toy.h"

#define N_DESC 48

static pw_batch_desc desc_of(int i) {
    return pw_batch_desc_make(i + 1, PW_NUM_REQS_UNSET, false, false);
}

static void capture_desc(pw_graph_wrapper *w, pw_tensor *x, int i) {
    pw_value arg = pw_value_tensor(x), out;
    toy_push(PW_MODE_PIECEWISE, i + 1);
    pw_capture_phase_begin();
    CHECK_OK(pw_graph_wrapper_call(w, &arg, 1, &out));
    CHECK_OK(pw_capture_phase_end());
    toy_pop();
    pw_value_release(out);
}

/* Replays desc i (outside the capture phase: a missing graph would fail)
 * and checks its rows. */
static bool replays_right(toy_env *env, pw_graph_wrapper *w, pw_tensor *x, int i) {
    pw_value arg = pw_value_tensor(x), out = pw_value_none();
    toy_push(PW_MODE_PIECEWISE, i + 1);
    pw_status s = pw_graph_wrapper_call(w, &arg, 1, &out);
    toy_pop();
    bool ok = s == PW_OK && pw_stream_synchronize(env->stream) == PW_OK &&
              out.kind == PW_VAL_TENSOR && pw_tensor_dim(out.as.tensor, 0) == i + 1 &&
              toy_check(env, out.as.tensor, x, i + 1, 3.0f, 2.0f);
    pw_value_release(out);
    return ok;
}

static void check_order(int stride, int offset) {
    toy_env env;
    toy_env_init(&env);
    toy_piece p;
    toy_piece_init(&p, &env, 3.0f, 2.0f);
    pw_graph_wrapper *w = NULL;
    CHECK_OK(pw_graph_wrapper_new(toy_piece_callable(&p, "piece"), PW_MODE_PIECEWISE, env.stream,
                                  env.graph_pool, NULL, &w));
    pw_tensor *x = toy_input(&env, N_DESC, 1.0f);
    for (int i = 0; i < N_DESC; i++) capture_desc(w, x, i);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), N_DESC);
    bool removed[N_DESC] = {0};
    bool all_ok = true;
    for (int k = 0; k < N_DESC; k++) {
        int victim = (offset + k * stride) % N_DESC; /* stride coprime with N_DESC */
        pw_batch_desc d = desc_of(victim);
        CHECK(pw_graph_wrapper_graph_bytes(w, &d) > 0);
        CHECK_OK(pw_graph_wrapper_remove(w, &d));
        removed[victim] = true;
        CHECK(!pw_graph_wrapper_has_graph(w, &d));
        CHECK_EQ_INT(pw_graph_wrapper_graph_bytes(w, &d), 0);
        CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), N_DESC - k - 1);
        for (int i = 0; i < N_DESC; i++) {
            pw_batch_desc di = desc_of(i);
            if (pw_graph_wrapper_has_graph(w, &di) == removed[i]) all_ok = false;
            if (!removed[i] && !replays_right(&env, w, x, i)) all_ok = false;
        }
        /* removing it again: not found, named */
        CHECK_ERR(pw_graph_wrapper_remove(w, &d), PW_ERR_NOT_FOUND, "no graph for descriptor");
        /* every fourth removal captures it again at once and removes it again */
        if (k % 4 == 0) {
            capture_desc(w, x, victim);
            if (!replays_right(&env, w, x, victim)) all_ok = false;
            CHECK_OK(pw_graph_wrapper_remove(w, &d));
        }
    }
    CHECK(all_ok);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(w), 0);
    /* an emptied table works as a new one */
    for (int i = 0; i < N_DESC; i += 3) capture_desc(w, x, i);
    for (int i = 0; i < N_DESC; i += 3) CHECK(replays_right(&env, w, x, i));
    pw_graph_wrapper_free(w);
    pw_tensor_release(x);
    toy_env_free(&env);
}

/* A removal refused during the wrapper's own capture. */
typedef struct self_remove {
    pw_graph_wrapper *w;
    toy_piece piece;
    pw_status got;
} self_remove;
static self_remove g_self;

static pw_status removing_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    (void)user;
    pw_batch_desc d = desc_of(0);
    g_self.got = pw_graph_wrapper_remove(g_self.w, &d);
    return toy_piece_fn(&g_self.piece, args, nargs, out);
}

static void test_remove_during_capture(void) {
    toy_env env;
    toy_env_init(&env);
    toy_piece_init(&g_self.piece, &env, 3.0f, 2.0f);
    pw_callable c = {removing_fn, NULL, "remover"};
    CHECK_OK(pw_graph_wrapper_new(c, PW_MODE_PIECEWISE, env.stream, env.graph_pool, NULL, &g_self.w));
    pw_tensor *x = toy_input(&env, 4, 1.0f);
    capture_desc(g_self.w, x, 1);
    CHECK_EQ_INT(g_self.got, PW_ERR_STATE);
    pw_graph_wrapper_free(g_self.w);
    pw_tensor_release(x);
    toy_env_free(&env);
}

int main(void) {
    check_order(1, 0);   /* in insertion order */
    check_order(47, 47); /* reverse */
    check_order(5, 3);
    check_order(29, 11);
    test_remove_during_capture();
    return pw_test_finish("runtime_wrapper_remove");
}
