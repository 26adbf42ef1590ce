// The sampler on hand-made logits: greedy, determinism, top-k / top-p sets, repetition penalty, each logits
// processor and min-p / typical-p.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "model/sampler.h"

namespace {

std::vector<float> ramp_logits(int n) {  // token i has logit sin-scrambled but distinct
    std::vector<float> logits(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) logits[size_t(i)] = std::sin(float(i) * 1.7f) * 3.0f;
    return logits;
}

std::vector<int> draw(gpt2::Sampler& sampler, const std::vector<float>& logits, int n) {
    std::vector<int> out;
    std::string error;
    for (int i = 0; i < n; i++) out.push_back(sampler.sample(logits.data(), nullptr, 0, 0, &error));
    return out;
}

// the k ids with the largest logits
std::set<int> top_ids(const std::vector<float>& logits, int k) {
    std::vector<int> order(logits.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = int(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
    return std::set<int>(order.begin(), order.begin() + k);
}

}  // namespace

TEST(Rng, IsDeterministicAndUniform) {
    gpt2::Rng a, b;
    a.seed(123);
    b.seed(123);
    for (int i = 0; i < 100; i++) ASSERT_EQ(a.next_u64(), b.next_u64());
    a.seed(0);
    // xoshiro256** from splitmix64(0): first output pinned so every platform agrees
    EXPECT_EQ(a.next_u64(), 0x99EC5F36CB75F2B4ull);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        const float f = a.next_float();
        ASSERT_GE(f, 0.0f);
        ASSERT_LT(f, 1.0f);
        sum += f;
    }
    EXPECT_NEAR(sum / 100000, 0.5, 0.01);
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(8, &error));
    gpt2::SamplingSettings greedy;
    greedy.temperature = 0.0f;
    sampler.configure(greedy);
    std::vector<float> logits = {0.5f, 2.0f, -1.0f, 3.0f, 3.0f, 1.0f, 0.0f, 2.9f};
    EXPECT_EQ(sampler.sample(logits.data(), nullptr, 0, 0, &error), 3);
    auto ramp = ramp_logits(8);
    EXPECT_EQ(sampler.sample(ramp.data(), nullptr, 0, 0, &error),
              int(std::max_element(ramp.begin(), ramp.end()) - ramp.begin()));
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
    const auto logits = ramp_logits(50);
    std::string error;
    gpt2::Sampler a, b, c;
    ASSERT_TRUE(a.init(50, &error) && b.init(50, &error) && c.init(50, &error));
    gpt2::SamplingSettings s;
    s.temperature = 1.5f;
    s.seed = 7;
    a.configure(s);
    b.configure(s);
    s.seed = 8;
    c.configure(s);
    const auto seq_a = draw(a, logits, 200), seq_b = draw(b, logits, 200), seq_c = draw(c, logits, 200);
    EXPECT_EQ(seq_a, seq_b);
    EXPECT_NE(seq_a, seq_c);
    // reconfiguring reseeds
    s.seed = 7;
    a.configure(s);
    EXPECT_EQ(draw(a, logits, 200), seq_a);
}

TEST(Sampler, FollowsTheDistribution) {
    std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(3, &error));
    gpt2::SamplingSettings s;
    s.seed = 1;
    sampler.configure(s);
    std::vector<int> counts(3);
    for (int t : draw(sampler, logits, 30000)) counts[size_t(t)]++;
    EXPECT_NEAR(counts[0] / 30000.0, 0.5, 0.02);
    EXPECT_NEAR(counts[1] / 30000.0, 0.3, 0.02);
    EXPECT_NEAR(counts[2] / 30000.0, 0.2, 0.02);
}

TEST(Sampler, TopKNeverLeavesTheTopK) {
    const auto logits = ramp_logits(100);
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(100, &error));
    for (int k : {1, 3, 10}) {
        gpt2::SamplingSettings s;
        s.temperature = 5.0f;  // flat: without top-k everything would show up
        s.top_k = k;
        s.seed = uint64_t(k);
        sampler.configure(s);
        const auto allowed = top_ids(logits, k);
        std::set<int> seen;
        for (int t : draw(sampler, logits, 5000)) {
            ASSERT_TRUE(allowed.count(t)) << "k " << k << " picked " << t;
            seen.insert(t);
        }
        EXPECT_EQ(seen, allowed);
    }
}

