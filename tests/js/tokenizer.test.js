// web/lib/tokenizer.js against gpt-tokenizer's r50k_base (an independent implementation with GPT-2's ids) and,
// where gpt-tokenizer cannot cope (a single piece of 100k+ characters overflows its stack or takes seconds),
// against referenceEncodeSinglePiece below, a direct transliteration of OpenAI's encoder.py bpe().
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, jest, test } from '@jest/globals';
import { encode as referenceEncode } from 'gpt-tokenizer/encoding/r50k_base';
import { createTokenizer, createTokenizerFromVocabulary } from '../../web/lib/tokenizer.js';
import { BYTE_CHARACTERS, GPT2_PIECES } from './encoder_reference.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const vocabDir = path.join(repoRoot, 'tests/fixtures/gpt2-vocab');
const vocabText = readFileSync(path.join(vocabDir, 'vocab.json'), 'utf8');
const mergesText = readFileSync(path.join(vocabDir, 'merges.txt'), 'utf8');
const shakespeare = readFileSync(path.join(repoRoot, 'tests/fixtures/tinyshakespeare/tinyshakespeare.txt'), 'utf8');

const tokenizer = createTokenizer(JSON.parse(vocabText), mergesText);

// The whole-book and long-input comparisons take seconds on a busy machine; time is not under test here.
jest.setTimeout(120000);

// gpt-tokenizer throws on "<|endoftext|>" unless told to treat it as text, which is what we do.
const referenceIds = (text) => referenceEncode(text, { disallowedSpecial: new Set() });

// Compares without handing 300k-element arrays to Jest's diff printer.
function expectSameIds(actual, expected) {
  const firstDifference = actual.findIndex((id, i) => id !== expected[i]);
  expect({ length: actual.length, firstDifference }).toEqual({ length: expected.length, firstDifference: -1 });
}


const referenceMergeRanks = new Map(mergesText.split('\n').slice(1).filter(Boolean).map((line, rank) => [line, rank]));
const referenceVocab = new Map(Object.entries(JSON.parse(vocabText)));

// OpenAI's bpe(): merge every occurrence of the lowest-ranked pair, repeat. For a text that the
// pre-tokenizer leaves as one piece, this is the whole of GPT-2's encoder.
function referenceEncodeSinglePiece(text) {
  let word = Array.from(new TextEncoder().encode(text), (byte) => BYTE_CHARACTERS[byte]);
  for (;;) {
    let best = null;
    for (let i = 0; i + 1 < word.length; i++) {
      const rank = referenceMergeRanks.get(`${word[i]} ${word[i + 1]}`);
      if (rank !== undefined && (best === null || rank < best.rank)) best = { rank, first: word[i], second: word[i + 1] };
    }
    if (best === null) break;
    const merged = [];
    for (let i = 0; i < word.length; i++) {
      if (word[i] === best.first && word[i + 1] === best.second) {
        merged.push(best.first + best.second);
        i++;
      } else {
        merged.push(word[i]);
      }
    }
    word = merged;
  }
  return word.map((token) => referenceVocab.get(token));
}

