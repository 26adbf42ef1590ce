// Session::prefill_reusing (the KV cache kept between calls), Scorer::score (per-token log-probabilities) and
// score_logits, the one position's distribution that scoring and the page's tooltip both read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "decoding/scorer.h"
#include "gpt2.h"
#include "reference_gpt2.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

using gpt2::KvCacheFormat;
using gpt2::TokenScore;

std::vector<int32_t> some_ids(int n, int n_vocab, int seed = 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) ids[size_t(i)] = int32_t((i * 37 + seed * 11 + 5) % n_vocab);
    return ids;
}

std::unique_ptr<gpt2::Session> session_with(const gpt2::Model& model, KvCacheFormat kv,
                                            const gpt2::SamplingSettings& settings, bool use_kv_cache = true) {
    std::string error;
    auto session = gpt2::Session::create(model, use_kv_cache, kv, &error);
    EXPECT_TRUE(session) << error;
    if (session) session->set_sampling(settings);
    return session;
}

gpt2::SamplingSettings greedy() {
    gpt2::SamplingSettings s;
    s.temperature = 0.0f;
    return s;
}

gpt2::SamplingSettings seeded() {
    gpt2::SamplingSettings s;
    s.temperature = 0.9f;
    s.top_k = 30;
    s.repetition_penalty = 1.1f;
    s.seed = 7;
    return s;
}

// next, then n - 1 more tokens fed one by one: the generated tokens (the last one sampled but not fed yet)
std::vector<int32_t> generate(gpt2::Session& session, int next, int n) {
    std::vector<int32_t> out{next};
    while (int(out.size()) < n) out.push_back(session.step(out.back()));
    return out;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// A fresh session's prefill of prompt and a reusing prefill of it give the same bits and, reseeded alike, the
// same next tokens.
void expect_same_as_fresh(gpt2::Session& reusing, const gpt2::Model& model, KvCacheFormat kv,
                          const gpt2::SamplingSettings& settings, const std::vector<int32_t>& prompt,
                          int expected_reused) {
    auto fresh = session_with(model, kv, settings);
    reusing.set_sampling(settings);
    const int a = reusing.prefill_reusing(prompt.data(), prompt.size());
    const int b = fresh->prefill(prompt.data(), prompt.size());
    EXPECT_EQ(reusing.reused_tokens(), expected_reused);
    ASSERT_GE(a, 0) << reusing.error();
    EXPECT_EQ(a, b);
    const size_t V = size_t(model.config().n_vocab);
    EXPECT_EQ(std::memcmp(reusing.logits(), fresh->logits(), V * sizeof(float)), 0) << "the logits differ";
    EXPECT_EQ(reusing.n_cached(), fresh->n_cached());
    EXPECT_EQ(generate(reusing, a, 12), generate(*fresh, b, 12)) << "the continuations differ";
}

// log-softmax of one row in double, as an independent formula (log-sum-exp about the maximum)
std::vector<double> log_softmax(const double* row, size_t n) {
    const double max = *std::max_element(row, row + n);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += std::exp(row[i] - max);
    std::vector<double> out(n);
    for (size_t i = 0; i < n; i++) out[i] = row[i] - max - std::log(sum);
    return out;
}

std::vector<double> widen(const float* row, size_t n) { return std::vector<double>(row, row + n); }

}  // namespace

