// Scorer (decoding/scorer.h): a text scored window by window, each window's rows of logits in passes of at most
// kScoreRows over the session's run state.
#include "decoding/scorer.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "model/allocation.h"
#include "model/forward.h"

namespace gpt2 {

bool Scorer::score(const int32_t* ids, size_t n, int top_k, TokenScore* scores, TokenScore* alternatives) {
    if (session_.refuse_recording("score")) return false;
    if (!begin(ids, n, top_k, scores, alternatives)) return false;
    for (;;) {
        const int fed = feed_pass();
        if (fed <= 0) return fed == 0;
        if (!score_fed_pass()) return false;
    }
}

bool Scorer::check(size_t n, int top_k) {
    session_.clear_error();
    const Config& c = session_.model().config();
    if (n < 2 || c.n_ctx < 2 || top_k < 0 || top_k > c.n_vocab) {
        session_.report_error(ErrorKind::input, n < 2 ? "score: needs at least 2 tokens, got " + std::to_string(n)
                                                : c.n_ctx < 2
                                                    ? "score: the model's context of " + std::to_string(c.n_ctx) +
                                                          " position is too short"
                                                    : "score: top_k " + std::to_string(top_k) + " out of range [0, " +
                                                          std::to_string(c.n_vocab) + "]");
        return false;
    }
    // (n - 1) x top_k, compared by a division that cannot overflow
    const uint64_t scored = uint64_t(n) - 1;
    if (top_k > 0 && scored > uint64_t(kMaxScoreAlternatives) / uint64_t(top_k)) {
        session_.report_error(ErrorKind::input, "score: top_k " + std::to_string(top_k) + " for " +
                                                    std::to_string(scored) + " scored tokens is more than " +
                                                    std::to_string(kMaxScoreAlternatives) +
                                                    " alternatives (the most one score returns)");
        return false;
    }
    return true;
}

bool Scorer::begin(const int32_t* ids, size_t n, int top_k, TokenScore* scores, TokenScore* alternatives) {
    run_ = Run{};
    if (!check(n, top_k) || !session_.check_ids(ids, n)) return false;
    const Config& c = session_.model().config();
    const uint64_t values = uint64_t(std::min(kScoreRows, c.n_ctx)) * uint64_t(c.n_vocab);
    if (!logits_) logits_.reset(allocate_array<float>(values));
    if (!logits_) {
        session_.report_error(ErrorKind::memory, out_of_memory_message(values * sizeof(float), "the scoring logits"));
        return false;
    }
    session_.reset();  // a new run: the windows replace the session's
    run_.ids = ids;
    run_.n = n;
    run_.top_k = alternatives ? top_k : 0;
    run_.scores = scores;
    run_.alternatives = alternatives;
    // as though a window ids[0, 1) were fed: the first feed_pass() begins the first window at ids[1]
    run_.end = 1;
    run_.next_row = 1;
    return true;
}

int Scorer::feed_pass() {
    session_.clear_error();
    Run& run = run_;
    if (!run.ids) {
        session_.report_error(ErrorKind::input,
                              "feed_score_pass: no score run is in progress (begin_score() starts one)");
        return -1;
    }
    if (run.next_row >= int(run.end - run.start)) {  // the window is fed: the next one, if any ids are left
        if (run.end >= run.n) {
            run.ids = nullptr;
            return 0;
        }
        if (next_window()) return 1;
    }
    RunState& state = session_.run_state();
    const int rows = std::min(kScoreRows, session_.model().config().n_ctx);
    const int count = std::min(rows, int(run.end - run.start) - run.next_row);
    forward(session_.model(), &state, state.tokens + run.next_row, count, run.next_row, logits_.get());
    run.pass_rows = count;
    run.next_row += count;
    session_.set_window(run.next_row, 0);  // the positions whose cache rows are written
    return 1;
}

bool Scorer::next_window() {
    Run& run = run_;
    const size_t n_ctx = size_t(session_.model().config().n_ctx), stride = n_ctx / 2;
    const size_t scored_to = run.end;
    run.start = run.n <= n_ctx ? 0 : std::min(run.next_window * stride, run.n - n_ctx);
    run.end = std::min(run.start + n_ctx, run.n);
    run.from = int(scored_to - run.start);
    run.next_window++;
    RunState& state = session_.run_state();
    std::memmove(state.tokens, run.ids + run.start, sizeof(int32_t) * (run.end - run.start));
    // positions before from - 1 only give context; the logits of from - 1 .. end - 1 predict the scored ids
    run.next_row = run.from - 1;
    run.pass_rows = 0;
    session_.set_window(run.next_row, 0);
    if (run.from <= 1) return false;
    forward(session_.model(), &state, state.tokens, run.from - 1, 0, nullptr);
    return true;
}

bool Scorer::score_fed_pass() {
    const Run& run = run_;
    const int V = session_.model().config().n_vocab;
    const int32_t* window = session_.window();
    const int size = int(run.end - run.start), row0 = run.next_row - run.pass_rows;
    for (int j = 0; j < run.pass_rows && row0 + j + 1 < size; j++) {
        const int row = row0 + j;
        const size_t at = run.start + size_t(row);  // index of the scored token ids[start + row + 1] in scores
        if (!score_logits(logits_.get() + size_t(j) * size_t(V), V, window[row + 1], run.top_k, run.scores + at,
                          run.alternatives ? run.alternatives + at * size_t(run.top_k) : nullptr)) {
            session_.report_error(ErrorKind::file,
                                  "the model produced non-finite logits (NaN/Inf) at position " + std::to_string(row));
            run_.ids = nullptr;
            return false;
        }
    }
    return true;
}

}  // namespace gpt2
