/* piecewise compile: read a graph in the text format, split it at the
 * splitting ops, and print one of its forms: the graph, the split graph,
 * the stitching plan, its C source or Graphviz DOT. */
#include "cli.h"
#include "ops/ops.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most --split-ops names. */
#define COMPILE_MAX_SPLIT_OPS 32

/* vLLM's attention ops, as the graphs it dumps name them. */
static const char *const vllm_split_ops[] = {"unified_attention", "unified_attention_with_output"};

/* The default --split-ops: the op table's splitting ops, then vLLM's. */
static int default_split_ops(const char **ops) {
    const char *const *table;
    int n = 0, n_table = pw_op_splitting_names(&table);
    for (int i = 0; i < n_table && n < COMPILE_MAX_SPLIT_OPS; i++) ops[n++] = table[i];
    for (size_t i = 0; i < sizeof vllm_split_ops / sizeof vllm_split_ops[0] && n < COMPILE_MAX_SPLIT_OPS; i++)
        ops[n++] = vllm_split_ops[i];
    return n;
}

static const char *const emit_forms[] = {"graph", "split", "plan", "c", "dot", "graph-dot"};

static void usage(FILE *f) {
    fprintf(f,
            "usage: piecewise compile GRAPH.txt [--split-ops OP,...] [--emit FORM] [-o FILE]\n"
            "       piecewise compile --model MODEL.gguf [--emit FORM] [-o FILE]\n"
            "\n"
            "Reads a graph in the text format (docs/graph-format.md), or builds the forward\n"
            "pass of a GGUF Llama model as a graph, and prints one form:\n"
            "  graph      the graph itself, canonically formatted\n"
            "  split      the stitching graph and its subgraphs (the default)\n"
            "  plan       the stitching plan's instructions (docs/codegen.md)\n"
            "  c          the stitching function as C source\n"
            "  dot        Graphviz of the split: pieces as clusters, splitting ops highlighted\n"
            "  graph-dot  Graphviz of the graph as given\n"
            "A graph that already has call_module nodes is taken as a stitching graph\n"
            "and not split again.\n"
            "\n"
            "options:\n"
            "  --model FILE.gguf   compile this model's forward pass instead of a graph file\n"
            "  --split-ops OP,...  splitting op targets (default: the op table's splitting ops,\n"
            "                      attention, and vLLM's unified_attention,\n"
            "                      unified_attention_with_output)\n"
            "  --emit FORM         what to print\n"
            "  -o FILE             write to FILE instead of standard output\n");
}

static bool has_call_module(const pw_ir *g) {
    for (int i = 0; i < pw_ir_num_nodes(g); i++)
        if (pw_ir_node_kind_of(g, i) == PW_IR_CALL_MODULE) return true;
    return false;
}

/* A failed write to standard output is reported once, by main. */
static int write_text(const char *text, const char *out_path) {
    if (!out_path) {
        fputs(text, stdout);
        return 0;
    }
    FILE *f = fopen(out_path, "w");
    if (!f) {
        fprintf(stderr, "piecewise compile: cannot open %s for writing: %s\n", out_path, strerror(errno));
        return 1;
    }
    bool ok = fputs(text, f) >= 0;
    int e = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        fprintf(stderr, "piecewise compile: error writing %s: %s\n", out_path, e ? strerror(e) : "write failed");
        return 1;
    }
    return 0;
}

int pw_compile_emit(const pw_ir *g, const char *emit, const char *const *split_ops, int n_split_ops,
                    const char *out_path) {
    bool known = false;
    for (size_t i = 0; i < sizeof emit_forms / sizeof emit_forms[0]; i++) known |= strcmp(emit, emit_forms[i]) == 0;
    if (!known) {
        fprintf(stderr, "piecewise compile: unknown form '%s' (graph, split, plan, c, dot, graph-dot)\n", emit);
        return 2;
    }
    pw_status s = pw_ir_validate(g);
    if (s != PW_OK) return pw_cli_fail("invalid graph", s);
    char *text = NULL;
    if (strcmp(emit, "graph") == 0 || strcmp(emit, "graph-dot") == 0) {
        s = emit[5] ? pw_ir_to_dot(g, &text) : pw_ir_print(g, &text);
        if (s != PW_OK) return pw_cli_fail("printing", s);
        int rc = write_text(text, out_path);
        free(text);
        return rc;
    }
    pw_ir *split = NULL;
    const pw_ir *stitch = g;
    if (!has_call_module(g)) {
        s = pw_split(g, split_ops, n_split_ops, &split);
        if (s != PW_OK) return pw_cli_fail("splitting", s);
        stitch = split;
    }
    pw_plan *plan = NULL;
    if (strcmp(emit, "split") == 0) {
        s = pw_ir_print(stitch, &text);
    } else if (strcmp(emit, "dot") == 0) {
        s = pw_ir_to_dot(stitch, &text);
    } else {
        /* no ops are bound: the plan is for reading, not running */
        s = pw_plan_build(stitch, NULL, &plan);
        if (s == PW_OK) s = strcmp(emit, "c") == 0 ? pw_plan_emit_c(plan, &text) : pw_plan_print(plan, &text);
    }
    int rc = s == PW_OK ? write_text(text, out_path) : pw_cli_fail(emit, s);
    free(text);
    pw_plan_free(plan);
    pw_ir_free(split);
    return rc;
}