TEST(PrefillReusing, AContinuationFeedsOnlyItsNewTokensAndEqualsAFreshPrefill) {
    ModelSpec spec;
    spec.n_ctx = 150;  // the rest of the prompt spans more than one 64-token batch
    auto model = make_model(spec);
    for (KvCacheFormat kv : {KvCacheFormat::fp32, KvCacheFormat::int8})
        for (const gpt2::SamplingSettings& settings : {greedy(), seeded()}) {
            SCOPED_TRACE(std::string(gpt2::kv_cache_format_name(kv)) +
                         (settings.temperature > 0 ? " seeded" : " greedy"));
            const std::vector<int32_t> prompt = some_ids(50, spec.n_vocab);
            auto session = session_with(*model, kv, settings);
            const std::vector<int32_t> generated = generate(*session, session->prefill(prompt.data(), 50), 30);
            ASSERT_EQ(session->n_cached(), 79);  // the prompt and 29 generated tokens; the 30th is not fed yet
            // the page's Continue: the prompt and everything generated, the last token never fed
            expect_same_as_fresh(*session, *model, kv, settings, concat(prompt, generated), 79);
            // a longer text after it: the whole window is reused and the new tokens fed in batches
            const std::vector<int32_t> window(session->window(), session->window() + session->n_cached());
            expect_same_as_fresh(*session, *model, kv, settings, concat(window, some_ids(40, spec.n_vocab, 3)),
                                 int(window.size()));
            // a prompt that shares only the window's first 20 tokens
            expect_same_as_fresh(
                *session, *model, kv, settings,
                concat(std::vector<int32_t>(prompt.begin(), prompt.begin() + 20), some_ids(40, spec.n_vocab, 5)), 20);
        }
}

TEST(PrefillReusing, AfterTheWindowSlidesAPromptThatNoLongerMatchesFallsBackToAFullPrefill) {
    ModelSpec spec;  // n_ctx 40
    auto model = make_model(spec);
    for (KvCacheFormat kv : {KvCacheFormat::fp32, KvCacheFormat::int8})
        for (const gpt2::SamplingSettings& settings : {greedy(), seeded()}) {
            SCOPED_TRACE(std::string(gpt2::kv_cache_format_name(kv)) +
                         (settings.temperature > 0 ? " seeded" : " greedy"));
            const std::vector<int32_t> prompt = some_ids(10, spec.n_vocab);
            auto session = session_with(*model, kv, settings);
            const std::vector<int32_t> generated = generate(*session, session->prefill(prompt.data(), 10), 41);
            ASSERT_LT(session->n_cached(), 40) << "the window has slid";
            // the text so far, cut to its newest 40 tokens, starts where the slid window does not
            const std::vector<int32_t> text = concat(prompt, generated);
            ASSERT_NE(text[text.size() - 40], session->window()[0]);
            expect_same_as_fresh(*session, *model, kv, settings, text, 0);
            // the slid window itself is reused
            generate(*session, session->prefill(prompt.data(), 10), 41);
            const std::vector<int32_t> window(session->window(), session->window() + session->n_cached());
            expect_same_as_fresh(*session, *model, kv, settings, concat(window, {3, 4}), int(window.size()));
        }
}

TEST(PrefillReusing, TheSamePromptTwiceReusesAllButItsLastToken) {
    ModelSpec spec;  // n_ctx 40
    auto model = make_model(spec);
    auto session = session_with(*model, KvCacheFormat::fp32, greedy());
    const std::vector<int32_t> prompt = some_ids(12, spec.n_vocab);
    session->prefill_reusing(prompt.data(), prompt.size());
    EXPECT_EQ(session->reused_tokens(), 0) << "nothing was cached";
    expect_same_as_fresh(*session, *model, KvCacheFormat::fp32, greedy(), prompt, 11);
    // after the steps of a generation the window is longer than the prompt: still all but its last token
    expect_same_as_fresh(*session, *model, KvCacheFormat::fp32, greedy(), prompt, 11);
    // a prompt longer than the context keeps its newest n_ctx tokens, as prefill() does
    const std::vector<int32_t> long_prompt = some_ids(55, spec.n_vocab, 2);
    expect_same_as_fresh(*session, *model, KvCacheFormat::fp32, greedy(), long_prompt, 0);
    session->prefill(long_prompt.data(), long_prompt.size());
    EXPECT_EQ(session->reused_tokens(), 0) << "prefill() reuses nothing";
    expect_same_as_fresh(*session, *model, KvCacheFormat::fp32, greedy(), long_prompt, 39);
}

