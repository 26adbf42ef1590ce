// Downloads that survive and cached copies that are checked, in the page with Chromium's own fetch and Cache
// API: a download whose connection drops mid-file resumes with a Range request; a cached copy damaged since it
// was stored is found out on reload and downloaded again; the progress line shows speed and time left; a full
// quota is said in the status line. Downloads that misbehave come from a server started here on 127.0.0.1
// (another origin than the page's), loaded with `?model=`. Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { controls, fillSettings } from './page-controls.js';
import { sendRange } from '../js/file_server.js';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const BUNDLED_FOLDER_PAGE = `/?model=${encodeURIComponent('models/tiny-shakespeare/')}`;
const CACHE_NAME = 'gpt2-wasm-models-v1';  // web/lib/loading/model_cache.js
const READY = 90_000;
const files = Object.fromEntries(
  ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt'].map((name) => [name, readFileSync(BUNDLED + name)]),
);
const WEIGHTS = files['model.safetensors'];
const HALF = Math.floor(WEIGHTS.length / 2);
const CORS = { 'Access-Control-Allow-Origin': '*' };

// ---- the server: /<route>/<file>, where route is a kind below and a number ----
const requests = [];  // { route, name, method, range }
let server;
let serverBase;

// How model.safetensors is served, by kind; n: the number of the request for it on its route (1 for the first).
// Content-Range and ETag are not exposed to the page (no Access-Control-Expose-Headers): the page resumes on
// Content-Length alone. No preflight is answered: `Range: bytes=N-` is a CORS-safelisted header, and a resume
// that needed a preflight would fail here, as it could on the Hub.
const WEIGHT_ANSWERS = {
  // Drops the first connection at 50%, then honours Range.
  drop: (req, res, body, n) => sendRange(req, res, body, { cutAt: n === 1 ? HALF : null, headers: CORS }),
  // 64 KiB per 50 ms (about 1.3 MB/s): a download long enough to show its speed.
  slow: (req, res, body) => {
    res.writeHead(200, { ...CORS, 'Content-Length': body.length });
    let offset = 0;
    const timer = setInterval(() => res.write(body.subarray(offset, (offset += 65536))), 50);
    res.on('close', () => clearInterval(timer));
  },
};

function handle(req, res) {
  const [, route, name] = req.url.split('/');
  requests.push({ route, name, method: req.method, range: req.headers.range ?? null });
  const kind = route?.replace(/\d+$/, '');
  const body = files[name];
  if (!WEIGHT_ANSWERS[kind] || !body) return res.writeHead(404, CORS).end('Not Found');
  if (name !== 'model.safetensors') return res.writeHead(200, { ...CORS, 'Content-Length': body.length }).end(body);
  const n = requests.filter((request) => request.route === route && request.name === name).length;
  return WEIGHT_ANSWERS[kind](req, res, body, n);
}

test.beforeAll(async () => {
  server = createServer(handle);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  serverBase = `http://127.0.0.1:${server.address().port}`;
});

test.afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

let routeCount = 0;
function newRoute(kind) {
  const route = `${kind}${++routeCount}`;
  return { route, url: `${serverBase}/${route}/` };
}

// Greedy text, the same for the same weights.
async function greedyText(page) {
  const { generate, output } = controls(page);
  await fillSettings(page, { prompt: 'ROMEO:', temperature: 0, maxNewTokens: 12, useKVCache: true });
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: READY });
  const text = (await output.locator('.token').allTextContents()).join('');
  expect(text.length).toBeGreaterThan(0);
  return text;
}

// The SHA-256 of the page's cached copy of url (hex), or null.
function cachedSha256(page, url) {
  return page.evaluate(async ([cacheName, key]) => {
    const response = await (await caches.open(cacheName)).match(key);
    if (!response) return null;
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', await response.arrayBuffer()));
    return Array.from(digest, (byte) => byte.toString(16).padStart(2, '0')).join('');
  }, [CACHE_NAME, url]);
}

const WEIGHTS_SHA256 = createHash('sha256').update(WEIGHTS).digest('hex');

