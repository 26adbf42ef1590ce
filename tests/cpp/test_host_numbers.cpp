// Numbers from a host (JavaScript's doubles) into the engine's types: taken exactly as given or refused with a
// one-line message naming the field, never narrowed or wrapped around (engine/host/host_numbers.h); and the engine's
// constants as a host reads them (engine/host/host_api.h).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "formats/json.h"
#include "host/host_api.h"
#include "host/host_numbers.h"
#include "model/forward_ops.h"

namespace {

constexpr double kTwoTo32 = 4294967296.0;
constexpr double kTwoTo53 = 9007199254740992.0;
constexpr size_t kVocab = 50257;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Numbers final : gpt2::HostArray {
    std::vector<double> values;
    double reported_length;
    explicit Numbers(std::vector<double> v) : values(std::move(v)), reported_length(double(values.size())) {}
    double length() const override { return reported_length; }
    void read(double* out, size_t n) const override {
        for (size_t i = 0; i < n; i++) out[i] = values[i];
    }
};

struct Sampling final : gpt2::HostSampling {
    std::vector<std::pair<double, double>> bias;
    std::vector<std::vector<double>> bad_words;
    double logit_bias_length() const override { return double(bias.size()); }
    void logit_bias(size_t i, double* token, double* value) const override {
        *token = bias[i].first;
        *value = bias[i].second;
    }
    double bad_words_length() const override { return double(bad_words.size()); }
    double bad_word_length(size_t i) const override { return Numbers(bad_words[i]).length(); }
    void read_bad_word(size_t i, double* out, size_t n) const override { Numbers(bad_words[i]).read(out, n); }
};

// The message for host's settings, or "" when they convert.
std::string refusal(const Sampling& host) {
    gpt2::SamplingSettings settings;
    gpt2::HostError error;
    if (gpt2::host_sampling_settings(host, &settings, &error)) return "";
    EXPECT_EQ(error.kind, gpt2::ErrorKind::input);
    return error.message;
}

}  // namespace

TEST(JsNumber, SpellsNumbersAsJavaScriptsStringDoes) {
    EXPECT_EQ(gpt2::js_number(1e39), "1e+39");
    EXPECT_EQ(gpt2::js_number(-1e39), "-1e+39");
    EXPECT_EQ(gpt2::js_number(4294967309.0), "4294967309");
    EXPECT_EQ(gpt2::js_number(kNaN), "NaN");
    EXPECT_EQ(gpt2::js_number(-INFINITY), "-Infinity");
    EXPECT_EQ(gpt2::js_number(INFINITY), "Infinity");
    EXPECT_EQ(gpt2::js_number(double(FLT_MAX)), "3.4028234663852886e+38");
    EXPECT_EQ(gpt2::js_number(1.5), "1.5");
    EXPECT_EQ(gpt2::js_number(-0.0), "0");
}

TEST(JsNumber, WritesRoundNumbersInFullBelow1e21AndSmallOnesWithoutPaddedExponents) {
    EXPECT_EQ(gpt2::js_number(5e9), "5000000000");
    EXPECT_EQ(gpt2::js_number(100.0), "100");
    EXPECT_EQ(gpt2::js_number(1e20), "100000000000000000000");
    EXPECT_EQ(gpt2::js_number(1e21), "1e+21");
    EXPECT_EQ(gpt2::js_number(0.000001), "0.000001");
    EXPECT_EQ(gpt2::js_number(1e-7), "1e-7");
    EXPECT_EQ(gpt2::js_number(1.25e-7), "1.25e-7");
    EXPECT_EQ(gpt2::js_number(123.456), "123.456");
}

TEST(HostSampling, DefaultsConvertToTheEngineDefaults) {
    gpt2::SamplingSettings settings;
    gpt2::HostError error;
    ASSERT_TRUE(gpt2::host_sampling_settings(Sampling(), &settings, &error)) << error.message;
    EXPECT_EQ(settings.temperature, 1.0f);
    EXPECT_EQ(settings.top_k, 0);
    EXPECT_EQ(settings.eos_token, -1);
    EXPECT_TRUE(settings.logit_bias.empty());
    EXPECT_TRUE(settings.bad_words.empty());
}

