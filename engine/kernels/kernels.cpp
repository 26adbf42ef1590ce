#include "kernels/kernels.h"

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/simd.h"

namespace gpt2 {

namespace {

using simd::f32x4;
using simd::i16x8;
using simd::i32x4;
using simd::i8x16;
using simd::load;
using simd::load4;
using simd::madd;
using simd::mul_add;
using simd::select;
using simd::store4;

// ---- layout ----

constexpr int kChunkF32 = 8;  // columns per panel chunk: one iteration of the fp32 dot product
constexpr int kChunkQ8 = 16;  // one v128 of int8 weights

template <int K, typename T>
void pack_panels_impl(T* w, int n_out, int n_in, T* scratch) {
    const size_t row = size_t(n_in), nk = size_t(n_in - n_in % K), tail = row - nk;
    for (int p = 0; p + kPanelRows <= n_out; p += kPanelRows) {
        T* panel = w + size_t(p) * row;
        std::memcpy(scratch, panel, sizeof(T) * kPanelRows * row);
        T* dst = panel;
        for (size_t c = 0; c < nk; c += K)
            for (int r = 0; r < kPanelRows; r++, dst += K) std::memcpy(dst, scratch + r * row + c, sizeof(T) * K);
        for (int r = 0; r < kPanelRows; r++, dst += tail) std::memcpy(dst, scratch + r * row + nk, sizeof(T) * tail);
    }
}

template <int K, typename T>
void unpack_row_impl(T* out, const T* w, int n_out, int n_in, int row) {
    const size_t n = size_t(n_in), nk = size_t(n_in - n_in % K), tail = n - nk;
    const int full_rows = n_out - n_out % kPanelRows;
    if (row >= full_rows) {
        std::memcpy(out, w + size_t(row) * n, sizeof(T) * n);
        return;
    }
    const T* panel = w + size_t(row - row % kPanelRows) * n;
    const size_t r = size_t(row % kPanelRows);
    for (size_t c = 0; c < nk; c += K) std::memcpy(out + c, panel + c * kPanelRows + r * K, sizeof(T) * K);
    std::memcpy(out + nk, panel + kPanelRows * nk + r * tail, sizeof(T) * tail);
}

// ---- fp32 ----

// The one place where a dot product's partial sums are combined (see the contract in kernels.h); x_tail and
// w_tail are the n_tail elements after the last full chunk of 8.
inline float finish_dot(f32x4 acc0, f32x4 acc1, const float* x_tail, const float* w_tail, int n_tail) {
    f32x4 s = acc0 + acc1;
    float r = (s[0] + s[1]) + (s[2] + s[3]);
    for (int i = 0; i < n_tail; i++) r += x_tail[i] * w_tail[i];
    return r;
}

inline float with_bias(float v, const float* bias, int o) { return bias ? v + bias[o] : v; }

float dot_impl(const float* x, const float* w, int n) {
    const int n8 = n & ~7;
    f32x4 acc0 = {0, 0, 0, 0}, acc1 = {0, 0, 0, 0};
    for (int i = 0; i < n8; i += 8) {
        acc0 = mul_add(load4(x + i), load4(w + i), acc0);
        acc1 = mul_add(load4(x + i + 4), load4(w + i + 4), acc1);
    }
    return finish_dot(acc0, acc1, x + n8, w + n8, n - n8);
}

// The 4 rows of one panel against x: 8 independent accumulator chains, x loaded once per chunk, the panel
// read as one sequential stream.
inline void panel_dot(float out[kPanelRows], const float* x, const float* panel, int n_in) {
    const int n8 = n_in & ~7;
    const float* p = panel;
    f32x4 a00 = {0, 0, 0, 0}, a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    for (int i = 0; i < n8; i += 8, p += kPanelRows * kChunkF32) {
        const f32x4 x0 = load4(x + i), x1 = load4(x + i + 4);
        a00 = mul_add(x0, load4(p), a00);
        a01 = mul_add(x1, load4(p + 4), a01);
        a10 = mul_add(x0, load4(p + 8), a10);
        a11 = mul_add(x1, load4(p + 12), a11);
        a20 = mul_add(x0, load4(p + 16), a20);
        a21 = mul_add(x1, load4(p + 20), a21);
        a30 = mul_add(x0, load4(p + 24), a30);
        a31 = mul_add(x1, load4(p + 28), a31);
    }
    const int nt = n_in - n8;  // p now points at the rows' tails, nt values each
    out[0] = finish_dot(a00, a01, x + n8, p, nt);
    out[1] = finish_dot(a10, a11, x + n8, p + nt, nt);
    out[2] = finish_dot(a20, a21, x + n8, p + 2 * nt, nt);
    out[3] = finish_dot(a30, a31, x + n8, p + 3 * nt, nt);
}

// One pass of panel_dot_2: columns h..h + 3 of every chunk of the panel's 4 rows against token rows x0 and x1,
// added in chunk order into a[r] and b[r] (which it starts at zero).
inline void panel_half_pass_2(f32x4 a[kPanelRows], f32x4 b[kPanelRows], const float* x0, const float* x1,
                              const float* panel, int h, int n8) {
    f32x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    const float* p = panel + h;
    GPT2_NO_UNROLL
    for (int i = h; i < n8; i += kChunkF32, p += kPanelRows * kChunkF32) {
        const f32x4 x = load4(x0 + i), y = load4(x1 + i);
        f32x4 w = load4(p);
        a0 = mul_add(x, w, a0);
        b0 = mul_add(y, w, b0);
        w = load4(p + kChunkF32);
        a1 = mul_add(x, w, a1);
        b1 = mul_add(y, w, b1);
        w = load4(p + 2 * kChunkF32);
        a2 = mul_add(x, w, a2);
        b2 = mul_add(y, w, b2);
        w = load4(p + 3 * kChunkF32);
        a3 = mul_add(x, w, a3);
        b3 = mul_add(y, w, b3);
    }
    a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
    b[0] = b0, b[1] = b1, b[2] = b2, b[3] = b3;
}

// Two token rows against one panel (the batched products' kernel): panel_dot's outputs for x0 and x1, bit for bit,
// each panel value loaded once for both. Every output keeps its two accumulators of the contract (kernels.h), the
// first 4 columns of each chunk and the last 4, each added in chunk order; they are computed in two passes over
// the panel, one per half of every chunk (the second reads the panel from L1), so that an iteration loads 6
// vectors for 8 accumulators and V8 keeps them all in its 16 vector registers. With both halves in one iteration
// it spilled accumulators to the stack inside the loop (measured in wasm: 4 tokens against a 3072 x 768 matrix
// 1.4x faster).
inline void panel_dot_2(float out0[kPanelRows], float out1[kPanelRows], const float* x0, const float* x1,
                        const float* panel, int n_in) {
    const int n8 = n_in & ~7;
    f32x4 a_first[kPanelRows], b_first[kPanelRows], a_last[kPanelRows], b_last[kPanelRows];
    panel_half_pass_2(a_first, b_first, x0, x1, panel, 0, n8);
    panel_half_pass_2(a_last, b_last, x0, x1, panel, 4, n8);
    const int nt = n_in - n8;
    const float* tails = panel + size_t(n8) * kPanelRows;  // each row's nt values
    for (int r = 0; r < kPanelRows; r++) {
        out0[r] = finish_dot(a_first[r], a_last[r], x0 + n8, tails + r * nt, nt);
        out1[r] = finish_dot(b_first[r], b_last[r], x1 + n8, tails + r * nt, nt);
    }
}

// ---- int8 ----

// 16 int8 weights sign-extended to int16: lanes 0..7 and 8..15. Spelled per target: i16x8.extend_{low,high}_i8x16_s
// in wasm; natively each byte is duplicated into both halves of a 16-bit lane and shifted right arithmetically
// (punpck + psraw), which compilers otherwise turn into long shuffle chains.
inline void widen(const int8_t* w, i16x8* lo, i16x8* hi) {
    const i8x16 v = load<i8x16>(w);
#if defined(__wasm_simd128__)
    *lo = (i16x8)wasm_i16x8_extend_low_i8x16((v128_t)v);
    *hi = (i16x8)wasm_i16x8_extend_high_i8x16((v128_t)v);
#else
    *lo = (i16x8)__builtin_shufflevector(v, v, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7) >> 8;
    *hi = (i16x8)__builtin_shufflevector(v, v, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15) >> 8;
#endif
}

// 16 int8 weights times the 16 activations x0 | x1, as 4 int32 partial sums.
inline i32x4 dot16(const int8_t* w, i16x8 x0, i16x8 x1) {
    i16x8 lo, hi;
    widen(w, &lo, &hi);
    return madd(lo, x0) + madd(hi, x1);
}

// max |x[i]| over n values; *finite: none of them is NaN or Inf. Four lanes at a time, then the tail: a maximum
// is exact, so the order does not change it.
inline float largest_magnitude(const float* x, int n, bool* finite) {
    const int n4 = n & ~3;
    const i32x4 magnitude_bits = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX};
    const f32x4 largest_finite = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
    f32x4 max4 = {0, 0, 0, 0};
    i32x4 finite4 = {-1, -1, -1, -1};
    for (int i = 0; i < n4; i += 4) {
        const f32x4 a = (f32x4)((i32x4)load4(x + i) & magnitude_bits);
        finite4 &= a <= largest_finite;  // false for NaN and Inf
        max4 = select(a > max4, a, max4);
    }
    bool all_finite = finite4[0] & finite4[1] & finite4[2] & finite4[3];
    float max_abs = 0.0f;
    for (int k = 0; k < 4; k++) max_abs = max4[k] > max_abs ? max4[k] : max_abs;
    for (int i = n4; i < n; i++) {
        const float a = std::fabs(x[i]);
        all_finite &= a <= FLT_MAX;
        max_abs = a > max_abs ? a : max_abs;
    }
    *finite = all_finite;
    return max_abs;
}

// x * inverse rounded half away from zero and clamped to [-range, range], per lane, for finite x: by truncation of
// x * inverse +- 0.5.
inline i32x4 round_to_range4(f32x4 x, f32x4 inverse, f32x4 range) {
    const f32x4 v = x * inverse, half = {0.5f, 0.5f, 0.5f, 0.5f}, zero = {0, 0, 0, 0};
    const i32x4 positive = v >= zero;
    const f32x4 up = v + half, down = v - half;
    const f32x4 r = select(positive, select(up < range, up, range), select(down > -range, down, -range));
    return __builtin_convertvector(r, i32x4);
}
// One value through round_to_range4 (a tail after the groups of 4): the same operations, so the same result.
inline int32_t round_to_range(float x, f32x4 inverse, f32x4 range) {
    return round_to_range4(f32x4{x, 0, 0, 0}, inverse, range)[0];
}

// The two int16 at p in every 32-bit lane: {p[0], p[1]} four times (one v128.load32_splat in wasm).
inline i32x4 load_splat_pair(const int16_t* p) {
    int32_t pair;
    std::memcpy(&pair, p, sizeof pair);
    return i32x4{pair, pair, pair, pair};
}

inline int32_t finish_dot_q8(i32x4 acc, const int16_t* x_tail, const int8_t* w_tail, int n_tail) {
    int32_t r = acc[0] + acc[1] + acc[2] + acc[3];
    for (int i = 0; i < n_tail; i++) r += int32_t(x_tail[i]) * w_tail[i];
    return r;
}

int32_t dot_q8(const int16_t* xq, const int8_t* w, int n) {
    const int n16 = n & ~15;
    i32x4 acc = {0, 0, 0, 0};
    for (int i = 0; i < n16; i += 16) acc += dot16(w + i, load<i16x8>(xq + i), load<i16x8>(xq + i + 8));
    return finish_dot_q8(acc, xq + n16, w + n16, n - n16);
}

#if !defined(__wasm_relaxed_simd__)
// ---- the int8 GEMV and GEMM kernels in the SIMD128 build and natively: int16 activations, the weights widened ----

inline void panel_dot_q8(int32_t out[kPanelRows], const int16_t* xq, const int8_t* panel, int n_in) {
    const int n16 = n_in & ~15;
    const int8_t* p = panel;
    i32x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < n16; i += 16, p += kPanelRows * kChunkQ8) {
        const i16x8 x0 = load<i16x8>(xq + i), x1 = load<i16x8>(xq + i + 8);
        a0 += dot16(p, x0, x1);
        a1 += dot16(p + 16, x0, x1);
        a2 += dot16(p + 32, x0, x1);
        a3 += dot16(p + 48, x0, x1);
    }
    const int nt = n_in - n16;
    out[0] = finish_dot_q8(a0, xq + n16, p, nt);
    out[1] = finish_dot_q8(a1, xq + n16, p + nt, nt);
    out[2] = finish_dot_q8(a2, xq + n16, p + 2 * nt, nt);
    out[3] = finish_dot_q8(a3, xq + n16, p + 3 * nt, nt);
}

