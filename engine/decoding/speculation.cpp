// Speculation (decoding/speculation.h): drafts verified in one batched pass over the session's run state, and
// prompt lookup.
#include "decoding/speculation.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "model/allocation.h"
#include "model/forward.h"

namespace gpt2 {

int Speculation::step(int32_t id, const int32_t* draft, int k, int32_t* out) {
    Session& s = session_;
    s.clear_error();
    if (s.refuse_recording("step_draft")) return -1;
    if (k < 0 || (k > 0 && !draft)) {
        s.report_error(ErrorKind::input, "step_draft: " + std::to_string(k) + " drafted tokens");
        return -1;
    }
    if (!s.check_ids(&id, 1) || !s.check_ids(draft, size_t(k))) return -1;
    const Config& c = s.model().config();
    k = std::min({k, kMaxDraftTokens, c.n_ctx - s.n_cached() - 1});
    verified_rows_ = 0;
    if (!s.uses_kv_cache() || k <= 0) {
        const int next = s.step(id);
        if (next >= 0) out[0] = next;
        return next < 0 ? -1 : 1;
    }
    const uint64_t values = uint64_t(kMaxDraftTokens + 1) * uint64_t(c.n_vocab);
    if (!logits_) logits_.reset(allocate_array<float>(values));
    if (!logits_) {
        s.report_error(ErrorKind::memory, out_of_memory_message(values * sizeof(float), "the drafts' logits"));
        return -1;
    }
    RunState& state = s.run_state();
    const int pos0 = s.n_cached();
    state.tokens[pos0] = id;
    std::memcpy(state.tokens + pos0 + 1, draft, sizeof(int32_t) * size_t(k));
    forward_body(s.model(), &state, state.tokens + pos0, k + 1, pos0);
    return verify(pos0, s.n_generated(), draft, k, out);
}

int Speculation::verify(int pos0, int generated0, const int32_t* draft, int k, int32_t* out) {
    Session& s = session_;
    RunState& state = s.run_state();
    const size_t V = size_t(s.model().config().n_vocab);
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
            forward_logits(s.model(), &state, i, n, logits_.get());
            rows_computed = i + n;
        }
        // position pos0 + i, fed: its logits, sampled over the window up to it as step() samples
        s.set_window(pos0 + i + 1, generated0 + i + 1);
        const float* row = logits_.get() + size_t(i) * V;
        const int next = s.sample_from(row);
        if (next >= 0) {
            out[i] = next;
            verified_rows_ = i + 1;
        }
        if (next < 0 || i == k || next != draft[i]) {
            drafts_accepted_ = i;
            // logits() is the last fed position's, as after step()
            std::memcpy(state.logits, row, sizeof(float) * V);
            return next < 0 ? -1 : i + 1;
        }
    }
    return k + 1;  // not reached: the last row always returns
}

const float* Speculation::verified_logits(int i) const {
    if (i == 0 && verified_rows_ == 0) return session_.logits();  // a step() that verified no draft: Session::step's
    return i >= 0 && i < verified_rows_ ? logits_.get() + size_t(i) * size_t(session_.model().config().n_vocab)
                                        : nullptr;
}

int Speculation::lookup_draft(int32_t id, int max_draft, int32_t* draft) const {
    const int32_t* window = session_.window();
    const int n_cached = session_.n_cached();
    const int n = n_cached + 1;  // the context: the window, then id
    auto at = [&](int i) { return i == n_cached ? id : window[i]; };
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

}  // namespace gpt2
