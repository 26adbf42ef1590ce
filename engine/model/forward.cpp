#include "model/forward.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>

#include "kernels/block_formats.h"
#include "kernels/kernels.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "model/thread_pool.h"
#include "model/weights.h"

namespace gpt2 {

RunState::~RunState() { std::free(memory); }

// Prefill chunk: the GEMM's token block, so a chunk streams each weight matrix once.
constexpr int kMaxBatch = 64;

namespace {

// Lays buffers out one after the other in one block, each aligned for its element type. A pass without a block
// only measures (end()); a pass over the same buffers with a block of that size points them into it, checking
// in debug builds that each one fits.
class Arena {
   public:
    Arena() = default;
    Arena(void* block, uint64_t bytes) : block_(static_cast<char*>(block)), bytes_(bytes) {}

    // count elements of T at the next free place; *field points at them when there is a block
    template <typename T>
    void take(T** field, uint64_t count) {
        at_ = (at_ + alignof(T) - 1) / alignof(T) * alignof(T);
        if (block_) *field = reinterpret_cast<T*>(block_ + at_);
        at_ += count * sizeof(T);
        end_ = at_ > end_ ? at_ : end_;
        assert(fits() && "a run state buffer ends past the block");
    }
    // Everything taken so far lies inside the block (always, when measuring).
    bool fits() const { return !block_ || end_ <= bytes_; }
    uint64_t at() const { return at_; }  // bytes from the start of the block to the next free place
    // The next buffer starts `at` bytes into the block. Below end(), it reuses memory already taken: the
    // buffers there must not be live at the same time.
    void move_to(uint64_t at) { at_ = at; }
    uint64_t end() const { return end_; }  // bytes used

