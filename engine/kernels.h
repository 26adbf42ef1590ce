// Hand-written SIMD hot loops, written with GCC/clang vector extensions so the same source vectorizes to SSE
// natively and to wasm simd128 (-msimd128).
//
// Bit-exactness contract: every output element of gemv() and gemm() (and every dot()) is reduced in exactly
// the same order: two f32x4 accumulators over chunks of 8 (acc0 takes elements 8k..8k+3, acc1 takes
// 8k+4..8k+7), then acc0 + acc1, then ((l0 + l1) + (l2 + l3)), then the scalar tail n8..n-1 in order, then
// + bias. So one token through gemv() equals the same token's row of a batched gemm(), bit for bit, which
// makes cached decoding identical to uncached recomputation. (Build with -ffp-contract=off so the compiler
// cannot fuse some of the multiply-adds and not others.)
#pragma once

#include <cstdint>

namespace gpt2 {

// sum_i x[i] * w[i]
float dot(const float* x, const float* w, int n);

// out[o] = dot(x, w + o * n_in, n_in) + bias[o] for o < n_out; w is row-major [n_out][n_in]; bias may be null.
void gemv(float* out, const float* x, const float* w, const float* bias, int n_in, int n_out);

// Batched gemv: out[t][o] for t < n_tok, x is (n_tok, n_in), out is (n_tok, n_out). Register-tiled 2 tokens x
// 2 outputs and cache-blocked over tokens; each element bit-identical to gemv().
void gemm(float* out, const float* x, const float* w, const float* bias, int n_tok, int n_in, int n_out);

// int8 weights with per-row scales: out[o] = dot(x, float(w[o][.])) * scale[o] + bias[o], the dot product
// reduced in exactly the order above (each int8 is converted to f32 exactly, so only the weights differ from
// the fp32 kernels). gemm_q8 rows are bit-identical to gemv_q8.
void gemv_q8(float* out, const float* x, const int8_t* w, const float* scale, const float* bias, int n_in,
             int n_out);
void gemm_q8(float* out, const float* x, const int8_t* w, const float* scale, const float* bias, int n_tok, int n_in,
             int n_out);

// y[i] += a * x[i]
void axpy(float* y, float a, const float* x, int n);

}  // namespace gpt2
