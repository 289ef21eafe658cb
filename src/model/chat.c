/* Chat templates. A GGUF carries its model's Jinja template in
 * tokenizer.chat_template; piecewise renders it with its own interpreter
 * (jinja.h) the way transformers and llama.cpp do, with the variables
 * messages (role, content), add_generation_prompt, bos_token and eos_token.
 * A gemma3 file without a template gets Gemma 3's (Gemma's GGUFs often
 * lack one); any other file without one has no chat template.
 *
 * As llama.cpp does, a rendered prompt that starts with the BOS token's
 * text loses it when the tokenizer adds BOS itself (add_bos_token), so the
 * token is never doubled.
 *
 * The interpreter marks the bytes the template wrote itself (its literal
 * text, and the BOS and EOS tokens' text) apart from the bytes that came
 * from messages. Only inside those does a CONTROL token's text become the
 * token (pw_tokenizer_encode_marked): a message holding "<|im_end|>" cannot
 * close its turn or forge another. */
#include "model/chat.h"
#include "model/jinja.h"
#include "model/llama.h"

#include <stdio.h>
#include <string.h>

/* Gemma 3's template (google/gemma-3-*-it), for gemma3 GGUFs without one. */
static const char gemma3_template[] =
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n";

pw_status pw_chat_template_source(const pw_gguf *g, const char **src) {
    *src = NULL;
    if (pw_gguf_get_string(g, "tokenizer.chat_template", src) == PW_OK && *src) return PW_OK;
    pw_clear_error();
    const char *arch = NULL;
    if (pw_gguf_get_string(g, "general.architecture", &arch) == PW_OK && arch && strcmp(arch, "gemma3") == 0) {
        *src = gemma3_template;
        return PW_OK;
    }
    pw_clear_error();
    return pw_error(PW_ERR_NOT_FOUND, "no chat template (tokenizer.chat_template)");
}

/* The model's template, parsed. */
static pw_status load_template(const pw_model *m, pw_jinja_template **t) {
    const char *src;
    if (pw_chat_template_source(m->gguf, &src) != PW_OK)
        return pw_error(PW_ERR_NOT_FOUND, "model '%s' has no chat template (tokenizer.chat_template); "
                        "use raw prompts", m->info.name);
    if (pw_jinja_parse(src, strlen(src), t) != PW_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", pw_last_error());
        return pw_error(PW_ERR_UNSUPPORTED, "model '%s': its chat template cannot be used: %s",
                        m->info.name, why);
    }
    return PW_OK;
}

