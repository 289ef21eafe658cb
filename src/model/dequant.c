/* Weight encodings to and from f32. The quantizers follow ggml's reference
 * (quantize_row_*_ref) rounding exactly, so round-trips match llama.cpp. */
#include "model/dequant.h"

#include "internal.h"

#include <math.h>
#include <string.h>

_Static_assert(sizeof(pw_block_q8_0) == 34, "q8_0 block layout");
_Static_assert(sizeof(pw_block_q4_0) == 18, "q4_0 block layout");
_Static_assert(sizeof(pw_block_q4_1) == 20, "q4_1 block layout");

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float pw_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0x1F) return bits_f32(sign | 0x7F800000u | (mant << 13)); /* inf, NaN */
    if (exp != 0) return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return bits_f32(sign);
    /* Subnormal: mant * 2^-24, exact in f32. */
    float v = (float)mant * 0x1p-24f;
    return sign ? -v : v;
}

uint16_t pw_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return sign | 0x7E00; /* NaN */
    if (abs >= 0x477FF000u) return sign | 0x7C00; /* rounds past 65504: inf */
    if (abs < 0x38800000u) {
        /* Below the smallest normal (2^-14): scale into subnormal units of
         * 2^-24 and let the FPU round to nearest even. */
        float a = bits_f32(abs);
        return sign | (uint16_t)lrintf(a * 0x1p24f);
    }
    uint32_t exp = (abs >> 23) - 112;
    uint32_t mant = abs & 0x7FFFFF;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* carries into exp correctly */
    return sign | (uint16_t)h;
}

float pw_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t pw_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7FFF + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static pw_status check_count(pw_dtype type, int64_t n, const char *what) {
    if ((unsigned)type >= PW_DTYPE_COUNT_)
        return pw_error(PW_ERR_INVALID_ARG, "%s: unknown dtype %d", what, (int)type);
    if (n < 0) return pw_error(PW_ERR_INVALID_ARG, "%s: negative count %lld", what, (long long)n);
    int64_t be = pw_dtype_block_elems(type);
    if (n % be != 0)
        return pw_error(PW_ERR_INVALID_ARG, "%s: %lld elements is not a multiple of the %s "
                        "block size %lld", what, (long long)n, pw_dtype_name(type),
                        (long long)be);
    return PW_OK;
}

pw_status pw_dequantize(pw_dtype type, const void *src, float *dst, int64_t n) {
    PW_TRY(check_count(type, n, "dequantize"));
    const uint8_t *p = src;
    switch (type) {
    case PW_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        return PW_OK;
    case PW_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = pw_f16_to_f32(h);
        }
        return PW_OK;
    case PW_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = pw_bf16_to_f32(h);
        }
        return PW_OK;
    case PW_Q8_0:
        for (int64_t b = 0; b < n / PW_QK; b++) {
            pw_block_q8_0 blk;
            memcpy(&blk, p + b * (int64_t)sizeof blk, sizeof blk);
            float d = pw_f16_to_f32(blk.d);
            for (int j = 0; j < PW_QK; j++) dst[b * PW_QK + j] = (float)blk.qs[j] * d;
        }
        return PW_OK;
    case PW_Q4_0:
        for (int64_t b = 0; b < n / PW_QK; b++) {
            pw_block_q4_0 blk;
            memcpy(&blk, p + b * (int64_t)sizeof blk, sizeof blk);
            float d = pw_f16_to_f32(blk.d);
            float *y = dst + b * PW_QK;
            for (int j = 0; j < PW_QK / 2; j++) {
                y[j] = (float)((blk.qs[j] & 0x0F) - 8) * d;
                y[j + PW_QK / 2] = (float)((blk.qs[j] >> 4) - 8) * d;
            }
        }
        return PW_OK;
    case PW_Q4_1:
        for (int64_t b = 0; b < n / PW_QK; b++) {
            pw_block_q4_1 blk;
            memcpy(&blk, p + b * (int64_t)sizeof blk, sizeof blk);
            float d = pw_f16_to_f32(blk.d), m = pw_f16_to_f32(blk.m);
            float *y = dst + b * PW_QK;
            for (int j = 0; j < PW_QK / 2; j++) {
                y[j] = (float)(blk.qs[j] & 0x0F) * d + m;
                y[j + PW_QK / 2] = (float)(blk.qs[j] >> 4) * d + m;
            }
        }
        return PW_OK;
    default:
        return pw_error(PW_ERR_UNSUPPORTED, "dequantize: dtype %s is not a weight encoding",
                        pw_dtype_name(type));
    }
}

