// Bad input and faults in the page: network faults (error statuses, CORS, cut connections,
// Content-Length mismatches, corrupt files, cancelled downloads, a full storage quota), a model too large for
// the wasm heap, and the controls under stress (double clicks, switching models mid-run, hostile prompts,
// memory over many runs). Faults come from `page.route` or from a fault server started here on 127.0.0.1
// (another origin than the page's), loaded with `?model=`. Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { controls, countWorkerRequests, fillSettings } from './page-controls.js';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const BUNDLED_LABEL = 'Tiny Shakespeare (bundled, offline)';
// The page's default model is the bundled model's one GGUF file; ?model= with the folder loads its safetensors.
const BUNDLED_GGUF = 'tiny-shakespeare.Q4_0.gguf';
const WEIGHTS_PATTERN = `**/models/tiny-shakespeare/${BUNDLED_GGUF}`;
const BUNDLED_FOLDER_PAGE = `/?model=${encodeURIComponent('models/tiny-shakespeare/')}`;
const READY = 90_000;
const files = Object.fromEntries(
  ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt'].map((name) => [name, readFileSync(BUNDLED + name)]),
);
const XL_FILE_BYTES = 6_431_829_964;  // openai-community/gpt2-xl model.safetensors
// Its fp32 weights in the engine (the file less the attn.bias mask buffers and the header), refused from config.json alone.
const XL_WEIGHT_BYTES = 6_230_444_800;
const XL_CONFIG = JSON.stringify({
  model_type: 'gpt2', vocab_size: 50257, n_positions: 1024, n_ctx: 1024, n_embd: 1600, n_head: 25, n_layer: 48,
  layer_norm_epsilon: 1e-5, bos_token_id: 50256, eos_token_id: 50256,
});
// A shape whose weights do not fit even as int8 (96 layers of width 4096): its int8 weights in the engine, in the
// relaxed-SIMD build that Chromium runs: the weights and their scales, and the rows' weight sums (4 bytes for each of
// its 3 589 201 matrix rows: engine/kernels/kernels.h).
const XXL_INT8_WEIGHT_BYTES = 19_584_819_524 + 4 * 3_589_201;
const XXL_CONFIG = JSON.stringify({ ...JSON.parse(XL_CONFIG), n_embd: 4096, n_head: 32, n_layer: 96 });

// The whole file runs with gc exposed and precise performance.memory, for the memory test (launch options can
// only be set per file). The other flags are playwright.config.js's.
test.use({
  launchOptions: {
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--disable-quic', '--no-first-run', '--js-flags=--expose-gc', '--enable-precise-memory-info'],
  },
});

// ---- the fault server: /<route>/<file>; faults[route] says what happens to model.safetensors ----
// (config.json too for 'nocors', which fails before anything else). A test may change faults[route] to
// "fix" it and retry.
const faults = {};
const slowDownloads = { started: 0, closedEarly: 0 };
let server;
let faultBase;

