/* GGUF writer; see gguf_writer.h. Metadata is serialized as it is added;
 * tensors are kept until the file is assembled, because their offsets
 * depend on the size of everything before the data section. */
#include "model/gguf_writer.h"

#include "internal.h"
#include "model/dequant.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

typedef struct byte_buf {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} byte_buf;

typedef struct writer_tensor {
    char *name;
    pw_dtype dtype;
    int n_dims;
    int64_t dims[PW_GGUF_MAX_DIMS];
    uint8_t *data; /* NULL for a filled tensor */
    uint64_t nbytes;
    pw_gguf_tensor_fill fill;
    void *fill_user;
} writer_tensor;

struct pw_gguf_writer {
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv;
    byte_buf kvs;
    writer_tensor *tensors;
    int64_t n_tensors, cap_tensors;
};

static void buf_put(byte_buf *b, const void *p, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->len) {
        size_t need = n > SIZE_MAX - b->len ? SIZE_MAX : b->len + n; /* refused, not wrapped */
        uint8_t *d = pw_host_grow(b->data, 1, &b->cap, need, SIZE_MAX);
        if (!d) {
            b->oom = true;
            return;
        }
        b->data = d;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void buf_u32(byte_buf *b, uint32_t v) { buf_put(b, &v, 4); }
static void buf_u64(byte_buf *b, uint64_t v) { buf_put(b, &v, 8); }
static void buf_str(byte_buf *b, const char *s) {
    size_t n = strlen(s);
    buf_u64(b, n);
    buf_put(b, s, n);
}

static size_t writer_scalar_size(pw_gguf_type t) {
    switch (t) {
    case PW_GGUF_UINT8: case PW_GGUF_INT8: case PW_GGUF_BOOL: return 1;
    case PW_GGUF_UINT16: case PW_GGUF_INT16: return 2;
    case PW_GGUF_UINT32: case PW_GGUF_INT32: case PW_GGUF_FLOAT32: return 4;
    case PW_GGUF_UINT64: case PW_GGUF_INT64: case PW_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

pw_status pw_gguf_writer_new(pw_gguf_writer **out) {
    pw_gguf_writer *w = pw_host_calloc(1, sizeof *w);
    if (!w) return pw_error(PW_ERR_OOM, "gguf writer: out of memory");
    w->version = 3;
    w->alignment = PW_GGUF_DEFAULT_ALIGNMENT;
    *out = w;
    return PW_OK;
}

void pw_gguf_writer_free(pw_gguf_writer *w) {
    if (!w) return;
    pw_host_free(w->kvs.data);
    for (int64_t i = 0; i < w->n_tensors; i++) {
        pw_host_free(w->tensors[i].name);
        pw_host_free(w->tensors[i].data);
    }
    pw_host_free(w->tensors);
    pw_host_free(w);
}

void pw_gguf_writer_set_version(pw_gguf_writer *w, uint32_t version) { w->version = version; }

static pw_status kv_done(pw_gguf_writer *w) {
    if (w->kvs.oom) return pw_error(PW_ERR_OOM, "gguf writer: out of memory for metadata");
    w->n_kv++;
    return PW_OK;
}

pw_status pw_gguf_writer_add_scalar(pw_gguf_writer *w, const char *key, pw_gguf_type type,
                                    const void *value) {
    if (!key || !value) return pw_error(PW_ERR_INVALID_ARG, "gguf writer: NULL key or value");
    if (type == PW_GGUF_STRING) return pw_gguf_writer_add_string(w, key, value);
    size_t sz = writer_scalar_size(type);
    if (sz == 0)
        return pw_error(PW_ERR_INVALID_ARG, "gguf writer: key '%s': type %d is not a scalar",
                        key, (int)type);
    if (strcmp(key, "general.alignment") == 0 && type == PW_GGUF_UINT32) {
        uint32_t a;
        memcpy(&a, value, 4);
        if (a == 0 || (a & (a - 1)))
            return pw_error(PW_ERR_INVALID_ARG, "gguf writer: general.alignment %u is not a "
                            "power of two", a);
        w->alignment = a;
    }
    buf_str(&w->kvs, key);
    buf_u32(&w->kvs, (uint32_t)type);
    buf_put(&w->kvs, value, sz);
    return kv_done(w);
}

pw_status pw_gguf_writer_add_u32(pw_gguf_writer *w, const char *key, uint32_t v) {
    return pw_gguf_writer_add_scalar(w, key, PW_GGUF_UINT32, &v);
}
pw_status pw_gguf_writer_add_i32(pw_gguf_writer *w, const char *key, int32_t v) {
    return pw_gguf_writer_add_scalar(w, key, PW_GGUF_INT32, &v);
}
pw_status pw_gguf_writer_add_u64(pw_gguf_writer *w, const char *key, uint64_t v) {
    return pw_gguf_writer_add_scalar(w, key, PW_GGUF_UINT64, &v);
}
pw_status pw_gguf_writer_add_f32(pw_gguf_writer *w, const char *key, float v) {
    return pw_gguf_writer_add_scalar(w, key, PW_GGUF_FLOAT32, &v);
}
pw_status pw_gguf_writer_add_bool(pw_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return pw_gguf_writer_add_scalar(w, key, PW_GGUF_BOOL, &b);
}

pw_status pw_gguf_writer_add_string(pw_gguf_writer *w, const char *key, const char *v) {
    if (!key || !v) return pw_error(PW_ERR_INVALID_ARG, "gguf writer: NULL key or value");
    buf_str(&w->kvs, key);
    buf_u32(&w->kvs, PW_GGUF_STRING);
    buf_str(&w->kvs, v);
    return kv_done(w);
}

pw_status pw_gguf_writer_add_array(pw_gguf_writer *w, const char *key, pw_gguf_type elem_type,
                                   const void *data, uint64_t n) {
    size_t sz = writer_scalar_size(elem_type);
    if (!key || (!data && n)) return pw_error(PW_ERR_INVALID_ARG, "gguf writer: NULL key or data");
    if (sz == 0)
        return pw_error(PW_ERR_INVALID_ARG, "gguf writer: key '%s': element type %d is not "
                        "numeric (use add_string_array for strings)", key, (int)elem_type);
    buf_str(&w->kvs, key);
    buf_u32(&w->kvs, PW_GGUF_ARRAY);
    buf_u32(&w->kvs, (uint32_t)elem_type);
    buf_u64(&w->kvs, n);
    buf_put(&w->kvs, data, (size_t)n * sz);
    return kv_done(w);
}

pw_status pw_gguf_writer_add_string_array(pw_gguf_writer *w, const char *key,
                                          const char *const *strings, uint64_t n) {
    if (!key || (!strings && n))
        return pw_error(PW_ERR_INVALID_ARG, "gguf writer: NULL key or strings");
    for (uint64_t i = 0; i < n; i++)
        if (!strings[i])
            return pw_error(PW_ERR_INVALID_ARG, "gguf writer: key '%s': string %llu is NULL",
                            key, (unsigned long long)i);
    buf_str(&w->kvs, key);
    buf_u32(&w->kvs, PW_GGUF_ARRAY);
    buf_u32(&w->kvs, PW_GGUF_STRING);
    buf_u64(&w->kvs, n);
    for (uint64_t i = 0; i < n; i++) buf_str(&w->kvs, strings[i]);
    return kv_done(w);
}

/* One number re-encoded as a GGUF scalar of type t, from the getters'
 * int64 (signed types, bool), uint64 (unsigned) or double (floats). */
static void put_number(byte_buf *b, pw_gguf_type t, int64_t i, uint64_t u, double f) {
    switch (t) {
    case PW_GGUF_UINT8: { uint8_t v = (uint8_t)u; buf_put(b, &v, 1); break; }
    case PW_GGUF_INT8: { int8_t v = (int8_t)i; buf_put(b, &v, 1); break; }
    case PW_GGUF_BOOL: { uint8_t v = i != 0; buf_put(b, &v, 1); break; }
    case PW_GGUF_UINT16: { uint16_t v = (uint16_t)u; buf_put(b, &v, 2); break; }
    case PW_GGUF_INT16: { int16_t v = (int16_t)i; buf_put(b, &v, 2); break; }
    case PW_GGUF_UINT32: { uint32_t v = (uint32_t)u; buf_put(b, &v, 4); break; }
    case PW_GGUF_INT32: { int32_t v = (int32_t)i; buf_put(b, &v, 4); break; }
    case PW_GGUF_UINT64: buf_put(b, &u, 8); break;
    case PW_GGUF_INT64: buf_put(b, &i, 8); break;
    case PW_GGUF_FLOAT32: { float v = (float)f; buf_put(b, &v, 4); break; }
    case PW_GGUF_FLOAT64: buf_put(b, &f, 8); break;
    default: break;
    }
}

static bool is_unsigned(pw_gguf_type t) {
    return t == PW_GGUF_UINT8 || t == PW_GGUF_UINT16 || t == PW_GGUF_UINT32 ||
           t == PW_GGUF_UINT64;
}
static bool is_float(pw_gguf_type t) { return t == PW_GGUF_FLOAT32 || t == PW_GGUF_FLOAT64; }

pw_status pw_gguf_writer_add_kv_copy(pw_gguf_writer *w, const pw_gguf_kv *kv) {
    if (!kv) return pw_error(PW_ERR_INVALID_ARG, "gguf writer: NULL kv");
    const char *key = pw_gguf_kv_key(kv);
    pw_gguf_type t = pw_gguf_kv_type(kv);
    const char *str;
    size_t len;
    int64_t i = 0;
    uint64_t u = 0;
    double f = 0;
    bool bv;
    if (t == PW_GGUF_STRING) {
        PW_TRY(pw_gguf_kv_string(kv, &str, &len));
        buf_str(&w->kvs, key);
        buf_u32(&w->kvs, PW_GGUF_STRING);
        buf_u64(&w->kvs, len);
        buf_put(&w->kvs, str, len);
        return kv_done(w);
    }
    if (t != PW_GGUF_ARRAY) {
        if (t == PW_GGUF_BOOL) {
            PW_TRY(pw_gguf_kv_bool(kv, &bv));
            i = bv;
        } else if (is_float(t)) {
            PW_TRY(pw_gguf_kv_float(kv, &f));
        } else if (is_unsigned(t)) {
            PW_TRY(pw_gguf_kv_uint(kv, &u));
        } else {
            PW_TRY(pw_gguf_kv_int(kv, &i));
        }
        if (writer_scalar_size(t) == 0)
            return pw_error(PW_ERR_INVALID_ARG, "gguf writer: key '%s': type %d is not a scalar",
                            key, (int)t);
        buf_str(&w->kvs, key);
        buf_u32(&w->kvs, (uint32_t)t);
        put_number(&w->kvs, t, i, u, f);
        return kv_done(w);
    }
    pw_gguf_type et = pw_gguf_kv_array_type(kv);
    uint64_t n = pw_gguf_kv_array_len(kv);
    if (et != PW_GGUF_STRING && writer_scalar_size(et) == 0)
        return pw_error(PW_ERR_INVALID_ARG, "gguf writer: key '%s': arrays of %s cannot be copied",
                        key, pw_gguf_type_name(et));
    byte_buf b = {0};
    for (uint64_t k = 0; k < n; k++) {
        if (et == PW_GGUF_STRING) {
            PW_TRY(pw_gguf_kv_array_string(kv, k, &str, &len));
            buf_u64(&b, len);
            buf_put(&b, str, len);
            continue;
        }
        pw_status s = PW_OK;
        if (is_float(et)) s = pw_gguf_kv_array_float(kv, k, &f);
        else if (is_unsigned(et)) {
            s = pw_gguf_kv_array_int(kv, k, &i);
            u = (uint64_t)i;
        } else s = pw_gguf_kv_array_int(kv, k, &i);
        if (s != PW_OK) {
            pw_host_free(b.data);
            return s;
        }
        put_number(&b, et, i, u, f);
    }
    buf_str(&w->kvs, key);
    buf_u32(&w->kvs, PW_GGUF_ARRAY);
    buf_u32(&w->kvs, (uint32_t)et);
    buf_u64(&w->kvs, n);
    if (b.len) buf_put(&w->kvs, b.data, b.len);
    bool oom = b.oom;
    pw_host_free(b.data);
    if (oom) return pw_error(PW_ERR_OOM, "gguf writer: out of memory for metadata");
    return kv_done(w);
}

static pw_status tensor_shape(const char *name, pw_dtype dtype, int n_dims, const int64_t *dims,
                              int64_t *n_elements) {
    if (!name || !dims) return pw_error(PW_ERR_INVALID_ARG, "gguf writer: NULL tensor name or dims");
    if (pw_dtype_block_bytes(dtype) == 0 || dtype == PW_I32 || dtype == PW_I64 || dtype == PW_U8)
        return pw_error(PW_ERR_INVALID_ARG, "gguf writer: tensor '%s': dtype %s has no ggml "
                        "type", name, pw_dtype_name(dtype));
    if (n_dims < 1 || n_dims > PW_GGUF_MAX_DIMS)
        return pw_error(PW_ERR_INVALID_ARG, "gguf writer: tensor '%s': n_dims %d outside [1, %d]",
                        name, n_dims, PW_GGUF_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++) {
        if (dims[d] < 0 || __builtin_mul_overflow(n, dims[d], &n))
            return pw_error(PW_ERR_INVALID_ARG, "gguf writer: tensor '%s': bad dim %d (%lld)",
                            name, d, (long long)dims[d]);
    }
    if (dims[0] % pw_dtype_block_elems(dtype) != 0)
        return pw_error(PW_ERR_INVALID_ARG, "gguf writer: tensor '%s': dim 0 (%lld) is not a "
                        "multiple of the %s block size", name, (long long)dims[0],
                        pw_dtype_name(dtype));
    *n_elements = n;
    return PW_OK;
}

/* Appends a tensor slot and returns its data buffer to fill. */
static pw_status new_tensor(pw_gguf_writer *w, const char *name, pw_dtype dtype, int n_dims,
                            const int64_t *dims, int64_t n_elements, uint8_t **data) {
    /* data NULL: a filled tensor, whose bytes come later. */
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = (size_t)w->cap_tensors;
        writer_tensor *t = pw_host_grow(w->tensors, sizeof *t, &cap, (size_t)w->n_tensors + 1, INT64_MAX);
        if (!t) return pw_error(PW_ERR_OOM, "gguf writer: out of memory for tensors");
        w->tensors = t;
        w->cap_tensors = (int64_t)cap;
    }
    writer_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->nbytes = (uint64_t)pw_dtype_row_bytes(dtype, n_elements);
    t->name = pw_host_strdup(name);
    t->data = data ? pw_host_alloc(t->nbytes ? (size_t)t->nbytes : 1) : NULL;
    if (!t->name || (data && !t->data)) {
        pw_host_free(t->name);
        pw_host_free(t->data);
        return pw_error(PW_ERR_OOM, "gguf writer: out of memory for tensor '%s'", name);
    }
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) t->dims[d] = dims[d];
    w->n_tensors++;
    if (data) *data = t->data;
    return PW_OK;
}

pw_status pw_gguf_writer_add_tensor(pw_gguf_writer *w, const char *name, pw_dtype dtype,
                                    int n_dims, const int64_t *dims, const void *data) {
    int64_t n = 0;
    uint8_t *dst;
    PW_TRY(tensor_shape(name, dtype, n_dims, dims, &n));
    if (!data && n) return pw_error(PW_ERR_INVALID_ARG, "gguf writer: tensor '%s': NULL data", name);
    PW_TRY(new_tensor(w, name, dtype, n_dims, dims, n, &dst));
    if (n) memcpy(dst, data, (size_t)pw_dtype_row_bytes(dtype, n));
    return PW_OK;
}

pw_status pw_gguf_writer_add_tensor_f32(pw_gguf_writer *w, const char *name, pw_dtype dtype,
                                        int n_dims, const int64_t *dims, const float *values) {
    int64_t n = 0;
    uint8_t *dst;
    PW_TRY(tensor_shape(name, dtype, n_dims, dims, &n));
    if (!values && n) return pw_error(PW_ERR_INVALID_ARG, "gguf writer: tensor '%s': NULL data", name);
    PW_TRY(new_tensor(w, name, dtype, n_dims, dims, n, &dst));
    return pw_quantize(dtype, values, dst, n);
}

pw_status pw_gguf_writer_add_tensor_filled(pw_gguf_writer *w, const char *name, pw_dtype dtype,
                                           int n_dims, const int64_t *dims,
                                           pw_gguf_tensor_fill fill, void *user) {
    int64_t n = 0;
    PW_TRY(tensor_shape(name, dtype, n_dims, dims, &n));
    if (!fill) return pw_error(PW_ERR_INVALID_ARG, "gguf writer: tensor '%s': NULL fill", name);
    PW_TRY(new_tensor(w, name, dtype, n_dims, dims, n, NULL));
    w->tensors[w->n_tensors - 1].fill = fill;
    w->tensors[w->n_tensors - 1].fill_user = user;
    return PW_OK;
}

static int64_t tensor_elements(const writer_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->dims[d];
    return n;
}

/* The bytes of tensor t: its stored data, or a filled scratch buffer
 * (*scratch, grown as needed and freed by the caller). */
static pw_status tensor_bytes(const writer_tensor *t, uint8_t **scratch, size_t *scratch_cap,
                              const uint8_t **out) {
    if (t->data) {
        *out = t->data;
        return PW_OK;
    }
    if (t->nbytes > *scratch_cap) {
        pw_host_free(*scratch);
        *scratch_cap = 0;
        *scratch = pw_host_alloc((size_t)t->nbytes);
        if (!*scratch)
            return pw_error(PW_ERR_OOM, "gguf writer: out of memory for tensor '%s'", t->name);
        *scratch_cap = (size_t)t->nbytes;
    }
    PW_TRY(t->fill(t->fill_user, t->name, t->dtype, tensor_elements(t), *scratch, t->nbytes));
    *out = *scratch;
    return PW_OK;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static void pad_to(byte_buf *b, size_t target) {
    static const uint8_t zeros[256];
    while (b->len < target && !b->oom) {
        size_t pad = target - b->len;
        buf_put(b, zeros, pad < sizeof zeros ? pad : sizeof zeros);
    }
}

/* Header, metadata and tensor table, padded to the start of the data. */
static void write_header(const pw_gguf_writer *w, byte_buf *b) {
    buf_put(b, PW_GGUF_MAGIC, 4);
    buf_u32(b, w->version);
    buf_u64(b, (uint64_t)w->n_tensors);
    buf_u64(b, w->n_kv);
    buf_put(b, w->kvs.data, w->kvs.len);
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        buf_str(b, t->name);
        buf_u32(b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) buf_u64(b, (uint64_t)t->dims[d]);
        buf_u32(b, pw_dtype_to_ggml_type(t->dtype));
        offset = align_up(offset, w->alignment);
        buf_u64(b, offset);
        offset += t->nbytes;
    }
    if (w->n_tensors > 0) pad_to(b, align_up(b->len, w->alignment));
}

pw_status pw_gguf_writer_to_memory(const pw_gguf_writer *w, uint8_t **out, size_t *len) {
    byte_buf b = {0};
    write_header(w, &b);
    size_t data_start = b.len;
    uint8_t *scratch = NULL;
    size_t scratch_cap = 0;
    pw_status s = PW_OK;
    for (int64_t i = 0; i < w->n_tensors && s == PW_OK && !b.oom; i++) {
        pad_to(&b, data_start + (size_t)align_up(b.len - data_start, w->alignment));
        const uint8_t *bytes;
        s = tensor_bytes(&w->tensors[i], &scratch, &scratch_cap, &bytes);
        if (s == PW_OK) buf_put(&b, bytes, (size_t)w->tensors[i].nbytes);
    }
    pw_host_free(scratch);
    if (s == PW_OK && b.oom) s = pw_error(PW_ERR_OOM, "gguf writer: out of memory assembling the file");
    if (s != PW_OK) {
        pw_host_free(b.data);
        return s;
    }
    *out = b.data;
    *len = b.len;
    return PW_OK;
}

pw_status pw_gguf_writer_to_fd(const pw_gguf_writer *w, int fd, const char *path) {
    static const uint8_t zeros[256];
    byte_buf b = {0};
    write_header(w, &b);
    if (b.oom) {
        pw_host_free(b.data);
        return pw_error(PW_ERR_OOM, "gguf writer: out of memory assembling the file");
    }
    pw_status s = pw_file_write_all_sync(fd, b.data, b.len, "gguf writer", path);
    uint64_t pos = 0; /* within the data section */
    uint8_t *scratch = NULL;
    size_t scratch_cap = 0;
    pw_host_free(b.data);
    for (int64_t i = 0; i < w->n_tensors && s == PW_OK; i++) {
        const writer_tensor *t = &w->tensors[i];
        uint64_t pad = align_up(pos, w->alignment) - pos;
        if (pad) s = pw_file_write_all_sync(fd, zeros, (size_t)pad, "gguf writer", path);
        pos += pad;
        const uint8_t *bytes = NULL;
        if (s == PW_OK) s = tensor_bytes(t, &scratch, &scratch_cap, &bytes);
        if (s == PW_OK) s = pw_file_write_all_sync(fd, bytes, (size_t)t->nbytes, "gguf writer", path);
        pos += t->nbytes;
    }
    pw_host_free(scratch);
    return s;
}

pw_status pw_gguf_writer_to_file(const pw_gguf_writer *w, const char *path) {
    uint8_t *data;
    size_t len;
    PW_TRY(pw_gguf_writer_to_memory(w, &data, &len));
    FILE *f = fopen(path, "wb");
    if (!f) {
        pw_host_free(data);
        return pw_error(PW_ERR_IO, "gguf writer: cannot create '%s': %s", path, strerror(errno));
    }
    size_t written = fwrite(data, 1, len, f);
    int close_failed = fclose(f);
    pw_host_free(data);
    if (written != len || close_failed)
        return pw_error(PW_ERR_IO, "gguf writer: writing '%s' failed", path);
    return PW_OK;
}

/* ---- tiny Llama ------------------------------------------------------------------ */

pw_tiny_llama_config pw_tiny_llama_default_config(void) {
    pw_tiny_llama_config c = {
        .dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .ffn_dim = 96,
        .vocab_size = 512, .context_length = 128, .rms_eps = 1e-5f, .rope_theta = 10000.0f,
        .weight_dtype = PW_F32, .tied_embeddings = false, .seed = 1,
    };
    return c;
}

/* Pieces merged from the single characters, most frequent first (English
 * bigrams and a few whole words), so real text tokenizes into a mix of
 * merged and single-character pieces. Each is the concatenation of two
 * other pieces of the vocabulary, so the SentencePiece merge can reach it. */
#define SP "\xe2\x96\x81" /* "▁" */
static const char *const tiny_merges[] = {
    SP "t", "he", SP "a", "in", SP "the", "er", "on", SP "s", "an", "en", "re", SP "w", "at",
    "nd", SP "h", "ll", "is", SP "o", "ou", SP "b", "it", "or", SP "c", SP "and", "ing", "es",
    SP "f", SP "to", SP "l", "ed", SP "d", SP "m", SP "p", SP "T", SP "wa", SP "was", SP "i",
    SP "O", "nc", SP "On", SP "Onc", SP "Once", SP "u", SP "up", SP "upon", "im", SP "tim",
    SP "time", SP "The", "ay", SP "pl", SP "play",
};
#undef SP

/* xorshift64*: deterministic weights that depend only on the RNG seed. */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}
static float rng_uniform(uint64_t *s) { /* in [-1, 1) */
    return (float)((double)(rng_next(s) >> 11) * 0x1p-52 - 1.0);
}

