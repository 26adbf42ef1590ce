// The engine on WebGPU (web/lib/gpu/), in Chromium on SwiftShader (the webgpu project of playwright.config.js):
// checked against the CPU engine on the bundled model and the tiny-random fixture, through the public API.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, test } from './under_csp.js';

const BUNDLED = '/models/tiny-shakespeare/';
// the tiny-random model with its own 384-token vocabulary, F32 (tests/fixtures/tiny-random-gguf), served by a route
const TINY_RANDOM_GGUF = '/fixtures/tiny-random-f32.gguf';
const TINY_RANDOM_GGUF_PATH = fileURLToPath(new URL('../fixtures/tiny-random-gguf/model-f32.gguf', import.meta.url));
// Logits of the same weights on the GPU and the CPU: f32 sums in another order, so not the same bits; the bound is a
// fraction of the logits' root mean square.
const LOGITS_BOUND = 1e-3;
// tests/fixtures/tiny-gguf: a random GPT-2 (n_ctx 64) with every tensor type the engine runs, each matrix one
// (cases.json's matrix_types, its prompt); served by a route
const EVERY_TYPE_GGUF = '/fixtures/tiny-gguf.gguf';
const EVERY_TYPE_DIR = new URL('../fixtures/tiny-gguf/', import.meta.url);
const EVERY_TYPE_GGUF_PATH = fileURLToPath(new URL('model.gguf', EVERY_TYPE_DIR));
const EVERY_TYPE_PROMPT = JSON.parse(readFileSync(new URL('cases.json', EVERY_TYPE_DIR), 'utf8')).prompt;
// its logits.f32: float64 logits of the dequantized weights (gpt2tools.reference_gpt2), float32 (prompt, n_vocab);
// the last position's
const EVERY_TYPE_LOGITS = (() => {
  const bytes = readFileSync(new URL('logits.f32', EVERY_TYPE_DIR));
  const all = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  return all.subarray(all.length - all.length / EVERY_TYPE_PROMPT.length);
})();
// the 384-token tokenizer of tests/fixtures/tiny-random-gguf, for the models a test builds
const TINY_TOKENIZER = Object.fromEntries(['vocab.json', 'merges.txt'].map((name) =>
  [name, readFileSync(new URL(`../fixtures/tiny-random-gguf/${name}`, import.meta.url), 'utf8')]));

// In the page: the greedy tokens of one prompt on the GPU and on the CPU -> { device, adapter, tokens: { gpu, wasm } }.
async function compareOnPage(page, modelUrl, { weights: format = 'fp32', steps: count = 100, prompt: text = 'ROMEO:' } = {}) {
  return page.evaluate(async ({ url, weights, steps, prompt }) => {
    const { loadModel } = await import('/js/lib/gpt2.js');
    const gpu = await loadModel(url, { device: 'webgpu', weights, useWorker: false });
    const wasm = await loadModel(url, { device: 'wasm', weights, useWorker: false });
    const run = async (model) => {
      const tokens = [];
      for await (const piece of model.generate(prompt, { temperature: 0, maxNewTokens: steps, stopAtEndOfText: false })) tokens.push(piece.token);
      return tokens;
    };
    const result = { device: gpu.device, adapter: gpu.adapterInfo?.architecture, tokens: { gpu: await run(gpu), wasm: await run(wasm) } };
    gpu.dispose();
    wasm.dispose();
    return result;
  }, { url: modelUrl, weights: format, steps: count, prompt: text });
}

test('auto keeps the model on the CPU on a software adapter, and says why', async ({ page }) => {
  await page.goto('/');
  const model = await page.evaluate(async (url) => {
    const { loadModel } = await import('/js/lib/gpt2.js');
    const m = await loadModel(url);
    const described = { device: m.device, reason: m.deviceReason, software: m.adapterInfo?.software };
    m.dispose();
    return described;
  }, BUNDLED);
  expect(model).toEqual({ device: 'wasm', reason: 'the WebGPU adapter google (swiftshader) is a software renderer', software: true });
});

for (const weights of ['fp32', 'int8']) {
  test(`on the GPU the bundled model (${weights}) gives the CPU engine's greedy tokens for 100 steps`, async ({ page }) => {
    await page.goto('/');
    const result = await compareOnPage(page, BUNDLED, { weights });
    expect(result.device).toBe('webgpu');
    expect(result.adapter).toBe('swiftshader');
    const firstDifference = result.tokens.gpu.findIndex((token, i) => token !== result.tokens.wasm[i]);
    test.info().annotations.push({ type: 'first difference', description: String(firstDifference) });
    expect(result.tokens.gpu).toEqual(result.tokens.wasm);
  });
}

