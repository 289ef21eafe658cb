/* The Jinja interpreter: statements, loop variables, filters, tests,
 * methods and whitespace control give jinja2's output (under trim_blocks
 * and lstrip_blocks, as transformers renders chat templates); what came
 * from data is marked apart from the template's own text; syntax errors,
 * raised exceptions and every bound are clear errors. Expected outputs were
 * produced with jinja2 3.1 (scripts/jinja-compare.py's environment). */
#include "test_util.h"
#include "internal.h"

#include "model/jinja.h"

/* The context every case gets: two messages, a flag, a tool list. */
static pw_jinja_value *standard_context(void) {
    pw_jinja_value *ctx = pw_jinja_dict(), *msgs = pw_jinja_list();
    const char *roles[2] = {"system", "user"}, *texts[2] = {"Be brief.", "  Hi <|im_end|> there  "};
    for (int i = 0; i < 2; i++) {
        pw_jinja_value *m = pw_jinja_dict();
        CHECK_OK(pw_jinja_set(m, "role", pw_jinja_string(roles[i], strlen(roles[i]), false)));
        CHECK_OK(pw_jinja_set(m, "content", pw_jinja_string(texts[i], strlen(texts[i]), false)));
        CHECK_OK(pw_jinja_append(msgs, m));
    }
    CHECK_OK(pw_jinja_set(ctx, "messages", msgs));
    CHECK_OK(pw_jinja_set(ctx, "add_generation_prompt", pw_jinja_bool(true)));
    CHECK_OK(pw_jinja_set(ctx, "bos_token", pw_jinja_string("<s>", 3, true)));
    CHECK_OK(pw_jinja_set(ctx, "n", pw_jinja_int(7)));
    CHECK_OK(pw_jinja_set(ctx, "x", pw_jinja_float(0.5)));
    CHECK_OK(pw_jinja_set(ctx, "nothing", pw_jinja_none()));
    pw_jinja_value *tool = pw_jinja_dict(), *fn = pw_jinja_dict(), *tools = pw_jinja_list();
    CHECK_OK(pw_jinja_set(fn, "name", pw_jinja_string("get_weather", 11, false)));
    CHECK_OK(pw_jinja_set(fn, "description", pw_jinja_string("Weather \"now\"", 13, false)));
    CHECK_OK(pw_jinja_set(tool, "type", pw_jinja_string("function", 8, false)));
    CHECK_OK(pw_jinja_set(tool, "function", fn));
    CHECK_OK(pw_jinja_append(tools, tool));
    CHECK_OK(pw_jinja_set(ctx, "tools", tools));
    return ctx;
}

static pw_jinja_value *ctx;

/* Renders src; NULL (with the error set) on failure. */
static char *render(const char *src, const pw_jinja_limits *lim, pw_jinja_rendered *keep) {
    pw_jinja_template *t = NULL;
    pw_jinja_rendered r = {0};
    pw_status s = pw_jinja_parse(src, strlen(src), &t);
    if (s == PW_OK) s = pw_jinja_render(t, ctx, lim, &r);
    pw_jinja_template_free(t);
    if (s != PW_OK) return NULL;
    char *out = pw_host_strdup(r.text);
    if (keep) *keep = r;
    else pw_jinja_rendered_free(&r);
    return out;
}

#define EXPECT(src, want)                                                                          \
    do {                                                                                           \
        char *got_ = render(src, NULL, NULL);                                                      \
        if (!got_) fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, src, pw_last_error());  \
        CHECK(got_ != NULL);                                                                       \
        if (got_) CHECK_STREQ(got_, want);                                                         \
        pw_host_free(got_);                                                                        \
    } while (0)

