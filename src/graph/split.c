/* The splitter (docs/graph-format.md): one linear walk assigns every node to a
 * subgraph; splitting ops get their own subgraphs (consecutive ones share
 * one), a getitem follows its producer. Then each subgraph is built with the
 * values it needs as placeholders and the values later code needs as its
 * output, and the stitching graph calls them in order.
 *
 * Which ops split is the caller's to say: the graph layer knows no op
 * names (the model layer passes its op table's splitting ops,
 * pw_op_splitting_names; the CLI adds vLLM's attention ops for graph files). */
#include "graph_internal.h"

bool pw_ir_target_matches(const char *target, const char *const *ops, int n) {
    if (!target) return false;
    const char *last = strrchr(target, '.');
    last = last ? last + 1 : target;
    for (int i = 0; i < n; i++)
        if (ops[i] && (strcmp(target, ops[i]) == 0 || strcmp(last, ops[i]) == 0)) return true;
    return false;
}

static void remap_refs(pw_ir_arg *a, const int *map) {
    if (a->kind == PW_IR_ARG_NODE) {
        a->as.node = map[a->as.node];
    } else if (a->kind == PW_IR_ARG_LIST || a->kind == PW_IR_ARG_TUPLE) {
        for (int i = 0; i < a->as.seq.n; i++) remap_refs((pw_ir_arg *)&a->as.seq.items[i], map);
    }
}

/* Copies of a node's args and kwargs with references renumbered through map. */
typedef struct mapped_args {
    pw_ir_arg *args;
    int nargs;
    pw_ir_kwarg *kwargs;
    int nkwargs;
} mapped_args;

static void mapped_args_free(mapped_args *m) {
    for (int i = 0; i < m->nargs; i++) pw_ir_arg_free(&m->args[i]);
    for (int i = 0; i < m->nkwargs; i++) pw_ir_arg_free(&m->kwargs[i].value);
    pw_host_free(m->args);
    pw_host_free(m->kwargs);
    memset(m, 0, sizeof *m);
}

static pw_status map_args(const pw_ir_node *n, const int *map, mapped_args *m) {
    memset(m, 0, sizeof *m);
    m->args = pw_host_calloc((size_t)n->nargs + 1, sizeof *m->args);
    m->kwargs = pw_host_calloc((size_t)n->nkwargs + 1, sizeof *m->kwargs);
    if (!m->args || !m->kwargs) {
        mapped_args_free(m);
        return PW_ERR_OOM;
    }
    for (; m->nargs < n->nargs; m->nargs++) {
        pw_status s = pw_ir_arg_copy(&n->args[m->nargs], &m->args[m->nargs]);
        if (s != PW_OK) {
            mapped_args_free(m);
            return s;
        }
        remap_refs(&m->args[m->nargs], map);
    }
    for (; m->nkwargs < n->nkwargs; m->nkwargs++) {
        m->kwargs[m->nkwargs].name = n->kwargs[m->nkwargs].name; /* borrowed */
        pw_status s = pw_ir_arg_copy(&n->kwargs[m->nkwargs].value, &m->kwargs[m->nkwargs].value);
        if (s != PW_OK) {
            mapped_args_free(m);
            return s;
        }
        remap_refs(&m->kwargs[m->nkwargs].value, map);
    }
    return PW_OK;
}

typedef struct split_state {
    const pw_ir *g;
    int *sub_of;       /* node -> subgraph id, -1 for placeholders and the output */
    int nsubs;
    bool *splitting_sub; /* subgraph -> made of splitting ops */
    int *stitch_of;    /* original node -> node in the stitching graph */
    int *local;        /* original node -> node in the subgraph being built (-1: none) */
    bool *is_output;   /* original node is needed outside its subgraph */
    int cur_sub;
    pw_status status;
    int *inputs;       /* inputs of the subgraph being built, in first-use order */
    int ninputs;
} split_state;

static pw_status collect_input(void *user, int node) {
    split_state *st = user;
    if (st->sub_of[node] == st->cur_sub || st->local[node] == -2) return PW_OK;
    st->local[node] = -2; /* seen */
    st->inputs[st->ninputs++] = node;
    return PW_OK;
}

