#include "inspection/inspector.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "model/allocation.h"

namespace gpt2 {

namespace {

float l2_norm(const float* v, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += double(v[i]) * double(v[i]);
    return float(std::sqrt(sum));
}

// "" when v is ascending, without repeats, in [0, limit); else why not, naming the request's field
std::string list_refusal(const std::vector<int32_t>& v, int limit, const char* field) {
    for (size_t i = 0; i < v.size(); i++) {
        if (v[i] < 0 || v[i] >= limit)
            return std::string(field) + " " + std::to_string(v[i]) + " is outside [0, " + std::to_string(limit) + ")";
        if (i > 0 && v[i] <= v[i - 1])
            return std::string(field) + " must be ascending without repeats: " + std::to_string(v[i]) + " after " +
                   std::to_string(v[i - 1]);
    }
    return "";
}

template <typename T>
bool allocate(std::unique_ptr<T[]>* array, uint64_t count) {
    array->reset(allocate_array<T>(count > 0 ? count : 1));
    return *array != nullptr;
}

}  // namespace

bool Inspector::refuse(const std::string& message) {
    session_.report_error(ErrorKind::input, "inspect: " + message);
    return false;
}

bool Inspector::configure(const InspectionRequest& request) {
    session_.clear_error();
    if (session_.recording()) return refuse("a recording session's passes run at its host, not in the engine");
    const Config& c = session_.model().config();
    const int max_top_k = std::min(kMaxTopK, c.n_vocab);
    std::string refusal = list_refusal(request.positions, c.n_ctx, "position");
    if (refusal.empty()) refusal = list_refusal(request.layers, c.n_layer, "layer");
    if (refusal.empty()) refusal = list_refusal(request.heads, c.n_head, "head");
    if (refusal.empty() && (request.top_k < 1 || request.top_k > max_top_k))
        refusal = "top_k " + std::to_string(request.top_k) + " is outside [1, " + std::to_string(max_top_k) + "]";
    if (!refusal.empty()) return refuse(refusal);

    const uint64_t P = request.positions.empty() ? 1 : request.positions.size(), L = request.layers.size(),
                   H = request.heads.size(), K = uint64_t(request.top_k), hs = uint64_t(c.n_embd / c.n_head);
    const uint64_t row = request.positions.empty() ? uint64_t(c.n_ctx) : uint64_t(request.positions.back()) + 1;
    const uint64_t S = SamplerTrace::kStages;
    const uint64_t floats = P * L * H * row + 2 * P * L * K + 3 * P * L + 3 * P * L * H + 2 * P * L * H * hs +
                            uint64_t(c.n_vocab) + S * K;
    const uint64_t ints = P * L * K + 2 * P + uint64_t(c.n_layer) + S * K;
    const uint64_t bytes = 4 * (floats + ints) + K * sizeof(TokenScore);
    if (bytes > kMaxBytes) {
        return refuse(std::to_string(P) + " positions x " + std::to_string(L) + " layers x " + std::to_string(H) +
                      " heads take " + std::to_string((bytes + (1 << 20) - 1) >> 20) + " MB, more than the " +
                      std::to_string(kMaxBytes >> 20) + " MB one inspection may: ask for fewer");
    }
    request_ = InspectionRequest{};  // a failure below leaves no request
    n_positions_ = 0;
    const bool allocated = allocate(&positions_, P) && allocate(&captured_, P) && allocate(&layer_slot_, c.n_layer) &&
                           allocate(&attention_, P * L * H * row) && allocate(&lens_tokens_, P * L * K) &&
                           allocate(&lens_logits_, P * L * K) && allocate(&lens_probabilities_, P * L * K) &&
                           allocate(&blocks_, 3 * P * L) && allocate(&qkv_norms_, 3 * P * L * H) &&
                           allocate(&kv_rows_, 2 * P * L * H * hs) && allocate(&lens_row_, c.n_vocab) &&
                           allocate(&lens_top_, K) && allocate(&trace_top_, S * K) && allocate(&trace_values_, S * K);
    if (!allocated) {
        session_.report_error(ErrorKind::memory, out_of_memory_message(bytes, "the inspection"));
        return false;
    }
    request_ = request;
    n_positions_ = int(P);
    row_stride_ = int(row);
    std::copy(request.positions.begin(), request.positions.end(), positions_.get());
    std::fill(layer_slot_.get(), layer_slot_.get() + c.n_layer, -1);
    for (size_t l = 0; l < request.layers.size(); l++) layer_slot_[request.layers[l]] = int(l);
    trace_ = SamplerTrace{};
    trace_.top_n = request.top_k;
    trace_.top = trace_top_.get();
    trace_.values = trace_values_.get();
    return true;
}

int Inspector::first_slot(int pos) const {
    return int(std::lower_bound(positions_.get(), positions_.get() + n_positions_, pos) - positions_.get());
}

void Inspector::add_event(CacheEvent::Kind kind, int first, int count) {
    if (count > 0 && n_events_ < kMaxEvents) events_[n_events_++] = CacheEvent{kind, first, count};
}

template <typename Feed>
bool Inspector::observe(int last, Feed feed) {
    if (n_positions_ == 0) return refuse("configure() first");  // also after a failed configure()
    if (request_.positions.empty()) positions_[0] = last;
    std::fill(captured_.get(), captured_.get() + n_positions_, 0);
    n_events_ = 0;
    RunState& s = session_.run_state();
    s.observer = this;
    const bool fed = feed();
    s.observer = nullptr;
    if (!fed) return false;
    const int n_cached = session_.n_cached();
    for (int i = 0; i < n_positions_; i++) {
        const int pos = positions_[i];
        if (pos >= n_cached)
            return refuse("position " + std::to_string(pos) + " is past the window's last, " +
                          std::to_string(n_cached - 1));
        if (!captured_[i])
            return refuse("position " + std::to_string(pos) +
                          " was kept from the cache, not computed by this call (a prefill that reuses the cache)");
    }
    const Config& c = session_.model().config();
    const size_t L = request_.layers.size(), H = request_.heads.size(), hs = size_t(c.n_embd / c.n_head);
    for (size_t i = 0; i < size_t(n_positions_); i++)
        for (size_t l = 0; l < L; l++)
            for (size_t h = 0; h < H; h++) {
                float* key = kv_rows_.get() + ((i * L + l) * H + h) * 2 * hs;
                kv_cache_rows(c, s, request_.layers[l], request_.heads[h], positions_[i], key, key + hs);
            }
    return true;
}

bool Inspector::feed_prompt(const int32_t* ids, size_t n, bool reuse) {
    const int n_ctx = session_.model().config().n_ctx, before = session_.n_cached();
    const int keep = int(std::min(n, size_t(n_ctx)));
    return observe(keep - 1, [&] {
        if (!session_.feed_prompt(ids, n, reuse)) return false;
        const int kept = session_.reused_tokens();
        const bool reusing = reuse && session_.uses_kv_cache();
        add_event(CacheEvent::kept, 0, kept);
        add_event(reusing ? CacheEvent::rolled_back : CacheEvent::cleared, kept, before - kept);
        add_event(CacheEvent::written, kept, keep - kept);
        return true;
    });
}

bool Inspector::feed_step(int32_t id) {
    const int n_ctx = session_.model().config().n_ctx, before = session_.n_cached();
    const bool slide = before == n_ctx;
    const int keep = slide_kept_tokens(n_ctx);
    const int last = slide ? keep - 1 : before;
    return observe(last, [&] {
        if (!session_.feed_step(id)) return false;
        if (slide) {
            add_event(CacheEvent::slid, 0, n_ctx - (keep - 1));
            add_event(CacheEvent::written, 0, keep);
        } else if (session_.uses_kv_cache()) {
            add_event(CacheEvent::written, before, 1);
        } else {  // the whole window again
            add_event(CacheEvent::cleared, 0, before);
            add_event(CacheEvent::written, 0, before + 1);
        }
        return true;
    });
}

int Inspector::sample() {
    if (n_positions_ == 0) {
        refuse("configure() first");
        return -1;
    }
    session_.sampler().set_trace(&trace_);
    const int token = session_.sample();
    session_.sampler().set_trace(nullptr);
    return token;
}

void Inspector::attention_done(const Model& model, RunState* s, int layer, int n, int pos0) {
    const int l = layer_slot_[layer];
    const Config& c = model.config();
    const int C = c.n_embd, hs = C / c.n_head;
    const size_t L = request_.layers.size(), H = request_.heads.size();
    for (int i = first_slot(pos0); i < n_positions_ && positions_[i] < pos0 + n; i++) {
        captured_[i] = 1;
        if (l < 0) continue;
        const int t = positions_[i] - pos0;
        for (size_t h = 0; h < H; h++) {
            const int head = request_.heads[h];
            const size_t at = (size_t(i) * L + size_t(l)) * H + h;
            attention_row_probabilities(c, s, layer, head, t, positions_[i], attention_.get() + at * row_stride_);
            const float* q = s->qkv + size_t(t) * 3 * C + size_t(head) * hs;
            float* norms = qkv_norms_.get() + at * 3;
            for (int j = 0; j < 3; j++) norms[j] = l2_norm(q + size_t(j) * C, hs);
        }
    }
}

void Inspector::block_done(const Model& model, RunState* s, int layer, Block block, int n, int pos0) {
    const int l = layer_slot_[layer];
    if (l < 0) return;
    const Config& c = model.config();
    const size_t L = request_.layers.size(), K = size_t(request_.top_k), C = size_t(c.n_embd);
    for (int i = first_slot(pos0); i < n_positions_ && positions_[i] < pos0 + n; i++) {
        const size_t t = size_t(positions_[i] - pos0), at = size_t(i) * L + size_t(l);
        float* norms = blocks_.get() + at * 3;
        if (block == Block::attention) {
            norms[0] = l2_norm(s->proj + t * C, int(C));
            continue;
        }
        norms[1] = l2_norm(s->proj + t * C, int(C));
        norms[2] = l2_norm(s->x + t * C, int(C));
        if (request_.logit_lens) residual_logits(model, s, int(t), lens_row_.get());
        TokenScore* top = lens_top_.get();
        const bool scored = request_.logit_lens && score_logits(lens_row_.get(), c.n_vocab, 0, int(K), nullptr, top);
        for (size_t k = 0; k < K; k++) {
            lens_tokens_[at * K + k] = scored ? top[k].token : -1;
            lens_logits_[at * K + k] = scored ? lens_row_[size_t(top[k].token)] : NAN;
            lens_probabilities_[at * K + k] = scored ? float(std::exp(top[k].logprob)) : NAN;
        }
    }
}

}  // namespace gpt2
