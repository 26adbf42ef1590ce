// The RPC client of one engine worker (web/lib/worker/worker.js describes the message protocol): numbered requests,
// progress and piece callbacks, cancellation, and crash recovery. Used by worker_model.js.
import { useAssetFolder } from '../engine/asset_folder.js';
import { EngineAbortedError, ModelLoadError, abortError } from '../errors.js';

// The worker's code when the caller carries it (the widget's one script, tools/dev/bundle_web.mjs): workers then
// start from a Blob of it, with nothing more to fetch. Otherwise they import worker.js beside this module or,
// once configure({ assetBase }) named an asset folder (the modules may be bundled, and import.meta.url is then
// the bundle's), gpt2-worker.js there.
let inlineWorkerSource = null;

export function setWorkerSource(source) {
  inlineWorkerSource = source;
}

// -> { source: the worker's module code, shownAs: what to name if it does not load }
function workerScript(folder, configured) {
  if (inlineWorkerSource !== null) return { source: inlineWorkerSource, shownAs: 'its inlined code' };
  const url = new URL(configured ? 'gpt2-worker.js' : './worker.js', configured ? folder : import.meta.url).href;
  const hint = configured ? '' : '; bundled modules need configure({ assetBase }) with the folder of gpt2-worker.js and the wasm';
  return { source: `import ${JSON.stringify(url)};\n`, shownAs: url + hint };
}

// The page side of one engine worker: numbered requests, progress and piece callbacks, cancellation, and
// recovery. When the wasm instance aborts (a genuine out-of-memory, say), the worker is ended, every pending
// request fails with an EngineAbortedError, a new worker takes its place at once, and the crash listeners (the
// models, worker_model.js) load themselves again in it. A worker that cannot start at all is a failure for good:
// every request fails, and the next loadModel starts a new WorkerClient.
export class WorkerClient {
  #worker;
  #scriptUrl;
  #pending = new Map();
  #nextId = 1;
  #users = 0;
  #endsWithLastModel;
  #failure = null;
  #crashListeners = new Set();

  constructor({ endsWithLastModel }) {
    this.#endsWithLastModel = endsWithLastModel;
    this.#start();
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

  // listener(error) after each crash, once the new worker has started. -> a function that removes it.
  onCrash(listener) {
    this.#crashListeners.add(listener);
    return () => this.#crashListeners.delete(listener);
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

  #start() {
    const { folder, configured } = useAssetFolder();
    const { source, shownAs } = workerScript(folder, configured);
    // A Blob URL is same-origin with the page even when this script is not, so the page may start it.
    this.#scriptUrl = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
    this.#worker = new Worker(this.#scriptUrl, { type: 'module' });
    this.#worker.onmessage = ({ data }) => this.#onMessage(data);
    this.#worker.onerror = (event) => {
      event.preventDefault?.();
      this.#fail(new Error(`the engine worker failed (${event.message || `could not load ${shownAs}`})`));
    };
    // The worker runs at a Blob URL, and maybe from a bundle: it finds the wasm where this realm does.
    this.#worker.postMessage({ type: 'configure', assetBase: folder.href });
  }

  #onMessage(message) {
    if (message.type === 'ready') return URL.revokeObjectURL(this.#scriptUrl);
    if (message.type === 'crashed') return this.#restartAfterCrash(message.reason);
    const pending = this.#pending.get(message.id);
    if (!pending) return;
    if (message.type === 'progress') return pending.onProgress?.(message.progress);
    if (message.type === 'piece') return pending.onPiece?.(message.piece, message.stats);
    this.#pending.delete(message.id);
    pending.done();
    if (message.type === 'result') pending.resolve(message);
    else pending.reject(Object.assign(deserializeError(message.error), message.stats ? { stats: message.stats } : {}));
  }

  #restartAfterCrash(reason) {
    const error = new EngineAbortedError(reason, `the WebAssembly engine crashed (${reason}); its models are being loaded again`);
    this.#end(error);
    this.#start();
    for (const listener of this.#crashListeners) listener(error);
  }

  #fail(error) {
    if (this.#failure) return;
    this.#failure = error;
    this.#end(error);
  }

  // Ends the current worker and fails its pending requests with error.
  #end(error) {
    this.#worker.terminate();
    URL.revokeObjectURL(this.#scriptUrl);
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const { done, reject } of pending) {
      done();
      reject(error);
    }
  }
}

// The worker's error as the error it was (by name): a ModelLoadError is one here too, so that callers can test
// instanceof whether the model loads in a worker or not.
function deserializeError({ name, message, file, kind }) {
  if (name === 'AbortError') return abortError(message);
  if (name === 'ModelLoadError') return Object.assign(new ModelLoadError(file, kind, ''), { message });
  const ErrorType = { TypeError, RangeError }[name] ?? Error;
  const error = new ErrorType(message);
  error.name = name;
  if (file !== undefined) error.file = file;
  if (kind !== undefined) error.kind = kind;
  return error;
}
