// Token sampling: the logits processors (logit bias, repetition, presence and frequency penalties, n-gram, bad-word
// and end-of-text bans), then greedy or temperature, top-k, top-p, min-p, typical-p and a seeded draw
// (SamplingSettings gives the order).
// Same seed and settings give the same tokens on every platform: the RNG is xoshiro256** (integer only), the
// uniform float is built from its top 24 bits, and candidate orders are total (probability, then token id).
#pragma once

#include <cstdint>
#include <string>

#include "gpt2.h"

namespace gpt2 {

// xoshiro256** seeded through splitmix64.
class Rng {
   public:
    void seed(uint64_t seed);
    uint64_t next_u64();
    float next_float();  // uniform in [0, 1), 24 random bits

   private:
    uint64_t s_[4] = {0, 0, 0, 0};
};

// Whether every value of s is in its range (SamplingSettings) for a vocabulary of n_vocab tokens; false and *error
// (one line naming the first field out of range, e.g. "sampling: temperature nan, expected a finite number >= 0
// (0: greedy)") otherwise.
bool check_sampling(const SamplingSettings& s, int n_vocab, std::string* error);

class Sampler {
   public:
    Sampler() = default;
    Sampler(const Sampler&) = delete;
    Sampler& operator=(const Sampler&) = delete;
    ~Sampler();

    // Allocates the per-vocabulary buffers once; "out of memory: ..." on failure.
    bool init(int n_vocab, std::string* error);
    // Takes the settings and reseeds, or returns false (check_sampling's *error) and keeps the ones before.
    bool configure(SamplingSettings settings, std::string* error = nullptr);
    const SamplingSettings& settings() const { return settings_; }

    // What sample() and distribution() return besides a token.
    static constexpr int kNonFiniteLogits = -1;  // a logit is nan or infinite (*error names the token)
    static constexpr int kAllBanned = -2;        // the settings ban every token (*error says so)

    // Picks the next token from logits (n_vocab); window (n_window) is the context, its last n_generated tokens
    // (at most n_window) the run's own. Allocates nothing.
    int sample(const float* logits, const int32_t* window, int n_window, int n_generated, std::string* error);
    // The probabilities sample() draws from (n_vocab; 0 for the tokens it cannot pick, one-hot when greedy),
    // without drawing; 0 or one of the codes above.
    int distribution(const float* logits, const int32_t* window, int n_window, int n_generated, float* probabilities,
                     std::string* error);

    // What beam search adds to a beam's score (BeamSearch, decoding/): out (n_vocab) = the processors over the
    // log-softmax of logits and, at a temperature > 0, the warpers (kept tokens' scores / temperature, the rest
    // -inf). 0 or kNonFiniteLogits; a token of out may be -inf (banned), all of them too.
    int beam_scores(const float* logits, const int32_t* window, int n_window, int n_generated, float* out,
                    std::string* error);

   private:
    // The processors, logits -> scores_ (banned tokens at -inf); kNonFiniteLogits or 0.
    int process(const float* logits, const int32_t* window, int n_window, int n_generated, std::string* error);
    void ban_repeated_ngrams(const int32_t* window, int n_window);
    void ban_bad_words(const int32_t* window, int n_window);
    int argmax(std::string* error) const;  // the first maximum of scores_, or kAllBanned (*error says so)
    // The warpers over scores_: candidates_[0, n) in draw order with their probabilities in scores_ summing to
    // mass_ (not renormalized); returns n, or kAllBanned.
    int warp(std::string* error);
    int keep_min_p(int n);
    int keep_typical(int n);

    int n_vocab_ = 0;
    SamplingSettings settings_;
    Rng rng_;
    float* scores_ = nullptr;        // (n_vocab) processed, temperature-scaled logits, then probabilities
    float* surprise_gap_ = nullptr;  // (n_vocab) typical-p's |-log p - entropy| per candidate
    int32_t* candidates_ = nullptr;  // (n_vocab) token ids still in the running
    int32_t* counts_ = nullptr;      // (n_vocab) occurrences among the generated tokens, zero between calls
    uint8_t* in_window_ = nullptr;   // (n_vocab) marks of one call (tokens penalized; beam_scores' kept), zero between
    float mass_ = 1.0f;              // the candidates' probability after warp()
};

}  // namespace gpt2
