// The wasm engine for JavaScript: loads public/wasm/gpt2.wasm (browsers, workers, Node) and wraps the embind
// objects of wasm/bindings.cpp in small classes that throw Error with the engine's message and free their
// C++ objects in dispose(). Plain ES module; Node-only modules are imported dynamically inside Node branches.

const IS_NODE = typeof process === 'object' && typeof process.versions?.node === 'string';

let enginePromise = null;

// The engine shared by this JS realm (page, worker or Node process). A new instance is made after the
// previous one aborted (e.g. out of memory), since an aborted wasm instance cannot run again.
export function loadEngine() {
  if (!enginePromise) {
    enginePromise = instantiateEngine().catch((error) => {
      enginePromise = null;
      throw error;
    });
  }
  return enginePromise.then((engine) => (engine.aborted ? ((enginePromise = null), loadEngine()) : engine));
}

async function instantiateEngine() {
  let engine = null;
  const moduleArguments = {
    onAbort: (reason) => engine?.markAborted(reason),
    printErr: (text) => console.error(`gpt2 engine: ${text}`),
  };
  const { factory, wasmUrl } = IS_NODE ? await nodeFactory(moduleArguments) : await browserFactory(moduleArguments);
  let module;
  try {
    module = await factory(moduleArguments);
  } catch (error) {
    throw new Error(`could not start the WebAssembly engine (${wasmUrl}): ${error?.message ?? error}`);
  }
  engine = new Engine(module);
  return engine;
}

// web/ is served as public/js/, next to public/wasm/.
async function browserFactory(moduleArguments) {
  const wasmUrl = new URL('../wasm/gpt2.wasm', import.meta.url).href;
  // The glue would look next to the importing document or worker (a Blob URL for our worker).
  moduleArguments.locateFile = () => wasmUrl;
  const factory = (await import(new URL('../wasm/gpt2.mjs', import.meta.url).href)).default;
  return { factory, wasmUrl };
}

// Node runs web/ either in place (the wasm is then in ../public/wasm/) or copied to public/js/ (../wasm/).
async function nodeFactory(moduleArguments) {
  const [{ createRequire }, { existsSync, readFileSync }, { fileURLToPath }] = await Promise.all([
    import('node:module'),
    import('node:fs'),
    import('node:url'),
  ]);
  const candidates = ['../wasm/', '../public/wasm/'].map((dir) => fileURLToPath(new URL(dir, import.meta.url)));
  const dir = candidates.find((candidate) => existsSync(`${candidate}gpt2.cjs`));
  if (!dir) throw new Error(`the WebAssembly engine is not built (no gpt2.cjs in ${candidates.join(' or ')}): run tools/build.sh`);
  // Node 20 would otherwise fetch() the .wasm path, which fails for file paths.
  moduleArguments.wasmBinary = readFileSync(`${dir}gpt2.wasm`);
  // The .cjs glue, because the ES-module flavour of Emscripten's Node branch needs __dirname.
  return { factory: createRequire(import.meta.url)(`${dir}gpt2.cjs`), wasmUrl: `${dir}gpt2.wasm` };
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

// One instance of the wasm module.
export class Engine {
  #module;
  #abortReason = null;

  constructor(module) {
    this.#module = module;
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
  createModelLoader(configJson, { weights: format = 'fp32', fileSize = null } = {}) {
    const int8 = weightFormatIsInt8(format);
    const handle = this.call((module) => new module.ModelLoader(configJson, int8, fileSize ?? -1));
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

  constructor(engine, handle) {
    this.#engine = engine;
    this.#handle = handle;
    this.config = handle.config();
    this.weightBytes = handle.weightBytes();
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
