// The Cache API copy of downloaded model files (browsers): written as the download streams, completed only
// once the model has loaded, so nothing incomplete or invalid is ever stored; and checked when it is read
// back, so that a copy damaged since (truncated, or bytes changed) is never taken for the file. Also what
// the API tells of it: the models stored (listCachedModels) and their removal (deleteCachedModel).
import { Crc32 } from './crc32.js';
import { DamagedCopyError } from '../errors.js';
import { MODEL_FILES, isGgufName, modelFileUrls, resolveModelUrl } from './model_files.js';
import { isStringOrUrl } from './model_source.js';

export const CACHE_NAME = 'gpt2-wasm-models-v1';

// Each cached file has a companion entry, its digest: { length, crc32 } as JSON, at the file's URL with this
// query parameter added. A second entry because an entry's headers are fixed when its put starts, before the
// file has streamed in, and the digest is known only at its end.
const DIGEST_PARAMETER = 'gpt2-wasm-digest';

// Files from this size up are large enough to ask the browser to keep them (persist()).
const PERSIST_FROM_BYTES = 100e6;

export async function openCache() {
  if (typeof caches === 'undefined') return null;  // Node, or an insecure (non-https) page
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null;  // e.g. storage disabled in private browsing
  }
}

function digestUrl(url) {
  const digest = new URL(url);
  digest.searchParams.set(DIGEST_PARAMETER, 'crc32');
  return digest.href;
}

// -> the body of url's cached copy (see source_files.js), { total, chunks, cancel, fromCache: true }, whose
// chunks end in a ModelLoadError 'invalid' if they are not the length and CRC-32 stored with it (checked before
// the last chunk's read returns, so before the file is used); or null when url is not cached, or is cached
// without a readable digest (by an older version, or by a commit cut short), which is then evicted.
export async function openCachedFile(cache, name, url) {
  const [response, digestResponse] = await Promise.all([cache.match(url), cache.match(digestUrl(url))]);
  const digest = await readDigest(digestResponse);
  if (response?.body && digest) {
    const reader = response.body.getReader();
    const chunks = checkedChunks(name, reader, digest, () => evictEntries(cache, url));
    return { total: digest.length, chunks, cancel: () => reader.cancel().catch(() => {}), fromCache: true };
  }
  if (response || digestResponse) await evictEntries(cache, url);
  return null;
}

async function readDigest(response) {
  try {
    const { length, crc32 } = await response.json();
    return Number.isSafeInteger(length) && length >= 0 && Number.isInteger(crc32) && crc32 >= 0 && crc32 <= 0xffffffff
      ? { length, crc32 } : null;
  } catch {
    return null;  // no entry, or not the JSON written here
  }
}

async function* checkedChunks(name, reader, stored, evict) {
  const crc = new Crc32();
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.byteLength;
    if (length > stored.length) break;
    crc.update(value);
    yield value;
  }
  if (length !== stored.length || crc.digest() !== stored.crc32) {
    const found = length > stored.length ? `more than ${stored.length} bytes` : `${length} bytes, CRC-32 ${hex(crc.digest())}`;
    await evict();
    throw new DamagedCopyError(name, `the cached copy is damaged (${found}; stored: ${stored.length} bytes, CRC-32 ${hex(stored.crc32)})`);
  }
}

function hex(crc) {
  return crc.toString(16).padStart(8, '0');
}

// A downloaded file on its way into the Cache API: each chunk is handed to cache.put() as it arrives, and the
// put's body is closed, completing the put, only once the whole model has loaded (commit), which then stores
// the file's digest; on any failure it is errored (discard), which makes the put fail, so an incomplete or
// invalid file is never stored.
// Why this way: storing after the load would need the file a second time, either kept whole in JS (what
// streaming into the engine avoids) or downloaded again; ReadableStream.tee() would queue without bound
// whatever the slower reader has not taken. Here the download waits while more than CACHE_QUEUE_BYTES are
// queued for the cache, so JS holds at most that much of the file, whatever the speed of the storage.
const CACHE_QUEUE_BYTES = 8 << 20;

export class CacheCopy {
  #cache;
  #url;
  #controller;
  #open;         // chunks may still be enqueued
  #wake = null;  // resolves the download's wait for the cache to take queued chunks
  #stored;       // Promise of null (stored) or the put's error
  #crc;
  #length;

  constructor(cache, url, total) {
    this.#cache = cache;
    this.#url = url;
    this.#start(total);
  }

