/* bench stitch: what it costs per forward to stitch a Llama-like split
 * graph whose pieces do nothing, for the plan interpreter, the native
 * (compiled C) function, and a hand-written C sequence of the same calls
 * with the same retains and releases. */
#include "bench.h"
#include "cli.h"
#include "graph/graph_internal.h"
#include "pw_testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STITCH_MAX_LAYERS 1024
#define STITCH_MAX_CASES 16
#define STITCH_PIECE_OUTPUTS 5 /* what each piece but the last hands on (see synthetic.c) */
/* Time one sample over about this many nanoseconds of forwards. */
#define STITCH_SAMPLE_NS 200000.0

/* The do-nothing pieces hand out references to these. */
typedef struct stitch_world {
    int64_t storage[STITCH_PIECE_OUTPUTS + 1];
    pw_tensor *items[STITCH_PIECE_OUTPUTS + 1];
    pw_tuple *piece_result;
    uint64_t calls;
} stitch_world;

static stitch_world world;

static pw_status piece_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    world.calls++;
    *out = pw_value_tuple(pw_tuple_retain(world.piece_result));
    return PW_OK;
}

static pw_status last_piece_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    world.calls++;
    *out = pw_value_tensor(pw_tensor_retain(world.items[STITCH_PIECE_OUTPUTS]));
    return PW_OK;
}

static pw_status attention_fn(void *user, const pw_value *args, int nargs, pw_value *out) {
    world.calls++;
    *out = pw_value_none();
    return PW_OK;
}

static pw_status resolve(void *user, const char *target, pw_callable *out) {
    if (strcmp(target, "attention") != 0) return pw_error(PW_ERR_NOT_FOUND, "bench: no op '%s'", target);
    *out = (pw_callable){attention_fn, NULL, "attention"};
    return PW_OK;
}

static pw_status world_init(void) {
    int64_t shape[1] = {1};
    for (int i = 0; i <= STITCH_PIECE_OUTPUTS; i++)
        PW_TRY(pw_tensor_wrap(&world.storage[i], PW_DEVICE_CPU, PW_I64, 1, shape, &world.items[i]));
    PW_TRY(pw_tuple_new(STITCH_PIECE_OUTPUTS, &world.piece_result));
    for (int i = 0; i < STITCH_PIECE_OUTPUTS; i++)
        pw_tuple_set(world.piece_result, i, pw_value_tensor(pw_tensor_retain(world.items[i])));
    return PW_OK;
}

static void world_free(void) {
    pw_tuple_release(world.piece_result);
    for (int i = 0; i <= STITCH_PIECE_OUTPUTS; i++) pw_tensor_release(world.items[i]);
}

/* ---- the hand-written forward ---------------------------------------------------------------- */

/* Parameter layout of the synthetic graph: s0, input_ids, positions,
 * cos_sin, embed_w, six weights per layer, norm_w. */
enum { P_S0, P_IDS, P_POS, P_COS, P_EMBED, P_LAYER0 };
enum { W_IN_LN, W_QKV, W_O, W_POST_LN, W_GATE_UP, W_DOWN, W_PER_LAYER };
#define W(l, k) p[P_LAYER0 + (l) * W_PER_LAYER + (k)]

typedef struct hand_ctx {
    int layers;
    const pw_callable *piece, *last, *attention;
    pw_value *layer_names; /* string values, one per layer */
} hand_ctx;

static inline void rel(pw_value v) {
    if (v.kind == PW_VAL_TENSOR || v.kind == PW_VAL_TUPLE) pw_value_release(v);
}

static inline pw_value item(pw_value t, int i) {
    pw_value v = pw_tuple_get(t.as.tuple, i);
    if (v.kind == PW_VAL_TENSOR || v.kind == PW_VAL_TUPLE) pw_value_retain(v);
    return v;
}

/* What a person would write for this model: call each piece, take its
 * five results, run attention, release what is no longer needed. */
