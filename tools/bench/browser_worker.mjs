// The Chromium worker of tools/bench/browser.html: loads one model into a fresh wasm instance and runs
// measure.mjs on it. The model files are fetched whole and given to the loader as local objects, which the
// loader does not copy into the Cache API (a 500 MB cache write would only slow the run down); the fetched
// bytes live outside the wasm heap, so the heap figures are the engine's alone.
import { loadEngine } from '/public/js/engine.js';
import { loadEngineModel } from '/public/js/loader.js';
import { measureModel } from './measure.mjs';
import { createWasmDriver } from './wasm_driver.mjs';

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} from ${url}`);
  return new Uint8Array(await response.arrayBuffer());
}

onmessage = async ({ data: { modelUrl, weights: format, plan, threads = 1 } }) => {
  try {
    const start = performance.now();
    let weights = await fetchBytes(new URL('model.safetensors', modelUrl));
    const config = await fetchBytes(new URL('config.json', modelUrl));
    const engine = await loadEngine({ threads });
    const { model } = await loadEngineModel(engine, { config, weights }, { withTokenizer: false, weights: format });
    weights = null;  // collectable: the engine holds its own converted copy
    postMessage({ type: 'log', text: `model loaded in ${((performance.now() - start) / 1000).toFixed(1)} s` });
    const driver = createWasmDriver(engine, model, () => loadEngine({ testing: true }));
    const result = await measureModel(driver, plan, (text) => postMessage({ type: 'log', text }));
    driver.dispose();
    model.dispose();
    postMessage({ type: 'result', result });
  } catch (error) {
    postMessage({ type: 'error', message: error?.stack ?? String(error) });
  }
};
