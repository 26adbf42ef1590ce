// GPT-2 decoding with onnxruntime-web (wasm backend, one thread, SIMD) over the ONNX file written by
// gpt2tools.convert.export_onnx (its docstring describes the inputs and outputs). Used by the benchmark's ort runtime
// (tools/bench/ort_runner.mjs) and by the export's verification (tools/bench/ort_logits.mjs).
import { readFileSync } from 'node:fs';
import * as ort from 'onnxruntime-web';

// One thread, like our engine, and the SIMD128 build.
ort.env.wasm.numThreads = 1;
ort.env.wasm.simd = true;

// config: { n_layer, n_head, n_embd } of the exported model.
export async function createOrtDecoder(onnxPath, config) {
  const session = await ort.InferenceSession.create(readFileSync(onnxPath), {
    executionProviders: ['wasm'],
    graphOptimizationLevel: 'all',
  });
  const expected = ['input_ids', 'position_ids'];
  for (let i = 0; i < config.n_layer; i++) expected.push(`past_key_${i}`, `past_value_${i}`);
  if (session.inputNames.join() !== expected.join()) {
    throw new Error(`${onnxPath}: inputs [${session.inputNames}] do not match a ${config.n_layer}-layer export of gpt2tools.convert.export_onnx`);
  }
  const headDim = config.n_embd / config.n_head;
  const emptyCache = () => Array.from({ length: 2 * config.n_layer }, () => new ort.Tensor('float32', new Float32Array(0), [1, config.n_head, 0, headDim]));
  let cache = emptyCache();  // past_key_0, past_value_0, past_key_1, ...: the previous call's present_* outputs
  let position = 0;

  // Feeds ids after the cached positions; returns the last token's logits (a Float32Array of n_vocab).
  async function run(ids) {
    const feeds = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, ids.length]),
      position_ids: new ort.Tensor('int64', BigInt64Array.from(ids, (_, i) => BigInt(position + i)), [1, ids.length]),
    };
    for (let i = 0; i < config.n_layer; i++) {
      feeds[`past_key_${i}`] = cache[2 * i];
      feeds[`past_value_${i}`] = cache[2 * i + 1];
    }
    const outputs = await session.run(feeds);
    for (const tensor of cache) tensor.dispose();
    cache = [];
    for (let i = 0; i < config.n_layer; i++) cache.push(outputs[`present_key_${i}`], outputs[`present_value_${i}`]);
    position += ids.length;
    const logits = outputs.logits.data;
    outputs.logits.dispose();
    return logits;
  }

  return {
    // A new sequence: drops the cache, then runs the whole prompt in one call.
    prefill(ids) {
      for (const tensor of cache) tensor.dispose();
      cache = emptyCache();
      position = 0;
      return run(ids);
    },
    step: (id) => run([id]),
    async release() {
      for (const tensor of cache) tensor.dispose();
      cache = [];
      await session.release();
    },
  };
}

export function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}
