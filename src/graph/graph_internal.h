/* Internals of the graph layer: the IR layout and small containers shared
 * by the IR, text, splitter and plan modules. Not installed. */
#ifndef PW_GRAPH_INTERNAL_H
#define PW_GRAPH_INTERNAL_H

#include "internal.h"

#include <string.h>

/* ---- name -> index map (open addressing) ------------------------------------- */

typedef struct pw_strmap {
    const char **keys; /* borrowed */
    int *vals;
    size_t cap, count;
} pw_strmap;

pw_status pw_strmap_put(pw_strmap *m, const char *key, int val);
/* -1 if absent. */
int pw_strmap_get(const pw_strmap *m, const char *key);
void pw_strmap_free(pw_strmap *m);

/* ---- string list --------------------------------------------------------------- */

/* A NULL entry in a comment list stands for a blank line. */
typedef struct pw_strvec {
    char **items;
    int n, cap;
} pw_strvec;

pw_status pw_strvec_push(pw_strvec *v, const char *s); /* copies s (NULL stays NULL) */
void pw_strvec_free(pw_strvec *v);
pw_status pw_strvec_copy(pw_strvec *dst, const pw_strvec *src);

/* ---- the IR ---------------------------------------------------------------------- */

typedef struct pw_ir_node {
    pw_ir_node_kind kind;
    char *name;
    char *target; /* call_function / call_module */
    pw_ir_arg *args;
    int nargs;
    pw_ir_kwarg *kwargs;
    int nkwargs;
    int *users;
    int nusers, capusers;
    pw_ir_type type;
    int line;
    pw_strvec comments;     /* full-line comments just before the node */
    char *trailing_comment; /* after the node on the same line, or NULL */
} pw_ir_node;

struct pw_ir {
    char *name;
    bool splitting;
    pw_ir_node *nodes;
    int nnodes, capnodes;
    pw_strmap names;
    pw_ir **subs;
    int nsubs, capsubs;
    pw_strvec pending_comments; /* wait for the next node */
    pw_strvec header_comments;  /* before the "graph NAME:" line */
    char *header_trailing_comment;
    pw_strvec tail_comments;    /* after the last graph of a document (root only) */
    int line;                   /* line of the header when parsed */
};

bool pw_ir_is_identifier(const char *s);
/* Identifiers separated by dots. */
bool pw_ir_is_target(const char *s);
/* Adds a node with already-copied contents; takes ownership of them. */
pw_status pw_ir_append_node(pw_ir *g, pw_ir_node *node, int *out);
pw_status pw_ir_arg_copy(const pw_ir_arg *src, pw_ir_arg *dst);
void pw_ir_arg_free(pw_ir_arg *a);
/* Calls fn for each node reference inside a (recursively). */
typedef pw_status (*pw_ir_ref_fn)(void *user, int node);
pw_status pw_ir_arg_each_ref(const pw_ir_arg *a, pw_ir_ref_fn fn, void *user);
/* A name not yet used in g: base, base_1, base_2, ... into buf. */
void pw_ir_unique_name(const pw_ir *g, const char *base, char *buf, size_t cap);
/* Prints one argument value in the text syntax. */
void pw_ir_print_arg(pw_sb *sb, const pw_ir *g, const pw_ir_arg *a);
/* "node 'x' (line 3)" or "node 'x'" for a built graph, into buf. */
const char *pw_ir_where(const pw_ir *g, int node, char *buf, size_t cap);
/* Shortest decimal text that reads back as the same double. */
void pw_ir_format_float(double f, char *buf, size_t cap);
/* Is target one of the ops (exact, or its last dotted component)? */
bool pw_ir_target_matches(const char *target, const char *const *ops, int n);

#endif
