// Token sampling: greedy, temperature, top-k, top-p (nucleus), CTRL repetition penalty, seeded RNG.
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

// Settings with invalid values replaced by their "off" meaning (see SamplingSettings).
SamplingSettings sanitize_sampling(const SamplingSettings& s, int n_vocab);

class Sampler {
   public:
    Sampler() = default;
    Sampler(const Sampler&) = delete;
    Sampler& operator=(const Sampler&) = delete;
    ~Sampler();

    // Allocates the per-vocabulary buffers once; "out of memory: ..." on failure.
    bool init(int n_vocab, std::string* error);
    void configure(const SamplingSettings& settings);  // sanitizes and reseeds
    const SamplingSettings& settings() const { return settings_; }

    // Picks the next token from logits (n_vocab), penalizing the tokens in window (n_window). Returns -1 and
    // sets *error if a logit is nan or infinite. Allocates nothing.
    int sample(const float* logits, const int32_t* window, int n_window, std::string* error);

   private:
    int n_vocab_ = 0;
    SamplingSettings settings_;
    Rng rng_;
    float* scores_ = nullptr;        // (n_vocab) penalized, temperature-scaled logits, then probabilities
    int32_t* candidates_ = nullptr;  // (n_vocab) token ids still in the running
    uint8_t* in_window_ = nullptr;   // (n_vocab) marks tokens already penalized in this call
};

}  // namespace gpt2
