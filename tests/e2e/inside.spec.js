// The page's Inside the model view (web/page/inside_*.js) with the real engine and the bundled model: a selected
// token's panels show the Node API's numbers (its piece's inspection, model.inspect()), the view works by keyboard
// and on a 390 px screen without console errors or accessibility violations, updates live during a run without
// more than about one model.inspect() a second, and shows the cached step equal to a full recompute bit for bit.
// Run after `bash tools/dev/build.sh`.
import AxeBuilder from '@axe-core/playwright';
import { fileURLToPath } from 'node:url';
import { test, expect } from './under_csp.js';
import { collectErrors, controls, countWorkerRequests, fillSettings } from './page-controls.js';
import { loadModel } from '../../web/lib/gpt2.js';

const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const MODEL_READY_TIMEOUT = 90_000;
const PROMPT = 'ROMEO:\nWhat light';
const SEEDED = { temperature: 0.8, topK: 40, topP: 0.95, maxNewTokens: 8, seed: 7 };

// The page's numbers against the Node API's, whose wasm build may differ in its last bits (Chromium runs the
// relaxed-SIMD one): three significant digits as shown, and probabilities to two decimals.
const closeTo = (shown, expected) => Math.abs(shown - expected) <= 0.005 * Math.abs(expected) + 1e-6;
const parseShown = (text) => Number(text.replace('−', '-'));
// the view's sizes: "393 kB", "1.57 MB"
const size = (bytes) => (bytes < 1e6 ? `${Number((bytes / 1e3).toPrecision(3))} kB` : `${Number((bytes / 1e6).toPrecision(3))} MB`);
const visible = (text) => `“${text.replaceAll(' ', '␣').replaceAll('\n', '↵').replaceAll('\t', '⇥')}”`;

// The Node API's run of PROMPT with SEEDED, each piece with its step's inspection, and the model for more calls.
let node;
test.beforeAll(async () => {
  const model = await loadModel(BUNDLED_GGUF_FILE);
  const ids = await model.encode(PROMPT);
  const pieces = [];
  for await (const piece of model.generate(PROMPT, { ...SEEDED, inspect: { logitLens: false } })) pieces.push(piece);
  node = { model, ids, pieces };
});
test.afterAll(() => node.model.dispose());

async function openPageWithView(page) {
  await page.goto('/');
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await page.getByText('Inside the model', { exact: true }).click();
}

async function generate(page, settings) {
  await fillSettings(page, { prompt: PROMPT, useKVCache: true, ...settings });
  await controls(page).generate.click();
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
}

const tokenList = (page) => page.getByRole('listbox', { name: 'Tokens' });
const panel = (page, name) => page.getByRole('region', { name, exact: true });

// The body rows of the table named caption: each row's cells' texts.
async function tableRows(page, caption) {
  const rows = page.getByRole('table', { name: caption, exact: true }).locator('tbody tr');
  return Promise.all((await rows.all()).map((row) => row.locator('th, td').allInnerTexts()));
}