TEST(HostSampling, RefusesATemperatureOutsideTheFloatRangeInsteadOfMakingItInfinite) {
    Sampling host;
    host.temperature = 1e39;
    EXPECT_EQ(refusal(host), "setSampling: temperature 1e+39 is outside the float range");
}

TEST(HostSampling, TakesTheFloatRangesEdgeItselfAndRefusesTheNextDouble) {
    Sampling host;
    host.frequency_penalty = -double(FLT_MAX);
    gpt2::SamplingSettings settings;
    gpt2::HostError error;
    ASSERT_TRUE(gpt2::host_sampling_settings(host, &settings, &error)) << error.message;
    EXPECT_EQ(settings.frequency_penalty, -FLT_MAX);
    host.frequency_penalty = std::nextafter(-double(FLT_MAX), -INFINITY);
    EXPECT_EQ(refusal(host), "setSampling: frequencyPenalty -3.402823466385289e+38 is outside the float range");
}

TEST(HostSampling, RefusesATopKAboveTheInt32RangeInsteadOfWrappingItAround) {
    Sampling host;
    host.top_k = kTwoTo32 + 1;
    EXPECT_EQ(refusal(host), "setSampling: topK 4294967297 is not an integer in the int32 range");
}

TEST(HostSampling, RefusesAnIntegerOptionThatIsNotAnInteger) {
    Sampling host;
    host.min_new_tokens = 1.5;
    EXPECT_EQ(refusal(host), "setSampling: minNewTokens 1.5 is not an integer in the int32 range");
}

TEST(HostSampling, RefusesNaN) {
    Sampling host;
    host.top_p = kNaN;
    EXPECT_EQ(refusal(host), "setSampling: topP NaN is not a finite number");
    host.top_p = 1.0;
    host.no_repeat_ngram_size = kNaN;
    EXPECT_EQ(refusal(host), "setSampling: noRepeatNgramSize NaN is not an integer in the int32 range");
    host.no_repeat_ngram_size = 0.0;
    host.bias = {{13.0, kNaN}};
    EXPECT_EQ(refusal(host), "setSampling: logitBias NaN for token 13 is not a finite number or -Infinity");
}

TEST(HostSampling, NamesTheFirstRefusedFieldInTheOrderOfTheSettings) {
    Sampling host;
    host.eos_token = kTwoTo32;
    host.temperature = INFINITY;
    host.seed = -1;
    EXPECT_EQ(refusal(host), "setSampling: temperature Infinity is not a finite number");
}

TEST(HostSampling, TakesAMinusInfinityBiasAsABan) {
    Sampling host;
    host.bias = {{13.0, -INFINITY}, {7.0, 2.5}};
    gpt2::SamplingSettings settings;
    gpt2::HostError error;
    ASSERT_TRUE(gpt2::host_sampling_settings(host, &settings, &error)) << error.message;
    ASSERT_EQ(settings.logit_bias.size(), 2u);
    EXPECT_EQ(settings.logit_bias[0].token, 13);
    EXPECT_EQ(settings.logit_bias[0].bias, -INFINITY);
    EXPECT_EQ(settings.logit_bias[1].token, 7);
    EXPECT_EQ(settings.logit_bias[1].bias, 2.5f);
}

TEST(HostSampling, RefusesAPlusInfinityBiasAndOneOutsideTheFloatRange) {
    Sampling host;
    host.bias = {{13.0, INFINITY}};
    EXPECT_EQ(refusal(host), "setSampling: logitBias Infinity for token 13 is not a finite number or -Infinity");
    host.bias = {{13.0, 1e39}};
    EXPECT_EQ(refusal(host), "setSampling: logitBias 1e+39 for token 13 is outside the float range");
    host.bias = {{kTwoTo32 + 13, 5.0}};
    EXPECT_EQ(refusal(host), "setSampling: logitBias token 4294967309 is not an integer in the int32 range");
}

