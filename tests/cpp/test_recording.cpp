// A recording session (gpt2::Session::create_recording) writes its forward passes down for a host (the WebGPU
// executor in web/lib/gpu/) instead of running them. What it promises: replayed in order on the CPU
// (gpt2::replay, which plays the host with its own activations and KV cache), the commands give the logits and the
// tokens of a session that runs its passes, bit for bit, through prefill, steps, a window slide, reuse,
// every-row logits and score(), also with the weights of the same model loaded again once its own were released, and
// with the CPU taking over mid-run (run_recorded_pass_on_cpu); each chunk records the embedding, eight operations per
// layer and the head; and it refuses the calls that would run a pass itself.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "decoding/scorer.h"
#include "gpt2.h"
#include "model/forward.h"
#include "model/forward_ops.h"
#include "test_util.h"

namespace {

using gpt2::GpuCommand;
using gpt2::GpuOp;
using gpt2_test::make_model;
using gpt2_test::ModelSpec;

// A recording session and the host that runs its commands on the CPU, in a run state of its own, with the
// weights of model (or of weights: the same model loaded again).
class ReplayHost {
   public:
    ReplayHost(const gpt2::Model& model, bool use_kv_cache, const gpt2::Model* weights = nullptr)
        : model_(weights ? *weights : model) {
        std::string error;
        session_ = gpt2::Session::create_recording(model, use_kv_cache, &error);
        EXPECT_TRUE(session_) << error;
        EXPECT_TRUE(gpt2::create_run_state(model.config(), gpt2::KvCacheFormat::fp32, false, &state_, &error)) << error;
        gpt2::SamplingSettings greedy;
        greedy.temperature = 0.0f;
        session_->set_sampling(greedy);
    }

    gpt2::Session& session() { return *session_; }

    // The host's half of a feed: runs the recorded pass, then the session samples.
    int run_and_sample() {
        run();
        return session_->sample();
    }
    void run() {
        int n = 0;
        const GpuCommand* commands = session_->recorded_commands(&n);
        last_commands_.assign(commands, commands + n);
        gpt2::replay(model_, &state_, commands, n, session_->window(), session_->recorded_all_logits(),
                     session_->host_logits());
    }
    const std::vector<GpuCommand>& last_commands() const { return last_commands_; }

   private:
    const gpt2::Model& model_;
    std::unique_ptr<gpt2::Session> session_;
    gpt2::RunState state_;
    std::vector<GpuCommand> last_commands_;
};

std::vector<float> logits_of(const gpt2::Session& session, int n_vocab) {
    return std::vector<float>(session.logits(), session.logits() + n_vocab);
}

}  // namespace

TEST(RecordingSession, ReplayedCommandsGiveTheRunningSessionsLogitsAndTokensBitForBit) {
    ModelSpec spec;
    spec.n_ctx = 24;  // 30 steps after a 9-token prompt slide the window twice
    for (gpt2::WeightFormat format : {gpt2::WeightFormat::fp32, gpt2::WeightFormat::int8}) {
        auto model = make_model(spec, format);
        for (bool cached : {true, false}) {
            auto running = gpt2_test::greedy_session(*model, cached);
            ReplayHost host(*model, cached);
            const std::vector<int32_t> prompt{3, 14, 15, 9, 2, 6, 5, 35, 8};
            int expected = running->prefill(prompt.data(), prompt.size());
            ASSERT_TRUE(host.session().feed_prompt(prompt.data(), prompt.size(), false)) << host.session().error();
            int got = host.run_and_sample();
            for (int i = 0; i < 30; i++) {
                ASSERT_EQ(got, expected) << "step " << i << (cached ? " cached" : " uncached");
                ASSERT_TRUE(
                    gpt2_test::same_bits(logits_of(host.session(), spec.n_vocab), logits_of(*running, spec.n_vocab)))
                    << "step " << i;
                ASSERT_EQ(host.session().n_cached(), running->n_cached());
                expected = running->step(expected);
                ASSERT_TRUE(host.session().feed_step(got)) << host.session().error();
                got = host.run_and_sample();
            }
            // Continue: the window's prefix stays in the host's cache and only the rest is fed
            std::vector<int32_t> longer(running->window(), running->window() + running->n_cached());
            longer.push_back(7);
            expected = running->prefill_reusing(longer.data(), longer.size());
            ASSERT_TRUE(host.session().feed_prompt(longer.data(), longer.size(), true));
            got = host.run_and_sample();
            EXPECT_EQ(host.session().reused_tokens(), running->reused_tokens());
            if (cached) {
                EXPECT_GT(host.session().reused_tokens(), 0);
            }
            EXPECT_EQ(got, expected);
            EXPECT_TRUE(
                gpt2_test::same_bits(logits_of(host.session(), spec.n_vocab), logits_of(*running, spec.n_vocab)));
        }
    }
}

