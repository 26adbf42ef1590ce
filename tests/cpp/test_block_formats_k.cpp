// The K-quant block formats (Q4_K, Q5_K, Q6_K; engine/kernels/block_formats_k.cpp) against the NumPy decoder's values
// (tests/fixtures/ggml-blocks, a 10 x 512 matrix per type), and their products against a double-precision
// reference, bit-identical between the GEMV, the GEMM and any split of outputs or tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats_k.h"
#include "kernels/kernels.h"
#include "kernels/linear.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

constexpr int kRows = 10;  // the fixtures' shape: a partial last panel, two super-blocks per row
constexpr int kCols = 512;

struct KFormat {
    const gpt2::BlockFormat* format;
    gpt2::WeightFormat weight_format;
};
const KFormat kFormats[] = {{&gpt2::kQ4_K, gpt2::WeightFormat::q4_k},
                            {&gpt2::kQ5_K, gpt2::WeightFormat::q5_k},
                            {&gpt2::kQ6_K, gpt2::WeightFormat::q6_k}};

std::string fixture(const gpt2::BlockFormat& format, const char* extension) {
    return std::string(GPT2_BLOCK_FIXTURE_DIR) + "/" + format.name + extension;
}

// The file's blocks of the fixture matrix (kRows rows of kCols values).
std::vector<uint8_t> file_blocks(const gpt2::BlockFormat& format) {
    std::vector<uint8_t> bytes = read_file(fixture(format, ".bin"));
    EXPECT_EQ(bytes.size(), size_t(kRows) * kCols / format.values_per_block * format.bytes_per_block) << format.name;
    return bytes;
}

// The NumPy decoder's values of the fixture matrix (kRows, kCols).
std::vector<float> decoded_values(const gpt2::BlockFormat& format) {
    const std::vector<uint8_t> bytes = read_file(fixture(format, ".f32"));
    std::vector<float> values(size_t(kRows) * kCols);
    EXPECT_EQ(bytes.size(), values.size() * sizeof(float)) << format.name;
    std::memcpy(values.data(), bytes.data(), std::min(bytes.size(), values.size() * sizeof(float)));
    return values;
}

// The fixture matrix in the format's storage, stored in row ranges of the given sizes.
std::vector<uint8_t> stored(const gpt2::BlockFormat& format, const std::vector<int>& ranges) {
    const std::vector<uint8_t> file = file_blocks(format);
    std::vector<uint8_t> storage(size_t(format.storage_bytes(kRows, kCols)), 0xA5);  // not zero: all bytes written
    const size_t row_bytes = size_t(kCols) / format.values_per_block * format.bytes_per_block;
    int row0 = 0;
    for (int n : ranges) {
        format.store_rows(storage.data(), kRows, kCols, row0, n, file.data() + size_t(row0) * row_bytes);
        row0 += n;
    }
    EXPECT_EQ(row0, kRows);
    return storage;
}

// Input rows quantized as block_formats.h documents quantize_activation_blocks: per 32 values, d = max|x| / 127,
// q = round(x / d) half away from zero, and the sum of q.
struct QuantizedInput {
    std::vector<float> x;      // (n_tok, n_in)
    std::vector<int16_t> xq;   // (n_tok, n_in)
    std::vector<float> scale;  // (n_tok, n_in / 32)
    std::vector<int32_t> sum;  // (n_tok, n_in / 32)

    QuantizedInput(int n_tok, int n_in, uint32_t seed) : x(size_t(n_tok) * n_in), xq(x.size()) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (float& v : x) v = normal(rng);
        const size_t n_blocks = x.size() / gpt2::kActivationBlock;
        scale.resize(n_blocks);
        sum.resize(n_blocks);
        for (size_t b = 0; b < n_blocks; b++) {
            const float* xb = x.data() + b * gpt2::kActivationBlock;
            float max_abs = 0.0f;
            for (int i = 0; i < gpt2::kActivationBlock; i++) max_abs = std::max(max_abs, std::fabs(xb[i]));
            scale[b] = max_abs / 127.0f;
            const float inverse = max_abs > 0.0f ? 127.0f / max_abs : 0.0f;
            sum[b] = 0;
            for (int i = 0; i < gpt2::kActivationBlock; i++) {
                const int q = int(std::round(xb[i] * inverse));
                xq[b * gpt2::kActivationBlock + i] = int16_t(std::min(127, std::max(-127, q)));
                sum[b] += xq[b * gpt2::kActivationBlock + i];
            }
        }
    }
    gpt2::LinearInput input() { return gpt2::LinearInput{x.data(), xq.data(), scale.data(), sum.data()}; }
    // The value the products see: q * d.
    double dequantized(size_t i) const { return double(xq[i]) * scale[i / gpt2::kActivationBlock]; }
};

std::vector<float> bias_values() {
    std::vector<float> bias(kRows);
    for (int o = 0; o < kRows; o++) bias[size_t(o)] = 0.25f * float(o) - 1.0f;
    return bias;
}

gpt2::Linear linear_of(const KFormat& f, std::vector<uint8_t>& storage, std::vector<float>& bias) {
    gpt2::Linear linear;
    linear.format = f.weight_format;
    linear.n_out = kRows;
    linear.n_in = kCols;
    linear.weight = storage.data();
    linear.bias = bias.data();
    return linear;
}

// multiply() of all rows for the tokens [0, n_tok) in one call: the GEMV for one token, the GEMM for several.
std::vector<float> product(const KFormat& f, const gpt2::Linear& linear, QuantizedInput& input, int n_tok) {
    std::vector<float> out(size_t(n_tok) * kRows, NAN);
    f.format->multiply(out.data(), linear, input.input(), 0, n_tok, 0, kRows);
    return out;
}

}  // namespace