// 16 int8 weights times the 16 activations x0 | x1, each 8 weights loaded and widened in one step
// (v128.load8x8_s): fewer instructions per weight byte than dot16, for the GEMV, where each weight is used once.
inline i32x4 dot16_loaded(const int8_t* w, i16x8 x0, i16x8 x1) {
    return madd(simd::load8x8_s(w), x0) + madd(simd::load8x8_s(w + 8), x1);
}

// One token against two panels, p and q, taken from two places in memory: a decode step reads the int8 weights
// as two sequential streams instead of one, which the hardware prefetchers keep further ahead of the loads
// (measured in wasm: 5.9 -> 7.6 GB/s on a 3072 x 768 matrix streamed from memory, where a loop that only adds
// the bytes reads 8.6).
inline void two_panel_dot_q8(int32_t out_p[kPanelRows], int32_t out_q[kPanelRows], const int16_t* xq, const int8_t* p,
                             const int8_t* q, int n_in) {
    const int n16 = n_in & ~15;
    i32x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int i = 0; i < n16; i += 16, p += kPanelRows * kChunkQ8, q += kPanelRows * kChunkQ8) {
        const i16x8 x0 = load<i16x8>(xq + i), x1 = load<i16x8>(xq + i + 8);
        a0 += dot16_loaded(p, x0, x1);
        a1 += dot16_loaded(p + 16, x0, x1);
        a2 += dot16_loaded(p + 32, x0, x1);
        a3 += dot16_loaded(p + 48, x0, x1);
        b0 += dot16_loaded(q, x0, x1);
        b1 += dot16_loaded(q + 16, x0, x1);
        b2 += dot16_loaded(q + 32, x0, x1);
        b3 += dot16_loaded(q + 48, x0, x1);
    }
    const int nt = n_in - n16;
    const i32x4 a[kPanelRows] = {a0, a1, a2, a3}, b[kPanelRows] = {b0, b1, b2, b3};
    for (int r = 0; r < kPanelRows; r++) {
        out_p[r] = finish_dot_q8(a[r], xq + n16, p + r * nt, nt);
        out_q[r] = finish_dot_q8(b[r], xq + n16, q + r * nt, nt);
    }
}