typedef struct tiny_vocab {
    char **tokens;
    float *scores;
    int32_t *types;
    int n;
} tiny_vocab;

static void tiny_vocab_free(tiny_vocab *v) {
    if (v->tokens)
        for (int i = 0; i < v->n; i++) pw_host_free(v->tokens[i]);
    pw_host_free(v->tokens);
    pw_host_free(v->scores);
    pw_host_free(v->types);
}

enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_UNUSED = 5, TOK_BYTE = 6 };

static pw_status tiny_vocab_build(int n, tiny_vocab *v) {
    memset(v, 0, sizeof *v);
    v->tokens = pw_host_calloc((size_t)n, sizeof *v->tokens);
    v->scores = pw_host_calloc((size_t)n, sizeof *v->scores);
    v->types = pw_host_calloc((size_t)n, sizeof *v->types);
    if (!v->tokens || !v->scores || !v->types) return pw_error(PW_ERR_OOM, "tiny llama: vocab");
    v->n = n;
    int i = 0;
    char text[32];
    const char *specials[] = {"<unk>", "<s>", "</s>"};
    const int32_t special_types[] = {TOK_UNKNOWN, TOK_CONTROL, TOK_CONTROL};
    for (int k = 0; k < 3; k++, i++) {
        v->tokens[i] = pw_host_strdup(specials[k]);
        v->types[i] = special_types[k];
    }
    for (int byte = 0; byte < 256; byte++, i++) {
        snprintf(text, sizeof text, "<0x%02X>", byte);
        v->tokens[i] = pw_host_strdup(text);
        v->types[i] = TOK_BYTE;
    }
    /* As in SentencePiece, merged pieces score above single characters and
     * earlier merges above later ones. */
    float score = -1.0f;
    for (size_t k = 0; k < PW_ARRAY_LEN(tiny_merges) && i < n; k++, i++) {
        v->tokens[i] = pw_host_strdup(tiny_merges[k]);
        v->types[i] = TOK_NORMAL;
        v->scores[i] = score--;
    }
    v->tokens[i] = pw_host_strdup("\xe2\x96\x81");
    v->types[i] = TOK_NORMAL;
    v->scores[i++] = score--;
    for (int c = 0x21; c < 0x7F; c++, i++) {
        text[0] = (char)c;
        text[1] = '\0';
        v->tokens[i] = pw_host_strdup(text);
        v->types[i] = TOK_NORMAL;
        v->scores[i] = score--;
    }
    for (int k = 0; i < n; k++, i++) {
        snprintf(text, sizeof text, "<unused%d>", k);
        v->tokens[i] = pw_host_strdup(text);
        v->types[i] = TOK_UNUSED;
        v->scores[i] = score--;
    }
    for (int k = 0; k < n; k++)
        if (!v->tokens[k]) return pw_error(PW_ERR_OOM, "tiny llama: vocab");
    return PW_OK;
}

