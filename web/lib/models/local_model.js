// Models in this thread (Node, plain workers, and the engine worker itself, web/lib/worker/worker.js): the engine model and
// the tokenizer behind the public Model interface (see gpt2.js), generating with generate.js's loop and scoring
// with score.js.
import { loadEngine } from '../engine/engine.js';
import { DEFAULT_THREADS, ONE_THREAD_REASONS, planThreads } from '../engine/threads.js';
import { Generation, SessionPool, normalizeGenerateOptions } from '../generation/generate.js';
import { DeferredSessionPool } from '../generation/session_pool.js';
import { normalizeInspectOptions } from '../generation/option_checks.js';
import { inspectInput } from '../inspection/inspect.js';
import { loadModelIntoEngine } from '../loading/loader.js';
import { sourceName } from '../loading/model_source.js';
import { normalizeScoreOptions, scoreText } from '../generation/score.js';
import { DescribedModel, describeModel } from './model_description.js';
import { chooseDevice } from '../gpu/device.js';
import { deviceChoiceKey, probeFasterDevice, probeReason, rememberedChoice } from '../gpu/device_probe.js';
import { openGpuModel, startWeightUpload } from '../gpu/gpu_model.js';
import { unsupportedWeights } from '../gpu/gpu_weights.js';

// A model bound for the GPU ('webgpu', or 'auto' where the GPU was measured faster for it at an earlier load)
// streams its matrices there as the file loads, so that the heap never holds them; otherwise the heap takes the
// whole model, which the first load's probe also runs on the CPU. Under 'auto', a model remembered as faster on
// the CPU goes straight to the CPU, without an upload. source: a model source (model_source.js).
export async function loadModelInThisThread(source, { onProgress, signal, weights = 'fp32', threads = DEFAULT_THREADS, device = 'auto' } = {}) {
  let choice = await chooseDevice(device);  // first: a 'webgpu' that cannot be fails before the download
  const modelKey = deviceChoiceKey(source, weights);
  const remembered = device === 'auto' && choice.device === 'webgpu' ? await rememberedChoice(choice.adapterInfo, modelKey) : null;
  if (remembered?.device === 'wasm') {
    choice.gpu.destroy();
    choice = { device: 'wasm', reason: probeReason(remembered), adapterInfo: choice.adapterInfo };
  }
  let engine, loaded;
  let upload = null;
  const threadPlan = await planThreads(threads);
  try {
    engine = await loadEngine({ threads: threadPlan.threads });
    if (choice.device === 'webgpu' && (device === 'webgpu' || remembered)) upload = startWeightUpload(choice.gpu);
    loaded = await loadModelIntoEngine(engine, source, { onProgress, signal, weights, onMatrixRows: upload && matrixRowsTo(upload) });
  } catch (error) {
    upload?.destroy();
    choice.gpu?.destroy();
    // 'auto' whose GPU refused the matrices as they streamed: the CPU takes the model instead
    if (!upload || device === 'webgpu' || !error.message.startsWith(GPU_REFUSAL)) throw error;
    choice = { device: 'wasm', reason: error.cause?.message ?? error.message, adapterInfo: choice.adapterInfo };  // as placeModel words it
    upload = null;
    loaded = await loadModelIntoEngine(engine, source, { onProgress, signal, weights });
  }
  const { model, tokenizer } = loaded;
  // for a GPU lost later, or one that refuses a streamed model: the weights again, into the heap (from the Cache
  // API where the download was cached)
  const reloadOnCpu = async () => (await loadModelIntoEngine(engine, source, { weights })).model;
  const placed = await placeModel(model, choice, device, { name: sourceName(source), modelKey, reloadOnCpu, upload });
  return new LocalModel(placed.model, tokenizer, { ...placed, threadsReason: oneThreadReason(placed.model.threads, engine, threadPlan) });
}

// Why a model of engine runs on one thread where more were asked for (ONE_THREAD_REASONS), or null. threadPlan:
// planThreads's. A model takes the engine's pool workers that no other model holds (engine.js).
function oneThreadReason(modelThreads, engine, threadPlan) {
  if (modelThreads > 1) return null;
  return threadPlan.reason ?? (engine.threads > 1 ? ONE_THREAD_REASONS.workersTaken : null);
}

// The model where choice puts it: { model: a GpuModel or the engine model, device, adapterInfo, deviceReason }.
// A model the GPU cannot run goes to the CPU under 'auto' (deviceReason says why) and is an error under 'webgpu'.
// One that stays on the GPU lets the heap's copy of its weights go; reloadOnCpu() loads them again if the GPU is lost.
// upload: the GpuWeightUpload that took the matrices as the model loaded (no probe then), or null (they are in the
// heap). modelKey: what the probe remembers its choice under. name: how errors name the model.
async function placeModel(model, choice, requested, { name, modelKey, reloadOnCpu, upload }) {
  const { adapterInfo = null } = choice;
  if (choice.device === 'wasm') {
    return { model, device: 'wasm', adapterInfo, deviceReason: requested === 'wasm' ? null : choice.reason };
  }
  let reason = unsupportedWeights(model);
  if (!reason) {
    let gpuModel = null;
    try {
      gpuModel = await openGpuModel(model, choice.gpu, adapterInfo, name, upload);
      const probe = requested === 'webgpu' || upload ? null : await probeFasterDevice(gpuModel, model, adapterInfo, modelKey);
      if (probe && probe.device !== 'webgpu') {
        return { model: gpuModel.releaseGpu(), device: 'wasm', adapterInfo, deviceReason: probeReason(probe) };
      }
      gpuModel.releaseHeapWeights(reloadOnCpu);
      return { model: gpuModel, device: 'webgpu', adapterInfo, deviceReason: null };
    } catch (error) {
      if (gpuModel) gpuModel.releaseGpu();
      reason = error.message;
    }
  }
  choice.gpu.destroy();
  if (requested === 'webgpu') {
    model.dispose();
    throw new Error(reason.startsWith('device ') ? reason : `${GPU_REFUSAL}${reason}`);
  }
  if (upload) {  // streamed: the heap has no matrices to run on
    model.dispose();
    model = await reloadOnCpu();
  }
  return { model, device: 'wasm', adapterInfo, deviceReason: reason };
}

