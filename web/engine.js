// The wasm engine for JavaScript: loads public/wasm/gpt2.wasm or, for threads, gpt2-mt.wasm (browsers, workers,
// Node) and wraps the embind objects of wasm/bindings.cpp in small classes that throw Error with the engine's
// message and free their C++ objects in dispose(). Plain ES module; Node-only modules are imported dynamically
// inside Node branches.

const IS_NODE = typeof process === 'object' && typeof process.versions?.node === 'string';

// Threads: the engine comes in two builds, public/wasm/gpt2.* (one thread, runs everywhere) and gpt2-mt.* (-pthread:
// the forward pass split over a pool of workers, needs SharedArrayBuffer: a cross-origin-isolated page or worker,
// or Node). resolveThreads() picks the thread count, 1 meaning the single-thread build.
export const MAX_AUTO_THREADS = 8;
export const MAX_THREADS = 256;  // the engine's limit (gpt2::ThreadPool::kMaxThreads)

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
  const cores = IS_NODE ? (await import('node:os')).availableParallelism() : globalThis.navigator?.hardwareConcurrency;
  return Math.max(1, Math.min(cores || 1, MAX_AUTO_THREADS));
}

const enginePromises = new Map();  // thread count -> Promise of the Engine built for it

// The engine shared by this JS realm (page, worker or Node process) for a thread count (see resolveThreads; 1:
// the single-thread build). A new instance is made after the previous one aborted (e.g. out of memory), since
// an aborted wasm instance cannot run again. If the threaded build fails to start, the single-thread one is
// used instead (with a console warning): engine.threads says which one it is.
export function loadEngine({ threads = 1 } = {}) {
  if (!enginePromises.has(threads)) {
    const started = threads > 1
      ? instantiateEngine(threads).catch((error) => {
        console.warn(`gpt2 engine: the threaded build failed to start (${error.message}); using one thread`);
        return loadEngine({ threads: 1 });
      })
      : instantiateEngine(1);
    enginePromises.set(threads, started.catch((error) => {
      enginePromises.delete(threads);
      throw error;
    }));
  }
  return enginePromises.get(threads).then((engine) => {
    if (!engine.aborted) return engine;
    enginePromises.delete(threads);
    return loadEngine({ threads });
  });
}

async function instantiateEngine(threads) {
  let engine = null;
  const moduleArguments = {
    onAbort: (reason) => engine?.markAborted(reason),
    printErr: (text) => console.error(`gpt2 engine: ${text}`),
  };
  const name = threads > 1 ? 'gpt2-mt' : 'gpt2';
  // The threaded build starts one pthread worker per thread but the calling one, before it resolves.
  if (threads > 1) moduleArguments.gpt2Workers = threads - 1;
  const { factory, wasmUrl, cleanUp } = IS_NODE ? await nodeFactory(name, moduleArguments) : await browserFactory(name, moduleArguments);
  let module;
  try {
    module = await factory(moduleArguments);
  } catch (error) {
    throw new Error(`could not start the WebAssembly engine (${wasmUrl}): ${error?.message ?? error}`);
  } finally {
    cleanUp?.();
  }
  if (IS_NODE && threads > 1) unrefWorkers(module);
  engine = new Engine(module, threads);
  return engine;
}

// Idle engine threads must not keep a Node process alive: the pthread workers (worker_threads, all started with
// the module and reused, see wasm/CMakeLists.txt) are unref'ed.
function unrefWorkers(module) {
  const { unusedWorkers = [], runningWorkers = [] } = module.PThread ?? {};
  for (const worker of [...unusedWorkers, ...runningWorkers]) worker.unref();
}

