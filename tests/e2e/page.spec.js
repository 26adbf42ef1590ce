// End-to-end tests of the page (public/index.html + web/page/) with the real wasm engine and the bundled
// model, served by tools/dev/serve.mjs (see playwright.config.js). Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { collectErrors, controls, fillSettings, nodeText } from './page-controls.js';
import { fileURLToPath } from 'node:url';

// The bundled model: the menu's default entry loads its Q4_0 GGUF file; the safetensors entry, its folder
// (which the Weights setting applies to).
const BUNDLED_MODEL_FOLDER = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const BUNDLED_GGUF_FILE = `${BUNDLED_MODEL_FOLDER}tiny-shakespeare.Q4_0.gguf`;
const BUNDLED_MODEL_LABEL = 'Tiny Shakespeare (bundled, offline)';
const SAFETENSORS_MODEL_LABEL = 'Tiny Shakespeare, safetensors (bundled, fp32 or int8)';
const WEIGHTS_PATTERN = '**/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf';
const PROMPT = 'ROMEO:\nWhat light';
// The page's top-k / top-p are passed along; with temperature 0 the likeliest token wins regardless.
const GREEDY = { temperature: 0, topK: 40, topP: 0.95, maxNewTokens: 40 };
const MODEL_READY_TIMEOUT = 90_000;

// The Node API's greedy continuation of PROMPT by the model at path (the GGUF file, or the folder with fp32 or
// int8 weights): the page must produce exactly this text.
const nodeGreedyText = (path, weights) => nodeText(path, PROMPT, GREEDY, weights ? { weights } : {});

async function openPageWithModel(page, path = '/') {
  await page.goto(path);
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
}

// Clicks Generate and waits for the run to finish; returns the generated text (the prompt excluded).
async function generateText(page) {
  const { generate } = controls(page);
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  return generatedText(page);
}

async function generatedText(page) {
  return (await controls(page).output.locator('.token').allTextContents()).join('');
}

test('shows download progress, then generates the same greedy text as the Node API', async ({ page }) => {
  const expected = await nodeGreedyText(BUNDLED_GGUF_FILE);
  // Holding the weights back for a moment keeps the progress bar on screen long enough to observe.
  await page.route(WEIGHTS_PATTERN, async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await route.continue();
  });
  const { progress, generate, alert } = controls(page);
  await page.goto('/');
  await expect(progress).toBeVisible();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(progress).toBeHidden();
  await expect(page.getByText(/^Ready: Tiny Shakespeare \(bundled, offline\) · .* of q4_0 weights, /)).toBeVisible();

  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  expect(expected.length).toBeGreaterThan(0);
  expect(await generateText(page)).toBe(expected);
  await expect(alert).toBeEmpty();
  await expect(page.getByText(/^\d+ \/ 256 tokens$/)).toBeVisible();
});

test('the KV cache switch changes speed, not text', async ({ page }) => {
  await openPageWithModel(page);
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  const withCache = await generateText(page);
  await fillSettings(page, { useKVCache: false });
  const withoutCache = await generateText(page);
  expect(withoutCache).toBe(withCache);
  await expect(page.getByRole('img', { name: /KV cache on: \d+ tokens.*KV cache off: \d+ tokens/ })).toBeVisible();
});

test('Speculative decoding gives the same text, greedy and seeded, and shows the drafts accepted beside the speed', async ({ page }) => {
  await openPageWithModel(page);
  const speculation = page.getByRole('checkbox', { name: 'Speculative decoding', exact: true });
  await expect(speculation).not.toBeChecked();
  for (const settings of [{ ...GREEDY, maxNewTokens: 60 }, { temperature: 0.8, topK: 40, topP: 0.95, maxNewTokens: 60, seed: 11 }]) {
    await speculation.setChecked(false);
    await fillSettings(page, { prompt: PROMPT, ...settings, useKVCache: true });
    const plain = await generateText(page);
    await expect(page.locator('#stat-drafts')).toHaveText('–');
    await speculation.setChecked(true);
    expect(await generateText(page)).toBe(plain);
    if (settings.temperature === 0) await expect(page.locator('#stat-drafts')).toHaveText(/^[1-9]\d*of \d+ drafted \(\d+ %\)$/);
  }
  await page.reload();
  await expect(speculation).toBeChecked();  // remembered
});

