// The speculative decoding and several-sequences parts of tools/bench/bench.mjs, in Node on the shipped wasm engine, one thread; prints
// its result as JSON on stdout and progress on stderr.
//
//   node tools/bench/speculation_runner.mjs lookup MODEL_DIR RUNS
//     prompt lookup (generate's speculative option) on the bundled model, real text: a "rewrite" prompt whose
//     continuation repeats spans of it (a passage given twice, then the start of a third copy, as quoting or editing
//     gives) and a plain one, each greedy and sampled; runs with and without speculation alternate, each timed end
//     to end (prefill and decode), and their texts must be equal (TOKENS_DIFFER otherwise)
//   node tools/bench/speculation_runner.mjs verify MODEL_DIR|FILE.gguf WEIGHTS RUNS
//     the cost of verifying k = 1 … 8 drafted tokens (Speculation::step) against one step, on a model of the GPT-2
//     shapes: drafts the model keeps whole (its own greedy continuation) and drafts that fail at their first token,
//     and the prefill's speed against decode's, which bounds what a batched pass can save
//   node tools/bench/speculation_runner.mjs sequences MODEL_DIR WEIGHTS RUNS
//     generate's numReturnSequences: n = 1, 2, 4, 8 sequences sampled from one prefill (temperature 0.9), each step one
//     batched pass for all; the decode's total tokens/s over all sequences (stats.decodeTokensPerSecond), the runs of
//     each n interleaved, and its ratio to n = 1
//   node tools/bench/speculation_runner.mjs beams MODEL_DIR WEIGHTS RUNS
//     generate's numBeams: beam search with n = 2, 4, 8 beams (temperature 0), each step one batched pass for all
//     beams, against greedy decoding (n = 1): the decode's tokens/s over all beams (stats.decodeTokensPerSecond)
import { loadEngine } from '../../web/lib/engine/engine.js';
import { loadModel } from '../../web/lib/gpt2.js';
import { loadModelIntoEngine } from '../../web/lib/loading/loader.js';
import { modelSource } from '../../web/lib/loading/model_source.js';
import { TOKENS_DIFFER, median, promptIds } from './measure.mjs';

const PASSAGE = 'But soft, what light through yonder window breaks? It is the east, and Juliet is the sun.';
const PROMPTS = {
  rewrite: `ROMEO:\n${PASSAGE}\n\nJULIET:\n${PASSAGE}\n\nROMEO:\nBut soft,`,
  plain: 'First Citizen:\nBefore we proceed any further, hear me speak.',
};
const SAMPLING = { greedy: { temperature: 0 }, sampled: { temperature: 0.8, topK: 40, topP: 0.95 } };
const NEW_TOKENS = 64;
const SPECULATIVE = { draft: 'prompt-lookup', maxDraftTokens: 8 };
const MAX_VERIFIED = 8;
const SEQUENCE_COUNTS = [1, 2, 4, 8];
const SEQUENCE_NEW_TOKENS = 32;
const SEQUENCE_SAMPLING = { temperature: 0.9 };
const BEAM_SAMPLING = { temperature: 0 };

const [mode, ...args] = process.argv.slice(2);
const result = mode === 'lookup' ? await measureLookup(args[0], Number(args[1]))
  : mode === 'verify' ? await measureVerification(args[0], args[1], Number(args[2]))
    : mode === 'sequences' || mode === 'beams' ? await measureSequences(args[0], args[1], Number(args[2]), mode)
      : (() => {
        throw new Error(`speculation_runner.mjs: unknown mode ${mode} (lookup, verify, sequences or beams)`);
      })();
process.stdout.write(`${JSON.stringify(result)}\n`);

