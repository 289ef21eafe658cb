/* The dispatcher (sizes, padding, keys, fallbacks, capture order, user
 * lists) and the capture driver (warm-ups, capture phase, errors, totals,
 * the shared pool's peak over all sizes). */
#include "toy.h"

static pw_dispatcher *make(pw_graph_mode mode, int64_t max_num_seqs) {
    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = max_num_seqs;
    pw_dispatcher *d = NULL;
    CHECK_OK(pw_dispatcher_new(&cfg, &d));
    return d;
}

static void test_default_sizes(void) {
    pw_dispatcher *d = make(PW_GRAPH_FULL_AND_PIECEWISE, 256);
    int n = 0;
    const int64_t *s = pw_dispatcher_capture_sizes(d, &n);
    CHECK_EQ_INT(n, 51);
    CHECK_EQ_INT(pw_dispatcher_max_capture_size(d), 512);
    CHECK_EQ_INT(s[0], 1);
    CHECK_EQ_INT(s[1], 2);
    CHECK_EQ_INT(s[2], 4);
    for (int i = 0; i < 31; i++) CHECK_EQ_INT(s[3 + i], 8 * (i + 1));
    for (int i = 0; i < 17; i++) CHECK_EQ_INT(s[34 + i], 256 + 16 * i);
    pw_dispatcher_free(d);

    /* max = min(2 * max_num_seqs, 512) */
    d = make(PW_GRAPH_FULL_AND_PIECEWISE, 8);
    s = pw_dispatcher_capture_sizes(d, &n);
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(s[4], 16);
    pw_dispatcher_free(d);
    d = make(PW_GRAPH_FULL_AND_PIECEWISE, 1024);
    pw_dispatcher_capture_sizes(d, &n);
    CHECK_EQ_INT(n, 51);
    pw_dispatcher_free(d);
    /* 2 * max_num_seqs would overflow: still capped at 512 */
    {
        pw_dispatcher_config big;
        pw_dispatcher_config_init(&big);
        big.max_num_seqs = INT64_MAX;
        big.max_num_batched_tokens = INT64_MAX;
        CHECK_OK(pw_dispatcher_new(&big, &d));
        if (d) {
            pw_dispatcher_capture_sizes(d, &n);
            CHECK_EQ_INT(n, 51);
            CHECK_EQ_INT(pw_dispatcher_max_capture_size(d), 512);
            pw_dispatcher_free(d);
        }
    }

    /* bounded by max_num_batched_tokens */
    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.max_num_batched_tokens = 100;
    CHECK_OK(pw_dispatcher_new(&cfg, &d));
    s = pw_dispatcher_capture_sizes(d, &n);
    CHECK_EQ_INT(s[n - 1], 96);
    CHECK_EQ_INT(pw_dispatcher_max_capture_size(d), 96);
    pw_dispatcher_free(d);

    /* an explicit maximum without a list bounds the default list */
    pw_dispatcher_config_init(&cfg);
    cfg.max_capture_size = 64;
    CHECK_OK(pw_dispatcher_new(&cfg, &d));
    s = pw_dispatcher_capture_sizes(d, &n);
    CHECK_EQ_INT(n, 11);
    CHECK_EQ_INT(s[n - 1], 64);
    pw_dispatcher_free(d);
}

