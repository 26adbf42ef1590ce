// int8 weights (gpt2::WeightFormat::int8): kernel bit-exactness, cache invariants, memory, and accuracy against
// fp32 on the tiny-random fixture and the bundled tiny-shakespeare model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "gpt2.h"
#include "kernels/kernels.h"
#include "test_util.h"

using namespace gpt2_test;

namespace {

const gpt2::WeightFormat kInt8 = gpt2::WeightFormat::int8;

std::unique_ptr<gpt2::Model> load_dir(const std::string& dir, gpt2::WeightFormat format) {
    gpt2::LoadOptions options;
    options.format = format;
    return load_folder(dir, options);
}

double stddev(const float* v, size_t n) {
    double mean = 0, sq = 0;
    for (size_t i = 0; i < n; i++) mean += v[i];
    mean /= double(n);
    for (size_t i = 0; i < n; i++) sq += (v[i] - mean) * (v[i] - mean);
    return std::sqrt(sq / double(n));
}

struct Accuracy {
    double worst_relative = 0;  // max over positions of max|logit diff| / std(fp32 logits)
    double worst_abs = 0;
    int top1_agree = 0, positions = 0;
};

// Teacher-forced logits of every position of ids under both models.
Accuracy compare_logits(const gpt2::Model& fp32, const gpt2::Model& int8, const std::vector<int32_t>& ids) {
    const size_t V = size_t(gpt2::model_config(fp32).n_vocab);
    std::vector<float> a(ids.size() * V), b(ids.size() * V);
    auto sa = greedy_session(fp32, true), sb = greedy_session(int8, true);
    EXPECT_TRUE(sa->prefill_logits(ids.data(), ids.size(), a.data()));
    EXPECT_TRUE(sb->prefill_logits(ids.data(), ids.size(), b.data()));
    Accuracy acc;
    for (size_t t = 0; t < ids.size(); t++) {
        const float* la = a.data() + t * V;
        const float* lb = b.data() + t * V;
        double diff = 0;
        for (size_t v = 0; v < V; v++) diff = std::max(diff, double(std::fabs(la[v] - lb[v])));
        acc.worst_abs = std::max(acc.worst_abs, diff);
        acc.worst_relative = std::max(acc.worst_relative, diff / stddev(la, V));
        acc.top1_agree += std::max_element(la, la + V) - la == std::max_element(lb, lb + V) - lb;
        acc.positions++;
    }
    return acc;
}

// Greedy free-running generation: number of leading tokens that agree.
int greedy_prefix_agreement(const gpt2::Model& fp32, const gpt2::Model& int8, const std::vector<int32_t>& prompt,
                            int n) {
    auto sa = greedy_session(fp32, true), sb = greedy_session(int8, true);
    int a = sa->prefill(prompt.data(), prompt.size()), b = sb->prefill(prompt.data(), prompt.size());
    for (int i = 0; i < n; i++) {
        if (a != b) return i;
        a = sa->step(a);
        b = sb->step(b);
    }
    return n;
}

std::vector<int32_t> held_out_ids(size_t n) {
    const auto bytes = read_file(GPT2_HELD_OUT_IDS);
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < bytes.size() && ids.size() < n; i += 2) ids.push_back(bytes[i] | (bytes[i + 1] << 8));
    return ids;
}

}  // namespace

// Packs a row-major int8 matrix into the kernels' panel layout.
std::vector<int8_t> packed(std::vector<int8_t> w, int n_out, int n_in) {
    std::vector<int8_t> scratch(size_t(gpt2::kPanelRows) * n_in);
    gpt2::pack_panels(w.data(), n_out, n_in, scratch.data());
    return w;
}

TEST(Int8Kernels, ActivationsQuantizeWithinHalfAStepAndTheRange) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uni(-30.0f, 30.0f);
    for (int n_in : {1, 5, 16, 768, 3072, 6400}) {
        const int range = gpt2::activation_range(n_in);
        EXPECT_LE(int64_t(n_in) * 127 * range, int64_t(INT32_MAX)) << n_in;
        EXPECT_TRUE(range == 32767 || int64_t(n_in) * 127 * (range + 1) > int64_t(INT32_MAX)) << n_in;
        std::vector<float> x(static_cast<size_t>(n_in));
        for (float& v : x) v = uni(rng);
        std::vector<int16_t> q(x.size());
        float scale = 0;
        gpt2::quantize_activations(q.data(), &scale, x.data(), 1, n_in);
        for (int i = 0; i < n_in; i++) {
            ASSERT_LE(std::abs(int(q[i])), range);
            // half a step, plus the float rounding of x / scale near the range (a few ulp of 32767)
            ASSERT_NEAR(q[i] * double(scale), x[i], 0.5 * scale * (1 + 1e-3)) << n_in << " " << i;
        }
    }
}

