// Speculative decoding (gpt2::Speculation): a batched pass verifies drafted tokens, keeps the accepted
// ones in the cache and rolls the rest back. What it promises: the tokens are those of step() one at a time, bit
// for bit, whatever the drafts (the model's own, prompt lookup's, or wrong ones), for greedy and seeded sampling,
// both KV caches, one and two threads and across window slides; prompt lookup drafts what followed the latest
// earlier occurrence of the context's last n-gram.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "decoding/speculation.h"
#include "gpt2.h"
#include "test_util.h"

namespace {

using gpt2_test::make_model;
using gpt2_test::ModelSpec;

// Which settings sampling_session() adds to temperature, top-k, top-p and the repetition penalty.
enum class Processors { off, on };

std::unique_ptr<gpt2::Session> sampling_session(const gpt2::Model& model, gpt2::KvCacheFormat kv, uint64_t seed,
                                                Processors processors = Processors::off) {
    std::string error;
    auto session = gpt2::Session::create(model, true, kv, &error);
    EXPECT_TRUE(session) << error;
    gpt2::SamplingSettings settings;  // seed 0: greedy; else sampling with every setting on
    settings.temperature = seed == 0 ? 0.0f : 0.9f;
    settings.top_k = 20;
    settings.top_p = 0.95f;
    settings.repetition_penalty = 1.1f;
    settings.seed = seed;
    if (processors == Processors::on) {
        settings.min_p = 0.02f;
        settings.typical_p = 0.97f;
        settings.no_repeat_ngram_size = 6;  // bans only what would repeat long spans: drafts still get accepted
        settings.presence_penalty = 0.4f;
        settings.frequency_penalty = 0.2f;
        settings.logit_bias = {{7, 1.5f}, {9, -INFINITY}};
        settings.bad_words = {{5, 6, 8}};
        settings.min_new_tokens = 30;
        settings.eos_token = 4;
    }
    session->set_sampling(settings);
    return session;
}

// n tokens after prompt, one step() at a time.
std::vector<int32_t> stepped(gpt2::Session& session, const std::vector<int32_t>& prompt, int n) {
    std::vector<int32_t> out{session.prefill(prompt.data(), prompt.size())};
    while (int(out.size()) < n) out.push_back(session.step(out.back()));
    return out;
}

// How drafts are made for speculated(): prompt lookup, or wrong tokens (each the token before it + 1).
enum class Drafts { lookup, wrong };

struct Speculated {
    std::vector<int32_t> tokens;
    int drafted = 0, accepted = 0;
};

// n tokens after prompt (at least n: the last verification may give more), Speculation::step() with drafts of 1 to 6.
Speculated speculated(gpt2::Session& session, const std::vector<int32_t>& prompt, int n, Drafts drafts, int n_vocab) {
    gpt2::Speculation speculation(session);
    Speculated run;
    run.tokens.push_back(session.prefill(prompt.data(), prompt.size()));
    int length = 0;
    int32_t draft[gpt2::Speculation::kMaxDraftTokens], out[gpt2::Speculation::kMaxDraftTokens + 1];
    while (int(run.tokens.size()) < n) {
        const int32_t id = run.tokens.back();
        length = length % 6 + 1;
        int k = 0;
        if (drafts == Drafts::lookup) k = speculation.lookup_draft(id, length, draft);
        else
            for (k = 0; k < length; k++) draft[k] = ((k == 0 ? id : draft[k - 1]) + 1) % n_vocab;
        const int got = speculation.step(id, draft, k, out);
        EXPECT_GE(got, 1) << session.error();
        if (got < 1) break;
        run.tokens.insert(run.tokens.end(), out, out + got);
        run.drafted += k;
        run.accepted += got - 1;
    }
    run.tokens.resize(size_t(n));
    return run;
}

}  // namespace