function handle(req, res) {
  const [, route, name] = req.url.split('/');
  const fault = faults[route];
  const cors = fault === 'nocors' ? {} : { 'Access-Control-Allow-Origin': '*' };
  const body = files[name];
  if (fault === undefined || !body) {
    res.writeHead(404, 'Not Found', cors);
    return res.end('Not Found');
  }
  if (fault === 'xl' && name === 'config.json') return res.writeHead(200, cors).end(XL_CONFIG);
  if (fault === 'xxl' && name === 'config.json') return res.writeHead(200, cors).end(XXL_CONFIG);
  if (name !== 'model.safetensors' || fault === 'ok' || fault === 'nocors') {
    return res.writeHead(200, { ...cors, 'Content-Length': body.length }).end(body);
  }
  if (fault === 'cut' || fault === 'long') {
    // cut: 90% then the connection is destroyed; long: the whole file, but Content-Length promises more.
    const declared = fault === 'long' ? body.length + 4096 : body.length;
    const sent = fault === 'long' ? body : body.subarray(0, Math.floor(body.length * 0.9));
    res.writeHead(200, { ...cors, 'Content-Length': declared });
    return res.write(sent, () => setTimeout(() => res.socket.destroy(), 20));
  }
  if (fault === 'corrupt') return res.writeHead(200, cors).end(Buffer.alloc(body.length, 0x5a));
  if (fault === 'xl' || fault === 'xxl') {
    res.writeHead(200, { ...cors, 'Content-Length': XL_FILE_BYTES, 'Content-Type': 'application/octet-stream' });
    return res.flushHeaders();  // and never a byte: the page must refuse from the size alone
  }
  if (fault === 'slow') {  // a trickle that takes minutes, for cancelling mid-download
    slowDownloads.started++;
    res.writeHead(200, { ...cors, 'Content-Length': body.length });
    let offset = 0;
    const timer = setInterval(() => res.write(body.subarray(offset, (offset += 16384))), 50);
    res.on('close', () => {
      clearInterval(timer);
      if (offset < body.length) slowDownloads.closedEarly++;
    });
    return undefined;
  }
  throw new Error(`unknown fault ${fault}`);
}

test.beforeAll(async () => {
  server = createServer(handle);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  faultBase = `http://127.0.0.1:${server.address().port}`;
});

test.afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

// A fresh route per test, so the Cache API of one test never serves another.
let routeCount = 0;
function faultFolder(fault) {
  const route = `r${++routeCount}x${Date.now().toString(36)}`;
  faults[route] = fault;
  return { route, url: `${faultBase}/${route}/`, fix: () => (faults[route] = 'ok') };
}

async function cachedUrls(page) {
  return page.evaluate(async () => {
    const urls = [];
    for (const name of await caches.keys()) {
      const cache = await caches.open(name);
      for (const request of await cache.keys()) urls.push(request.url);
    }
    return urls;
  });
}

async function expectGenerates(page) {
  const { generate, output } = controls(page);
  await fillSettings(page, { prompt: 'ROMEO:', temperature: 0.8, maxNewTokens: 6, useKVCache: true });
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: READY });
  expect((await output.locator('.token').allTextContents()).join('').length).toBeGreaterThan(0);
}

