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

// Prefill chunk: the GEMM's token block, so a chunk streams each weight matrix once.
constexpr int kMaxBatch = 64;

bool create_run_state(const Config& c, RunState* s, std::string* error) {
    const uint64_t T = uint64_t(c.n_ctx), C = uint64_t(c.n_embd), L = uint64_t(c.n_layer);
    const uint64_t B = T < uint64_t(kMaxBatch) ? T : uint64_t(kMaxBatch);
    // floats per buffer, in field order (fc shares qkv + att); the token window is counted as floats too (same
    // size as int32)
    const uint64_t activation_floats = B * C * 2 + B * 4 * C + B * C + T + uint64_t(c.n_vocab) + B + T;
    const uint64_t kv_floats = 2 * L * T * C;
    const uint64_t quantized_bytes = B * 4 * C * sizeof(int16_t);
    const uint64_t bytes = (activation_floats + kv_floats) * sizeof(float) + quantized_bytes;
    if (bytes > uint64_t(SIZE_MAX) || !(s->memory = std::malloc(size_t(bytes)))) {
        if (error)
            *error = "out of memory: need " + std::to_string(bytes) + " bytes for the KV cache (" +
                     std::to_string(kv_floats * sizeof(float)) + ") and activations";
        return false;
    }
    s->bytes = size_t(bytes);
    s->kv_cache_bytes = size_t(kv_floats * sizeof(float));
    s->n_batch = int(B);
    float* p = static_cast<float*>(s->memory);
    auto take = [&p](uint64_t n) {
        float* r = p;
        p += n;
        return r;
    };
    s->x = take(B * C);
    s->xb = take(B * C);
    s->qkv = take(B * 3 * C);
    s->att = take(B * C);
    s->fc = s->qkv;  // the MLP runs after attention is done with qkv and att: their B * 4 * C floats
    s->proj = take(B * C);
    s->scores = take(T);
    s->logits = take(uint64_t(c.n_vocab));
    s->xq_scale = take(B);
    s->key_cache = take(L * T * C);
    s->value_cache = take(L * T * C);
    s->tokens = reinterpret_cast<int32_t*>(take(T));
    s->xq = reinterpret_cast<int16_t*>(p);
    return true;
}

