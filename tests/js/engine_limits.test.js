// The engine's limits at the engine-object level (web/lib/engine/engine_objects.js over the testing build, in Node):
// constants().limits states them as the engine defines them; what needs more memory than the heap has left is an "out of
// memory" error, never an abort, and the model loaded before keeps giving the same tokens; a number the engine
// cannot take as given is refused with the option named, never wrapped around or narrowed.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { CONSTANTS_MODULE, constantsModule } from '../../tools/dev/write_engine_constants.mjs';
import { MAX_THREADS } from '../../web/lib/engine/threads.js';
import {
  GENERATE_OPTIONS, MAX_DRAFT_TOKENS, MAX_FLOAT, MAX_INSPECT_TOP_K, MAX_INT, MAX_SCORE_ALTERNATIVES, MAX_SEQUENCES,
} from '../../web/lib/generation/option_table.js';

const TINY = fileURLToPath(new URL('../fixtures/tiny-random/', import.meta.url));
const configJson = readFileSync(`${TINY}config.json`, 'utf8');
const weights = new Uint8Array(readFileSync(`${TINY}model.safetensors`));
const greedy = JSON.parse(readFileSync(`${TINY}greedy.json`, 'utf8'));
const N_VOCAB = 384;
const N_CTX = 320;

// Jest gives each test file its own modules, so this is an instance of its own: the out-of-memory test grows its
// heap to the 4 GB maximum, which never shrinks (virtual memory only: the blocks that fill it are never written).
let engine;
let model;
beforeAll(async () => {
  engine = await loadEngine({ testing: true });
  model = engine.createModel(configJson, weights);
});
afterAll(() => model?.dispose());

// What fn threw, as { kind, message }, or null when it threw nothing.
function thrown(fn) {
  try {
    fn();
  } catch (error) {
    return { kind: error.kind, message: error.message };
  }
  return null;
}

function greedyIds(session, prompt = greedy.prompt, count = greedy.generated.length) {
  session.setSampling({ temperature: 0 });
  const ids = [session.prefill(prompt)];
  while (ids.length < count) ids.push(session.step(ids.at(-1)));
  return ids;
}

function withSessions(count, fn, options = {}) {
  const sessions = Array.from({ length: count }, () => model.createSession(options));
  try {
    return fn(sessions);
  } finally {
    for (const session of sessions) session.dispose();
  }
}

const BEAMS = { numBeams: 16, lengthPenalty: 1, earlyStopping: false, maxNewTokens: N_CTX, eosToken: -1 };

test('constants().limits states the engine\'s bounds', () => {
  expect(engine.constants.limits).toEqual({
    maxSequences: 16,
    maxDraftTokens: 16,
    maxThreads: 16,
    maxScoreAlternatives: 4194304,
    maxInt: 2147483647,
    maxFloat: 3.4028234663852886e38,
    maxInspectTopK: 64,
  });
});

// JS that runs before an engine instance exists reads the engine's constants from a module written from the engine
// (tools/dev/write_engine_constants.mjs): it must be what this engine says, word for word.
test('web/lib/engine/engine_constants.js is the engine\'s constants as the script writes them', () => {
  const written = readFileSync(CONSTANTS_MODULE, 'utf8');
  if (written !== constantsModule(engine.constants)) {
    throw new Error('web/lib/engine/engine_constants.js differs from the engine: run node tools/dev/write_engine_constants.mjs');
  }
});

// The option table checks options before any engine is loaded (a page's options before they cross to its worker,
// a widget's attributes before it downloads anything), so it states the limits itself: these are the engine's.
test('the option table bounds the options by the engine\'s own limits', () => {
  expect({
    maxSequences: MAX_SEQUENCES,
    maxDraftTokens: MAX_DRAFT_TOKENS,
    maxThreads: MAX_THREADS,
    maxScoreAlternatives: MAX_SCORE_ALTERNATIVES,
    maxInt: MAX_INT,
    maxFloat: MAX_FLOAT,
    maxInspectTopK: MAX_INSPECT_TOP_K,
  }).toEqual(engine.constants.limits);
});