TEST(Sampler, TopPNeverLeavesTheNucleus) {
    // probabilities 0.4, 0.25, 0.15, 0.1, then 20 tokens sharing 0.1
    std::vector<float> probs = {0.4f, 0.25f, 0.15f, 0.1f};
    for (int i = 0; i < 20; i++) probs.push_back(0.005f);
    std::vector<float> logits;
    for (float p : probs) logits.push_back(std::log(p));
    std::swap(logits[0], logits[7]);  // the order of ids must not matter
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(int(logits.size()), &error));
    struct Case {
        float top_p;
        std::set<int> nucleus;
    };
    for (const Case& c : {Case{0.5f, {7, 1}}, Case{0.75f, {7, 1, 2}}, Case{0.85f, {7, 1, 2, 3}}, Case{0.0f, {7}}}) {
        gpt2::SamplingSettings s;
        s.top_p = c.top_p;
        s.seed = 99;
        sampler.configure(s);
        std::set<int> seen;
        for (int t : draw(sampler, logits, 5000)) {
            ASSERT_TRUE(c.nucleus.count(t)) << "top_p " << c.top_p << " picked " << t;
            seen.insert(t);
        }
        EXPECT_EQ(seen, c.nucleus) << c.top_p;
    }
    // combined with top-k: the smaller set wins
    gpt2::SamplingSettings s;
    s.top_p = 0.85f;
    s.top_k = 2;
    sampler.configure(s);
    for (int t : draw(sampler, logits, 2000)) ASSERT_TRUE(t == 7 || t == 1) << t;
}

TEST(Sampler, RepetitionPenaltyChangesThePick) {
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(4, &error));
    gpt2::SamplingSettings s;
    s.temperature = 0.0f;
    s.repetition_penalty = 1.5f;
    sampler.configure(s);
    // positive logits are divided: 3.0 / 1.5 = 2.0 < 2.5
    std::vector<float> logits = {3.0f, 2.5f, 0.0f, -1.0f};
    const int32_t window[] = {0, 0, 0};  // repeated tokens are penalized once
    EXPECT_EQ(sampler.sample(logits.data(), window, 0, 0, &error), 0);
    EXPECT_EQ(sampler.sample(logits.data(), window, 3, 0, &error), 1);
    // negative logits are multiplied: -0.5 * 1.5 = -0.75 < -0.6
    std::vector<float> negative = {-0.5f, -0.6f, -3.0f, -4.0f};
    EXPECT_EQ(sampler.sample(negative.data(), window, 1, 0, &error), 1);
    // a penalty just below the crossover keeps the pick: 3.0 / 1.19 > 2.5
    s.repetition_penalty = 1.19f;
    sampler.configure(s);
    EXPECT_EQ(sampler.sample(logits.data(), window, 1, 0, &error), 0);
}

TEST(Sampler, RejectsNonFiniteLogits) {
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(3, &error));
    std::vector<float> logits = {1.0f, NAN, 0.0f};
    EXPECT_EQ(sampler.sample(logits.data(), nullptr, 0, 0, &error), -1);
    EXPECT_EQ(error, "logits contain nan or inf (token 1)");
}

// The logits processors, each on logits made so that it alone decides the greedy pick.
namespace {

gpt2::SamplingSettings greedy_settings() {
    gpt2::SamplingSettings s;
    s.temperature = 0.0f;
    return s;
}

int greedy_pick(const gpt2::SamplingSettings& settings, const std::vector<float>& logits,
                const std::vector<int32_t>& window, int n_generated, std::string* error) {
    gpt2::Sampler sampler;
    EXPECT_TRUE(sampler.init(int(logits.size()), error));
    sampler.configure(settings);
    return sampler.sample(logits.data(), window.data(), int(window.size()), n_generated, error);
}

}  // namespace

