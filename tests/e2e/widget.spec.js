// End-to-end tests of the embeddable widget (web/widget/widget.js, built as public/gpt2-widget.js) with the real
// engine and the bundled model. Host pages (tests/e2e/hosts/) are served from one origin and embed the widget
// from another: public/ on 127.0.0.1 (tools/dev/serve.mjs), hosts on localhost, both on free ports this file
// picks, so it needs no webServer of its own. Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../tools/dev/serve.mjs';
import { loadModel } from '../../web/lib/gpt2.js';

const ASSETS_ROOT = fileURLToPath(new URL('../../public/', import.meta.url));
// The widget's default model: the bundled model's Q4_0 GGUF file (weights and tokenizer in one file).
const BUNDLED_MODEL_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const HOSTS_FOLDER = new URL('./hosts/', import.meta.url);
const WEIGHTS_REQUEST = 'GET /models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf';
const MODEL_READY_TIMEOUT = 90_000;
const HTML_PAYLOAD = '<img src=x onerror="window.__pwned=1">';
const WASM_FORBIDDEN_MESSAGE = "This site's security policy does not allow WebAssembly, so the generator cannot run here.";
const WORKER_FORBIDDEN_MESSAGE = "This site's security policy does not allow the generator's background worker";
const HOST_HEADERS = {
  isolated: { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' },
  plain: {},
};

let assets;  // { origin, requests: ['GET /path', …], close() }
const hosts = {};  // isolation -> { origin, close() }

test.beforeAll(async () => {
  assets = await startAssetServer();
  for (const [isolation, headers] of Object.entries(HOST_HEADERS)) hosts[isolation] = await startHostServer(assets.origin, headers);
});

test.afterAll(async () => {
  await Promise.all([assets, ...Object.values(hosts)].map((server) => server?.close()));
});

test.beforeEach(() => {
  assets.requests.length = 0;
});

// public/ as tools/dev/serve.mjs serves it, with a log of the requests it answers.
async function startAssetServer() {
  const server = await startServer({ port: 0, root: ASSETS_ROOT });
  const requests = [];
  server.on('request', (request) => requests.push(`${request.method} ${new URL(request.url, 'http://assets').pathname}`));
  return { origin: `http://127.0.0.1:${server.address().port}`, requests, close: () => closeServer(server) };
}

// The host pages, with {{ASSETS}} replaced by the asset origin and {{INTEGRITY}} by the build's integrity value
// of the widget script; on "localhost", so another origin.
async function startHostServer(assetsOrigin, headers) {
  const server = createServer(async (request, response) => {
    const name = new URL(request.url, 'http://host').pathname.slice(1);
    const html = /^[\w-]+\.html$/.test(name) ? await readFile(new URL(name, HOSTS_FOLDER), 'utf8').catch(() => null) : null;
    if (html === null) return response.writeHead(404).end();
    response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', ...headers });
    response.end(html.replaceAll('{{ASSETS}}', assetsOrigin).replaceAll('{{INTEGRITY}}', await widgetIntegrity()));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://localhost:${server.address().port}`, close: () => closeServer(server) };
}

// The build's integrity value of the widget script (public/gpt2-widget.integrity.txt).
async function widgetIntegrity() {
  return (await readFile(`${ASSETS_ROOT}gpt2-widget.integrity.txt`, 'utf8')).trim();
}

function closeServer(server) {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
}

// Console errors and uncaught exceptions of the page, as strings.
function collectErrors(page) {
  const errors = [];
  page.on('console', (message) => message.type() === 'error' && errors.push(`console: ${message.text()}`));
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
  return errors;
}

function widgetControls(host) {
  return {
    prompt: host.getByRole('textbox', { name: 'Prompt' }),
    generate: host.getByRole('button', { name: 'Generate' }),
    stop: host.getByRole('button', { name: 'Stop' }),
    status: host.getByRole('status'),
    alert: host.getByRole('alert'),
    output: host.getByRole('region', { name: 'Output' }),
    generated: host.locator('.generated'),
  };
}

async function generateAndWait(widget) {
  await expect(widget.generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await widget.generate.click();
  await expect(widget.status).toHaveText(/^\d+ tokens/, { timeout: MODEL_READY_TIMEOUT });
  return widget.generated.textContent();
}

// Adds a section#id with the good widget's markup and a section#bad with the bad one's, mounts the first, then the
// second -> what the bad one shows: { mounted: the widgets mountAll gave, alert: its message, controls: its
// buttons and text boxes }, or { error } if mountAll threw.
function mountGoodThenBad(page, id, good, bad) {
  return page.evaluate(([sectionId, goodHtml, badHtml]) => {
    document.body.insertAdjacentHTML('beforeend', `<section id="${sectionId}">${goodHtml}</section><section id="bad">${badHtml}</section>`);
    window.GPT2Widget.mountAll(document.getElementById(sectionId));
    try {
      const mounted = window.GPT2Widget.mountAll(document.getElementById('bad')).length;
      const root = document.querySelector('#bad div').shadowRoot;
      return { mounted, alert: root.querySelector('[role="alert"]').textContent, controls: root.querySelectorAll('button, textarea').length };
    } catch (error) {
      return { error: `${error.name}: ${error.message}` };
    }
  }, [id, good, bad]);
}

async function nodeGreedyText(prompt, maxNewTokens) {
  const model = await loadModel(BUNDLED_MODEL_FILE);
  try {
    let text = '';
    for await (const piece of model.generate(prompt, { maxNewTokens, temperature: 0 })) text += piece.text;
    return text;
  } finally {
    model.dispose();
  }
}

for (const isolation of Object.keys(HOST_HEADERS)) {
  const kind = isolation === 'isolated' ? 'cross-origin-isolated' : 'non-isolated';
  test(`a ${kind} host on another origin embeds the widget, which generates the engine's text`, async ({ page }) => {
    const errors = collectErrors(page);
    // Symbol-keyed, so the baseline itself is not among the page's global names.
    await page.addInitScript(() => (window[Symbol.for('globals')] = Object.getOwnPropertyNames(window)));
    await page.goto(`${hosts[isolation].origin}/basic.html`);
    expect(await page.evaluate(() => crossOriginIsolated)).toBe(isolation === 'isolated');

    const widget = widgetControls(page.locator('gpt2-widget'));
    await expect(widget.prompt).toHaveValue('ROMEO:');
    expect(await generateAndWait(widget)).toBe(await nodeGreedyText('ROMEO:', 24));
    await expect(widget.output).toContainText('ROMEO:');

    const newGlobals = await page.evaluate(() => {
      const before = new Set(window[Symbol.for('globals')]);
      return Object.getOwnPropertyNames(window).filter((name) => !before.has(name));
    });
    expect(newGlobals).toEqual(['GPT2Widget']);
    expect(errors).toEqual([]);
  });
}

test('a data-device="wasm" widget runs on the CPU and says so; a bad data-device shows the devices inside the widget', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto(`${hosts.plain.origin}/basic.html`);
  await page.waitForFunction(() => window.GPT2Widget);
  const badMount = await mountGoodThenBad(page, 'cpu', '<div data-gpt2-widget data-device="wasm" data-prompt="ROMEO:" data-max-new-tokens="8" data-temperature="0"></div>',
    '<div data-gpt2-widget data-device="gpu"></div>');
  expect(badMount).toEqual({ mounted: 0, alert: 'data-device: expected one of auto, webgpu, wasm, got "gpu"', controls: 0 });

  const onTheCpu = /^Ready · [\d.]+ MB of weights on the CPU \(WebAssembly\), running in your browser$/;
  const cpu = widgetControls(page.locator('#cpu [data-gpt2-widget]'));
  await expect(cpu.status).toHaveText(onTheCpu, { timeout: MODEL_READY_TIMEOUT });
  // the tag's own widget asks for auto, which finds no WebGPU adapter in this Chromium
  await expect(widgetControls(page.locator('gpt2-widget')).status).toHaveText(onTheCpu, { timeout: MODEL_READY_TIMEOUT });
  expect(await generateAndWait(cpu)).toBe(await nodeGreedyText('ROMEO:', 8));
  expect(errors).toEqual([]);
});

test('a data-speculative="lookup" widget generates the engine\'s text and says how many drafts it kept; a bad value shows inside the widget', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto(`${hosts.plain.origin}/basic.html`);
  await page.waitForFunction(() => window.GPT2Widget);
  const prompt = 'ROMEO:\nWhat light';
  const badMount = await mountGoodThenBad(page, 'speculative',
    `<div data-gpt2-widget data-speculative="lookup" data-prompt="${prompt.replace('\n', '&#10;')}" data-max-new-tokens="60" data-temperature="0"></div>`,
    '<div data-gpt2-widget data-speculative="yes"></div>');
  expect(badMount).toEqual({ mounted: 0, alert: 'data-speculative: expected "lookup", got "yes"', controls: 0 });
  const widget = widgetControls(page.locator('#speculative [data-gpt2-widget]'));
  expect(await generateAndWait(widget)).toBe(await nodeGreedyText(prompt, 60));
  await expect(widget.status).toHaveText(/^60 tokens · \d+ tokens\/s · [1-9]\d* of \d+ drafts accepted/);
  expect(errors).toEqual([]);
});

test('a data-num-return-sequences="3" widget shows three labelled outputs, each its own sequence\'s text, and no Continue', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto(`${hosts.plain.origin}/basic.html`);
  await page.waitForFunction(() => window.GPT2Widget);
  await page.evaluate(() => {
    document.body.insertAdjacentHTML('beforeend', '<section id="sequences"><div data-gpt2-widget data-num-return-sequences="3" ' +
      'data-temperature="0.9" data-seed="4" data-device="wasm" data-prompt="ROMEO:" data-max-new-tokens="16"></div></section>');
    window.GPT2Widget.mountAll(document.getElementById('sequences'));
  });
  const host = page.locator('#sequences [data-gpt2-widget]');
  const widget = widgetControls(host);
  await expect(widget.generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await widget.generate.click();
  await expect(widget.status).toHaveText(/^\d+ tokens/, { timeout: MODEL_READY_TIMEOUT });
  await expect(widget.output).toBeHidden();
  const outputs = [1, 2, 3].map((n) => host.getByRole('region', { name: `Sequence ${n}`, exact: true }));
  const texts = [];
  for (const output of outputs) {
    await expect(output).toBeVisible();
    await expect(output).toContainText('ROMEO:');  // each starts with the prompt, as the one output does
    texts.push(await output.locator('.generated').textContent());
  }
  await expect(host.getByRole('region', { name: /^Sequence/ })).toHaveCount(3);
  expect(texts.every((text) => text.length > 0)).toBe(true);
  expect(new Set(texts).size).toBeGreaterThan(1);
  await expect(host.getByRole('button', { name: 'Continue' })).toBeDisabled();
  expect(errors).toEqual([]);
});

test('a beam search longer than the model\'s context is refused in one line at Generate, and the widget\'s worker goes on', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto(`${hosts.plain.origin}/basic.html`);
  await page.waitForFunction(() => window.GPT2Widget);
  await page.evaluate(() => {
    document.body.insertAdjacentHTML('beforeend', '<section id="beams"><div data-gpt2-widget data-num-beams="16" data-temperature="0" ' +
      'data-device="wasm" data-prompt="ROMEO:" data-max-new-tokens="268435456"></div></section>' +
      '<section id="after"><div data-gpt2-widget data-device="wasm" data-prompt="ROMEO:" data-max-new-tokens="8" data-temperature="0"></div></section>');
    window.GPT2Widget.mountAll(document.getElementById('beams'));
  });
  const beams = widgetControls(page.locator('#beams [data-gpt2-widget]'));
  await expect(beams.generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await beams.generate.click();
  await expect(beams.alert).toHaveText("Generation failed: generate: option maxNewTokens must be at most the model's context (256 tokens) with numBeams > 1, got 268435456");
  await expect(beams.generate).toBeEnabled();
  // the same worker and model (one per page) still generate the engine's text
  await page.evaluate(() => window.GPT2Widget.mountAll(document.getElementById('after')));
  const after = widgetControls(page.locator('#after [data-gpt2-widget]'));
  expect(await generateAndWait(after)).toBe(await nodeGreedyText('ROMEO:', 8));
  expect(errors).toEqual([]);
});

test('a data-* value the widget does not take shows one line inside the widget, builds no sequence boxes and leaves the page as it is', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto(`${hosts.plain.origin}/bad-attributes.html`);
  await page.waitForFunction(() => window.GPT2Widget);
  const expected = {
    'gpt2-widget': 'data-num-return-sequences: expected an integer in [1, 16], got "1e9"',
    '#many': 'data-num-return-sequences: expected an integer in [1, 16], got "100000"',
    '#infinite': 'data-num-return-sequences: expected an integer in [1, 16], got "Infinity"',
    '#no': 'data-auto-generate: expected "true", "false" or "" (true), got "no"',
  };
  for (const [selector, message] of Object.entries(expected)) {
    const host = page.locator(selector);
    await expect(host.getByRole('alert')).toHaveText(message);
    await expect(host.locator('.sequence')).toHaveCount(0);
    await expect(host.getByRole('button')).toHaveCount(0);
    await expect(host.getByRole('textbox')).toHaveCount(0);
  }
  // the page's own elements as they were, and the tag's widget after it; nothing else in the document
  expect(await page.evaluate(() => [...document.body.children].map((element) => element.id || element.tagName)))
    .toEqual(['H1', 'many', 'infinite', 'no', 'SCRIPT', 'GPT2-WIDGET', 'P']);
  expect(await page.evaluate(() => window.GPT2Widget.mountAll())).toEqual([]);  // mounting again refuses them again, quietly
  expect(assets.requests).not.toContain(WEIGHTS_REQUEST);
  expect(errors).toEqual([]);
});

test('on another origin the widget is one script request: the rest is the wasm files and the model', async ({ page }) => {
  await page.goto(`${hosts.isolated.origin}/basic.html`);
  await generateAndWait(widgetControls(page.locator('gpt2-widget')));
  const engineFiles = assets.requests.filter((request) => request.startsWith('GET /wasm/'));
  expect(engineFiles.length).toBeGreaterThan(0);
  expect(engineFiles.every((request) => /^GET \/wasm\/gpt2(-mt)?-relaxed\.(mjs|cjs|wasm|worker\.cjs)$/.test(request))).toBe(true);
  const rest = assets.requests.filter((request) => !engineFiles.includes(request));
  expect(rest).toEqual(['GET /gpt2-widget.js', WEIGHTS_REQUEST]);
});

test('the host page CSS does not reach into the widget, and the widget CSS does not leak out', async ({ page }) => {
  await page.goto(`${hosts.isolated.origin}/basic.html`);
  const widget = widgetControls(page.locator('gpt2-widget'));
  await expect(widget.generate).toBeVisible();  // the host hides every <button>
  const promptStyle = await widget.prompt.evaluate((element) => {
    const { fontFamily, fontSize, fontStyle, borderTopStyle } = getComputedStyle(element);
    return { fontFamily, fontSize, fontStyle, borderTopStyle };
  });
  expect(promptStyle).toMatchObject({ fontSize: '13px', fontStyle: 'normal', borderTopStyle: 'solid' });
  expect(promptStyle.fontFamily).toContain('monospace');
  await expect(widget.status).not.toHaveCSS('color', 'rgb(0, 128, 0)');
  await expect(page.locator('body > p.status')).toHaveCSS('color', 'rgb(0, 128, 0)');
  await expect(page.locator('body > p.status')).toHaveCSS('font-style', 'italic');
});

test('two widgets on one page share one model download and one worker, and both generate', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto(`${hosts.isolated.origin}/two-widgets.html`);
  const first = widgetControls(page.locator('#first'));
  const second = widgetControls(page.locator('#second gpt2-widget'));
  await expect(page.locator('gpt2-widget')).toHaveCount(1);  // the tag in <head> rendered no widget of its own
  await expect(first.prompt).toHaveValue('JULIET:');
  await expect(second.prompt).toHaveValue('ROMEO:');

  await expect(first.generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(second.generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  // Both clicks in one task, so that the two generations surely overlap.
  await page.evaluate(() => {
    for (const host of document.querySelectorAll('#first, #second gpt2-widget')) host.shadowRoot.querySelector('.generate').click();
  });
  for (const widget of [first, second]) {
    await expect(widget.status).toHaveText(/^\d+ tokens/, { timeout: MODEL_READY_TIMEOUT });
    expect((await widget.generated.textContent()).length).toBeGreaterThan(0);
  }

  // One download of the one file of the default model, for both widgets.
  expect(assets.requests.filter((request) => request.includes('/models/'))).toEqual([WEIGHTS_REQUEST]);
  // one engine worker, plus its thread workers on this cross-origin-isolated host (threads - 1; the threads are
  // the cores measured to run at once, at most 8: web/lib/engine/threads.js; all of them on a machine without
  // other work)
  const threads = await page.evaluate(() => Math.min(navigator.hardwareConcurrency, 8));
  expect(page.workers()).toHaveLength(threads);
  expect(errors).toEqual([]);
});

test('HTML in the prompt and in the model output stays text, and nothing runs', async ({ page }) => {
  // The bundled model never writes HTML, so every piece the engine worker sends gets the payload prepended.
  await page.addInitScript((payload) => {
    const { set, get } = Object.getOwnPropertyDescriptor(Worker.prototype, 'onmessage');
    const withPayload = (event) => {
      if (event.data?.type !== 'piece') return event;
      return { data: { ...event.data, piece: { ...event.data.piece, text: payload + event.data.piece.text } } };
    };
    Object.defineProperty(Worker.prototype, 'onmessage', {
      configurable: true,
      get,
      set(handler) {
        set.call(this, (event) => handler(withPayload(event)));
      },
    });
  }, HTML_PAYLOAD);
  await page.goto(`${hosts.isolated.origin}/html-payload.html`);
  const widget = widgetControls(page.locator('gpt2-widget'));
  await expect(widget.prompt).toHaveValue(HTML_PAYLOAD);

  const generated = await generateAndWait(widget);
  expect(generated.startsWith(HTML_PAYLOAD)).toBe(true);
  await expect(widget.output).toContainText(HTML_PAYLOAD + HTML_PAYLOAD);  // the prompt, then the first piece
  await expect(page.locator('gpt2-widget img')).toHaveCount(0);
  await page.waitForTimeout(300);  // an <img src=x> would have failed and run onerror by now
  expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
});

test('the build\'s integrity value is the widget script\'s sha384, and embedded with it the widget generates', async ({ page }) => {
  const script = await readFile(`${ASSETS_ROOT}gpt2-widget.js`);
  expect(await widgetIntegrity()).toBe(`sha384-${createHash('sha384').update(script).digest('base64')}`);
  const errors = collectErrors(page);
  await page.goto(`${hosts.plain.origin}/integrity.html`);
  const widget = widgetControls(page.locator('gpt2-widget'));
  expect(await generateAndWait(widget)).toBe(await nodeGreedyText('ROMEO:', 8));
  expect(errors).toEqual([]);
});

test('a widget script that differs from its integrity value is refused: nothing of it runs, nothing more is fetched', async ({ page }) => {
  const errors = collectErrors(page);
  await page.route(`${assets.origin}/gpt2-widget.js`, async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, body: `${await response.text()}\nwindow.__changedWidgetRan = true;\n` });
  });
  await page.goto(`${hosts.plain.origin}/integrity.html`);
  await expect.poll(() => errors.join('\n')).toMatch(/Failed to find a valid digest in the 'integrity' attribute for resource '[^']*\/gpt2-widget\.js'/);
  expect(await page.evaluate(() => [typeof window.GPT2Widget, window.__changedWidgetRan])).toEqual(['undefined', undefined]);
  await expect(page.locator('gpt2-widget')).toHaveCount(0);
  expect(assets.requests.filter((request) => !request.endsWith('/gpt2-widget.js'))).toEqual([]);
});

