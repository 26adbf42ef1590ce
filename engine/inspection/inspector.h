// Inside GPT-2 as it generates: for the positions a caller asks for, a session's own passes give up their attention
// probabilities, the logit lens, each block's contribution and the KV cache's rows, and its sampler the trace of a
// draw. An Inspector runs over a Session as the decoding modes do (engine/decoding/): it feeds the session with the
// pass observed (RunState::observer) and the sampler traced (Sampler::set_trace), and unsets both before it returns,
// so a session that is not being inspected runs exactly the pass it always ran.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "decoding/scorer.h"
#include "gpt2.h"
#include "model/forward.h"
#include "model/sampler.h"

namespace gpt2 {

// What to capture (Inspector::configure checks it against the model).
struct InspectionRequest {
    std::vector<int32_t> positions;  // window positions the call feeds, ascending; empty: the last one fed
    std::vector<int32_t> layers;     // ascending, in [0, n_layer)
    std::vector<int32_t> heads;      // ascending, in [0, n_head); none: no attention rows and no KV rows
    int top_k = 5;                   // logit-lens and sampler-trace entries, 1..Inspector::kMaxTopK
    // The logit lens: the LM head once per position and layer, its costly part (a layer's lens costs about what the
    // model's own head does); off, lens_tokens() are -1.
    bool logit_lens = true;
};

// What one call did to the KV cache: positions [first, first + count) ...
struct CacheEvent {
    enum Kind : int32_t {
        cleared,      // ... dropped for a new prompt (prefill without reuse; an uncached session's every call)
        kept,         // ... kept from before the call (a prefill that reuses the cache)
        rolled_back,  // ... dropped because the new prompt differs from them (a prefill that reuses the cache)
        slid,         // ... dropped when the window was full: the newest half moved to the front and re-fed
        written,      // ... computed and stored by the call's pass
    };
    Kind kind;
    int32_t first;
    int32_t count;
};
// The kinds' names, in value order, as the JS API spells them.
inline constexpr const char* kCacheEventNames[] = {"cleared", "kept", "rolledBack", "slid", "written"};
static_assert(sizeof(kCacheEventNames) / sizeof(char*) == CacheEvent::written + 1, "a name for every kind");

// Usage: configure() once per request, then feed_prompt() or feed_step() and sample() as Session's own; after each
// feed the results below hold that pass's values (P = positions(), L = layers, H = heads, K = top_k, hs = head size):
//  - attention (P, L, H, row_stride()): row (i, l, h) holds the positions()[i] + 1 probabilities with which position
//    positions()[i] attended in head heads[h] of layer layers[l] (after the causal mask and the softmax), bit for bit
//    the ones its pass weighed the values with;
//  - lens (P, L, K): the logit lens, the final layernorm and the LM head on the residual stream after layer
//    layers[l], as the K likeliest tokens with their logits and probabilities (softmax at temperature 1), likeliest
//    first; after the last layer these are the pass's own logits;
//  - blocks (P, L, 3): the L2 norms of the attention block's output and of the MLP block's output (what each added to
//    the residual stream) and of the residual stream after the layer; qkv_norms (P, L, H, 3): the query's, key's and
//    value's norms in each head;
//  - kv_rows (P, L, H, 2, hs): the key and the value row each position holds in the cache after the call, as the
//    attention reads them (int8 rows dequantized);
//  - events(): what the call did to the cache; after sample(), trace(): the sampler's stages.
// Capacity is sized by configure() and bounded by kMaxBytes; feeding and sampling allocate nothing.
class Inspector final : private ForwardObserver {
   public:
    static constexpr int kMaxTopK = 64;
    // The most memory one request's results take (so that a request for every position, layer and head of a long
    // window is refused with its size instead of exhausting a browser tab).
    static constexpr uint64_t kMaxBytes = uint64_t(64) << 20;
    static constexpr int kMaxEvents = 3;

    // session must outlive this; its errors are this one's (Session::error()).
    explicit Inspector(Session& session) : session_(session) {}
    Inspector(const Inspector&) = delete;
    Inspector& operator=(const Inspector&) = delete;

