// The public API of gpt2-wasm, used by the page, the widget and Node (web/cli.js):
//
//   const model = await loadModel(source, { onProgress, signal, useWorker });
//   for await (const piece of model.generate('Hello', { maxNewTokens: 20 })) show(piece.text);
//   model.dispose();
//
// source: a base URL of a model folder (config.json, model.safetensors, vocab.json, merges.txt), absolute or
// relative to the page; in Node a folder path; or local files (see loader.js). In browser pages the model
// lives in a Web Worker (useWorker defaults to true where `window` exists), elsewhere in this thread; both
// kinds of Model have the same interface.
//
// Sharing one worker between several widgets: `const worker = createEngineWorker()`, then
// `loadModel(source, { worker })` for each; `worker.terminate()` when done. Without it, every model in a page
// shares one default worker, which ends when its last model is disposed.
import { DEFAULT_THREADS, checkThreads, loadEngine, resolveThreads } from './engine.js';
import { Generation, SessionPool, createStats, normalizeGenerateOptions } from './generate.js';
import { ModelLoadError, loadEngineModel } from './loader.js';
import { createTokenizer } from './tokenizer.js';

export { ModelLoadError };

const IS_PAGE = typeof window !== 'undefined';

// -> Model: { config, weightBytes, threads, generate(prompt, options), encode(text), decode(ids), dispose() }
// weights: 'fp32' (default) or 'int8' (quantized on load: about a quarter of the weight memory); the engine checks
// it before model.safetensors is opened.
// threads: 'auto' (default in browsers: the cores, at most 8) or a count (default 1 in Node). More than one
// needs SharedArrayBuffer, which browsers give only to cross-origin-isolated pages (COOP + COEP headers);
// elsewhere the model quietly runs on one thread. model.threads says how many it got.
export async function loadModel(source, { onProgress, signal, useWorker = IS_PAGE, worker, weights = 'fp32', threads = DEFAULT_THREADS } = {}) {
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError('loadModel: onProgress must be a function');
  checkThreads(threads);
  if (worker || useWorker) return loadWorkerModel(source, { onProgress, signal, worker, weights, threads });
  return loadLocalModel(source, { onProgress, signal, weights, threads });
}

// ---- models in this thread (Node, workers, and the engine worker itself) ----

export async function loadLocalModel(source, { onProgress, signal, weights = 'fp32', threads = DEFAULT_THREADS } = {}) {
  const engine = await loadEngine({ threads: await resolveThreads(threads) });
  const { model, vocab, merges } = await loadEngineModel(engine, source, { onProgress, signal, weights });
  try {
    return new LocalModel(model, createModelTokenizer(vocab, merges, model.config));
  } catch (error) {
    model.dispose();
    throw error;
  }
}

function createModelTokenizer(vocab, merges, config) {
  let tokenizer;
  try {
    tokenizer = createTokenizer(vocab, merges);
  } catch (error) {
    throw new ModelLoadError('vocab.json + merges.txt', 'invalid', `invalid tokenizer files: ${error.message}`);
  }
  if (tokenizer.vocabSize > config.n_vocab) {
    throw new ModelLoadError('vocab.json', 'invalid',
      `has ${tokenizer.vocabSize} tokens but the model only ${config.n_vocab}: files of different models?`);
  }
  return tokenizer;
}

class LocalModel {
  config;
  weightBytes;
  threads;
  #engineModel;
  #pool;
  #tokenizer;

  constructor(engineModel, tokenizer) {
    this.config = engineModel.config;
    this.weightBytes = engineModel.weightBytes;
    this.threads = engineModel.threads;
    this.#engineModel = engineModel;
    this.#pool = new SessionPool(engineModel);
    this.#tokenizer = tokenizer;
  }

