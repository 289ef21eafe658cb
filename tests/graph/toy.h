/* Toy ops and submodules for the stitching tests. Values are one-element
 * i64 tensors from a pool, so every reference that leaks or is freed twice
 * shows up (pool live blocks, ASan). Every call appends to a trace so the
 * plan, native function and reference evaluator can be compared call by
 * call. */
#ifndef PW_TEST_TOY_H
#define PW_TEST_TOY_H

#include "test_util.h"

#include <stdarg.h>

#define TOY_TRACE_CAP (1 << 16)

typedef struct toy_state {
    pw_pool *pool;
    char trace[TOY_TRACE_CAP];
    size_t len;
    int calls;
    int fail_at; /* the n-th call fails (0: never) */
} toy_state;

static toy_state toy;

static void toy_reset(void) {
    toy.len = 0;
    toy.trace[0] = 0;
    toy.calls = 0;
    toy.fail_at = 0;
}

static void toy_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void toy_log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (toy.len < TOY_TRACE_CAP) {
        int n = vsnprintf(toy.trace + toy.len, TOY_TRACE_CAP - toy.len, fmt, ap);
        if (n > 0) toy.len += (size_t)n;
        if (toy.len >= TOY_TRACE_CAP) toy.len = TOY_TRACE_CAP - 1;
    }
    va_end(ap);
}

/* A number standing for a value: what toy ops compute with. */
static int64_t toy_num(pw_value v) {
    switch (v.kind) {
    case PW_VAL_TENSOR: return *(const int64_t *)pw_tensor_data(v.as.tensor);
    case PW_VAL_INT: return v.as.i;
    case PW_VAL_FLOAT: return (int64_t)(v.as.f * 1000.0);
    case PW_VAL_BOOL: return v.as.b ? 11 : 13;
    case PW_VAL_STRING: {
        int64_t h = 17;
        for (const char *c = v.as.s; *c; c++) h = (h * 31 + (unsigned char)*c) % 1000003;
        return h;
    }
    case PW_VAL_TUPLE: {
        int64_t h = 19;
        for (int i = 0; i < pw_tuple_size(v.as.tuple); i++)
            h = (h * 7 + toy_num(pw_tuple_get(v.as.tuple, i)) % 1000003) % 1000003;
        return h;
    }
    default: return 5;
    }
}

static pw_status toy_tensor(int64_t x, pw_value *out) {
    int64_t shape[1] = {1};
    pw_tensor *t;
    PW_TRY(pw_tensor_new(toy.pool, PW_I64, 1, shape, &t));
    *(int64_t *)pw_tensor_data(t) = x;
    *out = pw_value_tensor(t);
    return PW_OK;
}

/* "name(n1,n2,...)" into the trace; returns a mix of the arguments. */
static int64_t toy_record(const char *name, const pw_value *args, int nargs) {
    int64_t h = 1;
    toy_log("%s(", name);
    for (int i = 0; i < nargs; i++) {
        int64_t x = toy_num(args[i]);
        toy_log("%s%lld", i ? "," : "", (long long)x);
        h = (h * 1000003 + x % 998244353) % 998244353;
    }
    toy_log(") ");
    return h;
}

static bool toy_should_fail(void) { return ++toy.calls == toy.fail_at; }

/* f: a new tensor from its arguments */
static pw_status toy_f(void *user, const pw_value *args, int nargs, pw_value *out) {
    int64_t h = toy_record((const char *)user, args, nargs);
    if (toy_should_fail()) return pw_error(PW_ERR_INVALID_ARG, "toy op %s failed on purpose", (const char *)user);
    return toy_tensor(h, out);
}

/* pair: a tuple of two new tensors */
static pw_status toy_pair(void *user, const pw_value *args, int nargs, pw_value *out) {
    int64_t h = toy_record("pair", args, nargs);
    if (toy_should_fail()) return pw_error(PW_ERR_INVALID_ARG, "toy op pair failed on purpose");
    pw_tuple *t;
    PW_TRY(pw_tuple_new(2, &t));
    for (int i = 0; i < 2; i++) {
        pw_value v;
        pw_status s = toy_tensor(h + i, &v);
        if (s != PW_OK) {
            pw_tuple_release(t);
            return s;
        }
        pw_tuple_set(t, i, v);
    }
    *out = pw_value_tuple(t);
    return PW_OK;
}

