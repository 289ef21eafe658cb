/* piecewise inspect: print a GGUF file's header, metadata (arrays and long
 * strings abbreviated), tensor table with each tensor's type, a count of
 * tensors per type and the tokenizer summary. Any problem the
 * reader finds is reported with the field it concerns, and exit code 1. */
#include "cli.h"

#include "internal.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INSPECT_DEFAULT_ITEMS 8
#define INSPECT_STRING_CHARS 96

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise inspect FILE.gguf [--items N]\n\n"
               "Prints the GGUF header, every metadata key with its type and value (arrays\n"
               "show their first N elements, default %d; long strings are cut), the tensor\n"
               "table (name, type, dims in ggml order, bytes, offset), the number of tensors\n"
               "of each type (f32, q8_0, q4_K, q6_K, ...) and the tokenizer.\n",
            INSPECT_DEFAULT_ITEMS);
}

/* Prints bytes as a C-style quoted string, at most max_chars of them. */
static void print_quoted(const char *s, size_t len, size_t max_chars) {
    putchar('"');
    size_t shown = len < max_chars ? len : max_chars;
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (shown < len) printf("... (%zu bytes)", len);
}

static void print_scalar(const pw_gguf_kv *kv) {
    int64_t i;
    uint64_t u;
    double f;
    bool b;
    const char *s;
    size_t len;
    switch (pw_gguf_kv_type(kv)) {
    case PW_GGUF_STRING:
        if (pw_gguf_kv_string(kv, &s, &len) == PW_OK) print_quoted(s, len, INSPECT_STRING_CHARS);
        break;
    case PW_GGUF_BOOL:
        if (pw_gguf_kv_bool(kv, &b) == PW_OK) printf("%s", b ? "true" : "false");
        break;
    case PW_GGUF_FLOAT32:
    case PW_GGUF_FLOAT64:
        if (pw_gguf_kv_float(kv, &f) == PW_OK) printf("%.9g", f);
        break;
    case PW_GGUF_UINT8: case PW_GGUF_UINT16: case PW_GGUF_UINT32: case PW_GGUF_UINT64:
        if (pw_gguf_kv_uint(kv, &u) == PW_OK) printf("%" PRIu64, u);
        break;
    default:
        if (pw_gguf_kv_int(kv, &i) == PW_OK) printf("%" PRId64, i);
        break;
    }
}

static void print_array(const pw_gguf_kv *kv, uint64_t items) {
    pw_gguf_type et = pw_gguf_kv_array_type(kv);
    uint64_t n = pw_gguf_kv_array_len(kv);
    printf("[");
    for (uint64_t k = 0; k < n && k < items; k++) {
        if (k) printf(", ");
        const char *s;
        size_t len;
        int64_t i;
        double f;
        if (et == PW_GGUF_STRING) {
            if (pw_gguf_kv_array_string(kv, k, &s, &len) == PW_OK) print_quoted(s, len, 32);
        } else if (et == PW_GGUF_FLOAT32 || et == PW_GGUF_FLOAT64) {
            if (pw_gguf_kv_array_float(kv, k, &f) == PW_OK) printf("%.6g", f);
        } else if (pw_gguf_kv_array_int(kv, k, &i) == PW_OK) {
            printf("%" PRId64, i);
        } else if (pw_gguf_kv_array_float(kv, k, &f) == PW_OK) {
            printf("%.17g", f); /* a uint64 past INT64_MAX */
        }
    }
    if (n > items) printf("%s... %" PRIu64 " more", items ? ", " : "", n - items);
    printf("]");
}

static void print_tokenizer(const pw_gguf *g) {
    if (!pw_gguf_has(g, "tokenizer.ggml.model")) {
        printf("\ntokenizer: none (no tokenizer.ggml.model)\n");
        return;
    }
    pw_tokenizer *t = NULL;
    pw_status s = pw_tokenizer_new(g, &t);
    if (s != PW_OK) {
        printf("\ntokenizer: cannot build: %s (%s)\n", pw_last_error(), pw_status_name(s));
        return;
    }
    printf("\ntokenizer: %s, %" PRId32 " tokens, bos %" PRId32 ", eos %" PRId32
           ", unk %" PRId32 ", adds bos: %s\n",
           pw_tokenizer_get_kind(t) == PW_TOKENIZER_SPM ? "llama (SentencePiece)"
                                                       : "gpt2 (byte-level BPE)",
           pw_tokenizer_vocab_size(t), pw_tokenizer_bos(t), pw_tokenizer_eos(t),
           pw_tokenizer_unk(t), pw_tokenizer_adds_bos(t) ? "yes" : "no");
    pw_tokenizer_free(t);
}

