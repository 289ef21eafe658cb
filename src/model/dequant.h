/* Conversions between the GGUF weight encodings and f32.
 *
 * Block layouts are ggml's (32 values per block, little-endian):
 *   Q8_0  f16 d, 32 x int8 q            value = q * d
 *   Q4_0  f16 d, 16 bytes of nibbles    value = (nibble - 8) * d
 *   Q4_1  f16 d, f16 m, 16 nibble bytes value = nibble * d + m
 * In the Q4 types byte j holds element j in its low nibble and element
 * j + 16 in its high nibble. */
#ifndef PW_MODEL_DEQUANT_H
#define PW_MODEL_DEQUANT_H

#include "piecewise.h"

#define PW_QK 32 /* elements per quantized block */

typedef struct pw_block_q8_0 {
    uint16_t d;
    int8_t qs[PW_QK];
} pw_block_q8_0;

typedef struct pw_block_q4_0 {
    uint16_t d;
    uint8_t qs[PW_QK / 2];
} pw_block_q4_0;

typedef struct pw_block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[PW_QK / 2];
} pw_block_q4_1;

/* IEEE half precision; f32->f16 rounds to nearest even, overflows to inf,
 * keeps NaN a NaN and produces subnormals. */
float pw_f16_to_f32(uint16_t h);
uint16_t pw_f32_to_f16(float f);
/* bfloat16: the top half of an f32; f32->bf16 rounds to nearest even. */
float pw_bf16_to_f32(uint16_t b);
uint16_t pw_f32_to_bf16(float f);

/* Expands n elements of type (F32, F16, BF16, Q8_0, Q4_0, Q4_1) to f32. n
 * must be a multiple of the type's block size. */
pw_status pw_dequantize(pw_dtype type, const void *src, float *dst, int64_t n);
/* The inverse, with ggml's reference quantizers (so files written by the
 * tests' GGUF writer hold what llama.cpp would have written). */
pw_status pw_quantize(pw_dtype type, const float *src, void *dst, int64_t n);

#endif
