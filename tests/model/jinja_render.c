/* Renders a chat template with the piecewise Jinja interpreter, for the
 * comparison against Python's jinja2 (scripts/jinja-compare.py).
 *
 *   pw_jinja_render TEMPLATE CONTEXT.json NOW [MAX_STEPS]
 *                                               the output on stdout, or the
 *                                               error on stderr and status 1
 *   pw_jinja_render --gguf-template MODEL.gguf  the template the model uses
 *                                               (pw_chat_template_source)
 *
 * CONTEXT.json is a JSON object: the template's variables (strings are
 * data, except bos_token and eos_token). NOW is the time strftime_now
 * formats (seconds since the epoch). With PW_JINJA_SPANS=FILE in the
 * environment, the trusted spans go to FILE, one "start length" a line. */
#include "internal.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/jinja.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv) {
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
