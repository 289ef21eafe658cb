/* A small MLP through the whole capture chain, with its own kernels and
 * nothing from the LLM library: a graph in the text format, split at a
 * data-dependent op, stitched, captured PIECEWISE and FULL for several batch
 * sizes (a repeated layer relocated, not run), served with every output
 * equal to the eager run's, bit for bit; then lazy capture under a graph
 * budget.
 * Walkthrough: docs/example-mlp.md (the runtime_example_mlp test compiles and
 * runs this file, and checks that page against it). */
#define _POSIX_C_SOURCE 200809L /* getpid, for the cache file's name */
#include <piecewise.h>
#include <piecewise/extend.h> /* pw_error: report errors the library's way */
#include <piecewise/graph_cache.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* In main: print the library's message and fail. Elsewhere: pass the status up. */
#define TRY(expr) do { if ((expr) != PW_OK) { fprintf(stderr, "%s\n", pw_last_error()); return 1; } } while (0)
#define PROPAGATE(expr) do { pw_status s_ = (expr); if (s_ != PW_OK) return s_; } while (0)

enum { WIDTH = 16, OUT = 4, MAX_TOKENS = 16, MAX_PIECES = 8 };

/* ---- 1. The model, in the graph text format (docs/graph-format.md) ---------------------- */

/* Three layers and a head. masked_normalize is the splitting op: how many
 * entries of a row it reads depends on that row's length, which the server
 * writes into a persistent buffer each step. In PIECEWISE mode it runs
 * eagerly between the captured pieces; in FULL mode it is recorded too and
 * reads the lengths through their pointer at every replay. It writes into a
 * buffer the piece before it allocated (empty_like), so nothing after it
 * reads an address that changes from one replay to the next. Layers 1 and 2
 * are the same piece with other weights: their graphs are one graph
 * relocated (section 6). */
static const char *const MLP_GRAPH =
    "graph mlp:\n"
    "    %x : f32[s0, 16] = placeholder\n"
    "    %lens : i32[s0] = placeholder\n"
    "    %w0 : f32[16, 16] = placeholder\n"
    "    %w1 : f32[16, 16] = placeholder\n"
    "    %w2 : f32[16, 16] = placeholder\n"
    "    %w_out : f32[16, 4] = placeholder\n"
    "    %h0 = call_function linear(%x, %w0)\n"
    "    %p0 = call_function empty_like(%h0)\n"
    "    %s0 = call_function masked_normalize(%h0, %lens, %p0)\n"
    "    %h1 = call_function linear(%p0, %w1)\n"
    "    %r1 = call_function add(%h1, %x)\n"
    "    %p1 = call_function empty_like(%r1)\n"
    "    %s1 = call_function masked_normalize(%r1, %lens, %p1)\n"
    "    %h2 = call_function linear(%p1, %w2)\n"
    "    %r2 = call_function add(%h2, %x)\n"
    "    %p2 = call_function empty_like(%r2)\n"
    "    %s2 = call_function masked_normalize(%r2, %lens, %p2)\n"
    "    %y = call_function linear(%p2, %w_out)\n"
    "    return %y\n";

/* ---- 2. Kernels: arguments as bytes, recorded once, replayed verbatim -------------------- */

typedef struct { const float *x, *w; float *y; int64_t rows, k, m; } linear_args;
typedef struct { const float *a, *b; float *y; int64_t n; } add_args;
typedef struct { const float *x; const int32_t *lens; float *y; int64_t rows, cols; } normalize_args;

static void linear_kernel(const void *p) {
    const linear_args *a = p;
    for (int64_t r = 0; r < a->rows; r++)
        for (int64_t j = 0; j < a->m; j++) {
            float acc = 0;
            for (int64_t i = 0; i < a->k; i++) acc += a->x[r * a->k + i] * a->w[i * a->m + j];
            a->y[r * a->m + j] = acc;
        }
}

