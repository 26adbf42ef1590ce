// Accessibility of the site's pages, as axe-core (the engine behind Lighthouse's and browsers' checks) finds it,
// on a phone-sized screen (390 px) and a desktop one (1280 px), with the model loaded; and on a narrow screen,
// the result of Generate is where a person looks after pressing it: right after the button, before the
// settings, whose help texts wait folded behind their disclosures. Run after `bash tools/dev/build.sh`.
import AxeBuilder from '@axe-core/playwright';
import { test, expect } from './under_csp.js';
import { contrastRatio, parseColour } from './colours.js';
import { controls, fillSettings } from './page-controls.js';

const MODEL_READY_TIMEOUT = 90_000;
const WIDTHS = [390, 1280];

for (const width of WIDTHS) {
  for (const path of ['/', '/embed.html']) {
    test(`${path} at ${width} px has no accessibility violations`, async ({ page }) => {
      await page.setViewportSize({ width, height: 844 });
      await page.goto(path);
      if (path === '/') {
        await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
        await page.getByText('Compare strategies', { exact: true }).click(); // its columns' controls are checked too
        await expect(page.getByRole('button', { name: 'Compare', exact: true })).toBeVisible();
      } else await expect(page.getByRole('button', { name: 'Generate' })).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
      const { violations } = await new AxeBuilder({ page }).analyze();
      expect(violations.map(({ id, impact, nodes }) => `${id} (${impact}, ${nodes.length} nodes): ${nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([]);
    });
  }
}

test('on a 390 px screen the output follows the Generate button, before the settings', async ({ page }, testInfo) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto('/');
  const { generate, output } = controls(page);
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await fillSettings(page, { prompt: 'ROMEO:', temperature: 0, maxNewTokens: 24, useKVCache: true });
  await generate.click();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await testInfo.attach('narrow page after Generate', { body: await page.screenshot({ fullPage: true }), contentType: 'image/png' });
  const top = async (locator) => (await locator.boundingBox()).y;
  const [button, result, settings] = await Promise.all([top(generate), top(output), top(page.getByRole('heading', { name: 'Settings' }))]);
  // Below the button there is only the rest of the prompt card (status line, progress, error) before the output.
  expect(result - button).toBeLessThan(300);
  expect(settings).toBeGreaterThan(result);
  // The output is on the first screen once the button has been pressed (scrolled to the button, as a person is).
  expect(result + 100).toBeLessThan(button + 844);
});

test('on a 390 px screen each setting\'s help text is folded behind its disclosure, and opens from it by keyboard', async ({ page }) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto('/');
  const disclosures = page.locator('details.help');
  const summaries = ['About stored models', 'About the weights', 'About the device', 'What the KV cache does', 'About KV cache storage',
    'What speculative decoding does', 'About the seed'];
  await expect(disclosures.locator('summary')).toHaveText(summaries);
  for (const summary of summaries) {
    const disclosure = disclosures.filter({ has: page.getByText(summary, { exact: true }) });
    const help = disclosure.locator('small, p');
    await expect(help).toBeHidden();
    await disclosure.locator('summary').focus();
    await page.keyboard.press('Enter');
    await expect(help).toBeVisible();
    expect((await help.textContent()).length).toBeGreaterThan(40);
  }
  // The controls keep their descriptions while folded: assistive technology reads them from the select.
  await expect(page.getByLabel('Weights')).toHaveAccessibleDescription(/int8 quantizes the weights while loading/);
  await expect(page.getByLabel('Device')).toHaveAccessibleDescription(/^Where the model runs\. Auto takes the GPU through WebGPU/);
});

// A field's looks (getComputedStyle), with the colour of what it is drawn on: its own background, else the nearest
// ancestor's that is not transparent.
function fieldLooks(field) {
  return field.evaluate((element) => {
    const style = getComputedStyle(element);
    let backdrop = element;
    while (backdrop && /^rgba\(.*, 0\)$|^transparent$/.test(getComputedStyle(backdrop).backgroundColor)) backdrop = backdrop.parentElement;
    return {
      color: style.color, borderStyle: style.borderTopStyle, opacity: style.opacity, cursor: style.cursor,
      background: backdrop ? getComputedStyle(backdrop).backgroundColor : 'rgb(255, 255, 255)',
    };
  });
}

test('a disabled field looks disabled in both colour schemes, by the page\'s own rule, and its text keeps a contrast of 4.5', async ({ page }) => {
  await page.goto('/');
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  const weights = page.getByLabel('Weights');  // the default model is a GGUF file: its weights are its own
  await expect(weights).toBeDisabled();
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    const [disabled, enabled] = [await fieldLooks(weights), await fieldLooks(page.getByLabel('Device'))];
    // not Chromium's own greying of a disabled select (an opacity, or its own colour), which Firefox and WebKit lack
    expect(disabled, colorScheme).toMatchObject({ borderStyle: 'dashed', opacity: '1', cursor: 'not-allowed' });
    expect(enabled, colorScheme).toMatchObject({ borderStyle: 'solid', opacity: '1' });
    expect(disabled.color, colorScheme).not.toBe(enabled.color);
    expect(disabled.color, colorScheme).toBe(await page.evaluate(() => {
      const probe = document.body.appendChild(document.createElement('span'));
      probe.style.color = 'var(--muted)';
      const colour = getComputedStyle(probe).color;
      probe.remove();
      return colour;
    }));
    expect(contrastRatio(parseColour(disabled.color), parseColour(disabled.background)), colorScheme).toBeGreaterThanOrEqual(4.5);
  }
});
