// Sessions: an independent float64 reference, cached == uncached, prefill/step consistency, sliding window,
// errors, and no allocation per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "alloc_counter.h"
#include "gpt2.h"
#include "reference_gpt2.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

std::vector<int32_t> prompt(int n, int n_vocab, int seed = 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) ids[size_t(i)] = int32_t((i * 37 + seed * 11 + 5) % n_vocab);
    return ids;
}

// greedy, so that sessions with different histories pick the same token from the same logits
std::unique_ptr<gpt2::Session> make_session(const gpt2::Model& model, bool cache) {
    std::string error;
    auto session = gpt2::Session::create(model, cache, &error);
    EXPECT_TRUE(session) << error;
    if (session) {
        gpt2::SamplingSettings greedy;
        greedy.temperature = 0.0f;
        session->set_sampling(greedy);
    }
    return session;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
}

}  // namespace

TEST(Forward, MatchesAFloat64Reference) {
    for (ModelSpec spec : {ModelSpec{}, ModelSpec{50, 30, 32, 2, 3, 7}, ModelSpec{41, 20, 8, 1, 1, 9}}) {
        const auto tensors = random_tensors(spec);
        std::string error;
        auto model = load(config_json(spec), build_safetensors(tensors), &error);
        ASSERT_TRUE(model) << error;
        const auto ids = prompt(spec.n_ctx, spec.n_vocab);
        const auto expected = Reference(spec, tensors).logits(ids);
        std::vector<float> logits(ids.size() * size_t(spec.n_vocab));
        auto session = make_session(*model, true);
        ASSERT_TRUE(session->prefill_logits(ids.data(), ids.size(), logits.data())) << session->error();
        double max_diff = 0;
        for (size_t i = 0; i < logits.size(); i++) max_diff = std::max(max_diff, std::fabs(logits[i] - expected[i]));
        std::printf("reference (vocab %d, ctx %d, embd %d, heads %d, layers %d): max |logit diff| %.3g\n", spec.n_vocab,
                    spec.n_ctx, spec.n_embd, spec.n_head, spec.n_layer, max_diff);
        EXPECT_LE(max_diff, 1e-4);
    }
}

TEST(Session, CachedAndUncachedAgreeFor240Tokens) {
    ModelSpec spec;
    spec.n_ctx = 256;
    auto model = make_model(spec);
    auto cached = make_session(*model, true), uncached = make_session(*model, false);
    EXPECT_TRUE(cached->uses_kv_cache());
    EXPECT_FALSE(uncached->uses_kv_cache());
    for (float temperature : {0.0f, 0.9f}) {
        gpt2::SamplingSettings settings;
        settings.temperature = temperature;
        settings.seed = 42;
        cached->set_sampling(settings);
        uncached->set_sampling(settings);
        const auto ids = prompt(6, spec.n_vocab);
        int a = cached->prefill(ids.data(), ids.size()), b = uncached->prefill(ids.data(), ids.size());
        std::vector<int> tokens;
        float worst = 0;
        for (int i = 0; i < 240; i++) {
            ASSERT_EQ(a, b) << "step " << i;
            ASSERT_GE(a, 0) << cached->error();
            const float diff = max_abs_diff(cached->logits(), uncached->logits(), size_t(spec.n_vocab));
            ASSERT_LE(diff, 1e-5f) << "step " << i;
            worst = std::max(worst, diff);
            tokens.push_back(a);
            a = cached->step(a);
            b = uncached->step(b);
        }
        EXPECT_EQ(cached->n_cached(), 246);
        EXPECT_EQ(worst, 0.0f) << "prefill and step are bit-identical by construction";
        // the generation is not degenerate (the comparison means something)
        std::sort(tokens.begin(), tokens.end());
        EXPECT_GT(std::unique(tokens.begin(), tokens.end()) - tokens.begin(), 5);
    }
}