#define EXPECT_ERR(src, code, needle)                                                              \
    do {                                                                                           \
        pw_jinja_template *t_ = NULL;                                                              \
        pw_jinja_rendered r_ = {0};                                                                \
        pw_status st_ = pw_jinja_parse(src, strlen(src), &t_);                                     \
        if (st_ == PW_OK) st_ = pw_jinja_render(t_, ctx, NULL, &r_);                               \
        CHECK_ERR(st_, code, needle);                                                              \
        CHECK(r_.text == NULL);                                                                    \
        pw_jinja_template_free(t_);                                                                \
    } while (0)

static void test_statements(void) {
    EXPECT("{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}", "big");
    EXPECT("{% if n > 50 %}big{% elif n > 2 %}mid{% else %}small{% endif %}", "mid");
    EXPECT("{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}"
           "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %},{% endfor %}",
           "1/2:systemF,2/2:userL,");
    EXPECT("{% for i in range(4) %}{{ loop.index0 }}{{ loop.revindex }}"
           "{% if loop.previtem is defined %}p{{ loop.previtem }}{% endif %}"
           "{% if loop.nextitem is defined %}n{{ loop.nextitem }}{% endif %};{% endfor %}",
           "04n1;13p0n2;22p1n3;31p2;");
    EXPECT("{% for i in [] %}x{% else %}empty{% endfor %}", "empty");
    EXPECT("{% for i in range(10) if i is odd %}{{ i }}{% endfor %}", "13579");
    EXPECT("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}"
           "{% break %}{% endif %}{{ i }}{% endfor %}", "013");
    EXPECT("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}", "a=1 b=2 ");
    EXPECT("{% for c in 'héllo' %}[{{ c }}]{% endfor %}", "[h][é][l][l][o]");
    /* set in a loop does not leak out; a namespace does */
    EXPECT("{% set a = 1 %}{% set ns = namespace(b=1) %}{% for i in range(3) %}{% set a = a + 1 %}"
           "{% set ns.b = ns.b + 1 %}{% endfor %}{{ a }} {{ ns.b }}", "1 4");
    EXPECT("{% set x %}Hello {{ messages[0].role }}{% endset %}[{{ x }}]", "[Hello system]");
    EXPECT("{% set a, b = 1, 2 %}{{ b }}{{ a }}", "21");
    EXPECT("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
           "{{ greet('Ann') }} {{ greet('Bob', punct='?') }}", "Hi Ann! Hi Bob?");
    EXPECT("{% filter upper %}abc{{ 'd' }}{% endfilter %}", "ABCD");
    EXPECT("{% generation %}kept{% endgeneration %}", "kept");
    EXPECT("{% raw %}{{ not evaluated }}{% endraw %}", "{{ not evaluated }}");
    EXPECT("a{# a comment #}b", "ab");
}

static void test_whitespace(void) {
    /* trim_blocks drops the newline after a block tag; lstrip_blocks the
     * indentation before one */
    EXPECT("{% if true %}\n  yes\n{% endif %}\n", "  yes\n");
    EXPECT("<\n    {% if true %}\n    x\n    {% endif %}\n>", "<\n    x\n>");
    EXPECT("a  {%- if true -%}  b  {%- endif %}  c", "ab  c");
    EXPECT("a\n{{- 'b' -}}\nc", "abc");
    EXPECT("a\n  {%+ if true %}b{% endif %}", "a\n  b");
    EXPECT("x {{ 'y' }}\n z", "x y\n z");
    EXPECT("line\r\nnext\n", "line\nnext"); /* newlines normalized, the last one dropped */
    EXPECT("{# c #}\nafter", "after");
}

