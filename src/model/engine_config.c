/* The engine's configuration: its defaults, its checks, and the defaults
 * that depend on the model, resolved once when an engine is made. */
#include "model/engine_internal.h"

#include <inttypes.h>
#include <string.h>
#include <strings.h>

#define ENGINE_DEFAULT_MAX_SEQS 64
#define ENGINE_DEFAULT_BATCHED_TOKENS 128
#define ENGINE_DEFAULT_MAX_MODEL_LEN 2048
#define ENGINE_DEFAULT_BLOCK_SIZE 16
#define ENGINE_DEFAULT_KV_POSITIONS 16384

const char *pw_capture_policy_name(pw_capture_policy p) {
    switch (p) {
    case PW_CAPTURE_EAGER: return "eager";
    case PW_CAPTURE_LAZY: return "lazy";
    default: return "?";
    }
}

pw_status pw_capture_policy_parse(const char *name, pw_capture_policy *out) {
    for (int p = 0; p < PW_CAPTURE_POLICY_COUNT_; p++)
        if (name && strcasecmp(name, pw_capture_policy_name((pw_capture_policy)p)) == 0) {
            *out = (pw_capture_policy)p;
            return PW_OK;
        }
    return pw_error(PW_ERR_PARSE, "unknown capture policy '%s' (expected eager or lazy)",
                    name ? name : "(null)");
}

void pw_engine_config_init(pw_engine_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->device = pw_device_from_env(); /* PW_DEVICE, or the CPU */
    cfg->mode = PW_GRAPH_MODE_DEFAULT;
    cfg->max_num_seqs = ENGINE_DEFAULT_MAX_SEQS;
    cfg->max_num_batched_tokens = ENGINE_DEFAULT_BATCHED_TOKENS;
    cfg->block_size = ENGINE_DEFAULT_BLOCK_SIZE;
    cfg->kv_cache_positions = ENGINE_DEFAULT_KV_POSITIONS;
    cfg->warmups = 1;
    cfg->progress = PW_PROGRESS_AUTO;
    cfg->print_capture_totals = true;
    cfg->capture_distinct = true;
    cfg->prefix_cache = true;
}

static pw_status check(const pw_engine_config *c) {
    if (c->max_num_seqs < 1)
        return pw_error(PW_ERR_INVALID_ARG, "max_num_seqs must be >= 1 (got %" PRId64 ")",
                        c->max_num_seqs);
    if (c->max_num_batched_tokens < c->max_num_seqs)
        return pw_error(PW_ERR_INVALID_ARG,
                        "max_num_batched_tokens (%" PRId64 ") must be >= max_num_seqs (%" PRId64
                        ")",
                        c->max_num_batched_tokens, c->max_num_seqs);
    if (c->block_size < 1 || c->block_size > 1024)
        return pw_error(PW_ERR_INVALID_ARG, "block_size must be in [1, 1024] (got %" PRId64 ")",
                        c->block_size);
    if (c->max_model_len < 0)
        return pw_error(PW_ERR_INVALID_ARG, "max_model_len must be >= 0 (got %" PRId64 ")",
                        c->max_model_len);
    if (c->warmups < 0)
        return pw_error(PW_ERR_INVALID_ARG, "warmups must be >= 0 (got %d)", c->warmups);
    if ((unsigned)c->capture_policy >= PW_CAPTURE_POLICY_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "unknown capture policy %d", (int)c->capture_policy);
    if (c->graph_budget && c->capture_policy != PW_CAPTURE_LAZY)
        return pw_error(PW_ERR_INVALID_ARG,
                        "a graph budget needs lazy capture (graphs captured at start-up are "
                        "never evicted)");
    pw_device_caps caps; /* refuses an unknown or unavailable device, with the reason */
    PW_TRY(pw_device_get_caps(c->device, &caps));
    if ((unsigned)c->mode >= PW_GRAPH_MODE_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "unknown graph mode %d", (int)c->mode);
    return PW_OK;
}

pw_status pw_engine_config_resolve(const pw_engine_config *given, const pw_model_info *in,
                                   pw_engine_config *out) {
    if (given) *out = *given;
    else pw_engine_config_init(out);
    PW_TRY(check(out));
    if (!out->max_model_len) {
        out->max_model_len = in->context;
        if (out->max_model_len > ENGINE_DEFAULT_MAX_MODEL_LEN)
            out->max_model_len = ENGINE_DEFAULT_MAX_MODEL_LEN;
    }
    if (out->kv_cache_positions <= 0) out->kv_cache_positions = ENGINE_DEFAULT_KV_POSITIONS;
    return PW_OK;
}
