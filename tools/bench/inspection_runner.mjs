// The inspection part of tools/bench/bench.mjs, in one Node process on the shipped wasm engine: what an inspected
// decode step costs beside a plain one, and (with a baseline) whether a plain step costs what it did before
// inspection existed. Prints its result as JSON on stdout and progress on stderr.
//
//   node [V8 flags] tools/bench/inspection_runner.mjs MODEL_DIR|FILE.gguf fp32|int8|GGUF_TYPE PLAN_JSON THREADS SIMD [BASELINE_DIR]
//
// Per context, a run prefills the context's prompt in each of these sessions (untimed), then decodes plan.decodeSteps
// greedy steps in all of them alternately: step i of every session, then step i + 1, the order of the sessions turned
// by one at each step, so that all of them see the same machine (a shared machine's load swings within a run) and
// none always follows the same other one. Each step is timed around the engine call alone; a run's figure for a
// session is the median of its steps (a step the OS preempted does not move it), and the runs' medians are reported:
//   plain     EngineSession.step: decode with no inspection asked
//   lensOff   inspectStep with every layer and head, the logit lens off, and inspection() (its results copied out
//             of the heap, as a generation with inspect reads them for each piece)
//   lensOn    the same with the logit lens on (an LM head per layer)
//   baseline  with BASELINE_DIR: a plain step of the engine built from that checkout (its own web/lib and
//             public/wasm, the same SIMD build and threads), loaded beside the current one in this process
// Every session must draw the same greedy tokens (TOKENS_DIFFER otherwise): inspection changes no token, and the
// baseline computes the same model.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { inspectionRequest } from '../../web/lib/generation/option_checks.js';
import { INSPECT_GENERATION_OPTIONS } from '../../web/lib/generation/option_table.js';
import { loadModelIntoEngine } from '../../web/lib/loading/loader.js';
import { modelSource } from '../../web/lib/loading/model_source.js';
import { TOKENS_DIFFER, median, promptIds, promptLength } from './measure.mjs';

const [source, weights, planJson, threads, simd, baselineDir] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const log = (text) => console.error(text);

// -> { engine, model } of the engine and loader modules under dir (this checkout's or the baseline's).
async function loadFrom(dir) {
  const module = (path) => import(pathToFileURL(join(dir, path)).href);
  const [{ loadEngine: load }, { loadModelIntoEngine: loadInto }, { modelSource: sourceOf }] = dir === null
    ? [{ loadEngine }, { loadModelIntoEngine }, { modelSource }]
    : await Promise.all(['web/lib/engine/engine.js', 'web/lib/loading/loader.js', 'web/lib/loading/model_source.js'].map(module));
  const engine = await load({ threads: Number(threads), simd });
  if (engine.simd !== simd) throw new Error(`${dir ?? 'this checkout'}: the engine ran the ${engine.simd} build, not ${simd}`);
  const { model } = await loadInto(engine, sourceOf(source), { withTokenizer: false, ...(source.endsWith('.gguf') ? {} : { weights }) });
  return { engine, model };
}

function greedySession(model) {
  const session = model.createSession({ useKVCache: true, kvCache: plan.kvCache });
  session.setSampling({ temperature: 0 });
  return session;
}

// mode -> { prefill(ids) -> token, step(id) -> { token, ms } }
function plainMode(model) {
  const session = greedySession(model);
  return {
    session,
    prefill: (ids) => session.prefill(ids),
    step(id) {
      const start = performance.now();
      const token = session.step(id);
      return { token, ms: performance.now() - start };
    },
  };
}

function inspectedMode(model, logitLens) {
  const session = greedySession(model);
  const { topK } = INSPECT_GENERATION_OPTIONS;
  session.inspect(inspectionRequest({ topK: topK.default, logitLens }, model.config, null));
  return {
    session,
    prefill: (ids) => session.inspectPrompt(ids, false),
    step(id) {
      const start = performance.now();
      const token = session.inspectStep(id);
      session.inspection();
      return { token, ms: performance.now() - start };
    },
  };
}

// One run: the prompt prefilled in each mode, then steps greedy steps of all of them alternately, turn r first
// -> { [name]: { tokens, ms: [each step's] } }.
function run(names, prompt, steps, turn) {
  const runs = Object.fromEntries(names.map((name) => [name, { tokens: [modes[name].prefill(prompt)], ms: [] }]));
  for (let i = 0; i < steps; i++) {
    const first = (turn + i) % names.length;
    for (const name of [...names.slice(first), ...names.slice(0, first)]) {
      const { tokens, ms } = runs[name];
      const next = modes[name].step(tokens.at(-1));
      tokens.push(next.token);
      ms.push(next.ms);
    }
  }
  return runs;
}

const current = await loadFrom(null);
const baseline = baselineDir ? await loadFrom(baselineDir) : null;
const { config } = current.model;
const modes = {
  plain: plainMode(current.model),
  lensOff: inspectedMode(current.model, false),
  lensOn: inspectedMode(current.model, true),
  ...(baseline && { baseline: plainMode(baseline.model) }),
};
const names = Object.keys(modes);
// V8's optimizing tier and the caches warm up: two runs of each at context 64, as measure.mjs warms up
const warmPrompt = promptIds(promptLength(64, config, plan.decodeSteps), config.n_vocab, plan.promptPool);
for (let round = 0; round < 2; round++) run(names, warmPrompt, plan.decodeSteps, round);

const contexts = [];
for (const context of plan.contexts) {
  const length = promptLength(context, config, plan.decodeSteps);
  if (length === null) {
    contexts.push({ context, skipped: `above n_ctx ${config.n_ctx}` });
    continue;
  }
  const prompt = promptIds(length, config.n_vocab, plan.promptPool);
  const msPerToken = Object.fromEntries(names.map((name) => [name, []]));
  for (let r = 0; r < plan.runs; r++) {
    const runs = run(names, prompt, plan.decodeSteps, r);
    const expected = runs.plain.tokens;
    for (const name of names) {
      const { tokens, ms } = runs[name];
      if (tokens.join() !== expected.join()) throw new Error(`${TOKENS_DIFFER}: context ${context}: ${name} generated [${tokens}] but plain [${expected}]`);
      msPerToken[name].push(median(ms));
    }
  }
  log(`context ${context}: ${names.map((name) => `${name} ${median(msPerToken[name]).toFixed(2)}`).join(', ')} ms/token (medians)`);
  contexts.push({ context, promptLength: length, msPerToken });
}

for (const { session } of Object.values(modes)) session.dispose();
for (const { model } of [current, baseline].filter(Boolean)) model.dispose();
process.stdout.write(`${JSON.stringify({ simd: current.engine.simd, threads: current.model.threads, config, contexts })}\n`);
