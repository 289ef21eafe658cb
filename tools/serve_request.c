/* piecewise serve: request parsing and validation (cJSON). Every problem
 * a client can cause becomes an OpenAI-style error with a 4xx status. */
#ifdef PW_HAVE_SERVE
#include "serve.h"

#include "piecewise/extend.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

void serve_error_set(serve_error *err, int status, const char *type, const char *param,
                     const char *code, const char *fmt, ...) {
    err->status = status;
    err->type = type;
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

char *serve_error_json(const serve_error *err) {
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", err->message);
    cJSON_AddStringToObject(e, "type", err->type ? err->type : "invalid_request_error");
    if (err->param[0]) cJSON_AddStringToObject(e, "param", err->param);
    else cJSON_AddNullToObject(e, "param");
    if (err->code) cJSON_AddStringToObject(e, "code", err->code);
    else cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

bool serve_utf8_valid(const char *str, size_t len) { return pw_utf8_valid(str, len); }

/* A copy of s[0..n) with malformed UTF-8 replaced by U+FFFD (a model can
 * emit any bytes; JSON must carry valid text). */
char *serve_utf8_repair(const char *s, size_t n) {
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                                  : (c & 0xF8) == 0xF0 ? 4 : 0;
        /* a 0 byte would end the C string, and the text with it */
        if (c && len && i + len <= n && serve_utf8_valid(s + i, len)) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

static bool bad(serve_error *err, const char *param, const char *fmt, const char *detail) {
    serve_error_set(err, 400, "invalid_request_error", param, "invalid_value", fmt, param, detail);
    return false;
}

/* Integral JSON number within [lo, hi]. Absent or null leaves *out. */
static bool get_int(const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out,
                    serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return bad(err, key, "'%s' must be an integer%s", "");
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi) {
        char range[96];
        snprintf(range, sizeof range, " (got %.17g; allowed %lld to %lld)", v->valuedouble,
                 (long long)lo, (long long)hi);
        return bad(err, key, "'%s' is out of range%s", range);
    }
    *out = (int64_t)v->valuedouble;
    return true;
}

static bool get_number(const cJSON *obj, const char *key, double lo, double hi, double *out,
                       serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v)) return bad(err, key, "'%s' must be a number%s", "");
    if (!(v->valuedouble >= lo && v->valuedouble <= hi)) {
        char range[96];
        snprintf(range, sizeof range, " (got %g; allowed %g to %g)", v->valuedouble, lo, hi);
        return bad(err, key, "'%s' is out of range%s", range);
    }
    *out = v->valuedouble;
    return true;
}

static bool get_bool(const cJSON *obj, const char *key, bool *out, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) return bad(err, key, "'%s' must be true or false%s", "");
    *out = cJSON_IsTrue(v);
    return true;
}

static bool get_stop(const cJSON *obj, serve_params *p, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "stop");
    if (!v || cJSON_IsNull(v)) return true;
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0]) return bad(err, "stop", "'%s' must not be empty%s", "");
        p->stop[p->n_stop++] = strdup(v->valuestring);
        return true;
    }
    if (!cJSON_IsArray(v))
        return bad(err, "stop", "'%s' must be a string or an array of strings%s", "");
    if (cJSON_GetArraySize(v) > SERVE_MAX_STOP)
        return bad(err, "stop", "'%s' has more than 4 strings%s", "");
    const cJSON *s;
    cJSON_ArrayForEach(s, v) {
        if (!cJSON_IsString(s) || !s->valuestring[0])
            return bad(err, "stop", "'%s' must hold non-empty strings%s", "");
        p->stop[p->n_stop++] = strdup(s->valuestring);
    }
    return true;
}

/* "logit_bias": an object of at most PW_MAX_LOGIT_BIAS entries, each a
 * token id in the vocabulary written as a decimal string, to a number
 * from -100 to 100. */
