// End-to-end tests of Continue on the page and in the widget: more text after the output, from a model that
// keeps what it already read of it (the reused tokens), and the same text as a fresh run over the whole text.
// Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { fileURLToPath } from 'node:url';
import { loadModel } from '../../web/lib/gpt2.js';
import { controls, fillSettings, nodeText } from './page-controls.js';

const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const PROMPT = 'ROMEO:\nWhat light';
const GREEDY = { temperature: 0, topK: 40, topP: 0.95, maxNewTokens: 20 };
// Sampled, with a seed whose text the tokenizer cuts into other tokens than were generated ("\n", "\n" where it
// makes one "\n\n"): continuing from the text would reuse only part of the cache; from the ids it reuses all.
const SAMPLED = { temperature: 0.8, topK: 40, topP: 0.95, maxNewTokens: 40, seed: 9 };

// The Node API's run on prompt, then its continuation: a fresh run (new model) whose prompt is the first run's
// prompt ids and generated tokens. -> { first, second } texts, and textAgrees: whether encoding the prompt and the
// first text gives those same ids.
async function nodeRunAndContinuation(prompt, settings) {
  const run = async (input) => {
    const model = await loadModel(BUNDLED_GGUF_FILE);
    try {
      const pieces = [];
      for await (const piece of model.generate(input, settings)) pieces.push(piece);
      return { text: pieces.map((piece) => piece.text).join(''), tokens: pieces.map((piece) => piece.token).filter(Number.isInteger) };
    } finally {
      model.dispose();
    }
  };
  const first = await run(prompt);
  const encoder = await loadModel(BUNDLED_GGUF_FILE);
  const ids = [...await encoder.encode(prompt), ...first.tokens];
  const textIds = await encoder.encode(prompt + first.text);
  encoder.dispose();
  const second = await run(ids);
  return { first: first.text, second: second.text, textAgrees: JSON.stringify(textIds) === JSON.stringify(ids) };
}
const MODEL_READY_TIMEOUT = 90_000;

async function generatedText(output) {
  return (await output.locator('.token').allTextContents()).join('');
}

// The leading number of a speed panel cell ("57" of "57 of 60 prompt tokens", "for 60 prompt tokens" -> 60).
async function cellNumber(page, id, pattern) {
  const cell = page.locator(`#${id}`);
  await expect(cell).toHaveText(pattern);
  return Number(pattern.exec(await cell.textContent())[1]);
}

test('Continue generates more after the output, reusing the tokens the model already read, as a fresh run of the whole text would', async ({ page }) => {
  const { generate, output } = controls(page);
  const continueButton = page.getByRole('button', { name: 'Continue' });
  await page.goto('/');
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(continueButton).toBeDisabled();  // no output yet

  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  await generate.click();
  await expect(continueButton).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  const first = await generatedText(output);
  expect(first).toBe(await nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY));
  const firstPromptTokens = await cellNumber(page, 'stat-prefill', /for (\d+) prompt tokens$/);

  await continueButton.click();
  await expect(output.locator('.token')).toHaveCount(2 * GREEDY.maxNewTokens, { timeout: MODEL_READY_TIMEOUT });
  await expect(continueButton).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  const all = await generatedText(output);
  expect(all.startsWith(first)).toBe(true);
  expect(all.slice(first.length)).toBe(await nodeText(BUNDLED_GGUF_FILE, PROMPT + first, GREEDY));
  await expect(output.locator('.prompt-text')).toHaveText(PROMPT);  // appended to, not started again

  // The whole output so far was the prompt, and the model had already read all of it but the newest token.
  const promptTokens = await cellNumber(page, 'stat-prefill', /for (\d+) prompt tokens$/);
  const reused = await cellNumber(page, 'stat-reused', /^(\d+)of \d+ prompt tokens$/);
  expect(promptTokens).toBe(firstPromptTokens + GREEDY.maxNewTokens);
  expect(reused).toBe(promptTokens - 1);
});

test('Continue after sampled text that encodes to other tokens still reuses all but one, and equals a fresh run on those tokens', async ({ page }) => {
  const { generate, output } = controls(page);
  const continueButton = page.getByRole('button', { name: 'Continue' });
  const expected = await nodeRunAndContinuation('ROMEO:', SAMPLED);
  expect(expected.textAgrees).toBe(false);  // the case this test is about
  await page.goto('/');
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await fillSettings(page, { prompt: 'ROMEO:', ...SAMPLED, useKVCache: true });
  await generate.click();
  await expect(continueButton).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  expect(await generatedText(output)).toBe(expected.first);
  await continueButton.click();
  await expect(output.locator('.token')).toHaveCount(2 * SAMPLED.maxNewTokens, { timeout: MODEL_READY_TIMEOUT });
  await expect(continueButton).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  expect(await generatedText(output)).toBe(expected.first + expected.second);
  const promptTokens = await cellNumber(page, 'stat-prefill', /for (\d+) prompt tokens$/);
  expect(await cellNumber(page, 'stat-reused', /^(\d+)of \d+ prompt tokens$/)).toBe(promptTokens - 1);
});

test('the widget\'s Continue appends to its output the text a fresh run of the whole text gives, reusing tokens', async ({ page }) => {
  const settings = { temperature: 0, maxNewTokens: 12 };
  await page.goto('/embed.html');
  await page.evaluate((options) => {
    const element = document.createElement('div');
    element.id = 'greedy-widget';
    document.body.append(element);
    window.GPT2Widget.mount(element, { prompt: 'ROMEO:', ...options });
  }, settings);
  const widget = page.locator('#greedy-widget');
  const generate = widget.getByRole('button', { name: 'Generate' });
  const continueButton = widget.getByRole('button', { name: 'Continue' });
  const status = widget.getByRole('status');
  const generated = widget.locator('.generated');

  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(continueButton).toBeDisabled();
  await generate.click();
  await expect(status).toHaveText(/^12 tokens/, { timeout: MODEL_READY_TIMEOUT });
  const first = await generated.textContent();
  expect(first).toBe(await nodeText(BUNDLED_GGUF_FILE, 'ROMEO:', settings));

  await continueButton.click();
  await expect(status).toHaveText(/^12 tokens .*· (\d+) reused$/, { timeout: MODEL_READY_TIMEOUT });
  const reused = Number(/(\d+) reused$/.exec(await status.textContent())[1]);
  expect(reused).toBeGreaterThan(0);
  const all = await generated.textContent();
  expect(all.startsWith(first)).toBe(true);
  expect(all.slice(first.length)).toBe(await nodeText(BUNDLED_GGUF_FILE, `ROMEO:${first}`, settings));
  await expect(widget.locator('.echo')).toHaveText('ROMEO:');
});