TEST(Int8Kernels, ActivationsRoundHalfAwayFromZeroInTheGroupsOf8AndTheTail) {
    // the largest magnitude equal to the range makes the scale 1, so each value is rounded as it is
    const float ties[] = {2.5f, -2.5f, 0.5f, -0.5f, 0.49f, -0.49f, 1.5f, -1.5f, 0.0f, -0.0f, 7.5f};
    const int want[] = {3, -3, 1, -1, 0, 0, 2, -2, 0, 0, 8};
    for (int n_in : {3, 8, 11, 17, 24}) {
        const int range = gpt2::activation_range(n_in);
        std::vector<float> x(static_cast<size_t>(n_in));
        std::vector<int> expected(x.size());
        for (int i = 0; i + 1 < n_in; i++) {
            x[size_t(i)] = ties[i % 11];
            expected[size_t(i)] = want[i % 11];
        }
        x.back() = -float(range);
        expected.back() = -range;
        std::vector<int16_t> q(x.size());
        float scale = 0;
        gpt2::quantize_activations(q.data(), &scale, x.data(), 1, n_in);
        EXPECT_EQ(scale, 1.0f) << n_in;
        EXPECT_EQ(std::vector<int>(q.begin(), q.end()), expected) << n_in;
    }
}

TEST(Int8Kernels, GemmRowsAreBitIdenticalToGemvAndExact) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::uniform_int_distribution<int> qd(-127, 127);
    for (int n_in : {1, 3, 6, 8, 16, 20, 64, 67}) {
        // 9, 13 and 24 rows: 2, 3 and 6 panels, which gemv_q8 reads in pairs from the matrix's two halves (with
        // one panel left over for 13), then the rows past the last panel
        for (int n_out : {1, 2, 5, 9, 13, 24}) {
            for (int n_tok : {1, 2, 3, 7, 130}) {
                std::vector<float> x(size_t(n_tok) * n_in), scale(static_cast<size_t>(n_out)),
                    bias(static_cast<size_t>(n_out));
                std::vector<int8_t> w(size_t(n_out) * n_in);
                for (float& v : x) v = uni(rng) * float(1 + rng() % 100);
                std::fill(x.begin(), x.begin() + n_in, 0.0f);  // an all-zero row
                for (int8_t& v : w) v = int8_t(qd(rng));
                for (float& v : scale) v = std::fabs(uni(rng)) / 127.0f;
                for (float& v : bias) v = uni(rng);
                const std::vector<int8_t> wp = packed(w, n_out, n_in);
                std::vector<int16_t> xq(x.size());
                std::vector<float> x_scale(static_cast<size_t>(n_tok));
                gpt2::quantize_activations(xq.data(), x_scale.data(), x.data(), n_tok, n_in);
                for (const float* b : {(const float*)nullptr, (const float*)bias.data()}) {
                    std::vector<float> batched(size_t(n_tok) * n_out), single(static_cast<size_t>(n_out));
                    gpt2::gemm_q8(batched.data(), xq.data(), x_scale.data(), wp.data(), scale.data(), nullptr, b, n_tok,
                                  n_in, n_out);
                    for (int t = 0; t < n_tok; t++) {
                        const int16_t* xt = xq.data() + size_t(t) * n_in;
                        gpt2::gemv_q8(single.data(), xt, x_scale[t], wp.data(), scale.data(), nullptr, b, n_in, n_out);
                        ASSERT_EQ(std::memcmp(single.data(), batched.data() + size_t(t) * n_out, sizeof(float) * n_out),
                                  0)
                            << n_in << " " << n_out << " " << n_tok << " " << t;
                        for (int o = 0; o < n_out; o++) {
                            int64_t exact = 0;
                            double product = 0, step_error = 0;  // float product, and its quantization error bound
                            for (int i = 0; i < n_in; i++) {
                                const int8_t wi = w[size_t(o) * n_in + i];
                                exact += int64_t(xt[i]) * wi;
                                product += double(x[size_t(t) * n_in + i]) * wi;
                                step_error += 0.5 * x_scale[t] * std::abs(int(wi));
                            }
                            const float expected = float(exact) * (x_scale[t] * scale[o]) + (b ? b[o] : 0.0f);
                            ASSERT_EQ(single[o], expected) << n_in << " " << n_out << " " << t << " " << o;
                            const double ref = product * scale[o] + (b ? b[o] : 0.0);
                            ASSERT_NEAR(single[o], ref, step_error * scale[o] * 1.001 + 1e-5 * (1 + std::fabs(ref)));
                        }
                    }
                }
            }
        }
    }
}

