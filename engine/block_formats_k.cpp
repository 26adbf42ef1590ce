// Q4_K, Q5_K and Q6_K (ggml's K-quants: super-blocks of 256 values) as Linear storage (block_formats.h).
//
// Storage: the rows are grouped in panels of kPanelRows = 4 (a last, partial panel is padded with zero rows),
// and each panel holds, for each super-block of 256 columns in order, one panel block: the 4 rows' super-blocks
// of those columns interleaved, so that a GEMV reads each matrix as one sequential stream and works out the
// scales of 4 rows at once (f32x4). At load, d and dmin are widened from fp16 to fp32 and the 6-bit scales and
// mins unpacked to bytes; the quants keep their bits, regrouped:
//   Q4_K, 608 bytes (the file: 4 x 144): f32 d[4]; f32 dmin[4]; u8 scale[8][4]; u8 min[8][4] ([sub-block][row]);
//       then qs[4][4][4][8]: for each 64-value chunk c, each group g of 8 bytes, each row, the file's qs bytes
//       32c + 8g .. 32c + 8g + 7 (low nibbles: values 64c + 8g.., high nibbles: values 64c + 32 + 8g..).
//   Q5_K, 736 bytes (4 x 176): as Q4_K with the file's qh (bit j of byte l: bit 4 of value 32j + l) between the
//       mins and qs, as qh[4][4][8]: for each group g, each row, the file's qh bytes 8g .. 8g + 7.
//   Q6_K, 848 bytes (4 x 210): f32 d[4]; i8 scale[16][4]; then for each 32-value block, each row, 24 bytes:
//       8 bytes whose nibbles hold the low 4 bits of values i (low) and i + 8 (high), i < 8, 8 bytes the same for
//       values 16 + i and 24 + i, and 8 bytes holding the top 2 bits of values i, 8 + i, 16 + i, 24 + i in their
//       bits 0-1, 2-3, 4-5, 6-7.
// So the storage is 5.6 % (Q4_K), 4.5 % (Q5_K) and 1 % (Q6_K) larger than the file.
//
// Products: the weights' quants are widened to int16 lanes (zero-extending 8 bytes at once, then masks and
// shifts) and multiplied with the activations' int16 lanes in int32 (madd), exactly. Each 32-value activation
// block b (its own scale dx[b] and sum xsum[b], quantize_activation_blocks) then joins its output in one fixed
// order, for 4 rows at once:
//   Q4_K, Q5_K: y = d * q * scale - dmin * min per sub-block of 32, so per super-block
//       sum_d += dx[b] * (float(scale) * float(sum of q * xq)), sum_m += dx[b] * (float(min) * float(xsum[b]))
//       for its 8 blocks in order, then out += d * sum_d - dmin * sum_m;
//   Q6_K: y = d * scale * (q - 32) per sub-block of 16, so per super-block
//       sum += dx[b] * (float(scale_0) * float(sum_0) + float(scale_1) * float(sum_1)) for its 8 blocks (two
//       sub-blocks each, with q - 32 in the lanes), then out += d * sum.
// Every float product of integers there is below 2^24, so exact, and the lanes of the 4 rows never mix: a gemm
// row equals the gemv, and any split of the outputs (at multiples of kPanelRows) or tokens gives the same bits.
#include "block_formats_k.h"

#include <cassert>
#include <cstring>

#include "float16.h"
#include "kernels.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpt2 {

