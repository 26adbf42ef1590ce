// Stop on the GPU (the webgpu project of playwright.config.js: Chromium's WebGPU on SwiftShader), as
// responsive.spec.js checks it on the CPU: found by its name while tokens stream, it ends the run in the engine
// worker within 100 ms, with stopReason 'abort' and the text so far, and Continue goes on from there. Loading the
// model on the GPU compiles its kernels (seconds on SwiftShader), so this file loads it once.
import { test, expect } from './under_csp.js';
import { controls, fillSettings } from './page-controls.js';
import { MAX_STOP_MS, MODEL_READY_TIMEOUT, openRecordedPage, runMessages, startLongRun, stopWhileStreaming } from './streaming-recorder.js';

test('on the GPU, Stop found by its name while tokens stream ends the run within 100 ms with stopReason abort and the text so far; Continue goes on from there', async ({ page }) => {
  const { generate, output } = controls(page);
  await openRecordedPage(page);
  await page.getByRole('combobox', { name: 'Device' }).selectOption({ label: 'GPU (WebGPU)' });
  await expect(page.getByText(/^Ready: /)).toHaveText(/ · on the GPU: google \(swiftshader\)$/, { timeout: MODEL_READY_TIMEOUT });
  // A pass takes 0.1 to 0.2 s on SwiftShader, and a click lands anywhere in one: three Stops, the first in a run
  // of Generate, the others in a run of Continue.
  let tokens = [];
  for (let stops = 1; stops <= 3; stops++) {
    const skip = (await page.evaluate(() => window.__record.messages)).length;
    if (stops === 1) await startLongRun(page, { maxNewTokens: 200 });
    else await page.getByRole('button', { name: 'Continue' }).click();
    const stopped = await stopWhileStreaming(page, { skip, after: 5 });
    const { pieces } = await runMessages(page, skip);
    console.log(`GPU: Stop ended the run in the worker ${stopped.stopMs.toFixed(1)} ms after the click; ` +
      `the ms between its pieces: ${pieces.slice(1).map((at, i) => (at - pieces[i]).toFixed(0)).join(' ')}`);
    expect(stopped.end.stopReason).toBe('abort');
    expect(stopped.stopMs).toBeLessThan(MAX_STOP_MS);
    await expect(page.getByText('stopped', { exact: true })).toBeVisible();
    expect(stopped.tokens.length).toBeGreaterThan(tokens.length + 5);
    expect(stopped.tokens.slice(0, tokens.length)).toEqual(tokens);
    tokens = stopped.tokens;
  }
  await page.waitForTimeout(500);
  expect(await output.locator('.token').allTextContents()).toEqual(tokens);  // the text so far, nothing after

  await fillSettings(page, { maxNewTokens: 10 });
  await page.getByRole('button', { name: 'Continue' }).click();
  await expect(generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
  await expect(page.getByText('token limit', { exact: true })).toBeVisible();
  const continued = await output.locator('.token').allTextContents();
  expect(continued.slice(0, tokens.length)).toEqual(tokens);
  expect(continued).toHaveLength(tokens.length + 10);
});
