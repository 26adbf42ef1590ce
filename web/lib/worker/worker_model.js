// Models in a Web Worker, seen from the page: WorkerModel and WorkerGeneration give them the public Model
// interface (see gpt2.js) over a WorkerClient (worker_client.js); the default worker's models are shared
// through the page's model registry (model_registry.js).
import { checkPrompt, createStats, normalizeGenerateOptions } from '../generation/generate.js';
import { loadAbortedError } from '../errors.js';
import { DescribedModel } from '../models/model_description.js';
import { ModelRegistry } from '../models/model_registry.js';
import { checkScoreText, normalizeScoreOptions, scoreAbortedError } from '../generation/score.js';
import { normalizeInspectOptions } from '../generation/option_checks.js';
import { WorkerClient } from './worker_client.js';

let defaultWorker = null;
const registry = new ModelRegistry();  // the models of the default worker

// -> a Model in worker (a WorkerClient of the caller's) or, without one, in the page's default worker, which
// ends with its last model; models of the default worker are shared through the registry. source: a model source
// (model_source.js), plain data that the worker receives as it is.
export async function loadModelInWorker(source, { onProgress, signal, worker, weights, threads, device }) {
  if (typeof Worker === 'undefined') throw new Error('loadModel: useWorker needs Web Workers (a browser)');
  const load = (loadSignal, loadProgress) => loadModelIn(worker ?? usableDefaultWorker(), source,
    { onProgress: loadProgress, signal: loadSignal, weights, threads, device });
  if (worker) return load(signal, onProgress);
  // Only a URL names a model; other sources (files) are loaded for their caller alone.
  const key = source.kind === 'url' ? JSON.stringify([source.url, weights, threads, device]) : null;
  return registry.acquire(key, load, { onProgress, signal });
}

function usableDefaultWorker() {
  if (!defaultWorker?.usable) defaultWorker = new WorkerClient({ endsWithLastModel: true });
  return defaultWorker;
}

async function loadModelIn(worker, source, { onProgress, signal, weights, threads, device }) {
  worker.retain();
  let answer;
  try {
    answer = await worker.request({ type: 'load', source, weights, threads, device }, { onProgress, signal });
  } catch (error) {
    worker.release();
    throw error;
  }
  const model = new WorkerModel(worker, answer.value, { type: 'load', source, weights, threads, device });
  if (signal?.aborted) {  // the load finished before the worker saw the cancel
    model.dispose();
    throw loadAbortedError();
  }
  return model;
}

// After an engine crash, a WorkerModel loads itself again in the new worker (from the Cache API for a URL, from
// the same files otherwise), and its calls wait for that. If that fails (a crash during it included), the
// model's calls fail with what happened, and the next call tries once more.
class WorkerModel extends DescribedModel {
  #worker;
  #modelId;
  #loadMessage;
  #usable = Promise.resolve();  // settles when a reload after a crash has ended (rejected: it failed)
  #reloading = false;
  #failedReloadCrash = null;  // the crash after which the last reload failed, if it did
  #stopWatchingCrashes;
  #disposed = false;
  #disposal = new AbortController();  // aborted by dispose(): the runs under way end as an abort of their signal ends them

  // loaded: the worker's answer to the load, { modelId, config, weightBytes, weightTypes, threads, threadsReason, simd, … }
  constructor(worker, loaded, loadMessage) {
    super(loaded);
    this.#worker = worker;
    this.#modelId = loaded.modelId;
    this.#loadMessage = loadMessage;
    this.#stopWatchingCrashes = worker.onCrash((crash) => this.#reload(crash));
  }

