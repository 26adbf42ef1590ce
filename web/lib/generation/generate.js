// The generation loop over an engine session and a tokenizer: encode the prompt, prefill (keeping what the
// session's window has in common with it: KV-cache reuse between calls, see SessionPool), then one step per
// token, streaming decoded text (never half a character), holding back text that may be the start of a stop
// string, and ending on <|endoftext|>, a stop string, maxNewTokens or an AbortSignal; with `speculative`, several
// tokens per step where drafts are verified (the same tokens, fewer passes). Used by
// local_model.js (in Node, in workers, and in the engine worker for pages). Plain ES module.
import { DraftPolicy } from './draft_policy.js';
import { LookupDrafter, ModelDrafter } from './drafters.js';
import { makePiece, promptIds, samplingSettings, updateContextStats, yieldToEventLoop } from './pieces.js';
import { runBeams } from './beams.js';
import { runSequences } from './sequences.js';
import { StopStringFilter } from './stop_strings.js';

const DEFAULT_OPTIONS = Object.freeze({
  maxNewTokens: 64,
  temperature: 1,
  topK: 0,
  topP: 1,
  repetitionPenalty: 1,
  minP: 0,  // drop tokens below minP x the most likely one's probability
  typicalP: 1,  // locally typical sampling: 1 = off
  noRepeatNgramSize: 0,  // never repeat an n-gram of this size (over the window)
  presencePenalty: 0,  // OpenAI's, over the tokens this run generated
  frequencyPenalty: 0,
  logitBias: {},  // token id -> added to its logit; -Infinity bans it
  badWords: [],  // texts (banned with and without a leading space) or token id sequences, never produced
  minNewTokens: 0,  // end-of-text is held back until this many tokens
  seed: undefined,  // random
  stop: [],
  stopAtEndOfText: true,
  useKVCache: true,
  kvCache: 'int8',  // the KV cache's storage: 'int8' (a quarter of the bytes) or 'fp32'
  signal: undefined,
  topAlternatives: 0,
  speculative: undefined,  // { draft: 'prompt-lookup', maxDraftTokens }: speculative decoding, off when undefined
  numReturnSequences: 1,  // sequences sampled from one prefill, decoded together (engine/gpt2.h Session::step_sequences)
  numBeams: 1,  // beam search (engine/gpt2.h BeamSearch): 1 = off; beam sampling when temperature > 0
  lengthPenalty: 1,  // a hypothesis scores its log-probability sum / length ^ lengthPenalty
  earlyStopping: false,  // Hugging Face's: false (a heuristic), true (at numBeams hypotheses) or 'never'
});

// The most sequences one run decodes together (engine/gpt2.h Session::kMaxSequences).
const MAX_SEQUENCES = 16;

// Speculative decoding's drafts: at most this many per step (engine/gpt2.h Session::kMaxDraftTokens); a run's own
// length adapts below its maxDraftTokens (draft_policy.js).
const MAX_DRAFT_TOKENS = 16;
const DEFAULT_MAX_DRAFT_TOKENS = 8;
const DRAFT_SOURCES = ['prompt-lookup'];

