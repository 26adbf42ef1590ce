// An app that bundles gpt2-wasm (tests/bundler-example/, built here with esbuild into one
// main.js) runs in Chromium with the engine's files on another origin, as from a CDN: configure({ assetBase })
// names a copy of public/wasm/, the engine worker starts from its gpt2-worker.js, and the app's greedy text is
// the Node API's. The app and the "CDN" are served by tools/dev/serve.mjs on free ports this file picks (localhost
// and 127.0.0.1: two origins), so it needs no webServer of its own. Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../tools/dev/serve.mjs';
import { loadModel } from '../../web/lib/gpt2.js';
import { buildExample } from '../bundler-example/build.mjs';

const WASM_FOLDER = fileURLToPath(new URL('../../public/wasm/', import.meta.url));
const MODEL_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const ASSET_PATH = '/gpt2-wasm/0.1.0/';  // where the "CDN" serves the copy of public/wasm/
const MODEL_PATH = '/models/tiny-shakespeare.Q4_0.gguf';
const PROMPT = 'ROMEO:';
const TOKENS = 24;
const READY_TIMEOUT = 90_000;

let folder;  // the build's temporary folder: app/ (the bundled app) and cdn/ (the engine's files and the model)

test.beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), 'gpt2-bundler-'));
  await buildExample(join(folder, 'app'));
  await cp(WASM_FOLDER, join(folder, 'cdn', ASSET_PATH), { recursive: true });
  await cp(MODEL_FILE, join(folder, 'cdn', MODEL_PATH));
});

test.afterAll(async () => {
  if (folder) await rm(folder, { recursive: true, force: true });
});

// tools/dev/serve.mjs over root, with a log of the requests it answers. Without the site's policy: this is somebody
// else's app, which loads our assets from another origin.
async function serve(root, { host, isolation }) {
  const server = await startServer({ port: 0, root, isolation, contentSecurityPolicy: null });
  const requests = [];
  server.on('request', (request) => requests.push(`${request.method} ${new URL(request.url, 'http://x').pathname}`));
  const close = () => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  };
  return { origin: `http://${host}:${server.address().port}`, requests, close };
}

async function nodeGreedyText() {
  const model = await loadModel(MODEL_FILE);
  try {
    let text = '';
    for await (const piece of model.generate(PROMPT, { maxNewTokens: TOKENS, temperature: 0 })) text += piece.text;
    return text;
  } finally {
    model.dispose();
  }
}

test('the build is the page and one script: the package\'s modules are in main.js, the wasm is not', async () => {
  expect((await readdir(join(folder, 'app'))).sort()).toEqual(['index.html', 'main.js']);
});

for (const isolation of [true, false]) {
  const kind = isolation ? 'cross-origin-isolated (threaded build)' : 'non-isolated (single-thread build)';
  test(`a ${kind} bundled app generates the Node API's greedy text with the engine's files from another origin`, async ({ page }) => {
    const app = await serve(join(folder, 'app'), { host: 'localhost', isolation });
    const cdn = await serve(join(folder, 'cdn'), { host: '127.0.0.1', isolation: true });
    try {
      const errors = [];
      page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
      page.on('pageerror', (error) => errors.push(error.message));
      const query = new URLSearchParams({ assets: cdn.origin + ASSET_PATH, model: cdn.origin + MODEL_PATH, prompt: PROMPT, tokens: TOKENS });
      await page.goto(`${app.origin}/?${query}`);

      await expect(page.locator('#status')).toHaveText('Done', { timeout: READY_TIMEOUT });
      expect(await page.locator('#output').textContent()).toBe(await nodeGreedyText());
      expect(app.requests).toEqual(['GET /', 'GET /main.js']);
      const fromCdn = cdn.requests.filter((request) => request !== `GET ${MODEL_PATH}`);
      expect(fromCdn).toContain(`GET ${ASSET_PATH}gpt2-worker.js`);
      // threads: 'auto', the cores, where the page is isolated (web/lib/engine/engine.js); Chromium runs the
      // relaxed-SIMD build (web/lib/engine/simd_support.js)
      const threaded = isolation && await page.evaluate(() => navigator.hardwareConcurrency > 1);
      expect(fromCdn.filter((request) => request.endsWith('.wasm'))).toEqual([`GET ${ASSET_PATH}${threaded ? 'gpt2-mt' : 'gpt2'}-relaxed.wasm`]);
      expect(fromCdn.every((request) => request.startsWith(`GET ${ASSET_PATH}`))).toBe(true);
      expect(errors).toEqual([]);
    } finally {
      await Promise.all([app.close(), cdn.close()]);
    }
  });
}

test('an assetBase that is not a URL of a folder is refused, naming the option', async ({ page }) => {
  const app = await serve(join(folder, 'app'), { host: 'localhost', isolation: false });
  try {
    await page.goto(`${app.origin}/?${new URLSearchParams({ assets: 'ftp://cdn.example.com/gpt2-wasm/', model: 'x.gguf' })}`);
    await expect(page.locator('#status')).toHaveText(
      'Failed: configure: assetBase must be the URL of the folder that holds gpt2.wasm (an http(s) URL, absolute or relative to the page), got "ftp://cdn.example.com/gpt2-wasm/"');
  } finally {
    await app.close();
  }
});
