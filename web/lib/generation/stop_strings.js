// Stop strings over a stream of pieces (generate's `stop` option). Plain ES module.

// Holds back pieces whose text could be the beginning of a stop string; once a stop string appears, releases
// the text before it and drops the rest. Pieces are never split except the one a stop string starts in.
export class StopStringFilter {
  #stops;
  #held = [];

  constructor(stops) {
    this.#stops = stops;
  }

  // -> { pieces: released pieces, stopped: whether a stop string was found }
  push(piece) {
    this.#held.push(piece);
    if (this.#stops.length === 0) return { pieces: this.#release(this.#held.length), stopped: false };
    const text = this.#held.map((p) => p.text).join('');
    const stopAt = this.#earliestStop(text);
    if (stopAt >= 0) return { pieces: this.#truncateAt(stopAt), stopped: true };
    const safeLength = text.length - this.#longestStopPrefixSuffix(text);
    let count = 0;
    for (let end = 0; count < this.#held.length; count++) {
      end += this.#held[count].text.length;
      if (end > safeLength) break;
    }
    return { pieces: this.#release(count), stopped: false };
  }

  // Releases whatever is held at the end of generation; remaining text (e.g. an incomplete UTF-8 sequence
  // from the decoder's flush) joins the last held piece, or comes as a piece without a token.
  finish(remainingText) {
    if (remainingText) {
      const last = this.#held.at(-1);
      if (last) last.text += remainingText;
      else this.#held.push({ text: remainingText, token: null, position: null, ms: 0 });
    }
    return this.#release(this.#held.length);
  }

  #release(count) {
    return this.#held.splice(0, count);
  }

  #earliestStop(text) {
    let earliest = -1;
    for (const stop of this.#stops) {
      const at = text.indexOf(stop);
      if (at >= 0 && (earliest < 0 || at < earliest)) earliest = at;
    }
    return earliest;
  }

  #longestStopPrefixSuffix(text) {
    let longest = 0;
    for (const stop of this.#stops) {
      for (let length = Math.min(stop.length - 1, text.length); length > longest; length--) {
        if (text.endsWith(stop.slice(0, length))) {
          longest = length;
          break;
        }
      }
    }
    return longest;
  }

  #truncateAt(stopAt) {
    const released = [];
    let offset = 0;
    for (const piece of this.#held) {
      if (offset >= stopAt) break;
      released.push({ ...piece, text: piece.text.slice(0, stopAt - offset) });
      offset += piece.text.length;
    }
    this.#held = [];
    return released;
  }
}
