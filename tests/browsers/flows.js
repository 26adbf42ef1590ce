// The page's and the widget's main flows, written once against the driver layer (session.js), as node:test tests
// for one engine: the page loads the bundled model and gives the Node API's greedy text, Continue, KV cache off,
// Stop and Analyze text, in one loaded page; the widget on another origin, under the documented strict CSP, and
// under CSPs that forbid workers or WebAssembly; no console errors where the driver sees them; and the docs'
// browser-support row for the engine (support_table.js) says what the engine ran.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadModel } from '../../web/lib/gpt2.js';
import { MESSAGES } from '../../web/widget/generator_api.js';
import { nodeText } from '../e2e/page-controls.js';
import { elementState, onElement, queryPath, waitFor } from './session.js';
import { checkSupportRow } from './support_table.js';

const BUNDLED_GGUF_FILE = fileURLToPath(new URL('../../public/models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', import.meta.url));
const PROMPT = 'ROMEO:\nWhat light';
const GREEDY = { temperature: 0, topK: 40, topP: 0.95, maxNewTokens: 40 };
// Shakespeare the model has learnt, then words it cannot expect: tokens in every rank bucket.
const ANALYZED_TEXT = 'ROMEO:\nBut soft, what light through yonder window breaks?\nJULIET:\nThe quantum spreadsheet compiles my xylophone.';
const RANK_BUCKETS = [[10, 'rank-top-10'], [100, 'rank-top-100'], [1000, 'rank-top-1000'], [Infinity, 'rank-beyond']];
// Generous: WebKit runs one thread of the SIMD128 build, beside the other lane of npm test.
const MODEL_READY_MS = 120_000;
const RUN_MS = 120_000;
const TEST_MS = 240_000;
const STOP_MS = 5_000;
const WIDGET_SCRIPT_REQUEST = 'GET /gpt2-widget.js';
const LAUNCH_MS = 120_000;
// How long a widget's CSP message must stay as it first appeared: no later message may replace it.
const MESSAGE_SETTLE_MS = 1_500;

// describe()s the flows of one engine. launch: its adapter (engines/*.js); servers: startServers()'s (servers.js);
// only: 'report' runs the page's load and the support-table check alone (the engine's other flows are tested
// elsewhere).
export function describeEngine(name, launch, servers, { only } = {}) {
  describe(name, () => {
    const context = { session: null, servers, report: null, cspReportsBefore: 0 };
    before(async () => {
      context.session = await launch();
    }, { timeout: LAUNCH_MS });
    after(async () => {
      await context.session?.close();
    }, { timeout: LAUNCH_MS });
    describePageFlows(context, { only });
    if (only !== 'report') describeWidgetFlows(context);
    it('the docs\' browser-support table says what this engine ran', () => {
      assert.ok(context.report, 'the page did not load, so there is nothing to compare');
      checkSupportRow(context.session, context.report);
    });
  });
}

