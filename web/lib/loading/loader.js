// Loads a model, a folder in the Hugging Face layout (config.json, model.safetensors, vocab.json, merges.txt) or
// one GGUF file (weights, hyper-parameters and tokenizer), from a model source (model_source.js: a URL, local
// File/Blob/ArrayBuffer objects, or a Node path) whose files source_files.js opens, and creates the engine model
// and the tokenizer from it. The weights stream chunk by chunk into the engine's loader (file_sinks.js), which
// converts each tensor as it arrives: the file is never held whole, in JS or in the wasm heap. Downloads resume
// after a dropped connection (download.js). In browsers, downloads are copied into the Cache API as they stream
// (model_cache.js), and the copies are completed only once the model has loaded; nothing incomplete or invalid
// is ever stored, and a cached copy damaged since is found out before it is used. Plain ES module.
import { DownloadRestart } from './download.js';
import { BytesSink, WeightsSink } from './file_sinks.js';
import { DamagedCopyError, ModelLoadError, throwIfAborted } from '../errors.js';
import { checkNotHtml, describe } from './load_errors.js';
import { commitCacheCopies } from './model_cache.js';
import { MODEL_FILES } from './model_files.js';
import { openModelFiles } from './source_files.js';
import { createTokenizer, createTokenizerFromVocabulary } from '../tokenizer.js';

const PROGRESS_INTERVAL_MS = 100;
// Speed is measured over the last SPEED_WINDOW_MS, so that it follows the connection, and only once
// SPEED_MIN_SPAN_MS have been seen (null until then).
const SPEED_WINDOW_MS = 5000;
const SPEED_MIN_SPAN_MS = 500;

// -> { model: EngineModel, tokenizer (tokenizer.js) | null }
// source: a model source, as modelSource (model_source.js) makes it of what loadModel takes.
// withTokenizer: false skips the tokenizer (models used with token ids only: no vocab.json and merges.txt).
// weights: 'fp32' or 'int8' (WasmEngine.createModelLoader, which checks it before model.safetensors is opened);
// a GGUF file runs in its own types, so 'int8' is refused for it (TypeError) before anything is read.
// onProgress(event): see ProgressReporter. retryDelayMs: the first wait before retrying a download that got
// nothing (download.js; 1 s). onMatrixRows(rows): where the weight matrices go as they load (a GPU upload;
// engine_objects.js's MatrixRowsReceiver), the model then keeping none; a download that starts over hands them again.
// When files read from the Cache API turn out invalid, they are evicted and the model is loaded again, before
// any error is reported: a damaged copy (model_cache.js) is evicted alone, so only that file is downloaded
// again; after any other invalid file, all of the model's are. Each failed try thus leaves fewer files in the
// cache, and one that read none from it fails for good (as does, should an eviction not take, the try after
// one per file of a folder).
export async function loadModelIntoEngine(engine, source, options = {}) {
  const files = await openModelFiles(source);
  for (let tries = 1; ; tries++) {
    const context = loadContext(options);
    try {
      return await loadFilesIntoEngine(engine, files, context, options);
    } catch (error) {
      if (error.kind !== 'invalid' || !context.readFromCache || tries > Object.keys(MODEL_FILES).length) throw error;
    }
  }
}

function loadContext({ onProgress, signal, retryDelayMs }) {
  const context = { signal, retryDelayMs, cacheCopies: [], readFromCache: false, lastEvent: null };
  context.report = (event) => {
    context.lastEvent = event;
    onProgress?.(event);
  };
  return context;
}

async function loadFilesIntoEngine(engine, files, context, { withTokenizer = true, weights = 'fp32', onMatrixRows = null }) {
  let model = null;
  try {
    const loaded = files.format === 'gguf'
      ? await readGguf(engine, files.model, context, weights, onMatrixRows)
      : await readFolder(engine, files, context, { withTokenizer, weights, onMatrixRows });
    model = loaded.model;
    const tokenizer = withTokenizer ? checkedTokenizer(loaded, model.config) : null;
    const notCached = await commitCacheCopies(context.cacheCopies);
    if (notCached) context.report({ ...context.lastEvent, bytesPerSecond: null, secondsLeft: null, notCached: notCached.message });
    return { model, tokenizer };
  } catch (error) {
    model?.dispose();
    for (const copy of context.cacheCopies) copy.discard();
    // A cached file may be the bad one; a damaged copy was evicted alone when found out.
    if (error.kind === 'invalid' && !(error instanceof DamagedCopyError)) await files.evict?.();
    throw error;
  }
}

// What reading a model gives: { model, tokenizerFile (the file(s) its tokenizer comes from, for errors),
// buildTokenizer() -> tokenizer (throws what tokenizer.js finds wrong) }.

async function readFolder(engine, files, context, { withTokenizer, weights, onMatrixRows }) {
  const text = {};
  for (const key of withTokenizer ? ['config', 'vocab', 'merges'] : ['config']) {
    text[key] = await readModelFile(files[key], context, (total) => new BytesSink(files[key].name, total));
  }
  parseJson(MODEL_FILES.config, text.config);  // names the file when it is not JSON at all
  const configJson = decodeText(MODEL_FILES.config, text.config);
  const tokenizerFile = `${MODEL_FILES.vocab} + ${MODEL_FILES.merges}`;
  // Built before the weights are downloaded, so that a bad tokenizer file is told at once.
  const tokenizer = withTokenizer ? buildTokenizer(tokenizerFile, () => createTokenizer(
    parseJson(MODEL_FILES.vocab, text.vocab), decodeText(MODEL_FILES.merges, text.merges))) : null;
  const model = await readModelFile(files.weights, context, () => WeightsSink.safetensors(engine, configJson, weights, onMatrixRows));
  return { model, tokenizerFile, buildTokenizer: () => tokenizer };
}

