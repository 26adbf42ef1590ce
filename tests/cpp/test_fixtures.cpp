// Parity with the independent float64 NumPy reference (tests/fixtures/tiny-random, gpt2tools.fixtures.make_fixtures).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "formats/json.h"
#include "gpt2.h"
#include "model/weights.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

const std::string kDir = GPT2_FIXTURE_DIR;

std::unique_ptr<gpt2::Model> load_fixture(const std::string& weights_file) {
    const auto config = read_file(kDir + "/config.json");
    const auto weights = read_file(kDir + "/" + weights_file);
    EXPECT_FALSE(config.empty()) << kDir << "/config.json is missing (run gpt2tools.fixtures.make_fixtures)";
    EXPECT_FALSE(weights.empty()) << kDir << "/" << weights_file << " is missing";
    std::string error;
    auto model = gpt2::load_model(config.data(), config.size(), weights.data(), weights.size(), &error);
    EXPECT_TRUE(model) << error;
    return model;
}

gpt2::JsonValue read_json(const std::string& path) {
    const auto text = read_file(path);
    gpt2::JsonValue value;
    std::string error;
    EXPECT_TRUE(gpt2::parse_json(reinterpret_cast<const char*>(text.data()), text.size(), &value, &error))
        << path << ": " << error;
    return value;
}

std::vector<int32_t> int_array(const gpt2::JsonValue* v) {
    std::vector<int32_t> out;
    if (v)
        for (const auto& e : v->array) out.push_back(int32_t(e.integer));
    return out;
}

}  // namespace

TEST(Fixtures, LogitsMatchTheFloat64Reference) {
    auto model = load_fixture("model.safetensors");
    ASSERT_TRUE(model);
    const int V = gpt2::model_config(*model).n_vocab;
    EXPECT_EQ(V, 384);
    const gpt2::JsonValue cases = read_json(kDir + "/cases.json");
    ASSERT_GE(cases.array.size(), 3u);
    size_t longest = 0;
    for (bool cache : {true, false}) {
        std::string error;
        auto session = gpt2::Session::create(*model, cache, &error);
        ASSERT_TRUE(session) << error;
        for (const gpt2::JsonValue& c : cases.array) {
            const std::string name = c.find("name")->string;
            const auto ids = int_array(c.find("ids"));
            longest = std::max(longest, ids.size());
            const auto bytes = read_file(kDir + "/" + c.find("logits")->string);
            ASSERT_EQ(bytes.size(), ids.size() * size_t(V) * 4) << name;
            std::vector<float> expected(bytes.size() / 4), logits(expected.size());
            std::memcpy(expected.data(), bytes.data(), bytes.size());
            ASSERT_TRUE(session->prefill_logits(ids.data(), ids.size(), logits.data())) << session->error();
            float max_diff = 0;
            for (size_t i = 0; i < logits.size(); i++)
                max_diff = std::max(max_diff, std::fabs(logits[i] - expected[i]));
            std::printf("case %-6s (%3zu tokens): max |logit diff| = %.3g\n", name.c_str(), ids.size(), max_diff);
            EXPECT_LE(max_diff, 1e-4f) << name;
            // the cached path (prefill then steps) reproduces the same rows
            if (cache && ids.size() > 1) {
                session->prefill(ids.data(), 1);
                for (size_t p = 1; p < ids.size(); p++) session->step(ids[p]);
                EXPECT_EQ(std::memcmp(session->logits(), logits.data() + (ids.size() - 1) * V, sizeof(float) * V), 0);
            }
        }
    }
    EXPECT_GE(longest, 250u);
}

TEST(Fixtures, F16AndBF16FilesLoadBitIdentical) {
    auto f32 = load_fixture("model.safetensors");
    auto f16 = load_fixture("model-f16.safetensors");
    auto bf16 = load_fixture("model-bf16.safetensors");
    ASSERT_TRUE(f32 && f16 && bf16);
    const size_t bytes = gpt2::model_weight_bytes(*f32);
    ASSERT_EQ(bytes, gpt2::model_weight_bytes(*f16));
    ASSERT_EQ(bytes, gpt2::model_weight_bytes(*bf16));
    EXPECT_EQ(std::memcmp(f32->weights().memory, f16->weights().memory, bytes), 0);
    EXPECT_EQ(std::memcmp(f32->weights().memory, bf16->weights().memory, bytes), 0);
}

TEST(Fixtures, GreedyGenerationMatchesTheReference) {
    auto model = load_fixture("model.safetensors");
    ASSERT_TRUE(model);
    const gpt2::JsonValue greedy = read_json(kDir + "/greedy.json");
    const auto prompt = int_array(greedy.find("prompt"));
    const auto expected = int_array(greedy.find("generated"));
    ASSERT_FALSE(expected.empty());
    std::string error;
    auto session = gpt2::Session::create(*model, true, &error);
    ASSERT_TRUE(session) << error;
    gpt2::SamplingSettings settings;
    settings.temperature = 0.0f;
    session->set_sampling(settings);
    std::vector<int32_t> generated;
    int next = session->prefill(prompt.data(), prompt.size());
    while (generated.size() < expected.size()) {
        generated.push_back(next);
        next = session->step(next);
    }
    EXPECT_EQ(generated, expected);
}

TEST(Fixtures, CachedAndUncachedAgreeFor250Tokens) {
    auto model = load_fixture("model.safetensors");
    ASSERT_TRUE(model);
    std::string error;
    auto cached = gpt2::Session::create(*model, true, &error);
    auto uncached = gpt2::Session::create(*model, false, &error);
    ASSERT_TRUE(cached && uncached) << error;
    gpt2::SamplingSettings settings;
    settings.temperature = 0.0f;
    cached->set_sampling(settings);
    uncached->set_sampling(settings);
    const int32_t prompt[] = {259, 73, 75, 222, 59, 137, 172};
    int a = cached->prefill(prompt, 7), b = uncached->prefill(prompt, 7);
    const int V = gpt2::model_config(*model).n_vocab;
    for (int i = 0; i < 250; i++) {
        ASSERT_EQ(a, b) << "step " << i;
        float diff = 0;
        for (int v = 0; v < V; v++) diff = std::max(diff, std::fabs(cached->logits()[v] - uncached->logits()[v]));
        ASSERT_LE(diff, 1e-5f) << "step " << i;
        a = cached->step(a);
        b = uncached->step(b);
    }
    EXPECT_EQ(cached->n_cached(), 257);
}
