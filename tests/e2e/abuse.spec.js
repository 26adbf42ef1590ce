// The page under abuse: 200 Generate/Stop cycles clicked as fast as a script can, models switched
// during downloads again and again, two tabs loading the same model at once. After each phase the engine's wasm
// heap in use is back at its level after one generation (a level that includes the session the pool keeps),
// nothing was logged as an error, and the page still generates. Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { collectErrors, controls, countWorkerRequests, engineHeapUsedBytes, fillSettings } from './page-controls.js';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const BUNDLED_LABEL = 'Tiny Shakespeare (bundled, offline)';
const SAFETENSORS_LABEL = 'Tiny Shakespeare, safetensors (bundled, fp32 or int8)';
const BUNDLED_READY = /^Ready: Tiny Shakespeare \(bundled, offline\) · /;
const SAFETENSORS_READY = /^Ready: Tiny Shakespeare, safetensors /;
const BUNDLED_GGUF = 'tiny-shakespeare.Q4_0.gguf';
const GGUF_BYTES = readFileSync(BUNDLED + BUNDLED_GGUF).length;
const READY = 90_000;
const CYCLES = 200;
// Runs that no Stop can miss: 1024 tokens (the context slides past 256), and this model never samples
// <|endoftext|> (absent from its training text), so a run only ends early when stopped.
const LONG_RUN = { prompt: 'ROMEO:', temperature: 0.8, topK: 40, topP: 0.95, maxNewTokens: 1024, useKVCache: true, kvCache: 'int8' };

// The heap goes back to its level: the pool keeps one idle session per KV-cache mode and storage, every run here
// uses the same one, the level was taken with that session kept, and the sessions made for runs that overlapped
// (a run stopped in the page ends in the worker only at its next token) are freed as those runs end. Within
// HEAP_SLACK_BYTES: malloc counts a block's unusable remainder (under its 16-byte minimum) as part of the block,
// so the same allocations placed elsewhere (a model loaded again) count a few bytes more or less; a leak of
// anything that matters (a session: 1.7 MB here; a thread's stack: 1 MiB) is far above.
const HEAP_SLACK_BYTES = 1024;
async function expectHeapBackTo(page, level) {
  await expect.poll(async () => Math.abs(await engineHeapUsedBytes(page) - level), { timeout: 30_000 })
    .toBeLessThanOrEqual(HEAP_SLACK_BYTES);
}

// A short run to its end: the controls come back, the text and the stop reason are shown, no error.
async function expectGenerates(page) {
  const { generate, stop, output, alert } = controls(page);
  await fillSettings(page, { ...LONG_RUN, maxNewTokens: 12 });
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: READY });
  await expect(stop).toBeDisabled();
  await expect(page.locator('#stat-stop')).toHaveText('token limit');
  expect((await output.locator('.token').allTextContents()).join('').length).toBeGreaterThan(0);
  await expect(alert).toBeEmpty();
}

// The heap's level once the model has run once, the pool then keeping that run's session.
async function heapAfterOneRun(page) {
  await expectGenerates(page);
  return engineHeapUsedBytes(page);
}

// In the viewport's coordinates, which mouse events take: the button is scrolled into view first.
async function centreOf(locator) {
  await locator.scrollIntoViewIfNeeded();
  const box = await locator.boundingBox();
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
}

// Records what the "Stopped because" cell shows while a run is going (Stop enabled), when it must show nothing
// ("–"): any reason there is a finished run's, shown over the current one. -> a function that returns them.
async function watchStopReasonDuringRuns(page) {
  await page.addInitScript(() => {
    window.__reasonsDuringRuns = [];
    addEventListener('DOMContentLoaded', () => {
      const cell = document.getElementById('stat-stop');
      const stop = document.getElementById('stop');
      new MutationObserver(() => {
        if (!stop.disabled && cell.textContent !== '–') window.__reasonsDuringRuns.push(cell.textContent);
      }).observe(cell, { childList: true, characterData: true, subtree: true });
    });
  });
  return () => page.evaluate(() => window.__reasonsDuringRuns);
}

// Counts the clicks that Generate and Stop took (a disabled button takes none): -> a function that returns them.
async function countClicksTaken(page) {
  await page.addInitScript(() => {
    window.__clicksTaken = { generate: 0, stop: 0 };
    addEventListener('click', (event) => {
      if (event.target.id in window.__clicksTaken) window.__clicksTaken[event.target.id]++;
    }, true);
  });
  return () => page.evaluate(() => ({ ...window.__clicksTaken }));
}

