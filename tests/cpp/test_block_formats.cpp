// The ggml block formats F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 as Linear storage (block_formats.h): stored from the
// fixtures of gpt2tools.fixtures.make_block_fixtures (a 10x512 matrix per type as a GGUF file stores it) they
// dequantize to the NumPy decoder's values bit for bit, multiply like a double-precision reference up to the rounding
// of the block sums, and give the same bits for every split of the work; and the activations' per-block quantization.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/linear.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

constexpr int kOut = 10, kIn = 512;  // tests/fixtures/ggml-blocks/manifest.json
constexpr int kBlocks = kIn / gpt2::kActivationBlock;

struct Type {
    const char* name;
    gpt2::WeightFormat format;
    bool has_min;  // the _1 formats: x = q * d + m
};
const Type kTypes[] = {
    {"F16", gpt2::WeightFormat::f16, false},   {"Q8_0", gpt2::WeightFormat::q8_0, false},
    {"Q4_0", gpt2::WeightFormat::q4_0, false}, {"Q4_1", gpt2::WeightFormat::q4_1, true},
    {"Q5_0", gpt2::WeightFormat::q5_0, false}, {"Q5_1", gpt2::WeightFormat::q5_1, true},
};

std::vector<uint8_t> fixture_bytes(const std::string& file) {
    std::vector<uint8_t> bytes = read_file(std::string(GPT2_BLOCK_FIXTURE_DIR) + "/" + file);
    EXPECT_FALSE(bytes.empty()) << file;
    return bytes;
}

// TYPE.f32: the NumPy decoder's values, (kOut, kIn).
std::vector<float> decoded_fixture(const Type& type) {
    const std::vector<uint8_t> bytes = fixture_bytes(std::string(type.name) + ".f32");
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
    EXPECT_EQ(values.size(), size_t(kOut) * kIn) << type.name;
    return values;
}

// The block minimum m of every value's block (0 for the formats without one), (kOut, kIn): the _1 formats'
// blocks start with half d, half m.
std::vector<double> block_minimums(const Type& type, const std::vector<uint8_t>& file) {
    std::vector<double> m(size_t(kOut) * kIn, 0.0);
    if (!type.has_min) return m;
    const size_t block_bytes = gpt2::block_format(type.format)->bytes_per_block;
    for (size_t b = 0; b < m.size() / gpt2::kActivationBlock; b++) {
        uint16_t h;
        std::memcpy(&h, file.data() + b * block_bytes + 2, sizeof h);
        for (int i = 0; i < gpt2::kActivationBlock; i++) m[b * gpt2::kActivationBlock + i] = gpt2::f16_to_float(h);
    }
    return m;
}

// A matrix in a block format's storage, its rows stored in the given consecutive ranges.
struct Matrix {
    std::vector<uint8_t> storage;
    std::vector<float> bias;
    gpt2::Linear linear;
};

Matrix store(const gpt2::WeightFormat format, int n_out, int n_in, const std::vector<uint8_t>& file,
             const std::vector<int>& ranges) {
    const gpt2::BlockFormat* f = gpt2::block_format(format);
    Matrix m;
    m.storage.assign(f->storage_bytes(n_out, n_in), 0xAB);  // not zero: the padding rows must be written
    const size_t row_bytes = size_t(n_in) / f->values_per_block * f->bytes_per_block;
    int row0 = 0;
    for (int n : ranges) {
        f->store_rows(m.storage.data(), n_out, n_in, row0, n, file.data() + size_t(row0) * row_bytes);
        row0 += n;
    }
    EXPECT_EQ(row0, n_out);
    m.bias.resize(size_t(n_out));
    for (int o = 0; o < n_out; o++) m.bias[size_t(o)] = 0.25f * float(o % 3) - 0.25f;
    m.linear.format = format;
    m.linear.n_out = n_out;
    m.linear.n_in = n_in;
    m.linear.weight = m.storage.data();
    m.linear.bias = m.bias.data();
    return m;
}
Matrix store_fixture(const Type& type, const std::vector<int>& ranges) {
    return store(type.format, kOut, kIn, fixture_bytes(std::string(type.name) + ".bin"), ranges);
}

