// BeamSearch (decoding/beam_search.h): each step's continuations chosen or drawn, the hypotheses kept, and the next
// beams forked and fed in one batched pass.
#include "decoding/beam_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

#include "model/allocation.h"
#include "model/sampler.h"

namespace gpt2 {

namespace {

// The candidates' order: higher score first, then the lower (beam, token) pair, as the flat index beam x n_vocab +
// token orders them.
bool ranks_before(float score_a, int beam_a, int32_t token_a, float score_b, int beam_b, int32_t token_b) {
    if (score_a != score_b) return score_a > score_b;
    return beam_a != beam_b ? beam_a < beam_b : token_a < token_b;
}

// A beam's score plus a token's: where the float sum overflows (scores a huge logit bias or penalty made), the sum
// in double clamped to the float range, so that no candidate scores inf (and no weight becomes nan). A banned
// token's -inf stays -inf.
float add_scores(float beam, float token) {
    const float sum = beam + token;
    if (std::isfinite(sum) || beam == -INFINITY || token == -INFINITY) return sum;
    return float(std::clamp(double(beam) + double(token), -double(kMaxFloat), double(kMaxFloat)));
}

}  // namespace

std::unique_ptr<BeamSearch> BeamSearch::create(Session* const* sessions, const BeamSettings& settings,
                                               std::string* error, ErrorKind* kind) {
    const std::string refused = refusal(sessions, settings);
    if (!refused.empty()) {
        if (error) *error = "beam search: " + refused;
        if (kind) *kind = ErrorKind::input;
        return nullptr;
    }
    std::unique_ptr<BeamSearch> search(new (std::nothrow) BeamSearch());
    if (!search || !search->init(sessions, settings, error)) {
        if (!search) out_of_memory(sizeof(BeamSearch), "the beam search", error);
        if (kind) *kind = ErrorKind::memory;
        return nullptr;
    }
    return search;
}

std::string BeamSearch::refusal(Session* const* sessions, const BeamSettings& s) {
    if (s.num_beams < 2 || s.num_beams > kMaxBeams)
        return std::to_string(s.num_beams) + " beams, expected 2.." + std::to_string(kMaxBeams);
    if (!std::isfinite(s.length_penalty)) return "length_penalty must be finite";
    for (int i = 0; i < s.num_beams; i++) {
        const Session* session = sessions[i];
        if (!session || !session->uses_kv_cache() || session->recording())
            return "session " + std::to_string(i) + " is not a cached session";
        for (int j = 0; j < i; j++)
            if (sessions[j] == session) return "session " + std::to_string(i) + " is session " + std::to_string(j);
    }
    for (int i = 1; i < s.num_beams; i++)
        if (&sessions[i]->model() != &sessions[0]->model())
            return "session " + std::to_string(i) + " has another model";
    const Config& config = sessions[0]->model().config();
    // The beams' token buffers hold max_new_tokens each: bounded by the context, their size never follows whatever
    // number a caller gives.
    if (s.max_new_tokens < 1 || s.max_new_tokens > config.n_ctx)
        return "max_new_tokens " + std::to_string(s.max_new_tokens) + ", expected 1.." + std::to_string(config.n_ctx) +
               " (the model's context)";
    if (s.eos_token < -1 || s.eos_token >= config.n_vocab)
        return "eos_token " + std::to_string(s.eos_token) + " is outside the vocabulary (" +
               std::to_string(config.n_vocab) + " tokens)";
    return "";
}

bool BeamSearch::init(Session* const* sessions, const BeamSettings& settings, std::string* error) {
    std::copy(sessions, sessions + settings.num_beams, sessions_);
    settings_ = settings;
    n_vocab_ = sessions[0]->model().config().n_vocab;
    sampling_ = sessions[0]->sampling().temperature > 0.0f;
    // Counts in 64 bits: B <= kMaxBeams, T <= n_ctx and V are ints, so none of these products overflows
    // there, and allocate_array refuses what one allocation cannot hold.
    const uint64_t B = uint64_t(settings_.num_beams), T = uint64_t(settings_.max_new_tokens);
    const uint64_t BV = B * uint64_t(n_vocab_);
    rng_.reset(new (std::nothrow) Rng());
    scores_.reset(allocate_array<float>(BV));
    if (sampling_) weights_.reset(allocate_array<float>(BV));
    candidates_.reset(allocate_array<Candidate>(2 * B));
    tokens_.reset(allocate_array<int32_t>(2 * B * T));
    hypothesis_tokens_.reset(allocate_array<int32_t>((B + 1) * T));
    if (!rng_ || !scores_ || (sampling_ && !weights_) || !candidates_ || !tokens_ || !hypothesis_tokens_) {
        const uint64_t bytes = sizeof(Rng) + BV * sizeof(float) * (sampling_ ? 2 : 1) + 2 * B * sizeof(Candidate) +
                               (3 * B + 1) * T * sizeof(int32_t);
        return out_of_memory(bytes, "the beam search", error);
    }
    // the first session's settings, checked by it for this vocabulary: the beams' scores
    if (!sampler_.init(n_vocab_, error)) return false;  // "out of memory: need N bytes for the sampler"
    sampler_.configure(sessions_[0]->sampling());
    results_.reserve(size_t(B));
    return true;
}

BeamSearch::~BeamSearch() = default;

void BeamSearch::clear_error() {
    error_.clear();
    error_kind_ = ErrorKind::none;
}

bool BeamSearch::fail(const std::string& message, ErrorKind kind) {
    error_ = message;
    error_kind_ = kind;
    return false;
}

bool BeamSearch::start(const int32_t* ids, size_t n) {
    clear_error();
    Session& first = *sessions_[0];
    if (!first.feed_prompt(ids, n, /*reuse=*/true)) return fail(first.error(), first.error_kind());
    rng_->seed(first.sampling().seed);
    n_beams_ = 1;
    slot_[0] = 0;
    beam_score_[0] = 0.0f;
    n_generated_ = 0;
    tokens_half_ = 0;
    n_hypotheses_ = 0;
    worst_score_ = 1e9;
    added_ = 0;
    copied_rows_ = 0;
    results_.clear();
    done_ = false;
    return true;
}

const int32_t* BeamSearch::beam_tokens(int i) const {
    const size_t T = size_t(settings_.max_new_tokens), B = size_t(settings_.num_beams);
    return tokens_.get() + (size_t(tokens_half_) * B + size_t(i)) * T;
}

float BeamSearch::beam_score(int i) const { return beam_score_[i]; }

Session* BeamSearch::beam_session(int i) const { return sessions_[slot_[i]]; }

int BeamSearch::step() {
    clear_error();
    if (done_) return 0;
    for (int b = 0; b < n_beams_; b++)
        if (!score_beam(b)) return -1;
    const int n_candidates = sampling_ ? draw_candidates() : select_best();

    // Walk the continuations best first: an end-of-text among the first num_beams ends a hypothesis, the others
    // make the next beams (each first in its parent's session, next_slot; its tokens into the next half of tokens_).
    const int B = settings_.num_beams, T = settings_.max_new_tokens;
    int next_slot[kMaxBeams];
    float next_score[kMaxBeams];
    int32_t* next_tokens = tokens_.get() + size_t(1 - tokens_half_) * size_t(B) * size_t(T);
    int n_next = 0;
    for (int rank = 0; rank < n_candidates && n_next < B; rank++) {
        const Candidate& c = candidates_[rank];
        if (c.token == settings_.eos_token) {
            if (rank < B) add_hypothesis(beam_tokens(c.beam), n_generated_, c.score, n_generated_ + 1, true);
            continue;
        }
        int32_t* tokens = next_tokens + size_t(n_next) * size_t(T);
        std::memcpy(tokens, beam_tokens(c.beam), sizeof(int32_t) * size_t(n_generated_));
        tokens[n_generated_] = c.token;
        next_slot[n_next] = slot_[c.beam];
        next_score[n_next] = c.score;
        n_next++;
    }
    n_generated_++;

    const bool done = n_candidates > 0 && enough_hypotheses(candidates_[0].score);
    tokens_half_ = 1 - tokens_half_;
    for (int i = 0; i < n_next; i++) {
        beam_score_[i] = next_score[i];
        slot_[i] = next_slot[i];  // the parent's session, for now (feed_next_beams reassigns)
    }
    n_beams_ = n_next;
    if (!done && (n_generated_ == T || n_next == 0)) {
        finish();
        return 0;
    }
    if (done) {
        collect_results();
        return 0;
    }
    return feed_next_beams(n_next) ? 1 : -1;
}

bool BeamSearch::score_beam(int b) {
    const Session& session = *sessions_[slot_[b]];
    if (session.n_cached() == 0)
        return fail("beam " + std::to_string(b) + ": beam_scores: no token has been fed yet", ErrorKind::input);
    float* out = scores_.get() + size_t(b) * size_t(n_vocab_);
    if (sampler_.beam_scores(session.logits(), session.window(), session.n_cached(), session.n_generated(), out,
                             &error_) == 0)
        return true;
    // non-finite logits: the weights' doing, as in Session::sample()
    return fail("beam " + std::to_string(b) + ": the model produced non-finite logits (NaN/Inf) at position " +
                    std::to_string(session.n_cached() - 1),
                ErrorKind::file);
}

int BeamSearch::select_best() {
    const int keep = 2 * settings_.num_beams;
    const size_t V = size_t(n_vocab_);
    int n = 0;
    for (int b = 0; b < n_beams_; b++) {
        const float* scores = scores_.get() + size_t(b) * V;
        for (int32_t t = 0; t < int32_t(V); t++) {
            if (scores[t] == -INFINITY) continue;
            const float score = add_scores(beam_score_[b], scores[t]);
            // (beam, token) grows, so a candidate ranks before a later one of the same score
            if (n == keep && !(score > candidates_[n - 1].score)) continue;
            int at = n < keep ? n++ : keep - 1;
            while (at > 0 && score > candidates_[at - 1].score) {
                candidates_[at] = candidates_[at - 1];
                at--;
            }
            candidates_[at] = {b, t, score};
        }
    }
    return n;
}

int BeamSearch::draw_candidates() {
    const int keep = 2 * settings_.num_beams;
    const size_t V = size_t(n_vocab_), N = size_t(n_beams_) * V;
    float* weights = weights_.get();
    float max = -INFINITY;
    for (size_t i = 0; i < N; i++) max = std::max(max, add_scores(beam_score_[i / V], scores_[i]));
    if (max == -INFINITY) return 0;
    for (size_t i = 0; i < N; i++) weights[i] = std::exp(add_scores(beam_score_[i / V], scores_[i]) - max);
    // draws without replacement, each from what the earlier draws left
    int n = 0;
    while (n < keep) {
        double total = 0.0;
        for (size_t i = 0; i < N; i++) total += weights[i];
        if (total <= 0.0) break;
        const double r = double(rng_->next_float()) * total;
        double cumulative = 0.0;
        size_t chosen = N;
        for (size_t i = 0; i < N; i++) {
            if (weights[i] == 0.0f) continue;
            chosen = i;  // the last one with weight, should rounding leave r beyond the sum
            cumulative += weights[i];
            if (r < cumulative) break;
        }
        weights[chosen] = 0.0f;
        const int b = int(chosen / V);
        const int32_t t = int32_t(chosen % V);
        candidates_[n++] = {b, t, add_scores(beam_score_[b], scores_[chosen])};
    }
    std::sort(candidates_.get(), candidates_.get() + n, [](const Candidate& a, const Candidate& b) {
        return ranks_before(a.score, a.beam, a.token, b.score, b.beam, b.token);
    });
    return n;
}

void BeamSearch::add_hypothesis(const int32_t* tokens, int n, float sum, int length, bool ended_by_eos) {
    const int B = settings_.num_beams;
    const double score = double(sum) / std::pow(double(length), double(settings_.length_penalty));
    if (n_hypotheses_ >= B && !(score > worst_score_)) return;
    // a free row of hypothesis_tokens_: the one no kept hypothesis uses
    bool used[kMaxBeams + 1] = {};
    for (int i = 0; i < n_hypotheses_; i++) used[hypotheses_[i].slot] = true;
    int slot = 0;
    while (used[slot]) slot++;
    std::memcpy(hypothesis_tokens_.get() + size_t(slot) * size_t(settings_.max_new_tokens), tokens,
                sizeof(int32_t) * size_t(n));
    hypotheses_[n_hypotheses_++] = {score, slot, n, ended_by_eos, added_++};
    if (n_hypotheses_ > B) {  // drop the worst (the earliest of equal ones)
        int worst = 0;
        for (int i = 1; i < n_hypotheses_; i++)
            if (hypotheses_[i].score < hypotheses_[worst].score) worst = i;
        std::copy(hypotheses_ + worst + 1, hypotheses_ + n_hypotheses_, hypotheses_ + worst);
        n_hypotheses_--;
        worst_score_ = hypotheses_[0].score;
        for (int i = 1; i < n_hypotheses_; i++) worst_score_ = std::min(worst_score_, hypotheses_[i].score);
    } else {
        worst_score_ = std::min(score, worst_score_);
    }
}

bool BeamSearch::enough_hypotheses(float best) const {
    if (n_hypotheses_ < settings_.num_beams) return false;
    const double lp = double(settings_.length_penalty);
    switch (settings_.early_stopping) {
        case EarlyStopping::done: return true;
        case EarlyStopping::never:
            if (lp > 0.0) return worst_score_ >= double(best) / std::pow(double(settings_.max_new_tokens), lp);
            break;
        case EarlyStopping::heuristic: break;
    }
    return worst_score_ >= double(best) / std::pow(double(n_generated_), lp);
}

bool BeamSearch::feed_next_beams(int n_next) {
    // The first child of a parent keeps the parent's session; the others are forked into the sessions of beams
    // that had no child.
    bool taken[kMaxBeams] = {};
    int parent_slot[kMaxBeams];
    for (int i = 0; i < n_next; i++) {
        parent_slot[i] = slot_[i];
        if (taken[slot_[i]]) {
            slot_[i] = -1;
        } else {
            taken[slot_[i]] = true;
        }
    }
    for (int i = 0; i < n_next; i++) {
        if (slot_[i] >= 0) continue;
        int free = 0;
        while (taken[free]) free++;
        taken[free] = true;
        slot_[i] = free;
        Session& session = *sessions_[free];
        const int rows = Sequences::fork(session, *sessions_[parent_slot[i]]);
        if (rows < 0) return fail(session.error(), session.error_kind());
        copied_rows_ += rows;
    }
    // one batched pass for every beam
    Session* batch[kMaxBeams];
    int32_t ids[kMaxBeams];
    for (int i = 0; i < n_next; i++) {
        batch[i] = sessions_[slot_[i]];
        ids[i] = beam_tokens(i)[n_generated_ - 1];
    }
    return sequences_.feed(batch, ids, n_next) || fail(batch[0]->error(), batch[0]->error_kind());
}

void BeamSearch::finish() {
    if (done_) return;
    for (int i = 0; i < n_beams_; i++)
        add_hypothesis(beam_tokens(i), n_generated_, beam_score_[i], n_generated_, false);
    collect_results();
}

void BeamSearch::collect_results() {
    done_ = true;
    std::sort(hypotheses_, hypotheses_ + n_hypotheses_, [](const Hypothesis& a, const Hypothesis& b) {
        return a.score != b.score ? a.score > b.score : a.order > b.order;
    });
    results_.clear();
    for (int i = 0; i < n_hypotheses_; i++) {
        const Hypothesis& h = hypotheses_[i];
        const int32_t* tokens = hypothesis_tokens_.get() + size_t(h.slot) * size_t(settings_.max_new_tokens);
        results_.push_back({std::vector<int32_t>(tokens, tokens + h.n_tokens), float(h.score), h.ended_by_eos});
    }
}

}  // namespace gpt2
