#include "internal.h"

struct pw_tuple {
    int refcount;
    int n;
    pw_value items[];
};

pw_status pw_tuple_new(int n, pw_tuple **out) {
    *out = NULL;
    if (n < 0) return pw_error(PW_ERR_INVALID_ARG, "tuple: negative size %d", n);
    pw_tuple *t = pw_host_calloc(1, sizeof *t + (size_t)n * sizeof(pw_value));
    if (!t) return PW_ERR_OOM;
    t->refcount = 1;
    t->n = n;
    *out = t;
    return PW_OK;
}

int pw_tuple_size(const pw_tuple *t) { return t->n; }

pw_value pw_tuple_get(const pw_tuple *t, int i) {
    assert(i >= 0 && i < t->n);
    return t->items[i];
}

void pw_tuple_set(pw_tuple *t, int i, pw_value v) {
    assert(i >= 0 && i < t->n);
    pw_value old = t->items[i];
    t->items[i] = v;
    pw_value_release(old);
}

pw_tuple *pw_tuple_retain(pw_tuple *t) {
    if (t) t->refcount++;
    return t;
}

void pw_tuple_release(pw_tuple *t) {
    if (!t) return;
    assert(t->refcount > 0);
    if (--t->refcount > 0) return;
    for (int i = 0; i < t->n; i++) pw_value_release(t->items[i]);
    pw_host_free(t);
}

pw_value pw_value_retain(pw_value v) {
    if (v.kind == PW_VAL_TENSOR) pw_tensor_retain(v.as.tensor);
    else if (v.kind == PW_VAL_TUPLE) pw_tuple_retain(v.as.tuple);
    return v;
}

void pw_value_release(pw_value v) {
    if (v.kind == PW_VAL_TENSOR) pw_tensor_release(v.as.tensor);
    else if (v.kind == PW_VAL_TUPLE) pw_tuple_release(v.as.tuple);
}
