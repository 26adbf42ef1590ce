// What every kind of Model tells of the weights it runs (gpt2.js's Model: config, weightBytes, weightTypes,
// threads, simd), taken from the model it stands for: the engine's (LocalModel), the worker's answer to a load
// (WorkerModel) or a shared model (LeasedModel).

// -> { config, weightBytes, weightTypes, threads, threadsReason, simd, device, adapterInfo, deviceReason } of model:
// what the engine worker sends of a model it loaded. threadsReason: why the model runs on one thread where more were
// asked for, or null (engine/threads.js); device: 'webgpu' or 'wasm'; adapterInfo: the WebGPU adapter's description
// or null; deviceReason: why the model runs on the CPU when that was not asked for, or null.
export function describeModel({ config, weightBytes, weightTypes, threads, threadsReason = null, simd, device = 'wasm', adapterInfo = null, deviceReason = null }) {
  return { config, weightBytes, weightTypes, threads, threadsReason, simd, device, adapterInfo, deviceReason };
}

// The base of the Model classes: those fields, set once from the model described.
export class DescribedModel {
  config;
  weightBytes;
  weightTypes;
  threads;
  threadsReason;
  simd;
  device;
  adapterInfo;
  deviceReason;

  constructor(model) {
    Object.assign(this, describeModel(model));
  }
}