static void test_padding(void) {
    pw_dispatcher *d = make(PW_GRAPH_FULL_AND_PIECEWISE, 256);
    static const int64_t cases[][2] = {{1, 1}, {3, 4}, {4, 4}, {5, 8}, {9, 16}, {248, 248},
                                       {249, 256}, {257, 272}, {511, 512}, {512, 512},
                                       {513, -1}, {0, -1}, {-4, -1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_EQ_INT(pw_dispatcher_padded_size(d, cases[i][0]), cases[i][1]);
    /* every n maps to the smallest size >= n */
    int n = 0;
    const int64_t *s = pw_dispatcher_capture_sizes(d, &n);
    bool ok = true;
    for (int64_t t = 1; t <= 512; t++) {
        int64_t p = pw_dispatcher_padded_size(d, t);
        int j = 0;
        while (s[j] < t) j++;
        ok &= p == s[j];
    }
    CHECK(ok);
    pw_dispatcher_free(d);
}

static void expect(const pw_dispatcher *d, int64_t tokens, bool uniform, bool lora,
                   pw_runtime_mode mode, int64_t key_tokens, int64_t key_reqs, bool key_uniform) {
    pw_runtime_mode m = (pw_runtime_mode)-1;
    pw_batch_desc k;
    CHECK_OK(pw_dispatch(d, tokens, uniform, lora, &m, &k));
    CHECK_EQ_INT(m, mode);
    CHECK_EQ_INT(k.num_tokens, key_tokens);
    CHECK_EQ_INT(k.num_reqs, key_reqs);
    CHECK_EQ_INT(k.uniform, key_uniform);
    CHECK_EQ_INT(k.has_lora, lora);
}

#define UNSET PW_NUM_REQS_UNSET

static void test_dispatch_rules(void) {
    pw_dispatcher *d = make(PW_GRAPH_FULL_AND_PIECEWISE, 256);
    expect(d, 3, true, false, PW_MODE_FULL, 4, 4, true);          /* exact FULL decode key */
    expect(d, 3, false, false, PW_MODE_PIECEWISE, 4, UNSET, false); /* relaxed key */
    expect(d, 300, true, false, PW_MODE_PIECEWISE, 304, UNSET, false); /* > max_num_seqs: no FULL key */
    expect(d, 600, true, false, PW_MODE_NONE, 600, 600, true);     /* above max: exact, unpadded */
    expect(d, 600, false, false, PW_MODE_NONE, 600, UNSET, false);
    expect(d, 5, false, true, PW_MODE_NONE, 5, UNSET, false);      /* LoRA not enabled */
    pw_runtime_mode m;
    pw_batch_desc k;
    CHECK_ERR(pw_dispatch(d, 0, false, false, &m, &k), PW_ERR_INVALID_ARG, "num_tokens must be >= 1, got 0");
    pw_dispatcher_free(d);

    d = make(PW_GRAPH_FULL_DECODE_ONLY, 256);
    expect(d, 7, true, false, PW_MODE_FULL, 8, 8, true);
    expect(d, 7, false, false, PW_MODE_NONE, 7, UNSET, false);
    pw_dispatcher_free(d);

    d = make(PW_GRAPH_FULL, 256);
    expect(d, 7, false, false, PW_MODE_FULL, 8, UNSET, false);
    expect(d, 7, true, false, PW_MODE_FULL, 8, UNSET, false);
    pw_dispatcher_free(d);

    d = make(PW_GRAPH_PIECEWISE, 256);
    expect(d, 7, true, false, PW_MODE_PIECEWISE, 8, UNSET, false);
    expect(d, 512, false, false, PW_MODE_PIECEWISE, 512, UNSET, false);
    pw_dispatcher_free(d);

    d = make(PW_GRAPH_NONE, 256);
    expect(d, 7, true, false, PW_MODE_NONE, 7, 7, true);
    size_t n = 99;
    pw_dispatcher_capture_list(d, &n);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(pw_dispatcher_graph_mode(d), PW_GRAPH_NONE);
    pw_dispatcher_free(d);

    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.lora_enabled = true;
    CHECK_OK(pw_dispatcher_new(&cfg, &d));
    expect(d, 5, false, true, PW_MODE_PIECEWISE, 8, UNSET, false);
    expect(d, 5, true, true, PW_MODE_FULL, 8, 8, true);
    pw_dispatcher_capture_list(d, &n);
    CHECK_EQ_INT(n, 2 * (51 + 35));
    pw_dispatcher_free(d);
}

static void test_capture_order(void) {
    pw_dispatcher *d = make(PW_GRAPH_FULL_AND_PIECEWISE, 256);
    size_t n = 0;
    const pw_capture_item *it = pw_dispatcher_capture_list(d, &n);
    /* 51 PIECEWISE sizes, then FULL decode keys for the 35 sizes <= 256 */
    CHECK_EQ_INT(n, 51 + 35);
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        bool piecewise = i < 51;
        ok &= it[i].mode == (piecewise ? PW_MODE_PIECEWISE : PW_MODE_FULL);
        ok &= piecewise ? it[i].desc.num_reqs == UNSET && !it[i].desc.uniform
                        : it[i].desc.num_reqs == it[i].desc.num_tokens && it[i].desc.uniform;
        if (i + 1 < n && it[i + 1].mode == it[i].mode)
            ok &= it[i].desc.num_tokens > it[i + 1].desc.num_tokens; /* largest first */
    }
    CHECK(ok);
    CHECK_EQ_INT(it[0].desc.num_tokens, 512);
    CHECK_EQ_INT(it[50].desc.num_tokens, 1);
    CHECK_EQ_INT(it[51].desc.num_tokens, 256);
    CHECK_EQ_INT(it[n - 1].desc.num_tokens, 1);
    /* Every listed key is what dispatch returns for its own size. */
    for (size_t i = 0; i < n; i++) {
        pw_runtime_mode m;
        pw_batch_desc k;
        CHECK_OK(pw_dispatch(d, it[i].desc.num_tokens, it[i].desc.uniform, false, &m, &k));
        ok &= m == it[i].mode && pw_batch_desc_equal(&k, &it[i].desc);
    }
    CHECK(ok);
    pw_dispatcher_free(d);
}

static void test_user_lists(void) {
    pw_dispatcher_config cfg;
    pw_dispatcher *d = (pw_dispatcher *)1;
    int n = 0;
    int64_t list[] = {16, 4, 4, 1, 9000, 16};
    pw_dispatcher_config_init(&cfg);
    cfg.capture_sizes = list;
    cfg.n_capture_sizes = 6;
    CHECK_OK(pw_dispatcher_new(&cfg, &d));
    const int64_t *s = pw_dispatcher_capture_sizes(d, &n);
    CHECK_EQ_INT(n, 3); /* de-duplicated, sorted, 9000 > 8192 dropped */
    CHECK_EQ_INT(s[0], 1);
    CHECK_EQ_INT(s[1], 4);
    CHECK_EQ_INT(s[2], 16);
    CHECK_EQ_INT(pw_dispatcher_padded_size(d, 5), 16);
    CHECK_EQ_INT(pw_dispatcher_padded_size(d, 17), -1);
    pw_dispatcher_free(d);

    cfg.max_capture_size = 16;
    CHECK_OK(pw_dispatcher_new(&cfg, &d));
    pw_dispatcher_free(d);
    cfg.max_capture_size = 8;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG,
              "max_capture_size 8 conflicts with the capture size list, whose largest kept size is 16");
    CHECK(d == NULL);
    cfg.max_capture_size = 9000;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG,
              "max_capture_size 9000 exceeds max_num_batched_tokens 8192");
    cfg.max_capture_size = -1;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG, "max_capture_size -1 is negative");
    cfg.max_capture_size = 0;

    int64_t bad[] = {8, 0};
    cfg.capture_sizes = bad;
    cfg.n_capture_sizes = 2;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG, "capture size 0 (entry 1) is outside");
    int64_t huge[] = {9000, 10000};
    cfg.capture_sizes = huge;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG,
              "every capture size exceeds max_num_batched_tokens 8192");
    cfg.n_capture_sizes = 0;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG, "needs 1 to 1024 entries, got 0");
    cfg.capture_sizes = NULL;
    cfg.n_capture_sizes = 3;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG, "n_capture_sizes is 3 but capture_sizes is NULL");

    pw_dispatcher_config_init(&cfg);
    cfg.max_num_seqs = 0;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG, "max_num_seqs must be >= 1, got 0");
    pw_dispatcher_config_init(&cfg);
    cfg.max_num_batched_tokens = -5;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG, "max_num_batched_tokens must be >= 1, got -5");
    pw_dispatcher_config_init(&cfg);
    cfg.mode = (pw_graph_mode)77;
    CHECK_ERR(pw_dispatcher_new(&cfg, &d), PW_ERR_INVALID_ARG, "invalid graph mode 77");
    CHECK_ERR(pw_dispatcher_new(NULL, &d), PW_ERR_INVALID_ARG, "config is NULL");
}

