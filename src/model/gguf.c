/* GGUF reader: see gguf.h for the layout and the guarantees.
 *
 * Parsing is a single forward pass over a cursor. Every read first proves
 * that the bytes exist (need()), every count is bounded by the bytes left
 * before anything is allocated for it, and every size computation uses
 * overflow-checked arithmetic. Low-level readers describe what was cut
 * short; their callers prefix the field ("gguf: kv 3 'general.name'"). */
#include "model/gguf.h"

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct gguf_strref {
    const char *ptr;
    size_t len;
} gguf_strref;

struct pw_gguf_kv {
    char *key;
    pw_gguf_type type;
    pw_gguf_type elem_type; /* arrays only; PW_GGUF_TYPE_COUNT_ otherwise */
    uint64_t count;         /* arrays only */
    const uint8_t *raw;     /* scalar value or first array element, in the file */
    char *str;              /* STRING: NUL-terminated copy */
    size_t str_len;
    gguf_strref *strs;      /* arrays of strings */
};

struct pw_gguf {
    const uint8_t *base;
    size_t size;
    void *mapping; /* non-NULL when we own an mmap of size bytes */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    pw_gguf_kv *kvs;
    int64_t n_tensors;
    pw_gguf_tensor *tensors;
};

typedef struct cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
} cursor;

/* Smallest encodings, used to bound counts before allocating: a kv is at
 * least an empty key (8), a type (4) and a one-byte value; a tensor info is
 * at least an empty name (8), n_dims (4), one dim (8), a type (4) and an
 * offset (8). */
#define GGUF_MIN_KV_BYTES 13
#define GGUF_MIN_TENSOR_INFO_BYTES 32
#define GGUF_HEADER_BYTES 24

/* ---- names -------------------------------------------------------------- */

static const char *const gguf_type_names[PW_GGUF_TYPE_COUNT_] = {
    [PW_GGUF_UINT8] = "uint8",     [PW_GGUF_INT8] = "int8",     [PW_GGUF_UINT16] = "uint16",
    [PW_GGUF_INT16] = "int16",     [PW_GGUF_UINT32] = "uint32", [PW_GGUF_INT32] = "int32",
    [PW_GGUF_FLOAT32] = "float32", [PW_GGUF_BOOL] = "bool",     [PW_GGUF_STRING] = "string",
    [PW_GGUF_ARRAY] = "array",     [PW_GGUF_UINT64] = "uint64", [PW_GGUF_INT64] = "int64",
    [PW_GGUF_FLOAT64] = "float64",
};

const char *pw_gguf_type_name(pw_gguf_type t) {
    return (unsigned)t < PW_GGUF_TYPE_COUNT_ ? gguf_type_names[t] : "?";
}

/* ggml's type table (ggml.h), for naming types we do not read. */
static const char *const ggml_type_names[] = {
    "f32",   "f16",     "q4_0",    "q4_1",   "q4_2 (removed)", "q4_3 (removed)", "q5_0",
    "q5_1",  "q8_0",    "q8_1",    "q2_K",   "q3_K",           "q4_K",           "q5_K",
    "q6_K",  "q8_K",    "iq2_xxs", "iq2_xs", "iq3_xxs",        "iq1_s",          "iq4_nl",
    "iq3_s", "iq2_s",   "iq4_xs",  "i8",     "i16",            "i32",            "i64",
    "f64",   "iq1_m",   "bf16",    "q4_0_4_4 (removed)", "q4_0_4_8 (removed)",
    "q4_0_8_8 (removed)", "tq1_0", "tq2_0", "iq4_nl_4_4 (removed)", "iq4_nl_4_8 (removed)",
    "iq4_nl_8_8 (removed)", "mxfp4",
};

const char *pw_ggml_type_name(uint32_t t) {
    return t < PW_ARRAY_LEN(ggml_type_names) ? ggml_type_names[t] : "?";
}

/* The ggml types piecewise reads, and their dtypes. */
static const struct {
    uint32_t ggml;
    pw_dtype dtype;
} read_types[] = {
    {PW_GGML_TYPE_F32, PW_F32},   {PW_GGML_TYPE_F16, PW_F16},   {PW_GGML_TYPE_BF16, PW_BF16},
    {PW_GGML_TYPE_Q8_0, PW_Q8_0}, {PW_GGML_TYPE_Q4_0, PW_Q4_0}, {PW_GGML_TYPE_Q4_1, PW_Q4_1},
    {PW_GGML_TYPE_Q5_0, PW_Q5_0}, {PW_GGML_TYPE_Q5_1, PW_Q5_1}, {PW_GGML_TYPE_Q2_K, PW_Q2_K},
    {PW_GGML_TYPE_Q3_K, PW_Q3_K}, {PW_GGML_TYPE_Q4_K, PW_Q4_K}, {PW_GGML_TYPE_Q5_K, PW_Q5_K},
    {PW_GGML_TYPE_Q6_K, PW_Q6_K},
};