// Token rows of a linear layer's input with the buffers prepare_linear_input fills.
struct Input {
    std::vector<float> x;
    std::vector<int16_t> xq;
    std::vector<float> scale;
    std::vector<int32_t> sum;
    gpt2::LinearInput in;

    Input(int n_tok, int n_in, uint32_t seed) : x(size_t(n_tok) * n_in), xq(x.size()) {
        const size_t n_blocks = x.size() / gpt2::kActivationBlock + 1;
        scale.resize(n_blocks);
        sum.resize(n_blocks);
        std::mt19937 rng(seed);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (float& v : x) v = normal(rng);
        in = {x.data(), xq.data(), scale.data(), sum.data()};
    }
};

std::vector<float> multiply(const Matrix& m, const Input& input, int t0, int n_tok, int o0, int n_rows,
                            std::vector<float> out) {
    gpt2::multiply_linear(out.data(), m.linear, input.in, t0, n_tok, o0, n_rows);
    return out;
}

// Every token's row, one gemv at a time.
std::vector<float> gemv_rows(const Matrix& m, const Input& input, int n_tok) {
    std::vector<float> out(size_t(n_tok) * m.linear.n_out, -1.0f);
    for (int t = 0; t < n_tok; t++) out = multiply(m, input, t, 1, 0, m.linear.n_out, out);
    return out;
}

const std::vector<std::vector<int>> kRowRanges = {{10}, {4, 4, 2}, {8, 2}};

TEST(BlockFormats, StoredRowsDequantizeToTheNumPyDecodersValuesBitForBit) {
    for (const Type& type : kTypes) {
        const std::vector<float> expected = decoded_fixture(type);
        for (const std::vector<int>& ranges : kRowRanges) {
            const Matrix m = store_fixture(type, ranges);
            std::vector<float> row(kIn);
            for (int r = 0; r < kOut; r++) {
                gpt2::linear_weight_row(row.data(), m.linear, r, nullptr);
                const std::vector<float> want(expected.begin() + size_t(r) * kIn,
                                              expected.begin() + size_t(r + 1) * kIn);
                EXPECT_TRUE(same_bits(row, want))
                    << type.name << " row " << r << " stored in " << ranges.size() << " ranges";
            }
        }
    }
}

TEST(BlockFormats, StorageIsAboutTheFilesSize) {
    for (const Type& type : kTypes) {
        const gpt2::BlockFormat* f = gpt2::block_format(type.format);
        for (int n_out : {768, 3072, 50257}) {
            const double file = double(n_out) * 768 / f->values_per_block * f->bytes_per_block;
            const double ratio = double(f->storage_bytes(n_out, 768)) / file;
            EXPECT_GE(ratio, 1.0) << type.name << " " << n_out;
            EXPECT_LE(ratio, 1.12) << type.name << " " << n_out;
        }
    }
}

// One token row quantized per block of 32 (quantize_activation_blocks), the integers every block format's product
// takes before rearranging them into its own form (prepare_block_activations).
struct QuantizedBlocks {
    std::vector<int16_t> q;
    std::vector<float> scale;
    std::vector<int32_t> sum;
};
QuantizedBlocks quantize(const std::vector<float>& x) {
    QuantizedBlocks out{std::vector<int16_t>(x.size(), 99), std::vector<float>(x.size() / 32, 99.0f),
                        std::vector<int32_t>(x.size() / 32, 99)};
    const gpt2::LinearInput in{x.data(), out.q.data(), out.scale.data(), out.sum.data()};
    gpt2::quantize_activation_blocks(in, 1, int(x.size()));
    return out;
}

