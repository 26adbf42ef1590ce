// The wasm engine for JavaScript: loads public/wasm/gpt2.wasm or, for threads, gpt2-mt.wasm (browsers, workers,
// Node), each as its relaxed-SIMD twin gpt2[-mt]-relaxed.wasm where this JS engine runs that (simd_support.js),
// from the asset folder (asset_folder.js), with the thread count of threads.js, and wraps the embind objects of
// wasm/bindings.cpp in small classes (engine_objects.js) that throw EngineError with the engine's { kind, message }
// and free their C++ objects in dispose(). Plain ES modules; Node-only modules are imported dynamically inside Node
// branches (environment.js).
import { IS_NODE, importNodeBuiltin } from '../environment.js';
import { EngineAbortedError, EngineError } from '../errors.js';
import { wasmFolder } from './asset_folder.js';
import { EngineModelLoader, HeapBlock, MatrixRowsReceiver } from './engine_objects.js';
import { simdSupport } from './simd_support.js';

// The longest config.json text the engine takes (file_sinks.js refuses a larger file before reading it).
export const MAX_CONFIG_JSON_CHARS = 1 << 20;

const enginePromises = new Map();  // build name -> Promise of the WasmEngine built for it

// The engine shared by this JS realm (page, worker or Node process) for a thread count (see resolveThreads; 1:
// the single-thread build), in the relaxed-SIMD build where this engine runs it (simd_support.js), else the SIMD128
// one: engine.simd says which. A new instance is made after the previous one aborted (e.g. out of memory), since an
// aborted wasm instance cannot run again. If the threaded build fails to start, the single-thread one is used
// instead, and if a relaxed-SIMD build fails to start, its SIMD128 twin (each with a console warning):
// engine.threads says how many threads run.
// testing: the testing build (build/wasm-testing/, for tests and tools/bench), which adds session.logits(),
// engine.allocate() (a heap block with the bandwidth probe).
export function loadEngine({ threads = 1, testing = false, simd = simdSupport() } = {}) {
  const name = `${threads > 1 ? 'gpt2-mt' : 'gpt2'}${simd === 'relaxed' ? '-relaxed' : ''}${testing ? '-testing' : ''}`;
  const key = `${name}/${threads}`;
  if (!enginePromises.has(key)) {
    const fallBack = (what, options) => (error) => {
      console.warn(`gpt2 engine: the ${what} build failed to start (${error.message}); using ${options.simd ? 'the SIMD128 build' : 'one thread'}`);
      return loadEngine({ threads, testing, simd, ...options });
    };
    let started = instantiateEngine(name, threads, testing, simd);
    if (simd === 'relaxed') started = started.catch(fallBack('relaxed-SIMD', { simd: 'simd128' }));
    else if (threads > 1) started = started.catch(fallBack('threaded', { threads: 1 }));
    enginePromises.set(key, started.catch((error) => {
      enginePromises.delete(key);
      throw error;
    }));
  }
  return enginePromises.get(key).then((engine) => {
    if (!engine.aborted) return engine;
    enginePromises.delete(key);
    return loadEngine({ threads, testing, simd });
  });
}

async function instantiateEngine(name, threads, testing, simd) {
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
  engine = new WasmEngine(module, threads, simd);
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
  if (!existsSync(`${dir}${name}.cjs`)) throw new Error(`the WebAssembly engine is not built (no ${name}.cjs in ${dir}): run tools/dev/build.sh`);
  // Node 20 would otherwise fetch() the .wasm path, which fails for file paths.
  moduleArguments.wasmBinary = readFileSync(`${dir}${name}.wasm`);
  // worker_threads would run a .js worker script as an ES module in this "type": "module" package.
  moduleArguments.locateFile = (file) => `${dir}${file.endsWith('.worker.js') ? `${name}.worker.cjs` : file}`;
  // The .cjs glue, because the ES-module flavour of Emscripten's Node branch needs __dirname.
  return { factory: createRequire(import.meta.url)(`${dir}${name}.cjs`), wasmUrl: `${dir}${name}.wasm` };
}

// One instance of the wasm module. threads: the threads its models use (1: the single-thread build); simd:
// 'relaxed' or 'simd128', the build's instructions.
export class WasmEngine {
  #module;
  #abortReason = null;
  #constants = null;
  threads;
  simd;

  constructor(module, threads = 1, simd = 'simd128') {
    this.#module = module;
    this.threads = threads;
    this.simd = simd;
  }

  // The engine's constants (wasm/bindings.cpp constants() and samplingDefaults(), read once): { limits, enums,
  // weightNames, gpuCommands, samplingDefaults }, so that no JS restates them.
  get constants() {
    this.#constants ??= deepFreeze(this.call((module) => ({ ...JSON.parse(module.constants()), samplingDefaults: module.samplingDefaults() })));
    return this.#constants;
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
  // (model.threads says how many). onMatrixRows: see EngineModelLoader.
  createModelLoader(configJson, { weights: format = 'fp32', fileSize = null, onMatrixRows = null } = {}) {
    if (format !== 'fp32' && format !== 'int8') throw new TypeError(`weights must be "fp32" or "int8", got ${JSON.stringify(format)}`);
    if (typeof configJson !== 'string') throw new TypeError(`configJson must be the text of config.json, got ${typeof configJson}`);
    // embind copies a string argument into a malloc'ed block and does not check that the malloc succeeded.
    if (configJson.length > MAX_CONFIG_JSON_CHARS) {
      throw new EngineError({ kind: 'config', message: `config.json: ${configJson.length} characters; a config.json is at most ${MAX_CONFIG_JSON_CHARS}` });
    }
    const stagingBytes = Math.max(1, Math.min(STAGING_BYTES, fileSize ?? STAGING_BYTES));
    const receiver = new MatrixRowsReceiver(onMatrixRows);
    const handle = this.construct((module) =>
      new module.ModelLoader(configJson, format === 'int8', fileSize ?? -1, this.threads, stagingBytes, receiver.receive));
    return new EngineModelLoader(this, handle, receiver);
  }

  // A GGUF file fed in order (gpt2::ModelLoader's GGUF form): the file holds the config and the tokenizer
  // (EngineModel.readVocabulary()); its matrices run in the file's types.
  createGgufLoader({ fileSize = null, onMatrixRows = null } = {}) {
    const stagingBytes = Math.max(1, Math.min(STAGING_BYTES, fileSize ?? STAGING_BYTES));
    const receiver = new MatrixRowsReceiver(onMatrixRows);
    const handle = this.construct((module) => new module.ModelLoader(null, false, fileSize ?? -1, this.threads, stagingBytes, receiver.receive));
    return new EngineModelLoader(this, handle, receiver);
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

function deepFreeze(object) {
  for (const value of Object.values(object)) if (value && typeof value === 'object') deepFreeze(value);
  return Object.freeze(object);
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
