// What the one-sequence run (generate.js), the several-sequence run (sequences.js) and beam search (beams.js)
// share: the prompt's ids, the sampler's settings, the sessions of a run of several sequences, the pieces they
// stream, the stats of the window, a score pass's alternatives, and a turn of the event loop between tokens.
// Plain ES module.

// The ids a run feeds: a text's tokens or the ids given; <|endoftext|> alone for an empty prompt.
export function promptIds(tokenizer, prompt) {
  const given = typeof prompt === 'string' ? tokenizer.encode(prompt) : Array.from(prompt);
  return given.length === 0 ? [tokenizer.eosId] : given;
}

// generate()'s options as the engine's sampler takes them (EngineSession.setSampling): badWords as token ids, and
// the end-of-text token that minNewTokens holds back.
export function samplingSettings(options, tokenizer) {
  return { ...options, badWords: badWordIds(options.badWords, tokenizer), eosToken: tokenizer.eosId };
}

// badWords as the engine takes them: each text as its tokens, and again with a leading space (how a word
// mid-sentence is encoded); id sequences as they are.
function badWordIds(badWords, tokenizer) {
  return badWords.flatMap((word) => (typeof word === 'string' ? [tokenizer.encode(word), tokenizer.encode(` ${word}`)] : [word]));
}

// Fills sessions with n of the pool's sessions for a run that decodes several sequences together, which only the
// CPU engine's can (a GPU session has no `method`; the error names `option`). The caller releases them.
export function acquireSessions(pool, options, n, sessions, { method, option }) {
  sessions.push(pool.acquire(options));
  if (!sessions[0][method]) throw new Error(`generate: ${option} > 1 runs on the CPU engine (device: "wasm")`);
  while (sessions.length < n) sessions.push(pool.acquire(options));
}

export function updateContextStats(stats, session) {
  stats.contextUsed = session.nCached;
  stats.kvCacheBytes = session.kvCacheBytes;
  stats.kvCache = session.kvCache;
  // a GPU session goes on on the CPU when its device is lost (gpu_session.js)
  stats.device = session.device ?? 'wasm';
  stats.deviceLost = session.deviceLost ?? null;
}

// A model may have more ids than its tokenizer has tokens (a vocabulary padded to a round size, which the
// loader allows): such an id, if sampled, has no text.
export function makePiece(session, tokenizer, decoder, { token, row }, position, ms, options) {
  const piece = { text: token < tokenizer.vocabSize ? decoder.push(token) : '', token, position, ms };
  if (options.topAlternatives > 0) {
    const { probability, alternatives } = session.distribution(token, options.topAlternatives, row);
    piece.probability = probability;
    piece.alternatives = alternatives.map((a) => ({ ...a, text: tokenText(tokenizer, a.token) }));
  }
  return piece;
}

// The text of one token on its own ('' for an id past the tokenizer's vocabulary, see makePiece).
export function tokenText(tokenizer, id) {
  return id < tokenizer.vocabSize ? tokenizer.decode([id]) : '';
}

// A score pass's alternatives [token, logprob, token, logprob, ...] -> [[token, logprob], ...]
export function pairs(flat) {
  const out = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}

let yieldChannel = null;
const yieldWaiters = [];

// A macrotask turn without setTimeout's 4 ms clamp: setImmediate in Node, a MessageChannel elsewhere.
export function yieldToEventLoop() {
  if (typeof setImmediate === 'function') return new Promise((resolve) => setImmediate(resolve));
  if (!yieldChannel) {
    yieldChannel = new MessageChannel();
    yieldChannel.port1.onmessage = () => yieldWaiters.shift()();
  }
  return new Promise((resolve) => {
    yieldWaiters.push(resolve);
    yieldChannel.port2.postMessage(null);
  });
}
