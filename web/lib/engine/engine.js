// The wasm engine for JavaScript: loads public/wasm/gpt2.wasm or, for threads, gpt2-mt.wasm (browsers, workers,
// Node) and wraps the embind objects of wasm/bindings.cpp in small classes that throw EngineError with the
// engine's { kind, message } and free their C++ objects in dispose(). Plain ES module; Node-only modules are
// imported dynamically inside Node branches (environment.js).
import { IS_NODE, importNodeBuiltin, resolveAgainstPage } from '../environment.js';
import { EngineAbortedError, EngineError } from '../errors.js';

// Threads: the engine comes in two builds, public/wasm/gpt2.* (one thread, runs everywhere) and gpt2-mt.* (-pthread:
// the forward pass split over a pool of workers, needs SharedArrayBuffer: a cross-origin-isolated page or worker,
// or Node). resolveThreads() picks the thread count, 1 meaning the single-thread build.
export const MAX_AUTO_THREADS = 8;
export const MAX_THREADS = 256;  // the engine's limit (gpt2::ThreadPool::kMaxThreads), checked by threads.test.js

// Whether this realm can run the threaded build: Node always; browsers only when cross-origin isolated (COOP +
// COEP headers), without which SharedArrayBuffer does not exist.
export function threadsAvailable() {
  return IS_NODE || (globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function');
}

// The default of loadModel's `threads`: browsers use threads when they can; Node asks for them.
export const DEFAULT_THREADS = IS_NODE ? 1 : 'auto';

// The `threads` option of loadModel: 'auto' (the machine's cores, at most MAX_AUTO_THREADS) or a count in
// 1..MAX_THREADS (TypeError otherwise).
export function checkThreads(threads) {
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1 && threads <= MAX_THREADS)) {
    throw new TypeError(`threads must be "auto" or an integer from 1 to ${MAX_THREADS}, got ${JSON.stringify(threads)}`);
  }
}

// -> the thread count to use in this realm for the `threads` option: 1 where threads are unavailable.
export async function resolveThreads(threads = DEFAULT_THREADS) {
  checkThreads(threads);
  if (!threadsAvailable()) return 1;
  if (threads !== 'auto') return threads;
  const cores = IS_NODE ? (await importNodeBuiltin('os')).availableParallelism() : globalThis.navigator?.hardwareConcurrency;
  return Math.max(1, Math.min(cores || 1, MAX_AUTO_THREADS));
}

// The longest config.json text the engine takes (file_sinks.js refuses a larger file before reading it).
export const MAX_CONFIG_JSON_CHARS = 1 << 20;

const enginePromises = new Map();  // build name -> Promise of the WasmEngine built for it

// The engine shared by this JS realm (page, worker or Node process) for a thread count (see resolveThreads; 1:
// the single-thread build). A new instance is made after the previous one aborted (e.g. out of memory), since
// an aborted wasm instance cannot run again. If the threaded build fails to start, the single-thread one is
// used instead (with a console warning): engine.threads says which one it is.
// testing: the testing build (build/wasm-testing/, for tests and tools/bench), which adds session.logits(),
// engine.allocate() (a heap block with the bandwidth probe).
export function loadEngine({ threads = 1, testing = false } = {}) {
  const name = `${threads > 1 ? 'gpt2-mt' : 'gpt2'}${testing ? '-testing' : ''}`;
  const key = `${name}/${threads}`;
  if (!enginePromises.has(key)) {
    const started = threads > 1
      ? instantiateEngine(name, threads, testing).catch((error) => {
        console.warn(`gpt2 engine: the threaded build failed to start (${error.message}); using one thread`);
        return loadEngine({ threads: 1, testing });
      })
      : instantiateEngine(name, 1, testing);
    enginePromises.set(key, started.catch((error) => {
      enginePromises.delete(key);
      throw error;
    }));
  }
  return enginePromises.get(key).then((engine) => {
    if (!engine.aborted) return engine;
    enginePromises.delete(key);
    return loadEngine({ threads, testing });
  });
}