TEST(KQuantFormats, StoredRowsDequantizeToTheNumPyDecodersValuesBitForBit) {
    for (const KFormat& f : kFormats) {
        const std::vector<float> expected = decoded_values(*f.format);
        for (const std::vector<int>& ranges : {std::vector<int>{10}, {4, 4, 2}, {8, 2}, {4, 6}}) {
            const std::vector<uint8_t> storage = stored(*f.format, ranges);
            std::vector<float> row(kCols);
            for (int o = 0; o < kRows; o++) {
                f.format->dequantize_row(row.data(), storage.data(), kRows, kCols, o);
                const std::vector<float> want(expected.begin() + o * kCols, expected.begin() + (o + 1) * kCols);
                ASSERT_TRUE(same_bits(row, want)) << f.format->name << " row " << o << " ranges of " << ranges[0];
            }
        }
    }
}

TEST(KQuantFormats, StorageIsWithinSixPercentOfTheFileSize) {
    for (const KFormat& f : kFormats) {
        const int shapes[][2] = {{3072, 768}, {768, 3072}, {50257, 768}};  // GPT-2 124M's matrices
        for (const auto& shape : shapes) {
            const double file = double(shape[0]) * shape[1] / f.format->values_per_block * f.format->bytes_per_block;
            const double ratio = double(f.format->storage_bytes(shape[0], shape[1])) / file;
            EXPECT_GE(ratio, 1.0) << f.format->name;
            EXPECT_LE(ratio, 1.06) << f.format->name << " " << shape[0] << "x" << shape[1];
        }
    }
}

TEST(KQuantFormats, OneTokenMatchesTheDoublePrecisionProductOfTheDequantizedWeightsAndInput) {
    for (const KFormat& f : kFormats) {
        std::vector<uint8_t> storage = stored(*f.format, {kRows});
        std::vector<float> bias = bias_values();
        const gpt2::Linear linear = linear_of(f, storage, bias);
        const std::vector<float> w = decoded_values(*f.format);
        QuantizedInput input(1, kCols, 7);
        const std::vector<float> out = product(f, linear, input, 1);
        double worst = 0;
        for (int o = 0; o < kRows; o++) {
            double expected = bias[size_t(o)], magnitude = std::fabs(bias[size_t(o)]);
            for (int i = 0; i < kCols; i++) {
                const double term = double(w[size_t(o) * kCols + i]) * input.dequantized(size_t(i));
                expected += term;
                magnitude += std::fabs(term);
            }
            // fp32 rounding of the scales' products and sums, below 2^-23 of the terms' magnitude (measured: under
            // 3.4e-8; the integer parts are exact)
            const double difference = std::fabs(out[size_t(o)] - expected);
            EXPECT_LE(difference, 1.2e-7 * magnitude) << f.format->name << " row " << o;
            worst = std::max(worst, difference / magnitude);
        }
        std::printf("%s: max |out - double reference| / sum |terms| = %.3g\n", f.format->name, worst);
    }
}

TEST(KQuantFormats, GemmRowsEqualTheGemvOfTheSameTokenBitForBit) {
    const int n_tok = 70;  // more than one block of tokens
    for (const KFormat& f : kFormats) {
        std::vector<uint8_t> storage = stored(*f.format, {kRows});
        std::vector<float> bias = bias_values();
        const gpt2::Linear linear = linear_of(f, storage, bias);
        QuantizedInput input(n_tok, kCols, 11);
        const std::vector<float> batched = product(f, linear, input, n_tok);
        for (int t = 0; t < n_tok; t++) {
            std::vector<float> single(batched.size(), NAN);  // (n_tok, kRows); only row t is written
            f.format->multiply(single.data(), linear, input.input(), t, 1, 0, kRows);
            const std::vector<float> want(batched.begin() + t * kRows, batched.begin() + (t + 1) * kRows);
            const std::vector<float> got(single.begin() + t * kRows, single.begin() + (t + 1) * kRows);
            ASSERT_TRUE(same_bits(got, want)) << f.format->name << " token " << t;
        }
    }
}

TEST(KQuantFormats, SplitsOfTheOutputsOrTokensGiveTheWholeProductBitForBit) {
    const int n_tok = 6;
    for (const KFormat& f : kFormats) {
        std::vector<uint8_t> storage = stored(*f.format, {kRows});
        std::vector<float> bias = bias_values();
        const gpt2::Linear linear = linear_of(f, storage, bias);
        QuantizedInput input(n_tok, kCols, 13);
        const std::vector<float> whole = product(f, linear, input, n_tok);
        for (const std::vector<int>& outputs : {std::vector<int>{4, 4, 2}, {8, 2}, {4, 6}}) {
            std::vector<float> split(whole.size(), NAN);
            int o0 = 0;
            for (int n : outputs) {
                f.format->multiply(split.data(), linear, input.input(), 0, n_tok, o0, n);
                o0 += n;
            }
            EXPECT_TRUE(same_bits(split, whole)) << f.format->name << " outputs split from " << outputs[0];
        }
        std::vector<float> split(whole.size(), NAN);
        const int tokens[][2] = {{0, 1}, {1, 3}, {4, 2}};  // (t0, n_tok)
        for (const auto& part : tokens)
            f.format->multiply(split.data(), linear, input.input(), part[0], part[1], 0, kRows);
        EXPECT_TRUE(same_bits(split, whole)) << f.format->name << " tokens split 1 + 3 + 2";
    }
}
