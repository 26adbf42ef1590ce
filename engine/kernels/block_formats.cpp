#include "kernels/block_formats.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/block_formats_k.h"
#include "kernels/block_formats_legacy.h"
#include "kernels/simd.h"

namespace gpt2 {

const BlockFormat* block_format(WeightFormat format) {
    switch (format) {
        case WeightFormat::fp32:
        case WeightFormat::int8: return nullptr;
        case WeightFormat::f16: return &kF16;
        case WeightFormat::q8_0: return &kQ8_0;
        case WeightFormat::q4_0: return &kQ4_0;
        case WeightFormat::q4_1: return &kQ4_1;
        case WeightFormat::q5_0: return &kQ5_0;
        case WeightFormat::q5_1: return &kQ5_1;
        case WeightFormat::q4_k: return &kQ4_K;
        case WeightFormat::q5_k: return &kQ5_K;
        case WeightFormat::q6_k: return &kQ6_K;
    }
    return nullptr;
}

namespace {

using simd::f32x4;
using simd::i32x4;

constexpr int kLanes = 4;
constexpr int kVectors = kActivationBlock / kLanes;  // f32x4 per block

inline f32x4 abs4(f32x4 v) { return (f32x4)((i32x4)v & 0x7FFFFFFF); }
inline f32x4 max4(f32x4 a, f32x4 b) {
    const i32x4 a_larger = a > b;
    return (f32x4)(((i32x4)a & a_larger) | ((i32x4)b & ~a_larger));
}

// One block of 32 values: its scale, int16 values and their sum (see block_formats.h).
void quantize_block(const float* x, int16_t* q, float* scale, int32_t* sum) {
    f32x4 v[kVectors], max_abs = {0, 0, 0, 0};
    i32x4 finite = {-1, -1, -1, -1};
    for (int i = 0; i < kVectors; i++) {
        v[i] = simd::load4(x + kLanes * i);
        const f32x4 a = abs4(v[i]);
        finite &= a <= FLT_MAX;  // false for NaN and Inf
        max_abs = max4(max_abs, a);
    }
    const float m = std::fmax(std::fmax(max_abs[0], max_abs[1]), std::fmax(max_abs[2], max_abs[3]));
    const bool all_finite = finite[0] & finite[1] & finite[2] & finite[3];
    if (!all_finite || m == 0.0f) {
        *scale = all_finite ? 0.0f : NAN;
        *sum = 0;
        std::memset(q, 0, sizeof(int16_t) * kActivationBlock);
        return;
    }
    const float d = m / 127.0f;
    i32x4 total = {0, 0, 0, 0};
    for (int i = 0; i < kVectors; i++) {
        // round half away from zero: truncate, then step away from zero where the dropped fraction is >= 1/2
        // (exact: |x / d| <= 127 + rounding, far below 2^23)
        const f32x4 y = v[i] / d;
        i32x4 r = __builtin_convertvector(y, i32x4);
        const f32x4 fraction = y - __builtin_convertvector(r, f32x4);
        r = r - (fraction >= 0.5f) + (fraction <= -0.5f);  // comparisons are -1 where true
        r = r > 127 ? 127 : r;
        r = r < -127 ? -127 : r;
        total += r;
        const simd::i16x4 narrow = __builtin_convertvector(r, simd::i16x4);
        std::memcpy(q + kLanes * i, &narrow, sizeof narrow);
    }
    *scale = d;
    *sum = (total[0] + total[1]) + (total[2] + total[3]);
}

}  // namespace

void quantize_activation_blocks(const LinearInput& in, int n_tok, int n_in) {
    const int n_blocks = n_in / kActivationBlock;
    for (int t = 0; t < n_tok; t++)
        for (int b = 0; b < n_blocks; b++) {
            const size_t at = size_t(t) * n_in + size_t(b) * kActivationBlock, block = size_t(t) * n_blocks + b;
            quantize_block(in.x + at, in.xq + at, in.xq_scale + block, in.xq_sum + block);
        }
}

#if defined(__wasm_relaxed_simd__)
namespace {

using simd::i16x8;
using simd::i8x16;

// Each token row of xq (n_tok, n_in) rewritten in place as n_in bytes, block by block (every block's 32 int16 are
// read before its 32 bytes, which lie at or before them, are written): in order, or in regroup_nibbles's order
// (block_formats_legacy.cpp: values 0, 16, 1, 17, .., 7, 23, then 8, 24, .., 15, 31).
template <bool kNibblePairs>
void activations_to_bytes(int16_t* xq, int n_tok, int n_in) {
    for (int t = 0; t < n_tok; t++) {
        int16_t* row = xq + size_t(t) * n_in;
        int8_t* bytes = reinterpret_cast<int8_t*>(row);
        for (int i = 0; i < n_in; i += kActivationBlock) {
            const i16x8 v0 = simd::load<i16x8>(row + i), v1 = simd::load<i16x8>(row + i + 8);
            const i16x8 v2 = simd::load<i16x8>(row + i + 16), v3 = simd::load<i16x8>(row + i + 24);
            i8x16 a, b;
            if constexpr (kNibblePairs) {
                const i8x16 low = simd::narrow(v0, v2),
                            high = simd::narrow(v1, v3);  // values 0..7 16..23, 8..15 24..31
                a = __builtin_shufflevector(low, low, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
                b = __builtin_shufflevector(high, high, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
            } else {
                a = simd::narrow(v0, v1), b = simd::narrow(v2, v3);
            }
            std::memcpy(bytes + i, &a, sizeof a);
            std::memcpy(bytes + i + 16, &b, sizeof b);
        }
    }
}

// Each block of 32 int16 of xq (n_tok, n_in) rewritten in place as its 64 bytes: the values' low 7 bits
// (q & 127, in order) then their signs (1 where q < 0), so that q = low - 128 * sign with both in 0..127, the
// operands an 8-bit dot product against signed weights takes exactly.
void activations_to_low_and_sign(int16_t* xq, int n_tok, int n_in) {
    for (size_t i = 0; i < size_t(n_tok) * n_in; i += kActivationBlock) {
        int16_t* block = xq + i;
        const i8x16 a = simd::narrow(simd::load<i16x8>(block), simd::load<i16x8>(block + 8));
        const i8x16 b = simd::narrow(simd::load<i16x8>(block + 16), simd::load<i16x8>(block + 24));
        const i8x16 low_a = a & 127, low_b = b & 127, sign_a = (a < 0) & 1, sign_b = (b < 0) & 1;
        int8_t* bytes = reinterpret_cast<int8_t*>(block);
        std::memcpy(bytes, &low_a, sizeof low_a);
        std::memcpy(bytes + 16, &low_b, sizeof low_b);
        std::memcpy(bytes + 32, &sign_a, sizeof sign_a);
        std::memcpy(bytes + 48, &sign_b, sizeof sign_b);
    }
}

// After activations_to_bytes<false>: behind each token row's n_in bytes, int32 per block of 32 the sum of its first
// 16 values (Q6_K's sub-blocks; the second half's is the block sum less it).
void write_first_half_sums(int16_t* xq, int n_tok, int n_in) {
    for (int t = 0; t < n_tok; t++) {
        const int8_t* bytes = reinterpret_cast<const int8_t*>(xq + size_t(t) * n_in);
        uint8_t* sums = reinterpret_cast<uint8_t*>(xq + size_t(t) * n_in) + n_in;
        for (int b = 0; b < n_in / kActivationBlock; b++) {
            int32_t sum = 0;
            for (int i = 0; i < 16; i++) sum += bytes[b * kActivationBlock + i];
            std::memcpy(sums + 4 * size_t(b), &sum, sizeof sum);
        }
    }
}

}  // namespace
#else
namespace {

// Each block of 32 values of xq (n_tok, n_in): values 0..7 and 24..31 times 256, 8..15 times 16 (at most
// 127 * 256 = 32512 in magnitude), the scales dot_nibbles (block_formats_legacy.cpp) pairs with its masked nibbles.
void scale_for_nibble_masks(int16_t* xq, int n_tok, int n_in) {
    for (size_t i = 0; i < size_t(n_tok) * n_in; i += kActivationBlock) {
        int16_t* block = xq + i;
        for (int k = 0; k < 8; k++) {
            block[k] = int16_t(block[k] * 256);
            block[8 + k] = int16_t(block[8 + k] * 16);
            block[24 + k] = int16_t(block[24 + k] * 256);
        }
    }
}

}  // namespace
#endif

void prepare_block_activations(WeightFormat format, const LinearInput& in, int n_tok, int n_in) {
    quantize_activation_blocks(in, n_tok, n_in);
#if defined(__wasm_relaxed_simd__)
    switch (format) {
        case WeightFormat::q4_0:
        case WeightFormat::q4_1: activations_to_bytes<true>(in.xq, n_tok, n_in); break;
        case WeightFormat::q5_0:
        case WeightFormat::q5_1:
        case WeightFormat::q4_k:
        case WeightFormat::q5_k: activations_to_bytes<false>(in.xq, n_tok, n_in); break;
        case WeightFormat::q8_0: activations_to_low_and_sign(in.xq, n_tok, n_in); break;
        case WeightFormat::q6_k:
            if (n_tok > 1) {  // the batched kernel's form; one token keeps int16
                activations_to_bytes<false>(in.xq, n_tok, n_in);
                write_first_half_sums(in.xq, n_tok, n_in);
            }
            break;
        default: break;
    }
#else
    if (format == WeightFormat::q4_0 || format == WeightFormat::q4_1) scale_for_nibble_masks(in.xq, n_tok, n_in);
#endif
}

}  // namespace gpt2