TEST(Speculation, NeverChangesTheTokensForGreedyAnd60SeedsBothCachesOneAndTwoThreadsAndWindowSlides) {
    ModelSpec spec;
    spec.n_ctx = 40;                                                         // 90 tokens slide the window twice
    const std::vector<int32_t> repetitive{5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7};  // prompt lookup drafts a lot here
    const std::vector<int32_t> plain{3, 14, 15, 9, 2, 6, 53, 58, 9, 7};
    int drafted = 0, accepted = 0, rejected_runs = 0;
    for (int threads : {1, 2}) {
        auto model = make_model(spec, gpt2::LoadOptions{gpt2::WeightFormat::fp32, threads});
        for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8})
            for (uint64_t seed = 0; seed <= 60; seed++)
                for (const auto* prompt : {&repetitive, &plain})
                    for (Drafts drafts : {Drafts::lookup, Drafts::wrong}) {
                        if (threads == 2 && seed > 5) continue;  // threads change no bits: a few seeds show it
                        auto one_by_one = sampling_session(*model, kv, seed);
                        auto verified = sampling_session(*model, kv, seed);
                        const std::vector<int32_t> expected = stepped(*one_by_one, *prompt, 90);
                        const Speculated got = speculated(*verified, *prompt, 90, drafts, spec.n_vocab);
                        ASSERT_EQ(got.tokens, expected)
                            << "seed " << seed << ", " << gpt2::kv_cache_format_name(kv) << " cache, " << threads
                            << " threads, " << (drafts == Drafts::lookup ? "lookup" : "wrong") << " drafts";
                        drafted += got.drafted;
                        accepted += got.accepted;
                        if (got.accepted < got.drafted) rejected_runs++;
                    }
    }
    // the runs did verify drafts, and both kept and rolled back some
    EXPECT_GT(accepted, 300);
    EXPECT_GT(drafted - accepted, 1000);
    EXPECT_GT(rejected_runs, 100);
    std::printf("drafted %d tokens, accepted %d\n", drafted, accepted);
}

TEST(Speculation, NeverChangesTheTokensWithEveryLogitsProcessorOnAcrossWindowSlides) {
    ModelSpec spec;
    spec.n_ctx = 40;
    const std::vector<int32_t> repetitive{5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7};
    auto model = make_model(spec);
    int drafted = 0, accepted = 0;
    for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8})
        for (uint64_t seed = 0; seed <= 20; seed++)
            for (Drafts drafts : {Drafts::lookup, Drafts::wrong}) {
                auto one_by_one = sampling_session(*model, kv, seed, Processors::on);
                auto verified = sampling_session(*model, kv, seed, Processors::on);
                const std::vector<int32_t> expected = stepped(*one_by_one, repetitive, 90);
                const Speculated got = speculated(*verified, repetitive, 90, drafts, spec.n_vocab);
                ASSERT_EQ(got.tokens, expected)
                    << "seed " << seed << ", " << gpt2::kv_cache_format_name(kv) << " cache";
                for (int i = 0; i < 30; i++) EXPECT_NE(expected[size_t(i)], 4) << "end-of-text before min_new_tokens";
                EXPECT_EQ(std::count(expected.begin(), expected.end(), 9), 0);
                drafted += got.drafted;
                accepted += got.accepted;
            }
    EXPECT_GT(accepted, 50);
    EXPECT_GT(drafted - accepted, 200);
    std::printf("drafted %d tokens, accepted %d\n", drafted, accepted);
}

TEST(Speculation, AcceptedDraftsAreFedAndRejectedOnesRolledBack) {
    ModelSpec spec;
    spec.n_ctx = 100;
    auto model = make_model(spec);
    auto one_by_one = gpt2_test::greedy_session(*model, true);
    const std::vector<int32_t> prompt{3, 14, 15, 9, 2};
    const std::vector<int32_t> expected = stepped(*one_by_one, prompt, 12);

    auto verified = gpt2_test::greedy_session(*model, true);
    ASSERT_EQ(verified->prefill(prompt.data(), prompt.size()), expected[0]);
    // the model's own next five tokens, then a wrong one: five accepted, the sixth replaced by the model's token
    int32_t draft[6] = {expected[1], expected[2], expected[3], expected[4], expected[5], 0};
    draft[5] = (expected[6] + 1) % spec.n_vocab;
    int32_t out[7];
    ASSERT_EQ(gpt2::Speculation(*verified).step(expected[0], draft, 6, out), 6);
    EXPECT_EQ(std::vector<int32_t>(out, out + 6), std::vector<int32_t>(expected.begin() + 1, expected.begin() + 7));
    // fed: the prompt, expected[0] and the five accepted; the last token is pending, as after step()
    EXPECT_EQ(verified->n_cached(), 5 + 1 + 5);
    one_by_one = gpt2_test::greedy_session(*model, true);
    ASSERT_EQ(one_by_one->prefill(prompt.data(), prompt.size()), expected[0]);
    for (int i = 0; i < 6; i++) one_by_one->step(expected[size_t(i)]);
    EXPECT_TRUE(gpt2_test::same_bits(std::vector<float>(verified->logits(), verified->logits() + spec.n_vocab),
                                     std::vector<float>(one_by_one->logits(), one_by_one->logits() + spec.n_vocab)));
    // the rolled-back position is written again by the next step
    EXPECT_EQ(verified->step(out[5]), expected[7]);
}

