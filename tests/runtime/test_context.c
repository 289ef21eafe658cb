/* Modes, batch descriptors, the forward context and the capture phase. */
#include "test_util.h"

static void test_runtime_modes(void) {
    CHECK_STREQ(pw_runtime_mode_name(PW_MODE_NONE), "NONE");
    CHECK_STREQ(pw_runtime_mode_name(PW_MODE_PIECEWISE), "PIECEWISE");
    CHECK_STREQ(pw_runtime_mode_name(PW_MODE_FULL), "FULL");
    CHECK_STREQ(pw_runtime_mode_name((pw_runtime_mode)42), "?");
    pw_runtime_mode m = PW_MODE_NONE;
    CHECK_OK(pw_runtime_mode_parse("piecewise", &m));
    CHECK_EQ_INT(m, PW_MODE_PIECEWISE);
    CHECK_OK(pw_runtime_mode_parse("FULL", &m));
    CHECK_EQ_INT(m, PW_MODE_FULL);
    CHECK_ERR(pw_runtime_mode_parse("fast", &m), PW_ERR_PARSE, "unknown runtime mode 'fast'");
    CHECK_ERR(pw_runtime_mode_parse(NULL, &m), PW_ERR_PARSE, "(null)");
}

static void test_graph_modes(void) {
    static const struct {
        const char *name;
        pw_graph_mode mode;
        pw_runtime_mode decode, mixed;
    } table[] = {
        {"NONE", PW_GRAPH_NONE, PW_MODE_NONE, PW_MODE_NONE},
        {"PIECEWISE", PW_GRAPH_PIECEWISE, PW_MODE_PIECEWISE, PW_MODE_PIECEWISE},
        {"FULL", PW_GRAPH_FULL, PW_MODE_FULL, PW_MODE_FULL},
        {"FULL_DECODE_ONLY", PW_GRAPH_FULL_DECODE_ONLY, PW_MODE_FULL, PW_MODE_NONE},
        {"FULL_AND_PIECEWISE", PW_GRAPH_FULL_AND_PIECEWISE, PW_MODE_FULL, PW_MODE_PIECEWISE},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        pw_graph_mode g;
        CHECK_OK(pw_graph_mode_parse(table[i].name, &g));
        CHECK_EQ_INT(g, table[i].mode);
        CHECK_STREQ(pw_graph_mode_name(g), table[i].name);
        CHECK_EQ_INT(pw_graph_mode_decode_mode(g), table[i].decode);
        CHECK_EQ_INT(pw_graph_mode_mixed_mode(g), table[i].mixed);
    }
    pw_graph_mode g;
    CHECK_OK(pw_graph_mode_parse("full_and_piecewise", &g));
    CHECK_EQ_INT(g, PW_GRAPH_FULL_AND_PIECEWISE);
    CHECK_EQ_INT(PW_GRAPH_MODE_DEFAULT, PW_GRAPH_FULL_AND_PIECEWISE);
    CHECK_ERR(pw_graph_mode_parse("FULL_ONLY", &g), PW_ERR_PARSE, "unknown graph mode 'FULL_ONLY'");
    CHECK(pw_graph_mode_uses(PW_GRAPH_FULL_AND_PIECEWISE, PW_MODE_PIECEWISE));
    CHECK(pw_graph_mode_uses(PW_GRAPH_FULL_AND_PIECEWISE, PW_MODE_FULL));
    CHECK(!pw_graph_mode_uses(PW_GRAPH_FULL_DECODE_ONLY, PW_MODE_PIECEWISE));
    CHECK(!pw_graph_mode_uses(PW_GRAPH_PIECEWISE, PW_MODE_FULL));
    CHECK_STREQ(pw_graph_mode_name((pw_graph_mode)-1), "?");
}

static void test_batch_desc(void) {
    pw_batch_desc a = pw_batch_desc_make(8, 8, true, false);
    pw_batch_desc b = pw_batch_desc_make(8, 8, true, false);
    pw_batch_desc c = pw_batch_desc_make(8, 8, true, true);
    CHECK(pw_batch_desc_equal(&a, &b));
    CHECK_EQ_INT(pw_batch_desc_hash(&a) == pw_batch_desc_hash(&b), 1);
    CHECK(!pw_batch_desc_equal(&a, &c));
    CHECK(pw_batch_desc_hash(&a) != pw_batch_desc_hash(&c));

    pw_batch_desc r = pw_batch_desc_relax_for_piecewise(c);
    CHECK_EQ_INT(r.num_tokens, 8);
    CHECK_EQ_INT(r.num_reqs, PW_NUM_REQS_UNSET);
    CHECK(!r.uniform);
    CHECK(r.has_lora);

    char buf[PW_BATCH_DESC_FORMAT_CAP];
    CHECK_STREQ(pw_batch_desc_format(&a, buf, sizeof buf),
                "(num_tokens=8, num_reqs=8, uniform=true, has_lora=false)");
    CHECK_STREQ(pw_batch_desc_format(&r, buf, sizeof buf),
                "(num_tokens=8, num_reqs=unset, uniform=false, has_lora=true)");
    pw_batch_desc big = pw_batch_desc_make(INT64_MAX, INT64_MAX, true, true);
    pw_batch_desc_format(&big, buf, sizeof buf);
    CHECK(strstr(buf, "has_lora=true)") != NULL); /* the cap fits the widest descriptor */
    char tiny[8];
    pw_batch_desc_format(&a, tiny, sizeof tiny);
    CHECK_EQ_INT(strlen(tiny), 7);

    /* Distinct keys over a realistic range do not collide in the low bits a
     * table of 1024 slots uses (a weak hash would cluster). */
    int used[1024] = {0};
    int collisions = 0;
    for (int t = 1; t <= 512; t++) {
        pw_batch_desc d = pw_batch_desc_make(t, PW_NUM_REQS_UNSET, false, false);
        if (used[pw_batch_desc_hash(&d) & 1023]++) collisions++;
    }
    CHECK(collisions < 200); /* ~110 expected for a uniform hash */
}

