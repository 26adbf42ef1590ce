// A seeded fuzzer of the decoding options: random option objects, valid and invalid, huge and tiny, in every
// decoding mode (sampling, greedy, prompt-lookup speculation, several sequences, beam search and beam sampling,
// scoring), through the public API (web/lib/gpt2.js) against the bundled model, in this thread.
// Invariant, after every case:
//   - the call completed (its text a string, its stop reason one of the documented ones), or it was refused with
//     an Error whose message is one line starting "generate: " or "score: " (never an error from inside: "Invalid
//     array length", "Cannot read properties of …", a wasm trap), or with the engine's own one-line input error;
//   - the engine did not abort (the same wasm instance still runs);
//   - the wasm heap is within HEAP_SLACK of its level from before the fuzzing (an idle pooled session keeps its
//     last run's settings, a few hundred bytes of logit biases and banned words), and back at that level exactly
//     once every mode has run again at the end (nothing leaked, nothing left grown);
//   - a fixed greedy run gives the same text as before the first case.
// A run that could go on for long (a huge maxNewTokens) is stopped by its AbortSignal after MAX_PIECES pieces, or
// after MAX_CASE_MS, so every case is bounded.
//   node tests/fuzz/fuzz_options.mjs [--seconds N | --cases N] [--seed S]   (default: 60 s from seed 1)
//   node tests/fuzz/fuzz_options.mjs --case SEED                            (one case: its options and outcome)
// Prints the cases run; a failure prints its seed and stops with status 1. tests/js/option_fuzz.test.js runs a few
// hundred cases in each wasm build; docs/robustness.md gives the latest long run's count.
import { fileURLToPath } from 'node:url';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { EngineAbortedError, EngineError } from '../../web/lib/errors.js';
import { loadModel } from '../../web/lib/gpt2.js';
import { createRandom } from './fuzz_tokenizer.mjs';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const MAX_PIECES = 40;
const MAX_CASE_MS = 3000;
const HEAP_SLACK = 1 << 20;
const STOP_REASONS = new Set(['eos', 'stop', 'length', 'abort']);
const REFERENCE = { prompt: 'ROMEO:', options: { maxNewTokens: 12, temperature: 0 } };

// Numbers from every corner: the edges of int32, float32, doubles and safe integers, and values of other types.
const ODD_VALUES = [0, -0, 1, -1, 0.5, 2, 1.5, 1e-45, 1e-38, 1e38, 3.4028234663852886e38, 3.5e38, 1e39, -3e38, 1e308,
  NaN, Infinity, -Infinity, 2 ** 31 - 1, 2 ** 31, 2 ** 32 + 1, 2 ** 53, 2 ** 53 + 2, 1e9, 1e8, 2 ** 28, 50256, 50257,
  '5', '0x10', ' 5 ', '', null, true, false, {}, [], [1], undefined];
const ODD_IDS = [0, 13, 50256, 50257, -1, 1.5, 2 ** 31, 2 ** 32 + 13, NaN, '13', null];
const TEXTS = ['', 'ROMEO:', 'To be, or not to be', 'thou', '\n', 'é', '<|endoftext|>', 'x'.repeat(3000)];
const PROMPTS = ['ROMEO:', '', 'JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?', 'the '.repeat(400), '\u{1f600}'];

const pickOdd = (random) => random.pick(ODD_VALUES);
const HUGE_FLOATS = [1e38, -1e38, 3.4028234663852886e38, -3.4028234663852886e38, 1e-38, 1e-45];