test.describe('network and storage faults', () => {
  test('HTTP 404 and 500 name the file and status; nothing is cached; a reload after the fix loads', async ({ page }) => {
    const { alert, generate, progress } = controls(page);
    for (const status of [404, 500]) {
      await page.route(WEIGHTS_PATTERN, (route) => route.fulfill({ status, body: 'no' }));
      await page.goto('/');
      await expect(alert).toContainText(`${BUNDLED_GGUF}: HTTP ${status}`, { timeout: READY });
      await expect(alert).not.toContainText('corrupt');
      await expect(progress).toBeHidden();
      await expect(generate).toBeDisabled();
      expect((await cachedUrls(page)).filter((url) => url.includes('tiny-shakespeare'))).toEqual([]);
      await page.unroute(WEIGHTS_PATTERN);
    }
    await page.reload();
    await expect(generate).toBeEnabled({ timeout: READY });
    await expect(alert).toBeEmpty();
    await expectGenerates(page);
  });

  test('a load error from the page\'s engine worker is a ModelLoadError with the file and kind', async ({ page }) => {
    await page.goto('/');
    const error = await page.evaluate(async (url) => {
      const { loadModel, ModelLoadError } = await import('/js/lib/gpt2.js');
      try {
        await loadModel(url);
        return null;
      } catch (e) {
        return { isModelLoadError: e instanceof ModelLoadError, name: e.name, file: e.file, kind: e.kind, message: e.message };
      }
    }, `${faultBase}/missing-folder/`);
    expect(error).toEqual({ isModelLoadError: true, name: 'ModelLoadError', file: 'config.json', kind: 'http',
      message: `config.json: HTTP 404 Not Found from ${faultBase}/missing-folder/config.json` });
  });

  test('a server without CORS headers is a network error that mentions CORS; retry after the fix', async ({ page }) => {
    const folder = faultFolder('nocors');
    const { alert, generate } = controls(page);
    await page.goto(`/?model=${encodeURIComponent(folder.url)}`);
    await expect(alert).toContainText('config.json: network error', { timeout: READY });
    await expect(alert).toContainText('CORS');
    await expect(generate).toBeDisabled();
    folder.fix();
    await page.reload();
    await expect(generate).toBeEnabled({ timeout: READY });
    await expect(page.getByText(/Ready: Model at/)).toBeVisible();
    await expectGenerates(page);
  });

  for (const [fault, what] of [['cut', 'a connection cut at 90%'], ['long', 'a Content-Length larger than the body']]) {
    test(`${what} is a network error, nothing is cached, a retry loads`, async ({ page }) => {
      const folder = faultFolder(fault);
      const { alert, generate, model } = controls(page);
      await page.goto(`/?model=${encodeURIComponent(folder.url)}`);
      await expect(alert).toContainText('model.safetensors: network error', { timeout: READY });
      await expect(alert).not.toContainText('corrupt');
      expect((await cachedUrls(page)).filter((url) => url.includes(folder.route))).toEqual([]);
      // Retry by choosing the model again (via another model, since the failed one is still selected).
      folder.fix();
      await model.selectOption({ label: BUNDLED_LABEL });
      await expect(generate).toBeEnabled({ timeout: READY });
      await model.selectOption({ label: `Model at ${folder.url}` });
      await expect(page.getByText(/Ready: Model at/)).toBeVisible({ timeout: READY });
      await expect(alert).toBeEmpty();
      await expectGenerates(page);
      expect((await cachedUrls(page)).filter((url) => url.includes(folder.route))).toHaveLength(8);  // the files and their digests
    });
  }

  test('after a failed load with no model in use, the Weights menu and the Model menu each retry it', async ({ page }) => {
    const folder = faultFolder('cut');
    const { alert, model } = controls(page);
    const weights = page.getByRole('combobox', { name: 'Weights' });
    await page.goto(`/?model=${encodeURIComponent(folder.url)}`);
    await expect(alert).toContainText('model.safetensors: network error', { timeout: READY });
    await expect(page.getByText('No model loaded: choose one in Settings.')).toBeVisible();
    folder.fix();
    await weights.selectOption('int8');
    await expect(page.getByText(/^Ready: Model at .* of int8 weights, /)).toBeVisible({ timeout: READY });
    await expect(alert).toBeEmpty();

    const failing = faultFolder('cut');
    await page.goto(`/?model=${encodeURIComponent(failing.url)}`);
    await expect(alert).toContainText('model.safetensors: network error', { timeout: READY });
    failing.fix();
    await model.selectOption({ label: `Model at ${failing.url}` });
    await expect(page.getByText(/^Ready: Model at .* of int8 weights, /)).toBeVisible({ timeout: READY });
    await expectGenerates(page);
  });

  test('a corrupt file is reported as corrupt, not as a network error, and is not cached', async ({ page }) => {
    const folder = faultFolder('corrupt');
    const { alert, model, generate } = controls(page);
    await page.goto(`/?model=${encodeURIComponent(folder.url)}`);
    await expect(alert).toContainText('model.safetensors: not a safetensors file', { timeout: READY });
    await expect(alert).not.toContainText('network');
    expect((await cachedUrls(page)).filter((url) => url.includes(folder.route))).toEqual([]);
    await model.selectOption({ label: BUNDLED_LABEL });
    await expect(generate).toBeEnabled({ timeout: READY });
  });

  test('choosing another model mid-download cancels the download (Stop stays disabled); nothing is cached', async ({ page }) => {
    const folder = faultFolder('slow');
    const { alert, model, generate, stop, progress } = controls(page);
    const closedBefore = slowDownloads.closedEarly;
    await page.goto(`/?model=${encodeURIComponent(folder.url)}`);
    await expect(page.getByText(/model\.safetensors: .* of /)).toBeVisible({ timeout: READY });
    await expect(progress).toBeVisible();
    // Nothing to stop but the download, which is cancelled by choosing another model, not by Stop.
    await expect(stop).toBeDisabled();
    await expect(generate).toBeDisabled();
    await model.selectOption({ label: BUNDLED_LABEL });
    await expect(generate).toBeEnabled({ timeout: READY });
    await expect(alert).toBeEmpty();
    await expect(page.getByText(/Ready: Tiny Shakespeare/)).toBeVisible();
    await expect.poll(() => slowDownloads.closedEarly).toBe(closedBefore + 1);
    expect((await cachedUrls(page)).filter((url) => url.includes(folder.route))).toEqual([]);
    await expectGenerates(page);
  });

  // The folder's four files: the first put (config.json) goes through and the rest fail, leaving the folder
  // half cached; the GGUF file (the default model): its only put fails.
  const quotaCases = [
    { model: 'the bundled safetensors folder', path: BUNDLED_FOLDER_PAGE, allowedPuts: 1 },
    { model: 'the bundled GGUF file', path: '/', allowedPuts: 0 },
  ];
  for (const { model, path, allowedPuts } of quotaCases) {
    test(`a full storage quota (${model}): the model still loads and runs; nothing partial is cached`, async ({ page }) => {
      // The Cache API is used in the engine worker, which addInitScript does not reach: the worker's module is
      // served with a stub in front that lets the first allowedPuts puts through and then rejects like a full quota.
      await page.route('**/js/lib/worker/worker.js', async (route) => {
        const response = await route.fetch();
        const stub = `{
          let puts = 0;
          const put = Cache.prototype.put;
          Cache.prototype.put = function (...args) {
            if (++puts > ${allowedPuts}) return Promise.reject(new DOMException('The quota has been exceeded.', 'QuotaExceededError'));
            return put.apply(this, args);
          };
        }\n`;
        await route.fulfill({ response, body: stub + (await response.text()) });
      });
      const messages = [];
      page.on('console', (message) => messages.push(`${message.type()}: ${message.text()}`));
      page.on('pageerror', (error) => messages.push(`pageerror: ${error.message}`));
      const { alert, generate } = controls(page);
      await page.goto(path);
      await expect(generate).toBeEnabled({ timeout: READY });
      await expect(alert).toBeEmpty();
      await expectGenerates(page);
      const cached = (await cachedUrls(page)).filter((url) => url.includes('tiny-shakespeare'));
      expect(cached.length).toBeLessThanOrEqual(allowedPuts);
      // What was stored is whole.
      const lengths = await page.evaluate(async (urls) => {
        const cache = await caches.open('gpt2-wasm-models-v1');
        return Promise.all(urls.map(async (url) => (await (await cache.match(url)).arrayBuffer()).byteLength));
      }, cached);
      for (const [i, url] of cached.entries()) expect(lengths[i]).toBe(files[url.split('/').at(-1)].length);
      // One console warning (the worker's console reaches the page's), no error.
      expect(messages.filter((text) => /quota|cache/i.test(text)))
        .toEqual(['warning: gpt2-wasm: could not cache the model files: The quota has been exceeded.']);
      expect(messages.filter((text) => text.startsWith('pageerror:'))).toEqual([]);
      // A reload still works with what the cache holds.
      await page.reload();
      await expect(generate).toBeEnabled({ timeout: READY });
      await expectGenerates(page);
    });
  }
});

