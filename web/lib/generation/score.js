// Scoring a text (model.score): the log-probability and rank of each of its tokens given the tokens before it,
// with the likeliest alternatives, from the engine's batched passes (Scorer::score in engine/decoding/scorer.h). A text
// longer than the context is scored in overlapping windows of n_ctx tokens with a stride of n_ctx/2: the first
// window scores its tokens 1..n_ctx-1, each next one starts n_ctx/2 tokens later and scores only the tokens no
// window has scored yet, so each of those has at least n_ctx/2 tokens of context (`gpt2 --eval` scores the same
// way). Used by local_model.js; worker_model.js checks options here before they cross to the worker.
import { abortError } from '../errors.js';
import { yieldToEventLoop } from './event_loop.js';
import { pairs, tokenText } from './pieces.js';
import { pretokenCut } from '../tokenizer/byte_pair_encoder.js';
import { checkScoreAlternatives, checkTopAlternatives, normalizeScoreOptions as normalizeScoreOptionsOfTable } from './option_checks.js';

// -> { topAlternatives, kvCache, signal } checked against the options' table (option_table.js); throws a TypeError /
// RangeError naming the option. kvCache: the KV cache's storage, 'int8' (the default, as generate() and `gpt2
// --score` use: log-probabilities within a few 1e-3 nats of exact) or 'fp32' (four times the cache's memory,
// within 1e-4 of a float64 reference: for perplexities that compare models).
export function normalizeScoreOptions(options = {}) {
  return normalizeScoreOptionsOfTable(options);
}

// The text to score must be a string (TypeError otherwise): checked in the page before it crosses to a worker.
export function checkScoreText(text) {
  if (typeof text !== 'string') throw new TypeError(`score: text must be a string, got ${typeof text}`);
}

// target: { pool: SessionPool, tokenizer }; options as normalizeScoreOptions returns them.
// -> { tokens: [{ token, text, logprob, rank, alternatives: [{ token, text, logprob }] }], totalLogprob,
// perplexity }. <|endoftext|> goes in front of the text, so that its first token is scored too; the tokens'
// texts join to the text (a character split over tokens is in the text of its last token). An empty text has
// no tokens: { tokens: [], totalLogprob: 0, perplexity: 1 }. The passes run one at a time with a turn of the
// event loop between them (scoreInPasses); once signal aborts, the promise rejects with an AbortError.
export async function scoreText({ pool, tokenizer }, text, { topAlternatives, kvCache, signal }) {
  checkScoreText(text);
  const ids = await encodeInParts(tokenizer, text, { signal });
  if (ids.length === 0) return { tokens: [], totalLogprob: 0, perplexity: 1 };
  const sessionOptions = { useKVCache: true, kvCache };
  const session = pool.acquire(sessionOptions);
  let scores;
  let keep = true;
  try {
    checkTopAlternatives('score', topAlternatives, session.vocabSize);
    checkScoreAlternatives('score', ids.length, topAlternatives);
    scores = await scoreInPasses(session, [tokenizer.eosId, ...ids], topAlternatives, signal);
  } catch (error) {
    // An aborted run stops mid-window with the run's buffers allocated in the binding: the session is freed, and
    // the pool makes a fresh one for the next call.
    keep = error?.name !== 'AbortError';
    throw error;
  } finally {
    if (keep) pool.release(session, sessionOptions);
    else pool.discard(session);
  }
  return describeScores(tokenizer, ids, scores);
}

// EngineSession.score(ids, topK)'s result, computed pass by pass (beginScore, feedScorePass, scoreFedPass: on a
// CPU session each feedScorePass runs one forward pass, of a window's context or of at most 64 rows of logits)
// with a turn of the event loop after each, so that a long text blocks its thread for one pass at a time and an
// abort lands between two passes: it then rejects with an AbortError, the session's score run left unfinished.
// A GPU session runs its own passes (gpu_session.js), each awaited on the GPU, and checks signal between them.
export async function scoreInPasses(session, ids, topK, signal) {
  if (signal?.aborted) throw scoreAbortedError();
  if (!session.feedScorePass) return session.score(ids, topK, signal);
  session.beginScore(ids, topK);
  while (session.feedScorePass()) {
    session.scoreFedPass();
    await yieldToEventLoop();
    if (signal?.aborted) throw scoreAbortedError();
  }
  return session.scoreResult();
}

// The characters encoded at a time by encodeInParts: a few tens of milliseconds of the tokenizer's work.
const ENCODE_PART_CHARS = 1 << 16;

// tokenizer.encode(text) in parts of about partChars characters, cut where the pre-tokenizer's pieces end
// (pretokenCut: the same ids as the whole text's), with a turn of the event loop between them; rejects with the
// AbortError once signal aborts. A 1 MB text otherwise holds its thread for 0.2 to 0.7 s.
export async function encodeInParts(tokenizer, text, { signal, partChars = ENCODE_PART_CHARS } = {}) {
  const ids = [];
  for (let start = 0; start < text.length;) {
    if (signal?.aborted) throw scoreAbortedError();
    const end = text.length - start <= partChars ? text.length : pretokenCut(text, start + partChars);
    for (const id of tokenizer.encode(text.slice(start, end))) ids.push(id);
    start = end;
    if (start < text.length) await yieldToEventLoop();
  }
  if (signal?.aborted) throw scoreAbortedError();
  return ids;
}

// What an aborted score rejects with: an AbortError, as fetch's and an aborted load's (errors.js).
export function scoreAbortedError() {
  return abortError('score: aborted');
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
