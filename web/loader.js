// Loads a model folder in the Hugging Face layout (config.json, model.safetensors, vocab.json, merges.txt)
// from a base URL, from local File/Blob/ArrayBuffer objects, or (Node) from a folder path, and creates the
// engine model from it. model.safetensors streams chunk by chunk into the engine's loader, which converts each
// tensor as it arrives: the file is never held whole, in JS or in the wasm heap. In browsers, downloads are
// copied into the Cache API as they stream, and the copies are completed only once the model has loaded;
// nothing incomplete or invalid is ever stored. Plain ES module; Node-only modules are imported in Node branches.

export const MODEL_FILES = Object.freeze({
  config: 'config.json',
  weights: 'model.safetensors',
  vocab: 'vocab.json',
  merges: 'merges.txt',
});
export const CACHE_NAME = 'gpt2-wasm-models-v1';

const IS_NODE = typeof process === 'object' && typeof process.versions?.node === 'string';
const PROGRESS_INTERVAL_MS = 100;
const NODE_READ_CHUNK_BYTES = 4 << 20;

// kind: 'network' (connection, CORS, interrupted download), 'http' (error status), 'missing' (no such local
// file) or 'invalid' (the bytes are not what the file should be: HTML page, corrupt JSON, bad safetensors).
export class ModelLoadError extends Error {
  constructor(file, kind, message, options) {
    super(`${file}: ${message}`, options);
    this.name = 'ModelLoadError';
    this.file = file;
    this.kind = kind;
  }
}

// -> { model: EngineModel, vocab (object) | null, merges (string) | null }
// source: base URL (string or URL), Node folder path, { config, weights, vocab, merges } of File/Blob/
// ArrayBuffer/typed arrays, or an array/FileList of Files matched by name. withTokenizer: false skips
// vocab.json and merges.txt (models used with token ids only). weights: 'fp32' or 'int8' (WasmEngine.createModelLoader,
// which checks it before model.safetensors is opened).
export async function loadEngineModel(engine, source, { onProgress, signal, withTokenizer = true, weights = 'fp32' } = {}) {
  const files = await openModelFiles(source);
  const context = { onProgress, signal, cacheCopies: [] };
  try {
    const text = {};
    for (const key of withTokenizer ? ['config', 'vocab', 'merges'] : ['config']) {
      text[key] = await readModelFile(files[key], context, (total) => new BytesSink(files[key].name, total));
    }
    parseJson(MODEL_FILES.config, text.config);  // names the file when it is not JSON at all
    const configJson = decodeText(MODEL_FILES.config, text.config);
    const vocab = text.vocab ? parseJson(MODEL_FILES.vocab, text.vocab) : null;
    const merges = text.merges ? decodeText(MODEL_FILES.merges, text.merges) : null;
    const model = await readModelFile(files.weights, context,
      (total) => new WeightsSink(engine, files.weights.name, total, configJson, weights));
    await commitCacheCopies(context.cacheCopies);
    return { model, vocab, merges };
  } catch (error) {
    for (const copy of context.cacheCopies) copy.discard();
    if (error.kind === 'invalid') await files.evict?.();  // a cached file may be the bad one
    throw error;
  }
}

// ---- reading one file into memory (text files) or into the engine's loader (weights) ----

// file: { name, open(signal) -> { total (bytes or null), chunks: AsyncIterable<Uint8Array>, cancel(), cacheCopy } }
// createSink(total): where the bytes go ({ write(chunk), length, finish() -> result, discard() }).
async function readModelFile(file, { onProgress, signal, cacheCopies }, createSink) {
  throwIfAborted(signal, file.name);
  const { total, chunks, cancel, cacheCopy } = await file.open(signal);
  let sink;
  try {
    sink = createSink(total);
    const progress = new ProgressReporter(file.name, total, onProgress);
    for await (const chunk of readChunks(chunks, file.name, signal, () => `${sink.length} of ${total ?? '?'} bytes`)) {
      if (sink.length === 0) checkNotHtml(file.name, chunk);
      sink.write(chunk);
      await cacheCopy?.write(chunk);
      progress.update(sink.length);
      throwIfAborted(signal, file.name);
    }
    if (total !== null && sink.length < total) {
      throw new ModelLoadError(file.name, 'network',
        `network error: the download ended after ${sink.length} of ${total} bytes (connection closed early)`);
    }
    const result = sink.finish();
    progress.done(sink.length);
    if (cacheCopy) cacheCopies.push(cacheCopy);
    return result;
  } catch (error) {
    sink?.discard();
    cacheCopy?.discard();
    cancel();
    throw error;
  }
}

