/* GGUF reader (llama.cpp's model file format, versions 2 and 3).
 *
 * A file is memory-mapped (or a caller's buffer is borrowed) and parsed
 * once: every key, value, string length, array count, tensor dimension,
 * offset and size is checked against the bytes actually present, with
 * overflow-checked arithmetic, so a truncated or corrupt file gives
 * PW_ERR_FORMAT naming the field, never a crash. Tensor data is not
 * copied: pw_gguf_tensor.data points into the mapping, which lives until
 * pw_gguf_free.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 tensor_count,
 * u64 kv_count, kv_count x (string key, u32 type, value), tensor_count x
 * (string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset),
 * padding to general.alignment (default 32), tensor data. A string is a u64
 * length and that many bytes (no terminator). An array is a u32 element
 * type, a u64 count and the elements. */
#ifndef PW_MODEL_GGUF_H
#define PW_MODEL_GGUF_H

#include "piecewise_llm.h"

#define PW_GGUF_MAGIC "GGUF"
#define PW_GGUF_DEFAULT_ALIGNMENT 32
/* ggml tensors have at most four dimensions. */
#define PW_GGUF_MAX_DIMS 4

/* Metadata value types, with GGUF's numbering. */
typedef enum pw_gguf_type {
    PW_GGUF_UINT8 = 0,
    PW_GGUF_INT8 = 1,
    PW_GGUF_UINT16 = 2,
    PW_GGUF_INT16 = 3,
    PW_GGUF_UINT32 = 4,
    PW_GGUF_INT32 = 5,
    PW_GGUF_FLOAT32 = 6,
    PW_GGUF_BOOL = 7,
    PW_GGUF_STRING = 8,
    PW_GGUF_ARRAY = 9,
    PW_GGUF_UINT64 = 10,
    PW_GGUF_INT64 = 11,
    PW_GGUF_FLOAT64 = 12,
    PW_GGUF_TYPE_COUNT_
} pw_gguf_type;

/* ggml tensor type ids that piecewise reads. */
enum {
    PW_GGML_TYPE_F32 = 0,
    PW_GGML_TYPE_F16 = 1,
    PW_GGML_TYPE_Q4_0 = 2,
    PW_GGML_TYPE_Q4_1 = 3,
    PW_GGML_TYPE_Q5_0 = 6,
    PW_GGML_TYPE_Q5_1 = 7,
    PW_GGML_TYPE_Q8_0 = 8,
    PW_GGML_TYPE_Q2_K = 10,
    PW_GGML_TYPE_Q3_K = 11,
    PW_GGML_TYPE_Q4_K = 12,
    PW_GGML_TYPE_Q5_K = 13,
    PW_GGML_TYPE_Q6_K = 14,
    PW_GGML_TYPE_BF16 = 30,
};

typedef struct pw_gguf pw_gguf;
typedef struct pw_gguf_kv pw_gguf_kv;

typedef struct pw_gguf_tensor {
    const char *name;
    int n_dims;
    /* ggml order: dims[0] is the contiguous (innermost) dimension; unused
     * trailing dims are 1. A matrix with rows of K elements and N rows has
     * dims {K, N}. */
    int64_t dims[PW_GGUF_MAX_DIMS];
    int64_t n_elements;
    uint32_t ggml_type;
    pw_dtype dtype;
    uint64_t offset; /* relative to the start of the data section */
    uint64_t nbytes;
    const void *data; /* into the mapping; aligned to general.alignment */
} pw_gguf_tensor;

/* Maps and parses a file. */
pw_status pw_gguf_open(const char *path, pw_gguf **out);
/* Parses a caller's buffer, which must outlive the returned handle. */
pw_status pw_gguf_open_memory(const void *data, size_t size, pw_gguf **out);
void pw_gguf_free(pw_gguf *g);

uint32_t pw_gguf_version(const pw_gguf *g);
uint32_t pw_gguf_alignment(const pw_gguf *g);
size_t pw_gguf_file_size(const pw_gguf *g);
/* Byte offset of the data section within the file. */
uint64_t pw_gguf_data_offset(const pw_gguf *g);
const char *pw_gguf_type_name(pw_gguf_type t);
/* "q4_K" etc. for any ggml type id, "?" for ids ggml does not define. */
const char *pw_ggml_type_name(uint32_t ggml_type);
/* The pw_dtype of a ggml type id piecewise reads; false for the others. */
bool pw_ggml_type_to_dtype(uint32_t ggml_type, pw_dtype *out);
/* The ggml type id of a weight dtype (F32 for the non-weight dtypes). */
uint32_t pw_dtype_to_ggml_type(pw_dtype dtype);

