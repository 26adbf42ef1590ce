// The tokenizer files' fuzzer (tests/fuzz/fuzz_tokenizer.mjs) for 3,000 seeded cases, and its invariant failing
// where it must. A failure names the seed that reproduces it: node tests/fuzz/fuzz_tokenizer.mjs --case SEED.
import { readFileSync } from 'node:fs';
import { describe, expect, test } from '@jest/globals';
import { createRandom, fuzzCase, refusalProblem, runFuzz, tokenizerProblem } from '../fuzz/fuzz_tokenizer.mjs';
import { createTokenizer } from '../../web/lib/tokenizer.js';

test('3,000 mutated tokenizer files are each refused with a one-line message or make a tokenizer that round-trips', () => {
  const { cases, outcomes, failure } = runFuzz({ firstSeed: 1, cases: 3000 });
  expect(failure).toBeNull();
  expect(cases).toBe(3000);
  // Both outcomes are common: many mutated files stay valid, and their tokenizers are checked.
  expect(outcomes.built).toBeGreaterThan(300);
  expect(outcomes.refused).toBeGreaterThan(1000);
});

test('a case is the same each time it runs from its seed', () => {
  expect(fuzzCase(1234)).toEqual(fuzzCase(1234));
});

describe('the invariant fails', () => {
  test('on a refusal that is not an Error, is a TypeError or RangeError from inside, or is not one clear line', () => {
    expect(refusalProblem('no vocab')).toBe('threw a non-Error: no vocab');
    expect(refusalProblem(new TypeError('x is undefined'))).toBe('threw TypeError from inside: x is undefined');
    expect(refusalProblem(new RangeError('Invalid array length'))).toBe('threw RangeError from inside: Invalid array length');
    expect(refusalProblem(new Error('createTokenizer: two\nlines'))).toBe('an unclear message: "createTokenizer: two\\nlines"');
    expect(refusalProblem(new Error('bad'))).toBe('an unclear message: "bad"');
    expect(refusalProblem(new Error('createTokenizer: vocab lacks <|endoftext|>'))).toBeNull();
  });

  // The bundled model's first ten merges and the tokens they use and make.
  const bundled = new URL('../../public/models/tiny-shakespeare/', import.meta.url);
  const vocab = JSON.parse(readFileSync(new URL('vocab.json', bundled), 'utf8'));
  const tokens = [...Object.keys(vocab).sort((a, b) => vocab[a] - vocab[b]).slice(0, 266), '<|endoftext|>'];
  const smallVocab = Object.fromEntries(tokens.map((token, id) => [token, id]));
  const merges = readFileSync(new URL('merges.txt', bundled), 'utf8').split('\n').slice(0, 11).join('\n');
  const tokenizer = createTokenizer(smallVocab, merges);
  const vocabulary = { idOf: (token) => smallVocab[token], mergeLines: () => merges.split('\n') };
  const check = (changes) => tokenizerProblem({ ...tokenizer, ...changes }, vocabulary, createRandom(7));

  test('on a tokenizer that loses text, gives ids outside its vocab or merges in another order than encoder.py', () => {
    expect(check({})).toBeNull();
    expect(check({ decode: (ids) => tokenizer.decode(ids).slice(1) })).toMatch(/^decode\(encode\(".*"\)\) is ".*"$/);
    expect(check({ encode: (text) => [...tokenizer.encode(text), 267] })).toMatch(/^encode\(".*"\) gave id 267, outside the vocab of 267$/);
    const unmerged = (text) => Array.from(new TextEncoder().encode(text), (byte) => tokenizer.encode(String.fromCharCode(byte))[0]);
    expect(check({ encode: (text) => (/^[\x20-\x7e\n]*$/.test(text) ? unmerged(text) : tokenizer.encode(text)) }))
      .toMatch(/^encode\(".*"\) differs from encoder.py's bpe\(\) at token \d+: /);
  });
});