static pw_status check_tiny_config(const pw_tiny_llama_config *c) {
    if (c->dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->ffn_dim <= 0 || c->context_length <= 0)
        return pw_error(PW_ERR_INVALID_ARG, "tiny llama: every size must be positive");
    if (c->dim % c->n_heads != 0 || (c->dim / c->n_heads) % 2 != 0)
        return pw_error(PW_ERR_INVALID_ARG, "tiny llama: dim %d must split into %d heads of an "
                        "even size", c->dim, c->n_heads);
    if (c->n_heads % c->n_kv_heads != 0)
        return pw_error(PW_ERR_INVALID_ARG, "tiny llama: %d heads is not a multiple of %d KV "
                        "heads", c->n_heads, c->n_kv_heads);
    _Static_assert(3 + 256 + PW_ARRAY_LEN(tiny_merges) + 1 + 94 == PW_TINY_LLAMA_MIN_VOCAB,
                   "PW_TINY_LLAMA_MIN_VOCAB counts the fixed vocabulary");
    if (c->vocab_size < PW_TINY_LLAMA_MIN_VOCAB)
        return pw_error(PW_ERR_INVALID_ARG, "tiny llama: vocab_size %d is below the minimum %d",
                        c->vocab_size, PW_TINY_LLAMA_MIN_VOCAB);
    int64_t be = pw_dtype_block_elems(c->weight_dtype);
    if (be == 0 || c->dim % be != 0 || c->ffn_dim % be != 0)
        return pw_error(PW_ERR_INVALID_ARG, "tiny llama: dim %d and ffn_dim %d must be multiples "
                        "of the %s block size", c->dim, c->ffn_dim, pw_dtype_name(c->weight_dtype));
    return PW_OK;
}

