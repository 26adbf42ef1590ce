// End-to-end tests of the Compare strategies view (web/page/compare_panel.js) with the real wasm engine and the
// bundled model. Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { controls, fillSettings } from './page-controls.js';
import { generateInNode } from '../js/node_generation.js';
import { fileURLToPath } from 'node:url';

const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const PROMPT = 'ROMEO:\nWhat light';
const MAX_NEW_TOKENS = 40;
const MODEL_READY_TIMEOUT = 90_000;

const compareButton = (page) => page.getByRole('button', { name: 'Compare', exact: true });
const columns = (page) => page.getByRole('article');
const column = (page, number) => page.getByRole('article', { name: new RegExp(`^Column ${number}: `) });
const columnText = async (page, number) => (await column(page, number).locator('.compare-text .token').allTextContents()).join('');

async function openCompareView(page) {
  await page.goto('/');
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await fillSettings(page, { prompt: PROMPT, maxNewTokens: MAX_NEW_TOKENS, useKVCache: true });
  await page.getByText('Compare strategies', { exact: true }).click();
  await expect(compareButton(page)).toBeVisible();
}

// Runs a comparison to its end. A run marks every column's speed "waiting" as it starts; on the bundled model a
// whole run can start and end between two polls of an assertion, so the mark is watched for from before the click.
async function compare(page) {
  await page.evaluate(() => {
    window.__comparisonStarted = false;
    const observer = new MutationObserver(() => {
      if (![...document.querySelectorAll('.compare-speed')].some((speed) => speed.textContent === 'waiting')) return;
      window.__comparisonStarted = true;
      observer.disconnect();
    });
    observer.observe(document.body, { childList: true, characterData: true, subtree: true });
  });
  await compareButton(page).click();
  await expect(compareButton(page)).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  expect(await page.evaluate(() => window.__comparisonStarted)).toBe(true);
  await expect(controls(page).alert).toBeEmpty();
}

test('the default columns run greedy, beam search, top-k, top-p and min-p; greedy and beam search give the Node API\'s texts', async ({ page }) => {
  const greedy = { temperature: 0, maxNewTokens: MAX_NEW_TOKENS };
  const { text: expected } = await generateInNode(BUNDLED_GGUF_FILE, PROMPT, greedy);
  const { text: expectedBeams } = await generateInNode(BUNDLED_GGUF_FILE, PROMPT, { ...greedy, numBeams: 4 });
  expect(expected.length).toBeGreaterThan(0);
  expect(expectedBeams).not.toBe(expected);  // the search finds another text than greedy's
  await openCompareView(page);
  await expect(columns(page).getByRole('heading')).toHaveText([
    'Column 1: Greedy', 'Column 2: Beam search, 4 beams', 'Column 3: Top-k 40 at temperature 0.8', 'Column 4: Top-p 0.9 at temperature 0.8',
    'Column 5: Min-p 0.1 at temperature 1',
  ]);
  await expect(page.getByLabel('Seed (column 4)')).toHaveValue('1');
  await compare(page);
  expect(await columnText(page, 1)).toBe(expected);
  expect(await columnText(page, 2)).toBe(expectedBeams);
  for (const number of [1, 2, 3, 4, 5]) {
    await expect(column(page, number).locator('.compare-speed')).toHaveText(/^\d+(\.\d)? tokens\/s$/);
    expect((await columnText(page, number)).length).toBeGreaterThan(0);
  }
  // the same seed gives the same text
  const sampled = await columnText(page, 3);
  await compare(page);
  expect(await columnText(page, 3)).toBe(sampled);
});

test('hovering or focusing a column\'s token shows its tooltip with the probability and the alternatives', async ({ page }) => {
  await openCompareView(page);
  await compare(page);
  const tooltip = page.getByRole('tooltip');
  for (const number of [3, 2]) {  // a sampled column's token, and a beam's (the model's probability)
    await column(page, number).locator('.token').nth(3).hover();
    await expect(tooltip).toBeVisible();
    await expect(tooltip.locator('.tooltip-probability')).toHaveText(/p = (\d\.\d\d|\d\.\de−\d+)$/);
    await expect(tooltip.getByRole('listitem')).toHaveCount(5);
  }
  await page.mouse.move(0, 0);
  await expect(tooltip).toBeHidden();
  await column(page, 1).locator('.token').first().focus();
  await expect(tooltip).toBeVisible();
  await page.keyboard.press('ArrowRight');
  await expect(column(page, 1).locator('.token').nth(1)).toBeFocused();
  await expect(tooltip.getByRole('listitem').first()).toHaveClass(/chosen/);  // greedy: always the likeliest
});

