// web/lib/generation/option_table.js: generate()'s and score()'s options defined once (kind, range, default, text
// parser), the bounds that keep a number meaning what it says on its way into the engine, the limits only a loaded
// model knows, and the one reading of option texts that the command line and the widget share. loadModel's own
// options are checked here too.
import { describe, expect, test } from '@jest/globals';
import { parseCliArguments } from '../../web/cli/cli_args.js';
import { MAX_THREADS } from '../../web/lib/engine/threads.js';
import { Generation } from '../../web/lib/generation/generate.js';
import { checkModelOptions, normalizeGenerateOptions, normalizeScoreOptions, parseOptionText } from '../../web/lib/generation/option_checks.js';
import { GENERATE_OPTIONS, MAX_FLOAT, MAX_INT, SCORE_OPTIONS } from '../../web/lib/generation/option_table.js';
import { normalizeScoreOptions as scoreJsNormalizeScoreOptions } from '../../web/lib/generation/score.js';
import { loadModel } from '../../web/lib/gpt2.js';
import { optionsFromDataset } from '../../web/widget/widget_options.js';

const F = '3.4028234663852886e+38';  // MAX_FLOAT as a message writes it
const CONFIG = { n_ctx: 256, n_vocab: 50257 };

describe('the bounds of generate()\'s options', () => {
  test.each([
    [{ topK: 2 ** 32 + 1 }, 'generate: option topK must be an integer in [0, 2147483647] (0 = off), got 4294967297'],
    [{ temperature: 1e39 }, `generate: option temperature must be a number in [0, ${F}] (0 = greedy), got 1e+39`],
    [{ logitBias: { 13: 1e39 } }, `generate: option logitBias[13] must be a number in [-${F}, ${F}] or -Infinity (a ban), got 1e+39`],
    [{ presencePenalty: 1e39 }, `generate: option presencePenalty must be a number in [-${F}, ${F}] (0 = off), got 1e+39`],
    [{ frequencyPenalty: -3.5e38 }, `generate: option frequencyPenalty must be a number in [-${F}, ${F}] (0 = off), got -3.5e+38`],
    [{ repetitionPenalty: 1e39 }, `generate: option repetitionPenalty must be a number in (0, ${F}] (1 = off), got 1e+39`],
    [{ numBeams: 2, lengthPenalty: -1e39 }, `generate: option lengthPenalty must be a number in [-${F}, ${F}], got -1e+39`],
    [{ numReturnSequences: 1e9 }, 'generate: option numReturnSequences must be an integer in [1, 16], got 1000000000'],
    [{ topAlternatives: 2 ** 31 }, 'generate: option topAlternatives must be an integer in [0, 2147483647], got 2147483648'],
    [{ seed: 2 ** 53 }, 'generate: option seed must be an integer in [0, 2^53), got 9007199254740992'],
    [{ logitBias: { [2 ** 32 + 13]: 1 } }, 'generate: option logitBias has a key that is not a token id: "4294967309"'],
    [{ badWords: [[2 ** 32 + 13]] }, 'generate: option badWords[0] must be a non-empty text or a non-empty array of token ids, got [4294967309]'],
  ])('%j is refused: %s', (options, message) => {
    expect(() => normalizeGenerateOptions(options)).toThrow(new RangeError(message));
  });

  test('every integer option that crosses into the engine takes 2147483647 at most', () => {
    const engineIntegers = Object.entries(GENERATE_OPTIONS).filter(([, entry]) => entry.kind === 'integer' && entry.max === MAX_INT);
    expect(engineIntegers.map(([name]) => name)).toEqual(['topK', 'noRepeatNgramSize', 'minNewTokens', 'topAlternatives']);
    for (const [name] of engineIntegers) {
      expect(normalizeGenerateOptions({ [name]: MAX_INT })[name]).toBe(MAX_INT);
      expect(() => normalizeGenerateOptions({ [name]: MAX_INT + 1 })).toThrow(new RegExp(`^generate: option ${name} must be an integer in \\[\\d, 2147483647\\]`));
    }
  });

  test('every number option is finite within the float range, its edges included', () => {
    const numbers = Object.entries(GENERATE_OPTIONS).filter(([, entry]) => entry.kind === 'number');
    for (const [name, { min, max }] of numbers) {
      expect(max).toBeLessThanOrEqual(MAX_FLOAT);
      expect(min).toBeGreaterThanOrEqual(-MAX_FLOAT);
      expect(normalizeGenerateOptions({ [name]: max })[name]).toBe(max);
      for (const value of [max * 1.5 || 1.5, Infinity, NaN]) {
        expect(() => normalizeGenerateOptions({ [name]: value })).toThrow(new RegExp(`^generate: option ${name} must be a number in `));
      }
    }
    expect(normalizeGenerateOptions({ presencePenalty: -MAX_FLOAT, logitBias: { 13: MAX_FLOAT, 14: -Infinity } }))
      .toMatchObject({ presencePenalty: -MAX_FLOAT, logitBias: { 13: MAX_FLOAT, 14: -Infinity } });
  });

  test('the defaults are the table\'s, and the table is frozen', () => {
    const options = normalizeGenerateOptions({ seed: 1 });
    for (const [name, entry] of Object.entries(GENERATE_OPTIONS)) {
      if (name !== 'seed') expect([name, options[name]]).toEqual([name, entry.default]);
    }
    expect(Object.isFrozen(GENERATE_OPTIONS.topK)).toBe(true);
    expect(Object.isFrozen(GENERATE_OPTIONS.logitBias.default)).toBe(true);
  });
});

