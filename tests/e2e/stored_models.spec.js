// The stored models in the page, with Chromium's own Cache API: the "Stored models" list (web/page/stored_models.js) shows each
// model the page stored, by its menu label, with its size; Delete removes its files, the model in use stays
// loaded, and the next load downloads it again. Each test starts with empty storage (a new browser context).
// Run after `bash tools/dev/build.sh`.
import { test, expect } from './under_csp.js';
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { controls, fillSettings, nodeText } from './page-controls.js';

const BUNDLED_FOLDER = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const BUNDLED_GGUF_FILE = `${BUNDLED_FOLDER}tiny-shakespeare.Q4_0.gguf`;
const GGUF_LABEL = 'Tiny Shakespeare (bundled, offline)';
const FOLDER_LABEL = 'Tiny Shakespeare, safetensors (bundled, fp32 or int8)';
const FOLDER_FILES = ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt'];
const READY = 90_000;
const GREEDY = { temperature: 0, topK: 40, topP: 0.95, maxNewTokens: 8 };

const bytesOf = (path) => statSync(path).size;

function storedModels(page) {
  const list = page.getByRole('list', { name: 'Stored models' });
  return { list, items: list.getByRole('listitem'), empty: page.getByText('No models stored', { exact: true }) };
}

// A stored model's row shows its name and its size in MB; the size's <data> value is its exact bytes.
async function expectStoredModel(item, label, bytes) {
  await expect(item.locator('.stored-model-name')).toHaveText(label);
  await expect(item.locator('.stored-model-size')).toHaveText(`${(bytes / 1e6).toFixed(1)} MB`);
  await expect(item.locator('.stored-model-size')).toHaveAttribute('value', String(bytes));
}

async function openPageWithModel(page) {
  await page.goto('/');
  await expect(controls(page).generate).toBeEnabled({ timeout: READY });
}

test('lists the bundled model once loaded, with its file\'s size; Delete empties the list, the model still generates, and a reload downloads it again', async ({ page }) => {
  const weightRequests = [];
  page.on('request', (request) => {
    if (request.url().endsWith('/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf')) weightRequests.push(request.url());
  });
  await openPageWithModel(page);
  const { list, items, empty } = storedModels(page);
  await expect(items).toHaveCount(1);
  await expectStoredModel(items.first(), GGUF_LABEL, bytesOf(BUNDLED_GGUF_FILE));
  await expect(empty).toBeHidden();

  const deleteButton = page.getByRole('button', { name: `Delete ${GGUF_LABEL}` });
  await deleteButton.focus();
  await page.keyboard.press('Enter');
  await expect(empty).toBeVisible();
  await expect(empty).toBeFocused();
  await expect(list).toBeHidden();
  expect(await page.evaluate(async () => (await import('./js/lib/gpt2.js')).listCachedModels())).toEqual([]);

  await fillSettings(page, { prompt: 'ROMEO:', ...GREEDY, useKVCache: true });
  await controls(page).generate.click();
  await expect(controls(page).generate).toBeEnabled({ timeout: READY });
  const text = (await controls(page).output.locator('.token').allTextContents()).join('');
  expect(text).toBe(await nodeText(BUNDLED_GGUF_FILE, 'ROMEO:', GREEDY));
  await expect(controls(page).alert).toBeEmpty();

  expect(weightRequests).toHaveLength(1);
  await page.reload();
  await expect(controls(page).generate).toBeEnabled({ timeout: READY });
  expect(weightRequests).toHaveLength(2);
  await expect(items).toHaveCount(1);
  await expectStoredModel(items.first(), GGUF_LABEL, bytesOf(BUNDLED_GGUF_FILE));
});

test('a folder model is one entry of its four files\' bytes; deleting another model leaves it, and focus moves to its Delete button', async ({ page }) => {
  await openPageWithModel(page);
  await controls(page).model.selectOption({ label: FOLDER_LABEL });
  await expect(page.getByText(/^Ready: Tiny Shakespeare, safetensors/)).toBeVisible({ timeout: READY });
  const { items } = storedModels(page);
  await expect(items).toHaveCount(2);
  await expectStoredModel(items.nth(0), GGUF_LABEL, bytesOf(BUNDLED_GGUF_FILE));
  await expectStoredModel(items.nth(1), FOLDER_LABEL, FOLDER_FILES.reduce((sum, name) => sum + bytesOf(BUNDLED_FOLDER + name), 0));

  await page.getByRole('button', { name: `Delete ${GGUF_LABEL}` }).click();
  await expect(items).toHaveCount(1);
  await expect(items.first().locator('.stored-model-name')).toHaveText(FOLDER_LABEL);
  await expect(page.getByRole('button', { name: `Delete ${FOLDER_LABEL}` })).toBeFocused();
});
