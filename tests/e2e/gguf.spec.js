// GGUF files in the page and the widget: "Open local files…" with one .gguf, `?model=` with a .gguf
// URL, the model menu's GGUF entries, and a widget whose data-model is a .gguf URL; each must generate the
// Node API's greedy text for the same file. The file is tests/fixtures/tiny-random-gguf/model-f32.gguf (the
// tiny-random model with a tokenizer of its 384 ids, gpt2tools.fixtures.make_tiny_gguf_fixture), served here on another
// origin than the page's, with the Hub's /REPO/resolve/main/FILE layout and CORS, as huggingface.co serves it;
// and tests/fixtures/tiny-gguf/model.gguf (every quantized type the engine runs). Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../tools/dev/serve.mjs';
import { controls, fillSettings, nodeText } from './page-controls.js';

const GGUF_PATH = fileURLToPath(new URL('../fixtures/tiny-random-gguf/model-f32.gguf', import.meta.url));
// A tiny model whose matrices use every type the engine runs (F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K).
const EVERY_TYPE_PATH = fileURLToPath(new URL('../fixtures/tiny-gguf/model.gguf', import.meta.url));
const GGUF_BYTES = readFileSync(GGUF_PATH);
const GGUF_FILE_PATH = '/tiny/tiny-random-GGUF/resolve/main/model-f32.gguf';
const ASSETS_ROOT = fileURLToPath(new URL('../../public/', import.meta.url));
const PROMPT = 'ROMEO: the end';
const GREEDY = { temperature: 0, topK: 40, topP: 1, maxNewTokens: 24 };
const READY = 90_000;

let modelServer;  // the GGUF file and the widget's host page, on localhost: { origin, requests, close() }
let assets;  // public/ (tools/dev/serve.mjs) on 127.0.0.1, for the widget: { origin, close() }

test.beforeAll(async () => {
  modelServer = await startModelServer();
  const server = await startServer({ port: 0, root: ASSETS_ROOT });
  assets = { origin: `http://127.0.0.1:${server.address().port}`, close: () => closeServer(server) };
});

test.afterAll(async () => {
  await Promise.all([modelServer?.close(), assets?.close()]);
});

