// End-to-end tests of the page (tests/e2e) in the system Chromium, against tools/dev/serve.mjs.
import { defineConfig } from '@playwright/test';

// E2E_PORT: another free port, to run a second checkout's suites at the same time.
const PORT = Number(process.env.E2E_PORT) || 8181;

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
    launchOptions: {
      // Playwright cannot download its own browsers here.
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-quic',
        '--no-first-run',
      ],
    },
  },
  webServer: {
    command: `node tools/dev/serve.mjs --port ${PORT}`,
    url: `http://localhost:${PORT}/`,
    reuseExistingServer: false,
    timeout: 30_000,
  },
});
