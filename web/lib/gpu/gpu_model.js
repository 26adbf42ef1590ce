// An engine model whose sessions run on the GPU: the weights uploaded once (gpu_weights.js), the kernels compiled
// once (kernels.js), and sessions that are the engine's recording sessions run by gpu_session.js. It stands where
// an EngineModel does (SessionPool, LocalModel): the same fields, and createSession. Once the model stays on the GPU,
// releaseHeapWeights() frees the heap's copy of the weights; a lost GPU then loads them again for the CPU.
import { GpuWeightUpload, destroyWeights } from './gpu_weights.js';
import { GpuSession } from './gpu_session.js';
import { createKernels } from './kernels.js';

// How long a failed GPU call waits for the device's lost promise before it counts as an error of its own.
const LOST_WAIT_MS = 1000;

export class GpuModel {
  #engineModel;
  #gpu;  // { device, kernels, weights, lost, whenLost, cpuModel }
  #reloadOnCpu = null;  // -> Promise of an EngineModel with the weights, once the heap's copy was released
  #cpuModel = null;  // Promise of the EngineModel a lost GPU's passes run on, once one was lost
  config;
  weightBytes;  // the weights' bytes on the GPU
  weightTypes;
  threads;
  simd;
  device = 'webgpu';
  adapterInfo;

  constructor(engineModel, gpu, adapterInfo) {
    this.#engineModel = engineModel;
    this.#gpu = gpu;
    gpu.lost = null;  // why the device was lost, once it was
    gpu.device.lost.then((info) => {
      gpu.lost = `the GPU device was lost (${info.reason ?? 'unknown'}${info.message ? `: ${info.message}` : ''})`;
    });
    // After a GPU call failed: -> whether that was the device being lost (its lost promise settles just after)
    gpu.whenLost = async () => {
      await Promise.race([gpu.device.lost, new Promise((resolve) => setTimeout(resolve, LOST_WAIT_MS))]);
      return gpu.lost !== null;
    };
    // -> Promise of the EngineModel whose weights run the passes of a lost GPU: this one's, or loaded again
    gpu.cpuModel = () => (this.#cpuModel ??= this.#reloadOnCpu ? this.#reloadOnCpu() : Promise.resolve(engineModel));
    this.config = engineModel.config;
    this.weightBytes = gpu.weights.bytes;
    this.weightTypes = engineModel.weightTypes;
    this.threads = engineModel.threads;
    this.simd = engineModel.simd;
    this.adapterInfo = adapterInfo;
  }

  get engine() {
    return this.#engineModel.engine;
  }

  readVocabulary() {
    return this.#engineModel.readVocabulary();
  }

  // A GPU session keeps an fp32 cache whatever kvCache asks (its kvCache says so). Once the GPU is lost, its
  // sessions run their passes on the CPU.
  createSession({ useKVCache = true } = {}) {
    const recording = this.#engineModel.createSession({ useKVCache, kvCache: 'fp32', recording: true });
    try {
      return new GpuSession(recording, this.#gpu, this.config, recording.batchRows);
    } catch (error) {
      recording.dispose();
      throw error;
    }
  }

  // -> Promise of an EngineModel with the weights on the CPU: this one's, or the model loaded again once the heap's
  // copy was released (what a lost GPU's passes run on, and what an inspection runs on: a GPU pass gives logits only)
  cpuModel() {
    return this.#gpu.cpuModel();
  }

  // 'webgpu', or 'wasm' once the GPU was lost (deviceLost says why)
  get currentDevice() {
    return this.#gpu.lost ? 'wasm' : 'webgpu';
  }

  get deviceLost() {
    return this.#gpu.lost;
  }

  // Frees the heap's copy of the weights (gpt2::Model::release_weights), which only a lost GPU would need:
  // reloadOnCpu() -> Promise of the same model loaded again into the engine, which it then runs on.
  releaseHeapWeights(reloadOnCpu) {
    this.#engineModel.releaseWeights();
    this.#reloadOnCpu = reloadOnCpu;
  }

  // Frees the GPU's side (weights, device) and -> the engine model, which lives on: the model then runs on the CPU.
  // Only while the heap keeps the weights.
  releaseGpu() {
    if (this.#reloadOnCpu) throw new Error('releaseGpu: the heap\'s copy of the weights was released');
    this.#destroyGpu();
    return this.#engineModel;
  }

  dispose() {
    this.#destroyGpu();
    this.#engineModel.dispose();
    if (this.#reloadOnCpu) this.#cpuModel?.then((model) => model.dispose(), () => {});
  }

  #destroyGpu() {
    destroyWeights(this.#gpu.weights);
    this.#gpu.kernels.destroy();
    this.#gpu.device.destroy();
  }
}

// A GpuWeightUpload to give the loader (onMatrixRows) so that the matrices go to device as the file streams in,
// never into the heap; openGpuModel then finishes it. Its out-of-memory errors are caught from here on.
export function startWeightUpload(device) {
  device.pushErrorScope('out-of-memory');
  return new GpuWeightUpload(device);
}

// engineModel's weights on device: -> GpuModel. upload: the startWeightUpload that took the matrices while the model
// loaded, or null: they are uploaded from the heap. A device that runs out of memory is a one-line error naming the
// model (name) and the bytes its weights need.
export async function openGpuModel(engineModel, device, adapterInfo, name = 'the model', upload = null) {
  const fromHeap = !upload;
  upload ??= startWeightUpload(device);
  let weights;
  try {
    if (fromHeap) upload.receiveFromHeap(engineModel);
    weights = upload.finish(engineModel);
  } catch (error) {
    upload.destroy();
    await device.popErrorScope();
    throw error;
  }
  const error = await device.popErrorScope();
  if (error) {
    destroyWeights(weights);
    throw new Error(`device 'webgpu': out of GPU memory for ${name}: its weights need ${weights.bytes} bytes: ${error.message}`);
  }
  // software adapters pay so much for workgroup barriers that they multiply without them
  let kernels;
  try {
    kernels = await createKernels(device, { serialLinear: Boolean(adapterInfo?.software) });
  } catch (compileError) {
    destroyWeights(weights);
    throw compileError;
  }
  return new GpuModel(engineModel, { device, kernels, weights }, adapterInfo);
}
