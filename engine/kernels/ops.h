// The small building blocks of the GPT-2 forward pass, each working on one token row so that the batched
// (prefill) and single-token (step) paths run literally the same code per row.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt2 {

// out = (in - mean) / sqrt(var + eps) * weight + bias  (n)
void layernorm(float* out, const float* in, const float* weight, const float* bias, int n, float eps);

// in place, tanh approximation ("gelu_new"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void gelu(float* x, int n);

// x += y  (n)
void residual_add(float* x, const float* y, int n);

// in place, numerically stable (max subtracted)
void softmax(float* x, int n);

// log(sum of exp(x[i])) in double, the max subtracted first: the normalizer of a log-softmax (n >= 1); NaN when x
// holds a NaN or +Inf, finite when it holds -Inf beside a finite value
double log_sum_exp(const float* x, int n);

// The softmax numerators of a sampler's candidates: x[at[i]] = e^((x[at[i]] - shift) / divisor) for i < n (at null:
// x[i] for i < n), and their sum. e^ is Cephes' expf four values at a time (within 2 ulp of e^v for v <= 88, 0 below
// -87.3; the same float operations in every build, so a value's result does not depend on its place or on the build),
// and the sum is four lane sums combined as ((0 + 1) + (2 + 3)), then the n % 4 last values in order.
float exp_at(float* x, const int32_t* at, int n, float shift, float divisor);

// Index of the first NaN or infinity in v[0, n), or n.
size_t first_non_finite(const float* v, size_t n);

// The index of x's (n >= 1, no NaN) largest value, the first of equal ones (+0 and -0 are equal).
int argmax(const float* x, int n);

// Causal self-attention of ONE query row in ONE head: out (head_size) = softmax(q . keys[j] / sqrt(head_size))
// weighted sum of values[j] over the positions j < n_keys of the head's cache rows keys / values (n_ctx,
// head_size). scores is scratch (n_keys).
void attention_head(float* out, const float* q, const float* keys, const float* values, int n_keys, int head_size,
                    float* scores);
// Its first half: scores = the attention probabilities softmax(q . keys[j] / sqrt(head_size)), j < n_keys. In the
// same scores buffer (the softmax's sums depend on its alignment) they are the ones attention_head weighs the values
// with, bit for bit: what an inspection reads (engine/inspection/).
void attention_probabilities(float* scores, const float* q, const float* keys, int n_keys, int head_size);

// One head's rows in the int8 KV cache (KvCacheFormat::int8), quantized by kernels.h's quantize_cache_row (the
// forward pass writes them through the same pointers).
struct Int8KvRows {
    int8_t* keys;        // (n_ctx, head_size)
    float* key_scale;    // (n_ctx)
    int8_t* values;      // (ceil(n_ctx / 2), head_size, 2): positions 2m and 2m + 1 interleaved
    float* value_scale;  // (n_ctx)
};

// attention_head over the int8 cache: the query quantized (quantize_activations) into query_q (scratch,
// head_size), integer scores (attention_scores_q8), the same softmax, then the weights times the value rows'
// scales, quantized into weights_q (scratch, n_keys + 1), summed over the int8 values (attention_values_q8).
void attention_head_q8(float* out, const float* q, const Int8KvRows& cache, int n_keys, int head_size, float* scores,
                       int16_t* query_q, int16_t* weights_q);
// Its first half, as attention_probabilities: the probabilities attention_head_q8 computes before it scales them
// by the value rows' scales.
void attention_probabilities_q8(float* scores, const float* q, const Int8KvRows& cache, int n_keys, int head_size,
                                int16_t* query_q);

}  // namespace gpt2
