// The recorder of the specs that check the page stays responsive while it streams (responsive.spec.js, and
// gpu_responsive.spec.js on the GPU): installed before the page loads (recordPage), it takes the page's animation
// frames, its engine worker's messages (each token's piece and the run's last answer, with its stopReason), the
// changes of every live region and the clicks on Stop, each with its time on the wall clock (performance.timeOrigin
// + performance.now(), which Node's own reads the same way); and the steps of a long run and of its Stop.
import { expect } from '@playwright/test';
import { controls, fillSettings } from './page-controls.js';

const PROMPT = 'ROMEO:\nWhat light';
export const MODEL_READY_TIMEOUT = 90_000;
// 900 greedy tokens with end-of-text banned (GPT-2's id 50256): a run of one to two seconds in the worker.
const LONG_RUN = { prompt: PROMPT, temperature: 0, maxNewTokens: 900, useKVCache: true };
const NO_END_OF_TEXT = '50256:-inf';
// What "responsive" means here: frames at least 20 a second, a control found in under 100 ms, and Stop ending the
// run in the worker (its last answer, stopReason 'abort') within 100 ms of the click.
export const MAX_FRAME_GAP_MS = 50;
export const MAX_ROLE_QUERY_MS = 100;
export const MAX_STOP_MS = 100;

// Runs in the page before its scripts (page.addInitScript): fills window.__record.
function recordPage() {
  const now = () => performance.timeOrigin + performance.now();
  const record = (window.__record = { frames: [], messages: [], announcements: [], stopClicks: [] });
  const onFrame = () => {
    record.frames.push(now());
    requestAnimationFrame(onFrame);
  };
  requestAnimationFrame(onFrame);
  const NativeWorker = window.Worker;
  window.Worker = class RecordedWorker extends NativeWorker {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', ({ data }) => {
        if (!['piece', 'result', 'error'].includes(data?.type)) return;
        record.messages.push({ type: data.type, at: now(), stopReason: data.stats?.stopReason ?? null, isRun: Boolean(data.stats) });
      });
    }
  };
  // (a widget's buttons are in its shadow root: the click's path names them)
  document.addEventListener('click', (event) => {
    if (event.composedPath().some((node) => node.tagName === 'BUTTON' && node.textContent.trim() === 'Stop')) record.stopClicks.push(now());
  }, { capture: true });
  // Every region a screen reader announces on its own: aria-live (but off), and the roles that imply it.
  const isLive = (element) => (element.hasAttribute('aria-live') && element.getAttribute('aria-live') !== 'off')
    || ['status', 'alert', 'log'].includes(element.getAttribute('role'));
  document.addEventListener('DOMContentLoaded', () => {
    for (const region of [...document.querySelectorAll('[aria-live], [role]')].filter(isLive)) {
      new MutationObserver(() => record.announcements.push({ at: now(), region: region.id, text: region.textContent }))
        .observe(region, { childList: true, subtree: true, characterData: true });
    }
  });
}

export const wallClock = () => performance.timeOrigin + performance.now();

export async function openRecordedPage(page, path = '/') {
  await page.addInitScript(recordPage);
  await page.goto(path);
  await expect(controls(page).generate).toBeEnabled({ timeout: MODEL_READY_TIMEOUT });
}

// Fills the settings of a long greedy run, with end-of-text banned and the advanced settings given (the Beams field,
// the speculative switch), and clicks Generate.
export async function startLongRun(page, { numBeams = 1, speculative = false, maxNewTokens = LONG_RUN.maxNewTokens, temperature = 0, seed = '' } = {}) {
  await fillSettings(page, { ...LONG_RUN, maxNewTokens, temperature, seed });
  await page.getByRole('checkbox', { name: 'Speculative decoding' }).setChecked(speculative);
  await page.locator('details', { has: page.getByText('Advanced decoding', { exact: true }) }).locator('summary').click();
  await page.getByLabel('Logit bias').fill(NO_END_OF_TEXT);
  await page.getByLabel('Beams', { exact: true }).fill(String(numBeams));
  await controls(page).generate.click();
}

// -> the run's worker messages so far: { pieces: [times], end: the run's last answer or undefined }, counted from
// the `skip`-th message on (the messages of earlier runs).
export async function runMessages(page, skip = 0) {
  const messages = (await page.evaluate(() => window.__record.messages)).slice(skip).filter((message) => message.isRun);
  return { pieces: messages.filter((m) => m.type === 'piece').map((m) => m.at), end: messages.find((m) => m.type !== 'piece') };
}

// Clicks Stop while the run streams (after `after` pieces, or, for a beam search, which streams only its result,
// after 300 ms); -> { stopMs: from the click to the run's last answer from the worker, end: that answer, tokens: the
// output's tokens at the click }.
export async function stopWhileStreaming(page, { skip, after = 20 }) {
  const { stop, output } = controls(page);
  if (after > 0) await expect.poll(async () => (await runMessages(page, skip)).pieces.length, { timeout: MODEL_READY_TIMEOUT }).toBeGreaterThan(after);
  else await page.waitForTimeout(300);
  const clicking = wallClock();
  await stop.click();
  const [click] = (await page.evaluate(() => window.__record.stopClicks)).slice(-1);
  console.log(`Stop clicked ${(click - clicking).toFixed(1)} ms after the click was asked for`);
  await expect(controls(page).generate).toBeEnabled({ timeout: 2_000 });
  const tokens = await output.locator('.token').allTextContents();
  await expect.poll(async () => (await runMessages(page, skip)).end, { timeout: 5_000 }).toBeTruthy();
  const { end } = await runMessages(page, skip);
  return { stopMs: end.at - click, end, tokens };
}
