#include "model/forward.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "kernels/block_formats.h"
#include "kernels/kernels.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "model/allocation.h"
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
    if (s->recording) {  // the host holds the activations and the cache
        arena->take(&s->logits, uint64_t(c.n_vocab));
        arena->take(&s->tokens, T);
        arena->take(&s->commands, uint64_t(s->command_capacity));
        *kv_cache_bytes = 0;
        return;
    }
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

// Operations of one chunk of a forward pass (forward_batch): the embedding, eight per layer, the head's two.
int commands_per_chunk(const Config& c) { return 1 + 8 * c.n_layer + 2; }

}  // namespace

uint64_t kv_cache_bytes(const Config& c, KvCacheFormat kv_format) {
    const uint64_t T = uint64_t(c.n_ctx), C = uint64_t(c.n_embd), L = uint64_t(c.n_layer), H = uint64_t(c.n_head);
    if (kv_format == KvCacheFormat::fp32) return 2 * L * T * C * sizeof(float);
    return 2 * L * H * T * sizeof(float) + L * T * C + L * C * 2 * ((T + 1) / 2);
}

bool create_run_state(const Config& c, KvCacheFormat kv_format, bool recording, RunState* s, std::string* error) {
    s->n_batch = c.n_ctx < kMaxBatch ? c.n_ctx : kMaxBatch;
    s->kv_format = recording ? KvCacheFormat::fp32 : kv_format;
    s->recording = recording;
    s->command_capacity = recording ? (c.n_ctx + s->n_batch - 1) / s->n_batch * commands_per_chunk(c) : 0;
    s->scores_stride = (c.n_ctx + 1 + 3) / 4 * 4;
    Arena sizes;
    uint64_t cache_bytes = 0;
    take_buffers(c, s, &sizes, &cache_bytes);
    const uint64_t bytes = sizes.end();
    if (bytes > uint64_t(SIZE_MAX) || !(s->memory = std::malloc(size_t(bytes)))) {
        return out_of_memory(bytes,
                             recording ? "the session's tokens, logits and commands"
                                       : "the KV cache (" + std::to_string(cache_bytes) + ") and activations",
                             error);
    }
    s->bytes = size_t(bytes);
    // a recording state's cache is the host's, in the layout a run state would give it
    s->kv_cache_bytes = size_t(recording ? kv_cache_bytes(c, s->kv_format) : cache_bytes);
    Arena buffers(s->memory, bytes);
    take_buffers(c, s, &buffers, &cache_bytes);
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

// The forward pass's operations on the CPU, for one chunk (forward_batch): each runs at once with the kernels, in
// the run state's buffers. logits rows go to all_logits when it is not null, else the one row to s->logits.
class CpuOps : public ForwardOps {
   public:
    CpuOps(const Model& model, RunState* s, float* all_logits)
        : c_(model.config()), w_(model.weights()), pool_(model.thread_pool()), s_(s), all_logits_(all_logits) {}

    void embed(const int32_t* tokens, int n, int pos0) override {
        embed_tokens(c_, w_, s_->x, tokens, n, pos0, reinterpret_cast<int8_t*>(s_->xq));
    }
    void layernorm(int layer, Norm norm, int row0, int n) override {
        const size_t at = size_t(row0) * c_.n_embd;
        const LayerNorm& ln = norm == Norm::ln_f   ? w_.ln_f
                              : norm == Norm::ln_1 ? w_.layers[layer].ln_1
                                                   : w_.layers[layer].ln_2;
        layernorm_rows(s_->xb + at, s_->x + at, ln, n, c_.n_embd, c_.layer_norm_epsilon);
    }
    void linear(int layer, Matrix matrix, Activation out, Activation in, Epilogue epilogue, int row0, int n) override {
        const Linear& linear = matrix_of(layer, matrix);
        // the residual add sums into x from proj, which keeps the kernels' plain store (and its bits)
        float* result = epilogue == Epilogue::add ? s_->proj : row(out, row0);
        matmul(pool_, s_, result, row(in, row0), linear, n);
        if (epilogue == Epilogue::gelu) gelu(result, n * linear.n_out);
        if (epilogue == Epilogue::add) residual_add(row(out, row0), result, n * linear.n_out);
    }
    void store_kv(int layer, int n, int pos0) override { write_kv_cache(s_, layer, s_->qkv, n, pos0, c_); }
    void attention(int layer, int n, int pos0) override {
        gpt2::attention(pool_, s_, layer, s_->att, s_->qkv, n, pos0, c_);
    }

   protected:
    const Config& c_;
    const Weights& w_;
    ThreadPool* const pool_;
    RunState* const s_;
    float* const all_logits_;

    const Linear& matrix_of(int layer, Matrix matrix) const {
        if (matrix == Matrix::lm_head) return w_.lm_head();
        const Layer& l = w_.layers[layer];
        return matrix == Matrix::attn_qkv    ? l.attn_qkv
               : matrix == Matrix::attn_proj ? l.attn_proj
               : matrix == Matrix::mlp_fc    ? l.mlp_fc
                                             : l.mlp_proj;
    }
    float* row(Activation a, int r) const {
        const size_t C = size_t(c_.n_embd);
        switch (a) {
            case Activation::x: return s_->x + r * C;
            case Activation::xb: return s_->xb + r * C;
            case Activation::qkv: return s_->qkv + r * 3 * C;
            case Activation::att: return s_->att + r * C;
            case Activation::fc: return s_->fc + r * 4 * C;
            case Activation::logits: return all_logits_ ? all_logits_ + size_t(r) * c_.n_vocab : s_->logits;
        }
        return nullptr;
    }
};

// CpuOps with an observer (RunState::observer) told after each layer's attention and after each residual add.
class ObservedOps final : public CpuOps {
   public:
    ObservedOps(const Model& model, RunState* s, float* all_logits)
        : CpuOps(model, s, all_logits), model_(model), observer_(s->observer) {}

    void embed(const int32_t* tokens, int n, int pos0) override {
        pos0_ = pos0;
        CpuOps::embed(tokens, n, pos0);
    }
    void attention(int layer, int n, int pos0) override {
        CpuOps::attention(layer, n, pos0);
        observer_->attention_done(model_, s_, layer, n, pos0);
    }
    void linear(int layer, Matrix matrix, Activation out, Activation in, Epilogue epilogue, int row0, int n) override {
        CpuOps::linear(layer, matrix, out, in, epilogue, row0, n);
        if (epilogue != Epilogue::add) return;
        observer_->block_done(model_, s_, layer, matrix == Matrix::attn_proj ? Block::attention : Block::mlp, n, pos0_);
    }

   private:
    const Model& model_;
    ForwardObserver* const observer_;
    int pos0_ = 0;  // the chunk's, from embed()
};

// Rows as several sequences (forward_sequences): row i is one token of sequence i at position positions[i], whose
// keys and values live in caches[i]; the matrices run on all rows at once in the activations' run state, as CpuOps.
class SequenceOps final : public CpuOps {
   public:
    SequenceOps(const Model& model, RunState* activations, RunState* const* caches, const int* positions,
                float* all_logits)
        : CpuOps(model, activations, all_logits), caches_(caches), positions_(positions) {}

    void embed(const int32_t* tokens, int n, int) override {
        for (int i = 0; i < n; i++)
            embed_tokens(c_, w_, s_->x + size_t(i) * c_.n_embd, tokens + i, 1, positions_[i],
                         reinterpret_cast<int8_t*>(s_->xq));
    }
    void store_kv(int layer, int n, int) override {
        for (int i = 0; i < n; i++)
            write_kv_cache(caches_[i], layer, s_->qkv + size_t(i) * 3 * c_.n_embd, 1, positions_[i], c_);
    }
    void attention(int layer, int n, int) override {  // each row over its own cache, with that cache's scratch rows
        for (int i = 0; i < n; i++)
            gpt2::attention(pool_, caches_[i], layer, s_->att + size_t(i) * c_.n_embd,
                            s_->qkv + size_t(i) * 3 * c_.n_embd, 1, positions_[i], c_);
    }

   private:
    RunState* const* caches_;
    const int* positions_;
};

// The forward pass's operations written down for a host (forward_ops.h), appended to s->commands. tokens must lie
// in the session's window (s->tokens); logits_row0: the row of the pass's all_logits that this chunk's row 0 is,
// or -1 when only the last token's logits are wanted.
class CommandRecorder final : public ForwardOps {
   public:
    CommandRecorder(RunState* s, int logits_row0) : s_(s), logits_row0_(logits_row0) {}

    void embed(const int32_t* tokens, int n, int pos0) override {
        GpuCommand& c = add(GpuOp::embed, 0, 0, n);
        c.pos0 = pos0;
        c.token_offset = int32_t(tokens - s_->tokens);
    }
    void layernorm(int layer, Norm norm, int row0, int n) override {
        add(GpuOp::layernorm, layer, int(norm), n).row0 = row0;
    }
    void linear(int layer, Matrix matrix, Activation out, Activation in, Epilogue epilogue, int row0, int n) override {
        GpuCommand& c = add(GpuOp::linear, layer, int(matrix), n);
        c.out = out;
        c.in = in;
        c.epilogue = epilogue;
        c.row0 = row0;
        if (out == Activation::logits) c.logits_row = logits_row0_ < 0 ? -1 : logits_row0_ + row0;
    }
    void store_kv(int layer, int n, int pos0) override { add(GpuOp::store_kv, layer, 0, n).pos0 = pos0; }
    void attention(int layer, int n, int pos0) override { add(GpuOp::attention, layer, 0, n).pos0 = pos0; }

   private:
    RunState* const s_;
    const int logits_row0_;

    GpuCommand& add(GpuOp op, int layer, int which, int n) {
        assert(s_->n_commands < s_->command_capacity && "a forward pass records more commands than planned");
        GpuCommand& c = s_->commands[s_->n_commands++];
        c = GpuCommand{};
        c.op = op;
        c.layer = layer;
        c.which = which;
        c.n = n;
        c.logits_row = -1;
        return c;
    }
};

// Which logits a chunk of a forward pass computes: none (a chunk before the last, when only the last token's are
// wanted), the last row's, or every row's.
enum class ChunkLogits { none, last, all };

// The final layernorm and the LM head ([n_vocab][n_embd]: wte, or a GGUF file's output.weight) on x rows
// [row0, row0 + n) of a chunk, into its logits rows.
void head(ForwardOps& ops, int row0, int n) {
    ops.layernorm(-1, Norm::ln_f, row0, n);
    ops.linear(-1, Matrix::lm_head, Activation::logits, Activation::xb, Epilogue::store, row0, n);
}

// One chunk of n <= n_batch tokens at positions pos0.. (see forward()), the layer order written once.
void forward_batch(ForwardOps& ops, const Config& c, const int32_t* tokens, int n, int pos0, ChunkLogits logits) {
    ops.embed(tokens, n, pos0);
    for (int l = 0; l < c.n_layer; l++) {
        // attention block: x += c_proj(attention(c_attn(ln_1(x))))
        ops.layernorm(l, Norm::ln_1, 0, n);
        ops.linear(l, Matrix::attn_qkv, Activation::qkv, Activation::xb, Epilogue::store, 0, n);
        ops.store_kv(l, n, pos0);
        ops.attention(l, n, pos0);
        ops.linear(l, Matrix::attn_proj, Activation::x, Activation::att, Epilogue::add, 0, n);

        // MLP block: x += c_proj(gelu(c_fc(ln_2(x))))
        ops.layernorm(l, Norm::ln_2, 0, n);
        ops.linear(l, Matrix::mlp_fc, Activation::fc, Activation::xb, Epilogue::gelu, 0, n);
        ops.linear(l, Matrix::mlp_proj, Activation::x, Activation::fc, Epilogue::add, 0, n);
    }
    if (logits == ChunkLogits::none) return;
    if (logits == ChunkLogits::all) head(ops, 0, n);
    else head(ops, n - 1, 1);
}

}  // namespace

