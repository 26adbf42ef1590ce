#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

// Eigen is used header-only, through Maps over the caller's buffers: no Eigen object owns memory, so nothing
// here allocates (tests/cpp/test_engine_malloc.cpp checks it).
#include <Eigen/Core>

#include "kernels/kernels.h"
#include "kernels/simd.h"

static_assert(EIGEN_VERSION_AT_LEAST(3, 4, 0), "the engine needs Eigen 3.4");

namespace gpt2 {

namespace {
using Row = Eigen::Map<Eigen::ArrayXf>;
using ConstRow = Eigen::Map<const Eigen::ArrayXf>;
}  // namespace

void layernorm(float* out, const float* in, const float* weight, const float* bias, int n, float eps) {
    const ConstRow x(in, n);
    // statistics in double: cheap (n values per row) and keeps large-mean rows accurate. (Eigen does not
    // vectorize the float -> double cast, so these sums run in index order, the same for every row address.)
    const double mean = x.cast<double>().mean();
    const double var = (x.cast<double>() - mean).square().mean();
    const float m = float(mean);
    const float rstd = float(1.0 / std::sqrt(var + double(eps)));
    Row(out, n) = (x - m) * rstd * ConstRow(weight, n) + ConstRow(bias, n);
}

void gelu(float* x, int n) {
    // Eigen's float tanh is a rational approximation (a few ulp), the same for its scalar and SIMD paths, so a
    // value's result does not depend on where it sits in the row.
    const float kSqrt2OverPi = 0.7978845608028654f;
    Row v(x, n);
    v = 0.5f * v * (1.0f + (kSqrt2OverPi * (v + 0.044715f * v * v * v)).tanh());
}

void residual_add(float* x, const float* y, int n) { Row(x, n) += ConstRow(y, n); }

void softmax(float* x, int n) {
    // The SIMD sum and exp depend on the buffer's alignment; callers use one scores buffer for the prefill and
    // the step paths, so both reduce in the same order.
    Row v(x, n);
    v = (v - v.maxCoeff()).exp();
    v *= 1.0f / v.sum();
}

double log_sum_exp(const float* x, int n) {
    double max = x[0];
    for (int i = 1; i < n; i++) max = std::max(max, double(x[i]));
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += std::exp(double(x[i]) - max);
    return max + std::log(sum);
}

namespace {

using simd::f32x4;
using simd::i32x4;
using simd::select;

// e^x per lane, Cephes' expf: x = n ln 2 + r with n the integer nearest x log2(e) and |r| <= ln 2 / 2 (ln 2 in two
// parts, so that r is exact), e^r by a degree-7 polynomial, 2^n through the exponent bits. Lanes below -87.3 (where
// 2^n would be subnormal) give 0; x up to 88 (2^127 the largest power).
inline f32x4 exp4(f32x4 x) {
    auto splat = [](float v) { return f32x4{v, v, v, v}; };
    const f32x4 lowest = splat(-87.33654f), highest = splat(88.3762626647949f);
    const i32x4 underflow = x < lowest;
    x = select(x > highest, highest, select(underflow, lowest, x));
    // n = x log2(e) rounded to an integer by adding 1.5 * 2^23, whose float then holds n in its low mantissa bits
    const f32x4 magic = splat(12582912.0f);
    const f32x4 shifted = x * splat(1.44269504088896341f) + magic;
    const f32x4 n = shifted - magic;
    const f32x4 r = x - n * splat(0.693359375f) - n * splat(-2.12194440e-4f);
    f32x4 p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * (r * r) + r + splat(1.0f);
    const i32x4 two_to_n = ((i32x4)shifted - (i32x4)magic + 127) << 23;
    return select(underflow, splat(0.0f), p * (f32x4)two_to_n);
}

}  // namespace

float exp_at(float* x, const int32_t* at, int n, float shift, float divisor) {
    const f32x4 shift4 = {shift, shift, shift, shift}, divisor4 = {divisor, divisor, divisor, divisor};
    f32x4 sum4 = {0, 0, 0, 0};
    int i = 0;
    if (!at) {  // x[0, n) itself: whole vectors in and out
        for (; i + 4 <= n; i += 4) {
            const f32x4 e = exp4((simd::load4(x + i) - shift4) / divisor4);
            simd::store4(x + i, e);
            sum4 += e;
        }
    } else {
        for (; i + 4 <= n; i += 4) {
            const f32x4 v = {x[at[i]], x[at[i + 1]], x[at[i + 2]], x[at[i + 3]]};
            const f32x4 e = exp4((v - shift4) / divisor4);
            for (int k = 0; k < 4; k++) x[at[i + k]] = e[k];
            sum4 += e;
        }
    }
    float sum = (sum4[0] + sum4[1]) + (sum4[2] + sum4[3]);
    for (; i < n; i++) {
        float* xi = x + (at ? at[i] : i);
        const f32x4 v = {*xi, 0, 0, 0};
        *xi = exp4((v - shift4) / divisor4)[0];
        sum += *xi;
    }
    return sum;
}

// The scan over all values is branch-free so that it vectorizes: checking every weight once at load is cheap
// next to the conversion itself, and every row of logits before sampling next to the LM head.
size_t first_non_finite(const float* v, size_t n) {
    const uint32_t kExponentMask = 0x7F800000u;  // all exponent bits set: inf or nan
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        std::memcpy(&bits, v + i, 4);
        any |= uint32_t((bits & kExponentMask) == kExponentMask);
    }
    if (!any) return n;
    size_t i = 0;
    while (std::isfinite(v[i])) i++;
    return i;
}

int argmax(const float* x, int n) {
    const float max = ConstRow(x, n).maxCoeff();  // a vectorized reduction: exact in any order
    return int(std::find(x, x + n, max) - x);
}

void attention_probabilities(float* scores, const float* q, const float* keys, int n_keys, int head_size) {
    attention_scores(scores, q, keys, n_keys, head_size, 1.0f / std::sqrt(float(head_size)));
    softmax(scores, n_keys);
}

void attention_head(float* out, const float* q, const float* keys, const float* values, int n_keys, int head_size,
                    float* scores) {
    attention_probabilities(scores, q, keys, n_keys, head_size);
    attention_values(out, scores, values, n_keys, head_size);
}

void attention_probabilities_q8(float* scores, const float* q, const Int8KvRows& cache, int n_keys, int head_size,
                                int16_t* query_q) {
    float q_scale;
    quantize_activations(query_q, &q_scale, q, 1, head_size);
    attention_scores_q8(scores, query_q, q_scale * (1.0f / std::sqrt(float(head_size))), cache.keys, cache.key_scale,
                        n_keys, head_size);
    softmax(scores, n_keys);
}

void attention_head_q8(float* out, const float* q, const Int8KvRows& cache, int n_keys, int head_size, float* scores,
                       int16_t* query_q, int16_t* weights_q) {
    attention_probabilities_q8(scores, q, cache, n_keys, head_size, query_q);
    for (int j = 0; j < n_keys; j++) scores[j] *= cache.value_scale[j];
    attention_values_q8(out, scores, cache.values, n_keys, head_size, weights_q);
}

}  // namespace gpt2