static pw_status add_random(pw_gguf_writer *w, const pw_tiny_llama_config *c, const char *name,
                            pw_dtype dtype, int64_t d0, int64_t d1, float center, float scale,
                            uint64_t *rng) {
    int64_t n = d0 * d1;
    if (d1 > 1 && c->tensor_dtype) dtype = c->tensor_dtype(name, dtype, c->tensor_dtype_user);
    float *values = pw_host_alloc((size_t)n * sizeof *values);
    if (!values) return pw_error(PW_ERR_OOM, "tiny llama: weights");
    for (int64_t i = 0; i < n; i++) values[i] = center + scale * rng_uniform(rng);
    int64_t dims[2] = {d0, d1};
    pw_status s = PW_OK;
    if (c->store_dequantized && dtype != PW_F32) {
        /* Checks the shape against dtype's blocks before encoding. */
        int64_t row = pw_dtype_block_elems(dtype);
        if (row == 0 || d0 % row != 0)
            s = pw_error(PW_ERR_INVALID_ARG, "gguf writer: tensor '%s': dim 0 (%lld) is not a "
                         "multiple of the %s block size", name, (long long)d0,
                         pw_dtype_name(dtype));
        int64_t bytes = s == PW_OK ? pw_dtype_row_bytes(dtype, n) : 0;
        void *enc = s == PW_OK ? pw_host_alloc((size_t)bytes) : NULL;
        if (s == PW_OK && !enc) s = pw_error(PW_ERR_OOM, "tiny llama: weights");
        if (s == PW_OK) s = pw_quantize(dtype, values, enc, n);
        if (s == PW_OK) s = pw_dequantize(dtype, enc, values, n);
        pw_host_free(enc);
        dtype = PW_F32;
    }
    if (s == PW_OK)
        s = pw_gguf_writer_add_tensor_f32(w, name, dtype, d1 > 1 ? 2 : 1, dims, values);
    pw_host_free(values);
    return s;
}