// The outputs of one token against the fixture's dequantized weights in double precision, with the input the
// block formats multiply: each block's integers times its scale (F16: x itself).
TEST(BlockFormats, GemvEqualsADoublePrecisionProductUpToTheRoundingOfTheBlockSums) {
    for (const Type& type : kTypes) {
        const Matrix m = store_fixture(type, {10});
        const std::vector<float> w = decoded_fixture(type);
        const std::vector<double> minimums = block_minimums(type, fixture_bytes(std::string(type.name) + ".bin"));
        Input input(1, kIn, 7);
        gpt2::prepare_linear_input(m.linear, input.in, 1);
        const std::vector<float> out = multiply(m, input, 0, 1, 0, kOut, std::vector<float>(kOut));
        const QuantizedBlocks xq = quantize(input.x);
        // float32 rounds each block's term a few times and the running sum once per block (F16: once per chunk
        // of 8 and lane): bound = (steps + 4) * 2^-24 * sum of |terms|, the _1 formats' terms q * d and m apart
        const double steps = type.format == gpt2::WeightFormat::f16 ? kIn / 8 : kBlocks;
        double worst = 0.0;
        for (int o = 0; o < kOut; o++) {
            double want = m.bias[size_t(o)], magnitude = std::fabs(m.bias[size_t(o)]);
            for (int i = 0; i < kIn; i++) {
                const size_t at = size_t(o) * kIn + size_t(i);
                const double x = type.format == gpt2::WeightFormat::f16
                                     ? double(input.x[size_t(i)])
                                     : double(xq.scale[size_t(i / 32)]) * double(xq.q[size_t(i)]);
                want += double(w[at]) * x;
                magnitude += (std::fabs(double(w[at])) + 2.0 * std::fabs(minimums[at])) * std::fabs(x);
            }
            const double diff = std::fabs(double(out[size_t(o)]) - want), bound = (steps + 4.0) * 0x1p-24 * magnitude;
            EXPECT_LE(diff, bound) << type.name << " output " << o << ": " << out[size_t(o)] << " vs " << want;
            worst = std::fmax(worst, diff / bound);
        }
        std::printf("%s: largest |gemv - double reference| is %.3f of the bound\n", type.name, worst);
    }
}

TEST(BlockFormats, BatchedRowsEqualTheGemvOfTheirTokenBitForBit) {
    const int n_tok = 70;  // more than one block of 64 tokens
    for (const Type& type : kTypes) {
        const Matrix m = store_fixture(type, {4, 4, 2});
        Input input(n_tok, kIn, 11);
        gpt2::prepare_linear_input(m.linear, input.in, n_tok);
        const std::vector<float> batched =
            multiply(m, input, 0, n_tok, 0, kOut, std::vector<float>(size_t(n_tok) * kOut, -1.0f));
        EXPECT_TRUE(same_bits(batched, gemv_rows(m, input, n_tok))) << type.name;
    }
}

TEST(BlockFormats, AnySplitOfTheOutputsOrTokensGivesTheSameBits) {
    const int n_tok = 70;
    for (const Type& type : kTypes) {
        const Matrix m = store_fixture(type, {8, 2});
        Input input(n_tok, kIn, 13);
        gpt2::prepare_linear_input(m.linear, input.in, n_tok);
        const std::vector<float> whole_row =
            multiply(m, input, 5, 1, 0, kOut, std::vector<float>(size_t(n_tok) * kOut));
        for (const std::vector<int>& ranges : kRowRanges) {
            std::vector<float> split(size_t(n_tok) * kOut);
            int o0 = 0;
            for (int n : ranges) {
                split = multiply(m, input, 5, 1, o0, n, split);
                o0 += n;
            }
            EXPECT_TRUE(same_bits(split, whole_row)) << type.name << ": outputs in " << ranges.size() << " ranges";
        }
        const std::vector<float> whole =
            multiply(m, input, 0, n_tok, 0, kOut, std::vector<float>(size_t(n_tok) * kOut));
        std::vector<float> parts(size_t(n_tok) * kOut);
        const int bounds[] = {0, 3, 40, n_tok};
        for (int i = 0; i < 3; i++) parts = multiply(m, input, bounds[i], bounds[i + 1] - bounds[i], 0, kOut, parts);
        EXPECT_TRUE(same_bits(parts, whole)) << type.name << ": tokens in 3 ranges";
    }
}