test('a connection dropped mid-file resumes with a Range request from where it stopped; the model loads, generates and is cached whole', async ({ page }) => {
  const { route, url } = newRoute('drop');
  const { alert, generate } = controls(page);
  await page.goto(`/?model=${encodeURIComponent(url)}`);
  await expect(generate).toBeEnabled({ timeout: READY });
  await expect(alert).toBeEmpty();
  const weightRequests = requests.filter((request) => request.route === route && request.name === 'model.safetensors');
  expect(weightRequests.map((request) => request.method)).toEqual(['GET', 'GET']);  // and no preflight
  expect(weightRequests[0].range).toBeNull();
  const [, resumedAt] = /^bytes=(\d+)-$/.exec(weightRequests[1].range) ?? [];
  expect(Number(resumedAt)).toBeGreaterThan(0);
  expect(Number(resumedAt)).toBeLessThanOrEqual(HALF);
  await greedyText(page);
  expect(await cachedSha256(page, `${url}model.safetensors`)).toBe(WEIGHTS_SHA256);
});

test('a cached model.safetensors with one byte changed is found out on reload and downloaded again, alone; the model generates as before', async ({ page }) => {
  const fileRequests = { 'model.safetensors': 0, 'config.json': 0 };
  page.on('request', (request) => {
    const name = request.url().split('/').at(-1);
    if (request.url().includes('/models/tiny-shakespeare/') && name in fileRequests) fileRequests[name]++;
  });
  const { alert, generate } = controls(page);
  await page.goto(BUNDLED_FOLDER_PAGE);
  await expect(generate).toBeEnabled({ timeout: READY });
  const before = await greedyText(page);
  const weightsUrl = new URL('/models/tiny-shakespeare/model.safetensors', page.url()).href;
  expect(await cachedSha256(page, weightsUrl)).toBe(WEIGHTS_SHA256);
  await page.evaluate(async ([cacheName, key]) => {
    const cache = await caches.open(cacheName);
    const bytes = new Uint8Array(await (await cache.match(key)).arrayBuffer());
    bytes[Math.floor(bytes.length * 0.75)] ^= 0x01;  // in a tensor, where the engine's checks could not tell
    await cache.put(key, new Response(bytes));
  }, [CACHE_NAME, weightsUrl]);
  expect(fileRequests).toEqual({ 'model.safetensors': 1, 'config.json': 1 });

  await page.reload();
  await expect(generate).toBeEnabled({ timeout: READY });
  await expect(alert).toBeEmpty();
  expect(fileRequests).toEqual({ 'model.safetensors': 2, 'config.json': 1 });
  expect(await greedyText(page)).toBe(before);
  expect(await cachedSha256(page, weightsUrl)).toBe(WEIGHTS_SHA256);
});

test('the progress line shows the download speed and the time left', async ({ page }) => {
  const { url } = newRoute('slow');
  await page.goto(`/?model=${encodeURIComponent(url)}`);
  await expect(page.getByText(/^model\.safetensors: .* of .* \(\d+%\) · [\d.]+ (KB|MB)\/s · \d+ (s|min) left$/)).toBeVisible({ timeout: READY });
});

// The Cache API is used in the engine worker, which addInitScript does not reach: the worker's script, a Blob the
// page makes (worker_client.js; the widget's holds the worker's code), gets a stub in front that makes every put
// fail like a full quota.
async function fillQuota(page) {
  await page.addInitScript((stub) => {
    const PageBlob = window.Blob;
    window.Blob = class extends PageBlob {
      constructor(parts, options) {
        super(options?.type === 'text/javascript' ? [stub, ...parts] : parts, options);
      }
    };
  }, `Cache.prototype.put = () => Promise.reject(new DOMException('The quota has been exceeded.', 'QuotaExceededError'));\n`);
}

test('a full storage quota: the widget loads the model and says it was not kept', async ({ page }) => {
  await fillQuota(page);
  await page.goto('/embed.html');
  const widget = page.locator('gpt2-widget').first();
  await expect(widget.getByText(/^Ready · .* running in your browser · not kept for offline use: The quota has been exceeded\.$/))
    .toBeVisible({ timeout: READY });
});

test('a full storage quota: the model loads and the status line says it was not kept', async ({ page }) => {
  await fillQuota(page);
  const { alert, generate } = controls(page);
  await page.goto('/');
  await expect(generate).toBeEnabled({ timeout: READY });
  await expect(alert).toBeEmpty();
  await expect(page.getByText(/^Ready: Tiny Shakespeare .* · not kept for offline use: The quota has been exceeded\.$/)).toBeVisible();
  await greedyText(page);
});