  async write(chunk) {
    if (!this.#open) return;
    this.#crc.update(chunk);
    this.#length += chunk.byteLength;
    this.#controller.enqueue(chunk);
    while (this.#open && this.#controller.desiredSize <= 0) await new Promise((resolve) => (this.#wake = resolve));
  }

  // The server started the file over (download.js): so does the copy.
  restart(total) {
    this.discard();
    this.#start(total);
  }

  // The model loaded: complete the put, then store the digest. -> Promise of null or the error that kept the
  // file out of the cache (a file stored without its digest is deleted: it would not be used).
  async commit() {
    if (this.#open) this.#controller.close();
    this.#open = false;
    const error = await this.#stored;
    if (error) return error;
    try {
      const digest = JSON.stringify({ length: this.#length, crc32: this.#crc.digest() });
      await this.#cache.put(digestUrl(this.#url), new Response(digest, { headers: { 'Content-Type': 'application/json' } }));
      return null;
    } catch (digestError) {
      await this.#cache.delete(this.#url).catch(() => {});
      return digestError;
    }
  }

  discard() {
    if (this.#open) this.#controller.error(new Error('not stored: the model did not load'));
    this.#stop();
  }

  #start(total) {
    let controller;
    // The callbacks act only while this put is the current one (a restart starts another).
    const current = () => this.#controller === controller;
    const body = new ReadableStream({
      start: (streamController) => {
        controller = streamController;
      },
      pull: () => current() && this.#resume(),
      cancel: () => current() && this.#stop(),  // the cache stopped reading (e.g. the quota ran out)
    }, new ByteLengthQueuingStrategy({ highWaterMark: CACHE_QUEUE_BYTES }));
    this.#controller = controller;
    this.#open = true;
    this.#crc = new Crc32();
    this.#length = 0;
    const headers = { 'Content-Type': 'application/octet-stream', ...(total !== null && { 'Content-Length': String(total) }) };
    this.#stored = this.#cache.put(this.#url, new Response(body, { headers })).then(() => null, (error) => {
      if (current()) this.#stop();
      return error;
    });
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

// Completes the cache copies of a model that loaded. -> null, or the error that kept a file out of the cache
// (e.g. a full quota), which costs only the caching and is also told in one console warning.
export async function commitCacheCopies(copies) {
  const failure = (await Promise.all(copies.map((copy) => copy.commit()))).find((error) => error !== null) ?? null;
  if (failure) console.warn(`gpt2-wasm: could not cache the model files: ${failure.message}`);
  return failure;
}

// -> Promise of whether anything was removed.
export async function evictFromCache(urls) {
  const cache = await openCache();
  if (!cache) return false;
  return (await Promise.all(urls.map((url) => evictEntries(cache, url)))).flat().includes(true);
}

function evictEntries(cache, url) {
  return Promise.all([cache.delete(url), cache.delete(digestUrl(url))]);
}

// The models stored in the Cache API: [{ source, files: [{ url, bytes }], bytes, complete }], in the order
// their first file was stored. source: the URL that loads the model (a folder's, ending in "/", or a .gguf
// file's); files: those of its files that are stored, in the model's order, each with its bytes as checked
// when read back (a file stored without its digest, which would not be used, is not counted); bytes: theirs
// together; complete: every file of the model is stored, so loading it makes no request. Without a Cache API
// (Node, an insecure page): [].
export async function listCachedModels() {
  const cache = await openCache();
  if (!cache) return [];
  const urls = (await cache.keys()).map((request) => request.url).filter((url) => sourceOfFile(url) !== null);
  const digests = await Promise.all(urls.map(async (url) => readDigest(await cache.match(digestUrl(url)))));
  const stored = new Map(urls.map((url, i) => [url, digests[i]?.length]).filter(([, bytes]) => bytes !== undefined));
  const sources = new Set(urls.map(sourceOfFile));
  return [...sources].map((source) => storedModel(source, stored)).filter((model) => model.files.length > 0);
}

function storedModel(source, stored) {
  const urls = Object.values(modelFileUrls(source).urls);
  const files = urls.filter((url) => stored.has(url)).map((url) => ({ url, bytes: stored.get(url) }));
  const bytes = files.reduce((sum, file) => sum + file.bytes, 0);
  return { source, files, bytes, complete: files.length === urls.length };
}

// Removes a model's files and their digests from the Cache API; a model loaded from them keeps working (it is
// in memory), and loading it again downloads them. source: its URL as loadModel takes it (relative to the
// page) or as listCachedModels gives it. -> Promise of whether anything was removed (false without a Cache API).
export async function deleteCachedModel(source) {
  if (!isStringOrUrl(source)) {
    throw new TypeError(`deleteCachedModel: the source must be a model's URL (a string or URL), got ${String(source)}`);
  }
  if (!await openCache()) return false;
  return evictFromCache(Object.values(modelFileUrls(absoluteUrl(String(source))).urls));
}

function absoluteUrl(text) {
  try {
    return resolveModelUrl(text).href;
  } catch {
    throw new TypeError(`deleteCachedModel: not a URL: ${text}`);
  }
}

// The source of a cached file: a .gguf file is its own; a folder's file, its folder. null: a digest entry, or
// no file of a model.
function sourceOfFile(href) {
  const url = new URL(href);
  if (url.searchParams.has(DIGEST_PARAMETER)) return null;
  if (isGgufName(url.pathname)) return href;
  const name = url.pathname.slice(url.pathname.lastIndexOf('/') + 1);
  return Object.values(MODEL_FILES).includes(name) && url.search === '' ? new URL('./', url).href : null;
}

// Before a large file is cached: asks the browser, once per page, to keep this site's storage when space runs
// low (persist()), which it may grant or not; never in the way of the load. Pages only: workers have no
// persist(), so the page asks for its worker's downloads (web/page/model_menu.js).
let persistenceRequested = false;

export function requestPersistentStorage(bytes) {
  const storage = globalThis.navigator?.storage;
  if (persistenceRequested || !(bytes >= PERSIST_FROM_BYTES) || typeof storage?.persist !== 'function') return;
  persistenceRequested = true;
  Promise.resolve().then(() => storage.persist()).catch(() => {});
}
