// F16 and the 32-value block formats Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (block_formats.h) as Linear storage.
//
// Storage of a 32-value format: panels of kPanelRows = 4 rows (the last one padded with zero rows), each panel
// its n_in / 32 block columns in order, each column the 4 rows' blocks in the format's column layout below: the
// 4 fp16 scales widened to one f32x4 in front (so the scale work is one vector operation for 4 rows), then each
// row's quants with their bits as in the file, regrouped within the block where that saves the kernel work
// (Q4_x: regroup_nibbles; Q5_x: spread_fifth_bits). A GEMV then streams one sequential array. Resident size:
// 144 / 136 bytes per 4 blocks of the file for Q8_0 (+6 %), 80 / 72 Q4_0 (+11 %), 88 / 80 Q4_1 (+10 %, its mins
// stay fp16 and are widened in the kernel), 96 / 88 Q5_0 (+9 %), 104 / 96 Q5_1 (+8 %).
//
// Products: per block the weights' integers times the activations' (quantize_activation_blocks) summed exactly in
// int32 (madd; in the relaxed-SIMD build the 8-bit dot product on bytes), the 4 rows' sums folded into one i32x4, then
// for each output
//   acc += (d_w * d_x) * float(isum)                               (_0 formats, Q8_0)
//   acc += (d_w * d_x) * float(isum) + m_w * (d_x * float(sum_x))  (_1 formats)
// over the blocks in order, then + bias. The offsets of Q4_0 (-8) and Q5_0 (-16) are exact integer corrections
// of isum by the activation block sums: isum = sum q * x - 8 * sum x. Every output is computed the same way
// whatever the tokens and rows around it, so gemm rows equal gemv and every split gives the same bits.
//
// F16: panels of 4 rows with chunks of 8 values per row, as the fp32 layout of kernels.h (with a padded last
// panel); the kernel widens the halves exactly and sums in the fp32 order of kernels.h with its multiply-add
// (simd::mul_add), so it equals gemv() on the dequantized matrix bit for bit in each build. A batched product
// widens each panel once per block of tokens (f16_panel_dot_batched), with the same sums.
#include "kernels/block_formats_legacy.h"

#include <cstring>
#include <type_traits>

#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