test('200 Generate/Stop cycles clicked as fast as a script can: each click counts, stale stats never show, the heap is back, the page generates', async ({ page }) => {
  const errors = collectErrors(page);
  const workerRequests = await countWorkerRequests(page);
  const clicksTaken = await countClicksTaken(page);
  const reasonsDuringRuns = await watchStopReasonDuringRuns(page);
  const { generate, stop, output } = controls(page);
  await page.goto('/');
  await expect(generate).toBeEnabled({ timeout: READY });
  const level = await heapAfterOneRun(page);

  await fillSettings(page, LONG_RUN);
  // Mouse events at the buttons' boxes: locator.click would wait for the page to hold still, which it does not
  // while tokens stream in.
  const [generateAt, stopAt] = [await centreOf(generate), await centreOf(stop)];
  for (let i = 0; i < CYCLES; i++) {
    await page.mouse.click(generateAt.x, generateAt.y);
    await page.mouse.click(stopAt.x, stopAt.y);
  }
  // Each Generate started a run, so the controls had come back at each Stop, which ended that run.
  expect(await clicksTaken()).toEqual({ generate: 1 + CYCLES, stop: CYCLES });
  // Each run that reached the engine was cancelled, but the first, which ran to its end. A run stopped while the
  // worker was still tokenizing its prompt never reaches the engine.
  const { generate: generateRequests, cancel: cancelRequests } = await workerRequests();
  expect(cancelRequests).toBe(generateRequests - 1);
  expect(generateRequests).toBeGreaterThan(CYCLES / 2);
  await expect(generate).toBeEnabled();
  await expect(stop).toBeDisabled();
  await expect(page.locator('#stat-stop')).toHaveText('stopped');
  await expect(output.locator('.prompt-text')).toHaveText(LONG_RUN.prompt);
  expect(await reasonsDuringRuns()).toEqual([]);

  await expectHeapBackTo(page, level);
  await expectGenerates(page);
  await expectHeapBackTo(page, level);
  expect(errors).toEqual([]);
});

// ---- a server of the bundled safetensors folder on another origin (CORS open), whose model.safetensors
// trickles (16 KB every 50 ms: over a minute for its 23 MB), so that a load of it is still downloading when
// the test switches away ----
const folderFiles = Object.fromEntries(
  ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt'].map((name) => [name, readFileSync(BUNDLED + name)]),
);
const trickles = { started: 0, closedEarly: 0 };
let slowServer;
let slowFolder;

function serveSlowly(request, response) {
  const body = folderFiles[request.url.split('/').at(-1)];
  const cors = { 'Access-Control-Allow-Origin': '*' };
  if (!body) return response.writeHead(404, cors).end('Not Found');
  response.writeHead(200, { ...cors, 'Content-Length': body.length });
  if (body !== folderFiles['model.safetensors']) return response.end(body);
  trickles.started++;
  let offset = 0;
  const timer = setInterval(() => response.write(body.subarray(offset, (offset += 16384))), 50);
  response.on('close', () => {
    clearInterval(timer);
    if (offset < body.length) trickles.closedEarly++;
  });
  return undefined;
}

