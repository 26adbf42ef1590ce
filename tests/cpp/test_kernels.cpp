// The SIMD kernels: correct, and the batched GEMM bit-identical to the GEMV (the cached == uncached contract).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ops.h"

namespace {

std::vector<float> random_vector(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);  // test data only; the engine's RNG is separate
    std::vector<float> v(n);
    for (float& x : v) x = float(int(rng() % 2001) - 1000) / 997.0f;
    return v;
}

}  // namespace

TEST(Kernels, DotMatchesDoublePrecision) {
    for (int n : {0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 64, 100, 768, 1601}) {
        auto a = random_vector(size_t(n), 1), b = random_vector(size_t(n), 2);
        double expected = 0.0;
        for (int i = 0; i < n; i++) expected += double(a[size_t(i)]) * b[size_t(i)];
        EXPECT_NEAR(gpt2::dot(a.data(), b.data(), n), expected, 1e-4 * (1 + n)) << n;
    }
}

TEST(Kernels, PanelPackingRoundTrips) {
    for (int n_out : {1, 3, 4, 5, 9, 12}) {
        for (int n_in : {1, 7, 8, 16, 17, 40}) {
            auto w = random_vector(size_t(n_out) * n_in, 9);
            std::vector<float> packed = w, scratch(size_t(gpt2::kPanelRows) * n_in), row(static_cast<size_t>(n_in));
            gpt2::pack_panels(packed.data(), n_out, n_in, scratch.data());
            if (n_out >= gpt2::kPanelRows && n_in > 8) {
                EXPECT_NE(packed, w) << "rows were not interleaved";
            }
            std::vector<int8_t> q(w.size()), q_scratch(scratch.size()), q_row(row.size());
            for (size_t i = 0; i < w.size(); i++) q[i] = int8_t(int(i * 37) % 255 - 127);
            std::vector<int8_t> q_packed = q;
            gpt2::pack_panels(q_packed.data(), n_out, n_in, q_scratch.data());
            for (int o = 0; o < n_out; o++) {
                gpt2::unpack_row(row.data(), packed.data(), n_out, n_in, o);
                ASSERT_EQ(std::memcmp(row.data(), w.data() + size_t(o) * n_in, sizeof(float) * n_in), 0)
                    << n_out << " " << n_in << " " << o;
                gpt2::unpack_row(q_row.data(), q_packed.data(), n_out, n_in, o);
                ASSERT_EQ(std::memcmp(q_row.data(), q.data() + size_t(o) * n_in, size_t(n_in)), 0)
                    << n_out << " " << n_in << " " << o;
            }
        }
    }
}

TEST(Kernels, GemmRowsAreBitIdenticalToGemv) {
    const int sizes[][3] = {{1, 8, 4}, {2, 16, 8}, {3, 5, 3}, {7, 20, 9}, {65, 64, 7}, {130, 37, 11}, {5, 80, 20}};
    for (const auto& s : sizes) {
        const int n_tok = s[0], n_in = s[1], n_out = s[2];
        auto x = random_vector(size_t(n_tok) * n_in, 3);
        auto w = random_vector(size_t(n_out) * n_in, 4);
        auto bias = random_vector(size_t(n_out), 5);
        std::vector<float> packed = w, scratch(size_t(gpt2::kPanelRows) * n_in);
        gpt2::pack_panels(packed.data(), n_out, n_in, scratch.data());
        for (const float* b : {static_cast<const float*>(bias.data()), static_cast<const float*>(nullptr)}) {
            std::vector<float> batched(size_t(n_tok) * n_out);
            std::vector<float> single(static_cast<size_t>(n_out));
            gpt2::gemm(batched.data(), x.data(), packed.data(), b, n_tok, n_in, n_out);
            for (int t = 0; t < n_tok; t++) {
                gpt2::gemv(single.data(), x.data() + size_t(t) * n_in, packed.data(), b, n_in, n_out);
                ASSERT_EQ(std::memcmp(single.data(), batched.data() + size_t(t) * n_out, sizeof(float) * n_out), 0)
                    << "n_tok " << n_tok << " n_in " << n_in << " n_out " << n_out << " row " << t;
                for (int o = 0; o < n_out; o++) {
                    double expected = b ? b[o] : 0.0;
                    for (int i = 0; i < n_in; i++)
                        expected += double(x[size_t(t) * n_in + i]) * w[size_t(o) * n_in + i];
                    ASSERT_NEAR(single[size_t(o)], expected, 1e-4 * (1 + n_in));
                    // every element is also exactly dot() over the unpacked row (+ bias)
                    float d = gpt2::dot(x.data() + size_t(t) * n_in, w.data() + size_t(o) * n_in, n_in);
                    ASSERT_EQ(single[size_t(o)], b ? d + b[o] : d);
                }
            }
        }
    }
}