static bool get_logit_bias(const pw_model *m, const cJSON *obj, serve_params *p,
                           serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "logit_bias");
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsObject(v))
        return bad(err, "logit_bias", "'%s' must be an object of token ids to numbers%s", "");
    int n = cJSON_GetArraySize(v);
    if (n > PW_MAX_LOGIT_BIAS) {
        char detail[64];
        snprintf(detail, sizeof detail, " (%d given; at most %d)", n, PW_MAX_LOGIT_BIAS);
        return bad(err, "logit_bias", "'%s' has too many entries%s", detail);
    }
    if (n == 0) return true;
    p->bias = calloc((size_t)n, sizeof *p->bias);
    if (!p->bias) {
        serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    int64_t vocab = pw_model_get_info(m)->vocab;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        const char *key = e->string ? e->string : "";
        size_t kl = strlen(key);
        bool digits = kl > 0 && kl <= 10;
        for (size_t i = 0; digits && i < kl; i++) digits = key[i] >= '0' && key[i] <= '9';
        char detail[96];
        /* the key is shown only once it is known to be short and plain */
        if (!digits)
            return bad(err, "logit_bias", "'%s' keys must be token ids (decimal integers)%s", "");
        long long id = strtoll(key, NULL, 10);
        if (id >= vocab) {
            snprintf(detail, sizeof detail, " (token %lld; the vocabulary has %lld)", id,
                     (long long)vocab);
            return bad(err, "logit_bias", "'%s' names a token outside the vocabulary%s", detail);
        }
        if (!cJSON_IsNumber(e)) {
            snprintf(detail, sizeof detail, " (token %lld)", id);
            return bad(err, "logit_bias", "'%s' values must be numbers%s", detail);
        }
        if (!(e->valuedouble >= -100.0 && e->valuedouble <= 100.0)) {
            snprintf(detail, sizeof detail, " (token %lld: %g; allowed -100 to 100)", id,
                     e->valuedouble);
            return bad(err, "logit_bias", "'%s' value is out of range%s", detail);
        }
        p->bias[p->sp.n_logit_bias++] = (pw_logit_bias){(int32_t)id, (float)e->valuedouble};
    }
    p->sp.logit_bias = p->bias;
    return true;
}

/* Chat: "logprobs" (true/false) and "top_logprobs" (0 to 20, only with
 * logprobs true, as OpenAI requires). Completions: "logprobs", the number
 * of top alternatives (0 to 20), whose presence asks for logprobs. */
static bool get_logprobs(const cJSON *obj, serve_kind kind, serve_params *p, serve_error *err) {
    int64_t top = -1;
    if (kind == SERVE_COMPLETION) {
        if (!get_int(obj, "logprobs", 0, PW_MAX_TOP_LOGPROBS, &top, err)) return false;
        p->sp.logprobs = top >= 0;
        p->sp.top_logprobs = top > 0 ? (int32_t)top : 0;
        return true;
    }
    if (!get_bool(obj, "logprobs", &p->sp.logprobs, err)) return false;
    if (!get_int(obj, "top_logprobs", 0, PW_MAX_TOP_LOGPROBS, &top, err)) return false;
    if (top >= 0 && !p->sp.logprobs)
        return bad(err, "top_logprobs", "'%s' needs \"logprobs\": true%s", "");
    p->sp.top_logprobs = top > 0 ? (int32_t)top : 0;
    return true;
}

/* Chat message content: a string, or an array of {"type":"text","text":...}
 * parts (joined). *out is malloc'ed. */
static bool message_content(const cJSON *content, int index, char **out, serve_error *err) {
    char param[48];
    snprintf(param, sizeof param, "messages[%d].content", index);
    if (cJSON_IsString(content)) {
        *out = strdup(content->valuestring);
        return true;
    }
    if (!cJSON_IsArray(content))
        return bad(err, param, "'%s' must be a string or an array of text parts%s", "");
    pw_sb text = {0};
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type) || strcmp(type->valuestring, "text") ||
            !cJSON_IsString(t)) {
            pw_sb_discard(&text);
            return bad(err, param, "'%s' parts must be {\"type\": \"text\", \"text\": ...}%s", "");
        }
        pw_sb_puts(&text, t->valuestring);
    }
    if (pw_sb_finish(&text, out) != PW_OK) return bad(err, param, "'%s' is too large%s", "");
    return true;
}

/* "messages" through the chat template into p->prompt: the template's
 * markers are special tokens, the contents plain text (so a message cannot
 * close its turn or forge another). */