describe('score()\'s options', () => {
  test('are generate()\'s entries of the same names, and score.js checks them with the table', () => {
    expect(SCORE_OPTIONS).toEqual({ topAlternatives: GENERATE_OPTIONS.topAlternatives, kvCache: GENERATE_OPTIONS.kvCache, signal: GENERATE_OPTIONS.signal });
    expect(() => scoreJsNormalizeScoreOptions({ topAlternatives: 2 ** 32 + 5 }))
      .toThrow(new RangeError('score: option topAlternatives must be an integer in [0, 2147483647], got 4294967301'));
    expect(() => normalizeScoreOptions({ kvCache: 'fp16' })).toThrow(new RangeError('score: option kvCache must be "int8" or "fp32", got "fp16"'));
    expect(() => normalizeScoreOptions({ topK: 1 })).toThrow(new TypeError('score: unknown option "topK"'));
    expect(normalizeScoreOptions()).toEqual({ topAlternatives: 0, kvCache: 'int8' });
  });
});

describe('the limits a loaded model knows', () => {
  const check = (options, prompt = 'x') => () => checkModelOptions(normalizeGenerateOptions(options), prompt, CONFIG);

  test('topAlternatives is at most the vocabulary', () => {
    expect(check({ topAlternatives: 50257 })).not.toThrow();
    expect(check({ topAlternatives: 50258 })).toThrow(new RangeError("generate: option topAlternatives must be at most the model's vocabulary (50257 tokens), got 50258"));
  });

  test('with beams, maxNewTokens is at most the context; without, any length', () => {
    expect(check({ numBeams: 2, temperature: 0, maxNewTokens: 256 })).not.toThrow();
    expect(check({ numBeams: 2, temperature: 0, maxNewTokens: 1e9 }))
      .toThrow(new RangeError("generate: option maxNewTokens must be at most the model's context (256 tokens) with numBeams > 1, got 1000000000"));
    expect(check({ maxNewTokens: 1e9 })).not.toThrow();
  });

  test('with beams, the alternatives of a hypothesis\'s score are at most what one score returns', () => {
    // the score of a hypothesis reads the prompt's newest 255 tokens and at most maxNewTokens: 255 + 16 = 271 rows
    expect(check({ numBeams: 2, temperature: 0, maxNewTokens: 16, topAlternatives: 15477 })).not.toThrow();
    expect(check({ numBeams: 2, temperature: 0, maxNewTokens: 16, topAlternatives: 15478 })).toThrow(new RangeError(
      "generate: option topAlternatives 15478 with numBeams > 1 asks for up to 4194538 alternatives (271 scored tokens: the prompt's newest 255 and maxNewTokens), more than 4194304 (the most one score returns)"));
    expect(check({ maxNewTokens: 16, topAlternatives: 50257 })).not.toThrow();
  });

  test('a prompt of token ids holds exact integers within the vocabulary, never one that would wrap into another', () => {
    expect(check({}, [50256, 13])).not.toThrow();
    expect(check({}, [13, 2 ** 32 + 13])).toThrow(new RangeError("generate: prompt has token 4294967309 at index 1, outside the model's vocabulary [0, 50257)"));
    expect(check({}, new Float64Array([-1]))).toThrow(new RangeError("generate: prompt has token -1 at index 0, outside the model's vocabulary [0, 50257)"));
    expect(check({}, [50257])).toThrow(new RangeError("generate: prompt has token 50257 at index 0, outside the model's vocabulary [0, 50257)"));
  });

  test('a Generation checks them before it runs anything', () => {
    const target = { pool: null, tokenizer: null, config: CONFIG };
    expect(() => new Generation(target, [2 ** 32 + 13], normalizeGenerateOptions({})))
      .toThrow("generate: prompt has token 4294967309 at index 0, outside the model's vocabulary [0, 50257)");
    expect(() => new Generation(target, 'x', normalizeGenerateOptions({ numBeams: 4, maxNewTokens: 2 ** 28 })))
      .toThrow("generate: option maxNewTokens must be at most the model's context (256 tokens) with numBeams > 1, got 268435456");
  });
});

