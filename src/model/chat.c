/* Chat templates. GGUF files carry a Jinja template in
 * tokenizer.chat_template; rather than embed a Jinja interpreter, piecewise
 * recognises the template families Llama-family models use and formats
 * them natively:
 *   chatml   <|im_start|>role\ncontent<|im_end|>\n ... (SmolLM2, Qwen, ...),
 *            with the template's default system prompt when it has one
 *   llama2   <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s>
 *   gemma    <start_of_turn>user\ncontent<end_of_turn>\n<start_of_turn>model\n ...
 *            (Gemma 3: the system prompt opens the first user turn, followed
 *            by a blank line; contents are trimmed). A gemma3 file without
 *            tokenizer.chat_template gets it too: Gemma's GGUFs often lack one.
 * Any other template is PW_ERR_UNSUPPORTED naming what was seen; callers
 * fall back to raw prompts.
 *
 * Formatting records where the template's own markers (<|im_start|>,
 * <end_of_turn>, <s>, ...) are, and the token entry points
 * (pw_model_tokenize_chat*) make only those special tokens: message text
 * is plain text, so a message holding "<|im_end|>" cannot close its turn
 * or forge another. */
#include "model/llama.h"

#include <string.h>

#define CHAT_MAX_SYSTEM 1024

typedef enum chat_family { CHAT_NONE = 0, CHAT_CHATML, CHAT_LLAMA2, CHAT_GEMMA } chat_family;

/* The formatted conversation and where its markers are. */
typedef struct text_buf {
    pw_sb text;
    pw_token_span *markers;
    int64_t n_markers, cap_markers;
    pw_status status;
} text_buf;

static void text_buf_free(text_buf *b) {
    pw_sb_discard(&b->text);
    pw_host_free(b->markers);
}

static void put(text_buf *b, const char *s) {
    if (b->status != PW_OK) return;
    pw_sb_puts(&b->text, s);
    b->status = b->text.status;
}

/* Appends one of the template's markers: a special token, unlike the
 * message text around it. */
static void put_marker(text_buf *b, const char *marker) {
    if (b->status != PW_OK) return;
    if (b->n_markers == b->cap_markers) {
        size_t cap = (size_t)b->cap_markers;
        pw_token_span *p = pw_host_grow(b->markers, sizeof *p, &cap, (size_t)b->n_markers + 1, INT64_MAX);
        if (!p) {
            b->status = PW_ERR_OOM;
            return;
        }
        b->markers = p;
        b->cap_markers = (int64_t)cap;
    }
    b->markers[b->n_markers++] = (pw_token_span){b->text.len, strlen(marker)};
    put(b, marker);
}

/* The literal default system prompt of a chatml template, e.g.
 * {{ '<|im_start|>system\nYou are a helpful AI assistant...<|im_end|>\n' }},
 * with the Jinja string escapes \n undone. Empty if there is none. */
