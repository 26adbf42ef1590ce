#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kernels/ops.h"
#include "model/allocation.h"

namespace gpt2 {

static const char kAllBannedMessage[] =
    "the sampling settings ban every token (logitBias, badWords, noRepeatNgramSize, minNewTokens)";

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

namespace {

// A setting as messages spell it: the shortest text that reads back as the same float ("0.1", "1e+38", "nan").
std::string number_text(float value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char text[32];
    for (int digits = 1; digits <= 9; digits++) {
        std::snprintf(text, sizeof text, "%.*g", digits, double(value));
        if (std::strtof(text, nullptr) == value) break;
    }
    return text;
}

// A logit adjustment's float result where it is finite or the token was banned already (-inf stays -inf); where
// finite settings overflowed it, the adjustment computed in double and clamped to the float range, so that a
// huge bonus makes a token certain and a huge penalty makes it never drawn, never inf or nan. Ordinary values
// keep the float result, bit for bit.
float adjusted(float result, float before, double exact) {
    if (std::isfinite(result)) return result;
    if (before == -INFINITY) return -INFINITY;
    return float(std::clamp(exact, -double(kMaxFloat), double(kMaxFloat)));
}

}  // namespace

bool check_sampling(const SamplingSettings& s, int n_vocab, std::string* error) {
    auto refuse = [error](const std::string& message) {
        if (error) *error = "sampling: " + message;
        return false;
    };
    auto in_unit = [](float x) { return x >= 0.0f && x <= 1.0f; };  // false for nan
    if (!(s.temperature >= 0.0f && std::isfinite(s.temperature)))
        return refuse("temperature " + number_text(s.temperature) + ", expected a finite number >= 0 (0: greedy)");
    if (s.top_k < 0) return refuse("top_k " + std::to_string(s.top_k) + ", expected >= 0 (0: every token)");
    if (!in_unit(s.top_p)) return refuse("top_p " + number_text(s.top_p) + ", expected a number in [0, 1] (1: off)");
    if (!(s.repetition_penalty > 0.0f && std::isfinite(s.repetition_penalty)))
        return refuse("repetition_penalty " + number_text(s.repetition_penalty) +
                      ", expected a finite number > 0 (1: off)");
    if (!in_unit(s.min_p)) return refuse("min_p " + number_text(s.min_p) + ", expected a number in [0, 1] (0: off)");
    if (!in_unit(s.typical_p))
        return refuse("typical_p " + number_text(s.typical_p) + ", expected a number in [0, 1] (1: off)");
    if (s.no_repeat_ngram_size < 0)
        return refuse("no_repeat_ngram_size " + std::to_string(s.no_repeat_ngram_size) + ", expected >= 0 (0: off)");
    if (!std::isfinite(s.presence_penalty))
        return refuse("presence_penalty " + number_text(s.presence_penalty) + ", expected a finite number");
    if (!std::isfinite(s.frequency_penalty))
        return refuse("frequency_penalty " + number_text(s.frequency_penalty) + ", expected a finite number");
    const std::string vocabulary = "[0, " + std::to_string(n_vocab) + ")";
    auto in_vocab = [n_vocab](int32_t id) { return id >= 0 && id < n_vocab; };
    for (const LogitBias& b : s.logit_bias) {
        if (!in_vocab(b.token))
            return refuse("logit_bias token " + std::to_string(b.token) + " is outside the vocabulary " + vocabulary);
        if (!(std::isfinite(b.bias) || b.bias == -INFINITY))
            return refuse("logit_bias " + number_text(b.bias) + " for token " + std::to_string(b.token) +
                          ", expected a finite number or -inf (a ban)");
    }
    for (size_t i = 0; i < s.bad_words.size(); i++) {
        const std::vector<int32_t>& word = s.bad_words[i];
        if (word.empty()) return refuse("bad_words entry " + std::to_string(i) + " is empty");
        for (int32_t id : word)
            if (!in_vocab(id))
                return refuse("bad_words entry " + std::to_string(i) + " has token " + std::to_string(id) +
                              ", outside the vocabulary " + vocabulary);
    }
    if (s.min_new_tokens < 0) return refuse("min_new_tokens " + std::to_string(s.min_new_tokens) + ", expected >= 0");
    if (s.eos_token < -1 || s.eos_token >= n_vocab)
        return refuse("eos_token " + std::to_string(s.eos_token) + ", expected -1 (none) or a token of " + vocabulary);
    return true;
}

Sampler::~Sampler() {
    std::free(scores_);
    std::free(surprise_gap_);
    std::free(candidates_);
    std::free(counts_);
    std::free(in_window_);
}

bool Sampler::init(int n_vocab, std::string* error) {
    n_vocab_ = n_vocab;
    scores_ = static_cast<float*>(std::malloc(sizeof(float) * n_vocab));
    surprise_gap_ = static_cast<float*>(std::malloc(sizeof(float) * n_vocab));
    candidates_ = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * n_vocab));
    counts_ = static_cast<int32_t*>(std::calloc(n_vocab, sizeof(int32_t)));
    in_window_ = static_cast<uint8_t*>(std::calloc(n_vocab, 1));
    if (!scores_ || !surprise_gap_ || !candidates_ || !counts_ || !in_window_) {
        return out_of_memory(17 * size_t(n_vocab), "the sampler", error);
    }
    configure(SamplingSettings());
    return true;
}