bool pw_ggml_type_to_dtype(uint32_t t, pw_dtype *out) {
    for (size_t i = 0; i < PW_ARRAY_LEN(read_types); i++)
        if (read_types[i].ggml == t) {
            *out = read_types[i].dtype;
            return true;
        }
    return false;
}

uint32_t pw_dtype_to_ggml_type(pw_dtype d) {
    for (size_t i = 0; i < PW_ARRAY_LEN(read_types); i++)
        if (read_types[i].dtype == d) return read_types[i].ggml;
    return PW_GGML_TYPE_F32;
}

/* ---- checked arithmetic and raw reads ------------------------------------ */

static bool add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }
static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

static pw_status need(const cursor *c, uint64_t n, const char *what) {
    size_t left = c->size - c->pos;
    if (n > left)
        return pw_error(PW_ERR_FORMAT,
                        "truncated: %s needs %" PRIu64 " bytes at offset %zu but the file "
                        "has %zu bytes (file size %zu)",
                        what, n, c->pos, left, c->size);
    return PW_OK;
}

static uint16_t load_u16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t load_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t load_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static pw_status read_u32(cursor *c, uint32_t *out, const char *what) {
    PW_TRY(need(c, 4, what));
    *out = load_u32(c->base + c->pos);
    c->pos += 4;
    return PW_OK;
}

static pw_status read_u64(cursor *c, uint64_t *out, const char *what) {
    PW_TRY(need(c, 8, what));
    *out = load_u64(c->base + c->pos);
    c->pos += 8;
    return PW_OK;
}

/* A string: u64 length, then the bytes (pointer into the file). */
static pw_status read_str(cursor *c, gguf_strref *out, const char *what) {
    uint64_t len;
    char lwhat[96];
    snprintf(lwhat, sizeof lwhat, "%s length", what);
    PW_TRY(read_u64(c, &len, lwhat));
    if (len > c->size - c->pos)
        return pw_error(PW_ERR_FORMAT,
                        "%s length %" PRIu64 " at offset %zu exceeds the %zu bytes left in "
                        "the file (file size %zu)",
                        what, len, c->pos - 8, c->size - c->pos, c->size);
    out->ptr = (const char *)c->base + c->pos;
    out->len = (size_t)len;
    c->pos += (size_t)len;
    return PW_OK;
}

