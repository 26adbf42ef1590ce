// Several sequences from one prompt (generate's numReturnSequences) on the wasm engine in Node with the bundled
// model: the prompt is prefilled once, the other sequences fork its KV cache, and each batched step feeds them all;
// sequence i is, token for token, the run with seed + i alone, each ends on its own (end-of-text, a stop string,
// maxNewTokens), its pieces carry its index, and run.sequences holds its tokens, text and log-probability.
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { loadModel } from '../../web/lib/gpt2.js';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const PROMPT = 'ROMEO:\nI will go to my lord, and';

jest.setTimeout(120_000);

async function run(options) {
  const generation = model.generate(PROMPT, { maxNewTokens: 30, temperature: 0.9, ...options });
  const pieces = [];
  for await (const piece of generation) pieces.push(piece);
  return { pieces, tokens: pieces.map((p) => p.token), sequences: generation.sequences, stats: generation.stats };
}

let model;
beforeAll(async () => {
  model = await loadModel(BUNDLED, { threads: 1 });
});
afterAll(() => model?.dispose());

test.each(['int8', 'fp32'])('sequence i of four is the run with seed + i alone, token for token (%s KV cache)', async (kvCache) => {
  const options = { seed: 11, kvCache, stopAtEndOfText: false };
  const together = await run({ ...options, numReturnSequences: 4 });
  expect(together.sequences).toHaveLength(4);
  for (let i = 0; i < 4; i++) {
    const alone = await run({ ...options, seed: 11 + i });
    expect({ i, tokens: together.sequences[i].tokens }).toEqual({ i, tokens: alone.tokens });
    expect(together.sequences[i].text).toBe(alone.pieces.map((p) => p.text).join(''));
    expect(together.sequences[i].stopReason).toBe('length');
  }
  expect(new Set(together.sequences.map((s) => s.text)).size).toBe(4);
  expect(together.stats.generatedTokens).toBe(4 * 30);
});

test('every piece names its sequence, and a sequence\'s pieces are its text and tokens in order', async () => {
  const { pieces, sequences } = await run({ seed: 3, numReturnSequences: 3, stopAtEndOfText: false });
  for (let i = 0; i < 3; i++) {
    const own = pieces.filter((p) => p.sequence === i);
    expect(own.map((p) => p.token)).toEqual(sequences[i].tokens);
    expect(own.map((p) => p.text).join('')).toBe(sequences[i].text);
  }
  expect(pieces.every((p) => [0, 1, 2].includes(p.sequence))).toBe(true);
});

test('a sequence\'s score is the sum of its tokens\' log-probabilities, as the run with its seed alone shows them', async () => {
  const options = { seed: 5, stopAtEndOfText: false, maxNewTokens: 12 };
  const { sequences } = await run({ ...options, numReturnSequences: 2 });
  for (const [i, sequence] of sequences.entries()) {
    const alone = await run({ ...options, seed: 5 + i, topAlternatives: 1 });  // each piece's model probability
    const expected = alone.pieces.reduce((sum, piece) => sum + Math.log(piece.probability), 0);
    console.log(`sequence ${i}: score ${sequence.score.toFixed(6)}, from the pieces ${expected.toFixed(6)}`);
    expect(sequence.score).toBeLessThan(0);
    expect(Math.abs(sequence.score - expected)).toBeLessThan(1e-4);
  }
});

test('each sequence ends on its own stop string, end-of-text or length, and the others go on', async () => {
  const { sequences, stats } = await run({ seed: 2, numReturnSequences: 6, stop: [','], maxNewTokens: 40 });
  const reasons = sequences.map((s) => s.stopReason);
  expect(reasons).toContain('stop');
  for (const sequence of sequences) {
    expect(sequence.text).not.toContain(',');
    if (sequence.stopReason === 'length') expect(sequence.tokens).toHaveLength(40);
  }
  expect(['stop', 'eos', 'length']).toContain(stats.stopReason);
});

test('Stop (an AbortSignal) ends every sequence', async () => {
  const controller = new AbortController();
  const generation = model.generate(PROMPT, { seed: 1, temperature: 0.9, numReturnSequences: 3, maxNewTokens: 200, stopAtEndOfText: false, signal: controller.signal });
  let count = 0;
  for await (const piece of generation) if (piece.token !== null && ++count === 9) controller.abort();
  expect(generation.stats.stopReason).toBe('abort');
  expect(generation.sequences.map((s) => s.stopReason)).toEqual(['abort', 'abort', 'abort']);
  expect(generation.sequences.map((s) => s.tokens.length)).toEqual([3, 3, 3]);
});

test.each([
  ['generate: option numReturnSequences must be an integer in [1, 16], got 17', { numReturnSequences: 17 }],
  ['generate: option numReturnSequences must be an integer in [1, 16], got 0', { numReturnSequences: 0 }],
  ['generate: numReturnSequences > 1 needs sampling (temperature > 0) or numBeams: greedy gives one sequence n times', { numReturnSequences: 2, temperature: 0 }],
  ['generate: numReturnSequences > 1 cannot be combined with speculative', { numReturnSequences: 2, speculative: {} }],
  ['generate: numReturnSequences > 1 needs the KV cache (useKVCache: true): the sequences fork it', { numReturnSequences: 2, useKVCache: false }],
])('a bad value is refused: %s', (message, options) => {
  expect(() => model.generate(PROMPT, options)).toThrow(message);
});
