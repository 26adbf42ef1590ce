// Beam search with Hugging Face's semantics (transformers' BeamSearchScorer and beam sampling; docs/api.md "Beam
// search"; tools/python/gpt2tools/reference_beam_search.py is the independent reference). Each step scores every
// running beam's next tokens (its beam scores, below) added to the beam's score, keeps the 2 x num_beams best
// continuations (with a temperature > 0, draws them without replacement from the softmax of those scores), and
// walks them best first: an end-of-text among the first num_beams ends a hypothesis (scored sum / length ^
// length_penalty, the end-of-text counted in the length), the others become the next beams until there are
// num_beams. The search is done when num_beams hypotheses exist and (early_stopping) that is enough, or no running
// beam can beat the worst of them, or max_new_tokens have been generated (the running beams then become
// hypotheses too).
// A beam's scores for its next tokens: the log-softmax of its session's logits(), then the logits processors
// (SamplingSettings steps 1-6, on log-probabilities as Hugging Face's beam search applies them) and, at a
// temperature > 0 (beam sampling), the warpers: a kept token's score divided by the temperature, the others -inf
// (Sampler::beam_scores).
// The beams live in the sessions given, one each, and are fed together in one batched pass per step
// (Sequences::feed). A beam that continues its parent takes over the parent's session; only a parent's second and
// later children are forked into sessions whose beams ended (Sequences::fork), and a fork copies only the cache
// rows after the two windows' common prefix. No step allocates but the first (the batched pass's logits) and the
// last (hypotheses()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "decoding/sequences.h"
#include "gpt2.h"
#include "model/sampler.h"

namespace gpt2 {

class BeamSearch {
   public:
    // sessions: num_beams distinct cached sessions of one model, not recording; the first one's sampling settings
    // give the logits processors, and a temperature > 0 beam sampling with the warpers and that seed.
    // nullptr + *error on invalid settings or sessions (ErrorKind::input) or for lack of memory (ErrorKind::memory,
    // "out of memory: need N bytes for the beam search"), the kind in *kind (if not null) so that a host need not
    // read it from the message. Every buffer's size is computed in 64 bits and bounded before it is allocated.
    static std::unique_ptr<BeamSearch> create(Session* const* sessions, const BeamSettings& settings,
                                              std::string* error, ErrorKind* kind = nullptr);
    ~BeamSearch();
    BeamSearch(const BeamSearch&) = delete;
    BeamSearch& operator=(const BeamSearch&) = delete;

    // Feeds the prompt to the first session (Session::prefill_reusing) and starts a search from it; false and
    // error() when it cannot be fed.
    bool start(const int32_t* ids, size_t n);
    // One step: 1 while running, 0 once done (hypotheses() holds the result), -1 and error() on a failure.
    int step();
    // Ends the search now, as if max_new_tokens were reached: the running beams become hypotheses.
    void finish();
    // Best first (ties: the later found first), at most num_beams; final once step() returned 0 or finish() ran.
    const std::vector<BeamHypothesis>& hypotheses() const { return results_; }
    int n_beams() const { return n_beams_; }           // running beams, best first
    int n_generated() const { return n_generated_; }   // tokens each running beam has generated
    const int32_t* beam_tokens(int i) const;           // (n_generated) beam i's tokens
    float beam_score(int i) const;                     // beam i's sum of beam scores
    Session* beam_session(int i) const;                // the session holding beam i's window
    long copied_rows() const { return copied_rows_; }  // KV-cache rows forks have copied so far
    const std::string& error() const { return error_; }
    ErrorKind error_kind() const { return error_kind_; }

   private:
    static constexpr int kMaxBeams = Sequences::kMaxSequences;
    struct Candidate {
        int beam;
        int32_t token;
        float score;
    };
    struct Hypothesis {
        double score;
        int slot;  // its tokens: hypothesis_tokens_ row
        int n_tokens;
        bool ended_by_eos;
        long order;  // when it was added
    };
    BeamSearch() = default;
    // why create() refuses the sessions or settings (without its "beam search: " prefix), or ""
    static std::string refusal(Session* const* sessions, const BeamSettings& settings);
    // takes the sessions and settings create() checked and allocates every buffer; false and *error (out of memory)
    bool init(Session* const* sessions, const BeamSettings& settings, std::string* error);
    bool score_beam(int b);  // scores_ row b <- beam b's scores for its next tokens; false and error() on a failure
    int select_best();       // candidates_ <- the best continuations; -> how many
    int draw_candidates();   // candidates_ <- continuations drawn by beam sampling; -> how many
    void add_hypothesis(const int32_t* tokens, int n, float sum, int length, bool ended_by_eos);
    bool enough_hypotheses(float best) const;  // the early-stopping test
    bool feed_next_beams(int n_next);          // reassigns the sessions to the next beams and feeds them
    void collect_results();
    void clear_error();  // error() empty and error_kind() none: each call that can fail starts with it
    bool fail(const std::string& message, ErrorKind kind);  // sets error(); false

    BeamSettings settings_;
    int n_vocab_ = 0;
    bool sampling_ = false;
    std::unique_ptr<Rng> rng_;
    Sampler sampler_;                    // the first session's settings: the beams' scores
    Sequences sequences_;                // the beams' batched pass
    Session* sessions_[kMaxBeams] = {};  // the sessions given
    int slot_[kMaxBeams] = {};           // beam i's session: sessions_[slot_[i]]
    float beam_score_[kMaxBeams] = {};
    int n_beams_ = 0;
    int n_generated_ = 0;
    bool done_ = true;
    std::unique_ptr<float[]> scores_;               // (num_beams, n_vocab) each beam's scores for its next tokens
    std::unique_ptr<float[]> weights_;              // (num_beams, n_vocab) beam sampling: exp(candidate score - max)
    std::unique_ptr<Candidate[]> candidates_;       // (2 * num_beams) the step's continuations, best first
    std::unique_ptr<int32_t[]> tokens_;             // (2, num_beams, max_new_tokens) the beams' tokens: this step's
                                                    // half and the next one's
    int tokens_half_ = 0;                           // which half is this step's
    std::unique_ptr<int32_t[]> hypothesis_tokens_;  // (num_beams + 1, max_new_tokens)
    Hypothesis hypotheses_[kMaxBeams + 1];
    int n_hypotheses_ = 0;
    double worst_score_ = 1e9;
    long added_ = 0;
    long copied_rows_ = 0;
    std::vector<BeamHypothesis> results_;
    std::string error_;
    ErrorKind error_kind_ = ErrorKind::none;
};

}  // namespace gpt2
