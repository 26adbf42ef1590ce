// The SIMD vocabulary of the kernels (kernels.cpp, the block formats): GCC/clang vector extensions, which compile
// to SSE2 natively and to wasm simd128 (-msimd128), plus the few operations that have no portable spelling,
// written once per target here. The relaxed-SIMD wasm build (-mrelaxed-simd, clang 16: __wasm_relaxed_simd__)
// spells some of them with relaxed instructions; each such operation says what it computes there.
#pragma once

#include <cstdint>

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

// Before a loop whose body must stay one iteration: clang would otherwise unroll it and hoist the next iteration's
// loads, keeping more vectors live than V8 has registers (it then spills them to the stack inside the loop).
#if defined(__clang__)
#define GPT2_NO_UNROLL _Pragma("clang loop unroll(disable)")
#else
#define GPT2_NO_UNROLL
#endif

namespace gpt2 {
namespace simd {

typedef float f32x4 __attribute__((vector_size(16)));
typedef int8_t i8x16 __attribute__((vector_size(16)));
typedef uint8_t u8x16 __attribute__((vector_size(16)));
typedef int16_t i16x8 __attribute__((vector_size(16)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef uint32_t u32x4 __attribute__((vector_size(16)));
typedef int16_t i16x4 __attribute__((vector_size(8)));
typedef int8_t i8x8 __attribute__((vector_size(8)));
typedef uint8_t u8x8 __attribute__((vector_size(8)));

// memcpy loads/stores: no alignment requirement, compiled to movups / v128.load
template <typename V, typename T>
inline V load(const T* p) {
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
inline f32x4 load4(const float* p) { return load<f32x4>(p); }
// *p in all 4 lanes: one v128.load32_splat in wasm (clang 16 otherwise builds some splats from lane inserts).
inline f32x4 load_splat(const float* p) {
#if defined(__wasm_simd128__)
    return (f32x4)wasm_v128_load32_splat(p);
#else
    return f32x4{*p, *p, *p, *p};
#endif
}
inline void store4(float* p, f32x4 v) { __builtin_memcpy(p, &v, sizeof v); }

// a where mask is set, else b, per lane (mask lanes all ones or all zeros, as a comparison gives them).
inline f32x4 select(i32x4 mask, f32x4 a, f32x4 b) { return (f32x4)((mask & (i32x4)a) | (~mask & (i32x4)b)); }

// acc + a * b per lane. The relaxed-SIMD build uses f32x4.relaxed_madd, which the engine computes fused (one
// rounding) where the CPU has FMA and as a multiply then an add where it has not: the same on every call on one
// machine, so the kernels' bit-identities hold within that build. Elsewhere a multiply then an add
// (-ffp-contract=off keeps the compiler from fusing some of them).
inline f32x4 mul_add(f32x4 a, f32x4 b, f32x4 acc) {
#if defined(__wasm_relaxed_simd__)
    return (f32x4)__builtin_wasm_relaxed_madd_f32x4((v128_t)a, (v128_t)b, (v128_t)acc);
#else
    return acc + a * b;
#endif
}

#if defined(__wasm_relaxed_simd__)
// acc + per 32-bit lane the sum of the products a[i] * b[i] of its 4 bytes, for signed bytes a and bytes b in
// 0..127: i32x4.relaxed_dot_i8x16_i7x16_add_s, exact for such b (for a b above 127 the engine may take it as
// signed or unsigned). Relaxed-SIMD build only: SIMD128 has no 8-bit dot product.
inline i32x4 dot_i8_u7(i8x16 a, u8x16 b, i32x4 acc) {
    return (i32x4)__builtin_wasm_relaxed_dot_i8x16_i7x16_add_s_i32x4((v128_t)a, (v128_t)b, (v128_t)acc);
}
// lo's 8 lanes then hi's 8 narrowed to bytes (values in -128..127, so none saturates): i8x16.narrow_i16x8_s.
inline i8x16 narrow(i16x8 lo, i16x8 hi) { return (i8x16)wasm_i8x16_narrow_i16x8((v128_t)lo, (v128_t)hi); }
#endif

// Sum of products of adjacent int16 lane pairs into int32 lanes: i32x4.dot_i16x8_s in wasm, pmaddwd in SSE2.
// Exact as long as the two products of a pair add up within int32.
inline i32x4 madd(i16x8 a, i16x8 b) {
#if defined(__wasm_simd128__)
    return (i32x4)wasm_i32x4_dot_i16x8((v128_t)a, (v128_t)b);
#elif defined(__SSE2__)
    return (i32x4)_mm_madd_epi16((__m128i)a, (__m128i)b);
#else
    const i16x4 ae = __builtin_shufflevector(a, a, 0, 2, 4, 6), ao = __builtin_shufflevector(a, a, 1, 3, 5, 7);
    const i16x4 be = __builtin_shufflevector(b, b, 0, 2, 4, 6), bo = __builtin_shufflevector(b, b, 1, 3, 5, 7);
    return __builtin_convertvector(ae, i32x4) * __builtin_convertvector(be, i32x4) +
           __builtin_convertvector(ao, i32x4) * __builtin_convertvector(bo, i32x4);
#endif
}

// lo's 4 lanes then hi's 4 narrowed to int16 with saturation (exact for values in -32768..32767):
// i16x8.narrow_i32x4_s in wasm, packssdw in SSE2.
inline i16x8 narrow_i32(i32x4 lo, i32x4 hi) {
#if defined(__wasm_simd128__)
    return (i16x8)wasm_i16x8_narrow_i32x4((v128_t)lo, (v128_t)hi);
#elif defined(__SSE2__)
    return (i16x8)_mm_packs_epi32((__m128i)lo, (__m128i)hi);
#else
    const i32x4 top = {32767, 32767, 32767, 32767}, bottom = {-32768, -32768, -32768, -32768};
    lo = lo > top ? top : lo < bottom ? bottom : lo;
    hi = hi > top ? top : hi < bottom ? bottom : hi;
    return __builtin_convertvector(__builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7), i16x8);
#endif
}

// 8 bytes widened to 8 int16 lanes, zero-extended (u8) or sign-extended (i8): one v128.load8x8_{u,s} in wasm;
// natively the bytes are duplicated into both halves of each lane (punpcklbw) and shifted right (psrlw / psraw),
// which compilers otherwise turn into long shuffle chains.
inline i16x8 load8x8_u(const uint8_t* p) {
#if defined(__wasm_simd128__)
    return (i16x8)wasm_u16x8_load8x8(p);
#else
    const u8x8 v = load<u8x8>(p);
    return (i16x8)((u16x8)__builtin_shufflevector(v, v, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15) >> 8);
#endif
}
inline i16x8 load8x8_s(const int8_t* p) {
#if defined(__wasm_simd128__)
    return (i16x8)wasm_i16x8_load8x8(p);
#else
    const i8x8 v = load<i8x8>(p);
    return (i16x8)__builtin_shufflevector(v, v, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15) >> 8;
#endif
}

// 16 bytes widened to 16 int16 lanes, zero-extended: bytes 0..7 into *lo, 8..15 into *hi (punpck{l,h}bw with
// zero natively: GCC recognizes only the plain interleave pattern, and scalarizes any other; in wasm
// i16x8.extend_{low,high}_u8x16).
inline void widen_u8(u8x16 v, i16x8* lo, i16x8* hi) {
#if defined(__wasm_simd128__)
    *lo = (i16x8)wasm_u16x8_extend_low_u8x16((v128_t)v);
    *hi = (i16x8)wasm_u16x8_extend_high_u8x16((v128_t)v);
#else
    const u8x16 zero = {0};
    *lo = (i16x8)__builtin_shufflevector(v, zero, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    *hi = (i16x8)__builtin_shufflevector(v, zero, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
#endif
}

// The sums of the four vectors' lanes: {sum(a), sum(b), sum(c), sum(d)} (a 4x4 transpose folded into adds).
inline i32x4 sum_lanes4(i32x4 a, i32x4 b, i32x4 c, i32x4 d) {
    const i32x4 ab = __builtin_shufflevector(a, b, 0, 4, 1, 5) + __builtin_shufflevector(a, b, 2, 6, 3, 7);
    const i32x4 cd = __builtin_shufflevector(c, d, 0, 4, 1, 5) + __builtin_shufflevector(c, d, 2, 6, 3, 7);
    return __builtin_shufflevector(ab, cd, 0, 1, 4, 5) + __builtin_shufflevector(ab, cd, 2, 3, 6, 7);
}

// 8 IEEE halves as fp32, exactly: values 0..3 into *lo, 4..7 into *hi. The halves are rewritten in 16-bit lanes
// as fp32 bit patterns with their exponent left unbiased (sign | 000eeeee | mantissa << 13), which one multiply by
// 2^112 rebiases for normal and subnormal halves alike; inf and nan get the all-ones exponent instead.
// (A subnormal half is a subnormal float before that multiply, which x86 runs in slow microcode: rare in weights.)
inline void widen_halves8(i16x8 h, f32x4* lo, f32x4* hi) {
    const i16x8 special = (h & 0x7C00) == 0x7C00;
    const i16x8 high = ((h >> 3) & int16_t(0x8FFF)) | (special & 0x7F80);
    const i16x8 low = h << 13;
    *lo = (f32x4)__builtin_shufflevector(low, high, 0, 8, 1, 9, 2, 10, 3, 11) * 0x1p112f;
    *hi = (f32x4)__builtin_shufflevector(low, high, 4, 12, 5, 13, 6, 14, 7, 15) * 0x1p112f;
}
inline f32x4 load_halves4(const uint16_t* p) {
    const i16x4 h = load<i16x4>(p);
    f32x4 lo, unused;
    widen_halves8(__builtin_shufflevector(h, h, 0, 1, 2, 3, 0, 1, 2, 3), &lo, &unused);
    return lo;
}

}  // namespace simd
}  // namespace gpt2
