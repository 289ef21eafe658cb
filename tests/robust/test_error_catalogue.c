/* Every error message the code can emit is in docs/errors.md.
 *
 * Scans src/, tools/ and bench/ (PW_SOURCE_DIR, read at run time so new
 * messages are caught without rebuilding) for pw_error(code, fmt, ...),
 * pw_error_context(code, fmt, ...) and PERR(p, fmt, ...), canonicalizes each
 * literal fmt as docs/errors.md describes ("How messages are matched") and
 * looks for it in backticks in the catalogue. Missing messages fail the test
 * and are printed as ready-to-paste table rows. */
#include "test_util.h"
#include "internal.h"

#include <ctype.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The source tree, read at run time. */
#ifndef PW_SOURCE_DIR
#define PW_SOURCE_DIR PW_TEST_DATA_DIR "/../.."
#endif

#define MAX_TOKENS (1 << 20)
#define MAX_MESSAGE 2048
#define MAX_PATH_LEN 4096

typedef struct token {
    const char *s;
    size_t n;
} token;

typedef struct scan_state {
    const char *catalogue;
    int messages;
    int missing;
    char **seen; /* canonical messages already reported missing */
    int nseen, capseen;
} scan_state;


/* C tokens without comments: string literals, identifiers, one-character
 * punctuation. Character literals and numbers are kept as opaque tokens. */
static int tokenize(const char *src, size_t len, token *toks, int cap) {
    int n = 0;
    size_t i = 0;
    while (i < len && n < cap) {
        char c = src[i];
        if (isspace((unsigned char)c)) {
            i++;
        } else if (c == '/' && i + 1 < len && src[i + 1] == '/') {
            while (i < len && src[i] != '\n') i++;
        } else if (c == '/' && i + 1 < len && src[i + 1] == '*') {
            i += 2;
            while (i + 1 < len && !(src[i] == '*' && src[i + 1] == '/')) i++;
            i += 2;
        } else if (c == '"' || c == '\'') {
            size_t start = i++;
            while (i < len && src[i] != c && src[i] != '\n') i += src[i] == '\\' ? 2 : 1;
            i++;
            toks[n++] = (token){src + start, (i > len ? len : i) - start};
        } else if (isalpha((unsigned char)c) || c == '_') {
            size_t start = i;
            while (i < len && (isalnum((unsigned char)src[i]) || src[i] == '_')) i++;
            toks[n++] = (token){src + start, i - start};
        } else if (isdigit((unsigned char)c)) {
            size_t start = i;
            while (i < len && (isalnum((unsigned char)src[i]) || src[i] == '.')) i++;
            toks[n++] = (token){src + start, i - start};
        } else {
            toks[n++] = (token){src + i, 1};
            i++;
        }
    }
    return n;
}

static bool tok_is(token t, const char *s) { return t.n == strlen(s) && memcmp(t.s, s, t.n) == 0; }