// Two token rows against one panel: each 8 weights are loaded and widened once (v128.load8x8_s) for both tokens.
// The panel is read in two passes, the first 8 columns of every chunk and then the last 8 (the chunks are in L1 by
// then), each iteration kept one iteration (GPT2_NO_UNROLL): then only the 8 accumulators, the two tokens' 8
// activations and one widened weight vector are live, which V8 keeps in its 16 vector registers. With a whole
// chunk an iteration, it spilled accumulators to the stack inside the loop (measured in wasm, the batched pass of
// 4 sequences on GPT-2 124M int8: 1.1x faster without).
inline void panel_dot_q8_2(int32_t out0[kPanelRows], int32_t out1[kPanelRows], const int16_t* xq0, const int16_t* xq1,
                           const int8_t* panel, int n_in) {
    const int n16 = n_in & ~15;
    i32x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int h = 0; h < kChunkQ8; h += 8) {
        const int8_t* p = panel + h;
        GPT2_NO_UNROLL
        for (int i = h; i < n16; i += kChunkQ8, p += kPanelRows * kChunkQ8) {
            const i16x8 x = load<i16x8>(xq0 + i), y = load<i16x8>(xq1 + i);
            i16x8 w = simd::load8x8_s(p);
            a0 += madd(w, x);
            b0 += madd(w, y);
            w = simd::load8x8_s(p + kChunkQ8);
            a1 += madd(w, x);
            b1 += madd(w, y);
            w = simd::load8x8_s(p + 2 * kChunkQ8);
            a2 += madd(w, x);
            b2 += madd(w, y);
            w = simd::load8x8_s(p + 3 * kChunkQ8);
            a3 += madd(w, x);
            b3 += madd(w, y);
        }
    }
    const int8_t* p = panel + size_t(n16) * kPanelRows;  // the rows' tails
    const int nt = n_in - n16;
    const i32x4 a[kPanelRows] = {a0, a1, a2, a3}, b[kPanelRows] = {b0, b1, b2, b3};
    for (int r = 0; r < kPanelRows; r++) {
        out0[r] = finish_dot_q8(a[r], xq0 + n16, p + r * nt, nt);
        out1[r] = finish_dot_q8(b[r], xq1 + n16, p + r * nt, nt);
    }
}

