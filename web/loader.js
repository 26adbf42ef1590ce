// Loads a model, a folder in the Hugging Face layout (config.json, model.safetensors, vocab.json, merges.txt) or
// one GGUF file (weights, hyper-parameters and tokenizer), from a URL, from local File/Blob/ArrayBuffer objects,
// or (Node) from a path (model_sources.js), and creates the engine model and the tokenizer from it. The weights
// stream chunk by chunk into the engine's loader (file_sinks.js), which converts each tensor as it arrives: the
// file is never held whole, in JS or in the wasm heap. In browsers, downloads are copied into the Cache API as
// they stream (model_cache.js), and the copies are completed only once the model has loaded; nothing
// incomplete or invalid is ever stored. Plain ES module.
import { BytesSink, WeightsSink } from './file_sinks.js';
import { ModelLoadError, checkNotHtml, describe, throwIfAborted } from './load_errors.js';
import { commitCacheCopies } from './model_cache.js';
import { MODEL_FILES } from './model_files.js';
import { openModelFiles } from './model_sources.js';
import { createTokenizer, createTokenizerFromVocabulary } from './tokenizer.js';

export { CACHE_NAME } from './model_cache.js';
export { ModelLoadError, MODEL_FILES };

const PROGRESS_INTERVAL_MS = 100;

// -> { model: EngineModel, tokenizer (tokenizer.js) | null }
// source: a base URL (string or URL) of a folder or the URL of a .gguf file, a Node folder or file path,
// { config, weights, vocab, merges } of File/Blob/ArrayBuffer/typed arrays, one File/Blob/ArrayBuffer/typed
// array alone (a GGUF file), or an array/FileList of Files matched by name (the folder's, or one .gguf).
// withTokenizer: false skips the tokenizer (models used with token ids only: no vocab.json and merges.txt).
// weights: 'fp32' or 'int8' (WasmEngine.createModelLoader, which checks it before model.safetensors is opened);
// a GGUF file runs in its own types, so 'int8' is refused for it (TypeError) before anything is read.
export async function loadEngineModel(engine, source, { onProgress, signal, withTokenizer = true, weights = 'fp32' } = {}) {
  const files = await openModelFiles(source);
  const context = { onProgress, signal, cacheCopies: [] };
  let model = null;
  try {
    const loaded = files.format === 'gguf'
      ? await readGguf(engine, files.model, context, weights)
      : await readFolder(engine, files, context, { withTokenizer, weights });
    model = loaded.model;
    const tokenizer = withTokenizer ? checkedTokenizer(loaded, model.config) : null;
    await commitCacheCopies(context.cacheCopies);
    return { model, tokenizer };
  } catch (error) {
    model?.dispose();
    for (const copy of context.cacheCopies) copy.discard();
    if (error.kind === 'invalid') await files.evict?.();  // a cached file may be the bad one
    throw error;
  }
}

// What reading a model gives: { model, tokenizerFile (the file(s) its tokenizer comes from, for errors),
// buildTokenizer() -> tokenizer (throws what tokenizer.js finds wrong) }.

async function readFolder(engine, files, context, { withTokenizer, weights }) {
  const text = {};
  for (const key of withTokenizer ? ['config', 'vocab', 'merges'] : ['config']) {
    text[key] = await readModelFile(files[key], context, (total) => new BytesSink(files[key].name, total));
  }
  parseJson(MODEL_FILES.config, text.config);  // names the file when it is not JSON at all
  const configJson = decodeText(MODEL_FILES.config, text.config);
  const vocab = text.vocab ? parseJson(MODEL_FILES.vocab, text.vocab) : null;
  const merges = text.merges ? decodeText(MODEL_FILES.merges, text.merges) : null;
  const model = await readModelFile(files.weights, context, () => WeightsSink.safetensors(engine, configJson, weights));
  return { model, tokenizerFile: `${MODEL_FILES.vocab} + ${MODEL_FILES.merges}`, buildTokenizer: () => createTokenizer(vocab, merges) };
}

// A GGUF file runs in its own types: weights 'int8' (re-quantizing) is refused before anything is read.
async function readGguf(engine, file, context, weights) {
  if (weights !== 'fp32') {
    throw new TypeError(`weights: ${JSON.stringify(weights)} applies to safetensors models; ${file.name} is a GGUF file, ` +
      'which runs in its own types (leave weights out)');
  }
  const model = await readModelFile(file, context, () => WeightsSink.gguf(engine, file.name));
  return { model, tokenizerFile: file.name, buildTokenizer: () => createTokenizerFromVocabulary(model.readVocabulary()) };
}

// The tokenizer of a model read, checked against its config; problems are the files' (ModelLoadError 'invalid').
function checkedTokenizer({ tokenizerFile, buildTokenizer }, config) {
  let tokenizer;
  try {
    tokenizer = buildTokenizer();
  } catch (error) {
    throw new ModelLoadError(tokenizerFile, 'invalid', `invalid tokenizer: ${error.message}`);
  }
  if (tokenizer.vocabSize > config.n_vocab) {
    throw new ModelLoadError(tokenizerFile, 'invalid',
      `has ${tokenizer.vocabSize} tokens but the model only ${config.n_vocab}: files of different models?`);
  }
  return tokenizer;
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