/* Replaces printf conversions by {}, %% by %, \" by ", | by \| . */
static void canonicalize(const char *fmt, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = fmt; *p && o + 4 < cap;) {
        if (p[0] == '%' && p[1] == '%') {
            out[o++] = '%';
            p += 2;
        } else if (p[0] == '%') {
            const char *q = p + 1;
            while (*q && strchr("-+ #0", *q)) q++;
            while (*q && (isdigit((unsigned char)*q) || *q == '*' || *q == '.')) q++;
            while (*q && strchr("hlzjtL", *q)) q++;
            if (*q && strchr("diouxXeEfFgGcspaA", *q)) {
                out[o++] = '{';
                out[o++] = '}';
                p = q + 1;
            } else {
                out[o++] = *p++;
            }
        } else if (p[0] == '\\' && p[1] == '"') {
            out[o++] = '"';
            p += 2;
        } else if (p[0] == '|') {
            out[o++] = '\\';
            out[o++] = '|';
            p++;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = 0;
}

static bool has_letter(const char *s) {
    for (; *s; s++)
        if (isalpha((unsigned char)*s)) return true;
    return false;
}

static void check_message(scan_state *st, const char *file, int line, const char *code, const char *fmt) {
    char canon[MAX_MESSAGE], quoted[MAX_MESSAGE + 2];
    canonicalize(fmt, canon, sizeof canon);
    if (!has_letter(canon)) return;
    st->messages++;
    snprintf(quoted, sizeof quoted, "`%s`", canon);
    if (strstr(st->catalogue, quoted)) return;
    for (int i = 0; i < st->nseen; i++)
        if (strcmp(st->seen[i], canon) == 0) return;
    if (st->nseen == st->capseen) {
        size_t cap = (size_t)st->capseen;
        char **seen = pw_host_grow(st->seen, sizeof *seen, &cap, (size_t)st->nseen + 1, INT_MAX);
        if (!seen) return;
        st->seen = seen;
        st->capseen = (int)cap;
    }
    st->seen[st->nseen++] = strdup(canon);
    st->missing++;
    fprintf(stderr, "missing from docs/errors.md (%s:%d):\n| `%s` | %s | CAUSE | FIX |\n", file, line, canon,
            code);
}

static int line_of(const char *src, const char *at) {
    int line = 1;
    for (const char *p = src; p < at; p++) line += *p == '\n';
    return line;
}

static void scan_file(scan_state *st, const char *path, const char *rel) {
    size_t len;
    char *src = pw_test_read_file(path, &len);
    if (!src) return;
    token *toks = malloc(MAX_TOKENS * sizeof *toks);
    int n = tokenize(src, len, toks, MAX_TOKENS);
    for (int i = 0; i + 2 < n; i++) {
        bool perr = tok_is(toks[i], "PERR");
        if (!(tok_is(toks[i], "pw_error") || tok_is(toks[i], "pw_error_context") || perr) ||
            !tok_is(toks[i + 1], "("))
            continue;
        char code[64] = "(propagated)";
        if (perr) snprintf(code, sizeof code, "PARSE");
        else if (toks[i + 2].n > 7 && memcmp(toks[i + 2].s, "PW_ERR_", 7) == 0)
            snprintf(code, sizeof code, "%.*s", (int)toks[i + 2].n - 7, toks[i + 2].s + 7);
        /* skip the first argument */
        int j = i + 2, depth = 0;
        for (; j < n; j++) {
            if (toks[j].n == 1 && strchr("([{", toks[j].s[0])) depth++;
            else if (toks[j].n == 1 && strchr(")]}", toks[j].s[0])) {
                if (depth-- == 0) break;
            } else if (tok_is(toks[j], ",") && depth == 0) break;
        }
        if (j >= n || !tok_is(toks[j], ",")) continue;
        char fmt[MAX_MESSAGE] = "";
        size_t flen = 0;
        int literals = 0;
        for (j++; j < n; j++) {
            token t = toks[j];
            if (t.s[0] == '"' && t.n >= 2) {
                size_t k = t.n - 2;
                if (flen + k >= sizeof fmt) k = sizeof fmt - 1 - flen;
                memcpy(fmt + flen, t.s + 1, k);
                flen += k;
                literals++;
            } else if (t.n > 3 && memcmp(t.s, "PRI", 3) == 0 && flen + 1 < sizeof fmt) {
                fmt[flen++] = t.s[3]; /* PRId64 -> d */
            } else {
                break;
            }
        }
        fmt[flen] = 0;
        if (!literals || j >= n || !(tok_is(toks[j], ",") || tok_is(toks[j], ")"))) continue;
        check_message(st, rel, line_of(src, toks[i].s), code, fmt);
    }
    free(toks);
    free(src);
}

static void scan_dir(scan_state *st, const char *root, const char *rel) {
    char path[MAX_PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[MAX_PATH_LEN], full[MAX_PATH_LEN];
        snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, sub);
        struct stat sb;
        if (stat(full, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            scan_dir(st, root, sub);
        } else {
            size_t n = strlen(e->d_name);
            bool source = (n > 2 && strcmp(e->d_name + n - 2, ".c") == 0) ||
                          (n > 2 && strcmp(e->d_name + n - 2, ".h") == 0) ||
                          (n > 3 && strcmp(e->d_name + n - 3, ".cu") == 0);
            if (source) scan_file(st, full, sub);
        }
    }
    closedir(d);
}

/* The canonical form is what the catalogue's rules say. */
static void test_canonicalize(void) {
    char out[256];
    canonicalize("gguf: key '%s' has %" "zu bytes, 100%% \\\"x\\\" a|b %.3f %5lld %q", out, sizeof out);
    CHECK_STREQ(out, "gguf: key '{}' has {} bytes, 100% \"x\" a\\|b {} {} %q");
}

/* The scanner finds every form of call, and only real calls. */
static void test_scanner(void) {
    static const char src[] =
        "// pw_error(PW_ERR_IO, \"in a comment\");\n"
        "return pw_error(PW_ERR_IO, \"cannot open '%s'\", path);\n"
        "return pw_error_context(s, \"loading %\" PRId64 \" \" \"rows\", n);\n"
        "return PERR(p, \"expected %s\", what);\n"
        "return pw_error(code, fmt, ap);\n"
        "return pw_error(PW_ERR_IO, \"%s\", msg);\n";
    char path[] = "/tmp/pw_catalogue_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, src, sizeof src - 1) == (ssize_t)(sizeof src - 1));
    close(fd);
    scan_state st = {.catalogue = "| `cannot open '{}'` |\n| `expected {}` |"};
    scan_file(&st, path, "sample.c");
    unlink(path);
    CHECK_EQ_INT(st.messages, 3);
    CHECK_EQ_INT(st.missing, 1);
    CHECK_STREQ(st.seen[0], "loading {} rows");
    free(st.seen[0]);
    free(st.seen);
}

static void test_catalogue_complete(void) {
    char path[MAX_PATH_LEN];
    snprintf(path, sizeof path, "%s/docs/errors.md", PW_SOURCE_DIR);
    char *catalogue = pw_test_read_file(path, NULL);
    CHECK(catalogue != NULL);
    if (!catalogue) return;
    scan_state st = {.catalogue = catalogue};
    scan_dir(&st, PW_SOURCE_DIR, "src");
    scan_dir(&st, PW_SOURCE_DIR, "tools");
    scan_dir(&st, PW_SOURCE_DIR, "bench");
    printf("%d error messages scanned, %d missing from docs/errors.md\n", st.messages, st.missing);
    CHECK(st.messages > 100); /* the scan really ran over the tree */
    CHECK_EQ_INT(st.missing, 0);
    for (int i = 0; i < st.nseen; i++) free(st.seen[i]);
    free(st.seen);
    free(catalogue);
}

int main(void) {
    test_canonicalize();
    test_scanner();
    test_catalogue_complete();
    return pw_test_finish("robust_error_catalogue");
}