// Four token rows against rows r0 and r0 + 1 of a panel: out[t][k] for token t and row r0 + k. Each 8 weights are
// loaded and widened once for the four tokens; a panel takes two calls (r0 = 0, 2), the second reading it from L1.
// In passes as panel_dot_q8_2, so that the 8 accumulators, the tokens' 32 activations and one weight vector stay
// in registers.
inline void panel_rows_dot_q8_4(int32_t out[4][2], const int16_t* const xq[4], const int8_t* panel, int r0, int n_in) {
    const int n16 = n_in & ~15;
    i32x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int h = 0; h < kChunkQ8; h += 8) {
        const int8_t* p = panel + r0 * kChunkQ8 + h;
        GPT2_NO_UNROLL
        for (int i = h; i < n16; i += kChunkQ8, p += kPanelRows * kChunkQ8) {
            const i16x8 x0 = load<i16x8>(xq[0] + i), x1 = load<i16x8>(xq[1] + i), x2 = load<i16x8>(xq[2] + i),
                        x3 = load<i16x8>(xq[3] + i);
            i16x8 w = simd::load8x8_s(p);
            a0 += madd(w, x0);
            a1 += madd(w, x1);
            a2 += madd(w, x2);
            a3 += madd(w, x3);
            w = simd::load8x8_s(p + kChunkQ8);
            b0 += madd(w, x0);
            b1 += madd(w, x1);
            b2 += madd(w, x2);
            b3 += madd(w, x3);
        }
    }
    const int nt = n_in - n16;
    const int8_t* tails = panel + size_t(n16) * kPanelRows + r0 * nt;  // rows r0 and r0 + 1's tails
    const i32x4 a[4] = {a0, a1, a2, a3}, b[4] = {b0, b1, b2, b3};
    for (int t = 0; t < 4; t++) {
        out[t][0] = finish_dot_q8(a[t], xq[t] + n16, tails, nt);
        out[t][1] = finish_dot_q8(b[t], xq[t] + n16, tails + nt, nt);
    }
}

#else
// ---- int8 in the relaxed-SIMD build: activations split into 7-bit bytes (quantize_linear_activations) ----

using simd::u32x4;
using simd::u8x16;

