// The inspection of a session's passes (gpt2::Inspector, engine/inspection/): attention probabilities against a
// float64 reference, the logit lens against the pass's own logits and the reference's, the KV cache's rows against
// the rows the pass computed, the sampler's trace against its draws, the cache's events, and that inspecting changes
// no token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "gpt2.h"
#include "inspection/inspector.h"
#include "model/forward.h"
#include "reference_gpt2.h"
#include "test_util.h"

namespace {

using gpt2::CacheEvent;
using gpt2::InspectionRequest;
using gpt2::Inspector;
using gpt2::KvCacheFormat;
using gpt2::SamplerTrace;
using gpt2::WeightFormat;
using gpt2_test::ModelSpec;
using gpt2_test::Reference;

std::vector<int32_t> every(int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    return v;
}

InspectionRequest everything(const gpt2::Config& c, std::vector<int32_t> positions, int top_k = 5) {
    return InspectionRequest{std::move(positions), every(c.n_layer), every(c.n_head), top_k};
}

std::vector<int32_t> some_ids(size_t n, int n_vocab, int seed = 0) {
    std::vector<int32_t> ids(n);
    for (size_t i = 0; i < n; i++) ids[i] = int32_t((i * 37 + size_t(seed) * 11 + 5) % size_t(n_vocab));
    return ids;
}

std::unique_ptr<gpt2::Session> session_of(const gpt2::Model& model, KvCacheFormat kv, bool cache = true,
                                          float temperature = 0.0f, uint64_t seed = 0) {
    std::string error;
    auto session = gpt2::Session::create(model, cache, kv, &error);
    EXPECT_TRUE(session) << error;
    gpt2::SamplingSettings settings;
    settings.temperature = temperature;
    settings.seed = seed;
    EXPECT_TRUE(session->set_sampling(settings));
    return session;
}

// The model of spec and its float64 reference (random F32 tensors).
struct Reference64 {
    ModelSpec spec;
    std::unique_ptr<gpt2::Model> model;
    Reference reference;
    explicit Reference64(const ModelSpec& s)
        : spec(s), model(gpt2_test::make_model(s)), reference(s, gpt2_test::random_tensors(s)) {}
};

// Each attention row of an inspection of every position, layer and head against the reference: sums to 1, and the
// largest |probability - reference| (printed) within bound.
void expect_attention_like_the_reference(const gpt2::Model& model, const Reference& reference,
                                         const std::vector<int32_t>& ids, const char* what, double bound) {
    const gpt2::Config& c = model.config();
    auto session = session_of(model, KvCacheFormat::fp32);
    Inspector inspector(*session);
    const int n = int(ids.size());
    ASSERT_TRUE(inspector.configure(everything(c, every(n)))) << session->error();
    ASSERT_TRUE(inspector.feed_prompt(ids.data(), ids.size(), false)) << session->error();
    Reference::Inside inside;
    reference.logits(ids, &inside);
    double max_diff = 0, max_sum_error = 0;
    for (int i = 0; i < n; i++)
        for (int l = 0; l < c.n_layer; l++)
            for (int h = 0; h < c.n_head; h++) {
                const float* row = inspector.attention() +
                                   ((size_t(i) * c.n_layer + l) * c.n_head + h) * size_t(inspector.row_stride());
                const std::vector<double>& expected = inside.attention[size_t(l * c.n_head + h)];
                double sum = 0;
                for (int j = 0; j <= i; j++) {
                    sum += row[j];
                    max_diff = std::max(max_diff, std::fabs(row[j] - expected[size_t(i) * n + j]));
                }
                max_sum_error = std::max(max_sum_error, std::fabs(sum - 1.0));
            }
    std::printf("%s, %d positions: max |attention probability - float64 reference| = %.3g, max |row sum - 1| = %.3g\n",
                what, n, max_diff, max_sum_error);
    EXPECT_LE(max_diff, bound);
    EXPECT_LE(max_sum_error, 1e-5);
}

}  // namespace