test('columns are removed down to one and added as a copy of the last; a greedy copy with speculative decoding gives the same text and shows its acceptance', async ({ page }) => {
  await openCompareView(page);
  await expect(columns(page)).toHaveCount(5);
  for (const number of [5, 4, 3, 2]) await page.getByRole('button', { name: `Remove column ${number}` }).click();
  await expect(columns(page)).toHaveCount(1);
  await expect(page.getByRole('button', { name: 'Remove column 1' })).toBeDisabled();  // at least one stays

  await page.getByRole('button', { name: 'Add column' }).click();
  await expect(columns(page)).toHaveCount(2);
  await expect(page.getByLabel('Temperature (column 2)')).toHaveValue('0');
  await page.getByRole('checkbox', { name: 'Speculative decoding (column 2)' }).check();
  await expect(column(page, 2)).toHaveAccessibleName('Column 2: Greedy, speculative');
  await compare(page);
  const plain = await columnText(page, 1);
  expect(plain.length).toBeGreaterThan(0);
  expect(await columnText(page, 2)).toBe(plain);
  await expect(column(page, 1).locator('.compare-speed')).not.toContainText('drafts');
  await expect(column(page, 2).locator('.compare-speed')).toHaveText(/^\d+(\.\d)? tokens\/s · \d+ of [1-9]\d* drafts accepted \(\d+ %\)$/);

  // a removed middle column renumbers the ones after it
  await page.getByRole('button', { name: 'Add column' }).click();
  await page.getByRole('button', { name: 'Remove column 2' }).click();
  await expect(columns(page).getByRole('heading')).toHaveText(['Column 1: Greedy', 'Column 2: Greedy, speculative']);

  // beams and speculation do not go together: the field says so, and nothing runs
  await page.getByLabel('Beams (column 2)').fill('3');
  await expect(column(page, 2)).toHaveAccessibleName('Column 2: Beam search, 3 beams, speculative');
  await compareButton(page).click();
  await expect(controls(page).alert).toHaveText('Beam search and speculative decoding cannot be combined: set Beams to 1 or turn speculation off.');
  await expect(page.getByLabel('Beams (column 2)')).toBeFocused();
});

test('an invalid column field is the page\'s error and Compare stays usable; Stop ends a run', async ({ page }) => {
  await openCompareView(page);
  await page.getByLabel('Top-p (column 4)').fill('2');
  await compareButton(page).click();
  await expect(controls(page).alert).toContainText('Top-p (column 4)');
  await expect(page.getByLabel('Top-p (column 4)')).toBeFocused();
  await page.getByLabel('Top-p (column 4)').fill('0.9');

  // a beam search longer than the model's context is refused before anything runs, at the column's Beams
  await fillSettings(page, { maxNewTokens: 1000 });
  await compareButton(page).click();
  await expect(controls(page).alert).toHaveText("Beam search generates at most the model's context (256 tokens): set Max new tokens to 256 or less, or Beams to 1.");
  await expect(page.getByLabel('Beams (column 2)')).toBeFocused();
  await expect(column(page, 1).locator('.token')).toHaveCount(0);
  await page.getByLabel('Beams (column 2)').fill('1');

  await compareButton(page).click();
  await expect(column(page, 1).locator('.token').nth(2)).toBeAttached({ timeout: MODEL_READY_TIMEOUT });
  await controls(page).stop.click();
  await expect(compareButton(page)).toBeEnabled();
  await expect(controls(page).generate).toBeEnabled();
  await expect(page.getByText(/stopped$/)).toHaveCount(1);
  await expect(column(page, 5).locator('.token')).toHaveCount(0);
  await expect(controls(page).alert).toBeEmpty();
});