// Each option: [a value the API takes (now and then one at the edge of its range), any value at all]. A case gives
// most of its options taken values, so that the refusals do not hide what the taken values do.
const OPTION_VALUES = {
  maxNewTokens: [(r) => (r.chance(0.85) ? 1 + r.int(24) : r.pick([256, 257, 1e9, 2 ** 28, 2 ** 53 - 1])), (r) => r.pick([0, -1, 1.5, NaN, 2 ** 53, pickOdd(r)])],
  temperature: [(r) => (r.chance(0.9) ? r.pick([0, 0.7, 1, 1.3]) : r.pick(HUGE_FLOATS.filter((x) => x > 0))), pickOdd],
  topK: [(r) => (r.chance(0.9) ? r.pick([0, 1, 5, 40, 50257, 60000]) : r.pick([2 ** 31 - 1])), pickOdd],
  topP: [(r) => r.pick([0, 0.5, 0.9, 1, 1e-45]), pickOdd],
  repetitionPenalty: [(r) => (r.chance(0.9) ? r.pick([1, 1.2, 0.8, 10]) : r.pick(HUGE_FLOATS.filter((x) => x > 0))), pickOdd],
  minP: [(r) => r.pick([0, 0.05, 1, 1e-45]), pickOdd],
  typicalP: [(r) => r.pick([1, 0.9, 0, 1e-45]), pickOdd],
  noRepeatNgramSize: [(r) => r.pick([0, 1, 2, 3, 300, 2 ** 31 - 1]), pickOdd],
  presencePenalty: [(r) => (r.chance(0.8) ? r.pick([0, 0.5, -0.5, 2]) : r.pick(HUGE_FLOATS)), pickOdd],
  frequencyPenalty: [(r) => (r.chance(0.8) ? r.pick([0, 0.5, -0.5, 2]) : r.pick(HUGE_FLOATS)), pickOdd],
  logitBias: [
    (r) => Object.fromEntries(Array.from({ length: r.int(3) }, () => [r.pick([13, 198, 50256, 11]), r.pick([-Infinity, 2.5, -100, 5, ...HUGE_FLOATS])])),
    (r) => r.pick([{ [r.pick(ODD_IDS)]: 1 }, { 13: pickOdd(r) }, { 13: 1e39 }, null, [], 'x', { '-1': 1 }, { '1.5': 1 }]),
  ],
  badWords: [(r) => r.pick([[], ['thou'], [[13]], ['the', [11, 13]], [[50256]]]), (r) => r.pick([[''], [[]], [[r.pick(ODD_IDS)]], 'thou', null, [1], [{}]])],
  minNewTokens: [(r) => r.pick([0, 1, 5, 2 ** 31 - 1]), pickOdd],
  seed: [(r) => (r.chance(0.9) ? r.int(1000) : r.pick([0, 2 ** 32 + 1, 2 ** 53 - 1])), pickOdd],
  stop: [(r) => r.pick([[], '\n', ['the', ':'], 'e']), (r) => r.pick(['', [''], [1], null, 5])],
  stopAtEndOfText: [(r) => r.chance(0.5), pickOdd],
  useKVCache: [(r) => r.chance(0.85), pickOdd],
  kvCache: [(r) => r.pick(['int8', 'fp32']), (r) => r.pick(['fp16', '', null, 8])],
  topAlternatives: [(r) => r.pick([0, 1, 5, 50, 50257]), (r) => r.pick([50258, 1e6, 2 ** 31, 2 ** 32 + 1, -1, 1.5, NaN])],
  speculative: [(r) => ({ draft: 'prompt-lookup', maxDraftTokens: r.pick([1, 4, 8, 16]) }), (r) => r.pick([{ maxDraftTokens: pickOdd(r) }, { draft: 'x' }, { drafts: 1 }, null, 'lookup'])],
  numReturnSequences: [(r) => 1 + r.int(4), (r) => r.pick([16, 17, 1e9, 100000, Infinity, 0, 1.5])],
  numBeams: [(r) => 2 + r.int(3), (r) => r.pick([1, 16, 17, 1e9, 0, -1, 2.5])],
  lengthPenalty: [(r) => r.pick([1, 0, -1, 2, ...HUGE_FLOATS]), pickOdd],
  earlyStopping: [(r) => r.pick([true, false, 'never']), (r) => r.pick(['always', 1, null])],
};

// The options each mode sets, beside a random handful of the others.
const MODES = {
  sample: { temperature: 1 },
  greedy: { temperature: 0 },
  speculative: { temperature: 0, speculative: { draft: 'prompt-lookup' } },
  sequences: { temperature: 1, numReturnSequences: 3 },
  beams: { temperature: 0, numBeams: 3 },
  beamSampling: { temperature: 0.8, numBeams: 2 },
};
const MODE_KEYS = { speculative: ['speculative'], sequences: ['numReturnSequences'], beams: ['numBeams', 'lengthPenalty', 'earlyStopping', 'numReturnSequences', 'maxNewTokens'], beamSampling: ['numBeams', 'numReturnSequences', 'maxNewTokens'] };

