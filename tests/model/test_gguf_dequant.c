/* f16/bf16 conversions and the block dequantizers against hand-computed
 * values; quantizers against hand-computed codes and error bounds. */
#include "model/dequant.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

static void test_f16(void) {
    CHECK(pw_f16_to_f32(0x3C00) == 1.0f);
    CHECK(pw_f16_to_f32(0xC000) == -2.0f);
    CHECK(pw_f16_to_f32(0x3555) == 0.333251953125f);
    CHECK(pw_f16_to_f32(0x7BFF) == 65504.0f);
    CHECK(pw_f16_to_f32(0x0400) == 0x1p-14f);   /* smallest normal */
    CHECK(pw_f16_to_f32(0x0001) == 0x1p-24f);   /* smallest subnormal */
    CHECK(pw_f16_to_f32(0x03FF) == 1023 * 0x1p-24f);
    CHECK(pw_f16_to_f32(0x7C00) == INFINITY);
    CHECK(pw_f16_to_f32(0xFC00) == -INFINITY);
    CHECK(isnan(pw_f16_to_f32(0x7E00)));
    CHECK(signbit(pw_f16_to_f32(0x8000)) && pw_f16_to_f32(0x8000) == 0.0f);

    CHECK_EQ_INT(pw_f32_to_f16(1.0f), 0x3C00);
    CHECK_EQ_INT(pw_f32_to_f16(-2.0f), 0xC000);
    CHECK_EQ_INT(pw_f32_to_f16(65504.0f), 0x7BFF);
    CHECK_EQ_INT(pw_f32_to_f16(65519.0f), 0x7BFF); /* below the halfway point */
    CHECK_EQ_INT(pw_f32_to_f16(65520.0f), 0x7C00); /* halfway to 65536: rounds to inf */
    CHECK_EQ_INT(pw_f32_to_f16(1e10f), 0x7C00);
    CHECK_EQ_INT(pw_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);     /* tie to even (down) */
    CHECK_EQ_INT(pw_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02); /* tie to even (up) */
    CHECK_EQ_INT(pw_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
    CHECK_EQ_INT(pw_f32_to_f16(0x1p-14f), 0x0400);
    CHECK_EQ_INT(pw_f32_to_f16(0x1p-24f), 0x0001);
    CHECK_EQ_INT(pw_f32_to_f16(0x1p-25f), 0x0000);     /* tie to even: 0 */
    CHECK_EQ_INT(pw_f32_to_f16(3 * 0x1p-25f), 0x0002); /* 1.5 units: up to 2 */
    CHECK_EQ_INT(pw_f32_to_f16(-1e-10f), 0x8000);
    CHECK_EQ_INT(pw_f32_to_f16(INFINITY), 0x7C00);
    CHECK_EQ_INT(pw_f32_to_f16(-INFINITY), 0xFC00);
    CHECK(isnan(pw_f16_to_f32(pw_f32_to_f16(NAN))));
    /* Every finite half survives a round trip through f32. */
    int mismatches = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00) continue;
        if (pw_f32_to_f16(pw_f16_to_f32((uint16_t)h)) != h) mismatches++;
    }
    CHECK_EQ_INT(mismatches, 0);
}

static void test_bf16(void) {
    CHECK(pw_bf16_to_f32(0x3F80) == 1.0f);
    CHECK(pw_bf16_to_f32(0xC040) == -3.0f);
    CHECK(pw_bf16_to_f32(0x7F80) == INFINITY);
    CHECK_EQ_INT(pw_f32_to_bf16(1.0f), 0x3F80);
    CHECK_EQ_INT(pw_f32_to_bf16(-3.0f), 0xC040);
    CHECK_EQ_INT(pw_f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);     /* tie to even (down) */
    CHECK_EQ_INT(pw_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82); /* tie to even (up) */
    CHECK_EQ_INT(pw_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
    CHECK(isnan(pw_bf16_to_f32(pw_f32_to_bf16(NAN))));
}

static void test_plain_types(void) {
    const uint16_t halves[4] = {0x3C00, 0xC000, 0x3800, 0x0000}; /* 1, -2, 0.5, 0 */
    const uint16_t bhalves[2] = {0x3F80, 0xC040};                /* 1, -3 */
    const float f[3] = {1.5f, -0.25f, 1e30f};
    float out[4];
    CHECK_OK(pw_dequantize(PW_F16, halves, out, 4));
    CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.5f && out[3] == 0.0f);
    CHECK_OK(pw_dequantize(PW_BF16, bhalves, out, 2));
    CHECK(out[0] == 1.0f && out[1] == -3.0f);
    CHECK_OK(pw_dequantize(PW_F32, f, out, 3));
    CHECK(memcmp(out, f, sizeof f) == 0);
}