static pw_status hand_forward(const hand_ctx *h, const pw_value *p, pw_value *out) {
    pw_status s;
    pw_value t, none;
    s = h->piece->fn(h->piece->user,
                     (pw_value[]){p[P_IDS], p[P_EMBED], W(0, W_IN_LN), W(0, W_QKV), p[P_POS], p[P_COS], p[P_S0]}, 7, &t);
    if (s != PW_OK) return s;
    pw_value residual = item(t, 0), v = item(t, 1), q = item(t, 2), k = item(t, 3), attn_out = item(t, 4);
    rel(t);
    for (int l = 0; l < h->layers; l++) {
        s = h->attention->fn(h->attention->user, (pw_value[]){q, k, v, attn_out, h->layer_names[l]}, 5, &none);
        if (s != PW_OK) return s;
        rel(q);
        rel(k);
        rel(v);
        rel(none);
        if (l == h->layers - 1) break;
        s = h->piece->fn(h->piece->user,
                         (pw_value[]){attn_out, W(l, W_O), residual, W(l, W_POST_LN), W(l, W_GATE_UP), W(l, W_DOWN),
                                      W(l + 1, W_IN_LN), W(l + 1, W_QKV), p[P_POS], p[P_COS], p[P_S0]},
                         11, &t);
        if (s != PW_OK) return s;
        rel(attn_out);
        rel(residual);
        residual = item(t, 0), v = item(t, 1), q = item(t, 2), k = item(t, 3), attn_out = item(t, 4);
        rel(t);
    }
    int l = h->layers - 1;
    pw_value last;
    s = h->last->fn(h->last->user,
                    (pw_value[]){attn_out, W(l, W_O), residual, W(l, W_POST_LN), W(l, W_GATE_UP), W(l, W_DOWN),
                                 p[P_LAYER0 + h->layers * W_PER_LAYER]},
                    7, &last);
    if (s != PW_OK) return s;
    rel(attn_out);
    rel(residual);
    pw_tuple *result;
    s = pw_tuple_new(1, &result);
    if (s != PW_OK) return s;
    pw_tuple_set(result, 0, last);
    *out = pw_value_tuple(result);
    return PW_OK;
}

/* ---- measuring ----------------------------------------------------------------------------------- */

typedef enum stitch_form { FORM_PLAN, FORM_NATIVE, FORM_HAND } stitch_form;

typedef struct stitch_case {
    const pw_plan *plan;
    const pw_native *native;
    const hand_ctx *hand;
    const pw_callable *submods;
    int nsub;
    const pw_value *args;
    int nargs;
} stitch_case;

static pw_status forward(const stitch_case *c, stitch_form f) {
    pw_value out;
    pw_status s = f == FORM_PLAN     ? pw_plan_run(c->plan, c->submods, c->nsub, c->args, c->nargs, &out)
                  : f == FORM_NATIVE ? pw_native_run(c->native, c->submods, c->nsub, c->args, c->nargs, &out)
                                     : hand_forward(c->hand, c->args, &out);
    if (s == PW_OK) pw_value_release(out);
    return s;
}

/* Forwards per sample for about STITCH_SAMPLE_NS (after a warm-up). */
static pw_status size_batch(const stitch_case *c, stitch_form f, int *batch) {
    uint64_t t0 = pw_bench_now_ns();
    int iters = 0;
    while (pw_bench_now_ns() - t0 < STITCH_SAMPLE_NS || iters < 8) {
        PW_TRY(forward(c, f));
        iters++;
    }
    double per = (double)(pw_bench_now_ns() - t0) / iters;
    *batch = per > 0 ? (int)(STITCH_SAMPLE_NS / per) + 1 : 1000;
    return PW_OK;
}

static pw_status sample(const stitch_case *c, stitch_form f, int batch, double *ns) {
    uint64_t a = pw_bench_now_ns();
    for (int i = 0; i < batch; i++) PW_TRY(forward(c, f));
    *ns = (double)(pw_bench_now_ns() - a) / batch;
    return PW_OK;
}

/* Median ns per forward of each form. Samples of the three forms take
 * turns, so a busy machine slows them alike; short samples mostly fit in
 * one time slice. */