bool Sampler::configure(SamplingSettings settings, std::string* error) {
    if (!check_sampling(settings, n_vocab_, error)) return false;
    settings_ = std::move(settings);
    rng_.seed(settings_.seed);
    return true;
}

int Sampler::process(const float* logits, const int32_t* window, int n_window, int n_generated, std::string* error) {
    const int V = n_vocab_;
    const size_t non_finite = first_non_finite(logits, size_t(V));
    if (non_finite < size_t(V)) {
        if (error) *error = "logits contain nan or inf (token " + std::to_string(non_finite) + ")";
        return kNonFiniteLogits;
    }
    std::memcpy(scores_, logits, sizeof(float) * V);
    if (trace_) trace(SamplerTrace::logits, true, 0, true);
    for (const LogitBias& b : settings_.logit_bias) {
        const float before = scores_[b.token];
        // a -inf bias bans the token: its -inf is kept
        scores_[b.token] = b.bias == -INFINITY ? -INFINITY : adjusted(before + b.bias, before, double(before) + b.bias);
    }
    if (trace_) trace(SamplerTrace::logit_bias, !settings_.logit_bias.empty(), 0, true);

    // CTRL repetition penalty, once per distinct token in the window
    const float penalty = settings_.repetition_penalty;
    if (penalty != 1.0f) {
        for (int i = 0; i < n_window; i++) {
            const int32_t id = window[i];
            if (in_window_[id]) continue;
            in_window_[id] = 1;
            const float before = scores_[id];
            scores_[id] = before > 0.0f ? adjusted(before / penalty, before, double(before) / penalty)
                                        : adjusted(before * penalty, before, double(before) * penalty);
        }
        for (int i = 0; i < n_window; i++) in_window_[window[i]] = 0;
    }
    if (trace_) trace(SamplerTrace::repetition_penalty, penalty != 1.0f, 0, true);

    // OpenAI's presence and frequency penalties over the generated tokens: c * frequency + (c > 0) * presence
    if (settings_.presence_penalty != 0.0f || settings_.frequency_penalty != 0.0f) {
        const int first = n_window - std::min(n_generated, n_window);
        for (int i = first; i < n_window; i++) counts_[window[i]]++;
        for (int i = first; i < n_window; i++) {
            const int32_t id = window[i];
            if (counts_[id] == 0) continue;  // already penalized
            const float before = scores_[id];
            const float frequency = settings_.frequency_penalty, presence = settings_.presence_penalty;
            scores_[id] = adjusted(before - (float(counts_[id]) * frequency + presence), before,
                                   double(before) - (double(counts_[id]) * frequency + presence));
            counts_[id] = 0;
        }
    }
    if (trace_) {
        const bool on = settings_.presence_penalty != 0.0f || settings_.frequency_penalty != 0.0f;
        trace(SamplerTrace::presence_frequency_penalty, on, 0, true);
    }

    ban_repeated_ngrams(window, n_window);
    if (trace_) trace(SamplerTrace::no_repeat_ngram, settings_.no_repeat_ngram_size > 0, 0, true);
    ban_bad_words(window, n_window);
    if (trace_) trace(SamplerTrace::bad_words, !settings_.bad_words.empty(), 0, true);
    const bool hold_eos = n_generated < settings_.min_new_tokens && settings_.eos_token >= 0;
    if (hold_eos) scores_[settings_.eos_token] = -INFINITY;
    if (trace_) trace(SamplerTrace::min_new_tokens, hold_eos, 0, true);
    return 0;
}

// Bans each token that would complete an n-gram already in the window: n-grams whose first n - 1 tokens are the
// window's last n - 1 (for n = 1, every token of the window).
void Sampler::ban_repeated_ngrams(const int32_t* window, int n_window) {
    const int n = settings_.no_repeat_ngram_size;
    if (n == 0 || n_window < n) return;
    const int32_t* prefix = window + n_window - (n - 1);
    for (int i = 0; i + n <= n_window; i++) {
        if (std::equal(prefix, prefix + (n - 1), window + i)) scores_[window[i + n - 1]] = -INFINITY;
    }
}

