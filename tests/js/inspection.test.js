// model.inspect() and generate()'s inspect option in Node, on the bundled model: attention and the logit lens against
// the float64 reference (reference_gpt2.js), the KV cache's rows, the sampler's trace against the tokens it drew, the
// cache's events across runs, and the one-line errors (the engine's own numbers are held to their bounds natively:
// tests/cpp/test_inspection.cpp).
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { loadModel } from '../../web/lib/gpt2.js';
import { ReferenceGpt2 } from './reference_gpt2.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUNDLED = `${ROOT}public/models/tiny-shakespeare/`;
const TEXT = 'ROMEO: But soft, what light';

jest.setTimeout(60_000);

let model;
beforeAll(async () => {
  model = await loadModel(BUNDLED);
});
afterAll(() => model?.dispose());

const range = (n) => Array.from({ length: n }, (_, i) => i);

async function generated(prompt, options) {
  const generation = model.generate(prompt, options);
  const pieces = [];
  for await (const piece of generation) pieces.push(piece);
  return { pieces, stats: generation.stats };
}

test('inspect gives every layer and head\'s attention for the positions asked, each row summing to 1 and equal to the float64 reference within 1e-5', async () => {
  const result = await model.inspect(TEXT, { positions: range(8), kvCache: 'fp32' });
  const { n_layer: L, n_head: H } = model.config;
  expect(result.tokens.map((t) => t.text).join('')).toBe(TEXT.slice(0, result.tokens.map((t) => t.text).join('').length));
  expect(result.layers).toEqual(range(L));
  expect(result.heads).toEqual(range(H));
  const ids = result.tokens.map((t) => t.id);
  const inside = { attention: [], residual: [] };
  new ReferenceGpt2(BUNDLED).logprobs(ids, inside);
  const n = ids.length;
  let maxDiff = 0;
  let maxSumError = 0;
  for (let l = 0; l < L; l++) {
    for (let h = 0; h < H; h++) {
      result.positions.forEach((position, i) => {
        const row = result.attention[l][h][i];
        expect(row).toBeInstanceOf(Float32Array);
        expect(row.length).toBe(position + 1);
        maxSumError = Math.max(maxSumError, Math.abs(row.reduce((a, b) => a + b, 0) - 1));
        row.forEach((p, j) => (maxDiff = Math.max(maxDiff, Math.abs(p - inside.attention[l * H + h][position * n + j]))));
      });
    }
  }
  console.log(`bundled model, ${result.positions.length} positions: max |attention - float64 reference| = ${maxDiff.toExponential(2)}, max |row sum - 1| = ${maxSumError.toExponential(2)}`);
  expect(maxDiff).toBeLessThan(1e-5);
  expect(maxSumError).toBeLessThan(1e-5);
});

test("every layer's logit lens names the reference's likeliest tokens, and the last layer's is the model's own distribution", async () => {
  const result = await model.inspect(TEXT, { topK: 5, kvCache: 'fp32' });
  const ids = result.tokens.map((t) => t.id);
  const inside = { attention: [], residual: [] };
  new ReferenceGpt2(BUNDLED).logprobs(ids, inside);
  const last = ids.length - 1;
  expect(result.positions).toEqual([last]);
  let maxDiff = 0;
  result.layers.forEach((layer, l) => {
    const row = new ReferenceGpt2(BUNDLED).headLogprobs(inside.residual[layer])[last];
    const best = range(row.length).sort((a, b) => row[b] - row[a]).slice(0, 5);
    const lens = result.logitLens[l][0];
    expect(lens.map((e) => e.id)).toEqual(best);
    lens.forEach((e) => (maxDiff = Math.max(maxDiff, Math.abs(e.probability - Math.exp(row[e.id])))));
  });
  console.log(`logit lens, ${result.layers.length} layers: max |probability - float64 reference| = ${maxDiff.toExponential(2)}`);
  expect(maxDiff).toBeLessThan(1e-5);
  // the model's own: the first token of a greedy run from the same text, and its alternatives
  const { pieces } = await generated(ids, { temperature: 0, maxNewTokens: 1, topAlternatives: 5, kvCache: 'fp32' });
  const lastLayer = result.logitLens.at(-1)[0];
  expect(pieces[0].token).toBe(lastLayer[0].id);
  expect(pieces[0].alternatives.map((a) => a.token)).toEqual(lastLayer.map((e) => e.id));
  pieces[0].alternatives.forEach((a, k) => expect(lastLayer[k].probability).toBeCloseTo(a.probability, 6));
});