static char *dup_bytes(const char *p, size_t n) {
    char *s = pw_host_alloc(n + 1);
    if (!s) return NULL;
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static size_t scalar_size(pw_gguf_type t) {
    switch (t) {
    case PW_GGUF_UINT8: case PW_GGUF_INT8: case PW_GGUF_BOOL: return 1;
    case PW_GGUF_UINT16: case PW_GGUF_INT16: return 2;
    case PW_GGUF_UINT32: case PW_GGUF_INT32: case PW_GGUF_FLOAT32: return 4;
    case PW_GGUF_UINT64: case PW_GGUF_INT64: case PW_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---- parsing -------------------------------------------------------------- */

static pw_status parse_value(cursor *c, pw_gguf_kv *kv) {
    if (kv->type == PW_GGUF_STRING) {
        gguf_strref s;
        PW_TRY(read_str(c, &s, "string value"));
        kv->str = dup_bytes(s.ptr, s.len);
        if (!kv->str) return pw_error(PW_ERR_OOM, "out of memory copying a string value");
        kv->str_len = s.len;
        return PW_OK;
    }
    if (kv->type == PW_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        PW_TRY(read_u32(c, &et, "array element type"));
        if (et == PW_GGUF_ARRAY)
            return pw_error(PW_ERR_UNSUPPORTED, "arrays of arrays are not supported");
        if (et >= PW_GGUF_TYPE_COUNT_)
            return pw_error(PW_ERR_FORMAT, "unknown array element type %" PRIu32
                            " (valid: 0..%d)", et, PW_GGUF_TYPE_COUNT_ - 1);
        PW_TRY(read_u64(c, &n, "array length"));
        kv->elem_type = (pw_gguf_type)et;
        kv->count = n;
        kv->raw = c->base + c->pos;
        size_t left = c->size - c->pos;
        if (et == PW_GGUF_STRING) {
            /* Each element is at least its 8-byte length. */
            if (n > left / 8)
                return pw_error(PW_ERR_FORMAT,
                                "array of %" PRIu64 " strings cannot fit in the %zu bytes "
                                "left in the file (file size %zu)", n, left, c->size);
            kv->strs = pw_host_alloc((size_t)n * sizeof *kv->strs + 1);
            if (!kv->strs) return pw_error(PW_ERR_OOM, "out of memory for a string array");
            for (uint64_t i = 0; i < n; i++) {
                pw_status s = read_str(c, &kv->strs[i], "string element");
                if (s != PW_OK)
                    return pw_error_context(s, "element %" PRIu64 " of %" PRIu64, i, n);
            }
            return PW_OK;
        }
        uint64_t bytes;
        if (!mul_u64(n, scalar_size(kv->elem_type), &bytes) || bytes > left)
            return pw_error(PW_ERR_FORMAT,
                            "array of %" PRIu64 " %s elements at offset %zu exceeds the %zu "
                            "bytes left in the file (file size %zu)",
                            n, pw_gguf_type_name(kv->elem_type), c->pos, left, c->size);
        c->pos += (size_t)bytes;
        return PW_OK;
    }
    size_t sz = scalar_size(kv->type);
    PW_TRY(need(c, sz, "scalar value"));
    kv->raw = c->base + c->pos;
    c->pos += sz;
    return PW_OK;
}

static pw_status parse_kvs(pw_gguf *g, cursor *c, uint64_t n_kv) {
    g->kvs = pw_host_calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kvs);
    if (!g->kvs) return pw_error(PW_ERR_OOM, "gguf: out of memory for %" PRIu64 " kvs", n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        pw_gguf_kv *kv = &g->kvs[i];
        kv->elem_type = PW_GGUF_TYPE_COUNT_;
        gguf_strref key;
        pw_status s = read_str(c, &key, "key");
        if (s != PW_OK) return pw_error_context(s, "gguf: kv %" PRIu64, i);
        kv->key = dup_bytes(key.ptr, key.len);
        if (!kv->key) return pw_error(PW_ERR_OOM, "gguf: out of memory copying a key");
        g->n_kv = (int64_t)i + 1; /* so pw_gguf_free releases what we hold */
        uint32_t type;
        s = read_u32(c, &type, "value type");
        if (s != PW_OK) return pw_error_context(s, "gguf: kv %" PRIu64 " '%s'", i, kv->key);
        if (type >= PW_GGUF_TYPE_COUNT_)
            return pw_error(PW_ERR_FORMAT,
                            "gguf: kv %" PRIu64 " '%s': unknown value type %" PRIu32
                            " (valid: 0..%d)", i, kv->key, type, PW_GGUF_TYPE_COUNT_ - 1);
        kv->type = (pw_gguf_type)type;
        s = parse_value(c, kv);
        if (s != PW_OK) return pw_error_context(s, "gguf: kv %" PRIu64 " '%s'", i, kv->key);
    }
    return PW_OK;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorting finds duplicates in O(n log n): a hostile file may hold millions
 * of entries, and a pairwise scan would take hours. */
static pw_status check_unique(const char **names, int64_t n, const char *what) {
    if (n < 2) return PW_OK;
    const char **sorted = pw_host_alloc((size_t)n * sizeof *sorted);
    if (!sorted) return pw_error(PW_ERR_OOM, "gguf: out of memory checking %s names", what);
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_names);
    pw_status s = PW_OK;
    for (int64_t i = 1; i < n && s == PW_OK; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            s = pw_error(PW_ERR_FORMAT, "gguf: duplicate %s '%s'", what, sorted[i]);
    pw_host_free(sorted);
    return s;
}

static pw_status check_unique_kvs(const pw_gguf *g) {
    const char **names = pw_host_alloc((size_t)(g->n_kv ? g->n_kv : 1) * sizeof *names);
    if (!names) return pw_error(PW_ERR_OOM, "gguf: out of memory checking keys");
    for (int64_t i = 0; i < g->n_kv; i++) names[i] = g->kvs[i].key;
    pw_status s = check_unique(names, g->n_kv, "key");
    pw_host_free(names);
    return s;
}

static pw_status check_unique_tensors(const pw_gguf *g) {
    const char **names = pw_host_alloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof *names);
    if (!names) return pw_error(PW_ERR_OOM, "gguf: out of memory checking tensor names");
    for (int64_t i = 0; i < g->n_tensors; i++) names[i] = g->tensors[i].name;
    pw_status s = check_unique(names, g->n_tensors, "tensor name");
    pw_host_free(names);
    return s;
}

static pw_status parse_alignment(pw_gguf *g) {
    g->alignment = PW_GGUF_DEFAULT_ALIGNMENT;
    const pw_gguf_kv *kv = pw_gguf_find_kv(g, "general.alignment");
    if (!kv) return PW_OK;
    if (kv->type != PW_GGUF_UINT32)
        return pw_error(PW_ERR_FORMAT, "gguf: general.alignment has type %s, expected uint32",
                        pw_gguf_type_name(kv->type));
    uint32_t a = load_u32(kv->raw);
    if (a == 0 || (a & (a - 1)) != 0)
        return pw_error(PW_ERR_FORMAT,
                        "gguf: general.alignment must be a non-zero power of two, got %" PRIu32,
                        a);
    g->alignment = a;
    return PW_OK;
}

static pw_status parse_tensor_info(pw_gguf *g, cursor *c, int64_t i) {
    pw_gguf_tensor *t = &g->tensors[i];
    gguf_strref name;
    pw_status s = read_str(c, &name, "name");
    if (s != PW_OK) return pw_error_context(s, "gguf: tensor %" PRId64, i);
    char *owned = dup_bytes(name.ptr, name.len);
    if (!owned) return pw_error(PW_ERR_OOM, "gguf: out of memory copying a tensor name");
    t->name = owned;
    g->n_tensors = i + 1;

    uint32_t n_dims;
    s = read_u32(c, &n_dims, "n_dims");
    if (s != PW_OK) return pw_error_context(s, "gguf: tensor '%s'", t->name);
    if (n_dims < 1 || n_dims > PW_GGUF_MAX_DIMS)
        return pw_error(PW_ERR_FORMAT, "gguf: tensor '%s': n_dims %" PRIu32
                        " is outside [1, %d]", t->name, n_dims, PW_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t n_elements = 1;
    for (int d = 0; d < PW_GGUF_MAX_DIMS; d++) {
        uint64_t dim = 1;
        if (d < t->n_dims) {
            s = read_u64(c, &dim, "dimension");
            if (s != PW_OK) return pw_error_context(s, "gguf: tensor '%s' dim %d", t->name, d);
            if (dim > (uint64_t)INT64_MAX)
                return pw_error(PW_ERR_FORMAT, "gguf: tensor '%s': dim %d is %" PRIu64
                                ", larger than INT64_MAX", t->name, d, dim);
        }
        t->dims[d] = (int64_t)dim;
        if (!mul_u64(n_elements, dim, &n_elements) || n_elements > (uint64_t)INT64_MAX)
            return pw_error(PW_ERR_FORMAT, "gguf: tensor '%s': element count overflows "
                            "(dims so far multiply past INT64_MAX)", t->name);
    }
    t->n_elements = (int64_t)n_elements;

    s = read_u32(c, &t->ggml_type, "type");
    if (s != PW_OK) return pw_error_context(s, "gguf: tensor '%s'", t->name);
    if (!pw_ggml_type_to_dtype(t->ggml_type, &t->dtype)) {
        if (t->ggml_type < PW_ARRAY_LEN(ggml_type_names))
            return pw_error(PW_ERR_UNSUPPORTED,
                            "gguf: tensor '%s' has ggml type %" PRIu32 " (%s), which piecewise "
                            "does not read (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
                            "q5_1, q2_K, q3_K, q4_K, q5_K, q6_K)",
                            t->name, t->ggml_type, pw_ggml_type_name(t->ggml_type));
        return pw_error(PW_ERR_FORMAT, "gguf: tensor '%s': unknown ggml type %" PRIu32,
                        t->name, t->ggml_type);
    }
    int64_t be = pw_dtype_block_elems(t->dtype);
    if (t->dims[0] % be != 0)
        return pw_error(PW_ERR_FORMAT, "gguf: tensor '%s': dim 0 (%" PRId64 ") is not a "
                        "multiple of the %s block size %" PRId64, t->name, t->dims[0],
                        pw_dtype_name(t->dtype), be);
    /* n_elements / be * bb cannot overflow: bb <= 4 * be for every type
     * (the K-quants have bb < be). */
    t->nbytes = n_elements / (uint64_t)be * (uint64_t)pw_dtype_block_bytes(t->dtype);

    s = read_u64(c, &t->offset, "data offset");
    if (s != PW_OK) return pw_error_context(s, "gguf: tensor '%s'", t->name);
    return PW_OK;
}

static pw_status place_tensors(pw_gguf *g, size_t infos_end) {
    uint64_t data_offset;
    uint64_t a = g->alignment;
    if (!add_u64(infos_end, a - 1, &data_offset))
        return pw_error(PW_ERR_FORMAT, "gguf: data section offset overflows");
    data_offset = data_offset / a * a;
    g->data_offset = data_offset;
    if (g->n_tensors == 0) return PW_OK;
    if (data_offset > g->size)
        return pw_error(PW_ERR_FORMAT,
                        "gguf: truncated: the data section starts at offset %" PRIu64
                        " (after padding to %" PRIu32 ") but the file size is %zu",
                        data_offset, g->alignment, g->size);
    uint64_t data_size = g->size - data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        pw_gguf_tensor *t = &g->tensors[i];
        if (t->offset % a != 0)
            return pw_error(PW_ERR_FORMAT, "gguf: tensor '%s': data offset %" PRIu64
                            " is not a multiple of the alignment %" PRIu32, t->name,
                            t->offset, g->alignment);
        uint64_t end;
        if (!add_u64(t->offset, t->nbytes, &end) || end > data_size)
            return pw_error(PW_ERR_FORMAT,
                            "gguf: tensor '%s': data [%" PRIu64 ", %" PRIu64 ") of the data "
                            "section at %" PRIu64 " exceeds file size %zu",
                            t->name, t->offset, t->offset + t->nbytes, data_offset, g->size);
        t->data = g->base + data_offset + t->offset;
    }
    return PW_OK;
}

static pw_status parse(pw_gguf *g) {
    cursor c = {g->base, g->size, 0};
    if (g->size < 4 || memcmp(g->base, PW_GGUF_MAGIC, 4) != 0) {
        if (g->size < 4)
            return pw_error(PW_ERR_FORMAT, "gguf: truncated: file size %zu is too small for "
                            "the magic \"GGUF\"", g->size);
        return pw_error(PW_ERR_FORMAT, "gguf: bad magic %02x %02x %02x %02x (expected "
                        "\"GGUF\"): not a GGUF file", g->base[0], g->base[1], g->base[2],
                        g->base[3]);
    }
    c.pos = 4;
    pw_status s = read_u32(&c, &g->version, "version");
    if (s != PW_OK) return pw_error_context(s, "gguf: header");
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            return pw_error(PW_ERR_UNSUPPORTED, "gguf: version 1 (32-bit counts) is not "
                            "supported; reconvert the model (supported: 2, 3)");
        if ((g->version & 0xFFFF) == 0)
            return pw_error(PW_ERR_UNSUPPORTED, "gguf: version field 0x%08" PRIx32 " looks "
                            "big-endian; only little-endian files are supported", g->version);
        return pw_error(PW_ERR_UNSUPPORTED, "gguf: unsupported version %" PRIu32
                        " (supported: 2, 3)", g->version);
    }
    uint64_t n_tensors, n_kv;
    s = read_u64(&c, &n_tensors, "tensor_count");
    if (s == PW_OK) s = read_u64(&c, &n_kv, "kv_count");
    if (s != PW_OK) return pw_error_context(s, "gguf: header");
    size_t left = g->size - c.pos;
    if (n_kv > left / GGUF_MIN_KV_BYTES)
        return pw_error(PW_ERR_FORMAT, "gguf: kv_count %" PRIu64 " cannot fit in the %zu "
                        "bytes after the header (file size %zu)", n_kv, left, g->size);
    if (n_tensors > left / GGUF_MIN_TENSOR_INFO_BYTES)
        return pw_error(PW_ERR_FORMAT, "gguf: tensor_count %" PRIu64 " cannot fit in the %zu "
                        "bytes after the header (file size %zu)", n_tensors, left, g->size);
    PW_TRY(parse_kvs(g, &c, n_kv));
    PW_TRY(check_unique_kvs(g));
    PW_TRY(parse_alignment(g));
    g->tensors = pw_host_calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return pw_error(PW_ERR_OOM, "gguf: out of memory for tensor infos");
    for (int64_t i = 0; i < (int64_t)n_tensors; i++) PW_TRY(parse_tensor_info(g, &c, i));
    PW_TRY(check_unique_tensors(g));
    return place_tensors(g, c.pos);
}

/* ---- open/free ------------------------------------------------------------ */

static pw_status open_parsed(pw_gguf *g, pw_gguf **out) {
    pw_status s = parse(g);
    if (s != PW_OK) {
        pw_gguf_free(g);
        return s;
    }
    *out = g;
    return PW_OK;
}

pw_status pw_gguf_open_memory(const void *data, size_t size, pw_gguf **out) {
    if (!out || (!data && size))
        return pw_error(PW_ERR_INVALID_ARG, "gguf: open_memory needs a buffer and an output");
    *out = NULL;
    pw_gguf *g = pw_host_calloc(1, sizeof *g);
    if (!g) return pw_error(PW_ERR_OOM, "gguf: out of memory");
    static const uint8_t empty[1];
    g->base = data ? data : empty;
    g->size = size;
    return open_parsed(g, out);
}

pw_status pw_gguf_open(const char *path, pw_gguf **out) {
    if (!path || !out) return pw_error(PW_ERR_INVALID_ARG, "gguf: open needs a path and an output");
    *out = NULL;
    /* mapped, not read: the parse touches only the pages it proves exist,
     * the magic first; the size bound is what a mapping can address */
    int fd;
    uint64_t fsize;
    PW_TRY(pw_file_open_regular(path, "gguf", PW_FILE_FOLLOW_LINKS, (uint64_t)PTRDIFF_MAX, &fd,
                                &fsize));
    pw_gguf *g = pw_host_calloc(1, sizeof *g);
    if (!g) {
        close(fd);
        return pw_error(PW_ERR_OOM, "gguf: out of memory");
    }
    static const uint8_t empty[1];
    g->base = empty;
    g->size = (size_t)fsize;
    if (g->size > 0) {
        void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            pw_host_free(g);
            return pw_error(PW_ERR_IO, "gguf: cannot map '%s' (%zu bytes): %s", path,
                            (size_t)fsize, strerror(e));
        }
        g->mapping = m;
        g->base = m;
#ifdef MADV_HUGEPAGE
        /* Decode reads every weight once per token, and a read that
         * crosses a 4 KiB page every 4 KiB waits on the TLB: one core of
         * the AMD EPYC test host streamed 1-18% faster over 2 MiB pages
         * (bench peak, three runs), decode 7% (docs/gguf.md). With
         * this advice the kernel reads the file's pages that are not yet
         * cached in 2 MiB folios and maps those with huge pages; pages
         * already cached keep the size they were cached with. Advice
         * only: where the kernel has no huge pages for files, or refuses,
         * the mapping reads as before. */
        (void)madvise(m, g->size, MADV_HUGEPAGE);
#endif
    }
    close(fd); /* the mapping keeps the file's pages */
    return open_parsed(g, out);
}