test('a model whose fp32 weights do not fit loads as int8 by itself, and the page says so', async ({ page }) => {
  const folder = faultFolder('xl');
  const { alert, model, generate } = controls(page);
  const weights = page.getByRole('combobox', { name: 'Weights' });
  await page.goto(`/?model=${encodeURIComponent(folder.url)}`);
  await expect(weights).toHaveValue('fp32');  // the setting: what the first try loads with
  // The first try refuses the fp32 weights from config.json alone; the second downloads for int8 (the test's
  // server then sends nothing, so the load stays in progress).
  const size = `${(XL_WEIGHT_BYTES / 1e9).toFixed(1)} GB`;
  await expect(page.getByText(`Loading Model at ${folder.url} (int8 weights: its fp32 weights, ${size}, do not fit in WebAssembly's memory)…`))
    .toBeVisible({ timeout: READY });
  await expect(alert).toBeEmpty();
  await expect(weights).toBeDisabled();
  await expect(weights).toHaveValue('int8');
  await expect(page.getByText(`Its fp32 weights (${size}) do not fit in WebAssembly's memory, so it runs as int8.`)).toBeVisible();
  await model.selectOption({ label: BUNDLED_LABEL });
  await expect(generate).toBeEnabled({ timeout: READY });
  await expectGenerates(page);
});

