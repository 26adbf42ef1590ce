// web/lib/generation/option_text.js: the text syntax of logitBias and badWords that the command line, the widget's
// data-* attributes and the page's fields share.
import { describe, expect, test } from '@jest/globals';
import { parseBadWords, parseLogitBias } from '../../web/lib/generation/option_text.js';

describe('parseLogitBias', () => {
  test('reads comma-separated TOKEN:BIAS entries, -inf as -Infinity', () => {
    expect(parseLogitBias('50256:-inf, 13:2.5')).toEqual({ 50256: -Infinity, 13: 2.5 });
  });

  test('takes -inf and -Infinity in any case, signed and exponent biases, and spaces around each part', () => {
    expect(parseLogitBias(' 1 : -Infinity ,2:-INF,3 :+1.5, 4: -.5 ,5:1e-2, 6:0 ')).toEqual({ 1: -Infinity, 2: -Infinity, 3: 1.5, 4: -0.5, 5: 0.01, 6: 0 });
  });

  test('is {} for an empty or blank text, and skips empty entries (a trailing comma)', () => {
    expect(parseLogitBias('')).toEqual({});
    expect(parseLogitBias('   ')).toEqual({});
    expect(parseLogitBias('13:2,, ,')).toEqual({ 13: 2 });
  });

  test('gives a plain object, as generate() takes', () => {
    expect(Object.getPrototypeOf(parseLogitBias('13:2'))).toBe(Object.prototype);
  });

  test.each([
    ['13=2', 'logitBias: "13=2" is not TOKEN:BIAS'],
    ['13', 'logitBias: "13" is not TOKEN:BIAS'],
    ['13:', 'logitBias: "13:" is not TOKEN:BIAS'],
    [':2', 'logitBias: ":2" is not TOKEN:BIAS'],
    ['-1:2', 'logitBias: "-1:2" is not TOKEN:BIAS'],
    ['1.5:2', 'logitBias: "1.5:2" is not TOKEN:BIAS'],
    ['hello:2', 'logitBias: "hello:2" is not TOKEN:BIAS'],
    ['13:inf', 'logitBias: "13:inf" is not TOKEN:BIAS'],
    ['13:+inf', 'logitBias: "13:+inf" is not TOKEN:BIAS'],
    ['13:0x10', 'logitBias: "13:0x10" is not TOKEN:BIAS'],
    ['13:1 2', 'logitBias: "13:1 2" is not TOKEN:BIAS'],
    ['13:2, 7:x', 'logitBias: "7:x" is not TOKEN:BIAS'],
    ['13:2, 13:-inf', 'logitBias: token 13 is given twice'],
  ])('%j throws the RangeError "%s"', (text, message) => {
    expect(() => parseLogitBias(text)).toThrow(new RangeError(message));
  });

  test('a malformed entry\'s error begins with the name its reader gives the option', () => {
    expect(() => parseLogitBias('13=2', '--logit-bias')).toThrow(new RangeError('--logit-bias: "13=2" is not TOKEN:BIAS'));
  });
});

describe('parseBadWords', () => {
  test('reads comma-separated texts, trimmed', () => {
    expect(parseBadWords('thou, thee ,  art')).toEqual(['thou', 'thee', 'art']);
  });

  test('drops empty texts: "" and a blank text are []', () => {
    expect(parseBadWords('')).toEqual([]);
    expect(parseBadWords('  ')).toEqual([]);
    expect(parseBadWords(',thou,, ,')).toEqual(['thou']);
  });

  test('keeps the spaces inside a text, and any character but the comma', () => {
    expect(parseBadWords('good morrow, <|endoftext|>, ¿qué?')).toEqual(['good morrow', '<|endoftext|>', '¿qué?']);
  });
});
