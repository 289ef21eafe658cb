/* The dispatcher: capture sizes, the padding table, the captured keys per
 * runtime mode, and dispatch itself.
 *
 * Dispatch is on every step's path, so the keys are not looked up in a set:
 * padding gives the index of the capture size, and two small tables indexed
 * by (size index, has_lora) say whether the exact FULL key exists and which
 * mode the relaxed key has. */
#include "runtime/runtime_internal.h"

#include <inttypes.h>
#include <string.h>

/* Largest capture size the padding table is built for (one entry per token
 * count up to the maximum). */
#define PW_MAX_CAPTURE_SIZE_VALUE ((int64_t)1 << 20)
/* Default list: [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16). */
#define PW_DEFAULT_SMALL_STEP 8
#define PW_DEFAULT_LARGE_START 256
#define PW_DEFAULT_LARGE_STEP 16

struct pw_dispatcher {
    pw_graph_mode mode;
    int64_t max_num_seqs;
    bool lora_enabled;
    int64_t *sizes; /* ascending */
    int n_sizes;
    int64_t max_size;
    uint16_t *pad_index;   /* [max_size + 1]: index of the smallest size >= n */
    bool *full_uniform;    /* [n_sizes * 2]: exact FULL key {s, s, uniform} exists */
    uint8_t *relaxed_mode; /* [n_sizes * 2]: mode of the relaxed key {s, unset, false}, or NONE */
    pw_capture_item *items;
    size_t n_items;
    pw_lazy_capture *lazy; /* borrowed; NULL: every listed item is captured up front */
};

