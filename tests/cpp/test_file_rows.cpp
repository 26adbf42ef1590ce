// BlockFormat::file_rows (block_formats.h) is store_rows's exact inverse: a matrix stored from the file's ggml
// blocks hands back those bytes bit for bit, for every block format, any row range, random blocks (NaN and
// subnormal fp16 scales included) and the fixtures of tests/fixtures/ggml-blocks. A GPU host uploads these bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace {

using gpt2::WeightFormat;

const WeightFormat kFormats[] = {WeightFormat::f16,  WeightFormat::q8_0, WeightFormat::q4_0,
                                 WeightFormat::q4_1, WeightFormat::q5_0, WeightFormat::q5_1,
                                 WeightFormat::q4_k, WeightFormat::q5_k, WeightFormat::q6_k};

size_t row_bytes(const gpt2::BlockFormat& f, int n_in) { return size_t(n_in) / f.values_per_block * f.bytes_per_block; }

// The storage of file (n_out rows) stored in ranges of `step` rows (a multiple of kPanelRows), as the loader does.
std::vector<uint8_t> stored(const gpt2::BlockFormat& f, int n_out, int n_in, const std::vector<uint8_t>& file,
                            int step) {
    std::vector<uint8_t> storage(f.storage_bytes(n_out, n_in), 0xAB);
    for (int row0 = 0; row0 < n_out; row0 += step) {
        const int n = step < n_out - row0 ? step : n_out - row0;
        f.store_rows(storage.data(), n_out, n_in, row0, n, file.data() + size_t(row0) * row_bytes(f, n_in));
    }
    return storage;
}

// Every row range [row0, row0 + n) of a few, against the file's bytes of those rows.
void expect_file_rows(const gpt2::BlockFormat& f, int n_out, int n_in, const std::vector<uint8_t>& file) {
    const std::vector<uint8_t> storage = stored(f, n_out, n_in, file, 2 * gpt2::kPanelRows);
    const size_t bytes = row_bytes(f, n_in);
    for (const auto& [row0, n] : std::vector<std::pair<int, int>>{{0, n_out}, {1, n_out - 1}, {n_out - 1, 1}, {3, 2}}) {
        std::vector<uint8_t> out(size_t(n) * bytes, 0xCD);
        f.file_rows(out.data(), storage.data(), n_out, n_in, row0, n);
        const std::vector<uint8_t> expected(file.begin() + ptrdiff_t(size_t(row0) * bytes),
                                            file.begin() + ptrdiff_t(size_t(row0 + n) * bytes));
        EXPECT_TRUE(out == expected) << f.name << " rows " << row0 << "+" << n << " of " << n_out << " x " << n_in;
    }
}

TEST(FileRows, Fp16BitsInvertEveryHalf) {
    for (uint32_t h = 0; h < 0x10000; h++)
        ASSERT_EQ(gpt2::f16_bits(gpt2::f16_to_float(uint16_t(h))), h) << std::hex << h;
}

TEST(FileRows, RandomBlocksComeBackBitForBit) {
    std::mt19937 rng(7);
    for (const WeightFormat format : kFormats) {
        const gpt2::BlockFormat& f = *gpt2::block_format(format);
        // 11 rows: a partial last panel; n_in of 3 blocks (F16: 37 values, a tail past the chunks of 8)
        const int n_out = 11, n_in = f.values_per_block == 1 ? 37 : 3 * int(f.values_per_block);
        std::vector<uint8_t> file(size_t(n_out) * row_bytes(f, n_in));
        for (uint8_t& b : file) b = uint8_t(rng());
        expect_file_rows(f, n_out, n_in, file);
    }
}

TEST(FileRows, FixtureBlocksComeBackBitForBit) {
    constexpr int kOut = 10, kIn = 512;  // tests/fixtures/ggml-blocks/manifest.json
    for (const WeightFormat format : kFormats) {
        const gpt2::BlockFormat& f = *gpt2::block_format(format);
        const std::vector<uint8_t> file =
            gpt2_test::read_file(std::string(GPT2_BLOCK_FIXTURE_DIR) + "/" + f.name + ".bin");
        ASSERT_EQ(file.size(), size_t(kOut) * row_bytes(f, kIn)) << f.name;
        expect_file_rows(f, kOut, kIn, file);
    }
}

}  // namespace
