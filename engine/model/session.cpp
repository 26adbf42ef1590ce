// The Session (gpt2.h): token window, cache policy, sampling and scoring.
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

bool Session::check_ids(const int32_t* ids, size_t n) {
    const int n_vocab = model_->config().n_vocab;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            error_kind_ = ErrorKind::input;
            error_ = "token id " + std::to_string(ids[i]) + " out of range [0, " + std::to_string(n_vocab) + ")";
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
        error_kind_ = ErrorKind::input;
        error_ = "empty prompt: prefill needs at least one token";
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
    error_kind_ = ErrorKind::input;
    error_ = std::string(method) + ": a recording session is fed by feed_step() and feed_prompt(), and its host runs "
                                   "the forward pass";
    return true;
}

bool Session::prefill_logits(const int32_t* ids, size_t n, float* all_logits) {
    clear_error();
    const int n_ctx = model_->config().n_ctx;
    if (n == 0 || n > size_t(n_ctx)) {
        error_kind_ = ErrorKind::input;
        error_ = "prefill_logits: " + std::to_string(n) + " tokens, expected 1.." + std::to_string(n_ctx);
        return false;
    }
    if (!check_ids(ids, n)) return false;
    reused_tokens_ = 0;
    n_generated_ = 0;
    feed_from_scratch(ids, n, all_logits);
    return true;
}

bool Session::score(const int32_t* ids, size_t n, int top_k, TokenScore* scores, TokenScore* alternatives) {
    if (refuse_recording("score")) return false;
    if (!begin_score(ids, n, top_k, scores, alternatives)) return false;
    for (;;) {
        const int fed = feed_score_pass();
        if (fed <= 0) return fed == 0;
        if (!score_fed_pass()) return false;
    }
}

bool Session::check_score(size_t n, int top_k) {
    clear_error();
    const Config& c = model_->config();
    if (n < 2 || c.n_ctx < 2 || top_k < 0 || top_k > c.n_vocab) {
        error_kind_ = ErrorKind::input;
        error_ = n < 2 ? "score: needs at least 2 tokens, got " + std::to_string(n)
                 : c.n_ctx < 2
                     ? "score: the model's context of " + std::to_string(c.n_ctx) + " position is too short"
                     : "score: top_k " + std::to_string(top_k) + " out of range [0, " + std::to_string(c.n_vocab) + "]";
        return false;
    }
    // (n - 1) x top_k, compared by a division that cannot overflow
    const uint64_t scored = uint64_t(n) - 1;
    if (top_k > 0 && scored > uint64_t(kMaxScoreAlternatives) / uint64_t(top_k)) {
        error_kind_ = ErrorKind::input;
        error_ = "score: top_k " + std::to_string(top_k) + " for " + std::to_string(scored) +
                 " scored tokens is more than " + std::to_string(kMaxScoreAlternatives) +
                 " alternatives (the most one score returns)";
        return false;
    }
    return true;
}

bool Session::begin_score(const int32_t* ids, size_t n, int top_k, TokenScore* scores, TokenScore* alternatives) {
    score_run_ = ScoreRun{};
    if (!check_score(n, top_k)) return false;
    const Config& c = model_->config();
    if (!check_ids(ids, n)) return false;
    const int rows = std::min(kScoreRows, c.n_ctx);
    if (!score_logits_) {
        score_logits_.reset(allocate_array<float>(uint64_t(rows) * uint64_t(c.n_vocab)));
        if (!score_logits_) {
            error_kind_ = ErrorKind::memory;
            out_of_memory(uint64_t(rows) * uint64_t(c.n_vocab) * sizeof(float), "the scoring logits", &error_);
            return false;
        }
    }
    reused_tokens_ = 0;
    n_generated_ = 0;
    score_run_.ids = ids;
    score_run_.n = n;
    score_run_.top_k = alternatives ? top_k : 0;
    score_run_.scores = scores;
    score_run_.alternatives = alternatives;
    // as though a window ids[0, 1) were fed: the first feed_score_pass() begins the first window at ids[1]
    score_run_.end = 1;
    score_run_.next_row = 1;
    return true;
}

