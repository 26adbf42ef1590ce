// The generation loop over an engine session and a tokenizer: encode the prompt, prefill (keeping what the
// session's window has in common with it: KV-cache reuse between calls, session_pool.js), then one step per
// token, streaming decoded text (never half a character), holding back text that may be the start of a stop
// string, and ending on <|endoftext|>, a stop string, maxNewTokens or an AbortSignal; with `speculative`, several
// tokens per step where drafts are verified (the same tokens, fewer passes). Used by
// local_model.js (in Node, in workers, and in the engine worker for pages). Plain ES module.
import { InspectedSession } from '../inspection/inspected_session.js';
import { DraftPolicy } from './draft_policy.js';
import { LookupDrafter, ModelDrafter } from './drafters.js';
import { runBeams } from './beams.js';
import { yieldToEventLoop } from './event_loop.js';
import { checkModelOptions, inspectionRequest } from './option_checks.js';
import { makePiece } from './pieces.js';
import { checkPrompt, promptIds } from './prompt.js';
import { createStats, updateContextStats } from './run_stats.js';
import { samplingSettings } from './sampling_settings.js';
import { runSequences } from './sequences.js';
import { StopStringFilter } from './stop_strings.js';

// What the models' modules (local_model.js, worker_model.js) take from here with the loop: the options' check, the
// pool of sessions, the prompt's check and the stats.
export { normalizeGenerateOptions } from './option_checks.js';
export { SessionPool } from './session_pool.js';
export { checkPrompt, createStats };

// An async iterable of pieces { text, token, position, ms, probability?, alternatives? } with a live `stats`.
// Generation runs as it is iterated; leaving the loop early (break) ends it with stopReason 'abort'.
// target: { pool: SessionPool, tokenizer, config: the model's, device: where the model runs ('wasm' or 'webgpu'),
// draftModel?: the draft model's { pool, config } when options.speculative.draft is a model, disposals?: AbortSignals
// that end the run as options.signal does (its model's dispose()) }; options as normalizeGenerateOptions returns.
// With options.inspect, pool is the CPU engine's (a GPU model's CPU twin).
export class Generation {
  stats;
  sequences = [];  // with numReturnSequences or numBeams > 1, once the run ends: { tokens, text, score, stopReason } each
  #pieces;

  constructor(target, prompt, options) {
    checkPrompt(prompt);
    checkModelOptions(options, prompt, target.config);
    this.stats = createStats(target.config.n_ctx);
    const held = new Set();
    const tracked = { ...target, pool: trackedPool(target.pool, held) };
    if (target.draftModel) tracked.draftModel = { ...target.draftModel, pool: trackedPool(target.draftModel.pool, held) };
    const run = (signal) => {
      const runOptions = { ...options, signal };
      return runOptions.numBeams > 1 ? runBeams(tracked, prompt, runOptions, this.stats, this.sequences)
        : runOptions.numReturnSequences > 1 ? runSequences(tracked, prompt, runOptions, this.stats, this.sequences)
          : runGeneration(tracked, prompt, runOptions, this.stats);
    };
    const signals = [options.signal, ...(target.disposals ?? [])].filter((signal) => signal !== undefined);
    this.#pieces = runWithSignal(run, signals, this.stats);
    droppedRuns.register(this.#pieces, held);
  }

  [Symbol.asyncIterator]() {
    return this.#pieces;
  }
}

// A run left unfinished without its iterator's return() (a `for await` that breaks calls it; an iterator taken
// with [Symbol.asyncIterator]() and then forgotten does not) never reaches the finally that gives its sessions
// back, and JS has no destructor to do it: once its generator is garbage-collected, this frees the sessions it
// still held (held: those its pools gave it and it has not given back), which would otherwise keep their KV caches
// in the wasm heap for as long as the model lives. They are freed, not given back to the pool: a run stopped
// between two yields may leave a session mid-search (beams) or mid-score. The sessions are taken when the run
// starts (its first next()), so a run never iterated holds none.
const droppedRuns = new FinalizationRegistry((held) => {
  for (const session of held) session.dispose();
});

// pool as a run sees it: what it acquires is in held until it releases or discards it.
function trackedPool(pool, held) {
  return {
    // -> the session, or a promise of it (a pool that loads its model first: DeferredSessionPool)
    acquire(options) {
      const session = pool.acquire(options);
      if (session instanceof Promise) return session.then((s) => (held.add(s), s));
      held.add(session);
      return session;
    },
    release(session, options) {
      held.delete(session);
      pool.release(session, options);
    },
    discard(session) {
      held.delete(session);
      pool.discard(session);
    },
  };
}

// run(signal) with a signal of its own, aborted once any of signals is (the caller's, its model's dispose()), whose
// listeners are taken back when the run ends. A run whose signals aborted before it started takes no session.
async function* runWithSignal(run, signals, stats) {
  const controller = new AbortController();
  const abort = () => controller.abort();
  for (const signal of signals) signal.addEventListener?.('abort', abort, { once: true });
  try {
    if (signals.some((signal) => signal.aborted)) {
      stats.stopReason = 'abort';
      return;
    }
    yield* run(controller.signal);
  } finally {
    for (const signal of signals) signal.removeEventListener?.('abort', abort);
  }
}

async function* runGeneration({ pool, tokenizer, config, device, draftModel }, prompt, options, stats) {
  const session = await pool.acquire(options);
  const inFlight = { step: null };  // a GPU pass that an abort left running (generatePieces)
  let fed = session;
  try {
    if (options.inspect) {
      const request = inspectionRequest(options.inspect, config, null, 'generate', 'inspect.');
      fed = new InspectedSession(session, request, { config, tokenizer, device });
    }
    const decoder = tokenizer.createDecoder();
    const filter = new StopStringFilter(options.stop);
    const stopReason = yield* generatePieces(fed, tokenizer, decoder, filter, prompt, options, stats, draftModel, inFlight);
    stats.stopReason = stopReason;
    if (stopReason !== 'stop') yield* filter.finish(decoder.flush());
  } catch (error) {
    stats.stopReason = 'error';
    throw error;
  } finally {
    stats.stopReason ??= 'abort';  // the consumer left the loop early
    if (fed !== session) fed.end();
    // the session runs again only once its pass has ended (freed if that failed)
    if (inFlight.step) inFlight.step.then(() => pool.release(session, options), () => pool.discard(session));
    else pool.release(session, options);
  }
}

// Yields the pieces the stop filter releases; returns the stop reason.
// draftModel: speculative.draft's { pool, config } when it is a model, else undefined; inFlight.step: set to the step
// an abort left running
async function* generatePieces(session, tokenizer, decoder, filter, prompt, options, stats, draftModel, inFlight) {
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
      const step = decoding.after(next.token, options.maxNewTokens - stats.generatedTokens);
      const stepped = await untilAborted(step, options.signal);
      if (stepped === null) {
        inFlight.step = step;
        return 'abort';
      }
      ({ next, ms } = stepped);
    }
  } finally {
    decoding.release();
  }
}

// -> step's value, or null as soon as signal aborts: a GPU pass (a promise that settles with the GPU, 0.1 to 0.2 s on
// a software adapter) is not waited for. A CPU step runs within decoding.after(), so its value comes before any
// abort that another task sends.
function untilAborted(step, signal) {
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(null);
    signal.addEventListener('abort', onAbort, { once: true });
    step.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
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