// The asset folder: the URL of the folder that holds the engine's files (gpt2.wasm, gpt2.mjs, gpt2.cjs, the
// threaded build gpt2-mt.*, and gpt2-worker.js, the engine worker as one module), i.e. a copy of public/wasm/.
// Set once per realm, before its engine or engine worker starts (configure({ assetBase }) in gpt2.js; the page
// passes its folder on to its engine workers); by default public/wasm/ seen from this module, which is right only
// while the modules are not bundled.
let configuredAssetFolder = null;
let assetFolderInUse = null;  // the folder the engine or a worker started from, after which it cannot change

// assetBase: a string or URL, relative to the page (or the worker's location) in browsers; a file: URL in Node.
export function setAssetBase(assetBase) {
  const folder = parseAssetBase(assetBase);
  if (assetFolderInUse && folder.href !== assetFolderInUse.href) {
    throw new Error(`configure: assetBase must be set before the first model loads (the engine already uses ${assetFolderInUse.href})`);
  }
  configuredAssetFolder = folder;
}

function parseAssetBase(assetBase) {
  const expected = IS_NODE ? 'a file: URL in Node' : 'an http(s) URL, absolute or relative to the page';
  const fail = () => {
    const shown = typeof assetBase === 'string' ? JSON.stringify(assetBase) : String(assetBase);
    throw new TypeError(`configure: assetBase must be the URL of the folder that holds gpt2.wasm (${expected}), got ${shown}`);
  };
  if (typeof assetBase !== 'string' && !(assetBase instanceof URL)) fail();
  let folder;
  try {
    folder = resolveAgainstPage(assetBase);
  } catch {
    fail();
  }
  if (IS_NODE ? folder.protocol !== 'file:' : !['http:', 'https:'].includes(folder.protocol)) fail();
  if (!folder.pathname.endsWith('/')) folder.pathname += '/';
  return folder;
}

// -> { folder: the asset folder's URL, configured: whether configure() set it }; from now on it cannot change.
export function useAssetFolder() {
  assetFolderInUse ??= configuredAssetFolder ?? new URL(IS_NODE ? '../../../public/wasm/' : '../../../wasm/', import.meta.url);
  return { folder: assetFolderInUse, configured: configuredAssetFolder !== null };
}

// Where a build is: the asset folder, or for the testing build build/wasm-testing/ in the repository (reachable in
// browsers only when the server's root is the repository, as for tools/bench).
function wasmFolder(testing) {
  if (!testing) return useAssetFolder().folder;
  return new URL(IS_NODE ? '../../../build/wasm-testing/' : '../../../../build/wasm-testing/', import.meta.url);
}

async function instantiateEngine(name, threads, testing) {
  let engine = null;
  const moduleArguments = {
    onAbort: (reason) => engine?.markAborted(reason),
    printErr: (text) => console.error(`gpt2 engine: ${text}`),
  };
  // The threaded build starts one pthread worker per thread but the calling one, before it resolves.
  if (threads > 1) moduleArguments.gpt2Workers = threads - 1;
  const folder = wasmFolder(testing);
  const { factory, wasmUrl, cleanUp } = IS_NODE
    ? await nodeFactory(folder, name, moduleArguments)
    : await browserFactory(folder, name, moduleArguments);
  let module;
  try {
    module = await factory(moduleArguments);
  } catch (error) {
    throw new Error(`could not start the WebAssembly engine (${wasmUrl}): ${error?.message ?? error}`);
  } finally {
    cleanUp?.();
  }
  if (IS_NODE && threads > 1) unrefWorkers(module);
  engine = new WasmEngine(module, threads);
  return engine;
}

// Idle engine threads must not keep a Node process alive: the pthread workers (worker_threads, all started with
// the module and reused, see wasm/CMakeLists.txt) are unref'ed.
function unrefWorkers(module) {
  const { unusedWorkers = [], runningWorkers = [] } = module.PThread ?? {};
  for (const worker of [...unusedWorkers, ...runningWorkers]) worker.unref();
}