static void add_kernel(const void *p) {
    const add_args *a = p;
    for (int64_t i = 0; i < a->n; i++) a->y[i] = a->a[i] + a->b[i];
}

/* Row r: its first lens[r] entries (read when the kernel runs) divided by
 * one plus the sum of their magnitudes, zeros after them; a padding row
 * (length 0) is all zeros. */
static void masked_normalize_kernel(const void *p) {
    const normalize_args *a = p;
    for (int64_t r = 0; r < a->rows; r++) {
        const float *x = a->x + r * a->cols;
        float *y = a->y + r * a->cols;
        int64_t len = a->lens[r] < a->cols ? a->lens[r] : a->cols;
        float sum = 1;
        for (int64_t j = 0; j < len; j++) sum += x[j] < 0 ? -x[j] : x[j];
        for (int64_t j = 0; j < a->cols; j++) y[j] = j < len ? x[j] / sum : 0;
    }
}

/* Where each argument struct holds addresses: what relocation moves. */
static const pw_kernel_args linear_addrs = {
    sizeof(linear_args), 3,
    {offsetof(linear_args, x), offsetof(linear_args, w), offsetof(linear_args, y)}};
static const pw_kernel_args add_addrs = {
    sizeof(add_args), 3, {offsetof(add_args, a), offsetof(add_args, b), offsetof(add_args, y)}};
static const pw_kernel_args normalize_addrs = {
    sizeof(normalize_args), 3,
    {offsetof(normalize_args, x), offsetof(normalize_args, lens), offsetof(normalize_args, y)}};

static const pw_kernel k_linear = {"linear", linear_kernel, NULL, &linear_addrs};
static const pw_kernel k_add = {"add", add_kernel, NULL, &add_addrs};
static const pw_kernel k_normalize = {"masked_normalize", masked_normalize_kernel, NULL,
                                      &normalize_addrs};

/* ---- 3. Ops: callables the stitching calls, one per graph target --------------------------- */

typedef struct mlp {
    pw_stream *stream;
    pw_pool *eager_pool;   /* eager outputs */
    pw_pool *graph_pool;   /* every capture allocates here */
    pw_pool *persistent;   /* inputs and weights: their addresses never change */
    pw_tensor *x, *lens, *w[4];
    pw_tensor *x_rows, *lens_rows; /* the first rows of x and lens, for one step */
    pw_value args[6];
    pw_reloc_regions *regions;     /* the persistent buffers, for relocation */
    /* each piece's graph per size, as a relocatable program */
    pw_reloc_program *programs[MAX_PIECES][MAX_TOKENS + 1];
    bool warm;                     /* programs came from the graph cache: run, never record */
    int relocated;                 /* graphs made by running a program instead of the piece */
    int piece_ops;                 /* ops of the pieces run (eagerly or under a capture) */
} mlp;

/* Under a capture, outputs come from the graph being captured. */
static pw_pool *output_pool(mlp *m) {
    return pw_stream_is_capturing(m->stream) ? pw_capture_pool() : m->eager_pool;
}

static pw_status new_output(mlp *m, int64_t rows, int64_t cols, pw_tensor **out) {
    int64_t shape[2] = {rows, cols};
    m->piece_ops++; /* every op of a piece makes an output */
    return pw_tensor_new(output_pool(m), PW_F32, 2, shape, out);
}

/* Launches k and hands y out, or frees y if the launch fails. */
static pw_status launch(mlp *m, const pw_kernel *k, const void *args, size_t bytes, pw_tensor *y,
                        pw_value *out) {
    pw_status s = pw_launch(m->stream, k, args, bytes);
    if (s == PW_OK) *out = pw_value_tensor(y);
    else pw_tensor_release(y);
    return s;
}

static float *data(const pw_value *v) { return pw_tensor_data(v->as.tensor); }
static int64_t dim(const pw_value *v, int i) { return pw_tensor_dim(v->as.tensor, i); }