static void test_q8_0(void) {
    pw_block_q8_0 b[2];
    b[0].d = 0x3800; /* 0.5 */
    b[1].d = 0xC000; /* -2 */
    for (int j = 0; j < 32; j++) {
        b[0].qs[j] = (int8_t)(j - 16);
        b[1].qs[j] = (int8_t)(j == 0 ? -128 : j == 1 ? 127 : 0);
    }
    float out[64];
    CHECK_OK(pw_dequantize(PW_Q8_0, b, out, 64));
    CHECK(out[0] == -8.0f);
    CHECK(out[16] == 0.0f);
    CHECK(out[31] == 7.5f);
    CHECK(out[32] == 256.0f);  /* -128 * -2 */
    CHECK(out[33] == -254.0f); /*  127 * -2 */
    CHECK(out[34] == 0.0f);
}

static void test_q4_0(void) {
    pw_block_q4_0 b;
    b.d = 0x4000; /* 2 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float out[32];
    CHECK_OK(pw_dequantize(PW_Q4_0, &b, out, 32));
    /* low nibble j -> element j: (j - 8) * 2; high nibble 15-j -> element
     * j + 16: (7 - j) * 2 */
    CHECK(out[0] == -16.0f);
    CHECK(out[8] == 0.0f);
    CHECK(out[15] == 14.0f);
    CHECK(out[16] == 14.0f);
    CHECK(out[31] == -16.0f);
    int all = 1;
    for (int j = 0; j < 16; j++)
        all &= out[j] == (float)((j - 8) * 2) && out[j + 16] == (float)((7 - j) * 2);
    CHECK(all);
}

static void test_q4_1(void) {
    pw_block_q4_1 b;
    b.d = 0x3400; /* 0.25 */
    b.m = 0xBC00; /* -1 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(0xF0 | j);
    float out[32];
    CHECK_OK(pw_dequantize(PW_Q4_1, &b, out, 32));
    CHECK(out[0] == -1.0f);
    CHECK(out[4] == 0.0f);
    CHECK(out[15] == 2.75f);
    int high = 1;
    for (int j = 16; j < 32; j++) high &= out[j] == 2.75f; /* 15 * 0.25 - 1 */
    CHECK(high);
}

static void test_quantize_codes(void) {
    /* q8_0 of [1, -2, 0.5, 0...]: amax 2, d = 2/127, codes round(x * 63.5). */
    float x[32] = {1.0f, -2.0f, 0.5f};
    pw_block_q8_0 q8;
    CHECK_OK(pw_quantize(PW_Q8_0, x, &q8, 32));
    CHECK_EQ_INT(q8.qs[0], 64);
    CHECK_EQ_INT(q8.qs[1], -127);
    CHECK_EQ_INT(q8.qs[2], 32);
    CHECK_EQ_INT(q8.qs[3], 0);
    CHECK_EQ_INT(q8.d, pw_f32_to_f16(2.0f / 127.0f));

    /* q4_0: the largest magnitude (-4) maps to code 0, d = -4 / -8 = 0.5. */
    float y[32] = {0};
    y[0] = -4.0f;
    y[1] = 1.0f;
    y[16] = 3.5f;
    pw_block_q4_0 q4;
    CHECK_OK(pw_quantize(PW_Q4_0, y, &q4, 32));
    CHECK_EQ_INT(q4.d, 0x3800);
    CHECK_EQ_INT(q4.qs[0], 0 | (15 << 4)); /* -4 -> 0; 3.5 -> 15 */
    CHECK_EQ_INT(q4.qs[1], 10 | (8 << 4)); /* 1 -> 10; 0 -> 8 */

    /* q4_1: min -1, max 2.75, d = 0.25. */
    float z[32];
    for (int j = 0; j < 32; j++) z[j] = -1.0f + 0.25f * (float)(j % 16);
    pw_block_q4_1 q41;
    CHECK_OK(pw_quantize(PW_Q4_1, z, &q41, 32));
    CHECK_EQ_INT(q41.d, 0x3400);
    CHECK_EQ_INT(q41.m, 0xBC00);
    int codes = 1;
    for (int j = 0; j < 16; j++) codes &= q41.qs[j] == (uint8_t)(j | (j << 4));
    CHECK(codes);
}

