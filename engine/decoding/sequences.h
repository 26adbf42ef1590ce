// Several sequences from one prompt: a session forks another's window, and the sessions of one model are fed
// together, one token each, in one batched pass that reads the weights once for all.
#pragma once

#include <cstdint>
#include <memory>

#include "gpt2.h"

namespace gpt2 {

class Sequences {
   public:
    static constexpr int kMaxSequences = 16;

    Sequences() = default;
    Sequences(const Sequences&) = delete;
    Sequences& operator=(const Sequences&) = delete;

    // Makes `to` continue from `from`'s window: its tokens, positions, KV cache (copied, not recomputed), last
    // logits and count of generated tokens; the sampling settings stay to's. Both must be cached sessions of the
    // same model and KV-cache format, neither recording. Only the cache rows after the two windows' common prefix
    // are copied (a row depends on the tokens up to it alone, so those before are already equal). -> the rows
    // copied, or -1 and to.error().
    static int fork(Session& to, const Session& from);
    // Feeds ids[i] to sessions[i] (1 <= n <= kMaxSequences distinct sessions of one model, cached, fed, not
    // recording) in one batched pass, and samples each one's next token into out[i] as its Session::step() would,
    // bit for bit; a session whose window is full slides on its own as step() does. false on failure, with
    // sessions[0]->error() naming the sequence. The first pass allocates its logits here; later ones allocate
    // nothing (unless the vocabulary's size changes).
    bool step(Session* const* sessions, const int32_t* ids, int n, int32_t* out);
    // step() without the sampling: each session's logits() become its next position's.
    bool feed(Session* const* sessions, const int32_t* ids, int n);

   private:
    // feed() with its errors named after method
    bool feed_batch(Session* const* sessions, const int32_t* ids, int n, const char* method);

    std::unique_ptr<float[]> logits_;  // (kMaxSequences, logits_vocab_) the batched pass's rows, once one ran
    int logits_vocab_ = 0;
};

}  // namespace gpt2
