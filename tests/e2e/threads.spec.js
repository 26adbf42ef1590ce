// Threads in the page: served with COOP/COEP (tools/dev/serve.mjs, playwright.config.js) the page is cross-origin
// isolated, runs the threaded engine (public/wasm/gpt2-mt.*) on the machine's cores and generates the same greedy
// text as one thread; served without those headers (--no-isolation) it falls back to the single-thread engine and
// works the same. (The widget on hosts with and without isolation: widget.spec.js.) Run after tools/dev/build.sh.
import { test, expect } from './under_csp.js';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../tools/dev/serve.mjs';
import { loadModel } from '../../web/lib/gpt2.js';
import { MAX_AUTO_THREADS } from '../../web/lib/engine/threads.js';
import { controls, generateGreedilyOnPage } from './page-controls.js';

const PUBLIC = fileURLToPath(new URL('../../public/', import.meta.url));
// The page's default model: the bundled model's Q4_0 GGUF file.
const BUNDLED_MODEL_FILE = `${PUBLIC}models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf`;
const PROMPT = 'ROMEO:\nWhat light';
const MAX_NEW_TOKENS = 40;
const MODEL_READY_TIMEOUT = 90_000;

// The Node API's single-thread greedy continuation of PROMPT.
let singleThreadTextPromise = null;
function singleThreadText() {
  singleThreadTextPromise ??= (async () => {
    const model = await loadModel(BUNDLED_MODEL_FILE, { threads: 1 });
    try {
      let text = '';
      for await (const piece of model.generate(PROMPT, { temperature: 0, maxNewTokens: MAX_NEW_TOKENS })) text += piece.text;
      return text;
    } finally {
      model.dispose();
    }
  })();
  return singleThreadTextPromise;
}

// Opens the page at url, waits for the bundled model, generates greedily; -> { isolated, status, text }.
async function generateOnPage(page, url) {
  const { status, text } = await generateGreedilyOnPage(page, url,
    { prompt: PROMPT, maxNewTokens: MAX_NEW_TOKENS, readyTimeout: MODEL_READY_TIMEOUT });
  return {
    isolated: await page.evaluate(() => crossOriginIsolated),
    cores: await page.evaluate(() => navigator.hardwareConcurrency),
    status,
    text,
  };
}

test('a cross-origin-isolated page runs on the cores with the threaded engine, same text as one thread', async ({ page }) => {
  const { isolated, cores, status, text } = await generateOnPage(page, '/');
  expect(isolated).toBe(true);
  const threads = Math.min(cores, 8);
  expect(threads).toBeGreaterThan(1);  // this test needs a machine with at least two cores
  expect(status).toMatch(new RegExp(`^Ready: Tiny Shakespeare .*, ${threads} threads · on the CPU \\(WebAssembly, relaxed SIMD\\)`));
  expect(text.length).toBeGreaterThan(0);
  expect(text).toBe(await singleThreadText());
});

test('without COOP/COEP the page falls back to one thread and generates the same text', async ({ page }) => {
  const server = await startServer({ port: 0, root: PUBLIC, isolation: false });
  try {
    const { isolated, status, text } = await generateOnPage(page, `http://127.0.0.1:${server.address().port}/`);
    expect(isolated).toBe(false);
    expect(status).toMatch(/^Ready: Tiny Shakespeare .*, 1 thread \(the page is not cross-origin isolated\) · on the CPU \(WebAssembly, relaxed SIMD\)/);
    expect(text).toBe(await singleThreadText());
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

// Runs code in the page's engine worker before the worker's own module (web/lib/worker/worker.js, which it imports
// first), where the API decides the threads; addInitScript does not reach workers.
async function beforeEngineWorker(page, code) {
  await page.route('**/js/lib/worker/worker.js', async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, body: `${code}\n${await response.text()}` });
  });
}

test('an isolated page in a browser that gives no SharedArrayBuffer (WebKit) runs one thread and says why', async ({ page }) => {
  await beforeEngineWorker(page, 'delete globalThis.SharedArrayBuffer;');
  const { isolated, status, text } = await generateOnPage(page, '/');
  expect(isolated).toBe(true);
  expect(status).toMatch(/^Ready: Tiny Shakespeare .*, 1 thread \(the browser gives no SharedArrayBuffer\) · on the CPU \(WebAssembly, relaxed SIMD\)/);
  expect(text).toBe(await singleThreadText());
});

test('a browser that reports more cores than the machine has (WebKit: 4 on 2) gets no more threads than the cores', async ({ page }) => {
  const cores = availableParallelism();
  expect(cores).toBeLessThan(MAX_AUTO_THREADS);  // this test needs a machine with fewer cores than the most 'auto' takes
  await beforeEngineWorker(page, `Object.defineProperty(navigator, 'hardwareConcurrency', { value: ${2 * cores} });`);
  const { status, text } = await generateOnPage(page, '/');
  // the cores as measured: all of them on a machine without other work (the test above), fewer on a busy one
  const threads = Number(/, (\d+) threads? /.exec(status)?.[1]);
  expect(threads, status).toBeGreaterThanOrEqual(1);
  expect(threads, status).toBeLessThanOrEqual(cores);
  expect(text).toBe(await singleThreadText());
});

test('changing the device to the CPU keeps the thread count', async ({ page }) => {
  await page.goto('/');
  const { generate } = controls(page);
  const status = page.getByText(/^Ready: /);
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  const threads = /, (\d+) threads? /.exec(await status.textContent())[1];
  expect(Number(threads)).toBeGreaterThan(1);  // this test needs a machine with at least two cores
  await page.getByRole('combobox', { name: 'Device' }).selectOption({ label: 'CPU (WebAssembly)' });
  await expect(status).toHaveText(new RegExp(`^Ready: Tiny Shakespeare .*, ${threads} threads · on the CPU \\(WebAssembly, relaxed SIMD\\)$`),
    { timeout: MODEL_READY_TIMEOUT });
});