TEST(Int8Kernels, ExtremeValuesDoNotOverflowAndNonFiniteRowsGiveNaN) {
    const int n_in = 6403, n_out = 5;  // the widest GPT-2 input (1558M's MLP) plus a tail
    std::vector<float> x(size_t(2) * n_in, 1.0f), scale(n_out, 1.0f);
    x[size_t(n_in) + 17] = NAN;  // second row
    const std::vector<int8_t> w = packed(std::vector<int8_t>(size_t(n_out) * n_in, -127), n_out, n_in);
    std::vector<int16_t> xq(x.size());
    float x_scale[2];
    gpt2::quantize_activations(xq.data(), x_scale, x.data(), 2, n_in);
    std::vector<float> out(size_t(2) * n_out);
    gpt2::gemm_q8(out.data(), xq.data(), x_scale, w.data(), scale.data(), nullptr, nullptr, 2, n_in, n_out);
    const int64_t exact = -int64_t(127) * gpt2::activation_range(n_in) * n_in;
    for (int o = 0; o < n_out; o++) {
        EXPECT_EQ(out[size_t(o)], float(exact) * x_scale[0]) << o;
        EXPECT_NEAR(out[size_t(o)], -127.0 * n_in, 1e-3 * 127 * n_in) << o;
        EXPECT_TRUE(std::isnan(out[size_t(n_out + o)])) << o;
    }
    x[size_t(n_in) + 17] = INFINITY;
    gpt2::quantize_activations(xq.data(), x_scale, x.data(), 2, n_in);
    EXPECT_TRUE(std::isnan(x_scale[1]));
}

TEST(Int8, WeightBytesAreTheQuantizedSize) {
    ModelSpec spec;
    auto fp32 = make_model(spec);
    auto int8 = make_model(spec, kInt8);
    ASSERT_TRUE(fp32 && int8);
    const size_t V = size_t(spec.n_vocab), T = size_t(spec.n_ctx), C = size_t(spec.n_embd), L = size_t(spec.n_layer);
    const size_t matrices = V * C + L * 12 * C * C;                            // wte + qkv + attn proj + fc + mlp proj
    const size_t rows = V + L * (3 * C + C + 4 * C + C);                       // one scale per row
    const size_t other = T * C + L * (4 * C + 3 * C + C + 4 * C + C) + 2 * C;  // wpe, layernorms, biases, ln_f
    EXPECT_EQ(gpt2::model_weight_bytes(*fp32), (matrices + other) * sizeof(float));
    EXPECT_EQ(gpt2::model_weight_bytes(*int8), matrices + (rows + other) * sizeof(float));
}

TEST(Int8, CachedAndUncachedAreBitIdentical) {
    ModelSpec spec;
    spec.n_ctx = 128;
    auto model = make_model(spec, kInt8);
    ASSERT_TRUE(model);
    for (float temperature : {0.0f, 0.9f}) {
        std::string error;
        auto cached = gpt2::Session::create(*model, true, &error),
             uncached = gpt2::Session::create(*model, false, &error);
        ASSERT_TRUE(cached && uncached) << error;
        gpt2::SamplingSettings settings;
        settings.temperature = temperature;
        settings.seed = 42;
        cached->set_sampling(settings);
        uncached->set_sampling(settings);
        const int32_t ids[] = {3, 14, 15, 9, 26, 5};
        int a = cached->prefill(ids, 6), b = uncached->prefill(ids, 6);
        for (int i = 0; i < 150; i++) {  // slides the window once
            ASSERT_EQ(a, b) << "step " << i;
            ASSERT_GE(a, 0) << cached->error();
            ASSERT_EQ(std::memcmp(cached->logits(), uncached->logits(), sizeof(float) * spec.n_vocab), 0) << i;
            a = cached->step(a);
            b = uncached->step(b);
        }
    }
}