TEST(PrefillReusing, AnUncachedSessionReusesNothing) {
    ModelSpec spec;
    auto model = make_model(spec);
    auto uncached = session_with(*model, KvCacheFormat::fp32, greedy(), false);
    auto fresh = session_with(*model, KvCacheFormat::fp32, greedy(), false);
    const std::vector<int32_t> prompt = some_ids(12, spec.n_vocab);
    for (int i = 0; i < 2; i++) {
        EXPECT_EQ(uncached->prefill_reusing(prompt.data(), prompt.size()),
                  fresh->prefill(prompt.data(), prompt.size()));
        EXPECT_EQ(uncached->reused_tokens(), 0);
        EXPECT_EQ(std::memcmp(uncached->logits(), fresh->logits(), size_t(spec.n_vocab) * sizeof(float)), 0);
    }
}

TEST(PrefillReusing, RejectsAnEmptyPromptAndBadIdsLikePrefill) {
    auto model = make_model(ModelSpec{});
    auto session = session_with(*model, KvCacheFormat::fp32, greedy());
    const int32_t bad[] = {1, 67};
    EXPECT_EQ(session->prefill_reusing(bad, 0), -1);
    EXPECT_EQ(session->error(), "empty prompt: prefill needs at least one token");
    EXPECT_EQ(session->prefill_reusing(bad, 2), -1);
    EXPECT_EQ(session->error(), "token id 67 out of range [0, 67)");
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::input);
}

TEST(Score, LogprobsMatchAFloat64ReferenceOnTheBundledModel) {
    auto model = load_folder(GPT2_BUNDLED_MODEL_DIR);
    ASSERT_TRUE(model);
    const gpt2::Config& c = model->config();
    const ModelSpec spec{c.n_vocab, c.n_ctx, c.n_embd, c.n_head, c.n_layer, 0};
    const Reference reference(spec, read_reference_tensors(std::string(GPT2_BUNDLED_MODEL_DIR) + "/model.safetensors",
                                                           c.n_layer));
    const std::vector<uint8_t> held_out = read_file(GPT2_HELD_OUT_IDS);
    std::vector<int32_t> ids(48);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = held_out[2 * i] | held_out[2 * i + 1] << 8;
    const std::vector<double> logits = reference.logits(ids);

    const int top_k = 5;
    std::vector<TokenScore> scores(ids.size() - 1), alternatives(scores.size() * top_k);
    auto session = session_with(*model, KvCacheFormat::fp32, greedy());
    ASSERT_TRUE(gpt2::Scorer(*session).score(ids.data(), ids.size(), top_k, scores.data(), alternatives.data()))
        << session->error();
    const size_t V = size_t(c.n_vocab);
    double max_diff = 0;
    for (size_t i = 0; i < scores.size(); i++) {
        const std::vector<double> expected = log_softmax(logits.data() + i * V, V);
        EXPECT_EQ(scores[i].token, ids[i + 1]);
        max_diff = std::max(max_diff, std::fabs(scores[i].logprob - expected[size_t(ids[i + 1])]));
        for (int k = 0; k < top_k; k++) {
            const TokenScore& alternative = alternatives[i * top_k + size_t(k)];
            max_diff = std::max(max_diff, std::fabs(alternative.logprob - expected[size_t(alternative.token)]));
        }
    }
    std::printf("bundled model, %zu tokens: max |logprob - float64 reference| = %.3g\n", scores.size(), max_diff);
    EXPECT_LE(max_diff, 1e-4);
}