// The bound: fp32 weights and cache against float64, measured 1.2e-7 (tiny) and 1.4e-7 (bundled); 1e-5 leaves room
// for other compilers' rounding, and is 1 % of a probability of 0.001.
TEST(Inspection, AttentionRowsSumToOneAndEqualAFloat64ReferencesProbabilities) {
    ModelSpec spec;  // head size 5: every kernel tail
    spec.n_ctx = 90;
    Reference64 tiny(spec);
    expect_attention_like_the_reference(*tiny.model, tiny.reference, some_ids(80, spec.n_vocab), "tiny model", 1e-5);

    auto bundled = gpt2_test::load_folder(GPT2_BUNDLED_MODEL_DIR);
    ASSERT_TRUE(bundled);
    const gpt2::Config& c = bundled->config();
    const Reference reference(
        ModelSpec{c.n_vocab, c.n_ctx, c.n_embd, c.n_head, c.n_layer, 0},
        gpt2_test::read_reference_tensors(std::string(GPT2_BUNDLED_MODEL_DIR) + "/model.safetensors", c.n_layer));
    expect_attention_like_the_reference(*bundled, reference, some_ids(24, c.n_vocab), "bundled model", 1e-5);
}

TEST(Inspection, TheLastLayersLensIsThePassOwnLogitsBitForBit) {
    ModelSpec spec;
    spec.n_ctx = 100;  // a 70-token prompt runs in two chunks
    for (WeightFormat format : {WeightFormat::fp32, WeightFormat::int8}) {
        auto model = gpt2_test::make_model(spec, format);
        for (KvCacheFormat kv : {KvCacheFormat::fp32, KvCacheFormat::int8}) {
            SCOPED_TRACE(std::string(gpt2::weight_format_name(format)) + " weights, " + gpt2::kv_cache_format_name(kv) +
                         " cache");
            auto session = session_of(*model, kv);
            Inspector inspector(*session);
            ASSERT_TRUE(inspector.configure(everything(model->config(), {})));
            const std::vector<int32_t> ids = some_ids(70, spec.n_vocab);
            ASSERT_TRUE(inspector.feed_prompt(ids.data(), ids.size(), false)) << session->error();
            EXPECT_EQ(inspector.positions()[0], 69);
            const size_t V = size_t(spec.n_vocab);
            EXPECT_EQ(std::memcmp(inspector.last_lens_logits(), session->logits(), V * sizeof(float)), 0);
            for (int i = 0; i < 5; i++) {
                const int token = inspector.sample();
                ASSERT_TRUE(inspector.feed_step(token)) << session->error();
                EXPECT_EQ(std::memcmp(inspector.last_lens_logits(), session->logits(), V * sizeof(float)), 0) << i;
            }
        }
    }
}

TEST(Inspection, EveryLayersLensTopTokensEqualTheFloat64References) {
    ModelSpec spec;
    spec.n_vocab = 300;
    Reference64 tiny(spec);
    const gpt2::Config& c = tiny.model->config();
    auto session = session_of(*tiny.model, KvCacheFormat::fp32);
    Inspector inspector(*session);
    const int K = 5, n = 30;
    ASSERT_TRUE(inspector.configure(everything(c, every(n), K)));
    const std::vector<int32_t> ids = some_ids(size_t(n), c.n_vocab);
    ASSERT_TRUE(inspector.feed_prompt(ids.data(), ids.size(), false));
    Reference::Inside inside;
    tiny.reference.logits(ids, &inside);
    double max_diff = 0;
    const size_t V = size_t(c.n_vocab);
    for (int l = 0; l < c.n_layer; l++) {
        const std::vector<double> logits = tiny.reference.head(inside.residual[size_t(l)]);
        for (int i = 0; i < n; i++) {
            const double* row = logits.data() + size_t(i) * V;
            std::vector<int32_t> order(V);
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + K, order.end(),
                              [row](int32_t a, int32_t b) { return row[a] > row[b]; });
            double z = 0;
            for (size_t v = 0; v < V; v++) z += std::exp(row[v] - row[order[0]]);
            const size_t at = (size_t(i) * c.n_layer + l) * K;
            for (int k = 0; k < K; k++) {
                EXPECT_EQ(inspector.lens_tokens()[at + k], order[size_t(k)]) << "layer " << l << ", position " << i;
                const double p = std::exp(row[order[size_t(k)]] - row[order[0]]) / z;
                max_diff = std::max(max_diff, std::fabs(inspector.lens_probabilities()[at + k] - p));
            }
        }
    }
    std::printf("logit lens, %d layers x %d positions: max |probability - float64 reference| = %.3g\n", c.n_layer, n,
                max_diff);
    EXPECT_LE(max_diff, 1e-5);
}