   private:
    char* block_ = nullptr;
    uint64_t bytes_ = 0;
    uint64_t at_ = 0;
    uint64_t end_ = 0;
};

// The one list of the run state's buffers, in memory order (B = s->n_batch token rows): it both sizes the block
// and assigns the buffers. *kv_cache_bytes: the bytes of the cache (with the int8 format's scales).
void take_buffers(const Config& c, RunState* s, Arena* arena, uint64_t* kv_cache_bytes) {
    const uint64_t B = uint64_t(s->n_batch), T = uint64_t(c.n_ctx), C = uint64_t(c.n_embd), L = uint64_t(c.n_layer);
    const uint64_t X = (4 * C + kActivationBlock - 1) / kActivationBlock;  // blocks of the widest matmul input
    arena->take(&s->x, B * C);
    arena->take(&s->xb, B * C);
    const uint64_t attention = arena->at();
    arena->take(&s->qkv, B * 3 * C);
    arena->take(&s->att, B * C);
    arena->move_to(attention);  // the MLP runs after attention is done with qkv and att: fc reuses their memory
    arena->take(&s->fc, B * 4 * C);
    arena->move_to(arena->end());  // the rest after both
    arena->take(&s->proj, B * C);
    arena->take(&s->scores, uint64_t(c.n_head) * uint64_t(s->scores_stride));
    arena->take(&s->logits, uint64_t(c.n_vocab));
    arena->take(&s->xq_scale, B * X);
    arena->take(&s->xq_sum, B * X);
    // the KV cache: fp32 rows, or int8 rows and their scales (the int8 arrays last, where they need no alignment)
    const uint64_t H = uint64_t(c.n_head);
    uint64_t at = arena->at();
    if (s->kv_format == KvCacheFormat::fp32) {
        arena->take(&s->key_cache, L * T * C);
        arena->take(&s->value_cache, L * T * C);
    } else {
        arena->take(&s->key_scale, L * H * T);
        arena->take(&s->value_scale, L * H * T);
    }
    *kv_cache_bytes = arena->at() - at;
    arena->take(&s->tokens, T);
    arena->take(&s->xq, B * 4 * C);
    if (s->kv_format == KvCacheFormat::int8) {
        arena->take(&s->query_q, C);
        arena->take(&s->weights_q, H * uint64_t(s->scores_stride));
        at = arena->at();
        arena->take(&s->key_cache_q8, L * T * C);
        arena->take(&s->value_cache_q8, L * C * 2 * ((T + 1) / 2));
        *kv_cache_bytes += arena->at() - at;
    }
}

}  // namespace

bool create_run_state(const Config& c, KvCacheFormat kv_format, RunState* s, std::string* error) {
    s->n_batch = c.n_ctx < kMaxBatch ? c.n_ctx : kMaxBatch;
    s->kv_format = kv_format;
    s->scores_stride = (c.n_ctx + 1 + 3) / 4 * 4;
    Arena sizes;
    uint64_t kv_cache_bytes = 0;
    take_buffers(c, s, &sizes, &kv_cache_bytes);
    const uint64_t bytes = sizes.end();
    if (bytes > uint64_t(SIZE_MAX) || !(s->memory = std::malloc(size_t(bytes)))) {
        if (error)
            *error = "out of memory: need " + std::to_string(bytes) + " bytes for the KV cache (" +
                     std::to_string(kv_cache_bytes) + ") and activations";
        return false;
    }
    s->bytes = size_t(bytes);
    s->kv_cache_bytes = size_t(kv_cache_bytes);
    Arena buffers(s->memory, bytes);
    take_buffers(c, s, &buffers, &kv_cache_bytes);
    assert(buffers.end() == bytes && "the run state's buffers were assigned differently from how they were sized");
    return true;
}

namespace {

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
    float* out;  // (n, n_out)
    const Linear* linear;
    LinearInput in;
    int n;
    int per_part;  // output rows (n == 1) or tokens (n > 1) per part; the last part takes what is left
};

void matmul_part(void* context, int part) {
    const MatmulJob& job = *static_cast<const MatmulJob*>(context);
    const int n_out = job.linear->n_out;
    if (job.n == 1) {
        const int o0 = part * job.per_part;
        multiply_linear(job.out, *job.linear, job.in, 0, 1, o0, std::min(job.per_part, n_out - o0));
    } else {
        const int t0 = part * job.per_part;
        multiply_linear(job.out, *job.linear, job.in, t0, std::min(job.per_part, job.n - t0), 0, n_out);
    }
}

// Linear layer for n token rows: out (n, n_out) = x (n, n_in) . weight^T + bias, split over the pool's threads
// (see above; pool may be null: one thread). The input is prepared for the weights' format (int8 and the
// block formats: quantized into the run state's int16 buffers) once for all parts.
void matmul(ThreadPool* pool, RunState* s, float* out, const float* x, const Linear& linear, int n) {
    const LinearInput in{x, s->xq, s->xq_scale, s->xq_sum};
    prepare_linear_input(linear, in, n);
    const int n_out = linear.n_out;
    const int64_t multiply_adds = int64_t(n) * linear.n_in * n_out;
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
    MatmulJob job{out, &linear, in, n, per_part};
    if (parts <= 1) multiply_linear(out, linear, in, 0, n, 0, n_out);
    else pool->run(&matmul_part, &job, parts);
}

// x = wte[token] + wpe[pos] for n tokens; scratch holds n_embd bytes (see linear_weight_row).
void embed_tokens(const Config& c, const Weights& w, float* x, const int32_t* tokens, int n, int pos0,
                  int8_t* scratch) {
    const int C = c.n_embd;
    for (int t = 0; t < n; t++) {
        float* xt = x + (size_t)t * C;
        const float* p = w.wpe + (size_t)(pos0 + t) * C;
        linear_weight_row(xt, w.wte, tokens[t], scratch);
        for (int i = 0; i < C; i++) xt[i] += p[i];
    }
}

// out = layernorm(x) row by row, for n rows of n_embd
void layernorm_rows(float* out, const float* x, const LayerNorm& norm, int n, int n_embd, float eps) {
    for (int t = 0; t < n; t++)
        layernorm(out + (size_t)t * n_embd, x + (size_t)t * n_embd, norm.weight, norm.bias, n_embd, eps);
}

// The first cache row of head h of layer l: the caches' rows are (n_layer, n_head, n_ctx), head_size values each.
size_t head_row(const Config& c, int l, int h) { return (size_t(l) * c.n_head + h) * c.n_ctx; }

// Head h of layer l in the int8 cache, from position 0: its key rows and scales, its values in ceil(n_ctx / 2)
// position pairs (kernels.h attention_values_q8) and their scales.
Int8KvRows int8_head(const RunState& s, const Config& c, int l, int h) {
    const size_t hs = size_t(c.n_embd / c.n_head), row = head_row(c, l, h);
    const size_t pairs = (size_t(l) * c.n_head + h) * ((c.n_ctx + 1) / 2);
    return {s.key_cache_q8 + row * hs, s.key_scale + row, s.value_cache_q8 + pairs * 2 * hs, s.value_scale + row};
}

// Writes the keys and values of n tokens at positions pos0.. from qkv (n, 3 * n_embd) into layer l's cache
// (n_head, n_ctx, head_size), in the run state's format.
void write_kv_cache(RunState* s, int l, const float* qkv, int n, int pos0, const Config& c) {
    const int C = c.n_embd, hs = C / c.n_head;
    for (int t = 0; t < n; t++) {
        const float* key = qkv + (size_t)t * 3 * C + C;
        const float* value = key + C;
        const size_t pos = size_t(pos0 + t);
        for (int h = 0; h < c.n_head; h++) {
            if (s->kv_format == KvCacheFormat::fp32) {
                const size_t at = (head_row(c, l, h) + pos) * hs;
                std::memcpy(s->key_cache + at, key + h * hs, sizeof(float) * hs);
                std::memcpy(s->value_cache + at, value + h * hs, sizeof(float) * hs);
            } else {
                const Int8KvRows head = int8_head(*s, c, l, h);
                quantize_cache_row(head.keys + pos * hs, head.key_scale + pos, key + h * hs, hs);
                // slot pos % 2 of pair pos / 2
                quantize_cache_row(head.values + (pos / 2) * 2 * hs + pos % 2, head.value_scale + pos, value + h * hs,
                                   hs, 2);
            }
        }
    }
}

// Thread splitting of attention(): one part per head, each with its own scores row (and query_q row), the same
// for a head on whatever thread, so the result is bit-identical for any number of threads. Split only when a
// head's work (its multiply-adds over the tokens and their positions) is worth waking a thread: at long contexts
// and in prefills, not for a decode step at a short context.
struct AttentionJob {
    RunState* s;
    const Config* c;
    int l;             // layer
    float* out;        // (n, n_embd)
    const float* qkv;  // (n, 3 * n_embd)
    int n;
    int pos0;
};

void attention_part(void* context, int h) {
    const AttentionJob& job = *static_cast<const AttentionJob*>(context);
    const RunState& s = *job.s;
    const int C = job.c->n_embd, hs = C / job.c->n_head;
    const size_t head = head_row(*job.c, job.l, h);
    float* scores = s.scores + size_t(h) * s.scores_stride;
    for (int t = 0; t < job.n; t++) {
        float* out = job.out + (size_t)t * C + h * hs;
        const float* q = job.qkv + (size_t)t * 3 * C + h * hs;
        const int n_keys = job.pos0 + t + 1;  // causal: the token at pos0 + t sees positions 0..pos0 + t
        if (s.kv_format == KvCacheFormat::fp32) {
            attention_head(out, q, s.key_cache + head * hs, s.value_cache + head * hs, n_keys, hs, scores);
        } else {
            attention_head_q8(out, q, int8_head(s, *job.c, job.l, h), n_keys, hs, scores, s.query_q + h * hs,
                              s.weights_q + size_t(h) * s.scores_stride);
        }
    }
}

// Causal self-attention of n tokens at positions pos0.. over layer l's cache: out (n, n_embd), qkv (n, 3 * n_embd).
void attention(ThreadPool* pool, RunState* s, int l, float* out, const float* qkv, int n, int pos0, const Config& c) {
    AttentionJob job{s, &c, l, out, qkv, n, pos0};
    const int64_t per_head = int64_t(n) * (pos0 + (n + 1) / 2) * (c.n_embd / c.n_head) * 2;
    if (pool && pool->n_threads() > 1 && per_head >= kMinMultiplyAddsPerPart)
        pool->run(&attention_part, &job, c.n_head);
    else
        for (int h = 0; h < c.n_head; h++) attention_part(&job, h);
}

// One chunk of n <= n_batch tokens at positions pos0.. (see forward()); logits_out, if not null, receives
// every token's logits (n, n_vocab); last_logits: write the last token's logits to s->logits.
void forward_batch(const Model& model, RunState* s, const int32_t* tokens, int n, int pos0, float* logits_out,
                   bool last_logits) {
    const Config& c = model.config();
    const Weights& w = model.weights();
    const int C = c.n_embd, V = c.n_vocab;
    const float eps = c.layer_norm_epsilon;
    ThreadPool* const pool = model.thread_pool();

    embed_tokens(c, w, s->x, tokens, n, pos0, reinterpret_cast<int8_t*>(s->xq));
    for (int l = 0; l < c.n_layer; l++) {
        const Layer& layer = w.layers[l];

        // attention block: x += c_proj(attention(c_attn(ln_1(x))))
        layernorm_rows(s->xb, s->x, layer.ln_1, n, C, eps);
        matmul(pool, s, s->qkv, s->xb, layer.attn_qkv, n);
        write_kv_cache(s, l, s->qkv, n, pos0, c);
        attention(pool, s, l, s->att, s->qkv, n, pos0, c);
        matmul(pool, s, s->proj, s->att, layer.attn_proj, n);
        residual_add(s->x, s->proj, n * C);

        // MLP block: x += c_proj(gelu(c_fc(ln_2(x))))
        layernorm_rows(s->xb, s->x, layer.ln_2, n, C, eps);
        matmul(pool, s, s->fc, s->xb, layer.mlp_fc, n);
        gelu(s->fc, n * 4 * C);
        matmul(pool, s, s->proj, s->fc, layer.mlp_proj, n);
        residual_add(s->x, s->proj, n * C);
    }

    // final layernorm and the LM head ([n_vocab][n_embd]: wte, or a GGUF file's output.weight)
    if (logits_out) {
        layernorm_rows(s->xb, s->x, w.ln_f, n, C, eps);
        matmul(pool, s, logits_out, s->xb, w.lm_head(), n);
        if (last_logits) std::memcpy(s->logits, logits_out + (size_t)(n - 1) * V, sizeof(float) * V);
    } else if (last_logits) {
        float* xb = s->xb + (size_t)(n - 1) * C;
        layernorm_rows(xb, s->x + (size_t)(n - 1) * C, w.ln_f, 1, C, eps);
        matmul(pool, s, s->logits, xb, w.lm_head(), 1);
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
