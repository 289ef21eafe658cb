/* Weight encodings to and from f32. The quantizers follow ggml's reference
 * (quantize_row_*_ref) rounding exactly, so round-trips match llama.cpp. */
#include "model/dequant.h"

#include "internal.h"

#include <math.h>
#include <string.h>

/* Each product must round to f32 on its own, as in ggml and gguf-py, for
 * the dequantized values to match theirs bit for bit: no fused
 * multiply-add. GCC does not contract in ISO C mode (the build uses
 * -std=c11); Clang needs telling. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

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

/* ---- raw block access ------------------------------------------------------ */

#define PW_QK_K 256 /* elements per K-quant super-block */

/* Block layouts (ggml's block_* structs; byte sizes in src/core/dtype.c):
 *   Q5_0  22 bytes: d, qh[4], qs[16]
 *   Q5_1  24 bytes: d, m, qh[4], qs[16]
 *   Q2_K  84 bytes: scales[16], qs[64], d, dmin
 *   Q3_K 110 bytes: hmask[32], qs[64], scales[12], d
 *   Q4_K 144 bytes: d, dmin, scales[12], qs[128]
 *   Q5_K 176 bytes: d, dmin, scales[12], qh[32], qs[128]
 *   Q6_K 210 bytes: ql[128], qh[64], scales[16] (int8), d */

static float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return pw_f16_to_f32(h);
}

static void put_half(uint8_t *p, float v) {
    uint16_t h = pw_f32_to_f16(v);
    memcpy(p, &h, 2);
}

static uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Q4_K and Q5_K pack eight 6-bit scales and eight 6-bit mins in 12 bytes:
 * bytes 0-3 hold scales 0-3 in their low six bits, bytes 4-7 mins 0-3;
 * scales and mins 4-7 keep their low four bits in the nibbles of bytes
 * 8-11 (scale low, min high) and their top two bits in the top two bits of
 * bytes 0-3 (scales) and 4-7 (mins). */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void k_pack_scale_min(uint8_t *s, const int *sc, const int *m) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4));
    }
}

/* Q3_K packs sixteen 6-bit scales (stored + 32) in 12 bytes: the low four
 * bits of scales 0-7 in the low nibbles of bytes 0-7 and of scales 8-15 in
 * their high nibbles; the top two bits of scale i in bits 2*(i/4) of byte
 * 8 + i%4. */
static int q3_k_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? s[i] & 0x0F : s[i - 8] >> 4;
    int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* ---- dequantizers of the newer types ------------------------------------------ */

static void dequant_q5(const uint8_t *b, float *y, bool with_min) {
    float d = half_at(b), m = with_min ? half_at(b + 2) : 0.0f;
    const uint8_t *qhp = b + (with_min ? 4 : 2);
    uint32_t qh = u32_at(qhp);
    const uint8_t *qs = qhp + 4;
    for (int j = 0; j < PW_QK; j++) {
        int q = (j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4) | (int)(((qh >> j) & 1) << 4);
        y[j] = with_min ? (float)q * d + m : (float)(q - 16) * d;
    }
}

/* Q2_K: element e (0..255) is bits 2s..2s+1 of qs[32h + l] where
 * e = 128h + 32s + l; group e / 16 has scales[g] = sc | m << 4. */
static void dequant_q2_k(const uint8_t *b, float *y) {
    const uint8_t *scales = b, *qs = b + 16;
    float d = half_at(b + 80), dmin = half_at(b + 82);
    for (int e = 0; e < PW_QK_K; e++) {
        int h = e / 128, s = (e / 32) % 4, l = e % 32;
        int q = (qs[32 * h + l] >> (2 * s)) & 3;
        uint8_t sc = scales[e / 16];
        float dl = d * (float)(sc & 0x0F), ml = dmin * (float)(sc >> 4);
        y[e] = dl * (float)q - ml;
    }
}

/* Q3_K: the low two bits as in Q2_K; bit 2 of element e = 32j + l is bit j
 * of hmask[l], and a clear bit subtracts 4. */
