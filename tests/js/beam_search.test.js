// Beam search (generate's numBeams) on the wasm engine in Node with the bundled model: the returned sequences come
// best first with their scores, which are the model's log-probabilities of their tokens (a score pass agrees);
// with topAlternatives, the pieces' probabilities come from one score of the hypothesis after at most a context of
// the prompt; stop strings, end-of-text and Stop end them (Stop the scoring too); beam sampling repeats with its
// seed; a Continue reuses the best sequence's cache; bad options get one-line errors. (That the hypotheses are Hugging Face's is
// tests/cpp/test_beam_search.cpp's, against the NumPy reference.)
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { loadModel } from '../../web/lib/gpt2.js';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const PROMPT = 'ROMEO:\nI will go to my lord, and';

jest.setTimeout(120_000);

async function run(options, prompt = PROMPT) {
  const generation = model.generate(prompt, { maxNewTokens: 16, temperature: 0, ...options });
  const pieces = [];
  for await (const piece of generation) pieces.push(piece);
  return { pieces, sequences: generation.sequences, stats: generation.stats };
}

let model;
beforeAll(async () => {
  model = await loadModel(BUNDLED, { threads: 1 });
});
afterAll(() => model?.dispose());

test('four beams return three sequences best first, the same on every run, each piece naming its sequence', async () => {
  const first = await run({ numBeams: 4, numReturnSequences: 3, stopAtEndOfText: false });
  const again = await run({ numBeams: 4, numReturnSequences: 3, stopAtEndOfText: false, seed: 99 });
  expect(first.sequences).toHaveLength(3);
  expect(again.sequences).toEqual(first.sequences);  // deterministic at temperature 0: the seed plays no part
  const scores = first.sequences.map((s) => s.score);
  expect([...scores].sort((a, b) => b - a)).toEqual(scores);
  expect(new Set(first.sequences.map((s) => s.text)).size).toBe(3);
  for (const [i, sequence] of first.sequences.entries()) {
    const own = first.pieces.filter((p) => p.sequence === i);
    expect(own.map((p) => p.token)).toEqual(sequence.tokens);
    expect(own.map((p) => p.text).join('')).toBe(sequence.text);
    expect(sequence.tokens).toHaveLength(16);
    expect(sequence.stopReason).toBe('length');
  }
  expect(first.stats.generatedTokens).toBe(3 * 16);
  expect(first.stats.decodeTokensPerSecond).toBeGreaterThan(0);
});

test('a sequence\'s score is its tokens\' log-probabilities (as a score pass gives them) over its length ^ lengthPenalty', async () => {
  for (const lengthPenalty of [1, 0, 2]) {
    const { sequences, pieces } = await run({ numBeams: 3, numReturnSequences: 2, lengthPenalty, topAlternatives: 3, stopAtEndOfText: false, maxNewTokens: 10 });
    for (const [i, sequence] of sequences.entries()) {
      const own = pieces.filter((p) => p.sequence === i);
      const sum = own.reduce((total, piece) => total + Math.log(piece.probability), 0);
      const expected = sum / sequence.tokens.length ** lengthPenalty;
      console.log(`lengthPenalty ${lengthPenalty}, sequence ${i}: score ${sequence.score.toFixed(6)}, from the pieces ${expected.toFixed(6)}`);
      expect(Math.abs(sequence.score - expected)).toBeLessThan(1e-4);
      for (const piece of own) {
        expect(piece.alternatives).toHaveLength(3);
        expect(piece.alternatives[0].probability).toBeGreaterThanOrEqual(piece.probability - 1e-6);
      }
    }
  }
});

test('after a prompt longer than the context, each piece\'s probability and alternatives are a score of the hypothesis after the prompt\'s newest n_ctx - 1 tokens', async () => {
  const { n_ctx: contextSize } = model.config;
  const prompt = await model.encode(readFileSync(fileURLToPath(new URL('../fixtures/tinyshakespeare/tinyshakespeare.txt', import.meta.url)), 'utf8').slice(0, 10_000));
  expect(prompt.length).toBeGreaterThan(8 * contextSize);
  const { sequences, pieces } = await run({ numBeams: 2, numReturnSequences: 2, topAlternatives: 3, stopAtEndOfText: false, maxNewTokens: 12 }, prompt);
  const engine = await loadEngine();
  const engineModel = engine.createModel(readFileSync(`${BUNDLED}config.json`, 'utf8'), readFileSync(`${BUNDLED}model.safetensors`));
  const session = engineModel.createSession();
  try {
    for (const [i, sequence] of sequences.entries()) {
      const context = prompt.slice(-(contextSize - 1));
      const { logprobs, alternatives } = session.score([...context, ...sequence.tokens], 3);
      const own = pieces.filter((piece) => piece.sequence === i);
      expect(own.map((piece) => piece.probability)).toEqual(logprobs.slice(context.length - 1).map(Math.exp));
      expect(own.map((piece) => piece.alternatives.map((a) => a.token)))
        .toEqual(alternatives.slice(context.length - 1).map((row) => row.filter((_, k) => k % 2 === 0)));
    }
  } finally {
    session.dispose();
    engineModel.dispose();
  }
});