// The page's flows, in order, on one loaded page (each leaves it idle for the next).
function describePageFlows(context, { only }) {
  const page = {
    generate: '#generate', continue: '#continue', stop: '#stop', prompt: '#prompt', output: '#output', alert: '#error',
    status: '#model-status', kvCache: '#kv-cache', analyzeMode: 'input[name="mode"][value="analyze"]',
    generateMode: 'input[name="mode"][value="generate"]', analyzeText: '#analyze-text', analyze: '#analyze',
  };
  let greedyText;

  it('the page loads the bundled model, says which build and how many threads, and reports no error', { timeout: TEST_MS }, async (t) => {
    const { session, servers } = context;
    context.cspReportsBefore = (await servers.site.cspReports()).length;
    await session.goto(`${servers.site.origin}/`);
    await waitForEnabled(session, page.generate, MODEL_READY_MS);
    const status = (await elementState(session, page.status)).text;
    const report = await session.evaluate(() => ({
      threadsAvailable: crossOriginIsolated && typeof SharedArrayBuffer === 'function',
      webgpu: 'gpu' in navigator,
      cores: navigator.hardwareConcurrency,
    }));
    const build = /\(WebAssembly, (relaxed SIMD|SIMD128)\)/.exec(status)?.[1];
    const threads = Number(/\b(\d+) threads?\b/.exec(status)?.[1]);
    assert.ok(build && threads > 0, `the status line names the build and the threads: ${status}`);
    context.report = { ...report, build, threads, status };
    t.diagnostic(`${session.engine} ${session.version} (${session.driver}): ${JSON.stringify(context.report)}`);
    if (!report.threadsAvailable) assert.equal(threads, 1, 'without SharedArrayBuffer the page runs one thread');
    if (!report.webgpu) assert.match(status, /on the CPU \(WebAssembly, [^)]+\) because \S/, 'without WebGPU, Auto says why the CPU');
    assert.equal((await elementState(session, page.alert)).text, '');
  });

  if (only === 'report') return;

  it('greedy text is the Node API\'s', { timeout: TEST_MS }, async () => {
    const { session } = context;
    await fillSettings(session, page, { prompt: PROMPT, ...GREEDY, useKVCache: true });
    await clickAndAwaitRun(session, page.generate);
    greedyText = await generatedText(session);
    assert.equal(greedyText, await nodeText(BUNDLED_GGUF_FILE, PROMPT, GREEDY));
  });

  it('Continue generates the Node API\'s text after the output, as a fresh run of the whole text would', { timeout: TEST_MS }, async () => {
    const { session } = context;
    assert.ok(greedyText, 'the greedy run gave no text to continue');
    await clickAndAwaitRun(session, page.continue);
    const all = await generatedText(session);
    assert.ok(all.startsWith(greedyText), `Continue kept the output: ${JSON.stringify(all)}`);
    assert.equal(all.slice(greedyText.length), await nodeText(BUNDLED_GGUF_FILE, PROMPT + greedyText, GREEDY));
  });

  it('KV cache off gives the same text', { timeout: TEST_MS }, async () => {
    const { session } = context;
    await fillSettings(session, page, { useKVCache: false });
    await clickAndAwaitRun(session, page.generate);
    assert.equal(await generatedText(session), greedyText);
  });

  it('Stop ends a long run within a moment', { timeout: TEST_MS }, async () => {
    const { session } = context;
    // Without the cache every step reprocesses the whole context: this run would take many seconds.
    await fillSettings(session, page, { temperature: 0.8, maxNewTokens: 240, useKVCache: false });
    await session.click(page.generate);
    await waitFor(session, 'three generated tokens', RUN_MS, onElement((output) => output.querySelectorAll('.token').length >= 3), queryPath(page.output));
    await session.click(page.stop);
    await waitForEnabled(session, page.generate, STOP_MS);
    const tokens = await tokenCount(session);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal(await tokenCount(session), tokens, 'tokens arrived after Stop');
    assert.ok(tokens < 240, `the run went on to its end: ${tokens} tokens`);
    assert.equal((await elementState(session, '#stat-stop')).text, 'stopped');
    await fillSettings(session, page, { useKVCache: true });
  });

  it('Analyze text colours each token by the rank the Node API gives it, with its perplexity', { timeout: TEST_MS }, async () => {
    const { session } = context;
    const expected = await nodeScores(ANALYZED_TEXT);
    await session.click(page.analyzeMode);
    await session.fill(page.analyzeText, ANALYZED_TEXT);
    await session.click(page.analyze);
    const shown = await waitFor(session, 'the analysed tokens', RUN_MS, (count) => {
      const tokens = [...document.querySelectorAll('#analysis-text .token')];
      return tokens.length === count && {
        text: tokens.map((token) => token.textContent).join(''),
        buckets: tokens.map((token) => [...token.classList].find((name) => name.startsWith('rank-'))),
        perplexity: document.querySelector('#analysis-perplexity').textContent,
      };
    }, expected.tokens.length);
    assert.deepEqual(shown, {
      text: ANALYZED_TEXT,
      buckets: expected.tokens.map(({ rank }) => RANK_BUCKETS.find(([maxRank]) => rank <= maxRank)[1]),
      perplexity: expected.perplexity.toFixed(2),
    });
    await session.click(page.generateMode);
  });

  it('the page logged no error and broke none of its policy', async () => {
    const { session, servers } = context;
    assert.deepEqual(await session.takeErrors(), []);
    assert.deepEqual((await servers.site.cspReports()).slice(context.cspReportsBefore), []);
  });
}

