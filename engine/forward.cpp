#include "forward.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels.h"
#include "ops.h"
#include "thread_pool.h"
#include "weights.h"

namespace gpt2 {

RunState::~RunState() { std::free(memory); }

bool create_run_state(const Config& c, RunState* s, std::string* error) {
    const uint64_t T = uint64_t(c.n_ctx), C = uint64_t(c.n_embd), L = uint64_t(c.n_layer);
    // floats per buffer, in field order; the token window is counted as floats too (same size as int32)
    const uint64_t activation_floats = T * C * 4 + T * 3 * C + T * 4 * C + T + uint64_t(c.n_vocab) + T;
    const uint64_t kv_floats = 2 * L * T * C;
    const uint64_t bytes = (activation_floats + kv_floats) * sizeof(float);
    if (bytes > uint64_t(SIZE_MAX) || !(s->memory = std::malloc(size_t(bytes)))) {
        if (error)
            *error = "out of memory: need " + std::to_string(bytes) + " bytes for the KV cache (" +
                     std::to_string(kv_floats * sizeof(float)) + ") and activations";
        return false;
    }
    s->bytes = size_t(bytes);
    s->kv_cache_bytes = size_t(kv_floats * sizeof(float));
    float* p = static_cast<float*>(s->memory);
    auto take = [&p](uint64_t n) {
        float* r = p;
        p += n;
        return r;
    };
    s->x = take(T * C);
    s->xb = take(T * C);
    s->qkv = take(T * 3 * C);
    s->att = take(T * C);
    s->proj = take(T * C);
    s->fc = take(T * 4 * C);
    s->scores = take(T);
    s->logits = take(uint64_t(c.n_vocab));
    s->key_cache = take(L * T * C);
    s->value_cache = take(L * T * C);
    s->tokens = reinterpret_cast<int32_t*>(take(T));
    return true;
}

namespace {

// One weight matrix row-major [n_out][n_in]: fp32 (w) or int8 with per-row scales (q, scale).
struct Matrix {
    const float* w;
    const int8_t* q;
    const float* scale;
};

// Layer l of a (n_layer, n_out, n_in) parameter stored in either format.
Matrix layer_matrix(const float* w, const int8_t* q, const float* scale, int l, int n_out, int n_in) {
    const size_t rows = size_t(l) * size_t(n_out);
    if (q) return {nullptr, q + rows * size_t(n_in), scale + rows};
    return {w + rows * size_t(n_in), nullptr, nullptr};
}

// Linear layer for n token rows: out (n, n_out) = x (n, n_in) . w^T + bias.
void matmul(float* out, const float* x, const Matrix& m, const float* bias, int n, int n_in, int n_out) {
    if (m.q) {
        if (n == 1)
            gemv_q8(out, x, m.q, m.scale, bias, n_in, n_out);
        else
            gemm_q8(out, x, m.q, m.scale, bias, n, n_in, n_out);
    } else if (n == 1) {
        gemv(out, x, m.w, bias, n_in, n_out);
    } else {
        gemm(out, x, m.w, bias, n, n_in, n_out);
    }
}

// Thread splitting of matmul(). Every part calls the same kernel on a slice, and the kernels compute each output
// element from its own row and token alone, in a fixed order (kernels.h), so the result is bit-identical for any
// number of threads.
//  - one token (decode): output rows split into contiguous ranges: each part reads only its share of the
//    weights, which is what bounds a decode step;
//  - several tokens (prefill): token rows split into contiguous ranges (each part runs the batched kernel on
//    its tokens against all the weights; splitting output rows would need an output stride the kernels lack).
// A part gets at least kMinMultiplyAddsPerPart of work, so small matrices are not split below the cost of
// waking a thread.
constexpr int64_t kMinMultiplyAddsPerPart = 32768;
// Row ranges are handed out first come, first served (ThreadPool::run), several per thread, so that when a worker
// is late (a busy machine) the others take over most of its share instead of waiting for it. Token ranges are
// not: each one reads all the weights.
constexpr int kRowPartsPerThread = 4;
constexpr int kRowAlignment = 16;  // row ranges start on multiples of 16: whole 4-row GEMV tiles
// Each token range reads all the weights: below about 32 tokens the batched kernel is bound by reading them, and
// splitting would only multiply that traffic.
constexpr int kMinTokensPerPart = 32;

struct MatmulJob {
    float* out;
    const float* x;
    Matrix m;
    const float* bias;
    int n, n_in, n_out;
    int per_part;  // output rows (n == 1) or tokens (n > 1) per part; the last part takes what is left
};

void matmul_part(void* context, int part) {
    const MatmulJob& job = *static_cast<const MatmulJob*>(context);
    const size_t n_in = size_t(job.n_in);
    if (job.n == 1) {
        const int o0 = part * job.per_part;
        const int rows = std::min(job.per_part, job.n_out - o0);
        const Matrix& m = job.m;
        const Matrix rows_of_m = m.q ? Matrix{nullptr, m.q + size_t(o0) * n_in, m.scale + o0}
                                     : Matrix{m.w + size_t(o0) * n_in, nullptr, nullptr};
        matmul(job.out + o0, job.x, rows_of_m, job.bias ? job.bias + o0 : nullptr, 1, job.n_in, rows);
    } else {
        const int t0 = part * job.per_part;
        const int tokens = std::min(job.per_part, job.n - t0);
        matmul(job.out + size_t(t0) * size_t(job.n_out), job.x + size_t(t0) * n_in, job.m, job.bias, tokens, job.n_in,
               job.n_out);
    }
}

// matmul() split over the pool's threads (see above); pool may be null (one thread).
void parallel_matmul(ThreadPool* pool, float* out, const float* x, const Matrix& m, const float* bias, int n, int n_in,
                     int n_out) {
    const int64_t multiply_adds = int64_t(n) * n_in * n_out;
    const int n_threads = pool ? pool->n_threads() : 1;
    int parts = n_threads > 1 ? int(std::min<int64_t>(n_threads * (n == 1 ? kRowPartsPerThread : 1),
                                                       multiply_adds / kMinMultiplyAddsPerPart))
                              : 1;
    int per_part = 0;
    if (parts > 1 && n == 1) {
        per_part = (n_out + parts - 1) / parts;
        per_part = (per_part + kRowAlignment - 1) / kRowAlignment * kRowAlignment;
        parts = (n_out + per_part - 1) / per_part;
    } else if (parts > 1) {
        parts = std::min(parts, n / kMinTokensPerPart);
        if (parts > 1) {
            per_part = (n + parts - 1) / parts;
            parts = (n + per_part - 1) / per_part;
        }
    }
    if (parts <= 1) {
        matmul(out, x, m, bias, n, n_in, n_out);
        return;
    }
    MatmulJob job{out, x, m, bias, n, n_in, n_out, per_part};
    pool->run(&matmul_part, &job, parts);
}

}  // namespace

void forward(const Model& model, RunState* s, const int32_t* tokens, int n, int pos0, float* all_logits) {
    const Config& c = model.config();
    const Weights& w = model.weights();
    const int C = c.n_embd, T = c.n_ctx;
    const float eps = c.layer_norm_epsilon;
    ThreadPool* const pool = model.thread_pool();

    if (w.wte_q) {
        // int8: the embedding row is the dequantized LM head row, q * scale (then + wpe, as embed())
        for (int t = 0; t < n; t++) {
            float* x = s->x + (size_t)t * C;
            const int8_t* q = w.wte_q + (size_t)tokens[t] * C;
            const float scale = w.wte_scale[tokens[t]];
            const float* p = w.wpe + (size_t)(pos0 + t) * C;
            for (int i = 0; i < C; i++) x[i] = float(q[i]) * scale + p[i];
        }
    } else {
        for (int t = 0; t < n; t++) embed(s->x + (size_t)t * C, w.wte, w.wpe, tokens[t], pos0 + t, C);
    }
    const Matrix lm_head = w.wte_q ? Matrix{nullptr, w.wte_q, w.wte_scale} : Matrix{w.wte, nullptr, nullptr};

    for (int l = 0; l < c.n_layer; l++) {
        const size_t lC = (size_t)l * C;
        float* key_cache = s->key_cache + (size_t)l * T * C;
        float* value_cache = s->value_cache + (size_t)l * T * C;

        // attention block: x += c_proj(attention(c_attn(ln_1(x))))
        for (int t = 0; t < n; t++)
            layernorm(s->xb + (size_t)t * C, s->x + (size_t)t * C, w.ln_1_weight + lC, w.ln_1_bias + lC, C, eps);
        parallel_matmul(pool, s->qkv, s->xb, layer_matrix(w.qkv_weight, w.qkv_q, w.qkv_scale, l, 3 * C, C), w.qkv_bias + lC * 3, n, C, 3 * C);
        for (int t = 0; t < n; t++) {
            const float* qkv = s->qkv + (size_t)t * 3 * C;
            std::memcpy(key_cache + (size_t)(pos0 + t) * C, qkv + C, sizeof(float) * C);
            std::memcpy(value_cache + (size_t)(pos0 + t) * C, qkv + 2 * C, sizeof(float) * C);
        }
        for (int t = 0; t < n; t++)  // causal: the token at pos0 + t sees positions 0..pos0 + t
            attention_row(s->att + (size_t)t * C, s->qkv + (size_t)t * 3 * C, key_cache, value_cache, pos0 + t + 1, C,
                          c.n_head, s->scores);
        parallel_matmul(pool, s->proj, s->att, layer_matrix(w.attn_proj_weight, w.attn_proj_q, w.attn_proj_scale, l, C, C), w.attn_proj_bias + lC, n, C, C);
        residual_add(s->x, s->proj, n * C);

        // MLP block: x += c_proj(gelu(c_fc(ln_2(x))))
        for (int t = 0; t < n; t++)
            layernorm(s->xb + (size_t)t * C, s->x + (size_t)t * C, w.ln_2_weight + lC, w.ln_2_bias + lC, C, eps);
        parallel_matmul(pool, s->fc, s->xb, layer_matrix(w.fc_weight, w.fc_q, w.fc_scale, l, 4 * C, C), w.fc_bias + lC * 4, n, C, 4 * C);
        gelu(s->fc, n * 4 * C);
        parallel_matmul(pool, s->proj, s->fc, layer_matrix(w.mlp_proj_weight, w.mlp_proj_q, w.mlp_proj_scale, l, C, 4 * C),
               w.mlp_proj_bias + lC, n, 4 * C, C);
        residual_add(s->x, s->proj, n * C);
    }

    // final layernorm and the tied LM head (wte as [n_vocab][n_embd])
    const int first = all_logits ? 0 : n - 1;
    for (int t = first; t < n; t++)
        layernorm(s->xb + (size_t)t * C, s->x + (size_t)t * C, w.ln_f_weight, w.ln_f_bias, C, eps);
    if (all_logits) {
        parallel_matmul(pool, all_logits, s->xb, lm_head, nullptr, n, C, c.n_vocab);
        std::memcpy(s->logits, all_logits + (size_t)(n - 1) * c.n_vocab, sizeof(float) * c.n_vocab);
    } else {
        parallel_matmul(pool, s->logits, s->xb + (size_t)(n - 1) * C, lm_head, nullptr, 1, C, c.n_vocab);
    }
}

}  // namespace gpt2