const GPU_REFUSAL = "device 'webgpu': ";

// The loader's onMatrixRows for upload: what the GPU side refuses is a one-line device error.
function matrixRowsTo(upload) {
  return (rows) => {
    try {
      upload.receive(rows);
    } catch (error) {
      throw new Error(`${GPU_REFUSAL}${error.message}`, { cause: error });
    }
  };
}

// The models of this thread as a draft model reaches them (speculative: { draft: model }): model -> { pool, config }.
const draftTargets = new WeakMap();

// speculative.draft's { pool, config } when it is a model; throws where it cannot draft for a model of config.
function draftModelOf(options, config) {
  const draft = options.speculative?.draft;
  if (typeof draft !== 'object') return undefined;
  const target = draftTargets.get(draft);
  if (!target) throw new TypeError('generate: option speculative.draft must be a model loaded in the same thread as this one (not disposed)');
  if (target.config.n_vocab !== config.n_vocab) {
    throw new RangeError(`generate: the draft model's vocabulary has ${target.config.n_vocab} tokens, this model's ${config.n_vocab}: a draft model must share the vocabulary`);
  }
  return target;
}

class LocalModel extends DescribedModel {
  #engineModel;
  #pool;
  #cpuPool = null;  // a GPU model's: sessions of its CPU twin, for inspected runs
  #tokenizer;
  #disposal = new AbortController();  // aborted by dispose(): the runs under way end as an abort of their signal ends them

  // placement: { device, adapterInfo, deviceReason } (placeModel) and threadsReason (oneThreadReason)
  constructor(engineModel, tokenizer, { device, adapterInfo, deviceReason, threadsReason }) {
    super({ ...describeModel(engineModel), threadsReason, device, adapterInfo, deviceReason });
    this.#engineModel = engineModel;
    this.#pool = new SessionPool(engineModel);
    this.#tokenizer = tokenizer;
    draftTargets.set(this, { pool: this.#pool, config: this.config });
  }

  // disposal: a lease's (model_registry.js), whose dispose() ends this run too
  generate(prompt, options, disposal = undefined) {
    if (!this.#pool) throw new Error('the model was disposed');
    const checked = normalizeGenerateOptions(options);
    const target = {
      pool: checked.inspect ? this.#cpuSessions() : this.#pool, tokenizer: this.#tokenizer, config: this.config,
      device: this.device, draftModel: draftModelOf(checked, this.config), disposals: [this.#disposal.signal, disposal],
    };
    return new Generation(target, prompt, checked);
  }

  // What the model computes inside for the input's tokens (gpt2.d.ts Model.inspect): on the CPU engine, whose passes
  // show their insides (a GPU model's weights run there for it).
  async inspect(input, options) {
    const checked = normalizeInspectOptions(options);
    if (!this.#pool) throw new Error('the model was disposed');
    const engineModel = this.device === 'webgpu' ? await this.#engineModel.cpuModel() : this.#engineModel;
    return inspectInput({ engineModel, tokenizer: this.#tokenizer, config: this.config, device: this.device }, input, checked);
  }

  // The pool of the sessions an inspected run takes: this model's, or a GPU model's CPU twin's.
  #cpuSessions() {
    if (this.device !== 'webgpu') return this.#pool;
    return (this.#cpuPool ??= new DeferredSessionPool(() => this.#engineModel.cpuModel()));
  }

  async score(text, options) {
    const checked = normalizeScoreOptions(options);
    if (!this.#pool) throw new Error('the model was disposed');
    return scoreText({ pool: this.#pool, tokenizer: this.#tokenizer }, text, checked);
  }

  async encode(text) {
    return this.#tokenizer.encode(text);
  }

  async decode(ids) {
    return this.#tokenizer.decode(Array.from(ids));
  }

  // A model in this thread is not loaded again after its engine crashed: this then rejects with the crash.
  async whenUsable() {
    if (!this.#engineModel) throw new Error('the model was disposed');
    if (this.#engineModel.engine.aborted) this.#engineModel.engine.call(() => {});  // throws EngineAbortedError
  }

  // Generations still running end at their next token, as an abort of their signal ends them (stopReason 'abort'); they
  // keep their session (and the weights) until then.
  dispose() {
    this.#disposal.abort();
    draftTargets.delete(this);
    this.#pool?.dispose();
    this.#cpuPool?.dispose();
    this.#engineModel?.dispose();
    this.#pool = this.#engineModel = null;
  }
}