static void test_expressions(void) {
    EXPECT("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}",
           "7 3 -4 1 2 1024 3.5");
    EXPECT("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }}", "a1None ababab [1, 2]");
    EXPECT("{{ none }} {{ true }} {{ 1.0 }} {{ 0.1 }} {{ 1e-5 }} {{ 1e16 }} {{ x }}",
           "None True 1.0 0.1 1e-05 1e+16 0.5");
    EXPECT("{{ ['a', \"b'c\", 1, none, true, {'k': [1.5]}] }}", "['a', \"b'c\", 1, None, True, {'k': [1.5]}]");
    EXPECT("{{ 'yes' if n is number and not nothing else 'no' }}", "yes");
    EXPECT("{{ 'x' if false }}|", "|");
    EXPECT("{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'a' not in {'a': 1} }}", "True True False");
    EXPECT("{{ 'abcdef'[1:3] }} {{ 'abcdef'[::-1] }} {{ [1, 2, 3, 4][-2:] }} {{ 'abcdef'[::2] }} "
           "{{ [1, 2, 3][5:] }} {{ 'hé'[-1] }}", "bc fedcba [3, 4] ace [] é");
    EXPECT("{{ messages[-1]['role'] }} {{ messages[5] is defined }} {{ messages[0].nope is defined }}",
           "user False False");
    EXPECT("{{ 'a\\tb\\n\\u00e9\\x41' }}", "a\tb\néA");
    EXPECT("{{ 'adjacent' \" literals\" }}", "adjacent literals");
    EXPECT("{{ (1, 2) }} {{ (1,) }} {{ () }} {{ (1, 2) | tojson }}", "(1, 2) (1,) () [1, 2]");
    EXPECT("{{ 3 > 2 > 1 or x < 0 }}", "True");
}

static void test_filters(void) {
    EXPECT("[{{ messages[1].content | trim }}]", "[Hi <|im_end|> there]");
    EXPECT("{{ 'Hello' | upper }} {{ 'Hello' | lower }} {{ 'hello world' | capitalize }} "
           "{{ 'hello big-world' | title }}", "HELLO hello Hello world Hello Big-World");
    EXPECT("{{ messages | length }} {{ 'héllo' | length }} {{ undefined_thing | length }}", "2 5 0");
    EXPECT("{{ ['a', 'b', 'c'] | join(', ') }} {{ messages | join('|', attribute='role') }}",
           "a, b, c system|user");
    EXPECT("{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }}", "a+b+c bba");
    EXPECT("{{ missing | default('dflt') }} {{ '' | default('e', true) }} {{ 'v' | d('z') }}", "dflt e v");
    EXPECT("{{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }} {{ [3, 1, 2] | sort }} "
           "{{ ['b', 'A', 'a'] | unique | list }} {{ [3, 1, 2] | max }}", "32 [1, 2, 3] ['b', 'A'] 3");
    EXPECT("{{ {'b': 1, 'A': 2} | dictsort }} {{ {'a': 1} | items | list }}", "[('A', 2), ('b', 1)] [('a', 1)]");
    EXPECT("{{ tools | selectattr('type', 'equalto', 'function') | map(attribute='function') "
           "| map(attribute='name') | list }}", "['get_weather']");
    EXPECT("{{ messages | rejectattr('role', 'eq', 'system') | map(attribute='role') | join }}", "user");
    EXPECT("{{ [1, 0, 2] | select | list }} {{ ['a', 'B'] | map('upper') | list }}", "[1, 2] ['A', 'B']");
    EXPECT("{{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int(5) }} {{ 3 | float }} {{ 3.7 | round }} "
           "{{ -3 | abs }} {{ 5 | string }}!", "43 4 5 3.0 4.0 3 5!");
    EXPECT("{{ [1, 2, 3] | sum }} {{ 'a b  c' | wordcount }} {{ [1, 2] | reverse | list }} {{ 'ab' | reverse }}",
           "6 3 [2, 1] ba");
    EXPECT("{{ '%s is %d' | format('n', 3) }} {{ '%s-%s' % ('a', 'b') }}", "n is 3 a-b");
    EXPECT("{{ 'a\\nb' | indent(2) }}|{{ 'a\\n\\nb' | indent(2, true) }}", "a\n  b|  a\n\n  b");
    EXPECT("{{ '<a>' | e }} {{ '<b>' | safe }}", "&lt;a&gt; <b>");
    /* Markup (safe) + a plain string escapes the plain one, as jinja2 does */
    EXPECT("{{ 'x'|safe + '\"y\"' }}", "x&#34;y&#34;");
}