namespace gpt2 {

namespace {

using simd::f32x4;
using simd::i16x8;
using simd::i32x4;
using simd::load;
using simd::load4;
using simd::madd;
using simd::u8x16;

constexpr int kBlock = 32;       // values per block of these formats
constexpr int kTokenBlock = 64;  // tokens per pass of a panel in the batched product: their rows stay in L2

inline void put_float(uint8_t* p, float v) { std::memcpy(p, &v, sizeof v); }
inline float float_at(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline uint32_t u32_at(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

int panels(int n_out) { return (n_out + kPanelRows - 1) / kPanelRows; }

// ---- the 32-value formats: each is a struct of its layout and its three per-block operations ----

// The activations of one block: 32 int16 in four vectors, their scale and sum; in the relaxed-SIMD build the
// 4- and 5-bit formats' activations are bytes instead, in their format's order, and Q8_0's their low 7 bits and
// signs (prepare_block_activations). Each format's kernel reads one form (the compiler drops the others' loads).
struct XBlock {
    i16x8 x0, x1, x2, x3;  // values 0..7, 8..15, 16..23, 24..31
    f32x4 d;               // the scale in every lane
    int32_t sum;
#if defined(__wasm_relaxed_simd__)
    simd::i8x16 bytes0, bytes1;  // the block's 32 bytes
    u8x16 low0, low1;            // Q8_0: values 0..15, 16..31 & 127
    u8x16 sign0, sign1;          // Q8_0: 1 where values 0..15, 16..31 are negative
#endif
};
// Block b of a token row of xq.
inline XBlock x_block(const int16_t* xq, int b, const float* d, int32_t sum) {
    XBlock x;
    const int16_t* q = xq + b * kBlock;
    x.x0 = load<i16x8>(q), x.x1 = load<i16x8>(q + 8), x.x2 = load<i16x8>(q + 16), x.x3 = load<i16x8>(q + 24);
    x.d = simd::load_splat(d), x.sum = sum;
#if defined(__wasm_relaxed_simd__)
    const int8_t* bytes = reinterpret_cast<const int8_t*>(xq) + b * kBlock;
    x.bytes0 = load<simd::i8x16>(bytes), x.bytes1 = load<simd::i8x16>(bytes + 16);
    const uint8_t* split = reinterpret_cast<const uint8_t*>(q);  // the block's own 64 bytes
    x.low0 = load<u8x16>(split), x.low1 = load<u8x16>(split + 16);
    x.sign0 = load<u8x16>(split + 32), x.sign1 = load<u8x16>(split + 48);
#endif
    return x;
}

// The 32 4-bit values of a block (the file's qs: byte j holds value j in its low nibble, value j + 16 in its
// high one) regrouped so that 16-bit lane i of the 16 bytes holds values i, 8 + i, 16 + i, 24 + i in its bits
// 0-3, 4-7, 8-11, 12-15: then one plain load and a mask or a shift per 8 values bring them into int16 lanes in
// order (v128.load takes a constant offset where V8 gives v128.load8x8 a register of its own per offset).
void regroup_nibbles(uint8_t* out, const uint8_t* qs) {
    const auto value = [&](int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; };
    for (int i = 0; i < 8; i++) {
        out[2 * i] = uint8_t(value(i) | value(8 + i) << 4);
        out[2 * i + 1] = uint8_t(value(16 + i) | value(24 + i) << 4);
    }
}
inline int regrouped_nibble(const uint8_t* q, int j) {
    const int byte = q[2 * (j % 8) + j / 16];
    return (j / 8) % 2 ? byte >> 4 : byte & 15;
}
// regroup_nibbles's inverse: the file's qs.
void ungroup_nibbles(uint8_t* qs, const uint8_t* q) {
    for (int j = 0; j < 16; j++) qs[j] = uint8_t(regrouped_nibble(q, j) | regrouped_nibble(q, j + 16) << 4);
}

// 32 weights in 4 bit (regroup_nibbles) times x. The relaxed-SIMD build takes the nibbles as bytes (the low ones:
// values 0, 16, 1, 17, ..; the high ones 8, 24, 9, 25, ..) into two 8-bit dot products; SIMD128 masks them into
// int16 lanes in order, against scaled activations. Both sum the same products exactly.
//
// A block's 32 quants as bytes: in the relaxed-SIMD build the 7-bit operands of two 8-bit dot products against
// x.bytes0 and x.bytes1 (in their format's order, prepare_block_activations), in SIMD128 (the 5-bit formats only)
// values 0..15 and 16..31 in order. A batched product unpacks a panel's quants to this form once for a block of
// tokens (unpack_panel).
struct QuantBytes {
    u8x16 first, second;
};
#if defined(__wasm_relaxed_simd__)
inline i32x4 dot_bytes(QuantBytes q, const XBlock& x) {
    return simd::dot_i8_u7(x.bytes1, q.second, simd::dot_i8_u7(x.bytes0, q.first, i32x4{0, 0, 0, 0}));
}
inline QuantBytes nibble_bytes(const uint8_t* q) {
    const u8x16 v = load<u8x16>(q);
    return {v & 15, (u8x16)(((simd::u16x8)v >> 4) & 0x0F0F)};
}
#else
// A block's unpacked quants (at q) times two tokens' activations x and y, exactly: each 8 quants widened to int16
// once for both (v128.load8x8_u).
inline void dot_bytes_2(const QuantBytes* q, const XBlock& x, const XBlock& y, i32x4* sum_x, i32x4* sum_y) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(q);
    const i16x8 w0 = simd::load8x8_u(b), w1 = simd::load8x8_u(b + 8);
    const i16x8 w2 = simd::load8x8_u(b + 16), w3 = simd::load8x8_u(b + 24);
    *sum_x = (madd(w0, x.x0) + madd(w1, x.x1)) + (madd(w2, x.x2) + madd(w3, x.x3));
    *sum_y = (madd(w0, y.x0) + madd(w1, y.x1)) + (madd(w2, y.x2) + madd(w3, y.x3));
}
#endif

// SIMD128: the activations come scaled (prepare_block_activations: x0 and x3 times 256, x1 times 16), so that a mask
// alone brings values 8 + i and 16 + i into int16 lanes as 16 and 256 times themselves, and every product carries
// the factor 256: two operations fewer per 32 weights than shifting each nibble down. The sum is 256 times the
// relaxed build's (|256 * sum| <= 256 * 15 * 127 * 32 < 2^24); nibble_sums divides it back exactly.
inline i32x4 dot_nibbles(const uint8_t* q, const XBlock& x) {
#if defined(__wasm_relaxed_simd__)
    return dot_bytes(nibble_bytes(q), x);
#else
    const simd::u16x8 v = load<simd::u16x8>(q);
    return (madd(i16x8(v & 0x000F), x.x0) + madd(i16x8(v & 0x00F0), x.x1)) +
           (madd(i16x8(v & 0x0F00), x.x2) + madd(i16x8(v >> 12), x.x3));
#endif
}
// The 4 rows' exact sums of nibble times activation from their dot_nibbles.
inline i32x4 nibble_sums(i32x4 dot_nibbles_sums) {
#if defined(__wasm_relaxed_simd__)
    return dot_nibbles_sums;
#else
    return dot_nibbles_sums >> 8;
#endif
}

// 32 weights in 5 bit: the file's nibbles, their fifth bits (16) in `spread` (spread_fifth_bits), times x.
// The fifth bits of a 5-bit block (qh: bit j is value j's) rearranged for dot_nibbles_5: bit b of byte k holds
// value 4b + k's (b < 4) and value 16 + 4(b - 4) + k's (b >= 4).
inline int fifth_bit_position(int j) { return 8 * (j % 4) + (j % 16) / 4 + (j >= 16 ? 4 : 0); }
uint32_t spread_fifth_bits(uint32_t qh) {
    uint32_t spread = 0;
    for (int j = 0; j < kBlock; j++) spread |= ((qh >> j) & 1u) << fifth_bit_position(j);
    return spread;
}
inline int fifth_bit(uint32_t spread, int j) { return int(spread >> fifth_bit_position(j)) & 1; }
// spread_fifth_bits's inverse: the file's qh.
uint32_t gather_fifth_bits(uint32_t spread) {
    uint32_t qh = 0;
    for (int j = 0; j < kBlock; j++) qh |= uint32_t(fifth_bit(spread, j)) << j;
    return qh;
}
inline void put_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }

// The 32 5-bit values as bytes: values 0..15 in *low, 16..31 in *high.
inline void fifth_bit_bytes(uint32_t spread, const uint8_t* qs, u8x16* low, u8x16* high) {
    // lane g of t is spread << (3 - g): byte k then holds value 4g + k's bit at bit 3, value 16 + 4g + k's at bit
    // 7, which puts every value's fifth bit into the byte lane of its nibble (lane 4g + k)
    const simd::u32x4 t = {spread << 3, spread << 2, spread << 1, spread};
    const u8x16 fifth_lo = (u8x16)((t << 1) & 0x10101010u), fifth_hi = (u8x16)((t >> 3) & 0x10101010u);
    const u8x16 v = load<u8x16>(qs);
    *low = (v & 15) | fifth_lo;
    *high = (u8x16)(((simd::u16x8)v >> 4) & 0x0F0F) | fifth_hi;  // shifted as 16-bit lanes: SSE2 has no 8-bit shift
}

// values 0..15 and 16..31 as bytes (below 32), in order in both builds
inline QuantBytes nibble_bytes_5(uint32_t spread, const uint8_t* qs) {
    QuantBytes q;
    fifth_bit_bytes(spread, qs, &q.first, &q.second);
    return q;
}

inline i32x4 dot_nibbles_5(uint32_t spread, const uint8_t* qs, const XBlock& x) {
#if defined(__wasm_relaxed_simd__)
    return dot_bytes(nibble_bytes_5(spread, qs), x);
#else
    u8x16 low, high;
    fifth_bit_bytes(spread, qs, &low, &high);
    i16x8 a, b, c, d;
    simd::widen_u8(low, &a, &b);   // values 0..7, 8..15
    simd::widen_u8(high, &c, &d);  // values 16..23, 24..31
    return (madd(a, x.x0) + madd(b, x.x1)) + (madd(c, x.x2) + madd(d, x.x3));
#endif
}

// The 4 rows' block sums {row(0), .., row(3)} folded into one vector (written out, not as a loop over an array,
// which clang leaves rolled for the larger rows, keeping the sums in memory).
template <typename Row>
inline i32x4 sum_rows(const Row& row) {
    return simd::sum_lanes4(row(0), row(1), row(2), row(3));
}
inline f32x4 to_float(i32x4 v) { return __builtin_convertvector(v, f32x4); }

struct Q8_0 {
    // file: half d; i8 qs[32]                      column: f32 d[4]; i8 qs[4][32]
    static constexpr uint32_t kFileBytes = 34;
    static constexpr size_t kColumnBytes = 16 + kPanelRows * 32;
    static void store(uint8_t* column, int r, const uint8_t* block) {
        put_float(column + 4 * r, f16_at(block));
        std::memcpy(column + 16 + 32 * r, block + 2, 32);
    }
    static void unstore(uint8_t* block, const uint8_t* column, int r) {  // store's inverse
        put_f16(block, float_at(column + 4 * r));
        std::memcpy(block + 2, column + 16 + 32 * r, 32);
    }
    static void dequantize(float* out, const uint8_t* column, int r) {
        const float d = float_at(column + 4 * r);
        const int8_t* qs = reinterpret_cast<const int8_t*>(column + 16 + 32 * r);
        for (int i = 0; i < kBlock; i++) out[i] = float(qs[i]) * d;
    }
    // The relaxed-SIMD build takes the quants as bytes into 8-bit dot products with the activations' low 7 bits
    // and signs: sum q * x = sum q * low - 128 * sum q * sign. SIMD128 widens both to int16 lanes. Both sum the
    // same products exactly.
    static f32x4 dot(const uint8_t* column, const XBlock& x) {
        const auto row = [&](int k) {
            const int8_t* qs = reinterpret_cast<const int8_t*>(column + 16 + 32 * k);
#if defined(__wasm_relaxed_simd__)
            const simd::i8x16 q0 = load<simd::i8x16>(qs), q1 = load<simd::i8x16>(qs + 16);
            const i32x4 zero = {0, 0, 0, 0};
            const i32x4 low = simd::dot_i8_u7(q1, x.low1, simd::dot_i8_u7(q0, x.low0, zero));
            const i32x4 sign = simd::dot_i8_u7(q1, x.sign1, simd::dot_i8_u7(q0, x.sign0, zero));
            return low - (sign << 7);
#else
            return (madd(simd::load8x8_s(qs), x.x0) + madd(simd::load8x8_s(qs + 8), x.x1)) +
                   (madd(simd::load8x8_s(qs + 16), x.x2) + madd(simd::load8x8_s(qs + 24), x.x3));
#endif
        };
        return combine(column, x, sum_rows(row));
    }
    static f32x4 combine(const uint8_t* column, const XBlock& x, i32x4 isum) {
        return (load4(reinterpret_cast<const float*>(column)) * x.d) * to_float(isum);
    }
};

struct Q4_0 {
    // file: half d; u8 qs[16]                      column: f32 d[4]; u8 regrouped qs[4][16]
    static constexpr uint32_t kFileBytes = 18;
    static constexpr size_t kColumnBytes = 16 + kPanelRows * 16;
    static void store(uint8_t* column, int r, const uint8_t* block) {
        put_float(column + 4 * r, f16_at(block));
        regroup_nibbles(column + 16 + 16 * r, block + 2);
    }
    static void unstore(uint8_t* block, const uint8_t* column, int r) {
        put_f16(block, float_at(column + 4 * r));
        ungroup_nibbles(block + 2, column + 16 + 16 * r);
    }
    static void dequantize(float* out, const uint8_t* column, int r) {
        const float d = float_at(column + 4 * r);
        const uint8_t* qs = column + 16 + 16 * r;
        for (int j = 0; j < kBlock; j++) out[j] = float(regrouped_nibble(qs, j) - 8) * d;
    }
    static f32x4 dot(const uint8_t* column, const XBlock& x) {
        const auto row = [&](int k) { return dot_nibbles(column + 16 + 16 * k, x); };
        return combine(column, x, nibble_sums(sum_rows(row)));
    }
    static f32x4 combine(const uint8_t* column, const XBlock& x, i32x4 isum) {
        return (load4(reinterpret_cast<const float*>(column)) * x.d) * to_float(isum - 8 * x.sum);
    }
#if defined(__wasm_relaxed_simd__)
    static QuantBytes quant_bytes(const uint8_t* column, int k) { return nibble_bytes(column + 16 + 16 * k); }
#endif
};

struct Q4_1 {
    // file: half d, m; u8 qs[16]                   column: f32 d[4]; half m[4]; u8 regrouped qs[4][16]
    static constexpr uint32_t kFileBytes = 20;
    static constexpr size_t kColumnBytes = 16 + 8 + kPanelRows * 16;
    static void store(uint8_t* column, int r, const uint8_t* block) {
        put_float(column + 4 * r, f16_at(block));
        std::memcpy(column + 16 + 2 * r, block + 2, 2);
        regroup_nibbles(column + 24 + 16 * r, block + 4);
    }
    static void unstore(uint8_t* block, const uint8_t* column, int r) {
        put_f16(block, float_at(column + 4 * r));
        std::memcpy(block + 2, column + 16 + 2 * r, 2);
        ungroup_nibbles(block + 4, column + 24 + 16 * r);
    }
    static void dequantize(float* out, const uint8_t* column, int r) {
        const float d = float_at(column + 4 * r), m = f16_at(column + 16 + 2 * r);
        const uint8_t* qs = column + 24 + 16 * r;
        for (int j = 0; j < kBlock; j++) out[j] = float(regrouped_nibble(qs, j)) * d + m;
    }
    static f32x4 dot(const uint8_t* column, const XBlock& x) {
        const auto row = [&](int k) { return dot_nibbles(column + 24 + 16 * k, x); };
        return combine(column, x, nibble_sums(sum_rows(row)));
    }
    static f32x4 combine(const uint8_t* column, const XBlock& x, i32x4 isum) {
        const f32x4 m = simd::load_halves4(reinterpret_cast<const uint16_t*>(column + 16));
        return (load4(reinterpret_cast<const float*>(column)) * x.d) * to_float(isum) + m * (x.d * float(x.sum));
    }
#if defined(__wasm_relaxed_simd__)
    static QuantBytes quant_bytes(const uint8_t* column, int k) { return nibble_bytes(column + 24 + 16 * k); }
#endif
};

struct Q5_0 {
    // file: half d; u32 qh; u8 qs[16]              column: f32 d[4]; u32 spread qh[4]; u8 qs[4][16]
    static constexpr uint32_t kFileBytes = 22;
    static constexpr size_t kColumnBytes = 16 + 16 + kPanelRows * 16;
    static void store(uint8_t* column, int r, const uint8_t* block) {
        put_float(column + 4 * r, f16_at(block));
        const uint32_t spread = spread_fifth_bits(u32_at(block + 2));
        std::memcpy(column + 16 + 4 * r, &spread, 4);
        std::memcpy(column + 32 + 16 * r, block + 6, 16);
    }
    static void unstore(uint8_t* block, const uint8_t* column, int r) {
        put_f16(block, float_at(column + 4 * r));
        put_u32(block + 2, gather_fifth_bits(u32_at(column + 16 + 4 * r)));
        std::memcpy(block + 6, column + 32 + 16 * r, 16);
    }
    static void dequantize(float* out, const uint8_t* column, int r) {
        const float d = float_at(column + 4 * r);
        const uint32_t spread = u32_at(column + 16 + 4 * r);
        const uint8_t* qs = column + 32 + 16 * r;
        for (int j = 0; j < 16; j++) {
            out[j] = float(((qs[j] & 15) | fifth_bit(spread, j) << 4) - 16) * d;
            out[j + 16] = float(((qs[j] >> 4) | fifth_bit(spread, j + 16) << 4) - 16) * d;
        }
    }
    static f32x4 dot(const uint8_t* column, const XBlock& x) {
        const auto row = [&](int k) { return dot_nibbles_5(u32_at(column + 16 + 4 * k), column + 32 + 16 * k, x); };
        return combine(column, x, sum_rows(row));
    }
    static f32x4 combine(const uint8_t* column, const XBlock& x, i32x4 isum) {
        return (load4(reinterpret_cast<const float*>(column)) * x.d) * to_float(isum - 16 * x.sum);
    }
    static QuantBytes quant_bytes(const uint8_t* column, int k) {
        return nibble_bytes_5(u32_at(column + 16 + 4 * k), column + 32 + 16 * k);
    }
};

struct Q5_1 {
    // file: half d, m; u32 qh; u8 qs[16]           column: f32 d[4]; half m[4]; u32 spread qh[4]; u8 qs[4][16]
    static constexpr uint32_t kFileBytes = 24;
    static constexpr size_t kColumnBytes = 16 + 8 + 16 + kPanelRows * 16;
    static void store(uint8_t* column, int r, const uint8_t* block) {
        put_float(column + 4 * r, f16_at(block));
        std::memcpy(column + 16 + 2 * r, block + 2, 2);
        const uint32_t spread = spread_fifth_bits(u32_at(block + 4));
        std::memcpy(column + 24 + 4 * r, &spread, 4);
        std::memcpy(column + 40 + 16 * r, block + 8, 16);
    }
    static void unstore(uint8_t* block, const uint8_t* column, int r) {
        put_f16(block, float_at(column + 4 * r));
        std::memcpy(block + 2, column + 16 + 2 * r, 2);
        put_u32(block + 4, gather_fifth_bits(u32_at(column + 24 + 4 * r)));
        std::memcpy(block + 8, column + 40 + 16 * r, 16);
    }
    static void dequantize(float* out, const uint8_t* column, int r) {
        const float d = float_at(column + 4 * r), m = f16_at(column + 16 + 2 * r);
        const uint32_t spread = u32_at(column + 24 + 4 * r);
        const uint8_t* qs = column + 40 + 16 * r;
        for (int j = 0; j < 16; j++) {
            out[j] = float((qs[j] & 15) | fifth_bit(spread, j) << 4) * d + m;
            out[j + 16] = float((qs[j] >> 4) | fifth_bit(spread, j + 16) << 4) * d + m;
        }
    }
    static f32x4 dot(const uint8_t* column, const XBlock& x) {
        const auto row = [&](int k) { return dot_nibbles_5(u32_at(column + 24 + 4 * k), column + 40 + 16 * k, x); };
        return combine(column, x, sum_rows(row));
    }
    static f32x4 combine(const uint8_t* column, const XBlock& x, i32x4 isum) {
        const f32x4 m = simd::load_halves4(reinterpret_cast<const uint16_t*>(column + 16));
        return (load4(reinterpret_cast<const float*>(column)) * x.d) * to_float(isum) + m * (x.d * float(x.sum));
    }
    static QuantBytes quant_bytes(const uint8_t* column, int k) {
        return nibble_bytes_5(u32_at(column + 24 + 4 * k), column + 40 + 16 * k);
    }
};

// ---- the storage and products shared by the 32-value formats ----

template <typename F>
size_t panel_bytes(int n_in) {
    return size_t(n_in / kBlock) * F::kColumnBytes;
}

template <typename F>
uint64_t blocks_storage_bytes(int n_out, int n_in) {
    return uint64_t(panels(n_out)) * panel_bytes<F>(n_in);
}

template <typename F>
void blocks_store_rows(void* storage, int n_out, int n_in, int row0, int n_rows, const uint8_t* file_rows) {
    uint8_t* const base = static_cast<uint8_t*>(storage);
    const int n_blocks = n_in / kBlock;
    const size_t panel = panel_bytes<F>(n_in);
    // the padding rows of a last, partial panel are zero blocks (scale 0): their outputs are never written
    if (row0 + n_rows == n_out && n_out % kPanelRows != 0)
        std::memset(base + size_t(n_out / kPanelRows) * panel, 0, panel);
    for (int i = 0; i < n_rows; i++) {
        const int row = row0 + i, r = row % kPanelRows;
        uint8_t* column = base + size_t(row / kPanelRows) * panel;
        const uint8_t* block = file_rows + size_t(i) * n_blocks * F::kFileBytes;
        for (int b = 0; b < n_blocks; b++, column += F::kColumnBytes, block += F::kFileBytes)
            F::store(column, r, block);
    }
}

template <typename F>
void blocks_file_rows(uint8_t* file_rows, const void* storage, int, int n_in, int row0, int n_rows) {
    const uint8_t* const base = static_cast<const uint8_t*>(storage);
    const int n_blocks = n_in / kBlock;
    const size_t panel = panel_bytes<F>(n_in);
    for (int i = 0; i < n_rows; i++) {
        const int row = row0 + i, r = row % kPanelRows;
        const uint8_t* column = base + size_t(row / kPanelRows) * panel;
        uint8_t* block = file_rows + size_t(i) * n_blocks * F::kFileBytes;
        for (int b = 0; b < n_blocks; b++, column += F::kColumnBytes, block += F::kFileBytes)
            F::unstore(block, column, r);
    }
}

template <typename F>
void blocks_dequantize_row(float* out, const void* storage, int, int n_in, int row) {
    const uint8_t* column = static_cast<const uint8_t*>(storage) + size_t(row / kPanelRows) * panel_bytes<F>(n_in);
    for (int b = 0; b < n_in / kBlock; b++, column += F::kColumnBytes)
        F::dequantize(out + b * kBlock, column, row % kPanelRows);
}

// The 4 rows of one panel against one token's quantized row: the block terms summed in block order.
template <typename F>
inline f32x4 panel_dot(const uint8_t* panel, const int16_t* xq, const float* x_scale, const int32_t* x_sum,
                       int n_blocks) {
    f32x4 acc = {0, 0, 0, 0};
    for (int b = 0; b < n_blocks; b++, panel += F::kColumnBytes)
        acc += F::dot(panel, x_block(xq, b, x_scale + b, x_sum[b]));
    return acc;
}

// Two tokens against one panel: the same products as two panel_dot calls, written as one loop so that the
// compiler decodes each column's weights once for both (the two tokens' expressions share every weight term).
template <typename F>
inline void panel_dot2(f32x4* acc0, f32x4* acc1, const uint8_t* panel, const int16_t* xq0, const int16_t* xq1,
                       const float* x_scale0, const float* x_scale1, const int32_t* x_sum0, const int32_t* x_sum1,
                       int n_blocks) {
    f32x4 a0 = {0, 0, 0, 0}, a1 = {0, 0, 0, 0};
    for (int b = 0; b < n_blocks; b++, panel += F::kColumnBytes) {
        a0 += F::dot(panel, x_block(xq0, b, x_scale0 + b, x_sum0[b]));
        a1 += F::dot(panel, x_block(xq1, b, x_scale1 + b, x_sum1[b]));
    }
    *acc0 = a0;
    *acc1 = a1;
}

// Whether F's quants unpack to bytes (F::quant_bytes): in the relaxed-SIMD build the 4- and 5-bit formats (Q8_0's
// are bytes already), in SIMD128 the 5-bit ones, whose fifth bits take a dozen operations a row and block to put in
// place, where the 4-bit ones come out of their regrouped nibbles in as few as reading bytes back takes (measured in
// Node: Q5_0 and Q5_1 prefill 1.3x faster unpacked once, Q4_0 and Q4_1 0.9x).
template <typename F, typename = void>
struct UnpacksQuants : std::false_type {};
template <typename F>
struct UnpacksQuants<F, std::void_t<decltype(F::quant_bytes(nullptr, 0))>> : std::true_type {};

// The batched product's unpacked path takes rows of at most this many blocks (a panel's quants as bytes on the
// stack: 32 KiB; GPT-2 1.5B's widest rows have 200).
constexpr int kMaxUnpackedBlocks = 256;

// A panel's quants as bytes (n_blocks x kPanelRows QuantBytes, block by block), unpacked once for a block of
// tokens: the batched product then spends two 8-bit dot products a row and block on each token (relaxed SIMD), or
// four widening loads a row and block on each pair of tokens (SIMD128), where panel_dot unpacks the quants for
// every token (pair).
template <typename F>
void unpack_panel(QuantBytes* quants, const uint8_t* panel, int n_blocks) {
    for (int b = 0; b < n_blocks; b++, panel += F::kColumnBytes)
        for (int k = 0; k < kPanelRows; k++) *quants++ = F::quant_bytes(panel, k);
}

// panel_dot on the unpacked quants: the same integer sums and the same float terms in the same order, so the same
// bits.
#if defined(__wasm_relaxed_simd__)
template <typename F>
inline f32x4 unpacked_panel_dot(const uint8_t* panel, const QuantBytes* quants, const int16_t* xq, const float* x_scale,
                                const int32_t* x_sum, int n_blocks) {
    f32x4 acc = {0, 0, 0, 0};
    for (int b = 0; b < n_blocks; b++, panel += F::kColumnBytes, quants += kPanelRows) {
        const XBlock x = x_block(xq, b, x_scale + b, x_sum[b]);
        const auto row = [&](int k) { return dot_bytes(quants[k], x); };
        acc += F::combine(panel, x, sum_rows(row));
    }
    return acc;
}
#else
// Two consecutive tokens at once: xq, x_scale and x_sum are the first's, and the second's follow them (n_in values,
// n_blocks scales and sums on).
template <typename F>
inline void unpacked_panel_dot_2(f32x4* acc0, f32x4* acc1, const uint8_t* panel, const QuantBytes* quants,
                                 const int16_t* xq, const float* x_scale, const int32_t* x_sum, int n_in,
                                 int n_blocks) {
    f32x4 a0 = {0, 0, 0, 0}, a1 = {0, 0, 0, 0};
    for (int b = 0; b < n_blocks; b++, panel += F::kColumnBytes, quants += kPanelRows) {
        const XBlock x = x_block(xq, b, x_scale + b, x_sum[b]);
        const XBlock y = x_block(xq + n_in, b, x_scale + n_blocks + b, x_sum[n_blocks + b]);
        i32x4 x0, x1, x2, x3, y0, y1, y2, y3;
        dot_bytes_2(quants, x, y, &x0, &y0);
        dot_bytes_2(quants + 1, x, y, &x1, &y1);
        dot_bytes_2(quants + 2, x, y, &x2, &y2);
        dot_bytes_2(quants + 3, x, y, &x3, &y3);
        a0 += F::combine(panel, x, simd::sum_lanes4(x0, x1, x2, x3));
        a1 += F::combine(panel, y, simd::sum_lanes4(y0, y1, y2, y3));
    }
    *acc0 = a0;
    *acc1 = a1;
}
#endif

// out[0, n) = acc + bias (bias may be null); n <= kPanelRows.
inline void store_outputs(float* out, f32x4 acc, const float* bias, int n) {
    for (int k = 0; k < n; k++) out[k] = bias ? acc[k] + bias[k] : acc[k];
}

// The panels of the outputs [o0, o1) in two streams (two_stream_panel, kernels.h).
template <typename F>
void blocks_multiply(float* out, const Linear& linear, const LinearInput& in, int t0, int n_tok, int o0, int n_rows) {
    const int n_in = linear.n_in, n_out = linear.n_out, n_blocks = n_in / kBlock;
    const size_t panel = panel_bytes<F>(n_in);
    const uint8_t* const storage = static_cast<const uint8_t*>(linear.weight);
    const int o1 = o0 + n_rows, n_panels = (n_rows + kPanelRows - 1) / kPanelRows;
    for (int tb = t0; tb < t0 + n_tok; tb += kTokenBlock) {
        const int te = tb + kTokenBlock < t0 + n_tok ? tb + kTokenBlock : t0 + n_tok;
        for (int i = 0; i < n_panels; i++) {
            const int o = o0 + kPanelRows * two_stream_panel(i, n_panels);
            const uint8_t* p = storage + size_t(o / kPanelRows) * panel;
            const float* bias = linear.bias ? linear.bias + o : nullptr;
            const int n = o1 - o < kPanelRows ? o1 - o : kPanelRows;
            int t = tb;
            if constexpr (UnpacksQuants<F>::value) {
                if (te - tb > 1 && n_blocks <= kMaxUnpackedBlocks) {
                    QuantBytes quants[kMaxUnpackedBlocks * kPanelRows];
                    unpack_panel<F>(quants, p, n_blocks);
#if defined(__wasm_relaxed_simd__)
                    for (; t < te; t++) {
                        const size_t xb = size_t(t) * n_blocks;
                        const f32x4 acc = unpacked_panel_dot<F>(p, quants, in.xq + size_t(t) * n_in, in.xq_scale + xb,
                                                                in.xq_sum + xb, n_blocks);
                        store_outputs(out + size_t(t) * n_out + o, acc, bias, n);
                    }
#else
                    for (; t + 2 <= te; t += 2) {
                        const size_t xb = size_t(t) * n_blocks;
                        f32x4 acc0, acc1;
                        unpacked_panel_dot_2<F>(&acc0, &acc1, p, quants, in.xq + size_t(t) * n_in, in.xq_scale + xb,
                                                in.xq_sum + xb, n_in, n_blocks);
                        store_outputs(out + size_t(t) * n_out + o, acc0, bias, n);
                        store_outputs(out + size_t(t + 1) * n_out + o, acc1, bias, n);
                    }
#endif
                }
            }
            for (; t + 2 <= te; t += 2) {
                const size_t xb = size_t(t) * n_blocks;
                f32x4 acc0, acc1;
                panel_dot2<F>(&acc0, &acc1, p, in.xq + size_t(t) * n_in, in.xq + size_t(t + 1) * n_in, in.xq_scale + xb,
                              in.xq_scale + xb + n_blocks, in.xq_sum + xb, in.xq_sum + xb + n_blocks, n_blocks);
                store_outputs(out + size_t(t) * n_out + o, acc0, bias, n);
                store_outputs(out + size_t(t + 1) * n_out + o, acc1, bias, n);
            }
            for (; t < te; t++) {
                const size_t xb = size_t(t) * n_blocks;
                const f32x4 acc = panel_dot<F>(p, in.xq + size_t(t) * n_in, in.xq_scale + xb, in.xq_sum + xb, n_blocks);
                store_outputs(out + size_t(t) * n_out + o, acc, bias, n);
            }
        }
    }
}

template <typename F>
constexpr BlockFormat legacy_format(const char* name) {
    return {name,
            kBlock,
            F::kFileBytes,
            &blocks_storage_bytes<F>,
            &blocks_store_rows<F>,
            &blocks_file_rows<F>,
            &blocks_dequantize_row<F>,
            &blocks_multiply<F>};
}

// ---- F16 ----

constexpr int kChunkF16 = 8;  // values per row of a panel chunk, as kernels.h's fp32 chunks

// Row `row`'s place in the F16 storage: its panel and index in it. Values of a panel: chunks of 8 columns,
// each the 4 rows' 8 values in turn, then each row's n_in % 8 tail values.
inline const uint16_t* f16_panel(const void* storage, int n_in, int row) {
    return static_cast<const uint16_t*>(storage) + size_t(row / kPanelRows) * kPanelRows * n_in;
}

uint64_t f16_storage_bytes(int n_out, int n_in) { return uint64_t(panels(n_out)) * kPanelRows * n_in * 2; }

void f16_store_rows(void* storage, int n_out, int n_in, int row0, int n_rows, const uint8_t* file_rows) {
    uint8_t* const base = static_cast<uint8_t*>(storage);
    const size_t row_bytes = size_t(n_in) * 2, n8 = size_t(n_in - n_in % kChunkF16), tail = size_t(n_in) - n8;
    if (row0 + n_rows == n_out && n_out % kPanelRows != 0)
        std::memset(base + size_t(n_out / kPanelRows) * kPanelRows * row_bytes, 0, kPanelRows * row_bytes);
    for (int i = 0; i < n_rows; i++) {
        const int row = row0 + i;
        const size_t r = size_t(row % kPanelRows);
        uint8_t* panel = base + size_t(row / kPanelRows) * kPanelRows * row_bytes;
        const uint8_t* src = file_rows + size_t(i) * row_bytes;
        for (size_t c = 0; c < n8; c += kChunkF16)
            std::memcpy(panel + 2 * (c * kPanelRows + r * kChunkF16), src + 2 * c, 2 * kChunkF16);
        std::memcpy(panel + 2 * (n8 * kPanelRows + r * tail), src + 2 * n8, 2 * tail);
    }
}

void f16_file_rows(uint8_t* file_rows, const void* storage, int, int n_in, int row0, int n_rows) {
    const uint8_t* const base = static_cast<const uint8_t*>(storage);
    const size_t row_bytes = size_t(n_in) * 2, n8 = size_t(n_in - n_in % kChunkF16), tail = size_t(n_in) - n8;
    for (int i = 0; i < n_rows; i++) {
        const int row = row0 + i;
        const size_t r = size_t(row % kPanelRows);
        const uint8_t* panel = base + size_t(row / kPanelRows) * kPanelRows * row_bytes;
        uint8_t* dst = file_rows + size_t(i) * row_bytes;
        for (size_t c = 0; c < n8; c += kChunkF16)
            std::memcpy(dst + 2 * c, panel + 2 * (c * kPanelRows + r * kChunkF16), 2 * kChunkF16);
        std::memcpy(dst + 2 * n8, panel + 2 * (n8 * kPanelRows + r * tail), 2 * tail);
    }
}

void f16_dequantize_row(float* out, const void* storage, int, int n_in, int row) {
    const uint16_t* panel = f16_panel(storage, n_in, row);
    const int n8 = n_in - n_in % kChunkF16, tail = n_in - n8, r = row % kPanelRows;
    for (int c = 0; c < n8; c += kChunkF16)
        for (int i = 0; i < kChunkF16; i++) out[c + i] = f16_to_float(panel[c * kPanelRows + r * kChunkF16 + i]);
    for (int i = 0; i < tail; i++) out[n8 + i] = f16_to_float(panel[n8 * kPanelRows + r * tail + i]);
}

// kernels.h's fp32 order: acc0 + acc1, then ((l0 + l1) + (l2 + l3)), then the tail in order.
inline float finish_f16(f32x4 acc0, f32x4 acc1, const float* x_tail, const uint16_t* w_tail, int n_tail) {
    const f32x4 s = acc0 + acc1;
    float r = (s[0] + s[1]) + (s[2] + s[3]);
    for (int i = 0; i < n_tail; i++) r += x_tail[i] * f16_to_float(w_tail[i]);
    return r;
}

inline void f16_panel_dot(float out[kPanelRows], const float* x, const uint16_t* panel, int n_in) {
    const int n8 = n_in - n_in % kChunkF16;
    const uint16_t* p = panel;
    f32x4 a[kPanelRows][2] = {};
    for (int i = 0; i < n8; i += kChunkF16, p += kPanelRows * kChunkF16) {
        const f32x4 x0 = load4(x + i), x1 = load4(x + i + 4);
        for (int r = 0; r < kPanelRows; r++) {
            f32x4 w0, w1;
            simd::widen_halves8(load<i16x8>(p + r * kChunkF16), &w0, &w1);
            a[r][0] = simd::mul_add(x0, w0, a[r][0]);
            a[r][1] = simd::mul_add(x1, w1, a[r][1]);
        }
    }
    const int nt = n_in - n8;  // p now points at the rows' tails, nt values each
    for (int r = 0; r < kPanelRows; r++) out[r] = finish_f16(a[r][0], a[r][1], x + n8, p + r * nt, nt);
}

// A batched product's panel against the tokens [tb, te) (at most kTokenBlock): its halves widened to fp32
// kWidenedChunks chunks at a time, each token's accumulators carried from one stretch to the next, so that each half
// is widened once per block of tokens rather than once per token. The products and sums of f16_panel_dot, in its
// order: the same bits. r: (te - tb, kPanelRows).
constexpr int kWidenedChunks = 128;  // 16 KiB of fp32 on the stack
void f16_panel_dot_batched(float* r, const float* x, const uint16_t* panel, int n_tok, int n_in) {
    const int n8 = n_in - n_in % kChunkF16, nt = n_in - n8;
    constexpr int kChunkValues = kPanelRows * kChunkF16;
    alignas(16) float widened[kWidenedChunks * kChunkValues];
    f32x4 acc[kTokenBlock][kPanelRows][2] = {};
    for (int c0 = 0; c0 < n8; c0 += kWidenedChunks * kChunkF16) {
        const int c1 = c0 + kWidenedChunks * kChunkF16 < n8 ? c0 + kWidenedChunks * kChunkF16 : n8;
        const uint16_t* p = panel + size_t(c0) * kPanelRows;
        for (int i = 0; i < (c1 - c0) * kPanelRows; i += kChunkF16) {
            f32x4 lo, hi;
            simd::widen_halves8(load<i16x8>(p + i), &lo, &hi);
            simd::store4(widened + i, lo);
            simd::store4(widened + i + 4, hi);
        }
        for (int t = 0; t < n_tok; t++) {
            const float* xt = x + size_t(t) * n_in;
            f32x4 a00 = acc[t][0][0], a01 = acc[t][0][1], a10 = acc[t][1][0], a11 = acc[t][1][1];
            f32x4 a20 = acc[t][2][0], a21 = acc[t][2][1], a30 = acc[t][3][0], a31 = acc[t][3][1];
            const float* w = widened;
            for (int i = c0; i < c1; i += kChunkF16, w += kChunkValues) {
                const f32x4 x0 = load4(xt + i), x1 = load4(xt + i + 4);
                a00 = simd::mul_add(x0, load4(w), a00), a01 = simd::mul_add(x1, load4(w + 4), a01);
                a10 = simd::mul_add(x0, load4(w + 8), a10), a11 = simd::mul_add(x1, load4(w + 12), a11);
                a20 = simd::mul_add(x0, load4(w + 16), a20), a21 = simd::mul_add(x1, load4(w + 20), a21);
                a30 = simd::mul_add(x0, load4(w + 24), a30), a31 = simd::mul_add(x1, load4(w + 28), a31);
            }
            acc[t][0][0] = a00, acc[t][0][1] = a01, acc[t][1][0] = a10, acc[t][1][1] = a11;
            acc[t][2][0] = a20, acc[t][2][1] = a21, acc[t][3][0] = a30, acc[t][3][1] = a31;
        }
    }
    const uint16_t* tails = panel + size_t(n8) * kPanelRows;  // each row's nt tail values
    for (int t = 0; t < n_tok; t++)
        for (int k = 0; k < kPanelRows; k++)
            r[t * kPanelRows + k] =
                finish_f16(acc[t][k][0], acc[t][k][1], x + size_t(t) * n_in + n8, tails + k * nt, nt);
}

void f16_multiply(float* out, const Linear& linear, const LinearInput& in, int t0, int n_tok, int o0, int n_rows) {
    const int n_in = linear.n_in, n_out = linear.n_out, o1 = o0 + n_rows;
    float r[kPanelRows];
    float batched[kTokenBlock * kPanelRows];
    for (int tb = t0; tb < t0 + n_tok; tb += kTokenBlock) {
        const int te = tb + kTokenBlock < t0 + n_tok ? tb + kTokenBlock : t0 + n_tok;
        for (int o = o0; o < o1; o += kPanelRows) {
            const uint16_t* panel = f16_panel(linear.weight, n_in, o);
            const int n = o1 - o < kPanelRows ? o1 - o : kPanelRows;
            if (te - tb > 1) {
                f16_panel_dot_batched(batched, in.x + size_t(tb) * n_in, panel, te - tb, n_in);
                for (int t = tb; t < te; t++) {
                    float* row = out + size_t(t) * n_out + o;
                    const float* rt = batched + (t - tb) * kPanelRows;
                    for (int k = 0; k < n; k++) row[k] = linear.bias ? rt[k] + linear.bias[o + k] : rt[k];
                }
                continue;
            }
            for (int t = tb; t < te; t++) {
                f16_panel_dot(r, in.x + size_t(t) * n_in, panel, n_in);
                float* row = out + size_t(t) * n_out + o;
                for (int k = 0; k < n; k++) row[k] = linear.bias ? r[k] + linear.bias[o + k] : r[k];
            }
        }
    }
}

}  // namespace

extern const BlockFormat kF16 = {
    "F16", 1, 2, &f16_storage_bytes, &f16_store_rows, &f16_file_rows, &f16_dequantize_row, &f16_multiply};
extern const BlockFormat kQ8_0 = legacy_format<Q8_0>("Q8_0");
extern const BlockFormat kQ4_0 = legacy_format<Q4_0>("Q4_0");
extern const BlockFormat kQ4_1 = legacy_format<Q4_1>("Q4_1");
extern const BlockFormat kQ5_0 = legacy_format<Q5_0>("Q5_0");
extern const BlockFormat kQ5_1 = legacy_format<Q5_1>("Q5_1");

}  // namespace gpt2
