#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace gpt2 {

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void Rng::seed(uint64_t seed) {
    uint64_t z = seed;
    for (uint64_t& word : s_) {  // splitmix64: never yields the all-zero xoshiro state
        z += 0x9E3779B97F4A7C15ull;
        uint64_t v = z;
        v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
        v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
        word = v ^ (v >> 31);
    }
}

uint64_t Rng::next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

float Rng::next_float() { return float(next_u64() >> 40) * (1.0f / 16777216.0f); }

SamplingSettings sanitize_sampling(const SamplingSettings& in, int n_vocab) {
    SamplingSettings s = in;
    if (!(s.temperature > 0.0f) || !std::isfinite(s.temperature)) s.temperature = 0.0f;
    if (s.top_k <= 0 || s.top_k >= n_vocab) s.top_k = 0;
    if (std::isnan(s.top_p) || s.top_p >= 1.0f) s.top_p = 1.0f;
    if (s.top_p < 0.0f) s.top_p = 0.0f;
    if (!(s.repetition_penalty > 0.0f) || !std::isfinite(s.repetition_penalty)) s.repetition_penalty = 1.0f;
    return s;
}

Sampler::~Sampler() {
    std::free(scores_);
    std::free(candidates_);
    std::free(in_window_);
}

bool Sampler::init(int n_vocab, std::string* error) {
    n_vocab_ = n_vocab;
    scores_ = static_cast<float*>(std::malloc(sizeof(float) * n_vocab));
    candidates_ = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * n_vocab));
    in_window_ = static_cast<uint8_t*>(std::calloc(n_vocab, 1));
    if (!scores_ || !candidates_ || !in_window_) {
        if (error) *error = "out of memory: need " + std::to_string(9 * size_t(n_vocab)) + " bytes for the sampler";
        return false;
    }
    configure(SamplingSettings());
    return true;
}

void Sampler::configure(const SamplingSettings& settings) {
    settings_ = sanitize_sampling(settings, n_vocab_);
    rng_.seed(settings_.seed);
}

int Sampler::sample(const float* logits, const int32_t* window, int n_window, std::string* error) {
    const int V = n_vocab_;
    for (int i = 0; i < V; i++) {
        if (!std::isfinite(logits[i])) {
            if (error) *error = "logits contain nan or inf (token " + std::to_string(i) + ")";
            return -1;
        }
    }
    std::memcpy(scores_, logits, sizeof(float) * V);

    // CTRL repetition penalty, once per distinct token in the window
    const float penalty = settings_.repetition_penalty;
    if (penalty != 1.0f) {
        for (int i = 0; i < n_window; i++) {
            const int32_t id = window[i];
            if (in_window_[id]) continue;
            in_window_[id] = 1;
            scores_[id] = scores_[id] > 0.0f ? scores_[id] / penalty : scores_[id] * penalty;
        }
        for (int i = 0; i < n_window; i++) in_window_[window[i]] = 0;
    }

    if (settings_.temperature == 0.0f) {  // greedy: the first maximum wins, so ties go to the lowest id
        int best = 0;
        for (int i = 1; i < V; i++)
            if (scores_[i] > scores_[best]) best = i;
        return best;
    }

    // candidates: every token in id order, or the top k ordered by (score desc, id asc)
    const float* scores = scores_;
    auto more_likely = [scores](int32_t a, int32_t b) {
        return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
    };
    for (int i = 0; i < V; i++) candidates_[i] = i;
    int n = V;
    if (settings_.top_k > 0) {
        n = settings_.top_k;
        std::partial_sort(candidates_, candidates_ + n, candidates_ + V, more_likely);
    }

    // softmax over the candidates at the given temperature (scores_ becomes probabilities)
    float max = scores_[candidates_[0]];
    for (int i = 1; i < n; i++) max = std::max(max, scores_[candidates_[i]]);
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        const int32_t id = candidates_[i];
        scores_[id] = std::exp((scores_[id] - max) / settings_.temperature);
        sum += scores_[id];
    }
    for (int i = 0; i < n; i++) scores_[candidates_[i]] /= sum;

    float mass = 1.0f;
    if (settings_.top_p < 1.0f && n > 1) {
        // A token below (1 - top_p) / (n - 1) can never be in the nucleus (everything from it on sums to less
        // than 1 - top_p), so drop those before sorting (as llama2.c does).
        // The most likely token is always kept (with top_p near 0 the cutoff can exceed its probability).
        const float cutoff = (1.0f - settings_.top_p) / float(n - 1);
        int32_t best = candidates_[0];
        for (int i = 1; i < n; i++)
            if (more_likely(candidates_[i], best)) best = candidates_[i];
        int kept = 0;
        for (int i = 0; i < n; i++)
            if (scores_[candidates_[i]] >= cutoff || candidates_[i] == best) candidates_[kept++] = candidates_[i];
        std::sort(candidates_, candidates_ + kept, more_likely);
        // smallest prefix whose mass reaches top_p (at least one token)
        float cumulative = 0.0f;
        int last = kept - 1;
        for (int i = 0; i < kept; i++) {
            cumulative += scores_[candidates_[i]];
            if (cumulative >= settings_.top_p) {
                last = i;
                break;
            }
        }
        n = last + 1;
        mass = 0.0f;
        for (int i = 0; i < n; i++) mass += scores_[candidates_[i]];
    }

    // inverse CDF over the candidates in their (deterministic) order
    const float r = rng_.next_float() * mass;
    float cumulative = 0.0f;
    for (int i = 0; i < n; i++) {
        cumulative += scores_[candidates_[i]];
        if (r < cumulative) return candidates_[i];
    }
    return candidates_[n - 1];  // rounding: r landed at the very end
}

}  // namespace gpt2