/* Every key with its type and value (arrays show their first `items`). */
static void print_metadata(const pw_gguf *g, uint64_t items) {
    int64_t n_kv = pw_gguf_kv_count(g);
    int key_width = 10;
    for (int64_t i = 0; i < n_kv; i++) {
        int w = (int)strlen(pw_gguf_kv_key(pw_gguf_kv_at(g, i)));
        if (w > key_width && w < 48) key_width = w;
    }
    printf("\nmetadata (%" PRId64 " keys):\n", n_kv);
    for (int64_t i = 0; i < n_kv; i++) {
        const pw_gguf_kv *kv = pw_gguf_kv_at(g, i);
        char type[48];
        if (pw_gguf_kv_type(kv) == PW_GGUF_ARRAY)
            snprintf(type, sizeof type, "%s[%" PRIu64 "]",
                     pw_gguf_type_name(pw_gguf_kv_array_type(kv)), pw_gguf_kv_array_len(kv));
        else
            snprintf(type, sizeof type, "%s", pw_gguf_type_name(pw_gguf_kv_type(kv)));
        printf("  %-*s %-15s ", key_width, pw_gguf_kv_key(kv), type);
        if (pw_gguf_kv_type(kv) == PW_GGUF_ARRAY) print_array(kv, items);
        else print_scalar(kv);
        printf("\n");
    }
}

/* One line per tensor, then the totals per type. */
static void print_tensors(const pw_gguf *g) {
    int64_t n_tensors = pw_gguf_tensor_count(g);
    int name_width = 4;
    for (int64_t i = 0; i < n_tensors; i++) {
        int w = (int)strlen(pw_gguf_tensor_at(g, i)->name);
        if (w > name_width && w < 64) name_width = w;
    }
    uint64_t total = 0, per_type_bytes[PW_DTYPE_COUNT_] = {0};
    int64_t per_type_count[PW_DTYPE_COUNT_] = {0};
    printf("\ntensors (%" PRId64 "):\n  %-*s %-5s %-24s %12s %12s\n", n_tensors, name_width,
           "name", "type", "dims", "bytes", "offset");
    for (int64_t i = 0; i < n_tensors; i++) {
        const pw_gguf_tensor *t = pw_gguf_tensor_at(g, i);
        char dims[96];
        int used = snprintf(dims, sizeof dims, "[");
        for (int d = 0; d < t->n_dims && used < (int)sizeof dims; d++)
            used += snprintf(dims + used, sizeof dims - (size_t)used, "%s%" PRId64, d ? ", " : "",
                             t->dims[d]);
        if (used < (int)sizeof dims) snprintf(dims + used, sizeof dims - (size_t)used, "]");
        printf("  %-*s %-5s %-24s %12" PRIu64 " %12" PRIu64 "\n", name_width, t->name,
               pw_dtype_name(t->dtype), dims, t->nbytes, t->offset);
        total += t->nbytes;
        per_type_bytes[t->dtype] += t->nbytes;
        per_type_count[t->dtype]++;
    }
    printf("\ntotal: %" PRId64 " tensors, %" PRIu64 " bytes (%.2f MiB);", n_tensors, total,
           (double)total / (1024.0 * 1024.0));
    for (int d = 0; d < PW_DTYPE_COUNT_; d++)
        if (per_type_count[d])
            printf(" %s: %" PRId64 " (%.2f MiB)", pw_dtype_name((pw_dtype)d), per_type_count[d],
                   (double)per_type_bytes[d] / (1024.0 * 1024.0));
    printf("\n\ntensor types:\n");
    for (int d = 0; d < PW_DTYPE_COUNT_; d++)
        if (per_type_count[d])
            printf("  %-5s %6" PRId64 " tensors %12" PRIu64 " bytes (%5.1f%%)\n",
                   pw_dtype_name((pw_dtype)d), per_type_count[d], per_type_bytes[d],
                   total ? 100.0 * (double)per_type_bytes[d] / (double)total : 0.0);
}

/* Returns 0 or 2 (a usage error, printed). */
static int parse_args(int argc, char **argv, const char **path, uint64_t *items) {
    *path = NULL;
    *items = INSPECT_DEFAULT_ITEMS;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--items") == 0) {
            char *end = NULL;
            const char *v = i + 1 < argc ? argv[++i] : "";
            long long n = strtoll(v, &end, 10);
            if (!*v || *end || n < 0) {
                fprintf(stderr, "piecewise inspect: --items needs a count >= 0, got '%s'\n", v);
                return 2;
            }
            *items = (uint64_t)n;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "piecewise inspect: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (*path) {
            fprintf(stderr, "piecewise inspect: one file at a time ('%s' and '%s')\n", *path, argv[i]);
            return 2;
        } else {
            *path = argv[i];
        }
    }
    if (!*path) {
        usage(stderr);
        return 2;
    }
    return 0;
}

int pw_cmd_inspect(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *path;
    uint64_t items;
    int rc = parse_args(argc, argv, &path, &items);
    if (rc) return rc;
    pw_gguf *g = NULL;
    pw_status s = pw_gguf_open(path, &g);
    if (s != PW_OK) return pw_cli_fail(path, s);
    printf("%s: GGUF v%" PRIu32 ", %zu bytes, alignment %" PRIu32 ", data at offset %" PRIu64 "\n",
           path, pw_gguf_version(g), pw_gguf_file_size(g), pw_gguf_alignment(g),
           pw_gguf_data_offset(g));
    print_metadata(g, items);
    print_tensors(g);
    print_tokenizer(g);
    pw_gguf_free(g);
    return 0;
}
