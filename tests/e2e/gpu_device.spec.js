// How 'auto' picks the device on a hardware adapter (webgpu project: Chromium on SwiftShader, where the probe is
// called directly, since 'auto' itself never probes a software adapter): the faster of a few measured decode steps
// on the GPU and the CPU, remembered per adapter and model.
import { expect, test } from './under_csp.js';

test('the device probe picks the faster device, remembers it for the adapter and model, and measures again if the record is damaged', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async () => {
    const { loadEngine } = await import('/js/lib/engine/engine.js');
    const { loadModelIntoEngine } = await import('/js/lib/loading/loader.js');
    const { modelSource } = await import('/js/lib/loading/model_source.js');
    const { chooseDevice } = await import('/js/lib/gpu/device.js');
    const { openGpuModel } = await import('/js/lib/gpu/gpu_model.js');
    const { deviceChoiceKey, probeFasterDevice } = await import('/js/lib/gpu/device_probe.js');
    await caches.delete('gpt2-wasm-device-choices-v1');
    const engine = await loadEngine({ threads: 1 });
    const { model } = await loadModelIntoEngine(engine, modelSource('/models/tiny-shakespeare/'), { weights: 'fp32' });
    const choice = await chooseDevice('webgpu');
    const gpuModel = await openGpuModel(model, choice.gpu, choice.adapterInfo);
    const key = deviceChoiceKey(modelSource('/models/tiny-shakespeare/'), 'fp32');
    const first = await probeFasterDevice(gpuModel, model, choice.adapterInfo, key);
    const second = await probeFasterDevice(gpuModel, model, choice.adapterInfo, key);
    const otherAdapter = await probeFasterDevice(gpuModel, model, { ...choice.adapterInfo, description: 'another adapter' }, key);
    const otherWeights = await probeFasterDevice(gpuModel, model, choice.adapterInfo, deviceChoiceKey(modelSource('/models/tiny-shakespeare/'), 'int8'));
    const cache = await caches.open('gpt2-wasm-device-choices-v1');
    for (const request of await cache.keys()) await cache.put(request, new Response('not json'));
    const damaged = await probeFasterDevice(gpuModel, model, choice.adapterInfo, key);
    gpuModel.dispose();
    return { first, second, otherAdapter, otherWeights, damaged };
  });
  const { first, second, otherAdapter, otherWeights, damaged } = result;
  console.log(`SwiftShader: ${first.gpuMs.toFixed(1)} ms a token on the GPU, ${first.wasmMs.toFixed(1)} on the CPU`);
  expect(first.remembered).toBe(false);
  expect(first.gpuMs).toBeGreaterThan(0);
  expect(first.wasmMs).toBeGreaterThan(0);
  expect(first.device).toBe(first.gpuMs < first.wasmMs ? 'webgpu' : 'wasm');
  expect(second).toEqual({ ...first, remembered: true });
  expect(otherAdapter.remembered).toBe(false);
  expect(otherWeights.remembered).toBe(false);
  expect(damaged.remembered).toBe(false);
});

// 'auto' on an adapter that says it is hardware (SwiftShader's, renamed: its GEMV and GEMM kernels then run) with a
// choice remembered from an earlier load: the GPU's streams the weights there as they load (the wasm memory does not
// grow) and runs the CPU engine's greedy tokens; the CPU's loads on the CPU, saying why.
test('auto follows the choice remembered for the adapter and model: on the GPU, the weights stream there; on the CPU, it says why', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async () => {
    const realInfo = Object.getOwnPropertyDescriptor(GPUAdapter.prototype, 'info').get;
    Object.defineProperty(GPUAdapter.prototype, 'info', {
      get() {
        const { vendor } = realInfo.call(this);
        return { vendor, architecture: 'test-hardware', device: 'test', description: 'a GPU for the test', isFallbackAdapter: false };
      },
    });
    const { loadModel } = await import('/js/lib/gpt2.js');
    const { loadEngine } = await import('/js/lib/engine/engine.js');
    const { describeAdapter } = await import('/js/lib/gpu/device.js');
    const { deviceChoiceKey, rememberChoice } = await import('/js/lib/gpu/device_probe.js');
    const { modelSource } = await import('/js/lib/loading/model_source.js');
    await caches.delete('gpt2-wasm-device-choices-v1');
    const url = '/models/tiny-shakespeare/';
    const adapterInfo = describeAdapter(await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' }));
    await rememberChoice(adapterInfo, deviceChoiceKey(modelSource(url), 'fp32'), { device: 'webgpu', gpuMs: 1, wasmMs: 2 });
    await rememberChoice(adapterInfo, deviceChoiceKey(modelSource(url), 'int8'), { device: 'wasm', gpuMs: 3, wasmMs: 2 });
    const engine = await loadEngine({ threads: 1 });
    const tokens = async (model) => {
      const ids = [];
      for await (const piece of model.generate('ROMEO:', { temperature: 0, maxNewTokens: 3, stopAtEndOfText: false })) ids.push(piece.token);
      return ids;
    };
    const memoryBefore = engine.heapBytes();
    const onGpu = await loadModel(url, { device: 'auto', useWorker: false, threads: 1 });
    const memoryGrowth = engine.heapBytes() - memoryBefore;
    const gpu = { device: onGpu.device, reason: onGpu.deviceReason, software: onGpu.adapterInfo.software, tokens: await tokens(onGpu), memoryGrowth };
    onGpu.dispose();
    const onCpu = await loadModel(url, { device: 'auto', weights: 'int8', useWorker: false, threads: 1 });
    const cpu = { device: onCpu.device, reason: onCpu.deviceReason };
    onCpu.dispose();
    const reference = await loadModel(url, { device: 'wasm', useWorker: false, threads: 1 });
    const expected = await tokens(reference);
    reference.dispose();
    return { gpu, cpu, expected };
  });
  console.log(`auto with a remembered GPU: wasm memory grew ${result.gpu.memoryGrowth} bytes over the load`);
  expect(result.gpu).toEqual({ device: 'webgpu', reason: null, software: false, tokens: result.expected, memoryGrowth: 0 });
  expect(result.cpu).toEqual({ device: 'wasm', reason: 'the CPU decodes this model faster here (2.0 ms a token against 3.0 ms on the GPU, measured at an earlier load)' });
});