namespace {

// Keeps the keys and values each pass computes (before the cache stores them), by layer and position.
class ComputedRows final : public gpt2::ForwardObserver {
   public:
    std::map<std::pair<int, int>, std::vector<float>> rows;  // (layer, position) -> qkv row (3 * n_embd)
    void attention_done(const gpt2::Model& model, gpt2::RunState* s, int layer, int n, int pos0) override {
        const size_t C3 = 3 * size_t(model.config().n_embd);
        for (int t = 0; t < n; t++) rows[{layer, pos0 + t}].assign(s->qkv + t * C3, s->qkv + (t + 1) * C3);
    }
    void block_done(const gpt2::Model&, gpt2::RunState*, int, gpt2::Block, int, int) override {}
};

}  // namespace

TEST(Inspection, KvRowsEqualTheComputedRowsBitForBitInFp32AndWithinHalfAScaleInInt8) {
    ModelSpec spec;
    auto model = gpt2_test::make_model(spec);
    const gpt2::Config& c = model->config();
    const int hs = c.n_embd / c.n_head, n = 12;
    const std::vector<int32_t> ids = some_ids(size_t(n), c.n_vocab);
    for (KvCacheFormat kv : {KvCacheFormat::fp32, KvCacheFormat::int8}) {
        SCOPED_TRACE(gpt2::kv_cache_format_name(kv));
        auto session = session_of(*model, kv);
        Inspector inspector(*session);
        const std::vector<int32_t> positions = {0, 5, 11};
        ASSERT_TRUE(inspector.configure(everything(c, positions)));
        ASSERT_TRUE(inspector.feed_prompt(ids.data(), ids.size(), false));
        // the same prompt computed again, in another session whose pass a test observer reads
        auto again = session_of(*model, kv);
        ComputedRows computed;
        again->run_state().observer = &computed;
        ASSERT_GE(again->prefill(ids.data(), ids.size()), 0);
        again->run_state().observer = nullptr;
        double worst = 0;  // |stored - computed| / scale, int8
        for (size_t i = 0; i < positions.size(); i++)
            for (int l = 0; l < c.n_layer; l++)
                for (int h = 0; h < c.n_head; h++) {
                    const float* key = inspector.kv_rows() + ((i * c.n_layer + l) * c.n_head + h) * 2 * hs;
                    const std::vector<float>& row = computed.rows.at({l, positions[i]});
                    for (int part = 0; part < 2; part++) {  // key, value
                        const float* expected = row.data() + size_t(part + 1) * c.n_embd + size_t(h) * hs;
                        const float* stored = key + part * hs;
                        if (kv == KvCacheFormat::fp32) {
                            EXPECT_EQ(std::memcmp(stored, expected, sizeof(float) * hs), 0) << l << " " << h;
                            continue;
                        }
                        float max_abs = 0;
                        for (int k = 0; k < hs; k++) max_abs = std::max(max_abs, std::fabs(expected[k]));
                        const float scale = max_abs / 127.0f;
                        for (int k = 0; k < hs; k++)
                            worst = std::max(worst, double(std::fabs(stored[k] - expected[k]) / scale));
                    }
                }
        if (kv == KvCacheFormat::int8) {
            std::printf("int8 KV rows: max |stored - computed| = %.4f x the row's scale (bound 0.5)\n", worst);
            EXPECT_LE(worst, 0.5 * (1 + 1e-5));
            EXPECT_GT(worst, 0.0);
        }
    }
}