static bool chat_prompt(const pw_model *m, const cJSON *root, serve_params *p, serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!msgs) {
        serve_error_set(err, 400, "invalid_request_error", "messages", "missing_required_parameter",
                        "'messages' is required");
        return false;
    }
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return bad(err, "messages", "'%s' must be a non-empty array%s", "");
    int n = cJSON_GetArraySize(msgs);
    pw_chat_message *cm = calloc((size_t)n, sizeof *cm);
    char **contents = calloc((size_t)n, sizeof *contents);
    bool ok = cm && contents;
    if (!ok) serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    for (int i = 0; ok && i < n; i++) {
        const cJSON *msg = cJSON_GetArrayItem(msgs, i);
        char param[48];
        snprintf(param, sizeof param, "messages[%d]", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (!cJSON_IsObject(msg)) {
            ok = bad(err, param, "'%s' must be an object%s", "");
        } else if (!cJSON_IsString(role) ||
                   (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
                    strcmp(role->valuestring, "assistant") &&
                    strcmp(role->valuestring, "developer"))) {
            snprintf(param, sizeof param, "messages[%d].role", i);
            ok = bad(err, param, "'%s' must be \"system\", \"user\" or \"assistant\"%s", "");
        } else if (!content) {
            snprintf(param, sizeof param, "messages[%d].content", i);
            serve_error_set(err, 400, "invalid_request_error", param, "missing_required_parameter",
                            "'%s' is required", param);
            ok = false;
        } else if ((ok = message_content(content, i, &contents[i], err))) {
            /* the templates know system, user and assistant; OpenAI's
             * "developer" role is its new name for system */
            cm[i].role = strcmp(role->valuestring, "developer") ? role->valuestring : "system";
            cm[i].content = contents[i];
        }
    }
    if (ok && !pw_model_has_chat_template(m)) {
        serve_error_set(err, 400, "invalid_request_error", "messages", "no_chat_template",
                        "this model has no chat template; use /v1/completions with a raw prompt");
        ok = false;
    }
    char *tools = NULL;
    if (ok) ok = serve_chat_tools(root, &tools, err);
    if (ok) {
        pw_status s = pw_model_tokenize_chat_tools(m, cm, n, tools, true, true, &p->prompt, &p->n_prompt);
        if (s != PW_OK) {
            serve_error_set(err, 400, "invalid_request_error", "messages", NULL, "%s",
                            pw_last_error());
            pw_clear_error();
            ok = false;
        }
    }
    cJSON_free(tools);
    for (int i = 0; contents && i < n; i++) free(contents[i]);
    free(contents);
    free(cm);
    return ok;
}

static bool completion_prompt(const cJSON *root, char **out, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!v) {
        serve_error_set(err, 400, "invalid_request_error", "prompt", "missing_required_parameter",
                        "'prompt' is required");
        return false;
    }
    /* a one-element array is how some clients send a single prompt */
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 && cJSON_IsString(cJSON_GetArrayItem(v, 0)))
        v = cJSON_GetArrayItem(v, 0);
    if (!cJSON_IsString(v))
        return bad(err, "prompt", "'%s' must be a string (batches of prompts are not supported)%s",
                   "");
    if (!v->valuestring[0]) return bad(err, "prompt", "'%s' must not be empty%s", "");
    *out = strdup(v->valuestring);
    return true;
}

/* The index, in document order and counting object keys, of the first
 * JSON string in the body that holds a NUL (the escape \u0000, or a raw 0
 * byte, which cJSON lets through); -1 if none. The body parsed as JSON.
 * cJSON keeps strings NUL-terminated, so such a string would silently end
 * at the NUL: a prompt "hi\u0000 and a long tail" would be read as "hi". */
static int64_t first_string_with_nul(const char *body, size_t len) {
    int64_t index = -1;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        if (!in_string) {
            if (c == '"') {
                in_string = true;
                index++;
            }
        } else if (c == '"') {
            in_string = false;
        } else if (c == '\0') {
            return index;
        } else if (c == '\\' && i + 1 < len) {
            i++;
            if (body[i] == 'u' && len - i > 4 && memcmp(body + i + 1, "0000", 4) == 0) return index;
        }
    }
    return -1;
}

/* As long as serve_error's param. */
#define SERVE_PARAM_MAX ((int)sizeof(((serve_error *)0)->param))

typedef struct string_finder {
    int64_t target, seen;
    char path[SERVE_PARAM_MAX];
} string_finder;

/* Walks the strings of a parsed value in document order (an object's key
 * before its value) to the one numbered f->target, and writes where it is
 * as a parameter path (messages[0].content) to f->path. True once found.
 * Recursion is as deep as the JSON, which cJSON bounds (1000 levels). */
static bool find_string(const cJSON *v, const char *path, string_finder *f) {
    if (cJSON_IsString(v)) {
        if (f->seen++ != f->target) return false;
        snprintf(f->path, sizeof f->path, "%s", path);
        return true;
    }
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char sub[SERVE_PARAM_MAX];
        if (cJSON_IsObject(v)) {
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", c->string ? c->string : "");
            if (f->seen++ == f->target) { /* the key itself */
                snprintf(f->path, sizeof f->path, "%s", sub);
                return true;
            }
        } else {
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
        }
        if (find_string(c, sub, f)) return true;
    }
    return false;
}