test('a model too large for the wasm heap even as int8 reports "out of memory" with the size; the page recovers', async ({ page }) => {
  const folder = faultFolder('xxl');
  const { alert, model, generate } = controls(page);
  await page.goto(`/?model=${encodeURIComponent(folder.url)}`);
  await expect(alert).toContainText('out of memory', { timeout: READY });
  await expect(alert).toContainText(String(XXL_INT8_WEIGHT_BYTES));
  await expect(alert).toContainText('4 GB');
  await expect(generate).toBeDisabled();
  await model.selectOption({ label: BUNDLED_LABEL });
  await expect(generate).toBeEnabled({ timeout: READY });
  await expect(alert).toBeEmpty();
  await expectGenerates(page);
});

test.describe('controls under stress', () => {
  test('a double click on Generate runs once; Generate while generating does nothing', async ({ page }) => {
    const workerRequests = await countWorkerRequests(page);
    const { generate, stop, prompt } = controls(page);
    await page.goto('/');
    await expect(generate).toBeEnabled({ timeout: READY });
    await fillSettings(page, { prompt: 'ROMEO:', temperature: 0.8, maxNewTokens: 60, seed: 3, useKVCache: true });
    await generate.dblclick();
    await expect(generate).toBeEnabled({ timeout: READY });
    expect((await workerRequests()).generate).toBe(1);

    // A long run; then every way of asking for another one while it runs.
    await fillSettings(page, { temperature: 0.8, maxNewTokens: 240, useKVCache: false });
    await generate.click();
    await expect(generate).toBeDisabled();
    await prompt.press('Control+Enter');
    await page.evaluate(() => document.getElementById('generate-form').requestSubmit());
    await generate.click({ force: true }).catch(() => {});
    expect((await workerRequests()).generate).toBe(2);
    await stop.click();
    await expect(generate).toBeEnabled();
    expect((await workerRequests()).cancel).toBeGreaterThanOrEqual(1);
  });

  test('switching models mid-generation stops the run first', async ({ page }) => {
    const folder = faultFolder('ok');
    const workerRequests = await countWorkerRequests(page);
    const { generate, stop, output, model, alert } = controls(page);
    await page.goto(`/?model=${encodeURIComponent(folder.url)}`);
    await expect(generate).toBeEnabled({ timeout: READY });
    await fillSettings(page, { prompt: 'ROMEO:', temperature: 0.8, maxNewTokens: 240, useKVCache: false });
    await generate.click();
    await expect(output.locator('.token').nth(2)).toBeAttached({ timeout: READY });
    await model.selectOption({ label: BUNDLED_LABEL });
    await expect(stop).toBeDisabled({ timeout: 2_000 });
    expect((await workerRequests()).cancel).toBeGreaterThanOrEqual(1);
    const tokens = await output.locator('.token').count();
    expect(tokens).toBeLessThan(240);
    await expect(page.getByText('stopped', { exact: true })).toBeVisible();
    await expect(page.getByText(/Ready: Tiny Shakespeare/)).toBeVisible({ timeout: READY });
    expect(await output.locator('.token').count()).toBe(tokens);
    await expect(alert).toBeEmpty();
    await expectGenerates(page);
  });

  test('fifty HTML/JS payloads in the prompt are shown as text and never run', async ({ page }) => {
    const dialogs = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      dialog.dismiss();
    });
    const { generate, output } = controls(page);
    await page.goto('/');
    await expect(generate).toBeEnabled({ timeout: READY });
    await fillSettings(page, { temperature: 0, maxNewTokens: 1, useKVCache: true });
    const mark = (i) => `window.__pwned=(window.__pwned||[]).concat(${i})`;
    const templates = [
      (i) => `<img src=x onerror="${mark(i)}">`,
      (i) => `<script>${mark(i)}</script>`,
      (i) => `<a href="javascript:${mark(i)}">x</a>`,
      (i) => `<svg onload="${mark(i)}"><circle r=1 /></svg>`,
      (i) => `<iframe srcdoc="<script>parent.${mark(i)}</script>"></iframe>`,
      (i) => `"><body onload="${mark(i)}">`,
      (i) => `<details open ontoggle="${mark(i)}">`,
      (i) => `<style>@import 'javascript:${mark(i)}'</style>`,
      (i) => `<math><mtext><table><mglyph><style><img src=x onerror="${mark(i)}">`,
      (i) => `javascript:${mark(i)}//<div onmouseover="${mark(i)}">&lt;b&gt;&amp;</div>`,
    ];
    const elementsBefore = await page.evaluate(() => document.querySelectorAll('*').length);
    for (let i = 0; i < 50; i++) {
      const payload = `${templates[i % templates.length](i)} #${i}`;
      await page.evaluate((text) => {
        const prompt = document.getElementById('prompt');
        prompt.value = text;
        prompt.dispatchEvent(new Event('input', { bubbles: true }));
      }, payload);
      await generate.click();
      await expect(generate).toBeEnabled({ timeout: READY });
      await expect(output.locator('.prompt-text')).toHaveText(payload);
      await output.hover();  // mouse over the output (onmouseover payloads)
    }
    await page.waitForTimeout(500);  // let any image error or load event fire
    expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
    expect(dialogs).toEqual([]);
    // The page's own disclosures (the settings' help, Advanced decoding, Compare strategies, Inside the model) are its
    // only <details>, and the Inside the model view's attention lines its only <svg>.
    await expect(page.locator('img, svg:not(#inside-view svg), iframe, details:not(aside details.help, #advanced-decoding, #compare-view, #inside-view), math, body script:not([src]), body style, a[href^="javascript"]')).toHaveCount(0);
    // Only the output's text spans changed: no element was added elsewhere.
    expect(await page.evaluate(() => document.querySelectorAll('*').length)).toBeLessThanOrEqual(elementsBefore + 5);
  });
});

