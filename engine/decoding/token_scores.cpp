// The model's distribution at one position (score_logits, decoding/scorer.h): the log-softmax of a row of logits, a
// token's rank, and the likeliest tokens.
#include <algorithm>
#include <cmath>

#include "decoding/scorer.h"
#include "kernels/ops.h"

namespace gpt2 {

bool score_logits(const float* logits, int n_vocab, int32_t token, int top_k, TokenScore* score,
                  TokenScore* alternatives) {
    if (n_vocab < 1 || top_k < 0 || top_k > n_vocab || (top_k > 0 && !alternatives) ||
        (score && (token < 0 || token >= n_vocab)))
        return false;
    if (first_non_finite(logits, size_t(n_vocab)) < size_t(n_vocab)) return false;
    const double log_z = log_sum_exp(logits, n_vocab);
    if (score) {
        int greater = 0;
        for (int v = 0; v < n_vocab; v++) greater += logits[v] > logits[token];
        *score = TokenScore{token, double(logits[token]) - log_z, greater + 1};
    }
    if (top_k == 0) return true;
    // A strict total order (lower id first on equal logits), so the top_k and their order are unique. The
    // alternatives are kept as a heap whose front is the least likely of them: O(n_vocab log top_k) for any top_k.
    auto likelier = [logits](const TokenScore& a, const TokenScore& b) {
        return logits[a.token] > logits[b.token] || (logits[a.token] == logits[b.token] && a.token < b.token);
    };
    for (int v = 0; v < top_k; v++) alternatives[v].token = v;
    std::make_heap(alternatives, alternatives + top_k, likelier);
    for (int v = top_k; v < n_vocab; v++) {
        if (!likelier(TokenScore{v, 0.0, 0}, alternatives[0])) continue;
        std::pop_heap(alternatives, alternatives + top_k, likelier);
        alternatives[top_k - 1].token = v;
        std::push_heap(alternatives, alternatives + top_k, likelier);
    }
    std::sort_heap(alternatives, alternatives + top_k, likelier);
    for (int i = 0; i < top_k; i++) {
        const float logit = logits[alternatives[i].token];
        alternatives[i].logprob = double(logit) - log_z;
        alternatives[i].rank = i > 0 && logits[alternatives[i - 1].token] == logit ? alternatives[i - 1].rank : i + 1;
    }
    return true;
}

}  // namespace gpt2
