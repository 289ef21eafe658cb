/* piecewise serve: POST /tokenize and POST /detokenize, shaped like
 * llama-server's. One difference, for safety: text becomes special
 * tokens only when the request sets "parse_special": true (llama-server's
 * default is true), so text from a user never turns into a control token
 * by default. */
#ifdef PW_HAVE_SERVE
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool refuse(serve_error *err, const char *param, const char *code, const char *msg) {
    serve_error_set(err, 400, "invalid_request_error", param, code, "%s", msg);
    return false;
}

/* An optional boolean option (absent or null: false). */
static bool option(const cJSON *root, const char *key, bool *out, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = false;
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) {
        serve_error_set(err, 400, "invalid_request_error", key, "invalid_value",
                        "'%s' must be true or false", key);
        return false;
    }
    *out = cJSON_IsTrue(v);
    return true;
}

static char *finish(cJSON *root, serve_error *err) {
    char *s = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!s) serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    return s;
}

/* A piece as llama-server gives it: a string when it is valid UTF-8, else
 * the list of its bytes. */
static cJSON *piece_json(const char *piece, size_t len) {
    if (serve_utf8_valid(piece, len) && !memchr(piece, '\0', len)) {
        char *t = malloc(len + 1);
        if (!t) return NULL;
        memcpy(t, piece, len);
        t[len] = '\0';
        cJSON *s = cJSON_CreateString(t);
        free(t);
        return s;
    }
    cJSON *bytes = cJSON_CreateArray();
    for (size_t i = 0; bytes && i < len; i++)
        cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
    return bytes;
}

static cJSON *tokens_json(const pw_model *m, const int32_t *ids, int64_t n, bool with_pieces) {
    cJSON *root = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(root, "tokens");
    for (int64_t i = 0; i < n; i++) {
        if (!with_pieces) {
            cJSON_AddItemToArray(tokens, cJSON_CreateNumber(ids[i]));
            continue;
        }
        /* each piece after the one before it, so the pieces join into
         * what /detokenize gives */
        const char *piece = "";
        size_t len = 0;
        if (pw_model_token_piece(m, i ? ids[i - 1] : -1, ids[i], &piece, &len) != PW_OK)
            pw_clear_error();
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", ids[i]);
        cJSON_AddItemToObject(o, "piece", piece_json(piece, len));
        cJSON_AddItemToArray(tokens, o);
    }
    return root;
}

bool serve_tokenize(const pw_model *m, const char *body, size_t len, char **out,
                    serve_error *err) {
    *out = NULL;
    cJSON *root = serve_parse_body(body, len, err);
    if (!root) return false;
    bool ok = true, add_special = false, parse_special = false, with_pieces = false;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!cJSON_IsObject(root))
        ok = refuse(err, NULL, "invalid_json", "the request body must be a JSON object");
    else if (!content)
        ok = refuse(err, "content", "missing_required_parameter", "'content' is required");
    else if (!cJSON_IsString(content))
        ok = refuse(err, "content", "invalid_value", "'content' must be a string");
    if (ok) ok = option(root, "add_special", &add_special, err);
    if (ok) ok = option(root, "parse_special", &parse_special, err);
    if (ok) ok = option(root, "with_pieces", &with_pieces, err);
    if (ok) {
        int32_t *ids = NULL;
        int64_t n = 0;
        if (pw_model_tokenize_text(m, content->valuestring, add_special, parse_special, &ids,
                                   &n) != PW_OK) {
            ok = refuse(err, "content", NULL, pw_last_error());
            pw_clear_error();
        } else {
            *out = finish(tokens_json(m, ids, n, with_pieces), err);
            ok = *out != NULL;
        }
        free(ids);
    }
    cJSON_Delete(root);
    return ok;
}

bool serve_detokenize(const pw_model *m, const char *body, size_t len, char **out,
                      serve_error *err) {
    *out = NULL;
    cJSON *root = serve_parse_body(body, len, err);
    if (!root) return false;
    bool ok = true;
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsObject(root))
        ok = refuse(err, NULL, "invalid_json", "the request body must be a JSON object");
    else if (!tokens)
        ok = refuse(err, "tokens", "missing_required_parameter", "'tokens' is required");
    else if (!cJSON_IsArray(tokens))
        ok = refuse(err, "tokens", "invalid_value", "'tokens' must be an array of token ids");
    int n = ok ? cJSON_GetArraySize(tokens) : 0;
    int32_t *ids = ok ? malloc((size_t)(n ? n : 1) * sizeof *ids) : NULL;
    if (ok && !ids) {
        serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        ok = false;
    }
    int64_t vocab = pw_model_get_info(m)->vocab, i = 0;
    const cJSON *t;
    if (ok) cJSON_ArrayForEach(t, tokens) {
        if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0 && t->valuedouble < (double)vocab) ||
            t->valuedouble != floor(t->valuedouble)) {
            char param[48];
            snprintf(param, sizeof param, "tokens[%lld]", (long long)i);
            serve_error_set(err, 400, "invalid_request_error", param, "invalid_value",
                            "'%s' must be a token id from 0 to %lld", param, (long long)vocab - 1);
            ok = false;
            break;
        }
        ids[i++] = (int32_t)t->valuedouble;
    }
    if (ok) {
        char *text = NULL;
        size_t tl = 0;
        if (pw_model_detokenize(m, ids, i, &text, &tl) != PW_OK) {
            ok = refuse(err, "tokens", NULL, pw_last_error());
            pw_clear_error();
        } else {
            /* a model's pieces may be any bytes; JSON carries valid text */
            char *valid = serve_utf8_repair(text, tl);
            cJSON *res = cJSON_CreateObject();
            cJSON_AddStringToObject(res, "content", valid ? valid : "");
            free(valid);
            *out = finish(res, err);
            ok = *out != NULL;
        }
        free(text);
    }
    free(ids);
    cJSON_Delete(root);
    return ok;
}
#endif