namespace {

gpt2::SamplingSettings warped(uint64_t seed) {
    gpt2::SamplingSettings s;
    s.temperature = 0.9f;
    s.top_k = 6;
    s.repetition_penalty = 1.3f;
    s.seed = seed;
    return s;
}

}  // namespace

TEST(Inspection, TheSamplerTracesDistributionIsWhatTheSamplerDrawsFrom) {
    ModelSpec spec;
    auto model = gpt2_test::make_model(spec);
    const std::vector<int32_t> ids = some_ids(9, spec.n_vocab);
    const int K = 6, draws = 3000;
    std::vector<int> counts(size_t(spec.n_vocab), 0);
    std::vector<int32_t> tokens;
    std::vector<float> probabilities;
    for (int seed = 0; seed < draws; seed++) {
        auto session = session_of(*model, KvCacheFormat::fp32);
        ASSERT_TRUE(session->set_sampling(warped(uint64_t(seed))));
        Inspector inspector(*session);
        ASSERT_TRUE(inspector.configure(InspectionRequest{{}, {}, {}, K}));
        ASSERT_TRUE(inspector.feed_prompt(ids.data(), ids.size(), false));
        const int token = inspector.sample();
        const SamplerTrace& trace = inspector.trace();
        ASSERT_EQ(trace.token, token);
        counts[size_t(token)]++;
        if (seed == 0) {  // the stages that ran, and the distribution (the same logits for every seed)
            EXPECT_EQ(std::vector<int>(trace.ran, trace.ran + SamplerTrace::kStages),
                      (std::vector<int>{1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1}));
            EXPECT_EQ(trace.candidates[SamplerTrace::top_k], 6);
            EXPECT_EQ(trace.candidates[SamplerTrace::logits], spec.n_vocab);
            const int32_t* top = trace.top + SamplerTrace::distribution * K;
            tokens.assign(top, top + trace.n_top[SamplerTrace::distribution]);
            const float* values = trace.values + SamplerTrace::distribution * K;
            probabilities.assign(values, values + tokens.size());
            EXPECT_NEAR(std::accumulate(probabilities.begin(), probabilities.end(), 0.0), 1.0, 1e-6);
            // the same seed without the inspector draws the same token
            auto plain = session_of(*model, KvCacheFormat::fp32);
            ASSERT_TRUE(plain->set_sampling(warped(0)));
            EXPECT_EQ(plain->prefill(ids.data(), ids.size()), token);
        }
        EXPECT_FLOAT_EQ(trace.probability,
                        probabilities[size_t(std::find(tokens.begin(), tokens.end(), token) - tokens.begin())]);
    }
    ASSERT_EQ(tokens.size(), size_t(K));
    double chi2 = 0;
    for (size_t k = 0; k < tokens.size(); k++) {
        const double expected = draws * double(probabilities[k]);
        chi2 += (counts[size_t(tokens[k])] - expected) * (counts[size_t(tokens[k])] - expected) / expected;
    }
    std::printf("sampler trace: chi-square of %d seeded draws against the traced distribution = %.2f (5 degrees of "
                "freedom; p = 0.001 at 20.5)\n",
                draws, chi2);
    EXPECT_LT(chi2, 20.5);
}