async function browserFactory(folder, name, moduleArguments) {
  const url = (file) => new URL(file, folder).href;
  const wasmUrl = url(`${name}.wasm`);
  let cleanUp;
  if (!name.startsWith('gpt2-mt')) {
    // The glue would look next to the importing document or worker (a Blob URL for our worker).
    moduleArguments.locateFile = () => wasmUrl;
  } else {
    // pthread workers are classic workers that load the glue with importScripts (so from gpt2-mt.cjs, which is
    // not a module). A Worker must be same-origin with its creator, and the page may embed us from another
    // origin: each starts from a Blob URL that imports the worker script's absolute URL.
    const workerBlobUrl = URL.createObjectURL(new Blob([`importScripts(${JSON.stringify(url(`${name}.worker.cjs`))});\n`],
      { type: 'text/javascript' }));
    moduleArguments.locateFile = (file) => (file.endsWith('.worker.js') ? workerBlobUrl : wasmUrl);
    moduleArguments.mainScriptUrlOrBlob = url(`${name}.cjs`);
    cleanUp = () => URL.revokeObjectURL(workerBlobUrl);  // the pool's workers have all started by then
  }
  const factory = (await import(url(`${name}.mjs`))).default;
  return { factory, wasmUrl, cleanUp };
}

async function nodeFactory(folder, name, moduleArguments) {
  const [{ createRequire }, { existsSync, readFileSync }, { fileURLToPath }] = await Promise.all([
    importNodeBuiltin('module'),
    importNodeBuiltin('fs'),
    importNodeBuiltin('url'),
  ]);
  const dir = fileURLToPath(folder);
  if (!existsSync(`${dir}${name}.cjs`)) throw new Error(`the WebAssembly engine is not built (no ${name}.cjs in ${dir}): run tools/build.sh`);
  // Node 20 would otherwise fetch() the .wasm path, which fails for file paths.
  moduleArguments.wasmBinary = readFileSync(`${dir}${name}.wasm`);
  // worker_threads would run a .js worker script as an ES module in this "type": "module" package.
  moduleArguments.locateFile = (file) => `${dir}${file.endsWith('.worker.js') ? `${name}.worker.cjs` : file}`;
  // The .cjs glue, because the ES-module flavour of Emscripten's Node branch needs __dirname.
  return { factory: createRequire(import.meta.url)(`${dir}${name}.cjs`), wasmUrl: `${dir}${name}.wasm` };
}

// One instance of the wasm module. threads: the threads its models use (1: the single-thread build).
export class WasmEngine {
  #module;
  #abortReason = null;
  threads;

  constructor(module, threads = 1) {
    this.#module = module;
    this.threads = threads;
  }

  get aborted() {
    return this.#abortReason !== null;
  }

  markAborted(reason) {
    this.#abortReason = String(reason ?? 'abort');
  }