test('Advanced decoding: a logit bias of -inf bans its token, the settings give the Node API\'s text and are remembered; a malformed bias is the settings error', async ({ page }) => {
  // 198 and 628: GPT-2's "\n" and "\n\n", which the greedy text of PROMPT has
  const advanced = { logitBias: { 198: -Infinity, 628: -Infinity }, minNewTokens: 40, presencePenalty: 0.3, noRepeatNgramSize: 3, badWords: ['thou'] };
  const [plain, expected] = await Promise.all([
    nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY), nodeText(BUNDLED_GGUF_FILE, PROMPT, { ...GREEDY, ...advanced }),
  ]);
  expect(plain).toContain('\n');
  await openPageWithModel(page);
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  const group = page.locator('details', { has: page.getByText('Advanced decoding', { exact: true }) });
  await expect(page.getByLabel('Logit bias')).toBeHidden();  // folded until asked for
  await group.locator('summary').click();
  await page.getByLabel('Logit bias').fill('198:-inf, 628:-Infinity');
  await page.getByLabel('Min new tokens').fill('40');
  await page.getByLabel('Presence penalty').fill('0.3');
  await page.getByLabel('No-repeat n-gram size').fill('3');
  await page.getByLabel('Banned words').fill('thou,');
  const text = await generateText(page);
  expect(text).toBe(expected);
  expect(text).not.toBe(plain);
  expect(await controls(page).output.locator('.token').allTextContents()).not.toContain('\n');
  await expect(controls(page).alert).toBeEmpty();

  await page.reload();
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(page.getByLabel('Logit bias')).toBeHidden();
  await expect(page.getByLabel('Logit bias')).toHaveValue('198:-inf, 628:-Infinity');  // remembered
  await expect(page.getByLabel('Min new tokens')).toHaveValue('40');
  // the group folded: Generate unfolds it to point at the malformed field
  await page.getByLabel('Logit bias').evaluate((input) => {
    input.value = '198:-inf, 13=2';
  });
  await controls(page).generate.click();
  await expect(controls(page).alert).toHaveText('Logit bias: "13=2" is not TOKEN:BIAS');
  await expect(page.getByLabel('Logit bias')).toBeFocused();
});

test('a number field takes the range of its generate() option: a top-k the engine cannot hold is the settings error', async ({ page }) => {
  const errors = collectErrors(page);
  await openPageWithModel(page);
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, topK: 2 ** 32 + 1 });
  await controls(page).generate.click();
  await expect(controls(page).alert).toHaveText('Top-k: Value must be less than or equal to 2147483647.');
  await expect(page.getByLabel('Top-k', { exact: true })).toBeFocused();
  await expect(controls(page).output.locator('.token')).toHaveCount(0);
  expect(errors).toEqual([]);
});

test('Beams in Advanced decoding: beam search gives the Node API\'s text and is remembered; with speculation on it is the settings error', async ({ page }) => {
  const beams = { numBeams: 4, lengthPenalty: 0.5 };
  const [plain, expected] = await Promise.all([
    nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY), nodeText(BUNDLED_GGUF_FILE, PROMPT, { ...GREEDY, ...beams }),
  ]);
  expect(expected).not.toBe(plain);
  await openPageWithModel(page);
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  await page.getByText('Advanced decoding', { exact: true }).click();
  await page.getByLabel('Beams', { exact: true }).fill('4');
  await page.getByLabel('Length penalty').fill('0.5');
  // more new tokens than the model's context is refused at Max new tokens before anything runs
  await page.getByLabel('Max new tokens').fill('257');
  await controls(page).generate.click();
  await expect(controls(page).alert).toHaveText("Beam search generates at most the model's context (256 tokens): set Max new tokens to 256 or less, or Beams to 1.");
  await expect(page.getByLabel('Max new tokens')).toBeFocused();
  await fillSettings(page, GREEDY);
  expect(await generateText(page)).toBe(expected);
  await expect(controls(page).alert).toBeEmpty();

  await page.reload();
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(page.getByLabel('Beams', { exact: true })).toHaveValue('4');  // remembered
  await page.getByText('Advanced decoding', { exact: true }).click();
  await page.getByRole('checkbox', { name: 'Speculative decoding', exact: true }).check();
  await controls(page).generate.click();
  await expect(controls(page).alert).toHaveText('Beam search and speculative decoding cannot be combined: set Beams to 1 or turn speculation off.');
  await expect(page.getByLabel('Beams', { exact: true })).toBeFocused();
});

