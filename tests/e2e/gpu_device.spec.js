// How 'auto' picks the device on a hardware adapter (webgpu project: Chromium on SwiftShader, where the probe is
// called directly, since 'auto' itself never probes a software adapter): the faster of a few measured decode steps
// on the GPU and the CPU, remembered per adapter and model.
import { expect, test } from './under_csp.js';

test('the device probe picks the faster device, remembers it for the adapter and model, and measures again if the record is damaged', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async () => {
    const { loadEngine } = await import('/js/lib/engine/engine.js');
    const { loadModelIntoEngine } = await import('/js/lib/loading/loader.js');
    const { chooseDevice } = await import('/js/lib/gpu/device.js');
    const { openGpuModel } = await import('/js/lib/gpu/gpu_model.js');
    const { probeFasterDevice } = await import('/js/lib/gpu/device_probe.js');
    await caches.delete('gpt2-wasm-device-choices-v1');
    const engine = await loadEngine({ threads: 1 });
    const { model } = await loadModelIntoEngine(engine, '/models/tiny-shakespeare/', { weights: 'fp32' });
    const choice = await chooseDevice('webgpu');
    const gpuModel = await openGpuModel(model, choice.gpu, choice.adapterInfo);
    const first = await probeFasterDevice(gpuModel, model, choice.adapterInfo);
    const second = await probeFasterDevice(gpuModel, model, choice.adapterInfo);
    const otherAdapter = await probeFasterDevice(gpuModel, model, { ...choice.adapterInfo, description: 'another adapter' });
    const cache = await caches.open('gpt2-wasm-device-choices-v1');
    for (const request of await cache.keys()) await cache.put(request, new Response('not json'));
    const damaged = await probeFasterDevice(gpuModel, model, choice.adapterInfo);
    gpuModel.dispose();
    return { first, second, otherAdapter, damaged };
  });
  const { first, second, otherAdapter, damaged } = result;
  console.log(`SwiftShader: ${first.gpuMs.toFixed(1)} ms a token on the GPU, ${first.wasmMs.toFixed(1)} on the CPU`);
  expect(first.remembered).toBe(false);
  expect(first.gpuMs).toBeGreaterThan(0);
  expect(first.wasmMs).toBeGreaterThan(0);
  expect(first.device).toBe(first.gpuMs < first.wasmMs ? 'webgpu' : 'wasm');
  expect(second).toEqual({ ...first, remembered: true });
  expect(otherAdapter.remembered).toBe(false);
  expect(damaged.remembered).toBe(false);
});