static void chatml_default_system(const char *tmpl, char *out, size_t cap) {
    out[0] = '\0';
    const char *start = strstr(tmpl, "'<|im_start|>system\\n");
    if (!start) return;
    start += strlen("'<|im_start|>system\\n");
    const char *end = strstr(start, "<|im_end|>");
    if (!end) return;
    size_t n = 0;
    for (const char *p = start; p < end && n + 1 < cap; p++) {
        if (p[0] == '\\' && p + 1 < end && p[1] == 'n') {
            out[n++] = '\n';
            p++;
        } else if (p[0] == '\\' && p + 1 < end && p[1] == '\'') {
            out[n++] = '\'';
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

static pw_status detect(const pw_model *m, chat_family *family, char *system, size_t cap) {
    const char *tmpl = NULL;
    system[0] = '\0';
    if (pw_gguf_get_string(m->gguf, "tokenizer.chat_template", &tmpl) != PW_OK || !tmpl) {
        if (m->arch == PW_ARCH_GEMMA3) {
            pw_clear_error();
            *family = CHAT_GEMMA;
            return PW_OK;
        }
        *family = CHAT_NONE;
        return pw_error(PW_ERR_NOT_FOUND,
                        "model '%s' has no chat template (tokenizer.chat_template); use raw prompts",
                        m->info.name);
    }
    if (strstr(tmpl, "<|im_start|>")) {
        *family = CHAT_CHATML;
        chatml_default_system(tmpl, system, cap);
        return PW_OK;
    }
    if (strstr(tmpl, "<start_of_turn>")) {
        *family = CHAT_GEMMA;
        return PW_OK;
    }
    if (strstr(tmpl, "[INST]")) {
        *family = CHAT_LLAMA2;
        return PW_OK;
    }
    *family = CHAT_NONE;
    char head[48];
    snprintf(head, sizeof head, "%s", tmpl);
    return pw_error(PW_ERR_UNSUPPORTED,
                    "unsupported chat template (starts \"%s...\"); piecewise knows chatml, "
                    "llama2 and gemma templates; use raw prompts",
                    head);
}

bool pw_model_has_chat_template(const pw_model *m) {
    chat_family f;
    char sys[CHAT_MAX_SYSTEM];
    bool ok = detect(m, &f, sys, sizeof sys) == PW_OK;
    pw_clear_error();
    return ok;
}

static pw_status check_messages(const pw_chat_message *msgs, int n) {
    if (n < 1) return pw_error(PW_ERR_INVALID_ARG, "chat: no messages");
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return pw_error(PW_ERR_INVALID_ARG, "chat: message %d has no role or content", i);
        if (strcmp(msgs[i].role, "system") && strcmp(msgs[i].role, "user") &&
            strcmp(msgs[i].role, "assistant"))
            return pw_error(PW_ERR_INVALID_ARG,
                            "chat: message %d has role '%s' (expected system, user or assistant)",
                            i, msgs[i].role);
    }
    return PW_OK;
}

static void format_chatml(text_buf *b, const char *default_system, const pw_chat_message *msgs,
                          int n, bool add_generation_prompt) {
    if (strcmp(msgs[0].role, "system") != 0 && default_system[0]) {
        put_marker(b, "<|im_start|>");
        put(b, "system\n");
        put(b, default_system);
        put_marker(b, "<|im_end|>");
        put(b, "\n");
    }
    for (int i = 0; i < n; i++) {
        put_marker(b, "<|im_start|>");
        put(b, msgs[i].role);
        put(b, "\n");
        put(b, msgs[i].content);
        put_marker(b, "<|im_end|>");
        put(b, "\n");
    }
    if (add_generation_prompt) {
        put_marker(b, "<|im_start|>");
        put(b, "assistant\n");
    }
}

/* Without BOS: the tokenizer adds it. */
static void format_llama2(text_buf *b, const pw_chat_message *msgs, int n) {
    const char *system = NULL;
    int i = 0;
    if (strcmp(msgs[0].role, "system") == 0) system = msgs[i++].content;
    bool first = true;
    for (; i < n; i++) {
        if (strcmp(msgs[i].role, "user") == 0) {
            if (!first) put_marker(b, "<s>");
            put(b, "[INST] ");
            if (system && first) {
                put(b, "<<SYS>>\n");
                put(b, system);
                put(b, "\n<</SYS>>\n\n");
            }
            put(b, msgs[i].content);
            put(b, " [/INST]");
            first = false;
        } else if (strcmp(msgs[i].role, "assistant") == 0) {
            put(b, " ");
            put(b, msgs[i].content);
            put(b, " ");
            put_marker(b, "</s>");
        }
    }
}

/* Appends s without leading and trailing whitespace (Jinja's trim). */
static void put_trimmed(text_buf *b, const char *s) {
    static const char *const ws = " \t\n\r\f\v";
    while (*s && strchr(ws, *s)) s++;
    size_t n = strlen(s);
    while (n > 0 && strchr(ws, s[n - 1])) n--;
    if (b->status != PW_OK) return;
    pw_sb_append(&b->text, s, n);
    b->status = b->text.status;
}

/* Gemma 3's template without the BOS (the tokenizer adds it): the system
 * message becomes the start of the first user turn, assistant is "model". */
static void format_gemma(text_buf *b, const pw_chat_message *msgs, int n,
                         bool add_generation_prompt) {
    int i = 0;
    const char *system = NULL;
    if (strcmp(msgs[0].role, "system") == 0) system = msgs[i++].content;
    for (bool first = true; i < n; i++, first = false) {
        bool model = strcmp(msgs[i].role, "assistant") == 0;
        put_marker(b, "<start_of_turn>");
        put(b, model ? "model\n" : "user\n");
        if (first && system) {
            put_trimmed(b, system);
            put(b, "\n\n");
        }
        put_trimmed(b, msgs[i].content);
        put_marker(b, "<end_of_turn>");
        put(b, "\n");
    }
    if (add_generation_prompt) {
        put_marker(b, "<start_of_turn>");
        put(b, "model\n");
    }
}

/* The whole conversation formatted into b (freed by the caller). */
static pw_status format_conversation(const pw_model *m, const pw_chat_message *msgs, int n,
                                     bool add_generation_prompt, text_buf *b) {
    PW_TRY(check_messages(msgs, n));
    chat_family family;
    char system[CHAT_MAX_SYSTEM];
    PW_TRY(detect(m, &family, system, sizeof system));
    if (family == CHAT_CHATML) format_chatml(b, system, msgs, n, add_generation_prompt);
    else if (family == CHAT_GEMMA) format_gemma(b, msgs, n, add_generation_prompt);
    else format_llama2(b, msgs, n);
    if (b->status != PW_OK)
        return pw_error(b->status, "chat: out of memory formatting the conversation");
    return PW_OK;
}

/* The text after an assistant answer that adds the next user turn. */
static pw_status format_next_turn(const pw_model *m, const char *user, bool answer_closed,
                                  text_buf *b) {
    if (!user) return pw_error(PW_ERR_INVALID_ARG, "chat: no user message");
    chat_family family;
    char system[CHAT_MAX_SYSTEM];
    PW_TRY(detect(m, &family, system, sizeof system));
    if (family == CHAT_CHATML) {
        if (!answer_closed) put_marker(b, "<|im_end|>");
        put(b, "\n");
        put_marker(b, "<|im_start|>");
        put(b, "user\n");
        put(b, user);
        put_marker(b, "<|im_end|>");
        put(b, "\n");
        put_marker(b, "<|im_start|>");
        put(b, "assistant\n");
    } else if (family == CHAT_GEMMA) {
        if (!answer_closed) put_marker(b, "<end_of_turn>");
        put(b, "\n");
        put_marker(b, "<start_of_turn>");
        put(b, "user\n");
        put_trimmed(b, user);
        put_marker(b, "<end_of_turn>");
        put(b, "\n");
        put_marker(b, "<start_of_turn>");
        put(b, "model\n");
    } else {
        if (!answer_closed) {
            put(b, " ");
            put_marker(b, "</s>");
        }
        put_marker(b, "<s>");
        put(b, "[INST] ");
        put(b, user);
        put(b, " [/INST]");
    }
    if (b->status != PW_OK) return pw_error(b->status, "chat: out of memory");
    return PW_OK;
}

/* The formatted text as a malloc'ed string, as the public API promises. */
static pw_status text_out(const text_buf *b, char **out) {
    *out = malloc(b->text.len + 1);
    if (!*out) return pw_error(PW_ERR_OOM, "chat: out of memory");
    memcpy(*out, b->text.data ? b->text.data : "", b->text.len);
    (*out)[b->text.len] = '\0';
    return PW_OK;
}

/* The formatted text as tokens: the markers special, the rest plain text. */
static pw_status tokens_out(const pw_model *m, const text_buf *b, bool add_bos, int32_t **ids,
                            int64_t *n_ids) {
    int32_t *tmp = NULL;
    int64_t n = 0;
    PW_TRY(pw_tokenizer_encode_marked(m->tokenizer, b->text.data ? b->text.data : "", b->text.len, b->markers,
                                      b->n_markers, add_bos ? PW_TOKENIZE_ADD_SPECIAL : 0u, &tmp, &n));
    pw_status s = pw_model_ids_to_caller(tmp, n, ids);
    if (s == PW_OK) *n_ids = n;
    return s;
}

pw_status pw_model_apply_chat_template(const pw_model *m, const pw_chat_message *msgs, int n,
                                       bool add_generation_prompt, char **out) {
    *out = NULL;
    text_buf b = {0};
    pw_status s = format_conversation(m, msgs, n, add_generation_prompt, &b);
    if (s == PW_OK) s = text_out(&b, out);
    text_buf_free(&b);
    return s;
}

pw_status pw_model_tokenize_chat(const pw_model *m, const pw_chat_message *msgs, int n,
                                 bool add_generation_prompt, bool add_bos, int32_t **ids,
                                 int64_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    text_buf b = {0};
    pw_status s = format_conversation(m, msgs, n, add_generation_prompt, &b);
    if (s == PW_OK) s = tokens_out(m, &b, add_bos, ids, n_ids);
    text_buf_free(&b);
    return s;
}

pw_status pw_model_chat_next_turn(const pw_model *m, const char *user, bool answer_closed,
                                  char **out) {
    *out = NULL;
    text_buf b = {0};
    pw_status s = format_next_turn(m, user, answer_closed, &b);
    if (s == PW_OK) s = text_out(&b, out);
    text_buf_free(&b);
    return s;
}

pw_status pw_model_tokenize_chat_next_turn(const pw_model *m, const char *user,
                                           bool answer_closed, int32_t **ids, int64_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    text_buf b = {0};
    pw_status s = format_next_turn(m, user, answer_closed, &b);
    if (s == PW_OK) s = tokens_out(m, &b, false, ids, n_ids);
    text_buf_free(&b);
    return s;
}

bool pw_model_is_end_of_generation(const pw_model *m, int32_t token) {
    return pw_tokenizer_is_eog(m->tokenizer, token);
}