int Session::feed_score_pass() {
    clear_error();
    ScoreRun& run = score_run_;
    if (!run.ids) {
        error_kind_ = ErrorKind::input;
        error_ = "feed_score_pass: no score run is in progress (begin_score() starts one)";
        return -1;
    }
    const size_t n_ctx = size_t(model_->config().n_ctx), stride = n_ctx / 2;
    int32_t* tokens = state_->tokens;
    if (run.next_row >= int(run.end - run.start)) {  // the window is fed: the next one, if any ids are left
        const size_t scored_to = run.end;
        if (scored_to >= run.n) {
            run.ids = nullptr;
            return 0;
        }
        run.start = run.n <= n_ctx ? 0 : std::min(run.next_window * stride, run.n - n_ctx);
        run.end = std::min(run.start + n_ctx, run.n);
        run.from = int(scored_to - run.start);
        run.next_window++;
        std::memmove(tokens, run.ids + run.start, sizeof(int32_t) * (run.end - run.start));
        // positions before from - 1 only give context; the logits of from - 1 .. end - 1 predict the scored ids
        run.next_row = run.from - 1;
        run.pass_rows = 0;
        n_cached_ = run.next_row;
        if (run.from > 1) {
            forward(*model_, state_.get(), tokens, run.from - 1, 0, nullptr);
            return 1;
        }
    }
    const int rows = std::min(kScoreRows, int(n_ctx));
    const int count = std::min(rows, int(run.end - run.start) - run.next_row);
    forward(*model_, state_.get(), tokens + run.next_row, count, run.next_row, score_logits_.get());
    run.pass_rows = count;
    run.next_row += count;
    n_cached_ = run.next_row;  // the positions whose cache rows are written
    return 1;
}

bool Session::score_fed_pass() {
    const ScoreRun& run = score_run_;
    const int V = model_->config().n_vocab;
    const int window = int(run.end - run.start), row0 = run.next_row - run.pass_rows;
    for (int j = 0; j < run.pass_rows && row0 + j + 1 < window; j++) {
        const int row = row0 + j;
        const size_t at = run.start + size_t(row);  // index of the scored token ids[start + row + 1] in scores
        if (!score_logits(score_logits_.get() + size_t(j) * size_t(V), V, state_->tokens[row + 1], run.top_k,
                          run.scores + at, run.alternatives ? run.alternatives + at * size_t(run.top_k) : nullptr)) {
            error_kind_ = ErrorKind::file;
            error_ = "the model produced non-finite logits (NaN/Inf) at position " + std::to_string(row);
            score_run_.ids = nullptr;
            return false;
        }
    }
    return true;
}

int Session::step(int32_t id) { return refuse_recording("step") || !feed_step(id) ? -1 : sample(); }