TEST(Score, RanksCountTheStrictlyGreaterLogitsAndAlternativesAreTheLikeliestFirst) {
    ModelSpec spec;
    auto tensors = random_tensors(spec);
    // tokens 7 and 9 share their embedding row, so their logits tie everywhere (wte is the tied LM head)
    TensorSpec& wte = find_tensor(tensors, "wte.weight");
    const size_t row = size_t(spec.n_embd) * 4;
    std::memcpy(wte.bytes.data() + 9 * row, wte.bytes.data() + 7 * row, row);
    std::string error;
    auto model = load(config_json(spec), build_safetensors(tensors), &error);
    ASSERT_TRUE(model) << error;
    const size_t V = size_t(spec.n_vocab);
    const std::vector<int32_t> ids = concat(some_ids(30, spec.n_vocab), {7, 9, 7});
    std::vector<float> logits(ids.size() * V);
    auto session = session_with(*model, KvCacheFormat::fp32, greedy());
    ASSERT_TRUE(session->prefill_logits(ids.data(), ids.size(), logits.data()));

    const int top_k = int(V);  // every token: the whole order is checked
    std::vector<TokenScore> scores(ids.size() - 1), alternatives(scores.size() * V);
    ASSERT_TRUE(gpt2::Scorer(*session).score(ids.data(), ids.size(), top_k, scores.data(), alternatives.data()));
    for (size_t i = 0; i < scores.size(); i++) {
        const float* row_logits = logits.data() + i * V;
        const std::vector<double> expected = log_softmax(widen(row_logits, V).data(), V);
        const auto rank_of = [&](int32_t token) {
            return 1 + int(std::count_if(row_logits, row_logits + V, [&](float l) { return l > row_logits[token]; }));
        };
        EXPECT_EQ(scores[i].rank, rank_of(ids[i + 1])) << "position " << i + 1;
        std::vector<int32_t> order(V);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return row_logits[a] > row_logits[b]; });
        for (size_t k = 0; k < V; k++) {
            const TokenScore& alternative = alternatives[i * V + k];
            ASSERT_EQ(alternative.token, order[k]) << "position " << i + 1 << ", alternative " << k;
            EXPECT_EQ(alternative.rank, rank_of(order[k]));
            EXPECT_NEAR(alternative.logprob, expected[size_t(order[k])], 1e-12);
        }
        const auto at_7 = std::find(order.begin(), order.end(), 7) - order.begin();
        EXPECT_EQ(order[size_t(at_7) + 1], 9) << "on a tie the lower id comes first";
        EXPECT_EQ(alternatives[i * V + size_t(at_7) + 1].rank, alternatives[i * V + size_t(at_7)].rank)
            << "tied tokens share their rank";
    }
}

TEST(Score, TextsLongerThanTheContextAreScoredInWindowsWithAStrideOfHalfTheContext) {
    ModelSpec spec;
    spec.n_ctx = 150;  // stride 75; a window's scored part takes several 64-row batches
    auto model = make_model(spec);
    const size_t V = size_t(spec.n_vocab), n = 400;
    const std::vector<int32_t> ids = some_ids(int(n), spec.n_vocab, 1);
    for (KvCacheFormat kv : {KvCacheFormat::fp32, KvCacheFormat::int8}) {
        auto session = session_with(*model, kv, greedy());
        std::vector<TokenScore> scores(n - 1);
        ASSERT_TRUE(gpt2::Scorer(*session).score(ids.data(), n, 0, scores.data(), nullptr)) << session->error();
        // by hand: windows [0, 150) [75, 225) [150, 300) [225, 375) [250, 400), each scoring what the earlier
        // ones did not: from 1, 150, 225, 300 and 375
        auto by_hand = session_with(*model, kv, greedy());
        std::vector<float> logits(150 * V);
        size_t checked = 0;
        const size_t starts[] = {0, 75, 150, 225, 250}, firsts[] = {1, 150, 225, 300, 375};
        for (int w = 0; w < 5; w++) {
            ASSERT_TRUE(by_hand->prefill_logits(ids.data() + starts[w], 150, logits.data()));
            const size_t last = w < 4 ? starts[w] + 150 : n;
            for (size_t t = firsts[w]; t < last; t++, checked++) {
                const float* row = logits.data() + (t - 1 - starts[w]) * V;
                const std::vector<double> expected = log_softmax(widen(row, V).data(), V);
                ASSERT_NEAR(scores[t - 1].logprob, expected[size_t(ids[t])], 1e-12) << "token " << t;
            }
        }
        EXPECT_EQ(checked, n - 1);
        // the session holds the last window, which a following prompt reuses
        EXPECT_EQ(session->n_cached(), 150);
        EXPECT_TRUE(std::equal(ids.begin() + 250, ids.end(), session->window()));
        EXPECT_EQ(std::memcmp(session->logits(), logits.data() + 149 * V, V * sizeof(float)), 0);
        expect_same_as_fresh(*session, *model, kv, greedy(), ids, 149);
    }
}