// -> { kind: 'generate', prompt, options } or { kind: 'score', text, options }, from the seed alone.
export function makeCase(seed) {
  const random = createRandom(seed);
  if (random.chance(0.15)) {
    const options = {};
    if (random.chance(0.8)) options.topAlternatives = OPTION_VALUES.topAlternatives[random.chance(0.8) ? 0 : 1](random);
    if (random.chance(0.4)) options.kvCache = OPTION_VALUES.kvCache[random.chance(0.9) ? 0 : 1](random);
    if (random.chance(0.05)) options[random.pick(['topK', 'signal', 'alternatives'])] = 1;
    const text = random.chance(0.9) ? random.pick(TEXTS) : random.pick([5, null, ['a']]);
    return { kind: 'score', text, options };
  }
  const mode = random.pick(Object.keys(MODES));
  const options = { ...MODES[mode] };
  // half the cases take every value, most others have one value that may be refused
  const odd = random.chance(0.5) ? 0 : random.chance(0.8) ? 1 : 2 + random.int(3);
  const set = (name, anyValue) => {
    options[name] = OPTION_VALUES[name][anyValue ? 1 : 0](random);
  };
  for (const name of MODE_KEYS[mode] ?? []) if (random.chance(0.7)) set(name, false);
  const names = Object.keys(OPTION_VALUES);
  for (let n = random.int(4); n > 0; n--) set(random.pick(names), false);
  for (let n = odd; n > 0; n--) set(random.pick(names), true);
  if (random.chance(0.03)) options[random.pick(['maxTokens', 'top_k', 'beams', '__proto__x'])] = 1;
  const prompt = random.chance(0.85)
    ? random.pick(PROMPTS)
    : Array.from({ length: 1 + random.int(4) }, () => (random.chance(0.6) ? random.pick([13, 198, 464]) : random.pick(ODD_IDS)));
  return { kind: 'generate', mode, prompt, options };
}

// What is wrong with a refusal, or null: it must be an Error of the API or the engine, in one clear line.
export function refusalProblem(error) {
  if (!(error instanceof Error)) return `threw a non-Error: ${String(error)}`;
  if (error instanceof EngineAbortedError) return `the engine aborted: ${error.message}`;
  const message = error.message;
  if (message === '' || /[\n\r]/.test(message)) return `an unclear message: ${JSON.stringify(message)}`;
  if (/^(generate|score): \S/.test(message)) return null;
  if (error instanceof EngineError && error.kind === 'input') return null;
  return `threw ${error.name} from inside: ${message}`;
}

// Runs one case against model: -> { outcome: 'completed' | 'refused', message?, problem? } (problem: the broken
// part of the invariant, null when it holds).
export async function runCase(target, seed) {
  const { model, engine, heapLevel, referenceText } = target;
  const c = makeCase(seed);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), MAX_CASE_MS);
  let outcome;
  let message;
  let problem = null;
  try {
    if (c.kind === 'score') {
      const result = await model.score(c.text, c.options);
      if (!Number.isFinite(result.perplexity) || !Array.isArray(result.tokens)) problem = `score gave ${JSON.stringify(result.perplexity)}`;
    } else {
      const options = 'signal' in c.options ? c.options : { ...c.options, signal: controller.signal };
      const generation = model.generate(c.prompt, options);
      let pieces = 0;
      for await (const piece of generation) {
        if (typeof piece.text !== 'string') problem = `a piece without text: ${JSON.stringify(piece)}`;
        if (++pieces === MAX_PIECES) controller.abort();
      }
      const { stopReason } = generation.stats;
      if (!STOP_REASONS.has(stopReason)) problem ??= `stopReason ${JSON.stringify(stopReason)}`;
    }
    outcome = 'completed';
  } catch (error) {
    outcome = 'refused';
    message = error?.message;
    problem = refusalProblem(error);
  } finally {
    clearTimeout(timer);
  }
  if (!problem && engine.aborted) problem = 'the engine aborted';
  if (!problem && engine.heapUsedBytes() > heapLevel + HEAP_SLACK) {
    problem = `the wasm heap holds ${engine.heapUsedBytes()} bytes, ${heapLevel} before`;
  }
  if (!problem) {
    const text = await greedyText(model);
    if (text !== referenceText) problem = `the greedy text changed: ${JSON.stringify(text)}, was ${JSON.stringify(referenceText)}`;
  }
  return { case: c, outcome, message, problem };
}

async function greedyText(model) {
  let text = '';
  for await (const piece of model.generate(REFERENCE.prompt, REFERENCE.options)) text += piece.text;
  return text;
}

