// Beam search (gpt2::BeamSearch): it returns the independent NumPy reference's hypotheses and scores
// (tools/python/gpt2tools/reference_beam_search.py, tests/fixtures/beam-search/cases.json made by
// gpt2tools.fixtures.make_beam_fixtures) on the tiny-random fixture and the bundled model; every beam's session
// holds exactly its own window's cache while the beams reorder (a fork copies only the rows after the common
// prefix); a hypothesis's score is its tokens' beam scores re-summed; beam sampling repeats with its seed; bad
// settings get one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "decoding/beam_search.h"
#include "formats/json.h"
#include "gpt2.h"
#include "model/sampler.h"
#include "test_util.h"

namespace {

using gpt2_test::make_model;
using gpt2_test::ModelSpec;

const std::string kCases = std::string(GPT2_BEAM_FIXTURE_DIR) + "/cases.json";

struct Beams {
    std::vector<std::unique_ptr<gpt2::Session>> owned;
    std::vector<gpt2::Session*> sessions;
    std::unique_ptr<gpt2::BeamSearch> search;
};

Beams make_beams(const gpt2::Model& model, gpt2::KvCacheFormat kv, const gpt2::SamplingSettings& sampling,
                 const gpt2::BeamSettings& settings) {
    Beams beams;
    std::string error;
    for (int i = 0; i < settings.num_beams; i++) {
        beams.owned.push_back(gpt2::Session::create(model, true, kv, &error));
        EXPECT_TRUE(beams.owned.back()) << error;
        beams.owned.back()->set_sampling(sampling);
        beams.sessions.push_back(beams.owned.back().get());
    }
    beams.search = gpt2::BeamSearch::create(beams.sessions.data(), settings, &error);
    EXPECT_TRUE(beams.search) << error;
    return beams;
}

// Runs a whole search; check(search) after every step.
template <typename Check>
void run(gpt2::BeamSearch& search, const std::vector<int32_t>& prompt, Check check) {
    ASSERT_TRUE(search.start(prompt.data(), prompt.size())) << search.error();
    int status;
    while ((status = search.step()) == 1) check(search);
    ASSERT_EQ(status, 0) << search.error();
}

void run(gpt2::BeamSearch& search, const std::vector<int32_t>& prompt) {
    run(search, prompt, [](const gpt2::BeamSearch&) {});
}

std::vector<int32_t> ids(const gpt2::JsonValue& array) {
    std::vector<int32_t> out;
    for (const gpt2::JsonValue& v : array.array) out.push_back(int32_t(v.integer));
    return out;
}

gpt2::EarlyStopping early_stopping_of(const std::string& name) {
    return name == "done"    ? gpt2::EarlyStopping::done
           : name == "never" ? gpt2::EarlyStopping::never
                             : gpt2::EarlyStopping::heuristic;
}

}  // namespace

