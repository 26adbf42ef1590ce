// The Chromium worker of tools/bench/browser.html: loads one model (a folder's URL, or a GGUF file's) into a fresh
// wasm instance and runs measure.mjs on it. The model files are fetched whole as Blobs and given to the loader as
// local objects, which the loader reads in pieces and does not copy into the Cache API (a 500 MB cache write would
// only slow the run down); the Blobs live outside the wasm heap (Chromium keeps large ones on disk, so a 3 GB GPT-2
// 1.5B file loads too, which one ArrayBuffer cannot hold), so the heap figures are the engine's alone.
import { loadEngine } from '/public/js/lib/engine/engine.js';
import { loadModelIntoEngine } from '/public/js/lib/loading/loader.js';
import { measureModel } from './measure.mjs';
import { createWasmDriver } from './wasm_driver.mjs';

async function fetchBlob(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} from ${url}`);
  return response.blob();
}

// format: fp32 or int8 for a folder; a GGUF file's weights are its own types.
async function loadModelFrom(engine, modelUrl, format) {
  if (modelUrl.endsWith('.gguf')) {
    const file = new File([await fetchBlob(modelUrl)], new URL(modelUrl).pathname.split('/').at(-1));
    return loadModelIntoEngine(engine, [file], { withTokenizer: false });
  }
  const weights = await fetchBlob(new URL('model.safetensors', modelUrl));
  const config = await fetchBlob(new URL('config.json', modelUrl));
  // weights is collectable once this returns: the engine holds its own converted copy
  return loadModelIntoEngine(engine, { config, weights }, { withTokenizer: false, weights: format });
}

onmessage = async ({ data: { modelUrl, weights: format, plan, threads = 1 } }) => {
  try {
    const start = performance.now();
    const engine = await loadEngine({ threads });
    const { model } = await loadModelFrom(engine, modelUrl, format);
    const loadMs = performance.now() - start;
    postMessage({ type: 'log', text: `model loaded in ${(loadMs / 1000).toFixed(1)} s` });
    const driver = createWasmDriver(engine, model, () => loadEngine({ testing: true }), plan.kvCache);
    const result = await measureModel(driver, plan, (text) => postMessage({ type: 'log', text }));
    driver.dispose();
    model.dispose();
    postMessage({ type: 'result', result: { ...result, loadMs } });
  } catch (error) {
    postMessage({ type: 'error', message: error?.stack ?? String(error) });
  }
};
