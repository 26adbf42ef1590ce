// End-to-end tests of what the site does with what it does not trust: its Content-Security-Policy in force in the
// page and in its workers (every e2e test also fails on any violation: under_csp.js), the widget snippet's
// integrity value, model URLs of other schemes, and a model whose tokens are markup, shown by the page and the
// widget as text. Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONTENT_SECURITY_POLICY, CSP_REPORTS_PATH } from '../../tools/dev/serve.mjs';
import { send, startFileServer } from '../js/file_server.js';
import { writeModelWithRenamedTokens } from '../js/renamed_tokens.js';
import { controls, fillSettings } from './page-controls.js';

const PUBLIC = fileURLToPath(new URL('../../public/', import.meta.url));
const MODEL_READY_TIMEOUT = 90_000;
const BUNDLED_MODEL_LABEL = 'Tiny Shakespeare (bundled, offline)';
// Markup that runs script wherever it is parsed as HTML, as a model's tokens.
const MARKUP_TOKENS = ['<img src=x onerror="window.__pwned=1">', '<script>window.__pwned=2</script>', '<a href="javascript:window.__pwned=3">'];
const MARKUP_MODEL = 'markup-tokens/';

let modelFolder;
let expected;  // { options, text }: the greedy continuation of ROMEO: by the model with markup tokens
let server;    // serves modelFolder, cross-origin (CORS and CORP, as the page is cross-origin isolated)

test.beforeAll(async () => {
  modelFolder = mkdtempSync(join(tmpdir(), 'gpt2-wasm-markup-'));
  expected = await writeModelWithRenamedTokens(modelFolder, 'ROMEO:', MARKUP_TOKENS);
  const files = Object.fromEntries(readdirSync(modelFolder).map((name) => [name, readFileSync(join(modelFolder, name))]));
  const headers = { 'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin' };
  server = await startFileServer(files, { 'markup-tokens': (res, body) => send(res, body, { ...headers, 'Content-Length': body.length }) });
});

test.afterAll(async () => {
  await server?.close();
  if (modelFolder) rmSync(modelFolder, { recursive: true, force: true });
});

for (const path of ['/', '/embed.html']) {
  test(`${path} carries the site's policy in a <meta> and gets the same as a header, with a report address`, async ({ page }) => {
    const response = await page.goto(path);
    expect(response.headers()['content-security-policy']).toBe(`${CONTENT_SECURITY_POLICY}; report-uri ${CSP_REPORTS_PATH}`);
    const meta = page.locator('meta[http-equiv="Content-Security-Policy"]');
    await expect(meta).toHaveAttribute('content', CONTENT_SECURITY_POLICY);
    // Before any script or style, so that it covers them all.
    expect(await page.evaluate(() => document.head.firstElementChild.nextElementSibling.getAttribute('http-equiv'))).toBe('Content-Security-Policy');
  });
}

test('the policy is in force: an injected inline script and an inline handler are blocked and reported', async ({ page, cspViolations }) => {
  await page.goto('/');
  const outcome = await page.evaluate(async () => {
    const script = document.createElement('script');
    script.textContent = 'window.__pwned = "inline script"';
    document.head.append(script);
    const button = document.createElement('button');
    button.setAttribute('onclick', 'window.__pwned = "inline handler"');
    document.body.append(button);
    button.click();
    return window.__pwned;
  });
  expect(outcome).toBeUndefined();
  cspViolations.expect(/"effective-directive":"script-src-elem".*"blocked-uri":"inline"/);
  cspViolations.expect(/"effective-directive":"script-src-attr"/);
  await cspViolations.reported();
});

// (In the worker: the page's own eval would be DevTools' when the test runs it, which the policy lets through.) The
// worker answers once it has seen both violations (their reports are then on their way) and stays referenced until
// the test ends, so that a busy machine does not lose a report with the worker.
test('workers run under the policy too: a worker\'s eval and its import from elsewhere are blocked and reported', async ({ page, cspViolations }) => {
  await page.goto('/');
  const messages = await page.evaluate(() => new Promise((resolve) => {
    const source = `const outcome = (run) => { try { run(); return 'ran'; } catch (error) { return error.name; } };
      let seen = 0;
      const outcomes = [];
      const answer = () => postMessage(outcomes);
      self.addEventListener('securitypolicyviolation', () => { if (++seen === 2) answer(); });
      outcomes.push(outcome(() => eval('1')), outcome(() => importScripts('data:text/javascript,1')));
      setTimeout(answer, 15000);`;
    window.cspWorker = new Worker(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })));
    window.cspWorker.onmessage = ({ data }) => resolve(data);
  }));
  expect(messages).toEqual(['EvalError', 'NetworkError']);
  cspViolations.expect(/"document-uri":"blob".*"effective-directive":"script-src".*"blocked-uri":"eval"/);
  cspViolations.expect(/"document-uri":"blob".*"effective-directive":"script-src-elem".*"blocked-uri":"data"/);
  await cspViolations.reported();
});

