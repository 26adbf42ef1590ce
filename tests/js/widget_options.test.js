// web/widget/widget_options.js: the widget's options as data-* attributes (a dataset's camelCase names) and as
// GPT2Widget.mount's object, their defaults, and the generation options a widget passes to generate(). The
// widget's rendering and runs are tests/e2e/widget.spec.js's.
import { describe, expect, test } from '@jest/globals';
import { normalizeGenerateOptions } from '../../web/lib/generation/generate.js';
import { GENERATE_OPTIONS, completeDatasetOptions, completeOptions, optionsFromDataset } from '../../web/widget/widget_options.js';

const MODEL = 'https://example.com/models/tiny.gguf';
const DECODING_OPTIONS = ['minP', 'typicalP', 'noRepeatNgramSize', 'presencePenalty', 'frequencyPenalty', 'logitBias', 'badWords', 'minNewTokens'];

describe('data-* attributes', () => {
  test('data-min-p, data-typical-p, the penalties, data-no-repeat-ngram-size and data-min-new-tokens are numbers', () => {
    // element.dataset's names of data-min-p="0.05" and the others
    const dataset = { minP: '0.05', typicalP: '0.9', noRepeatNgramSize: '3', presencePenalty: '-0.5', frequencyPenalty: '1.2', minNewTokens: '8' };
    expect(optionsFromDataset(dataset)).toEqual({ minP: 0.05, typicalP: 0.9, noRepeatNgramSize: 3, presencePenalty: -0.5, frequencyPenalty: 1.2, minNewTokens: 8 });
  });

  test('data-logit-bias is TOKEN:BIAS pairs and data-bad-words comma-separated texts, as on the command line', () => {
    expect(optionsFromDataset({ logitBias: '50256:-inf, 13:2.5', badWords: ' thou, thee ,' }))
      .toEqual({ logitBias: { 50256: -Infinity, 13: 2.5 }, badWords: ['thou', 'thee'] });
  });

  test('data-num-beams, data-length-penalty and data-early-stopping ("true", "false" or "never") are beam search\'s', () => {
    expect(optionsFromDataset({ numBeams: '4', lengthPenalty: '0.5', earlyStopping: 'never' })).toEqual({ numBeams: 4, lengthPenalty: 0.5, earlyStopping: 'never' });
    expect(optionsFromDataset({ earlyStopping: 'true' }).earlyStopping).toBe(true);
    expect(optionsFromDataset({ earlyStopping: 'false' }).earlyStopping).toBe(false);
    expect(() => optionsFromDataset({ numBeams: '3', earlyStopping: 'sometimes' }))
      .toThrow(new RangeError('data-early-stopping: expected true, false or "never", got "sometimes"'));
  });

  test('an empty data-logit-bias or data-bad-words is none, an empty data-model the default model', () => {
    expect(optionsFromDataset({ logitBias: '', badWords: '', model: '' })).toEqual({ logitBias: {}, badWords: [] });
  });

  test.each([
    // numbers are decimal only and nothing around them, as on the command line
    [{ topK: '0x10' }, 'data-top-k: expected an integer in [0, 2147483647] (0 = off), got "0x10"'],
    [{ maxNewTokens: ' 5 ' }, 'data-max-new-tokens: expected a positive integer, got " 5 "'],
    [{ minP: '' }, 'data-min-p: expected a number in [0, 1] (0 = off), got ""'],
    [{ temperature: 'Infinity' }, 'data-temperature: expected a number in [0, 3.4028234663852886e+38] (0 = greedy), got "Infinity"'],
    [{ temperature: '1e39' }, 'data-temperature: expected a number in [0, 3.4028234663852886e+38] (0 = greedy), got "1e39"'],
    [{ topK: '4294967297' }, 'data-top-k: expected an integer in [0, 2147483647] (0 = off), got "4294967297"'],
    [{ numReturnSequences: '1e9' }, 'data-num-return-sequences: expected an integer in [1, 16], got "1e9"'],
    [{ numReturnSequences: '100000' }, 'data-num-return-sequences: expected an integer in [1, 16], got "100000"'],
    [{ numReturnSequences: 'Infinity' }, 'data-num-return-sequences: expected an integer in [1, 16], got "Infinity"'],
    [{ logitBias: '13:1e39' }, 'data-logit-bias: expected a number in [-3.4028234663852886e+38, 3.4028234663852886e+38] or -Infinity (a ban), got "13:1e39"'],
    // an empty stop string is refused, as the API and the command line refuse it
    [{ stop: '' }, 'data-stop: expected a non-empty text, got ""'],
    // booleans: "" (the attribute alone) or "true" is on, "false" off, anything else refused
    [{ autoGenerate: 'no' }, 'data-auto-generate: expected "true", "false" or "" (true), got "no"'],
    [{ lazy: '1' }, 'data-lazy: expected "true", "false" or "" (true), got "1"'],
    [{ speculative: 'yes' }, 'data-speculative: expected "lookup", got "yes"'],
    [{ theme: 'blue' }, 'data-theme: expected one of auto, light, dark, got "blue"'],
    [{ device: 'gpu' }, 'data-device: expected one of auto, webgpu, wasm, got "gpu"'],
  ])('%j is refused with the one-line RangeError "%s"', (dataset, message) => {
    expect(() => optionsFromDataset(dataset)).toThrow(new RangeError(message));
  });

  test('data-auto-generate and data-lazy are on as "" or "true" and off as "false"', () => {
    expect(optionsFromDataset({ autoGenerate: '', lazy: 'true' })).toEqual({ autoGenerate: true, lazy: true });
    expect(optionsFromDataset({ autoGenerate: 'false', lazy: 'false' })).toEqual({ autoGenerate: false, lazy: false });
  });

  test('attributes are checked together, and a complaint about one names its attribute and its text', () => {
    expect(() => completeDatasetOptions({ numBeams: '2', numReturnSequences: '3' }, MODEL))
      .toThrow(new RangeError('data-num-return-sequences: expected an integer in [1, numBeams = 2], got "3"'));
    expect(() => completeDatasetOptions({ temperature: '0', numReturnSequences: '3' }, MODEL))
      .toThrow(new RangeError('generate: numReturnSequences > 1 needs sampling (temperature > 0) or numBeams: greedy gives one sequence n times'));
    expect(completeDatasetOptions({ numReturnSequences: '3', prompt: 'ROMEO:' }, MODEL)).toMatchObject({ numReturnSequences: 3, prompt: 'ROMEO:', model: MODEL });
  });

  test('a malformed data-logit-bias throws a RangeError naming the attribute and the entry', () => {
    expect(() => optionsFromDataset({ logitBias: '13:2, 13=2' })).toThrow(new RangeError('data-logit-bias: "13=2" is not TOKEN:BIAS'));
  });
});

