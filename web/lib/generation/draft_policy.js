// How many tokens speculative decoding drafts at each step (generate.js), adapted to how the drafts fare, within
// [1, max]: twice as many after a draft kept whole, and after a rejection one more than the rejected draft kept,
// the best guess of how far the text is predicted now (every drafted token costs its row of the batched pass, and
// a verification its rows up to the first rejected one). With a back-off: after a draft of which nothing was kept,
// the next 1, 2, 4 … 16 steps draft nothing (doubling while drafts keep failing, back to 1 once one holds), so that
// text the context does not predict, sampled text mostly, costs few verifications that come to nothing. On the
// benchmark's prompt-lookup texts it verifies a fifth fewer drafts than Hugging Face's heuristic for assistant
// models (two more after a draft kept whole, one fewer after a rejection) and keeps about as many. Plain ES module.

const FIRST_LENGTH = 4;
const MAX_BACKOFF = 16;

export class DraftPolicy {
  #length;
  #max;
  #skip = 0;  // steps left that draft nothing
  #backoff = 1;  // the steps to skip after the next draft that comes to nothing

  // max: the most tokens a draft may have (speculative.maxDraftTokens)
  constructor(max) {
    this.#max = max;
    this.#length = Math.min(FIRST_LENGTH, max);
  }

  // -> how many tokens to draft at this step, at most room (0: a plain step)
  draftLength(room) {
    if (this.#skip > 0) {
      this.#skip--;
      return 0;
    }
    return Math.max(0, Math.min(this.#length, room));
  }

  // After a verification of `drafted` tokens, of which the first `accepted` were kept.
  update(drafted, accepted) {
    if (drafted === 0) return;  // nothing was looked up, or nothing found: no evidence
    this.#length = Math.min(accepted === drafted ? 2 * this.#length : accepted + 1, this.#max);
    if (accepted > 0) {
      this.#backoff = 1;
    } else {
      this.#skip = this.#backoff;
      this.#backoff = Math.min(2 * this.#backoff, MAX_BACKOFF);
    }
  }
}