static pw_status op_linear(void *user, const pw_value *a, int n, pw_value *out) {
    mlp *m = user;
    pw_tensor *y;
    if (n != 2) return PW_ERR_INVALID_ARG;
    PROPAGATE(new_output(m, dim(&a[0], 0), dim(&a[1], 1), &y));
    linear_args k = {data(&a[0]), data(&a[1]), pw_tensor_data(y), dim(&a[0], 0), dim(&a[0], 1),
                     dim(&a[1], 1)};
    return launch(m, &k_linear, &k, sizeof k, y, out);
}

static pw_status op_add(void *user, const pw_value *a, int n, pw_value *out) {
    mlp *m = user;
    pw_tensor *y;
    if (n != 2) return PW_ERR_INVALID_ARG;
    PROPAGATE(new_output(m, dim(&a[0], 0), dim(&a[0], 1), &y));
    add_args k = {data(&a[0]), data(&a[1]), pw_tensor_data(y), pw_tensor_numel(y)};
    return launch(m, &k_add, &k, sizeof k, y, out);
}

static pw_status op_empty_like(void *user, const pw_value *a, int n, pw_value *out) {
    pw_tensor *y;
    if (n != 1) return PW_ERR_INVALID_ARG;
    PROPAGATE(new_output(user, dim(&a[0], 0), dim(&a[0], 1), &y));
    *out = pw_value_tensor(y);
    return PW_OK;
}

static pw_status op_masked_normalize(void *user, const pw_value *a, int n, pw_value *out) {
    mlp *m = user;
    if (n != 3) return PW_ERR_INVALID_ARG;
    normalize_args k = {data(&a[0]), pw_tensor_data(a[1].as.tensor), data(&a[2]), dim(&a[0], 0),
                      dim(&a[0], 1)};
    *out = pw_value_none(); /* the result is in a[2] */
    return pw_launch(m->stream, &k_normalize, &k, sizeof k);
}

/* The op resolver: the module asks once per target while it builds. */
static pw_status resolve(void *user, const char *target, pw_callable *out) {
    static const struct { const char *name; pw_callable_fn fn; } ops[] = {
        {"linear", op_linear}, {"add", op_add}, {"empty_like", op_empty_like},
        {"masked_normalize", op_masked_normalize}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(target, ops[i].name) == 0) {
            *out = (pw_callable){ops[i].fn, user, ops[i].name};
            return PW_OK;
        }
    return pw_error(PW_ERR_NOT_FOUND, "no kernel for op '%s'", target);
}

/* ---- 4. Inputs: persistent buffers, written in place, sliced per step ---------------------- */

/* The graph's arguments for a step of `rows` rows (the padded size). */
static pw_status step_args(mlp *m, int64_t rows) {
    pw_tensor_release(m->x_rows);
    pw_tensor_release(m->lens_rows);
    m->x_rows = m->lens_rows = NULL;
    PROPAGATE(pw_tensor_slice0(m->x, 0, rows, &m->x_rows));
    PROPAGATE(pw_tensor_slice0(m->lens, 0, rows, &m->lens_rows));
    m->args[0] = pw_value_tensor(m->x_rows);
    m->args[1] = pw_value_tensor(m->lens_rows);
    for (int i = 0; i < 4; i++) m->args[2 + i] = pw_value_tensor(m->w[i]);
    return PW_OK;
}

/* A batch of n real rows for step `step`; rows n.. are padding (length 0). */
static void write_batch(mlp *m, int64_t n, int step) {
    float *x = pw_tensor_data(m->x);
    int32_t *lens = pw_tensor_data(m->lens);
    for (int64_t r = 0; r < MAX_TOKENS; r++) {
        for (int j = 0; j < WIDTH; j++)
            x[r * WIDTH + j] = r < n ? (float)((r * 7 + j * 3 + step) % 13) / 13 - 0.5f : 0;
        lens[r] = r < n ? (int32_t)((r * 5 + step) % WIDTH + 1) : 0;
    }
}

