/* The memory plan (include/piecewise/memory_plan.h): resident parts, the
 * graph pool from the capture dry run, and the units that fit in what a
 * budget leaves. Every figure is a pool's reservation, found against
 * shadow pools (address space only), so what the plan says is what the
 * real allocations then reserve, rounding included. */
#include "internal.h"

#include "piecewise/memory_plan.h"

#include <inttypes.h>
#include <string.h>

typedef struct plan_part {
    char name[32];
    size_t bytes;
} plan_part;

struct pw_memory_plan {
    pw_device device;
    size_t budget; /* 0: none */
    plan_part parts[PW_MEMORY_PLAN_MAX_PARTS];
    int n_parts;
    /* the last pw_memory_plan_fit: how many units, their reservation */
    char unit_name[32];
    int64_t units;
    size_t units_reserved;
};

pw_status pw_memory_plan_new(pw_device device, size_t budget, pw_memory_plan **out) {
    if (!out) return pw_error(PW_ERR_INVALID_ARG, "memory plan: out is NULL");
    *out = NULL;
    pw_memory_plan *p = pw_host_calloc(1, sizeof *p);
    if (!p) return PW_ERR_OOM;
    p->device = device;
    p->budget = budget;
    *out = p;
    return PW_OK;
}

void pw_memory_plan_free(pw_memory_plan *p) { pw_host_free(p); }

pw_status pw_memory_plan_add(pw_memory_plan *p, const char *name, size_t bytes) {
    if (!p || !name) return pw_error(PW_ERR_INVALID_ARG, "memory plan: add needs a plan and a name");
    if (p->n_parts == PW_MEMORY_PLAN_MAX_PARTS)
        return pw_error(PW_ERR_INVALID_ARG, "memory plan: more than %d parts (adding '%s')",
                        PW_MEMORY_PLAN_MAX_PARTS, name);
    plan_part *part = &p->parts[p->n_parts++];
    snprintf(part->name, sizeof part->name, "%s", name);
    part->bytes = bytes;
    return PW_OK;
}

size_t pw_memory_plan_resident(const pw_memory_plan *p) {
    size_t total = 0;
    for (int i = 0; p && i < p->n_parts; i++)
        total = p->parts[i].bytes > SIZE_MAX - total ? SIZE_MAX : total + p->parts[i].bytes;
    return total;
}

pw_status pw_memory_plan_graphs(pw_memory_plan *p, pw_module *m, pw_module_inputs_fn inputs,
                                void *user, const pw_capture_options *opts,
                                pw_memory_standins_fn standins, void *standins_user,
                                size_t *bytes) {
    if (bytes) *bytes = 0;
    if (!p || !m || !inputs)
        return pw_error(PW_ERR_INVALID_ARG, "memory plan: graphs needs a plan, a module and "
                                            "an inputs function");
    pw_pool *shadow = NULL;
    pw_status s = PW_OK;
    if (standins) {
        PW_TRY(pw_pool_new(p->device, "stand-ins (memory plan)", &shadow));
        s = pw_pool_set_shadow(shadow, true);
        if (s == PW_OK) s = standins(standins_user, shadow);
    }
    pw_capture_plan_report rep;
    memset(&rep, 0, sizeof rep);
    if (s == PW_OK) s = pw_module_plan_capture(m, inputs, user, opts, &rep);
    if (standins) {
        /* forgotten even after a failure: nothing may keep a shadow address */
        pw_status forget = standins(standins_user, NULL);
        if (s == PW_OK) s = forget;
        pw_pool_free(shadow);
    }
    PW_TRY(s);
    PW_TRY(pw_memory_plan_add(p, "graphs (predicted)", rep.graph_pool_bytes));
    if (bytes) *bytes = rep.graph_pool_bytes;
    return PW_OK;
}

pw_status pw_memory_reservation(pw_device device, size_t bytes, size_t *reserved) {
    if (!reserved) return pw_error(PW_ERR_INVALID_ARG, "memory plan: reserved is NULL");
    *reserved = 0;
    pw_pool *pool = NULL;
    PW_TRY(pw_pool_new(device, "sizing (memory plan)", &pool));
    pw_status s = pw_pool_set_shadow(pool, true);
    void *ptr;
    if (s == PW_OK) s = pw_pool_alloc(pool, bytes, &ptr);
    pw_pool_stats st;
    pw_pool_get_stats(pool, &st);
    pw_pool_free(pool);
    if (s == PW_OK) *reserved = st.reserved;
    return s;
}