// A bad word's last token is banned when the window ends with the rest of it (a one-token word: always).
void Sampler::ban_bad_words(const int32_t* window, int n_window) {
    for (const std::vector<int32_t>& word : settings_.bad_words) {
        const int before = int(word.size()) - 1;
        if (before <= n_window && std::equal(word.begin(), word.end() - 1, window + (n_window - before))) {
            scores_[word.back()] = -INFINITY;
        }
    }
}

int Sampler::argmax(std::string* error) const {  // the first maximum wins, so ties go to the lowest id
    const int best = gpt2::argmax(scores_, n_vocab_);
    if (scores_[best] != -INFINITY) return best;
    if (error) *error = kAllBannedMessage;
    return kAllBanned;
}

int Sampler::warp(std::string* error) {
    // candidates: every token not banned in id order, or the top k ordered by (score desc, id asc)
    const float* scores = scores_;
    auto more_likely = [scores](int32_t a, int32_t b) {
        return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
    };
    int n = 0;
    for (int i = 0; i < n_vocab_; i++)
        if (scores_[i] != -INFINITY) candidates_[n++] = i;
    if (n == 0) {
        if (error) *error = kAllBannedMessage;
        return kAllBanned;
    }
    const bool top_k = settings_.top_k > 0 && settings_.top_k < n;
    if (top_k) {
        std::partial_sort(candidates_, candidates_ + settings_.top_k, candidates_ + n, more_likely);
        n = settings_.top_k;
    }
    if (trace_) trace(SamplerTrace::top_k, top_k, n, false);

    // softmax over the candidates at the given temperature (scores_ becomes probabilities)
    float max = scores_[candidates_[0]];
    for (int i = 1; i < n; i++) max = std::max(max, scores_[candidates_[i]]);
    // every token a candidate (no top-k, none banned) is candidates_[i] == i: scores_ itself
    const float sum = exp_at(scores_, n == n_vocab_ ? nullptr : candidates_, n, max, settings_.temperature);
    for (int i = 0; i < n; i++) scores_[candidates_[i]] /= sum;
    if (trace_) trace(SamplerTrace::temperature, true, n, false);

    mass_ = 1.0f;
    const bool top_p = settings_.top_p < 1.0f && n > 1;
    if (top_p) {
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
        mass_ = 0.0f;
        for (int i = 0; i < n; i++) mass_ += scores_[candidates_[i]];
    }
    if (trace_) trace(SamplerTrace::top_p, top_p, n, false);
    if (settings_.min_p > 0.0f) n = keep_min_p(n);
    if (trace_) trace(SamplerTrace::min_p, settings_.min_p > 0.0f, n, false);
    if (settings_.typical_p < 1.0f) n = keep_typical(n);
    if (trace_) trace(SamplerTrace::typical_p, settings_.typical_p < 1.0f, n, false);
    return n;
}

// Keeps the candidates with at least min_p x the most likely one's probability (in their order).
int Sampler::keep_min_p(int n) {
    float top = 0.0f;
    for (int i = 0; i < n; i++) top = std::max(top, scores_[candidates_[i]]);
    const float threshold = settings_.min_p * top;
    int kept = 0;
    mass_ = 0.0f;
    for (int i = 0; i < n; i++) {
        const int32_t id = candidates_[i];
        if (scores_[id] < threshold) continue;
        candidates_[kept++] = id;
        mass_ += scores_[id];
    }
    return kept;
}

// Locally typical sampling: orders the candidates by how far their surprise (-log p, p renormalized) is from the
// distribution's entropy, and keeps the smallest such prefix whose mass reaches typical_p (at least one token).
int Sampler::keep_typical(int n) {
    float entropy = 0.0f;
    for (int i = 0; i < n; i++) {
        const float q = scores_[candidates_[i]] / mass_;
        if (q > 0.0f) entropy -= q * std::log(q);
    }
    for (int i = 0; i < n; i++) {
        const int32_t id = candidates_[i];
        const float q = scores_[id] / mass_;
        surprise_gap_[id] = q > 0.0f ? std::fabs(-std::log(q) - entropy) : INFINITY;
    }
    const float* gap = surprise_gap_;
    const float* p = scores_;
    std::sort(candidates_, candidates_ + n, [gap, p](int32_t a, int32_t b) {
        if (gap[a] != gap[b]) return gap[a] < gap[b];
        return p[a] != p[b] ? p[a] > p[b] : a < b;
    });
    const float target = settings_.typical_p * mass_;
    float cumulative = 0.0f;
    int kept = n;
    for (int i = 0; i < n; i++) {
        cumulative += scores_[candidates_[i]];
        if (cumulative >= target) {
            kept = i + 1;
            break;
        }
    }
    mass_ = 0.0f;
    for (int i = 0; i < kept; i++) mass_ += scores_[candidates_[i]];
    return kept;
}