static pw_status mark_crossing(void *user, int node) {
    split_state *st = user;
    if (st->sub_of[node] >= 0 && st->sub_of[node] != st->cur_sub) st->is_output[node] = true;
    return PW_OK;
}

static pw_status copy_comments(pw_ir *dst, const pw_ir_node *n) {
    for (int i = 0; i < n->comments.n; i++)
        if (n->comments.items[i]) PW_TRY(pw_ir_add_comment(dst, n->comments.items[i]));
    return PW_OK;
}

/* Makes subgraph s the one being built and lists, in first-use order, the
 * values its nodes read from outside it. */
static void collect_subgraph_inputs(split_state *st, int s) {
    const pw_ir *g = st->g;
    st->cur_sub = s;
    st->ninputs = 0;
    for (int i = 0; i < g->nnodes; i++) st->local[i] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        if (st->sub_of[i] != s) continue;
        const pw_ir_node *n = &g->nodes[i];
        for (int a = 0; a < n->nargs; a++) pw_ir_arg_each_ref(&n->args[a], collect_input, st);
        for (int a = 0; a < n->nkwargs; a++) pw_ir_arg_each_ref(&n->kwargs[a].value, collect_input, st);
    }
}

/* One placeholder in sub per collected input, named and typed as its source. */
static pw_status add_subgraph_placeholders(split_state *st, pw_ir *sub) {
    const pw_ir *g = st->g;
    for (int k = 0; k < st->ninputs; k++) {
        int src = st->inputs[k];
        PW_TRY(pw_ir_add_placeholder(sub, g->nodes[src].name, &st->local[src]));
        sub->nodes[st->local[src]].type = g->nodes[src].type;
    }
    return PW_OK;
}

/* Copies subgraph s's nodes into sub, references renumbered to sub's nodes;
 * counts in *noutputs those needed outside it. */
static pw_status copy_subgraph_nodes(split_state *st, int s, pw_ir *sub, int *noutputs) {
    const pw_ir *g = st->g;
    mapped_args m = {0};
    *noutputs = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (st->sub_of[i] != s) continue;
        const pw_ir_node *n = &g->nodes[i];
        PW_TRY(copy_comments(sub, n));
        PW_TRY(map_args(n, st->local, &m));
        pw_status rc;
        if (n->kind == PW_IR_GETITEM)
            rc = pw_ir_add_getitem(sub, n->name, m.args[0].as.node, m.args[1].as.i, &st->local[i]);
        else
            rc = pw_ir_add_call_function(sub, n->name, n->target, m.args, m.nargs, m.kwargs, m.nkwargs,
                                         &st->local[i]);
        mapped_args_free(&m);
        if (rc != PW_OK) return rc;
        sub->nodes[st->local[i]].type = n->type;
        *noutputs += st->is_output[i];
    }
    return PW_OK;
}

/* The subgraph's output: nothing, the one value, or a tuple. */
static pw_status set_subgraph_output(split_state *st, int s, pw_ir *sub, int noutputs) {
    const pw_ir *g = st->g;
    pw_ir_arg *items = pw_host_calloc((size_t)noutputs + 1, sizeof *items);
    if (!items) return PW_ERR_OOM;
    int k = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (st->sub_of[i] == s && st->is_output[i]) items[k++] = pw_ir_arg_node(st->local[i]);
    pw_status rc = pw_ir_set_output(sub, noutputs == 1 ? items[0] : pw_ir_arg_tuple(items, noutputs), NULL);
    pw_host_free(items);
    return rc;
}

/* The call of subgraph s (module name) in the stitching graph, and getitems
 * for a tuple result; records where each of its outputs lands in stitch_of. */
static pw_status add_stitch_call(split_state *st, int s, const char *name, int noutputs, pw_ir *stitch) {
    const pw_ir *g = st->g;
    pw_ir_arg *call_args = pw_host_calloc((size_t)st->ninputs + 1, sizeof *call_args);
    if (!call_args) return PW_ERR_OOM;
    for (int j = 0; j < st->ninputs; j++) call_args[j] = pw_ir_arg_node(st->stitch_of[st->inputs[j]]);
    char call_name[PW_IR_MAX_NAME];
    pw_ir_unique_name(stitch, name, call_name, sizeof call_name);
    int call;
    pw_status rc = pw_ir_add_call_module(stitch, call_name, name, call_args, st->ninputs, NULL, 0, &call);
    pw_host_free(call_args);
    if (rc != PW_OK) return rc;
    int k = 0;
    for (int i = 0; i < g->nnodes && rc == PW_OK; i++) {
        if (st->sub_of[i] != s || !st->is_output[i]) continue;
        if (noutputs == 1) {
            st->stitch_of[i] = call;
        } else {
            char gi[PW_IR_MAX_NAME];
            pw_ir_unique_name(stitch, "getitem", gi, sizeof gi);
            rc = pw_ir_add_getitem(stitch, gi, call, k++, &st->stitch_of[i]);
        }
    }
    return rc;
}