// Checks and completes generate() options; throws an Error naming the offending option.
export function normalizeGenerateOptions(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('generate: options must be an object');
  for (const name of Object.keys(options)) {
    if (!(name in DEFAULT_OPTIONS)) throw new TypeError(`generate: unknown option "${name}"`);
  }
  const o = { ...DEFAULT_OPTIONS };
  for (const [name, value] of Object.entries(options)) if (value !== undefined) o[name] = value;
  const fail = (name, expected) => {
    throw new RangeError(`generate: option ${name} must be ${expected}, got ${describeValue(o[name])}`);
  };
  if (!Number.isSafeInteger(o.maxNewTokens) || o.maxNewTokens < 1) fail('maxNewTokens', 'a positive integer');
  if (typeof o.temperature !== 'number' || !Number.isFinite(o.temperature) || o.temperature < 0) {
    fail('temperature', 'a finite number >= 0 (0 = greedy)');
  }
  if (!Number.isSafeInteger(o.topK) || o.topK < 0) fail('topK', 'an integer >= 0 (0 = off)');
  if (typeof o.topP !== 'number' || !(o.topP >= 0 && o.topP <= 1)) fail('topP', 'a number in [0, 1] (0 = the most likely token only)');
  if (typeof o.repetitionPenalty !== 'number' || !Number.isFinite(o.repetitionPenalty) || o.repetitionPenalty <= 0) {
    fail('repetitionPenalty', 'a finite number > 0 (1 = off)');
  }
  if (typeof o.minP !== 'number' || !(o.minP >= 0 && o.minP <= 1)) fail('minP', 'a number in [0, 1] (0 = off)');
  if (typeof o.typicalP !== 'number' || !(o.typicalP >= 0 && o.typicalP <= 1)) fail('typicalP', 'a number in [0, 1] (1 = off)');
  if (!Number.isSafeInteger(o.noRepeatNgramSize) || o.noRepeatNgramSize < 0) fail('noRepeatNgramSize', 'an integer >= 0 (0 = off)');
  for (const name of ['presencePenalty', 'frequencyPenalty']) {
    if (typeof o[name] !== 'number' || !Number.isFinite(o[name])) fail(name, 'a finite number (0 = off)');
  }
  checkLogitBias(o.logitBias);
  checkBadWords(o.badWords);
  if (!Number.isSafeInteger(o.minNewTokens) || o.minNewTokens < 0) fail('minNewTokens', 'an integer >= 0 (0 = off)');
  if (o.seed === undefined) o.seed = Math.floor(Math.random() * 2 ** 32);
  else if (!Number.isSafeInteger(o.seed) || o.seed < 0) fail('seed', 'an integer in [0, 2^53)');
  if (typeof o.stop === 'string') o.stop = [o.stop];
  if (!Array.isArray(o.stop) || !o.stop.every((s) => typeof s === 'string' && s.length > 0)) {
    fail('stop', 'a non-empty string or an array of them');
  }
  if (typeof o.stopAtEndOfText !== 'boolean') fail('stopAtEndOfText', 'a boolean');
  if (typeof o.useKVCache !== 'boolean') fail('useKVCache', 'a boolean');
  if (o.kvCache !== 'int8' && o.kvCache !== 'fp32') fail('kvCache', '"int8" or "fp32"');
  if (!Number.isSafeInteger(o.topAlternatives) || o.topAlternatives < 0) fail('topAlternatives', 'an integer >= 0');
  if (o.signal !== undefined && typeof o.signal?.aborted !== 'boolean') fail('signal', 'an AbortSignal');
  if (o.speculative !== undefined) o.speculative = normalizeSpeculative(o.speculative);
  checkSequenceOptions(o, fail);
  return o;
}

// numReturnSequences and the beam search's options, which decide how many sequences a run decodes together.
function checkSequenceOptions(o, fail) {
  if (!Number.isSafeInteger(o.numBeams) || o.numBeams < 1 || o.numBeams > MAX_SEQUENCES) fail('numBeams', `an integer in [1, ${MAX_SEQUENCES}] (1 = off)`);
  if (typeof o.lengthPenalty !== 'number' || !Number.isFinite(o.lengthPenalty)) fail('lengthPenalty', 'a finite number');
  if (o.earlyStopping !== true && o.earlyStopping !== false && o.earlyStopping !== 'never') fail('earlyStopping', 'true, false or "never"');
  const most = o.numBeams > 1 ? o.numBeams : MAX_SEQUENCES;
  if (!Number.isSafeInteger(o.numReturnSequences) || o.numReturnSequences < 1 || o.numReturnSequences > most) {
    fail('numReturnSequences', o.numBeams > 1 ? `an integer in [1, numBeams = ${o.numBeams}]` : `an integer in [1, ${MAX_SEQUENCES}]`);
  }
  const several = o.numBeams > 1 ? 'numBeams > 1' : o.numReturnSequences > 1 ? 'numReturnSequences > 1' : null;
  if (!several) return;
  if (o.numBeams === 1 && o.temperature === 0) throw new RangeError('generate: numReturnSequences > 1 needs sampling (temperature > 0) or numBeams: greedy gives one sequence n times');
  if (o.speculative) throw new RangeError(`generate: ${several} cannot be combined with speculative`);
  if (!o.useKVCache) throw new RangeError(`generate: ${several} needs the KV cache (useKVCache: true): the sequences fork it`);
}