// web/ is served as public/js/, next to public/wasm/.
async function browserFactory(name, moduleArguments) {
  const url = (file) => new URL(`../wasm/${file}`, import.meta.url).href;
  const wasmUrl = url(`${name}.wasm`);
  let cleanUp;
  if (name === 'gpt2') {
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

// Node runs web/ either in place (the wasm is then in ../public/wasm/) or copied to public/js/ (../wasm/).
async function nodeFactory(name, moduleArguments) {
  const [{ createRequire }, { existsSync, readFileSync }, { fileURLToPath }] = await Promise.all([
    import('node:module'),
    import('node:fs'),
    import('node:url'),
  ]);
  const candidates = ['../wasm/', '../public/wasm/'].map((dir) => fileURLToPath(new URL(dir, import.meta.url)));
  const dir = candidates.find((candidate) => existsSync(`${candidate}${name}.cjs`));
  if (!dir) throw new Error(`the WebAssembly engine is not built (no ${name}.cjs in ${candidates.join(' or ')}): run tools/build.sh`);
  // Node 20 would otherwise fetch() the .wasm path, which fails for file paths.
  moduleArguments.wasmBinary = readFileSync(`${dir}${name}.wasm`);
  // worker_threads would run a .js worker script as an ES module in this "type": "module" package.
  moduleArguments.locateFile = (file) => `${dir}${file.endsWith('.worker.js') ? `${name}.worker.cjs` : file}`;
  // The .cjs glue, because the ES-module flavour of Emscripten's Node branch needs __dirname.
  return { factory: createRequire(import.meta.url)(`${dir}${name}.cjs`), wasmUrl: `${dir}${name}.wasm` };
}

// The `weights` option of createModel / loadModel: 'fp32' or 'int8' (TypeError otherwise).
export function weightFormatIsInt8(format) {
  if (format !== 'fp32' && format !== 'int8') throw new TypeError(`weights must be "fp32" or "int8", got ${JSON.stringify(format)}`);
  return format === 'int8';
}

export class EngineAbortedError extends Error {
  constructor(reason) {
    super(`the WebAssembly engine crashed (${reason}); reload the model`);
    this.name = 'EngineAbortedError';
  }
}

// One instance of the wasm module. threads: the threads its models use (1: the single-thread build).
export class Engine {
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

  // A fixed block of the wasm heap (the loader's staging block; the benchmark's bandwidth probe).
  allocate(capacity) {
    return new HeapBuffer(this, capacity);
  }

  // Bytes currently malloc'ed in the wasm heap (the memory itself never shrinks): for leak checks.
  heapUsedBytes() {
    return this.call((module) => module.heapUsedBytes());
  }

  // A loader that takes model.safetensors piece by piece (EngineModelLoader below). configJson: the text of
  // config.json, checked at once (as is whether the weights can fit the heap at all). fileSize: the file's
  // exact length when certain, so that the header is checked against it as soon as it arrives; otherwise the
  // tensors' extent is checked against the bytes fed when the file ends.
  // options.weights: 'fp32' (default) or 'int8' (the weight matrices and the LM head quantized on load: about a
  // quarter of the memory, logits within a few tenths of a standard deviation of fp32).
  // The model gets this engine's threads, or fewer when the pool's workers are taken by other models
  // (model.threads says how many).
  createModelLoader(configJson, { weights: format = 'fp32', fileSize = null } = {}) {
    const int8 = weightFormatIsInt8(format);
    const handle = this.call((module) => new module.ModelLoader(configJson, int8, fileSize ?? -1, this.threads));
    if (!handle.ok()) {
      const message = handle.error();
      handle.delete();
      throw new Error(message);
    }
    return new EngineModelLoader(this, handle, fileSize);
  }

  // The whole file at once (an ArrayBuffer or a view of its bytes): one loader fed in staging-sized pieces.
  createModel(configJson, weights, { weights: format = 'fp32' } = {}) {
    const bytes = ArrayBuffer.isView(weights) ? new Uint8Array(weights.buffer, weights.byteOffset, weights.byteLength) : new Uint8Array(weights);
    const loader = this.createModelLoader(configJson, { weights: format, fileSize: bytes.byteLength });
    try {
      loader.feed(bytes);
      return loader.finish();
    } finally {
      loader.dispose();
    }
  }
}

// Each piece fed to the engine is copied into one staging block of the heap, at most this large: the heap never
// holds more of the file than that (the engine converts every piece before the next is copied).
const STAGING_BYTES = 4 << 20;

// model.safetensors fed in order, in pieces of any size (gpt2::ModelLoader). Errors throw the engine's message
// ("model.safetensors: ...", "out of memory: ..."); after one, the loader only needs dispose().
export class EngineModelLoader {
  #engine;
  #handle;
  #staging;

  constructor(engine, handle, fileSize) {
    this.#engine = engine;
    this.#handle = handle;
    try {
      this.#staging = engine.allocate(Math.max(1, Math.min(STAGING_BYTES, fileSize ?? STAGING_BYTES)));
    } catch (error) {
      this.dispose();
      throw error;
    }
  }

  // bytes: the next bytes of the file (Uint8Array).
  feed(bytes) {
    const handle = this.#live();
    const capacity = this.#staging.capacity;
    for (let offset = 0; offset < bytes.byteLength; offset += capacity) {
      const piece = bytes.subarray(offset, offset + capacity);
      this.#staging.set(piece);
      if (!this.#engine.call(() => handle.feed(this.#staging.ptr, piece.byteLength))) throw new Error(handle.error());
    }
  }

  // The end of the file -> EngineModel (throws when the file is incomplete or invalid).
  finish() {
    const handle = this.#engine.call((module) => new module.Model(this.#live()));
    if (!handle.ok()) {
      const message = handle.error();
      handle.delete();
      throw new Error(message);
    }
    return new EngineModel(this.#engine, handle);
  }

  dispose() {
    this.#staging?.free();
    this.#staging = null;
    if (this.#handle && !this.#engine.aborted) this.#handle.delete();
    this.#handle = null;
  }

  #live() {
    if (!this.#handle) throw new Error('the model loader was disposed');
    return this.#handle;
  }
}

// capacity malloc'ed bytes in the wasm heap. Pointers are kept unsigned: the heap may exceed 2 GB.
export class HeapBuffer {
  #engine;
  ptr = 0;
  capacity = 0;

  constructor(engine, capacity) {
    // malloc takes a 32-bit size: a larger request would wrap around to a small one.
    const ptr = capacity < 2 ** 32 ? engine.call((module) => module._malloc(capacity) >>> 0) : 0;
    if (ptr === 0) {
      throw new Error(`out of memory: cannot allocate ${capacity} bytes in the WebAssembly heap (4 GB at most)`);
    }
    this.#engine = engine;
    this.ptr = ptr;
    this.capacity = capacity;
  }

  // Copies bytes (at most capacity) to the start of the block.
  set(bytes) {
    if (this.ptr === 0) throw new Error('HeapBuffer: already freed');
    if (bytes.byteLength > this.capacity) throw new RangeError(`HeapBuffer: ${bytes.byteLength} bytes do not fit in ${this.capacity}`);
    // Read HEAPU8 now: any malloc may have grown the memory and replaced the view.
    this.#engine.call((module) => module.HEAPU8.set(bytes, this.ptr));
  }

  free() {
    if (this.ptr === 0) return;
    const ptr = this.ptr;
    this.ptr = 0;
    if (!this.#engine.aborted) this.#engine.call((module) => module._free(ptr));
  }
}

// Weights of one model (embind Model). Sessions keep the weights alive in C++, so dispose() order is free.
export class EngineModel {
  #engine;
  #handle;
  config;
  weightBytes;
  threads;  // threads its forward pass uses

  constructor(engine, handle) {
    this.#engine = engine;
    this.#handle = handle;
    this.config = handle.config();
    this.weightBytes = handle.weightBytes();
    this.threads = handle.threads();
  }

  createSession({ useKVCache = true } = {}) {
    const handle = this.#engine.call((module) => new module.Session(this.#live(), Boolean(useKVCache)));
    if (!handle.ok()) {
      const message = handle.error();
      handle.delete();
      throw new Error(message);
    }
    return new EngineSession(this.#engine, handle, this.config);
  }

  dispose() {
    if (this.#handle && !this.#engine.aborted) this.#handle.delete();
    this.#handle = null;
  }

  #live() {
    if (!this.#handle) throw new Error('the model was disposed');
    return this.#handle;
  }
}

// One generation's state: KV cache and sampler (embind Session).
export class EngineSession {
  #engine;
  #handle;
  #config;

  constructor(engine, handle, config) {
    this.#engine = engine;
    this.#handle = handle;
    this.#config = config;
  }

  // Values the engine would silently sanitize are the caller's to validate (see generate.js).
  setSampling({ temperature = 1, topK = 0, topP = 1, repetitionPenalty = 1, seed = 0 } = {}) {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`seed must be a non-negative integer, got ${seed}`);
    this.#call((session) => session.setSampling(temperature, topK, topP, repetitionPenalty, seed));
  }

  // Clears the session, feeds the prompt ids (Array or typed array) and returns the sampled next token id.
  prefill(ids) {
    if (ids.length === 0) throw new Error('prefill: no token ids given');
    for (const id of ids) this.#checkId(id);
    return this.#checked(this.#call((session) => session.prefill(ids)));
  }

  // Feeds one token and returns the sampled next token id.
  step(id) {
    this.#checkId(id);
    return this.#checked(this.#call((session) => session.step(id)));
  }

  // Float32Array of the last fed position's raw logits, over the heap: read it before the next call.
  logits() {
    return this.#call((session) => session.logits());
  }

  // { probability, alternatives: [{ token, probability }] } under softmax(logits) of the last fed position.
  distribution(token, topK = 0) {
    return this.#call((session) => session.distribution(token, topK));
  }

  reset() {
    this.#call((session) => session.reset());
  }

  get nCached() {
    return this.#call((session) => session.nCached());
  }

  get kvCacheBytes() {
    return this.#call((session) => session.kvCacheBytes());
  }

  dispose() {
    if (this.#handle && !this.#engine.aborted) this.#handle.delete();
    this.#handle = null;
  }

  // Range checks happen in the engine (its message names the range); this only rejects non-integers, which
  // embind would otherwise truncate silently.
  #checkId(id) {
    if (!Number.isInteger(id)) throw new Error(`token id must be an integer, got ${id}`);
  }

  #checked(token) {
    if (token < 0) throw new Error(this.#call((session) => session.error()));
    return token;
  }

  #call(fn) {
    if (!this.#handle) throw new Error('the session was disposed');
    return this.#engine.call(() => fn(this.#handle));
  }
}
