// The RPC client of one engine worker (web/worker.js describes the message protocol): numbered requests,
// progress and piece callbacks, cancellation, and crash recovery. Used by worker_model.js.

// The page side of one engine worker: numbered requests, progress and piece callbacks, cancellation, and
// recovery: after a crash every pending request fails and the next loadModel starts a new worker.
export class WorkerClient {
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
