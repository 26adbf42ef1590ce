// An engine model whose sessions run on the GPU: the weights uploaded once (gpu_weights.js), the kernels compiled
// once (kernels.js), and sessions that are the engine's recording sessions run by gpu_session.js. It stands where
// an EngineModel does (SessionPool, LocalModel): the same fields, and createSession.
import { destroyWeights, uploadWeights } from './gpu_weights.js';
import { GpuSession } from './gpu_session.js';
import { createKernels } from './kernels.js';

// How long a failed GPU call waits for the device's lost promise before it counts as an error of its own.
const LOST_WAIT_MS = 1000;

export class GpuModel {
  #engineModel;
  #gpu;  // { device, kernels, weights }
  config;
  weightBytes;  // the weights' bytes on the GPU
  weightTypes;
  threads;
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
    this.config = engineModel.config;
    this.weightBytes = gpu.weights.bytes;
    this.weightTypes = engineModel.weightTypes;
    this.threads = engineModel.threads;
    this.adapterInfo = adapterInfo;
  }

  get engine() {
    return this.#engineModel.engine;
  }

  readVocabulary() {
    return this.#engineModel.readVocabulary();
  }

  // A GPU session keeps an fp32 cache whatever kvCache asks (its kvCache says so). Once the GPU is lost, sessions
  // are the CPU engine's, over the same weights.
  createSession({ useKVCache = true, kvCache = 'int8' } = {}) {
    if (this.#gpu.lost) return this.#engineModel.createSession({ useKVCache, kvCache });
    const recording = this.#engineModel.createSession({ useKVCache, kvCache: 'fp32', recording: true });
    try {
      return new GpuSession(recording, this.#gpu, this.config, recording.batchRows, () => this.#engineModel.createSession({ useKVCache: true, kvCache: 'fp32' }));
    } catch (error) {
      recording.dispose();
      throw error;
    }
  }

  // 'webgpu', or 'wasm' once the GPU was lost (deviceLost says why)
  get currentDevice() {
    return this.#gpu.lost ? 'wasm' : 'webgpu';
  }

  get deviceLost() {
    return this.#gpu.lost;
  }

  // Frees the GPU's side (weights, device) and -> the engine model, which lives on: the model then runs on the CPU.
  releaseGpu() {
    destroyWeights(this.#gpu.weights);
    this.#gpu.kernels.destroy();
    this.#gpu.device.destroy();
    return this.#engineModel;
  }

  dispose() {
    this.releaseGpu().dispose();
  }
}

// engineModel's weights uploaded to device: -> GpuModel. A device that runs out of memory is a one-line error naming
// the model (name) and the bytes its weights need.
export async function openGpuModel(engineModel, device, adapterInfo, name = 'the model') {
  // software adapters pay so much for workgroup barriers that they multiply without them
  const kernels = await createKernels(device, { serialLinear: Boolean(adapterInfo?.software) });
  device.pushErrorScope('out-of-memory');
  const weights = uploadWeights(device, engineModel);
  const error = await device.popErrorScope();
  if (error) {
    destroyWeights(weights);
    throw new Error(`device 'webgpu': out of GPU memory for ${name}: its weights need ${weights.bytes} bytes: ${error.message}`);
  }
  return new GpuModel(engineModel, { device, kernels, weights }, adapterInfo);
}