namespace {

// One weight matrix [n_out][n_in] in panels (kernels.h): fp32 (w) or int8 with per-row scales (q, scale).
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
constexpr int kRowAlignment = 16;  // row ranges start on multiples of 16: whole panels of kPanelRows rows
static_assert(kRowAlignment % kPanelRows == 0, "a row range must start at a panel");
// Each token range reads all the weights: below about 32 tokens the batched kernel is bound by reading them, and
// splitting would only multiply that traffic.
constexpr int kMinTokensPerPart = 32;

struct MatmulJob {
    float* out;              // (n, n_out)
    const float* x;          // (n, n_in)
    const int16_t* xq;       // (n, n_in) int8 weights: x quantized
    const float* xq_scale;   // (n) int8 weights: the scales of xq's rows
    Matrix m;
    const float* bias;       // (n_out) or null
    int n, n_in, n_out;
    int per_part;            // output rows (n == 1) or tokens (n > 1) per part; the last part takes what is left
};

// The kernel on tokens [t0, t0 + tokens) and output rows [o0, o0 + rows); rows < n_out only for one token (the
// batched kernels write rows of n_out outputs).
void multiply(const MatmulJob& job, int t0, int tokens, int o0, int rows) {
    const size_t n_in = size_t(job.n_in);
    float* out = job.out + size_t(t0) * size_t(job.n_out) + size_t(o0);
    const float* bias = job.bias ? job.bias + o0 : nullptr;
    if (job.m.q) {
        const int8_t* w = job.m.q + size_t(o0) * n_in;
        const float* w_scale = job.m.scale + o0;
        const int16_t* xq = job.xq + size_t(t0) * n_in;
        if (tokens == 1)
            gemv_q8(out, xq, job.xq_scale[t0], w, w_scale, bias, job.n_in, rows);
        else
            gemm_q8(out, xq, job.xq_scale + t0, w, w_scale, bias, tokens, job.n_in, rows);
    } else {
        const float* w = job.m.w + size_t(o0) * n_in;
        const float* x = job.x + size_t(t0) * n_in;
        if (tokens == 1)
            gemv(out, x, w, bias, job.n_in, rows);
        else
            gemm(out, x, w, bias, tokens, job.n_in, rows);
    }
}

void matmul_part(void* context, int part) {
    const MatmulJob& job = *static_cast<const MatmulJob*>(context);
    if (job.n == 1) {
        const int o0 = part * job.per_part;
        multiply(job, 0, 1, o0, std::min(job.per_part, job.n_out - o0));
    } else {
        const int t0 = part * job.per_part;
        multiply(job, t0, std::min(job.per_part, job.n - t0), 0, job.n_out);
    }
}

// Linear layer for n token rows: out (n, n_out) = x (n, n_in) . w^T + bias, split over the pool's threads (see
// above; pool may be null: one thread). int8 weights first quantize the input rows into the run state's int16
// buffer, once for all parts.
void matmul(ThreadPool* pool, RunState* s, float* out, const float* x, const Matrix& m, const float* bias, int n,
            int n_in, int n_out) {
    if (m.q) quantize_activations(s->xq, s->xq_scale, x, n, n_in);
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
    MatmulJob job{out, x, s->xq, s->xq_scale, m, bias, n, n_in, n_out, per_part};
    if (parts <= 1)
        multiply(job, 0, n, 0, n_out);
    else
        pool->run(&matmul_part, &job, parts);
}

// x = wte[token] + wpe[pos] for n tokens; wte is packed (its rows are unpacked; int8 rows dequantized).
void embed_tokens(const Config& c, const Weights& w, float* x, const int32_t* tokens, int n, int pos0, int16_t* row_q8) {
    const int C = c.n_embd;
    for (int t = 0; t < n; t++) {
        float* xt = x + (size_t)t * C;
        const float* p = w.wpe + (size_t)(pos0 + t) * C;
        if (w.wte_q) {
            int8_t* q = reinterpret_cast<int8_t*>(row_q8);
            unpack_row(q, w.wte_q, c.n_vocab, C, tokens[t]);
            const float scale = w.wte_scale[tokens[t]];
            for (int i = 0; i < C; i++) xt[i] = float(q[i]) * scale + p[i];
        } else {
            unpack_row(xt, w.wte, c.n_vocab, C, tokens[t]);
            for (int i = 0; i < C; i++) xt[i] += p[i];
        }
    }
}

// One chunk of n <= n_batch tokens at positions pos0.. (see forward()); logits_out, if not null, receives
// every token's logits (n, n_vocab); last_logits: write the last token's logits to s->logits.
void forward_batch(const Model& model, RunState* s, const int32_t* tokens, int n, int pos0, float* logits_out,
                   bool last_logits) {
    const Config& c = model.config();
    const Weights& w = model.weights();
    const int C = c.n_embd, T = c.n_ctx;
    const float eps = c.layer_norm_epsilon;
    ThreadPool* const pool = model.thread_pool();

    embed_tokens(c, w, s->x, tokens, n, pos0, s->xq);
    const Matrix lm_head = w.wte_q ? Matrix{nullptr, w.wte_q, w.wte_scale} : Matrix{w.wte, nullptr, nullptr};

    for (int l = 0; l < c.n_layer; l++) {
        const size_t lC = (size_t)l * C;
        float* key_cache = s->key_cache + (size_t)l * T * C;
        float* value_cache = s->value_cache + (size_t)l * T * C;

        // attention block: x += c_proj(attention(c_attn(ln_1(x))))
        for (int t = 0; t < n; t++)
            layernorm(s->xb + (size_t)t * C, s->x + (size_t)t * C, w.ln_1_weight + lC, w.ln_1_bias + lC, C, eps);
        matmul(pool, s, s->qkv, s->xb, layer_matrix(w.qkv_weight, w.qkv_q, w.qkv_scale, l, 3 * C, C), w.qkv_bias + lC * 3, n, C, 3 * C);
        const int hs = C / c.n_head;
        for (int t = 0; t < n; t++) {
            const float* qkv = s->qkv + (size_t)t * 3 * C;
            for (int h = 0; h < c.n_head; h++) {
                const size_t at = ((size_t)h * T + (size_t)(pos0 + t)) * hs;
                std::memcpy(key_cache + at, qkv + C + h * hs, sizeof(float) * hs);
                std::memcpy(value_cache + at, qkv + 2 * C + h * hs, sizeof(float) * hs);
            }
        }
        for (int t = 0; t < n; t++)  // causal: the token at pos0 + t sees positions 0..pos0 + t
            attention_row(s->att + (size_t)t * C, s->qkv + (size_t)t * 3 * C, key_cache, value_cache, pos0 + t + 1, C,
                          c.n_head, T, s->scores);
        matmul(pool, s, s->proj, s->att, layer_matrix(w.attn_proj_weight, w.attn_proj_q, w.attn_proj_scale, l, C, C), w.attn_proj_bias + lC, n, C, C);
        residual_add(s->x, s->proj, n * C);

        // MLP block: x += c_proj(gelu(c_fc(ln_2(x))))
        for (int t = 0; t < n; t++)
            layernorm(s->xb + (size_t)t * C, s->x + (size_t)t * C, w.ln_2_weight + lC, w.ln_2_bias + lC, C, eps);
        matmul(pool, s, s->fc, s->xb, layer_matrix(w.fc_weight, w.fc_q, w.fc_scale, l, 4 * C, C), w.fc_bias + lC * 4, n, C, 4 * C);
        gelu(s->fc, n * 4 * C);
        matmul(pool, s, s->proj, s->fc, layer_matrix(w.mlp_proj_weight, w.mlp_proj_q, w.mlp_proj_scale, l, C, 4 * C),
               w.mlp_proj_bias + lC, n, 4 * C, C);
        residual_add(s->x, s->proj, n * C);
    }

    // final layernorm and the tied LM head (wte as [n_vocab][n_embd])
    if (logits_out) {
        for (int t = 0; t < n; t++)
            layernorm(s->xb + (size_t)t * C, s->x + (size_t)t * C, w.ln_f_weight, w.ln_f_bias, C, eps);
        matmul(pool, s, logits_out, s->xb, lm_head, nullptr, n, C, c.n_vocab);
        if (last_logits) std::memcpy(s->logits, logits_out + (size_t)(n - 1) * c.n_vocab, sizeof(float) * c.n_vocab);
    } else if (last_logits) {
        float* xb = s->xb + (size_t)(n - 1) * C;
        layernorm(xb, s->x + (size_t)(n - 1) * C, w.ln_f_weight, w.ln_f_bias, C, eps);
        matmul(pool, s, s->logits, xb, lm_head, nullptr, 1, C, c.n_vocab);
    }
}

}  // namespace

void forward(const Model& model, RunState* s, const int32_t* tokens, int n, int pos0, float* all_logits) {
    const size_t V = size_t(model.config().n_vocab);
    for (int t0 = 0; t0 < n; t0 += s->n_batch) {
        const int chunk = n - t0 < s->n_batch ? n - t0 : s->n_batch;
        forward_batch(model, s, tokens + t0, chunk, pos0 + t0, all_logits ? all_logits + size_t(t0) * V : nullptr,
                      t0 + chunk == n);
    }
}

}  // namespace gpt2