async function measureLookup(dir, runs) {
  const model = await loadModel(dir, { threads: 1 });
  const generate = async (prompt, options) => {
    const started = performance.now();
    const generation = model.generate(prompt, { ...options, maxNewTokens: NEW_TOKENS, stopAtEndOfText: false });
    let text = '';
    for await (const piece of generation) text += piece.text;
    const { generatedTokens, draftedTokens, acceptedTokens } = generation.stats;
    return { text, tokensPerSecond: (generatedTokens * 1000) / (performance.now() - started), draftedTokens, acceptedTokens };
  };
  const results = [];
  for (const [workload, prompt] of Object.entries(PROMPTS)) {
    for (const [sampling, settings] of Object.entries(SAMPLING)) {
      await generate(prompt, settings);  // warm-up
      const off = [];
      const on = [];
      for (let run = 0; run < runs; run++) {
        const options = { ...settings, seed: 1000 + run };
        const withoutIt = () => generate(prompt, options);
        const withIt = () => generate(prompt, { ...options, speculative: SPECULATIVE });
        // alternating which goes first, so that neither always runs on a warmer machine
        let plain;
        let speculated;
        if (run % 2 === 0) [plain, speculated] = [await withoutIt(), await withIt()];
        else [speculated, plain] = [await withIt(), await withoutIt()];
        if (speculated.text !== plain.text) {
          throw new Error(`${TOKENS_DIFFER}: ${workload}, ${sampling}, seed ${1000 + run}: speculation changed the text`);
        }
        off.push(plain);
        on.push(speculated);
      }
      const sum = (values, key) => values.reduce((total, value) => total + value[key], 0);
      const record = {
        workload, sampling, runs, new_tokens: NEW_TOKENS,
        tokens_per_second_off: median(off.map((r) => r.tokensPerSecond)),
        tokens_per_second_on: median(on.map((r) => r.tokensPerSecond)),
        speedup: median(on.map((r, i) => r.tokensPerSecond / off[i].tokensPerSecond)),
        drafted_tokens: sum(on, 'draftedTokens'),
        accepted_tokens: sum(on, 'acceptedTokens'),
      };
      console.error(`${workload} ${sampling}: ${record.tokens_per_second_off.toFixed(0)} -> ${record.tokens_per_second_on.toFixed(0)} tokens/s, ` +
        `${record.accepted_tokens} of ${record.drafted_tokens} drafts kept`);
      results.push(record);
    }
  }
  model.dispose();
  return { lookup: results };
}

async function measureVerification(source, weights, runs) {
  const engine = await loadEngine({ threads: 1 });
  const { model } = await loadModelIntoEngine(engine, modelSource(source), { withTokenizer: false, ...(source.endsWith('.gguf') ? {} : { weights }) });
  const { config } = model;
  const session = model.createSession({ useKVCache: true, kvCache: 'int8' });
  session.setSampling({ temperature: 0 });
  const time = (fn) => {
    const started = performance.now();
    const value = fn();
    return { value, ms: performance.now() - started };
  };
  const prompt = promptIds(64, config.n_vocab);
  session.prefill(prompt);  // warm-up
  const prefill = [];
  const step = [];
  const kept = Array.from({ length: MAX_VERIFIED }, () => []);
  const failed = Array.from({ length: MAX_VERIFIED }, () => []);
  for (let run = 0; run < runs; run++) {
    const { value: first, ms } = time(() => session.prefill(prompt));
    prefill.push(ms);
    // the model's own greedy continuation, one step at a time: drafts that it keeps whole
    const continuation = [];
    let token = first;
    for (let i = 0; i < MAX_VERIFIED; i++) {
      const { value: next, ms: stepMs } = time(() => session.step(token));
      step.push(stepMs);
      continuation.push(next);
      token = next;
    }
    // a draft that fails at its first token: a token other than the model's own next one
    const wrong = (continuation[0] + 1) % config.n_vocab;
    for (let k = 1; k <= MAX_VERIFIED; k++) {
      for (const [draft, times, expected] of [[continuation.slice(0, k), kept[k - 1], k], [new Array(k).fill(wrong), failed[k - 1], 0]]) {
        // twice, the second timed: a verification computes its first batch of logits rows for as many drafts as the
        // last one accepted, so each case is timed as it runs in a stretch of such verifications
        for (const timed of [false, true]) {
          session.prefillReusing(prompt);  // back to the prompt's end, its positions kept
          const { value: tokens, ms: verifyMs } = time(() => session.stepDraft(first, draft));
          if (tokens.length - 1 !== expected) {
            throw new Error(`verifying ${k} drafts kept ${tokens.length - 1} of them, not ${expected}: a verification's sample differs from the step's`);
          }
          if (timed) times.push(verifyMs);
        }
      }
    }
  }
  session.dispose();
  model.dispose();
  const stepMs = median(step);
  const verifyMs = kept.map(median);
  const failedMs = failed.map(median);
  const prefillTokensPerSecond = (prompt.length * 1000) / median(prefill);
  console.error(`step ${stepMs.toFixed(2)} ms; verifying 1..${MAX_VERIFIED} drafts kept whole ${verifyMs.map((ms) => ms.toFixed(2)).join(', ')} ms, ` +
    `failing at once ${failedMs.map((ms) => ms.toFixed(2)).join(', ')} ms`);
  return {
    config, weights, runs, step_ms: stepMs, verify_ms: verifyMs, failed_verify_ms: failedMs,
    prefill_tokens_per_second: prefillTokensPerSecond, decode_tokens_per_second: 1000 / stepMs,
    // a verification of k drafts that keeps m > 0 of them computes every row and gives m + 1 tokens: it pays when
    // (m + 1) steps cost more than it, i.e. at an acceptance m / k above (verify / step - 1) / k (one that keeps
    // none costs failed_verify_ms, less)
    break_even_acceptance: verifyMs.map((ms, i) => Math.max(0, (ms / stepMs - 1) / (i + 1))),
  };
}