// Errors of the transfer itself (not of what is done with the bytes) are network errors.
async function* readChunks(chunks, name, signal, describeProgress) {
  try {
    yield* chunks;
  } catch (error) {
    throwIfAborted(signal, name);
    if (error instanceof ModelLoadError) throw error;
    throw new ModelLoadError(name, 'network',
      `network error: the download was interrupted after ${describeProgress()} (${describe(error)})`, { cause: error });
  }
}

function throwIfAborted(signal, name) {
  if (signal?.aborted) throw new DOMException(`loading ${name} was aborted`, 'AbortError');
}

class BytesSink {
  #parts = [];
  length = 0;

  constructor(name, total) {
    if (total === 0) throw new ModelLoadError(name, 'invalid', 'the file is empty');
  }

  write(chunk) {
    this.#parts.push(chunk);
    this.length += chunk.byteLength;
  }

  finish() {
    const bytes = new Uint8Array(this.length);
    let offset = 0;
    for (const part of this.#parts) {
      bytes.set(part, offset);
      offset += part.byteLength;
    }
    this.#parts = [];
    return bytes;
  }

  discard() {
    this.#parts = [];
  }
}

// Feeds model.safetensors to the engine's loader (WasmEngine.createModelLoader) as it arrives; finish() makes
// the model. The engine checks the file, header first.
class WeightsSink {
  #loader;
  length = 0;

  constructor(engine, name, total, configJson, format) {
    // Without fileSize: a Content-Length may be wrong (a cut or lying server), which must stay a network error
    // (see readModelFile), not become a header that disagrees with the file; the engine checks the tensors'
    // extent against the bytes that arrived when the file ends.
    this.#loader = engineCall(() => engine.createModelLoader(configJson, { weights: format }));
  }

  write(chunk) {
    this.length += chunk.byteLength;
    engineCall(() => this.#loader.feed(chunk));
  }

  finish() {
    try {
      return engineCall(() => this.#loader.finish());
    } finally {
      this.#loader.dispose();
    }
  }

  discard() {
    this.#loader.dispose();
  }
}

// The file each kind of engine error is about.
const ENGINE_ERROR_FILES = { config: MODEL_FILES.config, file: MODEL_FILES.weights };

// Runs fn, turning the engine's errors into load errors by their kind: a config or file error is the file's
// fault (ModelLoadError 'invalid'; the engine's message already names the file); out of memory is not (a plain
// Error, and nothing is evicted from the cache).
function engineCall(fn) {
  try {
    return fn();
  } catch (error) {
    if (error.name !== 'EngineError') throw error;
    if (error.kind === 'memory') {
      throw new Error(`${error.message} (the WebAssembly heap holds 4 GB at most, and one allocation 2 GB)`, { cause: error });
    }
    const file = ENGINE_ERROR_FILES[error.kind];
    if (!file) throw error;  // 'input': a caller's mistake, not the files'
    const loadError = new ModelLoadError(file, 'invalid', '', { cause: error });
    loadError.message = error.kind === 'file' ? `${error.message} (a corrupt file, or not GPT-2 weights?)` : error.message;
    throw loadError;
  }
}

// The one check for a web page served instead of a model file (a wrong URL, or a login or error page with
// status 200): on the first bytes of every file, before JSON or the engine would report something less clear.
function checkNotHtml(name, firstBytes) {
  let i = 0;
  while (i < firstBytes.length && (firstBytes[i] === 0x20 || firstBytes[i] === 0x0a || firstBytes[i] === 0x0d ||
    firstBytes[i] === 0x09 || firstBytes[i] === 0xef || firstBytes[i] === 0xbb || firstBytes[i] === 0xbf)) i++;
  if (firstBytes[i] === 0x3c /* '<' */) {
    throw new ModelLoadError(name, 'invalid',
      'got an HTML page instead of the file (wrong URL, or a login or error page served with status 200)');
  }
}

function decodeText(name, bytes) {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new ModelLoadError(name, 'invalid', 'not UTF-8 text (corrupt file?)');
  }
}

function parseJson(name, bytes) {
  try {
    return JSON.parse(decodeText(name, bytes));
  } catch (error) {
    if (error instanceof ModelLoadError) throw error;
    throw new ModelLoadError(name, 'invalid', `invalid JSON (corrupt file?): ${error.message}`);
  }
}

class ProgressReporter {
  #file;
  #total;
  #onProgress;
  #lastTime = -Infinity;