/* ---- capture driver ---------------------------------------------------------- */

typedef struct recorder {
    int calls;
    pw_runtime_mode modes[64];
    pw_batch_desc descs[64];
    bool phase[64];
    bool context_matches;
    int fail_at;   /* call number (1-based) that fails; 0 never */
    bool leak_push;
} recorder;

static pw_status record_fwd(void *user, pw_runtime_mode mode, const pw_batch_desc *desc) {
    recorder *r = user;
    const pw_forward_context *ctx;
    if (pw_forward_context_get(&ctx) != PW_OK || ctx->mode != mode ||
        !pw_batch_desc_equal(&ctx->desc, desc))
        r->context_matches = false;
    if (r->calls < 64) {
        r->modes[r->calls] = mode;
        r->descs[r->calls] = *desc;
        r->phase[r->calls] = pw_capture_phase_active();
    }
    r->calls++;
    if (r->fail_at == r->calls) return pw_error(PW_ERR_IO, "forward failed on purpose");
    if (r->leak_push) {
        pw_forward_context c = *ctx;
        return pw_forward_context_push(&c);
    }
    return PW_OK;
}

static void test_capture_all_sequence(void) {
    int64_t list[] = {2, 8, 4};
    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.capture_sizes = list;
    cfg.n_capture_sizes = 3;
    pw_dispatcher *d = NULL;
    CHECK_OK(pw_dispatcher_new(&cfg, &d));
    pw_capture_options o;
    pw_capture_options_init(&o);
    CHECK_EQ_INT(o.warmups, 1);
    o.print_totals = false;
    o.progress = PW_PROGRESS_OFF;
    recorder r = {0};
    r.context_matches = true;
    pw_capture_report rep;
    CHECK_OK(pw_capture_all(d, record_fwd, &r, &o, &rep));
    /* 3 PIECEWISE + 3 FULL descriptors, one warm-up and one capture each */
    CHECK_EQ_INT(r.calls, 12);
    CHECK(r.context_matches);
    static const pw_runtime_mode want_mode[6] = {PW_MODE_PIECEWISE, PW_MODE_PIECEWISE, PW_MODE_PIECEWISE,
                                                 PW_MODE_FULL, PW_MODE_FULL, PW_MODE_FULL};
    static const int64_t want_tokens[6] = {8, 4, 2, 8, 4, 2};
    bool ok = true;
    for (int i = 0; i < 6; i++) {
        ok &= r.modes[2 * i] == PW_MODE_NONE && !r.phase[2 * i];
        ok &= r.modes[2 * i + 1] == want_mode[i] && r.phase[2 * i + 1];
        ok &= r.descs[2 * i].num_tokens == want_tokens[i];
        ok &= pw_batch_desc_equal(&r.descs[2 * i], &r.descs[2 * i + 1]);
    }
    CHECK(ok);
    CHECK_EQ_INT(rep.descriptors, 6);
    CHECK_EQ_INT(rep.warmup_runs, 6); /* no pool: the driver cannot ask a device */
    CHECK_EQ_INT(rep.graphs_captured, 0); /* no wrappers in this model */
    CHECK(strncmp(rep.summary, "captured 0 graphs in ", 21) == 0);
    CHECK(!pw_capture_phase_active());
    CHECK_EQ_INT(pw_forward_context_depth(), 0);

    o.warmups = 0;
    r = (recorder){0};
    CHECK_OK(pw_capture_all(d, record_fwd, &r, &o, NULL));
    CHECK_EQ_INT(r.calls, 6);
    o.warmups = 3;
    r = (recorder){0};
    CHECK_OK(pw_capture_all(d, record_fwd, &r, &o, NULL));
    CHECK_EQ_INT(r.calls, 24);

    /* A graph pool of the test device: where the device has no lazy setup
     * (the CPU records without computing: caps.needs_warmup false) the
     * warm-ups are skipped unless forced; where it has (CUDA, the emulated
     * device) they run. */
    pw_pool *pool = NULL;
    CHECK_OK(pw_pool_new(pw_test_device(), "graphs", &pool));
    pw_device_caps caps;
    CHECK_OK(pw_device_get_caps(pw_test_device(), &caps));
    o.graph_pool = pool;
    r = (recorder){0};
    CHECK_OK(pw_capture_all(d, record_fwd, &r, &o, &rep));
    CHECK_EQ_INT(r.calls, caps.needs_warmup ? 24 : 6);
    CHECK_EQ_INT(rep.warmup_runs, caps.needs_warmup ? 18 : 0);
    ok = true;
    for (int i = 0; i < 6 && !caps.needs_warmup; i++) ok &= r.modes[i] == want_mode[i] && r.phase[i];
    CHECK(ok);
    o.force_warmups = true;
    r = (recorder){0};
    CHECK_OK(pw_capture_all(d, record_fwd, &r, &o, &rep));
    CHECK_EQ_INT(r.calls, 24);
    CHECK_EQ_INT(rep.warmup_runs, 18);
    o.force_warmups = false;
    o.graph_pool = NULL;
    pw_pool_free(pool);

    o.warmups = -1;
    CHECK_ERR(pw_capture_all(d, record_fwd, &r, &o, NULL), PW_ERR_INVALID_ARG, "warmups must be >= 0, got -1");
    o.warmups = 1;
    CHECK_ERR(pw_capture_all(d, NULL, &r, &o, NULL), PW_ERR_INVALID_ARG, "forward callback are required");

    r = (recorder){0};
    r.fail_at = 4; /* the capture run of the second descriptor */
    CHECK_ERR(pw_capture_all(d, record_fwd, &r, &o, NULL), PW_ERR_IO, "forward failed on purpose");
    CHECK(strstr(pw_last_error(), "capturing PIECEWISE (num_tokens=4, num_reqs=unset, uniform=false, has_lora=false) (2 of 6)"));
    CHECK(!pw_capture_phase_active());
    CHECK_EQ_INT(pw_forward_context_depth(), 0);
    r = (recorder){0};
    r.fail_at = 1;
    CHECK_ERR(pw_capture_all(d, record_fwd, &r, &o, NULL), PW_ERR_IO, "warm-up run 1 of PIECEWISE (num_tokens=8");

    r = (recorder){0};
    r.leak_push = true;
    CHECK_ERR(pw_capture_all(d, record_fwd, &r, &o, NULL), PW_ERR_STATE,
              "changed the forward context depth by 1");
    CHECK_EQ_INT(pw_forward_context_depth(), 0);

    pw_capture_phase_begin();
    CHECK_ERR(pw_capture_all(d, record_fwd, &r, &o, NULL), PW_ERR_STATE, "a capture phase is already open");
    CHECK_OK(pw_capture_phase_end());
    pw_dispatcher_free(d);
}

