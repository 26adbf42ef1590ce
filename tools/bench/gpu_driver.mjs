// The measure.mjs driver over the WebGPU backend (web/lib/gpu/), for the Chromium worker (webgpu) and Node with Dawn
// (node-webgpu): a cached and an uncached GpuSession of one GpuModel, greedy. The engine model under it is the CPU
// engine with the same weights, which also gives the wasm engine's greedy tokens the GPU's are checked against.
// Plain ES module without imports: the GPU modules come from the caller (the built public/js in Chromium, web/ in
// Node).

// The KV cache a GPU session keeps, whatever createSession is asked (web/lib/gpu/gpu_model.js).
export const GPU_KV_CACHE = 'fp32';

// GPUBufferUsage.STORAGE | COPY_DST and STORAGE | COPY_SRC, spelled out: Node has no GPUBufferUsage global unless
// the webgpu package's globals are installed.
const STORAGE_IN = 0x80 | 0x8;
const STORAGE_OUT = 0x80 | 0x4;

const CEILING_WORKGROUP = 256;
const CEILING_WORKGROUPS = 1024;

// Every invocation xors a strided share of the buffer into one word, so each byte is read once per pass and the
// compiler cannot drop the reads.
const CEILING_SOURCE = `
@group(0) @binding(0) var<storage, read> data: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sink: array<u32>;
@compute @workgroup_size(${CEILING_WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let stride = groups.x * ${CEILING_WORKGROUP}u;
  var acc = vec4<u32>(0u);
  for (var i = gid.x; i < arrayLength(&data); i += stride) { acc ^= data[i]; }
  sink[gid.x] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}`;

// The GPU's streaming-read ceiling: ms of each of `repeats` passes that read `bytes` of storage buffers (split at
// the device's binding limit, like the weights), each pass one submit waited for. The counterpart on the GPU of the
// wasm probe (wasm_driver.mjs's streamReadMs): what the weight bandwidth of a decode step is a fraction of.
export async function gpuStreamReadMs(device, bytes, repeats) {
  const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
  const partBytes = Math.max(16, Math.floor(limit / 16) * 16);
  const module = device.createShaderModule({ label: 'bench streaming read', code: CEILING_SOURCE });
  const pipeline = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const sink = device.createBuffer({ size: CEILING_WORKGROUP * CEILING_WORKGROUPS * 4, usage: STORAGE_OUT });
  const buffers = [];
  const groups = [];
  try {
    const fill = new Uint32Array(1 << 20).fill(0x3a83126f);  // 1/1024 as f32 bits, like the CPU probes' fill
    for (let offset = 0; offset < bytes; offset += partBytes) {
      const size = Math.ceil(Math.min(partBytes, bytes - offset) / 16) * 16;
      const buffer = device.createBuffer({ label: `bench streaming read ${offset}`, size, usage: STORAGE_IN });
      for (let at = 0; at < size; at += fill.byteLength) device.queue.writeBuffer(buffer, at, fill, 0, Math.min(fill.length, (size - at) / 4));
      buffers.push(buffer);
      groups.push(device.createBindGroup({ layout: pipeline.getBindGroupLayout(0),
        entries: [{ binding: 0, resource: { buffer } }, { binding: 1, resource: { buffer: sink } }] }));
    }
    await device.queue.onSubmittedWorkDone();
    const times = [];
    for (let i = 0; i < repeats; i++) {
      const start = performance.now();
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      for (const group of groups) {
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(CEILING_WORKGROUPS);
      }
      pass.end();
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
      times.push(performance.now() - start);
    }
    return times;
  } finally {
    for (const buffer of buffers) buffer.destroy();
    sink.destroy();
  }
}

// The fp32 KV cache a GPU session allocates once at n_ctx: keys and values of every layer.
export const gpuKvCacheBytes = ({ n_layer: L, n_ctx: T, n_embd: C }) => 2 * L * T * C * 4;

// engine: the wasm engine (loadEngine); model: its EngineModel; gpuModel: openGpuModel(model, device, adapterInfo);
// device: the GPUDevice under gpuModel (for the ceiling's buffers).
export function createGpuDriver({ engine, model, gpuModel, device, adapterInfo }) {
  const sessions = {
    cached: gpuModel.createSession({ useKVCache: true }),
    uncached: gpuModel.createSession({ useKVCache: false }),
  };
  for (const session of Object.values(sessions)) session.setSampling({ temperature: 0 });

  // The engine call alone is timed, as for the CPU: one submit and the logits' readback per call are part of it.
  async function timed(session, call) {
    const before = { ...session.counters };
    const start = performance.now();
    const token = await call();
    const ms = performance.now() - start;
    const after = session.counters;
    return { token, ms, counters: { dispatches: after.dispatches - before.dispatches, submits: after.submits - before.submits,
      readbackBytes: after.readbackBytes - before.readbackBytes } };
  }

  return {
    async info() {
      return { config: model.config, weightBytes: gpuModel.weightBytes, kvCacheBytes: gpuKvCacheBytes(model.config), threads: model.threads,
        adapter: adapterInfo };
    },
    prefill: (mode, ids) => timed(sessions[mode], () => sessions[mode].prefill(ids)),
    step: (mode, id) => timed(sessions[mode], () => sessions[mode].step(id)),
    // The wasm engine's greedy tokens after ids (the prefill's, then `steps` steps'), on a CPU session with the GPU's
    // fp32 KV cache, so that the two differ only in where the arithmetic runs.
    async referenceTokens(ids, steps) {
      const session = model.createSession({ useKVCache: true, kvCache: GPU_KV_CACHE });
      try {
        session.setSampling({ temperature: 0 });
        const tokens = [session.prefill(ids)];
        for (let i = 0; i < steps; i++) tokens.push(session.step(tokens.at(-1)));
        return tokens;
      } finally {
        session.dispose();
      }
    },
    streamWeights: (repeats) => gpuStreamReadMs(device, gpuModel.weightBytes, repeats),
    // The CPU side. The heap holds a copy of the weights that a GPU model of the library frees once it is on the
    // GPU (GpuModel.releaseHeapWeights) and that this driver keeps for referenceTokens: referenceWeightBytes, which
    // the steady figure leaves out. What the GPU holds is the weights and KV bytes of info(), which WebGPU gives no
    // way to measure.
    async memory() {
      return { heapBytes: engine.heapBytes(), heapUsedBytes: engine.heapUsedBytes(), referenceWeightBytes: model.weightBytes, gpu: true };
    },
    async releaseUncached() {
      sessions.uncached?.dispose();
      delete sessions.uncached;
    },
    dispose() {
      for (const session of Object.values(sessions)) session.dispose();
    },
  };
}

// Loads the GPU side of a model already in the engine: -> { driver, gpuModel } or { unsupported: reason } when its
// weights do not run on the GPU. gpuModules: { chooseDevice, openGpuModel, unsupportedWeights }; gpu: the
// navigator.gpu-like object (navigator.gpu in Chromium, Dawn's create() in Node).
export async function openGpuDriver(engine, model, gpuModules, gpu) {
  const unsupported = gpuModules.unsupportedWeights(model);
  if (unsupported) return { unsupported: `not on the GPU: ${unsupported}` };
  const choice = await gpuModules.chooseDevice('webgpu', gpu);
  const gpuModel = await gpuModules.openGpuModel(model, choice.gpu, choice.adapterInfo);
  return { gpuModel, driver: createGpuDriver({ engine, model, gpuModel, device: choice.gpu, adapterInfo: choice.adapterInfo }) };
}
