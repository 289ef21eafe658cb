/* Conversions between the GGUF weight encodings and f32.
 *
 * Block layouts are ggml's (little-endian). 32 values per block:
 *   Q8_0  f16 d, 32 x int8 q                    value = q * d
 *   Q4_0  f16 d, 16 bytes of nibbles            value = (nibble - 8) * d
 *   Q4_1  f16 d, f16 m, 16 nibble bytes         value = nibble * d + m
 *   Q5_0  f16 d, u32 qh, 16 nibble bytes        value = (nibble | bit << 4) - 16) * d
 *   Q5_1  f16 d, f16 m, u32 qh, 16 nibble bytes value = (nibble | bit << 4) * d + m
 * In these, byte j holds element j in its low nibble and element j + 16 in
 * its high nibble, and bit i of qh is bit 4 of element i.
 *
 * The K-quants hold 256 values in a super-block with f16 super-scales and
 * small per-group integer scales (layouts in dequant.c, docs/gguf.md):
 *   Q2_K  16 groups of 16: value = d * sc * q - dmin * m, q in 0..3
 *   Q3_K  16 groups of 16: value = d * (sc - 32) * q, q in -4..3
 *   Q4_K   8 groups of 32: value = d * sc * q - dmin * m, q in 0..15
 *   Q5_K   8 groups of 32: value = d * sc * q - dmin * m, q in 0..31
 *   Q6_K  16 groups of 16: value = d * sc * q, sc int8, q in -32..31
 * Every product is rounded to f32 in the order written, as ggml's and
 * gguf-py's dequantizers do, so the results match them bit for bit. */
#ifndef PW_MODEL_DEQUANT_H
#define PW_MODEL_DEQUANT_H

#include "piecewise_llm.h"

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

/* Expands n elements of any weight type (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
 * Q5_0, Q5_1, Q2_K..Q6_K) to f32. n must be a multiple of the type's block
 * size. */
pw_status pw_dequantize(pw_dtype type, const void *src, float *dst, int64_t n);
/* The inverse. F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 use ggml's
 * reference quantizers (quantize_row_*_ref), so files written by the tests'
 * GGUF writer hold what llama.cpp would have written. The K-quants use a
 * simpler one-pass quantizer (per-group range, scales rounded to the
 * nearest code) instead of ggml's iterative scale search: its blocks are
 * valid and decode to within a quantization step of the input, but differ
 * from llama-quantize's. */
pw_status pw_quantize(pw_dtype type, const float *src, void *dst, int64_t n);

#endif
