// The public API of gpt2-wasm, used by the page, the widget and Node (web/cli/cli.js):
//
//   const model = await loadModel(source, { onProgress, signal, useWorker });
//   for await (const piece of model.generate('Hello', { maxNewTokens: 20 })) show(piece.text);
//   const { tokens, perplexity } = await model.score('Some text', { topAlternatives: 5 });
//   model.dispose();
//
// source: a base URL of a model folder (config.json, model.safetensors, vocab.json, merges.txt), or the URL of a
// GGUF file (its path ends in .gguf), absolute or relative to the page; in Node a folder or .gguf file path; or
// local files: the folder's files, or one GGUF File/Blob/ArrayBuffer. loadModel decides once which of these it got
// (loading/model_source.js), and the rest of the library takes that typed source. In browser pages the model
// lives in a Web Worker (useWorker defaults to true where `window` exists), elsewhere in this thread; both
// kinds of Model have the same interface.
//
// Without a `worker` option, every model in a page lives in one default worker, which ends when its last model is
// disposed, and loads of the same URL with the same options share one download and one loaded copy
// (model_registry.js; each caller disposes its own Model). A worker of one's own: `const worker =
// createEngineWorker()`, then `loadModel(source, { worker })` for each model; `worker.terminate()` when done.
//
// Modules: models/local_model.js (models in this thread), worker/worker_model.js and worker/worker_client.js
// (models in a worker), models/model_registry.js, engine/ (the wasm engine), loading/ (model files),
// generation/generate.js (the generation loop), generation/score.js (scoring a text), tokenizer.js, errors.js.
import { setAssetBase } from './engine/asset_folder.js';
import { DEFAULT_THREADS, checkThreads } from './engine/threads.js';
import { IS_PAGE } from './environment.js';
import { checkDevice } from './gpu/device.js';
import { ModelLoadError } from './errors.js';
import { modelSource } from './loading/model_source.js';
import { loadModelInThisThread } from './models/local_model.js';
import { WorkerClient } from './worker/worker_client.js';
import { loadModelInWorker } from './worker/worker_model.js';

export { ModelLoadError };

// The models kept in the browser's Cache API, and their removal (model_cache.js). Node has no Cache API: none
// (the CLI's disk cache, cli_cache.js, is its own).
export { deleteCachedModel, listCachedModels } from './loading/model_cache.js';

