// When the wasm engine aborts (a genuine out-of-memory in the browser), nothing is left
// silently dead. The engine worker's models load themselves again in a new worker, from the Cache API; the page
// and the widget say what happened; if that reload fails, one action loads the model again.
// The crash is a wasm trap raised inside the engine worker's own engine.js (WasmEngine.call, the path every
// trap and Emscripten abort takes), since no input is known to abort the engine any more; in the widget, its
// worker's answer to such a trap (crashWidgetEngine).
import { test, expect } from './under_csp.js';
import { fileURLToPath } from 'node:url';
import { collectErrors, controls, fillSettings, nodeText } from './page-controls.js';

const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const WEIGHTS_PATTERN = '**/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf';
const MODEL_LABEL = 'Tiny Shakespeare (bundled, offline)';
const TRAP = 'memory access out of bounds';
const PROMPT = 'ROMEO:\nWhat light';
const GREEDY = { temperature: 0, topK: 40, topP: 0.95, maxNewTokens: 30 };
const MODEL_READY_TIMEOUT = 90_000;

// Makes the engine of the page's engine worker trap, as a wasm abort does: the same engine.js module instance
// as the worker's (imported there by its URL), with the thread count the worker resolved for the page. The
// engine worker is the page's one module worker; the threaded engine's pthread workers are classic ones, and an
// idle one never answers (it waits on an atomic), so each worker gets a few seconds to answer.
async function crashEngine(page) {
  const [engineUrl, threadsUrl] = ['/js/lib/engine/engine.js', '/js/lib/engine/threads.js'].map((path) => new URL(path, page.url()).href);
  const answers = page.workers().map((worker) => Promise.race([
    worker.evaluate(trapIfEngineWorker, { engineUrl, threadsUrl, trap: TRAP }).catch(() => 0),
    new Promise((resolve) => setTimeout(() => resolve(0), 3000)),
  ]));
  expect((await Promise.all(answers)).reduce((sum, crashed) => sum + crashed, 0)).toBe(1);
}

// In a worker: -> 1 after making its engine trap if it is a module worker, else 0.
async function trapIfEngineWorker({ engineUrl, threadsUrl, trap }) {
  try {
    globalThis.importScripts();  // throws in module workers only, whatever its arguments
    return 0;
  } catch {
    const [{ loadEngine }, { DEFAULT_THREADS, resolveThreads }] = await Promise.all([import(engineUrl), import(threadsUrl)]);
    const engine = await loadEngine({ threads: await resolveThreads(DEFAULT_THREADS) });
    try {
      engine.call(() => {
        throw new WebAssembly.RuntimeError(trap);
      });
    } catch (error) {
      if (error.name !== 'EngineAbortedError') throw error;
    }
    return 1;
  }
}

// The widget's engine worker runs the code its one script carries (tools/dev/bundle_web.mjs), so importing engine.js
// by URL does not reach its engine: its next generate request gets the answer a trapped engine's worker gives
// (worker.js: a 'crashed' message), and from there the widget recovers as from a real trap.
async function crashWidgetEngine(page) {
  const answers = page.workers().map((worker) => Promise.race([
    worker.evaluate(crashNextGenerationIfEngineWorker, TRAP).catch(() => 0),
    new Promise((resolve) => setTimeout(() => resolve(0), 3000)),
  ]));
  expect((await Promise.all(answers)).reduce((sum, crashed) => sum + crashed, 0)).toBe(1);
}

// In a worker: -> 1 after making its next generate request answer as a crash if it is a module worker, else 0.
function crashNextGenerationIfEngineWorker(trap) {
  try {
    globalThis.importScripts();  // throws in module workers only, whatever its arguments
    return 0;
  } catch {
    const handle = self.onmessage;
    self.onmessage = (event) => (event.data.type === 'generate' ? self.postMessage({ type: 'crashed', reason: trap }) : handle(event));
    return 1;
  }
}

function countRequests(page, pattern) {
  const counter = { count: 0 };
  page.on('request', (request) => pattern.test(request.url()) && counter.count++);
  return counter;
}

async function generatedText(page) {
  return (await controls(page).output.locator('.token').allTextContents()).join('');
}

test('page: after an engine crash the model is loaded again from the cache and generates as before', async ({ page }) => {
  const errors = collectErrors(page);
  const weightRequests = countRequests(page, /tiny-shakespeare\.Q4_0\.gguf$/);
  const { generate, alert } = controls(page);
  await page.goto('/');
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  const expected = await nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY);
  const downloads = weightRequests.count;

  await crashEngine(page);
  await generate.click();
  await expect(alert).toHaveText(`The engine crashed (${TRAP}) and was restarted; ${MODEL_LABEL} was loaded again: Generate to continue.`,
    { timeout: MODEL_READY_TIMEOUT });
  expect(weightRequests.count).toBe(downloads);  // from the Cache API, not the network

  await expect(generate).toBeEnabled();
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  expect(await generatedText(page)).toBe(expected);
  await expect(alert).toBeEmpty();
  expect(errors).toEqual([]);
});

test('page: if loading again fails, the page says why and one button loads the model', async ({ page }) => {
  const { generate, alert } = controls(page);
  await page.goto('/');
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  // Neither the cache nor the network has the file any more.
  await page.evaluate(() => caches.keys().then((names) => Promise.all(names.map((name) => caches.delete(name)))));
  await page.route(WEIGHTS_PATTERN, (route) => route.abort('connectionrefused'));

  await crashEngine(page);
  await generate.click();
  const reload = page.getByRole('button', { name: `Load ${MODEL_LABEL} again` });
  await expect(reload).toBeVisible({ timeout: MODEL_READY_TIMEOUT });
  await expect(alert).toContainText(`The engine crashed (${TRAP}) and was restarted, and ${MODEL_LABEL} could not be loaded again: `);
  await expect(alert).toContainText('network error');
  await expect(generate).toBeDisabled();

  await page.unroute(WEIGHTS_PATTERN);
  await reload.click();
  await expect(alert).toHaveText(`${MODEL_LABEL} was loaded again: Generate to continue.`, { timeout: MODEL_READY_TIMEOUT });
  await expect(generate).toBeEnabled();
  await expect(reload).toBeHidden();
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  expect(await generatedText(page)).toBe(await nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY));
});

test('widget: after an engine crash the widget says so, loads the model again and generates', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto('/embed.html');
  const widget = page.locator('gpt2-widget').first();
  const generate = widget.getByRole('button', { name: 'Generate' });
  await expect(widget.getByText(/^Ready · /)).toBeVisible({ timeout: MODEL_READY_TIMEOUT });

  await crashWidgetEngine(page);
  await generate.click();
  await expect(widget.getByRole('alert')).toHaveText(
    `The engine crashed (${TRAP}) and was restarted; the model was loaded again: Generate to continue.`, { timeout: MODEL_READY_TIMEOUT });
  await generate.click();
  await expect(widget.getByText(/tokens? · /)).toBeVisible({ timeout: MODEL_READY_TIMEOUT });
  await expect(widget.getByRole('alert')).toBeHidden();
  expect(errors).toEqual([]);
});
