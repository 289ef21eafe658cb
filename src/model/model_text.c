/* The model's tokenizer through the public API. */
#include "model/llama.h"

#include <string.h>

pw_status pw_model_ids_to_caller(int32_t *host_ids, int64_t n, int32_t **ids) {
    /* hand the caller a malloc'ed array, as the public API promises */
    *ids = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!*ids) {
        pw_host_free(host_ids);
        return pw_error(PW_ERR_OOM, "tokenize: out of memory");
    }
    memcpy(*ids, host_ids, (size_t)n * sizeof(int32_t));
    pw_host_free(host_ids);
    return PW_OK;
}

pw_status pw_model_tokenize(const pw_model *m, const char *text, bool add_special, int32_t **ids,
                            int64_t *n) {
    return pw_model_tokenize_text(m, text, add_special, true, ids, n);
}

pw_status pw_model_tokenize_text(const pw_model *m, const char *text, bool add_special,
                                 bool parse_special, int32_t **ids, int64_t *n) {
    *ids = NULL;
    *n = 0;
    if (!text) return pw_error(PW_ERR_INVALID_ARG, "tokenize: text is NULL");
    unsigned flags = parse_special ? PW_TOKENIZE_PARSE_SPECIAL : 0;
    if (add_special) flags |= PW_TOKENIZE_ADD_SPECIAL;
    int32_t *tmp = NULL;
    int64_t count = 0;
    PW_TRY(pw_tokenizer_encode(m->tokenizer, text, strlen(text), flags, &tmp, &count));
    PW_TRY(pw_model_ids_to_caller(tmp, count, ids));
    *n = count;
    return PW_OK;
}

pw_status pw_model_token_piece(const pw_model *m, int32_t prev, int32_t token, const char **piece,
                               size_t *len) {
    return pw_tokenizer_decode_token(m->tokenizer, prev, token, piece, len);
}

pw_status pw_model_detokenize(const pw_model *m, const int32_t *ids, int64_t n, char **text,
                              size_t *len) {
    if (!text) return pw_error(PW_ERR_INVALID_ARG, "detokenize: no output");
    *text = NULL;
    char *tmp = NULL;
    size_t used = 0;
    PW_TRY(pw_tokenizer_decode(m->tokenizer, ids, n, &tmp, &used));
    *text = malloc(used + 1); /* the public API hands out malloc'ed memory */
    if (!*text) {
        pw_host_free(tmp);
        return pw_error(PW_ERR_OOM, "detokenize: out of memory");
    }
    memcpy(*text, tmp, used + 1);
    pw_host_free(tmp);
    if (len) *len = used;
    return PW_OK;
}

const char *pw_model_token_text(const pw_model *m, int32_t prev, int32_t token) {
    static _Thread_local char buf[256];
    const char *piece;
    size_t len;
    if (pw_tokenizer_decode_token(m->tokenizer, prev, token, &piece, &len) != PW_OK) {
        pw_clear_error();
        return "";
    }
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, piece, len);
    buf[len] = '\0';
    return buf;
}

int32_t pw_model_bos(const pw_model *m) { return pw_tokenizer_bos(m->tokenizer); }
int32_t pw_model_eos(const pw_model *m) { return pw_tokenizer_eos(m->tokenizer); }
