#include "kernels.h"

#include <cstddef>
#include <cstdint>

namespace gpt2 {

namespace {

typedef float f32x4 __attribute__((vector_size(16)));

// memcpy loads/stores: no alignment requirement, compiled to movups / v128.load
inline f32x4 load4(const float* p) {
    f32x4 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
inline void store4(float* p, f32x4 v) { __builtin_memcpy(p, &v, sizeof v); }

// 8 weights as two f32x4: w[0..3] and w[4..7]
inline void load8(const float* p, f32x4* lo, f32x4* hi) {
    *lo = load4(p);
    *hi = load4(p + 4);
}

// int8 weights: sign-extended and converted to f32 lanes (exact). The same source for SSE2 and simd128: i8 -> i16
// by __builtin_convertvector (i16x8.load8x8_s in wasm), i16 -> i32 by duplicating each lane and an arithmetic
// shift (punpck + psrad; a convertvector here is scalarized by both compilers).
typedef int8_t i8x8 __attribute__((vector_size(8)));
typedef int16_t i16x8 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
inline void load8(const int8_t* p, f32x4* lo, f32x4* hi) {
    i8x8 v;
    __builtin_memcpy(&v, p, sizeof v);
    const i16x8 h = __builtin_convertvector(v, i16x8);
    const i32x4 a = (i32x4)__builtin_shufflevector(h, h, 0, 0, 1, 1, 2, 2, 3, 3) >> 16;
    const i32x4 b = (i32x4)__builtin_shufflevector(h, h, 4, 4, 5, 5, 6, 6, 7, 7) >> 16;
    *lo = __builtin_convertvector(a, f32x4);
    *hi = __builtin_convertvector(b, f32x4);
}

// The one place where a dot product's partial sums are combined (see the contract in kernels.h).
template <typename W>
inline float finish_dot(f32x4 acc0, f32x4 acc1, const float* x, const W* w, int n8, int n) {
    f32x4 s = acc0 + acc1;
    float r = (s[0] + s[1]) + (s[2] + s[3]);
    for (int i = n8; i < n; i++) r += x[i] * float(w[i]);
    return r;
}

// scale: per-row scales of int8 weights (null for fp32), applied to the finished dot product before the bias
inline float with_bias(float v, const float* scale, const float* bias, int o) {
    if (scale) v = v * scale[o];
    return bias ? v + bias[o] : v;
}

template <typename W>
float dot_impl(const float* x, const W* w, int n) {
    const int n8 = n & ~7;
    f32x4 acc0 = {0, 0, 0, 0}, acc1 = {0, 0, 0, 0};
    for (int i = 0; i < n8; i += 8) {
        f32x4 wa, wb;
        load8(w + i, &wa, &wb);
        acc0 += load4(x + i) * wa;
        acc1 += load4(x + i + 4) * wb;
    }
    return finish_dot(acc0, acc1, x, w, n8, n);
}

template <typename W>
void gemv_impl(float* out, const float* x, const W* w, const float* scale, const float* bias, int n_in, int n_out) {
    const int n8 = n_in & ~7;
    int o = 0;
    // 4 output rows at a time: 8 independent accumulator chains, x loaded once per chunk
    for (; o + 4 <= n_out; o += 4) {
        const W* w0 = w + (size_t)o * n_in;
        const W* w1 = w0 + n_in;
        const W* w2 = w1 + n_in;
        const W* w3 = w2 + n_in;
        f32x4 a00 = {0, 0, 0, 0}, a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        for (int i = 0; i < n8; i += 8) {
            const f32x4 x0 = load4(x + i), x1 = load4(x + i + 4);
            f32x4 wa, wb;
            load8(w0 + i, &wa, &wb);
            a00 += x0 * wa;
            a01 += x1 * wb;
            load8(w1 + i, &wa, &wb);
            a10 += x0 * wa;
            a11 += x1 * wb;
            load8(w2 + i, &wa, &wb);
            a20 += x0 * wa;
            a21 += x1 * wb;
            load8(w3 + i, &wa, &wb);
            a30 += x0 * wa;
            a31 += x1 * wb;
        }
        out[o + 0] = with_bias(finish_dot(a00, a01, x, w0, n8, n_in), scale, bias, o + 0);
        out[o + 1] = with_bias(finish_dot(a10, a11, x, w1, n8, n_in), scale, bias, o + 1);
        out[o + 2] = with_bias(finish_dot(a20, a21, x, w2, n8, n_in), scale, bias, o + 2);
        out[o + 3] = with_bias(finish_dot(a30, a31, x, w3, n8, n_in), scale, bias, o + 3);
    }
    for (; o < n_out; o++) out[o] = with_bias(dot_impl(x, w + (size_t)o * n_in, n_in), scale, bias, o);
}

template <typename W>
void gemm_impl(float* out, const float* x, const W* w, const float* scale, const float* bias, int n_tok, int n_in,
               int n_out) {
    const int n8 = n_in & ~7;
    // A block of token rows stays in L2 while the weight rows stream past it once per block; each pair of
    // weight rows is reused from L1 for every token pair in the block.
    const int kTokenBlock = 64;
    for (int t0 = 0; t0 < n_tok; t0 += kTokenBlock) {
        const int t1 = t0 + kTokenBlock < n_tok ? t0 + kTokenBlock : n_tok;
        int o = 0;
        for (; o + 2 <= n_out; o += 2) {
            const W* w0 = w + (size_t)o * n_in;
            const W* w1 = w0 + n_in;
            int t = t0;
            for (; t + 2 <= t1; t += 2) {
                const float* x0 = x + (size_t)t * n_in;
                const float* x1 = x0 + n_in;
                // accumulator a<token><row><half>
                f32x4 a000 = {0, 0, 0, 0}, a001 = a000, a010 = a000, a011 = a000;
                f32x4 a100 = a000, a101 = a000, a110 = a000, a111 = a000;
                for (int i = 0; i < n8; i += 8) {
                    f32x4 w0a, w0b, w1a, w1b;
                    load8(w0 + i, &w0a, &w0b);
                    load8(w1 + i, &w1a, &w1b);
                    const f32x4 x0a = load4(x0 + i), x0b = load4(x0 + i + 4);
                    a000 += x0a * w0a;
                    a001 += x0b * w0b;
                    a010 += x0a * w1a;
                    a011 += x0b * w1b;
                    const f32x4 x1a = load4(x1 + i), x1b = load4(x1 + i + 4);
                    a100 += x1a * w0a;
                    a101 += x1b * w0b;
                    a110 += x1a * w1a;
                    a111 += x1b * w1b;
                }
                float* out0 = out + (size_t)t * n_out;
                float* out1 = out0 + n_out;
                out0[o] = with_bias(finish_dot(a000, a001, x0, w0, n8, n_in), scale, bias, o);
                out0[o + 1] = with_bias(finish_dot(a010, a011, x0, w1, n8, n_in), scale, bias, o + 1);
                out1[o] = with_bias(finish_dot(a100, a101, x1, w0, n8, n_in), scale, bias, o);
                out1[o + 1] = with_bias(finish_dot(a110, a111, x1, w1, n8, n_in), scale, bias, o + 1);
            }
            for (; t < t1; t++) {
                const float* xt = x + (size_t)t * n_in;
                out[(size_t)t * n_out + o] = with_bias(dot_impl(xt, w0, n_in), scale, bias, o);
                out[(size_t)t * n_out + o + 1] = with_bias(dot_impl(xt, w1, n_in), scale, bias, o + 1);
            }
        }
        for (; o < n_out; o++)
            for (int t = t0; t < t1; t++)
                out[(size_t)t * n_out + o] =
                    with_bias(dot_impl(x + (size_t)t * n_in, w + (size_t)o * n_in, n_in), scale, bias, o);
    }
}

}  // namespace

float dot(const float* x, const float* w, int n) { return dot_impl(x, w, n); }

void gemv(float* out, const float* x, const float* w, const float* bias, int n_in, int n_out) {
    gemv_impl<float>(out, x, w, nullptr, bias, n_in, n_out);
}

void gemm(float* out, const float* x, const float* w, const float* bias, int n_tok, int n_in, int n_out) {
    gemm_impl<float>(out, x, w, nullptr, bias, n_tok, n_in, n_out);
}

void gemv_q8(float* out, const float* x, const int8_t* w, const float* scale, const float* bias, int n_in,
             int n_out) {
    gemv_impl<int8_t>(out, x, w, scale, bias, n_in, n_out);
}

void gemm_q8(float* out, const float* x, const int8_t* w, const float* scale, const float* bias, int n_tok, int n_in,
             int n_out) {
    gemm_impl<int8_t>(out, x, w, scale, bias, n_tok, n_in, n_out);
}

void axpy(float* y, float a, const float* x, int n) {
    const int n4 = n & ~3;
    const f32x4 av = {a, a, a, a};
    for (int i = 0; i < n4; i += 4) store4(y + i, load4(y + i) + av * load4(x + i));
    for (int i = n4; i < n; i++) y[i] += a * x[i];
}

}  // namespace gpt2
