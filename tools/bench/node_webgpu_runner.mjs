// The node-webgpu runtime of tools/bench/bench.mjs: the wasm engine in Node with its passes on the GPU through Dawn
// (the npm package webgpu, which is not a dependency: its folder is named by --node-webgpu DIR or NODE_WEBGPU, else
// tools/bench/node_modules/webgpu), one process per model like node_runner.mjs. Dawn needs a Vulkan driver on Linux;
// without one the package imports but gives no adapter.
//
//   node tools/bench/node_webgpu_runner.mjs --probe WEBGPU_DIR
//     -> { adapterInfo } or { reason } on stdout
//   node tools/bench/node_webgpu_runner.mjs WEBGPU_DIR MODEL_DIR|FILE.gguf fp32|int8|GGUF_TYPE PLAN_JSON
//     -> measure.mjs's result as JSON on stdout ({ unsupported } for weights the GPU does not run), progress on stderr
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describeAdapter } from '../../web/lib/gpu/device.js';
import { openGpuDriver } from './gpu_driver.mjs';

// -> navigator.gpu's counterpart from the webgpu package in dir, with its globals (GPUBufferUsage, ...) installed.
async function dawn(dir) {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const { create, globals } = await import(pathToFileURL(join(dir, manifest.main ?? 'index.js')).href);
  Object.assign(globalThis, globals);
  return create([]);
}

// Ends the process once its answer is written: Dawn's instance would keep the event loop alive.
function answer(value) {
  process.stdout.write(`${JSON.stringify(value)}\n`, () => process.exit(0));
}

// The probe answers even when the package does not load: that is its answer.
async function probe(dir) {
  let gpu;
  try {
    gpu = await dawn(dir);
  } catch (error) {
    return { reason: `the webgpu package in ${dir} does not load: ${error.message}` };
  }
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' }).catch(() => null);
  return adapter ? { adapterInfo: describeAdapter(adapter) } : { reason: 'Dawn gave no adapter' };
}

async function measure(dir, source, weights, planJson) {
  const gpu = await dawn(dir);
  const { loadEngine } = await import('../../web/lib/engine/engine.js');
  const { loadModelIntoEngine } = await import('../../web/lib/loading/loader.js');
  const { modelSource } = await import('../../web/lib/loading/model_source.js');
  const { chooseDevice } = await import('../../web/lib/gpu/device.js');
  const { openGpuModel } = await import('../../web/lib/gpu/gpu_model.js');
  const { unsupportedWeights } = await import('../../web/lib/gpu/gpu_weights.js');
  const { measureModel } = await import('./measure.mjs');
  const start = performance.now();
  const engine = await loadEngine({ threads: 1 });
  const { model } = await loadModelIntoEngine(engine, modelSource(source), { withTokenizer: false, ...(source.endsWith('.gguf') ? {} : { weights }) });
  const opened = await openGpuDriver(engine, model, { chooseDevice, openGpuModel, unsupportedWeights }, gpu);
  if (opened.unsupported) {
    model.dispose();
    return { unsupported: opened.unsupported };
  }
  const loadMs = performance.now() - start;
  console.error(`model loaded in ${(loadMs / 1000).toFixed(1)} s`);
  const result = await measureModel(opened.driver, JSON.parse(planJson), (text) => console.error(text));
  opened.driver.dispose();
  opened.gpuModel.dispose();
  return { ...result, loadMs };
}

const [first, ...rest] = process.argv.slice(2);
(first === '--probe' ? probe(rest[0]) : measure(first, ...rest)).then(answer, (error) => {
  // one message, not the wasm glue's rethrow of an unhandled rejection
  console.error(error?.stack ?? String(error));
  process.exit(1);
});