test('a GPU model with Continue, a window slide and uncached steps keeps the CPU engine\'s tokens', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async (url) => {
    const { loadModel } = await import('/js/lib/gpt2.js');
    const tokens = async (model, prompt, options) => {
      const out = [];
      const run = model.generate(prompt, { temperature: 0, stopAtEndOfText: false, ...options });
      for await (const piece of run) out.push(piece.token);
      return { out, stats: run.stats };
    };
    const both = {};
    for (const device of ['webgpu', 'wasm']) {
      const model = await loadModel(url, { device, useWorker: false });
      const prompt = await model.encode('To be, or not to be: '.repeat(20));  // about 200 tokens of 256
      const first = await tokens(model, prompt, { maxNewTokens: 80 });  // past 256: the window slides
      const again = await tokens(model, [...prompt, ...first.out], { maxNewTokens: 5 });  // Continue
      const uncached = await tokens(model, prompt.slice(0, 20), { maxNewTokens: 20, useKVCache: false });
      both[device] = { first: first.out, again: again.out, reused: again.stats.reusedTokens, uncached: uncached.out };
      model.dispose();
    }
    return both;
  }, BUNDLED);
  expect(result.webgpu.first).toEqual(result.wasm.first);
  expect(result.webgpu.again).toEqual(result.wasm.again);
  expect(result.webgpu.reused).toBe(result.wasm.reused);
  expect(result.webgpu.reused).toBeGreaterThan(0);
  expect(result.webgpu.uncached).toEqual(result.wasm.uncached);
});

test('on the GPU, Stop ends a run at once and Continue reuses its cache, as on the CPU', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async (url) => {
    const { loadModel } = await import('/js/lib/gpt2.js');
    const greedy = { temperature: 0, stopAtEndOfText: false };
    const both = {};
    for (const device of ['webgpu', 'wasm']) {
      const model = await loadModel(url, { device, useWorker: false });
      const controller = new AbortController();
      const stopped = [];
      const run = model.generate('ROMEO:', { ...greedy, maxNewTokens: 200, signal: controller.signal });
      for await (const piece of run) {
        stopped.push(piece.token);
        if (stopped.length === 12) controller.abort();  // Stop
      }
      const again = model.generate([...await model.encode('ROMEO:'), ...stopped], { ...greedy, maxNewTokens: 8 });
      const continued = [];
      for await (const piece of again) continued.push(piece.token);
      both[device] = { device: model.device, stopped, stopReason: run.stats.stopReason, continued, reused: again.stats.reusedTokens };
      model.dispose();
    }
    return both;
  }, BUNDLED);
  const { webgpu: gpu, wasm } = result;
  expect(gpu.device).toBe('webgpu');
  expect(gpu.stopReason).toBe('abort');
  expect(gpu.stopped).toHaveLength(12);
  expect(gpu.stopped).toEqual(wasm.stopped);
  expect(gpu.continued).toEqual(wasm.continued);
  expect(gpu.reused).toBe(wasm.reused);
  expect(gpu.reused).toBeGreaterThan(10);
});

// score()'s log-probabilities on the GPU and on the CPU (both with the fp32 cache): the logits differ within
// LOGITS_BOUND of their rms, and a log-probability by about as much.
const LOGPROB_BOUND = 1e-3;

