/* Small containers for the graph layer: string buffer, name map, string list. */
#include "graph_internal.h"

#include <stdarg.h>

static bool sb_reserve(pw_sb *sb, size_t extra) {
    if (sb->failed) return false;
    if (sb->len + extra + 1 <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1) cap *= 2;
    char *p = pw_host_realloc(sb->data, cap);
    if (!p) {
        sb->failed = true;
        return false;
    }
    sb->data = p;
    sb->cap = cap;
    return true;
}

void pw_sb_append(pw_sb *sb, const char *s, size_t n) {
    if (!sb_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = 0;
}

void pw_sb_puts(pw_sb *sb, const char *s) { pw_sb_append(sb, s, strlen(s)); }

void pw_sb_printf(pw_sb *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        pw_sb_append(sb, small, (size_t)n);
        return;
    }
    if (!sb_reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

pw_status pw_sb_finish(pw_sb *sb, char **out) {
    *out = NULL;
    if (!sb->failed && !sb->data) sb_reserve(sb, 0);
    if (sb->failed) {
        pw_sb_discard(sb);
        return pw_error(PW_ERR_OOM, "out of host memory building text");
    }
    sb->data[sb->len] = 0;
    *out = sb->data;
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return PW_OK;
}

void pw_sb_discard(pw_sb *sb) {
    pw_host_free(sb->data);
    memset(sb, 0, sizeof *sb);
}

/* FNV-1a */
static size_t hash_str(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

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
        int cap = v->cap ? v->cap * 2 : 4;
        char **items = pw_host_realloc(v->items, (size_t)cap * sizeof *items);
        if (!items) return PW_ERR_OOM;
        v->items = items;
        v->cap = cap;
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
