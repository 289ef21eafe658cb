/* Relocation through the public API (include/piecewise/relocate.h), with
 * the capture library alone: a two-launch callable (y = a*x + b into a
 * graph-pool block, then z = a*y + b into another, the first released) is
 * recorded once with one input and run as a program on another input in a
 * second capture. The relocated graph computes what a real capture of the
 * callable on that input computes, its recording is the real one byte for
 * byte (pw_reloc_program_run_checked), persistent regions are relocated,
 * and what cannot be described (a kernel without pw_kernel.args, an
 * address in no region) is refused with the reason. The program written to
 * a graph cache file (include/piecewise/graph_cache.h) comes back equal and
 * runs the same; a file for another fingerprint or a missing one is
 * refused. */
#include "toy.h"

#include "piecewise/graph_cache.h"

#include <stdlib.h>
#include <unistd.h>

#include <stddef.h>

typedef struct scaled_args {
    const float *x;
    float *y;
    const float *scale; /* persistent: a region */
    int64_t n;
} scaled_args;

static void scaled_kernel(const void *p) {
    const scaled_args *a = p;
    for (int64_t i = 0; i < a->n; i++) a->y[i] = 2.0f * a->x[i] * a->scale[0] + 1.0f;
}

static const pw_kernel_args scaled_layout = {
    sizeof(scaled_args), 3,
    {offsetof(scaled_args, x), offsetof(scaled_args, y), offsetof(scaled_args, scale)}};
static const pw_kernel k_scaled = {"scaled", scaled_kernel, NULL, &scaled_layout};
/* the same entry point without a layout: never relocated */
static const pw_kernel k_opaque = {"opaque", scaled_kernel, NULL, NULL};

typedef struct callable_env {
    toy_env *env;
    const float *scale;
    const pw_kernel *kernel;
} callable_env;

/* y = f(x) into a block, z = f(y) into another; y released: an output block
 * and a released one. */
static pw_status two_launches(void *user, const pw_value *args, int nargs, pw_value *out) {
    callable_env *c = user;
    pw_tensor *x = args[0].as.tensor;
    int64_t shape[2] = {pw_tensor_dim(x, 0), TOY_WIDTH};
    pw_tensor *y = NULL, *z = NULL;
    PW_TRY(pw_tensor_new(c->env->graph_pool, PW_F32, 2, shape, &y));
    pw_status s = pw_tensor_new(c->env->graph_pool, PW_F32, 2, shape, &z);
    scaled_args a1 = {pw_tensor_data(x), pw_tensor_data(y), c->scale, shape[0] * TOY_WIDTH};
    if (s == PW_OK) s = pw_launch(c->env->stream, c->kernel, &a1, sizeof a1);
    scaled_args a2 = {pw_tensor_data(y), z ? pw_tensor_data(z) : NULL, c->scale,
                      shape[0] * TOY_WIDTH};
    if (s == PW_OK) s = pw_launch(c->env->stream, c->kernel, &a2, sizeof a2);
    pw_tensor_release(y);
    if (s != PW_OK) {
        pw_tensor_release(z);
        return s;
    }
    (void)nargs;
    *out = pw_value_tensor(z);
    return PW_OK;
}

static float expect(float x, float scale) {
    float y = 2.0f * x * scale + 1.0f;
    return 2.0f * y * scale + 1.0f;
}

/* z == expect(x, scale) element by element, read through env's stream. */
static bool z_right(toy_env *env, const pw_tensor *z, const pw_tensor *x, float scale) {
    float *zd = pw_test_read_tensor(env->stream, z), *xd = pw_test_read_tensor(env->stream, x);
    bool ok = zd && xd;
    for (int i = 0; ok && i < 3 * TOY_WIDTH; i++) ok = zd[i] == expect(xd[i], scale);
    free(zd);
    free(xd);
    return ok;
}

static void set_scale(toy_env *env, float *scale, float value) {
    CHECK_OK(pw_test_write(env->stream, scale, &value, sizeof value));
}

/* The program run inside the open capture, proven against a real capture
 * where the stream's capture can forget launches (the CPU's); elsewhere
 * the proof is refused as documented and the program runs plainly (the
 * outputs are still checked against the formula). */
static pw_status run_program(const pw_reloc_program *p, toy_env *env,
                             const pw_reloc_regions *regions, pw_callable run, const pw_value *args,
                             const char *label, pw_value *out) {
    if (pw_stream_device(env->stream) == PW_DEVICE_CPU)
        return pw_reloc_program_run_checked(p, env->stream, regions, run, args, 1, label, out);
    CHECK_ERR(pw_reloc_program_run_checked(p, env->stream, regions, run, args, 1, label, out),
              PW_ERR_UNSUPPORTED, "cannot forget launches it already made");
    CHECK(out->kind == PW_VAL_NONE);
    return pw_reloc_program_run(p, env->stream, regions, args, 1, out);
}