static void test_forward_context(void) {
    const pw_forward_context *ctx = (const pw_forward_context *)1;
    CHECK(!pw_forward_context_is_set());
    CHECK_ERR(pw_forward_context_get(&ctx), PW_ERR_STATE, "no forward context is set");
    CHECK(ctx == NULL);
    CHECK_ERR(pw_forward_context_pop(), PW_ERR_STATE, "no forward context is set");
    CHECK_ERR(pw_forward_context_push(NULL), PW_ERR_INVALID_ARG, "ctx is NULL");
    pw_forward_context bad = {(pw_runtime_mode)7, pw_batch_desc_make(1, 1, true, false), NULL};
    CHECK_ERR(pw_forward_context_push(&bad), PW_ERR_INVALID_ARG, "invalid runtime mode 7");

    int meta_outer = 1, meta_inner = 2;
    pw_forward_context outer = {PW_MODE_FULL, pw_batch_desc_make(4, 4, true, false), &meta_outer};
    pw_forward_context inner = {PW_MODE_PIECEWISE, pw_batch_desc_make(16, PW_NUM_REQS_UNSET, false, false),
                                &meta_inner};
    CHECK_OK(pw_forward_context_push(&outer));
    outer.mode = PW_MODE_NONE; /* the context is a copy */
    CHECK_OK(pw_forward_context_get(&ctx));
    CHECK_EQ_INT(ctx->mode, PW_MODE_FULL);
    CHECK_OK(pw_forward_context_push(&inner));
    CHECK_EQ_INT(pw_forward_context_depth(), 2);
    CHECK_OK(pw_forward_context_get(&ctx));
    CHECK_EQ_INT(ctx->mode, PW_MODE_PIECEWISE);
    CHECK_EQ_INT(ctx->desc.num_tokens, 16);
    CHECK(ctx->attn_metadata == &meta_inner);
    CHECK_OK(pw_forward_context_pop());
    CHECK_OK(pw_forward_context_get(&ctx));
    CHECK_EQ_INT(ctx->mode, PW_MODE_FULL);
    CHECK_EQ_INT(ctx->desc.num_reqs, 4);
    CHECK(ctx->attn_metadata == &meta_outer);
    CHECK_OK(pw_forward_context_pop());
    CHECK(!pw_forward_context_is_set());

    for (int i = 0; i < PW_FORWARD_CONTEXT_MAX_DEPTH; i++) CHECK_OK(pw_forward_context_push(&inner));
    CHECK_ERR(pw_forward_context_push(&inner), PW_ERR_STATE, "nesting deeper than");
    for (int i = 0; i < PW_FORWARD_CONTEXT_MAX_DEPTH; i++) CHECK_OK(pw_forward_context_pop());
    CHECK_EQ_INT(pw_forward_context_depth(), 0);
}

static int thread_saw_context = -1;

#include <pthread.h>
static void *other_thread(void *arg) {
    (void)arg;
    thread_saw_context = pw_forward_context_is_set();
    return NULL;
}

static void test_context_is_thread_local(void) {
    pw_forward_context c = {PW_MODE_FULL, pw_batch_desc_make(1, 1, true, false), NULL};
    CHECK_OK(pw_forward_context_push(&c));
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, NULL);
    CHECK_EQ_INT(thread_saw_context, 0);
    CHECK_OK(pw_forward_context_pop());
}

static void test_capture_phase(void) {
    CHECK(!pw_capture_phase_active());
    CHECK_ERR(pw_capture_phase_end(), PW_ERR_STATE, "no capture phase is open");
    pw_capture_phase_begin();
    pw_capture_phase_begin();
    CHECK(pw_capture_phase_active());
    CHECK_OK(pw_capture_phase_end());
    CHECK(pw_capture_phase_active());
    CHECK_OK(pw_capture_phase_end());
    CHECK(!pw_capture_phase_active());
}

int main(void) {
    test_runtime_modes();
    test_graph_modes();
    test_batch_desc();
    test_forward_context();
    test_context_is_thread_local();
    test_capture_phase();
    return pw_test_finish("runtime_context");
}