void forward(const Model& model, RunState* s, const int32_t* tokens, int n, int pos0, float* all_logits) {
    const Config& c = model.config();
    const size_t V = size_t(c.n_vocab);
    if (s->recording) {
        s->n_commands = 0;
        s->recorded_all_logits = all_logits;
    }
    for (int t0 = 0; t0 < n; t0 += s->n_batch) {
        const int chunk = n - t0 < s->n_batch ? n - t0 : s->n_batch;
        const ChunkLogits logits = all_logits        ? ChunkLogits::all
                                   : t0 + chunk == n ? ChunkLogits::last
                                                     : ChunkLogits::none;
        if (s->recording) {
            CommandRecorder ops(s, all_logits ? t0 : -1);
            forward_batch(ops, c, tokens + t0, chunk, pos0 + t0, logits);
        } else if (s->observer) {
            ObservedOps ops(model, s, all_logits ? all_logits + size_t(t0) * V : nullptr);
            forward_batch(ops, c, tokens + t0, chunk, pos0 + t0, logits);
        } else {
            CpuOps ops(model, s, all_logits ? all_logits + size_t(t0) * V : nullptr);
            forward_batch(ops, c, tokens + t0, chunk, pos0 + t0, logits);
        }
    }
    if (all_logits && !s->recording) std::memcpy(s->logits, all_logits + (size_t(n) - 1) * V, sizeof(float) * V);
}

