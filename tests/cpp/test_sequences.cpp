// Several sequences from one prompt (gpt2::Sequences::fork, Sequences::step): a fork continues exactly
// as the session it was forked from, and a batched step of n sequences gives each one the tokens its own step()
// gives, bit for bit, for greedy and seeded sampling, both KV caches, one and two threads, int8 weights, and
// across window slides that come to the sequences at different steps.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "decoding/sequences.h"
#include "gpt2.h"
#include "test_util.h"

namespace {

using gpt2_test::make_model;
using gpt2_test::ModelSpec;

std::unique_ptr<gpt2::Session> session_with_seed(const gpt2::Model& model, gpt2::KvCacheFormat kv, uint64_t seed) {
    std::string error;
    auto session = gpt2::Session::create(model, true, kv, &error);
    EXPECT_TRUE(session) << error;
    gpt2::SamplingSettings settings;  // seed 0: greedy
    settings.temperature = seed == 0 ? 0.0f : 0.9f;
    settings.top_k = 30;
    settings.repetition_penalty = 1.1f;
    settings.presence_penalty = 0.2f;
    settings.seed = seed;
    session->set_sampling(settings);
    return session;
}

// n tokens after prompt, one step() at a time: what each sequence must give
std::vector<int32_t> stepped(const gpt2::Model& model, gpt2::KvCacheFormat kv, uint64_t seed,
                             const std::vector<int32_t>& prompt, int n) {
    auto session = session_with_seed(model, kv, seed);
    std::vector<int32_t> out{session->prefill(prompt.data(), prompt.size())};
    while (int(out.size()) < n) out.push_back(session->step(out.back()));
    return out;
}

}  // namespace

TEST(Sequences, BatchedStepsGiveEachForkedSequenceItsOwnTokensBitForBit) {
    ModelSpec spec;
    spec.n_ctx = 40;  // 70 tokens slide every window once
    const std::vector<int32_t> prompt{3, 14, 15, 9, 2, 6, 53, 58, 9, 7};
    for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8})
        for (int threads : {1, 2}) {
            auto model = make_model(spec, gpt2::LoadOptions{format, threads});
            for (gpt2::KvCacheFormat kv : {gpt2::KvCacheFormat::fp32, gpt2::KvCacheFormat::int8}) {
                const std::vector<uint64_t> seeds{0, 5, 6, 7};  // a greedy sequence beside three sampled ones
                std::vector<std::unique_ptr<gpt2::Session>> sessions;
                for (uint64_t seed : seeds) sessions.push_back(session_with_seed(*model, kv, seed));
                // the prompt is prefilled once; the others fork its cache and sample their own first token
                std::vector<std::vector<int32_t>> got(seeds.size());
                got[0].push_back(sessions[0]->prefill(prompt.data(), prompt.size()));
                for (size_t i = 1; i < seeds.size(); i++) {
                    ASSERT_GE(gpt2::Sequences::fork(*sessions[i], *sessions[0]), 0) << sessions[i]->error();
                    got[i].push_back(sessions[i]->sample());
                }
                std::vector<gpt2::Session*> batch;
                for (auto& s : sessions) batch.push_back(s.get());
                // one sequence a step behind: the windows fill, and slide, at different steps
                got[3].push_back(sessions[3]->step(got[3].back()));
                int32_t ids[4], out[4];
                gpt2::Sequences sequences;
                while (got[0].size() < 70) {
                    for (size_t i = 0; i < seeds.size(); i++) ids[i] = got[i].back();
                    ASSERT_TRUE(sequences.step(batch.data(), ids, 4, out)) << sessions[0]->error();
                    for (size_t i = 0; i < seeds.size(); i++) got[i].push_back(out[i]);
                }
                for (size_t i = 0; i < seeds.size(); i++) {
                    std::vector<int32_t> expected = stepped(*model, kv, seeds[i], prompt, int(got[i].size()));
                    ASSERT_EQ(got[i], expected)
                        << "sequence " << i << " (seed " << seeds[i] << "), " << gpt2::kv_cache_format_name(kv)
                        << " cache, " << threads << " threads, "
                        << (format == gpt2::WeightFormat::int8 ? "int8" : "fp32");
                }
                EXPECT_NE(got[1], got[2]);  // the seeds do give different sequences
            }
        }
}

TEST(Sequences, ForkingAndBatchingRefuseWhatTheyCannotRunWithOneLineErrors) {
    ModelSpec spec;
    auto model = make_model(spec);
    auto other_model = make_model(spec);
    std::string error;
    auto a = gpt2::Session::create(*model, true, gpt2::KvCacheFormat::int8, &error);
    auto fp32 = gpt2::Session::create(*model, true, gpt2::KvCacheFormat::fp32, &error);
    auto uncached = gpt2::Session::create(*model, false, gpt2::KvCacheFormat::int8, &error);
    auto foreign = gpt2::Session::create(*other_model, true, gpt2::KvCacheFormat::int8, &error);
    const int32_t prompt[] = {1, 2, 3};
    ASSERT_GE(a->prefill(prompt, 3), 0);
    ASSERT_GE(foreign->prefill(prompt, 3), 0);
    EXPECT_EQ(gpt2::Sequences::fork(*fp32, *a), -1);
    EXPECT_EQ(fp32->error(), "fork_from: the sessions differ in model, KV cache or KV-cache format");
    EXPECT_EQ(gpt2::Sequences::fork(*uncached, *a), -1);
    EXPECT_EQ(gpt2::Sequences::fork(*foreign, *a), -1);

    int32_t out[gpt2::Sequences::kMaxSequences + 1];
    gpt2::Sequences sequences;
    const int32_t ids[] = {4, 5, 99};
    gpt2::Session* same_twice[] = {a.get(), a.get()};
    EXPECT_FALSE(sequences.step(same_twice, ids, 2, out));
    EXPECT_EQ(a->error(), "step_sequences: sequence 1 is sequence 0");
    gpt2::Session* mixed[] = {a.get(), foreign.get()};
    EXPECT_FALSE(sequences.step(mixed, ids, 2, out));
    EXPECT_EQ(a->error(), "step_sequences: sequence 1 is not a fed, cached session of the first's model");
    gpt2::Session* one[] = {a.get()};
    EXPECT_FALSE(sequences.step(one, ids + 2, 1, out));
    EXPECT_EQ(a->error(), "sequence 0: token id 99 out of range [0, 67)");
    EXPECT_FALSE(sequences.step(one, ids, 0, out));
    EXPECT_EQ(a->error(), "step_sequences: 0 sequences, expected 1..16");
    // nothing was fed by the refused calls: the session goes on as it was
    EXPECT_EQ(a->n_cached(), 3);
    EXPECT_TRUE(sequences.step(one, ids, 1, out)) << a->error();
    EXPECT_EQ(a->n_cached(), 4);
}