/* ---- metadata ---------------------------------------------------------- */

int64_t pw_gguf_kv_count(const pw_gguf *g);
const pw_gguf_kv *pw_gguf_kv_at(const pw_gguf *g, int64_t i);
/* NULL if the key is absent. */
const pw_gguf_kv *pw_gguf_find_kv(const pw_gguf *g, const char *key);
bool pw_gguf_has(const pw_gguf *g, const char *key);

const char *pw_gguf_kv_key(const pw_gguf_kv *kv);
pw_gguf_type pw_gguf_kv_type(const pw_gguf_kv *kv);

/* Scalar access through a kv. Integer getters accept any integer type (and
 * bool) whose value fits the target; float getters accept either float
 * type and integers. A mismatch is PW_ERR_FORMAT naming the key and both
 * types. */
pw_status pw_gguf_kv_int(const pw_gguf_kv *kv, int64_t *out);
pw_status pw_gguf_kv_uint(const pw_gguf_kv *kv, uint64_t *out);
pw_status pw_gguf_kv_float(const pw_gguf_kv *kv, double *out);
pw_status pw_gguf_kv_bool(const pw_gguf_kv *kv, bool *out);
/* NUL-terminated copy owned by the gguf handle; *len (may be NULL) is the
 * byte length, which may be shorter than strlen if the value holds NULs. */
pw_status pw_gguf_kv_string(const pw_gguf_kv *kv, const char **out, size_t *len);

/* Arrays. The element type of a non-array kv is PW_GGUF_TYPE_COUNT_. */
pw_gguf_type pw_gguf_kv_array_type(const pw_gguf_kv *kv);
uint64_t pw_gguf_kv_array_len(const pw_gguf_kv *kv);
/* Element i of a numeric/bool array, converted as the scalar getters do. */
pw_status pw_gguf_kv_array_int(const pw_gguf_kv *kv, uint64_t i, int64_t *out);
pw_status pw_gguf_kv_array_float(const pw_gguf_kv *kv, uint64_t i, double *out);
/* Element i of a string array: bytes in the mapping, not NUL-terminated. */
pw_status pw_gguf_kv_array_string(const pw_gguf_kv *kv, uint64_t i, const char **out,
                                  size_t *len);

/* Drops the resident pages wholly inside [p, p + n) of the file's mapping
 * (a tensor-parallel rank that copied out its slice of a tensor never reads
 * the rest, and its pages would stay in its RSS). The mapping is
 * read-only, so a later read faults them back in from the file. A range
 * outside the mapping (or a gguf read from memory) is left alone. */
void pw_gguf_release_pages(const pw_gguf *g, const void *p, size_t n);


/* Lookups by key. Absent keys are PW_ERR_NOT_FOUND ("gguf: key 'x' not
 * found"); values out of the target's range or of another type are
 * PW_ERR_FORMAT. */
pw_status pw_gguf_get_u32(const pw_gguf *g, const char *key, uint32_t *out);
pw_status pw_gguf_get_i32(const pw_gguf *g, const char *key, int32_t *out);
pw_status pw_gguf_get_u64(const pw_gguf *g, const char *key, uint64_t *out);
pw_status pw_gguf_get_f32(const pw_gguf *g, const char *key, float *out);
pw_status pw_gguf_get_bool(const pw_gguf *g, const char *key, bool *out);
pw_status pw_gguf_get_string(const pw_gguf *g, const char *key, const char **out);
/* An array whose elements have type elem_type (PW_GGUF_TYPE_COUNT_ accepts
 * any element type). */
pw_status pw_gguf_get_array(const pw_gguf *g, const char *key, pw_gguf_type elem_type,
                            const pw_gguf_kv **out, uint64_t *len);

/* ---- tensors ------------------------------------------------------------ */

int64_t pw_gguf_tensor_count(const pw_gguf *g);
const pw_gguf_tensor *pw_gguf_tensor_at(const pw_gguf *g, int64_t i);
/* PW_ERR_NOT_FOUND "gguf: tensor 'x' not found" if absent. */
pw_status pw_gguf_find_tensor(const pw_gguf *g, const char *name, const pw_gguf_tensor **out);

#endif
