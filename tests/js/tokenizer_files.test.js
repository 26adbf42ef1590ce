// What the tokenizer files may not be: vocab.json and merges.txt (createTokenizer) and a GGUF file's token lists
// (createTokenizerFromVocabulary) of the wrong types, with duplicate tokens or ids, ids out of range, missing
// byte tokens or malformed merges, each refused with one line naming what is wrong; and the text files' size
// bounds (web/lib/loading/file_sinks.js), checked through loadModelIntoEngine before the bytes are held.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { loadEngine } from '../../web/lib/engine/engine.js';
import { loadModelIntoEngine } from '../../web/lib/loading/loader.js';
import { modelSource } from '../../web/lib/loading/model_source.js';
import { createTokenizer, createTokenizerFromVocabulary } from '../../web/lib/tokenizer.js';
import { send, startFileServer } from './file_server.js';

const GPT2 = fileURLToPath(new URL('../fixtures/gpt2-vocab/', import.meta.url));
const gpt2Vocab = JSON.parse(readFileSync(`${GPT2}vocab.json`, 'utf8'));
const gpt2TokensById = Object.keys(gpt2Vocab).sort((a, b) => gpt2Vocab[a] - gpt2Vocab[b]);
const gpt2Merges = readFileSync(`${GPT2}merges.txt`, 'utf8').split('\n').slice(1, -1);

// A small valid tokenizer cut from GPT-2's: the 256 byte tokens (ids 0-255), the first ten merges (whose results
// GPT-2 numbers 256-265) and <|endoftext|> (266). tokens: its tokens in id order.
const SMALL_MERGES = gpt2Merges.slice(0, 10);
const SMALL_TOKENS = [...gpt2TokensById.slice(0, 256 + SMALL_MERGES.length), '<|endoftext|>'];
const SMALL_MERGES_TEXT = `#version: 0.2\n${SMALL_MERGES.join('\n')}\n`;
const vocabOf = (tokens) => Object.fromEntries(tokens.map((token, id) => [token, id]));
const smallVocab = () => vocabOf(SMALL_TOKENS);

const MiB = 2 ** 20;

// A 64 MiB download over localhost takes seconds on a busy machine; time is not under test here.
jest.setTimeout(60_000);

describe('vocab.json', () => {
  test.each([
    [[], 'an array'],
    ['{"a": 0}', 'a string'],
    [42, 'a number'],
    [null, 'null'],
  ])('that is not an object of ids (%p) is refused, naming what it is', (vocab, what) => {
    expect(() => createTokenizer(vocab, SMALL_MERGES_TEXT))
      .toThrow(`createTokenizer: vocab must be the parsed vocab.json object (token string -> id), not ${what}`);
  });

  test.each([
    ['0', '"0"'],
    [1.5, '1.5'],
    [null, 'null'],
    [true, 'true'],
    [[0], 'an array'],
    [{ id: 0 }, 'an object'],
  ])('an id that is not an integer (%p) is refused, naming the token and the value', (id, shown) => {
    expect(() => createTokenizer({ ...smallVocab(), '!': id }, SMALL_MERGES_TEXT))
      .toThrow(`createTokenizer: vocab id of token "!" is not an integer: ${shown}`);
  });

  test.each([[-1], [267], [2 ** 31], [1e308]])('an id past the vocab\'s (%p) is refused, naming the token and the range', (id) => {
    expect(() => createTokenizer({ ...smallVocab(), '!': id }, SMALL_MERGES_TEXT))
      .toThrow(`createTokenizer: vocab id of token "!" is ${id}, but the vocab's 267 tokens must have the ids 0 to 266, one each (a token listed twice?)`);
  });

  test('a token listed twice (JSON.parse keeps the last) leaves an id out of range, which is refused', () => {
    const entries = SMALL_TOKENS.map((token, id) => `${JSON.stringify(token)}: ${id}`);
    const vocab = JSON.parse(`{${entries.join(', ')}, "!": 267}`);
    expect(() => createTokenizer(vocab, SMALL_MERGES_TEXT))
      .toThrow('createTokenizer: vocab id of token "!" is 267, but the vocab\'s 267 tokens must have the ids 0 to 266, one each (a token listed twice?)');
  });

  test('two tokens with one id are refused, naming both', () => {
    expect(() => createTokenizer({ ...smallVocab(), '"': 0 }, SMALL_MERGES_TEXT))
      .toThrow('createTokenizer: vocab id 0 belongs to more than one token ("!" and "\\"")');
  });

  test('a token outside GPT-2\'s byte alphabet is refused, naming the character', () => {
    expect(() => createTokenizer(vocabOf([...SMALL_TOKENS, 'a b']), SMALL_MERGES_TEXT))
      .toThrow('createTokenizer: vocab token "a b" has a character outside GPT-2\'s byte alphabet: U+0020');
    expect(() => createTokenizer(vocabOf([...SMALL_TOKENS, 'ok😀']), SMALL_MERGES_TEXT))
      .toThrow('createTokenizer: vocab token "ok😀" has a character outside GPT-2\'s byte alphabet: U+1F600');
  });

  test('a missing byte token is refused, naming the byte and its character', () => {
    const withoutSpace = SMALL_TOKENS.filter((token) => token !== 'Ġ' && !token.startsWith('Ġ'));
    const merges = SMALL_MERGES.filter((line) => !line.startsWith('Ġ')).join('\n');
    expect(() => createTokenizer(vocabOf(withoutSpace), merges)).toThrow('createTokenizer: vocab lacks the token for byte 32 ("Ġ")');
  });

  test('a vocab without <|endoftext|> is refused', () => {
    expect(() => createTokenizer(vocabOf(SMALL_TOKENS.slice(0, -1)), SMALL_MERGES_TEXT)).toThrow('createTokenizer: vocab lacks <|endoftext|>');
  });

  test('a long token is quoted cut short, so the message stays one short line', () => {
    const long = 'a'.repeat(100000);
    expect(() => createTokenizer({ ...smallVocab(), [long]: -1 }, SMALL_MERGES_TEXT))
      .toThrow(`createTokenizer: vocab id of token "${'a'.repeat(64)}…" is -1, but the vocab's 268 tokens must have the ids 0 to 267, one each (a token listed twice?)`);
  });
});