// The 4 rows of a panel against one token's split activations (q = 128 * hi + lo - 8192 per value), with the rows'
// weight sums: sum(w * q) = 128 * sum(w * hi) + sum(w * lo) - 8192 * sum(w), in wrapping arithmetic (the parts
// may pass 2^31; the whole, a dot product of the quantize_activations range, does not), then the tail's int16 q.
inline void panel_dot_split(int32_t out[kPanelRows], const int16_t* xq, const int8_t* panel, i32x4 w_sums, int n_in) {
    const int n16 = n_in & ~15;
    const int8_t* p = panel;
    i32x4 l0 = {0, 0, 0, 0}, l1 = l0, l2 = l0, l3 = l0, h0 = l0, h1 = l0, h2 = l0, h3 = l0;
    for (int i = 0; i < n16; i += 16, p += kPanelRows * kChunkQ8) {
        const u8x16 lo = load<u8x16>(xq + i), hi = load<u8x16>(xq + i + 8);
        const i8x16 w0 = load<i8x16>(p), w1 = load<i8x16>(p + 16), w2 = load<i8x16>(p + 32), w3 = load<i8x16>(p + 48);
        l0 = simd::dot_i8_u7(w0, lo, l0);
        h0 = simd::dot_i8_u7(w0, hi, h0);
        l1 = simd::dot_i8_u7(w1, lo, l1);
        h1 = simd::dot_i8_u7(w1, hi, h1);
        l2 = simd::dot_i8_u7(w2, lo, l2);
        h2 = simd::dot_i8_u7(w2, hi, h2);
        l3 = simd::dot_i8_u7(w3, lo, l3);
        h3 = simd::dot_i8_u7(w3, hi, h3);
    }
    const u32x4 rows = ((u32x4)simd::sum_lanes4(h0, h1, h2, h3) << 7) + (u32x4)simd::sum_lanes4(l0, l1, l2, l3) -
                       ((u32x4)w_sums << 13);
    const int nt = n_in - n16;
    for (int r = 0; r < kPanelRows; r++)
        out[r] = finish_dot_q8(i32x4{int32_t(rows[r]), 0, 0, 0}, xq + n16, p + r * nt, nt);
}

// One row (not in a panel: plain order) against split activations, with its weight sum.
inline int32_t row_dot_split(const int16_t* xq, const int8_t* w, int32_t w_sum, int n_in) {
    const int n16 = n_in & ~15;
    i32x4 l = {0, 0, 0, 0}, h = l;
    for (int i = 0; i < n16; i += 16) {
        const i8x16 wi = load<i8x16>(w + i);
        l = simd::dot_i8_u7(wi, load<u8x16>(xq + i), l);
        h = simd::dot_i8_u7(wi, load<u8x16>(xq + i + 8), h);
    }
    const u32x4 v = ((u32x4)h << 7) + (u32x4)l;
    const uint32_t sum = v[0] + v[1] + v[2] + v[3] - (uint32_t(w_sum) << 13);
    return finish_dot_q8(i32x4{int32_t(sum), 0, 0, 0}, xq + n16, w + n16, n_in - n16);
}
#endif

inline float dequantize(int32_t acc, float x_scale, const float* w_scale, const float* bias, int o) {
    return with_bias(float(acc) * (x_scale * w_scale[o]), bias, o);
}

// A block of token rows stays in L2 while the weight panels stream past it once per block; each panel is
// reused from L1 for every token of the block.
constexpr int kTokenBlock = 64;

}  // namespace

void pack_panels(float* w, int n_out, int n_in, float* scratch) {
    pack_panels_impl<kChunkF32>(w, n_out, n_in, scratch);
}
void pack_panels(int8_t* w, int n_out, int n_in, int8_t* scratch) {
    pack_panels_impl<kChunkQ8>(w, n_out, n_in, scratch);
}

void unpack_row(float* out, const float* w, int n_out, int n_in, int row) {
    unpack_row_impl<kChunkF32>(out, w, n_out, n_in, row);
}
void unpack_row(int8_t* out, const int8_t* w, int n_out, int n_in, int row) {
    unpack_row_impl<kChunkQ8>(out, w, n_out, n_in, row);
}

float dot(const float* x, const float* w, int n) { return dot_impl(x, w, n); }

void gemv(float* out, const float* x, const float* w, const float* bias, int n_in, int n_out) {
    const int full_rows = n_out - n_out % kPanelRows;
    float r[kPanelRows];
    for (int o = 0; o < full_rows; o += kPanelRows) {
        panel_dot(r, x, w + size_t(o) * n_in, n_in);
        for (int k = 0; k < kPanelRows; k++) out[o + k] = with_bias(r[k], bias, o + k);
    }
    for (int o = full_rows; o < n_out; o++) out[o] = with_bias(dot_impl(x, w + size_t(o) * n_in, n_in), bias, o);
}