test('a selected token\'s panels show the Node API\'s numbers, and its cached step equals a full recompute', async ({ page }) => {
  const errors = collectErrors(page);
  await openPageWithView(page);
  await generate(page, SEEDED);
  const { ids, pieces } = node;
  expect(await controls(page).output.locator('.token').allTextContents()).toEqual(pieces.map((piece) => piece.text));
  await expect(tokenList(page).getByRole('option')).toHaveCount(ids.length + pieces.length);

  const piece = pieces[2];  // the third generated token: its step is the pass at the token before it
  const position = piece.position, query = position - 1, recorded = piece.inspection;
  await tokenList(page).getByRole('option').nth(position).click();
  await expect(page.locator('#inside-selection')).toHaveText(new RegExp(`^Selected .* at position ${position} \\(generated\\), produced by the pass at .* \\(position ${query}\\): recorded`));

  // attention: layer 1, head 2's weights over every position up to the pass's
  await page.getByLabel('Layer', { exact: true }).selectOption('layer 1');
  await page.getByLabel('Head', { exact: true }).selectOption('head 2');
  await panel(page, 'Attention').getByText('Attention as tables').click();
  await expect(page.getByRole('table', { name: 'Layer 1, head 2: the weight on each position' }).locator('tbody tr')).toHaveCount(position);
  const weights = await tableRows(page, 'Layer 1, head 2: the weight on each position');
  expect(weights.map(([at]) => Number(at))).toEqual([...Array(position).keys()]);
  weights.forEach(([, , shown], j) => expect(closeTo(parseShown(shown), recorded.attention[1][2][0][j]), `weight ${j}`).toBe(true));
  await expect(panel(page, 'Attention').locator('canvas')).toHaveCount(4 + 1);  // a picture per layer, one enlarged
  await expect(panel(page, 'Attention').getByRole('img')).toHaveAttribute('aria-label', /^Layer 1, head 2: the pass at .* attends most to /);

  // block contributions
  const norms = await tableRows(page, 'L2 norms of what each layer added, and of the residual stream after it');
  norms.forEach(([layer, attention, mlp, residual], l) => {
    expect(layer).toBe(`Layer ${l}`);
    const block = recorded.blocks[l][0];
    for (const [shown, expected] of [[attention, block.attention], [mlp, block.mlp], [residual, block.residual]]) expect(closeTo(parseShown(shown), expected)).toBe(true);
  });

  // the KV cache after the step: its positions and bytes
  const kv = recorded.kv;
  await expect(panel(page, 'KV cache')).toContainText(`${kv.format} storage · ${kv.filled} of ${kv.capacity} positions hold keys and values · ${size(kv.bytes)} in all`);
  expect(await tableRows(page, 'What this pass did to the cache')).toEqual([['written by this pass', String(query), '1']]);

  // the sampler: the distribution drawn from, the drawn token marked
  const distribution = recorded.sampler.stages.find((stage) => stage.name === 'distribution');
  const drawn = await tableRows(page, `The distribution drawn from · ${distribution.candidates} candidates left`);
  drawn.forEach(([token, probability], k) => {
    const entry = distribution.top[k];
    expect(token).toBe(entry.id === piece.token ? `${visible(entry.text)} (drawn)` : visible(entry.text));
    expect(Math.abs(Number(probability) - entry.value)).toBeLessThan(0.006);
  });
  await expect(panel(page, 'Sampler').locator('.sampler-why')).toContainText(/^(Sampled|Greedy)/);

  // the logit lens over the window up to the pass, against model.inspect()
  const lensPositions = [...Array(query + 1).keys()];
  const lens = await node.model.inspect([...ids, ...pieces.map((p) => p.token)].slice(0, position), { positions: lensPositions, heads: [], topK: 5 });
  const guesses = await tableRows(page, `Best guesses at the next token, positions 0 to ${query}`);
  expect(guesses.map(([header]) => header)).toEqual(['After layer 0', 'After layer 1', 'After layer 2', 'After layer 3 (the output)', 'Next token']);
  for (let l = 0; l < 4; l++) {
    lensPositions.forEach((at, i) => {
      const best = lens.logitLens[l][i][0];
      const [text, probability] = guesses[l][i + 1].replace(/ ✓$/, '').split(/ (?=\S+$)/);
      expect(text).toBe(visible(best.text));
      expect(Math.abs(Number(probability.replace('e−', 'e-')) - best.probability)).toBeLessThan(0.006);
    });
  }

  // the cached step against the full recompute
  await expect(panel(page, 'Cached step against a full recompute').locator('.check-verdict'))
    .toHaveText('Cached step = full recompute: identical (max |Δ| 0 over the top 5 logits)');
  const check = await tableRows(page, "The top logits of the run's step and of the recompute");
  expect(check.map((row) => row[3])).toEqual(['0', '0', '0', '0', '0']);
  expect(check.map((row) => row[1])).toEqual(check.map((row) => row[2]));

  // a prompt token: its step from a fresh pass, equal to model.inspect()'s; the first token has none
  await tokenList(page).getByRole('option').nth(3).click();
  await expect(page.locator('#inside-selection')).toHaveText(/at position 3 \(prompt\), produced by the pass at .* \(position 2\): a fresh pass/);
  await expect(page.getByRole('table', { name: 'Layer 1, head 2: the weight on each position' }).locator('tbody tr')).toHaveCount(3);
  const fresh = await node.model.inspect(ids.slice(0, 3), { positions: [2] });
  const promptWeights = await tableRows(page, 'Layer 1, head 2: the weight on each position');
  promptWeights.forEach(([, , shown], j) => expect(closeTo(parseShown(shown), fresh.attention[1][2][0][j])).toBe(true));
  await expect(panel(page, 'Sampler')).toContainText('A prompt token is given, not drawn');
  await tokenList(page).getByRole('option').first().click();
  await expect(page.locator('#inside-selection')).toHaveText(/at position 0 starts the text: no pass produced it/);
  expect(errors).toEqual([]);
});