TEST(LogitsProcessors, LogitBiasAddsToATokensLogitAndMinusInfinityBansIt) {
    std::string error;
    const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f};
    gpt2::SamplingSettings s = greedy_settings();
    EXPECT_EQ(greedy_pick(s, logits, {}, 0, &error), 1);
    s.logit_bias = {{3, 2.5f}, {3, 0.6f}};  // entries for one token add up: 0 + 3.1 > 3
    EXPECT_EQ(greedy_pick(s, logits, {}, 0, &error), 3);
    s.logit_bias = {{1, -INFINITY}};
    EXPECT_EQ(greedy_pick(s, logits, {}, 0, &error), 2);
}

TEST(LogitsProcessors, PresenceAndFrequencyPenalizeOnlyTheGeneratedTokensByTheirCounts) {
    std::string error;
    const std::vector<float> logits = {3.0f, 2.5f, 2.2f, 0.0f};
    const std::vector<int32_t> window = {0, 0, 1, 0, 1};  // the prompt 0 0, then generated 1 0 1
    gpt2::SamplingSettings s = greedy_settings();
    s.presence_penalty = 0.6f;  // 3.0 - 0.6 = 2.4 still beats 2.2 and 2.5 - 0.6
    EXPECT_EQ(greedy_pick(s, logits, window, 3, &error), 0);
    s.presence_penalty = 0.9f;  // 2.1 and 1.6 against 2.2: the token not generated wins
    EXPECT_EQ(greedy_pick(s, logits, window, 3, &error), 2);
    // counted over the generated tokens only: with one generated token (1), token 0 is not penalized
    EXPECT_EQ(greedy_pick(s, logits, window, 1, &error), 0);
    s.presence_penalty = 0.0f;
    s.frequency_penalty = 0.3f;  // token 1 twice: 2.5 - 0.6; token 0 once: 3.0 - 0.3 = 2.7 wins
    EXPECT_EQ(greedy_pick(s, logits, window, 3, &error), 0);
    s.frequency_penalty = 0.9f;  // 3.0 - 0.9 = 2.1 < 2.2
    EXPECT_EQ(greedy_pick(s, logits, window, 3, &error), 2);
    // more generated tokens than the window holds (a slid window): all of the window is generated
    EXPECT_EQ(greedy_pick(s, logits, window, 100, &error), 2);
}

TEST(LogitsProcessors, NoRepeatNgramBansTheTokenThatWouldRepeatAnNgramOfTheWindow) {
    std::string error;
    const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 5.0f, 4.0f, 1.0f};
    const std::vector<int32_t> window = {1, 2, 3, 0, 1, 2};  // ends with 1 2, which 3 followed before
    gpt2::SamplingSettings s = greedy_settings();
    EXPECT_EQ(greedy_pick(s, logits, window, 0, &error), 3);
    s.no_repeat_ngram_size = 3;  // 1 2 3 again is banned
    EXPECT_EQ(greedy_pick(s, logits, window, 0, &error), 4);
    s.no_repeat_ngram_size = 4;  // 0 1 2 never continued: nothing banned
    EXPECT_EQ(greedy_pick(s, logits, window, 0, &error), 3);
    s.no_repeat_ngram_size = 1;  // every token of the window is banned
    EXPECT_EQ(greedy_pick(s, logits, window, 0, &error), 4);
    s.no_repeat_ngram_size = 7;  // longer than the window: nothing to repeat
    EXPECT_EQ(greedy_pick(s, logits, window, 0, &error), 3);
}

TEST(LogitsProcessors, BadWordsBanTheirLastTokenOnceTheWindowEndsWithTheRest) {
    std::string error;
    const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 5.0f, 4.0f, 3.0f};
    gpt2::SamplingSettings s = greedy_settings();
    s.bad_words = {{2, 3}};
    EXPECT_EQ(greedy_pick(s, logits, {1, 2}, 0, &error), 4);  // ends with 2: 3 would finish the word
    EXPECT_EQ(greedy_pick(s, logits, {2, 1}, 0, &error), 3);  // does not
    s.bad_words = {{3}, {1, 2, 4}};                           // a one-token word is always banned
    EXPECT_EQ(greedy_pick(s, logits, {1, 2}, 0, &error), 5);
    EXPECT_EQ(greedy_pick(s, logits, {2}, 0, &error), 4);  // the window is shorter than the word's start
}

