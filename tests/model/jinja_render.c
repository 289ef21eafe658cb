/* Renders a chat template with the piecewise Jinja interpreter, for the
 * comparison against Python's jinja2 (scripts/jinja-compare.py).
 *
 *   pw_jinja_render TEMPLATE CONTEXT.json NOW [MAX_STEPS]
 *                                               the output on stdout, or the
 *                                               error on stderr and status 1
 *   pw_jinja_render --gguf-template MODEL.gguf  the template the model uses
 *                                               (pw_chat_template_source)
 *
 *   pw_jinja_render --api TEMPLATE CONTEXT.json TOOLS.json
 *                                               the conversation of CONTEXT.json
 *                                               (messages with role and content,
 *                                               add_generation_prompt) and the
 *                                               tools of TOOLS.json (its text as
 *                                               is; "-" for none) rendered
 *                                               through the public chat API
 *                                               (pw_model_apply_chat_template_tools)
 *                                               on a tiny model carrying TEMPLATE,
 *                                               whose BOS and EOS are <s> and
 *                                               </s> and whose tokenizer adds
 *                                               no BOS
 *
 * CONTEXT.json is a JSON object: the template's variables (strings are
 * data, except bos_token and eos_token). NOW is the time strftime_now
 * formats (seconds since the epoch). With PW_JINJA_SPANS=FILE in the
 * environment, the trusted spans go to FILE, one "start length" a line. */
#include "internal.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/jinja.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pw_jinja_value *from_json(const cJSON *j, bool top) {
    if (cJSON_IsNull(j)) return pw_jinja_none();
    if (cJSON_IsBool(j)) return pw_jinja_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == (double)(int64_t)d && d < 9e15 && d > -9e15) return pw_jinja_int((int64_t)d);
        return pw_jinja_float(d);
    }
    if (cJSON_IsString(j)) return pw_jinja_string(j->valuestring, strlen(j->valuestring), false);
    if (cJSON_IsArray(j)) {
        pw_jinja_value *l = pw_jinja_list();
        for (const cJSON *c = j->child; c; c = c->next)
            if (pw_jinja_append(l, from_json(c, false)) != PW_OK) {
                pw_jinja_value_free(l);
                return NULL;
            }
        return l;
    }
    pw_jinja_value *d = pw_jinja_dict();
    for (const cJSON *c = j->child; c; c = c->next)
        if (pw_jinja_set(d, c->string,
                         top && cJSON_IsString(c) && (!strcmp(c->string, "bos_token") || !strcmp(c->string, "eos_token"))
                             ? pw_jinja_string(c->valuestring, strlen(c->valuestring), true)
                             : from_json(c, false)) != PW_OK) {
            pw_jinja_value_free(d);
            return NULL;
        }
    return d;
}

/* The --api mode: the public chat API on a tiny model carrying the template. */
static int render_api(const char *tmpl_path, const char *ctx_path, const char *tools_path) {
    char *tmpl = NULL, *ctx_text = NULL, *tools = NULL;
    size_t len = 0;
    if (pw_file_read_all(tmpl_path, "template", PW_FILE_FOLLOW_LINKS, 1 << 24, &tmpl, &len) != PW_OK ||
        pw_file_read_all(ctx_path, "context", PW_FILE_FOLLOW_LINKS, 1 << 24, &ctx_text, &len) != PW_OK ||
        (strcmp(tools_path, "-") != 0 &&
         pw_file_read_all(tools_path, "tools", PW_FILE_FOLLOW_LINKS, 1 << 24, &tools, &len) != PW_OK)) {
        fprintf(stderr, "%s\n", pw_last_error());
        return 2;
    }
    cJSON *j = cJSON_Parse(ctx_text);
    const cJSON *msgs = j ? cJSON_GetObjectItemCaseSensitive(j, "messages") : NULL;
    int n = cJSON_GetArraySize(msgs);
    pw_chat_message *cm = calloc((size_t)(n ? n : 1), sizeof *cm);
    int rc = 2;
    for (int i = 0; cm && i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role) || !cJSON_IsString(content)) {
            fprintf(stderr, "--api: message %d needs string role and content\n", i);
            goto out;
        }
        cm[i] = (pw_chat_message){role->valuestring, content->valuestring};
    }
    char path[] = "/tmp/pw_jinja_api_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || !cm || !cJSON_IsArray(msgs)) {
        fprintf(stderr, "--api: bad context or no temporary file\n");
        goto out;
    }
    close(fd);
    pw_tiny_llama_config cfg = pw_tiny_llama_default_config();
    cfg.no_add_bos = true;
    pw_gguf_writer *w = NULL;
    pw_model *model = NULL;
    char *text = NULL;
    pw_status s = pw_gguf_writer_new(&w);
    if (s == PW_OK) s = pw_tiny_llama_add(w, &cfg);
    if (s == PW_OK) s = pw_gguf_writer_add_string(w, "tokenizer.chat_template", tmpl);
    if (s == PW_OK) s = pw_gguf_writer_to_file(w, path);
    pw_gguf_writer_free(w);
    if (s == PW_OK) s = pw_model_load(path, &model);
    unlink(path);
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(j, "add_generation_prompt");
    if (s == PW_OK)
        s = pw_model_apply_chat_template_tools(model, cm, n, tools, cJSON_IsTrue(gen), &text);
    if (s == PW_OK) {
        fputs(text, stdout);
        rc = 0;
    } else {
        fprintf(stderr, "%s\n", pw_last_error());
        rc = 1;
    }
    free(text);
    pw_model_free(model);