// F16 multiplies the fp32 input by its exactly widened weights in the order of kernels.h's fp32 contract: the
// same bits as gemv() and gemm() on the dequantized matrix, for widths with a tail after the chunks of 8 and
// for subnormal, infinite and NaN weights.
TEST(BlockFormats, F16GivesTheBitsOfTheFp32KernelsOnItsWidenedWeights) {
    const int n_out = 6, n_in = 21;
    std::vector<uint16_t> halves(size_t(n_out) * n_in);
    const std::vector<uint8_t> fixture = fixture_bytes("F16.bin");
    std::memcpy(halves.data(), fixture.data(), halves.size() * 2);  // row 0 of the fixture has subnormals
    halves[3] = 0x0001;                                             // the smallest subnormal
    halves[size_t(2) * n_in + 20] = 0x7C00;                         // inf, in the tail
    halves[size_t(3) * n_in + 5] = 0xFE00;                          // nan
    halves[size_t(4) * n_in + 9] = 0x8000;                          // -0
    std::vector<uint8_t> file(halves.size() * 2);
    std::memcpy(file.data(), halves.data(), file.size());
    const Matrix m = store(gpt2::WeightFormat::f16, n_out, n_in, file, {4, 2});
    std::vector<float> w(halves.size()), scratch(size_t(4) * n_in);
    for (size_t i = 0; i < w.size(); i++) w[i] = gpt2::f16_to_float(halves[i]);
    for (int r = 0; r < n_out; r++) {
        std::vector<float> row(static_cast<size_t>(n_in));
        gpt2::linear_weight_row(row.data(), m.linear, r, nullptr);
        EXPECT_TRUE(same_bits(row, std::vector<float>(w.begin() + r * n_in, w.begin() + (r + 1) * n_in))) << r;
    }
    gpt2::pack_panels(w.data(), n_out, n_in, scratch.data());
    const int n_tok = 3;
    Input input(n_tok, n_in, 17);
    std::vector<float> want(size_t(n_tok) * n_out);
    gpt2::gemm(want.data(), input.x.data(), w.data(), m.bias.data(), n_tok, n_in, n_out);
    EXPECT_TRUE(same_bits(multiply(m, input, 0, n_tok, 0, n_out, std::vector<float>(want.size())), want));
    EXPECT_TRUE(same_bits(gemv_rows(m, input, n_tok), want));
}

// A batched F16 product widens each panel a stretch of 1024 columns at a time: rows wider than two stretches (and a
// tail) give the gemv's bits too.
TEST(BlockFormats, F16BatchedRowsWiderThanItsWidenedStretchesGiveTheGemvBits) {
    const int n_out = 5, n_in = 2 * 1024 + 12, n_tok = 4;
    std::mt19937 rng(23);
    std::vector<uint8_t> file(size_t(n_out) * n_in * 2);
    for (size_t i = 0; i < file.size(); i += 2) {
        const uint16_t h = uint16_t(0x3000 + rng() % 0x1000) | uint16_t(rng() % 2 ? 0x8000 : 0);  // |h| 0.125 .. 0.5
        std::memcpy(&file[i], &h, 2);
    }
    const Matrix m = store(gpt2::WeightFormat::f16, n_out, n_in, file, {4, 1});
    Input input(n_tok, n_in, 29);
    EXPECT_TRUE(same_bits(multiply(m, input, 0, n_tok, 0, n_out, std::vector<float>(size_t(n_tok) * n_out)),
                          gemv_rows(m, input, n_tok)));
}

