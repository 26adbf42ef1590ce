// Models in a Web Worker, seen from the page: WorkerModel and WorkerGeneration give them the public Model
// interface (see gpt2.js) over a WorkerClient (worker_client.js); the default worker's models are shared
// through the page's model registry (model_registry.js).
import { createStats, normalizeGenerateOptions } from './generate.js';
import { ModelRegistry } from './model_registry.js';
import { WorkerClient } from './worker_client.js';

let defaultWorker = null;
const registry = new ModelRegistry();  // the models of the default worker

// -> a Model in worker (a WorkerClient of the caller's) or, without one, in the page's default worker, which
// ends with its last model; models of the default worker are shared through the registry.
export async function loadWorkerModel(source, { onProgress, signal, worker, weights, threads }) {
  if (typeof Worker === 'undefined') throw new Error('loadModel: useWorker needs Web Workers (a browser)');
  const portable = portableSource(source);
  const load = (loadSignal, loadProgress) => loadOnWorker(worker ?? usableDefaultWorker(), portable,
    { onProgress: loadProgress, signal: loadSignal, weights, threads });
  if (worker) return load(signal, onProgress);
  // Only a URL names a model; other sources (files) are loaded for their caller alone.
  const key = typeof portable === 'string' ? JSON.stringify([portable, weights, threads]) : null;
  return registry.acquire(key, load, { onProgress, signal });
}

function usableDefaultWorker() {
  if (!defaultWorker?.usable) defaultWorker = new WorkerClient({ endsWithLastModel: true });
  return defaultWorker;
}

async function loadOnWorker(worker, source, { onProgress, signal, weights, threads }) {
  worker.retain();
  let answer;
  try {
    answer = await worker.request({ type: 'load', source, weights, threads }, { onProgress, signal });
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
  weightTypes;
  threads;
  #worker;
  #modelId;
  #disposed = false;

  constructor(worker, { modelId, config, weightBytes, weightTypes, threads }) {
    this.#worker = worker;
    this.#modelId = modelId;
    this.config = config;
    this.weightBytes = weightBytes;
    this.weightTypes = weightTypes;
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