/* attention-like: records and returns nothing */
static pw_status toy_none(void *user, const pw_value *args, int nargs, pw_value *out) {
    toy_record((const char *)user, args, nargs);
    *out = pw_value_none();
    if (toy_should_fail()) return pw_error(PW_ERR_INVALID_ARG, "toy op %s failed on purpose", (const char *)user);
    return PW_OK;
}

/* live: how many pool blocks are alive right now */
static pw_status toy_live(void *user, const pw_value *args, int nargs, pw_value *out) {
    pw_pool_stats st;
    pw_pool_get_stats(toy.pool, &st);
    toy_log("live=%zu ", st.n_live_blocks);
    *out = pw_value_int((int64_t)st.n_live_blocks);
    return PW_OK;
}

static pw_status toy_resolve(void *user, const char *target, pw_callable *out) {
    static const char *const none_ops[] = {"attention", "unified_attention", "vllm.unified_attention_with_output", "none"};
    if (strcmp(target, "pair") == 0) {
        *out = (pw_callable){toy_pair, NULL, "pair"};
        return PW_OK;
    }
    if (strcmp(target, "live") == 0) {
        *out = (pw_callable){toy_live, NULL, "live"};
        return PW_OK;
    }
    if (strcmp(target, "missing") == 0) return pw_error(PW_ERR_NOT_FOUND, "no op named missing");
    for (size_t i = 0; i < PW_ARRAY_LEN(none_ops); i++)
        if (strcmp(target, none_ops[i]) == 0) {
            *out = (pw_callable){toy_none, (void *)none_ops[i], none_ops[i]};
            return PW_OK;
        }
    /* anything else computes a tensor; the name is the target (kept alive by the plan) */
    static char names[64][64];
    static int nnames;
    for (int i = 0; i < nnames; i++)
        if (strcmp(names[i], target) == 0) {
            *out = (pw_callable){toy_f, names[i], names[i]};
            return PW_OK;
        }
    if (nnames == 64 || strlen(target) >= 64) return pw_error(PW_ERR_UNSUPPORTED, "toy: too many op names");
    snprintf(names[nnames], 64, "%s", target);
    *out = (pw_callable){toy_f, names[nnames], names[nnames]};
    nnames++;
    return PW_OK;
}

/* A piece: returns `nout` new tensors as a tuple (nout >= 2), one tensor
 * (nout == 1) or an empty tuple (nout == 0). */
typedef struct toy_sub {
    char name[32];
    int nout;
} toy_sub;

static pw_status toy_sub_call(void *user, const pw_value *args, int nargs, pw_value *out) {
    toy_sub *s = user;
    int64_t h = toy_record(s->name, args, nargs);
    if (toy_should_fail()) return pw_error(PW_ERR_INVALID_ARG, "toy submodule %s failed on purpose", s->name);
    if (s->nout == 1) return toy_tensor(h, out);
    pw_tuple *t;
    PW_TRY(pw_tuple_new(s->nout, &t));
    for (int i = 0; i < s->nout; i++) {
        pw_value v;
        pw_status st = toy_tensor(h * 3 + i, &v);
        if (st != PW_OK) {
            pw_tuple_release(t);
            return st;
        }
        pw_tuple_set(t, i, v);
    }
    *out = pw_value_tuple(t);
    return PW_OK;
}

/* Text form of a result, for comparisons. */
static void toy_describe(pw_value v, char *buf, size_t cap, size_t *len) {
    int n = 0;
    switch (v.kind) {
    case PW_VAL_TUPLE:
        n = snprintf(buf + *len, cap - *len, "(");
        *len += n > 0 && (size_t)n < cap - *len ? (size_t)n : 0;
        for (int i = 0; i < pw_tuple_size(v.as.tuple); i++) toy_describe(pw_tuple_get(v.as.tuple, i), buf, cap, len);
        n = snprintf(buf + *len, cap - *len, ")");
        break;
    case PW_VAL_STRING: n = snprintf(buf + *len, cap - *len, "\"%s\" ", v.as.s); break;
    case PW_VAL_NONE: n = snprintf(buf + *len, cap - *len, "none "); break;
    default: n = snprintf(buf + *len, cap - *len, "%d:%lld ", (int)v.kind, (long long)toy_num(v));
    }
    *len += n > 0 && (size_t)n < cap - *len ? (size_t)n : 0;
}

static size_t toy_live_blocks(void) {
    pw_pool_stats st;
    pw_pool_get_stats(toy.pool, &st);
    return st.n_live_blocks;
}

#endif