// kind: 'sequences' (n sampled sequences) or 'beams' (beam search with n beams; n = 1 is greedy decoding)
async function measureSequences(dir, weights, runs, kind) {
  const model = await loadModel(dir, { threads: 1, weights });
  const sampling = kind === 'beams' ? BEAM_SAMPLING : SEQUENCE_SAMPLING;
  const decode = async (n, seed) => {
    const several = kind === 'beams' ? { numBeams: n } : { numReturnSequences: n };
    const generation = model.generate(PROMPTS.plain, { ...sampling, ...several, seed, maxNewTokens: SEQUENCE_NEW_TOKENS, stopAtEndOfText: false });
    for await (const piece of generation) void piece;
    const { generatedTokens, decodeTokensPerSecond } = generation.stats;
    // every sampled sequence, and beam search's best, runs to maxNewTokens (no end-of-text ends them)
    const expected = (kind === 'beams' ? 1 : n) * SEQUENCE_NEW_TOKENS;
    if (generatedTokens !== expected) throw new Error(`${n} ${kind} gave ${generatedTokens} tokens, not ${expected}`);
    return decodeTokensPerSecond;
  };
  for (const n of SEQUENCE_COUNTS) await decode(n, 999);  // warm-up
  const speeds = SEQUENCE_COUNTS.map(() => []);
  for (let run = 0; run < runs; run++) {
    // each run's order rotated, so that no n always runs first on a cooler (or last on a warmer) machine
    for (let i = 0; i < SEQUENCE_COUNTS.length; i++) {
      const index = (i + run) % SEQUENCE_COUNTS.length;
      speeds[index].push(await decode(SEQUENCE_COUNTS[index], 1000 + run));
    }
  }
  const { config } = model;
  model.dispose();
  const tokensPerSecond = speeds.map(median);
  const results = SEQUENCE_COUNTS.map((n, i) => ({ sequences: n, tokens_per_second: tokensPerSecond[i], ratio: tokensPerSecond[i] / tokensPerSecond[0],
    runs: speeds[i] }));
  console.error(`${weights} ${kind}: ${results.map((r) => `${r.sequences}: ${r.tokens_per_second.toFixed(1)} tokens/s (${r.ratio.toFixed(2)}×)`).join(', ')}`);
  return { config, weights, runs, new_tokens: SEQUENCE_NEW_TOKENS, sampling, prompt: PROMPTS.plain, results };
}