void forward_body(const Model& model, RunState* s, const int32_t* tokens, int n, int pos0) {
    CpuOps ops(model, s, nullptr);
    forward_batch(ops, model.config(), tokens, n, pos0, ChunkLogits::none);
}

void forward_logits(const Model& model, RunState* s, int row0, int n, float* all_logits) {
    CpuOps ops(model, s, all_logits);
    head(ops, row0, n);
}

void attention_row_probabilities(const Config& c, RunState* s, int layer, int head, int row, int pos, float* out) {
    const int C = c.n_embd, hs = C / c.n_head;
    const float* q = s->qkv + size_t(row) * 3 * C + size_t(head) * hs;
    float* scores = s->scores + size_t(head) * s->scores_stride;  // the row attention_part used for this head
    if (s->kv_format == KvCacheFormat::fp32) {
        attention_probabilities(scores, q, s->key_cache + head_row(c, layer, head) * hs, pos + 1, hs);
    } else {
        attention_probabilities_q8(scores, q, int8_head(*s, c, layer, head), pos + 1, hs, s->query_q + head * hs);
    }
    std::memcpy(out, scores, sizeof(float) * size_t(pos + 1));
}

void residual_logits(const Model& model, RunState* s, int row, float* logits) {
    const Config& c = model.config();
    const size_t at = size_t(row) * c.n_embd;
    layernorm_rows(s->xb + at, s->x + at, model.weights().ln_f, 1, c.n_embd, c.layer_norm_epsilon);
    matmul(model.thread_pool(), s, logits, s->xb + at, model.weights().lm_head(), 1);
}