namespace {

typedef float f32x4 __attribute__((vector_size(16)));
typedef int16_t i16x8 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef uint8_t u8x16 __attribute__((vector_size(16)));
typedef uint64_t u64x2 __attribute__((vector_size(16)));
typedef uint8_t u8x4 __attribute__((vector_size(4)));
typedef int8_t i8x4 __attribute__((vector_size(4)));

constexpr int kSuperBlock = 256;                                      // values per super-block
constexpr int kBlocksPerSuperBlock = kSuperBlock / kActivationBlock;  // 8
constexpr int kTokenBlock = 64;  // tokens that reuse one panel from L1 in a batched product

// ---- SIMD helpers ----

// memcpy loads: no alignment requirement, compiled to movups / v128.load
template <typename V, typename T>
inline V load(const T* p) {
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

inline f32x4 splat(float v) { return f32x4{v, v, v, v}; }
inline i16x8 splat16(int16_t v) { return i16x8{v, v, v, v, v, v, v, v}; }

// 8 bytes zero-extended to 8 int16 lanes: one v128.load8x8_u in wasm; natively movq + punpcklbw.
inline i16x8 load8_widen(const uint8_t* p) {
#if defined(__wasm_simd128__)
    return (i16x8)wasm_u16x8_load8x8(p);
#else
    uint64_t bits;
    std::memcpy(&bits, p, sizeof bits);
    const u8x16 b = (u8x16)(u64x2{bits, 0});
    const u8x16 zero = {};
    return (i16x8)__builtin_shufflevector(b, zero, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
#endif
}

// Sum of products of adjacent int16 lane pairs into int32 lanes: i32x4.dot_i16x8_s in wasm, pmaddwd in SSE2.
inline i32x4 madd(i16x8 a, i16x8 b) {
#if defined(__wasm_simd128__)
    return (i32x4)wasm_i32x4_dot_i16x8((v128_t)a, (v128_t)b);
#elif defined(__SSE2__)
    return (i32x4)_mm_madd_epi16((__m128i)a, (__m128i)b);
#else
    typedef int16_t i16x4 __attribute__((vector_size(8)));
    const i16x4 ae = __builtin_shufflevector(a, a, 0, 2, 4, 6), ao = __builtin_shufflevector(a, a, 1, 3, 5, 7);
    const i16x4 be = __builtin_shufflevector(b, b, 0, 2, 4, 6), bo = __builtin_shufflevector(b, b, 1, 3, 5, 7);
    return __builtin_convertvector(ae, i32x4) * __builtin_convertvector(be, i32x4) +
           __builtin_convertvector(ao, i32x4) * __builtin_convertvector(bo, i32x4);
#endif
}

// The lane sums of 4 rows' accumulators: {sum of a0, sum of a1, sum of a2, sum of a3}.
inline i32x4 sum_lanes(i32x4 a0, i32x4 a1, i32x4 a2, i32x4 a3) {
    const i32x4 t0 = __builtin_shufflevector(a0, a1, 0, 4, 1, 5) + __builtin_shufflevector(a0, a1, 2, 6, 3, 7);
    const i32x4 t1 = __builtin_shufflevector(a2, a3, 0, 4, 1, 5) + __builtin_shufflevector(a2, a3, 2, 6, 3, 7);
    return __builtin_shufflevector(t0, t1, 0, 1, 4, 5) + __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
}

inline f32x4 to_float(i32x4 v) { return __builtin_convertvector(v, f32x4); }
inline f32x4 u8_to_float(const uint8_t* p) { return __builtin_convertvector(load<u8x4>(p), f32x4); }
inline f32x4 i8_to_float(const uint8_t* p) { return __builtin_convertvector(load<i8x4>(p), f32x4); }

// v shifted left by S bits (right by -S when S is negative)
template <int S>
inline i16x8 shift_left(i16x8 v) {
    if constexpr (S >= 0) return v << S;
    else return v >> -S;
}

// ---- reading the file's blocks ----

inline float read_f16(const uint8_t* p) { return f16_to_float(uint16_t(p[0] | p[1] << 8)); }

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

// multiply (block_formats.h): every panel touching [o0, o0 + n_rows) against every token, a block of tokens
// at a time so that a panel is read from memory once per block.
template <typename Format>
void multiply(float* out, const Linear& linear, const LinearInput& in, int t0, int n_tok, int o0, int n_rows) {
    assert(o0 % kPanelRows == 0 && "an output range starts at a panel");
    const int n_in = linear.n_in, n_out = linear.n_out, n_sb = n_in / kSuperBlock;
    const size_t n_blocks = size_t(n_in / kActivationBlock);
    const size_t panel_bytes = size_t(n_sb) * Format::kPanelBlockBytes;
    const uint8_t* w = static_cast<const uint8_t*>(linear.weight);
    const int o1 = o0 + n_rows, t1 = t0 + n_tok;
    for (int tb = t0; tb < t1; tb += kTokenBlock) {
        const int tb1 = tb + kTokenBlock < t1 ? tb + kTokenBlock : t1;
        for (int o = o0; o < o1; o += kPanelRows) {
            const uint8_t* panel = w + size_t(o / kPanelRows) * panel_bytes;
            const int rows = o1 - o < kPanelRows ? o1 - o : kPanelRows;
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

// The parts Q4_K and Q5_K share: d, dmin, scales and mins; HighBits: Q5_K's qh.
template <bool HighBits>
struct KQuant {
    static constexpr size_t kFileBlockBytes = HighBits ? 176 : 144;
    static constexpr size_t kFileScales = 4, kFileQh = 16, kFileQs = HighBits ? 48 : 16;  // offsets in a file block
    static constexpr size_t kD = 0, kDmin = 16, kScale = 32, kMin = 64, kQh = 96;         // offsets in a panel block
    static constexpr size_t kQs = HighBits ? kQh + kPanelRows * 32 : kQh;
    static constexpr size_t kPanelBlockBytes = kQs + kPanelRows * 128;

    static void store(uint8_t* block, int r, const uint8_t* file) {
        store_f32(block + kD + 4 * r, read_f16(file));
        store_f32(block + kDmin + 4 * r, read_f16(file + 2));
        for (int j = 0; j < 8; j++)
            scale_min_k4(file + kFileScales, j, block + kScale + 4 * j + r, block + kMin + 4 * j + r);
        for (int g = 0; g < 4; g++) {
            if (HighBits) std::memcpy(block + kQh + (g * kPanelRows + r) * 8, file + kFileQh + 8 * g, 8);
            for (int c = 0; c < 4; c++)
                std::memcpy(block + kQs + ((c * 4 + g) * kPanelRows + r) * 8, file + kFileQs + 32 * c + 8 * g, 8);
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
                const uint8_t q = block[kQs + ((c * 4 + l / 8) * kPanelRows + r) * 8 + l % 8];
                int high_a = 0, high_b = 0;
                if (HighBits) {
                    const uint8_t h = block[kQh + (l / 8 * kPanelRows + r) * 8 + l % 8];
                    high_a = (h >> (2 * c)) & 1 ? 16 : 0;
                    high_b = (h >> (2 * c + 1)) & 1 ? 16 : 0;
                }
                y[64 * c + l] = d1 * float((q & 0x0F) + high_a) - m1;
                y[64 * c + 32 + l] = d2 * float((q >> 4) + high_b) - m2;
            }
        }
    }

    // Chunk C (sub-blocks 2C and 2C + 1) of a panel block: the 4 rows' integer sums of q * xq for both.
    template <int C>
    static void chunk_sums(const uint8_t* block, const int16_t* xq, i32x4* sum_a, i32x4* sum_b) {
        const i16x8 low4 = splat16(0x0F), bit4 = splat16(0x10);
        i32x4 a[kPanelRows] = {}, b[kPanelRows] = {};
        const uint8_t* qs = block + kQs + C * 4 * kPanelRows * 8;
        for (int g = 0; g < 4; g++) {
            const i16x8 xa = load<i16x8>(xq + 64 * C + 8 * g), xb = load<i16x8>(xq + 64 * C + 32 + 8 * g);
            for (int r = 0; r < kPanelRows; r++) {
                const i16x8 v = load8_widen(qs + (g * kPanelRows + r) * 8);
                i16x8 qa = v & low4, qb = v >> 4;
                if (HighBits) {
                    const i16x8 h = load8_widen(block + kQh + (g * kPanelRows + r) * 8);
                    qa |= shift_left<4 - 2 * C>(h) & bit4;
                    qb |= shift_left<3 - 2 * C>(h) & bit4;
                }
                a[r] += madd(qa, xa);
                b[r] += madd(qb, xb);
            }
        }
        *sum_a = sum_lanes(a[0], a[1], a[2], a[3]);
        *sum_b = sum_lanes(b[0], b[1], b[2], b[3]);
    }

    // Sub-block j's terms: sum_d += dx * (scale * isum), sum_m += dx * (min * xsum).
    static void add_block(f32x4* sum_d, f32x4* sum_m, const uint8_t* block, int j, i32x4 isum, float dx, int32_t xsum) {
        const f32x4 dxv = splat(dx);
        *sum_d += dxv * (u8_to_float(block + kScale + 4 * j) * to_float(isum));
        *sum_m += dxv * (u8_to_float(block + kMin + 4 * j) * splat(float(xsum)));
    }

    template <int C>
    static void chunk(f32x4* sum_d, f32x4* sum_m, const uint8_t* block, const int16_t* xq, const float* dx,
                      const int32_t* xsum) {
        i32x4 ia, ib;
        chunk_sums<C>(block, xq, &ia, &ib);
        add_block(sum_d, sum_m, block, 2 * C, ia, dx[2 * C], xsum[2 * C]);
        add_block(sum_d, sum_m, block, 2 * C + 1, ib, dx[2 * C + 1], xsum[2 * C + 1]);
    }

    // The 4 rows of a panel against one token: xq (n_sb * 256), dx and xsum (n_sb * 8).
    static f32x4 panel_dot(const uint8_t* panel, const int16_t* xq, const float* dx, const int32_t* xsum, int n_sb) {
        f32x4 out = {0, 0, 0, 0};
        for (int s = 0; s < n_sb; s++) {
            const uint8_t* block = panel + size_t(s) * kPanelBlockBytes;
            const int16_t* x = xq + s * kSuperBlock;
            const float* d_x = dx + s * kBlocksPerSuperBlock;
            const int32_t* s_x = xsum + s * kBlocksPerSuperBlock;
            f32x4 sum_d = {0, 0, 0, 0}, sum_m = {0, 0, 0, 0};
            chunk<0>(&sum_d, &sum_m, block, x, d_x, s_x);
            chunk<1>(&sum_d, &sum_m, block, x, d_x, s_x);
            chunk<2>(&sum_d, &sum_m, block, x, d_x, s_x);
            chunk<3>(&sum_d, &sum_m, block, x, d_x, s_x);
            out += load<f32x4>(block + kD) * sum_d - load<f32x4>(block + kDmin) * sum_m;
        }
        return out;
    }
};

// ---- Q6_K ----

struct Q6K {
    static constexpr size_t kFileBlockBytes = 210;
    static constexpr size_t kFileQl = 0, kFileQh = 128, kFileScales = 192, kFileD = 208;  // offsets in a file block
    static constexpr size_t kD = 0, kScale = 16, kQuants = 80;                            // offsets in a panel block
    static constexpr size_t kRowBlockBytes = 24;  // one row's 32 values in the panel block
    static constexpr size_t kPanelBlockBytes = kQuants + kBlocksPerSuperBlock * kPanelRows * kRowBlockBytes;

    // The quants of one row's block b (values 32b..32b + 31), in the panel block.
    static size_t quants_at(int b, int r) { return kQuants + (size_t(b) * kPanelRows + size_t(r)) * kRowBlockBytes; }

    // Value v (0..255) of a file block, 0..63 (ggml: the low 4 bits from ql, the top 2 from qh).
    static int file_value(const uint8_t* file, int v) {
        const int half = v / 128, k = v % 128 / 32, l = v % 32;
        const uint8_t ql = file[kFileQl + 64 * half + 32 * (k % 2) + l];
        const uint8_t qh = file[kFileQh + 32 * half + l];
        return ((k < 2 ? ql & 0x0F : ql >> 4) | (((qh >> (2 * k)) & 3) << 4));
    }

    static void store(uint8_t* block, int r, const uint8_t* file) {
        store_f32(block + kD + 4 * r, read_f16(file + kFileD));
        for (int j = 0; j < 16; j++) block[kScale + 4 * j + r] = file[kFileScales + j];
        for (int b = 0; b < kBlocksPerSuperBlock; b++) {
            uint8_t* dst = block + quants_at(b, r);
            for (int i = 0; i < 8; i++) {
                int q[4];
                for (int k = 0; k < 4; k++) q[k] = file_value(file, 32 * b + 8 * k + i);
                dst[i] = uint8_t((q[0] & 0x0F) | (q[1] & 0x0F) << 4);
                dst[8 + i] = uint8_t((q[2] & 0x0F) | (q[3] & 0x0F) << 4);
                dst[16 + i] = uint8_t(q[0] >> 4 | (q[1] >> 4) << 2 | (q[2] >> 4) << 4 | (q[3] >> 4) << 6);
            }
        }
    }

    // ggml's dequantize_row_q6_K: y = d * scale * (q - 32), evaluated (d * scale) * (q - 32).
    static void dequantize(float* y, const uint8_t* block, int r) {
        const float d = load_f32(block + kD + 4 * r);
        for (int b = 0; b < kBlocksPerSuperBlock; b++) {
            const uint8_t* src = block + quants_at(b, r);
            for (int k = 0; k < 4; k++) {
                const float ds = d * float(int8_t(block[kScale + 4 * (2 * b + k / 2) + r]));
                for (int i = 0; i < 8; i++) {
                    const uint8_t low = src[8 * (k / 2) + i];
                    const int q = ((k % 2 ? low >> 4 : low & 0x0F) | ((src[16 + i] >> (2 * k)) & 3) << 4) - 32;
                    y[32 * b + 8 * k + i] = ds * float(q);
                }
            }
        }
    }

    static f32x4 panel_dot(const uint8_t* panel, const int16_t* xq, const float* dx, const int32_t* xsum, int n_sb) {
        (void)xsum;  // the offset -32 is applied in the lanes: the sub-blocks of 16 have their own scales
        const i16x8 low4 = splat16(0x0F), top2 = splat16(0x30), offset = splat16(32);
        f32x4 out = {0, 0, 0, 0};
        for (int s = 0; s < n_sb; s++) {
            const uint8_t* block = panel + size_t(s) * kPanelBlockBytes;
            f32x4 sum = {0, 0, 0, 0};
            for (int b = 0; b < kBlocksPerSuperBlock; b++) {
                const int16_t* x = xq + s * kSuperBlock + b * kActivationBlock;
                const i16x8 x0 = load<i16x8>(x), x1 = load<i16x8>(x + 8), x2 = load<i16x8>(x + 16),
                            x3 = load<i16x8>(x + 24);
                i32x4 lo[kPanelRows], hi[kPanelRows];
                for (int r = 0; r < kPanelRows; r++) {
                    const uint8_t* q = block + quants_at(b, r);
                    const i16x8 a = load8_widen(q), c = load8_widen(q + 8), h = load8_widen(q + 16);
                    const i16x8 q0 = ((a & low4) | ((h << 4) & top2)) - offset;
                    const i16x8 q1 = ((a >> 4) | ((h << 2) & top2)) - offset;
                    const i16x8 q2 = ((c & low4) | (h & top2)) - offset;
                    const i16x8 q3 = ((c >> 4) | ((h >> 2) & top2)) - offset;
                    lo[r] = madd(q0, x0) + madd(q1, x1);
                    hi[r] = madd(q2, x2) + madd(q3, x3);
                }
                const i32x4 i0 = sum_lanes(lo[0], lo[1], lo[2], lo[3]), i1 = sum_lanes(hi[0], hi[1], hi[2], hi[3]);
                const f32x4 v = i8_to_float(block + kScale + 4 * (2 * b)) * to_float(i0) +
                                i8_to_float(block + kScale + 4 * (2 * b + 1)) * to_float(i1);
                sum += splat(dx[s * kBlocksPerSuperBlock + b]) * v;
            }
            out += load<f32x4>(block + kD) * sum;
        }
        return out;
    }
};

template <typename Format>
constexpr BlockFormat make_format(const char* name) {
    return BlockFormat{name,
                       kSuperBlock,
                       uint32_t(Format::kFileBlockBytes),
                       &storage_bytes<Format>,
                       &store_rows<Format>,
                       &dequantize_row<Format>,
                       &multiply<Format>};
}

}  // namespace

const BlockFormat kQ4_K = make_format<KQuant<false>>("Q4_K");
const BlockFormat kQ5_K = make_format<KQuant<true>>("Q5_K");
const BlockFormat kQ6_K = make_format<Q6K>("Q6_K");

}  // namespace gpt2
