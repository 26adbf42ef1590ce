// NaN and infinity: a weight that is not finite is rejected at load (naming the tensor and the element in the
// file's order), and finite weights that overflow make generation stop with an error naming the position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "gpt2.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

const ModelSpec kSpec;  // 67 vocab, 40 ctx, 20 embd, 4 heads, 2 layers
const float kInf = std::numeric_limits<float>::infinity();

// Sets element i of an F32 tensor.
void set(TensorSpec& t, size_t i, float value) { std::memcpy(t.bytes.data() + 4 * i, &value, 4); }

std::string load_error(const std::vector<TensorSpec>& tensors) {
    std::string error;
    auto model = load(config_json(kSpec), build_safetensors(tensors), &error);
    EXPECT_FALSE(model);
    return error;
}

}  // namespace

TEST(NonFinite, NamesTheTensorAndTheElementInFileOrder) {
    auto tensors = random_tensors(kSpec);
    // c_attn is Conv1D [in = 20][out = 60], transposed at load: the index is still the file's (row 3, column 17)
    set(find_tensor(tensors, "h.1.attn.c_attn.weight"), 3 * 60 + 17, NAN);
    EXPECT_EQ(load_error(tensors), "model.safetensors: tensor 'h.1.attn.c_attn.weight' contains NaN at element 197");

    tensors = random_tensors(kSpec, "F32", "transformer.");
    set(find_tensor(tensors, "transformer.ln_f.bias"), 19, -kInf);  // last element of a tensor that is not transposed
    EXPECT_EQ(load_error(tensors), "model.safetensors: tensor 'transformer.ln_f.bias' contains -Inf at element 19");
}

TEST(NonFinite, RejectsF16AndBF16InfinityAndNaN) {
    auto f16 = random_tensors(kSpec, "F16");
    TensorSpec& fc = find_tensor(f16, "h.0.mlp.c_fc.weight");
    fc.bytes[2 * 100] = 0x00, fc.bytes[2 * 100 + 1] = 0x7C;  // F16 +inf
    EXPECT_EQ(load_error(f16), "model.safetensors: tensor 'h.0.mlp.c_fc.weight' contains Inf at element 100");

    auto bf16 = random_tensors(kSpec, "BF16");
    TensorSpec& wte = find_tensor(bf16, "wte.weight");
    wte.bytes[2 * 66 * 20] = 0xC1, wte.bytes[2 * 66 * 20 + 1] = 0x7F;  // BF16 nan in the last row
    EXPECT_EQ(load_error(bf16), "model.safetensors: tensor 'wte.weight' contains NaN at element 1320");
}

TEST(NonFinite, OverflowingActivationsStopGenerationAtTheirPosition) {
    // All weights finite: position 3's embedding is 3.4e38 and token 9's is 1e36, so only token 9 at position 3
    // overflows (to inf, then NaN through the layernorm). Token 9's logit stays finite (1e36 * O(1) * 20).
    auto tensors = random_tensors(kSpec);
    for (size_t i = 0; i < 20; i++) {
        set(find_tensor(tensors, "wpe.weight"), 3 * 20 + i, 3.4e38f);
        set(find_tensor(tensors, "wte.weight"), 9 * 20 + i, 1e36f);
    }
    std::string error;
    auto model = load(config_json(kSpec), build_safetensors(tensors), &error);
    ASSERT_TRUE(model) << error;
    for (bool cache : {true, false}) {
        auto session = gpt2::Session::create(*model, cache, &error);
        ASSERT_TRUE(session) << error;
        const int32_t prompt[3] = {1, 2, 3};
        EXPECT_GE(session->prefill(prompt, 3), 0) << session->error();
        EXPECT_EQ(session->step(9), -1);
        EXPECT_EQ(session->error(), "the model produced non-finite logits (NaN/Inf) at position 3");
        // the session stays usable: a new prompt starts from scratch
        EXPECT_GE(session->prefill(prompt, 3), 0) << session->error();
        EXPECT_EQ(session->error(), "");
        const int32_t overflowing_prompt[4] = {1, 2, 3, 9};
        EXPECT_EQ(session->prefill(overflowing_prompt, 4), -1);
        EXPECT_EQ(session->error(), "the model produced non-finite logits (NaN/Inf) at position 3");
    }
}