// A GGUF file runs in its own types: weights 'int8' (re-quantizing) is refused before anything is read.
async function readGguf(engine, file, context, weights, onMatrixRows) {
  if (weights !== 'fp32') {
    throw new TypeError(`weights: ${JSON.stringify(weights)} applies to safetensors models; ${file.name} is a GGUF file, ` +
      'which runs in its own types (leave weights out)');
  }
  const model = await readModelFile(file, context, () => WeightsSink.gguf(engine, file.name, onMatrixRows));
  return { model, tokenizerFile: file.name, buildTokenizer: () => createTokenizerFromVocabulary(model.readVocabulary()) };
}

// The tokenizer of a model read, checked against its config; problems are the files' (ModelLoadError 'invalid').
function checkedTokenizer({ tokenizerFile, buildTokenizer: build }, config) {
  const tokenizer = buildTokenizer(tokenizerFile, build);
  if (tokenizer.vocabSize > config.n_vocab) {
    throw new ModelLoadError(tokenizerFile, 'invalid',
      `has ${tokenizer.vocabSize} tokens but the model only ${config.n_vocab}: files of different models?`);
  }
  return tokenizer;
}

function buildTokenizer(tokenizerFile, build) {
  try {
    return build();
  } catch (error) {
    if (error instanceof ModelLoadError) throw error;  // a file that is not JSON or not UTF-8
    throw new ModelLoadError(tokenizerFile, 'invalid', `invalid tokenizer: ${error.message}`);
  }
}

// ---- reading one file into memory (text files) or into the engine's loader (weights) ----

// file: { name, open({ signal, onRetry, retryDelayMs }) -> { total (bytes or null), chunks, cancel(), cacheCopy,
// fromCache } } (source_files.js). createSink(total): where the bytes go ({ write(chunk), length, finish() ->
// result, discard() }), made anew when a download starts the file over (DownloadRestart): the engine's loader
// cannot go back, so it is discarded with the bytes it had.
async function readModelFile(file, context, createSink) {
  const { signal, retryDelayMs, cacheCopies } = context;
  throwIfAborted(signal, file.name);
  let sink = null;
  let progress = null;
  const onRetry = (retry) => progress?.retrying(sink.length, retry);
  const opened = await file.open({ signal, onRetry, retryDelayMs });
  const { chunks, cancel, cacheCopy } = opened;
  let total = opened.total;
  if (opened.fromCache) context.readFromCache = true;
  try {
    sink = createSink(total);
    progress = new ProgressReporter(file.name, total, context.report, Boolean(cacheCopy));
    for await (const chunk of readChunks(chunks, file.name, signal, () => `${sink.length} of ${total ?? '?'} bytes`)) {
      if (chunk instanceof DownloadRestart) {
        total = chunk.total;
        sink.discard();
        sink = null;  // not discarded twice if the new one cannot be made
        sink = createSink(total);
        cacheCopy?.restart(total);
        progress.restart(total);
        continue;
      }
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

// The progress events of one file, at most one per PROGRESS_INTERVAL_MS while it streams, and one at its start
// and end: { file, loaded, total (bytes or null), fraction (null while the size is unknown), bytesPerSecond and
// secondsLeft (null until measurable), caching (the file is being copied into the Cache API) }, plus retry:
// { attempt, delayMs } when a broken download is about to be retried (download.js). After the model loaded,
// an event with notCached (why) says the Cache API did not keep it (e.g. a full quota).
class ProgressReporter {
  #file;
  #total;
  #report;
  #caching;
  #lastTime = -Infinity;
  #samples = [];  // { time, loaded } over the last SPEED_WINDOW_MS

  constructor(file, total, report, caching) {
    this.#file = file;
    this.#total = total;
    this.#report = report;
    this.#caching = caching;
    this.#emit(0);
  }

  update(loaded) {
    const now = Date.now();
    if (now - this.#lastTime >= PROGRESS_INTERVAL_MS) this.#emit(loaded, now);
  }

  // The file starts over, perhaps with another size.
  restart(total) {
    this.#total = total;
    this.#samples = [];
    this.#emit(0);
  }

  // The speed before a broken connection says nothing of the next one.
  retrying(loaded, retry) {
    this.#emit(loaded, Date.now(), { bytesPerSecond: null, secondsLeft: null, retry });
    this.#samples = [];
  }

  done(loaded) {
    this.#total = loaded;
    this.#emit(loaded);
  }

  #emit(loaded, now = Date.now(), extra = {}) {
    this.#lastTime = now;
    const total = this.#total;
    const bytesPerSecond = this.#measureSpeed(loaded, now);
    const secondsLeft = bytesPerSecond > 0 && total !== null ? Math.max(0, total - loaded) / bytesPerSecond : null;
    this.#report({
      file: this.#file, loaded, total, fraction: total ? Math.min(1, loaded / total) : null,
      bytesPerSecond, secondsLeft, caching: this.#caching, ...extra,
    });
  }

  #measureSpeed(loaded, now) {
    const samples = this.#samples;
    samples.push({ time: now, loaded });
    while (samples[0].time < now - SPEED_WINDOW_MS) samples.shift();
    const span = now - samples[0].time;
    return span >= SPEED_MIN_SPAN_MS ? ((loaded - samples[0].loaded) * 1000) / span : null;
  }
}