  constructor(file, total, onProgress) {
    this.#file = file;
    this.#total = total;
    this.#onProgress = onProgress;
    this.#emit(0);
  }

  update(loaded) {
    const now = Date.now();
    if (now - this.#lastTime >= PROGRESS_INTERVAL_MS) this.#emit(loaded, now);
  }

  done(loaded) {
    this.#total = loaded;
    this.#emit(loaded);
  }

  #emit(loaded, now = Date.now()) {
    this.#lastTime = now;
    const total = this.#total;
    this.#onProgress?.({ file: this.#file, loaded, total, fraction: total ? Math.min(1, loaded / total) : null });
  }
}

function describe(error) {
  const cause = error?.cause?.message ?? error?.cause?.code;
  return cause ? `${error.message}: ${cause}` : String(error?.message ?? error);
}

// ---- sources: each returns { config, weights, vocab, merges } of file openers, plus optional store/evict ----

async function openModelFiles(source) {
  if (typeof source === 'string' || source instanceof URL) {
    const text = String(source);
    if (/^https?:/i.test(text) || !IS_NODE) return openUrlFolder(resolveUrl(text));
    return openNodeFolder(text.startsWith('file:') ? (await import('node:url')).fileURLToPath(text) : text);
  }
  if (isFileList(source)) return openNamedFiles(Array.from(source));
  if (source && typeof source === 'object') return openLocalObjects(source);
  throw new TypeError(`loadModel: unsupported model source ${String(source)} (a URL, a folder path or files)`);
}

function resolveUrl(text) {
  const base = globalThis.document?.baseURI ?? globalThis.location?.href;
  const url = base ? new URL(text, base) : new URL(text);
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

function isFileList(source) {
  return Array.isArray(source) || (typeof FileList !== 'undefined' && source instanceof FileList);
}

function openUrlFolder(baseUrl) {
  const files = {};
  for (const [key, name] of Object.entries(MODEL_FILES)) files[key] = urlFile(name, new URL(name, baseUrl).href);
  const urls = Object.values(files).map((file) => file.url);
  files.evict = () => evictFromCache(urls);
  return files;
}

function urlFile(name, url) {
  return {
    name,
    url,
    open: async (signal) => {
      const cache = await openCache();
      const cached = await cache?.match(url);
      if (cached) return responseBody(name, url, cached);
      const body = responseBody(name, url, await fetchFile(name, url, signal));
      return { ...body, cacheCopy: cache ? new CacheCopy(cache, url, body.total) : null };
    },
  };
}

async function fetchFile(name, url, signal) {
  let response;
  try {
    // CORS mode (fetch's default, spelled out because it matters): under the page's COEP require-corp (threads,
    // see tools/serve.mjs) a cross-origin response is only usable if CORS or CORP allows it, and Hugging Face
    // (and the CDN it redirects to) answers with Access-Control-Allow-Origin: *. Without credentials, so the
    // wildcard suffices. A no-cors fetch would give an opaque response that COEP blocks.
    response = await fetch(url, { signal, mode: 'cors', credentials: 'same-origin' });
  } catch (error) {
    throwIfAborted(signal, name);
    throw new ModelLoadError(name, 'network',
      `network error fetching ${url} (offline, connection refused, or blocked by CORS): ${describe(error)}`, { cause: error });
  }
  if (!response.ok) {
    response.body?.cancel().catch(() => {});
    const hint = response.status === 401 || response.status === 403 ? ' (private or gated repository?)' : '';
    throw new ModelLoadError(name, 'http', `HTTP ${response.status} ${response.statusText} from ${url}${hint}`.trimEnd());
  }
  return response;
}

function responseBody(name, url, response) {
  // With a Content-Encoding, Content-Length counts compressed bytes: the size is then unknown.
  const encoded = (response.headers.get('content-encoding') ?? 'identity') !== 'identity';
  const length = response.headers.get('content-length');
  const total = !encoded && length !== null && /^\d+$/.test(length) ? Number(length) : null;
  if (!response.body) throw new ModelLoadError(name, 'network', `no response body from ${url}`);
  const reader = response.body.getReader();
  return {
    total,
    chunks: readerChunks(reader),
    cancel: () => reader.cancel().catch(() => {}),
  };
}

async function* readerChunks(reader) {
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    yield value;
  }
}

async function openCache() {
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

class CacheCopy {
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
async function commitCacheCopies(copies) {
  const failure = (await Promise.all(copies.map((copy) => copy.commit()))).find((error) => error !== null);
  if (failure) console.warn(`gpt2-wasm: could not cache the model files: ${failure.message}`);
}

async function evictFromCache(urls) {
  const cache = await openCache();
  if (cache) await Promise.all(urls.map((url) => cache.delete(url)));
}

// Local objects: { config, weights, vocab, merges } of File, Blob, ArrayBuffer, typed array or string.
function openLocalObjects(objects) {
  const files = {};
  for (const [key, name] of Object.entries(MODEL_FILES)) files[key] = localFile(objects[key], objects[key]?.name ?? name);
  return files;
}

// An array or FileList of Files (e.g. from <input type=file multiple> or a dropped folder), matched by name.
function openNamedFiles(list) {
  const byName = new Map(list.map((file) => [file.name, file]));
  const objects = {};
  for (const [key, name] of Object.entries(MODEL_FILES)) objects[key] = byName.get(name);
  return openLocalObjects(objects);
}

function localFile(object, name) {
  return {
    name,
    open: async () => {
      if (object === undefined || object === null) throw new ModelLoadError(name, 'missing', 'file not given');
      if (typeof Blob !== 'undefined' && object instanceof Blob) {
        const reader = object.stream().getReader();
        return { total: object.size, chunks: readerChunks(reader), cancel: () => reader.cancel().catch(() => {}) };
      }
      const bytes = toBytes(object, name);
      return { total: bytes.byteLength, chunks: [bytes], cancel: () => {} };
    },
  };
}

function toBytes(object, name) {
  if (typeof object === 'string') return new TextEncoder().encode(object);
  if (object instanceof ArrayBuffer) return new Uint8Array(object);
  if (ArrayBuffer.isView(object)) return new Uint8Array(object.buffer, object.byteOffset, object.byteLength);
  throw new ModelLoadError(name, 'invalid', `expected a File, Blob, ArrayBuffer or typed array, got ${typeof object}`);
}

// Node: a folder path, read in chunks of NODE_READ_CHUNK_BYTES (the size of the engine's staging block).
async function openNodeFolder(folder) {
  const [fs, path] = await Promise.all([import('node:fs'), import('node:path')]);
  const files = {};
  for (const [key, name] of Object.entries(MODEL_FILES)) files[key] = nodeFile(fs, path.join(folder, name), name);
  return files;
}

function nodeFile(fs, filePath, name) {
  return {
    name,
    open: async () => {
      let fd;
      try {
        fd = fs.openSync(filePath, 'r');
      } catch (error) {
        throw new ModelLoadError(name, 'missing', `cannot read ${filePath}: ${error.message}`);
      }
      const total = fs.fstatSync(fd).size;
      let closed = false;
      const close = () => {
        if (!closed) fs.closeSync(fd);
        closed = true;
      };
      return { total, chunks: nodeChunks(fs, fd, close), cancel: close };
    },
  };
}

async function* nodeChunks(fs, fd, close) {
  try {
    const buffer = new Uint8Array(NODE_READ_CHUNK_BYTES);
    for (;;) {
      const read = fs.readSync(fd, buffer, 0, buffer.length, null);
      if (read === 0) return;
      yield buffer.subarray(0, read);  // the sink copies it before the next read
      await new Promise((resolve) => setImmediate(resolve));  // lets an abort or progress through
    }
  } finally {
    close();
  }
}