TEST(Int8, PrefillThenStepEqualsAllPositionsPrefill) {
    auto model = make_model(ModelSpec{}, kInt8);
    ASSERT_TRUE(model);
    const int V = 67, T = 40;
    std::vector<int32_t> ids;
    for (int i = 0; i < T; i++) ids.push_back((i * 37 + 11) % V);
    std::vector<float> all(size_t(T) * V);
    auto session = greedy_session(*model, true);
    ASSERT_TRUE(session->prefill_logits(ids.data(), ids.size(), all.data()));
    for (int k : {1, 2, 9, 39}) {
        ASSERT_GE(session->prefill(ids.data(), size_t(k)), 0);
        ASSERT_EQ(std::memcmp(session->logits(), all.data() + (k - 1) * V, sizeof(float) * V), 0) << k;
        for (int p = k; p < T; p++) {
            ASSERT_GE(session->step(ids[size_t(p)]), 0);
            ASSERT_EQ(std::memcmp(session->logits(), all.data() + size_t(p) * V, sizeof(float) * V), 0)
                << "prefill " << k << " position " << p;
        }
    }
}

// Tolerances (per-row scales): measured max|logit diff| is 0.145 std (tiny-random) and 0.137 std (tiny-shakespeare),
// top-1 195/200 and 255/256, greedy prefixes 95/100 and 193/256; the bounds leave headroom over those.
TEST(Int8, TinyRandomFixtureIsCloseToFp32) {
    auto fp32 = load_dir(GPT2_FIXTURE_DIR, gpt2::WeightFormat::fp32);
    auto int8 = load_dir(GPT2_FIXTURE_DIR, kInt8);
    ASSERT_TRUE(fp32 && int8);
    std::vector<int32_t> ids;
    for (int i = 0; i < 200; i++) ids.push_back((i * 151 + 7) % 384);
    const Accuracy acc = compare_logits(*fp32, *int8, ids);
    const int agree = greedy_prefix_agreement(*fp32, *int8, {259, 73, 75, 222, 59, 137, 172}, 100);
    std::printf("tiny-random int8: max|diff| %.5f = %.4f std, top-1 %d/%d, greedy prefix %d/100\n", acc.worst_abs,
                acc.worst_relative, acc.top1_agree, acc.positions, agree);
    EXPECT_LE(acc.worst_relative, 0.25);
    EXPECT_GE(acc.top1_agree, acc.positions * 9 / 10);
    EXPECT_GE(agree, 50);
}

TEST(Int8, BundledModelIsCloseToFp32) {
    auto fp32 = load_dir(GPT2_BUNDLED_MODEL_DIR, gpt2::WeightFormat::fp32);
    auto int8 = load_dir(GPT2_BUNDLED_MODEL_DIR, kInt8);
    ASSERT_TRUE(fp32 && int8);
    EXPECT_LT(gpt2::model_weight_bytes(*int8) * 3, gpt2::model_weight_bytes(*fp32));
    const std::vector<int32_t> ids = held_out_ids(256);
    ASSERT_EQ(ids.size(), 256u);
    const Accuracy acc = compare_logits(*fp32, *int8, ids);
    int agree_total = 0;
    for (int k = 0; k < 4; k++) {
        const std::vector<int32_t> prompt(ids.begin() + k * 50, ids.begin() + k * 50 + 8);
        agree_total += greedy_prefix_agreement(*fp32, *int8, prompt, 64);
    }
    std::printf("tiny-shakespeare int8: max|diff| %.5f = %.4f std, top-1 %d/%d, greedy prefix %d/256 (4 x 64)\n",
                acc.worst_abs, acc.worst_relative, acc.top1_agree, acc.positions, agree_total);
    EXPECT_LE(acc.worst_relative, 0.25);
    EXPECT_GE(acc.top1_agree, acc.positions * 9 / 10);
    EXPECT_GE(agree_total, 128);
}