test('inspected key and value rows: fp32 the same bits whatever the pass, int8 within half a quantization step of them', async () => {
  const longer = `${TEXT}, through yonder window breaks?`;
  const at = { positions: [3], layers: [0, 2], heads: [1], kvCache: 'fp32' };
  const short = await model.inspect(TEXT, at);
  const long = await model.inspect(longer, at);
  expect(long.kv.filled).toBeGreaterThan(short.kv.filled);
  for (const l of [0, 1]) {
    expect(Array.from(long.kv.rows[l][0][0].key)).toEqual(Array.from(short.kv.rows[l][0][0].key));
    expect(Array.from(long.kv.rows[l][0][0].value)).toEqual(Array.from(short.kv.rows[l][0][0].value));
  }
  const int8 = await model.inspect(TEXT, { ...at, kvCache: 'int8' });
  expect(int8.kv.format).toBe('int8');
  expect(int8.kv.bytes).toBeLessThan(short.kv.bytes / 3);
  // layer 0's rows are computed from the embeddings alone: the same numbers before the int8 cache stores them
  for (const part of ['key', 'value']) {
    const exact = short.kv.rows[0][0][0][part];
    const step = exact.reduce((m, v) => Math.max(m, Math.abs(v)), 0) / 127;
    int8.kv.rows[0][0][0][part].forEach((v, i) => expect(Math.abs(v - exact[i])).toBeLessThanOrEqual(step * 0.5 * (1 + 1e-5)));
  }
  expect(short.kv.events).toEqual([{ kind: 'written', first: 0, count: short.kv.filled }]);
});

test("generate's inspect changes no token and gives each piece the pass that drew it and the sampler's trace of the draw", async () => {
  const options = { temperature: 0.8, topK: 12, seed: 11, maxNewTokens: 10 };
  const plain = await generated(TEXT, options);
  const inspected = await generated(TEXT, { ...options, inspect: { heads: [0], topK: 4 } });
  expect(inspected.pieces.map((p) => p.token)).toEqual(plain.pieces.map((p) => p.token));
  expect(plain.pieces[0].inspection).toBeUndefined();
  inspected.pieces.forEach((piece, k) => {
    const { inspection } = piece;
    expect(inspection.positions).toEqual([piece.position - 1]);
    expect(inspection.attention.length).toBe(model.config.n_layer);
    expect(inspection.attention[0][0][0].length).toBe(piece.position);
    expect(inspection.logitLens.at(-1)[0]).toHaveLength(4);
    const { sampler } = inspection;
    expect(sampler.token).toBe(piece.token);
    expect(sampler.how).toBe('sampled');
    const stages = Object.fromEntries(sampler.stages.map((s) => [s.name, s]));
    expect(stages.topK).toMatchObject({ ran: true, candidates: 12, values: 'logits' });
    expect(stages.topP.ran).toBe(false);
    expect(stages.distribution.candidates).toBe(12);
    expect(sampler.draw).toBeGreaterThanOrEqual(0);
    expect(sampler.draw).toBeLessThan(1);
    const listed = stages.distribution.top.find((t) => t.id === piece.token);
    if (listed) expect(sampler.probability).toBeCloseTo(listed.value, 6);
    // the prefill writes what it did not keep from the pool's session; each step its one position
    const first = k === 0 ? inspected.stats.reusedTokens : piece.position - 1;
    expect(inspection.kv.events.at(-1)).toMatchObject({ kind: 'written', first, count: piece.position - first });
  });
});

test('a run that continues a text shows the positions it kept and the ones it rolled back', async () => {
  await generated(TEXT, { temperature: 0, maxNewTokens: 3, inspect: { logitLens: false } });
  const edited = `${TEXT.slice(0, -5)} dark`;
  const { pieces } = await generated(edited, { temperature: 0, maxNewTokens: 1, inspect: { logitLens: false } });
  const events = pieces[0].inspection.kv.events;
  expect(events.map((e) => e.kind)).toEqual(['kept', 'rolledBack', 'written']);
  expect(events[0].first).toBe(0);
  expect(events[1].first).toBe(events[0].count);
  expect(pieces[0].inspection.logitLens).toBeNull();
});

test('inspect options out of range are one-line errors naming the option', async () => {
  await expect(model.inspect(TEXT, { layers: [9] })).rejects.toThrow("inspect: option layers has 9, outside the model's layers [0, 4)");
  await expect(model.inspect(TEXT, { positions: [99] })).rejects.toThrow(/^inspect: option positions has 99, outside the input's positions \[0, \d+\)$/);
  await expect(model.inspect(TEXT, { heads: [2, 1] })).rejects.toThrow('inspect: option heads must be an array of integers >= 0, ascending without repeats, got [2,1]');
  await expect(model.inspect(TEXT, { topK: 0 })).rejects.toThrow('inspect: option topK must be an integer in [1, 64], got 0');
  await expect(model.inspect(TEXT, { depth: 2 })).rejects.toThrow('inspect: unknown option "depth"');
  await expect(model.inspect({ text: TEXT })).rejects.toThrow('inspect: input must be a string or an array of token ids, got object');
  expect(() => model.generate(TEXT, { inspect: { layers: [7] } })).toThrow("generate: option inspect.layers has 7, outside the model's layers [0, 4)");
  expect(() => model.generate(TEXT, { inspect: true, numBeams: 2 })).toThrow('generate: inspect looks at one new token per step: it cannot be combined with numBeams > 1');
  expect(() => model.generate(TEXT, { inspect: 'yes' })).toThrow('generate: option inspect must be true or an object');
  // and the model goes on
  expect((await model.inspect(TEXT)).positions).toHaveLength(1);
});
