/* piecewise serve: the "logprobs" object of an answer, in OpenAI's shapes.
 * The values are the engine's: the model's log-softmax before any
 * sampling transform (pw_step_token). */
#ifdef PW_HAVE_SERVE
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A log-probability as JSON: the float's value to its own precision (not
 * 17 digits of its double), and -9999 for -inf, as OpenAI writes a token
 * that cannot occur (JSON has no infinity). */
static cJSON *logprob_number(float lp) {
    if (!isfinite(lp)) return cJSON_CreateNumber(-9999.0);
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", (double)lp);
    return cJSON_CreateNumber(strtod(buf, NULL));
}

/* The bytes of token's piece after prev. */
static void token_bytes(const pw_model *m, int32_t prev, int32_t token, const char **piece,
                        size_t *len) {
    if (pw_model_token_piece(m, prev, token, piece, len) != PW_OK) {
        pw_clear_error();
        *piece = "";
        *len = 0;
    }
}

static cJSON *text_of(const char *piece, size_t len) {
    char *t = serve_utf8_repair(piece, len);
    cJSON *s = cJSON_CreateString(t ? t : "");
    free(t);
    return s;
}

/* Chat's entry for one token: {"token", "logprob", "bytes"}. */
static cJSON *chat_entry(const pw_model *m, int32_t prev, int32_t token, float lp) {
    const char *piece;
    size_t len;
    token_bytes(m, prev, token, &piece, &len);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "token", text_of(piece, len));
    cJSON_AddItemToObject(o, "logprob", logprob_number(lp));
    cJSON *bytes = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < len; i++)
        cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
    return o;
}

static cJSON *chat_logprobs(const pw_model *m, const serve_logprob *lp, int64_t n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(root, "content");
    for (int64_t i = 0; i < n; i++) {
        cJSON *e = chat_entry(m, lp[i].prev, lp[i].token, lp[i].logprob);
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int32_t k = 0; k < lp[i].n_top; k++)
            cJSON_AddItemToArray(top,
                                 chat_entry(m, lp[i].prev, lp[i].top[k].token, lp[i].top[k].logprob));
        cJSON_AddItemToArray(content, e);
    }
    cJSON_AddNullToObject(root, "refusal");
    return root;
}

static cJSON *completion_logprobs(const pw_model *m, const serve_logprob *lp, int64_t n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(root, "tokens");
    cJSON *values = cJSON_AddArrayToObject(root, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(root, "top_logprobs");
    cJSON *offsets = cJSON_AddArrayToObject(root, "text_offset");
    for (int64_t i = 0; i < n; i++) {
        const char *piece;
        size_t len;
        token_bytes(m, lp[i].prev, lp[i].token, &piece, &len);
        cJSON_AddItemToArray(tokens, text_of(piece, len));
        cJSON_AddItemToArray(values, logprob_number(lp[i].logprob));
        cJSON *top = cJSON_CreateObject();
        for (int32_t k = 0; k < lp[i].n_top; k++) {
            token_bytes(m, lp[i].prev, lp[i].top[k].token, &piece, &len);
            char *t = serve_utf8_repair(piece, len);
            /* two tokens with the same text keep the likelier (the first) */
            if (t && !cJSON_GetObjectItemCaseSensitive(top, t))
                cJSON_AddItemToObject(top, t, logprob_number(lp[i].top[k].logprob));
            free(t);
        }
        cJSON_AddItemToArray(tops, top);
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)lp[i].off));
    }
    return root;
}

cJSON *serve_logprobs_json(const pw_model *m, serve_kind kind, const serve_logprob *lp,
                           int64_t n) {
    return kind == SERVE_CHAT ? chat_logprobs(m, lp, n) : completion_logprobs(m, lp, n);
}
#endif