// The sampler's defaults are the engine's (engine/gpt2.h SamplingSettings), and JS writes each of them once, in the
// option table: the engine's settings (sampling_settings.js) are the table's entries marked `engine`, and the seed
// (random when not given) and the end-of-text token (the tokenizer's).
test('the option table\'s defaults of the sampler\'s settings are the engine\'s own', () => {
  const engineDefaults = engine.call((module) => module.samplingDefaults());
  const sampled = Object.entries(GENERATE_OPTIONS).filter(([, entry]) => entry.engine);
  expect(Object.keys(engineDefaults).sort()).toEqual([...sampled.map(([name]) => name), 'eosToken', 'seed'].sort());
  for (const [name, entry] of sampled) {
    // logitBias crosses as [token, bias] pairs
    const expected = entry.default.constructor === Object ? Object.entries(entry.default) : entry.default;
    expect([name, engineDefaults[name]]).toEqual([name, expected]);
  }
});

test('with the heap nearly exhausted, what needs more is an out-of-memory error and the model loaded before still gives the same tokens', () => {
  withSessions(16, (sessions) => {
    const [leader] = sessions;
    const before = greedyIds(leader);
    expect(before).toEqual(greedy.generated);
    const reserve = engine.call((module) => new module.HeapReserve(16384));
    try {
      // the heap is at its maximum (Emscripten stops one 64 KiB page short of 4 GiB): it cannot grow any further
      expect(engine.heapBytes()).toBe(4 * 2 ** 30 - 65536);

      // a beam search of 16 beams over a whole context: its Rng (32 bytes), the beams' scores (16 x n_vocab
      // floats), 32 candidates (12 bytes each), and the tokens of 2 x 16 beams and 17 hypotheses (n_ctx each)
      const beamBytes = 32 + 16 * N_VOCAB * 4 + 32 * 12 + (3 * 16 + 1) * N_CTX * 4;
      expect(thrown(() => leader.beamSearch(sessions, BEAMS, greedy.prompt))).toEqual({
        kind: 'memory', message: `out of memory: need ${beamBytes} bytes for the beam search`,
      });
      expect(engine.aborted).toBe(false);

      // 299 scores with n_vocab alternatives each (gpt2::TokenScore: 24 bytes)
      const ids = Array.from({ length: 300 }, (_, i) => (i * 7) % N_VOCAB);
      expect(thrown(() => leader.score(ids, N_VOCAB))).toEqual({
        kind: 'memory', message: `out of memory: need ${(299 + 299 * N_VOCAB) * 24} bytes for the scores`,
      });
      expect(engine.aborted).toBe(false);

      const session = thrown(() => model.createSession({ kvCache: 'fp32' }));
      expect(session.kind).toBe('memory');
      expect(session.message).toMatch(/^out of memory: need \d+ bytes for the KV cache \(\d+\) and activations$/);
      expect(engine.aborted).toBe(false);
    } finally {
      engine.call(() => reserve.delete());
    }
    expect(greedyIds(leader)).toEqual(before);
    // and the refused beam search now runs
    const search = leader.beamSearch(sessions, { ...BEAMS, maxNewTokens: 4 }, greedy.prompt);
    while (search.step());
    expect(search.results()).toHaveLength(16);
    search.dispose();
  });
});