describe('merges.txt', () => {
  test.each([
    [SMALL_MERGES, 'an array'],
    [42, 'a number'],
    [undefined, 'undefined'],
  ])('that is not text (%p) is refused, naming what it is', (merges, what) => {
    expect(() => createTokenizer(smallVocab(), merges)).toThrow(`createTokenizer: merges must be the text of merges.txt, not ${what}`);
  });

  test.each(['ab', 'Ġ  t', ' Ġ t', 'Ġ t ', 'Ġ t h', 'Ġ\tt'])('a line that is not two tokens separated by one space (%p) is refused, naming it', (line) => {
    expect(() => createTokenizer(smallVocab(), `#version: 0.2\nĠ a\n${line}\n`))
      .toThrow(`createTokenizer: merges line 3 ${JSON.stringify(line)} is not two tokens separated by one space`);
  });

  test('a merge of a token the vocab lacks, or making one, is refused, naming the token', () => {
    expect(() => createTokenizer(smallVocab(), 'Ġ t\nĠ zz\n')).toThrow('createTokenizer: merges line 2 "Ġ zz" uses "zz", which is not in the vocab');
    expect(() => createTokenizer(smallVocab(), 'zz t\n')).toThrow('createTokenizer: merges line 1 "zz t" uses "zz", which is not in the vocab');
    expect(() => createTokenizer(smallVocab(), 'Ġ !\n')).toThrow('createTokenizer: merges line 1 "Ġ !" makes "Ġ!", which is not in the vocab');
  });

  test('a merge listed twice is refused', () => {
    expect(() => createTokenizer(smallVocab(), 'Ġ t\nh e\nĠ t')).toThrow('createTokenizer: merges line 3 "Ġ t" repeats an earlier merge');
  });

  test('without its #version line, with CRLF line ends or empty lines it gives the same ids', () => {
    const text = 'the other then';
    const expected = createTokenizer(smallVocab(), SMALL_MERGES_TEXT).encode(text);
    expect(expected.map((id) => SMALL_TOKENS[id])).toEqual(['t', 'he', 'Ġ', 'o', 't', 'he', 'r', 'Ġthe', 'n']);
    for (const merges of [SMALL_MERGES.join('\n'), `#version: 0.2\r\n${SMALL_MERGES.join('\r\n')}\r\n`, `\n\n${SMALL_MERGES.join('\n\n')}`]) {
      expect(createTokenizer(smallVocab(), merges).encode(text)).toEqual(expected);
    }
  });

  test('a #version line after the first is a merge of tokens the vocab lacks', () => {
    expect(() => createTokenizer(smallVocab(), 'Ġ t\n#version: 0.2\n'))
      .toThrow('createTokenizer: merges line 2 "#version: 0.2" uses "#version:", which is not in the vocab');
  });

  test('more than 2^20 lines are refused before the text is split', () => {
    expect(() => createTokenizer(smallVocab(), '\n'.repeat(2 ** 20))).toThrow('createTokenizer: merges has more than 1048576 lines');
  });

  test('a long line is quoted cut short', () => {
    expect(() => createTokenizer(smallVocab(), `${'Ġ'.repeat(1000)} t`))
      .toThrow(`createTokenizer: merges line 1 "${'Ġ'.repeat(64)}…" uses "${'Ġ'.repeat(64)}…", which is not in the vocab`);
  });
});