TEST(RecordingSession, EveryRowLogitsOfAPrefillGoWhereTheSessionSays) {
    ModelSpec spec;
    spec.n_ctx = 200;  // 150 tokens: chunks of 64, 64 and 22
    auto model = make_model(spec);
    std::vector<int32_t> ids(150);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = int32_t((i * 7 + 3) % size_t(spec.n_vocab));
    const size_t V = size_t(spec.n_vocab);
    std::vector<float> expected(ids.size() * V), got(ids.size() * V, -1.0f);
    auto running = gpt2_test::greedy_session(*model, true);
    ASSERT_TRUE(running->prefill_logits(ids.data(), ids.size(), expected.data()));
    ReplayHost host(*model, true);
    ASSERT_TRUE(host.session().prefill_logits(ids.data(), ids.size(), got.data()));
    EXPECT_EQ(host.session().recorded_all_logits(), got.data());
    host.run();
    EXPECT_TRUE(gpt2_test::same_bits(got, expected));
    EXPECT_TRUE(gpt2_test::same_bits(logits_of(host.session(), spec.n_vocab), logits_of(*running, spec.n_vocab)));
}

TEST(RecordingSession, ScorePassesRunByTheHostGiveScoresScoresBitForBitAndLeaveItsCacheReusable) {
    ModelSpec spec;
    spec.n_ctx = 200;  // 330 ids: windows [0, 200), [100, 300) and [130, 330), the later two after a context pass
    auto model = make_model(spec);
    std::vector<int32_t> ids(330);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = int32_t((i * 13 + 5) % size_t(spec.n_vocab));
    const int top_k = 3;
    std::vector<gpt2::TokenScore> expected(ids.size() - 1), got(ids.size() - 1);
    std::vector<gpt2::TokenScore> expected_alternatives(expected.size() * top_k),
        got_alternatives(expected.size() * top_k);
    auto running = gpt2_test::greedy_session(*model, true);
    ASSERT_TRUE(
        gpt2::Scorer(*running).score(ids.data(), ids.size(), top_k, expected.data(), expected_alternatives.data()));

    ReplayHost host(*model, true);
    gpt2::Session& session = host.session();
    gpt2::Scorer scorer(session);
    ASSERT_TRUE(scorer.begin(ids.data(), ids.size(), top_k, got.data(), got_alternatives.data()));
    int passes = 0, context_passes = 0;
    for (int fed; (fed = scorer.feed_pass()) != 0; passes++) {
        ASSERT_EQ(fed, 1) << session.error();
        if (!session.recorded_all_logits()) context_passes++;
        host.run();
        ASSERT_TRUE(scorer.score_fed_pass()) << session.error();
    }
    EXPECT_EQ(context_passes, 2);
    EXPECT_EQ(passes, 4 + 1 + 2 + 1 + 1);  // 200 rows in chunks of 64; context, 101 rows; context, 31 rows
    for (size_t i = 0; i < expected.size(); i++) {
        ASSERT_EQ(got[i].token, expected[i].token) << "id " << i + 1;
        ASSERT_EQ(got[i].rank, expected[i].rank) << "id " << i + 1;
        ASSERT_EQ(std::memcmp(&got[i].logprob, &expected[i].logprob, sizeof(double)), 0) << "id " << i + 1;
    }
    for (size_t i = 0; i < expected_alternatives.size(); i++) {
        ASSERT_EQ(got_alternatives[i].token, expected_alternatives[i].token) << "alternative " << i;
        ASSERT_EQ(std::memcmp(&got_alternatives[i].logprob, &expected_alternatives[i].logprob, sizeof(double)), 0);
    }
    EXPECT_EQ(scorer.feed_pass(), -1);
    EXPECT_EQ(session.error(), "feed_score_pass: no score run is in progress (begin_score() starts one)");

    // The window then holds the last window scored, its cache rows written: a prompt that shares all but its last
    // token reuses them.
    std::vector<int32_t> prompt(ids.end() - 200, ids.end() - 1);
    prompt.push_back(7);
    const int token = running->prefill_reusing(prompt.data(), prompt.size());
    ASSERT_TRUE(session.feed_prompt(prompt.data(), prompt.size(), true));
    EXPECT_EQ(session.reused_tokens(), running->reused_tokens());
    EXPECT_EQ(session.reused_tokens(), 199);
    EXPECT_EQ(host.run_and_sample(), token);
    EXPECT_TRUE(gpt2_test::same_bits(logits_of(session, spec.n_vocab), logits_of(*running, spec.n_vocab)));
}

