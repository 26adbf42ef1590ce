// The small building blocks of the GPT-2 forward pass, each working on one token row so that the batched
// (prefill) and single-token (step) paths run literally the same code per row.
#pragma once

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

// Causal self-attention for ONE query row: out (n_embd) = per head h, softmax(q_h . k_h[j] / sqrt(head_size))
// weighted sum of v_h[j] over the positions j < n_keys held in the layer's caches key_cache / value_cache
// (n_head, n_ctx, head_size). scores is scratch (n_keys).
void attention_row(float* out, const float* q, const float* key_cache, const float* value_cache, int n_keys, int n_embd,
                   int n_head, int n_ctx, float* scores);

// One layer's int8 KV cache (KvCacheFormat::int8): rows of head_size values quantized by kernels.h's
// quantize_cache_row, and their scales.
struct Int8KvLayer {
    int8_t* keys;        // (n_head, n_ctx, head_size)
    int8_t* values;      // (n_head, n_ctx, head_size)
    float* key_scale;    // (n_head, n_ctx)
    float* value_scale;  // (n_head, n_ctx)
};

// attention_row over an int8 cache: per head the query quantized (quantize_activations) into query_q (scratch,
// head_size), integer scores (attention_scores_q8), the same softmax, then the weights times the value rows'
// scales summed over the int8 values (attention_values_q8). scores is scratch (n_keys).
void attention_row_q8(float* out, const float* q, const Int8KvLayer& cache, int n_keys, int n_embd, int n_head,
                      int n_ctx, float* scores, int16_t* query_q);

}  // namespace gpt2