void kv_cache_rows(const Config& c, const RunState& s, int layer, int head, int pos, float* key, float* value) {
    const size_t hs = size_t(c.n_embd / c.n_head), p = size_t(pos);
    if (s.kv_format == KvCacheFormat::fp32) {
        const size_t at = (head_row(c, layer, head) + p) * hs;
        std::memcpy(key, s.key_cache + at, sizeof(float) * hs);
        std::memcpy(value, s.value_cache + at, sizeof(float) * hs);
        return;
    }
    const Int8KvRows rows = int8_head(s, c, layer, head);
    const int8_t* keys = rows.keys + p * hs;
    const int8_t* values = rows.values + (p / 2) * 2 * hs + p % 2;  // slot p % 2 of pair p / 2
    for (size_t i = 0; i < hs; i++) {
        key[i] = float(keys[i]) * rows.key_scale[p];
        value[i] = float(values[2 * i]) * rows.value_scale[p];
    }
}

void copy_kv_cache(const Config& c, const RunState& from, RunState* to, int first, int n) {
    if (n <= 0) return;
    const size_t T = size_t(c.n_ctx), D = size_t(c.n_embd / c.n_head), LH = size_t(c.n_layer) * size_t(c.n_head);
    const size_t p0 = size_t(first), rows = size_t(n);
    for (size_t head = 0; head < LH; head++) {  // each (layer, head) holds its positions contiguously
        if (from.kv_format == KvCacheFormat::fp32) {
            const size_t at = (head * T + p0) * D;
            std::memcpy(to->key_cache + at, from.key_cache + at, sizeof(float) * rows * D);
            std::memcpy(to->value_cache + at, from.value_cache + at, sizeof(float) * rows * D);
        } else {
            std::memcpy(to->key_scale + head * T + p0, from.key_scale + head * T + p0, sizeof(float) * rows);
            std::memcpy(to->value_scale + head * T + p0, from.value_scale + head * T + p0, sizeof(float) * rows);
            std::memcpy(to->key_cache_q8 + (head * T + p0) * D, from.key_cache_q8 + (head * T + p0) * D, rows * D);
            // values: positions 2m and 2m + 1 share a pair row, so whole pairs (the other one's rows are equal or
            // not yet written)
            const size_t pairs = (T + 1) / 2, pair0 = p0 / 2, pair_end = (p0 + rows + 1) / 2;
            const size_t at = (head * pairs + pair0) * D * 2;
            std::memcpy(to->value_cache_q8 + at, from.value_cache_q8 + at, (pair_end - pair0) * D * 2);
        }
    }
}