async function startModelServer() {
  const requests = [];
  const server = createServer((request, response) => {
    const path = new URL(request.url, 'http://model').pathname;
    requests.push(path);
    if (path === GGUF_FILE_PATH) {
      return response.writeHead(200, { 'Access-Control-Allow-Origin': '*', 'Content-Length': GGUF_BYTES.length }).end(GGUF_BYTES);
    }
    if (path === '/widget.html') {
      response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      return response.end(widgetHostPage());
    }
    return response.writeHead(404, { 'Access-Control-Allow-Origin': '*' }).end('Not Found');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://localhost:${server.address().port}`;
  return { origin, requests, close: () => closeServer(server) };
}

// The documented embed snippet with a .gguf data-model, relative to the host page.
function widgetHostPage() {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Host: GGUF widget</title>
<link rel="icon" href="data:,"></head><body><h1>A post</h1>
<script src="${assets.origin}/gpt2-widget.js" data-model="${GGUF_FILE_PATH}" data-prompt="${PROMPT}"
  data-max-new-tokens="${GREEDY.maxNewTokens}" data-temperature="0" async></script></body></html>`;
}

function closeServer(server) {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
}

// The Node API's greedy text of the GGUF file at path: the page and the widget must produce exactly this text.
const nodeGreedyText = (path = GGUF_PATH) => nodeText(path, PROMPT, GREEDY);

async function generateText(page) {
  const { generate, output } = controls(page);
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: READY });
  return (await output.locator('.token').allTextContents()).join('');
}

test('"Open local files…" loads one .gguf file and generates the Node API\'s text', async ({ page }) => {
  await page.goto('/');
  const { model, generate, alert } = controls(page);
  await expect(generate).toBeEnabled({ timeout: READY });
  const fileChooser = page.waitForEvent('filechooser');
  await model.selectOption({ label: 'Open local files…' });
  await (await fileChooser).setFiles(GGUF_PATH);
  await expect(model).toHaveValue('loaded-local');
  await expect(page.getByText(/^Ready: Local files \(model-f32\.gguf, 590 KB\) · 2 layers, .* of fp32 weights, /))
    .toBeVisible({ timeout: READY });
  await expect(alert).toBeEmpty();
  expect(await generateText(page)).toBe(await nodeGreedyText());
});

test('a file with every quantized type runs in Chromium\'s wasm as in Node\'s: the same greedy text', async ({ page }) => {
  await page.goto('/');
  const { model, generate } = controls(page);
  await expect(generate).toBeEnabled({ timeout: READY });
  const fileChooser = page.waitForEvent('filechooser');
  await model.selectOption({ label: 'Open local files…' });
  await (await fileChooser).setFiles(EVERY_TYPE_PATH);
  await expect(page.getByText(/ of f16, fp32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k weights, /)).toBeVisible({ timeout: READY });
  expect(await generateText(page)).toBe(await nodeGreedyText(EVERY_TYPE_PATH));
});

test('?model= takes a .gguf URL on another origin: it loads, generates, and is cached', async ({ page }) => {
  const url = `${modelServer.origin}${GGUF_FILE_PATH}`;
  await page.goto(`/?model=${encodeURIComponent(url)}`);
  const { generate, alert } = controls(page);
  await expect(page.getByText(`Ready: Model at ${url} · 2 layers`)).toBeVisible({ timeout: READY });
  await expect(alert).toBeEmpty();
  expect(await generateText(page)).toBe(await nodeGreedyText());
  const requests = modelServer.requests.filter((path) => path === GGUF_FILE_PATH).length;
  await page.reload();
  await expect(generate).toBeEnabled({ timeout: READY });
  expect(modelServer.requests.filter((path) => path === GGUF_FILE_PATH)).toHaveLength(requests);
});

test('the model menu offers the Hub\'s GGUF files by name and size, and one loads from its Hub URL', async ({ page }) => {
  // The Hub, played by the fixture (whatever the entry's quantization: what is under test is the plumbing).
  const hubFile = 'https://huggingface.co/QuantFactory/gpt2-GGUF/resolve/main/gpt2.Q4_K_M.gguf';
  await page.route(hubFile, (route) => route.fulfill({
    status: 200, body: GGUF_BYTES, headers: { 'Access-Control-Allow-Origin': '*', 'Content-Type': 'application/octet-stream' },
  }));
  await page.goto('/');
  const { model, generate, alert } = controls(page);
  await expect(generate).toBeEnabled({ timeout: READY });
  const labels = await model.locator('optgroup[label="GGUF files (quantized)"] option').allTextContents();
  expect(labels).toContain('GPT-2 124M · gpt2.Q8_0.gguf (178 MB download)');
  expect(labels).toContain('GPT-2 124M · gpt2.Q4_K_M.gguf (113 MB download)');
  expect(labels.filter((label) => /Q2_K|Q3_K/.test(label))).toEqual([]);
  await model.selectOption({ label: 'GPT-2 124M · gpt2.Q4_K_M.gguf (113 MB download)' });
  await expect(page.getByText(/^Ready: GPT-2 124M · gpt2\.Q4_K_M\.gguf · 2 layers/)).toBeVisible({ timeout: READY });
  await expect(alert).toBeEmpty();
  expect(await generateText(page)).toBe(await nodeGreedyText());
});

test('a widget whose data-model is a .gguf URL generates the Node API\'s text', async ({ page }) => {
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${modelServer.origin}/widget.html`);
  const widget = page.locator('gpt2-widget');
  const generate = widget.getByRole('button', { name: 'Generate' });
  await expect(generate).toBeEnabled({ timeout: READY });
  await generate.click();
  await expect(widget.getByRole('status')).toHaveText(/^\d+ tokens/, { timeout: READY });
  expect(await widget.locator('.generated').textContent()).toBe(await nodeGreedyText());
  expect(errors).toEqual([]);
});
