// Scoring a text over a Session: each token's log-probability and rank given the tokens before it, and the
// likeliest alternatives there, for texts of any length (windows of the context); and one position's distribution
// from its row of logits (score_logits), which scoring and a host's tooltip both read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gpt2.h"

namespace gpt2 {

// One scored token: its log-probability (log-softmax of the raw logits, temperature 1, no penalty, computed in
// double) and its rank (1 + the number of tokens with a strictly greater logit).
struct TokenScore {
    int32_t token;
    double logprob;
    int32_t rank;
};

// The model's distribution at one position from its row of logits (n_vocab), as Scorer::score gives it: *score
// (if not null) is token's TokenScore, token in [0, n_vocab); alternatives (top_k) the top_k likeliest tokens,
// likeliest first (lower id first on equal logits, which share a rank), top_k in [0, n_vocab] (alternatives may be
// null for 0). false, and nothing written, if an argument is out of range or a logit is not finite.
bool score_logits(const float* logits, int n_vocab, int32_t token, int top_k, TokenScore* score,
                  TokenScore* alternatives);

class Scorer {
   public:
    // Rows of logits one scoring pass computes at most, into one scratch buffer (allocated by the first run, then
    // reused), so that memory does not grow with n_ctx x n_vocab.
    static constexpr int kScoreRows = 64;
    // The most alternatives one score() returns, scored tokens x top_k (2^22: 96 MiB of TokenScores, and more in
    // the JS objects a host makes of them), so that what a caller asks for is bounded before it is allocated.
    static constexpr int kMaxScoreAlternatives = 4194304;

    // session must outlive this; its errors are this one's (Session::error()).
    explicit Scorer(Session& session) : session_(session) {}
    Scorer(const Scorer&) = delete;
    Scorer& operator=(const Scorer&) = delete;

    // Scores ids[1..n) (n >= 2): scores[i - 1] is ids[i] given ids[..i), and alternatives[(i - 1) * top_k ..] the
    // top_k likeliest tokens there, likeliest first (lower id first on equal logits), top_k in [0, n_vocab] and
    // (n - 1) x top_k at most kMaxScoreAlternatives (alternatives may be null, then none are computed).
    // Texts longer than n_ctx run in windows of n_ctx tokens with a stride of n_ctx / 2: window k starts at
    // min(k * stride, n - n_ctx) and scores the ids that no earlier window scored, so that every token past the
    // first window has at least n_ctx - stride tokens of context; the first window [0, n_ctx) scores ids[1..n_ctx),
    // the last one ends at n. In a window the already-scored part is fed without logits, the rest in passes of at
    // most kScoreRows rows of logits. The session's window is left holding the last window (prefill_reusing may
    // reuse it). Sampling settings play no part. false and Session::error() on failure.
    bool score(const int32_t* ids, size_t n, int top_k, TokenScore* scores, TokenScore* alternatives);
    // Whether score() takes n ids with top_k alternatives each (n >= 2, top_k in [0, n_vocab], (n - 1) x top_k at
    // most kMaxScoreAlternatives); false and Session::error() (ErrorKind::input) otherwise: a host checks before it
    // allocates what score() fills.
    bool check(size_t n, int top_k);
    // score() pass by pass, for the host of a recording session, which runs each pass itself: begin() checks the
    // arguments as score() does and keeps them (ids, scores and alternatives must outlive the run); then, until it
    // returns 0, feed_pass() feeds the next forward pass (1) and, once the host has run it and written its rows of
    // logits to Session::recorded_all_logits() (a pass of context only has none), score_fed_pass() scores them.
    // score() is the same loop with the passes run here. -1 / false and Session::error() on a failure, which ends
    // the run.
    bool begin(const int32_t* ids, size_t n, int top_k, TokenScore* scores, TokenScore* alternatives);
    int feed_pass();
    bool score_fed_pass();

   private:
    // A run in progress (begin() to the feed_pass() that returns 0): the window being scored is ids[start, end), of
    // which ids[start + from, end) are scored; window row r predicts ids[start + r + 1], whose score is
    // scores[start + r].
    struct Run {
        const int32_t* ids = nullptr;  // (n) null when no run is in progress
        size_t n = 0;
        int top_k = 0;
        TokenScore* scores = nullptr;        // (n - 1)
        TokenScore* alternatives = nullptr;  // (n - 1, top_k) or null
        size_t next_window = 0;              // index of the window after this one
        size_t start = 0, end = 0;           // the window
        int from = 0;                        // the window's index of its first scored id
        int next_row = 0;                    // the window's first row not yet fed
        int pass_rows = 0;                   // rows of logits of the pass fed last, ending at next_row (0: context)
    };
    bool next_window();  // feeds the next window's context (true: a pass was fed), once the window is done

    Session& session_;
    std::unique_ptr<float[]> logits_;  // (kScoreRows, n_vocab) once a run has begun
    Run run_;
};

}  // namespace gpt2
