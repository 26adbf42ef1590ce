// Q4_K, Q5_K and Q6_K (ggml's K-quants: super-blocks of 256 values) as Linear storage (block_formats.h).
//
// Storage: the rows are grouped in panels of kPanelRows = 4 (a last, partial panel is padded with zero rows),
// and each panel holds, for each super-block of 256 columns in order, one panel block: the 4 rows' super-blocks
// of those columns interleaved, so that a GEMV reads each matrix as one sequential stream and works out the
// scales of 4 rows at once (f32x4). At load, d and dmin are widened from fp16 to fp32 and the 6-bit scales and
// mins unpacked to bytes; the quants keep their bits (Q6_K: re-packed), regrouped in row pairs: every 8-byte
// load holds 4 values of row 2p then the same 4 of row 2p + 1 (pair_offset), so that one madd with 4
// activations loaded twice gives both rows' sums in their own halves and 2 shuffles finish 4 rows' sums.
//   Q4_K, 608 bytes (the file: 4 x 144): f32 d[4]; f32 dmin[4]; u8 scale[8][4]; u8 min[8][4] ([sub-block][row]);
//       then for each 64-value chunk c the file's qs bytes 32c .. 32c + 31 of the 4 rows (low nibbles: values
//       64c.., high nibbles: values 64c + 32..), in row pairs.
//   Q5_K, 736 bytes (4 x 176): as Q4_K with the file's qh (bit j of byte l: bit 4 of value 32j + l) of the 4
//       rows, in row pairs, between the mins and the qs.
//   Q6_K, 848 bytes (4 x 210): f32 d[4]; i8 scale[16][4]; then for each 32-value block 24 bytes a row: q - 32
//       as 6-bit two's complement fields that arithmetic shifts extract without masks (Q6K::pair_at).
// So the storage is 5.6 % (Q4_K), 4.5 % (Q5_K) and 1 % (Q6_K) larger than the file.
//
// Products: the weights' quants are widened to int16 lanes (8 bytes at once, then masks and shifts) and
// multiplied with the activations' int16 lanes in int32 (madd), exactly; a batched product takes each panel's
// quants apart once per block of tokens (unpack_panel) and widens the bytes per token. Each 32-value activation
// block b (its own scale dx[b] and sum xsum[b], quantize_activation_blocks) then joins its output in one fixed
// order, for 4 rows at once:
//   Q4_K, Q5_K: y = d * scale * q - dmin * min per sub-block of 32, so per super-block
//       sum_d += dx[b] * float(scale * sum of q * xq), sum_m += dx[b] * float(min * xsum[b]) for its 8 blocks in
//       order, then out += d * sum_d - dmin * sum_m;
//   Q6_K: y = d * scale * (q - 32) per sub-block of 16, so per super-block
//       sum += dx[b] * float(scale_0 * sum_0 + scale_1 * sum_1) for its 8 blocks (two sub-blocks each, with
//       q - 32 in the lanes; |scale_0 * sum_0 + scale_1 * sum_1| <= 2 * 128 * 16 * 32 * 127 < 2^24), then
//       out += d * sum.
// Every integer there is below 2^24, so exact as a float, and the lanes of the 4 rows never mix: a gemm row
// equals the gemv, and any split of the outputs (at multiples of kPanelRows) or tokens gives the same bits.
#include "kernels/block_formats_k.h"

#include <cassert>
#include <cstring>
#include <type_traits>

#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace gpt2 {