typedef struct compile_options {
    const char *path, *emit, *out_path, *model_path;
    char *ops_copy; /* the --split-ops list, cut into ops in place */
    const char *ops[COMPILE_MAX_SPLIT_OPS];
    int nops;
} compile_options;

/* --split-ops a,b,c. Returns 0 or 2 (a usage error, printed). */
static int parse_split_ops(const char *list, compile_options *o) {
    free(o->ops_copy);
    o->ops_copy = strdup(list);
    o->nops = 0;
    for (char *tok = o->ops_copy ? strtok(o->ops_copy, ",") : NULL; tok; tok = strtok(NULL, ",")) {
        if (o->nops == COMPILE_MAX_SPLIT_OPS) {
            fprintf(stderr, "piecewise compile: more than %d split ops\n", COMPILE_MAX_SPLIT_OPS);
            return 2;
        }
        o->ops[o->nops++] = tok;
    }
    if (o->nops == 0) {
        fprintf(stderr, "piecewise compile: --split-ops needs at least one op name\n");
        return 2;
    }
    return 0;
}

/* The options one by one, then the rules between them. Returns 0 or 2. */
static int parse_args(int argc, char **argv, compile_options *o) {
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        bool takes_value = strcmp(a, "--split-ops") == 0 || strcmp(a, "--emit") == 0 ||
                           strcmp(a, "-o") == 0 || strcmp(a, "--model") == 0;
        if (takes_value && i + 1 >= argc) {
            fprintf(stderr, "piecewise compile: %s needs a value\n", a);
            rc = 2;
        } else if (strcmp(a, "--emit") == 0) {
            o->emit = argv[++i];
        } else if (strcmp(a, "-o") == 0) {
            o->out_path = argv[++i];
        } else if (strcmp(a, "--model") == 0) {
            o->model_path = argv[++i];
        } else if (strcmp(a, "--split-ops") == 0) {
            rc = parse_split_ops(argv[++i], o);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "piecewise compile: unknown option '%s'\n", a);
            rc = 2;
        } else if (o->path) {
            fprintf(stderr, "piecewise compile: more than one graph file ('%s', '%s')\n", o->path, a);
            rc = 2;
        } else {
            o->path = a;
        }
    }
    if (rc) return rc;
    if (!o->path && !o->model_path) {
        fprintf(stderr, "piecewise compile: no graph file or --model given\n");
        return 2;
    }
    if (o->path && o->model_path) {
        fprintf(stderr, "piecewise compile: give a graph file or --model, not both\n");
        return 2;
    }
    bool known = false;
    for (size_t i = 0; i < sizeof emit_forms / sizeof emit_forms[0]; i++) known |= strcmp(o->emit, emit_forms[i]) == 0;
    if (!known) {
        fprintf(stderr, "piecewise compile: unknown form '%s' (graph, split, plan, c, dot, graph-dot)\n", o->emit);
        return 2;
    }
    return 0;
}

/* The graph from --model or the graph file, through pw_compile_emit. */
static int compile_input(const compile_options *o) {
    const char *defaults[COMPILE_MAX_SPLIT_OPS];
    const char *const *ops = o->ops;
    int nops = o->nops;
    if (nops == 0) {
        nops = default_split_ops(defaults);
        ops = defaults;
    }
    pw_ir *g = NULL;
    int rc;
    if (o->model_path) {
        pw_model *m = NULL;
        pw_status s = pw_model_load(o->model_path, &m);
        if (s == PW_OK) s = pw_model_build_ir(m, &g);
        rc = s != PW_OK ? pw_cli_fail("compiling the model", s) : pw_compile_emit(g, o->emit, ops, nops, o->out_path);
        pw_ir_free(g);
        pw_model_free(m);
        return rc;
    }
    pw_status s = pw_ir_parse_file(o->path, &g);
    if (s != PW_OK) return pw_cli_fail("reading the graph", s);
    rc = pw_compile_emit(g, o->emit, ops, nops, o->out_path);
    pw_ir_free(g);
    return rc;
}

int pw_cmd_compile(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    compile_options o = {.emit = "split"};
    int rc = parse_args(argc, argv, &o);
    if (rc == 2) {
        fprintf(stderr, "\n");
        usage(stderr);
    } else {
        rc = compile_input(&o);
    }
    free(o.ops_copy);
    return rc;
}