static void dequant_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hmask = b, *qs = b + 32, *scales = b + 96;
    float d = half_at(b + 108);
    for (int e = 0; e < PW_QK_K; e++) {
        int h = e / 128, s = (e / 32) % 4, l = e % 32;
        int q = (qs[32 * h + l] >> (2 * s)) & 3;
        if (!((hmask[l] >> (e / 32)) & 1)) q -= 4;
        float dl = d * (float)q3_k_scale(scales, e / 16);
        y[e] = dl * (float)q;
    }
}

/* Q4_K / Q5_K: group j (32 elements) takes the low nibbles of qs[32(j/2)..]
 * for even j and the high nibbles for odd j; Q5_K's bit 4 of element
 * 32j + l is bit j of qh[l]. */
static void dequant_q45_k(const uint8_t *b, float *y, bool five) {
    float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k_scale_min(scales, j, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
            if (five) q |= ((qh[l] >> j) & 1) << 4;
            y[32 * j + l] = d1 * (float)q - m1;
        }
    }
}

/* Q6_K: element e = 128h + 64k + i (i < 64) has its low four bits in
 * nibble k of ql[64h + i]; element e = 128h + 32s + l has its top two bits
 * in bits 2s of qh[32h + l]; group e / 16 uses the int8 scales[g]. */
static void dequant_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = half_at(b + 208);
    for (int e = 0; e < PW_QK_K; e++) {
        int h = e / 128, r = e % 128;
        int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
        int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        float dd = d * (float)scales[e / 16];
        y[e] = dd * (float)((lo | (hi << 4)) - 32);
    }
}

typedef void (*block_fn)(const uint8_t *b, float *y);
static void dequant_q5_0(const uint8_t *b, float *y) { dequant_q5(b, y, false); }
static void dequant_q5_1(const uint8_t *b, float *y) { dequant_q5(b, y, true); }
static void dequant_q4_k(const uint8_t *b, float *y) { dequant_q45_k(b, y, false); }
static void dequant_q5_k(const uint8_t *b, float *y) { dequant_q45_k(b, y, true); }

static block_fn block_dequantizer(pw_dtype type) {
    switch (type) {
    case PW_Q5_0: return dequant_q5_0;
    case PW_Q5_1: return dequant_q5_1;
    case PW_Q2_K: return dequant_q2_k;
    case PW_Q3_K: return dequant_q3_k;
    case PW_Q4_K: return dequant_q4_k;
    case PW_Q5_K: return dequant_q5_k;
    case PW_Q6_K: return dequant_q6_k;
    default: return NULL;
    }
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
    default: {
        block_fn fn = block_dequantizer(type);
        if (!fn)
            return pw_error(PW_ERR_UNSUPPORTED, "dequantize: dtype %s is not a weight encoding",
                            pw_dtype_name(type));
        int64_t be = pw_dtype_block_elems(type), bb = pw_dtype_block_bytes(type);
        for (int64_t b = 0; b < n / be; b++) fn(p + b * bb, dst + b * be);
        return PW_OK;
    }
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

/* ---- quantizers of the newer types --------------------------------------------- */

/* Rounds v to the nearest integer in [lo, hi] (ties to even); NaN gives lo. */
static int code_in(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)lrintf(v);
}

