// The two wasm builds, SIMD128 and relaxed SIMD (web/lib/engine/simd_support.js chooses): which one Node runs, and
// the relaxed build's numeric contract, checked in whichever build this Jest run uses (npm test runs Jest once
// per build, tools/dev/test_in_two_lanes.sh). Within a build, cached and uncached logits are bit-identical; against
// the float64 reference and the native engine (the SIMD128 kernels' results) the bounds below hold for both.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { simdSupport } from '../../web/lib/engine/simd_support.js';
import { loadModel } from '../../web/lib/gpt2.js';

jest.setTimeout(120_000);

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TINY = `${ROOT}tests/fixtures/tiny-random/`;
const GGUF = `${ROOT}tests/fixtures/tiny-gguf/`;
const BUNDLED = `${ROOT}public/models/tiny-shakespeare/`;
const NATIVE_TOOL = `${ROOT}build/native/gpt2`;
const HELD_OUT = `${ROOT}tests/fixtures/tinyshakespeare-held-out.u16`;
const HELD_OUT_TOKENS = 2048;
const NODE_MAJOR = Number(process.versions.node.split('.')[0]);

const floats = (path) => new Float32Array(readFileSync(path).buffer.slice(0));
const bits = (values) => Buffer.from(values.buffer, values.byteOffset, values.byteLength);
const maxDifference = (actual, expected) => Math.max(...Array.from(actual, (value, i) => Math.abs(value - expected[i])));

// The build Node picks with this GPT2_WASM_SIMD and these V8 flags, in a fresh process.
async function buildChosenWith(variable, flags) {
  const script = `import { simdSupport } from ${JSON.stringify(`${ROOT}web/lib/engine/simd_support.js`)};\nconsole.log(simdSupport());`;
  const env = { ...process.env, GPT2_WASM_SIMD: variable };
  if (variable === undefined) delete env.GPT2_WASM_SIMD;
  const { stdout } = await promisify(execFile)(process.execPath, [...flags, '--input-type=module', '-e', script], { env });
  return stdout.trim();
}

describe('the build Node runs', () => {
  test.each([
    [undefined, [], 'simd128'],
    ['simd128', [], 'simd128'],
    ['relaxed', [], NODE_MAJOR >= 22 ? 'relaxed' : 'simd128'],
    // Node 20 validates relaxed SIMD only with the flag, and its baseline compiler (Liftoff) computes the relaxed dot
    // product wrongly: the probe's run catches that; Node 22+ runs relaxed SIMD and refuses the flag
    ...(NODE_MAJOR >= 22 ? [] : [
      ['relaxed', ['--experimental-wasm-relaxed-simd'], 'simd128'],
      ['relaxed', ['--experimental-wasm-relaxed-simd', '--no-liftoff'], 'relaxed'],
      [undefined, ['--experimental-wasm-relaxed-simd', '--no-liftoff'], 'simd128'],
    ]),
  ])('GPT2_WASM_SIMD=%s, V8 flags %j: %s', async (variable, flags, expected) => {
    expect(await buildChosenWith(variable, flags)).toBe(expected);
  });

  test('loadModel runs the build the probe chose, and model.simd says which', async () => {
    const model = await loadModel(BUNDLED);
    try {
      console.log(`this Jest run: the ${model.simd} build (GPT2_WASM_SIMD=${process.env.GPT2_WASM_SIMD ?? ''}, V8 flags: ` +
        `${process.execArgv.join(' ') || 'none'})`);
      expect(model.simd).toBe(simdSupport());
      expect((await loadEngine()).simd).toBe(simdSupport());
    } finally {
      model.dispose();
    }
  });
});