/* What the capture driver runs for each descriptor: an all-padding batch. */
static pw_status capture_inputs(void *user, pw_runtime_mode mode, const pw_batch_desc *desc,
                                const pw_value **args, int *nargs) {
    mlp *m = user;
    (void)mode;
    write_batch(m, 0, 0);
    PROPAGATE(step_args(m, desc->num_tokens));
    *args = m->args;
    *nargs = 6;
    return PW_OK;
}

/* ---- 5. Serving: route, run, compare with the eager run ------------------------------------ */

/* Runs a batch of n rows eagerly (NONE, exact size) into ref[n][OUT]. */
static pw_status run_eager(mlp *m, pw_module *mod, int64_t n, int step, float *ref) {
    write_batch(m, n, step);
    PROPAGATE(step_args(m, n));
    pw_batch_desc exact = pw_batch_desc_make(n, PW_NUM_REQS_UNSET, false, false);
    pw_value y;
    PROPAGATE(pw_module_run(mod, PW_MODE_NONE, &exact, NULL, m->args, 6, &y));
    memcpy(ref, pw_tensor_data(y.as.tensor), (size_t)(n * OUT) * sizeof *ref);
    pw_value_release(y);
    return PW_OK;
}

/* Runs a batch of n rows the way a server does: the dispatcher routes it
 * (padded size, mode, lazy fallbacks), the module runs it, and a lazy
 * module captures what the route names after the step. *same: the real
 * rows equal the eager run's, bit for bit. */
static pw_status serve(mlp *m, pw_module *mod, int64_t n, bool uniform, int step, pw_route *r,
                       bool *same) {
    float ref[MAX_TOKENS * OUT];
    PROPAGATE(run_eager(m, mod, n, step, ref));
    PROPAGATE(pw_dispatcher_route(pw_module_dispatcher(mod), n, uniform, false, r));
    write_batch(m, n, step);
    PROPAGATE(step_args(m, r->desc.num_tokens));
    pw_value y;
    PROPAGATE(pw_module_run(mod, r->mode, &r->desc, NULL, m->args, 6, &y));
    *same = memcmp(ref, pw_tensor_data(y.as.tensor), (size_t)(n * OUT) * sizeof *ref) == 0;
    pw_value_release(y);
    if (r->capture.mode != PW_MODE_NONE)
        PROPAGATE(pw_module_capture_one(mod, &r->capture, capture_inputs, m, NULL));
    return PW_OK;
}

static void print_step(int64_t n, bool uniform, const pw_route *r, bool same) {
    static const char *const how[] = {"", ", padded to a captured size", ", no graph yet"};
    printf("%2lld rows %-7s -> %-9s at %2lld rows%s: %s\n", (long long)n,
           uniform ? "decode" : "mixed", pw_runtime_mode_name(r->mode),
           (long long)r->desc.num_tokens, how[r->kind], same ? "equal to eager" : "DIFFERENT");
}

/* ---- 6. Relocation and the graph cache ---------------------------------------------------- */

/* Under a capture, a piece is recorded as a relocatable program: its
 * launches with every address as (argument, graph-pool block or persistent
 * region, offset). Layers 1 and 2 are the same piece (submodules 2 and 4
 * of the split) with other weights, so layer 2 runs layer 1's program on its
 * own arguments instead of its code: the launches a real capture would
 * record, addresses moved, without running the layer's ops. A model of 30
 * equal layers runs its code once per size. After a warm start from the
 * graph cache, every piece runs its stored program. */
enum { LAYER_1 = 2, LAYER_2 = 4 };