/* Reconstruction error stays within the scheme's step on pseudo-random data. */
static void test_quantize_bounds(void) {
    enum { N = 32 * 64 };
    static float x[N], back[N];
    static uint8_t enc[N * 4];
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / (float)(1u << 24) - 0.5f) * (float)(1 + i / 32);
    }
    const pw_dtype types[] = {PW_F16, PW_BF16, PW_Q8_0, PW_Q4_0, PW_Q4_1};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        CHECK_OK(pw_quantize(types[k], x, enc, N));
        CHECK_OK(pw_dequantize(types[k], enc, back, N));
        int bad = 0;
        for (int b = 0; b < N / 32; b++) {
            float amax = 0, lo = x[b * 32], hi = x[b * 32];
            for (int j = 0; j < 32; j++) {
                float v = x[b * 32 + j];
                amax = fmaxf(amax, fabsf(v));
                lo = fminf(lo, v);
                hi = fmaxf(hi, v);
            }
            for (int j = 0; j < 32; j++) {
                float v = x[b * 32 + j], err = fabsf(back[b * 32 + j] - v);
                float bound = types[k] == PW_F16    ? fabsf(v) * 0x1p-11f
                            : types[k] == PW_BF16   ? fabsf(v) * 0x1p-8f
                            : types[k] == PW_Q8_0   ? amax / 127.0f * 0.51f + amax * 1e-3f
                            : types[k] == PW_Q4_0   ? amax / 8.0f * 1.01f
                                                    : (hi - lo) / 15.0f * 0.51f + amax * 1e-3f;
                bad += err > bound;
            }
        }
        if (bad) fprintf(stderr, "%s: %d values beyond the bound\n", pw_dtype_name(types[k]), bad);
        CHECK_EQ_INT(bad, 0);
    }
}

static void test_errors(void) {
    float out[64];
    uint8_t in[64] = {0};
    CHECK_ERR(pw_dequantize(PW_Q4_0, in, out, 33), PW_ERR_INVALID_ARG,
              "33 elements is not a multiple of the q4_0 block size 32");
    CHECK_ERR(pw_dequantize(PW_I32, in, out, 4), PW_ERR_UNSUPPORTED, "i32 is not a weight encoding");
    CHECK_ERR(pw_dequantize(PW_F32, in, out, -1), PW_ERR_INVALID_ARG, "negative count");
    CHECK_ERR(pw_dequantize((pw_dtype)99, in, out, 1), PW_ERR_INVALID_ARG, "unknown dtype 99");
    CHECK_ERR(pw_quantize(PW_Q8_0, out, in, 16), PW_ERR_INVALID_ARG, "not a multiple");
    CHECK_ERR(pw_quantize(PW_U8, out, in, 16), PW_ERR_UNSUPPORTED, "u8 is not a weight encoding");
    CHECK_OK(pw_dequantize(PW_Q4_1, in, out, 0));
}

int main(void) {
    test_f16();
    test_bf16();
    test_plain_types();
    test_q8_0();
    test_q4_0();
    test_q4_1();
    test_quantize_codes();
    test_quantize_bounds();
    test_errors();
    return pw_test_finish("model_gguf_dequant");
}