static pw_status measure(const stitch_case *c, int repeats, double ns[3]) {
    int batch[3];
    for (int f = 0; f < 3; f++) PW_TRY(size_batch(c, (stitch_form)f, &batch[f]));
    double *samples = calloc((size_t)repeats * 3, sizeof *samples);
    if (!samples) return PW_ERR_OOM;
    pw_status s = PW_OK;
    for (int r = 0; r < repeats && s == PW_OK; r++)
        for (int f = 0; f < 3 && s == PW_OK; f++) s = sample(c, (stitch_form)f, batch[f], &samples[f * repeats + r]);
    for (int f = 0; f < 3 && s == PW_OK; f++) ns[f] = pw_bench_median(samples + f * repeats, (size_t)repeats);
    free(samples);
    return s;
}

typedef struct stitch_result {
    int layers, nodes;
    double plan_ns, native_ns, hand_ns;
    bool native_compiled;
} stitch_result;

static pw_status run_case(int layers, int repeats, stitch_result *r) {
    memset(r, 0, sizeof *r);
    r->layers = layers;
    pw_ir *g = NULL, *split = NULL;
    pw_plan *plan = NULL;
    pw_native *native = NULL;
    pw_callable *submods = NULL;
    pw_value *args = NULL, *names = NULL;
    char (*name_text)[64] = NULL;
    pw_status s = pw_ir_synthetic_llama(layers, &g);
    if (s == PW_OK) s = pw_split(g, (const char *const[]){"attention"}, 1, &split);
    pw_plan_options opts = {.resolve_op = resolve, .function_name = "bench_stitch"};
    if (s == PW_OK) s = pw_plan_build(split, &opts, &plan);
    if (s == PW_OK) s = pw_native_compile(plan, &native);
    if (s != PW_OK) goto done;
    r->nodes = pw_plan_num_nodes(plan);
    r->native_compiled = pw_native_is_compiled(native);

    int nsub = pw_plan_num_submodules(plan), nargs = pw_plan_num_params(plan);
    static const pw_callable piece = {piece_fn, NULL, "piece"}, last = {last_piece_fn, NULL, "last"},
                             attention = {attention_fn, NULL, "attention"};
    submods = calloc((size_t)nsub, sizeof *submods);
    args = calloc((size_t)nargs, sizeof *args);
    names = calloc((size_t)layers, sizeof *names);
    name_text = calloc((size_t)layers, sizeof *name_text);
    if (!submods || !args || !names || !name_text) {
        s = PW_ERR_OOM;
        goto done;
    }
    for (int i = 0; i < nsub; i++)
        if (!pw_plan_submodule_inlined(plan, i)) submods[i] = i == nsub - 1 ? last : piece;
    for (int i = 0; i < nargs; i++) args[i] = pw_value_tensor(world.items[i % (STITCH_PIECE_OUTPUTS + 1)]);
    for (int l = 0; l < layers; l++) {
        snprintf(name_text[l], sizeof name_text[l], "model.layers.%d.self_attn.attn", l);
        names[l].kind = PW_VAL_STRING;
        names[l].as.s = name_text[l];
    }
    hand_ctx hand = {layers, &piece, &last, &attention, names};
    stitch_case c = {plan, native, &hand, submods, nsub, args, nargs};

    /* the three forms make the same number of calls */
    uint64_t calls[3];
    for (int f = 0; f < 3 && s == PW_OK; f++) {
        world.calls = 0;
        s = forward(&c, (stitch_form)f);
        calls[f] = world.calls;
    }
    if (s == PW_OK && (calls[0] != calls[1] || calls[0] != calls[2])) {
        s = pw_error(PW_ERR_INTERNAL, "bench stitch: forms disagree on calls (%llu, %llu, %llu)",
                     (unsigned long long)calls[0], (unsigned long long)calls[1], (unsigned long long)calls[2]);
    }
    double ns[3];
    if (s == PW_OK) s = measure(&c, repeats, ns);
    r->plan_ns = ns[FORM_PLAN];
    r->native_ns = ns[FORM_NATIVE];
    r->hand_ns = ns[FORM_HAND];
done:
    free(submods);
    free(args);
    free(names);
    free(name_text);
    pw_native_free(native);
    pw_plan_free(plan);
    pw_ir_free(split);
    pw_ir_free(g);
    return s;
}

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise bench stitch [--layers 2,8,32,80] [--repeats N] [--json]\n\n"
               "Stitches a Llama-like split graph whose pieces do nothing, with the plan\n"
               "interpreter, the native (compiled C) function and a hand-written C sequence\n"
               "of the same calls. Reports the median ns per forward and per node.\n");
}