static pw_status relocate_pieces(void *user, int piece, pw_callable plain, const pw_value *args,
                                 int nargs, pw_value *out) {
    mlp *m = user;
    const pw_forward_context *ctx;
    if (piece < 0 || piece >= MAX_PIECES || !pw_stream_is_capturing(m->stream) ||
        pw_forward_context_get(&ctx) != PW_OK)
        return plain.fn(plain.user, args, nargs, out);
    pw_reloc_program **program = &m->programs[piece == LAYER_2 ? LAYER_1 : piece][ctx->desc.num_tokens];
    if (piece == LAYER_2 || m->warm) {
        if (!*program || !pw_reloc_program_matches(*program, args, nargs))
            return plain.fn(plain.user, args, nargs, out);
        m->relocated++;
        return pw_reloc_program_run(*program, m->stream, m->regions, args, nargs, out);
    }
    pw_reloc_program_free(*program);
    *program = NULL; /* stays NULL if the recording cannot be described: then run the piece */
    char why[PW_RELOC_WHY_CAP];
    return pw_reloc_record(m->stream, m->regions, plain, args, nargs, out, program, why);
}

/* What a cache file is written for and read back against: a hash of the
 * graph (anything the programs depend on belongs in it), the persistent
 * regions' sizes, and the kernels, which programs name by index here. */
static pw_graph_cache_spec cache_spec(const mlp *m) {
    static const pw_kernel *const kernels[] = {&k_linear, &k_add, &k_normalize};
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = MLP_GRAPH; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    pw_graph_cache_spec spec = {h, m->regions, kernels, 3, 0};
    return spec;
}

/* Writes every recorded program: key = piece, descriptor = size. */
static pw_status save_graphs(const mlp *m, const char *path) {
    pw_graph_cache_entry entries[MAX_PIECES * (MAX_TOKENS + 1)];
    size_t n = 0;
    for (int p = 0; p < MAX_PIECES; p++)
        for (int t = 1; t <= MAX_TOKENS; t++)
            if (m->programs[p][t])
                entries[n++] = (pw_graph_cache_entry){
                    p, pw_batch_desc_make(t, PW_NUM_REQS_UNSET, false, false), m->programs[p][t]};
    pw_graph_cache_spec spec = cache_spec(m);
    return pw_graph_cache_write(path, &spec, entries, n);
}

/* Reads them back into an empty table; *n: how many. */
static pw_status load_graphs(mlp *m, const char *path, size_t *n) {
    pw_graph_cache_spec spec = cache_spec(m);
    pw_graph_cache_entry *entries;
    size_t dropped;
    char why[256];
    PROPAGATE(pw_graph_cache_read(path, &spec, &entries, n, &dropped, why, sizeof why));
    for (size_t i = 0; i < *n; i++) {
        int p = entries[i].key;
        int64_t t = entries[i].desc.num_tokens;
        if (p < 0 || p >= MAX_PIECES || t < 1 || t > MAX_TOKENS) continue;
        pw_reloc_program_free(m->programs[p][t]);
        m->programs[p][t] = entries[i].program;
        entries[i].program = NULL; /* the table owns it now */
    }
    pw_graph_cache_entries_free(entries, *n);
    m->warm = true;
    return PW_OK;
}

static void forget_graphs(mlp *m) {
    for (int p = 0; p < MAX_PIECES; p++)
        for (int t = 0; t <= MAX_TOKENS; t++) {
            pw_reloc_program_free(m->programs[p][t]);
            m->programs[p][t] = NULL;
        }
}

/* ---- 7. The program ------------------------------------------------------------------------ */