describe('encode matches GPT-2 ids', () => {
  test('on the whole of tinyshakespeare, and decode restores the text', () => {
    const ids = tokenizer.encode(shakespeare);
    expect(ids.length).toBeGreaterThan(300000);
    expectSameIds(ids, referenceIds(shakespeare));
    expect(tokenizer.decode(ids)).toBe(shakespeare);
  });

  const cases = {
    ascii: 'Hello, world! The quick brown fox jumps over the lazy dog.',
    tabsAndCrlf: 'line one\r\n\tline two\r\n\r\n\t\tindented\n',
    manySpaces: 'a          b                                  c',
    trailingSpaces: 'ends with spaces     ',
    onlyWhitespace: ' \t \n\n  \r\n   ',
    unicodeSpaces: 'no\u00a0break\u2003em\u3000ideographic\u2028line',
    emojiZwj: 'family 👨‍👩‍👧‍👦 and 🧑🏽‍💻 coding',
    emojiFlagsSkinTones: '🇯🇵🇺🇸🏳️‍🌈 👍🏻👍🏼👍🏽👍🏾👍🏿',
    cjk: '我能吞下玻璃而不伤身体。日本語のテキスト、한국어 텍스트',
    arabic: 'مرحبا بالعالم، هذا نص عربي.',
    combiningMarks: 'e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353 क्षि',
    numbers: '3.14159 1,000,000 ½ ² ٣ 12345678901234567890 -7e10',
    contractions: "it's I'm we're they've she'll he'd don't IT'S I'LL 'S 'LL 'Re O'Neil",
    code: 'function f(x) {\n  return x?.y ?? [1, 2, 3].map((n) => n ** 2);\n}\n# comment\nprint("hi")\n',
    endOfTextInText: 'before<|endoftext|>after <|endoftext|> and <|endoftext',
    prototypeKeys: 'constructor __proto__ toString hasOwnProperty valueOf __defineGetter__ prototype',
    nul: 'a\u0000b\u0000\u0000 c',
    controlCharacters: '\u0001\u0007\u001b[31m\u007f\u0085\u009f',
    loneSurrogates: 'x\ud800y \udc00 z\ud83d \ud83d\ud83d \ude00',
    byteOrderMark: '\ufeffstarts with a BOM',
    latin1AndMixed: 'café naïve Straße Ελληνικά русский текст עברית',
  };
  test.each(Object.entries(cases))('%s', (name, text) => {
    const ids = tokenizer.encode(text);
    expect(ids).toEqual(referenceIds(text));
  });

  test('typed "<|endoftext|>" is text, never the end-of-text id', () => {
    const ids = tokenizer.encode('a<|endoftext|>b');
    expect(ids).not.toContain(tokenizer.eosId);
    expect(tokenizer.decode(ids)).toBe('a<|endoftext|>b');
    expect(tokenizer.eosId).toBe(50256);
    expect(tokenizer.vocabSize).toBe(50257);
    expect(tokenizer.decode([tokenizer.eosId])).toBe('<|endoftext|>');
  });

  test('lone surrogates encode as U+FFFD, as TextEncoder and gpt-tokenizer do', () => {
    expect(tokenizer.encode('a\ud800b')).toEqual(tokenizer.encode('a\ufffdb'));
    expect(tokenizer.decode(tokenizer.encode('a\ud800b\udfff'))).toBe('a\ufffdb\ufffd');
  });

  test('the empty string has no tokens', () => {
    expect(tokenizer.encode('')).toEqual([]);
    expect(tokenizer.decode([])).toBe('');
  });

  test('more distinct pieces than the cache holds stay correct after eviction', () => {
    const letters = (n) => (n < 26 ? String.fromCharCode(97 + n) : letters(Math.floor(n / 26) - 1) + letters(n % 26));
    const text = Array.from({ length: 40000 }, (_, i) => letters(i)).join(' ');
    const expected = referenceIds(text);
    expectSameIds(tokenizer.encode(text), expected);
    expectSameIds(tokenizer.encode(text), expected);
  });
});

describe('long inputs', () => {
  let seed = 12345;
  const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const randomCodePoint = () => {
    const codePoint = Math.floor(random() * 0x110000);
    return codePoint >= 0xd800 && codePoint <= 0xdfff ? 0x20 : codePoint;
  };
  const mixedSamples = [' ', '  ', '\n', 'the', ' word', '😀', '👨‍👩‍👧', '漢字', 'é', '123', "'s", '\t', '!!', 'مرحبا'];

  test('100k characters of mixed text match gpt-tokenizer', () => {
    let text = '';
    while (text.length < 100000) text += mixedSamples[Math.floor(random() * mixedSamples.length)];
    expectSameIds(tokenizer.encode(text), referenceIds(text));
  });

  test('100k random code points match gpt-tokenizer', () => {
    const text = Array.from({ length: 100000 }, () => String.fromCodePoint(randomCodePoint())).join('');
    const ids = tokenizer.encode(text);
    expectSameIds(ids, referenceIds(text));
    expect(tokenizer.decode(ids)).toBe(text);
  });

  test('100k spaces match gpt-tokenizer', () => {
    const text = ' '.repeat(100000);
    expectSameIds(tokenizer.encode(text), referenceIds(text));
  });

  test.each([
    ['one 100k-letter word', 'abcdefghijklmnopqrstuvwxyz'.repeat(3847).slice(0, 100000)],
    ['100k of one letter', 'a'.repeat(100000)],
    ['100k of one emoji', '😀'.repeat(50000)],
    ['100k of punctuation', '-=+*'.repeat(25000)],
  ])('%s is one piece and matches encoder.py bpe()', (name, text) => {
    expect(text.match(GPT2_PIECES)).toHaveLength(1);
    expectSameIds(tokenizer.encode(text), referenceEncodeSinglePiece(text));
  });

  test('1M characters encode without throwing and round-trip', () => {
    const oneWord = 'ab'.repeat(500000);
    expect(tokenizer.decode(tokenizer.encode(oneWord))).toBe(oneWord);
    const emoji = '🙂'.repeat(500000);
    expect(tokenizer.decode(tokenizer.encode(emoji))).toBe(emoji);
    const spaces = ' '.repeat(1000000);
    expect(tokenizer.decode(tokenizer.encode(spaces))).toBe(spaces);
  });
});

describe('decode', () => {
  test('keeps a leading byte order mark', () => {
    expect(tokenizer.decode(tokenizer.encode('\ufeffhi'))).toBe('\ufeffhi');
  });

  test('turns invalid UTF-8 into U+FFFD like TextDecoder', () => {
    const [firstEmojiToken] = tokenizer.encode('😀');
    expect(tokenizer.decode([firstEmojiToken])).toBe('\ufffd');
    expect(tokenizer.decode([firstEmojiToken, ...tokenizer.encode('x')])).toBe('\ufffdx');
  });

  test.each([[50257], [-1], [1.5], [Number.NaN], ['12'], [null]])('throws on invalid id %p, naming it', (badId) => {
    expect(() => tokenizer.decode([1, badId])).toThrow(`invalid token id ${String(badId)}`);
  });

  test('accepts typed arrays', () => {
    expect(tokenizer.decode(Uint32Array.from(tokenizer.encode('typed arrays')))).toBe('typed arrays');
  });
});