test('a CSP without wasm-unsafe-eval shows why the widget cannot run, and nothing is downloaded', async ({ page }) => {
  const pageErrors = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  await page.goto(`${hosts.isolated.origin}/wasm-forbidden.html`);
  const widget = widgetControls(page.locator('gpt2-widget'));
  await expect(widget.alert).toHaveText(WASM_FORBIDDEN_MESSAGE);
  await expect(widget.alert).toHaveCSS('color', 'rgb(185, 28, 28)');  // styled: the CSP allows our adopted sheet
  await expect(widget.generate).toBeHidden();
  expect(assets.requests.filter((request) => !request.endsWith('/gpt2-widget.js'))).toEqual([]);
  expect(pageErrors).toEqual([]);
});

test('a CSP that forbids blob: workers shows why the widget cannot run', async ({ page }) => {
  const pageErrors = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  await page.goto(`${hosts.isolated.origin}/worker-forbidden.html`);
  const widget = widgetControls(page.locator('gpt2-widget'));
  await expect(widget.alert).toContainText(WORKER_FORBIDDEN_MESSAGE, { timeout: MODEL_READY_TIMEOUT });
  await expect(widget.generate).toBeHidden();
  expect(pageErrors).toEqual([]);
});

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// WebKit's ways with these two policies, in Chromium: where workers are forbidden, it refuses `new Worker` at once
// with a SecurityError (the page hears of the violation later); where WebAssembly is, it compiles modules and
// refuses only to instantiate them.
const WEBKIT_WAYS = {
  'worker-forbidden': () => {
    const RealWorker = Worker;
    window.Worker = class extends RealWorker {
      constructor(url, options) {
        super(url, options);  // Chromium's own refusal, and its violation event, come later
        throw new DOMException('The operation is insecure.', 'SecurityError');
      }
    };
  },
  'wasm-forbidden': () => {
    const compile = WebAssembly.compile;
    WebAssembly.compile = (bytes) => compile(bytes).catch(() => Object.create(WebAssembly.Module.prototype));
  },
};