const isTokenId = (value) => Number.isSafeInteger(value) && value >= 0;

function checkLogitBias(logitBias) {
  if (logitBias === null || typeof logitBias !== 'object' || Array.isArray(logitBias)) {
    throw new RangeError(`generate: option logitBias must be an object { tokenId: bias }, got ${describeValue(logitBias)}`);
  }
  for (const [token, bias] of Object.entries(logitBias)) {
    if (!/^\d+$/.test(token) || !isTokenId(Number(token))) throw new RangeError(`generate: option logitBias has a key that is not a token id: ${JSON.stringify(token)}`);
    if (typeof bias !== 'number' || !(Number.isFinite(bias) || bias === -Infinity)) {
      throw new RangeError(`generate: option logitBias[${token}] must be a finite number or -Infinity (a ban), got ${describeValue(bias)}`);
    }
  }
}

function checkBadWords(badWords) {
  const isWord = (word) => (typeof word === 'string' && word.length > 0) || (Array.isArray(word) && word.length > 0 && word.every(isTokenId));
  if (!Array.isArray(badWords)) throw new RangeError(`generate: option badWords must be an array of texts or token id arrays, got ${describeValue(badWords)}`);
  const bad = badWords.findIndex((word) => !isWord(word));
  if (bad >= 0) throw new RangeError(`generate: option badWords[${bad}] must be a non-empty text or a non-empty array of token ids, got ${describeValue(badWords[bad])}`);
}

// The options that name token ids, against the model's vocabulary (normalizeGenerateOptions cannot know it).
function checkTokenOptions({ logitBias, badWords }, nVocab) {
  for (const token of Object.keys(logitBias)) {
    if (Number(token) >= nVocab) throw new RangeError(`generate: option logitBias has token ${token}, outside the model's vocabulary [0, ${nVocab})`);
  }
  badWords.forEach((word, i) => {
    const outside = Array.isArray(word) ? word.find((id) => id >= nVocab) : undefined;
    if (outside !== undefined) throw new RangeError(`generate: option badWords[${i}] has token ${outside}, outside the model's vocabulary [0, ${nVocab})`);
  });
}

// speculative: { draft: 'prompt-lookup' (drafts from n-grams of the context) or a model (a draft model of the same
// vocabulary, loaded in the same thread: local_model.js checks it), maxDraftTokens (1..16, default 8) }
function normalizeSpeculative(speculative) {
  if (speculative === null || typeof speculative !== 'object') {
    throw new RangeError(`generate: option speculative must be an object { draft, maxDraftTokens }, got ${describeValue(speculative)}`);
  }
  for (const name of Object.keys(speculative)) {
    if (name !== 'draft' && name !== 'maxDraftTokens') throw new TypeError(`generate: unknown option "speculative.${name}"`);
  }
  const { draft = 'prompt-lookup', maxDraftTokens = DEFAULT_MAX_DRAFT_TOKENS } = speculative;
  if (!DRAFT_SOURCES.includes(draft) && typeof draft?.generate !== 'function') {
    throw new RangeError(`generate: option speculative.draft must be ${DRAFT_SOURCES.map((s) => JSON.stringify(s)).join(' or ')} or a model, got ${describeValue(draft)}`);
  }
  if (!Number.isSafeInteger(maxDraftTokens) || maxDraftTokens < 1 || maxDraftTokens > MAX_DRAFT_TOKENS) {
    throw new RangeError(`generate: option speculative.maxDraftTokens must be an integer in [1, ${MAX_DRAFT_TOKENS}], got ${describeValue(maxDraftTokens)}`);
  }
  return { draft, maxDraftTokens };
}

function describeValue(value) {
  return typeof value === 'string' || (typeof value === 'object' && value !== null) ? JSON.stringify(value) : String(value);
}