describe('streaming decoder', () => {
  const multiByteText = 'Café ☕ — 日本語テキスト 👩‍👩‍👧‍👦 🇯🇵 👍🏽 Ελληνικά मराठी 🙂🙃\n€100 ﷺ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢';

  test('pushing ids one at a time never emits U+FFFD and concatenates to the text', () => {
    const decoder = tokenizer.createDecoder();
    const chunks = tokenizer.encode(multiByteText).map((id) => decoder.push(id));
    chunks.push(decoder.flush());
    expect(chunks.filter((chunk) => chunk.includes('\ufffd'))).toEqual([]);
    expect(chunks.join('')).toBe(multiByteText);
  });

  test('holds back a token that ends in the middle of a character', () => {
    const ids = tokenizer.encode('😀');
    expect(ids.length).toBeGreaterThan(1); // the emoji's 4 bytes span several tokens
    const decoder = tokenizer.createDecoder();
    for (const id of ids.slice(0, -1)) expect(decoder.push(id)).toBe('');
    expect(decoder.push(ids.at(-1))).toBe('😀');
    expect(decoder.flush()).toBe('');
  });

  test('flush emits the incomplete remainder as U+FFFD, and the decoder is reusable', () => {
    const decoder = tokenizer.createDecoder();
    expect(decoder.push(tokenizer.encode('😀')[0])).toBe('');
    expect(decoder.flush()).toBe('\ufffd');
    expect(decoder.push(tokenizer.encode('ok')[0])).toBe('ok');
  });

  test('throws on an invalid id, naming it', () => {
    expect(() => tokenizer.createDecoder().push(99999)).toThrow('invalid token id 99999');
  });
});

// The files' errors: tests/js/tokenizer_files.test.js.
describe('construction', () => {
  // A tiny vocab (256 byte tokens, end of text, and tokens built by chained merges) whose JSON has
  // keys that are Object.prototype names, including "__proto__".
  test('a vocab with "__proto__" and other prototype keys works', () => {
    const words = ['__proto__', 'proto', 'constructor', 'hasOwnProperty', 'toString'];
    const entries = BYTE_CHARACTERS.map((character, id) => [character, id]);
    const mergeLines = ['#version: 0.2'];
    const known = new Set(BYTE_CHARACTERS);
    const addMerge = (left, right) => {
      if (known.has(left + right)) return;
      known.add(left + right);
      mergeLines.push(`${left} ${right}`);
      entries.push([left + right, entries.length]);
    };
    // Each word merges left to right from its units; "__" is one unit, merged first.
    for (const word of words) {
      const units = word.match(/__|./g);
      if (units.includes('__')) addMerge('_', '_');
      units.reduce((prefix, unit) => (addMerge(prefix, unit), prefix + unit));
    }
    entries.push(['<|endoftext|>', entries.length]);
    const json = `{${entries.map(([token, id]) => `${JSON.stringify(token)}: ${id}`).join(', ')}}`;
    const vocab = JSON.parse(json);
    expect(Object.hasOwn(vocab, '__proto__')).toBe(true);

    const small = createTokenizer(vocab, mergeLines.join('\n'));
    for (const word of words) expect(small.decode([vocab[word]])).toBe(word);
    for (const word of ['proto', 'constructor', 'hasOwnProperty', 'toString']) {
      expect(small.encode(word)).toEqual([vocab[word]]);
    }
    // The pre-tokenizer splits punctuation from letters, so "__proto__" is three pieces.
    expect(small.encode('__proto__')).toEqual([vocab.__, vocab.proto, vocab.__]);
    expect(small.eosId).toBe(entries.length - 1);
    expect(small.vocabSize).toBe(entries.length);
  });
});

// A GGUF file holds the tokenizer as arrays (tokenizer.ggml.tokens in id order, tokenizer.ggml.merges as
// merges.txt's lines) and the end-of-text id: the same tokenizer, checked the same way.
describe('createTokenizerFromVocabulary (a GGUF file\'s tokenizer)', () => {
  const vocab = JSON.parse(vocabText);
  const tokens = Object.keys(vocab).sort((a, b) => vocab[a] - vocab[b]);
  const merges = mergesText.split('\n').filter((line) => line !== '' && !line.startsWith('#version'));
  const fromVocabulary = createTokenizerFromVocabulary({ tokens, merges, eosTokenId: 50256, bosTokenId: 50256 });

  test('gives the ids and text of the tokenizer from vocab.json and merges.txt', () => {
    const sample = shakespeare.slice(0, 20000);
    expectSameIds(fromVocabulary.encode(sample), tokenizer.encode(sample));
    expect(fromVocabulary.decode(tokenizer.encode(sample))).toBe(sample);
    expect(fromVocabulary.eosId).toBe(50256);
    expect(fromVocabulary.vocabSize).toBe(50257);
  });
});