void gemm(float* out, const float* x, const float* w, const float* bias, int n_tok, int n_in, int n_out) {
    const int full_rows = n_out - n_out % kPanelRows;
    float r[kPanelRows], r2[kPanelRows];
    for (int t0 = 0; t0 < n_tok; t0 += kTokenBlock) {
        const int t1 = t0 + kTokenBlock < n_tok ? t0 + kTokenBlock : n_tok;
        for (int o = 0; o < full_rows; o += kPanelRows) {
            const float* panel = w + size_t(o) * n_in;
            int t = t0;
            for (; t + 2 <= t1; t += 2) {
                panel_dot_2(r, r2, x + size_t(t) * n_in, x + size_t(t + 1) * n_in, panel, n_in);
                for (int k = 0; k < kPanelRows; k++) {
                    out[size_t(t) * n_out + o + k] = with_bias(r[k], bias, o + k);
                    out[size_t(t + 1) * n_out + o + k] = with_bias(r2[k], bias, o + k);
                }
            }
            if (t < t1) {
                panel_dot(r, x + size_t(t) * n_in, panel, n_in);
                for (int k = 0; k < kPanelRows; k++) out[size_t(t) * n_out + o + k] = with_bias(r[k], bias, o + k);
            }
        }
        for (int o = full_rows; o < n_out; o++)
            for (int t = t0; t < t1; t++)
                out[size_t(t) * n_out + o] =
                    with_bias(dot_impl(x + size_t(t) * n_in, w + size_t(o) * n_in, n_in), bias, o);
    }
}

int activation_range(int n_in) {
    const int64_t limit = (int64_t(1) << 31) - 1, bound = limit / (int64_t(127) * (n_in > 0 ? n_in : 1));
    return bound >= 32767 ? 32767 : bound < 1 ? 1 : int(bound);
}

namespace {

// quantize_activations with the range given.
void quantize_rows_in_range(int16_t* q, float* scale, const float* x, int n_tok, int n_in, float range) {
    for (int t = 0; t < n_tok; t++) {
        const float* xt = x + size_t(t) * n_in;
        int16_t* qt = q + size_t(t) * n_in;
        bool finite;
        const float max_abs = largest_magnitude(xt, n_in, &finite);
        if (!finite) {
            scale[t] = NAN;
            std::memset(qt, 0, sizeof(int16_t) * n_in);
            continue;
        }
        scale[t] = max_abs / range;
        const float inverse = max_abs > 0.0f ? range / max_abs : 0.0f;
        const f32x4 inverse4 = {inverse, inverse, inverse, inverse}, range4 = {range, range, range, range};
        const int n8 = n_in & ~7;
        for (int i = 0; i < n8; i += 8) {
            const i16x8 q8 = simd::narrow_i32(round_to_range4(load4(xt + i), inverse4, range4),
                                              round_to_range4(load4(xt + i + 4), inverse4, range4));
            std::memcpy(qt + i, &q8, sizeof q8);
        }
        for (int i = n8; i < n_in; i++) qt[i] = int16_t(round_to_range(xt[i], inverse4, range4));
    }
}

}  // namespace

void quantize_activations(int16_t* q, float* scale, const float* x, int n_tok, int n_in) {
    quantize_rows_in_range(q, scale, x, n_tok, n_in, float(activation_range(n_in)));
}

void int8_row_sums(int32_t* sums, const int8_t* q, int n_out, int n_in) {
    const int n16 = n_in & ~15;
    for (int o = 0; o < n_out; o++) {
        int32_t sum = 0;
        for (int i = 0; i < n16; i++) sum += q[size_t(o) * n_in + size_t(i)];
        sums[o] = sum;
    }
}

int linear_activation_range(int n_in) {
    const int range = activation_range(n_in);
    return kInt8RowSums && range > kSplitActivationRange ? kSplitActivationRange : range;
}

void quantize_linear_activations(int16_t* q, float* scale, const float* x, int n_tok, int n_in) {
    quantize_rows_in_range(q, scale, x, n_tok, n_in, float(linear_activation_range(n_in)));
#if defined(__wasm_relaxed_simd__)
    // each chunk of 16 int16 rewritten in place as the bytes u % 128, then u / 128, of u = q + 8192 (1..16383)
    const int n16 = n_in & ~15;
    for (int t = 0; t < n_tok; t++) {
        int16_t* qt = q + size_t(t) * n_in;
        for (int i = 0; i < n16; i += 16) {
            const i16x8 u0 = load<i16x8>(qt + i) + 8192, u1 = load<i16x8>(qt + i + 8) + 8192;
            const i8x16 lo = simd::narrow(u0 & 127, u1 & 127), hi = simd::narrow(u0 >> 7, u1 >> 7);
            std::memcpy(qt + i, &lo, sizeof lo);
            std::memcpy(qt + i + 8, &hi, sizeof hi);
        }
    }
#endif
}

