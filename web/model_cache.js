// The Cache API copy of downloaded model files (browsers): written as the download streams, completed only
// once the model has loaded, so nothing incomplete or invalid is ever stored.
export const CACHE_NAME = 'gpt2-wasm-models-v1';

export async function openCache() {
  if (typeof caches === 'undefined') return null;  // Node, or an insecure (non-https) page
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null;  // e.g. storage disabled in private browsing
  }
}

// A downloaded file on its way into the Cache API: each chunk is handed to cache.put() as it arrives, and the
// put's body is closed, completing the put, only once the whole model has loaded (commit); on any failure it
// is errored (discard), which makes the put fail, so an incomplete or invalid file is never stored.
// Why this way: storing after the load would need the file a second time, either kept whole in JS (what
// streaming into the engine avoids) or downloaded again; ReadableStream.tee() would queue without bound
// whatever the slower reader has not taken. Here the download waits while more than CACHE_QUEUE_BYTES are
// queued for the cache, so JS holds at most that much of the file, whatever the speed of the storage.
const CACHE_QUEUE_BYTES = 8 << 20;

export class CacheCopy {
  #controller;
  #open = true;  // chunks may still be enqueued
  #wake = null;  // resolves the download's wait for the cache to take queued chunks
  #stored;       // Promise of null (stored) or the put's error

  constructor(cache, url, total) {
    const body = new ReadableStream({
      start: (controller) => {
        this.#controller = controller;
      },
      pull: () => this.#resume(),
      cancel: () => this.#stop(),  // the cache stopped reading (e.g. the quota ran out)
    }, new ByteLengthQueuingStrategy({ highWaterMark: CACHE_QUEUE_BYTES }));
    const headers = { 'Content-Type': 'application/octet-stream', ...(total !== null && { 'Content-Length': String(total) }) };
    this.#stored = cache.put(url, new Response(body, { headers })).then(() => null, (error) => {
      this.#stop();
      return error;
    });
  }

  async write(chunk) {
    if (!this.#open) return;
    this.#controller.enqueue(chunk);
    while (this.#open && this.#controller.desiredSize <= 0) await new Promise((resolve) => (this.#wake = resolve));
  }

  // The model loaded: complete the put. -> Promise of null or the error that kept the file out of the cache.
  commit() {
    if (this.#open) this.#controller.close();
    this.#open = false;
    return this.#stored;
  }

  discard() {
    if (this.#open) this.#controller.error(new Error('not stored: the model did not load'));
    this.#stop();
  }

  #stop() {
    this.#open = false;
    this.#resume();
  }

  #resume() {
    this.#wake?.();
    this.#wake = null;
  }
}

// Completes the cache copies of a model that loaded; a storage failure (e.g. a full quota) costs only the
// caching, with one warning.
export async function commitCacheCopies(copies) {
  const failure = (await Promise.all(copies.map((copy) => copy.commit()))).find((error) => error !== null);
  if (failure) console.warn(`gpt2-wasm: could not cache the model files: ${failure.message}`);
}

export async function evictFromCache(urls) {
  const cache = await openCache();
  if (cache) await Promise.all(urls.map((url) => cache.delete(url)));
}
