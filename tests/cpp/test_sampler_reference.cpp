// The sampler against the independent NumPy reference (tools/python/gpt2tools/reference_sampling.py): on logits
// of the tiny-random fixture and the bundled model, the distribution every case's settings draw from
// (tests/fixtures/logits-processors/cases.json, made by gpt2tools.fixtures.make_sampling_fixtures) is the
// reference's, token for token within float tolerance, and exactly the same tokens are left in it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "formats/json.h"
#include "model/sampler.h"
#include "test_util.h"

namespace {

const std::string kDir = GPT2_SAMPLING_FIXTURE_DIR;

gpt2::JsonValue read_cases() {
    const std::vector<uint8_t> text = gpt2_test::read_file(kDir + "/cases.json");
    gpt2::JsonValue cases;
    std::string error;
    EXPECT_TRUE(gpt2::parse_json(reinterpret_cast<const char*>(text.data()), text.size(), &cases, &error, 1 << 20))
        << error;
    return cases;
}

std::vector<int32_t> ids(const gpt2::JsonValue& array) {
    std::vector<int32_t> out;
    for (const gpt2::JsonValue& v : array.array) out.push_back(int32_t(v.integer));
    return out;
}

gpt2::SamplingSettings settings_of(const gpt2::JsonValue& s) {
    auto number = [&](const char* key) { return float(s.find(key)->number); };
    auto integer = [&](const char* key) { return int(s.find(key)->integer); };
    gpt2::SamplingSettings out;
    out.temperature = number("temperature");
    out.top_k = integer("top_k");
    out.top_p = number("top_p");
    out.repetition_penalty = number("repetition_penalty");
    out.min_p = number("min_p");
    out.typical_p = number("typical_p");
    out.no_repeat_ngram_size = integer("no_repeat_ngram_size");
    out.presence_penalty = number("presence_penalty");
    out.frequency_penalty = number("frequency_penalty");
    for (const gpt2::JsonValue& entry : s.find("logit_bias")->array)
        out.logit_bias.push_back({int32_t(entry.array[0].integer), float(entry.array[1].number)});
    for (const gpt2::JsonValue& id : s.find("banned")->array)
        out.logit_bias.push_back({int32_t(id.integer), -INFINITY});
    for (const gpt2::JsonValue& word : s.find("bad_words")->array) out.bad_words.push_back(ids(word));
    out.min_new_tokens = integer("min_new_tokens");
    out.eos_token = int32_t(s.find("eos_token")->integer);
    return out;
}

}  // namespace

TEST(SamplerReference, EveryCasesDistributionIsTheNumPyReferences) {
    const gpt2::JsonValue fixture = read_cases();
    std::map<std::string, std::vector<float>> logits;  // model -> (rows, n_vocab)
    std::map<std::string, int> n_vocab;
    for (const auto& [name, model] : fixture.find("models")->object) {
        const std::vector<uint8_t> bytes = gpt2_test::read_file(kDir + "/" + model.find("logits")->string);
        logits[name].resize(bytes.size() / sizeof(float));
        std::memcpy(logits[name].data(), bytes.data(), bytes.size());
        n_vocab[name] = int(model.find("n_vocab")->integer);
    }
    const std::vector<gpt2::JsonValue>& contexts = fixture.find("contexts")->array;
    int n_cases = 0;
    double worst = 0.0;
    for (const gpt2::JsonValue& c : fixture.find("cases")->array) {
        const std::string& name = c.find("name")->string;
        const gpt2::JsonValue& context = contexts[size_t(c.find("context")->integer)];
        const std::string& model = context.find("model")->string;
        const int V = n_vocab[model];
        const float* row = logits[model].data() + size_t(context.find("row")->integer) * size_t(V);
        const std::vector<int32_t> window = ids(*context.find("window"));

        gpt2::Sampler sampler;
        std::string error;
        ASSERT_TRUE(sampler.init(V, &error)) << error;
        sampler.configure(settings_of(*c.find("settings")));
        std::vector<float> got(static_cast<size_t>(V));
        ASSERT_EQ(sampler.distribution(row, window.data(), int(window.size()),
                                       int(context.find("n_generated")->integer), got.data(), &error),
                  0)
            << name << ": " << error;

        std::vector<double> expected(size_t(V), 0.0);
        for (const gpt2::JsonValue& entry : c.find("probabilities")->array)
            expected[size_t(entry.array[0].integer)] = entry.array[1].number;
        double max_diff = 0.0;
        int support_mismatch = 0;
        for (int t = 0; t < V; t++) {
            max_diff = std::max(max_diff, std::fabs(double(got[size_t(t)]) - expected[size_t(t)]));
            if ((got[size_t(t)] > 0.0f) != (expected[size_t(t)] > 0.0)) support_mismatch++;
        }
        EXPECT_EQ(support_mismatch, 0) << name << ": tokens kept by one and not the other";
        EXPECT_LT(max_diff, 2e-6) << name;
        worst = std::max(worst, max_diff);
        n_cases++;
    }
    EXPECT_GE(n_cases, 30);
    std::printf("%d cases: largest probability difference to the reference %.3g\n", n_cases, worst);
}