TEST(LogitsProcessors, MinNewTokensHoldsBackEndOfTextUntilThatManyTokensAreGenerated) {
    std::string error;
    const std::vector<float> logits = {1.0f, 0.0f, 4.0f};  // token 2 is end-of-text and the likeliest
    gpt2::SamplingSettings s = greedy_settings();
    s.min_new_tokens = 2;
    s.eos_token = 2;
    EXPECT_EQ(greedy_pick(s, logits, {0, 1}, 0, &error), 0);
    EXPECT_EQ(greedy_pick(s, logits, {0, 1}, 1, &error), 0);
    EXPECT_EQ(greedy_pick(s, logits, {0, 1}, 2, &error), 2);
    s.eos_token = -1;  // no end-of-text token: nothing to hold back
    EXPECT_EQ(greedy_pick(s, logits, {0, 1}, 0, &error), 2);
}

TEST(LogitsProcessors, SettingsThatBanEveryTokenAreAnErrorGreedyOrSampled) {
    std::string error;
    gpt2::SamplingSettings s = greedy_settings();
    s.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
    s.bad_words = {{2}};
    EXPECT_EQ(greedy_pick(s, {1.0f, 2.0f, 3.0f}, {}, 0, &error), gpt2::Sampler::kAllBanned);
    EXPECT_EQ(error, "the sampling settings ban every token (logitBias, badWords, noRepeatNgramSize, minNewTokens)");
    error.clear();
    s.temperature = 1.0f;
    EXPECT_EQ(greedy_pick(s, {1.0f, 2.0f, 3.0f}, {}, 0, &error), gpt2::Sampler::kAllBanned);
    EXPECT_EQ(error, "the sampling settings ban every token (logitBias, badWords, noRepeatNgramSize, minNewTokens)");
}

TEST(LogitsProcessors, ABannedTokenIsNeverDrawnEvenWhereTopKWouldKeepIt) {
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(5, &error));
    gpt2::SamplingSettings s;
    s.top_k = 4;  // more than the two tokens left
    s.logit_bias = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
    sampler.configure(s);
    const std::vector<float> logits = {9.0f, 9.0f, 9.0f, 0.0f, 0.0f};
    for (int i = 0; i < 200; i++) {
        const int token = sampler.sample(logits.data(), nullptr, 0, 0, &error);
        EXPECT_TRUE(token == 3 || token == 4) << token;
    }
}

TEST(LogitsProcessors, MinPKeepsTheTokensWithAtLeastMinPTimesTheTopProbability) {
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(4, &error));
    gpt2::SamplingSettings s;
    s.min_p = 0.3f;
    sampler.configure(s);
    // probabilities 0.5, 0.2, 0.2, 0.1 (the threshold 0.15 drops the last)
    const std::vector<float> logits = {std::log(0.5f), std::log(0.2f), std::log(0.2f), std::log(0.1f)};
    std::vector<float> p(4);
    ASSERT_EQ(sampler.distribution(logits.data(), nullptr, 0, 0, p.data(), &error), 0);
    EXPECT_NEAR(p[0], 0.5f / 0.9f, 1e-6f);
    EXPECT_NEAR(p[1], 0.2f / 0.9f, 1e-6f);
    EXPECT_NEAR(p[2], 0.2f / 0.9f, 1e-6f);
    EXPECT_EQ(p[3], 0.0f);
}