/* ggml's quantize_row_q5_0_ref / q5_1_ref. */
static void quantize_q5(const float *x, uint8_t *b, bool with_min) {
    float d, id, min = 0.0f;
    if (with_min) {
        float max = x[0];
        min = x[0];
        for (int j = 1; j < PW_QK; j++) {
            min = fminf(min, x[j]);
            max = fmaxf(max, x[j]);
        }
        d = (max - min) / 31.0f;
    } else {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < PW_QK; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        d = max / -16.0f;
    }
    id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(b, d);
    if (with_min) put_half(b + 2, min);
    uint8_t *qhp = b + (with_min ? 4 : 2), *qs = qhp + 4;
    uint32_t qh = 0;
    for (int j = 0; j < PW_QK / 2; j++) {
        int q0, q1;
        if (with_min) {
            q0 = (int)(int8_t)((x[j] - min) * id + 0.5f);
            q1 = (int)(int8_t)((x[j + 16] - min) * id + 0.5f);
        } else {
            q0 = (int)(int8_t)(x[j] * id + 16.5f);
            q1 = (int)(int8_t)(x[j + 16] * id + 16.5f);
        }
        q0 = q0 < 31 ? q0 : 31;
        q1 = q1 < 31 ? q1 : 31;
        qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
        qh |= (uint32_t)((q0 >> 4) & 1) << j;
        qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    memcpy(qhp, &qh, 4);
}

/* Per-group affine codes for the K-quants with mins (Q2_K, Q4_K, Q5_K):
 * group g of size gs gets step (max - min) / qmax with min clamped to at
 * most 0, as ggml's quantizers start; the steps and -mins are then coded
 * against the super-block's largest with scale_max levels. Fills codes
 * sc[g], m[g] and the f32 super-scales d, dmin (before f16 rounding). */
static void k_affine_scales(const float *x, int groups, int gs, int qmax, int scale_max,
                            int *sc, int *m, float *d, float *dmin) {
    float step[16], neg_min[16], max_step = 0.0f, max_min = 0.0f;
    for (int g = 0; g < groups; g++) {
        float lo = 0.0f, hi = x[g * gs];
        for (int l = 0; l < gs; l++) {
            lo = fminf(lo, x[g * gs + l]);
            hi = fmaxf(hi, x[g * gs + l]);
        }
        step[g] = hi > lo ? (hi - lo) / (float)qmax : 0.0f;
        neg_min[g] = -lo;
        max_step = fmaxf(max_step, step[g]);
        max_min = fmaxf(max_min, neg_min[g]);
    }
    *d = max_step / (float)scale_max;
    *dmin = max_min / (float)scale_max;
    for (int g = 0; g < groups; g++) {
        /* Round the step up so the group's maximum stays within qmax. */
        sc[g] = max_step > 0.0f ? code_in(ceilf(step[g] / max_step * (float)scale_max), 0, scale_max) : 0;
        m[g] = max_min > 0.0f ? code_in(neg_min[g] / max_min * (float)scale_max, 0, scale_max) : 0;
    }
}

/* Codes of one group for value = dl * q - ml. */
static void k_affine_codes(const float *x, int n, float dl, float ml, int qmax, int *q) {
    for (int l = 0; l < n; l++) q[l] = dl > 0.0f ? code_in((x[l] + ml) / dl, 0, qmax) : 0;
}

static void quantize_q2_k(const float *x, uint8_t *b) {
    int sc[16], m[16], q[PW_QK_K];
    float d, dmin;
    k_affine_scales(x, 16, 16, 3, 15, sc, m, &d, &dmin);
    put_half(b + 80, d);
    put_half(b + 82, dmin);
    float dq = half_at(b + 80), mq = half_at(b + 82);
    for (int g = 0; g < 16; g++) {
        b[g] = (uint8_t)(sc[g] | (m[g] << 4));
        k_affine_codes(x + 16 * g, 16, dq * (float)sc[g], mq * (float)m[g], 3, q + 16 * g);
    }
    uint8_t *qs = b + 16;
    memset(qs, 0, 64);
    for (int e = 0; e < PW_QK_K; e++)
        qs[32 * (e / 128) + e % 32] |= (uint8_t)(q[e] << (2 * ((e / 32) % 4)));
}

static void quantize_q45_k(const float *x, uint8_t *b, bool five) {
    int sc[8], m[8], q[32];
    int qmax = five ? 31 : 15;
    float d, dmin;
    k_affine_scales(x, 8, 32, qmax, 63, sc, m, &d, &dmin);
    put_half(b, d);
    put_half(b + 2, dmin);
    k_pack_scale_min(b + 4, sc, m);
    float dq = half_at(b), mq = half_at(b + 2);
    uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
    memset(qs, 0, 128);
    if (five) memset(qh, 0, 32);
    for (int j = 0; j < 8; j++) {
        k_affine_codes(x + 32 * j, 32, dq * (float)sc[j], mq * (float)m[j], qmax, q);
        for (int l = 0; l < 32; l++) {
            qs[32 * (j / 2) + l] |= (uint8_t)((q[l] & 0x0F) << (4 * (j % 2)));
            if (five) qh[l] |= (uint8_t)(((q[l] >> 4) & 1) << j);
        }
    }
}

/* Signed per-group steps for Q3_K and Q6_K: the group's largest magnitude
 * (with its sign) maps to code qlo, like Q4_0; the steps are coded against
 * the super-block's largest magnitude with levels codes of either sign. */
static float k_signed_scales(const float *x, int qlo, int levels, int lo_code, int *sc) {
    float step[16], max_abs = 0.0f;
    for (int g = 0; g < 16; g++) {
        float amax = 0.0f, max = 0.0f;
        for (int l = 0; l < 16; l++)
            if (fabsf(x[16 * g + l]) > amax) {
                amax = fabsf(x[16 * g + l]);
                max = x[16 * g + l];
            }
        step[g] = max / (float)qlo;
        max_abs = fmaxf(max_abs, fabsf(step[g]));
    }
    float d = max_abs / (float)levels;
    for (int g = 0; g < 16; g++)
        sc[g] = d > 0.0f ? code_in(step[g] / d, lo_code, levels) : 0;
    return d;
}

static void quantize_q3_k(const float *x, uint8_t *b) {
    int sc[16];
    float d = k_signed_scales(x, -4, 31, -31, sc);
    put_half(b + 108, d);
    float dq = half_at(b + 108);
    uint8_t *hmask = b, *qs = b + 32, *scales = b + 96;
    memset(b, 0, 108);
    for (int i = 0; i < 16; i++) {
        int v = sc[i] + 32;
        scales[i % 8] |= (uint8_t)((v & 0x0F) << (4 * (i / 8)));
        scales[8 + i % 4] |= (uint8_t)((v >> 4) << (2 * (i / 4)));
    }
    for (int e = 0; e < PW_QK_K; e++) {
        float dl = dq * (float)sc[e / 16];
        int q = dl != 0.0f ? code_in(x[e] / dl, -4, 3) : 0;
        int u = q + 4; /* 0..7: low two bits in qs, bit 2 in hmask */
        qs[32 * (e / 128) + e % 32] |= (uint8_t)((u & 3) << (2 * ((e / 32) % 4)));
        hmask[e % 32] |= (uint8_t)((u >> 2) << (e / 32));
    }
}

static void quantize_q6_k(const float *x, uint8_t *b) {
    int sc[16];
    float d = k_signed_scales(x, -32, 127, -128, sc);
    put_half(b + 208, d);
    float dq = half_at(b + 208);
    uint8_t *ql = b, *qh = b + 128;
    memset(b, 0, 192);
    for (int g = 0; g < 16; g++) b[192 + g] = (uint8_t)(int8_t)sc[g];
    for (int e = 0; e < PW_QK_K; e++) {
        float dd = dq * (float)sc[e / 16];
        int u = (dd != 0.0f ? code_in(x[e] / dd, -32, 31) : 0) + 32;
        int h = e / 128, r = e % 128;
        ql[64 * h + r % 64] |= (uint8_t)((u & 0x0F) << (4 * (r / 64)));
        qh[32 * h + r % 32] |= (uint8_t)((u >> 4) << (2 * (r / 32)));
    }
}

typedef void (*quant_fn)(const float *x, uint8_t *b);
static void quantize_q5_0(const float *x, uint8_t *b) { quantize_q5(x, b, false); }
static void quantize_q5_1(const float *x, uint8_t *b) { quantize_q5(x, b, true); }
static void quantize_q4_k(const float *x, uint8_t *b) { quantize_q45_k(x, b, false); }
static void quantize_q5_k(const float *x, uint8_t *b) { quantize_q45_k(x, b, true); }

static quant_fn block_quantizer(pw_dtype type) {
    switch (type) {
    case PW_Q5_0: return quantize_q5_0;
    case PW_Q5_1: return quantize_q5_1;
    case PW_Q2_K: return quantize_q2_k;
    case PW_Q3_K: return quantize_q3_k;
    case PW_Q4_K: return quantize_q4_k;
    case PW_Q5_K: return quantize_q5_k;
    case PW_Q6_K: return quantize_q6_k;
    default: return NULL;
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
    default: {
        quant_fn fn = block_quantizer(type);
        if (!fn)
            return pw_error(PW_ERR_UNSUPPORTED, "quantize: dtype %s is not a weight encoding",
                            pw_dtype_name(type));
        int64_t be = pw_dtype_block_elems(type), bb = pw_dtype_block_bytes(type);
        for (int64_t b = 0; b < n / be; b++) fn(src + b * be, p + b * bb);
        return PW_OK;
    }
    }
}
