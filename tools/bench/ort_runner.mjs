// The onnxruntime-web runtime of tools/bench/bench.mjs (fp32, cached decoding only): runs measure.mjs on the ONNX
// export of a model (gpt2tools.convert.export_onnx) with onnxruntime-web's wasm backend on one thread, in its own Node
// process so that its memory figures are its own. Writes the result as JSON on stdout and progress on stderr.
//
//   node --expose-gc tools/bench/ort_runner.mjs MODEL_DIR DECODER.onnx PLAN_JSON
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { measureModel } from './measure.mjs';
import { argmax, createOrtDecoder } from './ort_decoder.mjs';
import { streamReadMs } from './wasm_driver.mjs';

const [modelDir, onnxPath, planJson] = process.argv.slice(2);
const hf = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8'));
const config = { n_vocab: hf.vocab_size, n_ctx: hf.n_positions ?? hf.n_ctx, n_embd: hf.n_embd, n_head: hf.n_head, n_layer: hf.n_layer };
const start = performance.now();
const decoder = await createOrtDecoder(onnxPath, hf);
console.error(`onnxruntime-web session created in ${((performance.now() - start) / 1000).toFixed(1)} s`);

async function timed(run) {
  const begin = performance.now();
  const token = argmax(await run());
  return { token, ms: performance.now() - begin };
}

function cachedOnly(mode) {
  if (mode !== 'cached') throw new Error('the onnxruntime-web runtime measures cached decoding only');
}

const driver = {
  async info() {
    // The file's size stands for the weights (it holds wte twice, see gpt2tools.convert.export_onnx); the cache grows
    // to n_ctx positions of keys and values per layer, like ours.
    return { config, weightBytes: statSync(onnxPath).size, kvCacheBytes: 2 * config.n_layer * config.n_ctx * config.n_embd * 4 };
  },
  prefill(mode, ids) {
    cachedOnly(mode);
    return timed(() => decoder.prefill(ids));
  },
  step(mode, id) {
    cachedOnly(mode);
    return timed(() => decoder.step(id));
  },
  // onnxruntime-web has no streaming-read probe; its runtime is Node's wasm, so our engine's probe measures the
  // same ceiling.
  async streamWeights(repeats) {
    return streamReadMs(await loadEngine({ testing: true }), statSync(onnxPath).size, repeats);
  },
  // rssBytes: resident now (the model file read to create the session is collected first, when --expose-gc
  // allows); peakRssBytes: the process's high-water mark (VmHWM).
  async memory() {
    globalThis.gc?.();
    const status = readFileSync('/proc/self/status', 'utf8');
    const kib = (field) => Number(new RegExp(`^${field}:\\s*(\\d+) kB`, 'm').exec(status)[1]) * 1024;
    return { rssBytes: kib('VmRSS'), peakRssBytes: kib('VmHWM') };
  },
  async releaseUncached() {},  // there is no uncached session
};

const result = await measureModel(driver, JSON.parse(planJson), (text) => console.error(text));
await decoder.release();
process.stdout.write(`${JSON.stringify(result)}\n`);
