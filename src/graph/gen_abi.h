/* The ABI of generated stitching C (docs/codegen.md): the value, callable
 * and runtime layouts that the source from pw_plan_emit_c relies on,
 * written down once, here.
 *
 * This file is the prelude of every emitted source, verbatim: the build
 * turns it into the string pw_gen_abi_text (cmake/pw_embed.cmake), so it
 * stands alone (standard headers only) and reads as part of the generated
 * text.
 *
 * The library includes it too, after piecewise.h, which has declared the
 * value and callable types already; then only the runtime table is
 * declared here (native.c fills it in). emit_c.c reads the value and
 * callable part once more under other names (PW_GEN_ABI_MIRROR) and checks
 * every size, offset and enumerator against piecewise.h, so the two cannot
 * drift apart. */
#ifndef PW_GEN_ABI_H
#define PW_GEN_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(PIECEWISE_H) || defined(PW_GEN_ABI_MIRROR)
/* ---- values and callables: the layouts of piecewise.h ---- */

/* PW_OK is 0; other codes are passed through unchanged. */
typedef int pw_status;

typedef enum pw_value_kind {
    PW_VAL_NONE = 0,
    PW_VAL_TENSOR,
    PW_VAL_TUPLE,
    PW_VAL_INT,
    PW_VAL_FLOAT,
    PW_VAL_BOOL,
    PW_VAL_STRING
} pw_value_kind;

/* Tensors and tuples are opaque: only the runtime below touches them. */
typedef struct pw_value {
    pw_value_kind kind;
    union {
        void *tensor;
        void *tuple;
        int64_t i;
        double f;
        bool b;
        const char *s;
    } as;
} pw_value;

/* A bound op or a submodule: arguments borrowed, *out a new reference. */
typedef pw_status (*pw_callable_fn)(void *user, const pw_value *args, int nargs, pw_value *out);
typedef struct pw_callable {
    pw_callable_fn fn;
    void *user;
    const char *name;
} pw_callable;
#endif

/* ---- the runtime: what piecewise does for the generated function ---- */

typedef struct pw_stitch_rt {
    /* one reference more / one less to a tensor or tuple value */
    pw_value (*retain)(pw_value v);
    void (*release)(pw_value v);
    /* checks that src is a tuple and index in range; retains the item */
    pw_status (*getitem)(pw_value src, int64_t index, const char *node, pw_value *out);
    /* a tuple of n items; takes over their references, also on failure */
    pw_status (*tuple)(int n, const pw_value *items, pw_value *out);
    /* adds where a call failed to the error message; returns s */
    pw_status (*failed)(pw_status s, const char *graph, const char *node);
    pw_status (*no_submodule)(int index, const char *graph, const char *node);
} pw_stitch_rt;

/* The generated function, named by pw_plan_options.function_name: fn are
 * the plan's bound ops, sub the submodule table, k the constants, p the
 * arguments; *out is a new reference. */
typedef pw_status (*pw_stitch_fn)(const pw_stitch_rt *rt, const pw_callable *fn, const pw_callable *sub,
                                  const pw_value *k, const pw_value *p, pw_value *out);

#ifndef PIECEWISE_H
/* ---- for the generated code ---- */

/* Only tensors and tuples are counted; the test saves a call for others. */
#define PW_COUNTED(v) ((v).kind == PW_VAL_TENSOR || (v).kind == PW_VAL_TUPLE)
#define PW_RETAIN(v) do { if (PW_COUNTED(v)) rt->retain(v); } while (0)
#define PW_RELEASE(v) do { if (PW_COUNTED(v)) rt->release(v); } while (0)
#if defined(__GNUC__)
#define PW_FAILED(st) __builtin_expect((st) != 0, 0)
#else
#define PW_FAILED(st) ((st) != 0)
#endif
#endif

#endif