TEST(BeamSearch, ReturnsTheReferenceHypothesesAndScores) {
    const std::vector<uint8_t> text = gpt2_test::read_file(kCases);
    gpt2::JsonValue root;
    std::string error;
    ASSERT_TRUE(gpt2::parse_json(reinterpret_cast<const char*>(text.data()), text.size(), &root, &error, 1 << 20))
        << error;
    std::map<std::string, std::unique_ptr<gpt2::Model>> models;
    models["tiny-random"] = gpt2_test::load_folder(GPT2_FIXTURE_DIR);
    models["tiny-shakespeare"] = gpt2_test::load_folder(GPT2_BUNDLED_MODEL_DIR);
    double max_diff = 0.0;
    int n_cases = 0, n_hypotheses = 0, n_eos = 0;
    for (const gpt2::JsonValue& c : root.find("cases")->array) {
        const std::string name = c.find("name")->string;
        const gpt2::JsonValue& s = *c.find("settings");
        gpt2::BeamSettings settings;
        settings.num_beams = int(s.find("num_beams")->integer);
        settings.length_penalty = float(s.find("length_penalty")->number);
        settings.early_stopping = early_stopping_of(s.find("early_stopping")->string);
        settings.max_new_tokens = int(s.find("max_new_tokens")->integer);
        settings.eos_token = int32_t(s.find("eos_token")->integer);
        gpt2::SamplingSettings sampling;
        sampling.temperature = 0.0f;  // deterministic beam search
        sampling.repetition_penalty = float(s.find("repetition_penalty")->number);
        sampling.no_repeat_ngram_size = int(s.find("no_repeat_ngram_size")->integer);
        for (const gpt2::JsonValue& word : s.find("bad_words")->array) sampling.bad_words.push_back(ids(word));
        for (const gpt2::JsonValue& entry : s.find("logit_bias")->array)
            sampling.logit_bias.push_back({int32_t(entry.array[0].integer), float(entry.array[1].number)});
        sampling.min_new_tokens = int(s.find("min_new_tokens")->integer);
        sampling.eos_token = settings.eos_token;
        Beams beams = make_beams(*models.at(c.find("model")->string), gpt2::KvCacheFormat::fp32, sampling, settings);
        ASSERT_NO_FATAL_FAILURE(run(*beams.search, ids(*c.find("prompt"))));

        const std::vector<gpt2::BeamHypothesis>& got = beams.search->hypotheses();
        const std::vector<gpt2::JsonValue>& expected = c.find("hypotheses")->array;
        const size_t n_return = size_t(s.find("num_return_sequences")->integer);
        ASSERT_EQ(expected.size(), n_return) << name;
        ASSERT_GE(got.size(), n_return) << name;
        for (size_t i = 0; i < n_return; i++) {
            EXPECT_EQ(got[i].tokens, ids(*expected[i].find("tokens"))) << name << ": hypothesis " << i;
            EXPECT_EQ(got[i].ended_by_eos, expected[i].find("ended")->string == "eos") << name << ": hypothesis " << i;
            const double diff = std::fabs(double(got[i].score) - expected[i].find("score")->number);
            EXPECT_LT(diff, 2e-4) << name << ": hypothesis " << i << " scores " << got[i].score;
            max_diff = std::max(max_diff, diff);
            n_eos += got[i].ended_by_eos;
        }
        n_cases++;
        n_hypotheses += int(n_return);
    }
    EXPECT_GE(n_cases, 10);
    EXPECT_GT(n_eos, 0);  // some hypotheses end with the end-of-text token
    std::printf("beam search: %d cases, %d hypotheses (%d ended by eos), max |score - reference| = %.3g\n", n_cases,
                n_hypotheses, n_eos, max_diff);
}

TEST(BeamSearch, EveryBeamSessionHoldsItsOwnWindowWhileBeamsReorderAndForksCopyOnlyWhatDiffers) {
    ModelSpec spec;
    spec.n_ctx = 48;  // prompt 30 + 24 new tokens: the windows slide once
    const std::vector<int32_t> prompt{3, 14, 15, 9, 2,  6,  53, 58, 9, 7,  11, 4,  29, 33, 1,
                                      8, 20, 21, 5, 17, 40, 41, 2,  9, 10, 12, 13, 16, 18, 19};
    auto model = make_model(spec);
    for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
        gpt2::SamplingSettings sampling;
        sampling.temperature = 0.0f;
        gpt2::BeamSettings settings;
        settings.num_beams = 4;
        settings.max_new_tokens = 24;
        Beams beams = make_beams(*model, kv, sampling, settings);
        std::string error;
        auto fresh = gpt2::Session::create(*model, true, kv, &error);
        int steps = 0;
        long forks_rows_bound = 0;
        run(*beams.search, prompt, [&](const gpt2::BeamSearch& search) {
            steps++;
            forks_rows_bound += long(search.n_beams()) * search.n_generated();
            for (int b = 0; b < search.n_beams(); b++) {
                // the beam's session holds the prompt then the beam's tokens (the newest n_ctx / 2 after a slide)
                const gpt2::Session& session = *search.beam_session(b);
                std::vector<int32_t> text = prompt;
                text.insert(text.end(), search.beam_tokens(b), search.beam_tokens(b) + search.n_generated());
                const int n = session.n_cached();
                ASSERT_EQ(std::vector<int32_t>(session.window(), session.window() + n),
                          std::vector<int32_t>(text.end() - n, text.end()))
                    << "beam " << b << " after " << steps << " steps";
                // and its logits are those of that window fed from scratch: its cache rows are its own
                ASSERT_GE(fresh->prefill(session.window(), size_t(n)), 0) << fresh->error();
                std::vector<float> want(fresh->logits(), fresh->logits() + spec.n_vocab);
                ASSERT_TRUE(
                    gpt2_test::same_bits(std::vector<float>(session.logits(), session.logits() + spec.n_vocab), want))
                    << "beam " << b << " after " << steps << " steps, " << gpt2::kv_cache_format_name(kv) << " cache";
            }
        });
        EXPECT_EQ(beams.search->hypotheses().size(), 4u);
        // forks never copy the prompt's rows: at most each beam's generated tokens per step
        EXPECT_LE(beams.search->copied_rows(), forks_rows_bound);
        EXPECT_LT(beams.search->copied_rows(), long(steps) * 3 * long(prompt.size()));
        std::printf("%s cache: %d steps, %ld cache rows copied by forks (a whole window is %zu or more rows)\n",
                    gpt2::kv_cache_format_name(kv), steps, beams.search->copied_rows(), prompt.size());
    }
}

