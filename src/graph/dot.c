/* Graphviz output: the graph's nodes and data edges; subgraphs as
 * clusters that call_module nodes point at; splitting subgraphs and the ops
 * in them highlighted (the splitter marked them; the graph layer knows no
 * op names). `dot -Tpng` renders it. */
#include "graph_internal.h"

#define SPLIT_COLOR "#f4a582"
#define SPLIT_CLUSTER_COLOR "#fde0dd"
#define PLAIN_CLUSTER_COLOR "#edf3fb"

typedef struct dot_edge_ctx {
    pw_sb *sb;
    const pw_ir *g;
    int to;
} dot_edge_ctx;

static pw_status dot_edge(void *user, int node) {
    dot_edge_ctx *c = user;
    pw_sb_printf(c->sb, "  \"%s.%s\" -> \"%s.%s\";\n", c->g->name, c->g->nodes[node].name, c->g->name,
                 c->g->nodes[c->to].name);
    return PW_OK;
}

/* Label text: what the node is, with quotes and backslashes escaped. */
static void dot_label(pw_sb *sb, const pw_ir_node *n) {
    pw_sb_printf(sb, "%%%s\\n%s", n->name, pw_ir_node_kind_name(n->kind));
    if (n->target) pw_sb_printf(sb, " %s", n->target);
}

static void dot_nodes(pw_sb *sb, const pw_ir *g, const char *indent) {
    for (int i = 0; i < g->nnodes; i++) {
        const pw_ir_node *n = &g->nodes[i];
        pw_sb_printf(sb, "%s\"%s.%s\" [label=\"", indent, g->name, n->name);
        dot_label(sb, n);
        pw_sb_puts(sb, "\"");
        if (n->kind == PW_IR_PLACEHOLDER || n->kind == PW_IR_OUTPUT) pw_sb_puts(sb, ", shape=ellipse");
        if (n->kind == PW_IR_CALL_FUNCTION && g->splitting)
            pw_sb_puts(sb, ", style=filled, fillcolor=\"" SPLIT_COLOR "\"");
        pw_sb_puts(sb, "];\n");
    }
}

static void dot_edges(pw_sb *sb, const pw_ir *g) {
    for (int i = 0; i < g->nnodes; i++) {
        dot_edge_ctx c = {sb, g, i};
        const pw_ir_node *n = &g->nodes[i];
        for (int a = 0; a < n->nargs; a++) pw_ir_arg_each_ref(&n->args[a], dot_edge, &c);
        for (int a = 0; a < n->nkwargs; a++) pw_ir_arg_each_ref(&n->kwargs[a].value, dot_edge, &c);
    }
}

pw_status pw_ir_to_dot(const pw_ir *g, char **out) {
    pw_sb sb = {0};
    pw_sb_printf(&sb, "digraph \"%s\" {\n  compound=true;\n  rankdir=TB;\n"
                 "  node [shape=box, fontname=\"monospace\", fontsize=10];\n", g->name);
    dot_nodes(&sb, g, "  ");
    for (int s = 0; s < g->nsubs; s++) {
        const pw_ir *sub = g->subs[s];
        pw_sb_printf(&sb, "  subgraph \"cluster_%s\" {\n    label=\"%s%s\";\n    style=filled;\n"
                     "    fillcolor=\"%s\";\n", sub->name, sub->name, sub->splitting ? " (splitting)" : "",
                     sub->splitting ? SPLIT_CLUSTER_COLOR : PLAIN_CLUSTER_COLOR);
        dot_nodes(&sb, sub, "    ");
        pw_sb_puts(&sb, "  }\n");
    }
    dot_edges(&sb, g);
    for (int s = 0; s < g->nsubs; s++) dot_edges(&sb, g->subs[s]);
    /* a call points at the subgraph it runs */
    for (int i = 0; i < g->nnodes; i++) {
        const pw_ir_node *n = &g->nodes[i];
        if (n->kind != PW_IR_CALL_MODULE) continue;
        const pw_ir *sub = pw_ir_find_subgraph(g, n->target);
        if (!sub || sub->nnodes == 0) continue;
        pw_sb_printf(&sb, "  \"%s.%s\" -> \"%s.%s\" [style=dashed, lhead=\"cluster_%s\"];\n", g->name,
                     n->name, sub->name, sub->nodes[0].name, sub->name);
    }
    pw_sb_puts(&sb, "}\n");
    return pw_sb_finish(&sb, out);
}