test('the KV cache storage is int8 unless fp32 is chosen: fp32 shows four times the memory and the Node API\'s fp32 text', async ({ page }) => {
  const [expectedInt8, expectedFp32] = await Promise.all([
    nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY), nodeText(BUNDLED_GGUF_FILE, PROMPT, { ...GREEDY, kvCache: 'fp32' }),
  ]);
  await openPageWithModel(page);
  await expect(controls(page).kvStorage).toHaveValue('int8');
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  expect(await generateText(page)).toBe(expectedInt8);
  const cacheKilobytes = async (storage) => {
    const shown = page.locator('#stat-kv');
    await expect(shown).toHaveText(new RegExp(`^[\\d.]+ [KM]B \\(${storage}\\)$`));
    const [, value, unit] = /^([\d.]+) ([KM])B/.exec(await shown.textContent());
    return Number(value) * (unit === 'M' ? 1000 : 1);
  };
  const int8Kilobytes = await cacheKilobytes('int8');
  await fillSettings(page, { kvCache: 'fp32' });
  expect(await generateText(page)).toBe(expectedFp32);
  const fp32Kilobytes = await cacheKilobytes('fp32');
  expect(fp32Kilobytes / int8Kilobytes).toBeGreaterThan(3.5);  // 4 bytes a value against 1 plus a scale per 48
  await page.reload();
  await expect(controls(page).kvStorage).toHaveValue('fp32');  // remembered
});

test('the Weights setting reloads the model as int8, generates the Node API\'s int8 text, and is remembered', async ({ page }) => {
  const [expectedFp32, expectedInt8] = await Promise.all([
    nodeGreedyText(BUNDLED_MODEL_FOLDER, 'fp32'), nodeGreedyText(BUNDLED_MODEL_FOLDER, 'int8'),
  ]);
  await openPageWithModel(page);
  await controls(page).model.selectOption({ label: SAFETENSORS_MODEL_LABEL });
  await expect(page.getByText(/Ready: Tiny Shakespeare.* of fp32 weights, /)).toBeVisible();
  const fp32Status = await page.getByText(/Ready: Tiny Shakespeare/).textContent();
  const weightMegabytes = (status) => Number(/([\d.]+) MB of (fp32|int8) weights/.exec(status)[1]);

  const weights = page.getByRole('combobox', { name: 'Weights' });
  await weights.selectOption('int8');
  await expect(page.getByText(/Ready: Tiny Shakespeare.* of int8 weights, /)).toBeVisible({ timeout: MODEL_READY_TIMEOUT });
  const int8Status = await page.getByText(/Ready: Tiny Shakespeare/).textContent();
  expect(weightMegabytes(int8Status)).toBeLessThan(weightMegabytes(fp32Status) / 3);
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  expect(await generateText(page)).toBe(expectedInt8);

  await page.reload();
  await controls(page).model.selectOption({ label: SAFETENSORS_MODEL_LABEL });
  await expect(page.getByText(/Ready: Tiny Shakespeare.* of int8 weights, /)).toBeVisible({ timeout: MODEL_READY_TIMEOUT });
  await expect(weights).toHaveValue('int8');
  await weights.selectOption('fp32');
  await expect(page.getByText(/Ready: Tiny Shakespeare.* of fp32 weights, /)).toBeVisible({ timeout: MODEL_READY_TIMEOUT });
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  expect(await generateText(page)).toBe(expectedFp32);
});

