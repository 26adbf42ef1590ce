// The page's Device setting on WebGPU, in Chromium on SwiftShader (the webgpu project of playwright.config.js): Auto
// keeps the model on the CPU on this software adapter, and GPU (WebGPU) runs it in the page's engine worker on it.
// Each GPU model load compiles the kernels (seconds on SwiftShader), so this file loads one.
import { fileURLToPath } from 'node:url';
import { expect, test } from './under_csp.js';
import { controls, fillSettings, nodeText } from './page-controls.js';

// the page's default entry, the bundled model's Q4_0 GGUF file
const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
// Greedy, with the fp32 KV cache a GPU session always keeps: the CPU engine's tokens (gpu_model.spec.js).
const GREEDY = { temperature: 0, topK: 40, topP: 0.95, maxNewTokens: 8, kvCache: 'fp32' };
const PROMPT = 'ROMEO:';
const MODEL_READY_TIMEOUT = 90_000;

// Prepended to the engine worker's module: the worker's WebGPU device is destroyed, as a driver reset would take it
// away, at its 14th readback: the first run's eight (its prompt and seven steps) and six of the second's.
const LOSE_DEVICE_IN_WORKER = `
const devices = [];
const requestDevice = GPUAdapter.prototype.requestDevice;
GPUAdapter.prototype.requestDevice = async function (...args) {
  const device = await requestDevice.apply(this, args);
  devices.push(device);
  return device;
};
let readbacks = 0;
const mapAsync = GPUBuffer.prototype.mapAsync;
GPUBuffer.prototype.mapAsync = function (...args) {
  if (++readbacks === 14) for (const device of devices) device.destroy();
  return mapAsync.apply(this, args);
};
`;

test('Auto stays on the CPU on SwiftShader and says why; GPU (WebGPU) reloads the model on it, which generates the CPU engine\'s text; a GPU lost mid-generation is named and the run ends on the CPU with that text', async ({ page }) => {
  // the Node API's text, computed while the page loads
  const expected = nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY);
  expected.catch(() => {});  // awaited below; a failure is reported there
  await page.route('**/js/lib/worker/worker.js', async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, body: LOSE_DEVICE_IN_WORKER + await response.text() });
  });
  await page.goto('/');
  const { alert, generate, output } = controls(page);
  const device = page.getByRole('combobox', { name: 'Device' });
  const status = page.getByText(/^Ready: /);
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(device).toHaveValue('auto');
  await expect(status).toHaveText(/ · on the CPU \(WebAssembly, relaxed SIMD\) because the WebGPU adapter google \(swiftshader\) is a software renderer$/);

  await device.selectOption({ label: 'GPU (WebGPU)' });
  await expect(status).toHaveText(/^Ready: Tiny Shakespeare \(bundled, offline\) · .* of q4_0 weights, .* · on the GPU: google \(swiftshader\)$/,
    { timeout: MODEL_READY_TIMEOUT });
  await expect(alert).toBeEmpty();
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  const text = (await output.locator('.token').allTextContents()).join('');
  expect(text.length).toBeGreaterThan(0);
  expect(text).toBe(await expected);
  await expect(alert).toBeEmpty();
  await expect(page.getByText(/ \(fp32\)$/)).toBeVisible();  // the KV cache memory: a GPU session's is fp32

  // the second run loses the device at its sixth readback
  await generate.click();
  await expect(alert).toHaveText(/^the GPU device was lost \(destroyed.*\): the run went on on the CPU \(WebAssembly\), where the model now runs\.$/,
    { timeout: MODEL_READY_TIMEOUT });
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  expect((await output.locator('.token').allTextContents()).join('')).toBe(await expected);
});