test.describe('memory over many runs', () => {
  test('200 generations keep the page\'s JS heap flat (< 10 MB growth)', async ({ page }) => {
    const { generate } = controls(page);
    await page.goto('/');
    await expect(generate).toBeEnabled({ timeout: READY });
    await fillSettings(page, { prompt: 'ROMEO:', temperature: 0.8, maxNewTokens: 3, useKVCache: true });
    // The runs are driven inside the page, waiting for the Generate button to come back after each.
    const runs = (count) => page.evaluate(async (n) => {
      const button = document.getElementById('generate');
      const until = (condition) => new Promise((resolve) => {
        const check = () => (condition() ? resolve() : setTimeout(check, 2));
        check();
      });
      for (let i = 0; i < n; i++) {
        button.click();  // submits at once: the button is disabled before click() returns
        await until(() => !button.disabled);
      }
    }, count);
    const heap = () => page.evaluate(async () => {
      for (let i = 0; i < 3; i++) {
        window.gc();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return performance.memory.usedJSHeapSize;
    });
    await runs(20);  // warm-up
    const before = await heap();
    await runs(200);
    const after = await heap();
    expect(after - before).toBeLessThan(10e6);
    await expect(controls(page).alert).toBeEmpty();
    expect(await controls(page).output.locator('.token').count()).toBeGreaterThan(0);
  });
});