TEST(BlockFormats, ActivationBlocksScaleByTheirLargestMagnitudeAndRoundHalfAwayFromZero) {
    std::vector<float> x(32 * 3, 0.0f);
    // block 0: max |x| 127, so d = 1 and the halves are ties
    const float ties[] = {127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 2.4999998f, -2.4999998f, 0.49999997f};
    std::memcpy(x.data(), ties, sizeof ties);
    // block 1: max |x| 254 (negative), so d = 2
    x[32] = -254.0f;
    x[33] = 3.0f;   // 1.5 -> 2
    x[34] = -1.0f;  // -0.5 -> -1
    x[35] = 0.9f;   // 0.45 -> 0
    // block 2: max |x| 1, so d = 1/127 and q = round(x * 127)
    x[64] = 1.0f;
    x[65] = -0.25f;  // -31.75 -> -32
    const QuantizedBlocks got = quantize(x);
    EXPECT_EQ(got.scale[0], 1.0f);
    const int16_t want0[] = {127, 1, -1, 2, -2, 3, -3, 2, -2, 0};
    for (int i = 0; i < 10; i++) EXPECT_EQ(got.q[size_t(i)], want0[i]) << "value " << i << ": " << ties[i];
    for (int i = 10; i < 32; i++) EXPECT_EQ(got.q[size_t(i)], 0) << i;
    EXPECT_EQ(got.sum[0], 127 + 1 - 1 + 2 - 2 + 3 - 3 + 2 - 2);
    EXPECT_EQ(got.scale[1], 2.0f);
    EXPECT_EQ(got.q[32], -127);
    EXPECT_EQ(got.q[33], 2);
    EXPECT_EQ(got.q[34], -1);
    EXPECT_EQ(got.q[35], 0);
    EXPECT_EQ(got.sum[1], -127 + 2 - 1);
    EXPECT_EQ(got.scale[2], 1.0f / 127.0f);
    EXPECT_EQ(got.q[64], 127);
    EXPECT_EQ(got.q[65], -32);
    EXPECT_EQ(got.sum[2], 127 - 32);
}

TEST(BlockFormats, AnAllZeroActivationBlockHasScaleZeroAndANonFiniteOneScaleNaN) {
    std::vector<float> x(32 * 4, 0.5f);
    for (int i = 32; i < 64; i++) x[size_t(i)] = 0.0f;  // block 1: all zero
    x[64 + 7] = NAN;                                    // block 2: a NaN
    x[96 + 31] = -INFINITY;                             // block 3: an infinity
    const QuantizedBlocks got = quantize(x);
    EXPECT_EQ(got.scale[0], 0.5f / 127.0f);
    EXPECT_EQ(got.sum[0], 32 * 127);
    EXPECT_EQ(got.scale[1], 0.0f);
    EXPECT_TRUE(std::isnan(got.scale[2]));
    EXPECT_TRUE(std::isnan(got.scale[3]));
    for (int b = 1; b < 4; b++) {
        EXPECT_EQ(got.sum[size_t(b)], 0) << "block " << b;
        for (int i = 0; i < 32; i++) EXPECT_EQ(got.q[size_t(32 * b + i)], 0) << "block " << b << " value " << i;
    }
}

// As in fp32, where F16 keeps the infinity: its products are infinite or NaN.
TEST(BlockFormats, AnInfiniteInputMakesEveryOutputOfItsTokenNaN) {
    for (const Type& type : kTypes) {
        const Matrix m = store_fixture(type, {10});
        Input input(2, kIn, 19);
        input.x[100] = INFINITY;  // token 0
        gpt2::prepare_linear_input(m.linear, input.in, 2);
        const std::vector<float> out = multiply(m, input, 0, 2, 0, kOut, std::vector<float>(size_t(2) * kOut));
        for (int o = 0; o < kOut; o++) {
            const float v = out[size_t(o)];
            EXPECT_TRUE(type.format == gpt2::WeightFormat::f16 ? !std::isfinite(v) : std::isnan(v))
                << type.name << " output " << o << ": " << v;
            EXPECT_TRUE(std::isfinite(out[size_t(kOut + o)])) << type.name << " token 1, output " << o;
        }
    }
}

}  // namespace
