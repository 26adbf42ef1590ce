// The run state's one block (engine/forward.cpp): every buffer has the shape its comment in forward.h gives,
// lies inside the block, is aligned for its type and overlaps no other, except fc, which reuses the memory of
// qkv + att; and the block holds nothing else.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "forward.h"
#include "gpt2.h"

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

void expect_buffers_tile_the_block(const gpt2::Config& c) {
    const std::string what = "n_ctx " + std::to_string(c.n_ctx) + ", n_embd " + std::to_string(c.n_embd);
    gpt2::RunState s;
    std::string error;
    ASSERT_TRUE(gpt2::create_run_state(c, &s, &error)) << error;
    const uint64_t B = uint64_t(std::min(c.n_ctx, 64)), T = uint64_t(c.n_ctx), C = uint64_t(c.n_embd);
    const uint64_t L = uint64_t(c.n_layer), V = uint64_t(c.n_vocab);
    const uint64_t X = (4 * C + 31) / 32;  // blocks of 32 of the widest matmul input, rounded up
    EXPECT_EQ(uint64_t(s.n_batch), B) << what;
    const std::vector<Buffer> buffers = {
        buffer("x", s.x, B * C),
        buffer("xb", s.xb, B * C),
        buffer("qkv", s.qkv, B * 3 * C),
        buffer("att", s.att, B * C),
        buffer("proj", s.proj, B * C),
        buffer("scores", s.scores, T),
        buffer("logits", s.logits, V),
        buffer("xq_scale", s.xq_scale, B * X),
        buffer("xq_sum", s.xq_sum, B * X),
        buffer("key_cache", s.key_cache, L * T * C),
        buffer("value_cache", s.value_cache, L * T * C),
        buffer("tokens", s.tokens, T),
        buffer("xq", s.xq, B * 4 * C),
    };
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
    EXPECT_EQ(s.kv_cache_bytes, size_t(2 * L * T * C * sizeof(float))) << what;
    // fc (n_batch, 4 * n_embd) is exactly the memory of qkv and att, which are adjacent
    EXPECT_EQ(s.fc, s.qkv) << what;
    EXPECT_EQ(s.att, s.qkv + B * 3 * C) << what;
}

}  // namespace

TEST(RunState, BuffersFitTheBlockWithoutOverlapping) {
    gpt2::Config c{67, 40, 20, 4, 2, 1e-5f};  // n_ctx below the prefill chunk of 64 tokens
    expect_buffers_tile_the_block(c);
    c.n_ctx = 100;  // above it
    c.n_embd = 6;
    c.n_head = 3;
    c.n_vocab = 5;
    expect_buffers_tile_the_block(c);
}
