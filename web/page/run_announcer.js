// What a screen reader hears of a run: the output itself is no live region (it gains a token at a time, hundreds a
// second, which a reader would try to speak one by one); a polite region of its own says a finished sentence now and
// then, no sooner than the one before it can have been read, and the run's end.

// A reader speaks about 150 words a minute; an announcement waits at least as long as the one before it takes, and
// no less than MIN_ANNOUNCEMENT_GAP_MS.
const WORDS_PER_SECOND = 2.5;
const MIN_ANNOUNCEMENT_GAP_MS = 2000;
// a sentence's end: ., ! or ?, with closing quotes or brackets, before white space; or a blank line
const SENTENCE_END = /[.!?]["')\]]*\s|\n\s*\n/g;

export class RunAnnouncer {
  #region;
  #text = '';  // the run's text since the last sentence's end that was looked at
  #nextAt = 0;  // the time (now()) before which nothing more is said
  #now;

  // region: the live region's element; now() -> the time in ms
  constructor(region, now = () => performance.now()) {
    this.#region = region;
    this.#now = now;
  }

  start() {
    this.#text = '';
    this.#nextAt = 0;
    if (this.#region.textContent !== '') this.#region.textContent = '';
  }

  // text: what the run gave since the last call; says the latest finished sentence when the pace allows
  add(text) {
    this.#text += text;
    const ends = Array.from(this.#text.matchAll(SENTENCE_END), (match) => match.index + match[0].length);
    if (ends.length === 0) return;
    const sentence = this.#text.slice(ends.at(-2) ?? 0, ends.at(-1));
    this.#text = this.#text.slice(ends.at(-1));
    if (this.#now() >= this.#nextAt) this.#say(sentence.replace(/\s+/g, ' ').trim());
  }

  // says how the run ended: `Generated N tokens: <reason>.`
  end(tokens, reason) {
    this.#say(`Generated ${tokens} token${tokens === 1 ? '' : 's'}: ${reason}.`);
  }

  #say(words) {
    if (words === '') return;
    this.#region.textContent = words;
    const readMs = (1000 * words.split(' ').length) / WORDS_PER_SECOND;
    this.#nextAt = this.#now() + Math.max(MIN_ANNOUNCEMENT_GAP_MS, readMs);
  }
}