  // disposal: a lease's (model_registry.js), whose dispose() ends this run too
  generate(prompt, options, disposal = undefined) {
    if (this.#disposed) throw new Error('the model was disposed');
    checkPrompt(prompt);
    const { signal, ...rest } = normalizeGenerateOptions(options);
    if (typeof rest.speculative?.draft === 'object') {
      throw new TypeError("generate: a draft model works with models loaded in the same thread; this one runs in a worker (use speculative: { draft: 'prompt-lookup' })");
    }
    const message = async () => ({ type: 'generate', modelId: await this.#liveModelId(), prompt, options: rest });
    return new WorkerGeneration(this.#worker, message, [signal, this.#disposal.signal, disposal], this.config.n_ctx);
  }

  // Like generate(), waits for a reload after an engine crash. The signal stays here: its abort cancels the request,
  // and the worker's score rejects with the AbortError between two of its passes.
  async score(text, options) {
    if (this.#disposed) throw new Error('the model was disposed');
    checkScoreText(text);
    const { signal, ...checked } = normalizeScoreOptions(options);
    if (signal?.aborted) throw scoreAbortedError();
    const request = { type: 'score', modelId: await this.#liveModelId(), text, options: checked };
    return (await this.#worker.request(request, { signal })).value;
  }

  // Like score(): checked here, run in the worker.
  async inspect(input, options) {
    if (this.#disposed) throw new Error('the model was disposed');
    checkPrompt(input, 'inspect', 'input');
    const checked = normalizeInspectOptions(options);
    const request = { type: 'inspect', modelId: await this.#liveModelId(), input: typeof input === 'string' ? input : Array.from(input), options: checked };
    return (await this.#worker.request(request)).value;
  }

  async encode(text) {
    return (await this.#worker.request({ type: 'encode', modelId: await this.#liveModelId(), text })).value;
  }

  async decode(ids) {
    return (await this.#worker.request({ type: 'decode', modelId: await this.#liveModelId(), ids: Array.from(ids) })).value;
  }

  // -> Promise that resolves when the model can run (at once, or once its reload after an engine crash is done)
  // and rejects with the reason when that reload failed; after a failed reload, it tries again.
  whenUsable() {
    if (this.#failedReloadCrash && !this.#reloading) this.#reload(this.#failedReloadCrash);
    return this.#usable;
  }

  // Generations still running end at the worker's next token, as an abort of their signal ends them.
  async dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#disposal.abort();
    this.#stopWatchingCrashes();
    try {
      await this.#usable;  // a reload under way (not one more try after a failed one)
      await this.#worker.request({ type: 'dispose', modelId: this.#modelId });
    } catch {
      // the worker is gone (crashed or terminated), or the reload failed: nothing left to free
    } finally {
      this.#worker.release();
    }
  }

  async #liveModelId() {
    await this.whenUsable();
    return this.#modelId;
  }

  #reload(crash) {
    if (this.#reloading) return;  // this crash ended the reload itself: its request fails with it
    this.#reloading = true;
    this.#failedReloadCrash = null;
    this.#usable = this.#worker.request(this.#loadMessage).then(({ value }) => {
      this.#modelId = value.modelId;
    }, (error) => {
      this.#failedReloadCrash = crash;
      throw new Error(`the model could not be loaded again after the engine crashed (${crash.reason}): ${error.message}`,
        { cause: error });
    }).finally(() => {
      this.#reloading = false;
    });
    this.#usable.catch(() => {});  // reported to whoever calls the model next
  }
}

// Same interface as Generation (generate.js): the worker streams pieces and stats as messages.
class WorkerGeneration {
  stats;
  sequences = [];
  #iterator;

  // message() -> Promise of the generate request (it waits for a model being loaded again); signals: those whose
  // abort ends the run (undefined ones left out)
  constructor(worker, message, signals, contextSize) {
    this.stats = createStats(contextSize);
    this.#iterator = this.#run(worker, message, signals.filter((signal) => signal !== undefined));
  }

  [Symbol.asyncIterator]() {
    return this.#iterator;
  }

  async *#run(worker, message, signals) {
    const queue = new PieceQueue();
    const cancel = new AbortController();
    const onAbort = () => cancel.abort();
    for (const signal of signals) signal.addEventListener('abort', onAbort, { once: true });
    if (signals.some((signal) => signal.aborted)) cancel.abort();
    const onPiece = (piece, stats) => {
      Object.assign(this.stats, stats);
      queue.push(piece);
    };
    const onEnd = ({ value, stats }) => {
      Object.assign(this.stats, stats);
      this.sequences.push(...(value ?? []));
      queue.end();
    };
    const onError = (error) => {
      Object.assign(this.stats, error.stats ?? { stopReason: 'error' });
      queue.fail(error);
    };
    message().then((request) => worker.request(request, { onPiece, signal: cancel.signal })).then(onEnd, onError);
    try {
      yield* queue;
    } finally {
      for (const signal of signals) signal.removeEventListener('abort', onAbort);
      if (!queue.settled) {
        cancel.abort();  // the consumer left the loop early
        this.stats.stopReason ??= 'abort';
      }
    }
  }
}

// Pieces pushed by messages, pulled by for-await.
class PieceQueue {
  #items = [];
  #wake = null;
  #error = null;
  settled = false;

  push(item) {
    this.#items.push(item);
    this.#notify();
  }

  end() {
    this.settled = true;
    this.#notify();
  }

  fail(error) {
    this.#error = error;
    this.end();
  }

  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.#items.length > 0) yield this.#items.shift();
      else if (this.#error) throw this.#error;
      else if (this.settled) return;
      else await new Promise((resolve) => (this.#wake = resolve));
    }
  }

  #notify() {
    this.#wake?.();
    this.#wake = null;
  }
}
