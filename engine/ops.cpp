#include "ops.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "kernels.h"

namespace gpt2 {

void embed(float* x, const float* wte, const float* wpe, int token, int pos, int n_embd) {
    const float* tok = wte + (size_t)token * n_embd;
    const float* p = wpe + (size_t)pos * n_embd;
    for (int i = 0; i < n_embd; i++) x[i] = tok[i] + p[i];
}

void layernorm(float* out, const float* in, const float* weight, const float* bias, int n, float eps) {
    // statistics in double: cheap (n values per row) and keeps large-mean rows accurate
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += in[i];
    const double mean = sum / n;
    double sq = 0.0;
    for (int i = 0; i < n; i++) {
        const double d = in[i] - mean;
        sq += d * d;
    }
    const float m = float(mean);
    const float rstd = float(1.0 / std::sqrt(sq / n + double(eps)));
    for (int i = 0; i < n; i++) out[i] = (in[i] - m) * rstd * weight[i] + bias[i];
}

void gelu(float* x, int n) {
    const float kSqrt2OverPi = 0.7978845608028654f;
    for (int i = 0; i < n; i++) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
    }
}

void residual_add(float* x, const float* y, int n) {
    for (int i = 0; i < n; i++) x[i] += y[i];
}

void softmax(float* x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void attention_row(float* out, const float* q, const float* key_cache, const float* value_cache, int n_keys,
                   int n_embd, int n_head, float* scores) {
    const int head_size = n_embd / n_head;
    const float scale = 1.0f / std::sqrt(float(head_size));
    for (int h = 0; h < n_head; h++) {
        const float* qh = q + h * head_size;
        for (int j = 0; j < n_keys; j++) scores[j] = dot(qh, key_cache + (size_t)j * n_embd + h * head_size, head_size) * scale;
        softmax(scores, n_keys);
        float* oh = out + h * head_size;
        std::memset(oh, 0, sizeof(float) * head_size);
        for (int j = 0; j < n_keys; j++) axpy(oh, scores[j], value_cache + (size_t)j * n_embd + h * head_size, head_size);
    }
}

}  // namespace gpt2