test('score() on the GPU gives the CPU engine\'s log-probabilities, ranks and alternatives over several windows; beams and several sequences are the CPU\'s, refused in one line', async ({ page }) => {
  await page.route(`**${TINY_RANDOM_GGUF}`, (route) => route.fulfill({ body: readFileSync(TINY_RANDOM_GGUF_PATH), contentType: 'application/octet-stream' }));
  await page.goto('/');
  const result = await page.evaluate(async (url) => {
    const { loadModel } = await import('/js/lib/gpt2.js');
    const both = {};
    for (const device of ['webgpu', 'wasm']) {
      const model = await loadModel(url, { device, useWorker: false });
      const scored = await model.score('To be, or not to be, that is the question. '.repeat(35), { topAlternatives: 3, kvCache: 'fp32' });
      both[device] = {
        device: model.device, contextSize: model.config.n_ctx, logprobs: scored.tokens.map((t) => t.logprob),
        ranks: scored.tokens.map((t) => t.rank), alternatives: scored.tokens.map((t) => t.alternatives.map((a) => a.token)),
      };
      if (device === 'webgpu') {
        both.refusals = [];
        for (const options of [{ numBeams: 2, temperature: 0 }, { numReturnSequences: 2 }]) {
          try {
            for await (const piece of model.generate('To be', { ...options, maxNewTokens: 2 })) void piece;
            both.refusals.push(null);
          } catch (error) {
            both.refusals.push(error.message);
          }
        }
      }
      model.dispose();
    }
    return both;
  }, TINY_RANDOM_GGUF);
  const { webgpu: gpu, wasm } = result;
  expect(gpu.device).toBe('webgpu');
  // three windows or more: the later ones begin with a pass of context
  expect(gpu.logprobs.length).toBeGreaterThan(2 * gpu.contextSize);
  expect(gpu.logprobs).toHaveLength(wasm.logprobs.length);
  const gap = Math.max(...gpu.logprobs.map((logprob, i) => Math.abs(logprob - wasm.logprobs[i])));
  console.log(`score() on the GPU: ${gpu.logprobs.length} tokens, largest log-probability gap to the CPU ${gap.toExponential(2)}`);
  expect(gap).toBeLessThan(LOGPROB_BOUND);
  expect(gap).toBeGreaterThan(0);  // f32 sums in another order: the GPU did run the passes
  expect(gpu.ranks).toEqual(wasm.ranks);
  expect(gpu.alternatives).toEqual(wasm.alternatives);
  expect(result.refusals).toEqual([
    'generate: numBeams > 1 runs on the CPU engine (device: "wasm")',
    'generate: numReturnSequences > 1 runs on the CPU engine (device: "wasm")',
  ]);
});

test('inspect() and generate()\'s inspect on a GPU model run on the CPU engine, say so, and give the CPU model\'s numbers bit for bit', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async (url) => {
    const { loadModel } = await import('/js/lib/gpt2.js');
    const both = {};
    for (const device of ['webgpu', 'wasm']) {
      const model = await loadModel(url, { device, useWorker: false });
      const inspected = await model.inspect('ROMEO: But soft', { positions: [1, 4], kvCache: 'fp32' });
      const pieces = [];
      for await (const piece of model.generate('ROMEO:', { temperature: 0, maxNewTokens: 3, inspect: { heads: [0] } })) pieces.push(piece);
      both[device] = {
        modelDevice: model.device, device: inspected.device, note: inspected.note ?? null,
        attention: inspected.attention.flat(2).map((row) => Array.from(row)),
        lens: inspected.logitLens.flat(2).map((e) => [e.id, e.logit]),
        kv: inspected.kv.rows.flat(2).map((r) => Array.from(r.key)),
        tokens: pieces.map((p) => p.token), pieceDevice: pieces[0].inspection.device,
        sampled: pieces.map((p) => p.inspection.sampler.token),
      };
      model.dispose();
    }
    return both;
  }, BUNDLED);
  const { webgpu: gpu, wasm } = result;
  expect(gpu.modelDevice).toBe('webgpu');
  expect(gpu.device).toBe('wasm');
  expect(gpu.note).toBe("a GPU pass gives logits only: this inspection ran the model's weights on the CPU engine");
  expect(wasm.note).toBeNull();
  expect(gpu.attention).toEqual(wasm.attention);
  expect(gpu.lens).toEqual(wasm.lens);
  expect(gpu.kv).toEqual(wasm.kv);
  expect(gpu.tokens).toEqual(wasm.tokens);
  expect(gpu.sampled).toEqual(gpu.tokens);
  expect(gpu.pieceDevice).toBe('wasm');
});

