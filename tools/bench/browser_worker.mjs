// The Chromium worker of tools/bench/browser.html: loads one model (a folder's URL, or a GGUF file's) into a fresh
// wasm instance and runs measure.mjs on it. The model loads from its URL through the site's own loader, which
// streams the download into the engine piece by piece (so a 3 GB GPT-2 1.5B file loads as in the page, where one
// Blob or ArrayBuffer of it fails) and copies it into the Cache API as it goes; that copy is deleted once the model
// is loaded, so that every job downloads its model the same way. The heap figures are the engine's alone.
// device 'webgpu' (the webgpu runtime) runs the same model's passes on the GPU (gpu_driver.mjs), in this worker like
// loadModel's default in a page. A { probe: true } message answers which adapter WebGPU gives this worker:
// { adapterInfo } (web/lib/gpu/device.js's description) or { reason }.
import { loadEngine } from '/public/js/lib/engine/engine.js';
import { simdSupport } from '/public/js/lib/engine/simd_support.js';
import { loadModelIntoEngine } from '/public/js/lib/loading/loader.js';
import { modelSource } from '/public/js/lib/loading/model_source.js';
import { deleteCachedModel } from '/public/js/lib/loading/model_cache.js';
import { measureModel } from './measure.mjs';
import { createWasmDriver } from './wasm_driver.mjs';
import { openGpuDriver } from './gpu_driver.mjs';

// format: fp32 or int8 for a folder; a GGUF file's weights are its own types.
async function loadModelFrom(engine, modelUrl, format) {
  const loaded = await loadModelIntoEngine(engine, modelSource(modelUrl), { withTokenizer: false, ...(modelUrl.endsWith('.gguf') ? {} : { weights: format }) });
  await deleteCachedModel(modelUrl);
  return loaded;
}

async function gpuModules() {
  const [{ chooseDevice }, { openGpuModel }, { unsupportedWeights }] = await Promise.all(['device', 'gpu_model', 'gpu_weights'].map((name) =>
    import(`/public/js/lib/gpu/${name}.js`)));
  return { chooseDevice, openGpuModel, unsupportedWeights };
}

async function probeAdapter() {
  try {
    const adapter = navigator.gpu ? await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' }) : null;
    if (adapter) return { adapterInfo: (await import('/public/js/lib/gpu/device.js')).describeAdapter(adapter) };
    return { reason: navigator.gpu ? 'WebGPU gave no adapter' : 'no navigator.gpu in the worker (Chromium without WebGPU: see --webgpu-flags)' };
  } catch (error) {
    return { reason: `requestAdapter failed: ${error.message}` };
  }
}

onmessage = async ({ data: { probe, modelUrl, weights: format, plan, threads = 1, device = 'wasm', simd = simdSupport() } }) => {
  if (probe) {
    postMessage(await probeAdapter());
    return;
  }
  try {
    const start = performance.now();
    const engine = await loadEngine({ threads, simd });
    const { model } = await loadModelFrom(engine, modelUrl, format);
    let driver;
    let gpuModel = null;
    if (device === 'webgpu') {
      const opened = await openGpuDriver(engine, model, await gpuModules(), navigator.gpu);
      if (opened.unsupported) {
        model.dispose();
        postMessage({ type: 'result', result: { unsupported: opened.unsupported } });
        return;
      }
      ({ driver, gpuModel } = opened);
    } else {
      driver = createWasmDriver(engine, model, () => loadEngine({ testing: true, simd }), plan.kvCache);
    }
    const loadMs = performance.now() - start;
    postMessage({ type: 'log', text: `model loaded in ${(loadMs / 1000).toFixed(1)} s` });
    const result = await measureModel(driver, plan, (text) => postMessage({ type: 'log', text }));
    driver.dispose();
    (gpuModel ?? model).dispose();
    postMessage({ type: 'result', result: { ...result, loadMs, simd: engine.simd } });
  } catch (error) {
    postMessage({ type: 'error', message: error?.stack ?? String(error) });
  }
};