static pw_status build_subgraph(split_state *st, int s, pw_ir *stitch) {
    char name[PW_IR_MAX_NAME];
    snprintf(name, sizeof name, "submod_%d", s);
    pw_ir *sub;
    PW_TRY(pw_ir_new(name, &sub));
    int noutputs = 0;
    collect_subgraph_inputs(st, s);
    pw_status rc = add_subgraph_placeholders(st, sub);
    if (rc == PW_OK) rc = copy_subgraph_nodes(st, s, sub, &noutputs);
    if (rc == PW_OK) rc = set_subgraph_output(st, s, sub, noutputs);
    if (rc == PW_OK) rc = add_stitch_call(st, s, name, noutputs, stitch);
    if (rc != PW_OK) {
        pw_ir_free(sub);
        return rc;
    }
    return pw_ir_add_subgraph(stitch, sub);
}

/* The caller's splitting ops: at least one, none NULL or empty. */
static pw_status check_split_ops(const char *const *split_ops, int n_split_ops) {
    if (!split_ops || n_split_ops <= 0)
        return pw_error(PW_ERR_INVALID_ARG,
                        "pw_split: no splitting ops given (split_ops %s, n_split_ops %d); pass "
                        "the op names to cut at",
                        split_ops ? "set" : "NULL", n_split_ops);
    for (int i = 0; i < n_split_ops; i++)
        if (!split_ops[i] || !split_ops[i][0])
            return pw_error(PW_ERR_INVALID_ARG, "pw_split: splitting op %d is %s", i,
                            split_ops[i] ? "empty" : "NULL");
    return PW_OK;
}

/* A valid graph that has not been split already (no call_module nodes). */
static pw_status check_splittable(const pw_ir *g) {
    PW_TRY(pw_ir_validate(g));
    char where[PW_IR_MAX_NAME * 2 + 64];
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == PW_IR_CALL_MODULE)
            return pw_error(PW_ERR_INVALID_ARG, "%s: cannot split a graph that already has call_module nodes",
                            pw_ir_where(g, i, where, sizeof where));
    return PW_OK;
}

static void split_state_free(split_state *st) {
    pw_host_free(st->sub_of);
    pw_host_free(st->stitch_of);
    pw_host_free(st->local);
    pw_host_free(st->inputs);
    pw_host_free(st->is_output);
    pw_host_free(st->splitting_sub);
}

static pw_status split_state_alloc(split_state *st, const pw_ir *g) {
    *st = (split_state){.g = g};
    size_t n = (size_t)g->nnodes;
    st->sub_of = pw_host_calloc(n, sizeof(int));
    st->stitch_of = pw_host_calloc(n, sizeof(int));
    st->local = pw_host_calloc(n, sizeof(int));
    st->inputs = pw_host_calloc(n, sizeof(int));
    st->is_output = pw_host_calloc(n, sizeof(bool));
    st->splitting_sub = pw_host_calloc(n + 1, sizeof(bool));
    if (!st->sub_of || !st->stitch_of || !st->local || !st->inputs || !st->is_output || !st->splitting_sub)
        return PW_ERR_OOM;
    return PW_OK;
}

/* The walk: assigns every node its subgraph. A run of splitting or of
 * non-splitting ops shares one; a getitem follows its producer. */