TEST(Ops, ExpAtIsWithin2UlpOfExpAndTheSameInTheGroupsOf4AndTheTail) {
    // every 1/64 from -100 to 60, and 88, through the candidates in reverse, shifted by 3 and divided by 0.5
    std::vector<float> x, values;
    for (int k = -6400; k <= 60 * 64; k++) values.push_back(float(k) / 64.0f);
    values.push_back(88.0f);
    for (float v : values) x.push_back(v * 0.5f + 3.0f);  // (x - 3) / 0.5 == v exactly
    std::vector<int32_t> at(x.size());
    for (size_t i = 0; i < at.size(); i++) at[i] = int32_t(at.size() - 1 - i);
    std::vector<float> e = x;
    const float sum = gpt2::exp_at(e.data(), at.data(), int(at.size()), 3.0f, 0.5f);
    double max_ulp = 0, expected_sum = 0;
    for (size_t i = 0; i < values.size(); i++) {
        const double want = std::exp(double(values[i]));
        if (values[i] < -87.33654f) {  // where e^v nears the smallest normal float
            ASSERT_EQ(e[i], 0.0f) << values[i];
            continue;
        }
        const double ulp = std::nextafter(float(want), INFINITY) - float(want);
        max_ulp = std::max(max_ulp, std::fabs(e[i] - want) / ulp);
        ASSERT_LE(std::fabs(e[i] - want), 2 * ulp) << values[i];
        expected_sum += e[i];
    }
    EXPECT_NEAR(sum, expected_sum, 1e-6 * expected_sum);
    // a value gives the same bits wherever it sits: alone (the tail) as in a group of 4
    for (size_t i = 0; i < values.size(); i += 97) {
        float one = x[i];
        const int32_t zero = 0;
        gpt2::exp_at(&one, &zero, 1, 3.0f, 0.5f);
        ASSERT_EQ(one, e[i]) << values[i];
    }
    std::printf("exp_at: at most %.2f ulp from exp over [-87.3, 88]\n", max_ulp);
}