void forward_sequences(const Model& model, RunState* activations, RunState* const* caches, const int32_t* tokens,
                       const int* positions, int n, float* all_logits) {
    SequenceOps ops(model, activations, caches, positions, all_logits);
    forward_batch(ops, model.config(), tokens, n, 0, ChunkLogits::all);
}

void replay(const Model& model, RunState* s, const GpuCommand* commands, int n_commands, const int32_t* window,
            float* all_logits, float* logits) {
    const size_t V = size_t(model.config().n_vocab);
    for (int i = 0; i < n_commands; i++) {
        const GpuCommand& c = commands[i];
        // a logits row r of the pass is all_logits row r; the last token's logits are the run state's
        float* rows = c.logits_row >= 0 ? all_logits + (size_t(c.logits_row) - size_t(c.row0)) * V : nullptr;
        CpuOps ops(model, s, rows);
        switch (c.op) {
            case GpuOp::embed: ops.embed(window + c.token_offset, c.n, c.pos0); break;
            case GpuOp::layernorm: ops.layernorm(c.layer, Norm(c.which), c.row0, c.n); break;
            case GpuOp::linear: ops.linear(c.layer, Matrix(c.which), c.out, c.in, c.epilogue, c.row0, c.n); break;
            case GpuOp::store_kv: ops.store_kv(c.layer, c.n, c.pos0); break;
            case GpuOp::attention: ops.attention(c.layer, c.n, c.pos0); break;
        }
        if (c.op == GpuOp::linear && c.out == Activation::logits && i == n_commands - 1)
            std::memcpy(logits, rows ? rows + size_t(c.row0 + c.n - 1) * V : s->logits, sizeof(float) * V);
    }
}

int recorded_logits_rows(const GpuCommand* commands, int n_commands) {
    int rows = 0;
    for (int i = 0; i < n_commands; i++)
        if (commands[i].logits_row >= 0) rows = std::max(rows, commands[i].logits_row + commands[i].n);
    return rows;
}

namespace {

bool same_shape(const Config& a, const Config& b) {
    return a.n_vocab == b.n_vocab && a.n_ctx == b.n_ctx && a.n_embd == b.n_embd && a.n_layer == b.n_layer &&
           a.n_head == b.n_head;
}

// host's weights and run state for session's passes, the positions before the first pass fed from the window
bool start_cpu_host(Session* session, const std::shared_ptr<const Model>& weights, int pass_pos0, CpuHost* host) {
    const Config& c = session->model().config();
    if (!weights || !weights->has_weights() || !same_shape(weights->config(), c)) {
        session->report_error(ErrorKind::input,
                              "run_on_cpu: the CPU model has no weights or another shape than the session's");
        return false;
    }
    std::string error;
    std::unique_ptr<RunState> state(new (std::nothrow) RunState());
    if (!state) error = out_of_memory_message(sizeof(RunState), "the CPU host's run state");
    if (!state || !create_run_state(c, KvCacheFormat::fp32, false, state.get(), &error)) {
        session->report_error(ErrorKind::memory, error);
        return false;
    }
    if (pass_pos0 > 0) forward(*weights, state.get(), session->window(), pass_pos0, 0, nullptr);
    host->model = weights;
    host->state = std::move(state);
    return true;
}

}  // namespace

bool run_recorded_pass_on_cpu(Session* session, const std::shared_ptr<const Model>& weights, CpuHost* host) {
    if (!session->recording() || session->n_cached() == 0) return false;
    int n = 0;
    const GpuCommand* commands = session->recorded_commands(&n);
    if (!host->state && !start_cpu_host(session, weights, n > 0 ? commands[0].pos0 : 0, host)) return false;
    replay(*host->model, host->state.get(), commands, n, session->window(), session->recorded_all_logits(),
           session->host_logits());
    return true;
}

}  // namespace gpt2
