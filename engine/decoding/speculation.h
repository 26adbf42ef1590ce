// Speculative decoding over a Session: a batched pass verifies drafted tokens, and prompt lookup drafts them from
// the context itself. The text is always step()'s: speculation only changes how many passes it takes.
#pragma once

#include <cstdint>
#include <memory>

#include "gpt2.h"

namespace gpt2 {

class Speculation {
   public:
    static constexpr int kMaxDraftTokens = 16;
    static constexpr int kLookupMaxNgram = 3, kLookupMinNgram = 2;

    // session must outlive this; its errors are this one's (Session::error()).
    explicit Speculation(Session& session) : session_(session) {}
    Speculation(const Speculation&) = delete;
    Speculation& operator=(const Speculation&) = delete;

    // Session::step() for several tokens in one batched pass: feeds id and then the drafted tokens draft[0..k),
    // samples at each fed position in order as step() would, and stops at the first sample that is not the next
    // drafted token. Writes those samples to out (room for k + 1) and returns how many (m + 1 >= 1), or -1 and
    // Session::error() set: out[i] == draft[i] for i < m (accepted, and fed), out[m] the model's own token after
    // them (not fed, as step()'s result). The positions of the rejected drafts are rolled back. The tokens and the
    // sampler's state are bit-identical to m + 1 calls of step() (a row of a batched pass has a step's logits, and
    // each sample is the same draw). k is cut to the window's room and to kMaxDraftTokens; an uncached session,
    // and a full window (which slides), verify none. The first call that verifies drafts allocates their logits,
    // later ones allocate nothing.
    int step(int32_t id, const int32_t* draft, int k, int32_t* out);
    // (n_vocab) the logits out[i] of the last step() was sampled from (i < its count), valid until the session is
    // fed again; null out of range. The last one is Session::logits().
    const float* verified_logits(int i) const;
    // Prompt lookup: with id appended to the session's window, max_draft tokens into draft that continue the latest
    // earlier occurrence of its last n tokens, for n from kLookupMaxNgram down to kLookupMinNgram, as the context
    // went on after it, and past the context's end as the draft itself goes on (so a loop repeats). -> how many (0
    // when no such n-gram occurred before).
    int lookup_draft(int32_t id, int max_draft, int32_t* draft) const;

   private:
    // Samples the verification's rows in order until one differs from its draft; -> step()'s result.
    int verify(int pos0, int generated0, const int32_t* draft, int k, int32_t* out);

    Session& session_;
    std::unique_ptr<float[]> logits_;  // (kMaxDraftTokens + 1, n_vocab) once step() has verified drafts
    int verified_rows_ = 0;            // rows of logits_ the last step() sampled from
    int drafts_accepted_ = 0;          // drafts the last step() accepted: the size of its next first batch
};

}  // namespace gpt2