  // Runs fn against the module, turning a wasm trap or abort into EngineAbortedError.
  call(fn) {
    if (this.#abortReason !== null) throw new EngineAbortedError(this.#abortReason);
    try {
      return fn(this.#module);
    } catch (error) {
      if (error instanceof WebAssembly.RuntimeError || this.#abortReason !== null) {
        this.markAborted(this.#abortReason ?? error.message);
        throw new EngineAbortedError(this.#abortReason);
      }
      throw error;
    }
  }

  // Constructs an embind object with create(module) and returns its handle, or throws its error (deleting it):
  // the one place a failed construction is turned into an EngineError.
  construct(create) {
    const handle = this.call(create);
    if (!handle.ok()) {
      const error = handle.error();
      handle.delete();
      throw new EngineError(error);
    }
    return handle;
  }

  // Frees an embind object, unless the instance aborted (its memory is gone with it).
  release(handle) {
    if (handle && !this.aborted) handle.delete();
  }

  // Bytes currently malloc'ed in the wasm heap (the memory itself never shrinks): for leak checks.
  heapUsedBytes() {
    return this.call((module) => module.heapUsedBytes());
  }

  // The wasm memory's size (it never shrinks, so also its peak so far).
  heapBytes() {
    return this.call((module) => module.heapBytes());
  }

  // Testing build only: a block of the heap (the benchmark's bandwidth probe).
  allocate(bytes) {
    return new HeapBlock(this, this.construct((module) => new module.HeapBlock(bytes)));
  }

  // A loader that takes model.safetensors piece by piece (EngineModelLoader below). configJson: the text of
  // config.json, checked at once (as is whether the weights can fit the heap at all). fileSize: the file's
  // exact length when certain, so that the header is checked against it as soon as it arrives; otherwise the
  // tensors' extent is checked against the bytes fed when the file ends.
  // options.weights: 'fp32' (default) or 'int8' (the weight matrices and the LM head quantized on load: about a
  // quarter of the memory, logits within a few tenths of a standard deviation of fp32); checked here only.
  // The model gets this engine's threads, or fewer when the pool's workers are taken by other models
  // (model.threads says how many).
  createModelLoader(configJson, { weights: format = 'fp32', fileSize = null } = {}) {
    if (format !== 'fp32' && format !== 'int8') throw new TypeError(`weights must be "fp32" or "int8", got ${JSON.stringify(format)}`);
    if (typeof configJson !== 'string') throw new TypeError(`configJson must be the text of config.json, got ${typeof configJson}`);
    // embind copies a string argument into a malloc'ed block and does not check that the malloc succeeded.
    if (configJson.length > MAX_CONFIG_JSON_CHARS) {
      throw new EngineError({ kind: 'config', message: `config.json: ${configJson.length} characters; a config.json is at most ${MAX_CONFIG_JSON_CHARS}` });
    }
    const stagingBytes = Math.max(1, Math.min(STAGING_BYTES, fileSize ?? STAGING_BYTES));
    const handle = this.construct((module) =>
      new module.ModelLoader(configJson, format === 'int8', fileSize ?? -1, this.threads, stagingBytes));
    return new EngineModelLoader(this, handle);
  }

  // A GGUF file fed in order (gpt2::ModelLoader's GGUF form): the file holds the config and the tokenizer
  // (EngineModel.readVocabulary()); its matrices run in the file's types.
  createGgufLoader({ fileSize = null } = {}) {
    const stagingBytes = Math.max(1, Math.min(STAGING_BYTES, fileSize ?? STAGING_BYTES));
    const handle = this.construct((module) => new module.ModelLoader(fileSize ?? -1, this.threads, stagingBytes));
    return new EngineModelLoader(this, handle);
  }

  // The whole file at once (an ArrayBuffer or a view of its bytes): one loader fed in staging-sized pieces.
  createModel(configJson, weights, { weights: format = 'fp32' } = {}) {
    const bytes = byteView(weights);
    return feedWhole(this.createModelLoader(configJson, { weights: format, fileSize: bytes.byteLength }), bytes);
  }

  // A whole GGUF file at once (an ArrayBuffer or a view of its bytes).
  createGgufModel(file) {
    const bytes = byteView(file);
    return feedWhole(this.createGgufLoader({ fileSize: bytes.byteLength }), bytes);
  }
}

function byteView(data) {
  return ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : new Uint8Array(data);
}

function feedWhole(loader, bytes) {
  try {
    loader.feed(bytes);
    return loader.finish();
  } finally {
    loader.dispose();
  }
}

// Each piece fed to the engine is copied into the loader's staging block, at most this large: the heap never
// holds more of the file than that (the engine converts every piece before the next is copied).
const STAGING_BYTES = 4 << 20;

// An embind object owned by JS: the handle's calls go through the engine (aborts become EngineAbortedError),
// and dispose() frees it once. The base of the wrappers below.
class EngineObject {
  #engine;
  #handle;
  #what;

  constructor(engine, handle, what) {
    this.#engine = engine;
    this.#handle = handle;
    this.#what = what;
  }

  get engine() {
    return this.#engine;
  }

  dispose() {
    this.#engine.release(this.#handle);
    this.#handle = null;
  }

  // Runs fn(handle) against the live handle.
  call(fn) {
    const handle = this.#handle;
    if (!handle) throw new Error(`the ${this.#what} was disposed`);
    return this.#engine.call(() => fn(handle));
  }

  // Runs fn(handle), whose result `failed` marks as an error, which is then thrown as the handle reports it.
  checkedCall(fn, failed) {
    const result = this.call(fn);
    if (failed(result)) throw new EngineError(this.call((handle) => handle.error()));
    return result;
  }
}

// model.safetensors or a GGUF file fed in order, in pieces of any size (gpt2::ModelLoader). Errors throw EngineError ("file"
// or "memory"); after one, the loader only needs dispose().
export class EngineModelLoader extends EngineObject {
  constructor(engine, handle) {
    super(engine, handle, 'model loader');
  }

  // bytes: the next bytes of the file (Uint8Array).
  feed(bytes) {
    let offset = 0;
    do {
      // The view is fetched for each piece: a call that grows the memory detaches the previous one.
      const staging = this.call((handle) => handle.staging());
      const piece = bytes.subarray(offset, offset + staging.byteLength);
      staging.set(piece);
      this.checkedCall((handle) => handle.feed(piece.byteLength), (fed) => !fed);
      offset += piece.byteLength;
    } while (offset < bytes.byteLength);
  }

  // The end of the file -> EngineModel (throws when the file is incomplete or invalid).
  finish() {
    const handle = this.call((loader) => this.engine.construct((module) => new module.Model(loader)));
    return new EngineModel(this.engine, handle);
  }
}

// A block of the heap (testing build: engine.allocate()).
export class HeapBlock extends EngineObject {
  constructor(engine, handle) {
    super(engine, handle, 'heap block');
  }

  // Uint8Array over the block: valid until the next call into the engine.
  view() {
    return this.call((handle) => handle.view());
  }

  // One streaming read of the block's floats (the benchmark's bandwidth probe).
  streamRead() {
    return this.call((handle) => handle.streamRead());
  }
}

// Weights of one model (embind Model). Sessions keep the weights alive in C++, so dispose() order is free.
export class EngineModel extends EngineObject {
  config;  // { n_vocab, n_ctx, n_embd, n_head, n_layer, layer_norm_epsilon }
  weightBytes;
  threads;  // threads its forward pass uses
  weightTypes;  // the storage formats of its matrices: "fp32", "int8", or a GGUF file's, e.g. "q4_k, q6_k"

  constructor(engine, handle) {
    super(engine, handle, 'model');
    this.config = handle.config();
    this.weightBytes = handle.weightBytes();
    this.threads = handle.threads();
    this.weightTypes = handle.weightTypes();
  }

  // A GGUF model's tokenizer: { tokens: string[] (id order), merges: string[] ("a b"), eosTokenId,
  // bosTokenId (or null) }; null for a safetensors model.
  readVocabulary() {
    return this.call((model) => model.vocabulary());
  }

  // kvCache: the cache's storage, 'int8' (a quarter of the bytes; the default) or 'fp32' (engine/gpt2.h KvCacheFormat).
  createSession({ useKVCache = true, kvCache = 'int8' } = {}) {
    const handle = this.call((model) => this.engine.construct((module) => new module.Session(model, Boolean(useKVCache), String(kvCache))));
    return new EngineSession(this.engine, handle, this.config);
  }
}

// One generation's state: KV cache and sampler (embind Session).
export class EngineSession extends EngineObject {
  #contextSize;
  #vocabSize;

  // config: the model's ({ n_ctx, n_vocab })
  constructor(engine, handle, { n_ctx, n_vocab }) {
    super(engine, handle, 'session');
    this.#contextSize = n_ctx;
    this.#vocabSize = n_vocab;
  }

  // The settings as generate() takes them (normalizeGenerateOptions checks them); missing ones take these
  // defaults. The seed must be an integer in [0, 2^53): it crosses exactly as a double.
  setSampling({ temperature = 1, topK = 0, topP = 1, repetitionPenalty = 1, seed = 0 } = {}) {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`seed must be a non-negative integer, got ${seed}`);
    this.call((session) => session.setSampling({ temperature, topK, topP, repetitionPenalty, seed }));
  }

  // Clears the session, feeds the prompt ids (Array or typed array) and returns the sampled next token id. Only the
  // newest n_ctx ids cross into the engine, which keeps no more of a longer prompt: a prompt of any length costs
  // the wasm heap at most n_ctx ids.
  prefill(ids) {
    const window = this.#newestWindow(ids, 'prefill');
    return this.checkedCall((session) => session.prefill(window), (token) => token < 0);
  }

  // prefill() that keeps the longest common prefix of the session's window and the newest n_ctx ids in the
  // cache (at most all but the last id) and feeds only the rest: the same next token as prefill(ids).
  // reusedTokens then says how many positions were kept (0 for a session without a KV cache).
  prefillReusing(ids) {
    const window = this.#newestWindow(ids, 'prefillReusing');
    return this.checkedCall((session) => session.prefillReusing(window), (token) => token < 0);
  }

  get reusedTokens() {
    return this.call((session) => session.reusedTokens());
  }

  // Log-probabilities of ids[1..] (at least 2 ids; all of them cross into the engine), each given the ids
  // before it, in windows of n_ctx with stride n_ctx/2 (engine/gpt2.h Session::score): { logprobs: number[],
  // ranks: number[] (1 = the likeliest token), alternatives: [[token, logprob, token, logprob, ...] (topK
  // pairs, likeliest first) per scored id] }; topK at most vocabSize. The session's window is then the last
  // window scored.
  score(ids, topK = 0) {
    for (const id of ids) checkTokenId(id);
    if (!Number.isInteger(topK) || topK < 0) throw new Error(`score: topK must be an integer >= 0, got ${topK}`);
    // The engine names a topK over the vocabulary; one past int32 would wrap on its way there.
    return this.checkedCall((session) => session.score(ids, Math.min(topK, 2 ** 31 - 1)), (result) => result === null);
  }

  // The model's vocabulary size (n_vocab): the most alternatives a position has.
  get vocabSize() {
    return this.#vocabSize;
  }

  // Feeds one token and returns the sampled next token id.
  step(id) {
    checkTokenId(id);
    return this.checkedCall((session) => session.step(id), (token) => token < 0);
  }

  // Testing build only: Float32Array of the last fed position's raw logits, over the heap: read it before the
  // next call.
  logits() {
    return this.call((session) => session.logits());
  }

  // { probability, alternatives: [{ token, probability }] (the topK likeliest; all of them for a topK of
  // vocabSize or more) } under softmax(logits) of the last fed position.
  distribution(token, topK = 0) {
    return this.call((session) => session.distribution(token, Math.min(topK, this.#vocabSize)));
  }

  reset() {
    this.call((session) => session.reset());
  }

  get nCached() {
    return this.call((session) => session.nCached());
  }

  get kvCache() {
    return this.call((session) => session.kvCache());
  }

  get kvCacheBytes() {
    return this.call((session) => session.kvCacheBytes());
  }

  // The newest n_ctx of ids (checked): a prompt of any length costs the wasm heap at most n_ctx ids.
  #newestWindow(ids, what) {
    if (ids.length === 0) throw new Error(`${what}: no token ids given`);
    for (const id of ids) checkTokenId(id);
    return ids.length > this.#contextSize ? ids.slice(ids.length - this.#contextSize) : ids;
  }
}

// Range checks happen in the engine (its message names the range); this only rejects non-integers, which
// embind would otherwise truncate silently.
function checkTokenId(id) {
  if (!Number.isInteger(id)) throw new Error(`token id must be an integer, got ${id}`);
}