// Loads the bundled model in this thread and brings the heap to its working level: every mode once, so that the
// session pool's idle sessions and their lazily made buffers (score rows, draft rows, sequence rows) exist before
// the level is taken.
export async function openTarget() {
  const engine = await loadEngine();
  const model = await loadModel(BUNDLED, { useWorker: false });
  await warmUp(model);
  const referenceText = await greedyText(model);
  return { model, engine, heapLevel: engine.heapUsedBytes(), referenceText };
}

// Every mode once, with no logit bias and no banned words, each pooled session last.
async function warmUp(model) {
  const warmUps = [
    ...['int8', 'fp32'].flatMap((kvCache) => [true, false].map((useKVCache) => ({ kvCache, useKVCache, maxNewTokens: 2 }))),
    ...['int8', 'fp32'].flatMap((kvCache) => [
      { kvCache, maxNewTokens: 8, speculative: { draft: 'prompt-lookup' }, temperature: 0 },
      { kvCache, maxNewTokens: 2, numReturnSequences: 16, temperature: 1 },
      { kvCache, maxNewTokens: 2, numBeams: 16, numReturnSequences: 16, temperature: 0, topAlternatives: 1 },
      { kvCache, maxNewTokens: 2, numBeams: 16, temperature: 1 },
    ]),
  ];
  for (const options of warmUps) {
    // a prompt that repeats itself, so that speculation drafts (and its verification rows are made)
    const prompt = options.speculative ? 'the '.repeat(20) : 'ROMEO:';
    for await (const piece of model.generate(prompt, options)) void piece;
  }
  for (const kvCache of ['int8', 'fp32']) await model.score('ROMEO: warm', { kvCache, topAlternatives: 1 });
  await greedyText(model);
}

// -> { cases, outcomes: { completed, refused }, failure: { seed, case, problem } | null }
export async function runFuzz(target, { firstSeed = 1, cases = Infinity, seconds = Infinity }) {
  const deadline = performance.now() + seconds * 1000;
  const outcomes = { completed: 0, refused: 0 };
  let run = 0;
  for (let seed = firstSeed; run < cases && performance.now() < deadline; seed++) {
    const result = await runCase(target, seed);
    run++;
    outcomes[result.outcome]++;
    if (result.problem) return { cases: run, outcomes, failure: { seed, case: result.case, problem: result.problem } };
  }
  await warmUp(target.model);
  const heap = target.engine.heapUsedBytes();
  const problem = heap === target.heapLevel ? null : `after the cases and a warm-up the wasm heap holds ${heap} bytes, ${target.heapLevel} before`;
  return { cases: run, outcomes, failure: problem && { seed: null, case: null, problem } };
}

const describeCase = (c) => JSON.stringify(c, (key, value) => (typeof value === 'number' && !Number.isFinite(value) ? String(value) : value));

async function main(argv) {
  const option = (name) => {
    const index = argv.indexOf(name);
    return index === -1 ? undefined : Number(argv[index + 1]);
  };
  const target = await openTarget();
  try {
    const oneCase = option('--case');
    if (oneCase !== undefined) {
      const result = await runCase(target, oneCase);
      console.log(`case ${oneCase}: ${describeCase(result.case)}: ${result.outcome}${result.message ? `: ${result.message}` : ''}`);
      if (result.problem) console.log(`FAILED: ${result.problem}`);
      return result.problem ? 1 : 0;
    }
    const cases = option('--cases');
    const seconds = option('--seconds') ?? (cases === undefined ? 60 : Infinity);
    const started = performance.now();
    const { cases: run, outcomes, failure } = await runFuzz(target, { firstSeed: option('--seed') ?? 1, cases, seconds });
    const counts = Object.entries(outcomes).map(([outcome, count]) => `${count} ${outcome}`).join(', ');
    console.log(`fuzz_options: ${run} cases in ${((performance.now() - started) / 1000).toFixed(1)} s (${counts}); ` +
      `wasm heap ${target.engine.heapUsedBytes()} bytes in use, ${target.heapLevel} before`);
    if (!failure) return 0;
    console.log(`FAILED at seed ${failure.seed} (${describeCase(failure.case)}): ${failure.problem}\n` +
      `rerun it: node tests/fuzz/fuzz_options.mjs --case ${failure.seed}`);
    return 1;
  } finally {
    target.model.dispose();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
