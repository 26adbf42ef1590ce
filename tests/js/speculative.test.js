// Speculative decoding through the public API (generate's `speculative` option) on the wasm engine in Node: the
// tokens are those of a run without it, bit for bit (engine/decoding/speculation.h Speculation::step verifies drafts in one
// batched pass with step()'s logits and the sampler's own draws), for greedy and 50 seeds, both KV caches, one and
// two threads, across a window slide, with stop strings, Continue's reuse, Stop and the pieces' distributions; and
// prompt lookup does draft, and keep, tokens where the text repeats itself; and how the draft length adapts.
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { DraftPolicy } from '../../web/lib/generation/draft_policy.js';
import { loadModel } from '../../web/lib/gpt2.js';

const BUNDLED = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
// A prompt whose continuation repeats spans of it (as quoting or editing does), and one that does not.
const REWRITE = 'ROMEO:\nBut soft, what light through yonder window breaks?\nJULIET:\nBut soft, what light through yonder window breaks?\nROMEO:\nBut soft,';
const PLAIN = 'First Citizen:\nBefore we proceed any further, hear me speak.';
const SPECULATIVE = { draft: 'prompt-lookup', maxDraftTokens: 8 };

jest.setTimeout(240_000);

// -> { tokens, text, pieces, stats } of one run
async function run(model, prompt, options) {
  const generation = model.generate(prompt, { stopAtEndOfText: false, ...options });
  const pieces = [];
  for await (const piece of generation) pieces.push(piece);
  return { tokens: pieces.map((p) => p.token), text: pieces.map((p) => p.text).join(''), pieces, stats: generation.stats };
}

let model;
beforeAll(async () => {
  model = await loadModel(BUNDLED, { threads: 1 });
});
afterAll(() => model?.dispose());

test.each(['int8', 'fp32'])('greedy and 50 seeds give the same tokens with and without speculation (%s KV cache), and prompt lookup keeps drafted tokens', async (kvCache) => {
  let drafted = 0;
  let accepted = 0;
  for (let seed = 0; seed <= 50; seed++) {
    const prompt = seed % 2 === 0 ? REWRITE : PLAIN;
    // seed 0: greedy; the others sample with every setting on
    const options = seed === 0 ? { temperature: 0, maxNewTokens: 40, kvCache }
      : { temperature: 0.8, topK: 40, topP: 0.95, repetitionPenalty: 1.1, seed, maxNewTokens: 24, kvCache };
    const plain = await run(model, prompt, options);
    const speculated = await run(model, prompt, { ...options, speculative: SPECULATIVE });
    expect({ seed, tokens: speculated.tokens }).toEqual({ seed, tokens: plain.tokens });
    expect(speculated.text).toBe(plain.text);
    expect(plain.stats.draftedTokens).toBe(0);
    drafted += speculated.stats.draftedTokens;
    accepted += speculated.stats.acceptedTokens;
    if (seed === 0) expect(speculated.stats.acceptedTokens).toBeGreaterThan(20);  // greedy repeats itself: drafts hold
  }
  console.log(`${kvCache} cache: drafted ${drafted} tokens, accepted ${accepted}`);
  expect(accepted).toBeGreaterThan(25);
  expect(drafted - accepted).toBeGreaterThan(20);  // rejected drafts were rolled back, and the text stayed
});

test('with two threads the speculated tokens are the single-threaded ones', async () => {
  const threaded = await loadModel(BUNDLED, { threads: 2 });
  try {
    for (const seed of [0, 3, 4]) {
      const options = { temperature: seed === 0 ? 0 : 0.8, seed, maxNewTokens: 30 };
      const expected = await run(model, REWRITE, options);
      const got = await run(threaded, REWRITE, { ...options, speculative: SPECULATIVE });
      expect(got.tokens).toEqual(expected.tokens);
      if (seed === 0) expect(got.stats.acceptedTokens).toBeGreaterThan(10);
    }
  } finally {
    threaded.dispose();
  }
});

test('across a window slide, with a stop string and the pieces\' distributions, speculation gives the same pieces', async () => {
  const prompt = (await model.encode(REWRITE.repeat(6))).slice(0, 220);  // the 256-token window slides below
  for (const seed of [0, 9]) {
    const options = { temperature: seed === 0 ? 0 : 0.7, seed, maxNewTokens: 90, topAlternatives: 3 };
    const plain = await run(model, prompt, options);
    const speculated = await run(model, prompt, { ...options, speculative: SPECULATIVE });
    const described = ({ pieces }) => pieces.map(({ text, token, position, probability, alternatives }) => ({ text, token, position, probability, alternatives }));
    expect(described(speculated)).toEqual(described(plain));
    expect(plain.stats.generatedTokens).toBe(90);
    if (seed === 0) expect(speculated.stats.acceptedTokens).toBeGreaterThan(0);
    // a stop string inside what one verification gave: the text ends before it all the same
    const stop = plain.text.slice(40, 46);
    const stopped = await run(model, prompt, { ...options, stop, speculative: SPECULATIVE });
    const expected = await run(model, prompt, { ...options, stop });
    expect(stopped.text).toBe(expected.text);
    expect(stopped.stats.stopReason).toBe('stop');
  }
});

