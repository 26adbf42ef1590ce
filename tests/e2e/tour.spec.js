// The guided tour of the Inside the model view (web/page/tour.js) with the real engine and the bundled model: six
// steps through one generation, each selecting its token, showing its panel with the tour's box right above it and
// explaining it in the loaded model's numbers; Back, Next and End tour by keyboard, the focus kept; axe clean, no
// console errors. Run after `bash tools/dev/build.sh`.
import AxeBuilder from '@axe-core/playwright';
import { fileURLToPath } from 'node:url';
import { test, expect } from './under_csp.js';
import { collectErrors, controls, fillSettings } from './page-controls.js';
import { loadModel } from '../../web/lib/gpt2.js';

const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const MODEL_READY_TIMEOUT = 90_000;
const PROMPT = 'ROMEO:\nWhat light';
const SEEDED = { temperature: 0.8, topK: 40, topP: 0.95, maxNewTokens: 12, seed: 5 };

// The steps: their titles, the panel each shows, what its text says of the bundled model (4 layers of 4 heads, 192
// numbers a token, a vocabulary of 50257), and the token each selects (first: the first generated one; last: the
// last; sampled: the first whose draw was not the likeliest token, else the first generated).
const STEPS = [
  { title: 'Tokens and embeddings', panel: 'Tokens', says: 'a vocabulary of 50257', token: 'first' },
  { title: 'Attention', panel: 'Attention', says: 'In each of the 4 layers, 4 attention heads', token: 'first' },
  { title: 'The MLP', panel: 'Block contributions', says: 'a network of 768 hidden units', token: 'first' },
  { title: 'The logit lens', panel: 'Logit lens', says: 'a score for each of the 50257 tokens', token: 'first' },
  { title: 'The KV cache', panel: 'KV cache', says: 'each new token goes through the layers alone', token: 'last' },
  { title: 'Sampling', panel: 'Sampler', says: 'the sampler draws one in proportion to its probability', token: 'sampled' },
];

// The positions the steps select, from the Node API's run of the same prompt and settings.
async function tourPositions() {
  const model = await loadModel(BUNDLED_GGUF_FILE);
  try {
    const pieces = [];
    for await (const piece of model.generate(PROMPT, { ...SEEDED, inspect: { logitLens: false } })) pieces.push(piece);
    const notTop = pieces.find(({ token, inspection: { sampler } }) => sampler.stages.find((stage) => stage.name === 'distribution').top[0].id !== token);
    return { first: pieces[0].position, last: pieces.at(-1).position, sampled: (notTop ?? pieces[0]).position };
  } finally {
    model.dispose();
  }
}

test('the tour walks through one generation step by step, by keyboard, each step showing its token and panel', async ({ page }) => {
  const errors = collectErrors(page);
  const positions = await tourPositions();
  await page.goto('/');
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await page.getByText('Inside the model', { exact: true }).click();
  const start = page.getByRole('button', { name: 'Take the tour' });
  await expect(start).toBeDisabled();  // nothing generated to look at yet
  await fillSettings(page, { prompt: PROMPT, ...SEEDED, useKVCache: true });
  await controls(page).generate.click();
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });

  await start.click();
  const tour = page.getByRole('region', { name: 'Guided tour' });
  await expect(tour).toBeVisible();
  await expect(tour.getByRole('heading', { name: STEPS[0].title })).toBeFocused();
  const back = page.getByRole('button', { name: 'Back', exact: true });
  const next = page.getByRole('button', { name: 'Next', exact: true });
  await expect(back).toBeDisabled();
  await page.keyboard.press('Tab');  // past the disabled Back
  await expect(next).toBeFocused();

  for (const [index, step] of STEPS.entries()) {
    if (index > 0) await page.keyboard.press('Enter');  // on Next, which keeps the focus
    await expect(page.locator('#tour-heading')).toHaveText(step.title);
    await expect(page.locator('#tour-count')).toHaveText(`Step ${index + 1} of ${STEPS.length}`);
    await expect(page.locator('#tour-text')).toContainText(step.says);
    const panel = page.getByRole('region', { name: step.panel, exact: true });
    await expect(panel).toHaveClass(/tour-current/);
    await expect(page.locator('.tour-current')).toHaveCount(1);
    // the box sits right above its panel
    expect(await panel.evaluate((node) => node.previousElementSibling?.id)).toBe('tour');
    await expect(page.getByRole('listbox', { name: 'Tokens' }).getByRole('option').nth(positions[step.token])).toHaveAttribute('aria-selected', 'true');
    await expect(index < STEPS.length - 1 ? next : back).toBeFocused();
  }
  await expect(next).toBeDisabled();
  const { violations } = await new AxeBuilder({ page }).include('#inside-card').analyze();
  expect(violations.map(({ id, impact, nodes }) => `${id} (${impact}, ${nodes.length} nodes): ${nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([]);

  await back.click();
  await expect(page.locator('#tour-heading')).toHaveText('The KV cache');
  await expect(back).toBeFocused();
  await page.getByRole('button', { name: 'End tour' }).click();
  await expect(page.locator('#tour')).toBeHidden();
  await expect(page.locator('.tour-current')).toHaveCount(0);
  await expect(start).toBeFocused();
  expect(errors).toEqual([]);
});