export function createStats(contextSize) {
  return {
    promptTokens: 0,
    reusedTokens: 0,  // prompt tokens whose KV cache was kept from the session's previous run (not computed again)
    generatedTokens: 0,
    prefillMs: 0,
    decodeTokensPerSecond: 0,
    contextUsed: 0,
    contextSize,
    kvCacheBytes: 0,
    kvCache: null,  // the cache's storage, 'int8' or 'fp32'
    device: null,  // where the passes run, 'webgpu' or 'wasm'
    deviceLost: null,  // why a GPU session went on on the CPU, if its device was lost
    draftedTokens: 0,  // speculative decoding: tokens drafted and verified
    acceptedTokens: 0,  // of those, the ones the model's own tokens matched (each a pass saved)
    stopReason: null,  // 'eos' | 'stop' | 'length' | 'abort' | 'error' once finished
  };
}

// Keeps one idle session per KV-cache mode and storage, the one released last, so consecutive generations
// neither reallocate the cache nor, when a prompt starts with the tokens the last run left in its window,
// compute those again (Session::prefill_reusing). model.score() takes its session from here too.
export class SessionPool {
  #model;
  #idle = new Map();
  #disposed = false;

  constructor(engineModel) {
    this.#model = engineModel;
  }

  // options: { useKVCache, kvCache } as normalizeGenerateOptions returns them
  acquire({ useKVCache, kvCache }) {
    const key = `${useKVCache} ${kvCache}`;
    const session = this.#idle.get(key);
    if (session) {
      this.#idle.delete(key);
      return session;
    }
    return this.#model.createSession({ useKVCache, kvCache });
  }

