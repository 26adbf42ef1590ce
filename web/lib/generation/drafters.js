// Where speculative decoding's drafts come from (generate.js's Decoding): prompt lookup, n-grams of the context
// (the engine's Speculation::lookup_draft), or a draft model, a smaller model of the same vocabulary decoding greedily
// in a session of its own that follows the target's text. Each is told every token the run gives (push) and asked
// for up to `length` tokens to follow the last one (draft). Plain ES module.

// Drafts from the target session's own window.
export class LookupDrafter {
  #session;
  #last = -1;

  constructor(session) {
    this.#session = session;
  }

  push(token) {
    this.#last = token;
  }

  draft(length) {
    return this.#session.lookupDraft(this.#last, length);
  }

  release() {}
}

// Drafts with a draft model: its session holds the run's text, and a draft is its greedy continuation. Before
// each draft the session is brought to the text with prefill_reusing, which keeps the positions the text still
// shares with it (all but those of rejected drafts) and computes only the rest.
export class ModelDrafter {
  #pool;
  #session;
  #contextSize;
  #text;  // (prompt + given tokens) the run's token ids so far

  // draft: { pool: the draft model's SessionPool, config }; prompt: the ids the target was prefilled with
  constructor(draft, prompt) {
    this.#pool = draft.pool;
    this.#contextSize = draft.config.n_ctx;
    this.#session = draft.pool.acquire(DRAFT_SESSION);
    this.#session.setSampling({ temperature: 0 });
    this.#text = Array.from(prompt);
  }

  push(token) {
    this.#text.push(token);
  }

  async draft(length) {
    const tokens = [await this.#session.prefillReusing(this.#window())];
    while (tokens.length < length) tokens.push(await this.#session.step(tokens.at(-1)));
    return tokens;
  }

  release() {
    this.#pool.release(this.#session, DRAFT_SESSION);
  }

  // The newest tokens that fit the draft model's context, from a start that moves in steps of half the context,
  // so that consecutive drafts share their window's start and reuse its cache.
  #window() {
    const n = this.#text.length;
    const half = Math.max(1, Math.floor(this.#contextSize / 2));
    const start = n <= this.#contextSize ? 0 : Math.ceil((n - this.#contextSize) / half) * half;
    return this.#text.slice(start);
  }
}

const DRAFT_SESSION = Object.freeze({ useKVCache: true, kvCache: 'int8' });
