// Web Worker hosting the engine, the loader and the generation loop, so the page stays responsive.
// Started by worker_client.js (WorkerClient) from a Blob URL that imports this file's absolute URL (works from
// cross-origin pages), or that holds this file bundled (public/wasm/gpt2-worker.js; inlined in the widget).
//
// Protocol (every request carries a numeric `id`; answers carry the same id):
//   page -> worker  { type: 'configure', assetBase }  first: the URL of the wasm files' folder (the asset
//                                                     folder of asset_folder.js, the page's); no answer
//                   { type: 'load', id, source, weights?, threads?, device? } -> progress*, result { modelId, config, weightBytes, weightTypes, threads, threadsReason, simd, … }
//                   (source: a model source, as the page's modelSource made it (model_source.js: plain data,
//                   URLs resolved against the page); weights: 'fp32' | 'int8', threads: 'auto' | count, device:
//                   loadModel's options; the worker resolves threads, since it is the worker's isolation and cores
//                   that count)
//                   { type: 'generate', id, modelId, prompt, options } -> piece*, result (stats)
//                   { type: 'score', id, modelId, text, options }     -> result (model.score's answer; options
//                                                                        as model.score takes them, but signal)
//                   { type: 'inspect', id, modelId, input, options }  -> result (model.inspect's answer)
//                   { type: 'encode', id, modelId, text }             -> result (ids)
//                   { type: 'decode', id, modelId, ids }              -> result (text)
//                   { type: 'dispose', id, modelId }                  -> result
//                   { type: 'cancel', id }  aborts request `id` (a load or a score rejects with AbortError, a
//                                           generation ends with stopReason 'abort'); no answer of its own
//   worker -> page  { type: 'ready' } once started
//                   { type: 'progress', id, progress } / { type: 'piece', id, piece, stats }
//                   { type: 'result', id, value, stats? } / { type: 'error', id, error: { name, message, file?, kind? }, stats? }
//                   { type: 'crashed', reason }   the wasm instance aborted (e.g. out of memory): every model in
//                                                 this worker is gone; the page ends this worker, starts a new
//                                                 one and loads the models again there
import { setAssetBase } from '../engine/asset_folder.js';
import { loadModelInThisThread } from '../models/local_model.js';
import { describeModel } from '../models/model_description.js';

const models = new Map();  // modelId -> LocalModel (local_model.js)
const controllers = new Map();  // request id -> AbortController
let nextModelId = 1;

const handlers = {
  async load({ id, source, weights = 'fp32', threads = 'auto', device = 'auto' }) {
    const onProgress = (progress) => post({ type: 'progress', id, progress });
    const model = await loadModelInThisThread(source, { onProgress, signal: controllers.get(id).signal, weights, threads, device });
    const modelId = nextModelId++;
    models.set(modelId, model);
    return { modelId, ...describeModel(model) };
  },

  async generate({ id, modelId, prompt, options }) {
    const generation = modelFor(modelId).generate(prompt, { ...options, signal: controllers.get(id).signal });
    try {
      for await (const piece of generation) post({ type: 'piece', id, piece, stats: generation.stats });
    } catch (error) {
      error.stats = generation.stats;
      throw error;
    }
    return { value: generation.sequences, stats: generation.stats };
  },

  async score({ id, modelId, text, options }) {
    return modelFor(modelId).score(text, { ...options, signal: controllers.get(id).signal });
  },

  async inspect({ modelId, input, options }) {
    return modelFor(modelId).inspect(input, options);
  },

  async encode({ modelId, text }) {
    return modelFor(modelId).encode(text);
  },

  async decode({ modelId, ids }) {
    return modelFor(modelId).decode(ids);
  },

  async dispose({ modelId }) {
    models.get(modelId)?.dispose();
    models.delete(modelId);
  },
};

function modelFor(modelId) {
  const model = models.get(modelId);
  if (!model) throw new Error('the model was disposed');
  return model;
}

self.onmessage = async ({ data: message }) => {
  if (message.type === 'cancel') return controllers.get(message.id)?.abort();
  if (message.type === 'configure') return setAssetBase(message.assetBase);
  const handler = handlers[message.type];
  if (!handler) return post({ type: 'error', id: message.id, error: { name: 'Error', message: `unknown request ${message.type}` } });
  controllers.set(message.id, new AbortController());
  try {
    const value = await handler(message);
    const answer = message.type === 'generate' ? { type: 'result', id: message.id, ...value } : { type: 'result', id: message.id, value };
    post(answer);
  } catch (error) {
    // After a crash the page ends this worker and fails every request with the crash (worker_client.js).
    if (error?.name === 'EngineAbortedError') reportCrash(error);
    else post({ type: 'error', id: message.id, error: serializeError(error), stats: error?.stats });
  } finally {
    controllers.delete(message.id);
  }
};

function reportCrash(error) {
  models.clear();
  post({ type: 'crashed', reason: error.reason });
}

function serializeError(error) {
  const { name = 'Error', message = String(error), file, kind } = error ?? {};
  return { name, message, file, kind };
}

function post(message) {
  self.postMessage(message);
}

post({ type: 'ready' });