TEST(Ops, LayerNormGeluSoftmax) {
    std::vector<float> in = {1, 2, 3, 4}, w = {1, 1, 2, 1}, b = {0, 0, 0, 1}, out(4);
    gpt2::layernorm(out.data(), in.data(), w.data(), b.data(), 4, 1e-5f);
    const double sd = std::sqrt(1.25 + 1e-5);
    EXPECT_NEAR(out[0], -1.5 / sd, 1e-6);
    EXPECT_NEAR(out[2], 2 * 0.5 / sd, 1e-6);
    EXPECT_NEAR(out[3], 1.5 / sd + 1, 1e-6);

    std::vector<float> g = {-3, -0.5f, 0, 0.5f, 3};
    gpt2::gelu(g.data(), 5);
    for (int i = 0; i < 5; i++) {
        const double x = std::vector<double>{-3, -0.5, 0, 0.5, 3}[size_t(i)];
        const double expected = 0.5 * x *
                                (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
        EXPECT_NEAR(g[size_t(i)], expected, 1e-6);
    }

    std::vector<float> s = {1000, 1001, 999};
    gpt2::softmax(s.data(), 3);
    EXPECT_NEAR(s[0] + s[1] + s[2], 1.0, 1e-6);
    EXPECT_GT(s[1], s[0]);
}

TEST(Ops, FirstNonFiniteAndArgmaxFindTheFirstSuchIndexAtAnyLengthAndOffset) {
    for (int n : {1, 3, 13, 50257}) {
        for (int offset : {0, 1, 3}) {  // the vectorized scans start at any alignment
            std::vector<float> storage = random_vector(size_t(n + offset), uint32_t(n));
            float* x = storage.data() + offset;
            const size_t N = size_t(n);
            EXPECT_EQ(gpt2::first_non_finite(x, N), N);
            // the largest value three times (quantized data repeats): the first of them
            const int at = n / 2;
            for (int i = at; i < n; i += std::max(1, n / 3)) x[i] = 2.0f;
            EXPECT_EQ(gpt2::argmax(x, n), at) << "n " << n;
            x[n - 1] = INFINITY;
            EXPECT_EQ(gpt2::first_non_finite(x, N), N - 1);
            x[at] = NAN;
            EXPECT_EQ(gpt2::first_non_finite(x, N), size_t(at));
            x[0] = -INFINITY;
            EXPECT_EQ(gpt2::first_non_finite(x, N), 0u);
        }
    }
    const std::vector<float> zeros{-INFINITY, -0.0f, 0.0f, -1.0f};  // +0 and -0 are equal: the first wins
    EXPECT_EQ(gpt2::argmax(zeros.data(), 4), 1);
    const std::vector<float> banned{-INFINITY, -INFINITY};
    EXPECT_EQ(gpt2::argmax(banned.data(), 2), 0);
}

TEST(Kernels, AttentionValuesAddInPositionOrder) {
    for (int n : {1, 16, 64, 70}) {
        const int n_keys = 37;
        auto p = random_vector(size_t(n_keys), 11), values = random_vector(size_t(n_keys) * n, 12);
        std::vector<float> out(static_cast<size_t>(n));
        gpt2::attention_values(out.data(), p.data(), values.data(), n_keys, n);
        for (int i = 0; i < n; i++) {
            float expected = 0.0f;  // the reference order: position by position
            for (int j = 0; j < n_keys; j++) expected += p[size_t(j)] * values[size_t(j) * n + i];
            ASSERT_EQ(out[size_t(i)], expected) << n << " " << i;
        }
    }
}

TEST(Ops, AttentionHeadIsCausalAndNormalized) {
    // 2 heads of size 2, caches (n_head, n_ctx = 3, 2); a query matching key 1 of head 0 strongly; 2 keys, so
    // position 2 is not seen
    std::vector<float> k = {0, 0, /**/ 50, 0, /**/ 0, 0, /* head 1 */ 0, 0, /**/ 0, 0, /**/ 0, 0};
    std::vector<float> v = {1, 2, /**/ 5, 6, /**/ 100, 100, /* head 1 */ 3, 4, /**/ 7, 8, /**/ 100, 100};
    std::vector<float> q = {1, 0, 0, 0}, out(4), scores(3);
    for (int h = 0; h < 2; h++)
        gpt2::attention_head(out.data() + 2 * h, q.data() + 2 * h, k.data() + 6 * h, v.data() + 6 * h, 2, 2,
                             scores.data());
    EXPECT_NEAR(out[0], 5, 1e-4);
    EXPECT_NEAR(out[1], 6, 1e-4);
    EXPECT_NEAR(out[2], 5, 1e-4);  // head 1: uniform over positions 0 and 1
    EXPECT_NEAR(out[3], 6, 1e-4);

    // the same through the int8 cache: rows quantized, then within its quantization error
    // per head: keys (3, 2); values in position pairs (2 pairs, 2 values, 2 positions)
    std::vector<int8_t> kq(12), vq(16);
    std::vector<float> k_scale(6), v_scale(6);
    for (int row = 0; row < 6; row++) {
        const int h = row / 3, pos = row % 3;
        gpt2::quantize_cache_row(kq.data() + 2 * row, &k_scale[size_t(row)], k.data() + 2 * row, 2);
        gpt2::quantize_cache_row(vq.data() + 8 * h + 4 * (pos / 2) + pos % 2, &v_scale[size_t(row)], v.data() + 2 * row,
                                 2, 2);
    }
    std::vector<int16_t> query_q(2), weights_q(3);
    for (int h = 0; h < 2; h++) {
        const gpt2::Int8KvRows rows{kq.data() + 6 * h, k_scale.data() + 3 * h, vq.data() + 8 * h,
                                    v_scale.data() + 3 * h};
        gpt2::attention_head_q8(out.data() + 2 * h, q.data() + 2 * h, rows, 2, 2, scores.data(), query_q.data(),
                                weights_q.data());
    }
    EXPECT_NEAR(out[0], 5, 0.05);
    EXPECT_NEAR(out[1], 6, 0.05);
    EXPECT_NEAR(out[2], 5, 0.05);
    EXPECT_NEAR(out[3], 6, 0.05);
}