static pw_status setup(mlp *m) {
    memset(m, 0, sizeof *m);
    PROPAGATE(pw_stream_new(PW_DEVICE_CPU, &m->stream));
    PROPAGATE(pw_pool_new(PW_DEVICE_CPU, "eager", &m->eager_pool));
    PROPAGATE(pw_pool_new(PW_DEVICE_CPU, "graphs", &m->graph_pool));
    PROPAGATE(pw_pool_new(PW_DEVICE_CPU, "persistent", &m->persistent));
    int64_t xs[2] = {MAX_TOKENS, WIDTH}, ls[1] = {MAX_TOKENS};
    int64_t ws[4][2] = {{WIDTH, WIDTH}, {WIDTH, WIDTH}, {WIDTH, WIDTH}, {WIDTH, OUT}};
    /* every persistent block is a region a relocated graph may address */
    PROPAGATE(pw_reloc_regions_new(&m->regions));
    PROPAGATE(pw_reloc_regions_observe(m->regions, m->persistent, true));
    PROPAGATE(pw_tensor_new(m->persistent, PW_F32, 2, xs, &m->x));
    PROPAGATE(pw_tensor_new(m->persistent, PW_I32, 1, ls, &m->lens));
    for (int i = 0; i < 4; i++) {
        PROPAGATE(pw_tensor_new(m->persistent, PW_F32, 2, ws[i], &m->w[i]));
        float *w = pw_tensor_data(m->w[i]);
        for (int64_t j = 0; j < ws[i][0] * ws[i][1]; j++) w[j] = (float)((j * 11 + i) % 17) / 17 - 0.4f;
    }
    return pw_reloc_regions_observe(m->regions, m->persistent, false);
}

static void teardown(mlp *m) {
    pw_tensor_release(m->x_rows);
    pw_tensor_release(m->lens_rows);
    for (int i = 0; i < 4; i++) pw_tensor_release(m->w[i]);
    forget_graphs(m);
    pw_reloc_regions_free(m->regions);
    pw_tensor_release(m->x);
    pw_tensor_release(m->lens);
    pw_pool_free(m->persistent);
    pw_pool_free(m->graph_pool);
    pw_pool_free(m->eager_pool);
    pw_stream_free(m->stream);
}

/* Builds the module: split at masked_normalize, one plan per piece, the
 * wrappers, and a dispatcher for batches of up to 8 rows. */
static pw_status build(mlp *m, const pw_ir *graph, pw_graph_mode mode, bool lazy, size_t budget,
                       pw_module **out) {
    static const int64_t sizes[] = {1, 2, 4, 8};
    pw_dispatcher_config dc;
    pw_dispatcher_config_init(&dc);
    dc.mode = mode;
    dc.max_num_seqs = 4; /* FULL graphs for decode batches of up to 4 rows */
    dc.max_num_batched_tokens = MAX_TOKENS;
    dc.capture_sizes = sizes;
    dc.n_capture_sizes = 4;
    pw_module_options mo;
    pw_module_options_init(&mo);
    mo.name = "mlp";
    mo.dispatcher = &dc;
    mo.lazy = lazy;
    mo.graph_budget = budget;
    mo.interpose = relocate_pieces; /* relocation and the graph cache */
    mo.interpose_user = m;
    const char *splitting_ops[] = {"masked_normalize"};
    return pw_module_new(graph, splitting_ops, 1, (pw_op_resolver){resolve, m}, m->stream,
                         m->graph_pool, &mo, out);
}