void gemv_q8(float* out, const int16_t* xq, float x_scale, const int8_t* w, const float* w_scale, const int32_t* w_sums,
             const float* bias, int n_in, int n_out) {
#if defined(__wasm_relaxed_simd__)
    // one token of the batched kernel, whose panels come in two streams: the 8 rows' two accumulators each of
    // two_panel_dot_q8's form would not stay in registers
    gemm_q8(out, xq, &x_scale, w, w_scale, w_sums, bias, 1, n_in, n_out);
#else
    (void)w_sums;
    const int full_rows = n_out - n_out % kPanelRows;
    // the panels in two halves, read side by side (two_panel_dot_q8); an odd panel count leaves one for the end
    const int half = full_rows / (2 * kPanelRows) * kPanelRows;
    int32_t r[kPanelRows], r2[kPanelRows];
    for (int o = 0; o < half; o += kPanelRows) {
        two_panel_dot_q8(r, r2, xq, w + size_t(o) * n_in, w + size_t(o + half) * n_in, n_in);
        for (int k = 0; k < kPanelRows; k++) {
            out[o + k] = dequantize(r[k], x_scale, w_scale, bias, o + k);
            out[o + half + k] = dequantize(r2[k], x_scale, w_scale, bias, o + half + k);
        }
    }
    for (int o = 2 * half; o < full_rows; o += kPanelRows) {
        panel_dot_q8(r, xq, w + size_t(o) * n_in, n_in);
        for (int k = 0; k < kPanelRows; k++) out[o + k] = dequantize(r[k], x_scale, w_scale, bias, o + k);
    }
    for (int o = full_rows; o < n_out; o++)
        out[o] = dequantize(dot_q8(xq, w + size_t(o) * n_in, n_in), x_scale, w_scale, bias, o);
#endif
}

void gemm_q8(float* out, const int16_t* xq, const float* x_scale, const int8_t* w, const float* w_scale,
             const int32_t* w_sums, const float* bias, int n_tok, int n_in, int n_out) {
    const int full_rows = n_out - n_out % kPanelRows;
#if defined(__wasm_relaxed_simd__)
    int32_t r[kPanelRows];
    const int n_panels = full_rows / kPanelRows;
    for (int t0 = 0; t0 < n_tok; t0 += kTokenBlock) {
        const int t1 = t0 + kTokenBlock < n_tok ? t0 + kTokenBlock : n_tok;
        for (int i = 0; i < n_panels; i++) {
            const int o = kPanelRows * two_stream_panel(i, n_panels);
            const int8_t* panel = w + size_t(o) * n_in;
            const i32x4 sums = load<i32x4>(w_sums + o);
            for (int t = t0; t < t1; t++) {
                panel_dot_split(r, xq + size_t(t) * n_in, panel, sums, n_in);
                for (int k = 0; k < kPanelRows; k++)
                    out[size_t(t) * n_out + o + k] = dequantize(r[k], x_scale[t], w_scale, bias, o + k);
            }
        }
        for (int o = full_rows; o < n_out; o++)
            for (int t = t0; t < t1; t++)
                out[size_t(t) * n_out + o] =
                    dequantize(row_dot_split(xq + size_t(t) * n_in, w + size_t(o) * n_in, w_sums[o], n_in), x_scale[t],
                               w_scale, bias, o);
    }
#else
    (void)w_sums;
    int32_t r[kPanelRows], r2[kPanelRows];
    for (int t0 = 0; t0 < n_tok; t0 += kTokenBlock) {
        const int t1 = t0 + kTokenBlock < n_tok ? t0 + kTokenBlock : n_tok;
        for (int o = 0; o < full_rows; o += kPanelRows) {
            const int8_t* panel = w + size_t(o) * n_in;
            int t = t0;
            for (; t + 4 <= t1; t += 4) {
                const int16_t* const x4[4] = {xq + size_t(t) * n_in, xq + size_t(t + 1) * n_in,
                                              xq + size_t(t + 2) * n_in, xq + size_t(t + 3) * n_in};
                for (int r0 = 0; r0 < kPanelRows; r0 += 2) {
                    int32_t r4[4][2];
                    panel_rows_dot_q8_4(r4, x4, panel, r0, n_in);
                    for (int u = 0; u < 4; u++)
                        for (int k = 0; k < 2; k++)
                            out[size_t(t + u) * n_out + o + r0 + k] =
                                dequantize(r4[u][k], x_scale[t + u], w_scale, bias, o + r0 + k);
                }
            }
            for (; t + 2 <= t1; t += 2) {
                panel_dot_q8_2(r, r2, xq + size_t(t) * n_in, xq + size_t(t + 1) * n_in, panel, n_in);
                for (int k = 0; k < kPanelRows; k++) {
                    out[size_t(t) * n_out + o + k] = dequantize(r[k], x_scale[t], w_scale, bias, o + k);
                    out[size_t(t + 1) * n_out + o + k] = dequantize(r2[k], x_scale[t + 1], w_scale, bias, o + k);
                }
            }
            for (; t < t1; t++) {
                panel_dot_q8(r, xq + size_t(t) * n_in, panel, n_in);
                for (int k = 0; k < kPanelRows; k++)
                    out[size_t(t) * n_out + o + k] = dequantize(r[k], x_scale[t], w_scale, bias, o + k);
            }
        }
        for (int o = full_rows; o < n_out; o++)
            for (int t = t0; t < t1; t++)
                out[size_t(t) * n_out + o] =
                    dequantize(dot_q8(xq + size_t(t) * n_in, w + size_t(o) * n_in, n_in), x_scale[t], w_scale, bias, o);
    }
#endif
}