cJSON *serve_parse_body(const char *body, size_t len, serve_error *err) {
    if (!serve_utf8_valid(body, len)) {
        serve_error_set(err, 400, "invalid_request_error", NULL, "invalid_utf8",
                        "the request body is not valid UTF-8");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (root && end && (size_t)(end - body) < len) {
        /* trailing bytes after the value: only whitespace is allowed */
        for (const char *c = end; c < body + len; c++)
            if (*c != ' ' && *c != '\n' && *c != '\r' && *c != '\t' && *c != '\0') {
                cJSON_Delete(root);
                root = NULL;
                break;
            }
    }
    if (!root) {
        serve_error_set(err, 400, "invalid_request_error", NULL, "invalid_json",
                        "the request body is not valid JSON");
        return NULL;
    }
    int64_t nul = first_string_with_nul(body, len);
    if (nul >= 0) {
        /* refused rather than cut short at the NUL or sent on as a token */
        string_finder f = {.target = nul};
        if (!find_string(root, "", &f)) snprintf(f.path, sizeof f.path, "(a string)");
        serve_error_set(err, 400, "invalid_request_error", f.path, "invalid_value",
                        "'%s' contains a NUL character (\\u0000), which piecewise does not "
                        "accept in text", f.path);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* The request's numeric options as parsed, before they go into serve_params;
 * max_tokens < 0 means "not given". */
typedef struct request_options {
    int64_t max_tokens;
    double temperature, top_p, presence_penalty, frequency_penalty;
    int64_t top_k, seed; /* seed INT64_MIN: not given */
} request_options;

/* Every option but the prompt: model, n, token limits, sampling, stream,
 * stop and stream_options, checked in that order. */
static bool parse_options(const pw_model *m, const cJSON *root, serve_kind kind,
                          request_options *o, serve_params *p, serve_error *err) {
    bool ok = true;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsString(model) && !cJSON_IsNull(model))
        ok = bad(err, "model", "'%s' must be a string%s", "");
    int64_t n_choices = 1;
    if (ok) ok = get_int(root, "n", 1, SERVE_MAX_CHOICES, &n_choices, err);
    p->n_choices = (int)n_choices;
    if (ok) ok = get_int(root, "max_tokens", 1, INT32_MAX, &o->max_tokens, err);
    if (ok && kind == SERVE_CHAT)
        ok = get_int(root, "max_completion_tokens", 1, INT32_MAX, &o->max_tokens, err);
    if (ok) ok = get_number(root, "temperature", 0, 2, &o->temperature, err);
    if (ok) ok = get_number(root, "top_p", 0, 1, &o->top_p, err);
    if (ok) ok = get_int(root, "top_k", 0, INT32_MAX, &o->top_k, err);
    if (ok) ok = get_int(root, "seed", INT64_MIN / 2, INT64_MAX / 2, &o->seed, err);
    if (ok) ok = get_number(root, "presence_penalty", -2, 2, &o->presence_penalty, err);
    if (ok) ok = get_number(root, "frequency_penalty", -2, 2, &o->frequency_penalty, err);
    if (ok) ok = get_logit_bias(m, root, p, err);
    if (ok) ok = get_logprobs(root, kind, p, err);
    if (ok) ok = get_bool(root, "stream", &p->stream, err);
    if (ok) ok = get_stop(root, p, err);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (ok && so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) ok = bad(err, "stream_options", "'%s' must be an object%s", "");
        else ok = get_bool(so, "include_usage", &p->include_usage, err);
    }
    return ok;
}

/* The prompt tokenized into p->prompt: chat messages through the template
 * (their text never becomes special tokens), or the completion prompt,
 * whose special-token text does become the tokens: its writer formats the
 * whole prompt. */
static bool tokenize_prompt(const pw_model *m, serve_kind kind, const cJSON *root, serve_params *p,
                            serve_error *err) {
    if (kind == SERVE_CHAT) return chat_prompt(m, root, p, err);
    char *text = NULL;
    bool ok = completion_prompt(root, &text, err);
    if (ok) {
        pw_status s = pw_model_tokenize(m, text, true, &p->prompt, &p->n_prompt);
        if (s != PW_OK) {
            serve_error_set(err, 400, "invalid_request_error", "prompt", NULL, "%s",
                            pw_last_error());
            pw_clear_error();
            ok = false;
        }
    }
    free(text);
    return ok;
}

/* A seed for a request that gave none: from the kernel's random source,
 * else the clock and a counter (still different per request). */
static uint64_t random_seed(void) {
    uint64_t s;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) == (ssize_t)sizeof s) return s;
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^
           (atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15ULL);
}