// The widget's flows, each on a host page of its own (tests/e2e/hosts/) on another origin than the widget's.
function describeWidgetFlows(context) {
  const widget = {
    generate: ['gpt2-widget', '.generate'], status: ['gpt2-widget', '.status'], alert: ['gpt2-widget', '.alert'],
    generated: ['gpt2-widget', '.generated'],
  };

  // Opens a host page, after taking the errors and requests before it.
  const openHost = async (isolation, name) => {
    const { session, servers } = context;
    await session.takeErrors();
    servers.site.requests.length = 0;
    await session.goto(`${servers.hosts[isolation]}/${name}`);
  };

  it('the widget on another origin (cross-origin isolated) generates the Node API\'s greedy text', { timeout: TEST_MS }, async () => {
    const { session } = context;
    await openHost('isolated', 'basic.html');
    // Generate is enabled until the load starts too, and the widget's layout changes while it loads.
    await waitForText(session, widget.status, /^Ready/, MODEL_READY_MS);
    await session.click(widget.generate);
    await waitForText(session, widget.status, /^\d+ tokens/, RUN_MS);
    const expected = await nodeText(BUNDLED_GGUF_FILE, 'ROMEO:', { maxNewTokens: 24, temperature: 0 });
    assert.equal((await elementState(session, widget.generated)).text, expected);
    assert.deepEqual(await session.takeErrors(), []);
  });

  it('the widget runs under the documented strict CSP', { timeout: TEST_MS }, async () => {
    const { session } = context;
    await openHost('plain', 'strict-csp-allowing.html');  // data-auto-generate: it starts by itself
    await waitForText(session, widget.status, /^\d+ tokens/, MODEL_READY_MS + RUN_MS);
    assert.ok((await elementState(session, widget.generated)).text.length > 0);
    assert.deepEqual(await session.takeErrors(), []);
  });

  const blockedHosts = [
    ['forbids workers', 'worker-forbidden.html', MESSAGES.workerBlocked],
    ['has no \'wasm-unsafe-eval\'', 'wasm-forbidden.html', MESSAGES.wasmBlocked],
  ];
  for (const [policy, hostPage, message] of blockedHosts) {
    it(`under a CSP that ${policy} the widget says so at once, offers no Generate, and downloads nothing`, { timeout: TEST_MS }, async () => {
      const { session, servers } = context;
      await openHost('isolated', hostPage);
      const first = await waitFor(session, 'the widget\'s message', MODEL_READY_MS, onElement((alert) => !alert?.hidden && alert?.textContent), queryPath(widget.alert));
      assert.equal(first, message, 'the first message the widget showed');
      await new Promise((resolve) => setTimeout(resolve, MESSAGE_SETTLE_MS));
      assert.equal((await elementState(session, widget.alert)).text, message, 'the message a moment later');
      const generate = await elementState(session, widget.generate);
      assert.ok(generate.disabled || !generate.visible, 'Generate is offered');
      const requests = servers.site.requests.filter((request) => request !== WIDGET_SCRIPT_REQUEST);
      // The policy's own messages (console errors in Chromium and WebKit, uncaught errors in Firefox's BiDi) are
      // expected here; other uncaught errors are not.
      const errors = (await session.takeErrors()).filter((error) => error.startsWith('pageerror:') && !error.includes('Content-Security-Policy'));
      assert.deepEqual(errors, []);
      // the widget finds out before it downloads the engine or the model
      assert.deepEqual(requests, [], 'downloads for a widget that cannot run');
    });
  }
}

// Sets the page's generation settings: only those given.
async function fillSettings(session, page, { prompt, temperature, topK, topP, maxNewTokens, useKVCache }) {
  if (prompt !== undefined) await session.fill(page.prompt, prompt);
  const fields = [['#temperature', temperature], ['#top-k', topK], ['#top-p', topP], ['#max-new-tokens', maxNewTokens]];
  for (const [field, value] of fields) if (value !== undefined) await session.fill(field, String(value));
  if (useKVCache !== undefined && (await elementState(session, page.kvCache)).checked !== useKVCache) await session.click(page.kvCache);
}

// Clicks a button that starts a run (Generate, Continue) and waits until the page is idle again after it: the
// Generate button, disabled while the page is busy, seen disabled and then enabled.
async function clickAndAwaitRun(session, button) {
  await session.evaluate(() => {
    const generate = document.querySelector('#generate');
    window.__crossBrowserBusySeen = false;
    new MutationObserver(() => (window.__crossBrowserBusySeen ||= generate.disabled)).observe(generate, { attributeFilter: ['disabled'] });
  });
  await session.click(button);
  await waitFor(session, 'end of the run', RUN_MS, () => window.__crossBrowserBusySeen && !document.querySelector('#generate').disabled);
}

function waitForEnabled(session, query, timeoutMs) {
  return waitFor(session, `enabled ${queryPath(query).at(-1)}`, timeoutMs, onElement((element) => element && !element.disabled), queryPath(query));
}

function waitForText(session, query, pattern, timeoutMs) {
  return waitFor(session, `${queryPath(query).at(-1)} matching ${pattern}`, timeoutMs,
    onElement((element, source) => new RegExp(source).test(element?.textContent ?? '')), queryPath(query), pattern.source);
}

function generatedText(session) {
  return session.evaluate(() => [...document.querySelectorAll('#output .token')].map((token) => token.textContent).join(''));
}

function tokenCount(session) {
  return session.evaluate(() => document.querySelectorAll('#output .token').length);
}

async function nodeScores(text) {
  const model = await loadModel(BUNDLED_GGUF_FILE);
  try {
    return await model.score(text);
  } finally {
    model.dispose();
  }
}
