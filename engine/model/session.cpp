// The Session (gpt2.h): token window, cache policy, the sampler, and the primitives the decoding modes run over.
#include <algorithm>
#include <cstring>
#include <new>

#include "gpt2.h"
#include "model/allocation.h"
#include "model/forward.h"
#include "model/sampler.h"

namespace gpt2 {

Session::~Session() = default;

const char* kv_cache_format_name(KvCacheFormat format) { return format == KvCacheFormat::int8 ? "int8" : "fp32"; }

bool parse_kv_cache_format(const std::string& name, KvCacheFormat* format) {
    for (KvCacheFormat f : {KvCacheFormat::fp32, KvCacheFormat::int8}) {
        if (name == kv_cache_format_name(f)) {
            *format = f;
            return true;
        }
    }
    return false;
}

std::unique_ptr<Session> Session::create(const Model& model, bool use_kv_cache, std::string* error) {
    return create(model, use_kv_cache, KvCacheFormat::fp32, error);
}

std::unique_ptr<Session> Session::create(const Model& model, bool use_kv_cache, KvCacheFormat kv_cache,
                                         std::string* error) {
    return create_session(model, use_kv_cache, kv_cache, false, error);
}

std::unique_ptr<Session> Session::create_recording(const Model& model, bool use_kv_cache, std::string* error) {
    return create_session(model, use_kv_cache, KvCacheFormat::fp32, true, error);
}

std::unique_ptr<Session> Session::create_session(const Model& model, bool use_kv_cache, KvCacheFormat kv_cache,
                                                 bool recording, std::string* error) {
    std::unique_ptr<Session> session(new (std::nothrow) Session());
    if (session) {
        session->state_.reset(new (std::nothrow) RunState());
        session->sampler_.reset(new (std::nothrow) Sampler());
    }
    if (!session || !session->state_ || !session->sampler_) {
        out_of_memory(sizeof(Session) + sizeof(RunState) + sizeof(Sampler), "the session", error);
        return nullptr;
    }
    if (!recording && !model.has_weights()) {
        if (error) *error = "the model's weights were released (a GPU holds them): only a recording session runs it";
        return nullptr;
    }
    if (!create_run_state(model.config(), kv_cache, recording, session->state_.get(), error)) return nullptr;
    if (!session->sampler_->init(model.config().n_vocab, error)) return nullptr;
    session->model_ = &model;
    session->use_kv_cache_ = use_kv_cache;
    return session;
}

bool Session::set_sampling(SamplingSettings s) {
    clear_error();
    if (sampler_->configure(std::move(s), &error_)) return true;
    error_kind_ = ErrorKind::input;
    return false;
}

const SamplingSettings& Session::sampling() const { return sampler_->settings(); }

const float* Session::logits() const { return state_->logits; }
float* Session::host_logits() { return state_->logits; }
bool Session::recording() const { return state_->recording; }
int Session::batch_rows() const { return state_->n_batch; }
const GpuCommand* Session::recorded_commands(int* n) const {
    *n = state_->n_commands;
    return state_->commands;
}
float* Session::recorded_all_logits() const { return state_->recorded_all_logits; }
void Session::reset() {
    n_cached_ = 0;
    reused_tokens_ = 0;
    n_generated_ = 0;
}
int Session::n_cached() const { return n_cached_; }
size_t Session::kv_cache_bytes() const { return state_->kv_cache_bytes; }
KvCacheFormat Session::kv_cache_format() const { return state_->kv_format; }
const std::string& Session::error() const { return error_; }

void Session::clear_error() {
    error_.clear();
    error_kind_ = ErrorKind::none;
}

void Session::report_error(ErrorKind kind, const std::string& message) {
    error_kind_ = kind;
    error_ = message;
}

const int32_t* Session::window() const { return state_->tokens; }
RunState& Session::run_state() { return *state_; }
const RunState& Session::run_state() const { return *state_; }

void Session::set_window(int n, int generated) {
    n_cached_ = n;
    n_generated_ = generated;
}

bool Session::check_ids(const int32_t* ids, size_t n) {
    const int n_vocab = model_->config().n_vocab;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            report_error(ErrorKind::input,
                         "token id " + std::to_string(ids[i]) + " out of range [0, " + std::to_string(n_vocab) + ")");
            return false;
        }
    }
    return true;
}

void Session::feed_from_scratch(const int32_t* ids, size_t n, float* all_logits) {
    if (ids != state_->tokens) std::memmove(state_->tokens, ids, sizeof(int32_t) * n);
    n_cached_ = int(n);
    forward(*model_, state_.get(), state_->tokens, int(n), 0, all_logits);
}

