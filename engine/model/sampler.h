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

// One sample() stage by stage, for an inspection (engine/inspection/): what the sampler set to trace it
// (Sampler::set_trace) writes, and without one does not compute. The owner sizes the arrays (top_n >= 1).
struct SamplerTrace {
    // The stages in the order sample() runs them (SamplingSettings): the raw logits, the processors, then greedy's
    // argmax or the warpers over the candidates, and the distribution drawn from.
    enum Stage : int32_t {
        logits,
        logit_bias,
        repetition_penalty,
        presence_frequency_penalty,
        no_repeat_ngram,
        bad_words,
        min_new_tokens,
        greedy,
        top_k,
        temperature,
        top_p,
        min_p,
        typical_p,
        distribution
    };
    static constexpr int kStages = distribution + 1;
    int top_n = 0;
    int32_t ran[kStages] = {};         // 1: the stage ran (its setting is on), 0: skipped, the rest of it unwritten
    int32_t candidates[kStages] = {};  // tokens still possible after the stage (not banned, not cut)
    int32_t n_top[kStages] = {};       // entries of the stage in top / values, min(top_n, candidates)
    int32_t* top = nullptr;            // (kStages, top_n) the stage's likeliest tokens, likeliest first (id on ties)
    float* values = nullptr;           // (kStages, top_n) theirs: scores (logits after the processors) up to top_k,
                                       // probabilities from temperature on, renormalized in distribution
    int32_t token = -1;                // what sample() returned
    float probability = 0.0f;          // the token's in the distribution (greedy: 1)
    float draw = 0.0f;                 // sampled: the uniform number in [0, 1) whose inverse CDF is the token
};

// The stages' names, in value order, as the JS API spells them (a processor or warper by its option's name).
inline constexpr const char* kSamplerStageNames[] = {"logits",
                                                     "logitBias",
                                                     "repetitionPenalty",
                                                     "presenceFrequencyPenalty",
                                                     "noRepeatNgramSize",
                                                     "badWords",
                                                     "minNewTokens",
                                                     "greedy",
                                                     "topK",
                                                     "temperature",
                                                     "topP",
                                                     "minP",
                                                     "typicalP",
                                                     "distribution"};
static_assert(sizeof(kSamplerStageNames) / sizeof(char*) == SamplerTrace::kStages, "a name for every stage");

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

    // sample() writes each stage to trace from now on (null: none, the default); trace must outlive that.
    void set_trace(SamplerTrace* trace) { trace_ = trace; }

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
    // trace_'s stage: on (ran), the best of candidates_[0, n) (null candidates: the tokens not at -inf in scores_),
    // valued as scores_ / divisor
    void trace(SamplerTrace::Stage stage, bool on, int n, bool all_tokens, float divisor = 1.0f);
    void trace_drawn(int32_t token, float probability, float draw);  // trace_'s token and why

    int n_vocab_ = 0;
    SamplingSettings settings_;
    Rng rng_;
    float* scores_ = nullptr;        // (n_vocab) processed, temperature-scaled logits, then probabilities
    float* surprise_gap_ = nullptr;  // (n_vocab) typical-p's |-log p - entropy| per candidate
    int32_t* candidates_ = nullptr;  // (n_vocab) token ids still in the running
    int32_t* counts_ = nullptr;      // (n_vocab) occurrences among the generated tokens, zero between calls
    uint8_t* in_window_ = nullptr;   // (n_vocab) marks of one call (tokens penalized; beam_scores' kept), zero between
    float mass_ = 1.0f;              // the candidates' probability after warp()
    SamplerTrace* trace_ = nullptr;  // set_trace's
};

}  // namespace gpt2
