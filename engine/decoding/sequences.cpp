// Sequences (decoding/sequences.h): forks by copying KV-cache rows, and one batched pass over several sessions'
// caches.
#include "decoding/sequences.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "model/allocation.h"
#include "model/forward.h"

namespace gpt2 {

int Sequences::fork(Session& to, const Session& from) {
    to.clear_error();
    if (to.refuse_recording("fork_from")) return -1;
    if (&from.model() != &to.model() || !to.uses_kv_cache() || !from.uses_kv_cache() || from.recording() ||
        from.kv_cache_format() != to.kv_cache_format()) {
        to.report_error(ErrorKind::input, "fork_from: the sessions differ in model, KV cache or KV-cache format");
        return -1;
    }
    const Config& c = to.model().config();
    const int32_t* tokens = from.window();
    const int n = from.n_cached();
    const int common = int(std::mismatch(tokens, tokens + std::min(to.n_cached(), n), to.window()).first - tokens);
    RunState& state = to.run_state();
    copy_kv_cache(c, from.run_state(), &state, common, n - common);
    std::memcpy(state.tokens, tokens, sizeof(int32_t) * size_t(n));
    std::memcpy(state.logits, from.logits(), sizeof(float) * size_t(c.n_vocab));
    to.reset();  // a new run: nothing of it was reused
    to.set_window(n, from.n_generated());
    return n - common;
}

bool Sequences::feed(Session* const* sessions, const int32_t* ids, int n) {
    return feed_batch(sessions, ids, n, "feed_sequences");
}

bool Sequences::step(Session* const* sessions, const int32_t* ids, int n, int32_t* out) {
    if (!feed_batch(sessions, ids, n, "step_sequences")) return false;
    for (int i = 0; i < n; i++) {
        out[i] = sessions[i]->sample();
        if (out[i] >= 0) continue;
        sessions[0]->report_error(sessions[i]->error_kind(),
                                  "sequence " + std::to_string(i) + ": " + sessions[i]->error());
        return false;
    }
    return true;
}

bool Sequences::feed_batch(Session* const* sessions, const int32_t* ids, int n, const char* method) {
    Session& first = *sessions[0];
    first.clear_error();
    auto fail = [&](int i, const std::string& message) {
        first.report_error(i >= 0 ? sessions[i]->error_kind() : ErrorKind::input,
                           i >= 0 ? "sequence " + std::to_string(i) + ": " + message : method + (": " + message));
        return false;
    };
    if (n < 1 || n > kMaxSequences)
        return fail(-1, std::to_string(n) + " sequences, expected 1.." + std::to_string(kMaxSequences));
    const Model& model = first.model();
    const Config& c = model.config();
    RunState* caches[kMaxSequences];
    int32_t tokens[kMaxSequences];
    int positions[kMaxSequences], rows[kMaxSequences];  // rows: the sessions fed in the batched pass
    int n_rows = 0;
    for (int i = 0; i < n; i++) {
        Session& s = *sessions[i];
        if (&s.model() != &model || !s.uses_kv_cache() || s.recording() || s.n_cached() == 0)
            return fail(-1, "sequence " + std::to_string(i) + " is not a fed, cached session of the first's model");
        for (int j = 0; j < i; j++)
            if (sessions[j] == &s)
                return fail(-1, "sequence " + std::to_string(i) + " is sequence " + std::to_string(j));
        if (!s.check_ids(ids + i, 1)) return fail(i, s.error());
        if (s.n_cached() == c.n_ctx) {  // a full window slides through step()'s own path
            if (!s.feed_step(ids[i])) return fail(i, s.error());
            continue;
        }
        caches[n_rows] = &s.run_state();
        tokens[n_rows] = ids[i];
        positions[n_rows] = s.n_cached();
        rows[n_rows++] = i;
    }
    if (n_rows == 0) return true;
    const size_t V = size_t(c.n_vocab);
    if (logits_vocab_ != c.n_vocab) {
        logits_.reset(allocate_array<float>(uint64_t(kMaxSequences) * V));
        logits_vocab_ = logits_ ? c.n_vocab : 0;
    }
    if (!logits_) {
        first.report_error(ErrorKind::memory,
                           out_of_memory_message(uint64_t(kMaxSequences) * V * sizeof(float), "the sequences' logits"));
        return false;
    }
    forward_sequences(model, &first.run_state(), caches, tokens, positions, n_rows, logits_.get());
    for (int r = 0; r < n_rows; r++) {
        Session& s = *sessions[rows[r]];
        RunState& state = s.run_state();
        state.tokens[s.n_cached()] = tokens[r];
        std::memcpy(state.logits, logits_.get() + size_t(r) * V, sizeof(float) * V);
        s.set_window(s.n_cached() + 1, s.n_generated() + 1);
    }
    return true;
}

}  // namespace gpt2
