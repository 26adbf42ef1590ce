// The decoding options' fuzzer (tests/fuzz/fuzz_options.mjs) for 300 seeded cases against the bundled model, and
// its invariant failing where it must. A failure names the seed that reproduces it:
// node tests/fuzz/fuzz_options.mjs --case SEED.
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { EngineAbortedError, EngineError } from '../../web/lib/errors.js';
import { makeCase, openTarget, refusalProblem, runFuzz } from '../fuzz/fuzz_options.mjs';

jest.setTimeout(300_000);

describe('300 random option objects through generate() and score()', () => {
  let target;
  beforeAll(async () => {
    target = await openTarget();
  });
  afterAll(() => target?.model.dispose());

  test('each completes or is refused in one line, the engine never aborts, the heap and the greedy text stay', async () => {
    const { cases, outcomes, failure } = await runFuzz(target, { firstSeed: 1, cases: 300 });
    expect(failure).toBeNull();
    expect(cases).toBe(300);
    // Both outcomes are common: most cases run, many are refused.
    expect(outcomes.completed).toBeGreaterThan(100);
    expect(outcomes.refused).toBeGreaterThan(50);
  });
});

test('a case is the same each time it is made from its seed', () => {
  const text = (seed) => JSON.stringify(makeCase(seed), (key, value) => (Number.isNaN(value) ? 'NaN' : value));
  expect(text(1234)).toBe(text(1234));
  expect(text(1234)).not.toBe(text(1235));
});

test('the invariant fails on a refusal that is not an Error, came from inside, aborted the engine or is unclear', () => {
  expect(refusalProblem('no')).toBe('threw a non-Error: no');
  expect(refusalProblem(new RangeError('Invalid array length'))).toBe('threw RangeError from inside: Invalid array length');
  expect(refusalProblem(new TypeError("Cannot read properties of null (reading 'x')"))).toBe("threw TypeError from inside: Cannot read properties of null (reading 'x')");
  expect(refusalProblem(new EngineAbortedError('memory access out of bounds'))).toBe('the engine aborted: the WebAssembly engine crashed (memory access out of bounds); reload the model');
  expect(refusalProblem(new EngineError({ kind: 'memory', message: 'out of memory: need 8 bytes' }))).toBe('threw EngineError from inside: out of memory: need 8 bytes');
  expect(refusalProblem(new RangeError('generate: option topK must be\nan integer'))).toBe('an unclear message: "generate: option topK must be\\nan integer"');
  expect(refusalProblem(new RangeError('generate: option topK must be an integer in [0, 2147483647], got 4294967297'))).toBeNull();
  expect(refusalProblem(new EngineError({ kind: 'input', message: 'beam search: max_new_tokens 300, expected 1..256 (the model\'s context)' }))).toBeNull();
});