TEST(Session, PrefillThenStepEqualsAllPositionsPrefill) {
    auto model = make_model(ModelSpec{});
    const int V = 67;
    const auto ids = prompt(40, V, 3);  // the full context
    std::vector<float> all(ids.size() * V);
    auto session = make_session(*model, true);
    ASSERT_TRUE(session->prefill_logits(ids.data(), ids.size(), all.data()));
    EXPECT_EQ(std::memcmp(session->logits(), all.data() + 39 * V, sizeof(float) * V), 0);
    for (int k : {1, 2, 9, 39}) {
        ASSERT_GE(session->prefill(ids.data(), size_t(k)), 0);
        ASSERT_EQ(std::memcmp(session->logits(), all.data() + (k - 1) * V, sizeof(float) * V), 0) << k;
        for (int p = k; p < 40; p++) {
            ASSERT_GE(session->step(ids[size_t(p)]), 0);
            ASSERT_EQ(session->n_cached(), p + 1);
            ASSERT_LE(max_abs_diff(session->logits(), all.data() + size_t(p) * V, size_t(V)), 1e-5f);
            ASSERT_EQ(std::memcmp(session->logits(), all.data() + size_t(p) * V, sizeof(float) * V), 0)
                << "prefill " << k << " position " << p;
        }
    }
}

TEST(Session, SlidesTheWindowPastTheContext) {
    ModelSpec spec;
    spec.n_ctx = 16;
    auto model = make_model(spec);
    for (bool cache : {true, false}) {
        auto session = make_session(*model, cache);
        auto check = make_session(*model, true);
        std::vector<int32_t> window = prompt(5, spec.n_vocab);
        int next = session->prefill(window.data(), window.size());
        int slides = 0;
        for (int i = 0; i < 70; i++) {
            ASSERT_GE(next, 0) << session->error();
            if (window.size() == 16) {  // this step slides: keep the newest 8 (the new token included)
                window.erase(window.begin(), window.begin() + 9);
                slides++;
            }
            window.push_back(next);
            next = session->step(next);
            ASSERT_EQ(session->n_cached(), int(window.size()));
            ASSERT_EQ(std::memcmp(session->window(), window.data(), window.size() * sizeof(int32_t)), 0);
            // an explicit re-prefill of the same window gives the same logits and the same next token
            ASSERT_EQ(check->prefill(window.data(), window.size()), next);
            ASSERT_EQ(std::memcmp(check->logits(), session->logits(), sizeof(float) * spec.n_vocab), 0) << i;
        }
        EXPECT_GE(slides, 7);
    }
}

TEST(Session, PromptLongerThanTheContextKeepsTheNewestTokens) {
    ModelSpec spec;
    spec.n_ctx = 16;
    auto model = make_model(spec);
    auto session = make_session(*model, true), check = make_session(*model, true);
    const auto ids = prompt(40, spec.n_vocab);
    const int next = session->prefill(ids.data(), ids.size());
    EXPECT_EQ(session->n_cached(), 16);
    EXPECT_EQ(check->prefill(ids.data() + 24, 16), next);
    EXPECT_EQ(std::memcmp(session->logits(), check->logits(), sizeof(float) * spec.n_vocab), 0);
    EXPECT_EQ(std::memcmp(session->window(), ids.data() + 24, 16 * sizeof(int32_t)), 0);
    // the next step slides to the newest 8
    ASSERT_GE(session->step(next), 0);
    EXPECT_EQ(session->n_cached(), 8);
    // prefill_logits does not truncate: it refuses
    std::vector<float> all(40 * size_t(spec.n_vocab));
    EXPECT_FALSE(session->prefill_logits(ids.data(), ids.size(), all.data()));
    EXPECT_EQ(session->error(), "prefill_logits: 40 tokens, expected 1..16");
}

TEST(Session, RejectsBadTokensAndStaysUsable) {
    auto model = make_model(ModelSpec{});
    auto session = make_session(*model, true), check = make_session(*model, true);
    const auto ids = prompt(10, 67);
    int next = session->prefill(ids.data(), ids.size());
    ASSERT_GE(next, 0);
    EXPECT_EQ(session->error(), "");

    const int32_t bad[] = {3, 67, 4};
    EXPECT_EQ(session->prefill(bad, 3), -1);
    EXPECT_EQ(session->error(), "token id 67 out of range [0, 67)");
    EXPECT_EQ(session->step(-1), -1);
    EXPECT_EQ(session->error(), "token id -1 out of range [0, 67)");
    EXPECT_EQ(session->step(60000), -1);
    EXPECT_EQ(session->error(), "token id 60000 out of range [0, 67)");
    EXPECT_EQ(session->prefill(ids.data(), 0), -1);
    EXPECT_EQ(session->error(), "empty prompt: prefill needs at least one token");
    EXPECT_EQ(session->n_cached(), 10);  // the failed calls changed nothing

    // continues exactly as a session that never saw the errors
    check->prefill(ids.data(), ids.size());
    const int a = session->step(next), b = check->step(next);
    EXPECT_EQ(a, b);
    EXPECT_EQ(session->error(), "");
    EXPECT_EQ(std::memcmp(session->logits(), check->logits(), sizeof(float) * 67), 0);
}