out:
    free(cm);
    cJSON_Delete(j);
    pw_host_free(tmpl);
    pw_host_free(ctx_text);
    pw_host_free(tools);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--api") == 0) return render_api(argv[2], argv[3], argv[4]);
    if (argc == 3 && strcmp(argv[1], "--gguf-template") == 0) {
        pw_gguf *g;
        const char *t;
        if (pw_gguf_open(argv[2], &g) != PW_OK || pw_chat_template_source(g, &t) != PW_OK) {
            fprintf(stderr, "%s\n", pw_last_error());
            return 1;
        }
        fputs(t, stdout);
        pw_gguf_free(g);
        return 0;
    }
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s TEMPLATE CONTEXT.json NOW | --gguf-template MODEL.gguf\n", argv[0]);
        return 2;
    }
    char *tmpl = NULL, *ctx_text = NULL;
    size_t tmpl_len = 0, ctx_len = 0;
    if (pw_file_read_all(argv[1], "template", PW_FILE_FOLLOW_LINKS, 1 << 24, &tmpl, &tmpl_len) != PW_OK ||
        pw_file_read_all(argv[2], "context", PW_FILE_FOLLOW_LINKS, 1 << 24, &ctx_text, &ctx_len) != PW_OK) {
        fprintf(stderr, "%s\n", pw_last_error());
        return 2;
    }
    cJSON *j = cJSON_ParseWithLength(ctx_text, ctx_len);
    if (!j) {
        fprintf(stderr, "bad context JSON\n");
        return 2;
    }
    pw_jinja_value *ctx = from_json(j, true);
    cJSON_Delete(j);
    pw_jinja_template *t = NULL;
    pw_jinja_rendered r = {0};
    pw_jinja_limits lim = {.now = strtoll(argv[3], NULL, 10), .max_steps = argc == 5 ? strtoll(argv[4], NULL, 10) : 0};
    pw_status s = pw_jinja_parse(tmpl, tmpl_len, &t);
    if (s == PW_OK) s = pw_jinja_render(t, ctx, &lim, &r);
    int rc = 0;
    if (s == PW_OK) {
        fwrite(r.text, 1, r.len, stdout);
        const char *spans = getenv("PW_JINJA_SPANS");
        FILE *f = spans ? fopen(spans, "w") : NULL;
        for (int64_t i = 0; f && i < r.n_trusted; i++) fprintf(f, "%zu %zu\n", r.trusted[i].start, r.trusted[i].len);
        if (f) fclose(f);
    } else {
        fprintf(stderr, "%s\n", pw_last_error());
        rc = 1;
    }
    pw_jinja_rendered_free(&r);
    pw_jinja_template_free(t);
    pw_jinja_value_free(ctx);
    pw_host_free(tmpl);
    pw_host_free(ctx_text);
    return rc;
}