describe(`the ${simdSupport()} build's numeric contract`, () => {
  let engine;
  beforeAll(async () => {
    engine = await loadEngine({ testing: true });  // session.logits()
    expect(engine.simd).toBe(simdSupport());
  });

  function lastLogits(model, ids, options) {
    const session = model.createSession(options);
    try {
      session.setSampling({ temperature: 0 });
      session.prefill(ids);
      return Float32Array.from(session.logits());
    } finally {
      session.dispose();
    }
  }

  // Every step's logits of a greedy run of `steps` tokens after `prompt`, cached or recomputed.
  function stepLogits(model, prompt, steps, useKVCache) {
    const session = model.createSession({ useKVCache, kvCache: 'fp32' });
    try {
      session.setSampling({ temperature: 0 });
      let token = session.prefill(prompt);
      const logits = [];
      for (let i = 0; i < steps; i++) {
        token = session.step(token);
        logits.push(Float32Array.from(session.logits()));
      }
      return logits;
    } finally {
      session.dispose();
    }
  }

  const models = {
    'fp32 safetensors': () => engine.createModel(readFileSync(`${TINY}config.json`, 'utf8'), readFileSync(`${TINY}model.safetensors`)),
    'F16 safetensors': () => engine.createModel(readFileSync(`${TINY}config.json`, 'utf8'), readFileSync(`${TINY}model-f16.safetensors`)),
    'BF16 safetensors': () => engine.createModel(readFileSync(`${TINY}config.json`, 'utf8'), readFileSync(`${TINY}model-bf16.safetensors`)),
    'int8 (quantized on load)': () => engine.createModel(readFileSync(`${TINY}config.json`, 'utf8'), readFileSync(`${TINY}model.safetensors`), { weights: 'int8' }),
    'GGUF with every tensor type': () => engine.createGgufModel(readFileSync(`${GGUF}model.gguf`)),
  };

  test.each(Object.keys(models))('%s: cached steps give the recomputed logits, bit for bit', (name) => {
    const model = models[name]();
    try {
      const prompt = [5, 61, 42, 75, 32, 189];
      const cached = stepLogits(model, prompt, 12, true);
      const recomputed = stepLogits(model, prompt, 12, false);
      cached.forEach((logits, step) => expect({ step, same: bits(logits).equals(bits(recomputed[step])) }).toEqual({ step, same: true }));
    } finally {
      model.dispose();
    }
  });

  // Last prompt position, fp32 KV cache. The safetensors fixtures against the float64 reference's logits
  // (tests/fixtures/tiny-random/cases.json; measured: 3.2e-6 in the SIMD128 build, 4.1e-6 in the relaxed one); int8
  // and the GGUF, whose activations the engine quantizes (so the reference of their weights is far: 0.13 for int8,
  // 0.26 for the GGUF), against the native engine on the same file. Measured: GGUF 8.1e-6 and 5.7e-6; int8 2.2e-4
  // in SIMD128, and 2.2e-3 in the relaxed build, whose batched int8 products quantize activations to 8191 levels
  // instead of 22017 (kernels.h), hence its bound of 5e-3.
  const nativeLogits = (modelPath, flags, ids) => {
    const tmp = mkdtempSync(`${tmpdir()}/gpt2-simd-test-`);
    try {
      execFileSync(NATIVE_TOOL, ['--model', modelPath, ...flags, '--kv-cache', 'fp32', '--ids', ids.join(','), '-n', '1',
        '--dump-logits', `${tmp}/logits.f32`], { stdio: 'ignore' });
      return floats(`${tmp}/logits.f32`).subarray(-384);
    } finally {
      rmSync(tmp, { recursive: true });
    }
  };
  const longCase = () => JSON.parse(readFileSync(`${TINY}cases.json`, 'utf8')).find((c) => c.name === 'long');
  const ggufPrompt = () => JSON.parse(readFileSync(`${GGUF}cases.json`, 'utf8')).prompt;
  test.each([
    ['fp32 safetensors', 'the float64 reference', 1e-4, () => longCase().ids, () => floats(`${TINY}${longCase().logits}`).subarray(-384)],
    ['F16 safetensors', 'the float64 reference', 1e-4, () => longCase().ids, () => floats(`${TINY}${longCase().logits}`).subarray(-384)],
    ['BF16 safetensors', 'the float64 reference', 1e-4, () => longCase().ids, () => floats(`${TINY}${longCase().logits}`).subarray(-384)],
    ['int8 (quantized on load)', 'the native engine', simdSupport() === 'relaxed' ? 5e-3 : 1e-3, () => longCase().ids,
      () => nativeLogits(TINY, ['--int8'], longCase().ids)],
    ['GGUF with every tensor type', 'the native engine', 1e-3, ggufPrompt, () => nativeLogits(`${GGUF}model.gguf`, [], ggufPrompt())],
  ])('%s: logits within %s\'s by %f', (name, against, bound, ids, expected) => {
    const model = models[name]();
    try {
      const difference = maxDifference(lastLogits(model, ids(), { kvCache: 'fp32' }), expected());
      console.log(`${engine.simd} build, ${name}: max |logit - ${against}'s| ${difference.toExponential(2)}`);
      expect(difference).toBeLessThan(bound);
    } finally {
      model.dispose();
    }
  });

  // A random GPT-2 whose widths are not multiples of 16 (n_embd 36: 4 values past the last chunk of 16; 385 tokens:
  // an LM-head row past the last panel of 4), as one F32 safetensors file, so that every kernel's tail runs.
  function oddWidthModel() {
    const [C, V, T] = [36, 385, 24];
    const shapes = { 'wte.weight': [V, C], 'wpe.weight': [T, C], 'ln_f.weight': [C], 'ln_f.bias': [C],
      'h.0.ln_1.weight': [C], 'h.0.ln_1.bias': [C], 'h.0.attn.c_attn.weight': [C, 3 * C], 'h.0.attn.c_attn.bias': [3 * C],
      'h.0.attn.c_proj.weight': [C, C], 'h.0.attn.c_proj.bias': [C], 'h.0.ln_2.weight': [C], 'h.0.ln_2.bias': [C],
      'h.0.mlp.c_fc.weight': [C, 4 * C], 'h.0.mlp.c_fc.bias': [4 * C], 'h.0.mlp.c_proj.weight': [4 * C, C], 'h.0.mlp.c_proj.bias': [C] };
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 - 0.5);
    const header = {};
    const arrays = [];
    let offset = 0;
    for (const [name, shape] of Object.entries(shapes)) {
      const values = Float32Array.from({ length: shape.reduce((a, b) => a * b) }, () => (name.includes('ln_') && name.endsWith('weight') ? 1 : 0.3 * random()));
      header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + values.byteLength] };
      offset += values.byteLength;
      arrays.push(values);
    }
    let json = JSON.stringify(header);
    json += ' '.repeat((8 - (json.length % 8)) % 8);
    const bytes = new Uint8Array(8 + json.length + offset);
    new DataView(bytes.buffer).setBigUint64(0, BigInt(json.length), true);
    bytes.set(new TextEncoder().encode(json), 8);
    let at = 8 + json.length;
    for (const values of arrays) {
      bytes.set(new Uint8Array(values.buffer), at);
      at += values.byteLength;
    }
    const config = JSON.stringify({ vocab_size: V, n_positions: T, n_ctx: T, n_embd: C, n_head: 4, n_layer: 1, layer_norm_epsilon: 1e-5 });
    return { config, bytes };
  }

  test('widths that are not multiples of 16: int8 cached steps give the recomputed logits bit for bit, near fp32\'s', () => {
    const { config, bytes } = oddWidthModel();
    const [int8, fp32] = ['int8', 'fp32'].map((weights) => engine.createModel(config, bytes, { weights }));
    try {
      const prompt = [5, 61, 300, 384, 7];
      const cached = stepLogits(int8, prompt, 8, true);
      const recomputed = stepLogits(int8, prompt, 8, false);
      cached.forEach((logits, step) => expect({ step, same: bits(logits).equals(bits(recomputed[step])) }).toEqual({ step, same: true }));
      const difference = maxDifference(lastLogits(int8, prompt, { kvCache: 'fp32' }), lastLogits(fp32, prompt, { kvCache: 'fp32' }));
      console.log(`${engine.simd} build, n_embd 36: max |int8 logit - fp32 logit| ${difference.toExponential(2)}`);
      expect(difference).toBeLessThan(0.05);
    } finally {
      int8.dispose();
      fp32.dispose();
    }
  });

  // score()'s one batched pass over all the positions against one-token steps, for the GGUF whose matrices are each
  // of another type (its output matrix Q6_K, which the relaxed build multiplies in a batch from bytes and in a step
  // from int16 lanes: the same integers): each position's log-probability against the float64 log-softmax of that
  // step's logits. Measured: 0 in both builds.
  test('GGUF with every tensor type: score()\'s log-probabilities are those of the stepped logits', () => {
    const model = models['GGUF with every tensor type']();
    const session = model.createSession({ kvCache: 'fp32' });
    try {
      const ids = ggufPrompt();
      session.setSampling({ temperature: 0 });
      session.prefill(ids.slice(0, 1));
      const stepped = [];
      for (let i = 1; i < ids.length; i++) {
        const logits = Float64Array.from(session.logits());
        const max = Math.max(...logits);
        const logSum = max + Math.log(logits.reduce((sum, value) => sum + Math.exp(value - max), 0));
        stepped.push(logits[ids[i]] - logSum);
        if (i < ids.length - 1) session.step(ids[i]);
      }
      session.reset();
      const { logprobs } = session.score(ids);
      const difference = maxDifference(Float64Array.from(logprobs), stepped);
      console.log(`${engine.simd} build, GGUF with every tensor type: max |score() log-probability - the steps'| ${difference.toExponential(2)}`);
      expect(difference).toBeLessThan(1e-5);
    } finally {
      session.dispose();
      model.dispose();
    }
  });

  // The bundled model's held-out loss over the first 2048 held-out ids (the windows of `gpt2 --eval`), against the
  // native engine's on the same ids. Measured: fp32 0 (4.264148 in both builds), int8 4e-6 (SIMD128) and 3e-6
  // (relaxed), Q4_0 7.2e-5 (both) nats/token.
  const heldOutIds = () => {
    const bytes = readFileSync(HELD_OUT);
    return Array.from({ length: HELD_OUT_TOKENS }, (_, i) => bytes.readUInt16LE(2 * i));
  };
  const nativeEval = (modelPath, flags) => {
    const output = execFileSync(NATIVE_TOOL, ['--model', modelPath, ...flags, '--eval', HELD_OUT, '--eval-tokens', String(HELD_OUT_TOKENS)],
      { encoding: 'utf8' });
    return Number(/eval: ([0-9.]+) nats\/token/.exec(output)[1]);
  };
  test.each([
    ['fp32 weights', () => engine.createModel(readFileSync(`${BUNDLED}config.json`, 'utf8'), readFileSync(`${BUNDLED}model.safetensors`)), [BUNDLED, []]],
    ['int8 weights', () => engine.createModel(readFileSync(`${BUNDLED}config.json`, 'utf8'), readFileSync(`${BUNDLED}model.safetensors`), { weights: 'int8' }), [BUNDLED, ['--int8']]],
    ['the Q4_0 GGUF', () => engine.createGgufModel(readFileSync(`${BUNDLED}tiny-shakespeare.Q4_0.gguf`)), [`${BUNDLED}tiny-shakespeare.Q4_0.gguf`, []]],
  ])('bundled model, %s: held-out loss within 1e-4 nats/token of the native engine\'s', (name, create, [path, flags]) => {
    const model = create();
    const session = model.createSession({ kvCache: 'int8' });
    try {
      const { logprobs } = session.score(heldOutIds());
      const loss = -logprobs.reduce((sum, x) => sum + x, 0) / logprobs.length;
      const native = nativeEval(path, flags);
      console.log(`${engine.simd} build, bundled model, ${name}: held-out loss ${loss.toFixed(6)} against native ${native.toFixed(6)} nats/token`);
      expect(Math.abs(loss - native)).toBeLessThan(1e-4);
    } finally {
      session.dispose();
      model.dispose();
    }
  });
});