int main(void) {
    toy_env env;
    toy_env_init(&env);
    float *scale = NULL;
    CHECK_OK(pw_pool_alloc(env.input_pool, sizeof(float), (void **)&scale));
    set_scale(&env, scale, 1.5f);
    pw_reloc_regions *regions = NULL;
    CHECK_OK(pw_reloc_regions_new(&regions));
    CHECK_OK(pw_reloc_regions_add(regions, scale, sizeof(float)));
    size_t n_regions = 0;
    CHECK(pw_reloc_regions_list(regions, &n_regions) != NULL && n_regions == 1);
    CHECK_ERR(pw_reloc_regions_add(regions, NULL, 4), PW_ERR_INVALID_ARG, "required");

    callable_env c = {&env, scale, &k_scaled};
    pw_callable run = {two_launches, &c, "two_launches"};
    pw_tensor *x1 = toy_input(&env, 3, 1.0f), *x2 = toy_input(&env, 3, 10.0f);
    pw_value a1 = pw_value_tensor(x1), a2 = pw_value_tensor(x2);
    char why[PW_RELOC_WHY_CAP];

    /* no open capture */
    pw_reloc_program *prog = NULL;
    pw_value out = pw_value_none();
    CHECK_ERR(pw_reloc_record(env.stream, regions, run, &a1, 1, &out, &prog, why), PW_ERR_CAPTURE,
              "no capture is open");

    /* record with x1 */
    pw_graph *g1 = NULL;
    CHECK_OK(pw_stream_begin_capture(env.stream, env.graph_pool));
    CHECK_OK(pw_reloc_record(env.stream, regions, run, &a1, 1, &out, &prog, why));
    CHECK(prog != NULL);
    if (!prog) fprintf(stderr, "not relocatable: %s\n", why);
    pw_value_release(out);
    CHECK_OK(pw_stream_end_capture(env.stream, &g1));
    if (prog) {
        CHECK_EQ_INT(prog->n_launches, 2);
        CHECK_EQ_INT(prog->n_relocs, 6); /* x, y, scale per launch */
        CHECK_EQ_INT(prog->n_blocks, 2);
        CHECK(prog->out_blocks[1].is_output && !prog->out_blocks[0].is_output);
        CHECK(pw_reloc_program_matches(prog, &a2, 1));
        pw_tensor *x4 = toy_input(&env, 4, 0.0f);
        pw_value a4 = pw_value_tensor(x4);
        CHECK(!pw_reloc_program_matches(prog, &a4, 1)); /* another shape */
        pw_tensor_release(x4);
    }

    /* run on x2 in a new capture, proven against a real one */
    pw_graph *g2 = NULL;
    pw_value out2 = pw_value_none();
    CHECK_OK(pw_stream_begin_capture(env.stream, env.graph_pool));
    if (prog)
        CHECK_OK(
            run_program(prog, &env, regions, run, &a2, "test", &out2));
    CHECK_OK(pw_stream_end_capture(env.stream, &g2));
    if (g2 && out2.kind == PW_VAL_TENSOR) {
        CHECK_OK(pw_graph_replay(g2, env.stream));
        CHECK(z_right(&env, out2.as.tensor, x2, 1.5f));
        /* the region moved with the value behind it: a new scale is read */
        set_scale(&env, scale, 0.5f);
        CHECK_OK(pw_graph_replay(g2, env.stream));
        CHECK(z_right(&env, out2.as.tensor, x2, 0.5f));
    }
    pw_value_release(out2);

    /* the graph cache: written, read back, run */
    if (prog) {
        char dir[] = "/tmp/pw_relocate_XXXXXX";
        CHECK(mkdtemp(dir) != NULL);
        char path[64];
        snprintf(path, sizeof path, "%s/graphs.pwgc", dir);
        const pw_kernel *table[] = {&k_opaque, &k_scaled};
        pw_graph_cache_spec spec = {42, regions, table, 2, 0};
        pw_graph_cache_entry entry = {7, pw_batch_desc_make(3, PW_NUM_REQS_UNSET, false, false),
                                      prog};
        CHECK_OK(pw_graph_cache_write(path, &spec, &entry, 1));
        pw_graph_cache_entry *back = NULL;
        size_t n_back = 0, dropped = 0;
        CHECK_OK(pw_graph_cache_read(path, &spec, &back, &n_back, &dropped, why, sizeof why));
        CHECK_EQ_INT(n_back, 1);
        CHECK_EQ_INT(dropped, 0);
        if (n_back == 1) {
            CHECK_EQ_INT(back[0].key, 7);
            CHECK_EQ_INT(back[0].desc.num_tokens, 3);
            const pw_reloc_program *q = back[0].program;
            CHECK(q->n_launches == 2 && q->kernels[0] == &k_scaled && q->n_relocs == 6);
            CHECK(pw_reloc_program_matches(q, &a2, 1));
            pw_graph *gc = NULL;
            pw_value outc = pw_value_none();
            CHECK_OK(pw_stream_begin_capture(env.stream, env.graph_pool));
            CHECK_OK(run_program(q, &env, regions, run, &a2, "cached", &outc));
            CHECK_OK(pw_stream_end_capture(env.stream, &gc));
            pw_value_release(outc);
            pw_graph_free(gc);
        }
        pw_graph_cache_entries_free(back, n_back);
        /* another fingerprint, no file, a kernel the table lacks */
        spec.fingerprint = 43;
        CHECK_EQ_INT(pw_graph_cache_read(path, &spec, &back, &n_back, &dropped, why, sizeof why),
                     PW_ERR_PARSE);
        CHECK(strstr(why, "another model, configuration or build") != NULL);
        char missing[80];
        snprintf(missing, sizeof missing, "%s/none.pwgc", dir);
        CHECK_EQ_INT(pw_graph_cache_read(missing, &spec, &back, &n_back, &dropped, why, sizeof why),
                     PW_ERR_NOT_FOUND);
        spec.n_kernels = 1;
        CHECK_ERR(pw_graph_cache_write(path, &spec, &entry, 1), PW_ERR_INVALID_ARG,
                  "which the kernel table lacks");
        CHECK(unlink(path) == 0);
        CHECK(rmdir(dir) == 0);
    }

    /* the plain run, too */
    pw_graph *g3 = NULL;
    pw_value out3 = pw_value_none();
    CHECK_OK(pw_stream_begin_capture(env.stream, env.graph_pool));
    if (prog) CHECK_OK(pw_reloc_program_run(prog, env.stream, regions, &a2, 1, &out3));
    pw_value refused = pw_value_none();
    CHECK_ERR(pw_reloc_program_run(prog, env.stream, regions, &a2, 2, &refused),
              PW_ERR_INVALID_ARG, "arguments are required");
    CHECK(refused.kind == PW_VAL_NONE);
    CHECK_OK(pw_stream_end_capture(env.stream, &g3));
    CHECK(g3 && pw_graph_num_launches(g3) == 2);
    pw_value_release(out3);

    /* refusals: an address in no region, a kernel without a layout */
    pw_reloc_regions *empty = NULL;
    CHECK_OK(pw_reloc_regions_new(&empty));
    pw_graph *g4 = NULL;
    pw_reloc_program *none = NULL;
    CHECK_OK(pw_stream_begin_capture(env.stream, env.graph_pool));
    CHECK_OK(pw_reloc_record(env.stream, empty, run, &a1, 1, &out, &none, why));
    CHECK(none == NULL && strstr(why, "lies in no region") != NULL);
    pw_value_release(out);
    c.kernel = &k_opaque;
    CHECK_OK(pw_reloc_record(env.stream, regions, run, &a1, 1, &out, &none, why));
    CHECK(none == NULL && strstr(why, "declares no argument layout") != NULL);
    pw_value_release(out);
    CHECK_OK(pw_stream_end_capture(env.stream, &g4));

    /* observing a pool adds its blocks as regions, in order */
    CHECK_OK(pw_reloc_regions_observe(empty, env.input_pool, true));
    void *b1 = NULL, *b2 = NULL;
    CHECK_OK(pw_pool_alloc(env.input_pool, 100, &b1));
    CHECK_OK(pw_pool_alloc(env.input_pool, 200, &b2));
    CHECK_OK(pw_reloc_regions_observe(empty, env.input_pool, false));
    const pw_reloc_region *list = pw_reloc_regions_list(empty, &n_regions);
    CHECK_EQ_INT(n_regions, 2);
    if (n_regions == 2) {
        CHECK(list[0].base == (uintptr_t)b1 && list[0].bytes == 100);
        CHECK(list[1].base == (uintptr_t)b2 && list[1].bytes == 200);
    }
    CHECK_OK(pw_pool_release(env.input_pool, b1));
    CHECK_OK(pw_pool_release(env.input_pool, b2));

    pw_graph_free(g1);
    pw_graph_free(g2);
    pw_graph_free(g3);
    pw_graph_free(g4);
    pw_reloc_program_free(prog);
    pw_reloc_program_free(NULL);
    pw_reloc_regions_free(empty);
    pw_reloc_regions_free(regions);
    pw_tensor_release(x1);
    pw_tensor_release(x2);
    CHECK_OK(pw_pool_release(env.input_pool, scale));
    toy_env_free(&env);
    return pw_test_finish("runtime_relocate");
}