TEST(Session, SamplingSettingsOutOfRangeAreRefusedAndTheSettingsBeforeKept) {
    auto model = make_model(ModelSpec{});
    auto session = make_session(*model, true), check = make_session(*model, true);
    gpt2::SamplingSettings settings;
    settings.temperature = 0.7f;
    settings.seed = 11;
    ASSERT_TRUE(session->set_sampling(settings));
    ASSERT_TRUE(check->set_sampling(settings));
    gpt2::SamplingSettings bad = settings;
    bad.temperature = NAN;
    EXPECT_FALSE(session->set_sampling(bad));
    EXPECT_EQ(session->error(), "sampling: temperature nan, expected a finite number >= 0 (0: greedy)");
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::input);
    bad = settings;
    bad.logit_bias = {{67, 1.0f}};
    EXPECT_FALSE(session->set_sampling(bad));
    EXPECT_EQ(session->error(), "sampling: logit_bias token 67 is outside the vocabulary [0, 67)");
    EXPECT_EQ(session->sampling().temperature, 0.7f);
    // the settings before are in force, their RNG where it was: the same tokens as a session that was never refused
    const auto ids = prompt(10, 67);
    int a = session->prefill(ids.data(), ids.size()), b = check->prefill(ids.data(), ids.size());
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(a, b) << "token " << i;
        a = session->step(a);
        b = check->step(b);
    }
    EXPECT_EQ(session->error(), "");
}

TEST(Session, AFrequencyPenaltyOfMinus3e38MakesTheRepeatedTokenCertainNotAFalseEnd) {
    auto model = make_model(ModelSpec{});
    auto session = make_session(*model, true);
    gpt2::SamplingSettings settings;
    settings.frequency_penalty = -3e38f;  // twice that overflows a float
    settings.seed = 3;
    ASSERT_TRUE(session->set_sampling(settings));
    const auto ids = prompt(10, 67);
    const int first = session->prefill(ids.data(), ids.size());
    ASSERT_GE(first, 0);
    int next = first;
    for (int i = 0; i < 30; i++) {
        next = session->step(next);
        ASSERT_EQ(next, first) << "step " << i << ": " << session->error();
    }
}

TEST(Session, ResetEmptiesTheCache) {
    auto model = make_model(ModelSpec{});
    auto session = make_session(*model, true), check = make_session(*model, true);
    const auto ids = prompt(10, 67);
    session->prefill(ids.data(), ids.size());
    session->reset();
    EXPECT_EQ(session->n_cached(), 0);
    EXPECT_EQ(session->sample(), -1);
    EXPECT_EQ(session->error(), "sample: no token has been fed yet");
    const int a = session->step(7);  // position 0 again
    const int32_t one = 7;
    EXPECT_EQ(a, check->prefill(&one, 1));
    EXPECT_EQ(std::memcmp(session->logits(), check->logits(), sizeof(float) * 67), 0);
    EXPECT_EQ(session->kv_cache_bytes(), size_t(2) * 2 * 40 * 20 * sizeof(float));
}

TEST(Session, NoHeapAllocationPerToken) {
    ModelSpec spec;
    spec.n_ctx = 16;  // slides several times below
    auto model = make_model(spec);
    for (bool cache : {true, false}) {
        auto session = make_session(*model, cache);
        gpt2::SamplingSettings settings;
        settings.temperature = 0.8f;
        settings.top_k = 20;
        settings.top_p = 0.9f;
        settings.repetition_penalty = 1.3f;
        session->set_sampling(settings);
        const auto ids = prompt(5, spec.n_vocab);
        const long before = allocation_count();
        int next = session->prefill(ids.data(), ids.size());
        for (int i = 0; i < 50; i++) next = session->step(next);
        EXPECT_GE(next, 0);
        EXPECT_EQ(allocation_count() - before, 0) << (cache ? "cached" : "uncached");
    }
}