describe('numbers the engine cannot take as given are refused with the option named', () => {
  test('a beam search of more new tokens than one context, or a count beyond int32, is refused', () => {
    withSessions(2, (sessions) => {
      const [leader] = sessions;
      leader.setSampling({ temperature: 0 });
      const beams = { numBeams: 2, lengthPenalty: 1, earlyStopping: false, eosToken: -1 };
      for (const maxNewTokens of [1e9, 2 ** 28, N_CTX + 1]) {
        expect(thrown(() => leader.beamSearch(sessions, { ...beams, maxNewTokens }, greedy.prompt))).toEqual({
          kind: 'input', message: `beam search: max_new_tokens ${maxNewTokens}, expected 1..${N_CTX} (the model's context)`,
        });
      }
      expect(thrown(() => leader.beamSearch(sessions, { ...beams, maxNewTokens: 2 ** 32 + 5 }, greedy.prompt))).toEqual({
        kind: 'input', message: 'beam search: max_new_tokens 4294967301 is not an integer in the int32 range',
      });
      expect(thrown(() => leader.beamSearch(sessions, { ...beams, numBeams: 2 ** 32 + 2, maxNewTokens: 4 }, greedy.prompt))).toEqual({
        kind: 'input', message: 'beam search: num_beams 4294967298 is not an integer in the int32 range',
      });
      expect(engine.aborted).toBe(false);
      const search = leader.beamSearch(sessions, { ...beams, maxNewTokens: 4 }, greedy.prompt);
      while (search.step());
      expect(search.results()[0].tokens).toHaveLength(4);
      search.dispose();
    });
  });

  test('a score of more alternatives than one score returns is refused before anything is allocated', () => {
    withSessions(1, ([session]) => {
      // 4194304 / 384 = 10922.67: 10923 scored tokens with every alternative are one too many
      const ids = Array.from({ length: 10924 }, (_, i) => i % N_VOCAB);
      expect(thrown(() => session.score(ids, N_VOCAB))).toEqual({
        kind: 'input',
        message: 'score: top_k 384 for 10923 scored tokens is more than 4194304 alternatives (the most one score returns)',
      });
      expect(thrown(() => session.score(ids.slice(0, 10), N_VOCAB + 1))).toEqual({
        kind: 'input', message: `score: top_k ${N_VOCAB + 1} out of range [0, ${N_VOCAB}]`,
      });
      expect(session.score(ids.slice(0, 20), N_VOCAB).alternatives[18]).toHaveLength(2 * N_VOCAB);
    });
  });

  test('setSampling refuses a value outside the float or int32 range, naming the field, and keeps the settings before', () => {
    withSessions(1, ([session]) => {
      session.setSampling({ temperature: 0 });
      for (const [settings, message] of [
        [{ temperature: 1e39 }, 'setSampling: temperature 1e+39 is outside the float range'],
        [{ topK: 2 ** 32 + 1 }, 'setSampling: topK 4294967297 is not an integer in the int32 range'],
        [{ logitBias: { [2 ** 32 + 13]: 5 } }, 'setSampling: logitBias token 4294967309 is not an integer in the int32 range'],
        [{ logitBias: { 13: 1e39 } }, 'setSampling: logitBias 1e+39 for token 13 is outside the float range'],
        [{ frequencyPenalty: -1e39 }, 'setSampling: frequencyPenalty -1e+39 is outside the float range'],
        [{ repetitionPenalty: 1e39 }, 'setSampling: repetitionPenalty 1e+39 is outside the float range'],
        [{ badWords: [[5, 2 ** 31]] }, 'setSampling: badWords token 2147483648 is not an integer in the int32 range'],
        [{ temperature: -1 }, 'sampling: temperature -1, expected a finite number >= 0 (0: greedy)'],
        [{ logitBias: { 500: 1 } }, `sampling: logit_bias token 500 is outside the vocabulary [0, ${N_VOCAB})`],
      ]) {
        expect(thrown(() => session.setSampling(settings))).toEqual({ kind: 'input', message });
      }
      // greedy, as set before the refusals
      const ids = [session.prefill(greedy.prompt)];
      while (ids.length < greedy.generated.length) ids.push(session.step(ids.at(-1)));
      expect(ids).toEqual(greedy.generated);
    });
  });

  test('a token id beyond int32 is refused, not read as the id it wraps around to', () => {
    withSessions(1, ([session]) => {
      session.setSampling({ temperature: 0 });
      expect(thrown(() => session.prefill([...greedy.prompt, 2 ** 32 + 13]))).toEqual({
        kind: 'input', message: `token id 4294967309 out of range [0, ${N_VOCAB})`,
      });
      session.prefill(greedy.prompt);
      expect(thrown(() => session.step(2 ** 32 + 13))).toEqual({
        kind: 'input', message: `token id 4294967309 out of range [0, ${N_VOCAB})`,
      });
    });
  });

  test('a frequency penalty of -3e38 makes the repeated token certain: the run goes on, with no false end', () => {
    withSessions(1, ([session]) => {
      session.setSampling({ frequencyPenalty: -3e38, seed: 5 });
      const ids = [session.prefill(greedy.prompt)];
      while (ids.length < 40) ids.push(session.step(ids.at(-1)));
      expect(ids).toEqual(Array(40).fill(ids[0]));
    });
  });
});