TEST(Score, RejectsFewerThanTwoTokensBadIdsAndTopKOutOfRange) {
    auto model = make_model(ModelSpec{});
    auto session = session_with(*model, KvCacheFormat::fp32, greedy());
    std::vector<TokenScore> scores(3), alternatives(3 * 68);
    const int32_t ids[] = {1, 2, 67};
    EXPECT_FALSE(gpt2::Scorer(*session).score(ids, 1, 0, scores.data(), nullptr));
    EXPECT_EQ(session->error(), "score: needs at least 2 tokens, got 1");
    EXPECT_FALSE(gpt2::Scorer(*session).score(ids, 3, 0, scores.data(), nullptr));
    EXPECT_EQ(session->error(), "token id 67 out of range [0, 67)");
    EXPECT_FALSE(gpt2::Scorer(*session).score(ids, 2, 68, scores.data(), alternatives.data()));
    EXPECT_EQ(session->error(), "score: top_k 68 out of range [0, 67]");
    EXPECT_FALSE(gpt2::Scorer(*session).score(ids, 2, -1, scores.data(), alternatives.data()));
    EXPECT_EQ(session->error(), "score: top_k -1 out of range [0, 67]");
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::input);
    EXPECT_TRUE(gpt2::Scorer(*session).score(ids, 2, 67, scores.data(), alternatives.data()))
        << "top_k may be the whole vocabulary";
}

TEST(Score, RefusesMoreAlternativesThanOneScoreReturnsBeforeAllocatingAnything) {
    auto model = make_model(ModelSpec{});
    auto session = session_with(*model, KvCacheFormat::fp32, greedy());
    // 4194304 / 67 = 62601.5: 62601 scored tokens with 67 alternatives each fit, 62602 do not
    EXPECT_TRUE(gpt2::Scorer(*session).check(62602, 67)) << session->error();
    EXPECT_FALSE(gpt2::Scorer(*session).check(62603, 67));
    EXPECT_EQ(session->error(), "score: top_k 67 for 62602 scored tokens is more than 4194304 alternatives (the most "
                                "one score returns)");
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::input);
    EXPECT_TRUE(gpt2::Scorer(*session).check(size_t(1) << 40, 0))
        << "without alternatives the text alone bounds a score";
    // score() checks the same before it feeds anything (the buffers a caller would need are not even there)
    const std::vector<int32_t> ids(62603, 1);
    EXPECT_FALSE(gpt2::Scorer(*session).score(ids.data(), ids.size(), 67, nullptr, nullptr));
    EXPECT_EQ(session->error(), "score: top_k 67 for 62602 scored tokens is more than 4194304 alternatives (the most "
                                "one score returns)");
    EXPECT_EQ(session->n_cached(), 0);
}