TEST(LogitsProcessors, TypicalPKeepsTheTokensClosestToTheEntropyUntilTheirMassReachesTypicalP) {
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(4, &error));
    gpt2::SamplingSettings s;
    s.typical_p = 0.45f;
    sampler.configure(s);
    // entropy of (0.4, 0.3, 0.2, 0.1) is 1.2799 nats; surprises 0.916, 1.204, 1.609, 2.303: the gaps order
    // 0.3 (0.076), 0.2 (0.330), 0.4 (0.364), 0.1 (1.023), and 0.3 + 0.2 is the first to reach 0.45
    const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
    std::vector<float> p(4);
    ASSERT_EQ(sampler.distribution(logits.data(), nullptr, 0, 0, p.data(), &error), 0);
    EXPECT_EQ(p[0], 0.0f);
    EXPECT_NEAR(p[1], 0.6f, 1e-6f);
    EXPECT_NEAR(p[2], 0.4f, 1e-6f);
    EXPECT_EQ(p[3], 0.0f);
}

namespace {

// check_sampling's error for the default settings with one field changed, or "" when it takes them.
template <typename Change>
std::string refusal(Change change, int n_vocab = 4) {
    gpt2::SamplingSettings s;
    change(s);
    std::string error;
    return gpt2::check_sampling(s, n_vocab, &error) ? "" : error;
}

}  // namespace

TEST(SamplingSettings, AValueOutsideItsRangeIsRefusedWithItsFieldNamedNeverTurnedOff) {
    using S = gpt2::SamplingSettings;
    EXPECT_EQ(refusal([](S& s) { s.temperature = NAN; }),
              "sampling: temperature nan, expected a finite number >= 0 (0: greedy)");
    EXPECT_EQ(refusal([](S& s) { s.temperature = -1.0f; }),
              "sampling: temperature -1, expected a finite number >= 0 (0: greedy)");
    EXPECT_EQ(refusal([](S& s) { s.temperature = INFINITY; }),
              "sampling: temperature inf, expected a finite number >= 0 (0: greedy)");
    EXPECT_EQ(refusal([](S& s) { s.top_k = -5; }), "sampling: top_k -5, expected >= 0 (0: every token)");
    EXPECT_EQ(refusal([](S& s) { s.top_p = NAN; }), "sampling: top_p nan, expected a number in [0, 1] (1: off)");
    EXPECT_EQ(refusal([](S& s) { s.top_p = 1.5f; }), "sampling: top_p 1.5, expected a number in [0, 1] (1: off)");
    EXPECT_EQ(refusal([](S& s) { s.top_p = -0.1f; }), "sampling: top_p -0.1, expected a number in [0, 1] (1: off)");
    EXPECT_EQ(refusal([](S& s) { s.repetition_penalty = 0.0f; }),
              "sampling: repetition_penalty 0, expected a finite number > 0 (1: off)");
    EXPECT_EQ(refusal([](S& s) { s.repetition_penalty = INFINITY; }),
              "sampling: repetition_penalty inf, expected a finite number > 0 (1: off)");
    EXPECT_EQ(refusal([](S& s) { s.min_p = 1.5f; }), "sampling: min_p 1.5, expected a number in [0, 1] (0: off)");
    EXPECT_EQ(refusal([](S& s) { s.typical_p = NAN; }),
              "sampling: typical_p nan, expected a number in [0, 1] (1: off)");
    EXPECT_EQ(refusal([](S& s) { s.no_repeat_ngram_size = -2; }),
              "sampling: no_repeat_ngram_size -2, expected >= 0 (0: off)");
    EXPECT_EQ(refusal([](S& s) { s.presence_penalty = INFINITY; }),
              "sampling: presence_penalty inf, expected a finite number");
    EXPECT_EQ(refusal([](S& s) { s.frequency_penalty = NAN; }),
              "sampling: frequency_penalty nan, expected a finite number");
    EXPECT_EQ(refusal([](S& s) {
                  s.logit_bias = {{0, 1.0f}, {7, 1.0f}};
              }),
              "sampling: logit_bias token 7 is outside the vocabulary [0, 4)");
    EXPECT_EQ(refusal([](S& s) {
                  s.logit_bias = {{-1, 1.0f}};
              }),
              "sampling: logit_bias token -1 is outside the vocabulary [0, 4)");
    EXPECT_EQ(refusal([](S& s) {
                  s.logit_bias = {{1, NAN}};
              }),
              "sampling: logit_bias nan for token 1, expected a finite number or -inf (a ban)");
    EXPECT_EQ(refusal([](S& s) {
                  s.logit_bias = {{2, INFINITY}};
              }),
              "sampling: logit_bias inf for token 2, expected a finite number or -inf (a ban)");
    EXPECT_EQ(refusal([](S& s) { s.bad_words = {{2, 1}, {}}; }), "sampling: bad_words entry 1 is empty");
    EXPECT_EQ(refusal([](S& s) {
                  s.bad_words = {{1, 9}};
              }),
              "sampling: bad_words entry 0 has token 9, outside the vocabulary [0, 4)");
    EXPECT_EQ(refusal([](S& s) { s.min_new_tokens = -3; }), "sampling: min_new_tokens -3, expected >= 0");
    EXPECT_EQ(refusal([](S& s) { s.eos_token = 4; }), "sampling: eos_token 4, expected -1 (none) or a token of [0, 4)");
    EXPECT_EQ(refusal([](S& s) { s.eos_token = -2; }),
              "sampling: eos_token -2, expected -1 (none) or a token of [0, 4)");
}