static pw_status check_messages(const pw_chat_message *msgs, int n) {
    if (n < 1 || !msgs) return pw_error(PW_ERR_INVALID_ARG, "chat: no messages");
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

/* A special token's text as a trusted template string ("" when the
 * vocabulary has none). */
static pw_jinja_value *token_string(const pw_model *m, int32_t id) {
    const char *text = id >= 0 ? pw_tokenizer_token_text(m->tokenizer, id) : NULL;
    if (!text) text = "";
    return pw_jinja_string(text, strlen(text), true);
}

/* The caller's tools (a JSON array of objects) as the template's `tools`. */
static pw_status parse_tools(const char *tools_json, pw_jinja_value **out) {
    *out = NULL;
    pw_jinja_value *v = NULL;
    if (pw_jinja_from_json(tools_json, strlen(tools_json), &v) != PW_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", pw_last_error());
        return pw_error(PW_ERR_INVALID_ARG, "chat: tools: %s", why);
    }
    if (!pw_jinja_is_list_of_dicts(v)) {
        pw_jinja_value_free(v);
        return pw_error(PW_ERR_INVALID_ARG, "chat: tools must be a JSON array of objects");
    }
    *out = v;
    return PW_OK;
}

static pw_status build_context(const pw_model *m, const pw_chat_message *msgs, int n,
                               const char *tools_json, bool add_generation_prompt,
                               pw_jinja_value **out) {
    *out = NULL;
    pw_jinja_value *tools = NULL;
    if (tools_json) PW_TRY(parse_tools(tools_json, &tools));
    pw_jinja_value *ctx = pw_jinja_dict(), *list = pw_jinja_list();
    pw_status s = ctx && list ? PW_OK : PW_ERR_OOM;
    for (int i = 0; s == PW_OK && i < n; i++) {
        pw_jinja_value *msg = pw_jinja_dict();
        s = pw_jinja_set(msg, "role", pw_jinja_string(msgs[i].role, strlen(msgs[i].role), false));
        if (s == PW_OK)
            s = pw_jinja_set(msg, "content", pw_jinja_string(msgs[i].content, strlen(msgs[i].content), false));
        if (s == PW_OK) s = pw_jinja_append(list, msg);
        else pw_jinja_value_free(msg);
    }
    if (s == PW_OK) {
        s = pw_jinja_set(ctx, "messages", list);
        list = NULL;
    }
    if (s == PW_OK) s = pw_jinja_set(ctx, "add_generation_prompt", pw_jinja_bool(add_generation_prompt));
    if (s == PW_OK) s = pw_jinja_set(ctx, "bos_token", token_string(m, pw_tokenizer_bos(m->tokenizer)));
    if (s == PW_OK) s = pw_jinja_set(ctx, "eos_token", token_string(m, pw_tokenizer_eos(m->tokenizer)));
    if (s == PW_OK && tools) {
        s = pw_jinja_set(ctx, "tools", tools);
        tools = NULL;
    }
    pw_jinja_value_free(tools);
    pw_jinja_value_free(list);
    if (s != PW_OK) {
        pw_jinja_value_free(ctx);
        return pw_error(PW_ERR_OOM, "chat: out of memory building the template's variables");
    }
    *out = ctx;
    return PW_OK;
}

/* The rendered prompt: text, and the spans that are special tokens. */
typedef struct prompt {
    char *text;
    size_t len;
    pw_token_span *markers;
    int64_t n_markers;
} prompt;

static void prompt_free(prompt *p) {
    pw_host_free(p->text);
    pw_host_free(p->markers);
    memset(p, 0, sizeof *p);
}

/* The CONTROL tokens whose text lies inside the trusted spans, leftmost
 * longest first. */
static pw_status find_markers(const pw_model *m, const pw_jinja_rendered *r, prompt *p) {
    const pw_tokenizer *t = m->tokenizer;
    int32_t nv = pw_tokenizer_vocab_size(t);
    int32_t *controls = NULL;
    size_t cap = 0;
    int64_t n_controls = 0;
    for (int32_t id = 0; id < nv; id++) {
        if (pw_tokenizer_token_type(t, id) != PW_TOKEN_CONTROL) continue;
        const char *text = pw_tokenizer_token_text(t, id);
        if (!text || !text[0]) continue;
        int32_t *c = pw_host_grow(controls, sizeof *c, &cap, (size_t)n_controls + 1, (size_t)nv);
        if (!c) {
            pw_host_free(controls);
            return PW_ERR_OOM;
        }
        controls = c;
        controls[n_controls++] = id;
    }
    size_t mcap = 0;
    pw_status s = PW_OK;
    for (int64_t k = 0; s == PW_OK && k < r->n_trusted; k++) {
        size_t at = r->trusted[k].start, end = at + r->trusted[k].len;
        while (at < end) {
            size_t best = 0;
            for (int64_t j = 0; j < n_controls; j++) {
                const char *text = pw_tokenizer_token_text(t, controls[j]);
                size_t len = strlen(text);
                if (len > best && len <= end - at && r->text[at] == text[0] &&
                    memcmp(r->text + at, text, len) == 0)
                    best = len;
            }
            if (!best) {
                at++;
                continue;
            }
            pw_token_span *g = pw_host_grow(p->markers, sizeof *g, &mcap, (size_t)p->n_markers + 1, SIZE_MAX / sizeof *g);
            if (!g) {
                s = PW_ERR_OOM;
                break;
            }
            p->markers = g;
            p->markers[p->n_markers++] = (pw_token_span){at, best};
            at += best;
        }
    }
    pw_host_free(controls);
    return s;
}

/* Renders the conversation into p, with a leading BOS dropped when the
 * tokenizer adds BOS itself. */
static pw_status render(const pw_model *m, const pw_chat_message *msgs, int n, const char *tools_json,
                        bool add_generation_prompt, prompt *p) {
    memset(p, 0, sizeof *p);
    PW_TRY(check_messages(msgs, n));
    pw_jinja_template *t = NULL;
    PW_TRY(load_template(m, &t));
    pw_jinja_value *ctx = NULL;
    pw_jinja_rendered r = {0};
    pw_status s = build_context(m, msgs, n, tools_json, add_generation_prompt, &ctx);
    if (s == PW_OK) {
        s = pw_jinja_render(t, ctx, NULL, &r);
        if (s != PW_OK && s != PW_ERR_OOM) {
            char why[512];
            snprintf(why, sizeof why, "%s", pw_last_error());
            s = pw_error(s, "model '%s': its chat template failed: %s", m->info.name, why);
        }
    }
    if (s == PW_OK) s = find_markers(m, &r, p);
    if (s == PW_OK) {
        p->text = r.text;
        p->len = r.len;
        r.text = NULL;
        /* llama.cpp drops the template's BOS where the tokenizer adds one */
        int32_t bos = pw_tokenizer_bos(m->tokenizer);
        if (bos >= 0 && pw_tokenizer_adds_bos(m->tokenizer) && p->n_markers > 0 && p->markers[0].start == 0 &&
            strlen(pw_tokenizer_token_text(m->tokenizer, bos)) == p->markers[0].len &&
            memcmp(p->text, pw_tokenizer_token_text(m->tokenizer, bos), p->markers[0].len) == 0) {
            size_t cut = p->markers[0].len;
            memmove(p->text, p->text + cut, p->len - cut + 1);
            p->len -= cut;
            memmove(p->markers, p->markers + 1, (size_t)(p->n_markers - 1) * sizeof *p->markers);
            p->n_markers--;
            for (int64_t i = 0; i < p->n_markers; i++) p->markers[i].start -= cut;
        }
    }
    pw_jinja_rendered_free(&r);
    pw_jinja_value_free(ctx);
    pw_jinja_template_free(t);
    if (s != PW_OK) {
        prompt_free(p);
        if (s == PW_ERR_OOM) return pw_error(PW_ERR_OOM, "chat: out of memory rendering the template");
    }
    return s;
}

pw_status pw_model_check_chat_template(const pw_model *m) {
    pw_chat_message probe = {"user", "Hello"};
    prompt p;
    pw_status s = render(m, &probe, 1, NULL, true, &p);
    prompt_free(&p);
    return s;
}

bool pw_model_has_chat_template(const pw_model *m) {
    const char *src;
    bool ok = pw_chat_template_source(m->gguf, &src) == PW_OK;
    pw_clear_error();
    return ok;
}

/* The prompt's text as a malloc'ed string, as the public API promises. */
static pw_status text_out(const prompt *p, size_t from, char **out) {
    *out = malloc(p->len - from + 1);
    if (!*out) return pw_error(PW_ERR_OOM, "chat: out of memory");
    memcpy(*out, p->text + from, p->len - from);
    (*out)[p->len - from] = '\0';
    return PW_OK;
}

/* The prompt from byte `from` on as tokens: the markers special, the rest
 * plain text. A BOS the text already starts with is not added again. */
static pw_status tokens_out(const pw_model *m, const prompt *p, size_t from, bool add_bos, int32_t **ids,
                            int64_t *n_ids) {
    int64_t first = 0;
    while (first < p->n_markers && p->markers[first].start < from) first++;
    pw_token_span *spans = NULL;
    int64_t n = p->n_markers - first;
    if (n > 0) {
        spans = pw_host_alloc((size_t)n * sizeof *spans);
        if (!spans) return PW_ERR_OOM;
        for (int64_t i = 0; i < n; i++)
            spans[i] = (pw_token_span){p->markers[first + i].start - from, p->markers[first + i].len};
    }
    int32_t bos = pw_tokenizer_bos(m->tokenizer);
    const char *bos_text = bos >= 0 ? pw_tokenizer_token_text(m->tokenizer, bos) : NULL;
    if (add_bos && n > 0 && spans[0].start == 0 && bos_text && strlen(bos_text) == spans[0].len &&
        memcmp(p->text + from, bos_text, spans[0].len) == 0)
        add_bos = false;
    int32_t *tmp = NULL;
    int64_t count = 0;
    pw_status s = pw_tokenizer_encode_marked(m->tokenizer, p->text + from, p->len - from, spans, n,
                                             add_bos ? PW_TOKENIZE_ADD_SPECIAL : 0u, &tmp, &count);
    pw_host_free(spans);
    PW_TRY(s);
    s = pw_model_ids_to_caller(tmp, count, ids);
    if (s == PW_OK) *n_ids = count;
    return s;
}

pw_status pw_model_apply_chat_template(const pw_model *m, const pw_chat_message *msgs, int n,
                                       bool add_generation_prompt, char **out) {
    return pw_model_apply_chat_template_tools(m, msgs, n, NULL, add_generation_prompt, out);
}

pw_status pw_model_apply_chat_template_tools(const pw_model *m, const pw_chat_message *msgs, int n,
                                             const char *tools_json, bool add_generation_prompt,
                                             char **out) {
    *out = NULL;
    prompt p;
    pw_status s = render(m, msgs, n, tools_json, add_generation_prompt, &p);
    if (s == PW_OK) s = text_out(&p, 0, out);
    prompt_free(&p);
    return s;
}

pw_status pw_model_tokenize_chat(const pw_model *m, const pw_chat_message *msgs, int n,
                                 bool add_generation_prompt, bool add_bos, int32_t **ids,
                                 int64_t *n_ids) {
    return pw_model_tokenize_chat_tools(m, msgs, n, NULL, add_generation_prompt, add_bos, ids, n_ids);
}

pw_status pw_model_tokenize_chat_tools(const pw_model *m, const pw_chat_message *msgs, int n,
                                       const char *tools_json, bool add_generation_prompt,
                                       bool add_bos, int32_t **ids, int64_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    prompt p;
    pw_status s = render(m, msgs, n, tools_json, add_generation_prompt, &p);
    if (s == PW_OK) s = tokens_out(m, &p, 0, add_bos, ids, n_ids);
    prompt_free(&p);
    return s;
}

/* The next turn is what the template writes after an assistant answer:
 * rendered for [user, assistant answer, user] with the generation prompt,
 * it is everything after the answer. It must begin where the rendering of
 * [user] with the generation prompt, followed by the answer, ends: templates
 * that rewrite earlier turns cannot continue a conversation this way. When
 * the answer was closed by its end-of-generation token (already in the
 * cache), that token's text is left out. *from: where the turn starts. */
static pw_status render_next_turn(const pw_model *m, const char *user, bool answer_closed, prompt *p,
                                  size_t *from) {
    if (!user) return pw_error(PW_ERR_INVALID_ARG, "chat: no user message");
    static const char answer[] = "Sure.";
    pw_chat_message conv[3] = {{"user", "Hello."}, {"assistant", answer}, {"user", user}};
    prompt head;
    PW_TRY(render(m, conv, 1, NULL, true, &head));
    pw_status s = render(m, conv, 3, NULL, true, p);
    size_t at = head.len + strlen(answer);
    if (s == PW_OK && (p->len < at || memcmp(p->text, head.text, head.len) != 0 ||
                       memcmp(p->text + head.len, answer, strlen(answer)) != 0))
        s = pw_error(PW_ERR_UNSUPPORTED, "model '%s': its chat template does not add a turn to a "
                     "conversation without rewriting it; render the whole conversation instead",
                     m->info.name);
    prompt_free(&head);
    if (s != PW_OK) {
        prompt_free(p);
        return s;
    }
    if (answer_closed) {
        for (int64_t i = 0; i < p->n_markers; i++) {
            if (p->markers[i].start < at) continue;
            int32_t id = -1;
            char tok[256];
            size_t len = p->markers[i].len < sizeof tok ? p->markers[i].len : sizeof tok - 1;
            memcpy(tok, p->text + p->markers[i].start, len);
            tok[len] = '\0';
            bool blank = true;
            for (size_t k = at; k < p->markers[i].start; k++)
                blank = blank && strchr(" \t\n", p->text[k]) != NULL;
            if (blank && pw_tokenizer_find(m->tokenizer, tok, &id) == PW_OK &&
                pw_tokenizer_is_eog(m->tokenizer, id))
                at = p->markers[i].start + p->markers[i].len;
            pw_clear_error();
            break;
        }
    }
    *from = at;
    return PW_OK;
}

pw_status pw_model_chat_next_turn(const pw_model *m, const char *user, bool answer_closed,
                                  char **out) {
    *out = NULL;
    prompt p;
    size_t from = 0;
    PW_TRY(render_next_turn(m, user, answer_closed, &p, &from));
    pw_status s = text_out(&p, from, out);
    prompt_free(&p);
    return s;
}

pw_status pw_model_tokenize_chat_next_turn(const pw_model *m, const char *user,
                                           bool answer_closed, int32_t **ids, int64_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    prompt p;
    size_t from = 0;
    PW_TRY(render_next_turn(m, user, answer_closed, &p, &from));
    pw_status s = tokens_out(m, &p, from, false, ids, n_ids);
    prompt_free(&p);
    return s;
}

bool pw_model_is_end_of_generation(const pw_model *m, int32_t token) {
    return pw_tokenizer_is_eog(m->tokenizer, token);
}
