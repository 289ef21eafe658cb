/* The dequantizers (and the ggml-reference quantizers) against an
 * independent implementation: tests/data/quant/<type>.bin hold blocks and
 * what the `gguf` Python package's numpy code (gguf/quants.py) makes of
 * them; scripts/gen-quant-fixtures.py regenerates them and says how.
 *
 * Every dequantized value must equal the reference bit for bit: both sides
 * round each product to f32 in the same order. For the types gguf-py also
 * quantizes (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) our quantizer must produce the
 * same bytes from the same inputs. */
#include "model/dequant.h"
#include "model/gguf.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fixture {
    uint32_t ggml_type, n_blocks, block_elems, block_bytes, has_input;
    float *inputs;  /* n_blocks * block_elems, or NULL */
    uint8_t *blocks; /* n_blocks * block_bytes */
    float *values;  /* n_blocks * block_elems */
    uint8_t *file;
} fixture;

static bool load_fixture(const char *name, fixture *f) {
    memset(f, 0, sizeof *f);
    char path[512];
    snprintf(path, sizeof path, "%s/quant/%s.bin", PW_TEST_DATA_DIR, name);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "cannot open %s (run scripts/gen-quant-fixtures.py)\n", path);
        return false;
    }
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->file = malloc((size_t)len);
    bool ok = f->file && fread(f->file, 1, (size_t)len, fp) == (size_t)len;
    fclose(fp);
    if (!ok || len < 24 || memcmp(f->file, "PWQF", 4) != 0) {
        fprintf(stderr, "%s: not a fixture file\n", path);
        return false;
    }
    uint32_t hdr[5];
    memcpy(hdr, f->file + 4, sizeof hdr);
    f->ggml_type = hdr[0];
    f->n_blocks = hdr[1];
    f->block_elems = hdr[2];
    f->block_bytes = hdr[3];
    f->has_input = hdr[4];
    size_t n = (size_t)f->n_blocks * f->block_elems;
    size_t want = 24 + (f->has_input ? n * 4 : 0) + (size_t)f->n_blocks * f->block_bytes + n * 4;
    if ((size_t)len != want) {
        fprintf(stderr, "%s: %ld bytes, expected %zu\n", path, len, want);
        return false;
    }
    uint8_t *p = f->file + 24;
    /* Copies, so the f32 arrays are aligned. */
    if (f->has_input) {
        f->inputs = malloc(n * 4);
        memcpy(f->inputs, p, n * 4);
        p += n * 4;
    }
    f->blocks = malloc((size_t)f->n_blocks * f->block_bytes);
    memcpy(f->blocks, p, (size_t)f->n_blocks * f->block_bytes);
    p += (size_t)f->n_blocks * f->block_bytes;
    f->values = malloc(n * 4);
    memcpy(f->values, p, n * 4);
    return true;
}

static void free_fixture(fixture *f) {
    free(f->inputs);
    free(f->blocks);
    free(f->values);
    free(f->file);
}

static int count_bit_mismatches(const float *a, const float *b, size_t n, const char *what) {
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) {
            if (bad < 4)
                fprintf(stderr, "%s: element %zu: got %.9g, reference %.9g\n", what, i,
                        (double)a[i], (double)b[i]);
            bad++;
        }
    return bad;
}

static void check_type(const char *name, pw_dtype dtype) {
    fixture f;
    bool loaded = load_fixture(name, &f);
    CHECK(loaded);
    if (!loaded) {
        free_fixture(&f);
        return;
    }
    /* The reader maps the file's type id to our dtype, and the block
     * geometry agrees with gguf-py's table. */
    pw_dtype mapped = PW_U8;
    CHECK(pw_ggml_type_to_dtype(f.ggml_type, &mapped));
    CHECK_EQ_INT(mapped, dtype);
    CHECK_EQ_INT(pw_dtype_to_ggml_type(dtype), f.ggml_type);
    CHECK_EQ_INT(pw_dtype_block_elems(dtype), f.block_elems);
    CHECK_EQ_INT(pw_dtype_block_bytes(dtype), f.block_bytes);
    CHECK(strcmp(pw_dtype_name(dtype), name) == 0);
    CHECK(strcmp(pw_ggml_type_name(f.ggml_type), name) == 0);

    size_t n = (size_t)f.n_blocks * f.block_elems;
    float *out = malloc(n * sizeof *out);
    CHECK_OK(pw_dequantize(dtype, f.blocks, out, (int64_t)n));
    int bad = count_bit_mismatches(out, f.values, n, name);
    if (bad) fprintf(stderr, "%s: %d of %zu values differ from gguf-py\n", name, bad, n);
    CHECK_EQ_INT(bad, 0);

    if (f.has_input) {
        uint8_t *enc = malloc((size_t)f.n_blocks * f.block_bytes);
        CHECK_OK(pw_quantize(dtype, f.inputs, enc, (int64_t)n));
        int diff = 0;
        for (size_t i = 0; i < (size_t)f.n_blocks * f.block_bytes; i++) diff += enc[i] != f.blocks[i];
        if (diff) fprintf(stderr, "%s: %d quantized bytes differ from gguf-py\n", name, diff);
        CHECK_EQ_INT(diff, 0);
        free(enc);
    }
    free(out);
    free_fixture(&f);
}