void pw_gguf_release_pages(const pw_gguf *g, const void *p, size_t n) {
    if (!g || !g->mapping || n == 0) return;
    uintptr_t map0 = (uintptr_t)g->mapping, map1 = map0 + g->size;
    uintptr_t a = (uintptr_t)p, b = a + n;
    if (a < map0 || b > map1 || b < a) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    a = (a + page - 1) / page * page;
    b = b / page * page;
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

void pw_gguf_free(pw_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        pw_host_free(g->kvs[i].key);
        pw_host_free(g->kvs[i].str);
        pw_host_free(g->kvs[i].strs);
    }
    pw_host_free(g->kvs);
    for (int64_t i = 0; i < g->n_tensors; i++) pw_host_free((char *)g->tensors[i].name);
    pw_host_free(g->tensors);
    if (g->mapping) munmap(g->mapping, g->size);
    pw_host_free(g);
}

uint32_t pw_gguf_version(const pw_gguf *g) { return g->version; }
uint32_t pw_gguf_alignment(const pw_gguf *g) { return g->alignment; }
size_t pw_gguf_file_size(const pw_gguf *g) { return g->size; }
uint64_t pw_gguf_data_offset(const pw_gguf *g) { return g->data_offset; }

/* ---- metadata access -------------------------------------------------------- */