TEST(RecordingSession, AChunkIsTheEmbeddingEightOperationsPerLayerAndTheHead) {
    ModelSpec spec;
    spec.n_ctx = 200;
    auto model = make_model(spec);
    ReplayHost host(*model, true);
    const std::vector<int32_t> prompt(70, 5);  // chunks of 64 and 6: the first has no head
    ASSERT_TRUE(host.session().feed_prompt(prompt.data(), prompt.size(), false));
    host.run();
    const std::vector<GpuCommand>& commands = host.last_commands();
    ASSERT_EQ(commands.size(), size_t(2 * (1 + 8 * spec.n_layer) + 2));
    const std::vector<GpuOp> layer{GpuOp::layernorm, GpuOp::linear,    GpuOp::store_kv, GpuOp::attention,
                                   GpuOp::linear,    GpuOp::layernorm, GpuOp::linear,   GpuOp::linear};
    size_t i = 0;
    for (int chunk = 0; chunk < 2; chunk++) {
        EXPECT_EQ(commands[i].op, GpuOp::embed);
        EXPECT_EQ(commands[i].token_offset, 64 * chunk);
        EXPECT_EQ(commands[i++].n, chunk == 0 ? 64 : 6);
        for (int l = 0; l < spec.n_layer; l++)
            for (GpuOp op : layer) {
                EXPECT_EQ(commands[i].op, op) << "command " << i;
                EXPECT_EQ(commands[i++].layer, l);
            }
    }
    EXPECT_EQ(commands[i].op, GpuOp::layernorm);
    EXPECT_EQ(commands[i].row0, 5);  // the last token's row alone
    EXPECT_EQ(commands[++i].op, GpuOp::linear);
    EXPECT_EQ(commands[i].out, gpt2::Activation::logits);
    EXPECT_EQ(commands[i].logits_row, -1);
}

TEST(RecordingSession, AModelWhoseWeightsWereReleasedMakesOnlyRecordingSessionsWhichRunOnTheWeightsLoadedAgain) {
    auto released = make_model(ModelSpec{});
    auto loaded_again = make_model(ModelSpec{});
    released->release_weights();
    EXPECT_FALSE(released->has_weights());
    EXPECT_TRUE(loaded_again->has_weights());
    EXPECT_EQ(gpt2::model_weight_bytes(*released), 0u);
    EXPECT_EQ(gpt2::model_weight_types(*released), gpt2::model_weight_types(*loaded_again));
    std::string error;
    EXPECT_EQ(gpt2::Session::create(*released, true, &error), nullptr);
    EXPECT_EQ(error, "the model's weights were released (a GPU holds them): only a recording session runs it");

    auto running = gpt2_test::greedy_session(*loaded_again, true);
    ReplayHost host(*released, true, loaded_again.get());
    const std::vector<int32_t> prompt{3, 14, 15, 9, 2};
    int expected = running->prefill(prompt.data(), prompt.size());
    ASSERT_TRUE(host.session().feed_prompt(prompt.data(), prompt.size(), false)) << host.session().error();
    int got = host.run_and_sample();
    for (int i = 0; i < 10; i++) {
        ASSERT_EQ(got, expected) << "step " << i;
        ASSERT_TRUE(host.session().feed_step(got));
        got = host.run_and_sample();
        expected = running->step(expected);
    }
    EXPECT_EQ(got, expected);
}