/* Blocks of a K-quant written by our quantizer decode to within about one
 * quantization step of the input (the exact codes differ from
 * llama-quantize's, whose scale search we do not reproduce; see dequant.h).
 * The bound is relative to each group's range. */
static void check_quantizer_bounds(pw_dtype dtype, int group, float levels) {
    enum { N = 256 * 8 };
    static float x[N], back[N];
    static uint8_t enc[N * 2];
    uint32_t s = 777;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        float u = (float)(s >> 8) / (float)(1u << 24) - 0.5f;
        /* Blocks of different magnitudes, one all-positive, one all-negative. */
        int b = i / 256;
        x[i] = u * (float)(1 + b) * 0.1f + (b == 3 ? 0.2f : b == 5 ? -0.3f : 0.0f);
    }
    for (int i = 256 * 6; i < 256 * 7; i++) x[i] = 0.0f; /* a zero block */
    CHECK_OK(pw_quantize(dtype, x, enc, N));
    CHECK_OK(pw_dequantize(dtype, enc, back, N));
    int bad = 0;
    double sq = 0, sq_ref = 0;
    for (int g = 0; g < N / group; g++) {
        float lo = 0.0f, hi = 0.0f, bmax = 0.0f;
        for (int l = 0; l < group; l++) {
            lo = fminf(lo, x[g * group + l]);
            hi = fmaxf(hi, x[g * group + l]);
        }
        for (int l = 0; l < 256; l++) bmax = fmaxf(bmax, fabsf(x[(g * group / 256) * 256 + l]));
        /* one step of the group plus the coarseness of the 4..8-bit scales
         * against the block's largest value */
        float bound = (hi - lo) / levels * 1.01f + bmax / 12.0f;
        for (int l = 0; l < group; l++) {
            int i = g * group + l;
            float err = fabsf(back[i] - x[i]);
            sq += (double)err * err;
            sq_ref += (double)x[i] * x[i];
            if (!(err <= bound)) {
                if (bad < 4)
                    fprintf(stderr, "%s: element %d: %.6g -> %.6g (bound %.3g)\n",
                            pw_dtype_name(dtype), i, (double)x[i], (double)back[i], (double)bound);
                bad++;
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    for (int i = 256 * 6; i < 256 * 7; i++) bad += back[i] != 0.0f;
    CHECK_EQ_INT(bad, 0);
    /* Relative RMS error: a sanity check that the codes carry information
     * (2-bit Q2_K is the coarsest). */
    double rel = sqrt(sq / sq_ref);
    fprintf(stderr, "%s: relative rms error %.4f\n", pw_dtype_name(dtype), rel);
    CHECK(rel < (dtype == PW_Q2_K ? 0.35 : dtype == PW_Q3_K ? 0.2 : 0.1));
}

static void test_errors(void) {
    float out[256];
    uint8_t in[256] = {0};
    CHECK_ERR(pw_dequantize(PW_Q4_K, in, out, 128), PW_ERR_INVALID_ARG,
              "128 elements is not a multiple of the q4_K block size 256");
    CHECK_ERR(pw_quantize(PW_Q6_K, out, in, 32), PW_ERR_INVALID_ARG,
              "32 elements is not a multiple of the q6_K block size 256");
    CHECK_ERR(pw_dequantize(PW_Q5_0, in, out, 48), PW_ERR_INVALID_ARG, "q5_0 block size 32");
    CHECK_OK(pw_dequantize(PW_Q3_K, in, out, 0));
    /* An all-zero block decodes to zeros (Q3_K: clear hmask bits mean -4,
     * but the scale d is 0). */
    CHECK_OK(pw_dequantize(PW_Q3_K, in, out, 256));
    int nonzero = 0;
    for (int i = 0; i < 256; i++) nonzero += out[i] != 0.0f;
    CHECK_EQ_INT(nonzero, 0);
    pw_dtype d;
    CHECK(!pw_ggml_type_to_dtype(15, &d)); /* q8_K: not a storage type we read */
    CHECK(!pw_ggml_type_to_dtype(16, &d)); /* iq2_xxs */
    CHECK(!pw_ggml_type_to_dtype(9, &d));  /* q8_1 */
}

int main(void) {
    check_type("q4_0", PW_Q4_0);
    check_type("q4_1", PW_Q4_1);
    check_type("q5_0", PW_Q5_0);
    check_type("q5_1", PW_Q5_1);
    check_type("q8_0", PW_Q8_0);
    check_type("q2_K", PW_Q2_K);
    check_type("q3_K", PW_Q3_K);
    check_type("q4_K", PW_Q4_K);
    check_type("q5_K", PW_Q5_K);
    check_type("q6_K", PW_Q6_K);
    check_quantizer_bounds(PW_Q2_K, 16, 3.0f);
    check_quantizer_bounds(PW_Q3_K, 16, 3.5f);
    check_quantizer_bounds(PW_Q4_K, 32, 15.0f);
    check_quantizer_bounds(PW_Q5_K, 32, 31.0f);
    check_quantizer_bounds(PW_Q6_K, 16, 31.5f);
    check_quantizer_bounds(PW_Q5_0, 32, 15.5f);
    check_quantizer_bounds(PW_Q5_1, 32, 31.0f);
    test_errors();
    return pw_test_finish("model_quant_reference");
}