/* A three-piece model in the stitching style: each piece's output is freed
 * right after its last use, and the last piece has weak_ref_output. */
typedef struct three_piece_model {
    toy_env *env;
    pw_tensor *input; /* persistent, sized for the largest batch */
    toy_piece pieces[3];
    pw_graph_wrapper *w[3];
} three_piece_model;

static pw_status three_piece_forward(void *user, pw_runtime_mode mode, const pw_batch_desc *desc) {
    three_piece_model *m = user;
    pw_tensor *x = NULL;
    PW_TRY(pw_tensor_slice0(m->input, 0, desc->num_tokens, &x));
    pw_value v = pw_value_tensor(x), next;
    pw_status s = PW_OK;
    for (int i = 0; i < 3 && s == PW_OK; i++) {
        s = pw_graph_wrapper_call(m->w[i], &v, 1, &next);
        pw_value_release(v);
        v = s == PW_OK ? next : pw_value_none();
    }
    pw_value_release(v);
    return s;
}

static void three_piece_init(three_piece_model *m, toy_env *env, int64_t max_tokens) {
    m->env = env;
    int64_t shape[2] = {max_tokens, TOY_WIDTH};
    CHECK_OK(pw_tensor_new(env->input_pool, PW_F32, 2, shape, &m->input));
    for (int i = 0; i < 3; i++) {
        toy_piece_init(&m->pieces[i], env, 2, 1);
        pw_wrapper_options o;
        pw_wrapper_options_init(&o);
        o.weak_ref_output = i == 2;
        o.gc_disable = true;
        o.debug_check_addresses = PW_ADDRESS_CHECK_ON;
        CHECK_OK(pw_graph_wrapper_new(toy_piece_callable(&m->pieces[i], "piece"), PW_MODE_PIECEWISE,
                                      env->stream, env->graph_pool, &o, &m->w[i]));
    }
}