void pw_dispatcher_config_init(pw_dispatcher_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = PW_GRAPH_MODE_DEFAULT;
    cfg->max_num_seqs = 256;
    cfg->max_num_batched_tokens = 8192;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static pw_status default_sizes(int64_t max, int64_t *sizes, int *n) {
    int k = 0;
    static const int64_t smallest[] = {1, 2, 4};
    for (size_t i = 0; i < PW_ARRAY_LEN(smallest); i++)
        if (smallest[i] <= max) sizes[k++] = smallest[i];
    for (int64_t s = PW_DEFAULT_SMALL_STEP; s < PW_DEFAULT_LARGE_START && s <= max;
         s += PW_DEFAULT_SMALL_STEP)
        sizes[k++] = s;
    for (int64_t s = PW_DEFAULT_LARGE_START; s <= max && k < PW_MAX_CAPTURE_SIZES;
         s += PW_DEFAULT_LARGE_STEP)
        sizes[k++] = s;
    *n = k;
    return PW_OK;
}

/* Fills sizes/n from the config; every rule about lists lives here. */
static pw_status resolve_sizes(const pw_dispatcher_config *cfg, int64_t *sizes, int *n) {
    if (cfg->max_capture_size < 0)
        return pw_error(PW_ERR_INVALID_ARG, "dispatcher: max_capture_size %" PRId64 " is negative",
                        cfg->max_capture_size);
    if (cfg->max_capture_size > cfg->max_num_batched_tokens)
        return pw_error(PW_ERR_INVALID_ARG,
                        "dispatcher: max_capture_size %" PRId64
                        " exceeds max_num_batched_tokens %" PRId64,
                        cfg->max_capture_size, cfg->max_num_batched_tokens);
    if (!cfg->capture_sizes) {
        if (cfg->n_capture_sizes != 0)
            return pw_error(PW_ERR_INVALID_ARG,
                            "dispatcher: n_capture_sizes is %d but capture_sizes is NULL",
                            cfg->n_capture_sizes);
        int64_t max = cfg->max_capture_size;
        if (max == 0) {
            /* min(2 * max_num_seqs, 512) without overflowing the product */
            max = cfg->max_num_seqs > PW_DEFAULT_MAX_CAPTURE_SIZE / 2 ? PW_DEFAULT_MAX_CAPTURE_SIZE
                                                                      : 2 * cfg->max_num_seqs;
            if (max > cfg->max_num_batched_tokens) max = cfg->max_num_batched_tokens;
        }
        return default_sizes(max, sizes, n);
    }
    if (cfg->n_capture_sizes < 1 || cfg->n_capture_sizes > PW_MAX_CAPTURE_SIZES)
        return pw_error(PW_ERR_INVALID_ARG,
                        "dispatcher: a capture size list needs 1 to %d entries, got %d",
                        PW_MAX_CAPTURE_SIZES, cfg->n_capture_sizes);
    int k = 0;
    for (int i = 0; i < cfg->n_capture_sizes; i++) {
        int64_t s = cfg->capture_sizes[i];
        if (s < 1 || s > PW_MAX_CAPTURE_SIZE_VALUE)
            return pw_error(PW_ERR_INVALID_ARG,
                            "dispatcher: capture size %" PRId64 " (entry %d) is outside [1, %" PRId64
                            "]",
                            s, i, PW_MAX_CAPTURE_SIZE_VALUE);
        if (s > cfg->max_num_batched_tokens) {
            pw_log_info("dispatcher: dropping capture size %" PRId64
                        " above max_num_batched_tokens %" PRId64,
                        s, cfg->max_num_batched_tokens);
            continue;
        }
        sizes[k++] = s;
    }
    if (k == 0)
        return pw_error(PW_ERR_INVALID_ARG,
                        "dispatcher: every capture size exceeds max_num_batched_tokens %" PRId64,
                        cfg->max_num_batched_tokens);
    qsort(sizes, (size_t)k, sizeof *sizes, cmp_i64);
    int unique = 1;
    for (int i = 1; i < k; i++)
        if (sizes[i] != sizes[unique - 1]) sizes[unique++] = sizes[i];
    if (cfg->max_capture_size && cfg->max_capture_size != sizes[unique - 1])
        return pw_error(PW_ERR_INVALID_ARG,
                        "dispatcher: max_capture_size %" PRId64
                        " conflicts with the capture size list, whose largest kept size is "
                        "%" PRId64,
                        cfg->max_capture_size, sizes[unique - 1]);
    *n = unique;
    return PW_OK;
}

static void add_item(pw_dispatcher *d, pw_runtime_mode mode, pw_batch_desc desc) {
    d->items[d->n_items].mode = mode;
    d->items[d->n_items].desc = desc;
    d->n_items++;
}

/* The keys per mode, mirroring which batches each configured mode graphs:
 * the mixed mode's relaxed key for every size, and for a separate decode
 * routine (FULL_DECODE_ONLY, FULL_AND_PIECEWISE) exact FULL keys for uniform
 * decode batches of up to max_num_seqs requests. */
static pw_status build_keys(pw_dispatcher *d) {
    size_t n2 = (size_t)d->n_sizes * 2;
    d->full_uniform = pw_host_calloc(n2, sizeof *d->full_uniform);
    d->relaxed_mode = pw_host_calloc(n2, sizeof *d->relaxed_mode);
    d->items = pw_host_calloc(n2 * 2, sizeof *d->items);
    if (!d->full_uniform || !d->relaxed_mode || !d->items) return PW_ERR_OOM;
    pw_runtime_mode mixed = pw_graph_mode_mixed_mode(d->mode);
    pw_runtime_mode decode = pw_graph_mode_decode_mode(d->mode);
    bool separate_decode = decode == PW_MODE_FULL && mixed != PW_MODE_FULL;
    int loras = d->lora_enabled ? 2 : 1;
    for (int i = 0; i < d->n_sizes; i++) {
        for (int l = 0; l < loras; l++) {
            d->relaxed_mode[i * 2 + l] = (uint8_t)mixed;
            d->full_uniform[i * 2 + l] = separate_decode && d->sizes[i] <= d->max_num_seqs;
        }
    }
    /* PIECEWISE first, then FULL; within a mode, largest first so smaller
     * graphs fit into memory the larger ones already reserved. */
    static const pw_runtime_mode order[] = {PW_MODE_PIECEWISE, PW_MODE_FULL};
    for (size_t m = 0; m < PW_ARRAY_LEN(order); m++) {
        for (int i = d->n_sizes - 1; i >= 0; i--) {
            for (int l = 0; l < loras; l++) {
                int64_t s = d->sizes[i];
                if (d->relaxed_mode[i * 2 + l] == order[m])
                    add_item(d, order[m], pw_batch_desc_make(s, PW_NUM_REQS_UNSET, false, l));
                if (order[m] == PW_MODE_FULL && d->full_uniform[i * 2 + l])
                    add_item(d, PW_MODE_FULL, pw_batch_desc_make(s, s, true, l));
            }
        }
    }
    return PW_OK;
}

pw_status pw_dispatcher_new(const pw_dispatcher_config *cfg, pw_dispatcher **out) {
    *out = NULL;
    if (!cfg) return pw_error(PW_ERR_INVALID_ARG, "dispatcher: config is NULL");
    if ((unsigned)cfg->mode >= PW_GRAPH_MODE_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "dispatcher: invalid graph mode %d", (int)cfg->mode);
    if (cfg->max_num_seqs < 1)
        return pw_error(PW_ERR_INVALID_ARG, "dispatcher: max_num_seqs must be >= 1, got %" PRId64,
                        cfg->max_num_seqs);
    if (cfg->max_num_batched_tokens < 1)
        return pw_error(PW_ERR_INVALID_ARG,
                        "dispatcher: max_num_batched_tokens must be >= 1, got %" PRId64,
                        cfg->max_num_batched_tokens);
    int64_t sizes[PW_MAX_CAPTURE_SIZES];
    int n = 0;
    PW_TRY(resolve_sizes(cfg, sizes, &n));

    pw_dispatcher *d = pw_host_calloc(1, sizeof *d);
    if (!d) return PW_ERR_OOM;
    d->mode = cfg->mode;
    d->max_num_seqs = cfg->max_num_seqs;
    d->lora_enabled = cfg->lora_enabled;
    d->n_sizes = n;
    d->max_size = sizes[n - 1];
    d->sizes = pw_host_alloc((size_t)n * sizeof *d->sizes);
    d->pad_index = pw_host_alloc((size_t)(d->max_size + 1) * sizeof *d->pad_index);
    if (d->sizes) memcpy(d->sizes, sizes, (size_t)n * sizeof *sizes);
    pw_status s = d->sizes && d->pad_index ? build_keys(d) : PW_ERR_OOM;
    if (s != PW_OK) {
        pw_dispatcher_free(d);
        return s;
    }
    d->pad_index[0] = 0;
    int idx = 0;
    for (int64_t t = 1; t <= d->max_size; t++) {
        while (d->sizes[idx] < t) idx++;
        d->pad_index[t] = (uint16_t)idx;
    }
    *out = d;
    return PW_OK;
}

void pw_dispatcher_free(pw_dispatcher *d) {
    if (!d) return;
    pw_host_free(d->sizes);
    pw_host_free(d->pad_index);
    pw_host_free(d->full_uniform);
    pw_host_free(d->relaxed_mode);
    pw_host_free(d->items);
    pw_host_free(d);
}

pw_status pw_dispatch(const pw_dispatcher *d, int64_t num_tokens, bool uniform_decode,
                      bool has_lora, pw_runtime_mode *mode, pw_batch_desc *desc) {
    if (PW_UNLIKELY(num_tokens < 1))
        return pw_error(PW_ERR_INVALID_ARG, "dispatch: num_tokens must be >= 1, got %" PRId64,
                        num_tokens);
    if (d->mode != PW_GRAPH_NONE && num_tokens <= d->max_size) {
        int i = d->pad_index[num_tokens];
        int slot = i * 2 + (has_lora ? 1 : 0);
        int64_t padded = d->sizes[i];
        if (uniform_decode && d->full_uniform[slot]) {
            *mode = PW_MODE_FULL;
            *desc = pw_batch_desc_make(padded, padded, true, has_lora);
            return PW_OK;
        }
        if (d->relaxed_mode[slot] != PW_MODE_NONE) {
            *mode = (pw_runtime_mode)d->relaxed_mode[slot];
            *desc = pw_batch_desc_make(padded, PW_NUM_REQS_UNSET, false, has_lora);
            return PW_OK;
        }
    }
    *mode = PW_MODE_NONE;
    *desc = pw_batch_desc_make(num_tokens, uniform_decode ? num_tokens : PW_NUM_REQS_UNSET,
                               uniform_decode, has_lora);
    return PW_OK;
}

pw_graph_mode pw_dispatcher_graph_mode(const pw_dispatcher *d) { return d->mode; }

const int64_t *pw_dispatcher_capture_sizes(const pw_dispatcher *d, int *n) {
    *n = d->n_sizes;
    return d->sizes;
}

int64_t pw_dispatcher_max_capture_size(const pw_dispatcher *d) { return d->max_size; }

int64_t pw_dispatcher_padded_size(const pw_dispatcher *d, int64_t n) {
    if (n < 1 || n > d->max_size) return -1;
    return d->sizes[d->pad_index[n]];
}

const pw_capture_item *pw_dispatcher_capture_list(const pw_dispatcher *d, size_t *n) {
    *n = d->n_items;
    return d->items;
}

void pw_dispatcher_set_lazy_capture(pw_dispatcher *d, pw_lazy_capture *lz) { d->lazy = lz; }

/* The dispatcher stays the only router: lazy capture changes what a step
 * runs with here, from what the policy says is captured. */
pw_status pw_dispatcher_route(pw_dispatcher *d, int64_t num_tokens, bool uniform_decode,
                              bool has_lora, pw_route *out) {
    out->kind = PW_ROUTE_DISPATCHED;
    out->capture.mode = PW_MODE_NONE;
    out->capture.desc = pw_batch_desc_make(0, PW_NUM_REQS_UNSET, false, false);
    PW_TRY(pw_dispatch(d, num_tokens, uniform_decode, has_lora, &out->mode, &out->desc));
    if (!d->lazy || out->mode == PW_MODE_NONE) return PW_OK;
    pw_capture_item item = {out->mode, out->desc};
    if (pw_lazy_capture_use(d->lazy, &item)) return PW_OK;
    out->capture = item;
    /* a larger captured size of the same kind of key: more padding rows, the
     * same tokens (the kernels are batch-invariant) */
    for (int i = d->pad_index[out->desc.num_tokens] + 1; i < d->n_sizes; i++) {
        int64_t s = d->sizes[i];
        pw_capture_item larger = {
            out->mode, out->desc.uniform ? pw_batch_desc_make(s, s, true, has_lora)
                                         : pw_batch_desc_make(s, PW_NUM_REQS_UNSET, false, has_lora)};
        if (!pw_lazy_capture_use(d->lazy, &larger)) continue;
        out->desc = larger.desc;
        out->kind = PW_ROUTE_PADDED;
        pw_lazy_capture_count_route(d->lazy, out->kind);
        return PW_OK;
    }
    out->mode = PW_MODE_NONE;
    out->desc = pw_batch_desc_make(num_tokens, uniform_decode ? num_tokens : PW_NUM_REQS_UNSET,
                                   uniform_decode, has_lora);
    out->kind = PW_ROUTE_EAGER;
    pw_lazy_capture_count_route(d->lazy, out->kind);
    return PW_OK;
}