bool Session::feed_step(int32_t id) {
    clear_error();
    if (!check_ids(&id, 1)) return false;
    const int n_ctx = model_->config().n_ctx;
    int32_t* tokens = state_->tokens;
    if (n_cached_ == n_ctx) {
        // Sliding window: keep the newest n_ctx / 2 tokens (the new one included) and re-prefill them, so
        // positions restart at 0 and the next n_ctx / 2 steps are cheap cached steps again.
        const int keep = n_ctx / 2 > 0 ? n_ctx / 2 : 1;
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

int Session::step_draft(int32_t id, const int32_t* draft, int k, int32_t* out) {
    clear_error();
    if (refuse_recording("step_draft")) return -1;
    if (k < 0 || (k > 0 && !draft)) {
        error_kind_ = ErrorKind::input;
        error_ = "step_draft: " + std::to_string(k) + " drafted tokens";
        return -1;
    }
    if (!check_ids(&id, 1) || !check_ids(draft, size_t(k))) return -1;
    const Config& c = model_->config();
    k = std::min({k, kMaxDraftTokens, c.n_ctx - n_cached_ - 1});
    verified_rows_ = 0;
    if (!use_kv_cache_ || k <= 0) {
        const int next = step(id);
        if (next >= 0) out[0] = next;
        return next < 0 ? -1 : 1;
    }
    const size_t V = size_t(c.n_vocab);
    if (!draft_logits_) {
        draft_logits_.reset(allocate_array<float>(uint64_t(kMaxDraftTokens + 1) * V));
        if (!draft_logits_) {
            error_kind_ = ErrorKind::memory;
            out_of_memory(uint64_t(kMaxDraftTokens + 1) * V * sizeof(float), "the drafts' logits", &error_);
            return -1;
        }
    }
    int32_t* tokens = state_->tokens;
    const int pos0 = n_cached_, generated0 = n_generated_;
    tokens[pos0] = id;
    std::memcpy(tokens + pos0 + 1, draft, sizeof(int32_t) * size_t(k));
    forward_body(*model_, state_.get(), tokens + pos0, k + 1, pos0);
    // The head is much of a row's cost (most of it on a small model), and a batch of rows reads its matrix once: the
    // first batch takes row 0 and as many drafts as the last verification accepted, the rest come in one batch once
    // those hold. The first batch has an even count of rows, at least two, where the drafts allow: the batched
    // products take their tokens in pairs, and a lone last token costs about what a pair does (measured in wasm on
    // the bundled model's head: 3 rows as long as 4, 5 as 6), while two rows read the matrix once, as one does.
    const int first = 1 + std::max(1, drafts_accepted_);
    const int first_batch = std::min(k + 1, first + first % 2);
    int rows_computed = 0;
    for (int i = 0; i <= k; i++) {
        if (i == rows_computed) {
            const int n = i == 0 ? first_batch : k + 1 - i;
            forward_logits(*model_, state_.get(), i, n, draft_logits_.get());
            rows_computed = i + n;
        }
        // position pos0 + i, fed: its logits, sampled over the window up to it as step() samples
        n_cached_ = pos0 + i + 1;
        n_generated_ = generated0 + i + 1;
        const float* row = draft_logits_.get() + size_t(i) * V;
        const int next = sample_from(row);
        if (next >= 0) {
            out[i] = next;
            verified_rows_ = i + 1;
        }
        if (next < 0 || i == k || next != draft[i]) {
            drafts_accepted_ = i;
            // logits() is the last fed position's, as after step()
            std::memcpy(state_->logits, row, sizeof(float) * V);
            return next < 0 ? -1 : i + 1;
        }
    }
    return k + 1;  // not reached: the last row always returns
}

bool Session::fork_from(const Session& other) {
    clear_error();
    if (refuse_recording("fork_from")) return false;
    if (other.model_ != model_ || !use_kv_cache_ || !other.use_kv_cache_ || other.state_->recording ||
        other.state_->kv_format != state_->kv_format) {
        error_kind_ = ErrorKind::input;
        error_ = "fork_from: the sessions differ in model, KV cache or KV-cache format";
        return false;
    }
    const Config& c = model_->config();
    // The cache rows of a position depend only on the tokens up to it, so the rows of the windows' common prefix
    // are already equal: only the rest is copied (beams that share most of their text copy little).
    const int32_t* from = other.state_->tokens;
    const int common =
        int(std::mismatch(from, from + std::min(n_cached_, other.n_cached_), state_->tokens).first - from);
    copy_kv_cache(c, *other.state_, state_.get(), common, other.n_cached_ - common);
    forked_rows_ = other.n_cached_ - common;
    std::memcpy(state_->tokens, from, sizeof(int32_t) * size_t(other.n_cached_));
    std::memcpy(state_->logits, other.state_->logits, sizeof(float) * size_t(c.n_vocab));
    n_cached_ = other.n_cached_;
    n_generated_ = other.n_generated_;
    reused_tokens_ = 0;
    return true;
}

bool Session::feed_sequences(Session* const* sessions, const int32_t* ids, int n) {
    return feed_batch(sessions, ids, n, "feed_sequences");
}

bool Session::feed_batch(Session* const* sessions, const int32_t* ids, int n, const char* method) {
    Session& first = *sessions[0];
    first.clear_error();
    auto fail = [&](int i, const std::string& message) {
        first.error_kind_ = i >= 0 ? sessions[i]->error_kind_ : ErrorKind::input;
        first.error_ = i >= 0 ? "sequence " + std::to_string(i) + ": " + message : method + (": " + message);
        return false;
    };
    if (n < 1 || n > kMaxSequences)
        return fail(-1, std::to_string(n) + " sequences, expected 1.." + std::to_string(kMaxSequences));
    const Model& model = *first.model_;
    const Config& c = model.config();
    RunState* caches[kMaxSequences];
    int32_t tokens[kMaxSequences];
    int positions[kMaxSequences], rows[kMaxSequences];  // rows: the sessions fed in the batched pass
    int n_rows = 0;
    for (int i = 0; i < n; i++) {
        Session& s = *sessions[i];
        if (s.model_ != &model || !s.use_kv_cache_ || s.state_->recording || s.n_cached_ == 0) {
            return fail(-1, "sequence " + std::to_string(i) + " is not a fed, cached session of the first's model");
        }
        for (int j = 0; j < i; j++)
            if (sessions[j] == &s)
                return fail(-1, "sequence " + std::to_string(i) + " is sequence " + std::to_string(j));
        if (!s.check_ids(ids + i, 1)) return fail(i, s.error_);
        if (s.n_cached_ == c.n_ctx) {  // a full window slides through step()'s own path
            if (!s.feed_step(ids[i])) return fail(i, s.error_);
            continue;
        }
        caches[n_rows] = s.state_.get();
        tokens[n_rows] = ids[i];
        positions[n_rows] = s.n_cached_;
        rows[n_rows++] = i;
    }
    if (n_rows == 0) return true;
    const size_t V = size_t(c.n_vocab);
    if (!first.sequence_logits_) {
        first.sequence_logits_.reset(allocate_array<float>(uint64_t(kMaxSequences) * V));
        if (!first.sequence_logits_) {
            first.error_kind_ = ErrorKind::memory;
            out_of_memory(uint64_t(kMaxSequences) * V * sizeof(float), "the sequences' logits", &first.error_);
            return false;
        }
    }
    forward_sequences(model, first.state_.get(), caches, tokens, positions, n_rows, first.sequence_logits_.get());
    for (int r = 0; r < n_rows; r++) {
        Session& s = *sessions[rows[r]];
        s.state_->tokens[s.n_cached_] = tokens[r];
        s.n_cached_++;
        s.n_generated_++;
        std::memcpy(s.state_->logits, first.sequence_logits_.get() + size_t(r) * V, sizeof(float) * V);
    }
    return true;
}

bool Session::step_sequences(Session* const* sessions, const int32_t* ids, int n, int32_t* out) {
    if (!feed_batch(sessions, ids, n, "step_sequences")) return false;
    for (int i = 0; i < n; i++) {
        out[i] = sessions[i]->sample();
        if (out[i] >= 0) continue;
        sessions[0]->error_kind_ = sessions[i]->error_kind_;
        sessions[0]->error_ = "sequence " + std::to_string(i) + ": " + sessions[i]->error_;
        return false;
    }
    return true;
}

const float* Session::verified_logits(int i) const {
    if (i == 0 && verified_rows_ == 0) return logits();  // a step_draft() that verified no draft: step()'s
    return i >= 0 && i < verified_rows_ ? draft_logits_.get() + size_t(i) * size_t(model_->config().n_vocab) : nullptr;
}

int Session::lookup_draft(int32_t id, int max_draft, int32_t* draft) const {
    const int32_t* window = state_->tokens;
    const int n = n_cached_ + 1;  // the context: the window, then id
    auto at = [&](int i) { return i == n_cached_ ? id : window[i]; };
    for (int size = std::min(kLookupMaxNgram, n - 1); size >= kLookupMinNgram; size--) {
        // the latest start s < n - size of the context's last `size` tokens
        for (int s = n - size - 1; s >= 0; s--) {
            int j = 0;
            while (j < size && at(s + j) == at(n - size + j)) j++;
            if (j < size) continue;
            // The draft continues the context as it went on after the match; where that reaches the context's end
            // it goes on with the draft itself, so that a repeating stretch (a loop of period p) drafts max_draft
            // tokens rather than p.
            int count = 0;
            for (; count < max_draft; count++) {
                const int from = s + size + count;
                draft[count] = from < n ? at(from) : draft[from - n];
            }
            return count;
        }
    }
    return 0;
}

int Session::sample() { return sample_from(state_->logits); }

int Session::sample_from(const float* logits) {
    clear_error();
    if (n_cached_ == 0) {
        error_kind_ = ErrorKind::input;
        error_ = "sample: no token has been fed yet";
        return -1;
    }
    const int next = sampler_->sample(logits, state_->tokens, n_cached_, n_generated_, &error_);
    if (next == Sampler::kAllBanned) {
        error_kind_ = ErrorKind::input;  // the settings' doing (the sampler's message names them)
    } else if (next < 0) {               // finite weights can still overflow to non-finite logits
        error_kind_ = ErrorKind::file;   // the weights' doing, not the caller's
        error_ = "the model produced non-finite logits (NaN/Inf) at position " + std::to_string(n_cached_ - 1);
    }
    return next < 0 ? -1 : next;
}

int Session::beam_scores(float* out) {
    clear_error();
    if (n_cached_ == 0) {
        error_kind_ = ErrorKind::input;
        error_ = "beam_scores: no token has been fed yet";
        return -1;
    }
    if (sampler_->beam_scores(state_->logits, state_->tokens, n_cached_, n_generated_, out, &error_) == 0) return 0;
    error_kind_ = ErrorKind::file;  // non-finite logits: the weights' doing, as in sample()
    error_ = "the model produced non-finite logits (NaN/Inf) at position " + std::to_string(n_cached_ - 1);
    return -1;
}

}  // namespace gpt2
