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
 * fall back to raw prompts. */
#include "model/llama.h"

#include <string.h>

#define CHAT_MAX_SYSTEM 1024

typedef enum chat_family { CHAT_NONE = 0, CHAT_CHATML, CHAT_LLAMA2, CHAT_GEMMA } chat_family;

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

static void format_chatml(pw_sb *b, const char *default_system, const pw_chat_message *msgs,
                          int n, bool add_generation_prompt) {
    if (strcmp(msgs[0].role, "system") != 0 && default_system[0]) {
        pw_sb_puts(b, "<|im_start|>system\n");
        pw_sb_puts(b, default_system);
        pw_sb_puts(b, "<|im_end|>\n");
    }
    for (int i = 0; i < n; i++) {
        pw_sb_puts(b, "<|im_start|>");
        pw_sb_puts(b, msgs[i].role);
        pw_sb_puts(b, "\n");
        pw_sb_puts(b, msgs[i].content);
        pw_sb_puts(b, "<|im_end|>\n");
    }
    if (add_generation_prompt) pw_sb_puts(b, "<|im_start|>assistant\n");
}

/* Without BOS: the tokenizer adds it. */
static void format_llama2(pw_sb *b, const pw_chat_message *msgs, int n) {
    const char *system = NULL;
    int i = 0;
    if (strcmp(msgs[0].role, "system") == 0) system = msgs[i++].content;
    bool first = true;
    for (; i < n; i++) {
        if (strcmp(msgs[i].role, "user") == 0) {
            if (!first) pw_sb_puts(b, "<s>");
            pw_sb_puts(b, "[INST] ");
            if (system && first) {
                pw_sb_puts(b, "<<SYS>>\n");
                pw_sb_puts(b, system);
                pw_sb_puts(b, "\n<</SYS>>\n\n");
            }
            pw_sb_puts(b, msgs[i].content);
            pw_sb_puts(b, " [/INST]");
            first = false;
        } else if (strcmp(msgs[i].role, "assistant") == 0) {
            pw_sb_puts(b, " ");
            pw_sb_puts(b, msgs[i].content);
            pw_sb_puts(b, " </s>");
        }
    }
}

/* Appends s without leading and trailing whitespace (Jinja's trim). */
static void put_trimmed(pw_sb *b, const char *s) {
    static const char *const ws = " \t\n\r\f\v";
    while (*s && strchr(ws, *s)) s++;
    size_t n = strlen(s);
    while (n > 0 && strchr(ws, s[n - 1])) n--;
    pw_sb_append(b, s, n);
}

/* Gemma 3's template without the BOS (the tokenizer adds it): the system
 * message becomes the start of the first user turn, assistant is "model". */
static void format_gemma(pw_sb *b, const pw_chat_message *msgs, int n,
                         bool add_generation_prompt) {
    int i = 0;
    const char *system = NULL;
    if (strcmp(msgs[0].role, "system") == 0) system = msgs[i++].content;
    for (bool first = true; i < n; i++, first = false) {
        bool model = strcmp(msgs[i].role, "assistant") == 0;
        pw_sb_puts(b, model ? "<start_of_turn>model\n" : "<start_of_turn>user\n");
        if (first && system) {
            put_trimmed(b, system);
            pw_sb_puts(b, "\n\n");
        }
        put_trimmed(b, msgs[i].content);
        pw_sb_puts(b, "<end_of_turn>\n");
    }
    if (add_generation_prompt) pw_sb_puts(b, "<start_of_turn>model\n");
}

pw_status pw_model_apply_chat_template(const pw_model *m, const pw_chat_message *msgs, int n,
                                       bool add_generation_prompt, char **out) {
    *out = NULL;
    PW_TRY(check_messages(msgs, n));
    chat_family family;
    char system[CHAT_MAX_SYSTEM];
    PW_TRY(detect(m, &family, system, sizeof system));
    pw_sb b = {0};
    if (family == CHAT_CHATML) format_chatml(&b, system, msgs, n, add_generation_prompt);
    else if (family == CHAT_GEMMA) format_gemma(&b, msgs, n, add_generation_prompt);
    else format_llama2(&b, msgs, n);
    pw_status s = pw_sb_finish(&b, out);
    return s == PW_OK ? PW_OK : pw_error(s, "chat: out of memory formatting the conversation");
}

pw_status pw_model_chat_next_turn(const pw_model *m, const char *user, bool answer_closed,
                                  char **out) {
    *out = NULL;
    if (!user) return pw_error(PW_ERR_INVALID_ARG, "chat: no user message");
    chat_family family;
    char system[CHAT_MAX_SYSTEM];
    PW_TRY(detect(m, &family, system, sizeof system));
    pw_sb b = {0};
    if (family == CHAT_CHATML) {
        pw_sb_puts(&b, answer_closed ? "\n" : "<|im_end|>\n");
        pw_sb_puts(&b, "<|im_start|>user\n");
        pw_sb_puts(&b, user);
        pw_sb_puts(&b, "<|im_end|>\n<|im_start|>assistant\n");
    } else if (family == CHAT_GEMMA) {
        pw_sb_puts(&b, answer_closed ? "\n" : "<end_of_turn>\n");
        pw_sb_puts(&b, "<start_of_turn>user\n");
        put_trimmed(&b, user);
        pw_sb_puts(&b, "<end_of_turn>\n<start_of_turn>model\n");
    } else {
        pw_sb_puts(&b, answer_closed ? "<s>[INST] " : " </s><s>[INST] ");
        pw_sb_puts(&b, user);
        pw_sb_puts(&b, " [/INST]");
    }
    pw_status s = pw_sb_finish(&b, out);
    return s == PW_OK ? PW_OK : pw_error(s, "chat: out of memory");
}

bool pw_model_is_end_of_generation(const pw_model *m, int32_t token) {
    return pw_tokenizer_is_eog(m->tokenizer, token);
}