test('the beams end on end-of-text, and the run on the best sequence\'s reason; one returned sequence has no index', async () => {
  // with end-of-text made likely (the bias adds to its log-probability), hypotheses end on it
  const eos = 50256;
  const { sequences, pieces, stats } = await run({ numBeams: 4, logitBias: { [eos]: 20 }, maxNewTokens: 24 });
  expect(sequences).toHaveLength(1);
  expect(sequences[0].stopReason).toBe('eos');
  expect(sequences[0].tokens).not.toContain(eos);
  expect(stats.stopReason).toBe('eos');
  expect(pieces.every((p) => p.sequence === undefined)).toBe(true);
});

test('a stop string ends each returned sequence before it', async () => {
  const { sequences, stats } = await run({ numBeams: 4, numReturnSequences: 4, stop: [','], maxNewTokens: 30, stopAtEndOfText: false });
  expect(sequences.map((s) => s.stopReason)).toContain('stop');
  for (const sequence of sequences) expect(sequence.text).not.toContain(',');
  expect(stats.stopReason).toBe(sequences[0].stopReason);
});

test('Stop (an AbortSignal) ends the search with the running beams as the sequences', async () => {
  const controller = new AbortController();
  const generation = model.generate(PROMPT, { temperature: 0, numBeams: 3, numReturnSequences: 3, maxNewTokens: 200, stopAtEndOfText: false, signal: controller.signal });
  setTimeout(() => controller.abort(), 150);
  for await (const piece of generation) void piece;
  expect(generation.stats.stopReason).toBe('abort');
  expect(generation.sequences.map((s) => s.stopReason)).toEqual(['abort', 'abort', 'abort']);
  const lengths = generation.sequences.map((s) => s.tokens.length);
  expect(lengths[0]).toBeGreaterThan(0);
  expect(lengths[0]).toBeLessThan(200);
  expect(new Set(lengths).size).toBe(1);  // every beam has generated as many tokens
});

test('Stop also stops the scoring of the hypotheses: their pieces then have no probabilities; the next run gives the same text', async () => {
  const controller = new AbortController();
  const options = { temperature: 0, numBeams: 3, numReturnSequences: 2, maxNewTokens: 200, stopAtEndOfText: false, topAlternatives: 3 };
  const generation = model.generate(PROMPT, { ...options, signal: controller.signal });
  setTimeout(() => controller.abort(), 150);
  const pieces = [];
  for await (const piece of generation) pieces.push(piece);
  expect(generation.stats.stopReason).toBe('abort');
  expect(pieces.length).toBeGreaterThan(0);
  for (const piece of pieces) expect([piece.probability, piece.alternatives]).toEqual([undefined, undefined]);
  const length = generation.sequences[0].tokens.length;
  const again = await run({ ...options, maxNewTokens: length });
  expect(again.sequences[0].tokens).toEqual(generation.sequences[0].tokens);
  expect(again.pieces.every((piece) => piece.alternatives.length === 3)).toBe(true);
});

test('beam sampling (temperature > 0) repeats with its seed and differs between seeds', async () => {
  const options = { numBeams: 4, numReturnSequences: 2, temperature: 0.9, topK: 40, stopAtEndOfText: false };
  const texts = async (seed) => (await run({ ...options, seed })).sequences.map((s) => s.text);
  const one = await texts(1);
  expect(await texts(1)).toEqual(one);
  const others = [await texts(2), await texts(3)];
  expect(others.some((t) => JSON.stringify(t) !== JSON.stringify(one))).toBe(true);
});

test('a Continue of the best sequence reuses its whole cache', async () => {
  const { sequences, stats } = await run({ numBeams: 3, stopAtEndOfText: false });
  const ids = [...(await model.encode(PROMPT)), ...sequences[0].tokens];
  const next = await run({ maxNewTokens: 4 }, ids);
  expect(next.stats.reusedTokens).toBe(stats.promptTokens + sequences[0].tokens.length - 1);
});

test.each([
  ['generate: option numBeams must be an integer in [1, 16] (1 = off), got 0', { numBeams: 0 }],
  ['generate: option numBeams must be an integer in [1, 16] (1 = off), got 17', { numBeams: 17 }],
  ['generate: option numBeams must be an integer in [1, 16] (1 = off), got 2.5', { numBeams: 2.5 }],
  ['generate: option lengthPenalty must be a number in [-3.4028234663852886e+38, 3.4028234663852886e+38], got NaN', { numBeams: 2, lengthPenalty: NaN }],
  ['generate: option earlyStopping must be true, false or "never", got "sometimes"', { numBeams: 2, earlyStopping: 'sometimes' }],
  ['generate: option numReturnSequences must be an integer in [1, numBeams = 4], got 5', { numBeams: 4, numReturnSequences: 5 }],
  ['generate: numBeams > 1 cannot be combined with speculative', { numBeams: 2, speculative: {} }],
  ['generate: numBeams > 1 needs the KV cache (useKVCache: true): the sequences fork it', { numBeams: 2, useKVCache: false }],
])('%s', (message, options) => {
  expect(() => model.generate(PROMPT, options)).toThrow(message);
});
