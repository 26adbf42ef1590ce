// The page's one registry of loaded models, reference-counted, used by gpt2.js's loadModel for every model in
// the page's default engine worker (the page, web/page/, and every widget, web/widget/): callers that ask
// for the same model (same URL and options) share one download and one loaded copy; the last to let go
// disposes it, and a load that nobody waits for any more is aborted. A failed load is forgotten, so the next
// caller tries again.
import { loadAbortedError, throwIfAborted } from '../errors.js';
import { DescribedModel } from './model_description.js';

export class ModelRegistry {
  #entries = new Map();  // key -> { model: Promise<Model>, leases: Set, controller: AbortController }

  // key: what identifies the model (null: never shared). load(signal, onProgress) -> Promise<Model>.
  // -> Promise of a LeasedModel; signal aborts this caller's wait (and the load, if no one else waits for it).
  async acquire(key, load, { onProgress, signal } = {}) {
    throwIfAborted(signal);
    const entry = this.#entryFor(key ?? Symbol('unshared'), load);
    const lease = { onProgress };
    entry.leases.add(lease);
    const release = () => this.#release(entry, lease);
    let model;
    try {
      model = await untilAborted(entry.model, signal);
    } catch (error) {
      release();
      throw error;
    }
    return new LeasedModel(model, release);
  }

  #entryFor(key, load) {
    let entry = this.#entries.get(key);
    if (entry) return entry;
    entry = { key, leases: new Set(), controller: new AbortController() };
    const onProgress = (progress) => entry.leases.forEach((lease) => lease.onProgress?.(progress));
    entry.model = load(entry.controller.signal, onProgress);
    entry.model.catch(() => this.#forget(entry));
    this.#entries.set(key, entry);
    return entry;
  }

  #release(entry, lease) {
    if (!entry.leases.delete(lease) || entry.leases.size > 0) return;
    entry.controller.abort();
    entry.model.then((model) => model.dispose(), () => {});
    this.#forget(entry);
  }

  #forget(entry) {
    if (this.#entries.get(entry.key) === entry) this.#entries.delete(entry.key);
  }
}

// One caller's hold on a shared model: the Model interface, with dispose() letting go (once) and ending this
// caller's runs under way, as the model's own dispose() ends them, while the others' go on.
class LeasedModel extends DescribedModel {
  #model;
  #release;
  #disposal = new AbortController();

  constructor(model, release) {
    super(model);
    this.#model = model;
    this.#release = release;
  }

  generate(prompt, options) {
    return this.#live().generate(prompt, options, this.#disposal.signal);
  }

  score(text, options) {
    return this.#live().score(text, options);
  }

  inspect(input, options) {
    return this.#live().inspect(input, options);
  }

  encode(text) {
    return this.#live().encode(text);
  }

  decode(ids) {
    return this.#live().decode(ids);
  }

  whenUsable() {
    return this.#live().whenUsable();
  }

  dispose() {
    this.#disposal.abort();
    this.#release?.();
    this.#model = this.#release = null;
  }

  #live() {
    if (!this.#model) throw new Error('the model was disposed');
    return this.#model;
  }
}

// promise, or an AbortError as soon as signal aborts.
function untilAborted(promise, signal) {
  if (!signal) return promise;
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(loadAbortedError());
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    return undefined;
  });
}
