// The small building blocks of the GPT-2 forward pass, each working on one token row so that the batched
// (prefill) and single-token (step) paths run literally the same code per row.
#pragma once

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

}  // namespace gpt2
