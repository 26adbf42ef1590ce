// web/widget/widget_options.js: the widget's options as data-* attributes (a dataset's camelCase names) and as
// GPT2Widget.mount's object, their defaults, and the generation options a widget passes to generate(). The
// widget's rendering and runs are tests/e2e/widget.spec.js's.
import { describe, expect, test } from '@jest/globals';
import { normalizeGenerateOptions } from '../../web/lib/generation/generate.js';
import { GENERATE_OPTIONS, completeOptions, optionsFromDataset } from '../../web/widget/widget_options.js';

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
    const options = completeOptions(optionsFromDataset({ numBeams: '3', earlyStopping: 'sometimes' }), MODEL);
    const generateOptions = Object.fromEntries(GENERATE_OPTIONS.map((name) => [name, options[name]]));
    expect(() => normalizeGenerateOptions(generateOptions)).toThrow('generate: option earlyStopping must be true, false or "never", got "sometimes"');
  });

  test('an empty attribute is no option: the default', () => {
    expect(optionsFromDataset({ logitBias: '', badWords: '', minP: '' })).toEqual({});
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

  test('every generation option a widget passes is one generate() takes', () => {
    const complete = completeOptions({ model: MODEL });
    const options = Object.fromEntries(GENERATE_OPTIONS.map((name) => [name, complete[name]]));
    expect(() => normalizeGenerateOptions(options)).not.toThrow();
  });
});
