// The page's controls, found by the accessible names that screen readers use too, and the Node API's text the page
// must match (shared by the page specs).
import { expect } from '@playwright/test';
import { loadModel } from '../../web/lib/gpt2.js';

export function controls(page) {
  return {
    prompt: page.getByRole('textbox', { name: 'Prompt' }),
    generate: page.getByRole('button', { name: 'Generate' }),
    stop: page.getByRole('button', { name: 'Stop' }),
    output: page.getByRole('region', { name: 'Output' }),
    alert: page.getByRole('alert'),
    model: page.getByRole('combobox', { name: 'Model' }),
    kvCache: page.getByRole('checkbox', { name: 'KV cache' }),
    kvStorage: page.getByRole('combobox', { name: 'KV cache storage' }),
    progress: page.getByRole('progressbar', { name: 'Model download' }),
  };
}

// Sets the page's generation settings. Only the settings given are touched; the others keep whatever the page
// shows (its defaults: temperature 0.8, top-k 40, top-p 0.95, 100 new tokens, no seed, KV cache on in int8, unless
// a remembered setting or an earlier call changed them), so each call names every setting its test relies on. The labels
// match exactly: each Compare strategies column has fields of its own, such as "Temperature (column 1)".
export async function fillSettings(page, { prompt, temperature, topK, topP, maxNewTokens, seed, useKVCache, kvCache }) {
  if (prompt !== undefined) await controls(page).prompt.fill(prompt);
  if (temperature !== undefined) await page.getByLabel('Temperature', { exact: true }).fill(String(temperature));
  if (topK !== undefined) await page.getByLabel('Top-k', { exact: true }).fill(String(topK));
  if (topP !== undefined) await page.getByLabel('Top-p', { exact: true }).fill(String(topP));
  if (maxNewTokens !== undefined) await page.getByLabel('Max new tokens').fill(String(maxNewTokens));
  if (seed !== undefined) await page.getByLabel('Seed', { exact: true }).fill(String(seed));
  if (useKVCache !== undefined) await controls(page).kvCache.setChecked(useKVCache);
  if (kvCache !== undefined) await controls(page).kvStorage.selectOption(kvCache);
}

// The Node API's continuation of prompt with settings (generate()'s options) by the model at path (loadModel's
// options: weights), computed once per test worker for each set of arguments, since several tests compare
// against it.
const nodeTexts = new Map(); // the arguments as JSON -> Promise of the text
export function nodeText(path, prompt, settings, loadOptions = {}) {
  const key = JSON.stringify([path, prompt, settings, loadOptions]);
  if (!nodeTexts.has(key)) {
    nodeTexts.set(key, (async () => {
      const model = await loadModel(path, loadOptions);
      try {
        let text = '';
        for await (const piece of model.generate(prompt, settings)) text += piece.text;
        return text;
      } finally {
        model.dispose();
      }
    })());
  }
  return nodeTexts.get(key);
}

// Opens the page at url, waits for its default model (readyTimeout ms at most), generates greedily; -> { status: the
// status line, text: the output }.
export async function generateGreedilyOnPage(page, url, { prompt, maxNewTokens, readyTimeout }) {
  await page.goto(url);
  const { generate, output } = controls(page);
  await expect(generate).toBeEnabled({ timeout: readyTimeout });
  await fillSettings(page, { prompt, temperature: 0, maxNewTokens });
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: readyTimeout });
  return {
    status: await page.getByRole('status').textContent(),
    text: (await output.locator('.token').allTextContents()).join(''),
  };
}

// Bytes malloc'ed in the engine that the page's models live in (its wasm heap in use), for leak checks; call it
// once a model has loaded. Read in the engine worker (web/lib/worker/worker.js): the page's oldest live worker, since the
// threaded engine's pthread workers are started by it (and cannot be asked: they block waiting for work). There,
// engine.js imported by its URL is the worker's own module instance, and loadEngine with the thread count that
// the worker resolves for the page (which asks for the default) returns the engine its models use, not a new one.
export async function engineHeapUsedBytes(page) {
  const [engineWorker] = page.workers();
  if (!engineWorker || !(await engineWorker.evaluate(isModuleWorker))) {
    throw new Error('page-controls.js: the page\'s oldest worker is not the engine worker (a module worker)');
  }
  const urls = ['/js/lib/engine/engine.js', '/js/lib/engine/threads.js'].map((path) => new URL(path, page.url()).href);
  return engineWorker.evaluate(async ([engineUrl, threadsUrl]) => {
    const [{ loadEngine }, { DEFAULT_THREADS, resolveThreads }] = await Promise.all([import(engineUrl), import(threadsUrl)]);
    return (await loadEngine({ threads: await resolveThreads(DEFAULT_THREADS) })).heapUsedBytes();
  }, urls);
}

// importScripts throws in module workers only, whatever its arguments (and imports nothing when given none).
function isModuleWorker() {
  try {
    globalThis.importScripts();
    return false;
  } catch {
    return true;
  }
}

// The page's console errors (the engine worker's console reaches the page's) and uncaught errors, as they come.
export function collectErrors(page) {
  const errors = [];
  page.on('console', (message) => message.type() === 'error' && errors.push(`console: ${message.text()}`));
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
  return errors;
}

// Counts the page's requests to its engine worker by type (generate, cancel, load, ...); call before page.goto.
// -> a function that returns the counts so far.
export async function countWorkerRequests(page) {
  await page.addInitScript(() => {
    window.__workerRequests = {};
    const postMessage = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (message, ...rest) {
      const type = message?.type ?? '?';
      window.__workerRequests[type] = (window.__workerRequests[type] ?? 0) + 1;
      return postMessage.call(this, message, ...rest);
    };
  });
  return () => page.evaluate(() => ({ ...window.__workerRequests }));
}