static pw_status tiny_metadata(pw_gguf_writer *w, const pw_tiny_llama_config *c) {
    PW_TRY(pw_gguf_writer_add_string(w, "general.architecture", "llama"));
    PW_TRY(pw_gguf_writer_add_string(w, "general.name", "piecewise tiny llama"));
    PW_TRY(pw_gguf_writer_add_u32(w, "general.alignment", PW_GGUF_DEFAULT_ALIGNMENT));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.context_length", (uint32_t)c->context_length));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.embedding_length", (uint32_t)c->dim));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.block_count", (uint32_t)c->n_layers));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.feed_forward_length", (uint32_t)c->ffn_dim));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.rope.dimension_count",
                                  (uint32_t)(c->dim / c->n_heads)));
    PW_TRY(pw_gguf_writer_add_f32(w, "llama.rope.freq_base", c->rope_theta));
    PW_TRY(pw_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", c->rms_eps));
    PW_TRY(pw_gguf_writer_add_u32(w, "llama.vocab_size", (uint32_t)c->vocab_size));

    tiny_vocab v;
    pw_status s = tiny_vocab_build(c->vocab_size, &v);
    if (s == PW_OK) s = pw_gguf_writer_add_string(w, "tokenizer.ggml.model", "llama");
    if (s == PW_OK)
        s = pw_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens",
                                            (const char *const *)v.tokens, (uint64_t)v.n);
    if (s == PW_OK)
        s = pw_gguf_writer_add_array(w, "tokenizer.ggml.scores", PW_GGUF_FLOAT32, v.scores,
                                     (uint64_t)v.n);
    if (s == PW_OK)
        s = pw_gguf_writer_add_array(w, "tokenizer.ggml.token_type", PW_GGUF_INT32, v.types,
                                     (uint64_t)v.n);
    tiny_vocab_free(&v);
    PW_TRY(s);
    PW_TRY(pw_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0));
    PW_TRY(pw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1));
    PW_TRY(pw_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2));
    PW_TRY(pw_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", !c->no_add_bos));
    return pw_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", c->add_eos);
}