test('the Weights menu shows what the model runs: a GGUF file\'s own type, int8 for GPT-2 1.5B, else the setting', async ({ page }) => {
  await openPageWithModel(page);
  const weights = page.getByRole('combobox', { name: 'Weights' });
  // The default entry is a Q4_0 GGUF file: the setting (fp32) does not apply to it.
  await expect(weights).toBeDisabled();
  await expect(weights.locator('option:checked')).toHaveText("q4_0 (the file's own)");
  await expect(page.getByText('A GGUF file runs in its own quantized types; this setting applies to safetensors folders.')).toBeVisible();

  await page.route('https://huggingface.co/**', () => {}); // the download never answers: the load stays in progress
  await controls(page).model.selectOption({ label: 'GPT-2 1.5B (6.4 GB download)' });
  await expect(page.getByText('Loading GPT-2 1.5B (int8 weights)…')).toBeVisible();
  await expect(weights).toBeDisabled();
  await expect(weights).toHaveValue('int8');
  await expect(page.getByText("Its fp32 weights do not fit in WebAssembly's memory, so it runs as int8.")).toBeVisible();

  await controls(page).model.selectOption({ label: SAFETENSORS_MODEL_LABEL }); // cancels it
  await expect(page.getByText(/Ready: Tiny Shakespeare.* of fp32 weights, /)).toBeVisible({ timeout: MODEL_READY_TIMEOUT });
  await expect(weights).toBeEnabled();
  await expect(weights).toHaveValue('fp32');
  await expect(weights.locator('option')).toHaveText(['fp32 (exact)', 'int8 (¼ of the memory, faster)']);
});

test('the Device menu starts at Auto, which says why it runs on the CPU; GPU is then a one-line error, and CPU reloads and is remembered', async ({ page }) => {
  await openPageWithModel(page);
  const device = page.getByRole('combobox', { name: 'Device' });
  const { alert, generate } = controls(page);
  await expect(device.locator('option')).toHaveText(['Auto', 'GPU (WebGPU)', 'CPU (WebAssembly)']);
  await expect(device).toHaveValue('auto');
  // This project's Chromium runs with --disable-gpu: navigator.gpu exists, but no adapter.
  const onTheCpu = / · on the CPU \(WebAssembly, relaxed SIMD\) because WebGPU gave no adapter$/;
  await expect(page.getByText(/^Ready: Tiny Shakespeare \(bundled, offline\) · /)).toHaveText(onTheCpu);

  await device.selectOption({ label: 'GPU (WebGPU)' });
  await expect(alert).toHaveText("Could not load Tiny Shakespeare (bundled, offline): device 'webgpu': WebGPU gave no adapter");
  // the model in use stays, and still says where it runs
  await expect(page.getByText(/^Ready: Tiny Shakespeare \(bundled, offline\) · /)).toHaveText(onTheCpu);
  await expect(generate).toBeEnabled();

  await device.selectOption({ label: 'CPU (WebAssembly)' });
  await expect(page.getByText(/^Ready: Tiny Shakespeare \(bundled, offline\) · .* · on the CPU \(WebAssembly, relaxed SIMD\)$/)).toBeVisible({ timeout: MODEL_READY_TIMEOUT });
  await expect(alert).toBeEmpty();
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  expect(await generateText(page)).toBe(await nodeGreedyText(BUNDLED_GGUF_FILE));

  await page.reload();
  await expect(device).toHaveValue('wasm');
  await expect(page.getByText(/^Ready: Tiny Shakespeare \(bundled, offline\) · .* · on the CPU \(WebAssembly, relaxed SIMD\)$/)).toBeVisible({ timeout: MODEL_READY_TIMEOUT });
});

test('Stop ends a long generation within a moment', async ({ page }) => {
  await openPageWithModel(page);
  // Without the cache every step reprocesses the whole context, so this run would take many seconds.
  await fillSettings(page, { prompt: PROMPT, temperature: 0.8, maxNewTokens: 240, useKVCache: false });
  const { generate, stop, output } = controls(page);
  await generate.click();
  await expect(generate).toBeDisabled();
  await expect(output.locator('.token').nth(2)).toBeAttached({ timeout: MODEL_READY_TIMEOUT });

  await stop.click();
  await expect(generate).toBeEnabled({ timeout: 2_000 });
  await expect(stop).toBeDisabled();
  const tokensAfterStop = await output.locator('.token').count();
  await page.waitForTimeout(1_000);
  expect(await output.locator('.token').count()).toBe(tokensAfterStop);
  expect(tokensAfterStop).toBeLessThan(240);
  await expect(page.getByText('stopped', { exact: true })).toBeVisible();
});