  release(session, { useKVCache, kvCache }) {
    const key = `${useKVCache} ${kvCache}`;
    if (this.#disposed) return void session.dispose();
    this.#idle.get(key)?.dispose();  // an older run's window: the newer one is likelier to be continued
    this.#idle.set(key, session);
  }

  dispose() {
    this.#disposed = true;
    for (const session of this.#idle.values()) session.dispose();
    this.#idle.clear();
  }
}

// An async iterable of pieces { text, token, position, ms, probability?, alternatives? } with a live `stats`.
// Generation runs as it is iterated; leaving the loop early (break) ends it with stopReason 'abort'.
// target: { pool: SessionPool, tokenizer, config: { n_ctx, n_vocab }, draftModel?: the draft model's { pool, config }
// when options.speculative.draft is a model }; options as normalizeGenerateOptions returns.
export class Generation {
  stats;
  sequences = [];  // with numReturnSequences or numBeams > 1, once the run ends: { tokens, text, score, stopReason } each
  #pieces;

  constructor(target, prompt, options) {
    checkPrompt(prompt);
    if (target.config.n_vocab !== undefined) checkTokenOptions(options, target.config.n_vocab);
    this.stats = createStats(target.config.n_ctx);
    this.#pieces = options.numBeams > 1 ? runBeams(target, prompt, options, this.stats, this.sequences)
      : options.numReturnSequences > 1 ? runSequences(target, prompt, options, this.stats, this.sequences)
        : runGeneration(target, prompt, options, this.stats);
  }

  [Symbol.asyncIterator]() {
    return this.#pieces;
  }
}

async function* runGeneration({ pool, tokenizer, draftModel }, prompt, options, stats) {
  const session = pool.acquire(options);
  try {
    const decoder = tokenizer.createDecoder();
    const filter = new StopStringFilter(options.stop);
    const stopReason = yield* generatePieces(session, tokenizer, decoder, filter, prompt, options, stats, draftModel);
    stats.stopReason = stopReason;
    if (stopReason !== 'stop') yield* filter.finish(decoder.flush());
  } catch (error) {
    stats.stopReason = 'error';
    throw error;
  } finally {
    stats.stopReason ??= 'abort';  // the consumer left the loop early
    pool.release(session, options);
  }
}

// A prompt is a text, or the token ids of one (e.g. a run's prompt ids and the tokens of its pieces, to continue
// exactly where it stopped: re-encoding its text may give other ids, and reuse less of the cache).
export function checkPrompt(prompt) {
  const isIds = (Array.isArray(prompt) || ArrayBuffer.isView(prompt)) && Array.prototype.every.call(prompt, Number.isInteger);
  if (typeof prompt !== 'string' && !isIds) {
    throw new TypeError(`generate: prompt must be a string or an array of token ids, got ${describePrompt(prompt)}`);
  }
}

function describePrompt(prompt) {
  return Array.isArray(prompt) || ArrayBuffer.isView(prompt) ? 'an array with a value that is not an integer' : typeof prompt;
}

// Yields the pieces the stop filter releases; returns the stop reason.
// draftModel: speculative.draft's { pool, config } when it is a model, else undefined
async function* generatePieces(session, tokenizer, decoder, filter, prompt, options, stats, draftModel) {
  const eos = tokenizer.eosId;
  if (options.signal?.aborted) return 'abort';
  session.setSampling(samplingSettings(options, tokenizer));
  const ids = promptIds(tokenizer, prompt);
  stats.promptTokens = ids.length;
  const started = performance.now();
  // a GPU session's feeds are promises (gpu_session.js); the CPU's are numbers
  let next = { token: await (options.useKVCache ? session.prefillReusing(ids) : session.prefill(ids)), row: -1 };
  let ms = (stats.prefillMs = performance.now() - started);
  if (options.useKVCache) stats.reusedTokens = session.reusedTokens;
  const decoding = new Decoding(session, options, stats, draftModel, ids);
  try {
    for (let steps = 0; ; steps++) {
      updateContextStats(stats, session);
      if (next.token === eos && options.stopAtEndOfText) return 'eos';
      stats.generatedTokens++;
      const piece = makePiece(session, tokenizer, decoder, next, ids.length + steps, ms, options);
      const { pieces, stopped } = filter.push(piece);
      yield* pieces;
      if (stopped) return 'stop';
      if (stats.generatedTokens === options.maxNewTokens) return 'length';
      await yieldToEventLoop();  // lets an abort (or a worker's cancel message) arrive between tokens
      if (options.signal?.aborted) return 'abort';
      ({ next, ms } = await decoding.after(next.token, options.maxNewTokens - stats.generatedTokens));
    }
  } finally {
    decoding.release();
  }
}

// The tokens after the prefill's, one step() at a time, or with speculation several per verified pass: each comes
// as { token, row } (row: where it was sampled, for its distribution: -1 the last fed position, else its row of the
// last verification) with its share of the pass's time.
class Decoding {
  #session;
  #stats;
  #pending = [];  // tokens of the last verification not given out yet
  #pendingMs = 0;
  #decodeMs = 0;
  #decoded = 0;
  #drafts = null;  // a DraftPolicy, or null: one step at a time
  #drafter = null;  // where drafts come from (drafters.js), with #drafts

  // draftModel: the draft model's { pool, config } for a model's drafts; prompt: the ids the session was prefilled with
  constructor(session, { speculative, useKVCache }, stats, draftModel, prompt) {
    this.#session = session;
    this.#stats = stats;
    // an uncached session has no cache to keep drafts in, a GPU session no verification of its own
    if (!speculative || !useKVCache || !session.stepDraft) return;
    this.#drafts = new DraftPolicy(speculative.maxDraftTokens);
    this.#drafter = draftModel ? new ModelDrafter(draftModel, prompt) : new LookupDrafter(session);
  }

  release() {
    this.#drafter?.release();
  }

  // -> { next: { token, row }, ms } after token; room: how many tokens the run may still give, this one included
  async after(token, room) {
    this.#drafter?.push(token);
    if (this.#pending.length === 0) await this.#decode(token, room);
    const next = this.#pending.shift();
    this.#decoded++;
    this.#decodeMs += this.#pendingMs;
    if (this.#decodeMs > 0) this.#stats.decodeTokensPerSecond = (this.#decoded * 1000) / this.#decodeMs;
    return { next, ms: this.#pendingMs };
  }

  async #decode(token, room) {
    const started = performance.now();
    const session = this.#session;
    // no more drafts than tokens the run can still give after the model's own
    const length = this.#drafts?.draftLength(room - 1) ?? 0;
    const draft = length > 0 ? await this.#drafter.draft(length) : [];
    if (draft.length === 0) {
      this.#pending = [{ token: await session.step(token), row: -1 }];
    } else {
      const tokens = session.stepDraft(token, draft);
      this.#stats.draftedTokens += draft.length;
      this.#stats.acceptedTokens += tokens.length - 1;
      this.#drafts.update(draft.length, tokens.length - 1);
      this.#pending = tokens.map((id, row) => ({ token: id, row }));
    }
    this.#pendingMs = (performance.now() - started) / this.#pending.length;
  }
}
