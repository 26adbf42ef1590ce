// The run state's one block (engine/model/forward.cpp), for either KV cache format: every buffer has the shape its
// comment in forward.h gives, lies inside the block, is aligned for its type and overlaps no other, except fc,
// which reuses the memory of qkv + att; and the block holds nothing else.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpt2.h"
#include "model/forward.h"

namespace {

struct Buffer {
    std::string name;
    const char* begin;
    uint64_t bytes;
    size_t alignment;
};

template <typename T>
Buffer buffer(const char* name, const T* p, uint64_t count) {
    return {name, reinterpret_cast<const char*>(p), count * sizeof(T), alignof(T)};
}

void expect_buffers_tile_the_block(const gpt2::Config& c, gpt2::KvCacheFormat kv) {
    const std::string what = "n_ctx " + std::to_string(c.n_ctx) + ", n_embd " + std::to_string(c.n_embd) + ", " +
                             gpt2::kv_cache_format_name(kv) + " cache";
    gpt2::RunState s;
    std::string error;
    ASSERT_TRUE(gpt2::create_run_state(c, kv, false, &s, &error)) << error;
    const uint64_t B = uint64_t(std::min(c.n_ctx, 64)), T = uint64_t(c.n_ctx), C = uint64_t(c.n_embd);
    const uint64_t L = uint64_t(c.n_layer), V = uint64_t(c.n_vocab), H = uint64_t(c.n_head);
    const uint64_t X = (4 * C + 31) / 32;  // blocks of 32 of the widest matmul input, rounded up
    EXPECT_EQ(uint64_t(s.n_batch), B) << what;
    std::vector<Buffer> buffers = {
        buffer("x", s.x, B * C),           buffer("xb", s.xb, B * C),
        buffer("qkv", s.qkv, B * 3 * C),   buffer("att", s.att, B * C),
        buffer("proj", s.proj, B * C),     buffer("scores", s.scores, H * ((T + 4) / 4 * 4)),
        buffer("logits", s.logits, V),     buffer("xq_scale", s.xq_scale, B * X),
        buffer("xq_sum", s.xq_sum, B * X), buffer("tokens", s.tokens, T),
        buffer("xq", s.xq, B * 4 * C),
    };
    uint64_t kv_cache_bytes = 0;
    const std::vector<Buffer> cache =
        kv == gpt2::KvCacheFormat::fp32
            ? std::vector<Buffer>{buffer("key_cache", s.key_cache, L * T * C),
                                  buffer("value_cache", s.value_cache, L * T * C)}
            : std::vector<Buffer>{buffer("key_cache_q8", s.key_cache_q8, L * T * C),
                                  buffer("value_cache_q8", s.value_cache_q8, L * C * 2 * ((T + 1) / 2)),
                                  buffer("key_scale", s.key_scale, L * H * T),
                                  buffer("value_scale", s.value_scale, L * H * T)};
    for (const Buffer& b : cache) kv_cache_bytes += b.bytes;
    buffers.insert(buffers.end(), cache.begin(), cache.end());
    if (kv == gpt2::KvCacheFormat::int8) {
        buffers.push_back(buffer("query_q", s.query_q, C));
        buffers.push_back(buffer("weights_q", s.weights_q, H * ((T + 4) / 4 * 4)));
    }
    const char* const block = static_cast<const char*>(s.memory);
    uint64_t total = 0;
    for (const Buffer& b : buffers) {
        EXPECT_GE(b.begin, block) << what << ": " << b.name;
        EXPECT_LE(b.begin + b.bytes, block + s.bytes) << what << ": " << b.name;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.begin) % b.alignment, 0u) << what << ": " << b.name;
        for (const Buffer& other : buffers) {
            if (&other == &b) continue;
            EXPECT_TRUE(b.begin + b.bytes <= other.begin || other.begin + other.bytes <= b.begin)
                << what << ": " << b.name << " overlaps " << other.name;
        }
        total += b.bytes;
    }
    EXPECT_EQ(total, uint64_t(s.bytes)) << what << ": the block holds only the buffers";
    EXPECT_EQ(s.kv_cache_bytes, size_t(kv_cache_bytes)) << what;
    // the other format's buffers do not exist
    if (kv == gpt2::KvCacheFormat::fp32)
        EXPECT_TRUE(!s.key_cache_q8 && !s.key_scale && !s.query_q && !s.weights_q) << what;
    else EXPECT_TRUE(!s.key_cache && !s.value_cache) << what;
    // fc (n_batch, 4 * n_embd) is exactly the memory of qkv and att, which are adjacent
    EXPECT_EQ(s.fc, s.qkv) << what;
    EXPECT_EQ(s.att, s.qkv + B * 3 * C) << what;
}

}  // namespace

TEST(RunState, BuffersFitTheBlockWithoutOverlapping) {
    for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
        gpt2::Config c{67, 40, 20, 4, 2, 1e-5f};  // n_ctx below the prefill chunk of 64 tokens
        expect_buffers_tile_the_block(c, kv);
        c.n_ctx = 99;  // above it, and odd sizes everywhere
        c.n_embd = 6;
        c.n_head = 3;
        c.n_vocab = 5;
        c.n_layer = 3;
        expect_buffers_tile_the_block(c, kv);
    }
}

TEST(RunState, TheInt8CacheTakesAboutAQuarterOfTheFp32Bytes) {
    const gpt2::Config c{50257, 1024, 768, 12, 12, 1e-5f};  // GPT-2 124M
    gpt2::RunState fp32, int8;
    std::string error;
    ASSERT_TRUE(gpt2::create_run_state(c, gpt2::KvCacheFormat::fp32, false, &fp32, &error)) << error;
    ASSERT_TRUE(gpt2::create_run_state(c, gpt2::KvCacheFormat::int8, false, &int8, &error)) << error;
    EXPECT_EQ(fp32.kv_cache_bytes, size_t(2) * 12 * 1024 * 768 * 4);                               // 75.5 MB
    EXPECT_EQ(int8.kv_cache_bytes, size_t(2) * 12 * 1024 * 768 + size_t(2) * 12 * 12 * 1024 * 4);  // 19.7 MB
}
