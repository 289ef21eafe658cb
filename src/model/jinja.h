/* A Jinja interpreter for chat templates (tokenizer.chat_template), the
 * subset real templates use, rendered the way Hugging Face transformers
 * renders them: jinja2 with trim_blocks and lstrip_blocks, the loop
 * controls (break, continue), an immutable sandbox (lists and dicts cannot
 * be changed, a namespace's attributes can), and the globals
 * raise_exception and strftime_now. docs/templates.md lists what is
 * supported.
 *
 * The template text comes from files users download, so everything is
 * bounded: nesting while parsing, recursion while rendering, the output
 * size and the number of evaluation steps. A template that goes past a
 * bound is a clear error (PW_ERR_PARSE while parsing, PW_ERR_INVALID_ARG
 * while rendering), never a crash or a hang.
 *
 * The output remembers which of its bytes the template wrote itself (its
 * literal text and string literals, and strings the caller marks as
 * trusted, such as the BOS token's text) and which came from data (message
 * contents): the trusted spans. A chat prompt makes special tokens only
 * inside them, so message text never becomes a control token. A string
 * computed from data (sliced, replaced, formatted, serialized) is data. */
#ifndef PW_MODEL_JINJA_H
#define PW_MODEL_JINJA_H

#include "internal.h"

typedef struct pw_jinja_template pw_jinja_template;
/* A value of the render context: none, a bool, a number, a string, a list
 * or a dict (keys in insertion order). Reference counted; values are not
 * changed once built into a context. */
typedef struct pw_jinja_value pw_jinja_value;

/* Bounds on one render. Zero fields take the defaults below. */
typedef struct pw_jinja_limits {
    size_t max_output;  /* bytes of output, and of any one string (default 4 MiB) */
    int64_t max_steps;  /* evaluation steps: statements, expressions, loop turns (default 1M) */
    int max_depth;      /* nesting of statements, expressions and macro calls (default 500) */
    int64_t now;        /* the time strftime_now formats, in seconds since the epoch (0: now) */
} pw_jinja_limits;

/* Parses a template. Syntax errors and unsupported statements are
 * PW_ERR_PARSE with "line N: ..."; expressions nested deeper than 128 levels
 * too. */
pw_status pw_jinja_parse(const char *src, size_t len, pw_jinja_template **out);
void pw_jinja_template_free(pw_jinja_template *t);

typedef struct pw_jinja_span {
    size_t start, len;
} pw_jinja_span;

/* The rendered text (NUL-terminated, pw_host_alloc memory) and its trusted
 * spans: ascending, non-overlapping, non-adjacent. */
typedef struct pw_jinja_rendered {
    char *text;
    size_t len;
    pw_jinja_span *trusted;
    int64_t n_trusted;
} pw_jinja_rendered;

/* Renders t with context (a dict; NULL for none) into *out (freed with
 * pw_jinja_rendered_free). limits may be NULL. Errors: PW_ERR_INVALID_ARG
 * with the reason (raise_exception's message, an undefined value used, a
 * bound passed, a type error) and the template line; PW_ERR_OOM. */
pw_status pw_jinja_render(const pw_jinja_template *t, const pw_jinja_value *context,
                          const pw_jinja_limits *limits, pw_jinja_rendered *out);
void pw_jinja_rendered_free(pw_jinja_rendered *r);

/* Context values. The constructors return NULL when out of memory (the
 * error set through pw_error); functions taking a value accept NULL and
 * then fail with PW_ERR_OOM, so a context can be built without a check
 * after each call. _set and _append take over the reference to v. */
pw_jinja_value *pw_jinja_none(void);
pw_jinja_value *pw_jinja_bool(bool b);
pw_jinja_value *pw_jinja_int(int64_t i);
pw_jinja_value *pw_jinja_float(double f);
/* A string of len bytes; trusted: written by the template's owner (a
 * token's text), else data. */
pw_jinja_value *pw_jinja_string(const char *s, size_t len, bool trusted);
pw_jinja_value *pw_jinja_list(void);
pw_jinja_value *pw_jinja_dict(void);
pw_status pw_jinja_append(pw_jinja_value *list, pw_jinja_value *v);
pw_status pw_jinja_set(pw_jinja_value *dict, const char *key, pw_jinja_value *v);
void pw_jinja_value_free(pw_jinja_value *v);
/* Whether v is a list whose items are all dicts (true for an empty list). */
bool pw_jinja_is_list_of_dicts(const pw_jinja_value *v);

/* JSON text (len bytes) as a value, read as Python's json.loads reads it
 * (jinja_json.c): objects become dicts in key order, numbers with a
 * fraction or exponent floats, other numbers ints; every string is data.
 * PW_ERR_INVALID_ARG naming the fault and its byte offset for text that
 * is not strict JSON, not UTF-8, nested deeper than 64 levels, holds a NUL
 * character, an integer outside 64 bits or a number out of range. */
pw_status pw_jinja_from_json(const char *text, size_t len, pw_jinja_value **out);

#endif