TEST(ScoreLogits, IsOnePositionOfScoreLogSoftmaxRanksAndTheLikeliestFirst) {
    // tokens 1 and 2 tie: the lower id comes first and they share a rank
    const float logits[] = {0.5f, 3.0f, 3.0f, -2.0f, 1.25f};
    const std::vector<double> expected = log_softmax(widen(logits, 5).data(), 5);
    TokenScore score{}, alternatives[5];
    ASSERT_TRUE(gpt2::score_logits(logits, 5, 4, 5, &score, alternatives));
    EXPECT_EQ(score.token, 4);
    EXPECT_EQ(score.rank, 3);
    EXPECT_NEAR(score.logprob, expected[4], 1e-15);
    const int32_t order[] = {1, 2, 4, 0, 3}, ranks[] = {1, 1, 3, 4, 5};
    for (int k = 0; k < 5; k++) {
        EXPECT_EQ(alternatives[k].token, order[k]) << "alternative " << k;
        EXPECT_EQ(alternatives[k].rank, ranks[k]) << "alternative " << k;
        EXPECT_NEAR(alternatives[k].logprob, expected[size_t(order[k])], 1e-15);
    }
    // the token's score and the alternatives are separate: either may be left out
    TokenScore top[2];
    ASSERT_TRUE(gpt2::score_logits(logits, 5, -1, 2, nullptr, top));
    EXPECT_EQ(top[0].token, 1);
    EXPECT_EQ(top[1].token, 2);
    ASSERT_TRUE(gpt2::score_logits(logits, 5, 0, 0, &score, nullptr));
    EXPECT_EQ(score.rank, 4);
}

TEST(ScoreLogits, RefusesArgumentsOutOfRangeAndNonFiniteLogits) {
    const float logits[] = {0.5f, 3.0f, 1.0f};
    TokenScore score{}, alternatives[4];
    EXPECT_FALSE(gpt2::score_logits(logits, 3, 3, 0, &score, nullptr)) << "token past the vocabulary";
    EXPECT_FALSE(gpt2::score_logits(logits, 3, -1, 0, &score, nullptr)) << "negative token";
    EXPECT_FALSE(gpt2::score_logits(logits, 3, 0, 4, &score, alternatives)) << "top_k over n_vocab";
    EXPECT_FALSE(gpt2::score_logits(logits, 3, 0, -1, &score, alternatives)) << "negative top_k";
    EXPECT_FALSE(gpt2::score_logits(logits, 3, 0, 1, &score, nullptr)) << "alternatives to fill but none given";
    EXPECT_FALSE(gpt2::score_logits(logits, 0, 0, 0, nullptr, nullptr)) << "empty vocabulary";
    const float with_nan[] = {0.5f, std::nanf(""), 1.0f};
    EXPECT_FALSE(gpt2::score_logits(with_nan, 3, 0, 1, &score, alternatives));
    const float with_inf[] = {0.5f, INFINITY, 1.0f};
    EXPECT_FALSE(gpt2::score_logits(with_inf, 3, 0, 1, &score, alternatives));
}

TEST(ScoreLogits, GivesWhatScoreGivesForTheLastPosition) {
    auto model = make_model(ModelSpec{});
    const int V = model->config().n_vocab;
    const std::vector<int32_t> ids = some_ids(30, V);  // within the context: one window
    auto session = session_with(*model, KvCacheFormat::fp32, greedy());
    const int top_k = 8;
    std::vector<TokenScore> scores(ids.size() - 1), alternatives(scores.size() * top_k);
    ASSERT_TRUE(gpt2::Scorer(*session).score(ids.data(), ids.size(), top_k, scores.data(), alternatives.data()));
    // the last scored token is predicted by the row of the one before it: feed all ids but the last
    ASSERT_GE(session->prefill(ids.data(), ids.size() - 1), 0);
    TokenScore score{}, row[top_k];
    ASSERT_TRUE(gpt2::score_logits(session->logits(), V, ids.back(), top_k, &score, row));
    EXPECT_EQ(score.logprob, scores.back().logprob);
    EXPECT_EQ(score.rank, scores.back().rank);
    for (int k = 0; k < top_k; k++) {
        EXPECT_EQ(row[k].token, alternatives[(scores.size() - 1) * top_k + size_t(k)].token);
        EXPECT_EQ(row[k].logprob, alternatives[(scores.size() - 1) * top_k + size_t(k)].logprob);
    }
}
