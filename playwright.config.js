// End-to-end tests of the page (tests/e2e) in the system Chromium, against tools/dev/serve.mjs.
import { defineConfig } from '@playwright/test';

// E2E_PORT: another free port, to run a second checkout's suites (or a second run's) at the same time.
const PORT = Number(process.env.E2E_PORT) || 8181;

// The webgpu project's spec files: all of them, or with E2E_WEBGPU_SPECS 'model' gpu_model.spec.js alone and
// 'others' the rest (tools/dev/test_in_two_lanes.sh runs the two parts in its two lanes).
const GPU_SPECS = /\/gpu[^/]*\.spec\.js$/;
const GPU_MODEL_SPEC = /\/gpu_model\.spec\.js$/;
const webgpuSpecs = { model: { testMatch: GPU_MODEL_SPEC }, others: { testMatch: GPU_SPECS, testIgnore: GPU_MODEL_SPEC } };
const WEBGPU_SPECS = webgpuSpecs[process.env.E2E_WEBGPU_SPECS] ?? { testMatch: GPU_SPECS };

// The browser's launch options, with args on top of the common ones.
function launchOptions(args) {
  return {
    // Playwright cannot download its own browsers here.
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      ...args,
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-quic',
      '--no-first-run',
    ],
  };
}

export default defineConfig({
  testDir: 'tests/e2e',
  // The machine is shared and small: one worker, and room for compiling the wasm and loading models
  // while other jobs compete for the CPU.
  workers: 1,
  // A test.only left in by mistake would make CI run that test alone and pass.
  forbidOnly: Boolean(process.env.CI),
  timeout: 240_000,
  expect: { timeout: 30_000 },
  reporter: [['list']],
  use: {
    baseURL: `http://localhost:${PORT}/`,
    browserName: 'chromium',
    // Recording a trace of every test (snapshots of the page at each step and a screencast, thrown away when the
    // test passes) made the suites take 1.4 times as long on the 2-core machines: E2E_TRACE=1 records them,
    // keeping those of the tests that fail (npx playwright show-trace test-results/…/trace.zip). Without it a
    // failing test leaves a screenshot of its page.
    trace: process.env.E2E_TRACE ? 'retain-on-failure' : 'off',
    screenshot: 'only-on-failure',
  },
  projects: [
    // The page and the engine in wasm: no GPU, as on most of the machines that run the suites.
    { name: 'wasm', testIgnore: GPU_SPECS, use: { launchOptions: launchOptions(['--disable-gpu']) } },
    // The WebGPU kernels on SwiftShader, Chromium's CPU implementation of WebGPU: it needs the GPU process,
    // so no --disable-gpu.
    {
      name: 'webgpu',
      ...WEBGPU_SPECS,
      use: { launchOptions: launchOptions(['--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader']) },
    },
  ],
  webServer: {
    command: `node tools/dev/serve.mjs --port ${PORT}`,
    url: `http://localhost:${PORT}/`,
    reuseExistingServer: false,
    timeout: 30_000,
  },
});