int64_t pw_gguf_kv_count(const pw_gguf *g) { return g->n_kv; }

const pw_gguf_kv *pw_gguf_kv_at(const pw_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kvs[i] : NULL;
}

const pw_gguf_kv *pw_gguf_find_kv(const pw_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].key, key) == 0) return &g->kvs[i];
    return NULL;
}

bool pw_gguf_has(const pw_gguf *g, const char *key) { return pw_gguf_find_kv(g, key) != NULL; }
const char *pw_gguf_kv_key(const pw_gguf_kv *kv) { return kv->key; }
pw_gguf_type pw_gguf_kv_type(const pw_gguf_kv *kv) { return kv->type; }
pw_gguf_type pw_gguf_kv_array_type(const pw_gguf_kv *kv) { return kv->elem_type; }
uint64_t pw_gguf_kv_array_len(const pw_gguf_kv *kv) {
    return kv->type == PW_GGUF_ARRAY ? kv->count : 0;
}

/* Numeric conversion of one stored element. kind: 'i' signed, 'u' unsigned,
 * 'f' float. */
typedef struct gguf_number {
    char kind;
    int64_t i;
    uint64_t u;
    double f;
} gguf_number;

static bool load_number(pw_gguf_type t, const uint8_t *p, gguf_number *n) {
    memset(n, 0, sizeof *n);
    switch (t) {
    case PW_GGUF_UINT8: n->kind = 'u'; n->u = p[0]; return true;
    case PW_GGUF_BOOL: n->kind = 'u'; n->u = p[0] != 0; return true;
    case PW_GGUF_INT8: n->kind = 'i'; n->i = (int8_t)p[0]; return true;
    case PW_GGUF_UINT16: n->kind = 'u'; n->u = load_u16(p); return true;
    case PW_GGUF_INT16: n->kind = 'i'; n->i = (int16_t)load_u16(p); return true;
    case PW_GGUF_UINT32: n->kind = 'u'; n->u = load_u32(p); return true;
    case PW_GGUF_INT32: n->kind = 'i'; n->i = (int32_t)load_u32(p); return true;
    case PW_GGUF_UINT64: n->kind = 'u'; n->u = load_u64(p); return true;
    case PW_GGUF_INT64: n->kind = 'i'; n->i = (int64_t)load_u64(p); return true;
    case PW_GGUF_FLOAT32: {
        float f;
        memcpy(&f, p, 4);
        n->kind = 'f';
        n->f = f;
        return true;
    }
    case PW_GGUF_FLOAT64: n->kind = 'f'; memcpy(&n->f, p, 8); return true;
    default: return false;
    }
}