static void assign_subgraphs(split_state *st, const char *const *split_ops, int n_split_ops) {
    const pw_ir *g = st->g;
    int cur = 0;
    bool cur_used = false, cur_splitting = false;
    for (int i = 0; i < g->nnodes; i++) {
        const pw_ir_node *node = &g->nodes[i];
        st->sub_of[i] = -1;
        if (node->kind == PW_IR_PLACEHOLDER || node->kind == PW_IR_OUTPUT) continue;
        if (node->kind == PW_IR_GETITEM && st->sub_of[node->args[0].as.node] >= 0) {
            st->sub_of[i] = st->sub_of[node->args[0].as.node];
            continue;
        }
        bool splits = node->kind == PW_IR_CALL_FUNCTION &&
                      pw_ir_target_matches(node->target, split_ops, n_split_ops);
        if (cur_used && splits != cur_splitting) cur++;
        cur_used = true;
        cur_splitting = splits;
        st->splitting_sub[cur] = splits;
        st->sub_of[i] = cur;
    }
    st->nsubs = cur_used ? cur + 1 : 0;
}

/* Marks the values needed outside their subgraph (the graph's output included). */
static void mark_outputs(split_state *st) {
    const pw_ir *g = st->g;
    for (int i = 0; i < g->nnodes; i++) {
        const pw_ir_node *node = &g->nodes[i];
        st->cur_sub = node->kind == PW_IR_OUTPUT ? -2 : st->sub_of[i];
        for (int a = 0; a < node->nargs; a++) pw_ir_arg_each_ref(&node->args[a], mark_crossing, st);
        for (int a = 0; a < node->nkwargs; a++)
            pw_ir_arg_each_ref(&node->kwargs[a].value, mark_crossing, st);
    }
}

/* The stitching graph with g's name, header comments and placeholders.
 * The subgraphs are named submod_<i>; a graph that already has one of
 * those names would make the split document ambiguous, so its stitching
 * graph takes a suffix instead. */
static pw_status new_stitch_graph(split_state *st, pw_ir **stitch) {
    const pw_ir *g = st->g;
    char stitch_name[PW_IR_MAX_NAME + 8];
    int taken = -1;
    char tail = 0;
    if (sscanf(g->name, "submod_%d%c", &taken, &tail) == 1 && taken >= 0 && taken < st->nsubs)
        snprintf(stitch_name, sizeof stitch_name, "%s_split", g->name);
    else
        snprintf(stitch_name, sizeof stitch_name, "%s", g->name);
    PW_TRY(pw_ir_new(stitch_name, stitch));
    PW_TRY(pw_strvec_copy(&(*stitch)->header_comments, &g->header_comments));
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].kind != PW_IR_PLACEHOLDER) continue;
        PW_TRY(copy_comments(*stitch, &g->nodes[i]));
        PW_TRY(pw_ir_add_placeholder(*stitch, g->nodes[i].name, &st->stitch_of[i]));
        (*stitch)->nodes[st->stitch_of[i]].type = g->nodes[i].type;
    }
    return PW_OK;
}

/* Every subgraph and its call, then the stitching graph's output: g's, with
 * references renumbered to the stitching graph. */
static pw_status fill_stitch_graph(split_state *st, pw_ir *stitch) {
    const pw_ir *g = st->g;
    for (int s = 0; s < st->nsubs; s++) {
        PW_TRY(build_subgraph(st, s, stitch));
        stitch->subs[stitch->nsubs - 1]->splitting = st->splitting_sub[s];
    }
    int out_node = pw_ir_output_node(g);
    pw_ir_arg value;
    PW_TRY(pw_ir_arg_copy(&g->nodes[out_node].args[0], &value));
    remap_refs(&value, st->stitch_of);
    pw_status rc = pw_ir_set_output(stitch, value, NULL);
    pw_ir_arg_free(&value);
    return rc;
}

pw_status pw_split(const pw_ir *g, const char *const *split_ops, int n_split_ops, pw_ir **out) {
    *out = NULL;
    PW_TRY(check_split_ops(split_ops, n_split_ops));
    PW_TRY(check_splittable(g));

    split_state st;
    pw_ir *stitch = NULL;
    pw_status rc = split_state_alloc(&st, g);
    if (rc == PW_OK) {
        assign_subgraphs(&st, split_ops, n_split_ops);
        mark_outputs(&st);
        rc = new_stitch_graph(&st, &stitch);
    }
    if (rc == PW_OK) rc = fill_stitch_graph(&st, stitch);
    split_state_free(&st);
    if (rc != PW_OK) {
        pw_ir_free(stitch);
        return rc;
    }
    *out = stitch;
    return PW_OK;
}