TEST(HostSampling, TakesSeedsUpTo2To53Exclusive) {
    Sampling host;
    host.seed = kTwoTo53 - 1;
    gpt2::SamplingSettings settings;
    gpt2::HostError error;
    ASSERT_TRUE(gpt2::host_sampling_settings(host, &settings, &error)) << error.message;
    EXPECT_EQ(settings.seed, 9007199254740991u);
    host.seed = kTwoTo53;
    EXPECT_EQ(refusal(host), "setSampling: seed 9007199254740992 is not an integer in [0, 2^53)");
    host.seed = -1;
    EXPECT_EQ(refusal(host), "setSampling: seed -1 is not an integer in [0, 2^53)");
    host.seed = 0.5;
    EXPECT_EQ(refusal(host), "setSampling: seed 0.5 is not an integer in [0, 2^53)");
}

TEST(HostSampling, ConvertsBadWordsAndRefusesATokenOutsideTheInt32Range) {
    Sampling host;
    host.bad_words = {{5.0, 6.0}, {7.0}};
    gpt2::SamplingSettings settings;
    gpt2::HostError error;
    ASSERT_TRUE(gpt2::host_sampling_settings(host, &settings, &error)) << error.message;
    EXPECT_EQ(settings.bad_words, (std::vector<std::vector<int32_t>>{{5, 6}, {7}}));
    host.bad_words = {{5.0, 2147483648.0}};
    EXPECT_EQ(refusal(host), "setSampling: badWords token 2147483648 is not an integer in the int32 range");
}

TEST(HostTokenIds, ReadsExactInt32Ids) {
    std::unique_ptr<int32_t[]> ids;
    size_t n = 0;
    gpt2::HostError error;
    ASSERT_TRUE(gpt2::host_token_ids(Numbers({50256.0, 0.0, -1.0}), kVocab, &ids, &n, &error)) << error.message;
    ASSERT_EQ(n, 3u);
    EXPECT_EQ(ids[0], 50256);
    EXPECT_EQ(ids[1], 0);
    EXPECT_EQ(ids[2], -1);  // an int32: the engine's vocabulary check refuses it
}

TEST(HostTokenIds, RefusesAnIdOf2To32Plus13InsteadOfReadingToken13) {
    std::unique_ptr<int32_t[]> ids;
    size_t n = 0;
    gpt2::HostError error;
    EXPECT_FALSE(gpt2::host_token_ids(Numbers({1.0, kTwoTo32 + 13}), kVocab, &ids, &n, &error));
    EXPECT_EQ(error.kind, gpt2::ErrorKind::input);
    EXPECT_EQ(error.message, "token id 4294967309 out of range [0, 50257)");
    EXPECT_EQ(ids, nullptr);
}

TEST(HostTokenIds, RefusesAnIdThatIsNotAnInteger) {
    int32_t id = 7;
    EXPECT_EQ(gpt2::token_id_refusal(1.5, kVocab, &id), "token id 1.5 is not an integer");
    EXPECT_EQ(gpt2::token_id_refusal(kNaN, kVocab, &id), "token id NaN out of range [0, 50257)");
    EXPECT_EQ(id, 7);
    EXPECT_EQ(gpt2::token_id_refusal(42.0, kVocab, &id), "");
    EXPECT_EQ(id, 42);
}

TEST(HostTokenIds, RefusesAnArrayWhoseLengthIsNotACount) {
    Numbers array({});
    array.reported_length = kNaN;
    std::unique_ptr<int32_t[]> ids;
    size_t n = 0;
    gpt2::HostError error;
    EXPECT_FALSE(gpt2::host_token_ids(array, kVocab, &ids, &n, &error));
    EXPECT_EQ(error.kind, gpt2::ErrorKind::input);
    EXPECT_EQ(error.message, "the token ids must be an Array or typed array, got a length of NaN");
}