describe('mount options', () => {
  test('the new decoding options are mount options, passed to generate() as given', () => {
    const given = { minP: 0.1, typicalP: 0.95, noRepeatNgramSize: 2, presencePenalty: 0.5, frequencyPenalty: 0.25, logitBias: { 13: -Infinity }, badWords: ['thou', [464, 3290]], minNewTokens: 4 };
    const complete = completeOptions({ model: MODEL, ...given });
    expect(Object.fromEntries(DECODING_OPTIONS.map((name) => [name, complete[name]]))).toEqual(given);
    for (const name of DECODING_OPTIONS) expect(GENERATE_OPTIONS).toContain(name);
  });

  test('their defaults are generate()\'s own, which turn each of them off', () => {
    const complete = completeOptions({ model: MODEL });
    const defaults = normalizeGenerateOptions({});
    for (const name of DECODING_OPTIONS) expect([name, complete[name]]).toEqual([name, defaults[name]]);
  });

  test('every generation option is checked at mount, before anything of the widget is built', () => {
    for (const numReturnSequences of [1e9, 100000, Infinity]) {
      expect(() => completeOptions({ model: MODEL, numReturnSequences }))
        .toThrow(new RangeError(`generate: option numReturnSequences must be an integer in [1, 16], got ${numReturnSequences}`));
    }
    expect(() => completeOptions({ model: MODEL, topK: 2 ** 32 + 1 })).toThrow('generate: option topK must be an integer in [0, 2147483647] (0 = off), got 4294967297');
    expect(() => completeOptions({ model: MODEL, autoGenerate: 'no' })).toThrow(new TypeError('GPT2Widget.mount: autoGenerate must be a boolean, got "no"'));
  });

  test('every generation option a widget passes is one generate() takes', () => {
    const complete = completeOptions({ model: MODEL });
    const options = Object.fromEntries(GENERATE_OPTIONS.map((name) => [name, complete[name]]));
    expect(() => normalizeGenerateOptions(options)).not.toThrow();
  });
});