// -> Model: { config, weightBytes, weightTypes, threads, threadsReason, simd, generate(prompt, options), score(text, options),
// inspect(input, options), encode(text), decode(ids), whenUsable(), dispose() }; weightTypes: how the weight matrices are stored ("fp32",
// "int8", or a GGUF file's types, e.g. "Q4_K, Q6_K"); simd: the CPU engine's build, 'relaxed' (relaxed SIMD: fused
// multiply-add and the 8-bit dot product, where the JS engine runs them: Chrome 114+, Firefox 145+; Node with
// GPT2_WASM_SIMD=relaxed) or 'simd128' (Safari, Node by default), chosen by a probe (engine/simd_support.js).
// generate() keeps its session's KV cache when it ends: a next prompt that starts with the same tokens (the
// prompt plus the output, to continue a text) computes only the rest, and stats.reusedTokens says how many it
// kept. The output is the same as without that reuse. The prompt is a text or an array of token ids: to
// continue a run exactly where it stopped, give its prompt's ids (encode()) and its pieces' tokens, since a
// model may generate a text in other tokens than its tokenizer would make of it (e.g. "\n", "\n" where the
// tokenizer makes one "\n\n"): a text prompt is encoded as a fresh one, and reuses only as far as the ids agree.
// score(text, { topAlternatives, kvCache, signal }) (SCORE_OPTIONS in generation/option_table.js) -> Promise of { tokens: [{ token, text, logprob, rank, alternatives:
// [{ token, text, logprob }] }], totalLogprob, perplexity }: each token of the text (after <|endoftext|>) with
// its natural-log probability given the text before it, its rank among all tokens (1 = the likeliest) and the
// topAlternatives likeliest tokens; perplexity = exp(-totalLogprob / tokens.length); an empty text has no
// tokens and perplexity 1. Texts longer than the context are scored in overlapping windows (see score.js); an
// abort of signal rejects it with an AbortError between two passes.
// inspect(input, { positions, layers, heads, topK, logitLens, kvCache }) (INSPECT_OPTIONS) -> Promise of { tokens,
// positions, layers, heads, attention, logitLens, blocks, kv, device }: what one fresh pass over the input's tokens
// computes inside at those positions (inspection/inspect.js; docs/inspection.md); generate()'s inspect option gives
// each piece the same for its token, with the sampler's trace of its draw.
// If the engine aborts (a genuine out-of-memory, say), the call that hit it fails with an EngineAbortedError
// (error.name) and the models of a worker load themselves again in a new one, from the Cache API for a URL;
// their next calls wait for that. whenUsable() -> Promise that resolves once the model can run, or rejects
// with why it cannot (its reload failed, or, for a model in this thread, the engine crashed): load it again.
// weights: 'fp32' (default) or 'int8' (a safetensors model quantized on load: about a quarter of the weight
// memory); the engine checks it before model.safetensors is opened. A GGUF file runs in its own types:
// 'int8' with one is a TypeError.
// threads: 'auto' (default in browsers: the cores, at most 8; in browsers those measured to run at once, see
// engine/threads.js) or a count (default 1 in Node). More than one needs SharedArrayBuffer, which browsers give
// only to cross-origin-isolated pages (COOP + COEP headers); elsewhere the model runs on one thread.
// model.threads says how many it got, and model.threadsReason why one where more were asked for.
// device: 'auto' (default), 'webgpu' or 'wasm': where the forward pass runs. 'webgpu' runs it on the GPU
// (web/lib/gpu/; fp32 and int8 weights, an fp32 KV cache; score() stays on the CPU) and is a one-line error where
// there is no WebGPU adapter or the model's formats do not run there; 'auto' uses the GPU only on a hardware
// adapter, never a software one (SwiftShader, lavapipe), and otherwise the CPU. model.device says which
// ('webgpu' or 'wasm'), model.adapterInfo describes the adapter ({ vendor, architecture, device, description,
// isFallbackAdapter, software }, null without one) and model.deviceReason why 'auto' chose the CPU.
export async function loadModel(source, options = {}) {
  checkLoadOptions(options);
  const { onProgress, signal, useWorker = IS_PAGE, worker, weights = 'fp32', threads = DEFAULT_THREADS, device = 'auto' } = options;
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError('loadModel: onProgress must be a function');
  checkThreads(threads);
  checkDevice(device);
  const typed = modelSource(source);
  if (worker || useWorker) return loadModelInWorker(typed, { onProgress, signal, worker, weights, threads, device });
  return loadModelInThisThread(typed, { onProgress, signal, weights, threads, device });
}

const LOAD_OPTIONS = ['onProgress', 'signal', 'useWorker', 'worker', 'weights', 'threads', 'device'];

// loadModel's options: an object (undefined: the defaults) of the known options only, so that a misspelt one
// ({ thread: 4 }) is an error rather than a default quietly used.
function checkLoadOptions(options) {
  if (options === null || typeof options !== 'object') throw new TypeError(`loadModel: options must be an object, got ${options === null ? 'null' : typeof options}`);
  for (const name of Object.keys(options)) {
    if (!LOAD_OPTIONS.includes(name)) throw new TypeError(`loadModel: unknown option "${name}" (known: ${LOAD_OPTIONS.join(', ')})`);
  }
}

// Settings of this realm's engine, before its first model loads. assetBase: the URL of the folder that holds the
// engine's files, a copy of public/wasm/ (gpt2.wasm, gpt2.mjs, gpt2.cjs, the threaded gpt2-mt.* and
// gpt2-worker.js, the engine worker as one module): where a bundler's output or a CDN serves them. Relative to
// the page in browsers; a file: URL in Node. Default: public/wasm/ found from this module's URL, which a bundle
// changes. The engine worker gets it too. Setting another one after the engine or a worker started is an Error.
export function configure(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('configure: options must be an object');
  for (const name of Object.keys(options)) {
    if (name !== 'assetBase') throw new TypeError(`configure: unknown option "${name}" (known: assetBase)`);
  }
  if (options.assetBase !== undefined) setAssetBase(options.assetBase);
}

// A worker for several models (see the top of this file): terminate() it when done.
export function createEngineWorker() {
  return new WorkerClient({ endsWithLastModel: false });
}