describe('one reading of option texts for the command line and the widget', () => {
  test('numbers are decimal only, with nothing around them', () => {
    expect(parseOptionText('topK', '40')).toBe(40);
    expect(parseOptionText('temperature', '-.5e1')).toBe(-5);
    for (const text of ['0x10', ' 5 ', '', 'Infinity', '1e', '5px']) expect(parseOptionText('topK', text)).toBeNaN();
  });

  // flag -> the dataset's name of its data-* attribute
  const SHARED = { 'top-k': 'topK', temperature: 'temperature', 'max-new-tokens': 'maxNewTokens', 'num-return-sequences': 'numReturnSequences',
    'presence-penalty': 'presencePenalty', seed: 'seed', 'logit-bias': 'logitBias', stop: 'stop', 'early-stopping': 'earlyStopping' };
  const TEXTS = ['0x10', ' 5 ', '', 'no', 'Infinity', '1e9', '100000', '4294967297', '1e39', '13:1e39', '5'];

  test.each(Object.entries(SHARED))('--%s and its data-* attribute take and refuse the same texts, in the same words', (flag, name) => {
    const attribute = `data-${flag}`;
    for (const text of TEXTS) {
      let cli;
      let widget;
      try {
        cli = { value: parseCliArguments([`--${flag}=${text}`, 'p']).options[name] };
      } catch (error) {
        cli = { error: error.message.replace(`--${flag}:`, 'LABEL:') };
      }
      try {
        widget = { value: optionsFromDataset({ [name]: text })[name] };
      } catch (error) {
        widget = { error: error.message.replace(`${attribute}:`, 'LABEL:') };
      }
      // the command line gathers its --stop texts in a list
      if (name === 'stop' && cli.value) cli.value = cli.value[0];
      expect([text, widget]).toEqual([text, cli]);
    }
  });
});

describe('loadModel\'s options', () => {
  test('an unknown option is a one-line TypeError that names it and the known ones', async () => {
    await expect(loadModel('models/x/', { thread: 4 }))
      .rejects.toThrow(new TypeError('loadModel: unknown option "thread" (known: onProgress, signal, useWorker, worker, weights, threads, device)'));
  });

  test('options that are not an object are a one-line TypeError', async () => {
    await expect(loadModel('models/x/', null)).rejects.toThrow(new TypeError('loadModel: options must be an object, got null'));
    await expect(loadModel('models/x/', 4)).rejects.toThrow(new TypeError('loadModel: options must be an object, got number'));
  });

  test('threads are at most the engine\'s 16', async () => {
    expect(MAX_THREADS).toBe(16);
    await expect(loadModel('models/x/', { threads: 256 })).rejects.toThrow(new TypeError('threads must be "auto" or an integer from 1 to 16, got 256'));
  });
});