static pw_status type_mismatch(const pw_gguf_kv *kv, const char *expected) {
    if (kv->type == PW_GGUF_ARRAY)
        return pw_error(PW_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected %s", kv->key,
                        pw_gguf_type_name(kv->elem_type), expected);
    return pw_error(PW_ERR_FORMAT, "gguf: key '%s' has type %s, expected %s", kv->key,
                    pw_gguf_type_name(kv->type), expected);
}

static pw_status number_to_int(const pw_gguf_kv *kv, const gguf_number *n, int64_t *out) {
    if (n->kind == 'i') { *out = n->i; return PW_OK; }
    if (n->kind == 'u' && n->u <= (uint64_t)INT64_MAX) { *out = (int64_t)n->u; return PW_OK; }
    if (n->kind == 'u')
        return pw_error(PW_ERR_FORMAT, "gguf: key '%s': value %" PRIu64 " does not fit int64",
                        kv->key, n->u);
    return type_mismatch(kv, "an integer");
}

static pw_status number_to_uint(const pw_gguf_kv *kv, const gguf_number *n, uint64_t *out) {
    if (n->kind == 'u') { *out = n->u; return PW_OK; }
    if (n->kind == 'i' && n->i >= 0) { *out = (uint64_t)n->i; return PW_OK; }
    if (n->kind == 'i')
        return pw_error(PW_ERR_FORMAT, "gguf: key '%s': value %" PRId64 " is negative, "
                        "expected an unsigned integer", kv->key, n->i);
    return type_mismatch(kv, "an unsigned integer");
}