test('a bad model URL shows a clear error, and the page keeps working', async ({ page, baseURL }) => {
  const badFolder = new URL('nonexistent/', baseURL).href;
  await page.goto(`/?model=${encodeURIComponent(badFolder)}`);
  const { alert, model, generate, progress } = controls(page);
  await expect(alert).toContainText('Could not load');
  await expect(alert).toContainText('config.json');
  await expect(alert).toContainText('404');
  await expect(progress).toBeHidden();
  await expect(generate).toBeDisabled();

  await model.selectOption({ label: BUNDLED_MODEL_LABEL });
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(alert).toBeEmpty();
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, maxNewTokens: 8, useKVCache: true });
  expect((await generateText(page)).length).toBeGreaterThan(0);
});

test('a reload takes the model from the cache instead of the network', async ({ page }) => {
  const weightRequests = [];
  page.on('request', (request) => {
    if (request.url().endsWith('/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf')) weightRequests.push(request.url());
  });
  await openPageWithModel(page);
  expect(weightRequests).toHaveLength(1);

  await page.reload();
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  expect(weightRequests).toHaveLength(1);
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, maxNewTokens: 8, useKVCache: true });
  expect((await generateText(page)).length).toBeGreaterThan(0);
});

test('"Open local files…" loads a model from the four chosen files', async ({ page }) => {
  await openPageWithModel(page);
  const { model, generate, alert } = controls(page);
  const fileChooser = page.waitForEvent('filechooser');
  await model.selectOption({ label: 'Open local files…' });
  const files = ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt'];
  await (await fileChooser).setFiles(files.map((name) => BUNDLED_MODEL_FOLDER + name));
  await expect(model).toHaveValue('loaded-local');
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(page.getByText(/Ready: Local files \(model\.safetensors/)).toBeVisible();
  await expect(alert).toBeEmpty();
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  expect(await generateText(page)).toBe(await nodeGreedyText(BUNDLED_MODEL_FOLDER, 'fp32'));
});

test('HTML in the prompt or the model URL stays text and never runs', async ({ page }) => {
  const payload = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
  await page.goto(`/?model=${encodeURIComponent(payload)}`);
  const { alert, model, prompt, output, generate } = controls(page);
  await expect(alert).toContainText('Could not load');
  await model.selectOption({ label: BUNDLED_MODEL_LABEL });
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });

  await fillSettings(page, { prompt: payload, temperature: 0, maxNewTokens: 8, useKVCache: true });
  await generateText(page);
  await expect(prompt).toHaveValue(payload);
  await expect(output.locator('.prompt-text')).toHaveText(payload);
  await expect(page.locator('img, script:not([src])')).toHaveCount(0);
  expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
});

test('hovering or focusing a token shows its probability and five alternatives', async ({ page }) => {
  await openPageWithModel(page);
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, maxNewTokens: 10, useKVCache: true });
  await generateText(page);
  const tokens = controls(page).output.locator('.token');
  const tooltip = page.getByRole('tooltip');

  // A token of only whitespace (a newline) has no area to hover; the keyboard reaches every token.
  await tokens.filter({ hasText: /\S/ }).first().hover();
  await expect(tooltip).toBeVisible();
  await expect(tooltip).toContainText(/p = \d/);
  await expect(tooltip.getByRole('listitem')).toHaveCount(5);
  // At temperature 0 the chosen token is the likeliest one, listed first.
  await expect(tooltip.getByRole('listitem').first()).toHaveClass(/chosen/);

  await page.mouse.move(0, 0);
  await expect(tooltip).toBeHidden();
  await tokens.first().focus();
  await expect(tooltip).toBeVisible();
  await page.keyboard.press('ArrowRight');
  await expect(tokens.nth(1)).toBeFocused();
  await expect(tokens.nth(1)).toHaveAttribute('aria-describedby', 'token-tooltip');
  await expect(tooltip.getByRole('listitem')).toHaveCount(5);
  await page.keyboard.press('Escape');
  await expect(tooltip).toBeHidden();
});
