// End-to-end test of the page's Analyze text on a long text: a megabyte of text (about 300,000 tokens, minutes of
// scoring in the engine worker) is analyzed, and Stop ends the score at once, through the score's AbortSignal
// across to the worker; the page is then as usable as before. Run after `bash tools/dev/build.sh`.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test, expect } from './under_csp.js';
import { controls, fillSettings, nodeText } from './page-controls.js';

const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const MEGABYTE_OF_TEXT = readFileSync(fileURLToPath(new URL('../fixtures/tinyshakespeare/tinyshakespeare.txt', import.meta.url)), 'utf8').slice(0, 1_000_000);
const PROMPT = 'ROMEO:\nWhat light';
const GREEDY = { temperature: 0, topK: 40, topP: 0.95, maxNewTokens: 24 };
const MODEL_READY_TIMEOUT = 90_000;
// Far below the minutes the whole score takes (about 10 on a 2-core machine), far above a Stop that works.
const STOPPED_WITHIN = 60_000;

test('Stop ends the analysis of a 1 MB text at once, and the page then generates the Node API\'s greedy text', async ({ page }) => {
  const expected = await nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY);
  await page.goto('/');
  await page.getByRole('radio', { name: 'Analyze text' }).check();
  const analyze = page.getByRole('button', { name: 'Analyze' });
  const stop = page.getByRole('button', { name: 'Stop' });
  const analysisText = page.locator('#analysis-text');
  // as a paste puts it there: fill() types a megabyte too slowly
  await page.getByRole('textbox', { name: 'Text to analyze' }).evaluate((textArea, text) => {
    textArea.value = text;
    textArea.dispatchEvent(new Event('input', { bubbles: true }));
  }, MEGABYTE_OF_TEXT);
  await expect(analyze).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(stop).toBeDisabled();

  await analyze.click();
  await expect(stop).toBeEnabled();
  await expect(analyze).toBeDisabled();
  await expect(analysisText).toHaveAttribute('aria-busy', 'true');
  await stop.click();
  await expect(analyze).toBeEnabled({ timeout: STOPPED_WITHIN });
  await expect(stop).toBeDisabled();
  await expect(analysisText).toHaveAttribute('aria-busy', 'false');
  await expect(analysisText.locator('.token')).toHaveCount(0);
  await expect(controls(page).alert).toBeEmpty();  // a Stop is no failure

  await page.getByRole('radio', { name: 'Generate' }).check();
  await fillSettings(page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
  const { generate, output } = controls(page);
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  expect((await output.locator('.token').allTextContents()).join('')).toBe(expected);
});