static pw_status number_to_float(const gguf_number *n, double *out) {
    *out = n->kind == 'f' ? n->f : n->kind == 'i' ? (double)n->i : (double)n->u;
    return PW_OK;
}

static pw_status scalar_number(const pw_gguf_kv *kv, const char *expected, gguf_number *n) {
    if (!load_number(kv->type, kv->raw, n)) return type_mismatch(kv, expected);
    return PW_OK;
}

pw_status pw_gguf_kv_int(const pw_gguf_kv *kv, int64_t *out) {
    gguf_number n;
    PW_TRY(scalar_number(kv, "an integer", &n));
    if (n.kind == 'f') return type_mismatch(kv, "an integer");
    return number_to_int(kv, &n, out);
}

pw_status pw_gguf_kv_uint(const pw_gguf_kv *kv, uint64_t *out) {
    gguf_number n;
    PW_TRY(scalar_number(kv, "an unsigned integer", &n));
    if (n.kind == 'f') return type_mismatch(kv, "an unsigned integer");
    return number_to_uint(kv, &n, out);
}

pw_status pw_gguf_kv_float(const pw_gguf_kv *kv, double *out) {
    gguf_number n;
    PW_TRY(scalar_number(kv, "a number", &n));
    return number_to_float(&n, out);
}

pw_status pw_gguf_kv_bool(const pw_gguf_kv *kv, bool *out) {
    if (kv->type != PW_GGUF_BOOL) return type_mismatch(kv, "bool");
    *out = kv->raw[0] != 0;
    return PW_OK;
}

pw_status pw_gguf_kv_string(const pw_gguf_kv *kv, const char **out, size_t *len) {
    if (kv->type != PW_GGUF_STRING) return type_mismatch(kv, "string");
    *out = kv->str;
    if (len) *len = kv->str_len;
    return PW_OK;
}

static pw_status array_element(const pw_gguf_kv *kv, uint64_t i, gguf_number *n) {
    if (kv->type != PW_GGUF_ARRAY) return type_mismatch(kv, "an array");
    if (i >= kv->count)
        return pw_error(PW_ERR_INVALID_ARG, "gguf: key '%s': index %" PRIu64
                        " is past the array's %" PRIu64 " elements", kv->key, i, kv->count);
    size_t sz = scalar_size(kv->elem_type);
    if (sz == 0 || !load_number(kv->elem_type, kv->raw + i * sz, n))
        return pw_error(PW_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected numbers",
                        kv->key, pw_gguf_type_name(kv->elem_type));
    return PW_OK;
}