// Page side: a random fp32 GPT-2 as local files ({ config, weights, vocab, merges }: config.json and a safetensors
// file built here, the tokenizer given) with n_embd 6, which the GPU's vec4 kernels cannot take
// (unsupportedWeights).
function oddWidthModel({ vocab, merges }) {
  const config = { model_type: 'gpt2', vocab_size: 384, n_positions: 16, n_embd: 6, n_head: 2, n_layer: 1, layer_norm_epsilon: 1e-5, activation_function: 'gelu_new' };
  const C = config.n_embd;
  const shapes = {
    'wte.weight': [384, C], 'wpe.weight': [16, C], 'ln_f.weight': [C], 'ln_f.bias': [C],
    'h.0.ln_1.weight': [C], 'h.0.ln_1.bias': [C], 'h.0.ln_2.weight': [C], 'h.0.ln_2.bias': [C],
    'h.0.attn.c_attn.weight': [C, 3 * C], 'h.0.attn.c_attn.bias': [3 * C], 'h.0.attn.c_proj.weight': [C, C], 'h.0.attn.c_proj.bias': [C],
    'h.0.mlp.c_fc.weight': [C, 4 * C], 'h.0.mlp.c_fc.bias': [4 * C], 'h.0.mlp.c_proj.weight': [4 * C, C], 'h.0.mlp.c_proj.bias': [C],
  };
  const header = {};
  let bytes = 0;
  for (const [name, shape] of Object.entries(shapes)) {
    const size = 4 * shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype: 'F32', shape, data_offsets: [bytes, bytes + size] };
    bytes += size;
  }
  const text = JSON.stringify(header);
  const json = new TextEncoder().encode(text.padEnd(8 * Math.ceil(text.length / 8)));  // the data 8-byte aligned
  const file = new Uint8Array(8 + json.length + bytes);
  new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
  file.set(json, 8);
  const values = new Float32Array(file.buffer, 8 + json.length);
  let seed = 1;
  for (let i = 0; i < values.length; i++) values[i] = ((seed = (seed * 48271) % 2147483647) / 2147483647 - 0.5) * 0.2;
  return { config: JSON.stringify(config), weights: file, vocab, merges };
}

test('asking for webgpu with a model the kernels do not run is one line, and the CPU still runs it', async ({ page }) => {
  await page.goto('/');
  const files = await page.evaluateHandle(oddWidthModel, { vocab: TINY_TOKENIZER['vocab.json'], merges: TINY_TOKENIZER['merges.txt'] });
  const result = await page.evaluate(async (source) => {
    const { loadModel } = await import('/js/lib/gpt2.js');
    let message = null;
    try {
      await loadModel(source, { device: 'webgpu', useWorker: false });
    } catch (error) {
      message = error.message;
    }
    const fallback = await loadModel(source, { device: 'auto', useWorker: false });
    const tokens = [];
    for await (const piece of fallback.generate('ROMEO:', { temperature: 0, maxNewTokens: 3 })) tokens.push(piece.token);
    const placed = { device: fallback.device, tokens: tokens.length };
    fallback.dispose();
    return { message, placed };
  }, files);
  expect(result.message).toBe("device 'webgpu': the GPU kernels need n_embd to be a multiple of 4, got 6");
  expect(result.placed).toEqual({ device: 'wasm', tokens: 3 });
});