  generate(prompt, options) {
    if (!this.#pool) throw new Error('the model was disposed');
    const target = { pool: this.#pool, tokenizer: this.#tokenizer, config: this.config };
    return new Generation(target, prompt, normalizeGenerateOptions(options));
  }

  async encode(text) {
    return this.#tokenizer.encode(text);
  }

  async decode(ids) {
    return this.#tokenizer.decode(Array.from(ids));
  }

  // Generations still running keep their session (and the weights) until they end.
  dispose() {
    this.#pool?.dispose();
    this.#engineModel?.dispose();
    this.#pool = this.#engineModel = null;
  }
}

// ---- models in a Web Worker (worker.js describes the message protocol) ----

let defaultWorker = null;

export function createEngineWorker() {
  return new EngineWorker({ endsWithLastModel: false });
}

async function loadWorkerModel(source, { onProgress, signal, worker, weights, threads }) {
  if (typeof Worker === 'undefined') throw new Error('loadModel: useWorker needs Web Workers (a browser)');
  if (!worker) {
    if (!defaultWorker?.usable) defaultWorker = new EngineWorker({ endsWithLastModel: true });
    worker = defaultWorker;
  }
  worker.retain();
  let answer;
  try {
    answer = await worker.request({ type: 'load', source: portableSource(source), weights, threads }, { onProgress, signal });
  } catch (error) {
    worker.release();
    throw error;
  }
  const model = new WorkerModel(worker, answer.value);
  if (signal?.aborted) {  // the load finished before the worker saw the cancel
    model.dispose();
    throw new DOMException('loading the model was aborted', 'AbortError');
  }
  return model;
}

// The worker runs at a Blob URL, so relative URLs are resolved here; a FileList becomes an array.
function portableSource(source) {
  if (typeof source === 'string' || source instanceof URL) {
    return new URL(String(source), globalThis.document?.baseURI ?? globalThis.location?.href).href;
  }
  if (typeof FileList !== 'undefined' && source instanceof FileList) return Array.from(source);
  return source;
}

class WorkerModel {
  config;
  weightBytes;
  threads;
  #worker;
  #modelId;
  #disposed = false;

  constructor(worker, { modelId, config, weightBytes, threads }) {
    this.#worker = worker;
    this.#modelId = modelId;
    this.config = config;
    this.weightBytes = weightBytes;
    this.threads = threads;
  }

  generate(prompt, options) {
    if (this.#disposed) throw new Error('the model was disposed');
    if (typeof prompt !== 'string') throw new TypeError(`generate: prompt must be a string, got ${typeof prompt}`);
    const { signal, ...rest } = normalizeGenerateOptions(options);
    const message = { type: 'generate', modelId: this.#modelId, prompt, options: rest };
    return new WorkerGeneration(this.#worker, message, signal, this.config.n_ctx);
  }

  async encode(text) {
    return (await this.#worker.request({ type: 'encode', modelId: this.#modelId, text })).value;
  }

  async decode(ids) {
    return (await this.#worker.request({ type: 'decode', modelId: this.#modelId, ids: Array.from(ids) })).value;
  }

  async dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    try {
      await this.#worker.request({ type: 'dispose', modelId: this.#modelId });
    } catch {
      // the worker is gone (crashed or terminated): nothing left to free
    } finally {
      this.#worker.release();
    }
  }
}

// Same interface as Generation (generate.js): the worker streams pieces and stats as messages.
class WorkerGeneration {
  stats;
  #iterator;

  constructor(worker, message, signal, contextSize) {
    this.stats = createStats(contextSize);
    this.#iterator = this.#run(worker, message, signal);
  }

  [Symbol.asyncIterator]() {
    return this.#iterator;
  }

  async *#run(worker, message, signal) {
    const queue = new PieceQueue();
    const cancel = new AbortController();
    const onAbort = () => cancel.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) cancel.abort();
    const onPiece = (piece, stats) => {
      Object.assign(this.stats, stats);
      queue.push(piece);
    };
    const onEnd = ({ stats }) => {
      Object.assign(this.stats, stats);
      queue.end();
    };
    const onError = (error) => {
      Object.assign(this.stats, error.stats ?? { stopReason: 'error' });
      queue.fail(error);
    };
    worker.request(message, { onPiece, signal: cancel.signal }).then(onEnd, onError);
    try {
      yield* queue;
    } finally {
      signal?.removeEventListener('abort', onAbort);
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

// The page side of one engine worker: numbered requests, progress and piece callbacks, cancellation, and
// recovery: after a crash every pending request fails and the next loadModel starts a new worker.
class EngineWorker {
  #worker;
  #pending = new Map();
  #nextId = 1;
  #users = 0;
  #endsWithLastModel;
  #failure = null;
  #scriptUrl;

  constructor({ endsWithLastModel }) {
    this.#endsWithLastModel = endsWithLastModel;
    const workerUrl = new URL('./worker.js', import.meta.url).href;
    // A Blob URL is same-origin with the page even when this script is not, so the page may start it.
    this.#scriptUrl = URL.createObjectURL(new Blob([`import ${JSON.stringify(workerUrl)};\n`], { type: 'text/javascript' }));
    this.#worker = new Worker(this.#scriptUrl, { type: 'module' });
    this.#worker.onmessage = ({ data }) => this.#onMessage(data);
    this.#worker.onerror = (event) => {
      event.preventDefault?.();
      this.#fail(new Error(`the engine worker failed (${event.message || `could not load ${workerUrl}`})`));
    };
  }

  get usable() {
    return this.#failure === null;
  }

  // -> Promise of the answer { value, stats? }. signal cancels the request in the worker.
  request(message, { onProgress, onPiece, signal } = {}) {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => this.#worker.postMessage({ type: 'cancel', id });
      const done = () => signal?.removeEventListener('abort', onAbort);
      this.#pending.set(id, { resolve, reject, onProgress, onPiece, done });
      this.#worker.postMessage({ ...message, id });
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  retain() {
    this.#users++;
  }

  release() {
    this.#users--;
    if (this.#users === 0 && this.#endsWithLastModel) this.terminate();
  }

  terminate() {
    this.#fail(new Error('the engine worker was terminated'));
  }

  #onMessage(message) {
    if (message.type === 'ready') return URL.revokeObjectURL(this.#scriptUrl);
    if (message.type === 'crashed') return this.#fail(new Error(`the engine worker crashed: ${message.message}`));
    const pending = this.#pending.get(message.id);
    if (!pending) return;
    if (message.type === 'progress') return pending.onProgress?.(message.progress);
    if (message.type === 'piece') return pending.onPiece?.(message.piece, message.stats);
    this.#pending.delete(message.id);
    pending.done();
    if (message.type === 'result') pending.resolve(message);
    else pending.reject(Object.assign(deserializeError(message.error), message.stats ? { stats: message.stats } : {}));
  }

  #fail(error) {
    if (this.#failure) return;
    this.#failure = error;
    this.#worker.terminate();
    URL.revokeObjectURL(this.#scriptUrl);
    for (const pending of this.#pending.values()) {
      pending.done();
      pending.reject(error);
    }
    this.#pending.clear();
  }
}

function deserializeError({ name, message, file, kind }) {
  if (name === 'AbortError') return new DOMException(message, 'AbortError');
  const ErrorType = { TypeError, RangeError }[name] ?? Error;
  const error = new ErrorType(message);
  error.name = name;
  if (file !== undefined) error.file = file;
  if (kind !== undefined) error.kind = kind;
  return error;
}