static void quantize_q8_0(const float *x, pw_block_q8_0 *y) {
    float amax = 0.0f;
    for (int j = 0; j < PW_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = pw_f32_to_f16(d);
    for (int j = 0; j < PW_QK; j++) y->qs[j] = (int8_t)roundf(x[j] * id);
}

static void quantize_q4_0(const float *x, pw_block_q4_0 *y) {
    float amax = 0.0f, max = 0.0f; /* max keeps the sign of the largest magnitude */
    for (int j = 0; j < PW_QK; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float d = max / -8.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = pw_f32_to_f16(d);
    for (int j = 0; j < PW_QK / 2; j++) {
        int lo = (int)(int8_t)(x[j] * id + 8.5f);
        int hi = (int)(int8_t)(x[j + PW_QK / 2] * id + 8.5f);
        lo = lo < 15 ? lo : 15;
        hi = hi < 15 ? hi : 15;
        y->qs[j] = (uint8_t)(lo | (hi << 4));
    }
}

static void quantize_q4_1(const float *x, pw_block_q4_1 *y) {
    float min = x[0], max = x[0];
    for (int j = 1; j < PW_QK; j++) {
        min = fminf(min, x[j]);
        max = fmaxf(max, x[j]);
    }
    float d = (max - min) / 15.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = pw_f32_to_f16(d);
    y->m = pw_f32_to_f16(min);
    for (int j = 0; j < PW_QK / 2; j++) {
        int lo = (int)(int8_t)((x[j] - min) * id + 0.5f);
        int hi = (int)(int8_t)((x[j + PW_QK / 2] - min) * id + 0.5f);
        lo = lo < 15 ? lo : 15;
        hi = hi < 15 ? hi : 15;
        y->qs[j] = (uint8_t)(lo | (hi << 4));
    }
}

pw_status pw_quantize(pw_dtype type, const float *src, void *dst, int64_t n) {
    PW_TRY(check_count(type, n, "quantize"));
    uint8_t *p = dst;
    switch (type) {
    case PW_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        return PW_OK;
    case PW_F16:
    case PW_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = type == PW_F16 ? pw_f32_to_f16(src[i]) : pw_f32_to_bf16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        return PW_OK;
    case PW_Q8_0:
        for (int64_t b = 0; b < n / PW_QK; b++) {
            pw_block_q8_0 blk;
            quantize_q8_0(src + b * PW_QK, &blk);
            memcpy(p + b * (int64_t)sizeof blk, &blk, sizeof blk);
        }
        return PW_OK;
    case PW_Q4_0:
        for (int64_t b = 0; b < n / PW_QK; b++) {
            pw_block_q4_0 blk;
            quantize_q4_0(src + b * PW_QK, &blk);
            memcpy(p + b * (int64_t)sizeof blk, &blk, sizeof blk);
        }
        return PW_OK;
    case PW_Q4_1:
        for (int64_t b = 0; b < n / PW_QK; b++) {
            pw_block_q4_1 blk;
            quantize_q4_1(src + b * PW_QK, &blk);
            memcpy(p + b * (int64_t)sizeof blk, &blk, sizeof blk);
        }
        return PW_OK;
    default:
        return pw_error(PW_ERR_UNSUPPORTED, "quantize: dtype %s is not a weight encoding",
                        pw_dtype_name(type));
    }
}