// 'auto' with a GPU remembered for the model, on SwiftShader presented as hardware: the model streams towards the GPU
// (the upload's out-of-memory error scope is pushed, which a model loaded into the heap never reaches), whose kernels
// refuse its first matrix; the CPU then takes it, and deviceReason says why, in the words of a load into the heap.
test('auto whose GPU refuses a model as it streams loads it on the CPU instead, saying why', async ({ page }) => {
  await page.goto('/');
  const files = await page.evaluateHandle(oddWidthModel, { vocab: TINY_TOKENIZER['vocab.json'], merges: TINY_TOKENIZER['merges.txt'] });
  const result = await page.evaluate(async (source) => {
    const realInfo = Object.getOwnPropertyDescriptor(GPUAdapter.prototype, 'info').get;
    Object.defineProperty(GPUAdapter.prototype, 'info', {
      get() {
        return { vendor: realInfo.call(this).vendor, architecture: 'test-hardware', device: 'test', description: 'a GPU for the test', isFallbackAdapter: false };
      },
    });
    const { loadModel } = await import('/js/lib/gpt2.js');
    const { describeAdapter } = await import('/js/lib/gpu/device.js');
    const { deviceChoiceKey, rememberChoice } = await import('/js/lib/gpu/device_probe.js');
    const { modelSource } = await import('/js/lib/loading/model_source.js');
    const adapterInfo = describeAdapter(await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' }));
    await rememberChoice(adapterInfo, deviceChoiceKey(modelSource(source), 'fp32'), { device: 'webgpu', gpuMs: 1, wasmMs: 2 });
    const scopes = [];
    const pushErrorScope = GPUDevice.prototype.pushErrorScope;
    GPUDevice.prototype.pushErrorScope = function (filter) {
      scopes.push(filter);
      return pushErrorScope.call(this, filter);
    };
    const model = await loadModel(source, { device: 'auto', useWorker: false });
    const tokens = [];
    for await (const piece of model.generate('ROMEO:', { temperature: 0, maxNewTokens: 3 })) tokens.push(piece.token);
    const placed = { device: model.device, reason: model.deviceReason, tokens: tokens.length, scopes };
    model.dispose();
    return placed;
  }, files);
  expect(result).toEqual({ device: 'wasm', reason: 'the GPU kernels need n_embd to be a multiple of 4, got 6', tokens: 3, scopes: ['out-of-memory'] });
});

// The GPU's logits against the CPU engine's log-probabilities over the whole vocabulary, after a prefill and after
// each of 8 steps: -> { maxDiff, rms } with maxDiff the largest difference of log-softmax values.
async function logitsOnPage(page, modelUrl, format) {
  return page.evaluate(async ({ url, weights }) => {
    const { loadEngine } = await import('/js/lib/engine/engine.js');
    const { loadModelIntoEngine } = await import('/js/lib/loading/loader.js');
    const { modelSource } = await import('/js/lib/loading/model_source.js');
    const { chooseDevice } = await import('/js/lib/gpu/device.js');
    const { openGpuModel } = await import('/js/lib/gpu/gpu_model.js');
    const engine = await loadEngine({ threads: 1 });
    const { model, tokenizer } = await loadModelIntoEngine(engine, modelSource(url), { weights });
    const choice = await chooseDevice('webgpu');
    const gpuModel = await openGpuModel(model, choice.gpu, choice.adapterInfo);
    const gpu = gpuModel.createSession();
    const cpu = model.createSession({ kvCache: 'fp32' });
    for (const session of [gpu, cpu]) session.setSampling({ temperature: 0 });
    const V = model.config.n_vocab;
    let maxDiff = 0, sumSquares = 0, count = 0;
    const compare = () => {
      const logits = Float64Array.from(gpu.logits());
      const max = Math.max(...logits);
      const logSum = Math.log(logits.reduce((sum, l) => sum + Math.exp(l - max), 0)) + max;
      const mean = logits.reduce((sum, l) => sum + l, 0) / V;
      for (const { token, probability } of cpu.distribution(0, V).alternatives) {
        maxDiff = Math.max(maxDiff, Math.abs(logits[token] - logSum - Math.log(probability)));
      }
      sumSquares += logits.reduce((sum, l) => sum + (l - mean) ** 2, 0);
      count += V;
    };
    const ids = tokenizer.encode('ROMEO: But soft, what light');
    let token = await gpu.prefill(ids);
    if (cpu.prefill(ids) !== token) throw new Error('the prefill chose another token');
    compare();
    for (let i = 0; i < 8; i++) {
      const next = await gpu.step(token);
      if (cpu.step(token) !== next) throw new Error(`step ${i} chose another token`);
      compare();
      token = next;
    }
    gpu.dispose();
    cpu.dispose();
    gpuModel.dispose();
    return { maxDiff, rms: Math.sqrt(sumSquares / count) };
  }, { url: modelUrl, weights: format });
}

for (const [name, url, weights] of [['the bundled model', BUNDLED, 'fp32'], ['the bundled model', BUNDLED, 'int8'],
  ['the tiny-random GGUF (F32)', TINY_RANDOM_GGUF, 'fp32']]) {
  test(`${name} (${weights}): the GPU's logits lie within ${LOGITS_BOUND} of their rms from the CPU's`, async ({ page }) => {
    await page.route(`**${TINY_RANDOM_GGUF}`, (route) => route.fulfill({ body: readFileSync(TINY_RANDOM_GGUF_PATH), contentType: 'application/octet-stream' }));
    await page.goto('/');
    const { maxDiff, rms } = await logitsOnPage(page, url, weights);
    console.log(`${name} ${weights}: max difference ${maxDiff.toExponential(2)}, logits rms ${rms.toFixed(3)}, ratio ${(maxDiff / rms).toExponential(2)}`);
    expect(maxDiff).toBeLessThanOrEqual(LOGITS_BOUND * rms);
  });
}

// GGUF block-format models: the GPU dequantizes the file's blocks and multiplies f32 activations, the CPU engine
// quantizes its activations to int8 blocks of 32 (engine/kernels/block_formats.h), so the logits differ by that
// quantization, far more than by the order of f32 sums. The sessions are fed the CPU's greedy tokens for `steps`
// steps after a prefill of `prompt` (text or token ids), so every position compares the same context. kernels: the
// GPU models to run, [kind, steps], kind 'serial' (what a software adapter gets, gpu_model.js) or 'tiled' (the GEMV
// and GEMM of a hardware adapter, opened as if SwiftShader were one: slow there), each on its own device, fed the
// first `steps` of the steps (undefined: all). reference: float64 logits of the
// prompt's last position, or null. -> per kernel set { kernels, maxDiff (the largest difference of log-softmax
// values), rms (of the GPU's logits), positions: [{ same (the GPU's argmax is the CPU's token), gap (the CPU's top
// two log-probabilities apart) }], fromReference: { gpu, cpu } (each device's largest log-softmax difference from
// the reference after the prefill) or null }.
async function blockModelOnPage(page, modelUrl, { prompt, steps, kernels = [['serial']], reference = null }) {
  return page.evaluate(async ({ url, text, count, kernelSets, referenceLogits }) => {
    const { loadEngine } = await import('/js/lib/engine/engine.js');
    const { loadModelIntoEngine } = await import('/js/lib/loading/loader.js');
    const { modelSource } = await import('/js/lib/loading/model_source.js');
    const { chooseDevice } = await import('/js/lib/gpu/device.js');
    const { openGpuModel } = await import('/js/lib/gpu/gpu_model.js');
    const engine = await loadEngine({ threads: 1 });
    const { model, tokenizer } = await loadModelIntoEngine(engine, modelSource(url), {});
    const gpus = [];
    for (const [kind, kindSteps = count] of kernelSets) {
      const choice = await chooseDevice('webgpu');
      const adapterInfo = kind === 'tiled' ? { ...choice.adapterInfo, software: false } : choice.adapterInfo;
      const gpuModel = await openGpuModel(model, choice.gpu, adapterInfo);
      gpus.push({ gpuModel, session: gpuModel.createSession(), steps: kindSteps, result: { kernels: kind, maxDiff: 0, sumSquares: 0, positions: [], fromReference: null } });
    }
    const cpu = model.createSession({ kvCache: 'fp32' });
    for (const session of [cpu, ...gpus.map((gpu) => gpu.session)]) session.setSampling({ temperature: 0 });
    const V = model.config.n_vocab;
    const logSumExp = (logits) => {
      const max = Math.max(...logits);
      return Math.log(logits.reduce((sum, l) => sum + Math.exp(l - max), 0)) + max;
    };
    const compare = (session, result, gpuToken, cpuToken, alternatives) => {
      const logits = Float64Array.from(session.logits());
      const logSum = logSumExp(logits);
      const mean = logits.reduce((sum, l) => sum + l, 0) / V;
      if (referenceLogits && !result.fromReference) {
        const refLogSum = logSumExp(referenceLogits);
        result.fromReference = { gpu: 0, cpu: 0 };
        for (const { token, probability } of alternatives) {
          const ref = referenceLogits[token] - refLogSum;
          result.fromReference.gpu = Math.max(result.fromReference.gpu, Math.abs(logits[token] - logSum - ref));
          result.fromReference.cpu = Math.max(result.fromReference.cpu, Math.abs(Math.log(probability) - ref));
        }
      }
      for (const { token, probability } of alternatives) {
        result.maxDiff = Math.max(result.maxDiff, Math.abs(logits[token] - logSum - Math.log(probability)));
      }
      result.sumSquares += logits.reduce((sum, l) => sum + (l - mean) ** 2, 0);
      const [first, second] = alternatives.slice().sort((x, y) => y.probability - x.probability);
      result.positions.push({ same: gpuToken === cpuToken, gap: Math.log(first.probability) - Math.log(second.probability) });
    };
    // feed(session) -> the GPU session's token; every session gets the CPU's, up to its steps
    const advance = async (feed, cpuToken, step) => {
      const alternatives = cpu.distribution(0, V).alternatives;
      for (const { session, steps: last, result } of gpus) {
        if (step <= last) compare(session, result, await feed(session), cpuToken, alternatives);
      }
    };
    const ids = typeof text === 'string' ? tokenizer.encode(text) : text;
    let token = cpu.prefill(ids);
    await advance((session) => session.prefill(ids), token, 0);
    for (let i = 1; i <= count; i++) {
      const fed = token;
      token = cpu.step(fed);
      await advance((session) => session.step(fed), token, i);
    }
    cpu.dispose();
    gpus.forEach(({ session }) => session.dispose());
    // the engine model once: the first GPU model's dispose frees it, the others only their GPU side
    gpus.forEach(({ gpuModel }, i) => (i === 0 ? gpuModel.dispose() : gpuModel.releaseGpu()));
    return gpus.map(({ result: { sumSquares, ...result } }) => ({ ...result, rms: Math.sqrt(sumSquares / (V * result.positions.length)) }));
  }, { url: modelUrl, text: prompt, count: steps, kernelSets: kernels, referenceLogits: reference && Array.from(reference) });
}

// Each model's bound of its logits, a fraction of their rms: the CPU's int8 activations cost that much.
// - the bundled Q4_0 model (measured: 0.112)
// - tests/fixtures/tiny-gguf, every type (F16, Q8_0 ... Q6_K) a matrix each, untied head (measured: 0.105), with
//   the serial kernels for all 40 positions and the tiled ones (GEMM prefill, GEMV steps: what hardware runs; their
//   pipelines take SwiftShader seconds to compile and run) for the first 4. After the prefill the GPU, whose
//   activations stay f32, must also lie within REFERENCE_BOUND of the rms from its float64 reference logits
//   (measured: 6.5e-6 serial, 5.4e-6 tiled; the CPU lies 3.6e-2 from them).
const BLOCK_MODELS = [
  { name: 'the bundled Q4_0 GGUF', url: `${BUNDLED}tiny-shakespeare.Q4_0.gguf`, prompt: 'ROMEO: But soft, what light', steps: 50, bound: 0.15 },
  // its 24-token prompt and 39 steps fill the 64 positions
  {
    name: 'tiny-gguf (every type)', url: EVERY_TYPE_GGUF, prompt: EVERY_TYPE_PROMPT, steps: 39, bound: 0.15,
    kernels: [['serial'], ['tiled', 3]], reference: EVERY_TYPE_LOGITS,
  },
];
const REFERENCE_BOUND = 1e-4;

// Annotates, prints and checks one kernel set's result of blockModelOnPage against fraction (of the rms).
function expectBlockModel(name, fraction, { kernels, maxDiff, rms, positions, fromReference }) {
  const label = `${name}, ${kernels} kernels`;
  if (fromReference) {
    const description = `after the prefill, from float64 logits.f32: GPU ${fromReference.gpu.toExponential(2)} ` +
      `(${(fromReference.gpu / rms).toExponential(2)} of the rms), CPU ${fromReference.cpu.toExponential(2)}`;
    test.info().annotations.push({ type: 'reference', description: `${label}: ${description}` });
    console.log(`${label}: ${description}`);
    expect(fromReference.gpu, label).toBeLessThanOrEqual(REFERENCE_BOUND * rms);
  }
  const bound = fraction * rms;
  const firstDifference = positions.findIndex(({ same }) => !same);
  const others = positions.flatMap(({ same }, i) => (same ? [] : [i]));
  const close = positions.flatMap(({ gap }, i) => (gap < 2 * bound ? [i] : []));
  const description = `max difference ${maxDiff.toExponential(2)}, logits rms ${rms.toFixed(3)}, ratio ${(maxDiff / rms).toExponential(2)}; ` +
    `other greedy tokens at positions [${others.join(', ')}] of ${positions.length} (the first: CPU top-two gap ` +
    `${positions[firstDifference]?.gap.toExponential(2)}); CPU top-two gap below twice the bound at ${close.length} positions, the first ${close[0]}`;
  test.info().annotations.push({ type: 'max difference', description: `${label}: ${description}` });
  console.log(`${label}: ${description}`);
  expect(maxDiff, label).toBeLessThanOrEqual(bound);
  // each logit within the bound of the CPU's: the argmax can differ only where the CPU's top two lie within twice
  // the bound
  for (const [i, { same, gap }] of positions.entries()) expect(same || gap < 2 * bound, `${label} position ${i}: gap ${gap}`).toBe(true);
}

for (const { name, url, prompt, steps, bound: fraction, kernels, reference } of BLOCK_MODELS) {
  test(`${name} on the GPU: logits within ${fraction} of their rms from the CPU's, and its greedy tokens but where the CPU's top two lie closer`, async ({ page }) => {
    await page.route(`**${EVERY_TYPE_GGUF}`, (route) => route.fulfill({ body: readFileSync(EVERY_TYPE_GGUF_PATH), contentType: 'application/octet-stream' }));
    await page.goto('/');
    const results = await blockModelOnPage(page, url, { prompt, steps, kernels, reference });
    for (const result of results) expectBlockModel(name, fraction, result);
  });
}

// A model loaded on 'webgpu' streams its matrices to the GPU as the file arrives (gpu_model.js's startWeightUpload,
// the loader's onMatrixRows): its GPU buffers are those of an upload from a loaded model's heap, so its logits are
// the same bits, and the heap never holds the matrices. The wasm memory's size never shrinks, so its growth over
// the streamed load (the first) is that load's peak; the heap's load that follows grows it by its weights.
for (const [name, url, weights] of [['the bundled model', BUNDLED, 'fp32'], ['the bundled model', BUNDLED, 'int8'],
  ['tiny-gguf (every type)', EVERY_TYPE_GGUF, 'fp32']]) {
  test(`${name} (${weights}) streamed to the GPU as it loads gives the logits of an upload from the heap, bit for bit, and the heap never holds its matrices`, async ({ page }) => {
    await page.route(`**${EVERY_TYPE_GGUF}`, (route) => route.fulfill({ body: readFileSync(EVERY_TYPE_GGUF_PATH), contentType: 'application/octet-stream' }));
    await page.goto('/');
    const result = await page.evaluate(async ({ modelUrl, format, prompt }) => {
      const { loadEngine } = await import('/js/lib/engine/engine.js');
      const { loadModelIntoEngine } = await import('/js/lib/loading/loader.js');
      const { modelSource } = await import('/js/lib/loading/model_source.js');
      const { chooseDevice } = await import('/js/lib/gpu/device.js');
      const { openGpuModel, startWeightUpload } = await import('/js/lib/gpu/gpu_model.js');
      const engine = await loadEngine({ threads: 1 });
      const memory = [engine.heapBytes()];
      const streamedChoice = await chooseDevice('webgpu');
      const upload = startWeightUpload(streamedChoice.gpu);
      const loaded = await loadModelIntoEngine(engine, modelSource(modelUrl), { weights: format, onMatrixRows: (rows) => upload.receive(rows) });
      memory.push(engine.heapBytes());
      const heapWeightsStreamed = loaded.model.weightBytes;
      const streamed = await openGpuModel(loaded.model, streamedChoice.gpu, streamedChoice.adapterInfo, modelUrl, upload);
      const { model: heapModel } = await loadModelIntoEngine(engine, modelSource(modelUrl), { weights: format });
      memory.push(engine.heapBytes());
      const heapChoice = await chooseDevice('webgpu');
      const fromHeap = await openGpuModel(heapModel, heapChoice.gpu, heapChoice.adapterInfo, modelUrl);
      const ids = typeof prompt === 'string' ? loaded.tokenizer.encode(prompt) : prompt;
      const logitsOf = async (gpuModel) => {
        const session = gpuModel.createSession();
        session.setSampling({ temperature: 0 });
        const rows = [];
        let token = await session.prefill(ids);
        rows.push(Float32Array.from(session.logits()));
        for (let i = 0; i < 3; i++) {
          token = await session.step(token);
          rows.push(Float32Array.from(session.logits()));
        }
        session.dispose();
        return rows;
      };
      const [a, b] = [await logitsOf(streamed), await logitsOf(fromHeap)];
      let differing = 0;
      for (let r = 0; r < a.length; r++) {
        const x = new Uint32Array(a[r].buffer), y = new Uint32Array(b[r].buffer);
        for (let i = 0; i < x.length; i++) differing += x[i] !== y[i];
      }
      const measured = {
        differing, compared: a.length * a[0].length, gpuBytes: [streamed.weightBytes, fromHeap.weightBytes],
        heapWeights: { streamed: heapWeightsStreamed, kept: heapModel.weightBytes },
        memoryGrowth: { streamed: memory[1] - memory[0], heap: memory[2] - memory[1] },
      };
      streamed.dispose();
      fromHeap.dispose();
      return measured;
    }, { modelUrl: url, format: weights, prompt: url === EVERY_TYPE_GGUF ? EVERY_TYPE_PROMPT : 'ROMEO: But soft, what light' });
    console.log(`${name} ${weights}: ${result.differing} of ${result.compared} logits differ; heap weights ${result.heapWeights.streamed} ` +
      `bytes streamed, ${result.heapWeights.kept} kept; wasm memory grew ${result.memoryGrowth.streamed} bytes over the streamed load, ` +
      `${result.memoryGrowth.heap} over the heap's; GPU buffers ${result.gpuBytes.join(' and ')} bytes`);
    expect(result.differing).toBe(0);
    expect(result.gpuBytes[0]).toBe(result.gpuBytes[1]);
    expect(result.heapWeights.streamed).toBeLessThan(result.heapWeights.kept / 10);
    if (url === BUNDLED && weights === 'fp32') {
      expect(result.memoryGrowth.streamed).toBeLessThan(result.heapWeights.kept / 4);
      expect(result.memoryGrowth.heap).toBeGreaterThan(result.heapWeights.kept / 2);
    }
  });
}