pw_status pw_tiny_llama_add(pw_gguf_writer *w, const pw_tiny_llama_config *c) {
    PW_TRY(check_tiny_config(c));
    PW_TRY(tiny_metadata(w, c));
    uint64_t rng = c->seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    if (rng == 0) rng = 1;
    const int64_t dim = c->dim, ffn = c->ffn_dim, vocab = c->vocab_size;
    const int64_t kv_dim = dim / c->n_heads * c->n_kv_heads;
    const pw_dtype wt = c->weight_dtype;
    const float in_scale = 1.0f / sqrtf((float)dim), ffn_scale = 1.0f / sqrtf((float)ffn);
    PW_TRY(add_random(w, c, "token_embd.weight", wt, dim, vocab, 0.0f, 1.0f, &rng));
    PW_TRY(add_random(w, c, "output_norm.weight", PW_F32, dim, 1, 1.0f, 0.1f, &rng));
    if (!c->tied_embeddings)
        PW_TRY(add_random(w, c, "output.weight", wt, dim, vocab, 0.0f, in_scale, &rng));
    char name[64];
    for (int l = 0; l < c->n_layers; l++) {
#define TINY_TENSOR(suffix, dtype, d0, d1, center, scale)                                      \
    do {                                                                                       \
        snprintf(name, sizeof name, "blk.%d.%s", l, suffix);                                   \
        PW_TRY(add_random(w, c, name, dtype, d0, d1, center, scale, &rng));                       \
    } while (0)
        TINY_TENSOR("attn_norm.weight", PW_F32, dim, 1, 1.0f, 0.1f);
        TINY_TENSOR("attn_q.weight", wt, dim, dim, 0.0f, in_scale);
        TINY_TENSOR("attn_k.weight", wt, dim, kv_dim, 0.0f, in_scale);
        TINY_TENSOR("attn_v.weight", wt, dim, kv_dim, 0.0f, in_scale);
        TINY_TENSOR("attn_output.weight", wt, dim, dim, 0.0f, in_scale);
        TINY_TENSOR("ffn_norm.weight", PW_F32, dim, 1, 1.0f, 0.1f);
        TINY_TENSOR("ffn_gate.weight", wt, dim, ffn, 0.0f, in_scale);
        TINY_TENSOR("ffn_up.weight", wt, dim, ffn, 0.0f, in_scale);
        TINY_TENSOR("ffn_down.weight", wt, ffn, dim, 0.0f, ffn_scale);
#undef TINY_TENSOR
    }
    return PW_OK;
}

pw_status pw_tiny_llama_write_memory(const pw_tiny_llama_config *cfg, uint8_t **out,
                                     size_t *len) {
    pw_gguf_writer *w = NULL; /* NULL: gcc cannot see that _new sets it */
    PW_TRY(pw_gguf_writer_new(&w));
    pw_status s = pw_tiny_llama_add(w, cfg);
    if (s == PW_OK) s = pw_gguf_writer_to_memory(w, out, len);
    pw_gguf_writer_free(w);
    return s;
}

pw_status pw_tiny_llama_write_file(const pw_tiny_llama_config *cfg, const char *path) {
    pw_gguf_writer *w = NULL;
    PW_TRY(pw_gguf_writer_new(&w));
    pw_status s = pw_tiny_llama_add(w, cfg);
    if (s == PW_OK) s = pw_gguf_writer_to_file(w, path);
    pw_gguf_writer_free(w);
    return s;
}
