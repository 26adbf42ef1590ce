// Scoring a text (model.score): the log-probability and rank of each of its tokens given the tokens before it,
// with the likeliest alternatives, from the engine's batched passes (Session::score in engine/gpt2.h). A text
// longer than the context is scored in overlapping windows of n_ctx tokens with a stride of n_ctx/2: the first
// window scores its tokens 1..n_ctx-1, each next one starts n_ctx/2 tokens later and scores only the tokens no
// window has scored yet, so each of those has at least n_ctx/2 tokens of context (`gpt2 --eval` scores the same
// way). Used by local_model.js; worker_model.js checks options here before they cross to the worker.
import { pairs, tokenText } from './pieces.js';

const SCORE_OPTION_NAMES = new Set(['topAlternatives', 'kvCache']);

// -> { topAlternatives, kvCache } checked; throws a TypeError / RangeError naming the option. kvCache: the KV
// cache's storage, 'int8' (the default, as generate() and `gpt2 --score` use: log-probabilities within a few
// 1e-3 nats of exact) or 'fp32' (four times the cache's memory, within 1e-4 of a float64 reference: for
// perplexities that compare models).
export function normalizeScoreOptions(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('score: options must be an object');
  for (const name of Object.keys(options)) {
    if (!SCORE_OPTION_NAMES.has(name)) throw new TypeError(`score: unknown option "${name}"`);
  }
  const { topAlternatives = 0, kvCache = 'int8' } = options;
  if (!Number.isSafeInteger(topAlternatives) || topAlternatives < 0) {
    throw new RangeError(`score: option topAlternatives must be an integer >= 0, got ${String(topAlternatives)}`);
  }
  if (kvCache !== 'int8' && kvCache !== 'fp32') {
    throw new RangeError(`score: option kvCache must be "int8" or "fp32", got ${JSON.stringify(kvCache) ?? String(kvCache)}`);
  }
  return { topAlternatives, kvCache };
}

// The text to score must be a string (TypeError otherwise): checked in the page before it crosses to a worker.
export function checkScoreText(text) {
  if (typeof text !== 'string') throw new TypeError(`score: text must be a string, got ${typeof text}`);
}

// target: { pool: SessionPool, tokenizer }; options as normalizeScoreOptions returns them.
// -> { tokens: [{ token, text, logprob, rank, alternatives: [{ token, text, logprob }] }], totalLogprob,
// perplexity }. <|endoftext|> goes in front of the text, so that its first token is scored too; the tokens'
// texts join to the text (a character split over tokens is in the text of its last token). An empty text has
// no tokens: { tokens: [], totalLogprob: 0, perplexity: 1 }.
export async function scoreText({ pool, tokenizer }, text, { topAlternatives, kvCache }) {
  checkScoreText(text);
  const ids = tokenizer.encode(text);
  if (ids.length === 0) return { tokens: [], totalLogprob: 0, perplexity: 1 };
  const sessionOptions = { useKVCache: true, kvCache };
  const session = pool.acquire(sessionOptions);
  let scores;
  try {
    // More alternatives than there are tokens is all of them. A GPU session's score runs its passes on the GPU.
    scores = await session.score([tokenizer.eosId, ...ids], Math.min(topAlternatives, session.vocabSize));
  } finally {
    pool.release(session, sessionOptions);
  }
  return describeScores(tokenizer, ids, scores);
}

function describeScores(tokenizer, ids, { logprobs, ranks, alternatives }) {
  const decoder = tokenizer.createDecoder();
  const tokens = ids.map((token, i) => ({
    token,
    text: decoder.push(token),
    logprob: logprobs[i],
    rank: ranks[i],
    alternatives: pairs(alternatives[i]).map(([id, logprob]) => ({ token: id, text: tokenText(tokenizer, id), logprob })),
  }));
  tokens.at(-1).text += decoder.flush();
  const totalLogprob = logprobs.reduce((sum, logprob) => sum + logprob, 0);
  return { tokens, totalLogprob, perplexity: Math.exp(-totalLogprob / tokens.length) };
}