namespace {

using simd::f32x4;
using simd::i16x8;
using simd::i32x4;
using simd::load;
using simd::madd;
using simd::u8x16;
typedef uint64_t u64x2 __attribute__((vector_size(16)));

constexpr int kSuperBlock = 256;                                      // values per super-block
constexpr int kBlocksPerSuperBlock = kSuperBlock / kActivationBlock;  // 8
constexpr int kTokenBlock = 64;  // tokens that reuse one panel from L1 in a batched product

// ---- SIMD helpers ----

inline f32x4 splat(float v) { return f32x4{v, v, v, v}; }
inline i16x8 splat16(int16_t v) { return i16x8{v, v, v, v, v, v, v, v}; }

// The 4 int16 values x[0..3] in both halves: v128.load64_splat in wasm, movq + punpcklqdq natively.
inline i16x8 load4_twice(const int16_t* x) {
#if defined(__wasm_simd128__)
    return (i16x8)wasm_v128_load64_splat(x);
#else
    uint64_t bits;
    std::memcpy(&bits, x, sizeof bits);
    return (i16x8)(u64x2{bits, bits});
#endif
}

#if defined(__wasm_relaxed_simd__)
// The 4 bytes x[0..3] in all four 32-bit lanes: one v128.load32_splat.
inline simd::i8x16 load4_four_times(const int8_t* x) { return (simd::i8x16)wasm_v128_load32_splat(x); }
#endif

// The row sums of two row pairs' accumulators, rows01 = {row 0, row 0, row 1, row 1} and rows23 likewise:
// {sum of row 0, row 1, row 2, row 3}.
inline i32x4 row_sums(i32x4 rows01, i32x4 rows23) {
    return __builtin_shufflevector(rows01, rows23, 0, 2, 4, 6) + __builtin_shufflevector(rows01, rows23, 1, 3, 5, 7);
}

inline f32x4 to_float(i32x4 v) { return __builtin_convertvector(v, f32x4); }

// 8 signed bytes widened to int32 lanes: bytes 0..3 in *lo, 4..7 in *hi (Q4_K's and Q5_K's 6-bit scales and
// mins are stored as such too: below 64). i16x8.load8x8_s + i32x4.extend_{low,high}_i16x8_s in wasm; natively
// simd::load8x8_s, then each 16-bit lane duplicated into a 32-bit lane and shifted right arithmetically.
inline void widen_bytes(const uint8_t* p, i32x4* lo, i32x4* hi) {
#if defined(__wasm_simd128__)
    const v128_t v = wasm_i16x8_load8x8(p);
    *lo = (i32x4)wasm_i32x4_extend_low_i16x8(v);
    *hi = (i32x4)wasm_i32x4_extend_high_i16x8(v);
#else
    const i16x8 v = simd::load8x8_s(reinterpret_cast<const int8_t*>(p));
    *lo = (i32x4)__builtin_shufflevector(v, v, 0, 0, 1, 1, 2, 2, 3, 3) >> 16;
    *hi = (i32x4)__builtin_shufflevector(v, v, 4, 4, 5, 5, 6, 6, 7, 7) >> 16;
#endif
}

// float(a * b), exact for |a * b| < 2^24. In wasm one i32x4.mul, then the conversion (clang turns a conversion
// of widened bytes into lane-by-lane code); natively, where SSE2 has no 32-bit multiply, the product of the
// exact conversions.
inline f32x4 product_float(i32x4 a, i32x4 b) {
#if defined(__wasm_simd128__)
    return to_float(a * b);
#else
    return to_float(a) * to_float(b);
#endif
}

// float(a * b + c * d), exact for |a * b| + |c * d| < 2^24: in wasm in int32, then one conversion; natively (no
// 32-bit multiply in SSE2) from the exact conversions, whose products and sum are exact too.
inline f32x4 products_float(i32x4 a, i32x4 b, i32x4 c, i32x4 d) {
#if defined(__wasm_simd128__)
    return to_float(a * b + c * d);
#else
    return to_float(a) * to_float(b) + to_float(c) * to_float(d);
#endif
}

// v shifted left by S bits (right by -S when S is negative)
template <int S>
inline i16x8 shift_left(i16x8 v) {
    if constexpr (S >= 0) return v << S;
    else return v >> -S;
}

// Keeps the next loop rolled: clang unrolls the kernels' loops into more live values than V8 has registers for,
// and V8's spills cost more than the loop (measured: 1.6x).
// kUnrollTwice: two iterations at a time, which lets the loads use constant offsets and still fits.
#if defined(__clang__)
#define kNoUnroll _Pragma("clang loop unroll(disable)")
#define kUnrollTwice _Pragma("clang loop unroll_count(2)")
#else
#define kNoUnroll _Pragma("GCC unroll 1")
#define kUnrollTwice _Pragma("GCC unroll 2")
#endif

// ---- reading the file's blocks ----

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j from Q4_K/Q5_K's 12 packed bytes.
inline void scale_min_k4(const uint8_t* q, int j, uint8_t* scale, uint8_t* min) {
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = uint8_t((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        *min = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

inline void store_f32(uint8_t* p, float v) { std::memcpy(p, &v, sizeof v); }
inline float load_f32(const uint8_t* p) { return load<float>(p); }

// ---- panels ----

// Panel blocks of a matrix: panel p, super-block s at (p * n_super_blocks + s) * block_bytes.
inline size_t panel_count(int n_out) { return size_t((n_out + kPanelRows - 1) / kPanelRows); }

template <typename Format>
uint64_t storage_bytes(int n_out, int n_in) {
    return uint64_t(panel_count(n_out)) * uint64_t(n_in / kSuperBlock) * Format::kPanelBlockBytes;
}

// Fills the panel blocks of rows [row0, row0 + n_rows): whole panels, since every range but the last starts
// and ends at one; rows past n_out are zero (d = 0 makes their lanes 0).
template <typename Format>
void store_rows(void* storage, int n_out, int n_in, int row0, int n_rows, const uint8_t* file_rows) {
    const int n_sb = n_in / kSuperBlock;
    const size_t file_row_bytes = size_t(n_sb) * Format::kFileBlockBytes;
    const int row1 = row0 + n_rows;
    for (int p0 = row0 - row0 % kPanelRows; p0 < row1; p0 += kPanelRows) {
        uint8_t* panel = static_cast<uint8_t*>(storage) + size_t(p0 / kPanelRows) * n_sb * Format::kPanelBlockBytes;
        for (int s = 0; s < n_sb; s++) {
            uint8_t* block = panel + size_t(s) * Format::kPanelBlockBytes;
            std::memset(block, 0, Format::kPanelBlockBytes);
            for (int r = 0; r < kPanelRows; r++) {
                const int row = p0 + r;
                if (row < row0 || row >= row1 || row >= n_out) continue;
                Format::store(block, r,
                              file_rows + size_t(row - row0) * file_row_bytes + size_t(s) * Format::kFileBlockBytes);
            }
        }
    }
}

// store_rows's inverse (block_formats.h's file_rows): each row's super-blocks as the file had them.
template <typename Format>
void file_rows(uint8_t* file_rows, const void* storage, int n_out, int n_in, int row0, int n_rows) {
    (void)n_out;
    const int n_sb = n_in / kSuperBlock;
    for (int i = 0; i < n_rows; i++) {
        const int row = row0 + i;
        const uint8_t* panel = static_cast<const uint8_t*>(storage) +
                               size_t(row / kPanelRows) * n_sb * Format::kPanelBlockBytes;
        for (int s = 0; s < n_sb; s++)
            Format::unstore(file_rows + (size_t(i) * n_sb + s) * Format::kFileBlockBytes,
                            panel + size_t(s) * Format::kPanelBlockBytes, row % kPanelRows);
    }
}

template <typename Format>
void dequantize_row(float* out, const void* storage, int n_out, int n_in, int row) {
    (void)n_out;
    const int n_sb = n_in / kSuperBlock;
    const uint8_t* panel = static_cast<const uint8_t*>(storage) +
                           size_t(row / kPanelRows) * n_sb * Format::kPanelBlockBytes;
    for (int s = 0; s < n_sb; s++)
        Format::dequantize(out + size_t(s) * kSuperBlock, panel + size_t(s) * Format::kPanelBlockBytes,
                           row % kPanelRows);
}

// Whether a format's batched product unpacks each panel's quants to bytes once per block of tokens (its
// unpack_panel and unpacked_panel_dot, Format::kUnpackedVectors u8x16 a super-block): all three, in each build.
template <typename Format, typename = void>
struct UnpacksQuants : std::false_type {};
template <typename Format>
struct UnpacksQuants<Format, std::void_t<decltype(Format::kUnpackedVectors)>> : std::true_type {};

// Super-blocks unpacked at a time (a panel's bytes on the stack: 32 KiB; GPT-2 1.5B's widest rows have 25).
constexpr int kMaxUnpackedSuperBlocks = 32;

// multiply (block_formats.h): every panel touching [o0, o0 + n_rows) against every token, a block of tokens
// at a time so that a panel is read from memory once per block, the panels in two streams (two_stream_panel,
// kernels.h).
template <typename Format>
void multiply(float* out, const Linear& linear, const LinearInput& in, int t0, int n_tok, int o0, int n_rows) {
    assert(o0 % kPanelRows == 0 && "an output range starts at a panel");
    const int n_in = linear.n_in, n_out = linear.n_out, n_sb = n_in / kSuperBlock;
    const size_t n_blocks = size_t(n_in / kActivationBlock);
    const size_t panel_bytes = size_t(n_sb) * Format::kPanelBlockBytes;
    const uint8_t* w = static_cast<const uint8_t*>(linear.weight);
    const int o1 = o0 + n_rows, t1 = t0 + n_tok;
    const int n_panels = (n_rows + kPanelRows - 1) / kPanelRows;
    for (int tb = t0; tb < t1; tb += kTokenBlock) {
        const int tb1 = tb + kTokenBlock < t1 ? tb + kTokenBlock : t1;
        for (int i = 0; i < n_panels; i++) {
            const int o = o0 + kPanelRows * two_stream_panel(i, n_panels);
            const uint8_t* panel = w + size_t(o / kPanelRows) * panel_bytes;
            const int rows = o1 - o < kPanelRows ? o1 - o : kPanelRows;
            if constexpr (UnpacksQuants<Format>::value) {
                if (n_tok > 1) {  // (a split product gives each part at least 2 tokens when it has more: forward.cpp)
                    // up to kMaxUnpackedSuperBlocks super-blocks of the panel at a time, each token's sum carried
                    // from one stretch to the next in super-block order
                    u8x16 quants[kMaxUnpackedSuperBlocks * Format::kUnpackedVectors];
                    f32x4 sums[kTokenBlock];
                    for (int s0 = 0; s0 < n_sb; s0 += kMaxUnpackedSuperBlocks) {
                        const int s1 = s0 + kMaxUnpackedSuperBlocks < n_sb ? s0 + kMaxUnpackedSuperBlocks : n_sb;
                        Format::unpack_panel(quants, panel, s0, s1);
                        for (int t = tb; t < tb1; t++)
                            sums[t - tb] = Format::unpacked_panel_dot(s0 == 0 ? f32x4{0, 0, 0, 0} : sums[t - tb], panel,
                                                                      quants, in.xq + size_t(t) * n_in,
                                                                      in.xq_scale + size_t(t) * n_blocks,
                                                                      in.xq_sum + size_t(t) * n_blocks, s0, s1, n_in);
                    }
                    for (int t = tb; t < tb1; t++) {
                        const f32x4 r = sums[t - tb];
                        float* out_t = out + size_t(t) * n_out + o;
                        for (int k = 0; k < rows; k++) out_t[k] = linear.bias ? r[k] + linear.bias[o + k] : r[k];
                    }
                    continue;
                }
            }
            for (int t = tb; t < tb1; t++) {
                const f32x4 r = Format::panel_dot(panel, in.xq + size_t(t) * n_in, in.xq_scale + size_t(t) * n_blocks,
                                                  in.xq_sum + size_t(t) * n_blocks, n_sb);
                float* out_t = out + size_t(t) * n_out + o;
                for (int k = 0; k < rows; k++) out_t[k] = linear.bias ? r[k] + linear.bias[o + k] : r[k];
            }
        }
    }
}

// ---- Q4_K and Q5_K ----

// Where a row's quants are in a panel block of the row-pair layout: step j (values 4j .. 4j + 3 of a 32-value
// stretch) of row r is 4 bytes of the 8 that its row pair (r / 2) holds for that step, so that one 8-byte load
// widens to the lanes {row 2p: 4 values, row 2p + 1: 4 values} and a madd with the activations loaded twice
// (load4_twice) gives each row's sums in its own half.
inline size_t pair_offset(int j, int r) { return size_t((j * 2 + r / 2) * 8 + (r % 2) * 4); }

// The parts Q4_K and Q5_K share: d, dmin, scales and mins; HighBits: Q5_K's qh.
template <bool HighBits>
struct KQuant {
    static constexpr size_t kFileBlockBytes = HighBits ? 176 : 144;
    static constexpr size_t kFileScales = 4, kFileQh = 16, kFileQs = HighBits ? 48 : 16;  // offsets in a file block
    static constexpr size_t kD = 0, kDmin = 16, kScale = 32, kMin = 64, kQh = 96;         // offsets in a panel block
    static constexpr size_t kQs = HighBits ? kQh + kPanelRows * 32 : kQh;
    static constexpr size_t kChunkBytes = kPanelRows * 32;  // the qs of one 64-value chunk
    static constexpr size_t kPanelBlockBytes = kQs + 4 * kChunkBytes;

    static void store(uint8_t* block, int r, const uint8_t* file) {
        store_f32(block + kD + 4 * r, f16_at(file));
        store_f32(block + kDmin + 4 * r, f16_at(file + 2));
        for (int j = 0; j < 8; j++)
            scale_min_k4(file + kFileScales, j, block + kScale + 4 * j + r, block + kMin + 4 * j + r);
        for (int j = 0; j < 8; j++) {
            if (HighBits) std::memcpy(block + kQh + pair_offset(j, r), file + kFileQh + 4 * j, 4);
            for (int c = 0; c < 4; c++)
                std::memcpy(block + kQs + c * kChunkBytes + pair_offset(j, r), file + kFileQs + 32 * c + 4 * j, 4);
        }
    }

    // store's inverse: the file block of row r, its 12 bytes of scales and mins packed back as get_scale_min_k4
    // reads them.
    static void unstore(uint8_t* file, const uint8_t* block, int r) {
        put_f16(file, load_f32(block + kD + 4 * r));
        put_f16(file + 2, load_f32(block + kDmin + 4 * r));
        const auto scale = [&](int j) { return block[kScale + 4 * j + r]; };
        const auto min = [&](int j) { return block[kMin + 4 * j + r]; };
        uint8_t* q = file + kFileScales;
        for (int j = 0; j < 4; j++) {
            q[j] = uint8_t(scale(j) | (scale(j + 4) >> 4) << 6);
            q[j + 4] = uint8_t(min(j) | (min(j + 4) >> 4) << 6);
            q[j + 8] = uint8_t((scale(j + 4) & 0x0F) | (min(j + 4) & 0x0F) << 4);
        }
        for (int j = 0; j < 8; j++) {
            if (HighBits) std::memcpy(file + kFileQh + 4 * j, block + kQh + pair_offset(j, r), 4);
            for (int c = 0; c < 4; c++)
                std::memcpy(file + kFileQs + 32 * c + 4 * j, block + kQs + c * kChunkBytes + pair_offset(j, r), 4);
        }
    }

    // ggml's dequantize_row_q4_K / q5_K: y = d1 * q - m1 with d1 = d * scale, m1 = dmin * min.
    static void dequantize(float* y, const uint8_t* block, int r) {
        const float d = load_f32(block + kD + 4 * r), dmin = load_f32(block + kDmin + 4 * r);
        for (int c = 0; c < 4; c++) {
            const float d1 = d * float(block[kScale + 4 * (2 * c) + r]),
                        m1 = dmin * float(block[kMin + 4 * (2 * c) + r]);
            const float d2 = d * float(block[kScale + 4 * (2 * c + 1) + r]),
                        m2 = dmin * float(block[kMin + 4 * (2 * c + 1) + r]);
            for (int l = 0; l < 32; l++) {
                const uint8_t q = block[kQs + c * kChunkBytes + pair_offset(l / 4, r) + l % 4];
                int high_a = 0, high_b = 0;
                if (HighBits) {
                    const uint8_t h = block[kQh + pair_offset(l / 4, r) + l % 4];
                    high_a = (h >> (2 * c)) & 1 ? 16 : 0;
                    high_b = (h >> (2 * c + 1)) & 1 ? 16 : 0;
                }
                y[64 * c + l] = d1 * float((q & 0x0F) + high_a) - m1;
                y[64 * c + 32 + l] = d2 * float((q >> 4) + high_b) - m2;
            }
        }
    }

    // Step j's quants of chunk C as bytes: *qa of sub-block 2C, *qb of sub-block 2C + 1, each the 16 bytes of the 4
    // rows (pair_offset(j, 2) follows pair_offset(j, 0): rows 0, 1, 2, 3, 4 values each). Shifts are 16-bit (SSE2
    // has no 8-bit shift); the masks drop what they carry across bytes.
    template <int C>
    static void step_bytes(const uint8_t* block, int j, u8x16* qa, u8x16* qb) {
        const u8x16 v = load<u8x16>(block + kQs + C * kChunkBytes + pair_offset(j, 0));
        *qa = v & 0x0F, *qb = (u8x16)((i16x8)v >> 4) & 0x0F;
        if constexpr (HighBits) {
            const u8x16 h = load<u8x16>(block + kQh + pair_offset(j, 0));
            *qa |= (u8x16)shift_left<4 - 2 * C>((i16x8)h) & 0x10;
            *qb |= (u8x16)shift_left<3 - 2 * C>((i16x8)h) & 0x10;
        }
    }

    // The batched product's form (multiply): a panel's quants as bytes, kUnpackedVectors a super-block (chunk C's
    // step j at 2 * (8C + j), its qa then qb), unpacked once for a block of tokens; panel_dot on them sums the same
    // integers and adds the same terms in the same order, so it gives the same bits.
    static constexpr int kUnpackedVectors = 64;  // u8x16 per super-block
    // Super-blocks [s0, s1) of a panel.
    static void unpack_panel(u8x16* quants, const uint8_t* panel, int s0, int s1) {
        for (int s = s0; s < s1; s++, quants += kUnpackedVectors) {
            const uint8_t* block = panel + size_t(s) * kPanelBlockBytes;
            for (int j = 0; j < 8; j++) {
                step_bytes<0>(block, j, &quants[2 * j], &quants[2 * j + 1]);
                step_bytes<1>(block, j, &quants[16 + 2 * j], &quants[16 + 2 * j + 1]);
                step_bytes<2>(block, j, &quants[32 + 2 * j], &quants[32 + 2 * j + 1]);
                step_bytes<3>(block, j, &quants[48 + 2 * j], &quants[48 + 2 * j + 1]);
            }
        }
    }

#if defined(__wasm_relaxed_simd__)
    // The relaxed-SIMD build's chunk_sums: the activations as bytes (x8, the super-block's in order), and per
    // step the 16 bytes of the 4 rows as quants on bytes (step_bytes) against 4 activations repeated 4 times, so
    // that one 8-bit dot product gives each row's sum in its own lane. The same integers as below.
    //
    // The sums of chunk C against the quants that quants(j, &qa, &qb) gives for each step.
    template <int C, typename Quants>
    static void chunk_sums_of(const int8_t* x8, Quants quants, i32x4* sum_a, i32x4* sum_b) {
        i32x4 a = {}, b = {};
        kUnrollTwice for (int j = 0; j < 8; j++) {
            const simd::i8x16 xa = load4_four_times(x8 + 64 * C + 4 * j),
                              xb = load4_four_times(x8 + 64 * C + 32 + 4 * j);
            u8x16 qa, qb;
            quants(j, &qa, &qb);
            a = simd::dot_i8_u7(xa, qa, a);
            b = simd::dot_i8_u7(xb, qb, b);
        }
        *sum_a = a;
        *sum_b = b;
    }
    template <int C>
    static void chunk_sums(const uint8_t* block, const int8_t* x8, i32x4* sum_a, i32x4* sum_b) {
        chunk_sums_of<C>(
            x8, [&](int j, u8x16* qa, u8x16* qb) { step_bytes<C>(block, j, qa, qb); }, sum_a, sum_b);
    }

    // panel_dot's terms of super-blocks [s0, s1) added to out, the quants those of unpack_panel(.., s0, s1).
    static f32x4 unpacked_panel_dot(f32x4 out, const uint8_t* panel, const u8x16* quants, const int16_t* xq,
                                    const float* dx, const int32_t* xsum, int s0, int s1, int /*n_in*/) {
        return panel_dot_with(
            out, panel, xq, dx, xsum, s0, s1, [&](auto chunk_index, int s, const int8_t* x, i32x4* ia, i32x4* ib) {
                constexpr int C = decltype(chunk_index)::value;
                const u8x16* q = quants + (s - s0) * kUnpackedVectors + 16 * C;
                chunk_sums_of<C>(
                    x, [&](int j, u8x16* qa, u8x16* qb) { *qa = q[2 * j], *qb = q[2 * j + 1]; }, ia, ib);
            });
    }
    using XInput = int8_t;
#else
    // The sums of chunk C (sub-blocks 2C and 2C + 1) against the quants that quants(j, q) gives for each step as
    // int16 lanes, q = {qa rows 0-1, qa rows 2-3, qb rows 0-1, qb rows 2-3} (a row pair's 4 values each): the 4 rows'
    // integer sums of q * xq for both.
    template <int C, typename Quants>
    static void chunk_sums_of(const int16_t* xq, Quants quants, i32x4* sum_a, i32x4* sum_b) {
        i32x4 a01 = {}, a23 = {}, b01 = {}, b23 = {};  // {row 2p, row 2p, row 2p + 1, row 2p + 1} partial sums
        kUnrollTwice for (int j = 0; j < 8; j++) {
            const i16x8 xa = load4_twice(xq + 64 * C + 4 * j), xb = load4_twice(xq + 64 * C + 32 + 4 * j);
            i16x8 q[4];
            quants(j, q);
            a01 += madd(q[0], xa);
            b01 += madd(q[2], xb);
            a23 += madd(q[1], xa);
            b23 += madd(q[3], xb);
        }
        *sum_a = row_sums(a01, a23);
        *sum_b = row_sums(b01, b23);
    }
    // Chunk C of a panel block. C is a constant so that Q5_K's shifts are immediates.
    template <int C>
    static void chunk_sums(const uint8_t* block, const int16_t* xq, i32x4* sum_a, i32x4* sum_b) {
        chunk_sums_of<C>(
            xq,
            [&](int j, i16x8 q[4]) {
                if constexpr (HighBits) {
                    // the 16 bytes of the 4 rows get their 5th bits on bytes, 16 values an operation, then are
                    // widened
                    u8x16 qa, qb;
                    step_bytes<C>(block, j, &qa, &qb);
                    simd::widen_u8(qa, &q[0], &q[1]);
                    simd::widen_u8(qb, &q[2], &q[3]);
                } else {
                    const uint8_t* qs = block + kQs + C * kChunkBytes;
                    const i16x8 v01 = simd::load8x8_u(qs + pair_offset(j, 0)),
                                v23 = simd::load8x8_u(qs + pair_offset(j, 2));
                    q[0] = v01 & splat16(0x0F), q[1] = v23 & splat16(0x0F), q[2] = v01 >> 4, q[3] = v23 >> 4;
                }
            },
            sum_a, sum_b);
    }
    // panel_dot's terms of super-blocks [s0, s1) added to out, the quants those of unpack_panel(.., s0, s1), each 8
    // bytes (a row pair's 4 values) widened in one v128.load8x8_u.
    static f32x4 unpacked_panel_dot(f32x4 out, const uint8_t* panel, const u8x16* quants, const int16_t* xq,
                                    const float* dx, const int32_t* xsum, int s0, int s1, int /*n_in*/) {
        return panel_dot_with(out, panel, xq, dx, xsum, s0, s1,
                              [&](auto chunk_index, int s, const int16_t* x, i32x4* ia, i32x4* ib) {
                                  constexpr int C = decltype(chunk_index)::value;
                                  const u8x16* steps = quants + (s - s0) * kUnpackedVectors + 16 * C;
                                  chunk_sums_of<C>(
                                      x,
                                      [&](int j, i16x8 q[4]) {
                                          const uint8_t* qa = reinterpret_cast<const uint8_t*>(steps + 2 * j);
                                          const uint8_t* qb = reinterpret_cast<const uint8_t*>(steps + 2 * j + 1);
                                          q[0] = simd::load8x8_u(qa), q[1] = simd::load8x8_u(qa + 8);
                                          q[2] = simd::load8x8_u(qb), q[3] = simd::load8x8_u(qb + 8);
                                      },
                                      ia, ib);
                              });
    }
    using XInput = int16_t;
#endif

    // Sub-block j's terms: sum_d += dx * float(scale * isum), sum_m += dx * float(min * xsum).
    static void add_block(f32x4* sum_d, f32x4* sum_m, i32x4 scale, i32x4 min, i32x4 isum, float dx, int32_t xsum) {
        const f32x4 dxv = splat(dx);
        *sum_d += dxv * product_float(scale, isum);
        *sum_m += dxv * product_float(min, i32x4{xsum, xsum, xsum, xsum});
    }

    // Chunk C's terms, from its integer sums ia and ib.
    template <int C>
    static void chunk(f32x4* sum_d, f32x4* sum_m, const uint8_t* block, i32x4 ia, i32x4 ib, const float* dx,
                      const int32_t* xsum) {
        i32x4 scale_a, scale_b, min_a, min_b;
        widen_bytes(block + kScale + 8 * C, &scale_a, &scale_b);
        widen_bytes(block + kMin + 8 * C, &min_a, &min_b);
        add_block(sum_d, sum_m, scale_a, min_a, ia, dx[2 * C], xsum[2 * C]);
        add_block(sum_d, sum_m, scale_b, min_b, ib, dx[2 * C + 1], xsum[2 * C + 1]);
    }

    // The 4 rows of a panel against one token, super-blocks [s0, s1) added to out in order: xq (n_sb * 256), dx and
    // xsum (n_sb * 8); sums(C, s, x, &ia, &ib) gives chunk C's integer sums of super-block s (C as a
    // std::integral_constant).
    template <typename Sums>
    static f32x4 panel_dot_with(f32x4 out, const uint8_t* panel, const int16_t* xq, const float* dx,
                                const int32_t* xsum, int s0, int s1, Sums sums) {
        for (int s = s0; s < s1; s++) {
            const uint8_t* block = panel + size_t(s) * kPanelBlockBytes;
#if defined(__wasm_relaxed_simd__)
            // the super-block's activations as bytes in order (prepare_block_activations)
            const int8_t* x = reinterpret_cast<const int8_t*>(xq) + s * kSuperBlock;
#else
            const int16_t* x = xq + s * kSuperBlock;
#endif
            const float* d_x = dx + s * kBlocksPerSuperBlock;
            const int32_t* s_x = xsum + s * kBlocksPerSuperBlock;
            f32x4 sum_d = {0, 0, 0, 0}, sum_m = {0, 0, 0, 0};
            i32x4 ia, ib;
            sums(std::integral_constant<int, 0>(), s, x, &ia, &ib);
            chunk<0>(&sum_d, &sum_m, block, ia, ib, d_x, s_x);
            sums(std::integral_constant<int, 1>(), s, x, &ia, &ib);
            chunk<1>(&sum_d, &sum_m, block, ia, ib, d_x, s_x);
            sums(std::integral_constant<int, 2>(), s, x, &ia, &ib);
            chunk<2>(&sum_d, &sum_m, block, ia, ib, d_x, s_x);
            sums(std::integral_constant<int, 3>(), s, x, &ia, &ib);
            chunk<3>(&sum_d, &sum_m, block, ia, ib, d_x, s_x);
            out += load<f32x4>(block + kD) * sum_d - load<f32x4>(block + kDmin) * sum_m;
        }
        return out;
    }
    static f32x4 panel_dot(const uint8_t* panel, const int16_t* xq, const float* dx, const int32_t* xsum, int n_sb) {
        return panel_dot_with(f32x4{0, 0, 0, 0}, panel, xq, dx, xsum, 0, n_sb,
                              [&](auto chunk_index, int s, const XInput* x, i32x4* ia, i32x4* ib) {
                                  chunk_sums<decltype(chunk_index)::value>(panel + size_t(s) * kPanelBlockBytes, x, ia,
                                                                           ib);
                              });
    }
};

// ---- Q6_K ----

struct Q6K {
    static constexpr size_t kFileBlockBytes = 210;
    static constexpr size_t kFileQl = 0, kFileQh = 128, kFileScales = 192, kFileD = 208;  // offsets in a file block
    static constexpr size_t kD = 0, kScale = 16, kQuants = 80;                            // offsets in a panel block
    static constexpr size_t kPairBytes = 24;  // 4 values of 4 stretches of a row pair: 16 bytes of lanes, 8 bytes
    static constexpr size_t kPanelBlockBytes = kQuants + kBlocksPerSuperBlock * 4 * kPairBytes;

    // Value v (0..255) of a file block, 0..63 (ggml: the low 4 bits from ql, the top 2 from qh).
    static int file_value(const uint8_t* file, int v) {
        const int half = v / 128, k = v % 128 / 32, l = v % 32;
        const uint8_t ql = file[kFileQl + 64 * half + 32 * (k % 2) + l];
        const uint8_t qh = file[kFileQh + 32 * half + l];
        return ((k < 2 ? ql & 0x0F : ql >> 4) | (((qh >> (2 * k)) & 3) << 4));
    }

    // The 6-bit two's complement u = q ^ 32 of q - 32 is stored for the 32 values of a block in 24 bytes per
    // row: for value k < 8 of each 8-value stretch, an int16 lane holding u of value k in bits 10-15, of value
    // 8 + k in bits 4-9 and the low 4 bits of value 16 + k in bits 0-3, and a byte holding u of value 24 + k in
    // bits 2-7 and the top 2 bits of value 16 + k in bits 0-1; so arithmetic shifts give q - 32 without masks
    // (see panel_dot). The lanes and bytes of values k = 4h .. 4h + 3 (h = 0, 1) of a row pair are together:
    // 16 bytes of lanes {row 2p: 4 values, row 2p + 1: 4 values} then 8 bytes, as pair_offset does for Q4_K.
    static size_t pair_at(int b, int h, int r) { return kQuants + size_t((b * 2 + h) * 2 + r / 2) * kPairBytes; }
    static size_t lane_at(int b, int k, int r) { return pair_at(b, k / 4, r) + size_t(2 * ((r % 2) * 4 + k % 4)); }
    static size_t byte_at(int b, int k, int r) { return pair_at(b, k / 4, r) + 16 + size_t((r % 2) * 4 + k % 4); }

    static void store(uint8_t* block, int r, const uint8_t* file) {
        store_f32(block + kD + 4 * r, f16_at(file + kFileD));
        for (int j = 0; j < 16; j++) block[kScale + 4 * j + r] = file[kFileScales + j];
        for (int b = 0; b < kBlocksPerSuperBlock; b++) {
            for (int k = 0; k < 8; k++) {
                int u[4];
                for (int f = 0; f < 4; f++) u[f] = file_value(file, 32 * b + 8 * f + k) ^ 32;
                const uint16_t lane = uint16_t(u[0] << 10 | u[1] << 4 | (u[2] & 0x0F));
                block[lane_at(b, k, r)] = uint8_t(lane);
                block[lane_at(b, k, r) + 1] = uint8_t(lane >> 8);
                block[byte_at(b, k, r)] = uint8_t(u[3] << 2 | u[2] >> 4);
            }
        }
    }

    // q - 32 of value 8f + k (f < 4, k < 8) of block b of row r: the 6-bit field sign-extended.
    static int stored_value(const uint8_t* block, int b, int f, int k, int r) {
        const int lane = block[lane_at(b, k, r)] | block[lane_at(b, k, r) + 1] << 8, byte = block[byte_at(b, k, r)];
        const int u = f == 0   ? lane >> 10
                      : f == 1 ? (lane >> 4) & 63
                      : f == 2 ? (lane & 15) | (byte & 3) << 4
                               : byte >> 2;
        return u >= 32 ? u - 64 : u;
    }

    // store's inverse: value v's low 4 bits into ql, its top 2 into qh (file_value's places).
    static void unstore(uint8_t* file, const uint8_t* block, int r) {
        std::memset(file, 0, kFileBlockBytes);
        for (int b = 0; b < kBlocksPerSuperBlock; b++)
            for (int f = 0; f < 4; f++)
                for (int k = 0; k < 8; k++) {
                    const int v = 32 * b + 8 * f + k, q = stored_value(block, b, f, k, r) + 32;
                    const int half = v / 128, kk = v % 128 / 32, l = v % 32;
                    file[kFileQl + 64 * half + 32 * (kk % 2) + l] |= uint8_t(kk < 2 ? q & 0x0F : (q & 0x0F) << 4);
                    file[kFileQh + 32 * half + l] |= uint8_t((q >> 4) << (2 * kk));
                }
        for (int j = 0; j < 16; j++) file[kFileScales + j] = block[kScale + 4 * j + r];
        put_f16(file + kFileD, load_f32(block + kD + 4 * r));
    }

    // ggml's dequantize_row_q6_K: y = d * scale * (q - 32), evaluated (d * scale) * (q - 32).
    static void dequantize(float* y, const uint8_t* block, int r) {
        const float d = load_f32(block + kD + 4 * r);
        for (int b = 0; b < kBlocksPerSuperBlock; b++) {
            for (int f = 0; f < 4; f++) {
                const float ds = d * float(int8_t(block[kScale + 4 * (2 * b + f / 2) + r]));
                for (int k = 0; k < 8; k++) y[32 * b + 8 * f + k] = ds * float(stored_value(block, b, f, k, r));
            }
        }
    }

    // The 4 fields of a row pair's stretch at qp (pair_at): q - 32 of values 8f + k, f < 4, for the 4 values k of
    // the stretch, {row 2p: 4 values, row 2p + 1: 4 values}, in int16 lanes by arithmetic shifts.
    static void pair_fields(const uint8_t* qp, i16x8 q[4]) {
        const i16x8 v = load<i16x8>(qp), w = simd::load8x8_s(reinterpret_cast<const int8_t*>(qp + 16));
        q[0] = v >> 10, q[1] = (v << 6) >> 10, q[2] = (v & splat16(0x0F)) | ((w << 14) >> 10), q[3] = w >> 2;
    }

    // Block b's term of the super-block's sum, dx * float(scale_0 * sum_0 + scale_1 * sum_1) for the 4 rows, its
    // quants' fields given by fields(h, p, f) for half h of row pair p (pair_fields' form), against the block's 32
    // activations x and the scales of its two sub-blocks at scale.
    template <typename Fields>
    static f32x4 block_terms(const uint8_t* scale, const int16_t* x, float dx, Fields fields) {
        i32x4 lo01 = {}, lo23 = {}, hi01 = {}, hi23 = {};  // sub-blocks 2b, 2b + 1 of the row pairs
        for (int h = 0; h < 2; h++) {
            const i16x8 x0 = load4_twice(x + 4 * h), x1 = load4_twice(x + 8 + 4 * h), x2 = load4_twice(x + 16 + 4 * h),
                        x3 = load4_twice(x + 24 + 4 * h);
            for (int p = 0; p < 2; p++) {
                i16x8 f[4];
                fields(h, p, f);
                (p ? lo23 : lo01) += madd(f[0], x0) + madd(f[1], x1);
                (p ? hi23 : hi01) += madd(f[2], x2) + madd(f[3], x3);
            }
        }
        i32x4 scale0, scale1;
        widen_bytes(scale, &scale0, &scale1);
        return splat(dx) * products_float(scale0, row_sums(lo01, lo23), scale1, row_sums(hi01, hi23));
    }

    // The 4 rows of a panel against one token, super-blocks [s0, s1) added to out in order: fields(s, b, h, p, f) gives
    // the fields of super-block s's block b, half h, row pair p (block_terms).
    template <typename Fields>
    static f32x4 panel_dot_with(f32x4 out, const uint8_t* panel, const int16_t* xq, const float* dx, int s0, int s1,
                                Fields fields) {
        for (int s = s0; s < s1; s++) {
            const uint8_t* block = panel + size_t(s) * kPanelBlockBytes;
            // block b's scales and activations, advanced a block at a time (so that the loop's loads have constant
            // offsets)
            const uint8_t* scale = block + kScale;
            const int16_t* x = xq + s * kSuperBlock;
            const float* d_x = dx + s * kBlocksPerSuperBlock;
            f32x4 sum = {0, 0, 0, 0};
            kNoUnroll for (int b = 0; b < kBlocksPerSuperBlock; b++) {
                sum += block_terms(scale, x, d_x[b], [&](int h, int p, i16x8 f[4]) { fields(s, b, h, p, f); });
                scale += 2 * kPanelRows;
                x += kActivationBlock;
            }
            out += load<f32x4>(block + kD) * sum;
        }
        return out;
    }
    static f32x4 panel_dot(const uint8_t* panel, const int16_t* xq, const float* dx, const int32_t* xsum, int n_sb) {
        (void)xsum;  // the offset -32 is in the lanes: the sub-blocks of 16 have their own scales
        return panel_dot_with(f32x4{0, 0, 0, 0}, panel, xq, dx, 0, n_sb, [&](int s, int b, int h, int p, i16x8 f[4]) {
            pair_fields(panel + size_t(s) * kPanelBlockBytes + pair_at(b, h, 2 * p), f);
        });
    }

#if defined(__wasm_relaxed_simd__)
    // The relaxed-SIMD build's batched product (multiply, for n_tok > 1, when prepare_block_activations gives the
    // activations as bytes in order, each row followed by its blocks' first-half sums): a panel's quants unpacked
    // to bytes q = (q - 32) + 32 in 0..63 once per block of tokens, kUnpackedVectors a super-block, vector
    // 8b + 4h + f holding values 8f + 4h .. 8f + 4h + 3 of block b for rows 0..3 (4 bytes each); then per 16-value
    // sub-block one 8-bit dot product a step against the 4 activations repeated, each row's sum in its own lane,
    // minus 32 times the activations' sum: panel_dot's integers, and its float terms in its order, so its bits.
    static constexpr int kUnpackedVectors = 64;
    static void unpack_panel(u8x16* quants, const uint8_t* panel, int s0, int s1) {
        for (int s = s0; s < s1; s++) {
            const uint8_t* q = panel + size_t(s) * kPanelBlockBytes + pair_at(0, 0, 0);
            for (int b = 0; b < kBlocksPerSuperBlock; b++, q += pair_at(1, 0, 0) - pair_at(0, 0, 0))
                for (int h = 0; h < 2; h++) {
                    i16x8 fields[2][4];  // [row pair][f]: q - 32 of values 8f + 4h .., {row 2p: 4, row 2p + 1: 4}
                    for (int p = 0; p < 2; p++) pair_fields(q + (pair_at(0, h, 2 * p) - pair_at(0, 0, 0)), fields[p]);
                    for (int f = 0; f < 4; f++) *quants++ = (u8x16)(simd::narrow(fields[0][f], fields[1][f]) + 32);
                }
        }
    }
    static f32x4 unpacked_panel_dot(f32x4 out, const uint8_t* panel, const u8x16* quants, const int16_t* xq,
                                    const float* dx, const int32_t* xsum, int s0, int s1, int n_in) {
        const int8_t* x8 = reinterpret_cast<const int8_t*>(xq);
        const uint8_t* first_half_sums = reinterpret_cast<const uint8_t*>(xq) + n_in;  // int32 per block
        for (int s = s0; s < s1; s++) {
            const uint8_t* block = panel + size_t(s) * kPanelBlockBytes;
            const uint8_t* scale = block + kScale;
            f32x4 sum = {0, 0, 0, 0};
            kNoUnroll for (int b = 0; b < kBlocksPerSuperBlock; b++, quants += 8, scale += 2 * kPanelRows) {
                const int8_t* x = x8 + s * kSuperBlock + b * kActivationBlock;
                const int block_index = s * kBlocksPerSuperBlock + b;
                i32x4 lo = {}, hi = {};  // sub-blocks 2b and 2b + 1, a row a lane
                for (int h = 0; h < 2; h++) {
                    lo = simd::dot_i8_u7(load4_four_times(x + 4 * h), quants[4 * h], lo);
                    lo = simd::dot_i8_u7(load4_four_times(x + 8 + 4 * h), quants[4 * h + 1], lo);
                    hi = simd::dot_i8_u7(load4_four_times(x + 16 + 4 * h), quants[4 * h + 2], hi);
                    hi = simd::dot_i8_u7(load4_four_times(x + 24 + 4 * h), quants[4 * h + 3], hi);
                }
                const int32_t first = load<int32_t>(first_half_sums + 4 * size_t(block_index));
                const int32_t second = xsum[block_index] - first;
                lo -= 32 * first;
                hi -= 32 * second;
                i32x4 scale0, scale1;
                widen_bytes(scale, &scale0, &scale1);
                sum += splat(dx[block_index]) * products_float(scale0, lo, scale1, hi);
            }
            out += load<f32x4>(block + kD) * sum;
        }
        return out;
    }
#else
    // SIMD128's batched product (multiply, for n_tok > 1): a panel's fields q - 32 (pair_fields) as bytes once per
    // block of tokens, kUnpackedVectors a super-block: block b's half h, row pair p at 32 * (4b + 2h + p), its 4
    // fields of 8 values each; then per token each field widened in one v128.load8x8_s, where panel_dot takes them
    // apart with shifts for every token: panel_dot's integers, and its float terms in its order, so its bits.
    static constexpr int kUnpackedVectors = 64;
    static void unpack_panel(u8x16* quants, const uint8_t* panel, int s0, int s1) {
        int8_t* out = reinterpret_cast<int8_t*>(quants);
        for (int s = s0; s < s1; s++) {
            const uint8_t* q = panel + size_t(s) * kPanelBlockBytes + pair_at(0, 0, 0);
            for (int b = 0; b < kBlocksPerSuperBlock; b++, q += pair_at(1, 0, 0) - pair_at(0, 0, 0))
                for (int h = 0; h < 2; h++)
                    for (int p = 0; p < 2; p++) {
                        i16x8 fields[4];
                        pair_fields(q + (pair_at(0, h, 2 * p) - pair_at(0, 0, 0)), fields);
                        for (int f = 0; f < 4; f++, out += 8) {  // each field in -32..31
                            const simd::i8x8 bytes = __builtin_convertvector(fields[f], simd::i8x8);
                            std::memcpy(out, &bytes, sizeof bytes);
                        }
                    }
        }
    }
    static f32x4 unpacked_panel_dot(f32x4 out, const uint8_t* panel, const u8x16* quants, const int16_t* xq,
                                    const float* dx, const int32_t* /*xsum*/, int s0, int s1, int /*n_in*/) {
        const int8_t* bytes = reinterpret_cast<const int8_t*>(quants);
        return panel_dot_with(out, panel, xq, dx, s0, s1, [&](int s, int b, int h, int p, i16x8 f[4]) {
            const int8_t* g = bytes + 32 * (4 * ((s - s0) * kBlocksPerSuperBlock + b) + 2 * h + p);
            for (int k = 0; k < 4; k++) f[k] = simd::load8x8_s(g + 8 * k);
        });
    }
#endif
};

template <typename Format>
constexpr BlockFormat make_format(const char* name) {
    return BlockFormat{name,
                       kSuperBlock,
                       uint32_t(Format::kFileBlockBytes),
                       &storage_bytes<Format>,
                       &store_rows<Format>,
                       &file_rows<Format>,
                       &dequantize_row<Format>,
                       &multiply<Format>};
}

}  // namespace

const BlockFormat kQ4_K = make_format<KQuant<false>>("Q4_K");
const BlockFormat kQ5_K = make_format<KQuant<true>>("Q5_K");
const BlockFormat kQ6_K = make_format<Q6K>("Q6_K");

}  // namespace gpt2
