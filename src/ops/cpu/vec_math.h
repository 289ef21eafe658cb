/* Eight-lane float helpers shared by the kernels (private to this folder).
 *
 * Everything here is lane-wise IEEE multiplies, adds, compares and exact
 * conversions (the build is ISO C, so the compiler never contracts a * b + c
 * on its own), so a lane's result depends on that lane's input alone and
 * every instruction-set build returns the same bits. That is what lets a
 * kernel feed a partial last vector through the same code as the others
 * and stay batch-invariant. Fused multiply-adds are written out
 * (pw_v8_madd, pw_madd) and are one rounding in every build (isa.h). */
#ifndef PW_KERNELS_VEC_MATH_H
#define PW_KERNELS_VEC_MATH_H

#include <string.h>

#if defined(__FMA__) && defined(__AVX__)
#include <immintrin.h>
#endif

#define PW_VEC_LANES 8
typedef float pw_v8f __attribute__((vector_size(PW_VEC_LANES * sizeof(float))));
typedef int pw_v8i __attribute__((vector_size(PW_VEC_LANES * sizeof(int))));
/* Unaligned, so that one load is one instruction. */
typedef float pw_v8f_u __attribute__((vector_size(PW_VEC_LANES * sizeof(float)), aligned(4)));

#define PW_VEC_INLINE static inline __attribute__((always_inline))

/* Keeps a product from being fused into the add that uses it. ISO C mode
 * forbids contraction, but GCC 12 still forms fmaddsub from a*b + c*d*sign
 * patterns when FMA is enabled for the whole file (-march=native); an empty
 * asm makes the product an opaque register value. */
#if defined(__FMA__)
#define PW_NO_FUSE(v) __asm__("" : "+x"(v))
#else
#define PW_NO_FUSE(v) ((void)0)
#endif

/* A function built for the baseline ISA and for AVX2, picked at load time
 * (no fused multiply-adds in either, so both return the same bits). Under
 * ThreadSanitizer only the baseline is built: the clone resolver would run
 * before TSan initialises; with clang too (below). */
#if defined(__SANITIZE_THREAD__)
#define PW_AVX2_CLONES
#elif defined(__clang__)
/* clang (14) names the resolver f.ifunc and emits no symbol f that callers
 * in other files (fused.c, ops_host.c) can link to, so clang builds (the
 * fuzz builds) get the baseline only: the same bits, just slower. */
#define PW_AVX2_CLONES
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PW_AVX2_CLONES
#endif
#endif
#ifndef PW_AVX2_CLONES
#define PW_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif

/* Lanes of a where mask is set (-1), of b elsewhere. */
PW_VEC_INLINE pw_v8f pw_v8_select(pw_v8i mask, pw_v8f a, pw_v8f b) {
    pw_v8i ai, bi;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    pw_v8i r = (ai & mask) | (bi & ~mask);
    pw_v8f out;
    memcpy(&out, &r, sizeof out);
    return out;
}

PW_VEC_INLINE pw_v8f pw_v8_splat(float v) { return (pw_v8f){0} + v; }

/* a * b + c rounded once, lane-wise: the FMA instruction where the file is
 * built with -mfma, else fmaf per lane (correctly rounded, so the same
 * bits, only slower). */
PW_VEC_INLINE pw_v8f pw_v8_madd(pw_v8f a, pw_v8f b, pw_v8f c) {
#if defined(__FMA__) && defined(__AVX__)
    return (pw_v8f)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    pw_v8f r;
    for (int i = 0; i < PW_VEC_LANES; i++) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    return r;
#endif
}

/* a * b + c rounded once (the scalar twin of pw_v8_madd). */
PW_VEC_INLINE float pw_madd(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

/* exp(x): Cephes' expf (range reduction by ln 2 in two parts, a degree-5
 * polynomial, scaling by 2^n through the exponent bits). Relative error
 * about 2 ulp. Below -87.3 (and -inf) the result is 0, above 88.37 (and
 * +inf) it is +inf; NaN stays NaN. */
PW_VEC_INLINE pw_v8f pw_v8_exp(pw_v8f x) {
    const float lo = -87.3f, hi = 88.3762626647949f;
    pw_v8i underflow = x < lo, overflow = x > hi;
    x = pw_v8_select(underflow, pw_v8_splat(lo), x);
    x = pw_v8_select(overflow, pw_v8_splat(hi), x);
    pw_v8f fx = x * 1.44269504088896341f + 0.5f;
    pw_v8i n = __builtin_convertvector(fx, pw_v8i); /* truncates toward zero */
    pw_v8f nf = __builtin_convertvector(n, pw_v8f);
    n = n + (nf > fx); /* floor for negative fx: comparison lanes are -1 where true */
    nf = __builtin_convertvector(n, pw_v8f);
    x = x - nf * 0.693359375f;
    x = x - nf * -2.12194440e-4f;
    pw_v8f z = x * x;
    pw_v8f y = 1.9875691500e-4f * x + 1.3981999507e-3f;
    y = y * x + 8.3334519073e-3f;
    y = y * x + 4.1665795894e-2f;
    y = y * x + 1.6666665459e-1f;
    y = y * x + 5.0000001201e-1f;
    y = y * z + x + 1.0f;
    pw_v8i bits = (n + 127) << 23;
    pw_v8f scale;
    memcpy(&scale, &bits, sizeof scale);
    y = y * scale;
    y = pw_v8_select(underflow, (pw_v8f){0}, y);
    return pw_v8_select(overflow, pw_v8_splat(__builtin_inff()), y);
}

#endif