test('Stop ends a speculated run where it is asked, and Continue reuses the cache as without speculation', async () => {
  const ids = await model.encode(REWRITE);
  const results = {};
  for (const speculative of [undefined, SPECULATIVE]) {
    const controller = new AbortController();
    const generation = model.generate(ids, { temperature: 0, maxNewTokens: 200, stopAtEndOfText: false, signal: controller.signal, speculative });
    const stopped = [];
    for await (const piece of generation) {
      stopped.push(piece.token);
      if (stopped.length === 15) controller.abort();
    }
    const again = await run(model, [...ids, ...stopped], { temperature: 0, maxNewTokens: 10, speculative });
    results[speculative ? 'speculated' : 'plain'] = { stopped, reason: generation.stats.stopReason, again: again.tokens, reused: again.stats.reusedTokens };
  }
  expect(results.speculated).toEqual(results.plain);
  expect(results.plain.stopped).toHaveLength(15);
  expect(results.plain.reason).toBe('abort');
  expect(results.plain.reused).toBe(ids.length + 15 - 1);
});

test('the speculative option is checked, each error naming what is wrong', () => {
  const generate = (speculative) => () => model.generate('x', { speculative });
  expect(generate('lookup')).toThrow('generate: option speculative must be an object { draft, maxDraftTokens }, got "lookup"');
  expect(generate({ draft: 'ngram' })).toThrow('generate: option speculative.draft must be "prompt-lookup" or a model, got "ngram"');
  expect(generate({ maxDraftTokens: 17 })).toThrow('generate: option speculative.maxDraftTokens must be an integer in [1, 16], got 17');
  expect(generate({ maxDraftTokens: 0 })).toThrow('generate: option speculative.maxDraftTokens must be an integer in [1, 16], got 0');
  expect(generate({ draftTokens: 4 })).toThrow('generate: unknown option "speculative.draftTokens"');
});

test('a draft model of the same vocabulary gives the tokens of a run without it, greedy and seeded, and its drafts are kept', async () => {
  const draft = await loadModel(`${BUNDLED}tiny-shakespeare.Q4_0.gguf`, { threads: 1 });  // other weights, same vocabulary
  try {
    let accepted = 0;
    for (let seed = 0; seed <= 4; seed++) {
      const prompt = seed % 2 === 0 ? PLAIN : REWRITE;
      const options = { temperature: seed === 0 ? 0 : 0.8, seed, maxNewTokens: 40 };
      const plain = await run(model, prompt, options);
      const speculated = await run(model, prompt, { ...options, speculative: { draft, maxDraftTokens: 6 } });
      expect({ seed, tokens: speculated.tokens }).toEqual({ seed, tokens: plain.tokens });
      if (seed === 0) expect(speculated.stats.acceptedTokens).toBeGreaterThan(20);  // the two models mostly agree greedily
      accepted += speculated.stats.acceptedTokens;
    }
    expect(accepted).toBeGreaterThan(30);
    // across the target's window slide (256 positions) and the draft's, the same tokens
    const long = { temperature: 0, maxNewTokens: 300 };
    expect((await run(model, PLAIN, { ...long, speculative: { draft } })).tokens).toEqual((await run(model, PLAIN, long)).tokens);
  } finally {
    draft.dispose();
  }
});

test('a draft model must share the vocabulary and be loaded in this thread, each error naming what is wrong', async () => {
  const other = await loadModel(fileURLToPath(new URL('../fixtures/tiny-random-gguf/model-f32.gguf', import.meta.url)), { threads: 1 });
  expect(() => model.generate('x', { speculative: { draft: other } })).toThrow(
    "generate: the draft model's vocabulary has 384 tokens, this model's 50257: a draft model must share the vocabulary");
  other.dispose();
  expect(() => model.generate('x', { speculative: { draft: other } })).toThrow(
    'generate: option speculative.draft must be a model loaded in the same thread as this one (not disposed)');
  expect((await run(model, 'x', { temperature: 0, maxNewTokens: 3 })).tokens).toHaveLength(3);  // the model goes on
});

test('the draft length doubles after a draft kept whole, is one more than the kept drafts after a rejection, and backs off after drafts that come to nothing', () => {
  const policy = new DraftPolicy(8);
  expect(policy.draftLength(100)).toBe(4);
  expect(policy.draftLength(2)).toBe(2);  // no more than the run can still give
  policy.update(4, 4);
  expect(policy.draftLength(100)).toBe(8);
  policy.update(8, 8);
  expect(policy.draftLength(100)).toBe(8);  // at most maxDraftTokens
  policy.update(8, 3);
  expect(policy.draftLength(100)).toBe(4);
  policy.update(0, 0);  // nothing drafted: no evidence
  expect(policy.draftLength(100)).toBe(4);
  policy.update(2, 2);  // a shorter draft than asked for (the context ran out) kept whole
  expect(policy.draftLength(100)).toBe(8);
  // nothing kept: one token, and skip 1 step, then 2, then 4; a kept draft resets the back-off
  const lengths = (steps) => Array.from({ length: steps }, () => policy.draftLength(100));
  policy.update(8, 0);
  expect(lengths(2)).toEqual([0, 1]);
  policy.update(1, 0);
  expect(lengths(3)).toEqual([0, 0, 1]);
  policy.update(1, 0);
  expect(lengths(5)).toEqual([0, 0, 0, 0, 1]);
  policy.update(1, 1);
  expect(policy.draftLength(100)).toBe(2);
  policy.update(2, 0);
  expect(lengths(2)).toEqual([0, 1]);
});