static void test_tojson(void) {
    /* transformers' tojson: json.dumps(ensure_ascii=False), insertion order */
    EXPECT("{{ tools | tojson }}",
           "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
           "\"Weather \\\"now\\\"\"}}]");
    EXPECT("{{ {'a': [1, 2.5, none, true], 'é': {}} | tojson(indent=2) }}",
           "{\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"é\": {}\n}");
    EXPECT("{{ 'tab\\there\\u0001' | tojson }}", "\"tab\\there\\u0001\"");
    EXPECT_ERR("{{ tools | map(attribute='type') | tojson }}", PW_ERR_INVALID_ARG, "generator");
    EXPECT_ERR("{{ undefined_thing | tojson }}", PW_ERR_INVALID_ARG, "not JSON serializable");
}

static void test_tests_and_methods(void) {
    EXPECT("{{ nothing is none }}{{ n is defined }}{{ q is undefined }}{{ 'a' is string }}"
           "{{ tools[0] is mapping }}{{ tools is iterable }}{{ tools is sequence }}{{ n is number }}"
           "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 'a' is in 'cat' }}"
           "{{ 4 is divisibleby 2 }}{{ 3 is equalto 3 }}{{ n is not string }}",
           "TrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrue");
    EXPECT("[{{ '  x  '.strip() }}|{{ 'xxyxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}]",
           "[x|y|x|x]");
    EXPECT("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }}",
           "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']");
    EXPECT("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ 'Hi'.upper() }}",
           "True True HI");
    EXPECT("{{ '{} and {name}'.format(1, name='x') }} {{ 'a-b'.replace('-', '') }} {{ ', '.join(['a', 'b']) }}",
           "1 and x ab a, b");
    EXPECT("{{ tools[0].get('type') }} {{ tools[0].get('nope', 'd') }} {{ tools[0].get('nope') }} "
           "{{ tools[0].function.keys() | list }}", "function d None ['name', 'description']");
    EXPECT("{{ 'abcabc'.find('c') }} {{ 'abcabc'.count('bc') }} {{ 'abc'.find('z') }}", "2 2 -1");
    EXPECT("{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "aba");
    EXPECT("{{ strftime_now('%Y-%m-%d') | length }}", "10");
    pw_jinja_limits lim = {.now = 86400 * 365};
    char *s = render("{{ strftime_now('%Y') }}", &lim, NULL);
    CHECK(s && (strcmp(s, "1971") == 0 || strcmp(s, "1970") == 0)); /* local time */
    pw_host_free(s);
}

static void test_errors(void) {
    EXPECT_ERR("{{ raise_exception('roles must alternate') }}", PW_ERR_INVALID_ARG,
               "raised an error: roles must alternate");
    EXPECT_ERR("line1\n{% if x %}", PW_ERR_PARSE, "line 2: 'endif' missing");
    EXPECT_ERR("{% for x in y %}{% endif %}", PW_ERR_PARSE, "unexpected 'endif'");
    EXPECT_ERR("{{ 1 + }}", PW_ERR_PARSE, "line 1: unexpected");
    EXPECT_ERR("{{ 'open }}", PW_ERR_PARSE, "not closed");
    EXPECT_ERR("{% include 'x.jinja' %}", PW_ERR_PARSE, "unsupported statement 'include'");
    EXPECT_ERR("{{ a.b.c }}", PW_ERR_INVALID_ARG, "undefined");
    EXPECT_ERR("{{ 1 / 0 }}", PW_ERR_INVALID_ARG, "division by zero");
    EXPECT_ERR("{{ messages | nofilter }}", PW_ERR_INVALID_ARG, "no filter named 'nofilter'");
    EXPECT_ERR("{{ n is nothingtest }}", PW_ERR_INVALID_ARG, "no test named");
    EXPECT_ERR("{{ messages.append(1) }}", PW_ERR_INVALID_ARG, "unsafe");
    EXPECT_ERR("{% set x = 1 %}{% set x.y = 2 %}", PW_ERR_INVALID_ARG, "cannot assign attribute");
    EXPECT_ERR("{{ range(1000000) | length }}", PW_ERR_INVALID_ARG, "range too big");
    EXPECT_ERR("{{ 9223372036854775807 + 1 }}", PW_ERR_INVALID_ARG, "overflow");
}

static void test_bounds(void) {
    /* endless recursion, huge output, long loops and deep nesting end in
     * an error, not a crash or a hang */
    EXPECT_ERR("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", PW_ERR_INVALID_ARG, "nested deeper");
    EXPECT_ERR("{% for i in range(100000) %}{{ 'xxxxxxxxxx' * 1000 }}{% endfor %}",
               PW_ERR_INVALID_ARG, "bytes allowed");
    EXPECT_ERR("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
               PW_ERR_INVALID_ARG, "evaluation steps");
    EXPECT_ERR("{% set s = 'ab' %}{% for i in range(64) %}{% set s = s + s %}{{ s | length }}{% endfor %}",
               PW_ERR_INVALID_ARG, "bytes allowed");
    char deep[2000];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 300; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 300; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    EXPECT_ERR(deep, PW_ERR_PARSE, "nested more than");
    pw_jinja_limits small = {.max_output = 10};
    CHECK(render("{{ 'x' * 11 }}", &small, NULL) == NULL);
    CHECK(strstr(pw_last_error(), "10 bytes") != NULL);
    pw_jinja_limits few = {.max_steps = 50};
    CHECK(render("{% for i in range(100) %}{% endfor %}", &few, NULL) == NULL);
    CHECK(strstr(pw_last_error(), "50 evaluation steps") != NULL);
}

/* The template's literal text and trusted strings are trusted; message
 * text is not, even when concatenated, trimmed or sliced. */
static void test_trusted_spans(void) {
    pw_jinja_rendered r = {0};
    char *s = render("{{ bos_token }}{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + "
                     "m.content | trim + '<|im_end|>' }}{% endfor %}",
                     NULL, &r);
    CHECK(s != NULL);
    if (!s) return;
    CHECK_STREQ(s, "<s><|im_start|>system\nBe brief.<|im_end|><|im_start|>user\nHi <|im_end|> there<|im_end|>");
    /* the data: the roles, the contents */
    const char *trusted_want[] = {"<s><|im_start|>", "\n", "<|im_end|><|im_start|>", "\n", "<|im_end|>"};
    CHECK_EQ_INT(r.n_trusted, 5);
    for (int64_t i = 0; i < r.n_trusted && i < 5; i++) {
        CHECK_EQ_INT(r.trusted[i].len, strlen(trusted_want[i]));
        CHECK(memcmp(r.text + r.trusted[i].start, trusted_want[i], r.trusted[i].len) == 0);
    }
    /* the <|im_end|> inside the user's message is in no trusted span */
    const char *inner = strstr(s, "Hi <|im_end|>") + 3;
    size_t at = (size_t)(inner - s);
    for (int64_t i = 0; i < r.n_trusted; i++)
        CHECK(!(at >= r.trusted[i].start && at < r.trusted[i].start + r.trusted[i].len));
    pw_jinja_rendered_free(&r);
    pw_host_free(s);
    /* a slice or a replace of data stays data */
    s = render("{{ messages[1].content[2:8] | replace('Hi', '<|im_start|>') }}", NULL, &r);
    CHECK(s && strcmp(s, "Hi <|i") != 0);
    CHECK(s && strncmp(s, "<|im_start|> <|i", 16) == 0);
    /* the replacement is the template's own; the rest is data */
    CHECK_EQ_INT(r.n_trusted, 1);
    if (r.n_trusted == 1) CHECK(r.trusted[0].start == 0 && r.trusted[0].len == 12);
    pw_jinja_rendered_free(&r);
    pw_host_free(s);
}

static void test_api_errors(void) {
    pw_jinja_template *t = NULL;
    CHECK_ERR(pw_jinja_parse(NULL, 3, &t), PW_ERR_INVALID_ARG, "no template");
    pw_jinja_rendered r;
    CHECK_ERR(pw_jinja_render(NULL, NULL, NULL, &r), PW_ERR_INVALID_ARG, "no template");
    CHECK_OK(pw_jinja_parse("x", 1, &t));
    pw_jinja_value *notdict = pw_jinja_list();
    CHECK_ERR(pw_jinja_render(t, notdict, NULL, &r), PW_ERR_INVALID_ARG, "must be a dict");
    CHECK_ERR(pw_jinja_set(notdict, "k", pw_jinja_none()), PW_ERR_INVALID_ARG, "not a dict");
    pw_jinja_value_free(notdict);
    CHECK_OK(pw_jinja_render(t, NULL, NULL, &r));
    CHECK_STREQ(r.text, "x");
    pw_jinja_rendered_free(&r);
    pw_jinja_template_free(t);
    /* every allocation failing in turn: an error, never a crash or a leak */
    const char *src = "{% set ns = namespace(a=[]) %}{% for m in messages %}{{ m.role | upper }}"
                      "{{ m.content[1:] }}{{ tools | tojson }}{% endfor %}";
    for (int n = 1; n < 400; n++) {
        pw_host_fail_nth(n);
        pw_jinja_template *tt = NULL;
        pw_jinja_rendered rr = {0};
        pw_status s = pw_jinja_parse(src, strlen(src), &tt);
        if (s == PW_OK) s = pw_jinja_render(tt, ctx, NULL, &rr);
        pw_host_fail_nth(0);
        pw_jinja_rendered_free(&rr);
        pw_jinja_template_free(tt);
        CHECK(s == PW_OK || s == PW_ERR_OOM);
    }
}

/* JSON as json.loads reads it, written back by tojson as json.dumps writes
 * it: want is Python's json.dumps(json.loads(text), ensure_ascii=False). */
static void expect_json(const char *text, const char *want) {
    pw_jinja_value *v = NULL, *c = pw_jinja_dict();
    pw_status s = pw_jinja_from_json(text, strlen(text), &v);
    if (s != PW_OK) fprintf(stderr, "%s: %s\n", text, pw_last_error());
    CHECK(s == PW_OK);
    CHECK_OK(pw_jinja_set(c, "v", v));
    pw_jinja_template *t = NULL;
    pw_jinja_rendered r = {0};
    CHECK_OK(pw_jinja_parse("{{ v | tojson }}", 16, &t));
    CHECK_OK(pw_jinja_render(t, c, NULL, &r));
    if (r.text) CHECK_STREQ(r.text, want);
    CHECK(r.n_trusted == 0); /* JSON strings are data */
    pw_jinja_rendered_free(&r);
    pw_jinja_template_free(t);
    pw_jinja_value_free(c);
}

static void test_from_json(void) {
    expect_json(" [1, 1.0, -0, 1e2, 2.5E-3, -7, true, false, null] ",
                "[1, 1.0, 0, 100.0, 0.0025, -7, true, false, null]");
    expect_json("{\"s\": \"a\\u00e9\\ud83d\\ude00\\n\\\"\\/\\\\\\t\", \"raw\": \"\xc3\xa9\"}",
                "{\"s\": \"a\xc3\xa9\xf0\x9f\x98\x80\\n\\\"/\\\\\\t\", \"raw\": \"\xc3\xa9\"}");
    /* a repeated key keeps its first place and its last value */
    expect_json("{\"k\": 1, \"k2\": [], \"k\": {\"x\": {}}}", "{\"k\": {\"x\": {}}, \"k2\": []}");
    expect_json("[9223372036854775807, -9223372036854775808]", "[9223372036854775807, -9223372036854775808]");
    char deep[2 * 64 + 1];
    memset(deep, '[', 64);
    memset(deep + 64, ']', 64);
    deep[128] = '\0';
    pw_jinja_value *v = NULL;
    CHECK_OK(pw_jinja_from_json(deep, 128, &v)); /* 64 levels */
    pw_jinja_value_free(v);
    char deeper[2 * 65 + 1];
    memset(deeper, '[', 65);
    memset(deeper + 65, ']', 65);
    deeper[130] = '\0';
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "unexpected end"},
        {"[", "unexpected end"},
        {"[1,]", "unexpected character"},
        {"[1 2]", "expected ',' or ']'"},
        {"{\"a\" 1}", "expected ':'"},
        {"{1: 2}", "expected a string key"},
        {"{\"a\": 1,}", "expected a string key"},
        {"01", "text after the value"},
        {"1.", "bad number"},
        {"1e", "bad number"},
        {"-", "bad number"},
        {".5", "unexpected character"},
        {"+1", "unexpected character"},
        {"\"\\x\"", "bad escape"},
        {"\"\\u12\"", "bad \\u escape"},
        {"\"\\ud800\"", "lone surrogate"},
        {"\"\\ud800\\u0041\"", "lone surrogate"},
        {"\"\\udc00\"", "lone surrogate"},
        {"\"\\u0000\"", "NUL character"},
        {"\"a\tb\"", "control character"},
        {"\"abc", "unterminated string"},
        {"\"abc\\", "unterminated string"},
        {"9223372036854775808", "64-bit range"},
        {"-9223372036854775809", "64-bit range"},
        {"1e999", "out of range"},
        {"NaN", "unexpected character"},
        {"nul", "unexpected character"},
        {"True", "unexpected character"},
        {"[1] x", "text after the value"},
        {"\"\xff\"", "not valid UTF-8"},
        {"\"\xed\xa0\x80\"", "not valid UTF-8"},
    };
    for (size_t i = 0; i < PW_ARRAY_LEN(bad); i++) {
        v = NULL;
        CHECK_ERR(pw_jinja_from_json(bad[i].text, strlen(bad[i].text), &v), PW_ERR_INVALID_ARG, bad[i].why);
        CHECK(v == NULL);
    }
    CHECK_ERR(pw_jinja_from_json(deeper, 130, &v), PW_ERR_INVALID_ARG, "deeper than 64");
    CHECK_ERR(pw_jinja_from_json("[1]\0", 4, &v), PW_ERR_INVALID_ARG, "text after the value");
    CHECK_ERR(pw_jinja_from_json(NULL, 0, &v), PW_ERR_INVALID_ARG, "no text");
    /* every allocation failing in turn: an error, never a crash or a leak */
    const char *doc = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"p\": [1, 2.5, \"x\\u00e9\"]}}]";
    for (int n = 1; n < 200; n++) {
        pw_host_fail_nth(n);
        v = NULL;
        pw_status s = pw_jinja_from_json(doc, strlen(doc), &v);
        pw_host_fail_nth(0);
        CHECK(s == PW_OK || s == PW_ERR_OOM);
        CHECK((s == PW_OK) == (v != NULL));
        pw_jinja_value_free(v);
    }
}

int main(void) {
    ctx = standard_context();
    test_statements();
    test_whitespace();
    test_expressions();
    test_filters();
    test_tojson();
    test_tests_and_methods();
    test_errors();
    test_bounds();
    test_trusted_spans();
    test_api_errors();
    test_from_json();
    pw_jinja_value_free(ctx);
    return pw_test_finish("model_jinja");
}
