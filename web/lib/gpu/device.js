// Finding a WebGPU device for the engine: the adapter, its description, the limits the engine needs (the adapter's
// own, never assumed), and the rule that a software adapter (SwiftShader, lavapipe, llvmpipe) never runs a model
// unless it is asked for by name.
import { IS_NODE, importOptionalPackage } from '../environment.js';

// The devices loadModel() takes: 'auto' picks WebGPU only where it is a hardware adapter, else the CPU.
export const DEVICES = ['auto', 'webgpu', 'wasm'];

export function checkDevice(device) {
  if (!DEVICES.includes(device)) throw new Error(`device must be ${DEVICES.map((d) => `'${d}'`).join(', ')}, got ${JSON.stringify(device)}`);
}

// -> { vendor, architecture, device, description, isFallbackAdapter, software } of an adapter
export function describeAdapter(adapter) {
  const info = adapter.info ?? {};
  const described = {
    vendor: info.vendor ?? '',
    architecture: info.architecture ?? '',
    device: info.device ?? '',
    description: info.description ?? '',
    isFallbackAdapter: Boolean(info.isFallbackAdapter ?? adapter.isFallbackAdapter),
  };
  const names = `${described.architecture} ${described.device} ${described.description}`;
  described.software = described.isFallbackAdapter || /swiftshader|lavapipe|llvmpipe|software/i.test(names);
  return described;
}

// How a status line names an adapter: "NVIDIA (ampere)", "google (swiftshader)".
export function adapterName({ vendor, architecture, description }) {
  const name = description || vendor || 'unknown adapter';
  return architecture ? `${name} (${architecture})` : name;
}

// -> { adapter, adapterInfo } or { reason } when this context has no WebGPU adapter.
async function findAdapter(gpu) {
  if (!gpu) return { reason: 'WebGPU is not available here (no navigator.gpu)' };
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (error) {
    return { reason: `WebGPU gave no adapter: ${error.message}` };
  }
  if (!adapter) return { reason: 'WebGPU gave no adapter' };
  return { adapter, adapterInfo: describeAdapter(adapter) };
}

// This realm's WebGPU: navigator.gpu, or in Node the optional npm package webgpu (Dawn) where it is installed (it
// needs a Vulkan, Metal or D3D12 driver to give an adapter); null without one.
let nodeGpu;
async function realmGpu() {
  if (globalThis.navigator?.gpu || !IS_NODE) return globalThis.navigator?.gpu ?? null;
  nodeGpu ??= importOptionalPackage('webgpu').then(({ create, globals }) => {
    Object.assign(globalThis, globals);  // GPUBufferUsage and the other constants the kernels use
    return create([]);
  }, () => null);  // not installed, or its native part does not load here
  return nodeGpu;
}

// The device the model runs on: { device: 'webgpu', gpu, adapterInfo } or { device: 'wasm', reason } (auto: why it is
// not the GPU). Asking for 'webgpu' where there is none throws one line. gpu: a navigator.gpu to use instead of
// this realm's.
export async function chooseDevice(requested, gpu) {
  checkDevice(requested);
  if (requested === 'wasm') return { device: 'wasm', reason: 'the CPU was asked for' };
  gpu ??= await realmGpu();
  const { adapter, adapterInfo, reason } = await findAdapter(gpu);
  if (!adapter) {
    if (requested === 'webgpu') throw new Error(`device 'webgpu': ${reason}`);
    return { device: 'wasm', reason };
  }
  if (requested === 'auto' && adapterInfo.software) {
    return { device: 'wasm', reason: `the WebGPU adapter ${adapterName(adapterInfo)} is a software renderer`, adapterInfo };
  }
  const gpuDevice = await openDevice(adapter);
  return { device: 'webgpu', gpu: gpuDevice, adapterInfo };
}

// A device with the adapter's own limits for the sizes a model needs (the defaults, 128 MiB bindings, are smaller
// than GPT-2's embedding table).
async function openDevice(adapter) {
  const limits = adapter.limits;
  const requiredLimits = {};
  for (const name of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize', 'maxStorageBuffersPerShaderStage']) {
    if (limits[name] !== undefined) requiredLimits[name] = limits[name];
  }
  try {
    return await adapter.requestDevice({ requiredLimits });
  } catch (error) {
    throw new Error(`device 'webgpu': the adapter refused a device: ${error.message}`);
  }
}