int Sampler::sample(const float* logits, const int32_t* window, int n_window, int n_generated, std::string* error) {
    const int processed = process(logits, window, n_window, n_generated, error);
    if (processed < 0) return processed;
    if (settings_.temperature == 0.0f) {
        const int best = argmax(error);
        if (trace_ && best >= 0) {
            candidates_[0] = best;
            trace(SamplerTrace::greedy, true, 1, false);
            scores_[best] = 1.0f;  // one-hot: what greedy draws from
            trace(SamplerTrace::distribution, true, 1, false);
            trace_drawn(best, 1.0f, 0.0f);
        }
        return best;
    }
    const int n = warp(error);
    if (n < 0) return n;
    if (trace_) trace(SamplerTrace::distribution, true, n, false, mass_);
    // inverse CDF over the candidates in their (deterministic) order
    const float u = rng_.next_float(), r = u * mass_;
    int32_t drawn = candidates_[n - 1];  // rounding: r landed at the very end
    float cumulative = 0.0f;
    for (int i = 0; i < n; i++) {
        cumulative += scores_[candidates_[i]];
        if (r < cumulative) {
            drawn = candidates_[i];
            break;
        }
    }
    if (trace_) trace_drawn(drawn, scores_[drawn] / mass_, u);
    return drawn;
}

void Sampler::trace(SamplerTrace::Stage stage, bool on, int n, bool all_tokens, float divisor) {
    SamplerTrace& t = *trace_;
    if (stage == SamplerTrace::logits) {  // a new sample(): no stage has run yet
        std::fill(t.ran, t.ran + SamplerTrace::kStages, 0);
        t.token = -1;
    }
    t.ran[stage] = on;
    if (!on) return;
    const int top_n = t.top_n;
    int32_t* top = t.top + size_t(stage) * size_t(top_n);
    const float* scores = scores_;
    auto before = [scores](int32_t a, int32_t b) { return scores[a] != scores[b] ? scores[a] > scores[b] : a < b; };
    int count = 0, kept = 0;
    auto consider = [&](int32_t id) {  // insertion into the sorted top; candidates come in any order
        count++;
        if (kept == top_n && !before(id, top[kept - 1])) return;
        int i = kept < top_n ? kept++ : kept - 1;
        for (; i > 0 && before(id, top[i - 1]); i--) top[i] = top[i - 1];
        top[i] = id;
    };
    if (all_tokens) {
        for (int id = 0; id < n_vocab_; id++)
            if (scores_[id] != -INFINITY) consider(id);
    } else {
        for (int i = 0; i < n; i++) consider(candidates_[i]);
    }
    t.candidates[stage] = count;
    t.n_top[stage] = kept;
    float* values = t.values + size_t(stage) * size_t(top_n);
    for (int i = 0; i < kept; i++) values[i] = scores_[top[i]] / divisor;
}

void Sampler::trace_drawn(int32_t token, float probability, float draw) {
    trace_->token = token;
    trace_->probability = probability;
    trace_->draw = draw;
}

int Sampler::distribution(const float* logits, const int32_t* window, int n_window, int n_generated,
                          float* probabilities, std::string* error) {
    const int processed = process(logits, window, n_window, n_generated, error);
    if (processed < 0) return processed;
    std::memset(probabilities, 0, sizeof(float) * size_t(n_vocab_));
    if (settings_.temperature == 0.0f) {
        const int best = argmax(error);
        if (best < 0) return best;
        probabilities[best] = 1.0f;
        return 0;
    }
    const int n = warp(error);
    if (n < 0) return n;
    for (int i = 0; i < n; i++) probabilities[candidates_[i]] = scores_[candidates_[i]] / mass_;
    return 0;
}

int Sampler::beam_scores(const float* logits, const int32_t* window, int n_window, int n_generated, float* out,
                         std::string* error) {
    const int V = n_vocab_;
    const double log_z = log_sum_exp(logits, V);  // not finite for non-finite logits, which process() names
    for (int i = 0; i < V; i++) out[i] = float(double(logits[i]) - log_z);
    const int processed = process(out, window, n_window, n_generated, error);
    if (processed < 0) return processed;
    std::memcpy(out, scores_, sizeof(float) * size_t(V));
    if (settings_.temperature == 0.0f) return 0;
    const int n = warp(nullptr);  // kAllBanned: out is all -inf already
    for (int i = 0; i < n; i++) in_window_[candidates_[i]] = 1;
    const float temperature = settings_.temperature;
    for (int i = 0; i < V; i++)
        out[i] = in_window_[i] ? adjusted(out[i] / temperature, out[i], double(out[i]) / temperature) : -INFINITY;
    for (int i = 0; i < n; i++) in_window_[candidates_[i]] = 0;
    return 0;
}

}  // namespace gpt2