test.describe('switching models during downloads', () => {
  test.beforeAll(async () => {
    slowServer = createServer(serveSlowly);
    await new Promise((resolve) => slowServer.listen(0, '127.0.0.1', resolve));
    slowFolder = `http://127.0.0.1:${slowServer.address().port}/slow/`;
  });

  test.afterAll(async () => {
    slowServer.closeAllConnections();
    await new Promise((resolve) => slowServer.close(resolve));
  });

  // The page starts loading the slow folder (?model=) and the test chooses the bundled model during that
  // download; -> { level: the heap's level once the bundled model has run, chooseDuringDownload(label), slowLabel }.
  async function openWithBundledModel(page) {
    const { model } = controls(page);
    const slowLabel = `Model at ${slowFolder}`;
    const chooseDuringDownload = async (label) => {
      await expect(page.getByText(/^model\.safetensors: .* of /)).toBeVisible({ timeout: READY });
      await model.selectOption({ label });
    };
    await page.goto(`/?model=${encodeURIComponent(slowFolder)}`);
    await chooseDuringDownload(BUNDLED_LABEL);
    await expect(page.getByRole('status')).toHaveText(BUNDLED_READY, { timeout: READY });
    return { level: await heapAfterOneRun(page), chooseDuringDownload, slowLabel };
  }

  // Every download of the slow folder was cut short, and nothing of it is in the Cache API.
  async function expectDownloadsCancelled(page) {
    await expect.poll(() => trickles.closedEarly).toBe(trickles.started);
    const cached = await page.evaluate(async () => {
      const urls = [];
      for (const name of await caches.keys()) urls.push(...(await (await caches.open(name)).keys()).map((request) => request.url));
      return urls;
    });
    expect(cached.filter((url) => url.startsWith(slowFolder))).toEqual([]);
  }

  test('back to the model in use, again and again and in bursts: every download is cancelled, the heap is back, the model generates', async ({ page }) => {
    const errors = collectErrors(page);
    const { model, progress } = controls(page);
    const status = page.getByRole('status');
    const startedBefore = trickles.started;
    const { level, chooseDuringDownload, slowLabel } = await openWithBundledModel(page);
    for (let i = 0; i < 4; i++) {
      await model.selectOption({ label: slowLabel });
      await chooseDuringDownload(BUNDLED_LABEL);
      await expect(status).toHaveText(BUNDLED_READY, { timeout: READY });
      await expect(progress).toBeHidden();
      await expectHeapBackTo(page, level);
    }
    // Choices in a burst, each before the one it replaces has got far (a load creates its model, the only
    // thing the heap could keep, once its file has been read whole).
    for (const label of [slowLabel, BUNDLED_LABEL, slowLabel, SAFETENSORS_LABEL, slowLabel, BUNDLED_LABEL]) {
      await model.selectOption({ label });
    }
    await expect(status).toHaveText(BUNDLED_READY, { timeout: READY });
    expect(trickles.started - startedBefore).toBeGreaterThanOrEqual(5);
    await expectDownloadsCancelled(page);
    await expectHeapBackTo(page, level);
    await expectGenerates(page);
    await expectHeapBackTo(page, level);
    expect(errors).toEqual([]);
  });

  test('to a model that must load, then during another download back to the first, which loads again: the heap is back', async ({ page }) => {
    const errors = collectErrors(page);
    const { model } = controls(page);
    const status = page.getByRole('status');
    const { level, chooseDuringDownload, slowLabel } = await openWithBundledModel(page);
    await model.selectOption({ label: slowLabel });
    await chooseDuringDownload(SAFETENSORS_LABEL);
    await expect(status).toHaveText(SAFETENSORS_READY, { timeout: READY });
    await expectGenerates(page);
    await model.selectOption({ label: slowLabel });
    await chooseDuringDownload(BUNDLED_LABEL);
    await expect(status).toHaveText(BUNDLED_READY, { timeout: READY });
    await expectDownloadsCancelled(page);
    // The bundled model loaded anew, without the session its first copy kept: one run brings that back.
    await expectGenerates(page);
    await expectHeapBackTo(page, level);
    expect(errors).toEqual([]);
  });
});

test('two tabs load the same model at once: both download it and generate; a third tab loads it from the cache', async ({ context }) => {
  const weightsRequests = [];
  let bothAsked;
  const untilBothAsked = new Promise((resolve) => (bothAsked = resolve));
  // Each request of the weights waits for the other tab's: the two downloads overlap.
  await context.route(`**/models/tiny-shakespeare/${BUNDLED_GGUF}`, async (route) => {
    weightsRequests.push(route.request().url());
    if (weightsRequests.length === 2) bothAsked();
    await untilBothAsked;
    await route.continue();
  });
  const openTab = async () => {
    const tab = await context.newPage();
    return { tab, errors: collectErrors(tab) };
  };
  const [first, second] = [await openTab(), await openTab()];
  // An empty Cache API to start with, emptied from a document of the site that loads no model.
  await first.tab.goto('/models/tiny-shakespeare/README.md');
  await first.tab.evaluate(async () => Promise.all((await caches.keys()).map((name) => caches.delete(name))));

  await Promise.all([first.tab.goto('/'), second.tab.goto('/')]);
  for (const { tab } of [first, second]) {
    await expect(controls(tab).generate).toBeEnabled({ timeout: READY });
    // Kept for offline use: neither tab's copy into the cache failed.
    await expect(tab.getByRole('status')).toHaveText(BUNDLED_READY);
    await expect(tab.getByRole('status')).not.toContainText('not kept');
  }
  await Promise.all([expectGenerates(first.tab), expectGenerates(second.tab)]);
  expect(weightsRequests).toHaveLength(2);
  const cachedBytes = await first.tab.evaluate(async (url) => {
    const response = await caches.match(url);
    return response ? (await response.arrayBuffer()).byteLength : null;
  }, new URL(`/models/tiny-shakespeare/${BUNDLED_GGUF}`, first.tab.url()).href);
  expect(cachedBytes).toBe(GGUF_BYTES);

  const third = await openTab();
  await third.tab.goto('/');
  await expect(controls(third.tab).generate).toBeEnabled({ timeout: READY });
  await expectGenerates(third.tab);
  expect(weightsRequests).toHaveLength(2);  // the third tab read the cache's copy
  for (const { errors } of [first, second, third]) expect(errors).toEqual([]);
});