TEST(Speculation, DraftsAreCutToTheWindowAndAFullWindowSlidesAsStepDoes) {
    ModelSpec spec;
    spec.n_ctx = 12;
    auto model = make_model(spec);
    const std::vector<int32_t> prompt{1, 2, 3, 4, 5, 6, 7, 8, 9};
    auto one_by_one = gpt2_test::greedy_session(*model, true);
    const std::vector<int32_t> expected = stepped(*one_by_one, prompt, 8);
    auto verified = gpt2_test::greedy_session(*model, true);
    verified->prefill(prompt.data(), prompt.size());
    // 9 fed, room for 3: id and at most 2 drafts, all the model's own
    gpt2::Speculation speculation(*verified);
    int32_t out[gpt2::Speculation::kMaxDraftTokens + 1];
    ASSERT_EQ(speculation.step(expected[0], &expected[1], 5, out), 3);
    EXPECT_EQ(std::vector<int32_t>(out, out + 3), std::vector<int32_t>(expected.begin() + 1, expected.begin() + 4));
    EXPECT_EQ(verified->n_cached(), 12);
    // full: it slides as step() would (keeping n_ctx / 2), and verifies no draft
    ASSERT_EQ(speculation.step(out[2], &expected[4], 3, out), 1);
    EXPECT_EQ(out[0], expected[4]);
    EXPECT_EQ(verified->n_cached(), 6);
    ASSERT_EQ(speculation.step(out[0], &expected[5], 2, out), 3);
    EXPECT_EQ(std::vector<int32_t>(out, out + 3), std::vector<int32_t>(expected.begin() + 5, expected.begin() + 8));
}

TEST(Speculation, AnUncachedSessionVerifiesNoDraftAndGivesStepsTokens) {
    auto model = make_model(ModelSpec{});
    auto uncached = gpt2_test::greedy_session(*model, false);
    auto one_by_one = gpt2_test::greedy_session(*model, false);
    const std::vector<int32_t> prompt{3, 1, 4};
    const std::vector<int32_t> expected = stepped(*one_by_one, prompt, 3);
    uncached->prefill(prompt.data(), prompt.size());
    int32_t out[3];
    ASSERT_EQ(gpt2::Speculation(*uncached).step(expected[0], &expected[1], 2, out), 1);
    EXPECT_EQ(out[0], expected[1]);
}

TEST(Speculation, RejectsBadIdsAndDraftCountsLikeStep) {
    auto model = make_model(ModelSpec{});
    auto session = gpt2_test::greedy_session(*model, true);
    const int32_t prompt[] = {1, 2};
    session->prefill(prompt, 2);
    int32_t out[3];
    const int32_t bad[] = {1, 67};
    gpt2::Speculation speculation(*session);
    EXPECT_EQ(speculation.step(1, bad, 2, out), -1);
    EXPECT_EQ(session->error(), "token id 67 out of range [0, 67)");
    EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::input);
    EXPECT_EQ(speculation.step(1, bad, -1, out), -1);
    EXPECT_EQ(session->error(), "step_draft: -1 drafted tokens");
    EXPECT_EQ(session->n_cached(), 2);  // nothing fed
}

TEST(PromptLookup, DraftsWhatFollowedTheLatestEarlierOccurrenceOfTheLastTrigramElseBigramAndRepeatsALoop) {
    ModelSpec spec;
    spec.n_ctx = 30;
    auto model = make_model(spec);
    auto session = gpt2_test::greedy_session(*model, true);
    gpt2::Speculation speculation(*session);
    int32_t draft[gpt2::Speculation::kMaxDraftTokens];
    const std::vector<int32_t> window{1, 2, 3, 4, 9, 7, 2, 3, 5, 6, 1, 2, 3};
    session->prefill(window.data(), window.size());
    // id 4: "2 3 4" occurred at 1..3, followed by 9 7 2 ...; at most 3 of them
    ASSERT_EQ(speculation.lookup_draft(4, 3, draft), 3);
    EXPECT_EQ(std::vector<int32_t>(draft, draft + 3), (std::vector<int32_t>{9, 7, 2}));
    // id 5: "2 3 5" occurred at 6..8, followed by the rest of the context, id included, and then by that stretch
    // again, as a loop goes on
    ASSERT_EQ(speculation.lookup_draft(5, 12, draft), 12);
    EXPECT_EQ(std::vector<int32_t>(draft, draft + 12), (std::vector<int32_t>{6, 1, 2, 3, 5, 6, 1, 2, 3, 5, 6, 1}));
    // id 9: neither "2 3 9" nor "3 9" occurred; a token alone is never looked up
    EXPECT_EQ(speculation.lookup_draft(9, 16, draft), 0);

    // "2 3 4" never occurred, "3 4" at 1..2: the bigram's continuation
    const std::vector<int32_t> other{5, 3, 4, 8, 1, 2, 3};
    session->prefill(other.data(), other.size());
    ASSERT_EQ(speculation.lookup_draft(4, 6, draft), 6);
    EXPECT_EQ(std::vector<int32_t>(draft, draft + 6), (std::vector<int32_t>{8, 1, 2, 3, 4, 8}));
}