TEST(SamplingSettings, TheEndsOfEachRangeAreTakenWithTheirDocumentedMeanings) {
    using S = gpt2::SamplingSettings;
    EXPECT_EQ(refusal([](S& s) {
                  s.temperature = 0.0f;
                  s.top_k = 1000;  // >= n_vocab: every token
                  s.top_p = 0.0f;
                  s.min_p = 1.0f;
                  s.typical_p = 0.0f;
                  s.logit_bias = {{3, -INFINITY}, {0, 3e38f}};
                  s.bad_words = {{3}};
                  s.eos_token = 3;
                  s.presence_penalty = -3e38f;
                  s.frequency_penalty = 3e38f;
              }),
              "");
    // top_k at or above the vocabulary keeps every token; top_p 0 keeps the most likely one
    const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f};
    for (int top_k : {4, 1000, 2147483647}) {
        gpt2::Sampler sampler;
        std::string error;
        ASSERT_TRUE(sampler.init(4, &error));
        gpt2::SamplingSettings s;
        s.top_k = top_k;
        ASSERT_TRUE(sampler.configure(s, &error)) << error;
        std::vector<float> p(4);
        ASSERT_EQ(sampler.distribution(logits.data(), nullptr, 0, 0, p.data(), &error), 0);
        for (float probability : p) EXPECT_GT(probability, 0.0f) << "top_k " << top_k;
        s.top_k = 0;
        s.top_p = 0.0f;
        ASSERT_TRUE(sampler.configure(s, &error)) << error;
        ASSERT_EQ(sampler.distribution(logits.data(), nullptr, 0, 0, p.data(), &error), 0);
        EXPECT_EQ(p, (std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f}));
    }
}

TEST(SamplingSettings, ARefusedSettingLeavesTheSettingsBefore) {
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(4, &error));
    gpt2::SamplingSettings s;
    s.temperature = 0.5f;
    s.top_k = 3;
    ASSERT_TRUE(sampler.configure(s, &error));
    gpt2::SamplingSettings bad = s;
    bad.temperature = 2.0f;
    bad.typical_p = 1.5f;
    EXPECT_FALSE(sampler.configure(bad, &error));
    EXPECT_EQ(error, "sampling: typical_p 1.5, expected a number in [0, 1] (1: off)");
    EXPECT_EQ(sampler.settings().temperature, 0.5f);
    EXPECT_EQ(sampler.settings().typical_p, 1.0f);
    EXPECT_EQ(sampler.settings().top_k, 3);
}