test('by keyboard on a 390 px screen: Enter on an output token, arrow keys in the list; no console errors, axe clean', async ({ page }) => {
  const errors = collectErrors(page);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto('/');
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await page.getByText('Inside the model', { exact: true }).focus();
  await page.keyboard.press('Enter');
  await expect(tokenList(page)).toBeVisible();
  await generate(page, SEEDED);
  const options = tokenList(page).getByRole('option');
  const count = node.ids.length + node.pieces.length;

  // the output's second token, focused as its tooltip's keys reach it, then Enter
  await controls(page).output.locator('.token').first().focus();
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('Enter');
  const second = node.pieces[1].position;
  await expect(options.nth(second)).toHaveAttribute('aria-selected', 'true');

  // the list: one Tab stop, ← / → / Home / End move the selection and the focus
  await options.nth(second).focus();
  await page.keyboard.press('ArrowLeft');
  await expect(options.nth(second - 1)).toBeFocused();
  await expect(options.nth(second - 1)).toHaveAttribute('aria-selected', 'true');
  await expect(page.locator('#inside-selection')).toContainText(`at position ${second - 1} `);
  await page.keyboard.press('End');
  await expect(options.nth(count - 1)).toBeFocused();
  await expect(tokenList(page).locator('[tabindex="0"]')).toHaveCount(1);
  await expect(panel(page, 'Cached step against a full recompute').locator('.check-verdict')).toHaveText(/^Cached step = full recompute: identical/);

  // the layer buttons and their pressed state by keyboard
  const layerButton = panel(page, 'Attention').getByRole('button', { name: 'Layer 2' });
  await layerButton.focus();
  await page.keyboard.press('Enter');
  await expect(panel(page, 'Attention').getByRole('button', { name: 'Layer 2' })).toHaveAttribute('aria-pressed', 'true');
  await expect(panel(page, 'Attention').getByRole('button', { name: 'Layer 2' })).toBeFocused();

  // nothing wider than the screen; the tables scroll in their own boxes
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  for (const summary of await page.locator('.inside-tables > summary').all()) await summary.click();
  const { violations } = await new AxeBuilder({ page }).include('#inside-card').analyze();
  expect(violations.map(({ id, impact, nodes }) => `${id} (${impact}, ${nodes.length} nodes): ${nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([]);
  expect(errors).toEqual([]);
});

test('updates live during a run, asking model.inspect() about once a second at most; cached fp32 steps, Continue\'s too, equal their recompute', async ({ page }) => {
  const errors = collectErrors(page);
  const workerRequests = await countWorkerRequests(page);
  await openPageWithView(page);
  // Without the KV cache each step feeds the whole text again: a run long enough to watch on the bundled model.
  await fillSettings(page, { prompt: PROMPT, temperature: 0.8, topK: 40, topP: 0.95, maxNewTokens: 120, seed: 3, useKVCache: false, kvCache: 'int8' });
  // what the selection line says while the output is busy
  await page.evaluate(() => {
    window.__liveSelections = new Set();
    const line = document.getElementById('inside-selection');
    new MutationObserver(() => {
      if (document.getElementById('output').getAttribute('aria-busy') === 'true') window.__liveSelections.add(line.textContent);
    }).observe(line, { childList: true, characterData: true, subtree: true });
  });
  const before = (await workerRequests()).inspect ?? 0;
  const started = Date.now();
  await controls(page).generate.click();
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  const seconds = (Date.now() - started) / 1000;
  const live = (await page.evaluate(() => [...window.__liveSelections])).filter((text) => text.includes('(generated)'));
  expect(live.length).toBeGreaterThanOrEqual(3);
  expect(live.filter((text) => !/produced by the pass at .*: recorded as the run went\.$/.test(text))).toEqual([]);
  // the fresh passes (the logit lens of the token shown) at most about once a second while generating, one at the end
  expect((await workerRequests()).inspect - before).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
  await expect(panel(page, 'Cached step against a full recompute').locator('.check-verdict'))
    .toHaveText("The run's pass = full recompute: identical (max |Δ| 0 over the top 5 logits)");

  // with the cache, in fp32: the last token's step wrote one position and read the rest
  await generate(page, { temperature: 0.8, topK: 40, topP: 0.95, maxNewTokens: 40, seed: 3, kvCache: 'fp32' });
  const count = node.ids.length + await controls(page).output.locator('.token').count();
  const options = tokenList(page).getByRole('option');
  await expect(options).toHaveCount(count);
  await expect(options.nth(count - 1)).toHaveAttribute('aria-selected', 'true');
  await expect(panel(page, 'KV cache')).toContainText(`fp32 storage · ${count - 1} of 256 positions hold keys and values`);
  await expect(panel(page, 'Cached step against a full recompute').locator('.check-verdict'))
    .toHaveText('Cached step = full recompute: identical (max |Δ| 0 over the top 5 logits)');

  // Continue: its first step kept the cache of the text before it and wrote the one position fed again
  await page.getByRole('button', { name: 'Continue' }).click();
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(options).toHaveCount(node.ids.length + await controls(page).output.locator('.token').count());
  await options.nth(count).click();
  expect(await tableRows(page, 'What this pass did to the cache')).toEqual([
    ['kept from before (reused)', `0 to ${count - 2}`, String(count - 1)], ['written by this pass', String(count - 1), '1']]);
  await expect(panel(page, 'Cached step against a full recompute').locator('.check-verdict'))
    .toHaveText('Cached step = full recompute: identical (max |Δ| 0 over the top 5 logits)');
  expect(errors).toEqual([]);
});