TEST(Inspection, AGreedyTraceIsTheArgmaxWithProbabilityOne) {
    auto model = gpt2_test::make_model(ModelSpec{});
    auto session = session_of(*model, KvCacheFormat::int8);
    Inspector inspector(*session);
    ASSERT_TRUE(inspector.configure(InspectionRequest{{}, {1}, {0}, 3}));
    const std::vector<int32_t> ids = some_ids(7, 67);
    ASSERT_TRUE(inspector.feed_prompt(ids.data(), ids.size(), false));
    const int token = inspector.sample();
    const SamplerTrace& trace = inspector.trace();
    EXPECT_EQ(token, trace.top[SamplerTrace::greedy * 3]);
    EXPECT_EQ(trace.token, token);
    EXPECT_EQ(trace.probability, 1.0f);
    EXPECT_EQ(trace.ran[SamplerTrace::temperature], 0);
    EXPECT_EQ(trace.top[SamplerTrace::logits * 3], token) << "no processor ran: the best logit";
}

TEST(Inspection, OnAndOffGiveTheSameTokensAndLogitsAcrossSlidesCachedOrNot) {
    ModelSpec spec;
    spec.n_ctx = 24;  // 50 steps slide the window
    auto model = gpt2_test::make_model(spec, WeightFormat::int8);
    for (bool cache : {true, false})
        for (KvCacheFormat kv : {KvCacheFormat::fp32, KvCacheFormat::int8}) {
            SCOPED_TRACE(std::string(cache ? "cached, " : "uncached, ") + gpt2::kv_cache_format_name(kv));
            auto plain = session_of(*model, kv, cache, 1.0f, 7);
            auto inspected = session_of(*model, kv, cache, 1.0f, 7);
            Inspector inspector(*inspected);
            ASSERT_TRUE(inspector.configure(InspectionRequest{{}, {0, 1}, {1, 3}, 4}));
            const std::vector<int32_t> ids = some_ids(10, spec.n_vocab);
            int a = plain->prefill(ids.data(), ids.size());
            ASSERT_TRUE(inspector.feed_prompt(ids.data(), ids.size(), false));
            int b = inspector.sample();
            for (int i = 0; i < 50; i++) {
                ASSERT_EQ(a, b) << "token " << i;
                ASSERT_EQ(std::memcmp(plain->logits(), inspected->logits(), sizeof(float) * 67), 0) << i;
                ASSERT_EQ(inspector.positions()[0], inspected->n_cached() - 1);
                a = plain->step(a);
                ASSERT_TRUE(inspector.feed_step(b)) << inspected->error();
                b = inspector.sample();
            }
        }
}

namespace {

std::vector<std::string> events_of(const Inspector& inspector) {
    std::vector<std::string> out;
    for (int i = 0; i < inspector.n_events(); i++) {
        const CacheEvent& e = inspector.events()[i];
        out.push_back(std::string(gpt2::kCacheEventNames[e.kind]) + " " + std::to_string(e.first) + "+" +
                      std::to_string(e.count));
    }
    return out;
}

}  // namespace

TEST(Inspection, TheCachesEventsSayWhatEachCallKeptRolledBackSlidAndWrote) {
    ModelSpec spec;
    spec.n_ctx = 16;
    auto model = gpt2_test::make_model(spec);
    auto session = session_of(*model, KvCacheFormat::int8);
    Inspector inspector(*session);
    ASSERT_TRUE(inspector.configure(InspectionRequest{{}, {0}, {}, 1}));
    using V = std::vector<std::string>;
    std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    ASSERT_TRUE(inspector.feed_prompt(ids.data(), 10, true));
    EXPECT_EQ(events_of(inspector), (V{"written 0+10"}));
    ids[7] = 20;  // the new prompt shares 7 tokens with the window
    ASSERT_TRUE(inspector.feed_prompt(ids.data(), 10, true));
    EXPECT_EQ(events_of(inspector), (V{"kept 0+7", "rolledBack 7+3", "written 7+3"}));
    ASSERT_TRUE(inspector.feed_prompt(ids.data(), 10, false));
    EXPECT_EQ(events_of(inspector), (V{"cleared 0+10", "written 0+10"}));
    for (int i = 0; i < 6; i++) ASSERT_TRUE(inspector.feed_step(3));
    EXPECT_EQ(events_of(inspector), (V{"written 15+1"}));
    ASSERT_TRUE(inspector.feed_step(3));  // the window is full: the newest 7 and the new token re-fed
    EXPECT_EQ(events_of(inspector), (V{"slid 0+9", "written 0+8"}));
    EXPECT_EQ(inspector.positions()[0], 7);
    EXPECT_EQ(session->n_cached(), 8);
}

