// The logits processors through the public API (generate's minP, typicalP, noRepeatNgramSize, presencePenalty,
// frequencyPenalty, logitBias, badWords, minNewTokens) on the wasm engine in Node with the bundled model: each does
// what its definition says to the text (engine/model/sampler.cpp; the distributions themselves are checked against
// the NumPy reference in tests/cpp/test_sampler_reference.cpp), speculation leaves their text unchanged, and a bad
// value is a one-line error naming the option.
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { loadModel } from '../../web/lib/gpt2.js';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const PROMPT = 'ROMEO:\nI will go to my lord, and to the king;';
const END_OF_TEXT = 50256;  // GPT-2's <|endoftext|>, the bundled model's too

jest.setTimeout(120_000);

async function run(prompt, options) {
  const generation = model.generate(prompt, { maxNewTokens: 40, temperature: 0, ...options });
  const pieces = [];
  for await (const piece of generation) pieces.push(piece);
  return { tokens: pieces.map((p) => p.token), text: pieces.map((p) => p.text).join(''), stats: generation.stats };
}

// the n-grams of ids that occur more than once
function repeatedNgrams(ids, n) {
  const seen = new Map();
  for (let i = 0; i + n <= ids.length; i++) {
    const key = ids.slice(i, i + n).join(' ');
    seen.set(key, (seen.get(key) ?? 0) + 1);
  }
  return [...seen].filter(([, count]) => count > 1).map(([key]) => key);
}

let model;
let greedy;
beforeAll(async () => {
  model = await loadModel(BUNDLED, { threads: 1 });
  greedy = await run(PROMPT, { stopAtEndOfText: false });
});
afterAll(() => model?.dispose());

test('a logit bias of -Infinity bans a token the greedy text had, and a positive one makes a token appear', async () => {
  const banned = greedy.tokens[0];
  const without = await run(PROMPT, { logitBias: { [banned]: -Infinity }, stopAtEndOfText: false });
  expect(greedy.tokens).toContain(banned);
  expect(without.tokens).not.toContain(banned);
  const [newline] = await model.encode('\n');
  const boosted = await run(PROMPT, { logitBias: { [newline]: 12 }, maxNewTokens: 5 });
  expect(boosted.tokens).toEqual([newline, newline, newline, newline, newline]);
});

test('a bad word given as text is never produced, with or without a leading space', async () => {
  const word = 'lord';
  expect(greedy.text).toContain(` ${word}`);
  const got = await run(PROMPT, { badWords: [word], stopAtEndOfText: false });
  expect(got.text).not.toMatch(new RegExp(`\\b${word}\\b`));
  expect(got.text).not.toBe(greedy.text);
});

test('noRepeatNgramSize 2 leaves no bigram twice in the generated text where greedy repeats some', async () => {
  const long = await run(PROMPT, { maxNewTokens: 80, stopAtEndOfText: false });
  const prompt = await model.encode(PROMPT);
  expect(repeatedNgrams(long.tokens, 2).length).toBeGreaterThan(0);
  const got = await run(PROMPT, { maxNewTokens: 80, noRepeatNgramSize: 2, stopAtEndOfText: false });
  expect(repeatedNgrams([...prompt, ...got.tokens], 2)).toEqual(repeatedNgrams(prompt, 2));
});

test('presence and frequency penalties make the generated text use more distinct tokens', async () => {
  const long = await run(PROMPT, { maxNewTokens: 60, stopAtEndOfText: false });
  const penalized = await run(PROMPT, { maxNewTokens: 60, presencePenalty: 1.5, frequencyPenalty: 1, stopAtEndOfText: false });
  expect(new Set(penalized.tokens).size).toBeGreaterThan(new Set(long.tokens).size);
});

test('minNewTokens holds back end-of-text: a run that would end at once runs to its length', async () => {
  const eos = END_OF_TEXT;
  const ending = await run(PROMPT, { logitBias: { [eos]: 40 } });
  expect(ending.stats.stopReason).toBe('eos');
  expect(ending.tokens).toEqual([]);
  const held = await run(PROMPT, { logitBias: { [eos]: 40 }, minNewTokens: 6 });
  expect(held.tokens).toHaveLength(6);
  expect(held.tokens).not.toContain(eos);
  expect(held.stats.stopReason).toBe('eos');  // the seventh token is end-of-text again
});