TEST(LogitsProcessors, HugeFiniteBiasesAndPenaltiesMakeATokenCertainOrNeverNotInfiniteOrNan) {
    const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f};
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(4, &error));
    std::vector<float> p(4);
    auto distribution = [&](const gpt2::SamplingSettings& s, const std::vector<int32_t>& window, int n_generated) {
        EXPECT_TRUE(sampler.configure(s, &error)) << error;
        EXPECT_EQ(sampler.distribution(logits.data(), window.data(), int(window.size()), n_generated, p.data(), &error),
                  0)
            << error;
        return p;
    };
    gpt2::SamplingSettings s;
    // a bias that overflows the float sum: the token is certain
    s.logit_bias = {{0, 3.4e38f}, {0, 3.4e38f}};
    EXPECT_EQ(distribution(s, {}, 0), (std::vector<float>{1.0f, 0.0f, 0.0f, 0.0f}));
    // a frequency penalty of -3e38 on tokens generated twice (their float sum overflows): those are certain, shared
    s = gpt2::SamplingSettings();
    s.frequency_penalty = -3e38f;
    EXPECT_EQ(distribution(s, {2, 3, 2, 3}, 4), (std::vector<float>{0.0f, 0.0f, 0.5f, 0.5f}));
    // and greedy picks the first of them, not an end the nan of an inf - inf would have given
    s.temperature = 0.0f;
    EXPECT_TRUE(sampler.configure(s, &error));
    const std::vector<int32_t> window = {2, 3, 2, 3};
    EXPECT_EQ(sampler.sample(logits.data(), window.data(), 4, 4, &error), 2);
    // a presence penalty of 3e38 on a token whose logit is below -1e38 after a bias: never drawn
    s = gpt2::SamplingSettings();
    s.logit_bias = {{1, -2e38f}};
    s.presence_penalty = 3e38f;
    const std::vector<float> never = distribution(s, {1}, 1);
    EXPECT_EQ(never[1], 0.0f);
    EXPECT_NEAR(never[0] + never[2] + never[3], 1.0f, 1e-6f);
    // a tiny repetition penalty divides a positive logit past the float range: certain
    s = gpt2::SamplingSettings();
    s.repetition_penalty = 1e-39f;
    EXPECT_EQ(distribution(s, {2}, 0), (std::vector<float>{0.0f, 0.0f, 1.0f, 0.0f}));
    // a -inf bias stays a ban whatever the penalties add
    s = gpt2::SamplingSettings();
    s.logit_bias = {{1, -INFINITY}};
    s.frequency_penalty = -3e38f;
    s.presence_penalty = -3e38f;
    EXPECT_EQ(distribution(s, {1, 1, 1}, 3)[1], 0.0f);
}

TEST(LogitsProcessors, ExtremeTemperaturesGiveTheirLimitsNeverNan) {
    const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f};
    gpt2::Sampler sampler;
    std::string error;
    ASSERT_TRUE(sampler.init(4, &error));
    std::vector<float> p(4);
    gpt2::SamplingSettings s;
    s.temperature = 1e-45f;  // the smallest float above 0: the most likely token
    ASSERT_TRUE(sampler.configure(s, &error));
    ASSERT_EQ(sampler.distribution(logits.data(), nullptr, 0, 0, p.data(), &error), 0);
    EXPECT_EQ(p, (std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f}));
    s.temperature = 3.4e38f;  // uniform
    ASSERT_TRUE(sampler.configure(s, &error));
    ASSERT_EQ(sampler.distribution(logits.data(), nullptr, 0, 0, p.data(), &error), 0);
    for (float probability : p) EXPECT_FLOAT_EQ(probability, 0.25f);
    // beam sampling's scores divided by a tiny temperature stay finite, and banned tokens -inf
    s.temperature = 1e-45f;
    s.logit_bias = {{0, -INFINITY}, {3, 3.4e38f}};
    ASSERT_TRUE(sampler.configure(s, &error));
    std::vector<float> out(4);
    ASSERT_EQ(sampler.beam_scores(logits.data(), nullptr, 0, 0, out.data(), &error), 0);
    EXPECT_EQ(out[0], -INFINITY);
    for (int i = 1; i < 4; i++) EXPECT_TRUE(std::isfinite(out[size_t(i)]) || out[size_t(i)] == -INFINITY) << i;
    EXPECT_EQ(out[3], gpt2::kMaxFloat);
}