test('embed.html shows the snippet with this build\'s integrity value and crossorigin="anonymous"', async ({ page }) => {
  await page.goto('/embed.html');
  const integrity = readFileSync(`${PUBLIC}gpt2-widget.integrity.txt`, 'utf8').trim();
  expect(integrity).toMatch(/^sha384-[A-Za-z0-9+/]{64}$/);
  const snippet = page.locator('#snippet');
  await expect(snippet).toContainText(`integrity="${integrity}"`);
  await expect(snippet).toContainText('crossorigin="anonymous"');
  await expect(snippet).toContainText(`src="${new URL('/gpt2-widget.js', page.url()).href}"`);
});

for (const [scheme, url] of [['javascript:', 'javascript:window.__pwned=1'], ['data:', 'data:application/octet-stream;base64,R0dVRg==.gguf']]) {
  test(`a ${scheme} model URL is refused with one line, and the page keeps working`, async ({ page }) => {
    await page.goto(`/?model=${encodeURIComponent(url)}`);
    const { alert, model, generate } = controls(page);
    await expect(alert).toContainText(`a model URL must be http:, https: or blob:, not ${scheme}`);
    await model.selectOption({ label: BUNDLED_MODEL_LABEL });
    await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
    expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
  });
}

test('a model whose tokens are markup: the page shows them as text, in the output and the token tooltips', async ({ page }) => {
  await page.goto(`/?model=${encodeURIComponent(`${server.baseUrl}/${MARKUP_MODEL}`)}`);
  const { generate, output } = controls(page);
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await fillSettings(page, { prompt: 'ROMEO:', temperature: 0, maxNewTokens: expected.options.maxNewTokens, useKVCache: true });
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  // The page stops at the end of text as the API does by default; the markup tokens come before any.
  const shown = (await output.locator('.token').allTextContents()).join('');
  expect(expected.text.startsWith(shown)).toBe(true);
  for (const token of MARKUP_TOKENS) expect(shown).toContain(token);

  await output.locator('.token', { hasText: MARKUP_TOKENS[0] }).first().hover();
  const tooltip = page.getByRole('tooltip');
  await expect(tooltip).toContainText(MARKUP_TOKENS[0].replaceAll(' ', '␣'));  // the tooltip shows spaces
  await expect(page.locator('img, script:not([src]), a[href^="javascript:"]')).toHaveCount(0);
  await page.waitForTimeout(300);  // an <img src=x> would have failed and run onerror by now
  expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
});

test('a local file whose name is markup loads, and its name is shown as text', async ({ page }) => {
  await page.goto('/');
  const { model, generate } = controls(page);
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  const name = '<img src=x onerror="window.__pwned=4">.gguf';
  const fileChooser = page.waitForEvent('filechooser');
  await model.selectOption({ label: 'Open local files…' });
  await (await fileChooser).setFiles({ name, mimeType: 'application/octet-stream', buffer: readFileSync(`${PUBLIC}models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf`) });
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(page.getByRole('status').first()).toContainText(name);
  await expect(page.locator('img')).toHaveCount(0);
  await page.waitForTimeout(300);
  expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
});

test('the widget\'s data-* attributes and a model\'s markup tokens stay text in the widget', async ({ page }) => {
  await page.goto('/embed.html');
  await expect.poll(() => page.evaluate(() => typeof window.GPT2Widget)).toBe('object');
  const modelUrl = `${server.baseUrl}/${MARKUP_MODEL}`;
  await page.evaluate(({ model, maxNewTokens }) => {
    const placeholder = document.createElement('div');
    Object.assign(placeholder.dataset, {
      gpt2Widget: '', model, prompt: 'ROMEO:', temperature: '0', maxNewTokens: String(maxNewTokens), autoGenerate: '',
    });
    placeholder.id = 'markup-widget';
    document.body.append(placeholder);
    window.GPT2Widget.mountAll();
  }, { model: modelUrl, maxNewTokens: expected.options.maxNewTokens });
  const widget = page.locator('#markup-widget');
  await expect(widget.getByRole('status')).toHaveText(/^\d+ tokens/, { timeout: MODEL_READY_TIMEOUT });
  const generated = await widget.locator('.generated').textContent();
  for (const token of MARKUP_TOKENS) expect(generated).toContain(token);
  await expect(widget.locator('.model')).toHaveAttribute('title', modelUrl);
  await expect(page.locator('#markup-widget img, #markup-widget script, #markup-widget a')).toHaveCount(0);
  await page.waitForTimeout(300);
  expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
});