test('minP and typicalP change what seeded sampling draws, and minP 1 is greedy', async () => {
  const sampled = { temperature: 1.2, seed: 7, maxNewTokens: 30, stopAtEndOfText: false };
  const plain = await run(PROMPT, sampled);
  expect((await run(PROMPT, { ...sampled, minP: 0.2 })).tokens).not.toEqual(plain.tokens);
  expect((await run(PROMPT, { ...sampled, typicalP: 0.3 })).tokens).not.toEqual(plain.tokens);
  expect((await run(PROMPT, { ...sampled, minP: 1 })).tokens).toEqual((await run(PROMPT, { maxNewTokens: 30, stopAtEndOfText: false })).tokens);
});

test('speculation leaves the text of every processor unchanged, greedy and seeded', async () => {
  const processors = {
    minP: 0.05, typicalP: 0.9, noRepeatNgramSize: 4, presencePenalty: 0.3, frequencyPenalty: 0.2,
    logitBias: { 11: 1.5 }, badWords: ['king'], minNewTokens: 10, maxNewTokens: 50,
  };
  for (const seed of [0, 1, 2]) {
    const options = { ...processors, temperature: seed === 0 ? 0 : 0.9, seed };
    const plain = await run(PROMPT, options);
    const speculated = await run(PROMPT, { ...options, speculative: { draft: 'prompt-lookup' } });
    expect({ seed, tokens: speculated.tokens }).toEqual({ seed, tokens: plain.tokens });
  }
});

test.each([
  ['generate: option minP must be a number in [0, 1] (0 = off), got 1.5', { minP: 1.5 }],
  ['generate: option typicalP must be a number in [0, 1] (1 = off), got -0.1', { typicalP: -0.1 }],
  ['generate: option noRepeatNgramSize must be an integer in [0, 2147483647] (0 = off), got 2.5', { noRepeatNgramSize: 2.5 }],
  ['generate: option presencePenalty must be a number in [-3.4028234663852886e+38, 3.4028234663852886e+38] (0 = off), got Infinity', { presencePenalty: Infinity }],
  ['generate: option frequencyPenalty must be a number in [-3.4028234663852886e+38, 3.4028234663852886e+38] (0 = off), got "x"', { frequencyPenalty: 'x' }],
  ['generate: option logitBias must be an object { tokenId: bias }, got [1]', { logitBias: [1] }],
  ['generate: option logitBias has a key that is not a token id: "a"', { logitBias: { a: 1 } }],
  ['generate: option logitBias[5] must be a number in [-3.4028234663852886e+38, 3.4028234663852886e+38] or -Infinity (a ban), got Infinity', { logitBias: { 5: Infinity } }],
  ["generate: option logitBias has token 50257, outside the model's vocabulary [0, 50257)", { logitBias: { 50257: -1 } }],
  ['generate: option badWords must be an array of texts or token id arrays, got "king"', { badWords: 'king' }],
  ['generate: option badWords[1] must be a non-empty text or a non-empty array of token ids, got []', { badWords: ['king', []] }],
  ["generate: option badWords[0] has token 60000, outside the model's vocabulary [0, 50257)", { badWords: [[3, 60000]] }],
  ['generate: option minNewTokens must be an integer in [0, 2147483647] (0 = off), got -1', { minNewTokens: -1 }],
])('a bad value is refused: %s', async (message, options) => {
  await expect(run(PROMPT, options)).rejects.toThrow(message);
  expect((await run(PROMPT, { maxNewTokens: 3 })).tokens).toEqual(greedy.tokens.slice(0, 3));  // the model goes on
});

test('settings that ban every token end the run with an error that names them, and the model goes on', async () => {
  const everything = Object.fromEntries(Array.from({ length: 50257 }, (_, id) => [id, -Infinity]));
  await expect(run(PROMPT, { logitBias: everything })).rejects.toThrow('the sampling settings ban every token (logitBias, badWords, noRepeatNgramSize, minNewTokens)');
  expect((await run(PROMPT, { maxNewTokens: 3 })).tokens).toEqual(greedy.tokens.slice(0, 3));
});