pw_status pw_gguf_kv_array_int(const pw_gguf_kv *kv, uint64_t i, int64_t *out) {
    gguf_number n;
    PW_TRY(array_element(kv, i, &n));
    if (n.kind == 'f')
        return pw_error(PW_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected integers",
                        kv->key, pw_gguf_type_name(kv->elem_type));
    return number_to_int(kv, &n, out);
}

pw_status pw_gguf_kv_array_float(const pw_gguf_kv *kv, uint64_t i, double *out) {
    gguf_number n;
    PW_TRY(array_element(kv, i, &n));
    return number_to_float(&n, out);
}

pw_status pw_gguf_kv_array_string(const pw_gguf_kv *kv, uint64_t i, const char **out,
                                  size_t *len) {
    if (kv->type != PW_GGUF_ARRAY || kv->elem_type != PW_GGUF_STRING)
        return type_mismatch(kv, "an array of string");
    if (i >= kv->count)
        return pw_error(PW_ERR_INVALID_ARG, "gguf: key '%s': index %" PRIu64
                        " is past the array's %" PRIu64 " elements", kv->key, i, kv->count);
    *out = kv->strs[i].ptr;
    if (len) *len = kv->strs[i].len;
    return PW_OK;
}

static pw_status find_required(const pw_gguf *g, const char *key, const pw_gguf_kv **out) {
    *out = pw_gguf_find_kv(g, key);
    if (!*out) return pw_error(PW_ERR_NOT_FOUND, "gguf: key '%s' not found", key);
    return PW_OK;
}

pw_status pw_gguf_get_u64(const pw_gguf *g, const char *key, uint64_t *out) {
    const pw_gguf_kv *kv;
    PW_TRY(find_required(g, key, &kv));
    return pw_gguf_kv_uint(kv, out);
}

pw_status pw_gguf_get_u32(const pw_gguf *g, const char *key, uint32_t *out) {
    const pw_gguf_kv *kv;
    uint64_t v;
    PW_TRY(find_required(g, key, &kv));
    PW_TRY(pw_gguf_kv_uint(kv, &v));
    if (v > UINT32_MAX)
        return pw_error(PW_ERR_FORMAT, "gguf: key '%s': value %" PRIu64 " does not fit uint32",
                        key, v);
    *out = (uint32_t)v;
    return PW_OK;
}

pw_status pw_gguf_get_i32(const pw_gguf *g, const char *key, int32_t *out) {
    const pw_gguf_kv *kv;
    int64_t v;
    PW_TRY(find_required(g, key, &kv));
    PW_TRY(pw_gguf_kv_int(kv, &v));
    if (v < INT32_MIN || v > INT32_MAX)
        return pw_error(PW_ERR_FORMAT, "gguf: key '%s': value %" PRId64 " does not fit int32",
                        key, v);
    *out = (int32_t)v;
    return PW_OK;
}

pw_status pw_gguf_get_f32(const pw_gguf *g, const char *key, float *out) {
    const pw_gguf_kv *kv;
    double v;
    PW_TRY(find_required(g, key, &kv));
    PW_TRY(pw_gguf_kv_float(kv, &v));
    *out = (float)v;
    return PW_OK;
}

pw_status pw_gguf_get_bool(const pw_gguf *g, const char *key, bool *out) {
    const pw_gguf_kv *kv;
    PW_TRY(find_required(g, key, &kv));
    return pw_gguf_kv_bool(kv, out);
}

pw_status pw_gguf_get_string(const pw_gguf *g, const char *key, const char **out) {
    const pw_gguf_kv *kv;
    PW_TRY(find_required(g, key, &kv));
    return pw_gguf_kv_string(kv, out, NULL);
}

pw_status pw_gguf_get_array(const pw_gguf *g, const char *key, pw_gguf_type elem_type,
                            const pw_gguf_kv **out, uint64_t *len) {
    const pw_gguf_kv *kv;
    PW_TRY(find_required(g, key, &kv));
    if (kv->type != PW_GGUF_ARRAY) return type_mismatch(kv, "an array");
    if (elem_type != PW_GGUF_TYPE_COUNT_ && kv->elem_type != elem_type)
        return pw_error(PW_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected an array "
                        "of %s", key, pw_gguf_type_name(kv->elem_type),
                        pw_gguf_type_name(elem_type));
    *out = kv;
    if (len) *len = kv->count;
    return PW_OK;
}

/* ---- tensors ------------------------------------------------------------------- */

int64_t pw_gguf_tensor_count(const pw_gguf *g) { return g->n_tensors; }

const pw_gguf_tensor *pw_gguf_tensor_at(const pw_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

pw_status pw_gguf_find_tensor(const pw_gguf *g, const char *name, const pw_gguf_tensor **out) {
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) {
            *out = &g->tensors[i];
            return PW_OK;
        }
    *out = NULL;
    return pw_error(PW_ERR_NOT_FOUND, "gguf: tensor '%s' not found", name);
}
