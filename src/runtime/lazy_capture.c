/* Lazy capture's bookkeeping: which items (mode, descriptor) have graphs,
 * when each was last used, the bytes they hold, and least-recently-used
 * eviction past a budget. The dispatcher consults it when it routes a step
 * (pw_dispatcher_route); whoever captures an item records it here.
 *
 * Items are few (one per capture size and mode), so they live in a plain
 * array searched linearly. */
#include "runtime/runtime_internal.h"

#include <string.h>

typedef struct lazy_item {
    pw_capture_item item;
    size_t bytes;
    uint64_t last_use;
} lazy_item;

struct pw_lazy_capture {
    size_t budget; /* 0: none */
    pw_evict_fn evict;
    void *evict_user;
    lazy_item *items;
    size_t n, cap;
    uint64_t clock;
    pw_lazy_capture_stats stats;
};

static bool item_equal(const pw_capture_item *a, const pw_capture_item *b) {
    return a->mode == b->mode && pw_batch_desc_equal(&a->desc, &b->desc);
}

static lazy_item *find(const pw_lazy_capture *lz, const pw_capture_item *item) {
    for (size_t i = 0; i < lz->n; i++)
        if (item_equal(&lz->items[i].item, item)) return &lz->items[i];
    return NULL;
}

pw_status pw_lazy_capture_new(size_t graph_budget, pw_evict_fn evict, void *user,
                              pw_lazy_capture **out) {
    *out = NULL;
    if (graph_budget && !evict)
        return pw_error(PW_ERR_INVALID_ARG,
                        "lazy capture: a graph budget needs an evict callback to free graphs with");
    pw_lazy_capture *lz = pw_host_calloc(1, sizeof *lz);
    if (!lz) return PW_ERR_OOM;
    lz->budget = graph_budget;
    lz->evict = evict;
    lz->evict_user = user;
    *out = lz;
    return PW_OK;
}

void pw_lazy_capture_free(pw_lazy_capture *lz) {
    if (!lz) return;
    pw_host_free(lz->items);
    pw_host_free(lz);
}

bool pw_lazy_capture_has(const pw_lazy_capture *lz, const pw_capture_item *item) {
    return find(lz, item) != NULL;
}

bool pw_lazy_capture_use(pw_lazy_capture *lz, const pw_capture_item *item) {
    lazy_item *it = find(lz, item);
    if (it) it->last_use = ++lz->clock;
    return it != NULL;
}

void pw_lazy_capture_count_route(pw_lazy_capture *lz, pw_route_kind kind) {
    if (kind == PW_ROUTE_PADDED) lz->stats.padded++;
    else if (kind == PW_ROUTE_EAGER) lz->stats.eager++;
}

static pw_status evict_at(pw_lazy_capture *lz, size_t index) {
    lazy_item it = lz->items[index];
    PW_TRY(lz->evict(lz->evict_user, &it.item));
    lz->items[index] = lz->items[--lz->n];
    lz->stats.bytes -= it.bytes;
    lz->stats.evicted++;
    char d[PW_BATCH_DESC_FORMAT_CAP];
    pw_log_debug("lazy capture: evicted %s %s (%zu bytes) to stay within the graph budget",
                 pw_runtime_mode_name(it.item.mode),
                 pw_batch_desc_format(&it.item.desc, d, sizeof d), it.bytes);
    return PW_OK;
}

pw_status pw_lazy_capture_add(pw_lazy_capture *lz, const pw_capture_item *item, size_t bytes) {
    char d[PW_BATCH_DESC_FORMAT_CAP];
    if (find(lz, item))
        return pw_error(PW_ERR_STATE, "lazy capture: %s %s is already recorded as captured",
                        pw_runtime_mode_name(item->mode),
                        pw_batch_desc_format(&item->desc, d, sizeof d));
    lazy_item *items = pw_host_grow(lz->items, sizeof *items, &lz->cap, lz->n + 1, SIZE_MAX);
    if (!items) return PW_ERR_OOM;
    lz->items = items;
    lz->items[lz->n++] = (lazy_item){*item, bytes, ++lz->clock};
    lz->stats.captured++;
    lz->stats.bytes += bytes;
    /* the least recently used first, never the item just captured */
    while (lz->budget && lz->stats.bytes > lz->budget && lz->n > 1) {
        size_t oldest = SIZE_MAX;
        for (size_t i = 0; i < lz->n; i++) {
            if (item_equal(&lz->items[i].item, item)) continue;
            if (oldest == SIZE_MAX || lz->items[i].last_use < lz->items[oldest].last_use)
                oldest = i;
        }
        PW_TRY(evict_at(lz, oldest));
    }
    return PW_OK;
}

void pw_lazy_capture_get_stats(const pw_lazy_capture *lz, pw_lazy_capture_stats *out) {
    *out = lz->stats;
}