static void three_piece_free(three_piece_model *m) {
    for (int i = 0; i < 3; i++) pw_graph_wrapper_free(m->w[i]);
    pw_tensor_release(m->input);
}

static size_t peak_for(const int64_t *sizes, int n, pw_capture_report *rep_out) {
    toy_env env;
    toy_env_init(&env);
    three_piece_model m;
    three_piece_init(&m, &env, 512);
    pw_dispatcher_config cfg;
    pw_dispatcher_config_init(&cfg);
    cfg.mode = PW_GRAPH_PIECEWISE;
    cfg.capture_sizes = sizes;
    cfg.n_capture_sizes = n;
    pw_dispatcher *d = NULL;
    CHECK_OK(pw_dispatcher_new(&cfg, &d));
    pw_capture_options o;
    pw_capture_options_init(&o);
    o.print_totals = false;
    o.progress = PW_PROGRESS_OFF;
    o.graph_pool = env.graph_pool;
    pw_capture_report rep;
    pw_counters_reset();
    CHECK_OK(pw_capture_all(d, three_piece_forward, &m, &o, &rep));
    CHECK_EQ_INT(rep.graphs_captured, 3 * (uint64_t)n);
    CHECK_EQ_INT(pw_graph_wrapper_num_graphs(m.w[0]), n);
    if (rep_out) *rep_out = rep;
    pw_pool_stats st;
    pw_pool_get_stats(env.graph_pool, &st);

    /* Every size replays correctly after all captures: pw_dispatch picks
     * the key, the forward runs, the last piece's alias holds the result. */
    static float xd[512 * TOY_WIDTH];
    for (int64_t i = 0; i < 512 * TOY_WIDTH; i++) xd[i] = (float)(i % 7);
    CHECK_OK(pw_test_write(env.stream, pw_tensor_data(m.input), xd, sizeof xd));
    bool ok = true;
    for (int64_t t = 1; t <= sizes[n - 1]; t += 37) {
        pw_runtime_mode mode;
        pw_batch_desc key;
        CHECK_OK(pw_dispatch(d, t, false, false, &mode, &key));
        pw_forward_context ctx = {mode, key, NULL};
        CHECK_OK(pw_forward_context_push(&ctx));
        pw_tensor *x = NULL;
        CHECK_OK(pw_tensor_slice0(m.input, 0, key.num_tokens, &x));
        pw_value v = pw_value_tensor(x), next;
        for (int i = 0; i < 3; i++) {
            CHECK_OK(pw_graph_wrapper_call(m.w[i], &v, 1, &next));
            pw_value_release(v);
            v = next;
        }
        float *y = pw_test_read_tensor(env.stream, v.as.tensor);
        ok &= y != NULL;
        for (int64_t i = 0; y && i < t * TOY_WIDTH; i++) ok &= y[i] == 2 * (2 * (2 * xd[i] + 1) + 1) + 1;
        free(y);
        pw_value_release(v);
        CHECK_OK(pw_forward_context_pop());
    }
    CHECK(ok);
    pw_dispatcher_free(d);
    three_piece_free(&m);
    toy_env_free(&env);
    return st.peak_allocated;
}

static void test_shared_pool_peak(void) {
    int64_t largest[] = {512};
    size_t single = peak_for(largest, 1, NULL);
    pw_dispatcher *d = make(PW_GRAPH_PIECEWISE, 256);
    int n = 0;
    const int64_t *all = pw_dispatcher_capture_sizes(d, &n);
    pw_capture_report rep;
    size_t together = peak_for(all, n, &rep);
    pw_dispatcher_free(d);
    CHECK(single > 0);
    CHECK(together <= single + single / 4);
    CHECK_EQ_INT(rep.descriptors, 51);
    CHECK(strstr(rep.summary, "captured 153 graphs in ") == rep.summary);
    CHECK(strstr(rep.summary, ", graph pool 2.0 MiB") != NULL);
    CHECK(rep.pool_peak_allocated == together);
}

int main(void) {
    test_default_sizes();
    test_padding();
    test_dispatch_rules();
    test_capture_order();
    test_user_lists();
    test_capture_all_sequence();
    test_shared_pool_peak();
    return pw_test_finish("runtime_dispatcher");
}
