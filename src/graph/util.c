/* Small containers for the graph layer: name map, string list. */
#include "graph_internal.h"

static size_t hash_str(const char *s) { return (size_t)pw_fnv1a(PW_FNV1A_BASIS, s, strlen(s)); }

static pw_status strmap_grow(pw_strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **keys = pw_host_calloc(cap, sizeof *keys);
    int *vals = pw_host_calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        pw_host_free(keys);
        pw_host_free(vals);
        return PW_ERR_OOM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = hash_str(m->keys[i]) & (cap - 1);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    pw_host_free(m->keys);
    pw_host_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return PW_OK;
}

pw_status pw_strmap_put(pw_strmap *m, const char *key, int val) {
    if ((m->count + 1) * 2 > m->cap) PW_TRY(strmap_grow(m));
    size_t j = hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) {
            m->vals[j] = val;
            return PW_OK;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = val;
    m->count++;
    return PW_OK;
}

int pw_strmap_get(const pw_strmap *m, const char *key) {
    if (!m->cap) return -1;
    size_t j = hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void pw_strmap_free(pw_strmap *m) {
    pw_host_free(m->keys);
    pw_host_free(m->vals);
    memset(m, 0, sizeof *m);
}

pw_status pw_strvec_push(pw_strvec *v, const char *s) {
    if (v->n == v->cap) {
        size_t cap = (size_t)v->cap;
        char **items = pw_host_grow(v->items, sizeof *items, &cap, (size_t)v->n + 1, INT_MAX);
        if (!items) return PW_ERR_OOM;
        v->items = items;
        v->cap = (int)cap;
    }
    char *copy = NULL;
    if (s && !(copy = pw_host_strdup(s))) return PW_ERR_OOM;
    v->items[v->n++] = copy;
    return PW_OK;
}

void pw_strvec_free(pw_strvec *v) {
    for (int i = 0; i < v->n; i++) pw_host_free(v->items[i]);
    pw_host_free(v->items);
    memset(v, 0, sizeof *v);
}

pw_status pw_strvec_copy(pw_strvec *dst, const pw_strvec *src) {
    for (int i = 0; i < src->n; i++) PW_TRY(pw_strvec_push(dst, src->items[i]));
    return PW_OK;
}
