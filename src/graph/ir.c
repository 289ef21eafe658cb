/* The graph IR: building, reading, cloning, validation. */
#include "graph_internal.h"

#include <ctype.h>

static const char *const kind_names[PW_IR_NODE_KIND_COUNT_] = {
    [PW_IR_PLACEHOLDER] = "placeholder", [PW_IR_CALL_FUNCTION] = "call_function",
    [PW_IR_CALL_MODULE] = "call_module", [PW_IR_GETITEM] = "getitem",
    [PW_IR_OUTPUT] = "output",
};

const char *pw_ir_node_kind_name(pw_ir_node_kind k) {
    return (unsigned)k < PW_IR_NODE_KIND_COUNT_ ? kind_names[k] : "?";
}

bool pw_ir_is_identifier(const char *s) {
    if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
    size_t n = 0;
    for (; *s; s++, n++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
    return n < PW_IR_MAX_NAME;
}

bool pw_ir_is_target(const char *s) {
    if (!s || strlen(s) >= PW_IR_MAX_NAME) return false;
    bool at_start = true;
    for (; *s; s++) {
        if (*s == '.') {
            if (at_start) return false;
            at_start = true;
        } else if (at_start) {
            if (!(isalpha((unsigned char)*s) || *s == '_')) return false;
            at_start = false;
        } else if (!(isalnum((unsigned char)*s) || *s == '_')) {
            return false;
        }
    }
    return !at_start;
}

/* ---- argument values ------------------------------------------------------------ */

pw_status pw_ir_arg_copy(const pw_ir_arg *src, pw_ir_arg *dst) {
    *dst = *src;
    if (src->kind == PW_IR_ARG_STRING) {
        if (!src->as.s) return pw_error(PW_ERR_INVALID_ARG, "string argument is NULL");
        char *s = pw_host_strdup(src->as.s);
        if (!s) return PW_ERR_OOM;
        dst->as.s = s;
    } else if (src->kind == PW_IR_ARG_LIST || src->kind == PW_IR_ARG_TUPLE) {
        int n = src->as.seq.n;
        if (n < 0 || (n > 0 && !src->as.seq.items))
            return pw_error(PW_ERR_INVALID_ARG, "sequence argument has bad items (%d)", n);
        pw_ir_arg *items = pw_host_calloc((size_t)(n ? n : 1), sizeof *items);
        if (!items) return PW_ERR_OOM;
        for (int i = 0; i < n; i++) {
            pw_status s = pw_ir_arg_copy(&src->as.seq.items[i], &items[i]);
            if (s != PW_OK) {
                for (int j = 0; j < i; j++) pw_ir_arg_free(&items[j]);
                pw_host_free(items);
                dst->kind = PW_IR_ARG_NONE;
                return s;
            }
        }
        dst->as.seq.items = items;
    } else if ((unsigned)src->kind > PW_IR_ARG_TUPLE) {
        dst->kind = PW_IR_ARG_NONE;
        return pw_error(PW_ERR_INVALID_ARG, "unknown argument kind %d", (int)src->kind);
    }
    return PW_OK;
}

void pw_ir_arg_free(pw_ir_arg *a) {
    if (a->kind == PW_IR_ARG_STRING) {
        pw_host_free((char *)a->as.s);
    } else if (a->kind == PW_IR_ARG_LIST || a->kind == PW_IR_ARG_TUPLE) {
        for (int i = 0; i < a->as.seq.n; i++) pw_ir_arg_free((pw_ir_arg *)&a->as.seq.items[i]);
        pw_host_free((pw_ir_arg *)a->as.seq.items);
    }
    a->kind = PW_IR_ARG_NONE;
}

pw_status pw_ir_arg_each_ref(const pw_ir_arg *a, pw_ir_ref_fn fn, void *user) {
    if (a->kind == PW_IR_ARG_NODE) return fn(user, a->as.node);
    if (a->kind == PW_IR_ARG_LIST || a->kind == PW_IR_ARG_TUPLE)
        for (int i = 0; i < a->as.seq.n; i++) PW_TRY(pw_ir_arg_each_ref(&a->as.seq.items[i], fn, user));
    return PW_OK;
}

/* ---- graphs ------------------------------------------------------------------------ */

pw_status pw_ir_new(const char *name, pw_ir **out) {
    *out = NULL;
    if (!pw_ir_is_identifier(name))
        return pw_error(PW_ERR_INVALID_ARG, "graph name '%s' is not an identifier",
                        name ? name : "(null)");
    pw_ir *g = pw_host_calloc(1, sizeof *g);
    if (!g) return PW_ERR_OOM;
    if (!(g->name = pw_host_strdup(name))) {
        pw_host_free(g);
        return PW_ERR_OOM;
    }
    *out = g;
    return PW_OK;
}

static void node_free(pw_ir_node *n) {
    pw_host_free(n->name);
    pw_host_free(n->target);
    for (int i = 0; i < n->nargs; i++) pw_ir_arg_free(&n->args[i]);
    pw_host_free(n->args);
    for (int i = 0; i < n->nkwargs; i++) {
        pw_host_free((char *)n->kwargs[i].name);
        pw_ir_arg_free(&n->kwargs[i].value);
    }
    pw_host_free(n->kwargs);
    pw_host_free(n->users);
    pw_strvec_free(&n->comments);
    pw_host_free(n->trailing_comment);
    memset(n, 0, sizeof *n);
}

void pw_ir_free(pw_ir *g) {
    if (!g) return;
    for (int i = 0; i < g->nnodes; i++) node_free(&g->nodes[i]);
    pw_host_free(g->nodes);
    pw_strmap_free(&g->names);
    for (int i = 0; i < g->nsubs; i++) pw_ir_free(g->subs[i]);
    pw_host_free(g->subs);
    pw_strvec_free(&g->pending_comments);
    pw_strvec_free(&g->header_comments);
    pw_strvec_free(&g->tail_comments);
    pw_host_free(g->header_trailing_comment);
    pw_host_free(g->name);
    pw_host_free(g);
}

const char *pw_ir_name(const pw_ir *g) { return g->name; }

static pw_status add_user(pw_ir *g, int node, int user) {
    pw_ir_node *n = &g->nodes[node];
    if (n->nusers && n->users[n->nusers - 1] == user) return PW_OK;
    if (n->nusers == n->capusers) {
        size_t cap = (size_t)n->capusers;
        int *u = pw_host_grow(n->users, sizeof *u, &cap, (size_t)n->nusers + 1, INT_MAX);
        if (!u) return PW_ERR_OOM;
        n->users = u;
        n->capusers = (int)cap;
    }
    n->users[n->nusers++] = user;
    return PW_OK;
}

typedef struct ref_check {
    const pw_ir *g;
    int limit;
    const char *name;
} ref_check;

static pw_status check_ref(void *user, int node) {
    ref_check *c = user;
    if (node < 0 || node >= c->limit)
        return pw_error(PW_ERR_INVALID_ARG,
                        "graph %s: node '%s': undefined reference to node %d (graph has %d nodes)",
                        c->g->name, c->name, node, c->limit);
    return PW_OK;
}

typedef struct user_add {
    pw_ir *g;
    int user;
} user_add;

static pw_status add_user_cb(void *u, int node) {
    user_add *a = u;
    return add_user(a->g, node, a->user);
}

pw_status pw_ir_append_node(pw_ir *g, pw_ir_node *node, int *out) {
    pw_status s = PW_OK;
    if (pw_ir_find_node(g, node->name) >= 0) {
        s = pw_error(PW_ERR_INVALID_ARG, "graph %s: duplicate node name '%s'", g->name, node->name);
        goto fail;
    }
    if (g->nnodes == g->capnodes) {
        size_t cap = (size_t)g->capnodes;
        pw_ir_node *nodes = pw_host_grow(g->nodes, sizeof *nodes, &cap, (size_t)g->nnodes + 1, INT_MAX);
        if (!nodes) {
            s = PW_ERR_OOM;
            goto fail;
        }
        g->nodes = nodes;
        g->capnodes = (int)cap;
    }
    int idx = g->nnodes;
    /* pending builder comments belong to this node */
    for (int i = 0; i < g->pending_comments.n; i++) {
        if ((s = pw_strvec_push(&node->comments, g->pending_comments.items[i])) != PW_OK) goto fail;
    }
    if ((s = pw_strmap_put(&g->names, node->name, idx)) != PW_OK) goto fail;
    pw_strvec_free(&g->pending_comments);
    g->nodes[idx] = *node;
    g->nnodes++;
    user_add ua = {g, idx};
    for (int i = 0; i < node->nargs; i++)
        if ((s = pw_ir_arg_each_ref(&node->args[i], add_user_cb, &ua)) != PW_OK) return s;
    for (int i = 0; i < node->nkwargs; i++)
        if ((s = pw_ir_arg_each_ref(&node->kwargs[i].value, add_user_cb, &ua)) != PW_OK) return s;
    if (out) *out = idx;
    return PW_OK;
fail:
    node_free(node);
    return s;
}

static pw_status add_node(pw_ir *g, pw_ir_node_kind kind, const char *name, const char *target,
                          const pw_ir_arg *args, int nargs, const pw_ir_kwarg *kwargs, int nkwargs,
                          int *out) {
    if (out) *out = -1;
    if (!pw_ir_is_identifier(name))
        return pw_error(PW_ERR_INVALID_ARG, "graph %s: node name '%s' is not an identifier",
                        g->name, name ? name : "(null)");
    if ((kind == PW_IR_CALL_FUNCTION || kind == PW_IR_CALL_MODULE) && !pw_ir_is_target(target))
        return pw_error(PW_ERR_INVALID_ARG, "graph %s: node '%s': target '%s' is not a dotted name",
                        g->name, name, target ? target : "(null)");
    if (nargs < 0 || nkwargs < 0 || (nargs && !args) || (nkwargs && !kwargs))
        return pw_error(PW_ERR_INVALID_ARG, "graph %s: node '%s': bad argument arrays", g->name, name);
    if (g->nnodes && g->nodes[g->nnodes - 1].kind == PW_IR_OUTPUT)
        return pw_error(PW_ERR_INVALID_ARG, "graph %s: node '%s' added after the output", g->name,
                        name);
    ref_check rc = {g, g->nnodes, name};
    for (int i = 0; i < nargs; i++) PW_TRY(pw_ir_arg_each_ref(&args[i], check_ref, &rc));
    for (int i = 0; i < nkwargs; i++) {
        if (!pw_ir_is_identifier(kwargs[i].name))
            return pw_error(PW_ERR_INVALID_ARG, "graph %s: node '%s': keyword '%s' is not an identifier",
                            g->name, name, kwargs[i].name ? kwargs[i].name : "(null)");
        for (int j = 0; j < i; j++)
            if (strcmp(kwargs[i].name, kwargs[j].name) == 0)
                return pw_error(PW_ERR_INVALID_ARG, "graph %s: node '%s': keyword '%s' given twice",
                                g->name, name, kwargs[i].name);
        PW_TRY(pw_ir_arg_each_ref(&kwargs[i].value, check_ref, &rc));
    }

    pw_ir_node n;
    memset(&n, 0, sizeof n);
    n.kind = kind;
    pw_status s = PW_ERR_OOM;
    if (!(n.name = pw_host_strdup(name))) goto fail;
    if (target && !(n.target = pw_host_strdup(target))) goto fail;
    if (nargs && !(n.args = pw_host_calloc((size_t)nargs, sizeof *n.args))) goto fail;
    for (; n.nargs < nargs; n.nargs++)
        if ((s = pw_ir_arg_copy(&args[n.nargs], &n.args[n.nargs])) != PW_OK) goto fail;
    if (nkwargs && !(n.kwargs = pw_host_calloc((size_t)nkwargs, sizeof *n.kwargs))) goto fail;
    for (; n.nkwargs < nkwargs; n.nkwargs++) {
        pw_ir_kwarg *kw = &n.kwargs[n.nkwargs];
        if (!(kw->name = pw_host_strdup(kwargs[n.nkwargs].name))) goto fail;
        if ((s = pw_ir_arg_copy(&kwargs[n.nkwargs].value, &kw->value)) != PW_OK) {
            pw_host_free((char *)kw->name);
            goto fail;
        }
    }
    return pw_ir_append_node(g, &n, out);
fail:
    node_free(&n);
    return s == PW_ERR_OOM ? pw_error(PW_ERR_OOM, "out of memory adding node '%s'", name) : s;
}

pw_status pw_ir_add_placeholder(pw_ir *g, const char *name, int *out) {
    return add_node(g, PW_IR_PLACEHOLDER, name, NULL, NULL, 0, NULL, 0, out);
}

pw_status pw_ir_add_call_function(pw_ir *g, const char *name, const char *target,
                                  const pw_ir_arg *args, int nargs, const pw_ir_kwarg *kwargs,
                                  int nkwargs, int *out) {
    return add_node(g, PW_IR_CALL_FUNCTION, name, target, args, nargs, kwargs, nkwargs, out);
}

pw_status pw_ir_add_call_module(pw_ir *g, const char *name, const char *target,
                                const pw_ir_arg *args, int nargs, const pw_ir_kwarg *kwargs,
                                int nkwargs, int *out) {
    return add_node(g, PW_IR_CALL_MODULE, name, target, args, nargs, kwargs, nkwargs, out);
}

pw_status pw_ir_add_getitem(pw_ir *g, const char *name, int src_node, int64_t index, int *out) {
    pw_ir_arg args[2] = {pw_ir_arg_node(src_node), pw_ir_arg_int(index)};
    return add_node(g, PW_IR_GETITEM, name, NULL, args, 2, NULL, 0, out);
}

void pw_ir_unique_name(const pw_ir *g, const char *base, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", base);
    for (int i = 1; pw_ir_find_node(g, buf) >= 0; i++) snprintf(buf, cap, "%s_%d", base, i);
}

pw_status pw_ir_set_output(pw_ir *g, pw_ir_arg value, int *out) {
    if (pw_ir_output_node(g) >= 0)
        return pw_error(PW_ERR_INVALID_ARG, "graph %s already has an output", g->name);
    char name[PW_IR_MAX_NAME];
    pw_ir_unique_name(g, "output", name, sizeof name);
    return add_node(g, PW_IR_OUTPUT, name, NULL, &value, 1, NULL, 0, out);
}

pw_status pw_ir_set_node_type(pw_ir *g, int node, const pw_ir_type *type) {
    if (node < 0 || node >= g->nnodes)
        return pw_error(PW_ERR_INVALID_ARG, "graph %s: no node %d", g->name, node);
    if (type->kind == PW_IR_TYPE_TENSOR) {
        if (type->ndim < 0 || type->ndim > PW_MAX_DIMS || (unsigned)type->dtype >= PW_DTYPE_COUNT_)
            return pw_error(PW_ERR_INVALID_ARG, "node '%s': bad tensor type (ndim %d)",
                            g->nodes[node].name, type->ndim);
        for (int i = 0; i < type->ndim; i++)
            if (type->dims[i] < 0 && type->dims[i] != PW_IR_DIM_TOKENS)
                return pw_error(PW_ERR_INVALID_ARG, "node '%s': bad dimension %lld",
                                g->nodes[node].name, (long long)type->dims[i]);
    } else if ((unsigned)type->kind > PW_IR_TYPE_SYMINT) {
        return pw_error(PW_ERR_INVALID_ARG, "node '%s': bad type kind", g->nodes[node].name);
    }
    g->nodes[node].type = *type;
    return PW_OK;
}

pw_status pw_ir_add_comment(pw_ir *g, const char *text) {
    if (!text || strchr(text, '\n'))
        return pw_error(PW_ERR_INVALID_ARG, "graph %s: a comment is one line of text", g->name);
    return pw_strvec_push(&g->pending_comments, text);
}

pw_status pw_ir_add_subgraph(pw_ir *g, pw_ir *sub) {
    if (!sub) return pw_error(PW_ERR_INVALID_ARG, "graph %s: NULL subgraph", g->name);
    if (sub == g || pw_ir_find_subgraph(g, sub->name)) {
        pw_status s = pw_error(PW_ERR_INVALID_ARG, "graph %s: duplicate subgraph name '%s'", g->name,
                               sub->name);
        if (sub != g) pw_ir_free(sub);
        return s;
    }
    if (g->nsubs == g->capsubs) {
        size_t cap = (size_t)g->capsubs;
        pw_ir **subs = pw_host_grow(g->subs, sizeof *subs, &cap, (size_t)g->nsubs + 1, INT_MAX);
        if (!subs) {
            pw_ir_free(sub);
            return PW_ERR_OOM;
        }
        g->subs = subs;
        g->capsubs = (int)cap;
    }
    g->subs[g->nsubs++] = sub;
    return PW_OK;
}

int pw_ir_num_subgraphs(const pw_ir *g) { return g->nsubs; }
const pw_ir *pw_ir_subgraph(const pw_ir *g, int i) {
    return i >= 0 && i < g->nsubs ? g->subs[i] : NULL;
}
const pw_ir *pw_ir_find_subgraph(const pw_ir *g, const char *name) {
    for (int i = 0; i < g->nsubs; i++)
        if (strcmp(g->subs[i]->name, name) == 0) return g->subs[i];
    return NULL;
}
bool pw_ir_is_splitting(const pw_ir *g) { return g->splitting; }
void pw_ir_set_splitting(pw_ir *g, bool splitting) { g->splitting = splitting; }

pw_status pw_ir_clone(const pw_ir *g, pw_ir **out) {
    *out = NULL;
    pw_ir *c;
    PW_TRY(pw_ir_new(g->name, &c));
    c->splitting = g->splitting;
    c->line = g->line;
    pw_status s = PW_OK;
    for (int i = 0; i < g->nnodes && s == PW_OK; i++) {
        const pw_ir_node *n = &g->nodes[i];
        s = pw_strvec_copy(&c->pending_comments, &n->comments);
        if (s == PW_OK)
            s = add_node(c, n->kind, n->name, n->target, n->args, n->nargs, n->kwargs, n->nkwargs, NULL);
        if (s == PW_OK) {
            c->nodes[i].type = n->type;
            c->nodes[i].line = n->line;
            if (n->trailing_comment && !(c->nodes[i].trailing_comment = pw_host_strdup(n->trailing_comment)))
                s = PW_ERR_OOM;
        }
    }
    if (s == PW_OK) s = pw_strvec_copy(&c->pending_comments, &g->pending_comments);
    if (s == PW_OK) s = pw_strvec_copy(&c->header_comments, &g->header_comments);
    if (s == PW_OK) s = pw_strvec_copy(&c->tail_comments, &g->tail_comments);
    if (s == PW_OK && g->header_trailing_comment &&
        !(c->header_trailing_comment = pw_host_strdup(g->header_trailing_comment)))
        s = PW_ERR_OOM;
    for (int i = 0; i < g->nsubs && s == PW_OK; i++) {
        pw_ir *sub;
        s = pw_ir_clone(g->subs[i], &sub);
        if (s == PW_OK) s = pw_ir_add_subgraph(c, sub);
    }
    if (s != PW_OK) {
        pw_ir_free(c);
        return s;
    }
    *out = c;
    return PW_OK;
}

/* ---- reading -------------------------------------------------------------------- */

int pw_ir_num_nodes(const pw_ir *g) { return g->nnodes; }
#define NODE_OR(g, node, fallback)                                                             \
    if ((node) < 0 || (node) >= (g)->nnodes) return fallback
pw_ir_node_kind pw_ir_node_kind_of(const pw_ir *g, int node) {
    NODE_OR(g, node, PW_IR_NODE_KIND_COUNT_);
    return g->nodes[node].kind;
}
const char *pw_ir_node_name(const pw_ir *g, int node) {
    NODE_OR(g, node, NULL);
    return g->nodes[node].name;
}
const char *pw_ir_node_target(const pw_ir *g, int node) {
    NODE_OR(g, node, NULL);
    return g->nodes[node].target;
}
int pw_ir_node_num_args(const pw_ir *g, int node) {
    NODE_OR(g, node, 0);
    return g->nodes[node].nargs;
}
const pw_ir_arg *pw_ir_node_arg(const pw_ir *g, int node, int i) {
    NODE_OR(g, node, NULL);
    return i >= 0 && i < g->nodes[node].nargs ? &g->nodes[node].args[i] : NULL;
}
int pw_ir_node_num_kwargs(const pw_ir *g, int node) {
    NODE_OR(g, node, 0);
    return g->nodes[node].nkwargs;
}
const pw_ir_kwarg *pw_ir_node_kwarg(const pw_ir *g, int node, int i) {
    NODE_OR(g, node, NULL);
    return i >= 0 && i < g->nodes[node].nkwargs ? &g->nodes[node].kwargs[i] : NULL;
}
int pw_ir_node_num_users(const pw_ir *g, int node) {
    NODE_OR(g, node, 0);
    return g->nodes[node].nusers;
}
int pw_ir_node_user(const pw_ir *g, int node, int i) {
    NODE_OR(g, node, -1);
    return i >= 0 && i < g->nodes[node].nusers ? g->nodes[node].users[i] : -1;
}
const pw_ir_type *pw_ir_node_type(const pw_ir *g, int node) {
    NODE_OR(g, node, NULL);
    return &g->nodes[node].type;
}
int pw_ir_node_line(const pw_ir *g, int node) {
    NODE_OR(g, node, 0);
    return g->nodes[node].line;
}
int pw_ir_find_node(const pw_ir *g, const char *name) {
    return name ? pw_strmap_get(&g->names, name) : -1;
}
int pw_ir_output_node(const pw_ir *g) {
    for (int i = g->nnodes - 1; i >= 0; i--)
        if (g->nodes[i].kind == PW_IR_OUTPUT) return i;
    return -1;
}
int pw_ir_num_placeholders(const pw_ir *g) {
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += g->nodes[i].kind == PW_IR_PLACEHOLDER;
    return n;
}

const char *pw_ir_where(const pw_ir *g, int node, char *buf, size_t cap) {
    const pw_ir_node *n = &g->nodes[node];
    if (n->line > 0)
        snprintf(buf, cap, "graph %s: node '%s' (line %d)", g->name, n->name, n->line);
    else
        snprintf(buf, cap, "graph %s: node '%s'", g->name, n->name);
    return buf;
}

/* ---- validation ------------------------------------------------------------------- */

static pw_status validate_getitem(const pw_ir *g, int i) {
    char where[PW_IR_MAX_NAME * 2 + 64];
    const pw_ir_node *n = &g->nodes[i];
    if (n->nargs != 2 || n->nkwargs)
        return pw_error(PW_ERR_INVALID_ARG, "%s: getitem takes (source, index), got %d arguments",
                        pw_ir_where(g, i, where, sizeof where), n->nargs + n->nkwargs);
    if (n->args[0].kind != PW_IR_ARG_NODE)
        return pw_error(PW_ERR_INVALID_ARG, "%s: getitem on a non-tuple (a constant)",
                        pw_ir_where(g, i, where, sizeof where));
    const pw_ir_node *src = &g->nodes[n->args[0].as.node];
    if (src->type.kind != PW_IR_TYPE_UNKNOWN)
        return pw_error(PW_ERR_INVALID_ARG, "%s: getitem on a non-tuple ('%s' is a %s)",
                        pw_ir_where(g, i, where, sizeof where), src->name,
                        src->type.kind == PW_IR_TYPE_TENSOR ? "tensor" : "sym");
    if (n->args[1].kind != PW_IR_ARG_INT)
        return pw_error(PW_ERR_INVALID_ARG, "%s: getitem with a non-integer index",
                        pw_ir_where(g, i, where, sizeof where));
    return PW_OK;
}

static pw_status validate_graph(const pw_ir *root, const pw_ir *g) {
    char where[PW_IR_MAX_NAME * 2 + 64];
    int out = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const pw_ir_node *n = &g->nodes[i];
        switch (n->kind) {
        case PW_IR_PLACEHOLDER:
        case PW_IR_CALL_FUNCTION:
            break;
        case PW_IR_CALL_MODULE: {
            const pw_ir *sub = root ? pw_ir_find_subgraph(root, n->target) : NULL;
            if (sub && n->nargs + n->nkwargs != pw_ir_num_placeholders(sub))
                return pw_error(PW_ERR_INVALID_ARG, "%s: call_module %s with %d arguments, but the "
                                "subgraph has %d placeholders", pw_ir_where(g, i, where, sizeof where),
                                n->target, n->nargs + n->nkwargs, pw_ir_num_placeholders(sub));
            break;
        }
        case PW_IR_GETITEM:
            PW_TRY(validate_getitem(g, i));
            break;
        case PW_IR_OUTPUT:
            if (out >= 0)
                return pw_error(PW_ERR_INVALID_ARG, "%s: a second output",
                                pw_ir_where(g, i, where, sizeof where));
            out = i;
            if (n->nargs != 1)
                return pw_error(PW_ERR_INVALID_ARG, "%s: output takes one value",
                                pw_ir_where(g, i, where, sizeof where));
            break;
        default:
            return pw_error(PW_ERR_UNSUPPORTED, "%s: unsupported node kind %d",
                            pw_ir_where(g, i, where, sizeof where), (int)n->kind);
        }
    }
    if (out < 0) return pw_error(PW_ERR_INVALID_ARG, "graph %s: missing output", g->name);
    if (out != g->nnodes - 1)
        return pw_error(PW_ERR_INVALID_ARG, "%s: the output must be the last node",
                        pw_ir_where(g, out, where, sizeof where));
    return PW_OK;
}

pw_status pw_ir_validate(const pw_ir *g) {
    PW_TRY(validate_graph(g, g));
    for (int i = 0; i < g->nsubs; i++) PW_TRY(validate_graph(g, g->subs[i]));
    return PW_OK;
}