TEST(HostBeamSettings, RefusesCountsOutsideTheInt32RangeAndANaNLengthPenalty) {
    gpt2::BeamSettings settings;
    std::string error;
    ASSERT_TRUE(gpt2::host_beam_settings(4, 0.5, "never", 20, 50256, &settings, &error)) << error;
    EXPECT_EQ(settings.num_beams, 4);
    EXPECT_EQ(settings.length_penalty, 0.5f);
    EXPECT_EQ(settings.early_stopping, gpt2::EarlyStopping::never);
    EXPECT_EQ(settings.max_new_tokens, 20);
    EXPECT_EQ(settings.eos_token, 50256);
    EXPECT_FALSE(gpt2::host_beam_settings(2, 1, "heuristic", kTwoTo32 + 5, -1, &settings, &error));
    EXPECT_EQ(error, "beam search: max_new_tokens 4294967301 is not an integer in the int32 range");
    EXPECT_FALSE(gpt2::host_beam_settings(2, kNaN, "heuristic", 16, -1, &settings, &error));
    EXPECT_EQ(error, "beam search: length_penalty NaN is outside the float range");
}

TEST(HostTopK, TakesZeroToTheVocabularySizeAndNamesTheMethodOtherwise) {
    int k = -1;
    std::string error;
    EXPECT_TRUE(gpt2::host_top_k(double(kVocab), kVocab, "score", &k, &error));
    EXPECT_EQ(k, 50257);
    EXPECT_FALSE(gpt2::host_top_k(double(kVocab) + 1, kVocab, "score", &k, &error));
    EXPECT_EQ(error, "score: top_k 50258 out of range [0, 50257]");
    EXPECT_FALSE(gpt2::host_top_k(2.5, kVocab, "distribution", &k, &error));
    EXPECT_EQ(error, "distribution: top_k 2.5 out of range [0, 50257]");
}

// The engine's constants as a host reads them (host_constants_json): one JSON object of the engine's own values, its
// enums' names in code order up to the last value, so that a value added past the end of a list fails here.
TEST(HostConstants, AreOneJsonObjectOfTheEnginesValuesNamingEveryEnumValueInCodeOrder) {
    const std::string text = gpt2::host_constants_json();
    gpt2::JsonValue root;
    std::string error;
    ASSERT_TRUE(gpt2::parse_json(text.data(), text.size(), &root, &error)) << error << ": " << text;
    const gpt2::JsonValue* limits = root.find("limits");
    ASSERT_NE(limits, nullptr);
    EXPECT_EQ(limits->find("maxSequences")->integer, gpt2::Sequences::kMaxSequences);
    EXPECT_EQ(limits->find("maxFloat")->number, double(gpt2::kMaxFloat));
    EXPECT_EQ(root.find("gpuCommands")->find("ints")->integer, gpt2::kGpuCommandInts);
    const gpt2::JsonValue* enums = root.find("enums");
    ASSERT_NE(enums, nullptr);
    const std::vector<gpt2::JsonValue>& formats = enums->find("weightFormats")->array;
    for (size_t i = 0; i < formats.size(); i++)
        EXPECT_EQ(formats[i].string, gpt2::weight_format_name(gpt2::WeightFormat(i)));
    EXPECT_STREQ(gpt2::weight_format_name(gpt2::WeightFormat(formats.size())), "");
    const std::vector<gpt2::JsonValue>& kinds = enums->find("errorKinds")->array;
    for (size_t i = 0; i < kinds.size(); i++) EXPECT_EQ(kinds[i].string, gpt2::error_kind_name(gpt2::ErrorKind(i)));
    EXPECT_STREQ(gpt2::error_kind_name(gpt2::ErrorKind(kinds.size())), "");
}
