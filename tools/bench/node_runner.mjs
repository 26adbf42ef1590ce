// The Node runtime of tools/bench/bench.mjs, one process per model so each model gets a fresh wasm instance (its heap
// figures are then its own). Loads the model folder or GGUF file through web/ like the CLI does, runs measure.mjs,
// writes the result as JSON on stdout and progress on stderr.
//
//   node [V8 flags] tools/bench/node_runner.mjs MODEL_DIR|FILE.gguf fp32|int8|GGUF_TYPE PLAN_JSON [THREADS [SIMD]]
//   (THREADS > 1: the threaded build; SIMD: relaxed or simd128, the wasm build, else the one this Node runs
//   (simd_support.js; Node 20 validates relaxed SIMD only with options.mjs's NODE_RELAXED_SIMD_FLAGS); a GGUF file's
//   weights are its own types, GGUF_TYPE only names them)
import { loadEngine } from '../../web/lib/engine/engine.js';
import { simdSupport } from '../../web/lib/engine/simd_support.js';
import { loadModelIntoEngine } from '../../web/lib/loading/loader.js';
import { modelSource } from '../../web/lib/loading/model_source.js';
import { measureModel } from './measure.mjs';
import { createWasmDriver } from './wasm_driver.mjs';

const [source, weights, planJson, threads = '1', simd = simdSupport()] = process.argv.slice(2);
const start = performance.now();
const engine = await loadEngine({ threads: Number(threads), simd });
const { model } = await loadModelIntoEngine(engine, modelSource(source), { withTokenizer: false, ...(source.endsWith('.gguf') ? {} : { weights }) });
const loadMs = performance.now() - start;
console.error(`model loaded in ${(loadMs / 1000).toFixed(1)} s`);
const plan = JSON.parse(planJson);
const driver = createWasmDriver(engine, model, () => loadEngine({ testing: true, simd }), plan.kvCache);
const result = await measureModel(driver, plan, (text) => console.error(text));
driver.dispose();
model.dispose();
process.stdout.write(`${JSON.stringify({ ...result, loadMs, simd: engine.simd })}\n`);
