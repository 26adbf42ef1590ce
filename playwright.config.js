// End-to-end tests of the page (tests/e2e) in the system Chromium, against tools/dev/serve.mjs.
import { defineConfig } from '@playwright/test';

// E2E_PORT: another free port, to run a second checkout's suites at the same time.
const PORT = Number(process.env.E2E_PORT) || 8181;

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
    trace: 'retain-on-failure',
  },
  projects: [
    // The page and the engine in wasm: no GPU, as on most of the machines that run the suites.
    { name: 'wasm', testIgnore: /\/gpu[^/]*\.spec\.js$/, use: { launchOptions: launchOptions(['--disable-gpu']) } },
    // The WebGPU kernels on SwiftShader, Chromium's CPU implementation of WebGPU: it needs the GPU process,
    // so no --disable-gpu.
    {
      name: 'webgpu',
      testMatch: /\/gpu[^/]*\.spec\.js$/,
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