/* The prompt must leave room in the context; max_tokens, when not given,
 * is what is left (at most SERVE_DEFAULT_MAX_TOKENS), and when given must fit. */
static bool fit_context(serve_kind kind, int64_t max_model_len, const serve_params *p,
                        int64_t *max_tokens, serve_error *err) {
    const char *param = kind == SERVE_CHAT ? "messages" : "prompt";
    if (p->n_prompt >= max_model_len) {
        serve_error_set(err, 400, "invalid_request_error", param, "context_length_exceeded",
                        "the prompt is %lld tokens; this server's context is %lld tokens",
                        (long long)p->n_prompt, (long long)max_model_len);
        return false;
    }
    if (*max_tokens < 0) {
        int64_t room = max_model_len - p->n_prompt;
        *max_tokens = room < SERVE_DEFAULT_MAX_TOKENS ? room : SERVE_DEFAULT_MAX_TOKENS;
    } else if (*max_tokens > max_model_len - p->n_prompt) {
        serve_error_set(err, 400, "invalid_request_error", "max_tokens", "context_length_exceeded",
                        "the prompt (%lld tokens) plus max_tokens (%lld) exceeds this "
                        "server's context of %lld tokens",
                        (long long)p->n_prompt, (long long)*max_tokens, (long long)max_model_len);
        return false;
    }
    return true;
}

bool serve_parse_request(const pw_model *m, serve_kind kind, const char *body, size_t len,
                         int64_t max_model_len, serve_params *p, serve_error *err) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    cJSON *root = serve_parse_body(body, len, err);
    if (!root) return false;
    bool ok = true;
    if (!cJSON_IsObject(root)) {
        serve_error_set(err, 400, "invalid_request_error", NULL, "invalid_json",
                        "the request body must be a JSON object");
        ok = false;
    }
    request_options o = {.max_tokens = -1, .temperature = 1.0, .top_p = 1.0, .seed = INT64_MIN};
    if (ok) ok = parse_options(m, root, kind, &o, p, err);
    if (ok) ok = tokenize_prompt(m, kind, root, p, err);
    if (ok) ok = fit_context(kind, max_model_len, p, &o.max_tokens, err);
    p->max_tokens = o.max_tokens;
    p->sp.temperature = (float)o.temperature;
    p->sp.top_p = (float)o.top_p;
    p->sp.top_k = (int32_t)o.top_k;
    p->sp.presence_penalty = (float)o.presence_penalty;
    p->sp.frequency_penalty = (float)o.frequency_penalty;
    /* Without a seed an answer is random each time; with one it is the
     * same every time (the engine's generator starts from it alone). */
    p->seeded = o.seed != INT64_MIN;
    p->sp.seed = p->seeded ? (uint64_t)o.seed : random_seed();
    cJSON_Delete(root);
    if (!ok) serve_params_free(p);
    return ok;
}

bool serve_params_copy(const serve_params *src, serve_params *dst) {
    *dst = *src;
    dst->prompt = malloc((size_t)src->n_prompt * sizeof *src->prompt);
    dst->n_stop = 0;
    dst->bias = NULL;
    dst->sp.logit_bias = NULL;
    dst->sp.n_logit_bias = 0;
    bool ok = dst->prompt != NULL;
    if (ok) memcpy(dst->prompt, src->prompt, (size_t)src->n_prompt * sizeof *src->prompt);
    if (ok && src->sp.n_logit_bias > 0) {
        size_t bytes = (size_t)src->sp.n_logit_bias * sizeof *src->bias;
        ok = (dst->bias = malloc(bytes)) != NULL;
        if (ok) {
            memcpy(dst->bias, src->bias, bytes);
            dst->sp.logit_bias = dst->bias;
            dst->sp.n_logit_bias = src->sp.n_logit_bias;
        }
    }
    for (int i = 0; ok && i < src->n_stop; i++)
        ok = (dst->stop[dst->n_stop++] = strdup(src->stop[i])) != NULL;
    if (!ok) serve_params_free(dst);
    return ok;
}

void serve_params_free(serve_params *p) {
    free(p->prompt);
    p->prompt = NULL;
    free(p->bias);
    p->bias = NULL;
    p->sp.logit_bias = NULL;
    p->sp.n_logit_bias = 0;
    for (int i = 0; i < p->n_stop; i++) free(p->stop[i]);
    p->n_stop = 0;
}
#endif