TEST(RecordingSession, RefusesTheCallsThatWouldRunAPassHereAndHoldsNoCache) {
    auto model = make_model(ModelSpec{});
    ReplayHost host(*model, true);
    gpt2::Session& session = host.session();
    const int32_t ids[] = {1, 2, 3};
    EXPECT_EQ(session.prefill(ids, 3), -1);
    EXPECT_EQ(
        session.error(),
        "prefill: a recording session is fed by feed_step() and feed_prompt(), and its host runs the forward pass");
    EXPECT_EQ(session.error_kind(), gpt2::ErrorKind::input);
    EXPECT_EQ(session.step(1), -1);
    EXPECT_EQ(session.prefill_reusing(ids, 3), -1);
    gpt2::TokenScore scores[2];
    EXPECT_FALSE(gpt2::Scorer(session).score(ids, 3, 0, scores, nullptr));
    EXPECT_EQ(session.error().rfind("score: a recording session", 0), 0u) << session.error();
    EXPECT_FALSE(session.feed_step(1000));
    EXPECT_EQ(session.error(), "token id 1000 out of range [0, 67)");
    // the cache it reports is the one its host keeps: fp32 at n_ctx
    const gpt2::Config& c = model->config();
    EXPECT_EQ(session.kv_cache_bytes(), size_t(2) * c.n_layer * c.n_ctx * c.n_embd * sizeof(float));
    EXPECT_EQ(session.kv_cache_format(), gpt2::KvCacheFormat::fp32);
}

// The CPU taking over a recording session whose GPU was lost mid-run (run_recorded_pass_on_cpu): the positions before
// its first pass come from the window, then its cache follows the passes, so the run goes on bit for bit as a running
// session's, also across the window's slide; weights that are released or of another shape are refused.
TEST(RecordingSession, TheCpuTakingOverMidRunGoesOnAsTheRunningSessionBitForBit) {
    ModelSpec spec;
    spec.n_ctx = 24;  // 30 steps after a 5-token prompt slide the window
    auto model = make_model(spec);
    const std::shared_ptr<const gpt2::Model> loaded_again = make_model(spec);
    ModelSpec wider = spec;
    wider.n_embd = 24;
    const std::shared_ptr<const gpt2::Model> other_shape = make_model(wider);
    auto released = make_model(spec);
    released->release_weights();
    const std::shared_ptr<const gpt2::Model> no_weights = std::move(released);

    auto running = gpt2_test::greedy_session(*model, true);
    ReplayHost gpu(*model, true);
    const std::vector<int32_t> prompt{3, 14, 15, 9, 2};
    int expected = running->prefill(prompt.data(), prompt.size());
    ASSERT_TRUE(gpu.session().feed_prompt(prompt.data(), prompt.size(), false)) << gpu.session().error();
    int got = gpu.run_and_sample();
    for (int i = 0; i < 4; i++) {
        expected = running->step(expected);
        ASSERT_TRUE(gpu.session().feed_step(got));
        got = gpu.run_and_sample();
    }
    gpt2::CpuHost cpu;
    gpt2::Session& session = gpu.session();
    for (int i = 0; i < 30; i++) {
        ASSERT_EQ(got, expected) << "step " << i;
        expected = running->step(expected);
        ASSERT_TRUE(session.feed_step(got));
        if (i == 0) {
            for (const auto& refused : {other_shape, no_weights}) {
                EXPECT_FALSE(gpt2::run_recorded_pass_on_cpu(&session, refused, &cpu));
                EXPECT_EQ(session.error_kind(), gpt2::ErrorKind::input);
                EXPECT_EQ(session.error(),
                          "run_on_cpu: the CPU model has no weights or another shape than the session's");
            }
        }
        ASSERT_TRUE(gpt2::run_recorded_pass_on_cpu(&session, loaded_again, &cpu)) << session.error();
        got = session.sample();
        ASSERT_TRUE(gpt2_test::same_bits(logits_of(session, spec.n_vocab), logits_of(*running, spec.n_vocab)))
            << "step " << i;
    }
    EXPECT_EQ(got, expected);
}