static pw_status too_small(const pw_memory_plan *p, const char *unit_name, size_t one_unit) {
    char text[32];
    pw_sb sb = {0};
    pw_sb_printf(&sb, "memory budget of %zu bytes (%s) is too small: ", p->budget,
                 pw_format_bytes(p->budget, text, sizeof text));
    for (int i = 0; i < p->n_parts; i++)
        pw_sb_printf(&sb, "%s %zu + ", p->parts[i].name, p->parts[i].bytes);
    size_t resident = pw_memory_plan_resident(p);
    size_t need = one_unit > SIZE_MAX - resident ? SIZE_MAX : resident + one_unit;
    pw_sb_printf(&sb, "one %s %zu = %zu bytes needed at least", unit_name, one_unit, need);
    char *msg = NULL;
    if (pw_sb_finish(&sb, &msg) != PW_OK)
        return pw_error(PW_ERR_INVALID_ARG, "memory budget of %zu bytes is too small", p->budget);
    pw_status s = pw_error(PW_ERR_INVALID_ARG, "%s", msg);
    free(msg);
    return s;
}

pw_status pw_memory_plan_fit(pw_memory_plan *p, const char *unit_name,
                             pw_memory_unit_bytes_fn unit_bytes, void *user, int64_t max_units,
                             int64_t *units) {
    if (!p || !unit_name || !unit_bytes || !units || max_units < 1)
        return pw_error(PW_ERR_INVALID_ARG, "memory plan: fit needs a plan, a unit name and "
                                            "size, at least one unit allowed and units");
    *units = 0;
    snprintf(p->unit_name, sizeof p->unit_name, "%s", unit_name);
    int64_t n = max_units;
    if (p->budget) {
        size_t one, resident = pw_memory_plan_resident(p);
        PW_TRY(pw_memory_reservation(p->device, unit_bytes(user, 1), &one));
        size_t avail = p->budget > resident ? p->budget - resident : 0;
        if (one > avail) return too_small(p, unit_name, one);
        /* a reservation is at least its bytes, and unit_bytes(n) >= n units'
         * worth: at most avail / bytes-of-one units fit */
        size_t raw_one = unit_bytes(user, 1);
        int64_t lo = 1, hi = raw_one ? (int64_t)(avail / raw_one) : max_units;
        if (hi > max_units) hi = max_units;
        if (hi < 1) hi = 1;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo + 1) / 2;
            size_t r;
            PW_TRY(pw_memory_reservation(p->device, unit_bytes(user, mid), &r));
            if (r <= avail) lo = mid;
            else hi = mid - 1;
        }
        n = lo;
    }
    PW_TRY(pw_memory_reservation(p->device, unit_bytes(user, n), &p->units_reserved));
    p->units = n;
    *units = n;
    return PW_OK;
}

void pw_memory_plan_describe(const pw_memory_plan *p, char *buf, size_t cap) {
    if (!buf || !cap) return;
    buf[0] = '\0';
    if (!p) return;
    size_t len = 0;
    char b[32];
#define PUT(...)                                                                               \
    do {                                                                                       \
        if (len < cap) {                                                                       \
            int k_ = snprintf(buf + len, cap - len, __VA_ARGS__);                              \
            len = k_ < 0 ? cap : len + (size_t)k_;                                             \
        }                                                                                      \
    } while (0)
    if (p->budget) PUT("memory budget %s: ", pw_format_bytes(p->budget, b, sizeof b));
    else PUT("memory (no budget): ");
    for (int i = 0; i < p->n_parts; i++)
        PUT("%s%s %s", i ? ", " : "", p->parts[i].name,
            pw_format_bytes(p->parts[i].bytes, b, sizeof b));
    if (p->units)
        PUT("%s%" PRId64 " %ss %s", p->n_parts ? ", " : "", p->units, p->unit_name,
            pw_format_bytes(p->units_reserved, b, sizeof b));
    size_t used = pw_memory_plan_resident(p);
    used = p->units_reserved > SIZE_MAX - used ? SIZE_MAX : used + p->units_reserved;
    if (p->budget && used <= p->budget)
        PUT(", unused %s", pw_format_bytes(p->budget - used, b, sizeof b));
#undef PUT
}