// A GGUF file holds the tokenizer as arrays (tokenizer.ggml.tokens in id order, tokenizer.ggml.merges as
// merges.txt's lines) and the end-of-text id: checked the same way, with the same messages.
describe('a GGUF file\'s token lists', () => {
  const vocabulary = (changes) => ({ tokens: SMALL_TOKENS, merges: SMALL_MERGES, eosTokenId: 266, ...changes });

  test('make the tokenizer that vocab.json and merges.txt make', () => {
    const text = 'the other then';
    expect(createTokenizerFromVocabulary(vocabulary()).encode(text)).toEqual(createTokenizer(smallVocab(), SMALL_MERGES_TEXT).encode(text));
  });

  test('that are not arrays of strings are refused, naming the element', () => {
    expect(() => createTokenizerFromVocabulary(vocabulary({ tokens: smallVocab() })))
      .toThrow('createTokenizer: tokens must be an array of token strings (in id order), not an object');
    expect(() => createTokenizerFromVocabulary(vocabulary({ tokens: [...SMALL_TOKENS.slice(0, 10), 7] })))
      .toThrow('createTokenizer: tokens must be an array of token strings (in id order); tokens[10] is a number');
    const sparse = [...SMALL_TOKENS];
    delete sparse[3];
    expect(() => createTokenizerFromVocabulary(vocabulary({ tokens: sparse })))
      .toThrow('createTokenizer: tokens must be an array of token strings (in id order); tokens[3] is undefined');
    expect(() => createTokenizerFromVocabulary(vocabulary({ merges: SMALL_MERGES_TEXT })))
      .toThrow('createTokenizer: merges must be an array of "left right" strings, not a string');
    expect(() => createTokenizerFromVocabulary(vocabulary({ merges: ['Ġ t', null] })))
      .toThrow('createTokenizer: merges must be an array of "left right" strings; merges[1] is null');
    expect(() => createTokenizerFromVocabulary(null)).toThrow('createTokenizer: tokens must be an array of token strings (in id order), not undefined');
  });

  test('a token listed twice, a missing byte token and a merge outside the vocabulary are refused', () => {
    const twice = [...SMALL_TOKENS.slice(0, 260), 'Ġt', ...SMALL_TOKENS.slice(261)];
    expect(() => createTokenizerFromVocabulary(vocabulary({ tokens: twice })))
      .toThrow('createTokenizer: vocab token "Ġt" has more than one id (256 and 260)');
    expect(() => createTokenizerFromVocabulary(vocabulary({ tokens: ['xyz', ...SMALL_TOKENS.slice(1)] })))
      .toThrow('createTokenizer: vocab lacks the token for byte 33 ("!")');
    expect(() => createTokenizerFromVocabulary(vocabulary({ merges: ['Ġ t', 'not-a-token x'] })))
      .toThrow('createTokenizer: merges line 2 "not-a-token x" uses "not-a-token", which is not in the vocab');
  });

  test.each([[267], [-1], [1.5], ['266'], [undefined]])('an end-of-text id out of the vocab (%p) is refused', (eosTokenId) => {
    expect(() => createTokenizerFromVocabulary(vocabulary({ eosTokenId })))
      .toThrow(`createTokenizer: end-of-text token id ${eosTokenId === '266' ? '"266"' : eosTokenId} is not in the vocab of 267 tokens`);
  });
});