    // Takes the request and sizes its results; false and Session::error() for a request out of range (input,
    // naming the field), one over kMaxBytes (input, with its size), a recording session (its passes run at its
    // host) or no memory.
    bool configure(const InspectionRequest& request);
    // Session::feed_prompt / feed_step with the pass observed: the same cache, logits and tokens as without. false
    // and Session::error() as theirs, or when a position asked for is not fed by the call (a reusing prefill keeps
    // the positions its prompt shares with the window; they are not computed again).
    bool feed_prompt(const int32_t* ids, size_t n, bool reuse);
    bool feed_step(int32_t id);
    // Session::sample with the sampler traced (trace()): the same token and RNG state as without.
    int sample();

    const InspectionRequest& request() const { return request_; }
    int n_positions() const { return n_positions_; }
    const int32_t* positions() const { return positions_.get(); }  // (P) the positions captured by the last feed
    int row_stride() const { return row_stride_; }
    const float* attention() const { return attention_.get(); }
    const int32_t* lens_tokens() const { return lens_tokens_.get(); }              // (P, L, K)
    const float* lens_logits() const { return lens_logits_.get(); }                // (P, L, K)
    const float* lens_probabilities() const { return lens_probabilities_.get(); }  // (P, L, K)
    const float* blocks() const { return blocks_.get(); }
    const float* qkv_norms() const { return qkv_norms_.get(); }
    const float* kv_rows() const { return kv_rows_.get(); }
    // The logits the logit lens computed last (n_vocab): of the last position and the last layer asked for.
    const float* last_lens_logits() const { return lens_row_.get(); }
    int n_events() const { return n_events_; }
    const CacheEvent* events() const { return events_; }
    const SamplerTrace& trace() const { return trace_; }

   private:
    void attention_done(const Model& model, RunState* s, int layer, int n, int pos0) override;
    void block_done(const Model& model, RunState* s, int layer, Block block, int n, int pos0) override;
    // The first slot of positions_ at or after pos.
    int first_slot(int pos) const;
    bool refuse(const std::string& message);  // false, Session::error() = message (input)
    // Runs feed (Session's) with this as the pass's observer, then checks that every position was captured and
    // reads the cache rows.
    template <typename Feed>
    bool observe(int last, Feed feed);
    void add_event(CacheEvent::Kind kind, int first, int count);

    Session& session_;
    InspectionRequest request_;
    int n_positions_ = 0;
    int row_stride_ = 0;                           // attention row capacity: n_ctx, or the last position asked + 1
    std::unique_ptr<int32_t[]> positions_;         // (P)
    std::unique_ptr<uint8_t[]> captured_;          // (P) whether the last feed's pass computed the position
    std::unique_ptr<int32_t[]> layer_slot_;        // (n_layer) a layer's index in request_.layers, or -1
    std::unique_ptr<float[]> attention_;           // (P, L, H, row_stride_)
    std::unique_ptr<int32_t[]> lens_tokens_;       // (P, L, K)
    std::unique_ptr<float[]> lens_logits_;         // (P, L, K)
    std::unique_ptr<float[]> lens_probabilities_;  // (P, L, K)
    std::unique_ptr<float[]> blocks_;              // (P, L, 3)
    std::unique_ptr<float[]> qkv_norms_;           // (P, L, H, 3)
    std::unique_ptr<float[]> kv_rows_;             // (P, L, H, 2, hs)
    std::unique_ptr<float[]> lens_row_;            // (n_vocab) residual_logits' output
    std::unique_ptr<TokenScore[]> lens_top_;       // (K) score_logits' alternatives
    std::unique_ptr<int32_t[]> trace_top_;         // (SamplerTrace::kStages, K)
    std::unique_ptr<float[]> trace_values_;        // (SamplerTrace::kStages, K)
    SamplerTrace trace_;
    CacheEvent events_[kMaxEvents] = {};
    int n_events_ = 0;
};

}  // namespace gpt2
