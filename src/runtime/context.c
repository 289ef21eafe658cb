/* Runtime modes, batch descriptors, the thread-local forward context and
 * the capture-phase guard. */
#include "runtime/runtime_internal.h"

#include <inttypes.h>
#include <strings.h>

/* ---- modes ----------------------------------------------------------------- */

static const char *const runtime_mode_names[PW_RUNTIME_MODE_COUNT_] = {
    [PW_MODE_NONE] = "NONE",
    [PW_MODE_PIECEWISE] = "PIECEWISE",
    [PW_MODE_FULL] = "FULL",
};

static const char *const graph_mode_names[PW_GRAPH_MODE_COUNT_] = {
    [PW_GRAPH_NONE] = "NONE",
    [PW_GRAPH_PIECEWISE] = "PIECEWISE",
    [PW_GRAPH_FULL] = "FULL",
    [PW_GRAPH_FULL_DECODE_ONLY] = "FULL_DECODE_ONLY",
    [PW_GRAPH_FULL_AND_PIECEWISE] = "FULL_AND_PIECEWISE",
};

const char *pw_runtime_mode_name(pw_runtime_mode m) {
    return (unsigned)m < PW_RUNTIME_MODE_COUNT_ ? runtime_mode_names[m] : "?";
}

pw_status pw_runtime_mode_parse(const char *name, pw_runtime_mode *out) {
    for (int i = 0; name && i < PW_RUNTIME_MODE_COUNT_; i++) {
        if (strcasecmp(name, runtime_mode_names[i]) == 0) {
            *out = (pw_runtime_mode)i;
            return PW_OK;
        }
    }
    return pw_error(PW_ERR_PARSE, "unknown runtime mode '%s' (expected NONE, PIECEWISE or FULL)",
                    name ? name : "(null)");
}

const char *pw_graph_mode_name(pw_graph_mode m) {
    return (unsigned)m < PW_GRAPH_MODE_COUNT_ ? graph_mode_names[m] : "?";
}

pw_status pw_graph_mode_parse(const char *name, pw_graph_mode *out) {
    for (int i = 0; name && i < PW_GRAPH_MODE_COUNT_; i++) {
        if (strcasecmp(name, graph_mode_names[i]) == 0) {
            *out = (pw_graph_mode)i;
            return PW_OK;
        }
    }
    return pw_error(PW_ERR_PARSE,
                    "unknown graph mode '%s' (expected NONE, PIECEWISE, FULL, FULL_DECODE_ONLY "
                    "or FULL_AND_PIECEWISE)",
                    name ? name : "(null)");
}

pw_runtime_mode pw_graph_mode_decode_mode(pw_graph_mode m) {
    switch (m) {
    case PW_GRAPH_PIECEWISE: return PW_MODE_PIECEWISE;
    case PW_GRAPH_FULL:
    case PW_GRAPH_FULL_DECODE_ONLY:
    case PW_GRAPH_FULL_AND_PIECEWISE: return PW_MODE_FULL;
    default: return PW_MODE_NONE;
    }
}

pw_runtime_mode pw_graph_mode_mixed_mode(pw_graph_mode m) {
    switch (m) {
    case PW_GRAPH_PIECEWISE:
    case PW_GRAPH_FULL_AND_PIECEWISE: return PW_MODE_PIECEWISE;
    case PW_GRAPH_FULL: return PW_MODE_FULL;
    default: return PW_MODE_NONE;
    }
}

bool pw_graph_mode_uses(pw_graph_mode m, pw_runtime_mode rm) {
    return pw_graph_mode_decode_mode(m) == rm || pw_graph_mode_mixed_mode(m) == rm;
}

/* ---- batch descriptor ------------------------------------------------------ */

uint64_t pw_batch_desc_hash(const pw_batch_desc *d) {
    uint64_t h = (uint64_t)d->num_tokens * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(d->num_reqs + 1) * 0xC2B2AE3D27D4EB4Full;
    h ^= ((uint64_t)d->uniform << 1 | (uint64_t)d->has_lora) * 0x165667B19E3779F9ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

bool pw_batch_desc_equal(const pw_batch_desc *a, const pw_batch_desc *b) {
    return a->num_tokens == b->num_tokens && a->num_reqs == b->num_reqs &&
           a->uniform == b->uniform && a->has_lora == b->has_lora;
}

pw_batch_desc pw_batch_desc_relax_for_piecewise(pw_batch_desc d) {
    d.num_reqs = PW_NUM_REQS_UNSET;
    d.uniform = false;
    return d;
}

const char *pw_batch_desc_format(const pw_batch_desc *d, char *buf, size_t cap) {
    if (!buf || cap == 0) return buf;
    char reqs[24];
    if (d->num_reqs == PW_NUM_REQS_UNSET) snprintf(reqs, sizeof reqs, "unset");
    else snprintf(reqs, sizeof reqs, "%" PRId64, d->num_reqs);
    snprintf(buf, cap, "(num_tokens=%" PRId64 ", num_reqs=%s, uniform=%s, has_lora=%s)",
             d->num_tokens, reqs, d->uniform ? "true" : "false", d->has_lora ? "true" : "false");
    return buf;
}

/* ---- forward context --------------------------------------------------------- */

static _Thread_local pw_forward_context tl_contexts[PW_FORWARD_CONTEXT_MAX_DEPTH];
static _Thread_local int tl_context_depth;

pw_status pw_forward_context_push(const pw_forward_context *ctx) {
    if (!ctx) return pw_error(PW_ERR_INVALID_ARG, "forward context push: ctx is NULL");
    if ((unsigned)ctx->mode >= PW_RUNTIME_MODE_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "forward context push: invalid runtime mode %d",
                        (int)ctx->mode);
    if (tl_context_depth == PW_FORWARD_CONTEXT_MAX_DEPTH)
        return pw_error(PW_ERR_STATE,
                        "forward context push: nesting deeper than %d (a pop is missing?)",
                        PW_FORWARD_CONTEXT_MAX_DEPTH);
    tl_contexts[tl_context_depth++] = *ctx;
    return PW_OK;
}

pw_status pw_forward_context_pop(void) {
    if (tl_context_depth == 0)
        return pw_error(PW_ERR_STATE, "forward context pop: no forward context is set");
    tl_context_depth--;
    return PW_OK;
}

pw_status pw_forward_context_get(const pw_forward_context **out) {
    if (PW_UNLIKELY(tl_context_depth == 0)) {
        *out = NULL;
        return pw_error(PW_ERR_STATE,
                        "no forward context is set on this thread (push one with "
                        "pw_forward_context_push around the model call)");
    }
    *out = &tl_contexts[tl_context_depth - 1];
    return PW_OK;
}

const pw_forward_context *pw_forward_context_current(void) {
    return tl_context_depth ? &tl_contexts[tl_context_depth - 1] : NULL;
}

bool pw_forward_context_is_set(void) { return tl_context_depth > 0; }
int pw_forward_context_depth(void) { return tl_context_depth; }

/* ---- capture phase ------------------------------------------------------------- */

static _Thread_local int tl_capture_phase;

void pw_capture_phase_begin(void) { tl_capture_phase++; }

pw_status pw_capture_phase_end(void) {
    if (tl_capture_phase == 0)
        return pw_error(PW_ERR_STATE, "capture phase end: no capture phase is open");
    tl_capture_phase--;
    return PW_OK;
}

bool pw_capture_phase_active(void) { return tl_capture_phase > 0; }