namespace {

// A hypothesis's sum of beam scores, recomputed one token at a time in a fresh session, each token's scores by a
// sampler with the same settings (Sampler::beam_scores over the session's logits and window).
double resummed(const gpt2::Model& model, const gpt2::SamplingSettings& sampling, const std::vector<int32_t>& prompt,
                const gpt2::BeamHypothesis& h, int32_t eos) {
    std::string error;
    auto session = gpt2::Session::create(model, true, gpt2::KvCacheFormat::fp32, &error);
    session->set_sampling(sampling);
    gpt2::Sampler sampler;
    EXPECT_TRUE(sampler.init(model.config().n_vocab, &error)) << error;
    EXPECT_TRUE(sampler.configure(sampling, &error)) << error;
    EXPECT_TRUE(session->feed_prompt(prompt.data(), prompt.size(), false)) << session->error();
    std::vector<float> scores(size_t(model.config().n_vocab));
    double sum = 0.0;
    for (size_t i = 0; i <= h.tokens.size(); i++) {
        if (i == h.tokens.size() && !h.ended_by_eos) break;
        EXPECT_EQ(sampler.beam_scores(session->logits(), session->window(), session->n_cached(), session->n_generated(),
                                      scores.data(), &error),
                  0)
            << error;
        sum += scores[size_t(i < h.tokens.size() ? h.tokens[i] : eos)];
        if (i < h.tokens.size()) {
            EXPECT_TRUE(session->feed_step(h.tokens[i])) << session->error();
        }
    }
    return sum;
}

}  // namespace

TEST(BeamSearch, BeamSamplingRepeatsWithItsSeedAndEveryScoreIsItsTokensBeamScoresResummed) {
    auto model = gpt2_test::load_folder(GPT2_FIXTURE_DIR);
    const std::vector<int32_t> prompt{259, 73, 75, 222, 59, 137, 172};
    gpt2::BeamSettings settings;
    settings.num_beams = 3;
    settings.max_new_tokens = 12;
    settings.length_penalty = 0.7f;
    settings.eos_token = 254;  // a token the fixture often predicts, so some hypotheses end early
    std::vector<std::vector<gpt2::BeamHypothesis>> by_seed;
    for (uint64_t seed : {1, 1, 2, 3}) {
        gpt2::SamplingSettings sampling;
        sampling.temperature = 0.8f;
        sampling.top_k = 40;
        sampling.seed = seed;
        sampling.eos_token = settings.eos_token;
        Beams beams = make_beams(*model, gpt2::KvCacheFormat::fp32, sampling, settings);
        run(*beams.search, prompt);
        const std::vector<gpt2::BeamHypothesis>& got = beams.search->hypotheses();
        ASSERT_EQ(got.size(), 3u);
        for (const gpt2::BeamHypothesis& h : got) {
            const int length = int(h.tokens.size()) + (h.ended_by_eos ? 1 : 0);
            const double expected = resummed(*model, sampling, prompt, h, settings.eos_token) /
                                    std::pow(double(length), double(settings.length_penalty));
            EXPECT_NEAR(h.score, expected, 1e-4) << "seed " << seed;
        }
        for (size_t i = 1; i < got.size(); i++) EXPECT_GE(got[i - 1].score, got[i].score);
        by_seed.push_back(got);
    }
    auto tokens = [](const std::vector<gpt2::BeamHypothesis>& hs) {
        std::vector<std::vector<int32_t>> out;
        for (const gpt2::BeamHypothesis& h : hs) out.push_back(h.tokens);
        return out;
    };
    EXPECT_EQ(tokens(by_seed[0]), tokens(by_seed[1]));  // the same seed: the same hypotheses
    EXPECT_TRUE(tokens(by_seed[1]) != tokens(by_seed[2]) || tokens(by_seed[2]) != tokens(by_seed[3]));
}