bool Session::check_prompt(const int32_t* ids, size_t n) {
    clear_error();
    if (n == 0) {
        report_error(ErrorKind::input, "empty prompt: prefill needs at least one token");
        return false;
    }
    return check_ids(ids, n);
}

int Session::prefill(const int32_t* ids, size_t n) {
    return refuse_recording("prefill") || !feed_prompt(ids, n, false) ? -1 : sample();
}

int Session::prefill_reusing(const int32_t* ids, size_t n) {
    return refuse_recording("prefill_reusing") || !feed_prompt(ids, n, true) ? -1 : sample();
}

bool Session::feed_prompt(const int32_t* ids, size_t n, bool reuse) {
    if (!check_prompt(ids, n)) return false;
    // A prompt longer than the context keeps its newest n_ctx tokens (the window is then full, and the first
    // step() slides it).
    const size_t n_ctx = size_t(model_->config().n_ctx);
    const size_t keep = n < n_ctx ? n : n_ctx;
    const int32_t* prompt = ids + (n - keep);
    reused_tokens_ = 0;
    n_generated_ = 0;
    if (!reuse || !use_kv_cache_) {  // an uncached session has no cache to keep
        feed_from_scratch(prompt, keep, nullptr);
        return true;
    }
    int32_t* tokens = state_->tokens;
    const size_t limit = std::min(size_t(n_cached_), keep - 1);
    size_t common = 0;
    while (common < limit && tokens[common] == prompt[common]) common++;
    std::memmove(tokens + common, prompt + common, sizeof(int32_t) * (keep - common));
    n_cached_ = int(keep);
    reused_tokens_ = int(common);
    forward(*model_, state_.get(), tokens + common, int(keep - common), int(common), nullptr);
    return true;
}

bool Session::refuse_recording(const char* method) {
    if (!state_->recording) return false;
    report_error(ErrorKind::input, std::string(method) + ": a recording session is fed by feed_step() and "
                                                         "feed_prompt(), and its host runs the forward pass");
    return true;
}

bool Session::prefill_logits(const int32_t* ids, size_t n, float* all_logits) {
    clear_error();
    const int n_ctx = model_->config().n_ctx;
    if (n == 0 || n > size_t(n_ctx)) {
        report_error(ErrorKind::input,
                     "prefill_logits: " + std::to_string(n) + " tokens, expected 1.." + std::to_string(n_ctx));
        return false;
    }
    if (!check_ids(ids, n)) return false;
    reused_tokens_ = 0;
    n_generated_ = 0;
    feed_from_scratch(ids, n, all_logits);
    return true;
}

int slide_kept_tokens(int n_ctx) { return n_ctx / 2 > 0 ? n_ctx / 2 : 1; }

int Session::step(int32_t id) { return refuse_recording("step") || !feed_step(id) ? -1 : sample(); }

bool Session::feed_step(int32_t id) {
    clear_error();
    if (!check_ids(&id, 1)) return false;
    const int n_ctx = model_->config().n_ctx;
    int32_t* tokens = state_->tokens;
    if (n_cached_ == n_ctx) {
        // Sliding window: keep the newest n_ctx / 2 tokens (the new one included) and re-prefill them, so
        // positions restart at 0 and the next n_ctx / 2 steps are cheap cached steps again.
        const int keep = slide_kept_tokens(n_ctx);
        std::memmove(tokens, tokens + (n_ctx - (keep - 1)), sizeof(int32_t) * (keep - 1));
        tokens[keep - 1] = id;
        feed_from_scratch(tokens, size_t(keep), nullptr);
    } else if (use_kv_cache_) {
        tokens[n_cached_] = id;
        forward(*model_, state_.get(), tokens + n_cached_, 1, n_cached_, nullptr);
        n_cached_++;
    } else {  // uncached: recompute the whole window through the batched path
        tokens[n_cached_] = id;
        feed_from_scratch(tokens, size_t(n_cached_ + 1), nullptr);
    }
    n_generated_++;
    return true;
}

int Session::sample() { return sample_from(state_->logits); }

int Session::sample_from(const float* logits) {
    clear_error();
    if (n_cached_ == 0) {
        report_error(ErrorKind::input, "sample: no token has been fed yet");
        return -1;
    }
    const int next = sampler_->sample(logits, state_->tokens, n_cached_, n_generated_, &error_);
    // all banned: the settings' doing (the sampler's message names them); non-finite logits, which finite weights
    // can still overflow to: the weights' doing
    if (next == Sampler::kAllBanned) {
        error_kind_ = ErrorKind::input;
    } else if (next < 0) {
        report_error(ErrorKind::file,
                     "the model produced non-finite logits (NaN/Inf) at position " + std::to_string(n_cached_ - 1));
    }
    return next < 0 ? -1 : next;
}

}  // namespace gpt2
