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

void attention_head(float* out, const float* q, const float* keys, const float* values, int n_keys, int head_size,
                    float* scores) {
    attention_scores(scores, q, keys, n_keys, head_size, 1.0f / std::sqrt(float(head_size)));
    softmax(scores, n_keys);
    attention_values(out, scores, values, n_keys, head_size);
}

void attention_head_q8(float* out, const float* q, const Int8KvRows& cache, int n_keys, int head_size, float* scores,
                       int16_t* query_q, int16_t* weights_q) {
    float q_scale;
    quantize_activations(query_q, &q_scale, q, 1, head_size);
    attention_scores_q8(scores, query_q, q_scale * (1.0f / std::sqrt(float(head_size))), cache.keys, cache.key_scale,
                        n_keys, head_size);
    softmax(scores, n_keys);
    for (int j = 0; j < n_keys; j++) scores[j] *= cache.value_scale[j];
    attention_values_q8(out, scores, cache.values, n_keys, head_size, weights_q);
}

}  // namespace gpt2