TEST(BeamSearch, FinishEndsTheSearchWithTheRunningBeamsAsHypothesesBestFirst) {
    auto model = gpt2_test::load_folder(GPT2_FIXTURE_DIR);
    const std::vector<int32_t> prompt{259, 73, 75, 222};
    gpt2::SamplingSettings sampling;
    sampling.temperature = 0.0f;
    gpt2::BeamSettings settings;
    settings.num_beams = 4;
    settings.max_new_tokens = 30;
    Beams beams = make_beams(*model, gpt2::KvCacheFormat::int8, sampling, settings);
    ASSERT_TRUE(beams.search->start(prompt.data(), prompt.size()));
    for (int i = 0; i < 5; i++) ASSERT_EQ(beams.search->step(), 1) << beams.search->error();
    std::vector<float> running;
    for (int b = 0; b < 4; b++) running.push_back(beams.search->beam_score(b) / 5.0f);
    beams.search->finish();
    const std::vector<gpt2::BeamHypothesis>& got = beams.search->hypotheses();
    ASSERT_EQ(got.size(), 4u);
    for (int b = 0; b < 4; b++) {
        EXPECT_EQ(got[size_t(b)].tokens.size(), 5u);
        EXPECT_FLOAT_EQ(got[size_t(b)].score, running[size_t(b)]);  // the beams were best first already
    }
    EXPECT_EQ(beams.search->step(), 0);  // a finished search stays finished
}

TEST(BeamSearch, RefusesBadSettingsAndSessionsWithOneLineErrors) {
    ModelSpec spec;
    auto model = make_model(spec);
    std::string error;
    auto a = gpt2::Session::create(*model, true, &error), b = gpt2::Session::create(*model, true, &error);
    auto uncached = gpt2::Session::create(*model, false, &error);
    gpt2::Session* two[] = {a.get(), b.get()};
    gpt2::Session* same[] = {a.get(), a.get()};
    gpt2::Session* with_uncached[] = {a.get(), uncached.get()};
    auto refused = [&](gpt2::Session* const* sessions, gpt2::BeamSettings settings) {
        std::string message;
        gpt2::ErrorKind kind = gpt2::ErrorKind::none;
        EXPECT_FALSE(gpt2::BeamSearch::create(sessions, settings, &message, &kind));
        EXPECT_EQ(kind, gpt2::ErrorKind::input) << message;
        return message;
    };
    gpt2::BeamSettings settings;
    settings.num_beams = 1;
    EXPECT_EQ(refused(two, settings), "beam search: 1 beams, expected 2..16");
    settings.num_beams = 17;
    EXPECT_EQ(refused(two, settings), "beam search: 17 beams, expected 2..16");
    settings.num_beams = 2;
    // the beams' token buffers hold one context at most: no number of the caller's sizes them beyond it
    const std::string context = std::to_string(spec.n_ctx);
    for (int max_new_tokens : {0, -1, spec.n_ctx + 1, 268435456, 1000000000, 2147483647}) {
        settings.max_new_tokens = max_new_tokens;
        EXPECT_EQ(refused(two, settings), "beam search: max_new_tokens " + std::to_string(max_new_tokens) +
                                              ", expected 1.." + context + " (the model's context)");
    }
    settings.max_new_tokens = spec.n_ctx;
    EXPECT_TRUE(gpt2::BeamSearch::create(two, settings, &error)) << "a whole context of new tokens: " << error;
    settings.max_new_tokens = 4;
    settings.length_penalty = NAN;
    EXPECT_EQ(refused(two, settings), "beam search: length_penalty must be finite");
    settings.length_penalty = 1.0f;
    settings.eos_token = spec.n_vocab;
    EXPECT_EQ(refused(two, settings), "beam search: eos_token " + std::to_string(spec.n_vocab) +
                                          " is outside the vocabulary (" + std::to_string(spec.n_vocab) + " tokens)");
    settings.eos_token = -1;
    EXPECT_EQ(refused(same, settings), "beam search: session 1 is session 0");
    EXPECT_EQ(refused(with_uncached, settings), "beam search: session 1 is not a cached session");

    auto search = gpt2::BeamSearch::create(two, settings, &error);
    ASSERT_TRUE(search) << error;
    const int32_t bad = spec.n_vocab;
    EXPECT_FALSE(search->start(&bad, 1));
    EXPECT_EQ(search->error_kind(), gpt2::ErrorKind::input);
    EXPECT_NE(search->error().find(std::to_string(bad)), std::string::npos) << search->error();
    EXPECT_EQ(search->step(), 0);  // never started: nothing to do
}