for (const [host, message] of [['wasm-forbidden', WASM_FORBIDDEN_MESSAGE], ['worker-forbidden', WORKER_FORBIDDEN_MESSAGE]]) {
  test(`where WebKit's refusal comes first, the ${host} host shows why at once, Generate off, and nothing is downloaded`, async ({ page }) => {
    await page.addInitScript(WEBKIT_WAYS[host]);
    await page.goto(`${hosts.isolated.origin}/${host}.html`);
    const widget = widgetControls(page.locator('gpt2-widget'));
    await expect(widget.alert).toHaveText(new RegExp(`^${escapeRegExp(message)}`), { timeout: 10_000 });
    await expect(widget.generate).toBeHidden();
    await expect(page.locator('gpt2-widget button.generate')).toBeDisabled();  // out of the accessibility tree: by its class
    expect(assets.requests.filter((request) => !request.endsWith('/gpt2-widget.js'))).toEqual([]);
  });
}

test('the documented strict CSP (our origin, wasm-unsafe-eval, the blob: worker) lets the widget run', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto(`${hosts.plain.origin}/strict-csp-allowing.html`);
  const widget = widgetControls(page.locator('gpt2-widget'));  // data-auto-generate: it starts by itself
  await expect(widget.status).toHaveText(/^\d+ tokens/, { timeout: MODEL_READY_TIMEOUT });
  expect((await widget.generated.textContent()).length).toBeGreaterThan(0);
  expect(errors).toEqual([]);
});

test('removing the widget mid-generation stops it, ends the worker and logs no errors', async ({ page }) => {
  const errors = collectErrors(page);
  await page.goto(`${hosts.isolated.origin}/removal.html`);
  const widget = widgetControls(page.locator('gpt2-widget'));
  await expect(widget.generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await widget.generate.click();
  await expect(widget.generated).not.toBeEmpty();
  await expect(widget.stop).toBeEnabled();  // still generating

  await page.evaluate(() => document.querySelector('main').remove());  // the widget's parent, not the widget
  await expect.poll(() => page.workers().length).toBe(0);
  await page.waitForTimeout(300);  // room for late errors from the ended generation
  expect(errors).toEqual([]);
});
