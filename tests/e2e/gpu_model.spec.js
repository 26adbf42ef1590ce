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
// tests/fixtures/tiny-gguf: a random GPT-2 with every tensor type, among them the Q4_1, Q5_0, Q5_1 and F16 the GPU
// kernels do not run; served by a route
const EVERY_TYPE_GGUF = '/fixtures/tiny-gguf.gguf';
const EVERY_TYPE_GGUF_PATH = fileURLToPath(new URL('../fixtures/tiny-gguf/model.gguf', import.meta.url));

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

test('asking for webgpu with a model the kernels do not run is one line, and the CPU still loads it', async ({ page }) => {
  await page.route(`**${EVERY_TYPE_GGUF}`, (route) => route.fulfill({ body: readFileSync(EVERY_TYPE_GGUF_PATH), contentType: 'application/octet-stream' }));
  await page.goto('/');
  const result = await page.evaluate(async (url) => {
    const { loadModel } = await import('/js/lib/gpt2.js');
    let message = null;
    try {
      await loadModel(url, { device: 'webgpu', useWorker: false });
    } catch (error) {
      message = error.message;
    }
    const fallback = await loadModel(url, { device: 'auto', useWorker: false });
    const placed = { device: fallback.device };
    fallback.dispose();
    return { message, placed };
  }, EVERY_TYPE_GGUF);
  expect(result.message).toBe("device 'webgpu': the GPU kernels run fp32, int8, q8_0, q4_0, q4_k, q5_k and q6_k weights; this model has f16, q4_1, q5_0, q5_1");
  expect(result.placed.device).toBe('wasm');
});

// The GPU's logits against the CPU engine's log-probabilities over the whole vocabulary, after a prefill and after
// each of 20 steps: -> { maxDiff, rms } with maxDiff the largest difference of log-softmax values.
async function logitsOnPage(page, modelUrl, format) {
  return page.evaluate(async ({ url, weights }) => {
    const { loadEngine } = await import('/js/lib/engine/engine.js');
    const { loadModelIntoEngine } = await import('/js/lib/loading/loader.js');
    const { chooseDevice } = await import('/js/lib/gpu/device.js');
    const { openGpuModel } = await import('/js/lib/gpu/gpu_model.js');
    const engine = await loadEngine({ threads: 1 });
    const { model, tokenizer } = await loadModelIntoEngine(engine, url, { weights });
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
    for (let i = 0; i < 20; i++) {
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
// quantization, far more than by the order of f32 sums. Both sessions are fed the CPU's greedy tokens for `steps`
// steps after a prefill, so every position compares the same context: -> { maxDiff (the largest difference of
// log-softmax values), rms (of the GPU's logits), positions: [{ same (the GPU's argmax is the CPU's token), gap (the
// CPU's top two log-probabilities apart) }] }.
async function blockModelOnPage(page, modelUrl, steps) {
  return page.evaluate(async ({ url, count }) => {
    const { loadEngine } = await import('/js/lib/engine/engine.js');
    const { loadModelIntoEngine } = await import('/js/lib/loading/loader.js');
    const { chooseDevice } = await import('/js/lib/gpu/device.js');
    const { openGpuModel } = await import('/js/lib/gpu/gpu_model.js');
    const engine = await loadEngine({ threads: 1 });
    const { model, tokenizer } = await loadModelIntoEngine(engine, url, {});
    const choice = await chooseDevice('webgpu');
    const gpuModel = await openGpuModel(model, choice.gpu, choice.adapterInfo);
    const gpu = gpuModel.createSession();
    const cpu = model.createSession({ kvCache: 'fp32' });
    for (const session of [gpu, cpu]) session.setSampling({ temperature: 0 });
    const V = model.config.n_vocab;
    let maxDiff = 0, sumSquares = 0;
    const positions = [];
    const compare = (gpuToken, cpuToken) => {
      const logits = Float64Array.from(gpu.logits());
      const max = Math.max(...logits);
      const logSum = Math.log(logits.reduce((sum, l) => sum + Math.exp(l - max), 0)) + max;
      const mean = logits.reduce((sum, l) => sum + l, 0) / V;
      const alternatives = cpu.distribution(0, V).alternatives;
      for (const { token, probability } of alternatives) {
        maxDiff = Math.max(maxDiff, Math.abs(logits[token] - logSum - Math.log(probability)));
      }
      sumSquares += logits.reduce((sum, l) => sum + (l - mean) ** 2, 0);
      const [first, second] = alternatives.slice().sort((a, b) => b.probability - a.probability);
      positions.push({ same: gpuToken === cpuToken, gap: Math.log(first.probability) - Math.log(second.probability) });
    };
    const ids = tokenizer.encode('ROMEO: But soft, what light');
    let token = cpu.prefill(ids);
    compare(await gpu.prefill(ids), token);
    for (let i = 0; i < count; i++) {
      const gpuNext = await gpu.step(token);
      const next = cpu.step(token);
      compare(gpuNext, next);
      token = next;
    }
    gpu.dispose();
    cpu.dispose();
    gpuModel.dispose();
    return { maxDiff, rms: Math.sqrt(sumSquares / (V * positions.length)), positions };
  }, { url: modelUrl, count: steps });
}

// The bound of the bundled Q4_0 model's logits, a fraction of their rms: the CPU's int8 activations cost that much
// (measured: 0.110).
const Q4_0_LOGITS_BOUND = 0.15;

test(`the bundled Q4_0 GGUF on the GPU: logits within ${Q4_0_LOGITS_BOUND} of their rms from the CPU's, and its greedy tokens but where the CPU's top two lie closer`, async ({ page }) => {
  await page.goto('/');
  const { maxDiff, rms, positions } = await blockModelOnPage(page, `${BUNDLED}tiny-shakespeare.Q4_0.gguf`, 100);
  const bound = Q4_0_LOGITS_BOUND * rms;
  const firstDifference = positions.findIndex(({ same }) => !same);
  const firstClose = positions.findIndex(({ gap }) => gap < 2 * bound);
  const description = `max difference ${maxDiff.toExponential(2)}, logits rms ${rms.toFixed(3)}, ratio ${(maxDiff / rms).toExponential(2)}; ` +
    `first other greedy token at position ${firstDifference} (CPU top-two gap ${positions[firstDifference]?.gap.toExponential(2)}), ` +
    `first gap below twice the bound at ${firstClose}`;
  test.info().annotations.push({ type: 'max difference', description });
  console.log(`bundled Q4_0: ${description}`);
  expect(maxDiff).toBeLessThanOrEqual(bound);
  // each logit within the bound of the CPU's: the argmax can differ only where the CPU's top two lie within twice
  // the bound
  for (const [i, { same, gap }] of positions.entries()) expect(same || gap < 2 * bound, `position ${i}: gap ${gap}`).toBe(true);
});
