// A GPU that goes away while a model runs on it (webgpu project: Chromium on SwiftShader): the generation goes on
// on the CPU engine with the text it would have had there, the weights loaded again into the heap that had let them
// go, the stats say what happened, and the model keeps working.
import { expect, test } from './under_csp.js';

const BUNDLED = '/models/tiny-shakespeare/';

test('a device destroyed mid-generation: the seeded run ends on the CPU with the CPU engine\'s text, on the weights loaded again', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async (url) => {
    // the page's own WebGPU device, caught on its way to the engine, as a driver reset would take it away
    const devices = [];
    const requestDevice = GPUAdapter.prototype.requestDevice;
    GPUAdapter.prototype.requestDevice = async function (...args) {
      const device = await requestDevice.apply(this, args);
      devices.push(device);
      return device;
    };
    const { loadModel } = await import('/js/lib/gpt2.js');
    const engine = await (await import('/js/lib/engine/engine.js')).loadEngine({ threads: 1 });
    const heap = { empty: engine.heapUsedBytes() };
    const options = { temperature: 0.9, topK: 40, seed: 7, maxNewTokens: 40, stopAtEndOfText: false };
    const text = async (model, destroyAfter = Infinity) => {
      let out = '';
      let count = 0;
      const run = model.generate('ROMEO:', options);
      for await (const piece of run) {
        out += piece.text;
        if (++count === destroyAfter) devices[0].destroy();
      }
      return { text: out, stats: run.stats };
    };
    const gpu = await loadModel(url, { device: 'webgpu', useWorker: false, threads: 1 });
    heap.gpuModel = engine.heapUsedBytes();
    const lost = await text(gpu, 10);
    heap.afterLoss = engine.heapUsedBytes();
    const after = await text(gpu);  // a new run on the same model, now on the CPU
    gpu.dispose();
    const wasm = await loadModel(url, { device: 'wasm', useWorker: false, threads: 1 });
    heap.wasmModel = engine.heapUsedBytes();
    const expected = await text(wasm);
    const weightBytes = wasm.weightBytes;
    wasm.dispose();
    return { lost, after, expected, heap, weightBytes };
  }, BUNDLED);
  const grown = (at) => result.heap[at] - result.heap.empty;
  console.log(`heap in use: ${grown('gpuModel')} bytes with the model on the GPU, ${grown('wasmModel')} on the CPU ` +
    `(weights ${result.weightBytes}), ${grown('afterLoss')} once the GPU was lost`);
  expect(grown('gpuModel')).toBeLessThan(result.weightBytes / 100);
  expect(grown('wasmModel')).toBeGreaterThan(result.weightBytes);
  expect(grown('afterLoss')).toBeGreaterThan(result.weightBytes);
  expect(result.lost.text).toBe(result.expected.text);
  expect(result.lost.stats.device).toBe('wasm');
  expect(result.lost.stats.deviceLost).toMatch(/^the GPU device was lost \(destroyed/);
  expect(result.lost.stats.generatedTokens).toBe(40);
  expect(result.after.text).toBe(result.expected.text);
  expect(result.after.stats.device).toBe('wasm');
});

test('a GPU out of memory for the weights is one line naming the model and their bytes, and the page can still load the model on the CPU', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async (url) => {
    // the device's answer when its memory runs out during the upload, as a full GPU gives it
    const popErrorScope = GPUDevice.prototype.popErrorScope;
    GPUDevice.prototype.popErrorScope = async function () {
      await popErrorScope.call(this);
      return { message: 'Out of memory allocating a buffer' };
    };
    const { loadModel } = await import('/js/lib/gpt2.js');
    let message = null;
    try {
      await loadModel(url, { device: 'webgpu', useWorker: false });
    } catch (error) {
      message = error.message;
    }
    GPUDevice.prototype.popErrorScope = popErrorScope;
    const cpu = await loadModel(url, { device: 'wasm', useWorker: false });
    const placed = cpu.device;
    cpu.dispose();
    return { message, placed };
  }, BUNDLED);
  expect(result.message).toMatch(new RegExp(`^device 'webgpu': out of GPU memory for ${BUNDLED}: its weights need \\d+ bytes: Out of memory allocating a buffer$`));
  expect(result.placed).toBe('wasm');
});