// The text files are held whole in memory: each has a bound on its size, checked against the size announced
// (a File's, a Content-Length) before anything is read, and against the bytes as they arrive.
describe('the size bounds of the text files, through loadModelIntoEngine', () => {
  const TINY = fileURLToPath(new URL('../fixtures/tiny-random/', import.meta.url));
  const TINY_VOCAB = fileURLToPath(new URL('../fixtures/tiny-random-gguf/', import.meta.url));  // tiny-random's 384 ids
  const files = {
    'config.json': readFileSync(`${TINY}config.json`),
    'model.safetensors': readFileSync(`${TINY}model.safetensors`),
    'vocab.json': readFileSync(`${TINY_VOCAB}vocab.json`),
    'merges.txt': readFileSync(`${TINY_VOCAB}merges.txt`),
  };
  const folder = { config: files['config.json'], weights: files['model.safetensors'], vocab: files['vocab.json'], merges: files['merges.txt'] };
  let engine;

  // A File that says it is `size` bytes without holding them, and counts the reads of its stream (which end it).
  class HugeFile extends File {
    #size;
    reads = 0;

    constructor(name, size) {
      super([], name);
      this.#size = size;
    }

    get size() {
      return this.#size;
    }

    stream() {
      return new ReadableStream({
        pull: (controller) => {
          this.reads++;
          controller.close();
        },
      }, { highWaterMark: 0 });
    }
  }

  beforeAll(async () => {
    engine = await loadEngine();
  });

  async function loadError(source, options) {
    const error = await loadModelIntoEngine(engine, modelSource(source), options).then(() => null, (e) => e);
    expect(error).not.toBeNull();
    return error;
  }

  test('a vocab.json or merges.txt announced larger than 64 MiB is refused before it is read', async () => {
    const vocab = new HugeFile('vocab.json', 64 * MiB + 1);
    const vocabError = await loadError({ ...folder, vocab });
    expect(vocabError).toMatchObject({ name: 'ModelLoadError', file: 'vocab.json', kind: 'invalid' });
    expect(vocabError.message).toBe(`vocab.json: is ${64 * MiB + 1} bytes; a tokenizer file is at most 64 MiB (not a vocab.json?)`);
    const merges = new HugeFile('merges.txt', 2 ** 40);
    const mergesError = await loadError({ ...folder, merges });
    expect(mergesError.message).toBe(`merges.txt: is ${2 ** 40} bytes; a tokenizer file is at most 64 MiB (not a merges.txt?)`);
    expect([vocab.reads, merges.reads]).toEqual([0, 0]);
  });

  test('a config.json larger than 1 MiB is refused; a text file given under another name has the largest bound', async () => {
    const config = (await loadError({ ...folder, config: new Uint8Array(MiB + 1).fill(0x20) }, { withTokenizer: false })).message;
    expect(config).toBe(`config.json: is ${MiB + 1} bytes; a config.json is at most 1 MiB (not a config.json?)`);
    const renamed = (await loadError({ ...folder, merges: new HugeFile('merges (1).txt', 64 * MiB + 1) })).message;
    expect(renamed).toBe(`merges (1).txt: is ${64 * MiB + 1} bytes; a text file of a model is at most 64 MiB (the wrong file?)`);
  });

  test('a vocab.json served without its size is refused once its bytes pass 64 MiB', async () => {
    const chunk = Buffer.alloc(MiB, 0x20);
    let sent = 0;
    // vocab.json as an endless stream of spaces, with no Content-Length; the other files intact.
    const endless = (res, body, name) => {
      if (name !== 'vocab.json') return send(res, body, { 'Content-Length': body.length });
      res.writeHead(200, {});
      const more = () => {
        while (!res.destroyed && sent < 100 * MiB) {
          sent += chunk.length;
          if (!res.write(chunk)) return res.once('drain', more);
        }
        return res.end();
      };
      return more();
    };
    const server = await startFileServer(files, { endless });
    try {
      const error = await loadError(`${server.baseUrl}/endless/`);
      expect(error).toMatchObject({ file: 'vocab.json', kind: 'invalid' });
      expect(error.message).toBe('vocab.json: is over 64 MiB; a tokenizer file is at most 64 MiB (not a vocab.json?)');
    } finally {
      await server.close();
    }
    expect(sent).toBeLessThan(100 * MiB);  // the download was cancelled, not read to its end
  });

  describe('from a Node folder, read in 4 MiB chunks into one reused buffer', () => {
    let dir;
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'tokenizer-files-'));
      writeFileSync(join(dir, 'config.json'), files['config.json']);
      writeFileSync(join(dir, 'model.safetensors'), files['model.safetensors']);
      writeFileSync(join(dir, 'merges.txt'), files['merges.txt']);
      // JSON allows whitespace: the same vocab in 5 MiB, two chunks.
      writeFileSync(join(dir, 'vocab.json'), Buffer.concat([files['vocab.json'], Buffer.alloc(5 * MiB, 0x20)]));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    test('a vocab.json of several chunks keeps each chunk\'s bytes', async () => {
      const { model, tokenizer } = await loadModelIntoEngine(engine, modelSource(dir));
      model.dispose();
      expect(tokenizer.vocabSize).toBe(384);
      expect(tokenizer.decode(tokenizer.encode('ROMEO: the end'))).toBe('ROMEO: the end');
    });
  });
});