int pw_bench_stitch(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    int layers[STITCH_MAX_CASES] = {2, 8, 32, 80};
    int ncases = 4, repeats = 51;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
            ncases = 0;
            for (char *c = argv[++i]; *c;) {
                char *end;
                long v = strtol(c, &end, 10);
                if (end == c || v < 1 || v > STITCH_MAX_LAYERS || ncases == STITCH_MAX_CASES ||
                    (*end && *end != ',')) {
                    fprintf(stderr, "piecewise bench stitch: bad --layers '%s' (1..%d, at most %d values)\n",
                            argv[i], STITCH_MAX_LAYERS, STITCH_MAX_CASES);
                    return 2;
                }
                layers[ncases++] = (int)v;
                c = *end ? end + 1 : end;
            }
        } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
            repeats = atoi(argv[++i]);
            if (repeats < 1) {
                fprintf(stderr, "piecewise bench stitch: --repeats must be at least 1\n");
                return 2;
            }
        } else {
            fprintf(stderr, "piecewise bench stitch: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    pw_status s = world_init();
    if (s != PW_OK) return pw_cli_fail("bench stitch", s);
    stitch_result results[STITCH_MAX_CASES];
    for (int i = 0; i < ncases && s == PW_OK; i++) s = run_case(layers[i], repeats, &results[i]);
    world_free();
    if (s != PW_OK) return pw_cli_fail("bench stitch", s);
    if (json) {
        printf("{\"results\":[");
        for (int i = 0; i < ncases; i++) {
            const stitch_result *r = &results[i];
            printf("%s{\"layers\":%d,\"nodes\":%d,\"plan_ns\":%.1f,\"native_ns\":%.1f,\"hand_ns\":%.1f,"
                   "\"plan_ns_per_node\":%.3f,\"native_ns_per_node\":%.3f,\"hand_ns_per_node\":%.3f,"
                   "\"native_compiled\":%s}",
                   i ? "," : "", r->layers, r->nodes, r->plan_ns, r->native_ns, r->hand_ns, r->plan_ns / r->nodes,
                   r->native_ns / r->nodes, r->hand_ns / r->nodes, r->native_compiled ? "true" : "false");
        }
        printf("]}\n");
        return 0;
    }
    printf("stitching a Llama-like split graph, pieces do nothing (median of %d samples)\n\n", repeats);
    printf("%6s %6s | %11s %8s | %11s %8s | %11s %8s | %9s %9s\n", "layers", "nodes", "plan ns", "ns/node",
           "native ns", "ns/node", "hand ns", "ns/node", "plan/hand", "nat/hand");
    for (int i = 0; i < ncases; i++) {
        const stitch_result *r = &results[i];
        printf("%6d %6d | %11.0f %8.2f | %11.0f %8.2f | %11.0f %8.2f | %9.2f %9.2f%s\n", r->layers, r->nodes,
               r->plan_ns, r->plan_ns / r->nodes, r->native_ns, r->native_ns / r->nodes, r->hand_ns,
               r->hand_ns / r->nodes, r->plan_ns / r->hand_ns, r->native_ns / r->hand_ns,
               r->native_compiled ? "" : "  (native fell back to the plan)");
    }
    printf("\nnodes: calls, getitems and tuple builds the stitching function executes.\n"
           "targets: plan <= 3 ns/node and <= 2x hand; native <= 1.2x hand.\n");
    return 0;
}