void attention_scores(float* scores, const float* q, const float* keys, int n_keys, int n, float scale) {
    for (int j = 0; j < n_keys; j++) scores[j] = dot(q, keys + size_t(j) * n, n) * scale;
}

void quantize_cache_row(int8_t* q, float* scale, const float* x, int n, int stride) {
    bool finite;
    const float max_abs = largest_magnitude(x, n, &finite);
    if (!finite || max_abs == 0.0f) {
        *scale = finite ? 0.0f : NAN;
        for (int i = 0; i < n; i++) q[size_t(i) * stride] = 0;
        return;
    }
    *scale = max_abs / 127.0f;
    const float inverse = 127.0f / max_abs;
    const f32x4 inverse4 = {inverse, inverse, inverse, inverse}, range4 = {127.0f, 127.0f, 127.0f, 127.0f};
    const int n4 = n & ~3;
    for (int i = 0; i < n4; i += 4) {
        const i32x4 q4 = round_to_range4(load4(x + i), inverse4, range4);
        for (int k = 0; k < 4; k++) q[size_t(i + k) * stride] = int8_t(q4[k]);
    }
    for (int i = n4; i < n; i++) q[size_t(i) * stride] = int8_t(round_to_range(x[i], inverse4, range4));
}

void attention_scores_q8(float* scores, const int16_t* qq, float q_scale, const int8_t* keys, const float* key_scale,
                         int n_keys, int n) {
    for (int j = 0; j < n_keys; j++) scores[j] = float(dot_q8(qq, keys + size_t(j) * n, n)) * (q_scale * key_scale[j]);
}

void attention_values_q8(float* out, const float* a, const int8_t* values, int n_keys, int n, int16_t* aq) {
    float a_scale;
    quantize_activations(aq, &a_scale, a, 1, n_keys);
    aq[n_keys] = 0;  // an odd last position's partner
    const int n_pairs = (n_keys + 1) / 2, n16 = n & ~15;
    // 16 outputs in four int32 accumulators while the position pairs stream past: per pair one splat of the two
    // weights and four multiply-adds of 8 bytes (4 values x 2 positions) each
    for (int i = 0; i < n16; i += 16) {
        i32x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
        const int8_t* v = values + 2 * size_t(i);
        for (int m = 0; m < n_pairs; m++, v += 2 * size_t(n)) {
            const i16x8 w = (i16x8)load_splat_pair(aq + 2 * m);
            a0 += madd(simd::load8x8_s(v), w);
            a1 += madd(simd::load8x8_s(v + 8), w);
            a2 += madd(simd::load8x8_s(v + 16), w);
            a3 += madd(simd::load8x8_s(v + 24), w);
        }
        const f32x4 scale = {a_scale, a_scale, a_scale, a_scale};
        store4(out + i, __builtin_convertvector(a0, f32x4) * scale);
        store4(out + i + 4, __builtin_convertvector(a1, f32x4) * scale);
        store4(out + i + 8, __builtin_convertvector(a2, f32x4) * scale);
        store4(out + i + 12, __builtin_convertvector(a3, f32x4) * scale);
    }
    for (int i = n16; i < n; i++) {
        int32_t sum = 0;
        for (int m = 0; m < n_pairs; m++)
            sum += aq[2 * m] * values[(size_t(m) * n + i) * 2] + aq[2 * m + 1] * values[(size_t(m) * n + i) * 2 + 1];
        out[i] = float(sum) * a_scale;
    }
}

void attention_values(float* out, const float* p, const float* values, int n_keys, int n) {
    // 16 outputs at a time stay in registers while the value rows stream past (the cache is read once per
    // head instead of once per position with a load and a store of out)
    const int n16 = n & ~15;
    for (int i = 0; i < n16; i += 16) {
        f32x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
        const float* v = values + i;
        for (int j = 0; j < n_keys; j++, v += n) {
            const f32x4 pj = {p[j], p[j], p[j], p[j]};
            a0 = mul_add(pj, load4(v), a0);
            a1 = mul_add(pj, load4(v + 4), a1);
            a2 = mul_add(pj, load4(v + 8), a2);
            a3 = mul_add(pj, load4(v + 12), a3);
        }
        store4(out + i, a0);
        store4(out + i + 4, a1);
        store4(out + i + 8, a2);
        store4(out + i + 12, a3);
    }
    for (int i = n16; i < n; i++) {
        float a = 0.0f;
        for (int j = 0; j < n_keys; j++) a += p[j] * values[size_t(j) * n + i];
        out[i] = a;
    }
}

}  // namespace gpt2