TEST(Inspection, RequestsOutOfRangeAreRefusedWithOneLineNamingTheField) {
    auto model = gpt2_test::make_model(ModelSpec{});  // 2 layers, 4 heads, context 40, 67 tokens
    auto session = session_of(*model, KvCacheFormat::fp32);
    Inspector inspector(*session);
    auto refusal = [&](InspectionRequest r) {
        EXPECT_FALSE(inspector.configure(r));
        EXPECT_EQ(session->error_kind(), gpt2::ErrorKind::input);
        return session->error();
    };
    EXPECT_EQ(refusal({{40}, {0}, {0}, 5}), "inspect: position 40 is outside [0, 40)");
    EXPECT_EQ(refusal({{3, 3}, {0}, {0}, 5}), "inspect: position must be ascending without repeats: 3 after 3");
    EXPECT_EQ(refusal({{}, {2}, {0}, 5}), "inspect: layer 2 is outside [0, 2)");
    EXPECT_EQ(refusal({{}, {0}, {-1}, 5}), "inspect: head -1 is outside [0, 4)");
    EXPECT_EQ(refusal({{}, {0}, {0}, 0}), "inspect: top_k 0 is outside [1, 64]");
    EXPECT_EQ(refusal({{}, {0}, {0}, 65}), "inspect: top_k 65 is outside [1, 64]");
    const int32_t ids[] = {1, 2, 3};
    EXPECT_FALSE(inspector.feed_prompt(ids, 3, false));
    EXPECT_EQ(session->error(), "inspect: configure() first");

    ASSERT_TRUE(inspector.configure({{5}, {0}, {0}, 5}));
    EXPECT_FALSE(inspector.feed_prompt(ids, 3, false));
    EXPECT_EQ(session->error(), "inspect: position 5 is past the window's last, 2");
    ASSERT_TRUE(inspector.configure({{1}, {0}, {0}, 5}));
    ASSERT_TRUE(inspector.feed_prompt(ids, 3, false));
    EXPECT_FALSE(inspector.feed_prompt(ids, 3, true));
    EXPECT_EQ(session->error(),
              "inspect: position 1 was kept from the cache, not computed by this call (a prefill that reuses the "
              "cache)");
    EXPECT_EQ(session->n_cached(), 3) << "the session was fed all the same";

    ModelSpec big;  // every position of a 2048-token window in 12 layers x 12 heads: far over the bound
    big.n_ctx = 2048;
    big.n_layer = 12;
    big.n_head = 12;
    big.n_embd = 24;
    auto large = gpt2_test::make_model(big);
    auto large_session = session_of(*large, KvCacheFormat::fp32);
    Inspector large_inspector(*large_session);
    EXPECT_FALSE(large_inspector.configure(everything(large->config(), every(2048))));
    EXPECT_EQ(large_session->error(),
              "inspect: 2048 positions x 12 layers x 12 heads take 2314 MB, more than the 64 MB one inspection may: "
              "ask for fewer");
    std::string error;
    auto recording = gpt2::Session::create_recording(*model, true, &error);
    Inspector of_recording(*recording);
    EXPECT_FALSE(of_recording.configure({{}, {0}, {0}, 5}));
    EXPECT_EQ(recording->error(), "inspect: a recording session's passes run at its host, not in the engine");
}