int main(void) {
    mlp m;
    pw_ir *graph;
    pw_module *mod, *lazy;
    pw_route r;
    bool same, all_same = true;
    TRY(setup(&m));
    TRY(pw_ir_parse(MLP_GRAPH, (size_t)-1, &graph));

    /* Split, stitch, wrap; then capture every descriptor of the list. */
    TRY(build(&m, graph, PW_GRAPH_FULL_AND_PIECEWISE, false, 0, &mod));
    printf("mlp: %d pieces around the masked_normalize ops, %d submodules\n",
           pw_module_num_pieces(mod), pw_module_num_submodules(mod));
    pw_capture_options co;
    pw_capture_options_init(&co);
    co.progress = PW_PROGRESS_OFF;
    co.print_totals = false;
    /* The memory plan first: a dry run of the capture list against a
     * shadow pool predicts the graph pool's bytes before any is spent. */
    pw_memory_plan *plan;
    size_t predicted;
    pw_pool_stats pool;
    TRY(pw_memory_plan_new(PW_DEVICE_CPU, 0, &plan));
    TRY(pw_memory_plan_graphs(plan, mod, capture_inputs, &m, &co, NULL, NULL, &predicted));
    pw_memory_plan_free(plan);
    m.relocated = 0; /* the dry run went through the interposer too */
    pw_capture_report rep;
    TRY(pw_module_capture(mod, capture_inputs, &m, &co, &rep));
    pw_pool_get_stats(m.graph_pool, &pool);
    printf("graph pool: %zu bytes predicted by the dry run, %zu reserved by the capture\n",
           predicted, pool.reserved);
    printf("captured %llu graphs for %zu descriptors: PIECEWISE %zu per piece, FULL %zu\n",
           (unsigned long long)rep.graphs_captured, rep.descriptors,
           pw_graph_wrapper_num_graphs(pw_module_piece_wrapper(mod, 0)),
           pw_graph_wrapper_num_graphs(pw_module_full_wrapper(mod)));
    printf("layer 2: %d graphs relocated from layer 1's instead of captured by running it\n",
           m.relocated);

    /* Serve batches of several sizes; each matches its eager run. */
    static const struct { int64_t n; bool uniform; } batches[] = {
        {1, true}, {3, true}, {3, false}, {5, false}, {8, false}, {12, false}};
    for (int i = 0; i < 6; i++) {
        TRY(serve(&m, mod, batches[i].n, batches[i].uniform, i, &r, &same));
        print_step(batches[i].n, batches[i].uniform, &r, same);
        all_same = all_same && same;
    }

    /* The graph cache: every piece's program written to a file, then a
     * start from it, as the next process would: a new module whose
     * captures run the stored programs instead of the pieces' ops. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/piecewise-mlp-%ld.graphs", (long)getpid());
    TRY(save_graphs(&m, path));
    forget_graphs(&m);
    pw_module *warm;
    size_t n_programs = 0;
    TRY(build(&m, graph, PW_GRAPH_FULL_AND_PIECEWISE, false, 0, &warm));
    pw_status loaded = load_graphs(&m, path, &n_programs);
    remove(path);
    TRY(loaded);
    m.relocated = m.piece_ops = 0;
    TRY(pw_module_capture(warm, capture_inputs, &m, &co, &rep));
    printf("warm start: %zu programs read; %llu graphs captured from %d program runs, %d ops run\n",
           n_programs, (unsigned long long)rep.graphs_captured, m.relocated, m.piece_ops);
    for (int i = 1; i < 4; i++) {
        TRY(serve(&m, warm, batches[i].n, batches[i].uniform, i, &r, &same));
        print_step(batches[i].n, batches[i].uniform, &r, same);
        all_same = all_same && same;
    }
    pw_module_free(warm);
    m.warm = false;

    /* Lazy capture: nothing up front, each size captured after its first
     * step, and a budget of two sizes' graphs (every size's PIECEWISE
     * graphs hold the same bytes) evicting the least recently used. */
    pw_capture_item four = {PW_MODE_PIECEWISE, pw_batch_desc_make(4, PW_NUM_REQS_UNSET, false, false)};
    size_t budget = 2 * pw_module_graph_bytes(mod, &four);
    TRY(build(&m, graph, PW_GRAPH_PIECEWISE, true, budget, &lazy));
    printf("lazy capture, a budget of two sizes' graphs:\n");
    static const int64_t lazy_batches[] = {3, 3, 1, 6, 1, 3};
    for (int i = 0; i < 6; i++) {
        TRY(serve(&m, lazy, lazy_batches[i], false, i, &r, &same));
        print_step(lazy_batches[i], false, &r, same);
        all_same = all_same && same;
    }
    pw_lazy_capture_stats st;
    pw_lazy_capture_get_stats(pw_module_lazy_capture(lazy), &st);
    printf("lazy: %llu sizes captured, %llu evicted, %llu steps padded, %llu eager\n",
           (unsigned long long)st.captured, (unsigned long long)st.evicted,
           (unsigned long long)st.padded, (unsigned long long)st.eager);

    pw_module_free(lazy);
    pw_module_free(mod);
    pw_ir_free(graph);
    teardown(&m);
    return all_same ? 0 : 1;
}
